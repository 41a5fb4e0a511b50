"""Byte sources: the one way formats get at a file's bytes.

Formats never open files themselves.  A seekable source (:class:`MappedSource`) maps the
file and hands out ``memoryview`` slices; a forward-only source (:class:`StreamSource`)
wraps a pipe or ``sys.stdin.buffer``.  Both check every request against what the file can
hold, so a lying length field becomes a :class:`~polybag.errors.TruncatedError`, never a
huge allocation.
"""

from __future__ import annotations

import io
import mmap
import os
from typing import BinaryIO

from polybag.errors import PolybagError, TruncatedError


class MappedSource:
    """A whole local file (or an in-memory buffer) as one ``memoryview``."""

    seekable = True

    def __init__(self, path: str | None, buffer: bytes | bytearray | memoryview | mmap.mmap) -> None:
        self.path = path
        self._buffer = buffer
        self.view = memoryview(buffer)
        if self.view.ndim != 1 or self.view.itemsize != 1:
            self.view = self.view.cast("B")
        self.size = len(self.view)

    @classmethod
    def from_path(cls, path: str | os.PathLike[str]) -> MappedSource:
        p = os.fspath(path)
        try:
            with open(p, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size == 0:
                    return cls(p, b"")
                mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except OSError as e:
            raise PolybagError(f"{p}: cannot open: {e.strerror or e}") from e
        try:
            mm.madvise(mmap.MADV_SEQUENTIAL)
        except (AttributeError, OSError):
            pass
        return cls(p, mm)

    def read_at(self, offset: int, length: int, what: str = "bytes") -> memoryview:
        """``length`` bytes at ``offset``; TruncatedError if the file ends before."""
        if offset < 0 or length < 0 or offset + length > self.size:
            raise TruncatedError(
                f"expected {length} bytes of {what}, file has {max(0, self.size - offset)} left",
                self.path,
                offset,
            )
        return self.view[offset : offset + length]

    def release_pages(self) -> None:
        """Drop the mapped pages from this process's resident set (``MADV_DONTNEED``).

        The bytes stay in the OS page cache and are mapped back on the next access, so every
        view stays valid; long streaming passes (``convert``) call this now and then so the
        resident memory of a pass over a huge file stays bounded.
        """
        if isinstance(self._buffer, mmap.mmap):
            try:
                self._buffer.madvise(mmap.MADV_DONTNEED)
            except (AttributeError, OSError, ValueError):
                pass

    def close(self) -> None:
        self.view.release()
        if isinstance(self._buffer, mmap.mmap):
            try:
                self._buffer.close()
            except BufferError:  # a caller still holds a slice; the OS unmaps at exit
                pass


class StreamSource:
    """A forward-only binary stream (a pipe, stdin, a socket file)."""

    seekable = False

    def __init__(self, stream: BinaryIO, path: str | None = None, prefix: bytes = b"") -> None:
        self.stream = stream
        self.path = path or getattr(stream, "name", None) or "<stream>"
        if not isinstance(self.path, str):
            self.path = "<stream>"
        self._pending = prefix
        self.position = 0

    def peek(self, n: int) -> bytes:
        """Up to ``n`` bytes without consuming them."""
        while len(self._pending) < n:
            more = self.stream.read(n - len(self._pending))
            if not more:
                break
            self._pending += more
        return self._pending[:n]

    def read(self, n: int) -> bytes:
        """Up to ``n`` bytes (fewer only at end of stream)."""
        if n <= len(self._pending):
            out, self._pending = self._pending[:n], self._pending[n:]
            self.position += n
            return out
        parts = [self._pending]
        have = len(self._pending)
        self._pending = b""
        while have < n:
            more = self.stream.read(min(n - have, 1 << 24))
            if not more:
                break
            parts.append(more)
            have += len(more)
        out = b"".join(parts)
        self.position += len(out)
        return out

    def read_exact(self, n: int, what: str = "bytes") -> bytes:
        start = self.position
        out = self.read(n)
        if len(out) != n:
            raise TruncatedError(f"expected {n} bytes of {what}, stream ended after {len(out)}", self.path, start)
        return out

    def read_all(self) -> bytes:
        rest = self.stream.read()
        out = self._pending + (rest or b"")
        self._pending = b""
        self.position += len(out)
        return out

    def close(self) -> None:
        pass


Source = MappedSource | StreamSource


def open_source(target: str | os.PathLike[str] | BinaryIO | bytes | bytearray | memoryview) -> Source:
    """A byte source for a path, an in-memory buffer or a binary stream."""
    if isinstance(target, (bytes, bytearray, memoryview)):
        return MappedSource(None, target)
    if isinstance(target, (str, os.PathLike)):
        return MappedSource.from_path(target)
    # A file object: map it when it is a seekable regular file, stream it otherwise.
    name = getattr(target, "name", None)
    try:
        seekable = target.seekable()
    except (AttributeError, ValueError, OSError):
        seekable = False
    if seekable:
        try:
            fileno = target.fileno()
            st = os.fstat(fileno)
            if st.st_size > 0 and target.tell() == 0:
                mm = mmap.mmap(fileno, 0, access=mmap.ACCESS_READ)
                return MappedSource(name if isinstance(name, str) else None, mm)
        except (OSError, io.UnsupportedOperation, AttributeError, ValueError):
            pass
        if isinstance(target, io.BytesIO):
            return MappedSource(None, target.getbuffer()[target.tell() :].tobytes())
    return StreamSource(target, name if isinstance(name, str) else None)
