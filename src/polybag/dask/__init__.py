"""Dask scale-out: many logs and huge logs as Dask DataFrames and Bags.

Partitions come from the files' own indexes, read in the driver without reading any
message data: each reader's :meth:`~polybag.reader.Reader.chunk_message_counts` (MCAP
chunk indexes with per-channel counts from the Message Index record headers, bag chunk
info records with per-connection counts) gives the chunks, grouped into partitions of
about ``partition_messages`` messages of the selected topics.

A partition is a file plus a log-time window ``[start, end)``.  Windows of one file tile
the time axis (the first is open below, the last open above), so every message falls into
exactly one partition even when chunks overlap in time (written out of order); a
partition's task reads only the chunks that overlap its window, through the file's own
index.  Cuts go where the expected count reaches each multiple of the target (each
chunk's count spread over its time range), moved to a chunk start that splits no chunk
when one is near.  Files that do not overlap in time are ordered by time and keep their
own windows; indexed files that overlap share windows cut over all their chunks (a
partition then reads each of them and merges by log time), so the Dask divisions are
known either way.  Files without an index (a bag without its index, an MCAP file without
summary) and ULog files (which have none) are one partition per file, divisions unknown.

Partitions carry paths and windows only (never an open reader), so the graphs pickle and
run on the threaded, process and distributed schedulers; every task opens its file,
builds its result in memory it owns, and closes the file before returning.

>>> import polybag.dask as pbd
>>> df = pbd.read_topic("logs/*.mcap", "/imu", fields=["linear_acceleration"])
>>> df["linear_acceleration.x"].mean().compute()

Dask is optional: ``pip install polybag[dask]``.
"""

from __future__ import annotations

import glob as _glob
import heapq
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from polybag.errors import PolybagError, UnsupportedError, UsageError
from polybag.reader import TopicSelector, topic_filter
from polybag.timefmt import TimeWindow

if TYPE_CHECKING:
    import pandas as pd

    from polybag.model import Channel
    from polybag.reader import Reader

__all__ = ["Partition", "file_summaries", "partitions", "read_messages", "read_topic"]

DEFAULT_PARTITION_MESSAGES = 500_000
_PLAN_THREADS = 8


def _require(what: str = "dataframe") -> Any:
    """Import dask (and ``dask.dataframe`` / ``dask.bag``) or say how to install it."""
    try:
        import dask  # noqa: F401

        if what == "bag":
            import dask.bag as mod
        else:
            import dask.dataframe as mod
    except ImportError as e:
        raise UnsupportedError(
            f"polybag.dask needs dask ({e}): pip install polybag[dask]  (or: pip install 'dask[dataframe]')"
        ) from None
    return mod


# --- inputs --------------------------------------------------------------------------------
PathsLike = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]


def expand_paths(paths: PathsLike) -> list[str]:
    """A path, a glob pattern, or a list of either, as a list of file paths (globs sorted)."""
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    out: list[str] = []
    for p in items:
        s = os.fspath(p)
        if _glob.has_magic(s) and not os.path.exists(s):
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
        return np.minimum(out, self.total)

    def inverse(self, y: float) -> int:
        """The first integer time where F reaches ``y``."""
        k = int(np.searchsorted(self.f, y, side="right")) - 1
        k = max(0, min(k, len(self.u) - 1))
        if self.slope[k] <= 0:
            return int(self.u[min(k + 1, len(self.u) - 1)])
        return int(self.u[k]) + int(np.ceil((y - self.f[k]) / self.slope[k]))


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
    spread over its time range) reaches the next multiple of the target, then moved to a
    nearby chunk start that lies inside no other chunk when that keeps the window within
    half a target of it, so that chunks that do not overlap are never read twice.
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
    cuts: list[int] = []
    for j in range(1, m):
        y = f_lo + j * (f_hi - f_lo) / m
        t = dens.inverse(y)
        if len(starts):
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

    head = _sniff_path(path)
    if head == "ulog":
        # no index: one partition; the file is scanned by its task (and here only for meta)
        chans: list[Channel] = []
        if need_channels:
            with polybag.open(path, topics=topics, warn=False) as r:
                chans = list(r.summary.channels.values())
        return _FilePlan(path, "ulog", [Partition(path, "ulog", start, end)], chans, False)
    with polybag.open(path) as r:
        fmt = r.format
        summary = None
        chunks = None
        if r.has_index:  # the summary is cheap: it comes from the index
            summary = r.summary
            chunks = r.chunk_message_counts(_selection(topics, summary))
        if chunks is None:
            # unindexed: one partition for the whole file (its task scans it once)
            if need_channels and summary is None:
                summary = r.summary
            chans = [] if summary is None else _selected_channels(topics, summary)
            lo = hi = None
            if summary is not None and summary.indexed and summary.start_time is not None:
                lo, hi = TimeWindow(start, end).clamp(summary.start_time, summary.end_time)
            return _FilePlan(path, fmt, [Partition(path, fmt, start, end, -1, lo, hi)], chans, False)
        assert summary is not None
        return _FilePlan(
            path,
            fmt,
            _windows(path, fmt, chunks, start, end, per_part),
            _selected_channels(topics, summary),
            True,
            chunks,
        )


