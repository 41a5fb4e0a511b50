"""A counting HTTP proxy for the remote tests: listens on 127.0.0.1 (a free port), forwards each
request to an upstream server and counts, per path, the requests and the response body bytes."""

from __future__ import annotations

import http.client
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"}


class CountingProxy(ThreadingHTTPServer):
    """Forwards to ``upstream`` (``host``, ``port``); ``requests``/``bytes`` are totals,
    ``per_path()`` the counts per path.  A read waits until no answer is under way."""

    daemon_threads = True

    def __init__(self, upstream: tuple[str, int]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.upstream = upstream
        self.lock = threading.Lock()
        self.idle = threading.Condition(self.lock)
        self.in_flight = 0
        self._counts: dict[str, list[int]] = {}  # path -> [requests, body bytes]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def _settled(self) -> None:
        # a handler counts what it sent after its last write, which the client may have read
        # before the handler's thread ran again; the timeout only guards against a hang
        with self.idle:
            if not self.idle.wait_for(lambda: self.in_flight == 0, timeout=60):
                raise RuntimeError("counting proxy: a request is still being answered after 60 s")

    def per_path(self) -> dict[str, tuple[int, int]]:
        """``{path: (requests, body bytes)}`` since the last reset."""
        self._settled()
        with self.lock:
            return {p: (c[0], c[1]) for p, c in self._counts.items()}

    @property
    def requests(self) -> int:
        return sum(r for r, _ in self.per_path().values())

    @property
    def bytes(self) -> int:
        return sum(b for _, b in self.per_path().values())

    def reset(self) -> None:
        self._settled()
        with self.lock:
            self._counts.clear()

    def _count(self, path: str, nbytes: int, request: bool) -> None:
        with self.lock:
            c = self._counts.setdefault(path, [0, 0])
            c[0] += request
            c[1] += nbytes


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: CountingProxy
    _up: http.client.HTTPConnection | None = None

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def finish(self) -> None:
        super().finish()
        if self._up is not None:
            self._up.close()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def do_GET(self) -> None:  # noqa: N802
        self._forward()

    def do_HEAD(self) -> None:  # noqa: N802
        self._forward()

    def _upstream(self, method: str, headers: dict[str, str]) -> http.client.HTTPResponse:
        for attempt in (0, 1):  # a kept-alive upstream connection may have been closed
            if self._up is None:
                self._up = http.client.HTTPConnection(*self.server.upstream, timeout=60)
            try:
                self._up.request(method, self.path, headers=headers)
                return self._up.getresponse()
            except (http.client.RemoteDisconnected, ConnectionError, BrokenPipeError):
                self._up.close()
                self._up = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def _forward(self) -> None:
        with self.server.lock:
            self.server.in_flight += 1
        path = self.path.split("?", 1)[0]
        try:
            self.server._count(path, 0, request=True)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
            resp = self._upstream(self.command, headers)
            self.send_response_only(resp.status, resp.reason)
            for k, v in resp.getheaders():
                if k.lower() not in _HOP:
                    self.send_header(k, v)
            body_known = resp.getheader("Content-Length") is not None or self.command == "HEAD"
            if not body_known:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            try:
                while True:
                    block = resp.read(1 << 16)
                    if not block:
                        break
                    self.wfile.write(block)
                    self.server._count(path, len(block), request=False)
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):  # the client stopped reading
                self.close_connection = True
                resp.will_close = True
            if resp.will_close and self._up is not None:
                self._up.close()
                self._up = None
        finally:
            with self.server.idle:
                self.server.in_flight -= 1
                self.server.idle.notify_all()


def serve_proxy(upstream: tuple[str, int]) -> Iterator[CountingProxy]:
    proxy = CountingProxy(upstream)
    t = threading.Thread(target=proxy.serve_forever, daemon=True)
    t.start()
    try:
        yield proxy
    finally:
        proxy.shutdown()
        proxy.server_close()
        t.join()
