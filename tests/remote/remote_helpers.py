"""The remote tests' HTTP server honouring Range requests (on 127.0.0.1) and log generator."""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import polybag

_RANGE = re.compile(r"bytes=(\d*)-(\d*)$")
_MULTI = re.compile(r"bytes=(\d+-\d+)(,\d+-\d+)+$")

# the big files: 2000 messages of 100 KB on /big (payload: index, then zeros), 1 ms apart,
# and a small /small message every 10 ms; chunks of about 1 MB, no compression
#: where ``remote_dir`` is in the folder nginx serves (the ``web`` fixture)
REMOTE = "remote_dir"

BIG_N = 2000
BIG_PAYLOAD = 100_000
T0 = 1_700_000_000_000_000_000
STEP = 1_000_000


class RangeServer(ThreadingHTTPServer):
    """Serves ``root`` over HTTP/1.1 with single byte ranges; counts requests and bytes."""

    daemon_threads = True

    def __init__(self, root: Path, ranges: bool = True, multirange: bool = True) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.root = root
        self.ranges = ranges
        self.multirange = multirange  # answer ``bytes=a-b,c-d`` with multipart/byteranges
        #: a failure every GET shows: "forbidden" (403), "short" (half the body, then the
        #: connection closes), "grown" (Content-Range says the object is 1000 bytes larger)
        self.fault: str | None = None
        self.lock = threading.Lock()
        self.idle = threading.Condition(self.lock)
        self.in_flight = 0  # requests being answered right now
        self._requests = 0
        self._bytes_served = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def _settled(self) -> None:
        """Wait until no request is being answered: a handler counts what it sent after its
        last write, which the client may have read (and the test moved on) before the
        handler's thread ran again.  The timeout only guards against a hang."""
        with self.idle:
            self.idle.wait_for(lambda: self.in_flight == 0, timeout=60)

    @property
    def requests(self) -> int:
        """Requests answered (counted once every answer under way is done)."""
        self._settled()
        return self._requests

    @property
    def bytes_served(self) -> int:
        """The object's bytes sent (counted once every answer under way is done)."""
        self._settled()
        return self._bytes_served

    def reset(self) -> None:
        self._settled()
        with self.lock:
            self._requests = 0
            self._bytes_served = 0


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: RangeServer

    def setup(self) -> None:
        super().setup()
        # headers and body go out in two writes: without this, Nagle's algorithm holds the
        # body until the client's delayed ACK of the headers (40 ms per request)
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def do_HEAD(self) -> None:  # noqa: N802
        self._counted(head=True)

    def do_GET(self) -> None:  # noqa: N802
        self._counted(head=False)

    def _counted(self, head: bool) -> None:
        with self.server.lock:
            self.server.in_flight += 1
        try:
            self._serve(head)
        finally:
            with self.server.idle:
                self.server.in_flight -= 1
                self.server.idle.notify_all()

    def _serve(self, head: bool) -> None:
        path = self.server.root / unquote(self.path.split("?", 1)[0].lstrip("/"))
        if not path.is_file():
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        size = path.stat().st_size
        fault = None if head else self.server.fault
        if fault == "forbidden":
            self.send_response(403)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        spec = self.headers.get("Range", "")
        if self.server.ranges and self.server.multirange and _MULTI.match(spec):
            self._serve_multi(path, size, spec, head, fault)
            return
        start, end = 0, size
        m = _RANGE.match(self.headers.get("Range", "")) if self.server.ranges else None
        if m and (m.group(1) or m.group(2)):
            if m.group(1):
                start = int(m.group(1))
                end = min(size, int(m.group(2)) + 1) if m.group(2) else size
            else:
                start = max(0, size - int(m.group(2)))
            if start >= size or start >= end:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header(
                "Content-Range", f"bytes {start}-{end - 1}/{size + (1000 if fault == 'grown' else 0)}"
            )
        else:
            self.send_response(200)
        if self.server.ranges:
            self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(end - start))
        self.end_headers()
        if head:
            return
        self.wfile.flush()
        if fault == "short":
            end = start + (end - start) // 2
            self.close_connection = True
        with open(path, "rb") as f:
            sent = 0
            while sent < end - start:
                n = self.connection.sendfile(f, start + sent, end - start - sent)
                if not n:
                    break
                sent += n
        with self.server.lock:
            self.server._requests += 1
            self.server._bytes_served += sent

    def _serve_multi(self, path: Path, size: int, spec: str, head: bool, fault: str | None) -> None:
        """A multi-range request: a ``multipart/byteranges`` body (RFC 9110 14.6)."""
        parts = []
        payload = 0  # the object's bytes sent (the multipart framing is not counted)
        with open(path, "rb") as f:
            for r in spec[6:].split(","):
                a, b = (int(x) for x in r.split("-"))
                b = min(b, size - 1)
                f.seek(a)
                head_lines = f"\r\n--BOUNDARY\r\nContent-Type: application/octet-stream\r\nContent-Range: bytes {a}-{b}/{size}\r\n\r\n"
                parts.append(head_lines.encode() + f.read(b + 1 - a))
                payload += b + 1 - a
        body = b"".join(parts) + b"\r\n--BOUNDARY--\r\n"
        self.send_response(206)
        self.send_header("Content-Type", "multipart/byteranges; boundary=BOUNDARY")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if head:
            return
        if fault == "short":
            body = body[: len(body) // 2]
            self.close_connection = True
        self.wfile.write(body)
        with self.server.lock:
            self.server._requests += 1
            self.server._bytes_served += payload


def serve(root: Path, ranges: bool = True, multirange: bool = True) -> Iterator[RangeServer]:
    srv = RangeServer(root, ranges, multirange)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
        t.join()


def write_big(
    path: Path, n: int = BIG_N, payload: int = BIG_PAYLOAD, chunk_size: int = 1 << 20, **options: Any
) -> Path:
    """A log with ``n`` messages of ``payload`` bytes on /big and one on /small every ten."""
    fmt = "bag" if path.suffix == ".bag" else "mcap"
    w = polybag.Writer(str(path), format=fmt, compression="none", chunk_size=chunk_size, **options)
    sch = w.add_schema("test_msgs/Blob", "ros1msg", b"uint8[] data\n")
    big = w.add_channel("/big", "ros1", sch)
    small = w.add_channel("/small", "ros1", sch)
    body = bytearray(4 + payload)
    body[:4] = payload.to_bytes(4, "little")
    for i in range(n):
        body[4:12] = i.to_bytes(8, "little")
        w.write(big, bytes(body), log_time=T0 + i * STEP)
        if i % 10 == 0:
            w.write(small, (8).to_bytes(4, "little") + i.to_bytes(8, "little"), log_time=T0 + i * STEP + 1)
    w.close()
    return path


def lazy_bag(path: Path) -> tuple[Path, int, int]:
    """The lazy-header tests' bag (issue 17): 600 messages of 10 KB, ~60 chunks of 100 KB
    (6 MB); its path, chunk count and size."""
    write_big(path, n=600, payload=10_000, chunk_size=100_000)
    with polybag.open(str(path)) as r:
        n_chunks = len(r.chunks)  # type: ignore[attr-defined]
    return path, n_chunks, path.stat().st_size


def lazy_bag_jobs(url: str, opts: dict[str, Any], n: int = 600) -> dict[str, tuple[int, int]]:
    """Requests and bytes fetched by each job on :func:`lazy_bag`'s bag (open, a 1% window,
    a full read, ``summary``), each on a new reader."""
    out = {}
    for job in ("open", "window", "full", "info"):
        with polybag.open(url, **opts) as r:
            if job == "window":
                lo = T0 + n // 2 * STEP
                assert sum(1 for m in r.messages(start=lo, end=lo + n // 100 * STEP) if m.topic == "/big") == 6
            elif job == "full":
                assert sum(1 for _ in r.messages()) == n + n // 10
            elif job == "info":
                assert r.summary.message_count == n + n // 10
            st = r.source.stats
            out[job] = (st["requests"], st["bytes_fetched"])
    return out


def check_lazy_bag_counts(got: dict[str, tuple[int, int]], n_chunks: int, size: int) -> None:
    """The bounds of :func:`lazy_bag_jobs` on a server without multi-range (one range a request)."""
    assert n_chunks > 40
    # the open's requests: the HEAD and the first and last bytes (one range a request)
    assert got["open"][0] <= 3 and got["open"][1] < size // 20, got
    assert got["window"][0] <= 5 and got["window"][1] < size // 10, got  # not one per chunk
    # hinted: the first chunk alone (a first message costs one chunk), then a few requests
    # growing from 4 MiB (a read stopped early fetched little beyond it), not one per chunk
    assert got["full"][0] <= 6, got
    assert got["info"][0] <= n_chunks + 2, got  # every chunk header (no multi-range)


def write_chatter(w: Any) -> list[bytes]:
    """Five std_msgs/msg/String messages on /chatter through writer ``w`` (closed after);
    their CDR payloads."""
    sch = w.add_schema("std_msgs/msg/String", "ros2msg", b"string data\n")
    ch = w.add_channel("/chatter", "cdr", sch)
    payloads = [b"\x00\x01\x00\x00" + (3).to_bytes(4, "little") + b"h%d\x00" % i for i in range(5)]
    for i, p in enumerate(payloads):
        w.write(ch, p, 10_000 + i)
    w.close()
    return payloads
