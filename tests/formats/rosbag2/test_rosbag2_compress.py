"""``compress``/``decompress`` of a rosbag2 directory: a new bag (per-file or per-message
zstd, or none) that rosbags reads equal to the input, written crash-safe; the input is
never lost (in place: kept as ``NAME.orig`` until asked otherwise)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
import yaml
from rosbag2_helpers import rosbags_view, write_rosbags_bag

import polybag
from polybag import ops
from polybag.cli import main
from polybag.errors import OutputExistsError, PolybagError
from polybag.formats.rosbag2.writer import Rosbag2Writer


def _meta(bag: Path) -> dict:
    return yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]


def _snapshot(bag: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(bag.iterdir())}


def _qos(bag: Path) -> dict[str, str]:
    with polybag.open(bag) as r:
        return {c.topic: str(c.metadata.get("offered_qos_profiles", "")) for c in r.summary.channels.values()}


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
@pytest.mark.parametrize("mode", ["file", "message"])
def test_compress_into_a_new_directory_reads_equal_in_rosbags(tmp_path: Path, storage: str, mode: str) -> None:
    bag = tmp_path / "run"
    write_rosbags_bag(bag, storage=storage, n=40)
    before = _snapshot(bag)
    res = ops.compress(bag, "zstd", output_dir=tmp_path / "out", compression_mode=mode)
    out = tmp_path / "out" / "run"
    assert res.output == str(out) and res.messages == 40 and res.backup is None
    assert _snapshot(bag) == before  # the input is untouched
    meta = _meta(out)
    assert meta["compression_format"] == "zstd" and meta["compression_mode"] == mode.upper()
    assert meta["storage_identifier"] == storage
    assert meta["version"] == 9
    names = sorted(p.name for p in out.iterdir())
    assert names[0] == "metadata.yaml" and len(names) == 2
    assert names[1].endswith(".zstd") == (mode == "file")
    # rosbags reads what it wrote, in its order (its order for equal times: by file position)
    assert sorted(rosbags_view(out)) == sorted(rosbags_view(bag))
    assert _qos(out) == _qos(bag)
    assert not list(tmp_path.glob("out/*.active"))


def test_decompress_a_compressed_bag(tmp_path: Path) -> None:
    bag = tmp_path / "z"
    write_rosbags_bag(bag, compression="file", n=30)
    res = ops.decompress(bag, output_dir=tmp_path / "plain")
    out = tmp_path / "plain" / "z"
    assert res.messages == 30
    meta = _meta(out)
    assert meta["compression_mode"] == "" and meta["compression_format"] == ""
    assert [p.suffix for p in out.iterdir() if p.name != "metadata.yaml"] == [".db3"]
    with sqlite3.connect(next(out.glob("*.db3"))) as conn:  # a plain database again
        assert conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 30
    assert sorted(rosbags_view(out)) == sorted(rosbags_view(bag))


def test_in_place_keeps_a_backup_and_refuses_to_replace_it(tmp_path: Path) -> None:
    bag = tmp_path / "run"
    write_rosbags_bag(bag, n=20)
    want = sorted(rosbags_view(bag))
    before = _snapshot(bag)
    res = ops.compress(bag)  # zstd, file mode: the defaults for a directory
    assert res.output == str(bag) and res.backup == str(tmp_path / "run.orig")
    assert _snapshot(tmp_path / "run.orig") == before
    assert _meta(bag)["compression_mode"] == "FILE"
    assert sorted(rosbags_view(bag)) == want
    again = ops.compress(bag, "zstd", compression_mode="message")
    assert again.skipped and "exists" in again.warnings[0]
    assert _meta(bag)["compression_mode"] == "FILE"  # untouched
    forced = ops.compress(bag, "zstd", compression_mode="message", force=True)
    assert not forced.skipped and _meta(bag)["compression_mode"] == "MESSAGE"
    assert sorted(rosbags_view(bag)) == want
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run", "run.orig"]


def test_in_place_without_backup_leaves_only_the_bag(tmp_path: Path) -> None:
    bag = tmp_path / "run"
    write_rosbags_bag(bag, n=20)
    want = sorted(rosbags_view(bag))
    ops.compress(bag, "zstd", compression_mode="message", backup=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
    assert sorted(rosbags_view(bag)) == want


def test_existing_output_needs_force(tmp_path: Path) -> None:
    bag = tmp_path / "run"
    write_rosbags_bag(bag, n=10)
    ops.compress(bag, output_dir=tmp_path / "out")
    with pytest.raises(OutputExistsError):
        ops.compress(bag, output_dir=tmp_path / "out", compression_mode="message")
    ops.compress(bag, output_dir=tmp_path / "out", compression_mode="message", force=True)
    assert _meta(tmp_path / "out" / "run")["compression_mode"] == "MESSAGE"
    with pytest.raises(OutputExistsError):  # never the input itself
        ops.compress(bag, output_dir=tmp_path, force=True)


@pytest.mark.parametrize("out_dir", [False, True])
def test_interrupted_compress_loses_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, out_dir: bool) -> None:
    bag = tmp_path / "run"
    write_rosbags_bag(bag, n=40)
    before = _snapshot(bag)
    calls = {"n": 0}
    orig = Rosbag2Writer.write

    def flaky(self: Rosbag2Writer, *a: object, **k: object) -> None:
        calls["n"] += 1
        if calls["n"] == 25:
            raise KeyboardInterrupt
        orig(self, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(Rosbag2Writer, "write", flaky)
    with pytest.raises(KeyboardInterrupt):
        ops.compress(bag, "zstd", output_dir=(tmp_path / "out") if out_dir else None)
    assert _snapshot(bag) == before
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == (["out", "run"] if out_dir else ["run"])  # no .active, .new or .orig
    if out_dir:
        assert list((tmp_path / "out").iterdir()) == []


def test_damaged_input_is_an_error_and_writes_nothing(tmp_path: Path) -> None:
    bag = tmp_path / "run"
    write_rosbags_bag(bag, n=20)
    db = next(bag.glob("*.db3"))
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE messages SET timestamp = 'soon' WHERE id = 7")
    with pytest.raises(PolybagError, match="not a message"):
        ops.compress(bag, output_dir=tmp_path / "out")
    assert list((tmp_path / "out").iterdir()) == []
    with pytest.raises(PolybagError):
        ops.compress(bag, "lz4", output_dir=tmp_path / "out")  # rosbag2 has zstd only


def test_compression_mode_is_for_directories(tmp_path: Path) -> None:
    p = tmp_path / "a.mcap"
    with polybag.Writer(p) as w:
        w.write(w.add_channel("/a", "json"), b"{}", 1)
    with pytest.raises(PolybagError, match="rosbag2 directories"):
        ops.compress(p, "zstd", compression_mode="message")


def test_cli_compress_and_decompress(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bag = tmp_path / "run"
    write_rosbags_bag(bag, storage="mcap", n=12)
    want = sorted(rosbags_view(bag))
    assert main(["compress", "--mode", "message", "-o", str(tmp_path / "z"), str(bag)]) == 0
    assert "12 messages" in capsys.readouterr().out
    assert _meta(tmp_path / "z" / "run")["compression_mode"] == "MESSAGE"
    assert main(["decompress", "-q", "--output-dir", str(tmp_path / "plain"), str(tmp_path / "z" / "run")]) == 0
    assert _meta(tmp_path / "plain" / "run")["compression_mode"] == ""
    assert sorted(rosbags_view(tmp_path / "plain" / "run")) == want
    assert main(["compress", "-q", str(bag)]) == 0  # in place, zstd per file
    assert _meta(bag)["compression_mode"] == "FILE" and os.path.isdir(tmp_path / "run.orig")
    assert main(["compress", "-q", "--bz2", "--output-dir", str(tmp_path / "x"), str(bag)]) != 0


def test_ros_distro_and_custom_data_are_kept(tmp_path: Path) -> None:
    from rosbag2_helpers import STRING, typestore
    from rosbags.rosbag2 import Writer

    bag = tmp_path / "run"
    ts = typestore()
    with Writer(bag, version=9) as w:
        w.set_custom_data("robot", "r2")
        c = w.add_connection("/s", STRING, typestore=ts)
        w.write(c, 5, ts.serialize_cdr(ts.types[STRING](data="x"), STRING))
    ops.compress(bag, output_dir=tmp_path / "z")
    meta = _meta(tmp_path / "z" / "run")
    assert meta["custom_data"] == {"robot": "r2"}
    assert meta["ros_distro"] == _meta(bag)["ros_distro"] == "rosbags"
