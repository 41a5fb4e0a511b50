"""Partition planning from the files' own indexes (runs in the driver, reads no message data).

A file's reader gives its chunks (:meth:`~polybag.reader.Reader.chunk_message_counts`:
log-time range and count of the selected topics per chunk); :func:`_windows` cuts the
file's time axis into windows of about ``partition_messages`` messages, and
:func:`_order` orders the partitions of all files and finds the Dask divisions (files
that overlap in time share windows, :func:`_merged_windows`).  Files without an index and
ULog files are one partition each.  :class:`Partition` is what a task receives: paths and
a window, never an open reader.

A remote file's tasks each fetch the chunks of their window and its summary: cuts split no
chunk where that can be (:func:`_windows`), a remote file is not cut into parts of much
less than :data:`MIN_REMOTE_PART_BYTES`, and one that its open fetched whole (a format or
storage not read by ranges) is one partition.
"""

from __future__ import annotations

import glob as _glob
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from polybag.errors import UsageError
from polybag.io.remote import expand_url, read_head
from polybag.io.urls import is_url
from polybag.reader import TopicSelector, topic_filter
from polybag.selection import TimeWindow

if TYPE_CHECKING:
    from polybag.formats.registry import FormatSpec
    from polybag.model import Channel
    from polybag.reader import Reader


DEFAULT_PARTITION_MESSAGES = 500_000

_PLAN_THREADS = 8

#: a remote file is not cut into partitions much smaller than this (each task opening it
#: also fetches its first 16 KiB and last 64 KiB)
MIN_REMOTE_PART_BYTES = 1 << 20


# --- inputs --------------------------------------------------------------------------------
PathsLike = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]


def expand_paths(paths: PathsLike) -> list[str]:
    """A path, a glob pattern, a URL (a glob URL too), or a list of them, as a list of file
    paths and URLs (globs sorted)."""
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    out: list[str] = []
    for p in items:
        s = os.fspath(p)
        if is_url(s):  # s3://, gs://, http(s)://: read by range requests (polybag.io.remote)
            hits = expand_url(s)
            if not hits:
                raise UsageError(f"no objects match {s!r}")
            out.extend(hits)
        elif _glob.has_magic(s) and not os.path.exists(s):
            hits = sorted(h for h in _glob.glob(s, recursive=True) if os.path.isfile(h))
            if not hits:
                raise UsageError(f"no files match {s!r}")
            out.extend(hits)
        else:
            out.append(s)
    if not out:
        raise UsageError("no input files")
    return out


# --- planning --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Partition:
    """One task's share of a file: messages with ``start <= log_time < end``.

    ``None`` bounds are open.  ``estimate`` is the number of messages of the selected
    topics expected in the window from the index (-1: unknown, the file has no index).
    ``lo``/``hi`` are the inclusive log-time bounds the index gives for the window's data
    (``None``: unknown); they make the Dask divisions.  ``others`` lists more
    ``(path, format)`` files read for the same window (files overlapping in time are
    partitioned together, by global windows, so that the divisions stay known).
    """

    path: str
    format: str
    start: int | None
    end: int | None
    estimate: int = -1
    lo: int | None = None
    hi: int | None = None
    others: tuple[tuple[str, str], ...] = ()

    @property
    def files(self) -> tuple[tuple[str, str], ...]:
        """``(path, format)`` of every file this partition reads."""
        return ((self.path, self.format), *self.others)


@dataclass
class _FilePlan:
    path: str
    format: str
    parts: list[Partition]
    channels: list[Channel]  # the selected channels the driver saw (for meta)
    indexed: bool
    chunks: list[tuple[int, int, int]] | None = None  # (start, end, count) of the topic's chunks
    whole: bool = False  # a remote file fetched whole at open: read by one partition only
    reader: Reader | None = None  # an unindexed file opened for its channels, kept for meta (closed by the caller)

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()
            self.reader = None


