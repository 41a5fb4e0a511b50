"""The fast paths of MCAP reading give the same messages as the `mcap` library reads.

Covers the bulk record-head gather (one overlapping-stride view, ``at_every_byte``), the
channel lookup table (``channel_of_each``, and its per-message dict fallback when the
ids outnumber the messages), shared ``publish_time`` objects when they equal the log
times, and the stream's flattened message iterator (``_Flat``).
"""

from __future__ import annotations

import io
import struct
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcap.reader import make_reader
from mcap.writer import CompressionType
from mcap.writer import Writer as PeerWriter

import polybag
from mcap_helpers import Pipe
from polybag.formats.mcap.bulk_kernels import MESSAGE_HEAD_DTYPE, at_every_byte, channel_of_each
from polybag.formats.mcap.records import RECORD_MESSAGE_HEAD
from polybag.formats.mcap.stream import _Flat
from polybag.formats.mcap.vocabulary import UnknownChannelId

Msg = tuple[str, int, int, int, bytes]


def peer_file(rows: list[tuple[int, int, int, int, bytes]], n_channels: int, chunk_size: int, compression: str) -> bytes:
    """An MCAP file written by the `mcap` library: rows of (channel index, log, publish, seq, data)."""
    f = io.BytesIO()
    w = PeerWriter(f, compression=CompressionType[compression.upper()], chunk_size=chunk_size)
    w.start(profile="", library="test")
    sid = w.register_schema("pkg/M", "jsonschema", b"{}")
    cids = [w.register_channel(f"/t{i}", "json", sid) for i in range(n_channels)]
    for k, lt, pt, seq, data in rows:
        w.add_message(cids[k], log_time=lt, publish_time=pt, data=data, sequence=seq)
    w.finish()
    return f.getvalue()


def peer_messages(data: bytes) -> list[Msg]:
    return [(c.topic, m.log_time, m.publish_time, m.sequence, bytes(m.data)) for _s, c, m in make_reader(io.BytesIO(data)).iter_messages(log_time_order=False)]


def ours(data: bytes, stream: bool, **kw: Any) -> list[Msg]:
    src: Any = Pipe(data) if stream else io.BytesIO(data)
    with polybag.open(src) as r:
        return [(m.topic, m.log_time, m.publish_time, m.sequence, bytes(m.data)) for m in r.messages(order="file", **kw)]


rows_strategy = st.lists(
    st.tuples(
        st.integers(0, 11),
        st.integers(0, 2**64 - 1),
        st.booleans(),  # publish time equal to the log time
        st.integers(0, 2**32 - 1),
        st.binary(max_size=90),
    ),
    max_size=300,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=rows_strategy, chunk_size=st.sampled_from([64, 700, 1 << 20]), compression=st.sampled_from(["zstd", "lz4", "none"]))
def test_stream_and_mapped_equal_the_peer(rows: list[tuple[int, int, bool, int, bytes]], chunk_size: int, compression: str) -> None:
    full = [(k, lt, lt if same else (lt * 7 + 3) % 2**64, seq, data) for k, lt, same, seq, data in rows]
    data = peer_file(full, 12, chunk_size, compression)
    want = peer_messages(data)
    assert ours(data, stream=True) == want
    assert ours(data, stream=False) == want


def test_many_channels_few_messages_per_chunk() -> None:
    """Channel ids outnumbering a chunk's messages take the dict lookup, the others the table."""
    rows = [(i % 300, 1000 + i, 1000 + i, i, bytes([i % 256]) * (i % 7)) for i in range(3000)]
    for chunk_size in (128, 1 << 20):
        data = peer_file(rows, 300, chunk_size, "zstd")
        want = peer_messages(data)
        assert len(want) == 3000
        assert ours(data, stream=True) == want
        assert ours(data, stream=False) == want
        assert ours(data, stream=True, topics=["/t7", "/t299"]) == [m for m in want if m[0] in ("/t7", "/t299")]


def test_publish_time_shared_only_when_equal() -> None:
    rows = [(0, 10 + i, 10 + i, i, b"x") for i in range(50)] + [(1, 100 + i, 5, i, b"y") for i in range(50)]
    data = peer_file(rows, 2, 1 << 20, "none")
    got = ours(data, stream=True)
    assert got == peer_messages(data)
    assert [m[2] for m in got[50:]] == [5] * 50
    assert [m[2] for m in got[:50]] == [m[1] for m in got[:50]]


