"""Several topics of one log on one time axis: :func:`aligned_columns` and its tables.

The first topic is the *left* (its rows are the output's rows, as ``merge_asof``'s left);
the others are joined onto it by :mod:`polybag.codecs.align`.  The left is read whole
(:meth:`topic_columns` of the reader); the others are read in one pass over
``reader.messages`` routed per topic and decoded in batches of payloads
(:func:`~polybag.codecs.columns.payload_columns`), each batch joined and dropped, so a right
topic is never held whole.  A topic whose codec decodes message by message (ULog, JSON,
protobuf) is read whole with the reader's ``topic_columns`` instead.

Column names are ``"<topic>.<field>"`` (the first ``.`` separates, topic names have none);
the first column is the left's time, named by ``time`` (``"log_time"``); each right topic's
matched time is ``"<topic>.<time>"``.  A ULog instance other than the first is written
``("name", multi_id)`` and named ``"name:multi_id"``.  Right columns are
``numpy.ma.MaskedArray`` (masked: no match; floats hold NaN there):
:func:`aligned_pandas` makes them pandas nullable columns (``Int64``, ``boolean``; floats
NaN; objects NaN), :func:`aligned_arrow` Arrow nulls.

``align="resample:<period>"`` gives a row at every multiple of the period from the first to
the last time of all the topics (no topic is the left there: every topic, the first too, is
sampled on that grid); outside a topic's first and last sample its values are missing.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from polybag.codecs import codec_for
from polybag.codecs.align import (
    INTERPOLATIONS,
    AsofAccumulator,
    ResampleAccumulator,
    as_rows,
    parse_align,
    parse_tolerance,
    resample_grid,
    sort_times,
    time_array,
)
from polybag.codecs.columns import is_compiled, payload_columns
from polybag.errors import PolybagWarning, UnsupportedError, UsageError

__all__ = ["TIMES", "aligned_arrow", "aligned_columns", "aligned_pandas", "is_topic_list"]

TopicSpec = str | tuple[str, int | str]
TIMES: tuple[str, ...] = ("log_time", "publish_time", "header.stamp", "timestamp")
_BATCH_MESSAGES = 8192  # a topic is decoded (and joined) this many messages at a time
_BATCH_BYTES = 16 << 20  # or this many payload bytes


class _Topic:
    """One topic of the alignment: its name, ULog instance, output prefix and fields."""

    def __init__(self, spec: TopicSpec) -> None:
        if isinstance(spec, tuple):
            if len(spec) != 2 or not isinstance(spec[0], str):
                raise UsageError(f"a topic is a name or a (name, multi_id) pair, not {spec!r}")
            self.name, self.mid = spec[0], int(spec[1])
        elif isinstance(spec, str):
            self.name, self.mid = spec, 0
        else:
            raise UsageError(f"a topic is a name or a (name, multi_id) pair, not {spec!r}")
        self.instance = isinstance(spec, tuple)
        self.prefix = self.name if self.mid == 0 else f"{self.name}:{self.mid}"
        self.fields: list[str] | None = None


def _topics(reader: Any, topics: Sequence[TopicSpec], fields: Any) -> list[_Topic]:
    if isinstance(topics, (str, tuple)) or len(topics) < 2:
        raise UsageError(f"aligning needs 2 topics or more (the first is the one whose rows are kept), not {topics!r}")
    out = [_Topic(t) for t in topics]
    known: dict[str, set[int]] = {}
    for c in reader.channels().values():
        mid = c.metadata.get("multi_id", "0") if isinstance(c.metadata, Mapping) else "0"
        known.setdefault(c.topic, set()).add(int(mid) if str(mid).isdigit() else 0)
    seen: set[str] = set()
    for t in out:
        if t.name not in known or (t.instance and t.mid not in known[t.name]):
            raise UsageError(f"{reader.path}: no topic {t.prefix!r}; topics: {', '.join(sorted(known)) or '(none)'}")
        if t.prefix in seen:
            raise UsageError(f"topic {t.prefix} is given twice")
        seen.add(t.prefix)
    _split_fields(out, fields)
    return out


def _split_fields(topics: list[_Topic], fields: Any) -> None:
    """``fields``: None (all), ``{topic: [field, ...]}`` or ``["<topic>.<field>", ...]``
    (a topic not named keeps all its fields)."""
    if fields is None:
        return
    by_prefix = {t.prefix: t for t in topics}
    if isinstance(fields, Mapping):
        items = [(str(k), list(v)) for k, v in fields.items()]
    elif isinstance(fields, str):
        raise UsageError(f"fields is a list of '<topic>.<field>' names or a dict topic -> fields, not {fields!r}")
    else:
        grouped: dict[str, list[str]] = {}
        for f in fields:
            topic, dot, field = str(f).partition(".")
            if not dot or not field:
                raise UsageError(f"a field of an aligned table is '<topic>.<field>', not {f!r}")
            grouped.setdefault(topic, []).append(field)
        items = list(grouped.items())
    for topic, fs in items:
        if topic not in by_prefix:
            raise UsageError(f"fields of {topic!r}, which is not one of the topics: {', '.join(by_prefix)}")
        by_prefix[topic].fields = fs


def _whole(reader: Any, t: _Topic, time: str, fields: Sequence[str] | None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The topic's time and columns, read whole with the reader's ``topic_columns``."""
    args: tuple[Any, ...] = (t.name, t.mid) if t.instance else (t.name,)
    try:
        cols = dict(reader.topic_columns(*args, fields=fields, time=time))
    except TypeError as e:
        if "time" not in str(e):
            raise
        # a reader without time=: only log_time (the columns' own)
        if time != "log_time":
            raise UsageError(f"time={time!r} is not offered by this reader; use time='log_time'") from None
        cols = dict(reader.topic_columns(*args, fields=fields))
    if time not in cols:
        raise UsageError(f"{reader.path}: topic {t.prefix} has no time {time!r} (times: {', '.join(TIMES)})")
    tcol = cols.pop(time)
    return time_array(tcol), cols


