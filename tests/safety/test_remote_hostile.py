"""Remote reads against hostile servers (issue 26): a server is untrusted input.

Every server here is a small misbehaving HTTP/1.1 server on 127.0.0.1 (``fuzz.http.Hostile``,
shared with the ``http`` fuzz target): it records every request's headers, and answers as
each test tells it; an S3 object replaced mid-read is replaced on a real S3 server
(SeaweedFS, tests/remote/seaweed.py), versioned or not.  What is checked, at the level a user meets it (``polybag.open(url)``,
the ``polybag`` CLI):

- credentials (``Authorization``, the other ``storage_options["headers"]``, the ``gs://``
  bearer token) never reach another scheme/host/port through a redirect; https never
  redirects to http; redirects are bounded;
- a server that trickles fails by a deadline (settable) with an error naming the URL;
- a multipart answer can hold only the ranges asked for, each once: bytes received stay
  bounded by what was asked for; lying lengths and ranges are clear errors;
- an object replaced by another of the same size mid-read is an error, never a mixture;
- no URL secret (user info, query values) or token appears in an error, and a server's
  text is escaped.

Bounds are checked by counting (requests, bytes received at the client's socket), never by
timing.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polybag
from polybag.errors import PolybagError

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # the hostile server lives in the top-level fuzz/ package
    sys.path.insert(0, str(ROOT))

from fuzz.http import CLOSE, Hostile, Obj, Request, head, multipart, normal, ranges_of  # noqa: E402

TOKEN = "Bearer sekret-token-0123456789"
API_KEY = "api-key-9876543210"
CREDS = {"headers": {"Authorization": TOKEN, "X-Api-Key": API_KEY}}


def _log(fmt: str, fill: bytes, n: int = 2000) -> bytes:
    """A small log of ``n`` messages in chunks of about 4 KiB; ``fill`` changes the payloads,
    not the size (two fills: two objects of the same size)."""
    buf = io.BytesIO()
    w = polybag.Writer(buf, format=fmt, compression="none", chunk_size=4096)
    sch = w.add_schema("std_msgs/String", "ros1msg", b"string data\n")
    ch = w.add_channel("/chatter", "ros1", sch)
    for i in range(n):
        body = fill * 100 + b"%05d" % i
        w.write(ch, len(body).to_bytes(4, "little") + body, log_time=1000 + i)
    w.close()
    return buf.getvalue()


@pytest.fixture(scope="module")
def logs() -> dict[str, tuple[bytes, bytes]]:
    out = {fmt: (_log(fmt, b"a"), _log(fmt, b"b")) for fmt in ("bag", "mcap")}
    for a, b in out.values():
        assert len(a) == len(b) and a != b
    return out


def _messages(target: Any, **kw: Any) -> list[tuple[str, int, bytes]]:
    with polybag.open(target, **kw) as r:
        return [(m.topic, m.log_time, bytes(m.data)) for m in r.messages()]


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "polybag", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture()
def serve() -> Iterator[Any]:
    """Start Hostile servers (closed after the test)."""
    started: list[Hostile] = []

    def start(handler: Any, tls: Any = None) -> Hostile:
        srv = Hostile(handler, tls)
        started.append(srv)
        return srv

    yield start
    for srv in started:
        srv.close()


def _has_creds(req: Request) -> bool:
    return "authorization" in req.headers or "x-api-key" in req.headers


# --- redirects ---------------------------------------------------------------------------------
def test_a_redirect_to_another_port_drops_the_callers_headers(serve: Any, logs: Any) -> None:
    data = logs["bag"][0]
    obj = Obj(data)
    other = serve(lambda s, r: normal(obj, r))
    origin = serve(
        lambda s, r: [head("302 Found", [f"Location: {other.url}{r.path}", "Content-Length: 0"])]
    )
    assert _messages(f"{origin.url}/x.bag", storage_options=CREDS) == _messages(data)
    assert origin.requests and all(r.headers.get("authorization") == TOKEN for r in origin.requests)
    assert other.requests and not any(_has_creds(r) for r in other.requests)


def test_the_gs_bearer_token_stays_on_the_endpoint(
    serve: Any, logs: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from polybag.io.gcs import have_gcsfs

    if have_gcsfs():
        pytest.skip("gcsfs reads gs:// here")
    data = logs["mcap"][0]
    obj = Obj(data)
    other = serve(lambda s, r: normal(obj, r))
    emulator = serve(lambda s, r: [head("307 Temporary Redirect", [f"Location: {other.url}/elsewhere", "Content-Length: 0"])])
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator.url)
    monkeypatch.setenv("GOOGLE_OAUTH_ACCESS_TOKEN", "ya29.gcs-token-abcdef")
    assert _messages("gs://bucket/run.mcap") == _messages(data)
    assert emulator.requests[0].headers.get("authorization") == "Bearer ya29.gcs-token-abcdef"
    assert other.requests and not any("authorization" in r.headers for r in other.requests)


def test_a_redirect_on_the_same_origin_keeps_the_headers(serve: Any, logs: Any) -> None:
    data = logs["bag"][0]
    obj = Obj(data)

    def answer(s: Hostile, r: Request) -> Any:
        if r.path == "/moved.bag":
            return [head("301 Moved", ["Location: /real.bag", "Content-Length: 0"])]
        return normal(obj, r)

    srv = serve(answer)
    assert _messages(f"{srv.url}/moved.bag", storage_options=CREDS) == _messages(data)
    real = [r for r in srv.requests if r.path == "/real.bag"]
    assert real and all(r.headers.get("authorization") == TOKEN for r in real)


def test_credentials_stay_dropped_after_the_chain_left_the_origin(serve: Any, logs: Any) -> None:
    """origin -> other port -> back to the origin's port: the other host chose the last hop,
    so nothing is sent there either (the chain is not trusted once it left)."""
    data = logs["bag"][0]
    obj = Obj(data)
    holder: dict[str, Hostile] = {}

    def at_origin(s: Hostile, r: Request) -> Any:
        if r.path == "/start.bag":
            return [head("302 Found", [f"Location: {holder['other'].url}/hop", "Content-Length: 0"])]
        return normal(obj, r)

    origin = serve(at_origin)
    holder["other"] = serve(lambda s, r: [head("302 Found", [f"Location: {origin.url}/back.bag", "Content-Length: 0"])])
    assert _messages(f"{origin.url}/start.bag", storage_options=CREDS) == _messages(data)
    back = [r for r in origin.requests if r.path == "/back.bag"]
    assert back and not any(_has_creds(r) for r in back)
    assert not any(_has_creds(r) for r in holder["other"].requests)


def test_redirects_are_bounded(serve: Any) -> None:
    srv = serve(lambda s, r: [head("302 Found", [f"Location: {r.path}x", "Content-Length: 0"])])
    with pytest.raises(PolybagError, match=r"more than 5 redirects") as e:
        polybag.open(f"{srv.url}/loop.bag")
    assert srv.url in str(e.value)
    assert len(srv.requests) == 6


@pytest.mark.parametrize("location", ["file:///etc/passwd", "ftp://127.0.0.1/x.bag", "http://[::1/x"])
def test_a_redirect_to_another_scheme_is_refused(serve: Any, location: str) -> None:
    srv = serve(lambda s, r: [head("302 Found", [f"Location: {location}", "Content-Length: 0"])])
    with pytest.raises(PolybagError, match=r"redirect") as e:
        polybag.open(f"{srv.url}/x.bag")
    assert srv.url in str(e.value)


def _tls_context(tmp_path: Path) -> tuple[Any, Path]:
    """A server context with a self-signed certificate for 127.0.0.1, and the certificate."""
    pytest.importorskip("cryptography")
    import datetime
    import ipaddress
    import ssl

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_file = tmp_path / "cert.pem"
    key_file = tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert_file, key_file)
    return ctx, cert_file


def test_a_redirect_from_https_to_http_is_refused(
    serve: Any, logs: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx, cert = _tls_context(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # the client trusts the test's certificate
    data = logs["bag"][0]
    obj = Obj(data)
    plain = serve(lambda s, r: normal(obj, r))
    secure = serve(lambda s, r: normal(obj, r), tls=ctx)
    # https itself works (and is read whole) ...
    assert _messages(f"{secure.url}/x.bag", storage_options=CREDS) == _messages(data)
    # ... but a redirect down to http is refused before anything is sent there
    down = serve(lambda s, r: [head("302 Found", [f"Location: {plain.url}{r.path}", "Content-Length: 0"])], tls=ctx)
    with pytest.raises(PolybagError, match=r"refused a redirect from https to http") as e:
        polybag.open(f"{down.url}/x.bag", storage_options=CREDS)
    assert down.url in str(e.value)
    assert plain.requests == []


def test_the_fsspec_path_does_not_forward_authorization(serve: Any, logs: Any) -> None:
    """An http URL with fsspec-only storage options goes through fsspec/aiohttp: aiohttp
    drops Authorization when a redirect changes the origin (what polybag relies on there)."""
    pytest.importorskip("aiohttp")
    data = logs["mcap"][0]
    obj = Obj(data)
    other = serve(lambda s, r: normal(obj, r))
    origin = serve(lambda s, r: [head("302 Found", [f"Location: {other.url}{r.path}", "Content-Length: 0"])])
    opts = {"headers": {"Authorization": TOKEN}, "client_kwargs": {}}
    try:
        _messages(f"{origin.url}/x.mcap", storage_options=opts)
    except PolybagError:
        pass  # fsspec may refuse the server's answers; what matters is what was sent
    assert origin.requests and other.requests
    assert not any("authorization" in r.headers for r in other.requests)


# --- time -----------------------------------------------------------------------------------------
def _trickle(obj: Obj, every: float = 0.2) -> Any:
    """Answers sent one byte at a time, ``every`` seconds apart (about forever for a test)."""

    def answer(s: Hostile, r: Request) -> Any:
        blob = b"".join(x for x in normal(obj, r) if isinstance(x, bytes))
        for i in range(len(blob)):
            yield blob[i : i + 1]
            yield every

    return answer


def test_a_trickling_server_fails_by_the_request_deadline(serve: Any, logs: Any) -> None:
    srv = serve(_trickle(Obj(logs["bag"][0])))
    with pytest.raises(PolybagError, match=r"within the deadline of 2 s") as e:
        polybag.open(f"{srv.url}/slow.bag", storage_options={"timeout": 2})
    assert f"{srv.url}/slow.bag" in str(e.value)
    assert len(srv.requests) == 1  # the first request (HEAD): nothing after it


def test_a_trickling_body_fails_by_the_deadline(serve: Any, logs: Any) -> None:
    obj = Obj(logs["bag"][0])
    slow = _trickle(obj, 0.05)

    def answer(s: Hostile, r: Request) -> Any:
        return normal(obj, r) if r.method == "HEAD" else slow(s, r)  # headers fast on HEAD only

    srv = serve(answer)
    with pytest.raises(PolybagError, match=r"deadline") as e:
        polybag.open(f"{srv.url}/slow.bag", storage_options={"timeout": 1})
    assert srv.url in str(e.value)


def test_a_trickled_tls_handshake_fails_by_the_deadline() -> None:
    """A server that starts a TLS record and sends the rest a byte at a time: the handshake
    is many receives, each within the receive timeout; the request's deadline ends it."""
    import socket
    import threading

    lsock = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        try:
            conn, _ = lsock.accept()
        except OSError:
            return
        with conn:
            try:
                conn.sendall(b"\x16\x03\x03\x40\x00")  # a handshake record of 16 KiB...
                while not stop.wait(0.1):
                    conn.sendall(b"\x00")  # ... that never ends
            except OSError:
                pass

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    url = f"https://127.0.0.1:{lsock.getsockname()[1]}/x.bag"
    try:
        with pytest.raises(PolybagError, match=r"within the deadline of 1 s") as e:
            polybag.open(url, storage_options={"timeout": 1})
        assert url in str(e.value)
    finally:
        stop.set()
        lsock.close()
        t.join(5)