class _Density:
    """Expected messages before a time: each chunk's count spread evenly over its range.

    ``F(t) = sum(n * clip((t - s) / (e + 1 - s), 0, 1))`` is piecewise linear with corners
    at the chunk starts and ends; it is built in O(chunks log chunks) from the slope changes.
    """

    def __init__(self, chunks: list[tuple[int, int, int]]) -> None:
        s = np.array([c[0] for c in chunks], np.int64)
        e = np.array([c[1] for c in chunks], np.int64) + 1
        n = np.array([c[2] for c in chunks], np.float64)
        w = n / (e - s).astype(np.float64)
        pts, inv = np.unique(np.concatenate([s, e]), return_inverse=True)
        slope = np.cumsum(np.bincount(inv, weights=np.concatenate([w, -w]), minlength=len(pts)))
        # float sums of very different slopes cancel inexactly: never let F decrease
        slope = np.maximum(slope, 0.0)
        self.u = pts
        self.slope = slope  # on [u[k], u[k + 1])
        self.f = np.concatenate([[0.0], np.cumsum(slope[:-1] * np.diff(pts).astype(np.float64))])
        self.total = float(n.sum())

    def __call__(self, t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, np.int64)
        k = np.searchsorted(self.u, t, side="right") - 1
        before = k < 0
        k = np.clip(k, 0, len(self.u) - 1)
        out = self.f[k] + self.slope[k] * (t - self.u[k]).astype(np.float64)
        out[before] = 0.0
        out[t >= self.u[-1]] = self.total  # every chunk has ended: exactly all of them
        capped: np.ndarray = np.minimum(out, self.total)
        return capped

    def inverse(self, y: float) -> int:
        """The first integer time where F reaches ``y``."""
        k = int(np.searchsorted(self.f, y, side="right")) - 1
        k = max(0, min(k, len(self.u) - 1))
        if self.slope[k] <= 0:
            return int(self.u[min(k + 1, len(self.u) - 1)])
        return int(self.u[k]) + int(np.ceil((y - self.f[k]) / self.slope[k]))


class _Clusters:
    """The chunks grouped into runs that overlap in time (a chunk starting inside the run
    so far joins it): ``lo``/``hi`` (inclusive), the message ``count`` and number of
    ``chunks`` of each, in time order.  A cut inside a run splits one of its chunks; a cut
    at a run's start, or just after its end, splits none."""

    def __init__(self, chunks: list[tuple[int, int, int]]) -> None:
        order = sorted(chunks)
        s = np.array([c[0] for c in order], np.int64)
        e = np.array([c[1] for c in order], np.int64)
        n = np.array([c[2] for c in order], np.int64)
        reach = np.maximum.accumulate(e)
        new = np.concatenate([[True], s[1:] > reach[:-1]])
        first = np.flatnonzero(new)
        last = np.concatenate([first[1:], [len(order)]]) - 1
        self.lo = s[first]
        self.hi = reach[last]
        self.count = np.add.reduceat(n, first)
        self.chunks = last - first + 1

    def after(self, k: int) -> int:
        """The first cut after run ``k``: the next run's start (just after its end for the last)."""
        return int(self.lo[k + 1]) if k + 1 < len(self.lo) else int(self.hi[k]) + 1

    def around(self, t: int) -> int:
        """The run that a cut at ``t`` would split (``lo < t <= hi``), or -1."""
        k = int(np.searchsorted(self.lo, t, side="left")) - 1
        return k if k >= 0 and t <= int(self.hi[k]) else -1


