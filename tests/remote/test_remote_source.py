"""RemoteSource on a fake filesystem: blocks, coalescing, read-ahead, failures."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polybag.errors import PolybagError
from polybag.io.block_map import BLOCK, COALESCE, PART
from polybag.io.read_ahead import MIN_AHEAD
from polybag.io.remote_source import RemoteSource
from polybag.io.urls import is_url


class FakeFS:
    """``cat_file`` over a bytes object, recording every request; ``fail`` makes the next
    ``fail`` requests raise."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.calls: list[tuple[int, int]] = []
        self.fail = 0
        self.lock = threading.Lock()

    def cat_file(self, path: str, start: int, end: int) -> bytes:
        with self.lock:
            self.calls.append((start, end))
            if self.fail:
                self.fail -= 1
                raise ConnectionError("connection reset")
        return self.data[start:end]


def _source(size: int) -> tuple[RemoteSource, FakeFS, bytes]:
    data = ((np.arange(size) * 7 + np.arange(size) // 251) % 256).astype(np.uint8).tobytes()
    fs = FakeFS(data)
    return RemoteSource("fake://x", fs, "x", size), fs, data


def test_need_fetches_blocks_and_the_view_holds_them() -> None:
    src, fs, data = _source(10 * BLOCK + 5)
    try:
        src.need(3 * BLOCK + 10, 20)
        assert fs.calls == [(3 * BLOCK, 4 * BLOCK)]
        assert bytes(src.view[3 * BLOCK + 10 : 3 * BLOCK + 30]) == data[3 * BLOCK + 10 : 3 * BLOCK + 30]
        src.need(3 * BLOCK, BLOCK)  # held: no request for it (a read-ahead of what follows may start)
        assert all(s >= 4 * BLOCK for s, _e in fs.calls[1:])
        src.need(10 * BLOCK, 100)  # the short last block, clipped to the object
        assert bytes(src.view[10 * BLOCK :]) == data[10 * BLOCK :]
        assert max(e for _s, e in fs.calls) == 10 * BLOCK + 5
        assert src.stats["requests"] == len(fs.calls)
        assert src.stats["bytes_fetched"] == sum(e - s for s, e in fs.calls)
    finally:
        src.close()


def test_neighbouring_ranges_share_one_request_far_ones_do_not() -> None:
    src, fs, _data = _source(4 * COALESCE)
    try:
        src.need_many([(0, 10), (BLOCK * 3, 10), (3 * COALESCE, 10)])
        assert sorted(fs.calls) == [(0, 4 * BLOCK), (3 * COALESCE, 3 * COALESCE + BLOCK)]
    finally:
        src.close()


def test_need_all_is_parts_of_at_most_PART_bytes() -> None:
    size = 2 * PART + 123
    src, fs, data = _source(size)
    try:
        src.need_all()
        assert sorted(fs.calls) == [(0, PART), (PART, 2 * PART), (2 * PART, size)]
        assert bytes(src.view) == data
    finally:
        src.close()


def test_sequential_needs_read_ahead_in_the_background() -> None:
    size = 16 << 20
    src, fs, _data = _source(size)
    try:
        step = 256 << 10
        for off in range(0, 4 << 20, step):
            src.need(off, step)
        fetched = src.stats["bytes_fetched"]
        assert fetched > 4 << 20  # read ahead of the reader
        assert fetched <= (4 << 20) * 3 + MIN_AHEAD  # about twice as far as the run is long
        before = len(fs.calls)
        src.need(4 << 20, 1 << 20)  # already fetched (or on its way): no new request of its own
        assert all(s >= 4 << 20 for s, _e in fs.calls[before:]) or len(fs.calls) == before
    finally:
        src.close()


def test_a_failed_request_is_a_polybag_error_and_is_retried_later() -> None:
    src, fs, data = _source(8 * BLOCK)
    try:
        fs.fail = 1
        with pytest.raises(PolybagError, match="fake://x: cannot read bytes 0..2048: ConnectionError"):
            src.need(0, 10)
        src.need(0, 10)
        assert bytes(src.view[:10]) == data[:10]
    finally:
        src.close()


def test_a_short_answer_is_an_error() -> None:
    src, fs, _data = _source(8 * BLOCK)
    fs.data = fs.data[:100]
    try:
        with pytest.raises(PolybagError, match="got 100 bytes"):
            src.need(0, 10)
    finally:
        src.close()


def test_is_url() -> None:
    assert is_url("s3://b/k") and is_url("https://h/x.bag") and is_url("file:///tmp/x")
    assert not is_url("/tmp/x.bag") and not is_url("C:/x") and not is_url("a.bag")


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 70_000), st.integers(0, 20_000)), max_size=8))
def test_any_needs_make_their_bytes_equal_the_object(ranges: list[tuple[int, int]]) -> None:
    src, _fs, data = _source(65_000)
    try:
        src.need_many(ranges)
        for off, ln in ranges:
            lo, hi = min(off, 65_000), min(off + ln, 65_000)
            assert bytes(src.view[lo:hi]) == data[lo:hi]
    finally:
        src.close()


def test_hinted_ranges_are_fetched_ahead_in_order_and_nothing_else() -> None:
    size = 40 << 20
    src, fs, data = _source(size)
    try:
        wanted = [(off, 300_000) for off in range(1 << 20, 30 << 20, 3 << 20)]  # gaps between
        src.hint(wanted)
        for off, ln in wanted:
            src.need(off, ln)
            assert bytes(src.view[off : off + ln]) == data[off : off + ln]
        src._pool.shutdown(wait=True)  # let background fetches end
        fetched = sorted(fs.calls)
        # only the hinted ranges (rounded to blocks): no sequential read-ahead into the gaps
        for s, e in fetched:
            assert any(s < off + ln + BLOCK and e > off - BLOCK for off, ln in wanted), (s, e)
        assert src.stats["bytes_fetched"] <= sum(ln + 2 * BLOCK for _o, ln in wanted)
    finally:
        src.close()


def test_a_hinted_long_run_goes_out_in_large_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    import polybag.io.block_map as block_map
    import polybag.io.read_ahead as read_ahead

    monkeypatch.setattr(read_ahead, "HINT_AHEAD", 4 << 20)
    monkeypatch.setattr(block_map, "PART", 1 << 20)
    size = 12 << 20
    src, fs, data = _source(size)
    try:
        src.hint([(0, size)])
        step = 64 << 10
        for off in range(0, size, step):
            src.need(off, step)
        assert bytes(src.view) == data
        assert len(fs.calls) <= size // (1 << 20) + 8  # PART-sized pieces, not one per need
    finally:
        src.close()