def test_the_operation_deadline_bounds_an_open(serve: Any, logs: Any) -> None:
    """Each request inside its (long) deadline, the open as a whole past its (short) one."""
    srv = serve(_trickle(Obj(logs["bag"][0]), 0.1))
    with pytest.raises(PolybagError, match=r"operation did not finish within its deadline of 1 s") as e:
        polybag.open(f"{srv.url}/slow.bag", storage_options={"timeout": 1000, "deadline": 1})
    assert srv.url in str(e.value)


def test_the_deadline_from_the_environment_and_the_cli(serve: Any, logs: Any) -> None:
    srv = serve(_trickle(Obj(logs["bag"][0])))
    p = _cli("info", f"{srv.url}/slow.bag", env={"POLYBAG_HTTP_TIMEOUT": "1.5"})
    assert p.returncode != 0
    assert f"{srv.url}/slow.bag" in p.stderr and "deadline of 1.5 s" in p.stderr
    assert "unexpected" not in p.stderr and "Traceback" not in p.stderr


@pytest.mark.parametrize("bad", [0, -1, "soon", float("nan"), float("inf")])
def test_a_bad_deadline_is_a_usage_error(bad: Any) -> None:
    with pytest.raises(polybag.errors.UsageError, match=r"timeout must be a positive number of seconds"):
        polybag.open("http://127.0.0.1:9/x.bag", storage_options={"timeout": bad})


