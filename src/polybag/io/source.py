"""Byte sources: the one way formats get at a file's bytes.

Formats never open files themselves; they read a :class:`Source`.  A seekable source
(:class:`MappedSource`, a :class:`RandomAccessSource`) maps the file and hands out
``memoryview`` slices; a forward-only source (:class:`StreamSource`) wraps a pipe or
``sys.stdin.buffer``; a remote object (:class:`polybag.io.remote_source.RemoteSource`) is a
``MappedSource`` filled by range requests as a format :meth:`~Source.need` s ranges.  Every
source answers ``need``/``need_many``/``need_all``/``hint`` (nothing to do but on a remote
one), so a format says what it is about to read without knowing where the bytes come
from.  All check every request against what the file can hold, so a lying length field
becomes a :class:`~polybag.errors.TruncatedError`, never a huge allocation.

A path is looked at before it is opened: a regular file is mapped, a named pipe (FIFO) is
read forward only like stdin, and anything else (a directory, ``/dev/zero`` or another
device, a socket) is a clear error, never "an empty file", a hang or an endless read.
"""

from __future__ import annotations

import io
import mmap
import os
import stat
from collections.abc import Iterable
from typing import Any, BinaryIO, Protocol

from polybag.errors import PolybagError, TruncatedError

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def file_kind(mode: int) -> str | None:
    """What a non-regular file is (``"a directory"``, ``"a character device"``...); None for
    a regular file."""
    if stat.S_ISREG(mode):
        return None
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def _stat(path: str) -> os.stat_result:
    try:
        return os.stat(path)
    except OSError as e:
        raise PolybagError(f"{path}: cannot open: {e.strerror or e}") from e


def _not_a_log(path: str, kind: str, mapped: bool = True) -> PolybagError:
    if kind == "a directory":
        return PolybagError(f"{path}: is a directory, not a log file")
    if kind == "a named pipe (FIFO)" and mapped:
        return PolybagError(
            f"{path}: is a named pipe (FIFO); this needs a regular file (info, cat, convert... read pipes)"
        )
    return PolybagError(f"{path}: is {kind}, not a log file (polybag reads regular files, pipes and stdin)")


def require_regular_file(path: str | os.PathLike[str]) -> os.stat_result:
    """``os.stat(path)`` of a regular file; a clear :class:`PolybagError` for anything else
    (a missing file, a directory, a pipe, a device)."""
    p = os.fspath(path)
    st = _stat(p)
    kind = file_kind(st.st_mode)
    if kind is not None:
        raise _not_a_log(p, kind)
    return st


class Source(Protocol):
    """What every byte source is: a name, whether it can be read at any offset, and the
    ranges a format asks for before it reads them (a no-op on a local file, fetched on a
    remote one; see :mod:`polybag.io.remote`)."""

    #: what the source is to the user (a path, a URL without secrets, ``<stream>``)
    path: str | None

    @property
    def seekable(self) -> bool:
        """True for a random-access source (``view``), False for a forward-only stream."""
        ...

    @property
    def stats(self) -> dict[str, Any] | None:
        """Requests made and bytes fetched (a remote source); None for a local one."""
        ...

    def need(self, offset: int, length: int) -> None:
        """Make ``[offset, offset + length)`` readable."""
        ...

    def need_many(self, ranges: Iterable[tuple[int, int]]) -> None:
        """:meth:`need` of several ``(offset, length)`` ranges at once."""
        ...

    def need_all(self) -> None:
        """Make the whole file readable (a format that reads it front to back)."""
        ...

    def hint(self, ranges: Iterable[tuple[int, int]]) -> None:
        """The ``(offset, length)`` ranges a read will go through, in file order."""
        ...

    def close(self) -> None:
        """Release the file (unmap it, close what the source owns)."""
        ...


class RandomAccessSource(Source, Protocol):
    """A source read at any offset through one ``memoryview`` (a mapped file, a buffer, a
    spooled stream, a remote object filled by range requests)."""

    view: memoryview
    size: int

    def read_at(self, offset: int, length: int, what: str = "bytes") -> memoryview:
        """``length`` bytes at ``offset``; TruncatedError if the file ends before."""
        ...

    def release_pages(self) -> None:
        """Drop the pages read so far from the resident set (they are read again if touched)."""
        ...


