"""The bag reader's bulk payload positions (:func:`polybag.formats.bag.chunks.payload_positions`: each record's header
and data lengths read as little-endian u32s through one view with an item at every byte)
give the payloads rosbags reads, and a length that points past the chunk is a
FormatError, never an IndexError or a wrong slice.  The payload arena's buffer comes from
a pool (``polybag.formats.shared.payloads.pooled_empty``) only once every view of an earlier result is
gone, and every byte a result exposes is written by the call that returns it."""

from __future__ import annotations

import gc
import struct
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rosbags.rosbag1 import Reader as PeerReader

import polybag
from polybag.errors import FormatError

messages_strategy = st.lists(
    st.tuples(st.integers(0, 2), st.integers(0, 10**12), st.binary(max_size=700)), min_size=1, max_size=80
)


def _write(path: Path, msgs: list[tuple[int, int, bytes]], compression: str, chunk_size: int) -> None:
    with polybag.Writer(str(path), format="bag", compression=compression, chunk_size=chunk_size, overwrite=True) as w:
        schema = w.add_schema("std_msgs/String", "ros1msg", "string data\n")
        chans = [w.add_channel(f"/t{i}", "ros1", schema) for i in range(3)]
        for k, t, data in msgs:
            w.write(chans[k], data, t)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(msgs=messages_strategy, compression=st.sampled_from(["none", "lz4"]), chunk_size=st.sampled_from([1, 900, 1 << 16]))
def test_topic_payloads_are_the_peers(tmp_path: Path, msgs: list[tuple[int, int, bytes]], compression: str, chunk_size: int) -> None:
    path = tmp_path / "m.bag"
    _write(path, msgs, compression, chunk_size)
    with PeerReader(path) as r:
        peer = [(c.topic, t, bytes(raw)) for c, t, raw in r.messages()]
    with polybag.open(str(path)) as bag:
        for k in range(3):
            topic = f"/t{k}"
            want = sorted(((t, d) for tp, t, d in peer if tp == topic), key=lambda e: e[0])  # (stable: file order)
            if not want:
                continue
            times, blob, starts, sizes = bag.topic_payloads(topic)
            got = [(int(t), bytes(blob[s : s + n])) for t, s, n in zip(times, starts, sizes)]
            assert got == want


def _one_chunk_bag(tmp_path: Path) -> tuple[Path, bytes, int]:
    path = tmp_path / "one.bag"
    _write(path, [(0, i, b"payload-%03d" % i) for i in range(20)], "none", 1 << 20)
    data = path.read_bytes()
    return path, data, data.index(b"payload-007")


@pytest.mark.parametrize("value", [0xFFFFFFFF, 0x7FFFFFFF, 1 << 20, 12 + 10**6])
def test_data_length_past_the_chunk_is_format_error(tmp_path: Path, value: int) -> None:
    path, data, at = _one_chunk_bag(tmp_path)
    bad = bytearray(data)
    struct.pack_into("<I", bad, at - 4, value)  # the data length before the payload
    path.write_bytes(bytes(bad))
    with polybag.open(str(path)) as bag, pytest.raises(FormatError, match="runs past the chunk end"):
        bag.topic_payloads("/t0")


def test_header_length_past_the_chunk_is_format_error(tmp_path: Path) -> None:
    path, data, at = _one_chunk_bag(tmp_path)
    # the header length of the record holding payload-007: [u32 header length][header,
    # 38 bytes][u32 data length][payload]
    head_len = struct.unpack_from("<I", data, at - 4 - 38 - 4)[0]
    assert head_len == 38  # op, conn, time (as the writer lays them out)
    bad = bytearray(data)
    struct.pack_into("<I", bad, at - 4 - 38 - 4, 0xFFFFFF00)
    path.write_bytes(bytes(bad))
    with polybag.open(str(path)) as bag, pytest.raises(FormatError):
        bag.topic_payloads("/t0")


def test_u32_view_reads_every_offset() -> None:
    """The every-byte u32 view reads the same values as struct at any offset, also the last one."""
    rng = np.random.default_rng(5)
    raw = rng.integers(0, 256, 1001, dtype=np.uint8).tobytes()
    arr = np.frombuffer(raw, np.uint8)
    every = np.ndarray((len(raw) - 3,), "<u4", arr, 0, (1,))
    idx = np.arange(len(raw) - 3)
    assert every[idx].tolist() == [struct.unpack_from("<I", raw, i)[0] for i in idx]



