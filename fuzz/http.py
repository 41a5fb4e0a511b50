"""Target ``http``: polybag's HTTP client (:mod:`polybag.io.http_ranges` under :mod:`polybag.io.remote`)
against a hostile server on 127.0.0.1.

Each case serves a small real log (MCAP, bag or ULog) from two local servers (the URL's
origin and "another host": another port) whose every answer is drawn from the input:
statuses, redirects (to the other port, to itself, to other schemes), lying
``Content-Length``/``Content-Range``, multipart answers with repeated, overlapping,
unasked or endless parts and bad boundaries, truncated bodies, a slow trickle against a
tiny deadline, ``ETag``/``Last-Modified`` that change, and the object replaced by another
of the same size in the middle of the read.  ``polybag.open(url)`` then reads everything.

Invariants, beyond "only PolybagError comes out":

- the ``Authorization`` header (and the other caller header) never arrives at the other
  port: the servers record every request's headers;
- the bytes the client receives stay under a multiple of the object's size (plus a bound
  per request): counted at the client's socket reader;
- an object replaced mid-read, served with validators (ETag or Last-Modified), never gives
  a successful read of mixed data: a read that succeeds equals one version's messages.

:class:`Hostile` (the server) is also what ``tests/safety/test_remote_hostile.py`` uses.
"""

from __future__ import annotations

import random
import socket
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import polybag
from fuzz.targets import Stats, Target, attempt, pack, unpack

CLOSE = None  # an item of an answer: close the connection after what was sent


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    port: int


Answer = Iterable[bytes | float | None]


