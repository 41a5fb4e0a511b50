"""Columns: a whole topic as one numpy array per leaf field.

For ROS 1 and CDR topics the payloads of the topic are concatenated into one buffer and the
type's fields are walked once for all messages together, with a vector of per-message
positions: fixed-size fields are gathered with numpy (a strided view when every message
has the same layout, a fancy index otherwise), strings and sequences advance the positions
by their lengths read as a vector too.  Only the values of strings and variable-length
sequences are materialised per message (as Python objects in object arrays).

Column names are flattened paths: ``header.stamp`` (times as int64 nanoseconds),
``pose.position.x``, ``covariance[0]`` for fixed arrays (``arrays="lists"``: one 2-D
column ``covariance`` instead, of dicts for an array of messages); variable-length arrays
give one object column holding an array (or bytes, or a list of strings or of dicts) per
message.  The first column is the time chosen with ``time=`` (:data:`TIME_CHOICES`;
``log_time`` by default: int64 ns, uint64 when a time is 2**63 or more, which MCAP allows).
Other encodings (JSON, protobuf) are decoded per message and flattened the same way.

Readers can skip the per-message iteration entirely: ``topic_payloads(topic)`` returns
``(log_times, blob, starts, sizes)`` (numpy arrays, log-time order; ``blob`` a uint8 array
such as the decompressed chunk, ``starts``/``sizes`` the payloads in it), or None when the
format does not offer it (then the messages are iterated).  When every payload of a ROS 1
topic has one layout and numpy owns ``blob`` (the reader gathered the payloads into it), the
numeric columns are typed strided views of ``blob`` (one structured record per message, as
the ULog reader's columns are views of its records) instead of copies.

This module holds the entry points, the choice of path and the tunables; the paths are in
:mod:`~polybag.codecs.columns_fixed` (fixed layouts, planned by
:mod:`~polybag.codecs.columns_layout`), :mod:`~polybag.codecs.columns_walk` (the general
walk, other encodings) and :mod:`~polybag.codecs.columns_export` (arrow and pandas tables).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

import numpy as np

from polybag.codecs import codec_for
from polybag.codecs.cdr import CdrCodec, UndefinedCodec
from polybag.codecs.cdr_columns import cdr_columns
from polybag.codecs.columns_export import (
    ARRAYS,
    TIME_CHOICES,
    arrow_types,
    check_arrays,
    check_time,
    columns_to_arrow,
    columns_to_pandas,
    lists_of_arrays,
)
from polybag.codecs.columns_fixed import Limits, fixed_from_payloads, fixed_layout, string_layout
from polybag.codecs.columns_layout import check_columns
from polybag.codecs.columns_walk import Walker as Walker  # re-exported: tests walk with it
from polybag.codecs.columns_walk import generic_columns, walk_in_blocks
from polybag.codecs.ros1 import UndefinedRos1Codec
from polybag.errors import DecodeError, PolybagError, UnsupportedError, UsageError
from polybag.model import Message, Summary

__all__ = [
    "ARRAYS",
    "TIME_CHOICES",
    "MessageSource",
    "check_arrays",
    "check_time",
    "check_time_field",
    "columns_to_arrow",
    "columns_to_pandas",
    "fields_with_time",
    "lists_of_arrays",
    "payload_columns",
    "select_time",
    "topic_arrow",
    "topic_columns",
    "topic_pandas",
]

_HEADER_TYPES = ("std_msgs/Header", "std_msgs/msg/Header")
_INT_BASES = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "byte", "char")


class MessageSource(Protocol):
    """What :func:`topic_columns` reads from: every :class:`polybag.reader.Reader` is one
    (declared here because the codecs do not import the readers)."""

    @property
    def path(self) -> Any: ...

    @property
    def summary(self) -> Summary: ...

    def channels(self) -> dict[int, Any]: ...

    def messages(self, topics: Sequence[str] | None = None) -> Iterator[Message]: ...

    def topic_payloads(self, topic: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """The topic's payloads in bulk, or None: not offered (see the module's doc)."""


def _wanted(fields: Sequence[str] | None) -> Callable[[str], bool]:
    if fields is None:
        return lambda name: True
    want = list(fields)

    def ok(name: str) -> bool:
        for w in want:
            if name == w or name.startswith(w + ".") or name.startswith(w + "[") or w.startswith(name + "."):
                return True
            if w.startswith(name + "["):
                return True
        return False

    return ok


def _check_fields(fields: Sequence[str] | None, cols: dict[str, np.ndarray], n: int) -> None:
    """Every requested field must name a column or a prefix of some (when there are messages)."""
    if not fields or n == 0:
        return
    names = list(cols)
    for f in fields:
        if not any(c == f or c.startswith(f + ".") or c.startswith(f + "[") for c in names):
            raise PolybagError(f"no field {f!r}; fields: {', '.join(names) or '(none)'}")


_INT64_MAX = (1 << 63) - 1


@contextmanager
def _definition_said(codec: Any, topic: str | None) -> Iterator[None]:
    """A payload of a type with no definition anywhere fails as "no definition for
    pkg/msg/Name (add it with --types DIR)", as decoding one message says, not as bytes
    left over."""
    try:
        yield
    except DecodeError as e:
        if isinstance(codec, UndefinedCodec):
            raise codec.missing(e, topic) from None
        if isinstance(codec, UndefinedRos1Codec):
            raise codec.missing_error(topic) from None
        raise


def topic_columns(
    reader: MessageSource,
    topic: str,
    fields: Sequence[str] | None = None,
    *,
    time: str = "log_time",
    keep_times: bool = False,
    arrays: str = "columns",
) -> dict[str, np.ndarray]:
    """One numpy array per leaf field of ``topic``, the chosen time first.

    ``time`` names the first column (int64 ns, uint64 where a time is 2**63 or more):
    ``"log_time"`` (the default), ``"publish_time"`` (the message's publish time: MCAP's own,
    a rosbag2 bag's timestamp as stored, a bag's or ULog's log time), ``"header.stamp"`` (the
    ``std_msgs/Header`` field ``header``'s stamp, moved first and not repeated; a type
    without one is a UsageError) or ``"timestamp"`` (a top-level integer field ``timestamp``,
    as every ULog type has: moved first as stored, microseconds in a ULog).  Rows stay in
    log-time order, so any other chosen time may go backwards.  ``keep_times=False`` keeps
    only the chosen time (with ``header.stamp`` chosen there is no ``log_time`` column);
    ``keep_times=True`` adds ``log_time`` and ``publish_time`` (the log time again in a bag)
    after it.  ``arrays="lists"`` gives each fixed array of numbers, times or strings as one
    2-D column ``f`` (rows by elements) instead of the columns ``f[0]..f[n-1]``, and each
    fixed array of messages as a 2-D object column of dicts (built row by row).

    Publish times (``publish_time`` chosen or kept) are read from the messages one by one:
    the readers' bulk payloads (``topic_payloads``) carry log times only."""
    check_time(time)
    check_arrays(arrays)
    codec = _codec_of_topic(reader, topic)
    with _definition_said(codec, topic):
        return _chosen_time(reader, topic, codec, fields, time, keep_times, arrays)


