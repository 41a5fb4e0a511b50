"""Fixed-layout columns: no temporaries of the blob or column size, and exact time columns."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable

import numpy as np
import pytest

from polybag.codecs import columns as C
from polybag.codecs.ros1 import codec_for_type, definition_for


def _imu_payloads(n: int) -> tuple[object, list[bytes]]:
    codec = codec_for_type("sensor_msgs/Imu", definition_for("sensor_msgs/Imu"))
    o = codec.message_class()
    o.header.frame_id = "imu_link"
    out = []
    for i in range(n):
        o.header.seq = i
        o.header.stamp.sec, o.header.stamp.nsec = 1_700_000_000 + i, (i * 7919) % 1_000_000_000
        o.orientation.w = float(i)
        o.angular_velocity.z = -float(i)
        out.append(codec.encode(o))
    return codec, out


def _peak(fn: Callable[[], dict[str, np.ndarray]]) -> tuple[int, dict[str, np.ndarray]]:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        cols = fn()
        return tracemalloc.get_traced_memory()[1] - base, cols
    finally:
        tracemalloc.stop()


def _check_imu_columns(cols: dict[str, np.ndarray], n: int) -> None:
    assert cols["header.seq"].tolist() == list(range(n))
    assert cols["orientation.w"][-1] == n - 1 and cols["angular_velocity.z"][5] == -5.0
    assert (cols["header.frame_id"] == "imu_link").all()
    stamps = cols["header.stamp"]
    assert stamps.dtype == np.int64
    i = np.arange(n, dtype=np.int64)
    assert np.array_equal(stamps, (1_700_000_000 + i) * 1_000_000_000 + (i * 7919) % 1_000_000_000)


def test_payload_columns_never_joins_all_payloads(monkeypatch: pytest.MonkeyPatch) -> None:
    # blocks of 256 KB: the payloads are joined a block at a time into memory the allocator
    # reuses, never into one buffer of all payloads (a fresh one faulted in on every call)
    monkeypatch.setattr(C, "_CHUNK_BYTES", 256 << 10)
    codec, payloads = _imu_payloads(20_000)
    blob_bytes = sum(map(len, payloads))
    C.payload_columns(codec, payloads[:10])  # compile and cache first
    peak, cols = _peak(lambda: C.payload_columns(codec, payloads))
    out = sum(c.nbytes for c in cols.values())
    n = len(payloads)
    # beyond the outputs: the sizes (n int64) and one block; before, a blob of all payloads
    assert peak - out - 8 * n < 0.1 * blob_bytes, (peak, out, blob_bytes)
    _check_imu_columns(cols, n)


def test_fixed_layout_from_a_blob_makes_no_column_sized_temporaries() -> None:
    codec, payloads = _imu_payloads(20_000)
    n = len(payloads)
    blob = np.frombuffer(b"".join(payloads), np.uint8)
    size = len(payloads[0])
    starts = np.arange(0, n * size, size, dtype=np.int64)
    sizes = np.full(n, size, np.int64)
    peak, cols = _peak(lambda: C._walk_chunked(codec, blob, starts, sizes, C._wanted(None), None))
    out = sum(c.nbytes for c in cols.values())
    # the previous time-column code made four column-sized temporaries (about 10% of outputs)
    assert peak - out < 0.03 * out, (peak, out)
    _check_imu_columns(cols, n)


def test_fixed_layout_time_and_duration_extremes() -> None:
    codec = codec_for_type("pkg/T", "time t\nduration d\nfloat64 x\n")
    vals = [(0, 0, 0, 0), (4294967295, 999999999, -2147483648, -999999999), (1, 2, 2147483647, 5)]
    payloads = [codec.encode({"t": {"sec": a, "nsec": b}, "d": {"sec": c, "nsec": e}, "x": 1.0}) for a, b, c, e in vals]
    cols = C.payload_columns(codec, payloads)
    assert cols["t"].tolist() == [a * 1_000_000_000 + b for a, b, _, _ in vals]
    assert cols["d"].tolist() == [c * 1_000_000_000 + e for _, _, c, e in vals]


def test_blocks_with_other_strings_or_lengths(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(C, "_CHUNK_BYTES", 4 << 10)
    codec = codec_for_type("std_msgs/Header", definition_for("std_msgs/Header"))
    same_len = [codec.encode({"seq": i, "frame_id": "ab" if i < 50 else f"c{i % 3}"}) for i in range(200)]
    cols = C.payload_columns(codec, same_len)
    assert cols["frame_id"].tolist() == ["ab" if i < 50 else f"c{i % 3}" for i in range(200)]
    assert cols["seq"].tolist() == list(range(200))
    # a later block with another string length: the layout differs, the general walk answers
    other_len = [codec.encode({"seq": i, "frame_id": "ab" if i < 150 else "abc"}) for i in range(200)]
    assert C._fixed_from_payloads(codec, other_len, np.fromiter(map(len, other_len), np.int64), C._wanted(None)) is None
    cols = C.payload_columns(codec, other_len)
    assert cols["frame_id"].tolist() == ["ab"] * 150 + ["abc"] * 50
    assert cols["seq"].tolist() == list(range(200))


def test_later_block_with_same_size_but_other_string_lengths(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(C, "_CHUNK_BYTES", 1 << 10)
    codec = codec_for_type("pkg/TwoStrings", "string a\nstring b\nfloat64 x\n")
    rows = [("x", "yy") if i < 150 else ("xx", "y") for i in range(200)]
    payloads = [codec.encode({"a": a, "b": b, "x": float(i)}) for i, (a, b) in enumerate(rows)]
    assert len(set(map(len, payloads))) == 1
    sizes = np.fromiter(map(len, payloads), np.int64)
    assert C._fixed_from_payloads(codec, payloads, sizes, C._wanted(None)) is None
    cols = C.payload_columns(codec, payloads)
    assert cols["a"].tolist() == [a for a, _ in rows] and cols["b"].tolist() == [b for _, b in rows]
    assert cols["x"].tolist() == [float(i) for i in range(200)]