# --- what a multipart answer may hold -------------------------------------------------------------
def _multi(obj: Obj, body_for: Any) -> Any:
    """A server answering multi-range requests with ``body_for(ranges, data)``, the rest normally."""

    def answer(s: Hostile, r: Request) -> Any:
        rs = ranges_of(r, len(obj.data))
        if r.method != "GET" or not rs or len(rs) < 2:
            return normal(obj, r)
        body = body_for(rs, obj.data)
        if not isinstance(body, list):
            body = [body]
        return [head("206 Partial Content", ["Content-Type: multipart/byteranges; boundary=XYZ"]), *body, CLOSE]

    return answer


def _endless_repeat(rs: list[tuple[int, int]], data: bytes) -> Any:
    part = multipart(data, [rs[0]])[: -len("\r\n--XYZ--\r\n")]
    return (part for _ in range(1_000_000))  # about forever (stops when the client hangs up)


#: hostile multipart answers: what the body is made of, what the error says
HOSTILE_MULTIPART = {
    "repeated forever": (_endless_repeat, r"sent bytes 0\.\.16384 again, which were not asked for"),
    "a part not asked for": (lambda rs, d: multipart(d, [*rs[:-1], (1, 9)]), r"bytes 1\.\.9, which were not asked for"),
    "overlapping": (lambda rs, d: multipart(d, [rs[0], (rs[0][0] + 1, rs[0][1])]), r"which were not asked for"),
    "the same part twice": (lambda rs, d: multipart(d, [rs[0], rs[0], *rs[1:]]), r"again, which were not asked for"),
    "a bad boundary": (lambda rs, d: multipart(d, rs, boundary="OTHER"), r"a malformed multipart answer"),
    "endless blank lines": (
        lambda rs, d: (b"\r\n" * 1000 for _ in range(100_000)),
        r"multipart answer is longer than the ranges asked for",
    ),
    "endless part headers": (
        lambda rs, d: [b"\r\n--XYZ\r\n", *(b"X-Pad: 1\r\n" * 100 for _ in range(100_000))],
        r"more than 32 header lines",
    ),
    "a negative length": (lambda rs, d: multipart(d, [(rs[0][1], rs[0][0])]), r"without a valid Content-Range"),
    "a huge range": (lambda rs, d: multipart(d, [(rs[0][0], 2**70)]), r"which were not asked for"),
    "a huge total": (lambda rs, d: multipart(d, rs, total=2**70), r"changed size while it was read"),
    "no Content-Range": (
        lambda rs, d: b"\r\n--XYZ\r\nContent-Type: x\r\n\r\nabc\r\n--XYZ--\r\n",
        r"a part without a valid Content-Range",
    ),
    "a malformed Content-Range": (
        lambda rs, d: multipart(d, rs).replace(b"bytes ", b"bytes -", 1),
        r"a part without a valid Content-Range",
    ),
    "a short part": (lambda rs, d: multipart(d, rs)[:200], r"short read"),
}


