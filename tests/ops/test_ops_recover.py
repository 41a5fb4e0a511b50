"""recover on files cut at many offsets keeps exactly the messages a brute-force scan finds intact.

The brute-force scanners here walk the records of the cut bytes directly from the format
descriptions (bag V2.0: ``rosbag-format-v1.x.txt``/the 2.0 layout; MCAP: the spec's
record framing), independent of polybag's readers.
"""

from __future__ import annotations

import json
import random
import struct
from pathlib import Path

import pytest

import polybag
from ops_helpers import CORPORA, rows
from polybag import ops
from polybag.cli import main

BAG_MAGIC = b"#ROSBAG V2.0\n"


def _fields(header: bytes) -> dict[str, bytes]:
    out = {}
    pos = 0
    while pos + 4 <= len(header):
        (n,) = struct.unpack_from("<I", header, pos)
        pos += 4
        name, _, value = header[pos : pos + n].partition(b"=")
        out[name.decode()] = value
        pos += n
    return out


def _records(buf: bytes, pos: int, end: int):  # type: ignore[no-untyped-def]
    """(fields, data) of every complete record in buf[pos:end]; stops at the first cut one."""
    while pos + 4 <= end:
        (hl,) = struct.unpack_from("<I", buf, pos)
        if pos + 4 + hl + 4 > end:
            return
        header = _fields(buf[pos + 4 : pos + 4 + hl])
        (dl,) = struct.unpack_from("<I", buf, pos + 4 + hl)
        dstart = pos + 8 + hl
        yield header, dstart, min(dstart + dl, end), dstart + dl <= end
        pos = dstart + dl


def bag_cut_inside_record(buf: bytes) -> bool:
    """Whether the bytes end inside a top-level record (a cut on a record boundary is invisible)."""
    end = len(BAG_MAGIC)
    for _h, _ds, de, complete in _records(buf, len(BAG_MAGIC), len(buf)):
        if not complete:
            return True
        end = de
    return end != len(buf)


def bag_intact(buf: bytes) -> list[tuple[str, int, bytes]]:
    """Messages of a cut, uncompressed bag whose record is complete and whose connection is known."""
    conns: dict[int, str] = {}
    out = []
    for h, ds, de, complete in _records(buf, len(BAG_MAGIC), len(buf)):
        op = h.get("op")
        if op == b"\x05" and h.get("compression") == b"none":
            for ih, ids, ide, icomplete in _records(buf, ds, de):
                iop = ih.get("op")
                if iop == b"\x07":
                    (cid,) = struct.unpack("<I", ih["conn"])
                    conns[cid] = ih["topic"].decode()
                elif iop == b"\x02" and icomplete:
                    (cid,) = struct.unpack("<I", ih["conn"])
                    sec, nsec = struct.unpack("<II", ih["time"])
                    if cid in conns:
                        out.append((conns[cid], sec * 10**9 + nsec, buf[ids:ide]))
        if not complete:
            break
    return out


def _make_bag(path: Path, compression: str = "none") -> None:
    rnd = random.Random(7)
    with polybag.Writer(str(path), compression=compression, chunk_size=1500) as w:
        chans = [
            w.add_channel(
                f"/t{i}",
                "ros1",
                w.add_schema("std_msgs/String", "ros1msg", b"string data\n"),
                {"callerid": f"/node{i}"},
            )
            for i in range(3)
        ]
        for k in range(120):
            text = bytes(rnd.randrange(97, 123) for _ in range(rnd.randrange(0, 60)))
            w.write(chans[k % 3], struct.pack("<I", len(text)) + text, log_time=10**9 + k * 10**7)