def _chosen_time(
    reader: MessageSource, topic: str, codec: Any, fields: Sequence[str] | None, time: str, keep_times: bool, arrays: str
) -> dict[str, np.ndarray]:
    check_time_field(codec, topic, time)
    need_publish = time == "publish_time" or keep_times
    times, publish, cols = _topic_columns(reader, topic, codec, fields_with_time(fields, time), need_publish)
    out = select_time(cols, times, publish, time=time, keep_times=keep_times, topic=topic, codec=codec)
    return lists_of_arrays(out) if arrays == "lists" else out


def fields_with_time(fields: Sequence[str] | None, time: str) -> list[str] | None:
    """``fields`` plus the field ``time`` names (``header.stamp``, ``timestamp``) when it is one."""
    want = list(fields) if fields is not None else None
    if want is not None and time in ("header.stamp", "timestamp") and time not in want:
        want.append(time)
    return want


def select_time(
    cols: dict[str, np.ndarray],
    times: Sequence[int] | np.ndarray,
    publish: Sequence[int] | np.ndarray,
    *,
    time: str,
    keep_times: bool,
    topic: str,
    codec: Any,
) -> dict[str, np.ndarray]:
    """The columns of :func:`topic_columns` from a topic's field columns ``cols`` (read with
    :func:`fields_with_time`), log times and publish times: the chosen time first, the other
    times after it with ``keep_times``, then the fields (the chosen one not repeated)."""
    first: np.ndarray
    if time in ("header.stamp", "timestamp"):
        got = cols.get(time)
        if got is None or got.dtype.kind not in "iu":
            if len(times) or got is not None:
                raise _no_time(topic, codec, time, list(cols))
            got = np.zeros(0, np.int64)
        first = got
    else:
        first = log_times(publish if time == "publish_time" else times)
    out = {time: first}
    if keep_times:
        if time != "log_time":
            out["log_time"] = log_times(times)
        if time != "publish_time":
            out["publish_time"] = log_times(publish)
    for k, v in cols.items():
        if k not in out:
            out[k] = v
    return out


