"""Columns of CDR topics, fixed-layout path: types fixed-size but for their strings.

A ROS 2 type whose only variable-size parts are strings (``sensor_msgs/msg/Imu``: the
header's ``frame_id``) is planned once (:class:`CdrLayout`) as *segments*: runs of fields
whose offsets from the segment's start are the same in every payload.  CDR aligns each
primitive to its size, counted from the byte after the 4-byte encapsulation header, so
where a field lands depends on where the previous string ended; a segment therefore ends
after a string's length (its bytes follow) and also before a field that needs a larger
alignment than the segment's first field (the padding before it depends on where the
segment starts).  Each segment starts at its first field's alignment.

For the payloads of a topic the segments' starts are computed as vectors (one numpy
operation per segment for all messages: align, add the width, add the string length read
as a vector); each segment's bytes of every row are then gathered into one ``(rows,
width)`` array per block of rows and the fields copied out as typed strided views of it
(the ROS 1 fixed path's :class:`~polybag.codecs.columns_layout.Columns`).  Strings are
decoded per distinct length, each distinct value once.

Anything else returns None and is left to the general walk
(:mod:`polybag.codecs.columns_walk`), which also reports damaged payloads: big-endian
payloads, sequences, wstrings, empty nested types, a payload that is not exactly its
fields (too short, or 4 bytes or more left over).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from polybag.codecs.columns_fixed import (
    LITTLE_ENDIAN,
    Limits,
    back_to_back,
    decode_strings,
    numpy_owns,
    rows_at,
)
from polybag.codecs.columns_layout import TIME_TYPES, Columns, Leaf
from polybag.codecs.definition_model import PRIMITIVE_FORMATS

_MAX_DEPTH = 64


class _NotFixed(Exception):
    """The type has variable-size parts other than strings (or nests too deep)."""


class CdrLayout:
    """The leaves of a CDR type (fixed-size but for its strings) and its segments.

    ``leaves`` in definition order, as the ROS 1 layout's (``(kind, column, segment, offset
    in it, primitive or type, count)``; a string's offset is that of its u32 length, the
    last 4 bytes of its segment).  ``widths[j]``: segment j's bytes; ``aligns[j]``: the
    alignment of its start (relative to the byte after the encapsulation header);
    ``strings[j]``: whether a string's bytes follow it.
    """

    def __init__(self, compiler: Any, type_name: str) -> None:
        self.compiler = compiler
        self.leaves: list[Leaf] = []
        self.widths: list[int] = []
        self.aligns: list[int] = []
        self.strings: list[bool] = []
        self._off = 0
        self._align = 1
        self._open = False
        self.message(type_name, "", 0)
        self._close(False)

    # --- planning ------------------------------------------------------------------------
    def _close(self, string: bool) -> None:
        self.widths.append(self._off)
        self.aligns.append(self._align)
        self.strings.append(string)
        self._off, self._align, self._open = 0, 1, False

    def _place(self, a: int) -> tuple[int, int]:
        """Where a field aligned to ``a`` goes: ``(segment, offset)``; a new segment when the
        padding before it would depend on where the current one starts."""
        if not self._open:
            self._align, self._open = a, True
        elif a > self._align:
            self._close(False)
            self._align, self._open = a, True
        else:
            self._off = (self._off + a - 1) & -a
        return len(self.widths), self._off

    def message(self, type_name: str, prefix: str, depth: int) -> None:
        if depth > _MAX_DEPTH:
            raise _NotFixed
        fields = self.compiler.msgdef(type_name).fields
        if not fields:
            raise _NotFixed  # an empty struct: left to the walk
        for f in fields:
            t = f.type
            name = prefix + f.name
            if t.array is None:
                self.scalar(t.base, name, depth)
            elif t.array < 0:
                raise _NotFixed  # a sequence
            elif t.base in PRIMITIVE_FORMATS:
                if t.array > 0:
                    size = PRIMITIVE_FORMATS[t.base][1]
                    seg, off = self._place(size)
                    self.leaves.append(("array", name, seg, off, t.base, t.array))
                    self._off = off + size * t.array
            else:
                for i in range(t.array):
                    self.scalar(t.base, f"{name}[{i}]", depth)

    def scalar(self, base: str, name: str, depth: int) -> None:
        if base in PRIMITIVE_FORMATS:
            size = PRIMITIVE_FORMATS[base][1]
            seg, off = self._place(size)
            self.leaves.append(("prim", name, seg, off, base, 1))
            self._off = off + size
        elif base in TIME_TYPES:
            seg, off = self._place(4)
            self.leaves.append(("time", name, seg, off, base, 0))
            self._off = off + 8
        elif base == "string":
            seg, off = self._place(4)
            self.leaves.append(("string", name, seg, off, base, 0))
            self._off = off + 4
            self._close(True)
        elif base == "wstring":
            raise _NotFixed
        else:
            self.message(base, name + ".", depth + 1)


_LAYOUTS: weakref.WeakKeyDictionary[Any, CdrLayout | None] = weakref.WeakKeyDictionary()


def cdr_layout(codec: Any) -> CdrLayout | None:
    """The layout of a CDR codec's type (planned once per codec), or None when it has
    variable-size parts other than strings."""
    if codec in _LAYOUTS:
        return _LAYOUTS[codec]
    try:
        lay: CdrLayout | None = CdrLayout(codec.compiler("<"), codec.type_name)
    except _NotFixed:
        lay = None
    _LAYOUTS[codec] = lay
    return lay


def _u32_at(blob: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """The little-endian u32 at every position (the caller checked the bounds), as int64."""
    return rows_at(blob, pos, 4).view("<u4")[:, 0].astype(np.int64)


def _positions(
    lay: CdrLayout, blob: np.ndarray, starts: np.ndarray, ends: np.ndarray
) -> tuple[list[np.ndarray], list[tuple[np.ndarray, np.ndarray]]] | None:
    """Every segment's start in every payload and ``(position, length)`` of every string's
    text (its NUL cut); or None when a payload is not exactly its fields."""
    origin = starts + 4
    pos = origin
    at: list[np.ndarray] = []
    texts: list[tuple[np.ndarray, np.ndarray]] = []
    for width, a, string in zip(lay.widths, lay.aligns, lay.strings, strict=True):
        if a > 1:
            pos = origin + (((pos - origin) + (a - 1)) & -a)
        at.append(pos)
        pos = pos + width
        if bool((pos > ends).any()):
            return None
        if string:
            k = _u32_at(blob, pos - 4)
            if bool((k > ends - pos).any()):
                return None
            texts.append((pos, np.maximum(k - 1, 0)))
            pos = pos + k
    left = ends - pos
    if bool(((left < 0) | (left >= 4)).any()):
        return None
    return at, texts


def cdr_columns(
    codec: Any, blob: np.ndarray, starts: np.ndarray, sizes: np.ndarray, want: Callable[[str], bool], lim: Limits
) -> dict[str, np.ndarray] | None:
    """Columns of little-endian CDR payloads of a type fixed-size but for its strings (the
    same values and names as the general walk), or None: the walk's case (see the module)."""
    n = len(starts)
    if n == 0:
        return None
    lay = cdr_layout(codec)
    if lay is None:
        return None
    ends = starts + sizes
    if int(starts.min()) < 0 or int(ends.max()) > len(blob) or int(sizes.min()) < 4:
        return None
    head = rows_at(blob, starts, 2)
    if not (bool((head[:, 0] == 0).all()) and bool((head[:, 1] == 1).all())):
        return None  # big-endian, mixed or unknown encapsulations: the walk decides
    found = _positions(lay, blob, starts, ends)
    if found is None:
        return None
    at, texts = found
    cols = _same_layout(lay, blob, starts, sizes, at, want, lim)
    if cols is None:
        cols = _gathered(lay, blob, at, want, lim)
    for (_seg, _off, col), (p, k) in zip(cols.strings, texts, strict=True):
        if col is not None:
            decode_strings(blob, p, k, col)
    return cols.out


