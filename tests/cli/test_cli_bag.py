"""polybag reindex / check / compress / decompress on bags (and MCAP for check/compress)."""

from __future__ import annotations

import json
import shutil

import pytest

import polybag
from bag_helpers import write_sample
from paths import CORPORA
from polybag.cli import main
from polybag.formats.bag.writer import BagWriter

EXAMPLE = CORPORA / "rosbag/foxglove-rosbag/example.bag"


def msgs(p):
    with polybag.open(p) as r:
        return [(m.topic, m.log_time, bytes(m.data)) for m in r.messages()]


def test_check_good_and_damaged(tmp_path, capsys):
    good = tmp_path / "good.bag"
    write_sample(good, "lz4", 2000)
    assert main(["check", str(good)]) == 0
    assert "OK" in capsys.readouterr().out
    data = bytearray(good.read_bytes())
    # corrupt an index data entry offset of the first chunk: the index now lies
    with polybag.open(good) as r:
        c0 = r.summary.chunks[0]
    idx = c0.offset + c0.length  # first index data record after the chunk
    hl = int.from_bytes(data[idx : idx + 4], "little")
    entry = idx + 8 + hl + 8  # first entry's offset field
    data[entry : entry + 4] = (int.from_bytes(data[entry : entry + 4], "little") + 1).to_bytes(4, "little")
    bad = tmp_path / "bad.bag"
    bad.write_bytes(bytes(data))
    assert main(["check", str(bad)]) == 1
    out = capsys.readouterr().out
    assert "problem" in out and f"offset {c0.offset}" in out
    cut = tmp_path / "cut.bag"
    cut.write_bytes(good.read_bytes()[:6000])
    assert main(["check", "--json", str(cut)]) == 1
    assert "unindexed" in capsys.readouterr().out


def test_check_every_corpus_bag_passes(capsys):
    bags = [p for p in (CORPORA / "rosbag").glob("*/*.bag") if p.stat().st_size > 0 and p.name != "dummy.bag"]
    assert main(["check", *map(str, bags)]) == 0
    assert main(["check", str(CORPORA / "rosbag/rosbag-rs/dummy.bag")]) == 1
    assert main(["check", str(CORPORA / "rosbag/foxglove-rosbag/empty-file.bag")]) == 1


def test_check_reports_md5_mismatch(tmp_path, capsys):
    p = tmp_path / "md5.bag"
    with BagWriter(p) as w:
        s = w.add_schema("std_msgs/String", "ros1msg", b"string data\n")
        ch = w.add_channel("/a", "ros1", s, {"md5sum": "0" * 32})
        w.write(ch, b"\x00\x00\x00\x00", 1)
    assert main(["check", str(p)]) == 1
    assert "does not match" in capsys.readouterr().out
    assert main(["check", "--json", str(p)]) == 1
    (res,) = json.loads(capsys.readouterr().out)
    (prob,) = [q for q in res["problems"] if "md5sum" in q["message"]]
    assert set(prob) == {"message", "offset"} and "connection 0 (/a)" in prob["message"]


def test_check_mcap_runs_the_reader(capsys):
    files = sorted((CORPORA / "mcap-samples").rglob("*.mcap"))
    assert files, "the corpus has MCAP samples"
    with polybag.open(files[0]) as r:
        assert r.summary is not None
    rc = main(["check", str(files[0])])
    out = capsys.readouterr().out
    assert rc == 0 and "OK" in out