def check_time_field(codec: Any, topic: str, time: str) -> None:
    """For ``header.stamp`` and ``timestamp``: a compiled type's definition has the field
    (a ``std_msgs/Header`` ``header``; an integer ``timestamp``), else a UsageError naming
    the topic, its type and what it has.  Other encodings are checked on their columns."""
    if time not in ("header.stamp", "timestamp") or not is_compiled(codec):
        return
    compiler = codec.compiler("<") if callable(codec.compiler) else codec.compiler
    fields = compiler.msgdef(codec.type_name).fields
    for f in fields:
        t = f.type
        if time == "header.stamp" and f.name == "header" and t.array is None and t.base in _HEADER_TYPES:
            return
        if time == "timestamp" and f.name == "timestamp" and t.array is None and t.base in _INT_BASES:
            return
    raise _no_time(topic, codec, time, [f.name for f in fields])


def _no_time(topic: str, codec: Any, time: str, names: list[str]) -> UsageError:
    what = "a std_msgs/Header field 'header'" if time == "header.stamp" else "an integer field 'timestamp'"
    has = ["log_time", "publish_time"]
    if "header.stamp" in names or "header" in names:
        has.append("header.stamp")
    if "timestamp" in names:
        has.append("timestamp")
    type_name = getattr(codec, "type_name", None) or getattr(codec, "full_name", "?")
    return UsageError(
        f"time={time!r}: topic {topic} (type {type_name}) has no {what}; its times: {', '.join(has)}; "
        f"its fields: {', '.join(names[:40]) or '(none)'}{' ...' if len(names) > 40 else ''}"
    )


def topic_arrow(
    reader: MessageSource,
    topic: str,
    fields: Sequence[str] | None = None,
    *,
    time: str = "log_time",
    keep_times: bool = False,
    datetimes: bool = False,
    arrays: str = "columns",
) -> Any:
    """The columns of ``topic`` (:func:`topic_columns`) as a ``pyarrow.Table``, typed from the
    message definition where it has one: sequences as ``list<...>`` of their element type
    (messages as ``struct``), ``uint8[]`` as ``binary``, strings as ``string``, 2-D columns as
    ``fixed_size_list``.  ``datetimes=True`` adds ``<time>_utc`` (``timestamp[ns, UTC]``)
    after the time column."""
    cols = topic_columns(reader, topic, fields, time=time, keep_times=keep_times, arrays=arrays)
    codec = _codec_of_topic(reader, topic)
    return columns_to_arrow(cols, types=arrow_types(codec), time=time if datetimes else None, topic=topic)


def topic_pandas(
    reader: MessageSource,
    topic: str,
    fields: Sequence[str] | None = None,
    *,
    time: str = "log_time",
    keep_times: bool = False,
    datetimes: bool = False,
    arrays: str = "columns",
) -> Any:
    """The columns of ``topic`` (:func:`topic_columns`) as a ``pandas.DataFrame`` indexed by
    the chosen time (int64 ns; ``datetimes=True``: ``datetime64[ns, UTC]``, the integers
    kept as the column ``<time>_ns``)."""
    cols = topic_columns(reader, topic, fields, time=time, keep_times=keep_times, arrays=arrays)
    return columns_to_pandas(cols, time=time, datetimes=datetimes)


def _codec_of_topic(reader: MessageSource, topic: str) -> Any:
    """The one codec of ``topic``'s channels (an error when there is no such topic or its
    channels have different types)."""
    channels = [c for c in reader.channels().values() if c.topic == topic]  # (a bag: no chunk header read)
    if not channels:
        raise PolybagError(f"{reader.path}: no topic {topic!r}")
    codecs = {id(codec_for(c)) for c in channels}
    if len(codecs) > 1:
        raise UnsupportedError(f"topic {topic} has channels of different types; read them separately")
    return codec_for(channels[0])


def _topic_columns(
    reader: MessageSource, topic: str, codec: Any, fields: Sequence[str] | None, need_publish: bool = False
) -> tuple[np.ndarray | list[int], np.ndarray | list[int], dict[str, np.ndarray]]:
    """``(log_times, publish_times, columns)``; the publish times are the log times unless
    ``need_publish`` (the reader's bulk payloads carry no publish times: the messages are
    iterated then)."""
    # optional reader fast path: (log_times, blob, starts, sizes) as numpy arrays, log-time order
    bulk = reader.topic_payloads(topic) if is_compiled(codec) and not need_publish else None
    if bulk is not None:
        times_a, blob, starts, sizes = bulk
        cols = _walk_chunked(
            codec,
            np.asarray(blob, np.uint8),
            np.asarray(starts, np.int64),
            np.asarray(sizes, np.int64),
            _wanted(fields),
            topic,
        )
        _check_fields(fields, cols, len(times_a))
        return times_a, times_a, cols
    times: list[int] = []
    publish: list[int] = []
    datas: list[Any] = []
    for m in reader.messages(topics=[topic]):
        times.append(m.log_time)
        publish.append(m.publish_time)
        datas.append(m.data)
    cols = payload_columns(codec, datas, fields, topic=topic)
    _check_fields(fields, cols, len(datas))
    return times, publish if need_publish else times, cols


