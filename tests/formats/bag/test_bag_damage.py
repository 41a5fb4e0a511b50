"""Damaged bags: truncation at every offset, lying length fields, random corruption.

Only polybag errors escape; truncated bags yield every intact message first; reindex
recovers what a brute-force walk of the intact file says is recoverable.
"""

from __future__ import annotations

import io
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polybag
from polybag.errors import FormatError, PolybagError
from polybag.formats.bag.reindex import reindex_bag
from polybag.formats.bag.writer import BagWriter

DEF = b"string data\n"
MD5 = "992ce8a1687cec8c8bd883ec73ca41d1"


def make_bag(compression: str = "none", chunk_size: int = 250, n: int = 24) -> tuple[bytes, list]:
    buf = io.BytesIO()
    w = BagWriter(buf, compression=compression, chunk_size=chunk_size)
    s = w.add_schema("std_msgs/String", "ros1msg", DEF)
    a = w.add_channel("/a", "ros1", s, {"md5sum": MD5})
    b = w.add_channel("/b", "ros1", s, {"md5sum": MD5})
    msgs = []
    for i in range(n):
        ch = a if i % 3 else b
        d = (5 + i % 4).to_bytes(4, "little") + bytes([65 + i % 26]) * (5 + i % 4)
        t = 10**9 * 100 + i * 1000
        w.write(ch, d, t)
        msgs.append((ch.topic, t, d))
    w.close()
    return buf.getvalue(), msgs


def brute_force_walk(data: bytes) -> tuple[list[tuple[str, int, bytes, int]], list[tuple[int, int]]]:
    """An independent walk of an intact uncompressed bag.

    Returns messages as (topic, time, payload, absolute end offset of the record, end of
    its connection record) in file order, and the (start, end) of every chunk record.
    """

    def fields(h: bytes) -> dict[str, bytes]:
        out, p = {}, 0
        while p < len(h):
            (n,) = struct.unpack_from("<I", h, p)
            k, _, v = h[p + 4 : p + 4 + n].partition(b"=")
            out[k.decode()] = v
            p += 4 + n
        return out

    msgs = []
    chunks = []
    conn_end: dict[int, int] = {}
    topics: dict[int, str] = {}
    pos = 13
    while pos < len(data):
        (hl,) = struct.unpack_from("<I", data, pos)
        h = fields(data[pos + 4 : pos + 4 + hl])
        (dl,) = struct.unpack_from("<I", data, pos + 4 + hl)
        ds = pos + 8 + hl
        if h["op"] == b"\x05":
            chunks.append((pos, ds + dl))
            q = ds
            while q < ds + dl:
                (ihl,) = struct.unpack_from("<I", data, q)
                ih = fields(data[q + 4 : q + 4 + ihl])
                (idl,) = struct.unpack_from("<I", data, q + 4 + ihl)
                ids = q + 8 + ihl
                cid = struct.unpack("<I", ih["conn"])[0]
                if ih["op"] == b"\x07":
                    conn_end.setdefault(cid, ids + idl)
                    topics[cid] = ih["topic"].decode()
                else:
                    s, ns = struct.unpack("<II", ih["time"])
                    msgs.append((topics[cid], s * 10**9 + ns, data[ids : ids + idl], ids + idl, conn_end[cid]))
                q = ids + idl
        pos = ds + dl
    return msgs, chunks


def _recovered(data: bytes) -> list[tuple[str, int, bytes]]:
    out = io.BytesIO()
    reindex_bag(data, out)
    with polybag.open(out.getvalue()) as r:
        assert r.summary.indexed
        return [(m.topic, m.log_time, bytes(m.data)) for m in r.messages(order="file")]


def test_truncation_at_every_offset_uncompressed():
    data, msgs = make_bag("none", chunk_size=150, n=14)
    walk, chunks = brute_force_walk(data)
    assert len(chunks) >= 4
    assert [(t, tt, d) for t, tt, d, _, _ in walk] == msgs
    start = 13 + 4096
    for cut in range(start, len(data) + 1):
        piece = data[:cut]
        want = [(t, tt, d) for t, tt, d, end, cend in walk if end <= cut and cend <= cut]
        assert _recovered(piece) == want, cut
        # the strict reader yields the same intact messages, then raises (unless nothing is lost)
        got = []
        with polybag.open(piece) as r:
            try:
                for m in r.messages(order="file"):
                    got.append((m.topic, m.log_time, bytes(m.data)))
                complete = True
            except FormatError as e:
                complete = False
                assert e.offset is not None
        assert got == want, cut
        if not complete:
            assert want != msgs or cut < len(data)


@pytest.mark.parametrize("compression", ["lz4", "bz2"])
def test_truncation_compressed_keeps_complete_chunks(compression):
    data, msgs = make_bag(compression, chunk_size=200, n=30)
    # chunk extents from the reader of the intact file
    with polybag.open(data) as r:
        spans = [(c.offset, c.offset + c.length, c.message_count) for c in r.summary.chunks]
    assert len(spans) > 3
    for cut in range(13 + 4096, len(data) + 1, 5):
        got = _recovered(data[:cut])
        complete = sum(n for s, e, n in spans if e <= cut)
        assert len(got) >= complete, cut
        assert got == msgs[: len(got)], cut


def test_recover_mode_reports_and_never_raises():
    data, msgs = make_bag("none")
    bad = bytearray(data)
    walk, chunks = brute_force_walk(data)
    # smash the second chunk's header length
    pos = chunks[1][0]
    bad[pos : pos + 4] = b"\xff\xff\xff\x7f"
    with polybag.open(bytes(bad), recover=True) as r:
        got = [(m.topic, m.log_time, bytes(m.data)) for m in r.messages(order="file")]
        rep = r.recovery_report
    assert rep is not None and rep["errors"] and rep["messages"] == len(got)
    # the intact index is not trusted in recover mode; the damaged chunk is skipped, others kept
    lost = [m for m in walk if chunks[1][0] <= m[3] <= chunks[1][1]]
    assert len(got) == len(msgs) - len(lost)
    # without recover: the index is intact, so the damaged chunk is only hit when read
    with polybag.open(bytes(bad)) as r:
        with pytest.raises(PolybagError):
            list(r.messages())