def _windows(
    path: str,
    fmt: str,
    chunks: list[tuple[int, int, int]],
    start: int | None,
    end: int | None,
    per_part: int,
) -> list[Partition]:
    """Cut ``[start, end)`` into windows of about ``per_part`` messages each.

    The windows tile the time axis (open ends stay open), so a message lies in exactly one
    of them whatever the chunks' overlaps; a chunk overlapping a cut is read by both windows,
    each keeping its side.  Cuts are placed where the expected count (each chunk's count
    spread over its time range) reaches the next multiple of the target, then moved so that
    no chunk is read twice where that can be: a cut inside one chunk, or inside a run of
    overlapping chunks holding at most a target, goes to the nearer edge of the run (its
    start or the next run's start; no cut when the run spans the whole window: fewer,
    larger windows); a cut inside a larger run goes to a nearby chunk start that lies
    inside no other chunk when that keeps the window within half a target of it.
    """
    # an index may say end < start, and MCAP times are u64: keep them sane for int64 math
    top = (1 << 63) - 2
    window = TimeWindow(start, end)
    live = [(min(s0, top), min(max(e0, s0), top), n) for s0, e0, n in chunks if n > 0 and window.overlaps(s0, e0)]
    if not live:
        return []
    lo, hi = window.clamp(min(c[0] for c in live), max(c[1] for c in live))
    dens = _Density(live)
    f_lo, f_hi = (float(x) for x in dens(np.array([lo, hi + 1])))
    m = max(1, int(np.ceil((f_hi - f_lo) / per_part - 1e-9)))
    # clean cut candidates: chunk starts inside no other chunk (a cut there splits no chunk)
    s_all = np.sort(np.array([c[0] for c in live], np.int64))
    e_all = np.sort(np.array([c[1] for c in live], np.int64))
    starts = np.unique(s_all)
    starts = starts[(starts > lo) & (starts <= hi)]
    inside = np.searchsorted(s_all, starts, side="left") - np.searchsorted(e_all, starts, side="left")
    starts = starts[inside == 0]
    f_starts = dens(starts)
    clusters = _Clusters(live)
    cuts: list[int] = []
    for j in range(1, m):
        y = f_lo + j * (f_hi - f_lo) / m
        t = dens.inverse(y)
        k = clusters.around(t)
        if k >= 0 and (clusters.chunks[k] == 1 or clusters.count[k] <= per_part):
            # inside one chunk, or a few overlapping ones: never split them (they would be
            # fetched and decoded by two tasks); cut at the nearer of their edges, if any
            sides = [x for x in (int(clusters.lo[k]), clusters.after(k)) if lo < x <= hi]
            if not sides:
                continue
            f_sides = dens(np.array(sides, np.int64))
            t = sides[int(np.argmin(np.abs(f_sides - y)))]
        elif len(starts):
            i = int(np.searchsorted(f_starts, y))
            near = [x for x in (i - 1, i) if 0 <= x < len(starts)]
            best = min(near, key=lambda x: abs(f_starts[x] - y))
            if abs(f_starts[best] - y) <= per_part / 2:
                t = int(starts[best])
        if lo < t <= hi and (not cuts or t > cuts[-1]):
            cuts.append(t)
    bounds = [start, *cuts, end]
    edges = [lo, *cuts, hi + 1]
    fe = np.rint(dens(np.array(edges, np.int64))).astype(np.int64)
    return [
        Partition(path, fmt, bounds[i], bounds[i + 1], int(fe[i + 1] - fe[i]), edges[i], edges[i + 1] - 1)
        for i in range(len(edges) - 1)
    ]


