"""Reading one partition in a worker: columns, raw payloads or message dicts of a window.

Every task opens its files (:func:`_open`), reads the partition's window and closes them
before returning; what it returns owns its memory (:func:`_detach`, :func:`_owned`: never a
view of a mapped file), so results outlive the file and pickle to other processes.
:func:`_topic_partition` makes one partition of :func:`polybag.dask.read_topic`,
:func:`_message_partition` one of :func:`polybag.dask.read_messages`, :func:`_summary_row`
one row of :func:`polybag.dask.file_summaries`; :func:`_meta_for` (in the driver) gives the
empty frame with the columns and dtypes every partition is made to match.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any, Protocol, cast

import numpy as np

from polybag.dask._plan import Partition, _FilePlan, _sniff_spec, selecting
from polybag.errors import FormatError, PolybagError, UnsupportedError, UsageError
from polybag.model import Message
from polybag.ops.inputs import damage, damage_verdict
from polybag.reader import TopicSelector
from polybag.selection import TimeWindow

if TYPE_CHECKING:
    import pandas as pd  # type: ignore[import-untyped]  # no stubs installed (pandas-stubs)

    from polybag.reader import Reader


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
    from polybag.formats import registry

    return polybag.open(path, **selecting(registry.lookup(fmt), topics))


def _columns_window(
    r: Reader,
    topic: str,
    fields: Sequence[str] | None,
    start: int | None,
    end: int | None,
    time: str = "log_time",
    keep_times: bool = False,
) -> dict[str, np.ndarray]:
    """Columns of ``topic`` in ``[start, end)`` of the log time (like ``topic_columns``,
    restricted in time; ``time`` first)."""
    from polybag.codecs import codec_for
    from polybag.codecs.columns import fields_with_time, payload_columns, select_time

    channels = [c for c in r.channels().values() if c.topic == topic]  # (a bag: no chunk header read)
    if not channels:
        return {}
    if start is None and end is None:
        return {k: _detach(v) for k, v in r.topic_columns(topic, fields, time=time, keep_times=keep_times).items()}
    if len({id(codec_for(c)) for c in channels}) > 1:
        raise UnsupportedError(f"topic {topic} has channels of different types; read them separately")
    codec = codec_for(channels[0])
    times_l: list[int] = []
    publish_l: list[int] = []
    datas: list[Any] = []
    # file order (no merge of chunks per message), then a stable sort: log-time order with
    # ties in file order, exactly the reader's order="log_time"
    for m in r.messages(topics=[topic], start=start, end=end, order="file"):
        times_l.append(m.log_time)
        publish_l.append(m.publish_time)
        datas.append(m.data)
    times = np.array(times_l, dtype=np.int64)
    publish = np.array(publish_l, dtype=np.int64)
    o = _time_order(times)
    if o is not None:
        times, publish = times[o], publish[o]
        datas = [datas[i] for i in o.tolist()]
    cols = payload_columns(codec, datas, fields_with_time(fields, time), topic=topic)
    del datas
    out = select_time(cols, times, publish, time=time, keep_times=keep_times, topic=topic, codec=codec)
    return {k: _detach(v) for k, v in out.items()}


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


def _frame(cols: dict[str, np.ndarray], time: str = "log_time") -> pd.DataFrame:
    from polybag.codecs.columns import columns_to_pandas

    if time not in cols:
        cols = {time: np.zeros(0, np.int64), **cols}
    return columns_to_pandas(cols, time=time)


def _instance_tables(fmt: str) -> bool:
    """Whether a topic of format ``fmt`` is logged in instances, each a table of its own
    records (:attr:`~polybag.formats.registry.FormatSpec.instance_tables`: a ULog)."""
    from polybag.formats import registry

    spec = registry.lookup(fmt)
    return spec is not None and spec.instance_tables


class _InstanceFrames(Protocol):
    """A reader whose topics have instances (a ULog's ``multi_id``): one instance's frame."""

    def to_pandas(
        self, topic: str, multi_id: int, fields: Sequence[str] | None = None, /, *, time: str = "log_time", keep_times: bool = False
    ) -> pd.DataFrame: ...


def _ulog_frame(
    r: Reader,
    topic: str,
    fields: Sequence[str] | None,
    multi_id: int,
    start: int | None,
    end: int | None,
    time: str = "log_time",
    keep_times: bool = False,
) -> pd.DataFrame:
    mids = {c.metadata.get("multi_id", "0") for c in r.summary.channels.values() if c.topic == topic}
    if str(multi_id) not in mids:
        return _frame({}, time)  # this file does not log the topic (or instance): no rows
    windowed = start is not None or end is not None
    # the window is of the log time: kept as a column while it is applied
    keep = keep_times or (windowed and time != "log_time")
    df = cast(_InstanceFrames, r).to_pandas(topic, multi_id, fields, time=time, keep_times=keep)
    if windowed:
        logged = df.index.to_numpy() if time == "log_time" else df["log_time"].to_numpy()
        df = df[TimeWindow(start, end).contains(logged)]
        if keep and not keep_times:
            df = df.drop(columns=["log_time"])
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
    time: str = "log_time",
    keep_times: bool = False,
) -> pd.DataFrame:
    """One partition of :func:`read_topic` (runs in a worker).

    ``columns`` is Dask's column projection; with ``project`` (the type's fields are known
    from its schema) only those fields are decoded."""
    import pandas as pd

    want = None if columns is None else ([columns] if isinstance(columns, str) else list(columns))
    if project and decode and want is not None and fields is None:
        times = {"file", "log_time", "publish_time", time}
        data_cols = [c for c in want if c not in times]
        if set(data_cols) != set(frame_meta.columns) - times:
            fields = data_cols  # decode only the projected columns
    frames = []
    for path, fmt in part.files:
        with _open(path, fmt, [topic]) as r:
            if _instance_tables(fmt):  # a ULog instance's table, from its own records
                df = (
                    _ulog_frame(r, topic, fields, multi_id, part.start, part.end, time, keep_times)
                    if decode
                    else _frame(_raw_window(r, topic, part.start, part.end))
                )
            elif decode:
                df = _frame(_columns_window(r, topic, fields, part.start, part.end, time, keep_times), time)
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
    time: str = "log_time",
    keep_times: bool = False,
) -> tuple[pd.DataFrame, bool]:
    """An empty frame with the columns and dtypes of the topic, and whether the columns come
    from the schema (so that a projection can be decoded alone).

    Built in the driver without reading message data where the codec compiles the schema
    (ROS 1, CDR): the columns of a default message of the type (every field zero or empty;
    what pandas makes of each column, strings included, is what a real message gives).  A
    schemaless encoding (JSON) takes the columns of the topic's first message, read from the
    earliest chunk that holds the topic (the other chunks are not fetched); a ULog instance's
    table from its records (a ULog is read whole anyway)."""

    from polybag.codecs import codec_for
    from polybag.codecs.columns import (
        check_time_field,
        fields_with_time,
        is_compiled,
        payload_columns,
        select_time,
    )

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
    elif _instance_tables(plan.format):  # a ULog instance's table, from its own records
        # (the reader the planner opened, when it kept it: a remote ULog is fetched whole)
        with nullcontext(plan.reader) if plan.reader is not None else _open(plan.path, plan.format, [topic]) as r:
            df = _ulog_frame(r, topic, fields, multi_id, None, None, time, keep_times).iloc[:0]
    else:
        codec = codec_for(plan.channels[0])
        check_time_field(codec, topic, time)
        sample = _default_payload(codec) if is_compiled(codec) else None
        if sample is None:
            project = False  # keys may differ between messages: decode all, then select
            sample = _first_payload(plan, topic)
        cols = payload_columns(codec, sample, fields_with_time(fields, time), topic=topic)
        zeros = np.zeros(len(sample), np.int64)
        cols = select_time(cols, zeros, zeros, time=time, keep_times=keep_times, topic=topic, codec=codec)
        df = _frame(cols, time).iloc[:0]
    return df.copy(), project


def _default_payload(codec: Any) -> list[bytes] | None:
    """The payload of a default message of a compiled codec's type (every field zero or
    empty), or None when the codec cannot make one."""
    try:
        return [bytes(codec.encode(codec.message_class()))]
    except (PolybagError, TypeError, ValueError, AttributeError):
        return None


def _first_payload(plan: _FilePlan, topic: str) -> list[bytes]:
    """The topic's first message (file order) in the earliest of its chunks, as a one-item
    list (empty: none): only the chunks overlapping that chunk's time range are read."""
    start = end = None
    earliest = min((c for c in plan.chunks or () if c[2] > 0), default=None)
    if earliest is not None:
        start, end = earliest[0], max(earliest[1], earliest[0]) + 1
    with _open(plan.path, plan.format, [topic]) as r:
        first = next(iter(r.messages(topics=[topic], start=start, end=end, order="file")), None)
        return [] if first is None else [bytes(first.data)]


