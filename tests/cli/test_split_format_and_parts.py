"""``polybag split`` keeps the input's format and bounds the number of parts (issue 27).

A rosbag2 bag's parts are rosbag2 bags (directories ``STEM_000``, ... of the input's
storage, never ``.mcap`` files or ``.rosbag2`` names); every other input keeps its format
too.  A split that would write more than 1,000 parts is refused before anything is written
unless ``--max-parts`` allows more.  Parts are read back with the reference readers
(rosbags, rosbag-standalone, mcap, pyulog).  Durations carry a unit (``1s``, ``500ms``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import polybag
from polybag import ops
from polybag.cli import main
from polybag.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]
CORPORA = ROOT.parent / "shared" / "corpora"
TALKER = CORPORA / "mcap-samples" / "rosbag2" / "talker"  # 20 messages over 4.5 s, mcap storage
WBAG = CORPORA / "mcap-samples" / "rosbag2" / "wbag"  # 6,074 messages in 5 storage files

pytestmark = pytest.mark.skipif(not CORPORA.is_dir(), reason="../shared/corpora is not here")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any], str]:
    capsys.readouterr()
    rc = main(["split", *argv, "--json"])
    cap = capsys.readouterr()
    return rc, json.loads(cap.out) if cap.out.strip() else {}, cap.err


def rosbags_rows(path: Path) -> list[tuple[str, int, bytes]]:
    from rosbags.rosbag2 import Reader

    with Reader(path) as r:
        return [(c.topic, t, bytes(raw)) for c, t, raw in r.messages()]


def rosbags_storage(path: Path) -> str:
    """The storage a part's metadata.yaml names (and rosbags opens it)."""
    import yaml
    from rosbags.rosbag2 import Reader

    with Reader(path) as r:
        assert r.connections
    info = yaml.safe_load((path / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    return str(info["storage_identifier"])


def input_rows(path: Path) -> list[tuple[str, int, bytes]]:
    with polybag.open(path) as r:
        return [(m.channel.topic, m.log_time, bytes(m.data)) for m in r.messages(order="log_time")]


@pytest.fixture
def talker(tmp_path: Path) -> Path:
    bag = tmp_path / "in" / "talker"
    shutil.copytree(TALKER, bag)
    return bag


@pytest.fixture
def sqlite_bag(tmp_path: Path) -> Path:
    """rosbag2's talker written again by rosbags in sqlite3 storage (payloads as they are)."""
    from rosbags.rosbag2 import Writer
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_HUMBLE)
    bag = tmp_path / "in" / "run"
    with polybag.open(TALKER) as r, Writer(bag, version=8) as w:
        conns = {c.id: w.add_connection(c.topic, c.type_name, typestore=store) for c in r.summary.channels.values()}
        for m in r.messages(order="log_time"):
            w.write(conns[m.channel.id], m.log_time, bytes(m.data))
    assert len(rosbags_rows(bag)) == 20
    return bag


# --- the input's format by default ----------------------------------------------------------
@pytest.mark.parametrize("spelling", ["dir", "dir/", "metadata.yaml"])
def test_rosbag2_parts_are_bag_directories_of_its_storage(
    talker: Path, capsys: pytest.CaptureFixture[str], spelling: str
) -> None:
    arg = {"dir": str(talker), "dir/": f"{talker}/", "metadata.yaml": str(talker / "metadata.yaml")}[spelling]
    rc, res, err = run(capsys, arg, "--duration", "1s")
    assert rc == 0, err
    names = [Path(p["path"]).name for p in res["parts"]]
    assert names == [f"talker_{i:03d}" for i in range(5)]  # beside the bag, named as directories
    assert all(Path(p["path"]).parent == talker.parent for p in res["parts"])
    got: list[tuple[str, int, bytes]] = []
    for p in res["parts"]:
        part = Path(p["path"])
        assert part.is_dir() and (part / "metadata.yaml").is_file()
        assert rosbags_storage(part) == "mcap"  # the input's storage kept
        rows = rosbags_rows(part)
        assert len(rows) == p["messages"] == 4
        assert max(t for _, t, _ in rows) - min(t for _, t, _ in rows) < 10**9
        got += rows
    assert sorted(got) == sorted(input_rows(talker))
    assert not list(talker.parent.glob("*.mcap")) and not list(talker.parent.glob("*.rosbag2"))


def test_sqlite3_bag_parts_keep_sqlite3(sqlite_bag: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "parts"
    rc, res, err = run(capsys, str(sqlite_bag), "--duration", "2500ms", "-o", str(out))
    assert rc == 0, err
    assert sorted(p.name for p in out.iterdir()) == ["run_000", "run_001"]
    got = []
    for part in sorted(out.iterdir()):
        assert rosbags_storage(part) == "sqlite3"
        assert list(part.glob("*.db3"))
        got += rosbags_rows(part)
    assert sorted(got) == sorted(input_rows(sqlite_bag))


def test_format_rosbag2_names_parts_as_directories(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--format rosbag2`` of a ROS 1 bag: directories ``STEM_000`` (not ``.rosbag2``) of CDR."""
    src = CORPORA / "rosbag" / "rosbag2_bag_v2" / "test_bag.bag"
    out = tmp_path / "parts"
    rc, res, err = run(capsys, str(src), "--at", "+0.5s", "--format", "rosbag2", "-o", str(out))
    assert rc == 0, err
    names = sorted(p.name for p in out.iterdir())
    assert names and all(n.startswith("test_bag_") and "." not in n for n in names)
    total = sum(len(rosbags_rows(out / n)) for n in names)
    assert total == res["messages"] == len(input_rows(src))


def test_format_mcap_still_writes_mcap_files(talker: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from mcap.reader import make_reader

    out = tmp_path / "parts"
    rc, res, err = run(capsys, str(talker), "--duration", "1s", "--format", "mcap", "-o", str(out))
    assert rc == 0, err
    files = sorted(out.iterdir())
    assert [f.name for f in files] == [f"talker_{i:03d}.mcap" for i in range(5)]
    n = 0
    for f in files:
        with open(f, "rb") as fh:
            n += sum(1 for _ in make_reader(fh).iter_messages())
    assert n == 20


@pytest.mark.parametrize(
    ("src", "ext"),
    [
        (CORPORA / "rosbag" / "frost" / "examples_read_bag_test.bag", ".bag"),
        (ROOT / "samples" / "demo.mcap", ".mcap"),
        (CORPORA / "ulog" / "sample_log_small.ulg", ".ulg"),
    ],
)
def test_every_file_format_keeps_its_format(src: Path, ext: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "parts"
    rc, res, err = run(capsys, str(src), "--duration", "5s", "-o", str(out))
    assert rc == 0, err
    parts = sorted(out.iterdir())
    assert len(parts) == len(res["parts"]) >= 2
    assert all(p.suffix == ext for p in parts)
    counted = 0
    for p in parts:
        if ext == ".bag":
            import rosbag

            with rosbag.Bag(str(p)) as b:
                counted += b.get_message_count()
        elif ext == ".mcap":
            from mcap.reader import make_reader

            with open(p, "rb") as fh:
                counted += sum(1 for _ in make_reader(fh).iter_messages())
        else:
            from pyulog import ULog

            u = ULog(str(p))
            counted += sum(len(d.data["timestamp"]) for d in u.data_list) + len(u.logged_messages)
    with polybag.open(src) as r:
        assert counted == res["messages"] == r.summary.message_count


def test_help_says_parts_keep_the_format(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["split", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "keep IN's format" in text and "--max-parts" in text


# --- at most --max-parts parts --------------------------------------------------------------
def test_more_than_1000_parts_is_refused_before_writing(talker: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "parts"
    capsys.readouterr()
    rc = main(["split", str(talker), "--duration", "1ms", "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == 2
    assert "4,532 parts" in err and "--max-parts" in err and "Traceback" not in err
    assert not out.exists() or not list(out.iterdir())


def test_max_parts_allows_more(talker: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "parts"
    rc, res, err = run(capsys, str(talker), "--duration", "1ms", "--max-parts", "5000", "-o", str(out))
    assert rc == 0, err
    first = min(t for _, t, _ in input_rows(talker))
    buckets = {(t - first) // 10**6 for _, t, _ in input_rows(talker)}
    assert len(res["parts"]) == len(buckets) == 11  # no empty parts: /topic and /rosout share each ms
    assert sum(len(rosbags_rows(p)) for p in out.iterdir()) == 20


def test_max_parts_by_times_and_size(talker: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"split would write 4 parts, more than 3; pass --max-parts 4"):
        ops.split(talker, at=["+1s", "+2s", "+3s"], max_parts=3, output_dir=tmp_path / "a")
    with pytest.raises(UsageError, match=r"--max-parts"):
        ops.split(talker, size=10, output_dir=tmp_path / "b")  # 14 KB in 10-byte parts
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_parts_past_the_estimate_leave_nothing(tmp_path: Path) -> None:
    """By size the count is estimated from the input's size on disk; a compressed input
    holds more: the split stops at ``max_parts`` and removes every part (directories too)."""
    out = tmp_path / "parts"
    # 157 KB of zstd files: estimated 16 parts of 10 KB, but 185 KB of payload need more than 20
    with pytest.raises(UsageError, match=r"more than 20 parts"):
        ops.split(WBAG, size=10_000, max_parts=20, output_dir=out)
    assert not out.exists() or list(out.iterdir()) == []


def test_a_bad_max_parts_is_a_usage_error(talker: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["split", str(talker), "--duration", "1s", "--max-parts", "0"]) == 2
    assert "--max-parts 0" in capsys.readouterr().err