@pytest.mark.parametrize("target", ["lz4", "bz2"])
def test_compress_decompress_keep_backups(tmp_path, target, capsys):
    p = tmp_path / "ex.bag"
    shutil.copy(EXAMPLE, p)
    p.chmod(0o644)
    want = msgs(p)
    assert main(["compress", f"--{target}", "-q", str(p)]) == 0
    assert (tmp_path / "ex.orig.bag").read_bytes() == EXAMPLE.read_bytes()
    with polybag.open(p) as r:
        assert {c.compression for c in r.summary.chunks} == {target}
        assert r.summary.indexed
    assert msgs(p) == want
    # backup exists: skipped without -f, done with -f
    assert main(["decompress", "-q", str(p)]) == 1
    assert main(["decompress", "-q", "-f", str(p)]) == 0
    with polybag.open(p) as r:
        assert {c.compression for c in r.summary.chunks} == {"none"}
    assert msgs(p) == want
    assert not list(tmp_path.glob("*.active"))
    # --no-backup and --output-dir
    q = tmp_path / "nb.bag"
    shutil.copy(EXAMPLE, q)
    q.chmod(0o644)
    assert main(["compress", "--lz4", "--no-backup", "-q", str(q)]) == 0
    assert not (tmp_path / "nb.orig.bag").exists()
    out = tmp_path / "out"
    assert main(["decompress", "-q", "--output-dir", str(out), str(q)]) == 0
    assert msgs(out / "nb.bag") == want


def test_interrupted_compress_loses_nothing(tmp_path, monkeypatch):
    p = tmp_path / "ex.bag"
    write_sample(p, "none", 500, 400)
    before = p.read_bytes()
    calls = {"n": 0}
    orig = BagWriter.write_chunk

    def flaky(self, *a, **k):
        calls["n"] += 1
        if calls["n"] == 5:
            raise KeyboardInterrupt
        return orig(self, *a, **k)

    monkeypatch.setattr(BagWriter, "write_chunk", flaky)
    with pytest.raises(KeyboardInterrupt):
        import argparse

        from polybag.cli.compress import run_many

        run_many(
            argparse.Namespace(files=[str(p)], output_dir=None, force=False, no_backup=True, quiet=True, command="compress"),
            "bz2",
        )
    assert p.read_bytes() == before
    assert not (tmp_path / "ex.bag.active").exists()


def test_reindex_output_dir_and_backup(tmp_path, capsys):
    p = tmp_path / "c.bag"
    write_sample(p, "bz2", 1500, 300)
    data = p.read_bytes()
    cut = tmp_path / "cut.bag"
    cut.write_bytes(data[: len(data) - 3000])
    od = tmp_path / "od"
    rc = main(["reindex", "--output-dir", str(od), str(cut)])
    assert rc == 1  # data lost at the cut
    assert "damage" in capsys.readouterr().out
    assert cut.read_bytes() == data[: len(data) - 3000]
    got = msgs(od / "cut.bag")
    full = msgs(p)
    assert 0 < len(got) < len(full) and got == full[: len(got)]
    # in place, keeping the rosbag-style backup
    assert main(["reindex", "-q", str(cut)]) == 1
    assert (tmp_path / "cut.orig.bag").read_bytes() == data[: len(data) - 3000]
    assert msgs(cut) == got
    assert main(["reindex", "-q", str(cut)]) == 1  # backup exists -> skipped
    # an intact bag: reindex keeps it whole
    assert main(["reindex", "-q", "-f", str(p)]) == 0
    assert msgs(p) == full


def test_reindex_rewrites_old_versions_as_2_0(tmp_path):
    """Like ``rosbag reindex`` with a 1.2 bag: an old bag becomes an indexed 2.0 bag with
    every message; the original is kept as NAME.orig.bag."""
    from bag_helpers import build_v11

    p = tmp_path / "old.bag"
    data = build_v11(b"#ROSRECORD V1.1\n")
    p.write_bytes(data)
    with polybag.open(p) as r:
        want = [(m.topic, m.log_time, bytes(m.data)) for m in r.messages()]
        in_file = [(m.topic, m.log_time, bytes(m.data)) for m in r.messages(order="file")]
    assert want
    assert main(["reindex", "-q", str(p)]) == 0
    assert (tmp_path / "old.orig.bag").read_bytes() == data
    assert p.read_bytes().startswith(b"#ROSBAG V2.0\n")
    with polybag.open(p) as r:
        assert r.summary.indexed
        assert [(m.topic, m.log_time, bytes(m.data)) for m in r.messages()] == want
    # and a cut old bag: the complete messages before the cut
    cut = tmp_path / "cut.bag"
    cut.write_bytes(data[: len(data) - 5])
    assert main(["reindex", "-q", str(cut)]) == 1
    with polybag.open(cut) as r:
        assert [(m.topic, m.log_time, bytes(m.data)) for m in r.messages(order="file")] == in_file[:-1]