def test_bag_cut_at_many_offsets(tmp_path: Path) -> None:
    src = tmp_path / "src.bag"
    _make_bag(src)
    data = src.read_bytes()
    everything = rows(src)
    assert bag_intact(data) == everything
    offsets = sorted(set(range(len(BAG_MAGIC) + 4096, len(data), 173)) | {len(data) - 1, len(data)})
    for cut in offsets:
        cutf = tmp_path / "cut.bag"
        cutf.write_bytes(data[:cut])
        out = tmp_path / "fixed.bag"
        res = ops.recover(cutf, out, overwrite=True)
        want = bag_intact(data[:cut])
        got = rows(out)
        assert got == want, f"cut at {cut}"
        assert res.messages == len(want) and res.verified
        if cut == len(data):
            assert not res.lost_anything
        elif bag_cut_inside_record(data[:cut]):
            assert res.lost_anything, f"cut at {cut}: loss not reported"
        assert cutf.read_bytes() == data[:cut]  # input untouched


@pytest.mark.parametrize("compression", ["lz4", "bz2"])
def test_bag_compressed_cut(tmp_path: Path, compression: str) -> None:
    src = tmp_path / "src.bag"
    _make_bag(src, compression)
    data = src.read_bytes()
    everything = rows(src)
    for cut in range(len(BAG_MAGIC) + 4096, len(data), 997):
        cutf = tmp_path / "cut.bag"
        cutf.write_bytes(data[:cut])
        res = ops.recover(cutf, tmp_path / "fixed.bag", overwrite=True)
        got = rows(tmp_path / "fixed.bag")
        # a prefix of the original, in order, and everything of the chunks before the cut
        assert got == everything[: len(got)], f"cut at {cut}"
        assert res.lost_anything or not bag_cut_inside_record(data[:cut])


