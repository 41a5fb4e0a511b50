"""Columns: a whole topic as one numpy array per leaf field.

For ROS 1 and CDR topics the payloads of the topic are concatenated into one buffer and the
type's fields are walked once for all messages together, with a vector of per-message
positions: fixed-size fields are gathered with numpy (a strided view when every message
has the same layout, a fancy index otherwise), strings and sequences advance the positions
by their lengths read as a vector too.  Only the values of strings and variable-length
sequences are materialised per message (as Python objects in object arrays).

Column names are flattened paths: ``header.stamp`` (times as int64 nanoseconds),
``pose.position.x``, ``covariance[0]`` for fixed arrays; variable-length arrays give one
object column holding an array (or bytes, or a list) per message.  ``log_time`` is always
present (int64 ns; uint64 when a time is 2**63 or more, which MCAP allows).  Other encodings (JSON, protobuf) are decoded per message and flattened the same way.

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
from polybag.codecs.columns_export import columns_to_arrow, columns_to_pandas
from polybag.codecs.columns_fixed import Limits, fixed_from_payloads, fixed_layout, string_layout
from polybag.codecs.columns_layout import check_columns
from polybag.codecs.columns_walk import Walker as Walker  # re-exported: tests walk with it
from polybag.codecs.columns_walk import generic_columns, walk_in_blocks
from polybag.codecs.ros1 import UndefinedRos1Codec
from polybag.errors import DecodeError, PolybagError, UnsupportedError
from polybag.model import Message, Summary

__all__ = ["MessageSource", "columns_to_arrow", "columns_to_pandas", "payload_columns", "topic_columns"]


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


def topic_columns(reader: MessageSource, topic: str, fields: Sequence[str] | None = None) -> dict[str, np.ndarray]:
    """One numpy array per leaf field of ``topic`` (log-time order), plus ``log_time``."""
    codec = _codec_of_topic(reader, topic)
    with _definition_said(codec, topic):
        return _topic_columns(reader, topic, codec, fields)


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


def _topic_columns(reader: MessageSource, topic: str, codec: Any, fields: Sequence[str] | None) -> dict[str, np.ndarray]:
    # optional reader fast path: (log_times, blob, starts, sizes) as numpy arrays, log-time order
    bulk = reader.topic_payloads(topic) if is_compiled(codec) else None
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
        return {"log_time": log_times(times_a), **cols}
    times: list[int] = []
    datas: list[Any] = []
    for m in reader.messages(topics=[topic]):
        times.append(m.log_time)
        datas.append(m.data)
    cols = payload_columns(codec, datas, fields, topic=topic)
    _check_fields(fields, cols, len(datas))
    out = {"log_time": log_times(times)}
    out.update(cols)
    return out


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
