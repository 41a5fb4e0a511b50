"""rosbag2 storage found by content, and a write-ahead log with nothing to replay (issue 27).

A directory without ``metadata.yaml`` whose files are MCAP or rosbag2 SQLite storage opens
for info, cat, recover, reindex and convert whatever the files are called (as rosbag2's own
test bags are laid out: ``rosbag2_cpp/test/rosbag2_cpp/bags/`` holds three ``.mcap`` files
named unlike the folder); the listing keeps its limits (no link out of the folder, each file
once).  An empty ``-wal`` (and ``-shm``) beside a ``.db3``, as any read-only SQLite open of a
WAL database leaves it, is not damage; a WAL with a committed transaction still is.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import polybag
from polybag.cli import main
from polybag.errors import PolybagWarning

CORPORA = Path(__file__).resolve().parents[2].parent / "shared" / "corpora"
CPP_BAGS = CORPORA / "mcap-samples" / "rosbag2" / "rosbag2_cpp_bags"

STRING = "std_msgs/msg/String"
POINT = "geometry_msgs/msg/Point"


def _store() -> Any:
    from rosbags.typesys import Stores, get_typestore

    return get_typestore(Stores.ROS2_HUMBLE)


def _write_mcap(path: Path, first: int, n: int) -> list[tuple[str, int, bytes]]:
    """One ROS 2 MCAP storage file written by polybag's MCAP writer (profile ros2): ``n``
    messages on /chatter (String) and /point (Point) from time ``first``; returns
    ``(topic, time, bytes)`` as written."""
    from polybag.formats.mcap.writer import McapWriter

    ts = _store()
    rows = []
    w = McapWriter(str(path), profile="ros2")
    s_str = w.add_schema(STRING, "ros2msg", b"string data\n")
    s_pt = w.add_schema(POINT, "ros2msg", b"float64 x\nfloat64 y\nfloat64 z\n")
    c_str = w.add_channel("/chatter", "cdr", s_str)
    c_pt = w.add_channel("/point", "cdr", s_pt)
    for i in range(n):
        t = first + i * 1_000_000
        if i % 2:
            data = bytes(ts.serialize_cdr(ts.types[STRING](data=f"hello {first} {i}"), STRING))
            w.write(c_str, data, t, t)
            rows.append(("/chatter", t, data))
        else:
            data = bytes(ts.serialize_cdr(ts.types[POINT](x=float(i), y=-1.5, z=float(first)), POINT))
            w.write(c_pt, data, t, t)
            rows.append(("/point", t, data))
    w.close()
    return rows


def _fixture(root: Path, names: tuple[str, ...] = ("bag_0.mcap", "foo.mcap", "bar.mcap")) -> tuple[Path, list[Any]]:
    """A folder ``cdr_test/`` of MCAP storage files named unlike it, without metadata.yaml."""
    bag = root / "cdr_test"
    bag.mkdir()
    rows: list[Any] = []
    for k, name in enumerate(names):
        rows += _write_mcap(bag / name, 1_700_000_000_000_000_000 + k * 10**9, 8 + k)
    return bag, rows


def _meta(bag: Path) -> dict[str, Any]:
    import yaml

    return yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]  # type: ignore[no-any-return]


def _polybag_view(path: Path) -> list[tuple[str, int, bytes]]:
    with polybag.open(str(path)) as r:
        return sorted((m.channel.topic, m.log_time, bytes(m.data)) for m in r.messages())


def _rosbags_view(path: Path) -> list[tuple[str, int, bytes]]:
    from rosbags.rosbag2 import Reader

    with Reader(path) as r:
        return sorted((c.topic, t, bytes(d)) for c, t, d in r.messages())


def test_the_mcap_fixture_opens_for_every_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bag, rows = _fixture(tmp_path)
    expected = sorted(rows)
    # info and cat read it (a warning says metadata.yaml is missing)
    assert main(["info", str(bag)]) == 0
    out, err = capsys.readouterr()
    assert "bag_0.mcap" in out and "foo.mcap" in out and "bar.mcap" in out
    assert "no metadata.yaml" in err
    assert main(["cat", str(bag), "--topics", "/point"]) == 0
    out, _ = capsys.readouterr()
    assert len([ln for ln in out.splitlines() if "/point" in ln]) == sum(1 for r in rows if r[0] == "/point")
    assert _polybag_view(bag) == expected
    # convert and recover write every message
    assert main(["convert", str(bag), str(tmp_path / "c.mcap")]) == 0
    assert _polybag_view(tmp_path / "c.mcap") == expected
    assert main(["recover", str(bag), str(tmp_path / "rec"), "--format", "rosbag2"]) in (0, 1)
    capsys.readouterr()
    assert _rosbags_view(tmp_path / "rec") == expected
    # reindex writes a metadata.yaml rosbags accepts; both read the same messages
    assert main(["reindex", str(bag)]) == 0
    assert "3 file(s)" in capsys.readouterr().out
    assert (bag / "metadata.yaml").is_file()
    assert _rosbags_view(bag) == expected
    assert _polybag_view(bag) == expected
    from rosbags.rosbag2 import Reader

    with Reader(bag) as r:
        assert {c.topic: c.msgcount for c in r.connections} == {
            "/chatter": sum(1 for x in rows if x[0] == "/chatter"),
            "/point": sum(1 for x in rows if x[0] == "/point"),
        }
    assert sorted(_meta(bag)["relative_file_paths"]) == ["bag_0.mcap", "bar.mcap", "foo.mcap"]


def test_rosbag2s_own_cpp_bags_reindex(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """rosbag2's ``rosbag2_cpp/test/rosbag2_cpp/bags/``: three MCAP files, no metadata.yaml."""
    if not CPP_BAGS.is_dir():
        pytest.skip("the rosbag2 corpus is not here")
    bag = tmp_path / "rosbag2_cpp_bags"
    shutil.copytree(CPP_BAGS, bag)
    with polybag.open(str(bag)) as r:
        counts = {c.topic: r.summary.message_counts.get(c.id, 0) for c in r.summary.channels.values()}
        n = r.summary.message_count
    assert n == 32
    assert main(["reindex", str(bag)]) == 0
    capsys.readouterr()
    from rosbags.rosbag2 import Reader

    with Reader(bag) as rr:
        assert rr.message_count == n
        assert {c.topic: c.msgcount for c in rr.connections} == counts
    # the messages are those the mcap library reads from the three files (rosbags 0.x reads
    # 7 of the 14 /parameter_events: the files number the topic's channel differently)
    import mcap.reader

    ref = []
    for f in sorted(bag.glob("*.mcap")):
        with f.open("rb") as fh:
            ref += [(ch.topic, m.log_time, bytes(m.data)) for _, ch, m in mcap.reader.make_reader(fh).iter_messages()]
    assert _polybag_view(bag) == sorted(ref)
    assert len(ref) == n