@pytest.mark.parametrize("kind", sorted(HOSTILE_MULTIPART))
def test_a_hostile_multipart_answer_is_a_clear_error_and_bounded(serve: Any, logs: Any, kind: str) -> None:
    data = logs["bag"][0]
    body, message = HOSTILE_MULTIPART[kind]
    srv = serve(_multi(Obj(data), body))
    from polybag.io.http_ranges import HttpRanges
    from polybag.io.remote import open_url

    received = []
    orig = HttpRanges.close

    def close(self: HttpRanges) -> None:  # the bytes this transport received, at its close
        orig(self)
        received.append(self.bytes_received)

    HttpRanges.close = close  # type: ignore[method-assign]
    try:
        with pytest.raises(PolybagError, match=message) as e:
            open_url(f"{srv.url}/x.bag").close()
    finally:
        HttpRanges.close = orig  # type: ignore[method-assign]
    assert srv.url in str(e.value)
    # the open asked for 80 KiB (first 16 KiB, last 64 KiB): what came in stays near it
    assert received and received[0] < 80 * 1024 + 64 * 1024


def test_an_answer_ended_by_closing_the_connection_reads_whole(serve: Any, logs: Any) -> None:
    """No Content-Length: the body ends when the server closes (HTTP/1.0 style)."""
    data = logs["bag"][0]
    obj = Obj(data)

    def answer(s: Hostile, r: Request) -> Any:
        out = normal(obj, r)
        if r.method == "HEAD":
            return out
        hdr = b"\r\n".join(h for h in out[0].split(b"\r\n") if not h.startswith(b"Content-Length"))
        return [hdr, *out[1:], CLOSE]

    srv = serve(answer)
    assert _messages(f"{srv.url}/x.bag") == _messages(data)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    order=st.permutations(range(2)),
    extra=st.lists(st.tuples(st.integers(0, 600_000), st.integers(-5, 70_000)), max_size=3),
    drop=st.booleans(),
    total=st.sampled_from([None, "*", 1, 2**64]),
)
def test_any_multipart_answer_is_right_or_a_clear_error(
    logs: Any, order: list[int], extra: list[tuple[int, int]], drop: bool, total: Any
) -> None:
    data = logs["bag"][0]

    def body(rs: list[tuple[int, int]], d: bytes) -> bytes:
        parts = [rs[i] for i in order][: 1 if drop else 2] + [(s, s + n) for s, n in extra]
        return multipart(d, parts, total=total)

    with Hostile(_multi(Obj(data), body)) as srv:
        try:
            got = _messages(f"{srv.url}/x.bag")
        except PolybagError as e:
            assert srv.url in str(e)
            return
    assert got == _messages(data)  # whatever else happened: right, or an error


