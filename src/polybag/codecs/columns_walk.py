"""Columns, the general walk: any ROS 1 or CDR type, all messages at once.

:class:`Walker` walks the type's fields once for all payloads together with a vector of
per-message positions: fixed-size fields are gathered with numpy (a strided view when every
payload has the same layout, a fancy index otherwise), strings and sequences advance the
positions by their lengths read as a vector too; only the values of strings and
variable-length sequences are materialised per message.  :func:`walk_in_blocks` runs it over
blocks of rows that fit in the CPU cache.  Other encodings (JSON, protobuf) are decoded per
message and flattened (:func:`generic_columns`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from polybag.codecs.columns_layout import FIXED_SPLIT, TIME_TYPES
from polybag.codecs.definition_model import NUMPY_TYPES, PRIMITIVE_FORMATS, FieldType
from polybag.codecs.serde.decoders import decode_wstring
from polybag.errors import DecodeError, UnsupportedError


def walk_in_blocks(
    codec: Any, blob: np.ndarray, starts: np.ndarray, sizes: np.ndarray, want: Callable[[str], bool], topic: str | None, chunk_bytes: int
) -> dict[str, np.ndarray]:
    """Walk the payloads in row blocks of about ``chunk_bytes``, then join the columns.

    Extracting dozens of columns from a large buffer one column at a time reads the whole
    buffer once per column; per block the buffer is read from memory once.
    """
    n = len(starts)
    total = int(sizes.sum()) if n else 0
    if total <= chunk_bytes or n < 2:
        return Walker(codec, blob, starts, sizes, want, topic).run()
    per = max(1, int(n * chunk_bytes // total))
    out: dict[str, np.ndarray] | None = None
    for a in range(0, n, per):
        b = min(n, a + per)
        lo = int(starts[a:b].min())
        hi = int((starts[a:b] + sizes[a:b]).max())
        try:
            w = Walker(codec, blob[lo:hi], starts[a:b] - lo, sizes[a:b], want, topic)
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


class Walker:
    def __init__(self, codec: Any, blob: np.ndarray, starts: np.ndarray, sizes: np.ndarray, want: Callable[[str], bool], topic: str | None) -> None:
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
                raise DecodeError(
                    "payload shorter than the CDR header", topic=topic, type_name=codec.full_name
                )
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
        return _reason(
            DecodeError(
                f"message {i} of the topic: {what}",
                topic=self.topic,
                type_name=getattr(self.codec, "full_name", None),
                field=field,
                offset=int(pos[i] - self.starts[i]),
            ),
            f"message {i} of the topic: {what}",
        )

    def check(self, pos: np.ndarray, nbytes: np.ndarray | int, field: str) -> None:
        bad = pos + nbytes > self.ends
        if bad.any():
            raise self.fail("payload too short", field, bad, pos)

    def align(self, pos: np.ndarray, a: int) -> np.ndarray:
        if not self.cdr or a <= 1:
            return pos
        rel = pos - self.origin
        aligned: np.ndarray = self.origin + ((rel + (a - 1)) & -a)
        return aligned

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
            raise DecodeError(
                f"cannot decode columns: {e}", topic=self.topic, type_name=self.codec.full_name
            ) from None
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
                    if n <= FIXED_SPLIT:
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
                    mv = memoryview(buf)  # type: ignore[arg-type]  # numpy declares the buffer protocol (__buffer__) for Python 3.12+ only
                    for i, (p, c) in enumerate(zip(pos.tolist(), count.tolist())):
                        col[i] = bytes(mv[p : p + c])
                else:
                    dt = np.dtype("?") if base == "bool" else np.dtype(self.endian + NUMPY_TYPES[base])
                    native = dt.newbyteorder("=")
                    for i, (p, c) in enumerate(zip(pos.tolist(), count.tolist())):
                        col[i] = np.frombuffer(buf, dt, c, p).astype(native)
                self.store(name, col, fresh=True)
            after: np.ndarray = pos + count * size
            return after
        return self.objects(base, name, pos, count)

    def objects(self, base: str, name: str, pos: np.ndarray, count: np.ndarray) -> np.ndarray:
        """Sequences of strings/messages: decoded per message with the compiled decoders."""
        mv = memoryview(self.blob)  # type: ignore[arg-type]  # numpy declares the buffer protocol (__buffer__) for Python 3.12+ only
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
                        raise self.fail(
                            "string length exceeds the payload", name, np.arange(self.n) == i, pos
                        )
                    if base == "wstring":  # UTF-16 units in 4-byte wchar_t, as the decoders read them
                        items.append(decode_wstring(body[p : p + 4 * k], self.endian == ">"))
                        p += 4 * k
                    else:
                        stop = p + k - 1 if (self.cdr and k) else p + k
                        items.append(str(body[p:stop], "utf-8", "replace"))
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
        if base in TIME_TYPES:
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
                mv = memoryview(self.blob)  # type: ignore[arg-type]  # numpy declares the buffer protocol (__buffer__) for Python 3.12+ only
                cut = 1 if (self.cdr and base == "string") else 0
                if base == "wstring":  # UTF-16 units in 4-byte wchar_t, as the decoders read them
                    for i, (p, k) in enumerate(zip(pos.tolist(), n.tolist())):
                        col[i] = decode_wstring(mv[p : p + 4 * k], self.endian == ">")
                elif self.n and bool((n == n[0]).all()) and int(n[0]) > cut:
                    # every string has the same length: decode each distinct value once
                    k = int(n[0]) - cut
                    raw = np.ascontiguousarray(self.gather(pos, k, name))
                    if (raw == raw[0]).all():  # the usual case: one frame id for the whole topic
                        col[:] = raw[0].tobytes().decode("utf-8", "replace")
                    else:
                        uniq, inverse = np.unique(raw.view(f"V{k}")[:, 0], return_inverse=True)
                        texts = np.empty(len(uniq), dtype=object)
                        texts[:] = [u.tobytes().decode("utf-8", "replace") for u in uniq]
                        col = texts[inverse.reshape(-1)]
                else:
                    cache: dict[bytes, str] = {}
                    for i, (p, k) in enumerate(zip(pos.tolist(), n.tolist())):
                        b = bytes(mv[p : p + max(k - cut, 0)])
                        s = cache.get(b)
                        if s is None:
                            s = cache[b] = b.decode("utf-8", "replace")
                        col[i] = s
                self.store(name, col, fresh=True)
            after: np.ndarray = pos + n * width
            return after
        if self.empty(base):
            return pos
        return self.message(base, name + ".", pos)

    def empty(self, base: str) -> bool:
        """A ROS 1 message type without bytes (empty, or only empty messages): no columns."""
        if self.cdr or base in TIME_TYPES or base in ("string", "wstring"):
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


def generic_columns(codec: Any, datas: Sequence[Any], want: Callable[[str], bool], topic: str | None) -> dict[str, np.ndarray]:
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