def _sniff_path(path: str) -> str | None:
    from polybag.formats import registry

    return registry.sniff_path(path)


def _selection(topics: TopicSelector, summary: Any) -> set[int] | None:
    return topic_filter(topics, summary.channels.values())


def _selected_channels(topics: TopicSelector, summary: Any) -> list[Channel]:
    sel = _selection(topics, summary)
    return [c for cid, c in summary.channels.items() if sel is None or cid in sel]


def _plan(
    files: list[str],
    topics: TopicSelector,
    start: int | None,
    end: int | None,
    per_part: int,
    want_channels: Callable[[list[_FilePlan]], bool],
) -> list[_FilePlan]:
    """Plan every file (in a few threads: index reads are small and mostly I/O)."""
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
    if any(pl.parts and not pl.chunks for pl in plans) or len(indexed) < 2:
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
    start: int | None = None,
    end: int | None = None,
    partition_messages: int = DEFAULT_PARTITION_MESSAGES,
) -> list[Partition]:
    """The partitions :func:`read_topic` / :func:`read_messages` would make (from the indexes)."""
    start, end = TimeWindow.of_ns(start, end)
    files = expand_paths(paths)
    plans = _plan(files, topics, start, end, partition_messages, lambda _p: False)
    return _order(plans, start, end, partition_messages)[0]


# --- tasks ------------------------------------------------------------------------------------
def _detach(a: np.ndarray) -> np.ndarray:
    """``a`` itself when numpy owns its memory, else a copy (never a view of a mapped file)."""
    base = a
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    if isinstance(base, np.ndarray):
        return a
    return a.copy()


def _open(path: str, fmt: str, topics: TopicSelector) -> Reader:
    import polybag

    if fmt == "ulog":
        return polybag.open(path, topics=topics, warn=False)
    return polybag.open(path)


def _columns_window(
    r: Reader, topic: str, fields: Sequence[str] | None, start: int | None, end: int | None
) -> dict[str, np.ndarray]:
    """Columns of ``topic`` in ``[start, end)`` (like ``topic_columns``, restricted in time)."""
    from polybag.codecs import codec_for
    from polybag.codecs.columns import payload_columns

    channels = [c for c in r.summary.channels.values() if c.topic == topic]
    if not channels:
        return {}
    if start is None and end is None:
        return {k: _detach(v) for k, v in r.topic_columns(topic, fields).items()}
    if len({id(codec_for(c)) for c in channels}) > 1:
        raise UnsupportedError(f"topic {topic} has channels of different types; read them separately")
    codec = codec_for(channels[0])
    times_l: list[int] = []
    datas: list[Any] = []
    # file order (no merge of chunks per message), then a stable sort: log-time order with
    # ties in file order, exactly the reader's order="log_time"
    for m in r.messages(topics=[topic], start=start, end=end, order="file"):
        times_l.append(m.log_time)
        datas.append(m.data)
    times = np.array(times_l, dtype=np.int64)
    o = _time_order(times)
    if o is not None:
        times = times[o]
        datas = [datas[i] for i in o.tolist()]
    cols = payload_columns(codec, datas, fields, topic=topic)
    del datas
    out = {"log_time": times}
    out.update((k, _detach(v)) for k, v in cols.items())
    return out


def _time_order(times: np.ndarray) -> np.ndarray | None:
    """The stable permutation sorting ``times``, or ``None`` when they are sorted already."""
    if len(times) < 2 or bool(np.all(times[1:] >= times[:-1])):
        return None
    return np.argsort(times, kind="stable")


