"""RawReader.take_received: per-sample receive times derived from what is known for sure
(after the previous draining take, before this one returned), non-decreasing, whatever
source timestamps a peer sends."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest

from polybag.net.ros2.graph import RawReader

CDR = b"\x00\x01\x00\x00\x05\x00\x00\x00"


def _reader(batches: list[list[int]], drained_at: int) -> RawReader:
    r = RawReader.__new__(RawReader)
    r._drained_at = drained_at
    r._last_received = 0
    it = iter(batches)

    def taken(n: int) -> list[tuple[bytes, Any]]:
        return [(CDR, SimpleNamespace(valid_data=True, source_timestamp=s)) for s in next(it)]

    r._taken = taken  # type: ignore[method-assign]
    return r


def test_own_clock_samples_get_their_source_times_within_the_span() -> None:
    lo = time.time_ns()
    srcs = [lo + 1000 * i for i in range(5)]
    r = _reader([srcs], lo)
    got = r.take_received(16)
    after = time.time_ns()
    assert [s for _, s, _ in got] == srcs
    assert [t for _, _, t in got] == srcs  # (each within [lo, now]: its source time)
    assert all(lo <= t <= after for _, _, t in got)


@pytest.mark.parametrize(
    "srcs",
    [
        [-(2**63), -1, 0, 5, 2**63 - 1],  # hostile: anything a peer can put in INFO_TS
        [2**63 - 1] * 3,
        [10**18 * 9, 1, 10**18 * 9 + 5],  # a clock far ahead, out of order
        [1000, 2000, 3000],  # a clock far behind
    ],
)
def test_any_source_times_give_bounded_non_decreasing_receive_times(srcs: list[int]) -> None:
    lo = time.time_ns()
    r = _reader([srcs, srcs], lo)
    first = r.take_received(16)
    mid = time.time_ns()
    second = r.take_received(16)
    after = time.time_ns()
    times = [t for _, _, t in first + second]
    assert all(a <= b for a, b in zip(times, times[1:]))
    assert all(lo <= t <= mid for _, _, t in first)
    assert all(mid - 10**9 <= t <= after for _, _, t in second)
    assert [s for _, s, _ in first] == srcs


def test_a_skewed_clock_keeps_the_gaps_between_samples() -> None:
    lo = time.time_ns() - 10**9  # (the previous drain a second ago)
    srcs = [5_000_000, 6_000_000, 9_000_000]  # a sender whose clock is far behind
    r = _reader([srcs], lo)
    got = [t for _, _, t in r.take_received(16)]
    assert got[1] - got[0] == 1_000_000 and got[2] - got[1] == 3_000_000


def test_a_full_take_keeps_the_lower_bound() -> None:
    lo = time.time_ns()
    r = _reader([[lo - 5, lo - 4], [lo - 3]], lo)
    r.take_received(2)  # (full: older samples may still be waiting)
    assert r._drained_at == lo
    r.take_received(16)
    assert r._drained_at > lo
