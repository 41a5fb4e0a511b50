"""The plain HTTP transport (polybag.io.http_ranges): multi-range batches and every failure.

On a real web server (nginx: ``web``; ``counted`` where requests and bytes are counted; the
same files configured otherwise through ``Nginx.url_as``: no ranges, single ranges only,
403, a redirect, a required header).  The Python Range server (``server``) stays only for
what a real server does not do: a body cut short and an object that changes size mid-read."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from counting_proxy import CountingProxy
from nginx import TOKEN, Nginx
from remote_helpers import BIG_N, REMOTE, RangeServer
from remote_helpers import serve as serve_dir

import polybag
from polybag.io.http_ranges import HttpRanges, http_transport
from polybag.io.remote_source import RemoteSource


@pytest.fixture
def server(remote_dir: Path) -> Iterator[RangeServer]:
    """A Python Range server of its own, for the faults no real server has: a body cut
    short, an object that grew (a fault set by one test stays out of the others)."""
    yield from serve_dir(remote_dir)


def _summary(url: str) -> tuple[polybag.Summary, dict[str, int]]:
    with polybag.open(url) as r:
        s = r.summary
        stats = r.source.stats
    assert stats is not None
    return s, stats


def test_bag_info_is_a_handful_of_requests(counted: CountingProxy, remote_dir: Path) -> None:
    """The chunk headers (one per chunk, about 190 of them, 1 MB apart) go out in one
    multi-range request."""
    s, stats = _summary(f"{counted.url}/{REMOTE}/big.bag")
    with polybag.open(str(remote_dir / "big.bag")) as local:
        assert s.chunk_count == local.summary.chunk_count > 150
        assert s == local.summary
    assert stats["requests"] <= 4
    # the proxy also sees the HEAD asking the size, and counts the part headers of the
    # multipart/byteranges answers (under 128 bytes a part: a chunk header, the head, the index)
    assert stats["requests"] <= counted.requests <= stats["requests"] + 1
    assert stats["bytes_fetched"] <= counted.bytes < stats["bytes_fetched"] + 128 * (s.chunk_count + 2)
    assert counted.bytes < 1 << 20


def test_without_multirange_the_headers_come_one_by_one(nginx: Nginx, web: str, remote_dir: Path) -> None:
    """nginx with ``max_ranges 1`` answers a multi-range request with the whole object (200),
    as S3 does."""
    s, stats = _summary(f"{nginx.url_as('onerange')}/{REMOTE}/big.bag")
    with polybag.open(str(remote_dir / "big.bag")) as local:
        assert s == local.summary
    assert stats["requests"] > s.chunk_count  # one each, after the refused batch


def test_full_read_through_the_transport_equals_local(web: str, remote_dir: Path) -> None:
    with polybag.open(f"{web}/mid.bag") as r, polybag.open(str(remote_dir / "mid.bag")) as local:
        assert isinstance(r.source, RemoteSource)
        got = [(m.channel.topic, m.log_time, bytes(m.data)) for m in r.messages()]
        assert got == [(m.channel.topic, m.log_time, bytes(m.data)) for m in local.messages()]
    assert len(got) == 150 + 15


def test_storage_options_other_than_headers_go_through_fsspec() -> None:
    assert isinstance(http_transport("http://h/x.bag", None), HttpRanges)
    assert isinstance(http_transport("https://h/x.bag", {"headers": {"Authorization": "t"}}), HttpRanges)
    assert http_transport("http://h/x.bag", {"client_kwargs": {}}) is None
    assert http_transport("s3://b/x.bag", None) is None


def test_headers_are_sent(nginx: Nginx, web: str) -> None:
    """The ``token`` location answers 403 to any request without ``X-Token: TOKEN``."""
    url = f"{nginx.url_as('token')}/{REMOTE}/mid.mcap"
    with pytest.raises(polybag.PolybagError, match="HTTP 403 Forbidden"):
        polybag.open(url)
    with polybag.open(url, storage_options={"headers": {"X-Token": TOKEN}}) as r:
        assert r.summary.message_count == 165
        assert len(list(r.messages(topics=["/small"]))) == 15


def test_unreachable_server_is_a_clear_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens once it is closed
    with pytest.raises(
        polybag.PolybagError, match=rf"127.0.0.1:{port}/x.mcap: cannot open: ConnectionRefusedError"
    ):
        polybag.open(f"http://127.0.0.1:{port}/x.mcap")


def test_forbidden_is_a_clear_error(nginx: Nginx, web: str) -> None:
    url = f"{nginx.url_as('forbidden')}/{REMOTE}/mid.mcap"
    with pytest.raises(polybag.PolybagError, match=f"^{re.escape(url)}: cannot open: HTTP 403 Forbidden"):
        polybag.open(url)
    url = f"{nginx.url_as('headonly')}/{REMOTE}/mid.mcap"  # the size asked, then GET refused
    with pytest.raises(polybag.PolybagError, match=f"^{re.escape(url)}: cannot read .*HTTP 403 Forbidden"):
        with polybag.open(url) as r:
            r.summary  # noqa: B018


def test_missing_object_names_it(web: str) -> None:
    with pytest.raises(polybag.PolybagError, match="nope.bag: cannot open: no such object"):
        polybag.open(f"{web}/nope.bag")


def test_a_short_body_is_a_clear_error(server: RangeServer) -> None:
    server.fault = "short"
    with pytest.raises(polybag.PolybagError, match="short read"):  # a multi-range answer
        with polybag.open(f"{server.url}/mid.mcap") as r:
            r.summary  # noqa: B018
    server.fault = None
    with polybag.open(f"{server.url}/mid.bag") as r:
        server.fault = "short"
        with pytest.raises(polybag.PolybagError, match="short read"):  # a single-range answer
            for _m in r.messages():
                pass


def test_an_object_that_changed_size_is_a_clear_error(server: RangeServer) -> None:
    with polybag.open(f"{server.url}/mid.bag") as r:
        server.fault = "grown"  # replaced by a longer object after it was opened
        with pytest.raises(
            polybag.PolybagError, match=r"changed size while it was read \(was \d+ bytes, now \d+\)"
        ):
            for _m in r.messages():
                pass


def test_a_server_ignoring_range_on_a_small_file_is_a_clear_error(nginx: Nginx, web: str) -> None:
    """nginx with ``max_ranges 0``: 200 and the whole body to every Range request."""
    with pytest.raises(polybag.PolybagError, match="ignores Range requests"):
        with polybag.open(f"{nginx.url_as('norange')}/{REMOTE}/mid.bag") as r:
            list(r.messages())


def test_a_redirect_is_followed(nginx: Nginx, counted: CountingProxy) -> None:
    """nginx answers ``/moved/...`` with 302 to the same path without ``/moved``."""
    with polybag.open(f"{nginx.url_as('moved')}/{REMOTE}/big.mcap") as r:
        assert r.summary.message_count == BIG_N + BIG_N // 10
    # the same through the counting proxy: a relative redirect stays on the proxy
    with polybag.open(f"{counted.url}/moved/{REMOTE}/big.mcap") as r:
        assert r.summary.message_count == BIG_N + BIG_N // 10
    paths = counted.per_path()
    assert paths[f"/moved/{REMOTE}/big.mcap"][1] == 0  # the redirect carried no bytes of the log
    assert paths[f"/{REMOTE}/big.mcap"][1] > 0