def _big_bag(path: Path) -> dict[str, list[tuple[int, bytes]]]:
    """~3 MB on each of two topics (an arena comes from the pool: 1-64 MiB)."""
    rng = np.random.default_rng(7)
    def text(n: int) -> bytes:  # a std_msgs/String payload: u32 length, then the letters
        return struct.pack("<I", n) + rng.integers(97, 123, n, dtype=np.uint8).tobytes()

    msgs = [(k, 1000 + i, text(3000 + 7 * k)) for i in range(1000) for k in (0, 1)]
    _write(path, msgs, "lz4", 1 << 16)
    return {f"/t{k}": [(t, d) for kk, t, d in msgs if kk == k] for k in (0, 1)}


def _payloads(bag: polybag.Reader, topic: str) -> tuple[np.ndarray, list[tuple[int, bytes]]]:
    times, blob, starts, sizes = bag.topic_payloads(topic)
    return blob, [(int(t), bytes(blob[s : s + n])) for t, s, n in zip(times, starts, sizes)]


def _addr(a: np.ndarray) -> int:
    return int(a.__array_interface__["data"][0])


@pytest.fixture
def quiet_pool() -> Iterator[None]:
    """An empty pool, and no collection while a test runs: an earlier test's result that
    the cyclic collector frees mid-test would hand its buffer to the pool."""
    from polybag.formats.shared import payloads

    gc.collect()
    gc.disable()
    payloads._pool.clear()
    try:
        yield
    finally:
        gc.enable()
        payloads._pool.clear()


def test_pooled_arena_is_reused_only_when_every_view_is_gone(tmp_path: Path, quiet_pool: None) -> None:
    from polybag.formats.shared import payloads

    path = tmp_path / "big.bag"
    want = _big_bag(path)
    with polybag.open(str(path)) as bag:
        blob, got = _payloads(bag, "/t0")
        assert got == want["/t0"]
        assert type(blob) is np.ndarray and blob.flags.writeable
        first = _addr(blob)
        keep = blob[10:20].view(np.uint16)  # a view keeps the buffer out of the pool
        del blob
        assert payloads._pool == []
        blob2, got2 = _payloads(bag, "/t1")
        assert got2 == want["/t1"] and not np.shares_memory(keep, blob2)
        assert bytes(keep.view(np.uint8)) == want["/t0"][0][1][10:20]  # untouched by the second call
        second = _addr(blob2)
        del keep
        assert len(payloads._pool) == 1  # the first buffer, back once its last view went
        del blob2
        assert len(payloads._pool) == 2
        # the next calls write into the pooled buffers (last in, first out), every byte they expose:
        # /t0 into the buffer that held /t1's payloads, and the other way round
        blob3, got3 = _payloads(bag, "/t0")
        blob4, got4 = _payloads(bag, "/t1")
        assert (_addr(blob3), _addr(blob4)) == (second, first)
        assert got3 == want["/t0"] and got4 == want["/t1"]
        cols = bag.topic_columns("/t1")
    assert type(cols["log_time"]) is np.ndarray and len(cols["log_time"]) == 1000
    assert cols["data"][0] == want["/t1"][0][1][4:].decode()
    del blob3, blob4


def test_pool_keeps_two_buffers_of_1_to_64_mib(quiet_pool: None) -> None:
    from polybag.formats.shared import payloads

    small = payloads.pooled_empty(1000)
    big = payloads.pooled_empty(65 << 20)
    mid = [payloads.pooled_empty(3 << 20) for _ in range(3)]
    assert len(small) == 1000 and len(big) == 65 << 20 and all(len(m) == 3 << 20 for m in mid)
    del small, big
    assert payloads._pool == []  # (plain np.empty below 1 MiB and above 64 MiB)
    del mid
    assert len(payloads._pool) == 2
    # a pooled buffer more than 4x the request is not handed out (it stays pooled)
    payloads._pool.clear()
    m = payloads.pooled_empty(20 << 20)
    del m
    small_one = payloads.pooled_empty(2 << 20)
    assert len(payloads._pool) == 1 and len(small_one) == 2 << 20