def _plan_file(
    path: str,
    topics: TopicSelector,
    start: int | None,
    end: int | None,
    per_part: int,
    need_channels: bool,
) -> _FilePlan:
    import polybag

    spec = _sniff_spec(path)
    if spec is not None and spec.unindexed:
        # no index (a ULog): one partition; the file is scanned by its task (and here only for meta)
        chans: list[Channel] = []
        kept = None
        if need_channels:  # kept open for the frame's meta: a remote ULog is fetched whole
            r = polybag.open(path, **selecting(spec, topics))
            try:
                chans = list(r.summary.channels.values())
            finally:
                if chans:
                    kept = r
                else:
                    r.close()
        return _FilePlan(path, spec.name, [Partition(path, spec.name, start, end)], chans, False, reader=kept)
    with polybag.open(path) as r:
        fmt = r.format
        chunks = None
        if r.has_index:  # channels and chunk counts from the index alone (a remote bag's
            # chunk headers, one request each on S3, are not read: reader.channels())
            chunks = r.chunk_message_counts(_selection(topics, r.channels()))
        if chunks is None:
            # unindexed: one partition for the whole file (its task scans it once)
            summary = r.summary if need_channels or r.has_index else None
            chans = [] if summary is None else _selected_channels(topics, summary.channels)
            lo = hi = None
            if summary is not None and summary.indexed and summary.start_time is not None and summary.end_time is not None:
                lo, hi = TimeWindow(start, end).clamp(summary.start_time, summary.end_time)
            return _FilePlan(path, fmt, [Partition(path, fmt, start, end, -1, lo, hi)], chans, False)
        whole = _fetched_whole(r)
        total = sum(max(0, c[2]) for c in chunks)
        if whole:  # every task would fetch the whole file again: one partition reads it once
            per_part = max(per_part, total + 1)
        elif r.fetch_stats:  # a remote file: every task also reads its summary (about 80 KiB)
            per_part = max(per_part, _least_remote_part(total, int(r.fetch_stats.get("size") or 0)))
        return _FilePlan(
            path,
            fmt,
            _windows(path, fmt, chunks, start, end, per_part),
            _selected_channels(topics, r.channels()),
            True,
            chunks,
            whole,
        )