def _same_layout(
    lay: CdrLayout,
    blob: np.ndarray,
    starts: np.ndarray,
    sizes: np.ndarray,
    at: list[np.ndarray],
    want: Callable[[str], bool],
    lim: Limits,
) -> Columns | None:
    """Every payload the same size, back to back, each segment at the same offset in every
    one (one frame id per topic): the rows are one ``(n, size)`` array and the fields typed
    strided views of it (or copies per block; see the ROS 1 :func:`fixed_layout`); or None."""
    n = len(starts)
    size = int(sizes[0])
    if int(starts[0]) != 0 or not bool((sizes == size).all()) or len(blob) < n * size:
        return None
    if n > 1 and not back_to_back(starts, size):
        return None
    rel = [int(p[0]) for p in at]
    for p, r in zip(at, rel, strict=True):
        if not bool((p - starts == r).all()):
            return None
    mat = blob[: n * size].reshape(n, size)
    views = mat if LITTLE_ENDIAN and numpy_owns(blob) else None
    if views is not None and 2 * Columns.view_bytes(lay, want) < size:  # type: ignore[arg-type]
        views = None  # a few narrow fields: copies, not views pinning every row
    cols = Columns(lay, n, want, rel, views, lim.block_bytes)  # type: ignore[arg-type]
    per = max(1, lim.chunk_bytes // max(1, size))
    for a in range(0, n, per):  # copies (no views) and times, a block of rows at a time
        cols.fill(a, (mat[a : a + per],))
    return cols


def _gathered(lay: CdrLayout, blob: np.ndarray, at: list[np.ndarray], want: Callable[[str], bool], lim: Limits) -> Columns:
    """Each segment's bytes of every row gathered per block of rows (a copy per row, in C)
    and the fields copied out of them."""
    n = len(at[0])
    cols = Columns(lay, n, want, block_bytes=lim.block_bytes)  # type: ignore[arg-type]
    row = max(1, sum(lay.widths))
    per = max(1, min(lim.chunk_bytes, lim.gather_bytes) // row)
    for a in range(0, n, per):
        b = min(n, a + per)
        cols.fill(a, [rows_at(blob, p[a:b], w) for p, w in zip(at, lay.widths, strict=True)])
    return cols