class Hostile:
    """A misbehaving HTTP/1.1 server on 127.0.0.1.  ``handler(server, request)`` gives the
    answer: bytes to send, a float to pause that many seconds, None to close the
    connection.  Every request is recorded (:attr:`requests`)."""

    def __init__(self, handler: Callable[[Hostile, Request], Answer], tls: Any = None) -> None:
        self.handler = handler
        self.tls = tls  # an ssl.SSLContext: serve https
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.sock.getsockname()[1]
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self.requests: list[Request] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.conns: set[socket.socket] = set()
        self.sent = 0
        self.thread = threading.Thread(target=self._accept, daemon=True, name=f"hostile-{self.port}")
        self.thread.start()

    def __enter__(self) -> Hostile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.stop.set()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accept
        except OSError:
            pass
        try:
            self.sock.close()
        except OSError:
            pass
        with self.lock:
            conns = list(self.conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.thread.join(5)

    def reset(self) -> None:
        with self.lock:
            self.requests.clear()
            self.sent = 0

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.conns.add(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(10)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = b""
        try:
            if self.tls is not None:
                conn = self.tls.wrap_socket(conn, server_side=True)
            while not self.stop.is_set():
                while b"\r\n\r\n" not in buf:
                    more = conn.recv(65536)
                    if not more or len(buf) > 1 << 16:
                        return
                    buf += more
                head, _, buf = buf.partition(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path = (lines[0].split(" ") + ["", ""])[:2]
                headers: dict[str, str] = {}
                for line in lines[1:]:
                    k, _, v = line.partition(":")
                    headers[k.strip().lower()] = v.strip()
                req = Request(method, path, headers, self.port)
                with self.lock:
                    self.requests.append(req)
                for item in _flat(self.handler(self, req)):
                    if item is None:
                        return
                    if isinstance(item, float):
                        if self.stop.wait(item):
                            return
                        continue
                    if self.stop.is_set():
                        return
                    conn.sendall(item)
                    with self.lock:
                        self.sent += len(item)
        except OSError:
            pass
        finally:
            with self.lock:
                self.conns.discard(conn)
            try:
                conn.close()
            except OSError:
                pass


def _flat(answer: Answer) -> Iterator[bytes | float | None]:
    """The items of an answer, nested iterables (generators of pieces) flattened once."""
    for item in answer:
        if item is None or isinstance(item, (bytes, float)):
            yield item
        else:
            yield from item  # type: ignore[misc]


# --- well-behaved answers (that faults are made of) ---------------------------------------------
@dataclass
class Obj:
    """The object a server serves, with its validators (each sent or not)."""

    data: bytes
    etag: str = '"v1"'
    last_modified: str = "Mon, 02 Jan 2026 03:04:05 GMT"
    send_etag: bool = True
    send_last_modified: bool = True
    honour_if_match: bool = True
    extra: dict[str, str] = field(default_factory=dict)

    def replace(self, data: bytes, etag: str = '"v2"', last_modified: str = "Tue, 03 Jan 2026 03:04:05 GMT") -> None:
        self.data, self.etag, self.last_modified = data, etag, last_modified

    def validators(self) -> list[str]:
        out = [f"{k}: {v}" for k, v in self.extra.items()]
        if self.send_etag:
            out.append(f"ETag: {self.etag}")
        if self.send_last_modified:
            out.append(f"Last-Modified: {self.last_modified}")
        return out


def head(status: str, headers: Sequence[str]) -> bytes:
    return (f"HTTP/1.1 {status}\r\n" + "".join(h + "\r\n" for h in headers) + "\r\n").encode("latin-1")


def ranges_of(req: Request, size: int) -> list[tuple[int, int]] | None:
    """The ``[start, end)`` ranges of a request's Range header (None: no or a bad header)."""
    spec = req.headers.get("range", "")
    if not spec.startswith("bytes="):
        return None
    out = []
    for part in spec[6:].split(","):
        a, _, b = part.strip().partition("-")
        if not a.isdigit() or not b.isdigit():
            return None
        out.append((int(a), min(size, int(b) + 1)))
    return out


def multipart(data: bytes, parts: Iterable[tuple[int, int]], total: int | str | None = None, boundary: str = "XYZ") -> bytes:
    body = b""
    for s, e in parts:
        body += (
            f"\r\n--{boundary}\r\nContent-Type: application/octet-stream\r\n"
            f"Content-Range: bytes {s}-{e - 1}/{len(data) if total is None else total}\r\n\r\n"
        ).encode("latin-1") + data[s:e]
    return body + f"\r\n--{boundary}--\r\n".encode("latin-1")


def normal(obj: Obj, req: Request) -> list[bytes | float | None]:
    """What a correct server answers (single and multi-range, HEAD, If-Match)."""
    data = obj.data
    if req.method == "HEAD":
        return [head("200 OK", [f"Content-Length: {len(data)}", "Accept-Ranges: bytes", *obj.validators()])]
    pin = req.headers.get("if-match")
    if obj.honour_if_match and pin is not None and pin != obj.etag:
        return [head("412 Precondition Failed", ["Content-Length: 0"])]
    rs = ranges_of(req, len(data))
    if not rs:
        return [head("200 OK", [f"Content-Length: {len(data)}", *obj.validators()]), data]
    if len(rs) == 1:
        s, e = rs[0]
        return [
            head(
                "206 Partial Content",
                [f"Content-Length: {e - s}", f"Content-Range: bytes {s}-{e - 1}/{len(data)}", *obj.validators()],
            ),
            data[s:e],
        ]
    body = multipart(data, rs)
    return [
        head(
            "206 Partial Content",
            ["Content-Type: multipart/byteranges; boundary=XYZ", f"Content-Length: {len(body)}", *obj.validators()],
        ),
        body,
    ]


# --- the fuzz target ---------------------------------------------------------------------------
SECRET = "Bearer FUZZ-SECRET-TOKEN"
API_KEY = "fuzz-api-key-0123456789"


class Choices:
    """The input as a stream of choices (0 once it runs out)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def byte(self) -> int:
        if self.pos >= len(self.data):
            return 0
        self.pos += 1
        return self.data[self.pos - 1]

    def pick(self, n: int) -> int:
        return self.byte() % n


def _logs() -> list[tuple[str, bytes, bytes]]:
    """(name, version A, version B of the same size): a small MCAP, bag and ULog."""
    import io

    out = []
    for fmt in ("mcap", "bag"):
        versions = []
        for fill in (b"a", b"b"):
            buf = io.BytesIO()
            w = polybag.Writer(buf, format=fmt, compression="none", chunk_size=8192)
            sch = w.add_schema("std_msgs/String", "ros1msg", b"string data\n")
            ch = w.add_channel("/chatter", "ros1", sch)
            other = w.add_channel("/other", "ros1", sch)
            for i in range(1500):  # about 200 KB: more than the open fetches (16 + 64 KiB)
                body = fill * 40 + b"%04d" % i
                w.write(ch if i % 3 else other, len(body).to_bytes(4, "little") + body, log_time=1000 + i)
            w.close()
            versions.append(buf.getvalue())
        out.append((fmt, versions[0], versions[1]))
    from fuzz.seeds import ulog_seeds

    ulogs = [u for u in ulog_seeds()[0] if 100_000 < len(u) < 1_000_000] or [u for u in ulog_seeds()[0] if len(u) > 1000]
    if ulogs:
        a = min(ulogs, key=len)
        b = bytearray(a)
        b[len(b) // 2] ^= 0xFF  # a byte inside the data: the same size, another object
        out.append(("ulog", a, bytes(b)))
    return out


def _read_all(url: str, opts: dict[str, Any]) -> list[tuple[str, int, bytes]] | None:
    """Everything a user reads: summary, messages (topic, time, data); None on a PolybagError."""

    def go() -> list[tuple[str, int, bytes]]:
        with polybag.open(url, storage_options=opts) as r:
            _ = r.summary
            return [(m.topic, m.log_time, bytes(m.data)) for m in r.messages()]

    return attempt(go)  # type: ignore[no-any-return]


class HttpTarget(Target):
    name = "http"
    doc = (
        "HTTP client: polybag.open(http://...) + a full read against hostile servers on 127.0.0.1 "
        "(redirects across ports, statuses, lying lengths and ranges, multipart abuse, trickle vs a "
        "tiny deadline, the object replaced mid-read); credentials stay on their origin, bytes bounded"
    )

    def setup(self) -> None:
        import polybag.io.http_connections as rh

        self.logs = _logs()
        self.expected: dict[bytes, list[tuple[str, int, bytes]] | None] = {}
        for _name, a, b in self.logs:
            for v in (a, b):
                try:
                    with polybag.open(v) as r:
                        self.expected[v] = [(m.topic, m.log_time, bytes(m.data)) for m in r.messages()]
                except polybag.PolybagError:
                    self.expected[v] = None
        self.received = 0
        orig = rh.DeadlineSocketIO.readinto
        target = self

        def counted(io_self: Any, b: Any) -> Any:
            n = orig(io_self, b)
            if n:
                target.received += n
            return n

        rh.DeadlineSocketIO.readinto = counted  # type: ignore[method-assign]
        self.case: dict[str, Any] = {}
        self.origin = Hostile(lambda srv, req: self._answer(srv, req))
        self.other = Hostile(lambda srv, req: self._answer(srv, req))
        self.info["seeds"] = len(self.logs)

    def teardown(self) -> None:
        self.origin.close()
        self.other.close()

    def generate(self, rng: random.Random, pool: Sequence[bytes]) -> bytes:
        if pool and rng.random() < 0.4:
            got = unpack(rng.choice(pool))
            if got is not None and len(got[1]) == 2:
                prog = bytearray(got[1][1])
                for _ in range(rng.choice((1, 2, 4))):
                    if prog and rng.random() < 0.7:
                        prog[rng.randrange(len(prog))] = rng.randrange(256)
                    else:
                        prog.insert(rng.randrange(len(prog) + 1), rng.randrange(256))
                return pack(b"HT", [got[1][0], bytes(prog[:256])])
        # mostly well-behaved answers with a few faults among them
        prog = bytearray()
        for _ in range(rng.choice((4, 8, 16, 32))):
            if rng.random() < 0.6:
                prog += bytes([0, 0])  # a normal answer
            else:
                prog += bytes([rng.randrange(1, 256), rng.randrange(256)])
        return pack(b"HT", [bytes([rng.randrange(256), rng.randrange(256)]), bytes(prog)])

    # --- the servers' answers, drawn from the input ------------------------------------------
    def _answer(self, srv: Hostile, req: Request) -> list[bytes | float | None]:
        case = self.case
        if not case:
            return [head("503 Gone", ["Content-Length: 0"]), CLOSE]
        obj: Obj = case["obj"]
        ch: Choices = case["choices"]
        with srv.lock:
            case["requests"] += 1
        if case["requests"] > 200:  # the client must not loop forever; still answer sanely
            return normal(obj, req)
        kind = ch.byte() % 24 if ch.pos < len(ch.data) else 0
        arg = ch.byte()
        size = len(obj.data)
        if kind < 7:
            return normal(obj, req)
        if kind in (7, 8, 9, 10):  # a redirect to the other port (or to itself, or elsewhere)
            dest = (self.other.url if srv is self.origin else self.origin.url) + req.path
            if kind < 10:
                return [head(f"{(301, 302, 303, 307, 308)[arg % 5]} Moved", [f"Location: {dest}", "Content-Length: 0"])]
            dest = [dest, self.origin.url + req.path, "file:///etc/passwd", "ftp://127.0.0.1/x", "//127.0.0.1:1/x",
                    "https://127.0.0.1:1/x", "http://[::1/x", req.path][arg % 8]
            return [head(f"{(301, 302, 303, 307, 308)[arg % 5]} Moved", [f"Location: {dest}", "Content-Length: 0"])]
        if kind == 11:  # a status
            st = (403, 404, 412, 416, 500, 503, 401, 200, 204, 100)[arg % 10]
            return [head(f"{st} Status", ["Content-Length: 5", *obj.validators()]), b"nope!"]
        if kind == 12:  # a lying Content-Length
            n = (2**70, -5, size * 2, 0, 1)[arg % 5]
            rs = ranges_of(req, size) or [(0, size)]
            s, e = rs[0]
            status = "200 OK" if req.method == "HEAD" else "206 Partial Content"
            return [head(status, [f"Content-Length: {n}", f"Content-Range: bytes {s}-{e - 1}/{size}", *obj.validators()]),
                    b"" if req.method == "HEAD" else obj.data[s:e], CLOSE]
        if kind == 13:  # a lying Content-Range
            rs = ranges_of(req, size) or [(0, size)]
            s, e = rs[0]
            cr = (f"bytes {s + 1}-{e}/{size}", f"bytes {s}-{e - 1}/{size + 1}", f"bytes {e}-{s}/{size}",
                  f"bytes {s}-{e - 1}/{2**70}", "bytes */*", f"bytes {s}-{e - 1}/*", "garbage")[arg % 7]
            return [head("206 Partial Content", [f"Content-Length: {e - s}", f"Content-Range: {cr}", *obj.validators()]),
                    obj.data[s:e]]
        if kind in (14, 15):  # multipart abuse
            rs = ranges_of(req, size) or [(0, min(size, 100))]
            mode = arg % 8
            if mode == 0:  # one part repeated (bounded here: the client must stop long before)
                one = multipart(obj.data, [rs[0]])[: -len("\r\n--XYZ--\r\n")]
                return [head("206 Partial Content", ["Content-Type: multipart/byteranges; boundary=XYZ",
                                                     *obj.validators()]), (one for _ in range(5000)), CLOSE]
            elif mode == 1:  # a part that was not asked for
                body = multipart(obj.data, [*rs[:-1], (0, min(size, 7))])
            elif mode == 2:  # overlapping parts
                body = multipart(obj.data, [*rs, (rs[0][0], rs[0][1])])
            elif mode == 3:  # a bad boundary
                body = multipart(obj.data, rs, boundary="OTHER")
            elif mode == 4:  # endless blank lines
                body = b"\r\n" * 200_000
            elif mode == 5:  # endless part headers
                body = b"\r\n--XYZ\r\n" + b"X-Pad: 1\r\n" * 20_000
            elif mode == 6:  # a changed total
                body = multipart(obj.data, rs, total=size + 10)
            else:  # parts out of order, truncated
                body = multipart(obj.data, list(reversed(rs)))[: max(1, (arg * 37) % 400)]
            return [head("206 Partial Content", ["Content-Type: multipart/byteranges; boundary=XYZ",
                                                 f"Content-Length: {len(body)}", *obj.validators()]), body, CLOSE]
        if kind == 16:  # a truncated body
            ans = normal(obj, req)
            if len(ans) > 1 and isinstance(ans[1], bytes):
                return [ans[0], ans[1][: len(ans[1]) // 2], CLOSE]
            return ans
        if kind == 17:  # a slow trickle (headers or body), past the tiny deadline
            ans = normal(obj, req)
            blob = b"".join(x for x in ans if isinstance(x, bytes))
            out: list[bytes | float | None] = []
            for i in range(min(len(blob), 40)):
                out += [blob[i : i + 1], 0.02]
            return [*out, CLOSE]
        if kind in (18, 19):  # the object is replaced by another of the same size
            if not case["changed"]:
                case["changed"] = True
                obj.replace(case["b"])
            return normal(obj, req)
        if kind == 20:  # the validators change (the object does not)
            obj.etag = f'"x{arg}"'
            return normal(obj, req)
        if kind == 21:  # a garbage status line or headers
            return [(b"HTTP/1.1 abc\r\n\r\n", b"\x00\x01\x02\r\n\r\n", b"HTTP/1.1 206 OK\r\n" + b"X: y\r\n" * 150 + b"\r\n",
                     b"HTTP/1.1 206 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd")[arg % 4], CLOSE]
        if kind == 22:  # a chunked body with a lying chunk size
            ans = normal(obj, req)
            if len(ans) < 2 or not isinstance(ans[1], bytes):
                return ans
            hdr = ans[0].replace(b"Content-Length", b"X-Was-Length")
            hdr = hdr[:-2] + b"Transfer-Encoding: chunked\r\n\r\n"
            body = ans[1]
            n = (len(body), len(body) + 5, 0xFFFFFFFFFFFF, 1)[arg % 4]
            return [hdr, b"%x\r\n" % n + body + b"\r\n0\r\n\r\n", CLOSE]
        return [b"HTTP/1.1 200 OK\r\n", 0.0, CLOSE]  # a connection closed mid-headers

    # --- a case ---------------------------------------------------------------------------------
    def run(self, data: bytes, stats: Stats) -> None:
        got = unpack(data)
        if got is None or len(got[1]) != 2 or len(got[1][0]) < 2:
            return
        sel, prog = got[1]
        name, a, b = self.logs[sel[0] % len(self.logs)]
        v = sel[1]
        obj = Obj(a, send_etag=bool(v & 1), send_last_modified=bool(v & 2), honour_if_match=bool(v & 4))
        validated = obj.send_etag or obj.send_last_modified
        self.case = {"obj": obj, "choices": Choices(prog), "requests": 0, "changed": False, "b": b}
        self.origin.reset()
        self.other.reset()
        self.received = 0
        opts: dict[str, Any] = {
            "headers": {"Authorization": SECRET, "X-Api-Key": API_KEY},
            "timeout": (0.3, 1.0, 5.0)[(v >> 3) % 3],
            "deadline": 5.0,
        }
        url = f"{self.origin.url}/{name}.log" + ("?sig=QUERYSECRET" if v & 0x20 else "")
        try:
            result = _read_all(url, opts)
        finally:
            self.case = {}
        stats.mark(f"{name}-{'ok' if result is not None else 'error'}")
        stats.mark("requests", len(self.origin.requests) + len(self.other.requests))
        # credentials never reach the other port
        for req in list(self.other.requests):
            if "authorization" in req.headers or "x-api-key" in req.headers:
                raise AssertionError(f"credentials sent to another port: {req.method} {req.path} {req.headers}")
        # bytes received: a multiple of the object's size, plus a bound per request
        n_req = len(self.origin.requests) + len(self.other.requests)
        bound = 8 * len(a) + n_req * (64 << 10) + (256 << 10)
        if self.received > bound:
            raise AssertionError(f"received {self.received} bytes for a {len(a)}-byte object ({n_req} requests)")
        if result is None:
            return
        changed = case_changed = obj.data is b
        if result == self.expected.get(a) or (changed and result == self.expected.get(b)):
            stats.mark("same-as-a-version")
            return
        if case_changed and not validated:
            return  # no validators: a mixture cannot be told from a change (documented)
        raise AssertionError(
            f"a successful read of {name} matches no version of it (replaced mid-read: {changed}, "
            f"validators: etag={obj.send_etag} last-modified={obj.send_last_modified})"
        )


TARGETS = [HttpTarget]