def _raw_window(r: Reader, topic: str, start: int | None, end: int | None) -> dict[str, np.ndarray]:
    lt: list[int] = []
    pt: list[int] = []
    seq: list[int] = []
    data: list[bytes] = []
    for m in r.messages(topics=[topic], start=start, end=end, order="file"):
        lt.append(m.log_time)
        pt.append(m.publish_time)
        seq.append(m.sequence)
        data.append(bytes(m.data))
    col = np.empty(len(data), dtype=object)
    col[:] = data
    out = {
        "log_time": np.array(lt, dtype=np.int64),
        "publish_time": np.array(pt, dtype=np.int64),
        "sequence": np.array(seq, dtype=np.int64),
        "data": col,
    }
    o = _time_order(out["log_time"])
    return out if o is None else {k: v[o] for k, v in out.items()}


def _frame(cols: dict[str, np.ndarray]) -> pd.DataFrame:
    from polybag.codecs.columns import columns_to_pandas

    if "log_time" not in cols:
        cols = {"log_time": np.zeros(0, np.int64), **cols}
    return columns_to_pandas(cols)


def _ulog_frame(
    r: Reader, topic: str, fields: Sequence[str] | None, multi_id: int, start: int | None, end: int | None
) -> pd.DataFrame:
    mids = {c.metadata.get("multi_id", "0") for c in r.summary.channels.values() if c.topic == topic}
    if str(multi_id) not in mids:
        return _frame({})  # this file does not log the topic (or instance): no rows
    df = r.to_pandas(topic, multi_id, fields)  # type: ignore[call-arg]
    if start is not None or end is not None:
        df = df[TimeWindow(start, end).contains(df.index.to_numpy())]
    return df.copy()


def _conform(df: pd.DataFrame, meta: pd.DataFrame) -> pd.DataFrame:
    """Make a partition's frame look like ``meta`` (columns, order, dtypes where they cast)."""
    import pandas as pd

    if list(df.columns) == list(meta.columns) and all(df.dtypes == meta.dtypes):
        return df
    out = {}
    for name in meta.columns:
        dt = meta[name].dtype
        if name in df.columns:
            col = df[name]
            if col.dtype != dt:
                try:
                    col = col.astype(dt)
                except (TypeError, ValueError):
                    pass
            out[name] = col
        else:
            out[name] = pd.Series([None] * len(df), index=df.index, dtype=dt if len(df) == 0 else object)
    return pd.DataFrame(out, index=df.index)


def _topic_partition(
    part: Partition,
    topic: str,
    fields: Sequence[str] | None,
    decode: bool,
    multi_id: int,
    file_column: bool,
    frame_meta: pd.DataFrame,
    project: bool = False,
    columns: Sequence[str] | None = None,
) -> pd.DataFrame:
    """One partition of :func:`read_topic` (runs in a worker).

    ``columns`` is Dask's column projection; with ``project`` (the type's fields are known
    from its schema) only those fields are decoded."""
    import pandas as pd

    want = None if columns is None else ([columns] if isinstance(columns, str) else list(columns))
    if project and decode and want is not None and fields is None:
        data_cols = [c for c in want if c != "file"]
        if set(data_cols) != set(frame_meta.columns) - {"file"}:
            fields = data_cols  # decode only the projected columns
    frames = []
    for path, fmt in part.files:
        with _open(path, fmt, [topic]) as r:
            if r.ulog is not None:  # a ULog instance's table, from its own records
                df = (
                    _ulog_frame(r, topic, fields, multi_id, part.start, part.end)
                    if decode
                    else _frame(_raw_window(r, topic, part.start, part.end))
                )
            elif decode:
                df = _frame(_columns_window(r, topic, fields, part.start, part.end))
            else:
                df = _frame(_raw_window(r, topic, part.start, part.end))
        if file_column:
            cats = frame_meta["file"].cat.categories
            df["file"] = pd.Categorical.from_codes(
                np.full(len(df), cats.get_loc(path), np.int32), categories=cats
            )
        frames.append(_conform(df, frame_meta))
    if len(frames) == 1:
        df = frames[0]
    else:
        # files read for one window: merged by log time (ties in file order, then file order)
        df = pd.concat(frames).sort_index(kind="stable")
    if want is not None:
        df = df[want]
    return df