def test_gather_at_every_byte_equals_struct() -> None:
    rnd = np.random.default_rng(1)
    buf = rnd.integers(0, 256, 4096, dtype=np.uint8).tobytes()
    offs = np.sort(rnd.choice(4096 - 31 + 1, 200, replace=False)).astype(np.int64)
    offs[-1] = 4096 - 31  # the last possible head
    rec = at_every_byte(buf, np.dtype("V31"))[offs].view(MESSAGE_HEAD_DTYPE)
    for o, r in zip(offs.tolist(), rec.tolist()):
        assert RECORD_MESSAGE_HEAD.unpack_from(buf, o) == r
    u8 = at_every_byte(buf, np.dtype("<u8"), 1)[offs]
    assert u8.tolist() == [struct.unpack_from("<Q", buf, o + 1)[0] for o in offs.tolist()]


@pytest.mark.parametrize("top", [5, 5000])
def test_channel_of_each(top: int) -> None:
    chans: dict[int, Any] = {i: f"ch{i}" for i in range(0, top + 1, 5)}
    cids = np.array([top, 0, 5, top, 5] * 3, np.uint16)
    assert channel_of_each(cids, chans) == [chans[c] for c in cids.tolist()]  # type: ignore[index]
    bad = np.array([0, 3, 5] * 10, np.uint16)
    with pytest.raises(UnknownChannelId) as e:
        channel_of_each(bad, chans)  # type: ignore[arg-type]
    assert e.value.cid == 3


def test_flat_close_stops_the_lists() -> None:
    made: list[int] = []
    closed: list[bool] = []

    def lists() -> Any:
        try:
            for i in range(5):
                made.append(i)
                yield [i, i]
        finally:
            closed.append(True)

    f = _Flat.over(lists())
    assert next(f) == 0
    f.close()
    assert closed == [True]
    rest = list(f)
    assert rest == [0]  # what was left of the list in hand; no further list is made
    assert made == [0]


def test_stream_messages_close_drops_the_topic_filter() -> None:
    rows = [(i % 3, 1000 + i, 1000 + i, i, b"z" * (i % 5)) for i in range(500)]
    data = peer_file(rows, 3, 256, "zstd")
    with polybag.open(Pipe(data)) as r:
        it = r.messages(topics=["/t1"], order="file")
        first = next(it)
        assert first.topic == "/t1"
        assert len(r.defs.live_wants) == 1  # type: ignore[attr-defined]
        it.close()  # type: ignore[attr-defined]
        assert r.defs.live_wants == []  # type: ignore[attr-defined]


def test_message_batches_equal_the_list() -> None:
    """A stream builds a chunk's messages in batches of ``_BATCH``: the same messages."""
    from polybag.formats.mcap import bulk_kernels as bulk
    from polybag.formats.mcap.walk_kernels import record_offsets

    rows = [(i % 3, 5000 + i, 5000 + (i % 2) * i, i, bytes([i % 251]) * (i % 13)) for i in range(2 * bulk._BATCH + 7)]
    data = peer_file(rows, 3, 1 << 22, "none")
    with polybag.open(io.BytesIO(data)) as r:
        list(r.messages())
        (off, _len, _s, _e), = r.ctx.chunk_list()  # type: ignore[attr-defined]
        buf = r.ctx.chunk_data(off)  # type: ignore[attr-defined]
        offs = np.array(record_offsets(buf), np.int64)
        offs = offs[np.frombuffer(buf, np.uint8)[offs] == 5]
        rec, sel = bulk.bulk_heads(buf, offs, r.defs.channels, None, None, None, False)  # type: ignore[attr-defined]
        whole = bulk.messages_from_heads(buf, rec, sel, r.defs.channels)  # type: ignore[attr-defined]
        parts = list(bulk.message_batches(buf, rec, sel, r.defs.channels))  # type: ignore[attr-defined]
    assert [len(p) for p in parts] == [bulk._BATCH, bulk._BATCH, 7]
    flat = [m for p in parts for m in p]
    assert [(m.channel, m.log_time, m.publish_time, m.sequence, bytes(m.data)) for m in flat] == [
        (m.channel, m.log_time, m.publish_time, m.sequence, bytes(m.data)) for m in whole
    ]
    assert ours(data, stream=True) == peer_messages(data)
