"""Bulk payload gathering for ``topic_payloads`` (no Python object per message).

A reader finds the payloads of one topic as (start, size) pairs in a buffer (a
decompressed chunk or the mapped file); :func:`gather` copies them back to back with numpy
and :class:`Arena` collects the pieces of many chunks into one ``uint8`` blob, growing
only when the declared chunk sizes (a bound, never trusted for allocation beyond the
file) were too small.  Used by every format that offers ``topic_payloads``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from polybag.model import TopicPayloads

_EMPTY = np.zeros(0, np.int64)
_FEW_SIZES = 16  # at most this many distinct payload sizes: copied size by size
_SIZES_SORT_MAX = 1 << 16  # more payloads than this in one call: not sorted to count sizes


def packed(datas: list[Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(blob, starts, sizes)`` of payloads given one by one (bytes-like): joined back to
    back in the order given, for readers whose payloads are not views of one buffer."""
    n = len(datas)
    sizes = np.fromiter(map(len, datas), dtype=np.int64, count=n)
    starts = np.zeros(n, dtype=np.int64)
    if n > 1:
        np.cumsum(sizes[:-1], out=starts[1:])
    return np.frombuffer(b"".join(datas), dtype=np.uint8), starts, sizes


def gather(a: np.ndarray, starts: np.ndarray, sizes: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Copy ``a[starts[i]:starts[i] + sizes[i]]`` back to back into ``out`` (``sizes.sum()`` long).

    The payloads land in the order of ``starts`` sorted ascending (file order); returns the
    start of each payload in ``out``, in the order given.  Equal sizes at a constant stride
    (one channel's records) are copied as the rows of a strided view; disjoint payloads
    of a few sizes size by size, each payload one element of a void dtype; other disjoint
    payloads through a byte mask; anything else (overlaps) through an explicit index.
    """
    n = len(starts)
    if n == 0:
        return _EMPTY
    if n > 1 and not bool(np.all(starts[1:] >= starts[:-1])):
        o = np.argsort(starts, kind="stable")
        packed = gather(a, starts[o], sizes[o], out)
        back = np.empty_like(packed)
        back[o] = packed
        return back
    new = np.zeros(n, np.int64)
    np.cumsum(sizes[:-1], out=new[1:])
    s0 = int(starts[0])
    size0 = int(sizes[0])
    if bool((sizes == size0).all()):
        step = int(starts[1] - starts[0]) if n > 1 else size0
        if n == 1 or bool((np.diff(starts) == step).all()):
            if size0:
                rows = np.lib.stride_tricks.as_strided(a[s0:], shape=(n, size0), strides=(step, 1), writeable=False)
                out.reshape(n, size0)[...] = rows
            return new
    ends = starts + sizes
    if n > 1 and not bool(np.all(starts[1:] >= ends[:-1])):
        # overlapping payloads (never in a well-formed file): an explicit byte index
        idx = np.repeat(starts - new, sizes) + np.arange(int(sizes.sum()), dtype=np.int64)
        np.take(a, idx, out=out)
        return new
    few = np.unique(sizes) if n <= _SIZES_SORT_MAX and a.flags.c_contiguous and int(ends[-1]) <= len(a) else None
    if few is not None and len(few) <= _FEW_SIZES:
        # a few payload sizes (strings of a few lengths): per size, every payload of it one
        # element of a void dtype, copied by one fancy-indexed assignment (C per element)
        for s in few.tolist():
            if s == 0:
                continue
            sel = np.flatnonzero(sizes == s)
            src = np.ndarray((len(a) - s + 1,), f"V{s}", a, 0, (1,))
            dst = np.ndarray((len(out) - s + 1,), f"V{s}", out, 0, (1,))
            dst[new[sel]] = src[starts[sel]]
        return new
    d = np.zeros(len(a) + 1, np.int8)
    nz = sizes > 0  # empty payloads add nothing (and may share a start with the next one)
    d[starts[nz]] += 1
    d[ends[nz]] -= 1
    mask = np.cumsum(d[:-1], dtype=np.int8).view(np.bool_)
    np.compress(mask, a, out=out)
    return new


# Arena buffers of 1-64 MiB come from a pool of at most two: when every array of a result
# is gone, its buffer goes back to the pool and the next call writes into pages that are
# already there.  Fresh pages cost a fault and the kernel's zeroing each (32 MB: 8,000
# faults or 16 huge pages), and on a VM whose host reclaims freed guest memory that cost
# swings widely: 100k Imu to columns took 37-124 ms of CPU from call to call with a fresh
# arena (system time 8-95 ms), a steady 35-37 ms with the pool.
_POOL_MIN = 1 << 20
_POOL_MAX = 64 << 20
_POOL_KEEP = 2
_pool: list[np.ndarray] = []


class _Owner(np.ndarray):
    """A pooled buffer (numpy owns its memory; its own type, so that the ``base`` chain of
    the arrays over it does not collapse past the :class:`_Lease` in between)."""


class _Lease(np.ndarray):
    """The array over a pooled buffer that every view of an arena leads back to (a type of
    its own: numpy's ``base`` chains stop here), made anew for each arena: when the last
    view goes, so does the lease, and it hands the buffer back to the pool."""

    def __del__(self) -> None:
        try:
            owner = self.base
            if isinstance(owner, _Owner) and len(_pool) < _POOL_KEEP:
                _pool.append(owner)
        except Exception:  # noqa: BLE001,S110 - (interpreter shutdown: nothing to keep)
            pass


def pooled_empty(n: int) -> np.ndarray:
    """An uninitialised ``uint8`` array of ``n`` bytes (a plain ndarray whose memory numpy
    owns); between 1 and 64 MiB from the pool of reused buffers (the caller writes every
    byte it exposes), else ``np.empty``.  Pages never written are never committed."""
    if not _POOL_MIN <= n <= _POOL_MAX:
        return np.empty(max(0, n), np.uint8)
    owner: np.ndarray | None = None
    try:
        got = _pool.pop()
    except IndexError:
        got = None
    if got is not None:
        if n <= len(got) <= 4 * n:
            owner = got
        else:
            _pool.append(got)
    if owner is None:
        owner = np.ndarray.__new__(_Owner, (n,), np.uint8)
    lease = np.ndarray.__new__(_Lease, (len(owner),), np.uint8, buffer=owner)
    return lease.view(np.ndarray)[:n]


class Arena:
    """One growing ``uint8`` blob that chunk after chunk of payloads is gathered into.

    ``times``: the dtype the log times are kept in (int64; MCAP's u64 times: uint64).
    """

    def __init__(self, capacity: int, times: Any = np.int64) -> None:
        self.buf = pooled_empty(capacity)
        self.pos = 0
        self.time_dtype = np.dtype(times)
        self.times: list[np.ndarray] = []
        self.starts: list[np.ndarray] = []
        self.sizes: list[np.ndarray] = []

    def add(self, a: np.ndarray, times: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> None:
        """Append the payloads ``a[starts:starts+sizes]`` (any order) with their log times."""
        if not len(starts):
            return
        need = int(sizes.sum())
        if self.pos + need > len(self.buf):
            grown = np.empty(max(2 * len(self.buf), self.pos + need), np.uint8)
            grown[: self.pos] = self.buf[: self.pos]
            self.buf = grown
        new = gather(a, starts, sizes, self.buf[self.pos : self.pos + need])
        self.times.append(times.astype(self.time_dtype, copy=False))
        self.starts.append(new + self.pos)
        self.sizes.append(sizes.astype(np.int64, copy=False))
        self.pos += need

    def result(self) -> TopicPayloads:
        """``(log_times, blob, starts, sizes)`` in log-time order (ties in the order added)."""
        if not self.times:
            return TopicPayloads(np.zeros(0, self.time_dtype), self.buf[:0], _EMPTY.copy(), _EMPTY.copy())
        lt = np.concatenate(self.times)
        starts = np.concatenate(self.starts)
        sizes = np.concatenate(self.sizes)
        if len(lt) > 1 and not bool(np.all(lt[1:] >= lt[:-1])):
            o = np.argsort(lt, kind="stable")
            lt, starts, sizes = lt[o], starts[o], sizes[o]
        return TopicPayloads(lt, self.buf[: self.pos], starts, sizes)


def in_file_order(times: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The entries sorted by payload start (stable), so equal log times keep file order."""
    if len(starts) > 1 and not bool(np.all(starts[1:] >= starts[:-1])):
        o = np.argsort(starts, kind="stable")
        return times[o], starts[o], sizes[o]
    return times, starts, sizes


__all__ = ["Arena", "gather", "in_file_order"]