def _meta_for(
    plans: list[_FilePlan],
    topic: str,
    fields: Sequence[str] | None,
    decode: bool,
    multi_id: int,
    files: list[str],
) -> tuple[pd.DataFrame, bool]:
    """An empty frame with the columns and dtypes of the topic (from the schema when the
    codec compiles it, else from the topic's first message), and whether the columns come
    from the schema (so that a projection can be decoded alone)."""

    from polybag.codecs import codec_for
    from polybag.codecs.columns import _is_compiled, payload_columns

    plan = next((pl for pl in plans if pl.channels), None)
    if plan is None:
        raise PolybagError(f"no topic {topic!r} in {len(files)} file(s): {', '.join(files[:3])}")
    project = True
    if not decode:
        project = False
        df = _frame(
            {
                "log_time": np.zeros(0, np.int64),
                "publish_time": np.zeros(0, np.int64),
                "sequence": np.zeros(0, np.int64),
                "data": np.zeros(0, dtype=object),
            }
        )
    else:
        with _open(plan.path, plan.format, [topic]) as r:
            if r.ulog is not None:  # a ULog instance's table, from its own records
                df = _ulog_frame(r, topic, fields, multi_id, None, None).iloc[:0]
            else:
                # one message (the first chunk holding the topic) shows what pandas makes of
                # each column (strings: pandas' string dtype; per-message arrays: object)
                codec = codec_for(plan.channels[0])
                first = next(iter(r.messages(topics=[topic], order="file")), None)
                sample = [] if first is None else [bytes(first.data)]
                if not _is_compiled(codec):
                    project = False  # keys may differ between messages: decode all, then select
                cols = payload_columns(codec, sample, fields, topic=topic)
                df = _frame({"log_time": np.zeros(len(sample), np.int64), **cols}).iloc[:0]
    return df.copy(), project


# --- public ------------------------------------------------------------------------------------
def read_topic(
    paths: PathsLike,
    topic: str,
    *,
    fields: Sequence[str] | None = None,
    start: int | None = None,
    end: int | None = None,
    partition_messages: int = DEFAULT_PARTITION_MESSAGES,
    decode: bool = True,
    multi_id: int = 0,
    file_column: bool = True,
) -> Any:
    """One row per message of ``topic`` across ``paths``, as a ``dask.dataframe.DataFrame``.

    ``paths`` is a path, a glob pattern or a list.  Columns are those of the reader's
    ``to_pandas(topic, fields)`` (flattened field paths), indexed by ``log_time`` (int64
    ns), plus a categorical ``file`` column (``file_column=False`` leaves it out).
    ``decode=False`` gives the raw payloads instead (``publish_time``, ``sequence``,
    ``data`` bytes).  ``start`` (inclusive) and ``end`` (exclusive) bound the log time.

    Partitions hold about ``partition_messages`` messages of the topic, cut at chunk
    boundaries from the files' indexes; within a partition rows are in log-time order.
    Divisions are known (``df.known_divisions``) when every file is indexed (files that
    overlap in time then share partitions).  ``multi_id`` picks the instance of a ULog
    topic.  Column names and dtypes come from the message type (for schemaless encodings
    such as JSON: from the topic's first message; keys it lacks are left out).
    """
    dd = _require("dataframe")
    start, end = TimeWindow.of_ns(start, end)
    files = expand_paths(paths)
    plans = _plan(files, [topic], start, end, partition_messages, lambda ps: not any(p.channels for p in ps))
    meta, project = _meta_for(plans, topic, fields, decode, multi_id, files)
    if file_column:
        if "file" in meta.columns:
            raise UsageError(f"topic {topic} has a field 'file': pass file_column=False")
        import pandas as pd

        meta["file"] = pd.Categorical([], categories=list(dict.fromkeys(files)))
    parts, divisions = _order(plans, start, end, partition_messages)
    if not parts:  # the topic is indexed nowhere in the window: one empty partition
        parts, divisions = [Partition(files[0], plans[0].format, 1, 1, 0)], None
    import dask

    # object columns hold strings, bytes and per-message arrays alike: keep them as the
    # readers' to_pandas gives them (dask would turn every object column into strings)
    with dask.config.set({"dataframe.convert-string": False}):
        return dd.from_map(
            _topic_partition,
            parts,
            topic=topic,
            fields=list(fields) if fields is not None else None,
            decode=decode,
            multi_id=multi_id,
            file_column=file_column,
            frame_meta=meta,
            project=project,
            meta=meta,
            divisions=divisions,
            label=f"polybag-{topic.strip('/').replace('/', '-') or 'topic'}",
            enforce_metadata=False,
        )


def _message_partition(part: Partition, topics: TopicSelector, decode: bool) -> list[dict[str, Any]]:
    """One partition of :func:`read_messages` (runs in a worker)."""
    lists: list[list[dict[str, Any]]] = []
    for path, fmt in part.files:
        out: list[dict[str, Any]] = []
        with _open(path, fmt, topics) as r:
            for m in r.messages(topics=topics, start=part.start, end=part.end):
                out.append(
                    {
                        "topic": m.channel.topic,
                        "log_time": m.log_time,
                        "publish_time": m.publish_time,
                        "sequence": m.sequence,
                        "data": _owned(m.to_dict()) if decode else bytes(m.data),
                        "file": path,
                    }
                )
        lists.append(out)
    if len(lists) == 1:
        return lists[0]
    # heapq.merge is stable: ties keep the order of the files
    return list(heapq.merge(*lists, key=_log_time))


