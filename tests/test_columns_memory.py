"""Fixed-layout columns: no temporaries of the blob or column size, and exact time columns."""

from __future__ import annotations

import tracemalloc

import numpy as np

from polybag.codecs.columns import payload_columns
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


def test_fixed_layout_allocates_little_beyond_its_outputs() -> None:
    codec, payloads = _imu_payloads(20_000)
    blob_bytes = sum(map(len, payloads))
    payload_columns(codec, payloads[:10])  # compile and cache first
    joined = b"".join(payloads)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        cols = payload_columns(codec, payloads)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    out = sum(c.nbytes for c in cols.values())
    # payload_columns itself joins the payloads (one blob) and builds starts and sizes (n int64
    # each); beyond those and the outputs only small per-block buffers: no column-sized
    # temporaries (the previous time-column code made four, about 10% of the outputs)
    n = len(payloads)
    assert peak - out - blob_bytes - 16 * n < 0.03 * out, (peak, out, blob_bytes)
    assert len(joined) == blob_bytes
    assert cols["header.seq"].tolist() == list(range(n))
    assert cols["orientation.w"][-1] == n - 1 and cols["angular_velocity.z"][5] == -5.0
    stamps = cols["header.stamp"]
    assert stamps.dtype == np.int64
    i = np.arange(n, dtype=np.int64)
    assert np.array_equal(stamps, (1_700_000_000 + i) * 1_000_000_000 + (i * 7919) % 1_000_000_000)


def test_fixed_layout_time_and_duration_extremes() -> None:
    codec = codec_for_type("pkg/T", "time t\nduration d\nfloat64 x\n")
    vals = [(0, 0, 0, 0), (4294967295, 999999999, -2147483648, -999999999), (1, 2, 2147483647, 5)]
    payloads = [codec.encode({"t": {"sec": a, "nsec": b}, "d": {"sec": c, "nsec": e}, "x": 1.0}) for a, b, c, e in vals]
    cols = payload_columns(codec, payloads)
    assert cols["t"].tolist() == [a * 1_000_000_000 + b for a, b, _, _ in vals]
    assert cols["d"].tolist() == [c * 1_000_000_000 + e for _, _, c, e in vals]