class MappedSource:
    """A whole local file (or an in-memory buffer) as one ``memoryview`` (a
    :class:`RandomAccessSource`)."""

    seekable = True

    def __init__(self, path: str | None, buffer: bytes | bytearray | memoryview | mmap.mmap) -> None:
        self.path = path
        self._buffer = buffer
        self.view = memoryview(buffer)
        if self.view.ndim != 1 or self.view.itemsize != 1:
            self.view = self.view.cast("B")
        self.size = len(self.view)
        self._spool: BinaryIO | None = None  # the temporary file behind a spooled stream

    @classmethod
    def from_path(cls, path: str | os.PathLike[str]) -> MappedSource:
        """Map the regular file ``path`` (anything else is a :class:`PolybagError`; see
        :func:`open_source` for pipes)."""
        p = os.fspath(path)
        require_regular_file(p)  # before open(): opening a FIFO would wait for a writer
        try:
            with open(p, "rb") as f:
                st = os.fstat(f.fileno())
                kind = file_kind(st.st_mode)
                if kind is not None:  # replaced since the stat
                    raise _not_a_log(p, kind)
                if st.st_size == 0:
                    return cls(p, b"")
                mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except OSError as e:
            raise PolybagError(f"{p}: cannot open: {e.strerror or e}") from e
        try:
            mm.madvise(mmap.MADV_SEQUENTIAL)
        except (AttributeError, OSError):
            pass
        return cls(p, mm)

    @property
    def stats(self) -> dict[str, Any] | None:
        """Requests made and bytes fetched (a remote source, :mod:`polybag.io.remote`); None
        for a local file."""
        return None

    def need(self, offset: int, length: int) -> None:
        """Make ``view[offset:offset + length]`` readable: nothing to do for a local file; a
        remote source fetches the range (formats call this before touching a range)."""

    def need_many(self, ranges: Iterable[tuple[int, int]]) -> None:
        """:meth:`need` of several ``(offset, length)`` ranges at once."""

    def need_all(self) -> None:
        """Make the whole file readable (a format that reads it front to back)."""

    def hint(self, ranges: Iterable[tuple[int, int]]) -> None:
        """The ``(offset, length)`` ranges a read will go through, in file order: nothing for
        a local file; a remote source fetches them ahead of the reader in the background."""

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
        spool = self._spool
        if spool is not None:
            try:
                spool.close()  # an anonymous temporary file: the space is freed with it
            except OSError:
                pass


#: A stream longer than this is spooled to a temporary file by :meth:`StreamSource.spool`.
SPOOL_MEMORY_LIMIT = 8 << 20
_SPOOL_BLOCK = 1 << 20