# --- lying sizes ------------------------------------------------------------------------------------
@pytest.mark.parametrize("length", [str(2**70), "-5", "1e3", "\xb2", "12, 13"])
def test_a_lying_size_on_open_is_a_clear_error(serve: Any, length: str) -> None:
    def answer(s: Hostile, r: Request) -> Any:
        if r.method == "HEAD":
            return [head("200 OK", [f"Content-Length: {length}"])]
        return [head("206 Partial Content", ["Content-Length: 1", f"Content-Range: bytes 0-0/{length}"]), b"x"]

    srv = serve(answer)
    with pytest.raises(PolybagError) as e:
        polybag.open(f"{srv.url}/x.bag")
    assert srv.url in str(e.value)
    p = _cli("info", f"{srv.url}/x.bag")
    assert p.returncode != 0 and srv.url in p.stderr and "unexpected" not in p.stderr


def test_a_declared_2_70_byte_object_is_refused_by_size(serve: Any) -> None:
    srv = serve(lambda s, r: [head("200 OK", [f"Content-Length: {2**70}"])])
    with pytest.raises(PolybagError, match=r"more than polybag reads"):
        polybag.open(f"{srv.url}/x.bag")


LYING_RANGE = {
    "a huge Content-Length": lambda s, e, n: [f"Content-Length: {2**70}", f"Content-Range: bytes {s}-{e - 1}/{n}"],
    "a negative Content-Length": lambda s, e, n: ["Content-Length: -1", f"Content-Range: bytes {s}-{e - 1}/{n}"],
    "another range": lambda s, e, n: [f"Content-Length: {e - s}", f"Content-Range: bytes {s + 1}-{e}/{n}"],
    "a changed total": lambda s, e, n: [f"Content-Length: {e - s}", f"Content-Range: bytes {s}-{e - 1}/{n + 1}"],
    "a huge total": lambda s, e, n: [f"Content-Length: {e - s}", f"Content-Range: bytes {s}-{e - 1}/{2**70}"],
    "no Content-Range": lambda s, e, n: [f"Content-Length: {e - s}"],
}


@pytest.mark.parametrize("kind", sorted(LYING_RANGE))
def test_a_lying_range_answer_is_a_clear_error(serve: Any, logs: Any, kind: str) -> None:
    data = logs["mcap"][0]
    obj = Obj(data)

    def answer(s: Hostile, r: Request) -> Any:
        rs = ranges_of(r, len(data))
        if r.method != "GET" or not rs or len(rs) != 1 or rs[0][0] == 0:
            return normal(obj, r)
        a, b = rs[0]
        return [head("206 Partial Content", LYING_RANGE[kind](a, b, len(data))), data[a:b], CLOSE]

    srv = serve(answer)
    with pytest.raises(PolybagError) as e:
        _messages(f"{srv.url}/x.mcap")
    assert srv.url in str(e.value) and "unexpected" not in str(e.value)