def test_sqlite_storage_by_content(tmp_path: Path) -> None:
    """A rosbag2 SQLite file named ``recording`` (no extension) is storage; an unrelated
    SQLite database and a text file beside it are not."""
    from rosbags.rosbag2 import Writer

    ts = _store()
    src = tmp_path / "src"
    w = Writer(src, version=9)
    with w:
        c = w.add_connection("/chatter", STRING, typestore=ts)
        for i in range(5):
            w.write(c, 10**9 + i, bytes(ts.serialize_cdr(ts.types[STRING](data=f"m{i}"), STRING)))
    bag = tmp_path / "odd"
    bag.mkdir()
    shutil.copy(next(src.glob("*.db3")), bag / "recording")
    con = sqlite3.connect(bag / "other.sqlite")
    con.execute("CREATE TABLE things (a)")
    con.commit()
    con.close()
    (bag / "notes.txt").write_text("not storage")
    with polybag.open(str(bag)) as r:
        assert r.summary.message_count == 5
    assert main(["reindex", str(bag)]) == 0
    from rosbags.rosbag2 import Reader

    with Reader(bag) as rr:
        assert rr.message_count == 5
        assert [x[2] for x in sorted((c.topic, t, bytes(d)) for c, t, d in rr.messages())] == [
            bytes(ts.serialize_cdr(ts.types[STRING](data=f"m{i}"), STRING)) for i in range(5)
        ]
    assert _meta(bag)["relative_file_paths"] == ["recording"]
    assert _meta(bag)["storage_identifier"] == "sqlite3"


def test_the_listing_keeps_its_limits(tmp_path: Path) -> None:
    """A symbolic link out of the folder is not followed; a hard link to a storage file and a
    link inside the folder are read once; a FIFO is never opened."""
    outside = tmp_path / "outside"
    outside.mkdir()
    _write_mcap(outside / "secret.mcap", 5 * 10**18, 4)
    bag, rows = _fixture(tmp_path, ("a.mcap",))
    os.symlink(outside / "secret.mcap", bag / "link_out.mcap")
    os.link(bag / "a.mcap", bag / "hard.mcap")
    os.symlink(bag / "a.mcap", bag / "again")
    os.mkfifo(bag / "pipe")
    assert _polybag_view(bag) == sorted(rows)
    from polybag.formats.rosbag2.opening import storage_files

    assert len(storage_files(str(bag))) == 1