def test_compress_mcap_via_writer(tmp_path):
    src = CORPORA / "mcap-samples/lichtblick/example.mcap"
    with polybag.open(src) as r:
        want = [(m.topic, m.log_time, bytes(m.data)) for m in r.messages()]
    p = tmp_path / "ex.mcap"
    shutil.copy(src, p)
    p.chmod(0o644)
    assert main(["compress", "--zstd", "-q", str(p)]) == 0
    assert (tmp_path / "ex.orig.mcap").read_bytes() == src.read_bytes()
    with polybag.open(p) as r:
        assert [(m.topic, m.log_time, bytes(m.data)) for m in r.messages()] == want
        comps = {c.compression for c in r.summary.chunks}
    assert comps <= {"zstd"}
    assert main(["decompress", "-q", "--no-backup", str(p)]) == 0
    with polybag.open(p) as r:
        assert [(m.topic, m.log_time, bytes(m.data)) for m in r.messages()] == want
        assert {c.compression for c in r.summary.chunks} <= {"none", ""}


def test_check_reports_damaged_index_data(tmp_path, capsys):
    good = tmp_path / "g.bag"
    write_sample(good, "none", 2000)
    data = bytearray(good.read_bytes())
    with polybag.open(good) as r:
        c0 = r.summary.chunks[0]
        want = [(m.topic, m.log_time, bytes(m.data)) for m in r.messages()]
    idx = c0.offset + c0.length
    hl = int.from_bytes(data[idx : idx + 4], "little")
    dl_pos = idx + 4 + hl
    data[dl_pos : dl_pos + 4] = (int.from_bytes(data[dl_pos : dl_pos + 4], "little") - 12).to_bytes(4, "little")
    bad = tmp_path / "b.bag"
    bad.write_bytes(bytes(data))
    # the reader falls back to the chunk's records: nothing is lost
    with polybag.open(bad) as r:
        assert [(m.topic, m.log_time, bytes(m.data)) for m in r.messages()] == want
    assert main(["check", str(bad)]) == 1
    assert "index data" in capsys.readouterr().out


@pytest.mark.parametrize("version", ["1.2", "1.1"])
def test_convert_old_bag_to_v20(tmp_path, version):
    from bag_helpers import build_v11, build_v12, expected

    old = tmp_path / "old.bag"
    old.write_bytes(build_v12(with_index=True) if version == "1.2" else build_v11(b"#ROSRECORD V1.1\n"))
    new = tmp_path / "new.bag"
    assert main(["convert", str(old), str(new)]) == 0
    with polybag.open(new) as r:
        assert r.summary.version == "2.0" and r.summary.indexed
        got = [(m.topic, m.log_time, bytes(m.data)) for m in r.messages(order="file")]
        defs = {c.topic: bytes(c.schema.data) for c in r.summary.channels.values()}
    assert sorted(got) == sorted(expected())
    assert defs["/chatter"].strip() == b"string data"
    assert main(["check", str(new)]) == 0


@pytest.mark.parametrize("with_index", [True, False])
def test_reindex_of_1_2_bags_is_read_by_rosbag(tmp_path, with_index):
    """A 1.2 bag (indexed or not) reindexed: a 2.0 bag the original rosbag reads, with
    every message and its connection's type and md5."""
    import rosbag  # rosbag-standalone

    from bag_helpers import build_v12

    p = tmp_path / "v12.bag"
    p.write_bytes(build_v12(with_index=with_index))
    with polybag.open(p) as r:
        want = [(m.topic, m.log_time, bytes(m.data)) for m in r.messages(order="file")]
    assert main(["reindex", "-q", str(p)]) == 0
    with rosbag.Bag(str(p)) as b:
        got = [(t, m.to_nsec(), bytes(raw[1])) for t, raw, m in b.read_messages(raw=True)]
    assert sorted(got, key=lambda x: x[1]) == sorted(want, key=lambda x: x[1])
