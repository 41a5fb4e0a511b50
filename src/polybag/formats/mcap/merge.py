"""The log-time merge of per-chunk sorted runs, lazily, checking the runs' claims.

A read in log-time order is a list of runs (one per chunk or per stretch of loose
messages), each with the smallest and largest log time its index claims and a loader;
:func:`_merge` loads a run only when the merge reaches its claimed start, so chunks that do
not overlap stream one at a time and a heap is used only while they overlap.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator

from polybag.errors import PolybagError
from polybag.formats.mcap.base import _Partial, _Redefined
from polybag.model import Message

Segment = tuple[int, int, Callable[[], list[Message]]]  # (start key, rank, loader)
# (claimed smallest key, claimed largest key, rank, loader): one run for _merge
Run = tuple[int, int, int, Callable[[], list[Message]]]


class _OutOfOrder(Exception):
    """A run held a message that sorts before one already yielded (its claims lied)."""

    def __init__(self, rank: int, key: int) -> None:
        self.rank = rank
        self.key = key


def _merge(
    runs: list[Run],
    key: Callable[[Message], int],
    replan: Callable[[set[int], int], list[Run]] | None = None,
    redefined: Callable[[set[int], bool], list[Run]] | None = None,
) -> Iterator[Message]:
    """Merge runs sorted by ``key``; ``runs`` come sorted by (claimed smallest key, rank).

    A run is loaded only when the smallest pending message is not smaller than its claimed
    smallest key, so non-overlapping chunks stream one at a time and ties keep the rank
    order.  The claims come from indexes and may lie: every loaded run is checked against
    them.  When one lies, ``replan`` (given the ranks loaded so far and the liar's) returns the runs still
    to load with true claims, and merging goes on with those; a run holding a message
    that sorts before one already yielded raises :class:`_OutOfOrder` (that output can no
    longer be put right).  When a load meets a redefined id (:class:`_Redefined`),
    ``redefined`` (given the ranks loaded so far and whether nothing was yielded yet) returns
    the runs to load instead; with nothing yielded the merge starts over.
    """
    heap: list[tuple[int, int, int, list[Message]]] = []
    push = heapq.heappush
    i = 0
    n = len(runs)
    done: set[int] = set()
    last_k = last_r = -(1 << 70)  # the last message yielded (key, rank)
    while True:
        while i < n and (not heap or runs[i][0] <= heap[0][0]):
            c0, c1, r, load = runs[i]
            i += 1
            try:
                msgs = load()
            except _Redefined:
                if redefined is None:
                    raise
                fresh = last_k == -(1 << 70)
                runs = redefined(done, fresh)
                if fresh:
                    heap.clear()
                    done.clear()
                i = 0
                n = len(runs)
                continue
            done.add(r)
            if not msgs:
                continue
            k0 = key(msgs[0])
            if k0 < last_k or (k0 == last_k and r < last_r):
                raise _OutOfOrder(r, k0)
            if replan is not None and (k0 < c0 or key(msgs[-1]) > c1):
                runs = replan(done, r)
                replan = None
                i = 0
                n = len(runs)
            push(heap, (k0, r, 0, msgs))
        if not heap:
            return
        if len(heap) == 1:
            _k, r, j, msgs = heap[0]
            if i >= n or key(msgs[-1]) < runs[i][0]:
                heap.clear()
                last_k = key(msgs[-1])
                last_r = r
                if j == 0:
                    yield from msgs
                else:
                    yield from msgs[j:]
                continue
        last_k, last_r, j, msgs = heap[0]
        yield msgs[j]
        j += 1
        if j < len(msgs):
            heapq.heapreplace(heap, (key(msgs[j]), last_r, j, msgs))
        else:
            heapq.heappop(heap)


def _const(msgs: list[Message]) -> Callable[[], list[Message]]:
    return lambda: msgs


def _reversed_loader(load: Callable[[], list[Message]]) -> Callable[[], list[Message]]:
    def inner() -> list[Message]:
        msgs = load()
        msgs.reverse()
        return msgs

    return inner


def _guard(late: list[PolybagError]) -> Callable[[Callable[[], list[Message]]], Callable[[], list[Message]]]:
    """A wrapper for loaders: a load that meets damage (:class:`_Partial`) returns the intact
    messages before it and puts the error on ``late`` (raised once they were returned)."""

    def guard(load: Callable[[], list[Message]]) -> Callable[[], list[Message]]:
        def inner() -> list[Message]:
            try:
                return load()
            except _Partial as p:
                late.append(p.err)
                return p.msgs

        return inner

    return guard
