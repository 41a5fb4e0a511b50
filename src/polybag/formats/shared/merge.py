"""The one log-time merge of per-chunk sorted runs, used by every format's reader.

A read in log-time order is a list of runs (one per chunk, or per stretch of loose
messages), each with the smallest and largest log time its index claims, a rank (its place
in the file: ties in log time keep file order) and a loader.  :func:`merge_runs` loads a
run only when the merge reaches its claimed start, so chunks that do not overlap in time
stream one at a time (bounded memory) and a heap is used only while they overlap.  It
hands out lists of messages (a whole chunk at a time where chunks do not overlap), which
callers flatten with :func:`itertools.chain.from_iterable` (a list step per message, not
a generator resumption).

The claims come from indexes and may lie: every loaded run is checked against them.  The
MCAP and 2.0 bag readers both plan their runs from their indexes and call this merge;
what a format does when its claims lie (re-plan with true times) is a hook.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from operator import attrgetter

from polybag.model import Message

Loader = Callable[[], list[Message]]
Segment = tuple[int, int, Loader]  # (start key, rank, loader)
# (claimed smallest key, claimed largest key, rank, loader): one run for merge_runs
Run = tuple[int, int, int, Loader]

_NONE = -(1 << 70)  # smaller than any key: nothing yielded yet


class OutOfOrder(Exception):
    """A run held a message that sorts before one already yielded (its claims lied)."""

    def __init__(self, rank: int, key: int) -> None:
        super().__init__(rank, key)
        self.rank = rank
        self.key = key


def merge_runs(
    runs: list[Run],
    key: Callable[[Message], int],
    replan: Callable[[set[int], int], list[Run]] | None = None,
    redefined: Callable[[set[int], bool], list[Run]] | None = None,
    restart_on: tuple[type[BaseException], ...] = (),
) -> Iterator[list[Message]]:
    """Merge runs sorted by ``key``; ``runs`` come sorted by (claimed smallest key, rank).

    Yields lists of messages in order.  A run is loaded only when it may hold a message
    that sorts, by (key, rank), before the smallest pending one, so chunks that do not
    overlap (or only share a boundary key, the later one ranked after) stream one at a
    time, and ties keep the rank order.  When a loaded run's messages lie outside
    its claims, ``replan`` (given the ranks loaded so far and the liar's) returns the runs
    still to load with true claims, and merging goes on with those; a run holding a message
    that sorts before one already yielded raises :class:`OutOfOrder` (that output can no
    longer be put right).  When a load raises one of ``restart_on`` (a definition that
    changes a channel), ``redefined`` (given the ranks loaded so far and whether nothing
    was yielded yet) returns the runs to load instead; with nothing yielded the merge
    starts over.  Every list handed out is complete before the next load, so an error
    raised by a load comes after every message merged before it.
    """
    # One loop on purpose (issue 15's "no function over ~60 lines" excepts hot loops): it runs
    # per message while chunks overlap, and helper calls there cost more than the merge.
    heap: list[tuple[int, int, int, list[Message]]] = []
    push = heapq.heappush
    i = 0
    n = len(runs)
    done: set[int] = set()
    last_k = last_r = _NONE  # the last message merged (key, rank)
    out: list[Message] = []  # merged messages not handed out yet
    while True:
        # load the next run while it may hold a message sorting before the smallest pending one
        while i < n and (not heap or (runs[i][0], runs[i][2]) < heap[0][:2]):
            if out:
                yield out
                out = []
            c0, c1, r, load = runs[i]
            i += 1
            try:
                msgs = load()
            except restart_on:
                if redefined is None:
                    raise
                fresh = last_k == _NONE
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
                raise OutOfOrder(r, k0)
            if replan is not None and (k0 < c0 or key(msgs[-1]) > c1):
                runs = replan(done, r)
                replan = None
                i = 0
                n = len(runs)
            push(heap, (k0, r, 0, msgs))
        if not heap:
            if out:
                yield out
            return
        if len(heap) == 1:
            _k, r, j, msgs = heap[0]
            if i >= n or (key(msgs[-1]), r) < (runs[i][0], runs[i][2]):
                heap.clear()
                last_k = key(msgs[-1])
                last_r = r
                if out:
                    yield out
                    out = []
                yield msgs if j == 0 else msgs[j:]
                continue
        last_k, last_r, j, msgs = heap[0]
        out.append(msgs[j])
        j += 1
        if j < len(msgs):
            heapq.heapreplace(heap, (key(msgs[j]), last_r, j, msgs))
        else:
            heapq.heappop(heap)


def const(msgs: list[Message]) -> Loader:
    """A loader of messages already in hand."""
    return lambda: msgs


def reversed_loader(load: Loader) -> Loader:
    """``load``'s messages, last first."""

    def inner() -> list[Message]:
        msgs = load()
        msgs.reverse()
        return msgs

    return inner


def merge_plan(segs: list[Run], reverse: bool, wrap: Callable[[Loader], Loader] | None = None) -> list[Run]:
    """The runs :func:`merge_runs` takes for ``segs`` (claimed start, claimed end, rank,
    loader of messages in ascending order), sorted; reversed reads negate keys and ranks
    (merge with :data:`NEG_LOG_TIME`) and reverse each run.  ``wrap`` wraps each loader."""
    if reverse:
        runs = [(-t, -s, -r, reversed_loader(wrap(ld) if wrap else ld)) for s, t, r, ld in segs]
    else:
        runs = [(s, t, r, wrap(ld)) for s, t, r, ld in segs] if wrap else list(segs)
    runs.sort(key=lambda x: (x[0], x[2]))
    return runs


# the merge keys of a forward and a reversed read
LOG_TIME: Callable[[Message], int] = attrgetter("log_time")


def NEG_LOG_TIME(m: Message) -> int:  # noqa: N802 - a key function named like LOG_TIME
    """The merge key of a reversed read."""
    return -m.log_time