def _streams(reader: Any, t: _Topic) -> bool:
    channels = [c for c in reader.channels().values() if c.topic == t.name]
    return not t.instance and len({id(codec_for(c)) for c in channels}) == 1 and is_compiled(codec_for(channels[0]))


def _blocks(
    reader: Any, topics: list[_Topic], time: str, times_only: bool = False
) -> Iterator[tuple[_Topic, np.ndarray, dict[str, np.ndarray]]]:
    """``(topic, times, columns)`` blocks of every topic, each topic's blocks in message
    order: the streamed topics batch by batch in one pass, the others whole."""
    streamed = [t for t in topics if _streams(reader, t)]
    for t in topics:
        if t not in streamed:
            fs = t.fields if not times_only else ([] if time == "log_time" else t.fields)
            yield (t, *_whole(reader, t, time, fs))
    if not streamed:
        return
    if time == "timestamp":
        raise UsageError(f"time='timestamp' is a ULog time; topic {streamed[0].prefix} has log_time, publish_time or header.stamp")
    by_name = {t.name: t for t in streamed}
    codecs = {t.name: codec_for(next(c for c in reader.channels().values() if c.topic == t.name)) for t in streamed}
    pending: dict[str, tuple[list[int], list[Any]]] = {t.name: ([], []) for t in streamed}
    sizes = dict.fromkeys(by_name, 0)
    decode = not times_only or time == "header.stamp"

    def flush(name: str) -> tuple[_Topic, np.ndarray, dict[str, np.ndarray]]:
        times, datas = pending[name]
        pending[name] = ([], [])
        sizes[name] = 0
        t = by_name[name]
        tt = np.array(times, dtype=np.uint64 if times and max(times) >= 1 << 63 else np.int64)
        if not decode:
            return t, tt, {}
        fs = t.fields
        if times_only:
            fs = ["header.stamp"]
        elif time == "header.stamp" and fs is not None and "header.stamp" not in fs:
            fs = [*fs, "header.stamp"]
        cols = dict(payload_columns(codecs[name], datas, fs, topic=name))
        if time == "header.stamp":
            if "header.stamp" not in cols:
                raise UsageError(f"{reader.path}: topic {name} has no header.stamp; use time='log_time' or 'publish_time'")
            tt = time_array(cols.pop("header.stamp"))
        return t, tt, cols

    wanted = list(by_name)
    for m in reader.messages(topics=wanted):
        name = m.channel.topic
        p = pending.get(name)
        if p is None:
            continue
        p[0].append(m.log_time if time != "publish_time" else m.publish_time)
        if decode:
            p[1].append(m.data)
            sizes[name] += len(m.data)
        if len(p[0]) >= _BATCH_MESSAGES or sizes[name] >= _BATCH_BYTES:
            yield flush(name)
            _release(reader)
    for name in wanted:
        if pending[name][0] or decode:  # a last (or, for an empty topic, an empty) batch
            yield flush(name)