def test_recover_cli_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    example = CORPORA / "rosbag" / "foxglove-rosbag" / "example.bag"
    assert main(["recover", str(example), str(tmp_path / "ok.bag"), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["messages"] == 8647 and d["lost_anything"] is False and d["verified"] is True
    cut = tmp_path / "cut.bag"
    cut.write_bytes(example.read_bytes()[:500_000])
    assert main(["recover", str(cut), str(tmp_path / "fixed.bag"), "--json"]) == 1
    d = json.loads(capsys.readouterr().out)
    assert d["lost_anything"] is True and 0 < d["messages"] < 8647
    assert rows(tmp_path / "fixed.bag") == bag_intact(cut.read_bytes())


# --- MCAP ----------------------------------------------------------------------------------
MCAP_MAGIC = b"\x89MCAP0\r\n"


def mcap_intact(buf: bytes) -> list[tuple[str, int, bytes]]:
    """Messages of a cut, unchunked MCAP whose record (and channel record) is complete."""
    pos = len(MCAP_MAGIC)
    channels: dict[int, str] = {}
    out = []
    while pos + 9 <= len(buf):
        op = buf[pos]
        (n,) = struct.unpack_from("<Q", buf, pos + 1)
        body = pos + 9
        if body + n > len(buf):
            break
        if op == 0x04:  # Channel: id u16, schema_id u16, topic string
            cid, _sid, tl = struct.unpack_from("<HHI", buf, body)
            channels[cid] = buf[body + 8 : body + 8 + tl].decode()
        elif op == 0x05:  # Message: channel_id u16, sequence u32, log_time u64, publish_time u64, data
            cid, _seq, log_time, _pub = struct.unpack_from("<HIQQ", buf, body)
            if cid in channels:
                out.append((channels[cid], log_time, buf[body + 22 : body + n]))
        elif op == 0x0F or op == 0x02:  # DataEnd / Footer
            break
        pos = body + n
    return out


def test_mcap_cut_at_many_offsets(tmp_path: Path) -> None:
    try:
        src = tmp_path / "src.mcap"
        w = polybag.Writer(str(src), use_chunking=False, compression="none")
    except (TypeError, polybag.PolybagError, ImportError) as e:
        pytest.skip(f"unchunked MCAP writing not available: {e}")
    with w:
        s = w.add_schema("std_msgs/String", "ros1msg", b"string data\n")
        chans = [w.add_channel(f"/t{i}", "ros1", schema=s) for i in range(3)]
        for k in range(90):
            text = b"x" * (k % 37)
            w.write(
                chans[k % 3], struct.pack("<I", len(text)) + text, log_time=k * 1000, publish_time=k * 1000
            )
    data = src.read_bytes()
    everything = rows(src)
    if mcap_intact(data) != everything:
        pytest.skip("the MCAP writer chunks even with chunk_size=0")
    for cut in sorted(set(range(len(MCAP_MAGIC) + 1, len(data), 61)) | {len(data)}):
        cutf = tmp_path / "cut.mcap"
        cutf.write_bytes(data[:cut])
        res = ops.recover(cutf, tmp_path / "fixed.mcap", overwrite=True)
        want = mcap_intact(data[:cut])
        assert rows(tmp_path / "fixed.mcap") == want, f"cut at {cut}"
        assert res.verified and res.messages == len(want)
        if cut < len(data) and len(want) < len(everything):
            assert res.lost_anything, f"cut at {cut}"


def test_mcap_chunked_cut(tmp_path: Path) -> None:
    src = tmp_path / "src.mcap"
    example = CORPORA / "rosbag" / "foxglove-rosbag" / "example.bag"
    ops.convert(example, src, chunk_size=16 * 1024)
    data = src.read_bytes()
    everything = rows(src)
    lossy = 0
    for cut in range(len(data) // 10, len(data), len(data) // 7):
        cutf = tmp_path / "cut.mcap"
        cutf.write_bytes(data[:cut])
        res = ops.recover(cutf, tmp_path / "fixed.mcap", overwrite=True)
        got = rows(tmp_path / "fixed.mcap")
        assert got == everything[: len(got)]
        if len(got) < len(everything):
            assert res.lost_anything
            lossy += 1
    assert lossy >= 3


# --- ULog ----------------------------------------------------------------------------------
def ulog_intact(buf: bytes) -> tuple[list[tuple[str, bytes]], bool]:
    """(topic, payload) of every complete 'D' message after its 'A', and whether the cut is inside a message."""
    pos = 16
    subs: dict[int, str] = {}
    out = []
    while pos + 3 <= len(buf):
        size, typ = struct.unpack_from("<HB", buf, pos)
        end = pos + 3 + size
        if end > len(buf):
            return out, True
        body = buf[pos + 3 : end]
        if typ == ord("A"):
            _multi, msg_id = struct.unpack_from("<BH", body, 0)
            subs[msg_id] = body[3:].decode()
        elif typ == ord("D"):
            (msg_id,) = struct.unpack_from("<H", body, 0)
            if msg_id in subs:
                out.append((subs[msg_id], bytes(body[2:])))
        pos = end
    return out, pos != len(buf)


def _ulog_rows(path: Path) -> list[tuple[str, bytes]]:
    with polybag.open(path) as r:
        return sorted(
            (m.channel.topic, bytes(m.data))
            for m in r.messages(order="file")
            if m.channel.topic != "log_message"
        )


def test_ulog_cut_at_many_offsets(tmp_path: Path) -> None:
    data = (CORPORA / "ulog" / "sample_log_small.ulg").read_bytes()
    full, _ = ulog_intact(data)
    assert sorted(full) == _ulog_rows(CORPORA / "ulog" / "sample_log_small.ulg")
    rnd = random.Random(3)
    # where the data section starts: the first 'A' record
    cuts = sorted({rnd.randrange(len(data) // 3, len(data)) for _ in range(12)} | {len(data)})
    for cut in cuts:
        cutf = tmp_path / "cut.ulg"
        cutf.write_bytes(data[:cut])
        res = ops.recover(cutf, tmp_path / "fixed.ulg", overwrite=True)
        want, inside = ulog_intact(data[:cut])
        assert _ulog_rows(tmp_path / "fixed.ulg") == sorted(want), f"cut at {cut}"
        assert res.verified
        if inside:
            assert res.lost_anything, f"cut at {cut}"
        if cut == len(data):
            assert not res.lost_anything
    # the ULog's info and parameters survive recovery
    pyulog = pytest.importorskip("pyulog")
    a = pyulog.ULog(str(CORPORA / "ulog" / "sample_log_small.ulg"))
    b = pyulog.ULog(str(tmp_path / "fixed.ulg"))
    assert a.msg_info_dict == b.msg_info_dict and a.initial_parameters == b.initial_parameters