def test_an_empty_directory_is_still_refused(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x.txt").write_text("hello")
    with pytest.raises(Exception) as e:  # noqa: PT011 - not a bag: whatever polybag.open says
        polybag.open(str(tmp_path / "d"))
    assert "directory" in str(e.value)


# --- the write-ahead log ----------------------------------------------------------------------------
def _wal_bag(root: Path) -> Path:
    """A sqlite3 bag in WAL mode (as rosbag2's resilient preset writes it)."""
    from rosbags.rosbag2 import Writer

    ts = _store()
    bag = root / "walbag"
    w = Writer(bag, version=9)
    with w:
        c = w.add_connection("/chatter", STRING, typestore=ts)
        for i in range(20):
            w.write(c, 10**9 + i, bytes(ts.serialize_cdr(ts.types[STRING](data=f"m{i}"), STRING)))
    db = next(bag.glob("*.db3"))
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
    con.close()
    return bag


def test_an_empty_wal_is_not_damage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bag = _wal_bag(tmp_path)
    db = next(bag.glob("*.db3"))
    ro = sqlite3.connect(f"file:{db}?mode=ro", uri=True)  # a read-only open leaves -wal and -shm
    assert ro.execute("SELECT count(*) FROM messages").fetchone()[0] == 20
    ro.close()
    wal = Path(str(db) + "-wal")
    assert wal.exists() and wal.stat().st_size == 0 and Path(str(db) + "-shm").exists()
    assert main(["info", str(bag)]) == 0
    assert main(["cat", str(bag)]) == 0
    assert main(["recover", str(bag), str(tmp_path / "rec"), "--format", "rosbag2"]) == 0
    capsys.readouterr()
    (bag / "metadata.yaml").unlink()
    assert main(["reindex", str(bag)]) == 0
    assert "20 messages" in capsys.readouterr().out
    assert _rosbags_view(bag) == _polybag_view(bag)


def _live_wal(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of a WAL bag taken while a write's committed transaction was only in the WAL."""
    bag = _wal_bag(tmp_path)
    db = next(bag.glob("*.db3"))
    keep = sqlite3.connect(db)  # held open: the WAL is not checkpointed away on close
    keep.execute("PRAGMA wal_autocheckpoint=0")
    keep.execute("SELECT count(*) FROM messages").fetchone()
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_autocheckpoint=0")
    con.execute("INSERT INTO messages (topic_id, timestamp, data) VALUES (1, 2000000000, x'0001000004000000')")
    con.commit()
    copy = tmp_path / "copy"
    shutil.copytree(bag, copy)
    con.close()
    keep.close()
    wal = next(copy.glob("*.db3")).with_name(db.name + "-wal")
    assert wal.stat().st_size > 32
    return copy, wal


def test_a_wal_with_a_committed_transaction_is_replayed_in_a_copy(tmp_path: Path) -> None:
    copy, wal = _live_wal(tmp_path)
    before = {p.name: p.read_bytes() for p in copy.iterdir()}
    with pytest.warns(PolybagWarning, match="replayed the committed transactions"):  # issue 28: read, not refused
        with polybag.open(str(copy)) as r:
            assert sum(1 for _ in r.messages()) == 21
    assert {p.name: p.read_bytes() for p in copy.iterdir()} == before  # never checkpointed into the input
    with polybag.open(str(copy), recover=True) as r:  # recovering: replayed in a copy
        assert sum(1 for _ in r.messages()) == 21


@pytest.mark.parametrize("keep", [32, 32 + 24 + 100])
def test_a_wal_header_without_a_whole_frame_is_not_damage(tmp_path: Path, keep: int) -> None:
    copy, wal = _live_wal(tmp_path)
    wal.write_bytes(wal.read_bytes()[:keep])  # a header alone, a frame cut short: nothing SQLite replays
    with polybag.open(str(copy)) as r:
        assert sum(1 for _ in r.messages()) == 20


def test_a_wal_of_stale_frames_is_not_damage(tmp_path: Path) -> None:
    copy, wal = _live_wal(tmp_path)
    data = bytearray(wal.read_bytes())
    data[32 + 8 : 32 + 16] = bytes(8)  # the first frame's salts no longer match the header's
    wal.write_bytes(bytes(data))
    with polybag.open(str(copy)) as r:
        assert sum(1 for _ in r.messages()) == 20
