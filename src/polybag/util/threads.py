"""The process's worker threads, shared by every reader and writer.

numpy, zlib, zstandard and lz4 release the GIL on large buffers, so a second core can scan
or compress while the first goes on.  One pool is made on first use; a forked child gets a
new one (the parent's threads do not exist in the child: waiting on them would hang).
"""

from __future__ import annotations

import os
import stat
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # (concurrent.futures imports logging: ~10 ms that a reader never needs)
    from concurrent.futures import Future, ThreadPoolExecutor

MAX_WORKERS = 4

_POOL: ThreadPoolExecutor | None = None
_LOCK = threading.Lock()


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def workers() -> int:
    """How many threads are worth using at once: one per core, at most the pool's size."""
    return max(1, min(cores(), MAX_WORKERS))


def helpers() -> int:
    """Worker threads worth using beside a thread that works too (a writer packs a chunk
    itself when its helpers are all busy): one per core but the caller's.  More would only
    take turns on the cores, each turn evicting the others' caches."""
    return workers() - 1


# Chunks a writer may hold closed but not yet written (packed, or being packed by a worker)
# before it waits for the oldest: up to QUEUE_CHUNKS while they hold at most QUEUE_BYTES.
# Waiting as soon as one chunk was queued behind the worker's stalled the writing thread
# whenever other processes kept the worker off the cores (convert under load: slower than
# one thread); with room to queue, the writing thread packs the next chunks itself.
QUEUE_CHUNKS = 8
QUEUE_BYTES = 64 << 20


def keep_in_flight(depth: int, held: int) -> int:
    """How many closed chunks a writer with ``depth`` helper threads leaves in flight (see
    ``_drain``) when they hold ``held`` bytes: room to queue while under
    :data:`QUEUE_BYTES`, else one more than its helpers."""
    return depth + 1 if held > QUEUE_BYTES else max(depth + 1, QUEUE_CHUNKS)


def finished(value: Any) -> Future[Any]:
    """A future that already holds ``value`` (work done in the calling thread, queued with
    the work of the pool's)."""
    from concurrent.futures import Future

    f: Future[Any] = Future()
    f.set_result(value)
    return f


def pool() -> ThreadPoolExecutor:
    """The shared pool (made on first use)."""
    global _POOL
    with _LOCK:
        if _POOL is None:
            from concurrent.futures import ThreadPoolExecutor

            _POOL = ThreadPoolExecutor(max_workers=MAX_WORKERS, thread_name_prefix="polybag")
        return _POOL


def _datasync(fd: int) -> None:
    try:
        os.fdatasync(fd)
    except OSError:  # (the final fsync reports what matters)
        pass


class Writeback:
    """Start writing a file's data to disk in the background while it grows.

    A writer that fsyncs its file on close (:class:`polybag.io.output_files.AtomicFile`) otherwise
    waits at the end for the disk to take everything it wrote; with this, a worker thread
    calls ``fdatasync`` each time ``every`` more bytes have been written, so the disk works
    while the writer computes and the final fsync has only the tail left.  The bytes and
    the final fsync are unchanged.  Only for a regular file the writer owns; :meth:`wait`
    before the file is closed.  ``every`` is 8 MiB: with 32 MiB a 36 MB bag (100k Imu)
    had one sync that started at 32 MiB and then waited for it at close (wall 164 ms
    for 107 ms of CPU; 107-110 ms with 8 MiB); a 509 MB MCAP takes ~64 syncs.
    """

    __slots__ = ("_fd", "_every", "_next", "_fut")

    def __init__(self, file: Any, every: int = 8 << 20) -> None:
        self._fd: int | None = None
        self._every = every
        self._next = every
        self._fut: Future[None] | None = None
        if not hasattr(os, "fdatasync") or cores() < 2:
            return
        try:
            fd = file.fileno()
            if stat.S_ISREG(os.fstat(fd).st_mode):
                self._fd = fd
        except (AttributeError, OSError, ValueError):
            pass

    def wrote(self, pos: int) -> None:
        """The file has ``pos`` bytes written (cheap to call after every write)."""
        if pos < self._next or self._fd is None:
            return
        fut = self._fut
        if fut is not None and not fut.done():
            return  # (the next call starts another one)
        self._next = pos + self._every
        self._fut = pool().submit(_datasync, self._fd)

    def wait(self) -> None:
        """Let the background sync in progress end (before the file is closed)."""
        fut, self._fut = self._fut, None
        if fut is not None and not fut.cancel():
            fut.result()


def _forget() -> None:
    global _POOL, _LOCK
    _POOL = None
    _LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)