LENGTH_FIELDS = [0, 1, 0xFFFFFFFF, 0x7FFFFFFF, 4096, 13]


def _exercise(blob: bytes, recover: bool = False) -> None:
    try:
        with polybag.open(blob, format="bag", recover=recover) as r:
            assert r.summary.message_count >= 0
            r.info_extras()
            for _ in r.messages():
                pass
            for _ in r.messages(order="file", reverse=True, topics=["/a"], start=10**11):
                pass
    except PolybagError:
        if recover:
            raise


@pytest.mark.parametrize("compression", ["none", "lz4", "bz2"])
def test_lying_length_fields(compression):
    data, _ = make_bag(compression, chunk_size=400, n=12)
    # every u32 position that holds a record/field length in the file, found by walking
    positions = []
    pos = 13
    while pos + 4 <= len(data):
        (hl,) = struct.unpack_from("<I", data, pos)
        positions.append(pos)
        q = pos + 4
        while q < pos + 4 + hl:
            positions.append(q)
            (fl,) = struct.unpack_from("<I", data, q)
            q += 4 + fl
        (dl,) = struct.unpack_from("<I", data, pos + 4 + hl)
        positions.append(pos + 4 + hl)
        pos = pos + 8 + hl + dl
    assert len(positions) > 30
    for p in positions:
        for v in LENGTH_FIELDS:
            blob = bytearray(data)
            blob[p : p + 4] = struct.pack("<I", v)
            _exercise(bytes(blob))
            _exercise(bytes(blob), recover=True)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    comp=st.sampled_from(["none", "lz4", "bz2"]),
    edits=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=6),
    cut=st.one_of(st.none(), st.integers(0, 10**6)),
)
def test_random_corruption_only_polybag_errors(comp, edits, cut):
    data, _ = make_bag(comp, chunk_size=300, n=16)
    blob = bytearray(data)
    for p, v in edits:
        blob[13 + p % (len(blob) - 13)] = v
    if cut is not None:
        blob = blob[: 13 + cut % (len(blob) - 12)]
    _exercise(bytes(blob))
    _exercise(bytes(blob), recover=True)


def test_unknown_chunk_compression():
    data, msgs = make_bag("none", chunk_size=250, n=24)
    i = data.index(b"compression=none")
    blob = data[:i] + b"compression=zzzz" + data[i + 16 :]
    with pytest.raises(PolybagError):
        with polybag.open(blob) as r:
            list(r.messages())
    with polybag.open(blob, recover=True) as r:
        got = list(r.messages())
        assert r.recovery_report["errors"]
    assert 0 < len(got) < len(msgs)


def test_encrypted_bag_is_a_clear_unsupported_error():
    from polybag.errors import UnsupportedError
    from polybag.formats.bag.records import U32, U64, build_header

    h = build_header(
        {"op": b"\x03", "index_pos": U64.pack(0), "conn_count": U32.pack(0), "chunk_count": U32.pack(0),
         "encryptor": b"rosbag/AesCbcEncryptor"}
    )
    blob = b"#ROSBAG V2.0\n" + U32.pack(len(h)) + h + U32.pack(0)
    with pytest.raises(UnsupportedError, match="encrypted"):
        polybag.open(blob)


def test_cut_lz4_chunk_keeps_its_intact_messages():
    """An LZ4 block can be decoded up to the cut, so a cut lz4 chunk still gives the
    messages whose bytes came before the cut (bz2 cannot: its 900k block is all or nothing)."""
    data, msgs = make_bag("lz4", chunk_size=10**6, n=400)
    with polybag.open(data) as r:
        (c,) = r.summary.chunks
    previous = 0
    for frac in (0.3, 0.6, 0.9):
        cut = c.offset + 40 + int((c.length - 40) * frac)
        got = _recovered(data[:cut])
        assert got == msgs[: len(got)]
        assert len(got) > previous
        previous = len(got)
    assert previous < len(msgs)


@pytest.mark.parametrize("compression", ["none", "lz4"])
def test_killed_recording_cut_inside_trailing_index_record(compression):
    """A killed recorder's .bag.active (index_pos 0) that ends inside the index data or a new
    chunk header after its last chunk loses no message: read without error, noted."""
    full, msgs = make_bag(compression, chunk_size=150, n=20)
    i = full.index(b"index_pos=") + len(b"index_pos=")
    data = full[:i] + b"\0" * 8 + full[i + 8 :]
    with polybag.open(data) as r:
        last = r.summary.chunks[-1]
        end = last.offset + last.length  # the index data records of the last chunk follow
    chunk_head = struct.pack("<I", 28) + b"\x10\x00\x00\x00compression=none" + b"\x04\x00\x00\x00op=\x05"
    for piece in (data[: end + 3], data[: end + 20], data[:end] + chunk_head[:12], data[:end] + chunk_head):
        with polybag.open(piece) as r:
            got = [(m.topic, m.log_time, bytes(m.data)) for m in r.messages(order="file")]
            assert any("no message lost" in e for e in r.summary.extras.get("errors", []))
        assert got == msgs
    # a cut message record is still a loss: the strict reader raises
    with polybag.open(full) as r:
        first = r.summary.chunks[0]
    with pytest.raises(FormatError), polybag.open(data[: first.offset + first.length - 3]) as r:
        list(r.messages())
