"""Requests about one remote object over :mod:`http.client` (:class:`HttpRequests`): a
keep-alive connection per thread (:mod:`polybag.io.http_connections`), each request under its
deadline, a stale connection retried once, redirects followed by the rules of
:mod:`polybag.io.redirects`, every later answer checked against the version of the object
first seen (:class:`~polybag.io.http_answers.ObjectVersion`), errors naming the URL without
its secrets (:mod:`polybag.io.redaction`).  :class:`~polybag.io.http_ranges.HttpRanges`
reads byte ranges through it."""

from __future__ import annotations

import http.client
import threading
import time

from polybag.errors import PolybagError
from polybag.io.http_answers import ObjectVersion
from polybag.io.http_connections import DeadlineExpired, ThreadConnections, origin
from polybag.io.redaction import clean, redact, scrub, secrets_of
from polybag.io.redirects import RedirectRefused, redirect_target
from polybag.io.remote_limits import DEADLINE, DEADLINE_ENV, MAX_REDIRECTS, RECV_TIMEOUT, TIMEOUT, TIMEOUT_ENV

#: what is read of a body polybag does not use (a redirect's, an epilogue) before the
#: connection is dropped instead
DISCARD = 16 << 10

_RETRYABLE = (
    http.client.RemoteDisconnected,
    ConnectionResetError,
    BrokenPipeError,
    http.client.BadStatusLine,
)


