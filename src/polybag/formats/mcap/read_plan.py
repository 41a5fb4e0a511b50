"""The read planner: which chunks and runs of loose messages a read of a mapped file loads.

:func:`plan_read` is pure: from the summary's Chunk Indexes (:class:`SummaryIndex`) or what a
scan found (:class:`ScanIndex`), the wanted channel ids and a log-time window, it lists the
:class:`PlannedRun` values a read needs (their claimed log-time range, their rank in file
order and where they are), without reading anything.  The reader attaches a loader to each
run (:class:`~polybag.formats.mcap.segments.SegmentPlanner`), checks the claimed times where it must,
and fetches ahead what a remote file needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, NamedTuple

import numpy as np

from polybag.formats.mcap.index import ScanIndex, SummaryIndex
from polybag.formats.mcap.vocabulary import MAX_TIME

ReadOrder = Literal["file", "log_time"]


class PlannedRun(NamedTuple):
    """One chunk or stretch of loose messages that may hold a wanted message.

    ``start``/``end``: its claimed log-time range (unknown: 0 and :data:`MAX_TIME`); ``rank``:
    its place in file order; ``offset``: the chunk's offset (loose messages: the first one's);
    ``chunk``: its position in the summary's Chunk Indexes (None: found by a scan);
    ``loose``: the offsets of its loose messages (None: a chunk).
    """

    start: int
    end: int
    rank: int
    offset: int
    chunk: int | None = None
    loose: list[int] | None = None


@dataclass
class ReadPlan:
    """The runs of a read (see :func:`plan_read`); ``in_window``: the positions of the Chunk
    Indexes whose claimed times meet the window, wanted channels or not (a log-time read
    checks their Message Indexes)."""

    runs: list[PlannedRun] = field(default_factory=list)
    in_window: list[int] = field(default_factory=list)


def plan_read(
    index: SummaryIndex | ScanIndex,
    want: set[int] | None,
    window: tuple[int | None, int | None] = (None, None),
    reverse: bool = False,
    order: ReadOrder | None = None,
) -> ReadPlan:
    """The runs a read of ``want`` (channel ids in the file's terms; None: all) in
    ``window`` (``start`` inclusive, ``end`` exclusive, None: open) loads.

    A :class:`SummaryIndex` (with Chunk Indexes) plans from those: a chunk is read if its
    claimed times meet the window (a chunk with no times, 0 and 0, always) and its Message
    Indexes list a wanted channel (or it has none); the runs are in Chunk Index order.  A
    :class:`ScanIndex` plans from the chunks and loose messages a scan found, in file order.
    With ``order`` the runs are put in the order the read takes them: ``"file"`` by rank,
    ``"log_time"`` by claimed start (then rank); ``reverse`` reverses either.
    """
    start, end = window
    if isinstance(index, SummaryIndex):
        plan = _plan_indexed(index, want, start, end)
    else:
        plan = ReadPlan(_plan_scanned(index, start, end))
    if order is not None:
        plan.runs = read_order(plan.runs, order, reverse)
    return plan


def read_order(runs: list[PlannedRun], order: ReadOrder, reverse: bool = False) -> list[PlannedRun]:
    """``runs`` in the order a read takes them: file order by rank; log-time order by claimed
    start then rank (reversed: by claimed end, descending, then rank, descending), as
    :func:`~polybag.formats.shared.merge.merge_plan` sorts them."""
    if order == "file":
        return sorted(runs, key=lambda r: r.rank, reverse=reverse)
    if reverse:
        return sorted(runs, key=lambda r: (-r.end, -r.rank))
    return sorted(runs, key=lambda r: (r.start, r.rank))


def _plan_indexed(index: SummaryIndex, want: set[int] | None, start: int | None, end: int | None) -> ReadPlan:
    arr = index.chunk_index_array
    assert arr is not None
    sel = np.ones(len(arr), bool)
    if start is not None:
        sel &= arr["end"] >= np.uint64(start)
    if end is not None:
        sel &= arr["start"] < np.uint64(min(end, (1 << 64) - 1))
    order = np.argsort(arr["offset"], kind="stable")
    ranks = np.empty(len(arr), np.int64)
    ranks[order] = np.arange(len(arr))
    unknown = (arr["start"] == 0) & (arr["end"] == 0)  # no times: read it wherever
    if start is not None or end is not None:
        sel |= unknown
    cis = index.chunk_indexes
    where = np.nonzero(sel)[0]
    in_window = where.tolist()
    runs: list[PlannedRun] = []
    make = tuple.__new__  # a PlannedRun without its Python-level constructor (a hot loop)
    for i, rank, no_times in zip(in_window, ranks[where].tolist(), unknown[where].tolist()):
        ci = cis[i]
        if want is None or not ci.message_index_offsets or want & ci.message_index_offsets.keys():
            if no_times:
                runs.append(make(PlannedRun, (0, MAX_TIME, rank, ci.chunk_start_offset, i, None)))
            else:
                runs.append(make(PlannedRun, (ci.message_start_time, ci.message_end_time, rank, ci.chunk_start_offset, i, None)))
    return ReadPlan(runs, in_window)


def _plan_scanned(sr: ScanIndex, start: int | None, end: int | None) -> list[PlannedRun]:
    lo = -1 if start is None else start
    hi = 1 << 64 if end is None else end
    runs = []
    for (off, _ln, s, t), rank in zip(sr.chunks, sr.chunk_ranks):
        if s == 0 and t == 0:
            t = MAX_TIME  # no times: read it wherever
        elif t < lo or s >= hi:
            continue
        runs.append(PlannedRun(s, t, rank, off))
    for rank, s, t, offs in sr.loose:
        if t < lo or s >= hi:
            continue
        runs.append(PlannedRun(s, t, rank, offs[0] if offs else -1, None, offs))
    runs.sort(key=lambda x: x.rank)
    return runs
