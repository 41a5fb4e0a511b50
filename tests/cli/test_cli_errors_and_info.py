"""Gaps found by the audit of the foundation (MCAP, CLI) and bag issues.

CLI errors without tracebacks and with the right exit codes, ``info`` on an MCAP whose
message indexes are garbage, ``check`` md5sums of MCAP ros1 channels, ``info --yaml``
byte totals against the real ``rosbag``, misspelled writer options, and MCAP reads that
decompress only the chunks they need.
"""

from __future__ import annotations

import io
import json
import random
import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

import polybag
import polybag.io.compression
from paths import CORPORA
from polybag.cli import main
from polybag.errors import PolybagError, UsageError, WriteError
from polybag.formats.bag.writer import BagWriter
from polybag.formats.mcap.writer import McapWriter
from polybag.reader import topic_filter

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "demo.mcap"
TEN = CORPORA / "mcap-conformance" / "TenMessages" / "TenMessages-ch-chx-mx-rch-rsh-sum.mcap"
LZ4_BAG = CORPORA / "rosbag" / "foxglove-rosbag" / "example-lz4.bag"
BZ2_BAG = CORPORA / "rosbag" / "foxglove-rosbag" / "example-bz2.bag"
STRING_DEF = b"string data\n"
STRING_MD5 = "992ce8a1687cec8c8bd883ec73ca41d1"


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert lines and "error:" in lines[-1]
    return err


# --- 1. CLI failures: one line, exit 3 for unreadable input / unwritable output, 2 for usage ---


def test_reindex_missing_file_exit_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reindex", str(tmp_path / "nonexist.bag")]) == 3
    assert "nonexist.bag" in _one_line_error(capsys)


def test_reindex_unwritable_output_dir_exit_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "a.bag"
    with BagWriter(p) as w:
        s = w.add_schema("std_msgs/String", "ros1msg", STRING_DEF)
        c = w.add_channel("/a", "ros1", s, {"md5sum": STRING_MD5})
        w.write(c, b"\x00\x00\x00\x00", 1)
    assert main(["reindex", "--output-dir", "/proc/x", str(p)]) == 3
    _one_line_error(capsys)


def test_convert_unwritable_output_exit_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["convert", str(SAMPLE), "/proc/zz.mcap"]) == 3
    assert "/proc/zz.mcap" in _one_line_error(capsys)


