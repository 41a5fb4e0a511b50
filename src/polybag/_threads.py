"""The process's worker threads, shared by every reader and writer.

numpy, zlib, zstandard and lz4 release the GIL on large buffers, so a second core can scan
or compress while the first goes on.  One pool is made on first use; a forked child gets a
new one (the parent's threads do not exist in the child: waiting on them would hang).
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

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


def pool() -> ThreadPoolExecutor:
    """The shared pool (made on first use)."""
    global _POOL
    with _LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=MAX_WORKERS, thread_name_prefix="polybag")
        return _POOL


def _forget() -> None:
    global _POOL, _LOCK
    _POOL = None
    _LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)
