"""Logs read over HTTP by range requests from a real web server (nginx: the ``web`` fixture,
``counted`` where requests and bytes are counted): byte counts of info, windows and full reads."""

from __future__ import annotations

from pathlib import Path

import pytest
from counting_proxy import CountingProxy
from nginx import Nginx
from remote_helpers import BIG_N, REMOTE, STEP, T0

import polybag
from polybag.io.remote_source import RemoteSource

MB = 1 << 20


def _rows(r: polybag.Reader, **kw: object) -> list[tuple[str, int, bytes]]:
    return [(m.channel.topic, m.log_time, bytes(m.data)) for m in r.messages(**kw)]  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["big.mcap", "big.bag"])
def test_info_of_a_200mb_indexed_file_fetches_under_1mb(
    counted: CountingProxy, remote_dir: Path, name: str
) -> None:
    size = (remote_dir / name).stat().st_size
    assert size > 200_000_000
    with polybag.open(f"{counted.url}/{REMOTE}/{name}") as r:
        s = r.summary
        stats = r.source.stats
    with polybag.open(str(remote_dir / name)) as local:
        expect = local.summary
    assert s.message_count == expect.message_count == BIG_N + BIG_N // 10
    assert s.start_time == expect.start_time and s.end_time == expect.end_time
    assert stats is not None
    assert stats["bytes_fetched"] < MB
    assert stats["size"] == size
    # what the server sent, counted on both ends: the proxy also counts the part headers of
    # multipart/byteranges answers (under 128 bytes a part, at most a part a chunk and two
    # for the head and the summary) and the HEAD asking the size
    assert stats["bytes_fetched"] <= counted.bytes < stats["bytes_fetched"] + 128 * (s.chunk_count + 2)
    assert stats["requests"] <= counted.requests <= stats["requests"] + 1


@pytest.mark.parametrize("name", ["big.mcap", "big.bag"])
def test_a_1_percent_window_fetches_under_10_percent(web: str, remote_dir: Path, name: str) -> None:
    size = (remote_dir / name).stat().st_size
    lo = T0 + BIG_N // 2 * STEP
    hi = lo + BIG_N // 100 * STEP
    with polybag.open(f"{web}/{name}") as r:
        got = _rows(r, start=lo, end=hi)
        stats = r.source.stats
    with polybag.open(str(remote_dir / name)) as local:
        expect = _rows(local, start=lo, end=hi)
    assert len(expect) == BIG_N // 100 + BIG_N // 1000
    assert got == expect
    assert stats is not None and stats["bytes_fetched"] < size // 10


@pytest.mark.parametrize("name", ["big.mcap", "big.bag"])
def test_one_topic_fetches_only_the_chunks_holding_it(web: str, remote_dir: Path, name: str) -> None:
    # /small is in every chunk: the whole data section is read; /big's first 1 % window is not
    lo, hi = T0, T0 + BIG_N // 100 * STEP
    with polybag.open(f"{web}/{name}") as r:
        got = _rows(r, topics=["/big"], start=lo, end=hi)
        stats = r.source.stats
    assert [t for t, _lt, _d in got] == ["/big"] * (BIG_N // 100)
    assert [int.from_bytes(d[4:12], "little") for _t, _lt, d in got] == list(range(BIG_N // 100))
    assert stats is not None and stats["bytes_fetched"] < stats["size"] // 10


@pytest.mark.parametrize("name", ["mid.mcap", "mid.bag", "unindexed.bag", "flight.ulg"])
def test_full_reads_equal_local_reads(counted: CountingProxy, remote_dir: Path, name: str) -> None:
    with polybag.open(str(remote_dir / name)) as local:
        expect = _rows(local)
        expect_summary = local.summary
    with polybag.open(f"{counted.url}/{REMOTE}/{name}") as r:
        assert isinstance(r.source, RemoteSource)
        got = _rows(r)
        assert r.summary.message_count == expect_summary.message_count
        stats = r.source.stats
    assert expect and got == expect
    # every byte, once (coalescing re-reads a few small gaps between ranges already held)
    assert stats is not None and stats["size"] <= stats["bytes_fetched"] < stats["size"] * 1.02 + (256 << 10)
    # and as the server sent them (with the part headers of any multi-range answer)
    assert counted.per_path().keys() == {f"/{REMOTE}/{name}"}
    assert stats["bytes_fetched"] <= counted.bytes < stats["size"] * 1.02 + (256 << 10)
    assert stats["requests"] <= counted.requests <= stats["requests"] + 1


@pytest.mark.parametrize("name", ["mid.mcap", "mid.bag"])
def test_reverse_and_file_order_reads_equal_local_reads(
    web: str, remote_dir: Path, name: str
) -> None:
    for kw in ({"reverse": True}, {"order": "file"}):
        with polybag.open(str(remote_dir / name)) as local:
            expect = _rows(local, **kw)
        with polybag.open(f"{web}/{name}") as r:
            assert _rows(r, **kw) == expect


def test_columns_of_a_topic_equal_local(web: str, remote_dir: Path) -> None:
    pd = pytest.importorskip("pandas")
    with polybag.open(str(remote_dir / "mid.mcap")) as local:
        expect = local.to_pandas("/small")
    with polybag.open(f"{web}/mid.mcap") as r:
        got = r.to_pandas("/small")
    pd.testing.assert_frame_equal(got, expect)


def test_a_sequential_read_uses_few_large_requests(web: str) -> None:
    with polybag.open(f"{web}/big.mcap") as r:
        n = sum(1 for _ in r.messages(topics=["/big"], order="file"))
        stats = r.source.stats
    assert n == BIG_N
    # the chunks hinted and fetched ahead in 8 MiB requests: far fewer than the ~190 chunks
    assert stats is not None and stats["requests"] < 60


def test_file_urls_are_mapped_like_paths(remote_dir: Path) -> None:
    with polybag.open((remote_dir / "mid.mcap").as_uri()) as r:
        assert not isinstance(r.source, RemoteSource)
        assert r.source.stats is None
        assert r.summary.message_count == 165


def test_missing_object_is_a_clear_error(web: str) -> None:
    with pytest.raises(polybag.PolybagError, match="no such object|cannot open"):
        polybag.open(f"{web}/nope.mcap")


def test_a_server_ignoring_range_is_a_clear_error(nginx: Nginx, web: str) -> None:
    """nginx with ``max_ranges 0``: 200 and the whole 200 MB body to every Range request."""
    with pytest.raises(polybag.PolybagError, match="Range|bytes"):
        with polybag.open(f"{nginx.url_as('norange')}/{REMOTE}/big.mcap") as r:
            r.summary  # noqa: B018


def test_unknown_url_scheme_is_a_usage_error() -> None:
    with pytest.raises(polybag.PolybagError, match="cannot read this URL|fsspec"):
        polybag.open("nosuchscheme://bucket/x.mcap")