def log_times(times: Sequence[int] | np.ndarray) -> np.ndarray:
    """Log times (ns) as int64, or as uint64 when one is 2**63 or more (MCAP times are u64:
    such a time is kept, not wrapped to a negative number)."""
    if isinstance(times, np.ndarray):
        if times.dtype == np.int64:
            return times
        big = times.dtype == np.uint64 and len(times) and int(times.max()) > _INT64_MAX
        return times.astype(np.uint64 if big else np.int64)
    big = bool(times) and max(times) > _INT64_MAX
    return np.array(times, dtype=np.uint64 if big else np.int64)


def is_compiled(codec: Any) -> bool:
    """Whether ``codec`` decodes with generated code (a ROS 1 or CDR codec), so a topic's
    payloads can be decoded into columns in bulk; its columns are checked against the
    limits first."""
    if hasattr(codec, "typeset") and (hasattr(codec, "compiler") or hasattr(codec, "_compilers")):
        # its columns are bounded before anything is planned (a MsgDefError naming the limit)
        check_columns(codec.compiler("<") if callable(codec.compiler) else codec.compiler, codec.type_name)
        return True
    return False


def payload_columns(
    codec: Any,
    datas: Sequence[bytes | memoryview],
    fields: Sequence[str] | None = None,
    topic: str | None = None,
) -> dict[str, np.ndarray]:
    """Columns of a list of payloads of one type (see :func:`topic_columns`)."""
    with _definition_said(codec, topic):
        return _payload_columns(codec, datas, fields, topic)


def _payload_columns(
    codec: Any,
    datas: Sequence[bytes | memoryview],
    fields: Sequence[str] | None,
    topic: str | None,
) -> dict[str, np.ndarray]:
    want = _wanted(fields)
    if is_compiled(codec):
        n = len(datas)
        sizes = np.fromiter(map(len, datas), dtype=np.int64, count=n)
        fixed = _fixed_from_payloads(codec, datas, sizes, want)
        if fixed is not None:
            return fixed
        starts = np.zeros(n, dtype=np.int64)
        if n:
            np.cumsum(sizes[:-1], out=starts[1:])
        blob = np.frombuffer(b"".join(datas), dtype=np.uint8)
        return _walk_chunked(codec, blob, starts, sizes, want, topic)
    return generic_columns(codec, datas, want, topic)


# tunables, read when the entry points run (tests make them small)
_CHUNK_BYTES = 8 << 20  # walk about this many payload bytes at a time: all columns from cache
_BLOCK_BYTES = 1 << 62  # most bytes of one output block (no limit; tests make it small)
_GATHER_BYTES = 1 << 20  # rows gathered per block when the layout varies (stays in cache)


def _limits() -> Limits:
    return Limits(_CHUNK_BYTES, _BLOCK_BYTES, _GATHER_BYTES)


def _walk_chunked(
    codec: Any, blob: np.ndarray, starts: np.ndarray, sizes: np.ndarray, want: Callable[[str], bool], topic: str | None
) -> dict[str, np.ndarray]:
    """Columns of the payloads at ``starts``/``sizes`` in ``blob``: the fixed layout, else the
    string layout, else the general walk in row blocks that fit in the CPU cache."""
    fixed = _fixed_layout(codec, blob, starts, sizes, want)
    if fixed is None:
        fixed = _string_layout(codec, blob, starts, sizes, want)
    if fixed is None and isinstance(codec, CdrCodec):
        fixed = cdr_columns(codec, blob, starts, sizes, want, _limits())
    if fixed is not None:
        return fixed
    return walk_in_blocks(codec, blob, starts, sizes, want, topic, _CHUNK_BYTES)


def _fixed_layout(codec: Any, blob: np.ndarray, starts: np.ndarray, sizes: np.ndarray, want: Callable[[str], bool]) -> dict[str, np.ndarray] | None:
    """:func:`polybag.codecs.columns_fixed.fixed_layout` with this module's tunables."""
    return fixed_layout(codec, blob, starts, sizes, want, _limits())


def _string_layout(codec: Any, blob: np.ndarray, starts: np.ndarray, sizes: np.ndarray, want: Callable[[str], bool]) -> dict[str, np.ndarray] | None:
    """:func:`polybag.codecs.columns_fixed.string_layout` with this module's tunables."""
    return string_layout(codec, blob, starts, sizes, want, _limits())


def _fixed_from_payloads(
    codec: Any, datas: Sequence[bytes | memoryview], sizes: np.ndarray, want: Callable[[str], bool]
) -> dict[str, np.ndarray] | None:
    """:func:`polybag.codecs.columns_fixed.fixed_from_payloads` with this module's tunables."""
    return fixed_from_payloads(codec, datas, sizes, want, _limits())
