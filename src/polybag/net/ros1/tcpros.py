"""TCPROS framing: connection headers and length-prefixed messages.

A header is a 4-byte little-endian length followed by fields, each a 4-byte length and
``key=value`` bytes.  A message is a 4-byte little-endian length and the serialized payload.
Every length read from a peer is checked against a cap before anything is allocated, and
every malformed byte sequence raises :class:`~polybag.net.ros1.TcprosError`.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable, Mapping
from typing import Any

from polybag.net.ros1.errors import TcprosError

#: Largest connection header accepted (message definitions of big types are ~100 KiB).
DEFAULT_MAX_HEADER = 16 * 1024 * 1024
#: Largest message accepted by default (64 MiB).
DEFAULT_MAX_MESSAGE = 64 * 1024 * 1024

_LEN = struct.Struct("<I")
_RECV_STEP = 1 << 20


def encode_header(fields: Mapping[str, str | bytes]) -> bytes:
    """The whole header (length-prefixed) for ``fields``; str values are UTF-8 encoded."""
    parts = []
    for key, value in fields.items():
        if not isinstance(key, str) or not key or "=" in key:
            raise TcprosError(f"invalid header field name {key!r}")
        raw = value.encode("utf-8") if isinstance(value, str) else bytes(value)
        item = key.encode("utf-8") + b"=" + raw
        parts.append(_LEN.pack(len(item)))
        parts.append(item)
    body = b"".join(parts)
    if len(body) > 0xFFFFFFFF:
        raise TcprosError(f"header of {len(body)} bytes does not fit a 32-bit length")
    return _LEN.pack(len(body)) + body


def decode_header(body: bytes | bytearray | memoryview, *, peer: str | None = None) -> dict[str, bytes]:
    """Parse a header body (without its leading total length) into ``{key: value}``."""
    data = bytes(body)
    fields: dict[str, bytes] = {}
    pos = 0
    end = len(data)
    while pos < end:
        if end - pos < 4:
            raise TcprosError(f"header field length needs 4 bytes, {end - pos} left", peer, pos)
        (n,) = _LEN.unpack_from(data, pos)
        if n > end - pos - 4:
            raise TcprosError(
                f"header field of {n} bytes overruns the header ({end - pos - 4} bytes left)", peer, pos
            )
        item = data[pos + 4 : pos + 4 + n]
        eq = item.find(b"=")
        if eq <= 0:
            raise TcprosError(f"header field {item[:40]!r} is not key=value", peer, pos)
        try:
            key = item[:eq].decode("utf-8")
        except UnicodeDecodeError:
            raise TcprosError(f"header field name {item[:eq][:40]!r} is not UTF-8", peer, pos) from None
        fields[key] = item[eq + 1 :]
        pos += 4 + n
    return fields


def frame(payload: bytes | bytearray | memoryview) -> bytes:
    """``payload`` with its 4-byte little-endian length prefix (one TCPROS message)."""
    n = len(payload) if not isinstance(payload, memoryview) else payload.nbytes
    if n > 0xFFFFFFFF:
        raise TcprosError(f"message of {n} bytes does not fit a 32-bit length")
    return b"".join((_LEN.pack(n), payload))


class BufferedSocket:
    """A read side of a socket that fetches 64 KiB at a time (two small reads per message
    otherwise); :func:`read_header` and :func:`read_message` accept it in place of the socket.

    With ``keep_waiting``, a socket timeout is retried while ``keep_waiting()`` is true (so a
    reader can poll a stop flag without losing a partly read message)."""

    __slots__ = ("sock", "keep_waiting", "_buf", "_pos")

    STEP = 1 << 16

    def __init__(self, sock: socket.socket, keep_waiting: Callable[[], bool] | None = None) -> None:
        self.sock = sock
        self.keep_waiting = keep_waiting
        self._buf = b""
        self._pos = 0

    def _recv(self, n: int) -> bytes:
        while True:
            try:
                return self.sock.recv(n)
            except TimeoutError:
                if self.keep_waiting is None or not self.keep_waiting():
                    raise

    def recv(self, n: int) -> bytes:
        if self._pos < len(self._buf):
            out = self._buf[self._pos : self._pos + n]
            self._pos += len(out)
            return out
        if n >= self.STEP:
            return self._recv(n)
        data = self._recv(self.STEP)
        if len(data) <= n:
            return data
        self._buf, self._pos = data, n
        return data[:n]

    def getpeername(self) -> Any:  # (as socket.getpeername: the address family's own shape)
        return self.sock.getpeername()


def _peer(sock: socket.socket | BufferedSocket) -> str | None:
    try:
        host, port = sock.getpeername()[:2]
        return f"{host}:{port}"
    except (OSError, ValueError, TypeError):
        return None


def _recv_exact(sock: socket.socket | BufferedSocket, n: int, what: str, offset: int) -> bytes | None:
    """Exactly ``n`` bytes; None if EOF comes before the first byte; TcprosError on a partial read."""
    if n == 0:
        return b""
    buf = bytearray()
    first = True
    while len(buf) < n:
        try:
            chunk = sock.recv(min(n - len(buf), _RECV_STEP))
        except TimeoutError:
            raise TcprosError(f"timed out reading {what}", _peer(sock), offset + len(buf)) from None
        except OSError as exc:
            raise TcprosError(
                f"connection error reading {what}: {exc}", _peer(sock), offset + len(buf)
            ) from None
        if not chunk:
            if not buf:
                return None
            raise TcprosError(
                f"connection closed {len(buf)} bytes into {what} of {n} bytes", _peer(sock), offset + len(buf)
            )
        if first and len(chunk) == n:
            return chunk
        first = False
        buf += chunk
    return bytes(buf)


def _read_length(sock: socket.socket | BufferedSocket, what: str, limit: int, offset: int) -> int | None:
    raw = _recv_exact(sock, 4, f"{what} length", offset)
    if raw is None:
        return None
    n: int
    (n,) = _LEN.unpack(raw)
    if n > limit:
        raise TcprosError(f"{what} length {n} exceeds the limit of {limit} bytes", _peer(sock), offset)
    return n


def read_header(sock: socket.socket | BufferedSocket, max_size: int = DEFAULT_MAX_HEADER) -> dict[str, bytes]:
    """Read one connection header from ``sock``.  EOF before it is a TcprosError too."""
    n = _read_length(sock, "connection header", max_size, 0)
    if n is None:
        raise TcprosError("connection closed before the connection header", _peer(sock), 0)
    body = _recv_exact(sock, n, "connection header", 4)
    if body is None:
        raise TcprosError(f"connection closed before the {n}-byte connection header", _peer(sock), 4)
    return decode_header(body, peer=_peer(sock))


def read_message(sock: socket.socket | BufferedSocket, max_size: int = DEFAULT_MAX_MESSAGE) -> bytes | None:
    """One message payload, or None at a clean EOF (between messages)."""
    n = _read_length(sock, "message", max_size, 0)
    if n is None:
        return None
    body = _recv_exact(sock, n, "message", 4)
    if body is None:
        if n == 0:
            return b""
        raise TcprosError(f"connection closed before the {n}-byte message", _peer(sock), 4)
    return body


def text(fields: Mapping[str, bytes]) -> dict[str, str]:
    """A header as ``{key: str}`` (UTF-8, undecodable bytes replaced)."""
    return {k: v.decode("utf-8", "replace") for k, v in fields.items()}