def _least_remote_part(messages: int, size: int) -> int:
    """The fewest messages of a partition of a remote file of ``size`` bytes holding
    ``messages`` (of the topics read): about :data:`MIN_REMOTE_PART_BYTES` of the file, so
    that the summary every task reads stays a small part of what it fetches."""
    if messages <= 0 or size <= 0:
        return 1
    return max(1, -(-messages * MIN_REMOTE_PART_BYTES // size))


def _fetched_whole(r: Reader) -> bool:
    """Whether opening the remote log ``r`` fetched all of it (a format or storage not read
    by ranges, such as a rosbag2 SQLite file, or an object smaller than what an open reads):
    its partitions' tasks would then each fetch it whole."""
    stats = r.fetch_stats
    if not stats:
        return False
    size = int(stats.get("size") or 0)
    return size > 0 and int(stats.get("bytes_fetched") or 0) >= size


def _sniff_path(path: str) -> str | None:
    from polybag.formats import registry

    if is_url(path):
        if path.endswith("/"):
            return None  # a directory (a rosbag2 bag): polybag.open finds what it holds
        head = read_head(path, registry.SNIFF_BYTES)
        return registry.sniff(head) or (registry.by_extension(path, headless=True) if head else None)
    return registry.sniff_path(path)


def _sniff_spec(path: str) -> FormatSpec | None:
    """The registered format of the log at ``path`` (:func:`_sniff_path`), or None."""
    from polybag.formats import registry

    name = _sniff_path(path)
    return None if name is None else registry.lookup(name)


def selecting(spec: FormatSpec | None, topics: TopicSelector) -> dict[str, Any]:
    """The opener options a task reads a file of format ``spec`` with: only ``topics``
    parsed, and no warnings, where the opener takes them
    (:attr:`~polybag.formats.registry.FormatSpec.opener_selects`: a ULog); none otherwise."""
    return {"topics": topics, "warn": False} if spec is not None and spec.opener_selects else {}


def _selection(topics: TopicSelector, channels: dict[int, Channel]) -> set[int] | None:
    return topic_filter(topics, channels.values())


def _selected_channels(topics: TopicSelector, channels: dict[int, Channel]) -> list[Channel]:
    sel = _selection(topics, channels)
    return [c for cid, c in channels.items() if sel is None or cid in sel]


def _plan(
    files: list[str],
    topics: TopicSelector,
    start: int | None,
    end: int | None,
    per_part: int,
    want_channels: Callable[[list[_FilePlan]], bool],
) -> list[_FilePlan]:
    """Plan every file (in a few threads: index reads are small and mostly I/O).  A plan
    may hold an open reader (:attr:`_FilePlan.reader`): the caller closes the plans."""
    if per_part < 1:
        raise UsageError(f"partition_messages must be positive, not {per_part}")

    def one(p: str) -> _FilePlan:
        return _plan_file(p, topics, start, end, per_part, need_channels=False)

    if len(files) > 1:
        with ThreadPoolExecutor(min(_PLAN_THREADS, len(files))) as ex:
            plans = list(ex.map(one, files))
    else:
        plans = [one(f) for f in files]
    if want_channels(plans):
        # no indexed file named the channels: open files until one does (ULog, unindexed)
        for i, pl in enumerate(plans):
            if not pl.channels and not pl.indexed:
                plans[i] = _plan_file(pl.path, topics, start, end, per_part, need_channels=True)
                if plans[i].channels:
                    break
    return plans


def _divisions(ordered: list[Partition]) -> tuple[int, ...] | None:
    """Divisions of partitions in this order, if their index ranges are known and disjoint."""
    if not ordered or any(p.lo is None or p.hi is None or p.lo > p.hi for p in ordered):
        return None
    for a, b in zip(ordered, ordered[1:]):
        if not (a.hi is not None and b.lo is not None and a.hi < b.lo):
            return None
    return (*(int(p.lo) for p in ordered if p.lo is not None), int(ordered[-1].hi or 0))


def _order(
    plans: list[_FilePlan], start: int | None = None, end: int | None = None, per_part: int = 1
) -> tuple[list[Partition], tuple[int, ...] | None]:
    """All partitions, and Dask divisions when possible (the partitions then in time order).

    Files that do not overlap in time keep their own windows, ordered by time.  Indexed
    files that overlap are partitioned together: windows over the chunks of all of them,
    each partition reading every file with a chunk in its window (merged by log time).
    Otherwise (a file without an index) the divisions are unknown.
    """
    parts = [p for pl in plans for p in pl.parts]
    if not parts:
        return parts, None
    by_file = sorted((pl for pl in plans if pl.parts), key=lambda pl: pl.parts[0].lo or 0)
    ordered = [p for pl in by_file for p in pl.parts]
    divisions = _divisions(ordered)
    if divisions is not None:
        return ordered, divisions
    indexed = [pl for pl in plans if pl.chunks]
    if any(pl.parts and (not pl.chunks or pl.whole) for pl in plans) or len(indexed) < 2:
        # (a file fetched whole is read by one partition: it is not split into shared windows)
        return parts, None
    merged = _merged_windows(indexed, start, end, per_part)
    divisions = _divisions(merged)
    return (merged, divisions) if divisions is not None else (parts, None)


def _merged_windows(
    plans: list[_FilePlan], start: int | None, end: int | None, per_part: int
) -> list[Partition]:
    """Windows over the chunks of all ``plans``; each reads the files with chunks in it."""
    every = [c for pl in plans for c in (pl.chunks or ())]
    top = (1 << 63) - 2  # as in _windows: u64 times clamped for int64 math
    spans = [
        (
            np.array([min(c[0], top) for c in pl.chunks or ()], np.int64),
            np.array([min(max(c[1], c[0]), top) for c in pl.chunks or ()], np.int64),
        )
        for pl in plans
    ]
    out: list[Partition] = []
    for w in _windows(plans[0].path, plans[0].format, every, start, end, per_part):
        members = [
            (pl.path, pl.format)
            for pl, (s0, e0) in zip(plans, spans)
            if bool(np.any(TimeWindow(w.start, w.end).overlaps(s0, e0)))
        ]
        if not members:
            continue
        (path, fmt), *others = members
        out.append(Partition(path, fmt, w.start, w.end, w.estimate, w.lo, w.hi, tuple(others)))
    return out


def partitions(
    paths: PathsLike,
    topics: TopicSelector = None,
    *,
    start: int | str | None = None,
    end: int | str | None = None,
    partition_messages: int = DEFAULT_PARTITION_MESSAGES,
) -> list[Partition]:
    """The partitions :func:`read_topic` / :func:`read_messages` would make (from the indexes)."""
    start, end = TimeWindow.of_ns(start, end)
    files = expand_paths(paths)
    plans = _plan(files, topics, start, end, partition_messages, lambda _p: False)
    return _order(plans, start, end, partition_messages)[0]