# --- the object pinned -------------------------------------------------------------------------------
def _replaced_after_open(obj: Obj, new: bytes, extra: dict[str, str] | None = None) -> Any:
    """Serves ``obj``; after the open (HEAD and the first and last bytes), another object of
    the same size (with ``extra`` headers)."""
    seen = {"gets": 0}

    def answer(s: Hostile, r: Request) -> Any:
        if r.method == "GET":
            seen["gets"] += 1
            if seen["gets"] == 2:
                obj.replace(new)
                obj.extra = extra or obj.extra
        return normal(obj, r)

    return answer


@pytest.mark.parametrize("validators", ["etag, honoured If-Match", "etag", "last-modified", "generation"])
@pytest.mark.parametrize("fmt", ["bag", "mcap"])
def test_an_object_replaced_mid_read_is_an_error(serve: Any, logs: Any, fmt: str, validators: str) -> None:
    a, b = logs[fmt]
    obj = Obj(
        a,
        send_etag=validators.startswith("etag"),
        send_last_modified=validators == "last-modified",
        honour_if_match=validators == "etag, honoured If-Match",
    )
    first_modified = obj.last_modified
    extra = None
    if validators == "generation":  # GCS's object generation (a new one on every write)
        obj.extra = {"x-goog-generation": "1"}
        extra = {"x-goog-generation": "2"}
    srv = serve(_replaced_after_open(obj, b, extra))
    with pytest.raises(PolybagError, match=r"the object changed while it was read") as e:
        _messages(f"{srv.url}/x.{fmt}")
    assert srv.url in str(e.value)
    gets = [r for r in srv.requests if r.method == "GET"]
    assert len(gets) >= 2
    if validators.startswith("etag"):
        assert all(r.headers.get("if-match") == '"v1"' for r in gets)
    if validators == "last-modified":
        assert all(r.headers.get("if-unmodified-since") == first_modified for r in gets)
    if validators == "generation":
        assert all(r.headers.get("x-goog-if-generation-match") == "1" for r in gets)


def test_an_object_replaced_mid_read_through_the_cli(serve: Any, logs: Any) -> None:
    a, b = logs["bag"]
    srv = serve(_replaced_after_open(Obj(a), b))
    p = _cli("cat", f"{srv.url}/x.bag")
    assert p.returncode != 0
    assert "changed while it was read" in p.stderr and srv.url in p.stderr


def test_an_unchanged_pinned_object_reads_whole(serve: Any, logs: Any) -> None:
    a, _b = logs["mcap"]
    srv = serve(lambda s, r: normal(Obj(a), r))
    assert _messages(f"{srv.url}/x.mcap") == _messages(a)
    assert all(r.headers.get("if-match") == '"v1"' for r in srv.requests if r.method == "GET")