def _log_time(item: dict[str, Any]) -> int:
    return int(item["log_time"])


def _owned(v: Any) -> Any:
    """A decoded value with every array and buffer copied out of the file's mapping."""
    if isinstance(v, dict):
        return {k: _owned(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_owned(x) for x in v]
    if isinstance(v, tuple):
        return tuple(_owned(x) for x in v)
    if isinstance(v, np.ndarray):
        return _detach(v)
    if isinstance(v, memoryview):
        return bytes(v)
    return v


def read_messages(
    paths: PathsLike,
    topics: TopicSelector = None,
    *,
    start: int | None = None,
    end: int | None = None,
    partition_messages: int = DEFAULT_PARTITION_MESSAGES,
    decode: bool = True,
) -> Any:
    """Messages of ``topics`` (``None``: all; a string is a regex) as a ``dask.bag.Bag``.

    Each item is a dict: ``topic``, ``log_time``, ``publish_time``, ``sequence``, ``data``
    (the message as nested dicts, or its raw bytes with ``decode=False``) and ``file``.
    Partitioned like :func:`read_topic`; items are in log-time order within a partition.
    """
    db = _require("bag")
    start, end = TimeWindow.of_ns(start, end)
    files = expand_paths(paths)
    plans = _plan(files, topics, start, end, partition_messages, lambda _p: False)
    parts, _div = _order(plans, start, end, partition_messages)
    if not parts:
        return db.from_sequence([], npartitions=1)
    seq = db.from_sequence(parts, partition_size=1)
    return seq.map(_message_partition, topics=topics, decode=decode).flatten()


_SUMMARY_COLUMNS: dict[str, str] = {
    "path": "object",
    "format": "object",
    "profile": "object",
    "library": "object",
    "version": "object",
    "indexed": "boolean",
    "message_count": "Int64",
    "channel_count": "Int64",
    "topic_count": "Int64",
    "chunk_count": "Int64",
    "attachment_count": "Int64",
    "metadata_count": "Int64",
    "start_time": "Int64",
    "end_time": "Int64",
    "duration": "Int64",
    "file_size": "Int64",
    "error": "object",
}


def _summary_row(path: str, errors: str) -> pd.DataFrame:
    """One file's summary as a one-row frame (runs in a worker)."""
    import pandas as pd

    import polybag

    row: dict[str, Any] = dict.fromkeys(_SUMMARY_COLUMNS)
    row["path"] = path
    try:
        with polybag.open(path, **({"warn": False} if _sniff_path(path) == "ulog" else {})) as r:
            s = r.summary
            row.update(
                format=s.format,
                profile=s.profile,
                library=s.library,
                version=s.version,
                indexed=bool(s.indexed),
                message_count=s.message_count,
                channel_count=len(s.channels),
                topic_count=len(s.topics()),
                chunk_count=s.chunk_count,
                attachment_count=s.attachment_count,
                metadata_count=s.metadata_count,
                start_time=s.start_time,
                end_time=s.end_time,
                duration=s.duration if s.start_time is not None else None,
                file_size=s.file_size,
            )
    except PolybagError as e:
        if errors == "raise":
            raise
        row["error"] = str(e)
    return pd.DataFrame({k: pd.Series([row[k]], dtype=t) for k, t in _SUMMARY_COLUMNS.items()})


def file_summaries(paths: PathsLike, *, errors: str = "record") -> Any:
    """Per-file facts (format, counts, start/end, ...) as a ``dask.dataframe.DataFrame``,
    one row per file, one task per file.  ``errors="record"`` puts an unreadable file's
    error in the ``error`` column; ``errors="raise"`` raises it."""
    dd = _require("dataframe")
    import pandas as pd

    if errors not in ("record", "raise"):
        raise UsageError(f"errors must be 'record' or 'raise', not {errors!r}")
    files = expand_paths(paths)
    meta = pd.DataFrame({k: pd.Series([], dtype=t) for k, t in _SUMMARY_COLUMNS.items()})
    return dd.from_map(
        _summary_row, files, errors=errors, meta=meta, label="polybag-summary", enforce_metadata=False
    )