def _interpolations(interpolate: Any) -> tuple[str, dict[str, str]]:
    if isinstance(interpolate, str):
        if interpolate not in ("auto", *INTERPOLATIONS):
            raise UsageError(f"interpolate must be 'auto', 'linear', 'previous' or a dict column -> 'linear'|'previous', not {interpolate!r}")
        return interpolate, {}
    if isinstance(interpolate, Mapping):
        bad = {k: v for k, v in interpolate.items() if v not in INTERPOLATIONS}
        if bad:
            raise UsageError(f"interpolate per column is 'linear' or 'previous', not {bad!r}")
        return "auto", {str(k): str(v) for k, v in interpolate.items()}
    raise UsageError(f"interpolate must be 'auto', 'linear', 'previous' or a dict, not {interpolate!r}")


def aligned_columns(
    reader: Any,
    topics: Sequence[TopicSpec],
    fields: Sequence[str] | Mapping[str, Sequence[str]] | None = None,
    *,
    align: str = "asof",
    direction: str = "backward",
    tolerance: int | str | None = None,
    allow_exact_matches: bool = True,
    time: str = "log_time",
    interpolate: str | Mapping[str, str] = "auto",
) -> dict[str, np.ndarray]:
    """The columns of several ``topics`` of ``reader`` on one time axis (see the module's doc).

    ``align``: ``"asof"`` (``pandas.merge_asof`` with ``direction`` ``"backward"``,
    ``"forward"`` or ``"nearest"``, ``tolerance`` as int ns or a text such as ``"10ms"``,
    ``allow_exact_matches``), ``"nearest"`` (asof, direction nearest) or
    ``"resample:<period>"`` (``interpolate``: ``"auto"`` numbers linear and the rest the
    previous value, ``"previous"``, or a dict ``{"<topic>.<field>": "linear"|"previous"}``).
    ``fields``: ``["<topic>.<field>", ...]`` or ``{topic: [field, ...]}``; a topic not named
    keeps all its fields.  ``time``: ``"log_time"``, ``"publish_time"``, ``"header.stamp"``
    (int64 ns) or ULog's ``"timestamp"`` (microseconds as stored: ``tolerance`` and the period
    are then taken to microseconds); a topic whose times go backwards is sorted stably first."""
    kind, direction, period = parse_align(align, direction)
    tol = parse_tolerance(tolerance)
    if time not in TIMES:
        raise UsageError(f"time must be one of {', '.join(TIMES)}, not {time!r}")
    default, per_column = _interpolations(interpolate)
    ts = _topics(reader, topics, fields)
    if time == "timestamp":  # ULog's own times are microseconds: the lengths of time follow
        tol = None if tol is None else tol // 1000
        period = None if period is None else max(1, period // 1000)
    if kind == "resample":
        assert period is not None
        return _resample(reader, ts, time, period, default, per_column)
    left, rights = ts[0], ts[1:]
    if time == "log_time" and all(_streams(reader, t) for t in ts):
        try:
            return _one_pass(reader, left, rights, direction, allow_exact_matches, tol)
        except _OutOfOrder:
            pass  # log times that go backwards (a damaged file): the left read whole, sorted
    lt, lcols = _whole(reader, left, time, left.fields)
    order = sort_times(lt)
    if order is not None:
        lt = lt[order]
        lcols = {k: v[order] for k, v in lcols.items()}
    out: dict[str, np.ndarray] = {time: lt}
    out.update({f"{left.prefix}.{k}": v for k, v in lcols.items()})
    accs = {t.prefix: AsofAccumulator(lt, direction, allow_exact_matches) for t in rights}
    counts = dict.fromkeys(accs, 0)
    for t, tt, cols in _blocks(reader, rights, time):
        accs[t.prefix].add(tt, cols)
        counts[t.prefix] += len(tt)
    for t in rights:
        if counts[t.prefix] == 0:
            warnings.warn(f"{reader.path}: topic {t.prefix} has no messages: its columns are all missing", PolybagWarning, stacklevel=2)
        matched, rcols = accs[t.prefix].finish(tol)
        out[f"{t.prefix}.{time}"] = matched
        out.update({f"{t.prefix}.{k}": v for k, v in rcols.items()})
    return out


def _release(reader: Any) -> None:
    """Drop the pages of the mapped file read so far (a long pass stays bounded in memory:
    every payload read is decoded by now)."""
    release = getattr(reader, "release_pages", None)
    if callable(release):
        release()


class _OutOfOrder(Exception):
    """The messages came out of log-time order: the one-pass join does not apply."""


def _filler(proto: np.ndarray, n: int) -> np.ma.MaskedArray:
    """``n`` missing rows shaped and typed like ``proto``'s."""
    data = np.zeros((n,) + proto.shape[1:], dtype=proto.dtype)
    if data.dtype.kind in "fc":
        data[...] = np.nan
    elif data.dtype == object:
        data[...] = np.nan
    return np.ma.MaskedArray(data, mask=np.ones(data.shape, dtype=bool))


def _concat(parts: Sequence[tuple[int, Mapping[str, np.ndarray]]]) -> dict[str, np.ndarray]:
    """The columns of consecutive row batches as one (a column a batch lacks is missing there;
    differing dtypes are promoted, differing shapes become rows of objects)."""
    names = list(dict.fromkeys(n for _, d in parts for n in d))
    out: dict[str, np.ndarray] = {}
    for name in names:
        proto = next(d[name] for _, d in parts if name in d)
        pieces = [d[name] if name in d else _filler(proto, n) for n, d in parts]
        if len({p.shape[1:] for p in pieces}) > 1:
            pieces = [np.ma.MaskedArray(as_rows(np.asarray(p)), mask=_row_missing(p)) for p in pieces]
        if any(isinstance(p, np.ma.MaskedArray) for p in pieces):
            out[name] = np.ma.concatenate(pieces) if len(pieces) > 1 else pieces[0]  # type: ignore[no-untyped-call]
        else:
            out[name] = np.concatenate(pieces) if len(pieces) > 1 else pieces[0]
    return out


def _row_missing(col: np.ndarray) -> np.ndarray:
    mask = np.ma.getmaskarray(col).reshape(len(col), -1)
    rows: np.ndarray = np.asarray(np.any(mask, axis=1), dtype=bool)
    return rows


def _one_pass(reader: Any, left: _Topic, rights: list[_Topic], direction: str, exact: bool, tol: int | None) -> dict[str, np.ndarray]:
    """The asof join of topics that are all decoded in batches, in one pass over the
    messages in log-time order: each left batch is joined once the messages have gone past
    its last time, and each right topic keeps only the rows from the last one before that
    time on (what the next left rows can still match)."""
    topics = [left, *rights]
    codecs = {t.name: codec_for(next(c for c in reader.channels().values() if c.topic == t.name)) for t in topics}
    fields = {t.name: t.fields for t in topics}
    pending: dict[str, tuple[list[int], list[Any]]] = {t.name: ([], []) for t in topics}
    size = dict.fromkeys(pending, 0)
    counts = dict.fromkeys(pending, 0)

    def decode(name: str, times: list[int], datas: list[Any]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        tt = time_array(np.array(times, dtype=np.uint64 if times and max(times) >= 1 << 63 else np.int64))
        return tt, dict(payload_columns(codecs[name], datas, fields[name], topic=name))

    # every right starts with an empty block: its columns are known even if it has no message
    kept: dict[str, list[tuple[np.ndarray, dict[str, np.ndarray]]]] = {t.name: [decode(t.name, [], [])] for t in rights}
    waiting: list[tuple[np.ndarray, dict[str, np.ndarray]]] = []
    done: list[tuple[np.ndarray, dict[str, np.ndarray], dict[str, tuple[np.ma.MaskedArray, dict[str, np.ma.MaskedArray]]]]] = []

    def join(batch: tuple[np.ndarray, dict[str, np.ndarray]]) -> None:
        lt, lcols = batch
        joined = {}
        for t in rights:
            acc = AsofAccumulator(lt, direction, exact)
            for tt, cols in kept[t.name]:
                acc.add(tt, cols)
            joined[t.name] = acc.finish(tol)
        done.append((lt, lcols, joined))
        if not len(lt):
            return
        last = lt[-1]
        for t in rights:  # drop the rows no later left row can match
            blocks = kept[t.name]
            below = [tt[tt < last] for tt, _ in blocks]
            nonempty = [b for b in below if len(b)]
            if not nonempty:
                continue
            keep_from = max(int(b[-1]) for b in nonempty)
            pruned = []
            for tt, cols in blocks:
                if len(tt) and tt[-1] < keep_from:
                    continue
                rows = tt >= keep_from
                pruned.append((tt, cols) if rows.all() else (tt[rows], {k: v[rows] for k, v in cols.items()}))
            kept[t.name] = pruned or [(tt[:0], {k: v[:0] for k, v in cols.items()})]

    def flush(now: int | None) -> None:
        for name, (times, datas) in pending.items():
            if not times:
                continue
            block = decode(name, times, datas)
            pending[name] = ([], [])
            size[name] = 0
            if name == left.name:
                waiting.append(block)
            else:
                kept[name].append(block)
        while waiting and (now is None or ready(waiting[0][0], now)):
            join(waiting.pop(0))
        _release(reader)

    def ready(lt: np.ndarray, now: int) -> bool:
        # every row at or before the batch's last time has come; forward matches need a
        # right row after it too (or the end)
        if not len(lt) or lt[-1] >= now:
            return False
        return direction == "backward" or all(latest[t.name] is not None and latest[t.name] > lt[-1] for t in rights)

    last_time: int | None = None
    latest: dict[str, int | None] = dict.fromkeys(pending)
    for m in reader.messages(topics=list(pending)):
        name = m.channel.topic
        p = pending.get(name)
        if p is None:
            continue
        t = m.log_time
        if last_time is not None and t < last_time:
            raise _OutOfOrder
        if p[0] and (len(p[0]) >= _BATCH_MESSAGES or size[name] >= _BATCH_BYTES):
            flush(t)
            p = pending[name]
        last_time = latest[name] = t
        p[0].append(t)
        p[1].append(m.data)
        size[name] += len(m.data)
        counts[name] += 1
    flush(None)
    if not done:  # no left row at all: an empty table with every column
        join(decode(left.name, [], []))
    out: dict[str, np.ndarray] = {"log_time": np.concatenate([lt for lt, _, _ in done])}
    lcols = _concat([(len(lt), c) for lt, c, _ in done])
    out.update({f"{left.prefix}.{k}": v for k, v in lcols.items()})
    for t in rights:
        if counts[t.name] == 0:
            warnings.warn(f"{reader.path}: topic {t.prefix} has no messages: its columns are all missing", PolybagWarning, stacklevel=3)
        parts = [(len(lt), {"\0time": j[t.name][0], **j[t.name][1]}) for lt, _, j in done]
        rcols = _concat(parts)
        out[f"{t.prefix}.log_time"] = rcols.pop("\0time")
        out.update({f"{t.prefix}.{k}": v for k, v in rcols.items()})
    return out


def _resample(reader: Any, ts: list[_Topic], time: str, period: int, default: str, per_column: dict[str, str]) -> dict[str, np.ndarray]:
    first: int | None = None
    last: int | None = None
    for _t, tt, _cols in _blocks(reader, ts, time, times_only=True):
        if len(tt):
            lo, hi = int(tt.min()), int(tt.max())
            first = lo if first is None else min(first, lo)
            last = hi if last is None else max(last, hi)
    grid = resample_grid(first, last, period) if first is not None and last is not None else np.zeros(0, np.int64)
    accs = {t.prefix: ResampleAccumulator(grid) for t in ts}
    counts = dict.fromkeys(accs, 0)
    for t, tt, cols in _blocks(reader, ts, time):
        accs[t.prefix].add(tt, cols)
        counts[t.prefix] += len(tt)
    out: dict[str, np.ndarray] = {time: grid}
    names = [f"{t.prefix}.{n}" for t in ts for n in accs[t.prefix].names()]
    unknown = [k for k in per_column if k not in names]
    if unknown:
        raise UsageError(f"interpolate names no column {', '.join(unknown)}; columns: {', '.join(names)}")
    for t in ts:
        if counts[t.prefix] == 0:
            warnings.warn(f"{reader.path}: topic {t.prefix} has no messages: its columns are all missing", PolybagWarning, stacklevel=3)
        how = {k.partition(".")[2]: v for k, v in per_column.items() if k.partition(".")[0] == t.prefix}
        prev_t, rcols = accs[t.prefix].finish(how, default)
        out[f"{t.prefix}.{time}"] = prev_t
        out.update({f"{t.prefix}.{k}": v for k, v in rcols.items()})
    return out


def _row_mask(mask: np.ndarray | None, n: int) -> list[bool]:
    """Which rows are missing (a row of a 2-D column is missing as a whole)."""
    if mask is None or not n:
        return [False] * n
    rows = np.any(np.asarray(mask).reshape(n, -1), axis=1)
    return [bool(x) for x in np.atleast_1d(rows)]


def _pandas_column(col: np.ndarray) -> Any:
    import pandas as pd  # type: ignore[import-untyped]  # no stubs installed (pandas-stubs)

    if not isinstance(col, np.ma.MaskedArray):
        return list(col) if col.ndim > 1 else col
    mask = np.ma.getmaskarray(col)
    data = np.asarray(col.data)
    if data.ndim > 1:
        rows = _row_mask(mask, len(data))
        return [None if m else r for m, r in zip(rows, data)]
    if data.dtype.kind in "iu":
        return pd.arrays.IntegerArray(data, mask.copy())
    if data.dtype == bool:
        return pd.arrays.BooleanArray(data, mask.copy())
    return data


def is_topic_list(topic: Any) -> bool:
    """Whether a reader's ``to_pandas``/``to_arrow`` was given several topics to align (a
    list or tuple of names or ``(name, multi_id)`` pairs) rather than one topic."""
    return isinstance(topic, (list, tuple)) and not (
        len(topic) == 2 and isinstance(topic[0], str) and isinstance(topic[1], int) and not isinstance(topic[1], bool)
    )


def _unit(time: str) -> str:
    return "us" if time == "timestamp" else "ns"


def aligned_pandas(reader: Any, topics: Sequence[TopicSpec], fields: Any = None, *, datetimes: bool = False, **options: Any) -> Any:
    """:func:`aligned_columns` as a ``pandas.DataFrame`` indexed by the time column (int64
    ns); unmatched rows are NaN in float and object columns, ``<NA>`` in integer (``Int64``)
    and bool (``boolean``) ones.  ``datetimes=True``: the index is ``datetime64[ns, UTC]``,
    the integers kept as the column ``<time>_ns`` (``timestamp_us`` for ULog's ``timestamp``)."""
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - optional dependency
        raise UnsupportedError("aligned_pandas needs pandas: pip install 'polybag[pandas]'") from None
    cols = aligned_columns(reader, topics, fields, **options)
    tname = next(iter(cols))
    times = cols.pop(tname)
    data = {k: _pandas_column(v) for k, v in cols.items()}
    if not datetimes:
        return pd.DataFrame(data, index=pd.Index(times, name=tname))
    unit = _unit(tname)
    if times.dtype.kind == "u" and len(times) and int(times.max()) >= 1 << 63:
        raise UsageError(f"{tname}: times past 2**63 ns have no pandas datetime; use datetimes=False")
    index = pd.DatetimeIndex(pd.to_datetime(times.astype(np.int64), unit=unit, utc=True), name=tname).as_unit("ns")
    return pd.DataFrame({f"{tname}_{unit}": times, **data}, index=index)


def _arrow_column(col: np.ndarray) -> Any:
    import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information

    mask = np.ma.getmaskarray(col) if isinstance(col, np.ma.MaskedArray) else None
    data = np.asarray(col.data if isinstance(col, np.ma.MaskedArray) else col)
    if data.ndim > 1 or data.dtype == object:
        rows = _row_mask(mask, len(data))
        vals = [None if m else (x.tolist() if isinstance(x, np.ndarray) else x) for m, x in zip(rows, data)]
        return pa.array(vals)
    return pa.array(data, mask=mask)


def aligned_arrow(reader: Any, topics: Sequence[TopicSpec], fields: Any = None, *, datetimes: bool = False, **options: Any) -> Any:
    """:func:`aligned_columns` as a ``pyarrow.Table`` (the time column first; unmatched
    rows are nulls); ``datetimes=True`` adds ``<time>_utc`` (``timestamp[ns, UTC]``) after it."""
    try:
        import pyarrow as pa
    except ImportError:  # pragma: no cover - optional dependency
        raise UnsupportedError("aligned_arrow needs pyarrow: pip install 'polybag[arrow]'") from None
    cols = aligned_columns(reader, topics, fields, **options)
    arrays = {k: _arrow_column(v) for k, v in cols.items()}
    if datetimes:
        tname = next(iter(cols))
        times = np.asarray(cols[tname])
        if times.dtype.kind == "u" and len(times) and int(times.max()) >= 1 << 63:
            raise UsageError(f"{tname}: times past 2**63 ns have no Arrow timestamp; use datetimes=False")
        utc = pa.array(times.astype(np.int64), pa.timestamp(_unit(tname), tz="UTC"))
        arrays = {tname: arrays.pop(tname), f"{tname}_utc": utc, **arrays}
    return pa.table(arrays)