@pytest.fixture(scope="module")
def seaweed_s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A real S3 server (SeaweedFS, tests/remote/seaweed.py: skips without ``weed``, fails in
    CI); it keeps every version of an object in a versioned bucket and answers GetObject with
    a VersionId, and refuses an If-Match that no longer holds (412), as S3 does."""
    pytest.importorskip("s3fs")
    sys.path.insert(0, str(ROOT / "tests" / "remote"))
    try:
        from seaweed import start
    finally:
        sys.path.remove(str(ROOT / "tests" / "remote"))
    import s3fs

    with start(tmp_path_factory.mktemp("seaweed_hostile")) as srv:
        s3fs.S3FileSystem.clear_instance_cache()
        try:
            yield srv
        finally:
            s3fs.S3FileSystem.clear_instance_cache()


@pytest.mark.parametrize("versioned", [False, True])
def test_an_s3_object_replaced_mid_read(seaweed_s3: Any, logs: Any, versioned: bool) -> None:
    """S3 pins the object too: by its version (a versioned bucket: the old version is read
    whole, correctly) or by If-Match with its ETag (else: an error)."""
    a, b = logs["bag"]
    client = seaweed_s3.client()
    bucket = "pinned-versioned" if versioned else "pinned"
    client.create_bucket(Bucket=bucket)
    if versioned:
        client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        assert client.get_bucket_versioning(Bucket=bucket).get("Status") == "Enabled"
    client.put_object(Bucket=bucket, Key="x.bag", Body=a)
    url = f"s3://{bucket}/x.bag"
    with polybag.open(url, storage_options=seaweed_s3.storage_options()) as r:
        client.put_object(Bucket=bucket, Key="x.bag", Body=b)  # replaced after the open
        if versioned:
            got = [(m.topic, m.log_time, bytes(m.data)) for m in r.messages()]
            assert got == _messages(a)
        else:
            with pytest.raises(PolybagError, match=r"changed while it was read") as e:
                for _m in r.messages():
                    pass
            assert url in str(e.value)
    # the object was replaced indeed: a new reader reads the new one
    assert _messages(url, storage_options=seaweed_s3.storage_options()) == _messages(b) != _messages(a)


# --- secrets and server text in messages ---------------------------------------------------------------
def test_no_secret_appears_in_an_error(serve: Any) -> None:
    srv = serve(lambda s, r: [head("500 \x1b]0;pwned\x07\x1b[2J Oops", ["Content-Length: 0"])])
    url = f"http://alice:hunter2pass@127.0.0.1:{srv.port}/x.bag?X-Amz-Signature=deadbeefsig&token=qwertyuiop"
    with pytest.raises(PolybagError) as e:
        polybag.open(url, storage_options=CREDS)
    text = str(e.value)
    for secret in ("hunter2pass", "alice", "deadbeefsig", "qwertyuiop", TOKEN, API_KEY):
        assert secret not in text
    assert "\x1b" not in text and "\x07" not in text
    assert f"127.0.0.1:{srv.port}/x.bag" in text and "X-Amz-Signature=***" in text
    p = _cli("info", url)
    assert p.returncode != 0 and "hunter2pass" not in p.stderr and "deadbeefsig" not in p.stderr
    assert "\x1b" not in p.stderr and f"127.0.0.1:{srv.port}/x.bag" in p.stderr


def test_a_reader_error_names_the_url_without_its_secrets(serve: Any) -> None:
    junk = b"\x89NOTALOG" * 10000
    srv = serve(lambda s, r: normal(Obj(junk), r))
    with pytest.raises(PolybagError) as e:
        polybag.open(f"{srv.url}/x.bag?sig=verysecretvalue")
    assert "verysecretvalue" not in str(e.value) and f"{srv.url}/x.bag?sig=***" in str(e.value)


# --- the fsspec path (aiohttp): the same redirect rules -------------------------------------------
#: storage options that send an http(s) URL through fsspec's HTTP filesystem (client_kwargs:
#: an option only fsspec takes), with a caller header aiohttp does not drop by itself
FSSPEC_KEY = {"headers": {"X-Api-Key": API_KEY}, "client_kwargs": {}}


@pytest.mark.parametrize(
    "opts",
    [FSSPEC_KEY, {"client_kwargs": {"headers": {"X-Api-Key": API_KEY}}}],
    ids=["storage-options-headers", "client-kwargs-headers"],
)
def test_the_fsspec_path_refuses_a_redirect_to_another_port_with_caller_headers(
    serve: Any, logs: Any, opts: dict[str, Any]
) -> None:
    pytest.importorskip("aiohttp")
    from polybag.io.redirects import RedirectRefused

    obj = Obj(logs["mcap"][0])
    other = serve(lambda s, r: normal(obj, r))
    origin = serve(lambda s, r: [head("302 Found", [f"Location: {other.url}{r.path}", "Content-Length: 0"])])
    url = f"{origin.url}/x.mcap?sig=verysecretvalue"
    with pytest.raises(RedirectRefused, match=r"cannot open: refused a redirect to another scheme, host or port") as e:
        polybag.open(url, storage_options=opts)
    text = str(e.value)
    assert f"{origin.url}/x.mcap?sig=***" in text and "x-api-key" in text
    assert "verysecretvalue" not in text and API_KEY not in text
    assert origin.requests and all(r.headers.get("x-api-key") == API_KEY for r in origin.requests)
    assert not any("x-api-key" in r.headers for r in other.requests)
    assert other.requests == []  # refused before anything was sent there


def test_the_fsspec_path_refuses_it_on_a_range_read_too(serve: Any, logs: Any) -> None:
    """The size request stays on the origin; the range requests are redirected away."""
    pytest.importorskip("aiohttp")
    from polybag.io.redirects import RedirectRefused

    obj = Obj(logs["mcap"][0])
    other = serve(lambda s, r: normal(obj, r))

    def answer(s: Hostile, r: Request) -> Any:
        if r.method == "HEAD":
            return normal(obj, r)
        return [head("307 Temporary Redirect", [f"Location: {other.url}{r.path}", "Content-Length: 0"])]

    origin = serve(answer)
    with pytest.raises(RedirectRefused, match=r"cannot read .*refused a redirect to another scheme, host or port") as e:
        _messages(f"{origin.url}/x.mcap", storage_options=FSSPEC_KEY)
    assert origin.url in str(e.value) and API_KEY not in str(e.value)
    assert other.requests == []


def test_the_fsspec_path_follows_a_redirect_to_another_port_without_credentials(serve: Any, logs: Any) -> None:
    """Only Authorization (which aiohttp drops on another origin): the redirect is followed,
    without it; the caller's own trace configs are kept beside polybag's."""
    aiohttp = pytest.importorskip("aiohttp")
    data = logs["mcap"][0]
    obj = Obj(data)
    other = serve(lambda s, r: normal(obj, r))
    origin = serve(lambda s, r: [head("302 Found", [f"Location: {other.url}{r.path}", "Content-Length: 0"])])
    seen: list[str] = []

    async def redirected(session: Any, ctx: Any, params: Any) -> None:
        seen.append(str(params.url))

    theirs = aiohttp.TraceConfig()
    theirs.on_request_redirect.append(redirected)
    opts = {"headers": {"Authorization": TOKEN}, "client_kwargs": {"trace_configs": [theirs]}}
    assert _messages(f"{origin.url}/x.mcap", storage_options=opts) == _messages(data)
    assert other.requests and not any(_has_creds(r) for r in other.requests)
    assert seen and all(u.startswith(origin.url) for u in seen)
    assert opts["client_kwargs"] == {"trace_configs": [theirs]}  # the caller's options untouched


def test_the_fsspec_path_follows_a_same_origin_redirect_with_the_headers(serve: Any, logs: Any) -> None:
    pytest.importorskip("aiohttp")
    data = logs["mcap"][0]
    obj = Obj(data)

    def answer(s: Hostile, r: Request) -> Any:
        if r.path == "/moved.mcap":
            return [head("301 Moved", ["Location: /real.mcap", "Content-Length: 0"])]
        return normal(obj, r)

    srv = serve(answer)
    assert _messages(f"{srv.url}/moved.mcap", storage_options=FSSPEC_KEY) == _messages(data)
    real = [r for r in srv.requests if r.path == "/real.mcap"]
    assert real and all(r.headers.get("x-api-key") == API_KEY for r in real)


def test_the_fsspec_path_bounds_redirects(serve: Any) -> None:
    pytest.importorskip("aiohttp")
    srv = serve(lambda s, r: [head("302 Found", [f"Location: {r.path}x", "Content-Length: 0"])])
    with pytest.raises(PolybagError, match=r"more than 5 redirects") as e:
        polybag.open(f"{srv.url}/loop.mcap", storage_options={"client_kwargs": {}})
    assert srv.url in str(e.value)
    for method in {r.method for r in srv.requests}:  # each request (HEAD, then GET) stops at 6
        assert sum(r.method == method for r in srv.requests) == 6


def test_the_fsspec_path_refuses_a_redirect_from_https_to_http(serve: Any, logs: Any, tmp_path: Path) -> None:
    pytest.importorskip("aiohttp")
    import ssl

    from polybag.io.redirects import RedirectRefused

    ctx, cert = _tls_context(tmp_path)
    trust = ssl.create_default_context(cafile=str(cert))  # ``ssl``: a request option fsspec passes on
    data = logs["mcap"][0]
    obj = Obj(data)
    plain = serve(lambda s, r: normal(obj, r))
    secure = serve(lambda s, r: normal(obj, r), tls=ctx)
    # https itself works through fsspec (and is read whole) ...
    assert _messages(f"{secure.url}/x.mcap", storage_options={"ssl": trust}) == _messages(data)
    # ... but a redirect down to http is refused before anything is sent there, headers or not
    down = serve(lambda s, r: [head("302 Found", [f"Location: {plain.url}{r.path}", "Content-Length: 0"])], tls=ctx)
    for opts in ({"ssl": trust}, {**FSSPEC_KEY, "ssl": trust}):
        with pytest.raises(RedirectRefused, match=r"refused a redirect from https to http") as e:
            polybag.open(f"{down.url}/x.mcap", storage_options=opts)
        assert down.url in str(e.value) and API_KEY not in str(e.value)
    assert down.requests and plain.requests == []