class HttpRequests:
    """Requests about one object at one ``http(s)://`` URL (see the module notes of
    :mod:`polybag.io.http_ranges`): over a keep-alive connection per thread, each under its
    deadline, following redirects (the caller's headers only on the URL's origin), pinned to
    the version of the object first seen; its errors name the URL without secrets."""

    def __init__(
        self,
        url: str,
        headers: dict[str, str] | None = None,
        target: str | None = None,
        timeout: float = TIMEOUT,
        deadline: float = DEADLINE,
    ) -> None:
        self.url = url  # the URL asked for (a gs:// URL is read through its https:// ``target``)
        self._headers = {str(k): str(v) for k, v in (headers or {}).items()}
        self._target = target or url  # where redirects led (the size request follows them)
        self._origin = origin(self._target)
        self._trusted = True  # ``_target`` is on the URL's origin: the caller's headers go there
        self.timeout = timeout  # of each request, seconds
        self.deadline = deadline  # of each operation of the source (what ``until`` comes from)
        self._secrets = sorted(
            {*secrets_of(url), *secrets_of(self._target), *(v for v in self._headers.values() if len(v) >= 8)},
            key=len,
            reverse=True,
        )
        self.name = redact(url)  # what messages say
        self._local = threading.local()
        self._lock = threading.Lock()
        self._conns = ThreadConnections(self.err)
        self.requests = 0
        #: the validators of the object as first seen: later answers must carry the same
        self.version = ObjectVersion()

    @property
    def bytes_received(self) -> int:
        """Bytes received from the server so far (headers, bodies, framing)."""
        return self._conns.bytes_received

    def err(self, text: str, cls: type[PolybagError] = PolybagError) -> PolybagError:
        """The error ``text`` about this URL (secrets scrubbed, the server's text cleaned)."""
        return cls(f"{self.name}: {scrub(text, self._secrets)}")

    def exc(self, what: str, e: BaseException) -> PolybagError:
        """The error of ``what`` failing with ``e`` (a deadline, a silent server, a socket or
        protocol error)."""
        if isinstance(e, DeadlineExpired) and getattr(self._local, "op_bound", False):
            return PolybagError(
                f"{self.name}: {what}: the operation did not finish within its deadline of {self.deadline:g} s "
                f"(storage_options={{'deadline': seconds}} or {DEADLINE_ENV} sets it)"
            )
        if isinstance(e, DeadlineExpired):
            return PolybagError(
                f"{self.name}: {what}: no complete answer within the deadline of {self.timeout:g} s "
                f"(storage_options={{'timeout': seconds}} or {TIMEOUT_ENV} sets it)"
            )
        if isinstance(e, TimeoutError):
            return PolybagError(f"{self.name}: {what}: the server sent nothing for {RECV_TIMEOUT:g} s")
        return self.err(f"{what}: {type(e).__name__}: {e}")

    # --- requests -----------------------------------------------------------------------------
    def drop(self) -> None:
        """Close this thread's connection (an answer left unread, an error)."""
        self._conns.drop()

    def received_here(self) -> int:
        """Bytes received so far by this thread's connection."""
        return self._conns.received_here()

    def close(self) -> None:
        """Close every connection."""
        self._conns.close()

    def discard(self, resp: http.client.HTTPResponse) -> None:
        """Read what is left of an answer polybag does not use (a little), else drop the
        connection."""
        try:
            resp.read(DISCARD)
            if not resp.isclosed():
                self.drop()
        except (OSError, http.client.HTTPException):
            self.drop()

    def request(
        self, method: str, headers: dict[str, str], what: str, until: float | None = None
    ) -> http.client.HTTPResponse:
        """One request to the (redirected) URL, finished by the request's deadline (and
        ``until``); a stale keep-alive connection is retried once, redirects are followed
        (the caller's headers only on the URL's origin)."""
        deadline = time.monotonic() + self.timeout
        self._local.op_bound = until is not None and until < deadline
        if until is not None:
            deadline = min(deadline, until)
        url, trusted = self._target, self._trusted
        pins = self.version.conditions() if method == "GET" else {}
        for _hop in range(MAX_REDIRECTS + 1):
            sent = {**self._headers, **pins, **headers} if trusted else {**pins, **headers}
            for attempt in (0, 1):
                conn, path = self._conns.connect(url)
                conn.pb_deadline = deadline
                fresh = conn.sock is None
                try:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise DeadlineExpired("deadline")
                    if conn.sock is not None:
                        conn.sock.settimeout(min(RECV_TIMEOUT, left))
                    conn.request(method, path, headers=sent)
                    resp = conn.getresponse()
                    break
                except _RETRYABLE as e:
                    self.drop()
                    if attempt or fresh:
                        raise self.exc(what, e) from None
                except (OSError, http.client.HTTPException, ValueError) as e:
                    self.drop()
                    raise self.exc(what, e) from None
            with self._lock:
                self.requests += 1
            if resp.status in (301, 302, 303, 307, 308) and resp.getheader("Location"):
                self.discard(resp)
                nxt, refusal = redirect_target(url, resp.getheader("Location") or "")
                if refusal is not None:
                    raise self.err(f"{what}: {refusal}", RedirectRefused)
                trusted = trusted and origin(nxt) == self._origin
                url = nxt
                with self._lock:
                    self._target, self._trusted = url, trusted
                continue
            return resp
        raise self.err(f"{what}: more than {MAX_REDIRECTS} redirects", RedirectRefused)

    def fail(self, resp: http.client.HTTPResponse, what: str) -> PolybagError:
        """The error of an answer whose status says ``what`` failed."""
        self.drop()  # the body is not read: the connection cannot be reused
        if resp.status == 404:
            return self.err(f"{what}: no such object (HTTP 404)")
        if resp.status == 412 and self.version.known():
            return self.changed_err(what, "HTTP 412 Precondition Failed on the pinned version")
        return self.err(f"{what}: HTTP {resp.status} {clean(resp.reason or '', 100)}")

    def check_pin(self, resp: http.client.HTTPResponse, what: str) -> None:
        """An answer about another version of the object than the one opened is an error."""
        detail = self.version.change(resp)
        if detail is not None:
            self.drop()
            raise self.changed_err(what, detail)

    def changed_err(self, what: str, detail: str) -> PolybagError:
        """The error of an object that changed while it was read."""
        return self.err(f"{what}: the object changed while it was read ({detail})")
