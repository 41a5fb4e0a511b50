"""Building the Dask collections: DataFrames and Bags over the planned partitions.

:func:`read_topic`, :func:`read_messages` and :func:`file_summaries` plan in the driver
(:mod:`polybag.dask._plan`) and hand Dask one task per partition (:mod:`polybag.dask._read`).
Dask itself is imported only here, when a collection is built (:func:`require_dask`), so that
``polybag.dask`` imports without it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any, Literal

from polybag.dask._plan import (
    DEFAULT_PARTITION_MESSAGES,
    Partition,
    PathsLike,
    _order,
    _plan,
    expand_paths,
    partitions,
)
from polybag.dask._read import (
    _SUMMARY_COLUMNS,
    _add_file_column,
    _map_partition,
    _message_partition,
    _meta_for,
    _summary_row,
    _topic_partition,
)
from polybag.errors import UnsupportedError, UsageError
from polybag.model import Message
from polybag.reader import TopicSelector
from polybag.selection import TimeWindow


def require_dask(collection: Literal["dataframe", "items"] = "dataframe") -> Any:
    """Import dask (and ``dask.dataframe``, or ``dask.bag`` for ``items``) or say how to install it."""
    try:
        import dask  # noqa: F401

        mod = importlib.import_module("dask.bag" if collection == "items" else "dask.dataframe")
    except ImportError as e:
        raise UnsupportedError(
            f"polybag.dask needs dask ({e}): pip install polybag[dask]  (or: pip install 'dask[dataframe]')"
        ) from None
    return mod


def read_topic(
    paths: PathsLike,
    topic: str,
    *,
    fields: Sequence[str] | None = None,
    start: int | str | None = None,
    end: int | str | None = None,
    partition_messages: int = DEFAULT_PARTITION_MESSAGES,
    decode: bool = True,
    multi_id: int = 0,
    file_column: bool = True,
    time: str = "log_time",
    keep_times: bool = False,
) -> Any:
    """One row per message of ``topic`` across ``paths``, as a ``dask.dataframe.DataFrame``.

    ``paths`` is a path, a glob pattern or a list.  Columns are those of the reader's
    ``to_pandas(topic, fields)`` (flattened field paths), indexed by ``log_time`` (int64
    ns), plus a categorical ``file`` column (``file_column=False`` leaves it out).
    ``decode=False`` gives the raw payloads instead (``publish_time``, ``sequence``,
    ``data`` bytes).  ``start`` (inclusive) and ``end`` (exclusive) bound the log time:
    integer ns, or absolute time texts as the CLI reads them (epoch seconds ``"1700000000.5"``,
    ISO 8601 ``"2026-11-28T10:00:00Z"``; not ``+T``, as the files have no one start).

    Partitions hold about ``partition_messages`` messages of the topic, cut at chunk
    boundaries from the files' indexes; within a partition rows are in log-time order.
    Divisions are known (``df.known_divisions``) when every file is indexed (files that
    overlap in time then share partitions): they are the partitions' log-time bounds, so a
    window ``df.loc[t0:t1]`` reads only the partitions it overlaps, and a groupby on the
    index (``df.groupby("log_time")``) runs partition by partition.  A groupby aggregation
    on a column (``file``, a field) of a frame with more than 15 partitions is split by Dask
    into ``npartitions / 15`` outputs through a shuffle (the distributed scheduler logs two
    warnings per compute): with few groups ask for one output, a tree reduction without
    shuffle: ``df.groupby("file").x.mean(split_out=1)``.  ``multi_id`` picks the instance of
    a ULog topic.

    ``time`` indexes the frame by another time, as the readers' ``to_pandas(time=...)``
    does (``publish_time``, ``header.stamp``, ULog's ``timestamp``; ``keep_times=True``
    keeps the other times as columns): rows stay in log-time order and ``start``/``end``
    still bound the log time, so the divisions are unknown then.  Only with ``decode``.  Column names and dtypes come from the message type, without reading a
    message (for schemaless encodings such as JSON: from the topic's first message, read
    from its earliest chunk; keys it lacks are left out).

    Over URLs the driver fetches each file's summary only; each partition's task fetches
    the chunks of its window and the file's summary (its first 16 KiB and last 64 KiB), so
    the partitions together fetch every chunk once.
    """
    dd = require_dask("dataframe")
    from polybag.codecs.columns import check_time

    check_time(time)
    if not decode and (time != "log_time" or keep_times):
        raise UsageError("read_topic: time= and keep_times= apply to decoded columns (decode=True)")
    start, end = TimeWindow.of_ns(start, end)
    files = expand_paths(paths)
    plans = _plan(files, [topic], start, end, partition_messages, lambda ps: not any(p.channels for p in ps))
    try:
        meta, project = _meta_for(plans, topic, fields, decode, multi_id, files, time, keep_times)
    finally:
        for pl in plans:
            pl.close()
    if file_column:
        _add_file_column(meta, topic, files)
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
            time=time,
            keep_times=keep_times,
            project=project,
            meta=meta,
            divisions=divisions if time == "log_time" else None,
            label=f"polybag-{topic.strip('/').replace('/', '-') or 'topic'}",
            enforce_metadata=False,
        )


def read_messages(
    paths: PathsLike,
    topics: TopicSelector = None,
    *,
    start: int | str | None = None,
    end: int | str | None = None,
    partition_messages: int = DEFAULT_PARTITION_MESSAGES,
    decode: bool = True,
) -> Any:
    """Messages of ``topics`` (``None``: all; a string is a regex) as a ``dask.bag.Bag``.

    Each item is a dict: ``topic``, ``log_time``, ``publish_time``, ``sequence``, ``data``
    (the message as nested dicts, or its raw bytes with ``decode=False``) and ``file``.
    Partitioned like :func:`read_topic`; items are in log-time order within a partition.
    """
    return partition_bag(paths, topics, start, end, partition_messages, _message_partition, decode=decode)


def map_messages(
    paths: PathsLike,
    fn: Callable[[Message], Any],
    topics: TopicSelector = None,
    *,
    start: int | str | None = None,
    end: int | str | None = None,
    partition_messages: int = DEFAULT_PARTITION_MESSAGES,
) -> Any:
    """``fn(message)`` of every message of ``topics`` across ``paths`` (files, globs, URLs),
    as a ``dask.bag.Bag`` of the results, partitioned like :func:`read_topic`.

    ``fn`` runs in the workers on each :class:`polybag.Message` in log-time order within a
    partition; the message's ``data`` is a view into the file that is released when the
    partition's file closes, so ``fn`` returns what it derives (``m.decode().x``,
    ``len(m.data)``, ``bytes(m.data)``), never the message itself.  ``fn`` must pickle for
    the process and distributed schedulers (a module-level function).
    """
    return partition_bag(paths, topics, start, end, partition_messages, _map_partition, fn=fn)


def partition_bag(
    paths: PathsLike,
    topics: TopicSelector,
    start: int | str | None,
    end: int | str | None,
    partition_messages: int,
    task: Callable[..., Any],
    **options: Any,
) -> Any:
    """A ``dask.bag.Bag`` of the items ``task(part, topics=topics, **options)`` gives for
    each of the :func:`~polybag.dask._plan.partitions` of ``topics`` across ``paths`` (one
    empty partition when there is none)."""
    db = require_dask("items")
    parts = partitions(paths, topics, start=start, end=end, partition_messages=partition_messages)
    if not parts:
        return db.from_sequence([], npartitions=1)
    return db.from_sequence(parts, partition_size=1).map(task, topics=topics, **options).flatten()


def file_summaries(paths: PathsLike, *, errors: str = "record") -> Any:
    """Per-file facts (format, counts, start/end, ...) as a ``dask.dataframe.DataFrame``,
    one row per file, one task per file.  ``errors="record"`` puts an unreadable file's
    error in the ``error`` column; ``errors="raise"`` raises it.  A damaged file (cut short,
    a corrupt chunk) is described and its ``error`` is the verdict ``polybag info`` prints."""
    dd = require_dask("dataframe")
    import pandas as pd  # type: ignore[import-untyped]  # no stubs installed (pandas-stubs)

    if errors not in ("record", "raise"):
        raise UsageError(f"errors must be 'record' or 'raise', not {errors!r}")
    files = expand_paths(paths)
    meta = pd.DataFrame({k: pd.Series([], dtype=t) for k, t in _SUMMARY_COLUMNS.items()})
    return dd.from_map(
        _summary_row, files, errors=errors, meta=meta, label="polybag-summary", enforce_metadata=False
    )


def _aligned_partition(path: str, topics: list[Any], fields: Any, options: dict[str, Any], files: list[str] | None) -> Any:
    """One file of :func:`read_topics` (runs in a worker)."""
    import pandas as pd

    import polybag
    from polybag.codecs.aligned import aligned_pandas

    with polybag.open(path) as r:
        df = aligned_pandas(r, topics, fields, **options)
    if files is not None:
        df["file"] = pd.Categorical([path] * len(df), categories=list(dict.fromkeys(files)))
    return df


def read_topics(
    paths: PathsLike,
    topics: Sequence[str | tuple[str, int | str]],
    fields: Sequence[str] | dict[str, Sequence[str]] | None = None,
    *,
    align: str = "asof",
    direction: str = "backward",
    tolerance: int | str | None = None,
    allow_exact_matches: bool = True,
    time: str = "log_time",
    interpolate: str | dict[str, str] = "auto",
    file_column: bool = True,
) -> Any:
    """Several topics on one time axis across ``paths``, as a ``dask.dataframe.DataFrame``:
    each file's :func:`polybag.codecs.aligned.aligned_pandas` (the first topic's rows, the
    others joined onto them as ``pandas.merge_asof`` does, or every topic resampled), one
    partition per file (an alignment never crosses files), indexed by the time column, plus
    a categorical ``file`` column as :func:`read_topic` has (``file_column=False`` leaves it
    out).  The options are those of :func:`polybag.codecs.aligned.aligned_columns`.  The
    columns are learnt by aligning the first file in the driver."""
    dd = require_dask("dataframe")
    from polybag.codecs.align import parse_align, parse_tolerance

    parse_align(align, direction)  # a bad option fails here, not in a worker
    parse_tolerance(tolerance)
    files = expand_paths(paths)
    if not files:
        raise UsageError(f"no file matches {paths!r}")
    options: dict[str, Any] = {
        "align": align,
        "direction": direction,
        "tolerance": tolerance,
        "allow_exact_matches": allow_exact_matches,
        "time": time,
        "interpolate": interpolate,
    }
    topic_list = list(topics) if not isinstance(topics, str) else [topics]
    keep = files if file_column else None
    meta = _aligned_partition(files[0], topic_list, fields, options, keep).iloc[:0]
    if file_column and "file" in meta.columns and meta["file"].dtype != "category":
        raise UsageError("a column is named 'file': pass file_column=False")
    import dask

    with dask.config.set({"dataframe.convert-string": False}):
        return dd.from_map(
            _aligned_partition,
            files,
            topics=topic_list,
            fields=fields,
            options=options,
            files=keep,
            meta=meta,
            label="polybag-aligned",
            enforce_metadata=False,
        )
