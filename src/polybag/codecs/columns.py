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
format does not offer it (then the messages are iterated).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol

import numpy as np

from polybag.codecs import codec_for
from polybag.codecs.ros1.msgdef import NUMPY_TYPES, PRIMITIVE_FORMATS, FieldType
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

    def messages(self, topics: Sequence[str] | None = None) -> Iterator[Message]: ...

    def topic_payloads(self, topic: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """The topic's payloads in bulk, or None: not offered (see the module's doc)."""


_FIXED_SPLIT = 64  # fixed arrays up to this length become one column per element
_TIME_TYPES = {"time", "duration", "builtin_interfaces/Time", "builtin_interfaces/Duration"}


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


def topic_columns(reader: MessageSource, topic: str, fields: Sequence[str] | None = None) -> dict[str, np.ndarray]:
    """One numpy array per leaf field of ``topic`` (log-time order), plus ``log_time``."""
    channels = [c for c in reader.summary.channels.values() if c.topic == topic]
    if not channels:
        raise PolybagError(f"{reader.path}: no topic {topic!r}")
    codecs = {id(codec_for(c)) for c in channels}
    if len(codecs) > 1:
        raise UnsupportedError(f"topic {topic} has channels of different types; read them separately")
    codec = codec_for(channels[0])
    # optional reader fast path: (log_times, blob, starts, sizes) as numpy arrays, log-time order
    bulk = reader.topic_payloads(topic) if _is_compiled(codec) else None
    if bulk is not None:
        times_a, blob, starts, sizes = bulk
        cols = _walk_chunked(
            codec, np.asarray(blob, np.uint8), np.asarray(starts, np.int64), np.asarray(sizes, np.int64), _wanted(fields), topic
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


def _is_compiled(codec: Any) -> bool:
    return hasattr(codec, "typeset") and (hasattr(codec, "compiler") or hasattr(codec, "_compilers"))


def payload_columns(
    codec: Any, datas: Sequence[bytes | memoryview], fields: Sequence[str] | None = None, topic: str | None = None
) -> dict[str, np.ndarray]:
    """Columns of a list of payloads of one type (see :func:`topic_columns`)."""
    want = _wanted(fields)
    if _is_compiled(codec):
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
    return _generic(codec, datas, want, topic)


_CHUNK_BYTES = 8 << 20  # walk about this many payload bytes at a time: all columns from cache


def _walk_chunked(
    codec: Any, blob: np.ndarray, starts: np.ndarray, sizes: np.ndarray, want: Callable[[str], bool], topic: str | None
) -> dict[str, np.ndarray]:
    """Walk the payloads in row blocks that fit in the CPU cache, then join the columns.

    Extracting dozens of columns from a large buffer one column at a time reads the whole
    buffer once per column; per block the buffer is read from memory once.
    """
    n = len(starts)
    total = int(sizes.sum()) if n else 0
    fixed = _fixed_layout(codec, blob, starts, sizes, want)
    if fixed is not None:
        return fixed
    if total <= _CHUNK_BYTES or n < 2:
        return _Walker(codec, blob, starts, sizes, want, topic).run()
    per = max(1, int(n * _CHUNK_BYTES // total))
    out: dict[str, np.ndarray] | None = None
    for a in range(0, n, per):
        b = min(n, a + per)
        lo = int(starts[a:b].min())
        hi = int((starts[a:b] + sizes[a:b]).max())
        try:
            w = _Walker(codec, blob[lo:hi], starts[a:b] - lo, sizes[a:b], want, topic)
            if out is None:
                first = w.run()
                out = {k: np.empty((n, *v.shape[1:]), dtype=v.dtype) for k, v in first.items()}
                for k, v in first.items():
                    out[k][a:b] = v
            else:
                w.sink, w.row0 = out, a
                w.run()
        except DecodeError as e:
            raise DecodeError(
                f"{getattr(e, 'reason', str(e))} (message {a} onwards of the topic)",
                topic=topic,
                type_name=getattr(codec, "full_name", None),
                field=e.field,
                offset=e.offset,
            ) from None
    assert out is not None
    return out


# --- fixed layout: every payload the same bytes long with its fields at the same offsets -----
_Leaf = tuple[str, str, int, str, int]  # (kind, column, offset, primitive or type, count / length)


def _fixed_layout(
    codec: Any, blob: np.ndarray, starts: np.ndarray, sizes: np.ndarray, want: Callable[[str], bool]
) -> dict[str, np.ndarray] | None:
    """Columns of ROS 1 payloads that all share one layout, as typed strided views; or None.

    The layout comes from the definition and the first payload's string lengths; it holds for
    every payload when they are equal-sized, back to back in ``blob``, and every string length
    equals the first payload's (checked as one vector per string field).  The rows are then a
    numpy structured array (one record per message); columns are copied out block by block so
    the rows are read from memory once.  Anything else (sequences, mixed lengths, damage) is
    left to the general walk, which also reports errors.
    """
    n = len(starts)
    if n == 0 or not _fixed_codec(codec):
        return None
    size = int(sizes[0])
    if size == 0 or not bool((sizes == size).all()) or int(starts[0]) != 0 or len(blob) < n * size:
        return None
    if n > 1 and not np.array_equal(starts, np.arange(0, n * size, size, dtype=np.int64)):
        return None
    mat = blob[: n * size].reshape(n, size)
    per = max(1, _CHUNK_BYTES // size)
    return _fixed_blocks(codec, n, size, mat[0].tobytes(), ((a, mat[a : a + per]) for a in range(0, n, per)), want)


def _fixed_codec(codec: Any) -> bool:
    return not hasattr(codec, "_compilers") and hasattr(codec, "compiler")


def _fixed_from_payloads(
    codec: Any, datas: Sequence[bytes | memoryview], sizes: np.ndarray, want: Callable[[str], bool]
) -> dict[str, np.ndarray] | None:
    """:func:`_fixed_layout` over a list of equal-sized payloads, joined a block at a time.

    Joining the whole list first would fault in a fresh buffer the size of all payloads on
    every call; a block (a few MB) is joined, its columns copied out, and freed, so the
    allocator hands the same memory to the next block.
    """
    n = len(datas)
    if n == 0 or not _fixed_codec(codec):
        return None
    size = int(sizes[0])
    if size == 0 or not bool((sizes == size).all()):
        return None
    per = max(1, _CHUNK_BYTES // size)

    def blocks() -> Iterator[tuple[int, np.ndarray]]:
        for a in range(0, n, per):
            yield a, np.frombuffer(b"".join(datas[a : a + per]), np.uint8).reshape(-1, size)

    return _fixed_blocks(codec, n, size, bytes(datas[0]), blocks(), want)


def _fixed_blocks(
    codec: Any, n: int, size: int, first: bytes, blocks: Iterable[tuple[int, np.ndarray]], want: Callable[[str], bool]
) -> dict[str, np.ndarray] | None:
    """Fill the columns of ``n`` rows of ``size`` bytes from ``(first row, rows)`` blocks; or None.

    The outputs are allocated once (``np.empty``, filled exactly once); each block's typed
    strided views are copied into them while the block is in cache.  Time columns are computed
    in place, strings checked and decoded per block (their length must equal the first row's).
    """
    leaves: list[_Leaf] = []
    try:
        end = _plan(codec.compiler, codec.type_name, "", 0, first, leaves, 0)
    except _NotFixed:
        return None
    if end != size:
        return None
    out: dict[str, np.ndarray] = {}
    # (kind, output, dtype of the view, offset, per-row shape, per-row strides, prim, count)
    jobs: list[tuple[str, np.ndarray, np.dtype, int, tuple[int, ...], tuple[int, ...], str, int]] = []
    strings: list[tuple[int, int]] = []  # (offset, length) of every string: its length is checked
    for kind, name, off, prim, count in leaves:
        if kind == "string":
            strings.append((off, count))
        if kind in ("prim", "array"):
            dt = np.dtype("?") if prim == "bool" else np.dtype("<" + NUMPY_TYPES[prim])
            if not want(name):
                continue
            if kind == "prim":
                out[name] = col = np.empty(n, dt.newbyteorder("="))
                jobs.append(("copy", col, dt, off, (), (), prim, 1))
            elif count <= _FIXED_SPLIT:
                for i in range(count):
                    out[f"{name}[{i}]"] = col = np.empty(n, dt.newbyteorder("="))
                    jobs.append(("copy", col, dt, off + i * dt.itemsize, (), (), prim, 1))
            else:
                out[name] = col = np.empty((n, count), dt.newbyteorder("="))
                jobs.append(("copy", col, dt, off, (count,), (dt.itemsize,), prim, count))
        elif not want(name):
            continue
        elif kind == "time":
            out[name] = col = np.empty(n, np.int64)
            jobs.append(("time", col, np.dtype("<u4"), off, (), (), prim, 1))
        else:  # a string of ``count`` bytes after its length at ``off``, in every message
            out[name] = col = np.empty(n, dtype=object)
            jobs.append(("string", col, np.dtype(f"V{max(count, 1)}"), off, (), (), prim, count))
    for a, rows in blocks:
        m = len(rows)
        b = a + m
        for off, count in strings:
            if not bool((np.ndarray((m,), "<u4", rows, off, (size,)) == count).all()):
                return None  # strings of other lengths: the layout differs between messages
        for kind, col, dt, off, shape, strides, prim, count in jobs:
            if kind == "copy":
                col[a:b] = np.ndarray((m, *shape), dt, rows, off, (size, *strides))
            elif kind == "time":
                sec_dt = "<u4" if prim == "time" else "<i4"
                nsec_dt = "<i4" if prim == "duration" else "<u4"
                part = col[a:b]
                np.multiply(np.ndarray((m,), sec_dt, rows, off, (size,)), 1_000_000_000, out=part, dtype=np.int64)
                part += np.ndarray((m,), nsec_dt, rows, off + 4, (size,))
            elif count == 0:
                col[a:b] = ""
            else:
                raw = np.ndarray((m,), dt, rows, off + 4, (size,))
                if bool((raw == raw[0]).all()):
                    col[a:b] = raw[0].tobytes().decode("utf-8", "surrogateescape")
                else:
                    uniq, inverse = np.unique(raw, return_inverse=True)
                    texts = np.empty(len(uniq), dtype=object)
                    texts[:] = [u.tobytes().decode("utf-8", "surrogateescape") for u in uniq]
                    col[a:b] = texts[inverse.reshape(-1)]
    return out


class _NotFixed(Exception):
    """The type has variable-length parts the first payload cannot fix for all."""


def _plan(compiler: Any, type_name: str, prefix: str, off: int, first: bytes, leaves: list[_Leaf], depth: int) -> int:
    """Leaves of ``type_name`` at ``off`` (string lengths from the first payload); the end offset."""
    if depth > 64:
        raise _NotFixed
    for f in compiler.msgdef(type_name).fields:
        t = f.type
        name = prefix + f.name
        base = t.base
        if t.array is None:
            off = _plan_scalar(compiler, base, name, off, first, leaves, depth)
        elif t.array < 0:
            raise _NotFixed
        elif base in PRIMITIVE_FORMATS:
            if t.array > 0:
                leaves.append(("array", name, off, base, t.array))
                off += PRIMITIVE_FORMATS[base][1] * t.array
        elif base in _TIME_TYPES or base in ("string", "wstring") or compiler.fixed_size(base) != 0:
            for i in range(t.array):
                off = _plan_scalar(compiler, base, f"{name}[{i}]", off, first, leaves, depth)
        if off > len(first):
            raise _NotFixed
    return off


def _plan_scalar(compiler: Any, base: str, name: str, off: int, first: bytes, leaves: list[_Leaf], depth: int) -> int:
    if base in PRIMITIVE_FORMATS:
        leaves.append(("prim", name, off, base, 1))
        return off + PRIMITIVE_FORMATS[base][1]
    if base in _TIME_TYPES:
        leaves.append(("time", name, off, base, 0))
        return off + 8
    if base == "string":
        if off + 4 > len(first):
            raise _NotFixed
        k = int.from_bytes(first[off : off + 4], "little")
        leaves.append(("string", name, off, base, k))
        return off + 4 + k
    if base == "wstring":
        raise _NotFixed
    if compiler.fixed_size(base) == 0:
        return off  # an empty message (or only empty ones): no bytes, no columns
    return _plan(compiler, base, name + ".", off, first, leaves, depth + 1)


class _Walker:
    def __init__(
        self,
        codec: Any,
        blob: np.ndarray,
        starts: np.ndarray,
        sizes: np.ndarray,
        want: Callable[[str], bool],
        topic: str | None,
    ) -> None:
        self.codec = codec
        self.want = want
        self.topic = topic
        self.n = n = len(starts)
        self.cdr = hasattr(codec, "_compilers")
        self.blob = blob
        self.starts = starts
        self.ends = self.starts + sizes
        if n and (int(starts.min()) < 0 or int(self.ends.max()) > len(blob)):
            raise DecodeError("payload offsets outside the buffer", topic=topic, type_name=codec.full_name)
        self.equal = bool(n) and bool((sizes == sizes[0]).all())
        # one (n, L) view when the payloads are equal-sized and back to back
        contiguous = self.equal and n and int(starts[0]) == 0 and bool((np.diff(starts) == sizes[0]).all())
        self.mat = blob[: n * int(sizes[0])].reshape(n, int(sizes[0])) if contiguous else None
        self.endian = "<"
        if self.cdr:
            if n and int(sizes.min()) < 4:
                raise DecodeError("payload shorter than the CDR header", topic=topic, type_name=codec.full_name)
            kinds = self.blob[self.starts + 1] if n else np.zeros(0, np.uint8)
            if n and not (kinds == kinds[0]).all():
                raise UnsupportedError(f"topic {topic}: mixed CDR byte orders")
            if n and int(kinds[0]) not in (0, 1):
                raise UnsupportedError(f"topic {topic}: unsupported CDR encapsulation")
            self.endian = "<" if (not n or int(kinds[0]) == 1) else ">"
            self.origin = self.starts + 4
            self.compiler = codec.compiler(self.endian)
        else:
            self.origin = self.starts
            self.compiler = codec.compiler
        self.cols: dict[str, Any] = {}
        self.sink: dict[str, np.ndarray] | None = None  # preallocated outputs (chunked walk)
        self.row0 = 0

    def store(self, name: str, values: np.ndarray, fresh: bool = False) -> None:
        """Keep a column: copied out of the payload buffer (or written into the sink)."""
        if self.sink is not None:
            self.sink[name][self.row0 : self.row0 + self.n] = values
        elif fresh or values.dtype == object:
            self.cols[name] = values
        else:
            dt = values.dtype if values.dtype.isnative else values.dtype.newbyteorder("=")
            self.cols[name] = np.array(values, dtype=dt)

    # --- low level -------------------------------------------------------------------------
    def fail(self, what: str, field: str, idx: np.ndarray, pos: np.ndarray) -> DecodeError:
        i = int(np.flatnonzero(idx)[0])
        return _reason(DecodeError(
            f"message {i} of the topic: {what}",
            topic=self.topic,
            type_name=getattr(self.codec, "full_name", None),
            field=field,
            offset=int(pos[i] - self.starts[i]),
        ), f"message {i} of the topic: {what}")

    def check(self, pos: np.ndarray, nbytes: np.ndarray | int, field: str) -> None:
        bad = pos + nbytes > self.ends
        if bad.any():
            raise self.fail("payload too short", field, bad, pos)

    def align(self, pos: np.ndarray, a: int) -> np.ndarray:
        if not self.cdr or a <= 1:
            return pos
        rel = pos - self.origin
        return self.origin + ((rel + (a - 1)) & -a)

    def gather(self, pos: np.ndarray, nbytes: int, field: str) -> np.ndarray:
        """(n, nbytes) uint8 block at pos for every message."""
        self.check(pos, nbytes, field)
        if self.n == 0:
            return np.zeros((0, nbytes), np.uint8)
        if self.mat is not None:
            rel = pos - self.starts
            r0 = int(rel[0])
            if (rel == r0).all():
                return self.mat[:, r0 : r0 + nbytes]
        idx = pos[:, None] + np.arange(nbytes, dtype=np.int64)
        return self.blob[idx]

    def read(self, pos: np.ndarray, prim: str, count: int, field: str) -> np.ndarray:
        """(n, count) values of a primitive at pos."""
        size = PRIMITIVE_FORMATS[prim][1]
        dt = np.dtype("?") if prim == "bool" else np.dtype(self.endian + NUMPY_TYPES[prim])
        if self.mat is not None and self.n:
            rel = pos - self.starts
            r0 = int(rel[0])
            if (rel == r0).all():
                self.check(pos, size * count, field)
                # a typed strided view over the payloads: one copy, no uint8 intermediate
                view = np.ndarray(
                    (self.n, count), dtype=dt, buffer=self.mat, offset=r0, strides=(self.mat.shape[1], size)
                )
                return view  # a view into the payloads: store() copies it
        block = np.ascontiguousarray(self.gather(pos, size * count, field))
        vals = block.view(dt).reshape(self.n, count)
        if dt.byteorder not in ("=", "|") and not dt.isnative:
            vals = vals.astype(dt.newbyteorder("="))
        return vals

    def u32(self, pos: np.ndarray, field: str) -> tuple[np.ndarray, np.ndarray]:
        pos = self.align(pos, 4)
        return self.read(pos, "uint32", 1, field)[:, 0].astype(np.int64), pos + 4

    # --- walk ----------------------------------------------------------------------------
    def run(self) -> dict[str, np.ndarray]:
        pos = self.origin.copy()
        try:
            pos = self.message(self.codec.type_name, "", pos)
        except DecodeError:
            raise
        except (ValueError, IndexError, TypeError, OverflowError) as e:
            raise DecodeError(f"cannot decode columns: {e}", topic=self.topic, type_name=self.codec.full_name) from None
        left = self.ends - pos
        bad = (left >= 4) if self.cdr else (left != 0)
        if self.n and bad.any():
            raise self.fail("bytes left over after the message", "", bad, pos)
        return self.cols

    def message(self, name: str, prefix: str, pos: np.ndarray) -> np.ndarray:
        for f in self.compiler.msgdef(name).fields:
            pos = self.field(f.type, prefix + f.name, pos)
        return pos

    def field(self, t: FieldType, name: str, pos: np.ndarray) -> np.ndarray:
        base = t.base
        if t.array is None:
            return self.scalar(base, name, pos)
        if t.array >= 0:
            n = t.array
            if base in PRIMITIVE_FORMATS:
                size = PRIMITIVE_FORMATS[base][1]
                if n == 0:
                    return pos
                pos = self.align(pos, size)
                if self.want(name):
                    vals = self.read(pos, base, n, name)
                    if n <= _FIXED_SPLIT:
                        for i in range(n):
                            self.store(f"{name}[{i}]", vals[:, i])
                    else:
                        self.store(name, vals)
                else:
                    self.check(pos, size * n, name)
                return pos + size * n
            if self.empty(base):
                return pos
            for i in range(n):
                pos = self.scalar(base, f"{name}[{i}]", pos)
            return pos
        # variable-length sequence: one object per message
        count, pos = self.u32(pos, name + " (length)")
        if base in PRIMITIVE_FORMATS:
            size = PRIMITIVE_FORMATS[base][1]
            if self.cdr and size > 4:
                pos = np.where(count > 0, self.align(pos, size), pos)
            self.check(pos, count * size, name)
            if self.want(name):
                col = np.empty(self.n, dtype=object)
                buf = self.blob
                if base == "uint8":
                    mv = memoryview(buf)
                    for i, (p, c) in enumerate(zip(pos.tolist(), count.tolist())):
                        col[i] = bytes(mv[p : p + c])
                else:
                    dt = np.dtype("?") if base == "bool" else np.dtype(self.endian + NUMPY_TYPES[base])
                    native = dt.newbyteorder("=")
                    for i, (p, c) in enumerate(zip(pos.tolist(), count.tolist())):
                        col[i] = np.frombuffer(buf, dt, c, p).astype(native)
                self.store(name, col, fresh=True)
            return pos + count * size
        return self.objects(base, name, pos, count)

    def objects(self, base: str, name: str, pos: np.ndarray, count: np.ndarray) -> np.ndarray:
        """Sequences of strings/messages: decoded per message with the compiled decoders."""
        mv = memoryview(self.blob)
        col = np.empty(self.n, dtype=object)
        newpos = pos.copy()
        if base in ("string", "wstring"):
            elem = None
            least = 4
        else:
            elem = self.compiler.decoder(base, "dictnp")
            least = self.compiler.min_size(base)
        for i in range(self.n):
            o, e = int(self.origin[i]), int(self.ends[i])
            body = mv[o:e]
            p = int(pos[i]) - o
            c = int(count[i])
            if c * least > e - o - p or (not least and c > self.compiler.zero_limit(base)):
                raise self.fail("sequence length exceeds the payload", name, np.arange(self.n) == i, pos)
            items = []
            for _ in range(c):
                if elem is None:
                    if self.cdr:
                        p = (p + 3) & -4
                    if p + 4 > e - o:
                        raise self.fail("payload too short", name, np.arange(self.n) == i, pos)
                    k = int.from_bytes(body[p : p + 4], "little" if self.endian == "<" else "big")
                    p += 4
                    if k > e - o - p:
                        raise self.fail("string length exceeds the payload", name, np.arange(self.n) == i, pos)
                    if base == "wstring":
                        enc = "utf-32-le" if self.endian == "<" else "utf-32-be"
                        items.append(str(body[p : p + 4 * k], enc, "surrogatepass"))
                        p += 4 * k
                    else:
                        stop = p + k - 1 if (self.cdr and k) else p + k
                        items.append(str(body[p:stop], "utf-8", "surrogateescape"))
                        p += k
                else:
                    v, p = elem(body, p, e - o)
                    items.append(v)
            col[i] = items
            newpos[i] = o + p
        if self.want(name):
            self.store(name, col, fresh=True)
        return newpos

    def scalar(self, base: str, name: str, pos: np.ndarray) -> np.ndarray:
        if base in PRIMITIVE_FORMATS:
            size = PRIMITIVE_FORMATS[base][1]
            pos = self.align(pos, size)
            if self.want(name):
                self.store(name, self.read(pos, base, 1, name)[:, 0])
            else:
                self.check(pos, size, name)
            return pos + size
        if base in _TIME_TYPES:
            pos = self.align(pos, 4)
            if self.want(name):
                signed = base != "time"
                sec = self.read(pos, "int32" if signed else "uint32", 1, name)[:, 0].astype(np.int64)
                nsec = self.read(pos + 4, "int32" if base == "duration" else "uint32", 1, name)[:, 0]
                self.store(name, sec * 1_000_000_000 + nsec.astype(np.int64), fresh=True)
            else:
                self.check(pos, 8, name)
            return pos + 8
        if base in ("string", "wstring"):
            n, pos = self.u32(pos, name + " (length)")
            width = 4 if base == "wstring" else 1
            self.check(pos, n * width, name)
            if self.want(name):
                col = np.empty(self.n, dtype=object)
                mv = memoryview(self.blob)
                cut = 1 if (self.cdr and base == "string") else 0
                if base == "wstring":
                    enc = "utf-32-le" if self.endian == "<" else "utf-32-be"
                    for i, (p, k) in enumerate(zip(pos.tolist(), n.tolist())):
                        col[i] = str(mv[p : p + 4 * k], enc, "surrogatepass")
                elif self.n and bool((n == n[0]).all()) and int(n[0]) > cut:
                    # every string has the same length: decode each distinct value once
                    k = int(n[0]) - cut
                    raw = np.ascontiguousarray(self.gather(pos, k, name))
                    if (raw == raw[0]).all():  # the usual case: one frame id for the whole topic
                        col[:] = raw[0].tobytes().decode("utf-8", "surrogateescape")
                    else:
                        uniq, inverse = np.unique(raw.view(f"V{k}")[:, 0], return_inverse=True)
                        texts = np.empty(len(uniq), dtype=object)
                        texts[:] = [u.tobytes().decode("utf-8", "surrogateescape") for u in uniq]
                        col = texts[inverse.reshape(-1)]
                else:
                    cache: dict[bytes, str] = {}
                    for i, (p, k) in enumerate(zip(pos.tolist(), n.tolist())):
                        b = bytes(mv[p : p + max(k - cut, 0)])
                        s = cache.get(b)
                        if s is None:
                            s = cache[b] = b.decode("utf-8", "surrogateescape")
                        col[i] = s
                self.store(name, col, fresh=True)
            return pos + n * width
        if self.empty(base):
            return pos
        return self.message(base, name + ".", pos)

    def empty(self, base: str) -> bool:
        """A ROS 1 message type without bytes (empty, or only empty messages): no columns."""
        if self.cdr or base in _TIME_TYPES or base in ("string", "wstring"):
            return False
        return bool(self.compiler.fixed_size(base) == 0)


def _reason(e: DecodeError, reason: str) -> DecodeError:
    e.reason = reason  # type: ignore[attr-defined]
    return e


# --- other encodings: per message, flattened ---------------------------------------------------
def _flatten(v: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(v, dict):
        for k, x in v.items():
            _flatten(x, f"{prefix}.{k}" if prefix else str(k), out)
    else:
        out[prefix or "value"] = v


def _generic(codec: Any, datas: Sequence[Any], want: Callable[[str], bool], topic: str | None) -> dict[str, np.ndarray]:
    rows = []
    for d in datas:
        flat: dict[str, Any] = {}
        _flatten(codec.to_dict(d, topic=topic), "", flat)
        rows.append(flat)
    names: dict[str, None] = {}
    for r in rows:
        for k in r:
            names.setdefault(k, None)
    out: dict[str, np.ndarray] = {}
    for k in names:
        if not want(k):
            continue
        vals = [r.get(k) for r in rows]
        if vals and all(isinstance(x, (bool, int, float)) and x is not None for x in vals):
            try:
                out[k] = np.array(vals)
                continue
            except OverflowError:
                pass
        col = np.empty(len(vals), dtype=object)
        col[:] = vals
        out[k] = col
    return out


# --- tables ----------------------------------------------------------------------------
def _sanitize(name: str) -> str:
    return re.sub(r"\s+", "_", name)


def columns_to_arrow(cols: dict[str, np.ndarray]) -> Any:
    """A ``pyarrow.Table`` (one column per entry; object columns become list/string columns)."""
    try:
        import pyarrow as pa
    except ImportError:  # pragma: no cover - optional dependency
        raise UnsupportedError("to_arrow needs pyarrow: pip install 'polybag[arrow]'") from None
    arrays = {}
    for name, col in cols.items():
        if col.dtype == object:
            vals = [x.tolist() if isinstance(x, np.ndarray) else x for x in col]
            arrays[_sanitize(name)] = pa.array(vals)
        elif col.ndim > 1:
            arrays[_sanitize(name)] = pa.array(list(col))
        else:
            arrays[_sanitize(name)] = pa.array(col)
    return pa.table(arrays)


def columns_to_pandas(cols: dict[str, np.ndarray]) -> Any:
    """A ``pandas.DataFrame`` indexed by ``log_time`` (int64 ns)."""
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - optional dependency
        raise UnsupportedError("to_pandas needs pandas: pip install 'polybag[pandas]'") from None
    data = {k: (list(v) if v.ndim > 1 else v) for k, v in cols.items() if k != "log_time"}
    index = pd.Index(cols["log_time"], name="log_time") if "log_time" in cols else None
    return pd.DataFrame(data, index=index)