def _add_file_column(meta: pd.DataFrame, topic: str, files: list[str]) -> None:
    """Add the categorical ``file`` column (categories: ``files`` in order) to ``meta``."""
    if "file" in meta.columns:
        raise UsageError(f"topic {topic} has a field 'file': pass file_column=False")
    import pandas as pd

    meta["file"] = pd.Categorical([], categories=list(dict.fromkeys(files)))


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


def _map_partition(part: Partition, topics: TopicSelector, fn: Callable[[Message], Any]) -> list[Any]:
    """One partition of :func:`~polybag.dask.frames.map_messages`: ``fn`` of each message in
    log-time order (files of a shared window merged by log time; runs in a worker)."""
    lists: list[list[tuple[int, Any]]] = []
    for path, fmt in part.files:
        with _open(path, fmt, topics) as r:
            lists.append([(m.log_time, fn(m)) for m in r.messages(topics=topics, start=part.start, end=part.end)])
    if len(lists) == 1:
        return [v for _t, v in lists[0]]
    return [v for _t, v in heapq.merge(*lists, key=_first)]


def _first(item: tuple[int, Any]) -> int:
    return item[0]


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


# --- file summaries ---------------------------------------------------------------------------
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
        spec = _sniff_spec(path)
        quiet: dict[str, Any] = {"warn": False} if spec is not None and spec.opener_selects else {}
        with polybag.open(path, **quiet) as r:
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
            problems = damage(r)
            if problems:  # described, and damaged: the verdict ``polybag info`` gives
                verdict = damage_verdict(str(r.path or path), problems)
                if errors == "raise":
                    raise FormatError(verdict)
                row["error"] = verdict
    except PolybagError as e:
        if errors == "raise":
            raise
        row["error"] = str(e)
    return pd.DataFrame({k: pd.Series([row[k]], dtype=t) for k, t in _SUMMARY_COLUMNS.items()})