class StreamSource:
    """A forward-only binary stream (a pipe, stdin, a socket file): a :class:`Source` read
    with :meth:`read`; its ``need``s are no-ops (the bytes come as the stream is read)."""

    seekable = False
    #: nothing is fetched by request
    stats: dict[str, Any] | None = None

    def __init__(self, stream: BinaryIO, path: str | None = None, prefix: bytes = b"", *, own: bool = False) -> None:
        self.stream = stream
        self._own = own  # close the stream with the source (a FIFO opened by path)
        self.path: str | None = path or getattr(stream, "name", None) or "<stream>"
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

    def need(self, offset: int, length: int) -> None:
        """Nothing: a stream's bytes are read in order (:meth:`read`)."""

    def need_many(self, ranges: Iterable[tuple[int, int]]) -> None:
        """Nothing (see :meth:`need`)."""

    def need_all(self) -> None:
        """Nothing: :meth:`spool` reads a stream whole."""

    def hint(self, ranges: Iterable[tuple[int, int]]) -> None:
        """Nothing (see :meth:`need`)."""

    def read_exact(self, n: int, what: str = "bytes") -> bytes:
        start = self.position
        out = self.read(n)
        if len(out) != n:
            raise TruncatedError(f"expected {n} bytes of {what}, stream ended after {len(out)}", self.path, start)
        return out

    def spool(self, head: bytes = b"") -> MappedSource:
        """``head`` + the rest of the stream as a :class:`MappedSource`, with bounded memory.

        A stream of up to :data:`SPOOL_MEMORY_LIMIT` bytes stays in memory; a longer one is
        copied to an anonymous temporary file (``tempfile.TemporaryFile`` in the system
        temporary directory, gone when closed or at exit) and mapped, so the reader sees the
        same random-access view as for a regular file while the resident memory stays that
        of the pages it touches.  A full disk (or any other write error) is a
        :class:`PolybagError` naming the stream and the temporary directory.
        """
        label = self.path
        parts = [head, self._pending] if head else [self._pending]
        have = sum(len(p) for p in parts)
        self._pending = b""
        ended = False
        while have <= SPOOL_MEMORY_LIMIT:
            more = self.stream.read(_SPOOL_BLOCK)
            if not more:
                ended = True
                break
            parts.append(more)
            have += len(more)
        if ended:
            data = b"".join(parts)
            self.position += len(data) - len(head)
            return MappedSource(label, data)
        import tempfile  # here: only a long stream needs it (~3 ms of import for every process)

        tmpdir = tempfile.gettempdir()
        try:
            spool = tempfile.TemporaryFile(prefix="polybag-stream-")  # noqa: SIM115 - owned by the source
        except OSError as e:
            raise PolybagError(
                f"{self.path}: cannot create a temporary file in {tmpdir} to hold the stream: "
                f"{e.strerror or e}"
            ) from e
        try:
            total = 0
            for part in parts:
                spool.write(part)
                total += len(part)
            parts.clear()
            while True:
                more = self.stream.read(_SPOOL_BLOCK)
                if not more:
                    break
                spool.write(more)
                total += len(more)
            spool.flush()
            mm = mmap.mmap(spool.fileno(), 0, access=mmap.ACCESS_READ)
        except OSError as e:
            spool.close()
            raise PolybagError(
                f"{self.path}: cannot copy the stream to a temporary file in {tmpdir} "
                f"(after {total} bytes): {e.strerror or e}"
            ) from e
        self.position += total - len(head)
        src = MappedSource(label, mm)
        src._spool = spool
        return src

    def close(self) -> None:
        if self._own:
            try:
                self.stream.close()
            except OSError:
                pass


def _check_stream(target: BinaryIO, name: str | None) -> None:
    """A stream on a terminal, a device or a directory is an error (reading ``/dev/zero``
    would never end, a terminal would wait for typing)."""
    try:
        st = os.fstat(target.fileno())
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return  # not a file descriptor (BytesIO, a socket wrapper...): read it
    kind = file_kind(st.st_mode)
    if kind is None or kind in ("a named pipe (FIFO)", "a socket"):
        return
    label = name if isinstance(name, str) else "<stream>"
    try:
        tty = target.isatty()
    except (AttributeError, OSError, ValueError):
        tty = False
    if tty:
        raise PolybagError(f"{label}: is a terminal; pipe a log into it (polybag cat - < x.mcap) or name a file")
    raise _not_a_log(label, kind, mapped=False)


def open_source(target: str | os.PathLike[str] | BinaryIO | bytes | bytearray | memoryview) -> MappedSource | StreamSource:
    """A byte source for a path, an in-memory buffer or a binary stream (URLs:
    :func:`polybag.io.remote.open_url`)."""
    if isinstance(target, (bytes, bytearray, memoryview)):
        return MappedSource(None, target)
    if isinstance(target, (str, os.PathLike)):
        p = os.fspath(target)
        if stat.S_ISFIFO(_stat(p).st_mode):  # a named pipe: read forward only, like stdin
            try:
                f = open(p, "rb")  # noqa: SIM115 - closed by the source
            except OSError as e:
                raise PolybagError(f"{p}: cannot open: {e.strerror or e}") from e
            return StreamSource(f, p, own=True)
        return MappedSource.from_path(p)
    # A file object: map it when it is a seekable regular file, stream it otherwise.
    name = getattr(target, "name", None)
    _check_stream(target, name)
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
