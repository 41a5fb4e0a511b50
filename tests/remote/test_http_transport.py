"""The plain HTTP transport (polybag.io.http_ranges): multi-range batches and every failure."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from remote_helpers import BIG_N, RangeServer
from remote_helpers import serve as serve_dir

import polybag
from polybag.io.http_ranges import HttpRanges, http_transport
from polybag.io.remote_source import RemoteSource


@pytest.fixture
def server(remote_dir: Path) -> Iterator[RangeServer]:
    """A server of its own (faults set by one test stay out of the others)."""
    yield from serve_dir(remote_dir)


def _summary(url: str) -> tuple[polybag.Summary, dict[str, int]]:
    with polybag.open(url) as r:
        s = r.summary
        stats = r.source.stats
    assert stats is not None
    return s, stats


def test_bag_info_is_a_handful_of_requests(http: RangeServer, remote_dir: Path) -> None:
    """The chunk headers (one per chunk, about 190 of them, 1 MB apart) go out in one
    multi-range request."""
    http.reset()
    s, stats = _summary(f"{http.url}/big.bag")
    with polybag.open(str(remote_dir / "big.bag")) as local:
        assert s.chunk_count == local.summary.chunk_count > 150
        assert s == local.summary
    assert stats["requests"] <= 4
    assert http.requests == stats["requests"]
    assert http.bytes_served == stats["bytes_fetched"] < 1 << 20


def test_without_multirange_the_headers_come_one_by_one(remote_dir: Path) -> None:
    gen = serve_dir(remote_dir, multirange=False)
    srv = next(gen)
    try:
        s, stats = _summary(f"{srv.url}/big.bag")
        with polybag.open(str(remote_dir / "big.bag")) as local:
            assert s == local.summary
        assert stats["requests"] > s.chunk_count  # one each, after the refused batch
    finally:
        gen.close()


def test_full_read_through_the_transport_equals_local(http: RangeServer, remote_dir: Path) -> None:
    with polybag.open(f"{http.url}/mid.bag") as r, polybag.open(str(remote_dir / "mid.bag")) as local:
        assert isinstance(r.source, RemoteSource)
        got = [(m.channel.topic, m.log_time, bytes(m.data)) for m in r.messages()]
        assert got == [(m.channel.topic, m.log_time, bytes(m.data)) for m in local.messages()]
    assert len(got) == 150 + 15


def test_storage_options_other_than_headers_go_through_fsspec() -> None:
    assert isinstance(http_transport("http://h/x.bag", None), HttpRanges)
    assert isinstance(http_transport("https://h/x.bag", {"headers": {"Authorization": "t"}}), HttpRanges)
    assert http_transport("http://h/x.bag", {"client_kwargs": {}}) is None
    assert http_transport("s3://b/x.bag", None) is None


def test_headers_are_sent(server: RangeServer) -> None:
    seen: list[str | None] = []
    handler = server.RequestHandlerClass
    orig = handler.do_GET  # type: ignore[attr-defined]

    def spy(self: object) -> None:
        seen.append(self.headers.get("X-Token"))  # type: ignore[attr-defined]
        orig(self)

    handler.do_GET = spy  # type: ignore[attr-defined]
    try:
        with polybag.open(f"{server.url}/mid.mcap", storage_options={"headers": {"X-Token": "abc"}}) as r:
            assert r.summary.message_count == 165
    finally:
        handler.do_GET = orig  # type: ignore[attr-defined]
    assert seen and all(v == "abc" for v in seen)


def test_unreachable_server_is_a_clear_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens once it is closed
    with pytest.raises(
        polybag.PolybagError, match=rf"127.0.0.1:{port}/x.mcap: cannot open: ConnectionRefusedError"
    ):
        polybag.open(f"http://127.0.0.1:{port}/x.mcap")


def test_forbidden_is_a_clear_error(server: RangeServer) -> None:
    server.fault = "forbidden"
    with pytest.raises(polybag.PolybagError, match="cannot read .*HTTP 403 Forbidden"):
        polybag.open(f"{server.url}/mid.mcap")


def test_missing_object_names_it(server: RangeServer) -> None:
    with pytest.raises(polybag.PolybagError, match="nope.bag: cannot open: no such object"):
        polybag.open(f"{server.url}/nope.bag")


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


def test_a_server_ignoring_range_on_a_small_file_is_a_clear_error(remote_dir: Path) -> None:
    gen = serve_dir(remote_dir, ranges=False)
    srv = next(gen)
    try:
        with pytest.raises(polybag.PolybagError, match="ignores Range requests"):
            with polybag.open(f"{srv.url}/mid.bag") as r:
                list(r.messages())
    finally:
        gen.close()


def test_a_redirect_is_followed(remote_dir: Path, server: RangeServer) -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Redirect(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

        def do_HEAD(self) -> None:  # noqa: N802
            self.send_response(302)
            self.send_header("Location", f"{server.url}{self.path}")
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_HEAD  # noqa: N815

    red = ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    t = threading.Thread(target=red.serve_forever, daemon=True)
    t.start()
    try:
        with polybag.open(f"http://127.0.0.1:{red.server_address[1]}/big.mcap") as r:
            assert r.summary.message_count == BIG_N + BIG_N // 10
    finally:
        red.shutdown()
        red.server_close()