def test_cat_bad_regex_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cat", str(SAMPLE), "--topics", "("]) == 2
    assert "regular expression" in _one_line_error(capsys)


@pytest.mark.parametrize("opt", ["--start", "--end"])
def test_cat_bad_time_is_a_usage_error(opt: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cat", str(SAMPLE), opt, "abc"]) == 2
    err = _one_line_error(capsys)
    assert "usage: polybag cat" in err and "'abc'" in err


def test_topic_filter_regex_error_is_a_polybag_error() -> None:
    with pytest.raises(UsageError) as e:
        topic_filter("(", [])
    assert isinstance(e.value, PolybagError)
    with polybag.open(SAMPLE) as r, pytest.raises(PolybagError):
        list(r.messages(topics="[a-"))


# --- 2. info on an MCAP with a summary but no Statistics: never garbage counts ---


def _randomize_data_section(src: Path, dst: Path, seed: int) -> None:
    b = bytearray(src.read_bytes())
    summary_start = struct.unpack_from("<Q", b, len(b) - 8 - 4 - 8 - 8)[0]
    with polybag.open(src) as r:
        lo = r.summary.chunks[0].offset
    rng = random.Random(seed)
    for i in range(lo, summary_start - 13):  # up to the Data End record
        b[i] = rng.randrange(256)
    dst.write_bytes(bytes(b))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_info_random_data_section_counts_unknown(tmp_path: Path, seed: int, capsys: pytest.CaptureFixture[str]) -> None:
    with polybag.open(TEN) as r:
        assert r.summary.message_counts == {1: 10}  # exact when the message indexes check out
    p = tmp_path / "rnd.mcap"
    _randomize_data_section(TEN, p, seed)
    assert main(["info", "--json", str(p)]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["message_count"] in (None, 10)
    assert all(c["message_count"] in (None, 10) for c in d["channels"])
    assert main(["info", str(p)]) == 0
    out = capsys.readouterr().out
    assert "messages:     unknown" in out or "messages:     10" in out


def test_info_corrupt_message_index_header_never_trusted(tmp_path: Path) -> None:
    # only the Message Index record's array length is changed: opcode and channel still fit,
    # but the record no longer fills its declared length
    b = bytearray(TEN.read_bytes())
    with polybag.open(TEN) as r:
        c = r.summary.chunks[0]
    mi = c.offset + c.length
    assert b[mi] == 0x07
    struct.pack_into("<I", b, mi + 11, 0x7FFFFFF0)
    p = tmp_path / "mi.mcap"
    p.write_bytes(bytes(b))
    with polybag.open(p) as r:
        s = r.summary
        assert s.message_counts == {} and s.extras["message_counts"] == "unknown"


# --- 3. check: md5sum of MCAP ros1 channels, problems as {"message", "offset"} ---


def _ros1_mcap(path: Path, md5: str) -> None:
    with McapWriter(path) as w:
        s = w.add_schema("std_msgs/String", "ros1msg", STRING_DEF)
        c = w.add_channel("/chatter", "ros1", s, {"md5sum": md5})
        w.write(c, b"\x02\x00\x00\x00hi", log_time=1, publish_time=1, sequence=0)


def test_check_mcap_ros1_md5_mismatch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good, bad = tmp_path / "good.mcap", tmp_path / "bad.mcap"
    _ros1_mcap(good, STRING_MD5)
    _ros1_mcap(bad, "0" * 32)
    assert main(["check", str(good)]) == 0
    capsys.readouterr()
    assert main(["check", str(bad)]) == 1
    assert "md5sum" in capsys.readouterr().out
    assert main(["check", "--json", str(bad)]) == 1
    (res,) = json.loads(capsys.readouterr().out)
    (prob,) = res["problems"]
    assert set(prob) == {"message", "offset"}
    assert "channel 1 (/chatter)" in prob["message"] and "0" * 32 in prob["message"]


def test_check_json_problems_carry_offsets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "cut.mcap"
    data = SAMPLE.read_bytes()
    p.write_bytes(data[: len(data) // 2])
    assert main(["check", "--json", str(p)]) == 1
    (res,) = json.loads(capsys.readouterr().out)
    assert res["problems"] and all(set(q) == {"message", "offset"} for q in res["problems"])
    assert any(isinstance(q["offset"], int) for q in res["problems"])


# --- 4. info --yaml on compressed bags: uncompressed/compressed like rosbag ---


@pytest.mark.parametrize("bag", [LZ4_BAG, BZ2_BAG], ids=lambda p: p.name)
def test_info_yaml_compressed_sizes(bag: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", "--yaml", str(bag)]) == 0
    doc = yaml.safe_load(capsys.readouterr().out)
    with polybag.open(bag) as r:
        chunks = r.summary.chunks
    assert doc["uncompressed"] == sum(c.uncompressed_size for c in chunks)
    assert doc["compressed"] == sum(c.compressed_size for c in chunks)


ROSBAG = shutil.which("rosbag")


@pytest.mark.live
@pytest.mark.skipif(ROSBAG is None, reason="the Debian rosbag tool is not installed")
@pytest.mark.parametrize("bag", [LZ4_BAG, BZ2_BAG, CORPORA / "rosbag" / "foxglove-rosbag" / "example.bag"], ids=lambda p: p.name)
def test_info_yaml_keys_match_rosbag(bag: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert ROSBAG is not None
    theirs = yaml.safe_load(subprocess.run([ROSBAG, "info", "--yaml", str(bag)], capture_output=True, text=True, check=True).stdout)
    assert main(["info", "--yaml", str(bag)]) == 0
    ours = yaml.safe_load(capsys.readouterr().out)
    assert set(ours) == set(theirs)
    for k in ("messages", "size", "compression", "uncompressed", "compressed"):
        assert ours.get(k) == theirs.get(k), k


# --- 6. misspelled writer options, bz2 on MCAP ---


def test_mcap_writer_rejects_unknown_options() -> None:
    with pytest.raises(WriteError, match="chunksize"):
        McapWriter(io.BytesIO(), chunksize=10)
    with pytest.raises(WriteError, match="compresion"):
        polybag.Writer(io.BytesIO(), format="mcap", compresion="lz4")
    McapWriter(io.BytesIO(), chunk_size=10).close()  # the real names still work


def test_compress_bz2_on_mcap_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "d.mcap"
    shutil.copy(SAMPLE, p)
    before = p.read_bytes()
    assert main(["compress", "--bz2", "-q", str(p)]) == 2
    assert "bz2" in _one_line_error(capsys)
    assert p.read_bytes() == before and not (tmp_path / "d.orig.mcap").exists()


# --- 7. MCAP reads decompress only the chunks they need ---


def _many_chunks(path: Path) -> None:
    with McapWriter(path, compression="zstd", chunk_size=400) as w:
        s = w.add_schema("pkg/A", "jsonschema", b"{}")
        a = w.add_channel("/a", "json", s)
        b = w.add_channel("/b", "json", s)
        for i in range(2000):
            # /b only in the last 20 messages: its chunks are the last few
            w.write(a if i < 1980 else b, b"x" * 30, log_time=1000 * i, publish_time=0, sequence=i)


def _count_decompress(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = polybag.io.compression.decompress

    def counting(name: str, data: Any, size: int, *args: Any, **kw: Any) -> bytes:
        calls.append(int(kw.get("offset") or 0))
        return real(name, data, size, *args, **kw)

    monkeypatch.setattr(polybag.io.compression, "decompress", counting)
    return calls


@pytest.mark.parametrize("order", ["log_time", "file"])
def test_mcap_topic_and_window_decompress_only_needed_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, order: str) -> None:
    p = tmp_path / "many.mcap"
    _many_chunks(p)
    with polybag.open(p) as r:
        chunks = r.summary.chunks
        assert len(chunks) > 50 and {c.compression for c in chunks} == {"zstd"}
    calls = _count_decompress(monkeypatch)
    with polybag.open(p) as r:
        assert sum(1 for _ in r.messages(order=order)) == 2000
    assert len(calls) == len(chunks)  # the counter sees every chunk decompression
    need_b = [c for c in chunks if c.end_time >= 1980 * 1000]
    calls.clear()
    with polybag.open(p) as r:
        got = [m.sequence for m in r.messages(topics=["/b"], order=order)]
    assert got == list(range(1980, 2000))
    assert 0 < len(calls) <= len(need_b)
    t0, t1 = 1000 * 1000, 1020 * 1000  # a 1% window
    need_w = [c for c in chunks if c.end_time >= t0 and c.start_time < t1]
    calls.clear()
    with polybag.open(p) as r:
        got = [m.sequence for m in r.messages(start=t0, end=t1, order=order)]
    assert got == list(range(1000, 1020))
    assert 0 < len(calls) <= len(need_w) and len(need_w) < len(chunks) // 10
    calls.clear()
    with polybag.open(p) as r:
        got = [m.sequence for m in r.messages(start=t0, end=t1, reverse=True)]
    assert got == list(range(1019, 999, -1))
    assert 0 < len(calls) <= len(need_w)
