"""Keep-alive :mod:`http.client` connections whose every receive is bounded by the deadline
of the request under way, one per fetching thread (:class:`ThreadConnections`).

A connection's ``pb_deadline`` (:func:`time.monotonic`) bounds the connection itself, each
receive of a response (:class:`DeadlineSocketIO`; at most
:data:`~polybag.io.remote_limits.RECV_TIMEOUT` each) and, over TLS, the handshake (a timer
cuts the socket); past it the request ends with :class:`DeadlineExpired`.  Each connection
counts the bytes it received (``pb_received``)."""

from __future__ import annotations

import http.client
import io
import math
import socket
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from polybag.errors import PolybagError
from polybag.io.redaction import redact
from polybag.io.remote_limits import RECV_TIMEOUT


def origin(url: str) -> tuple[str, str, int]:
    """``(scheme, host, port)`` of ``url``, lower case, the port filled in (-1: not a port)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = -1
    return scheme, (parts.hostname or "").lower(), port or (443 if scheme == "https" else 80)


class DeadlineExpired(TimeoutError):
    """A request ran past its deadline."""


class DeadlineSocketIO(socket.SocketIO):
    """The socket under a response: each receive waits at most what is left of the
    connection's deadline (and RECV_TIMEOUT); counts the bytes received."""

    def __init__(self, sock: socket.socket, conn: DeadlinedConnection) -> None:
        super().__init__(sock, "rb")
        self._socket = sock  # SocketIO's own ``_sock``, which typeshed does not declare
        self._conn = conn
        self._wait = -1.0

    def readinto(self, b: Any) -> int | None:
        conn = self._conn
        left = conn.pb_deadline - time.monotonic()
        if left <= 0:
            raise DeadlineExpired("deadline")
        wait = min(RECV_TIMEOUT, left)
        if wait != self._wait:
            self._socket.settimeout(wait)
            self._wait = wait
        try:
            n = super().readinto(b)
        except TimeoutError:
            if time.monotonic() >= conn.pb_deadline:
                raise DeadlineExpired("deadline") from None
            raise
        if n:
            conn.pb_received += n
        return n


class _SockProxy:
    """What :class:`http.client.HTTPResponse` takes as its socket: ``makefile`` gives the
    deadline-bounded reader."""

    def __init__(self, sock: socket.socket, conn: DeadlinedConnection) -> None:
        self._sock = sock
        self._conn = conn

    def makefile(self, mode: str, *args: Any, **kwargs: Any) -> io.BufferedReader:
        # as socket.makefile does: the socket stays open while the reader is (a response that
        # ends with the connection outlives the connection's close)
        self._sock._io_refs += 1  # type: ignore[attr-defined]
        return io.BufferedReader(DeadlineSocketIO(self._sock, self._conn))


class _Response(http.client.HTTPResponse):
    def __init__(self, sock: Any, *args: Any, conn: DeadlinedConnection, **kwargs: Any) -> None:
        super().__init__(_SockProxy(sock, conn), *args, **kwargs)  # type: ignore[arg-type]


class DeadlinedConnection:
    """Mixed into the connection classes: a deadline for everything one request does."""

    pb_deadline = math.inf
    pb_received = 0
    sock: Any
    timeout: Any
    #: http.client's response class: here a factory of :class:`_Response` bound to the connection
    response_class: Any

    def pb_setup(self) -> None:
        self.response_class = lambda sock, *a, **k: _Response(sock, *a, conn=self, **k)

    def connect(self) -> None:
        left = self.pb_deadline - time.monotonic()
        if left <= 0:
            raise DeadlineExpired("deadline")
        self.timeout = min(RECV_TIMEOUT, left)
        # a TLS handshake is many receives: a timer cuts the socket at the deadline
        timer = threading.Timer(left, self._pb_cut) if isinstance(self, http.client.HTTPSConnection) else None
        if timer is not None:
            timer.daemon = True
            timer.start()
        try:
            super().connect()  # type: ignore[misc]
        except OSError:
            if time.monotonic() >= self.pb_deadline:
                raise DeadlineExpired("deadline") from None
            raise
        finally:
            if timer is not None:
                timer.cancel()
        self.sock.settimeout(RECV_TIMEOUT)

    def _pb_cut(self) -> None:
        sock = self.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class DeadlinedHTTP(DeadlinedConnection, http.client.HTTPConnection):
    """A plain HTTP connection under a deadline."""


class DeadlinedHTTPS(DeadlinedConnection, http.client.HTTPSConnection):
    """A TLS connection under a deadline."""


Connection = DeadlinedHTTP | DeadlinedHTTPS
#: a thread's connection and the origin it is to
_Held = tuple[tuple[str, str, int], Connection]


class ThreadConnections:
    """The keep-alive connections of one transport: each thread that fetches holds one, to
    the origin it last spoke to; ``error(text)`` makes the error of a URL that is not
    http(s)."""

    def __init__(self, error: Callable[[str], PolybagError]) -> None:
        self._error = error
        self._local = threading.local()
        self._lock = threading.Lock()
        self._conns: list[Connection] = []
        self._received = 0  # bytes of closed connections

    @property
    def bytes_received(self) -> int:
        """Bytes received by every connection so far (headers, bodies, framing)."""
        with self._lock:
            return self._received + sum(c.pb_received for c in self._conns)

    def connect(self, url: str) -> tuple[Connection, str]:
        """This thread's connection to the origin of ``url`` (a new one when it held one to
        another origin), and the path to ask for."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise self._error(f"not an http(s) URL: {redact(url)}")
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        key = origin(url)
        held: _Held | None = getattr(self._local, "conn", None)
        if held is not None and held[0] == key:
            return held[1], path
        if held is not None:
            self._close(held[1])
        cls = DeadlinedHTTPS if parts.scheme == "https" else DeadlinedHTTP
        conn = cls(parts.hostname, key[2], timeout=RECV_TIMEOUT)
        conn.pb_setup()
        self._local.conn = (key, conn)
        with self._lock:
            self._conns.append(conn)
        return conn, path

    def _close(self, conn: Connection) -> None:
        conn.close()
        with self._lock:
            if conn in self._conns:
                self._conns.remove(conn)
                self._received += conn.pb_received

    def drop(self) -> None:
        """Close this thread's connection (an answer left unread, an error)."""
        held: _Held | None = getattr(self._local, "conn", None)
        if held is not None:
            self._close(held[1])
            self._local.conn = None

    def received_here(self) -> int:
        """Bytes received so far by this thread's connection."""
        held: _Held | None = getattr(self._local, "conn", None)
        return held[1].pb_received if held is not None else 0

    def close(self) -> None:
        """Close every connection."""
        with self._lock:
            conns, self._conns = self._conns, []
            self._received += sum(c.pb_received for c in conns)
        for c in conns:
            c.close()
