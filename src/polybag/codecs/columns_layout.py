"""Columns, fixed layouts: where every field of a type is in a payload, and the outputs.

A ROS 1 type whose only variable-size parts are strings is planned once (:class:`Layout`)
as segments of fixed-size fields; :class:`Columns` allocates the output columns of such a
layout and fills them from blocks of rows.  The paths that use them are in
:mod:`polybag.codecs.columns_fixed`; the entry points in :mod:`polybag.codecs.columns`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from polybag.codecs.definition_limits import MsgDefError, short_name
from polybag.codecs.definition_model import NUMPY_TYPES, PRIMITIVE_FORMATS

FIXED_SPLIT = 64  # fixed arrays up to this length become one column per element
TIME_TYPES = {"time", "duration", "builtin_interfaces/Time", "builtin_interfaces/Duration"}
#: columns of one type (each leaf field, each element of a fixed array up to 64 long, of fixed
#: arrays of messages too): a type over it is refused before any column is planned (real ones
#: have tens to a few thousand)
MAX_COLUMNS = 1 << 16
#: characters of all column names of one type together (``a.b[3].c``: nesting repeats the
#: names of the outer fields in every column under them)
MAX_COLUMN_NAME_CHARS = 1 << 25


def check_columns(compiler: Any, type_name: str) -> None:
    """Refuse (a :class:`~polybag.codecs.definition_limits.MsgDefError` naming the limit) a type
    whose columns would be more than :data:`MAX_COLUMNS`, or whose column names would hold more
    than :data:`MAX_COLUMN_NAME_CHARS` characters.  Counted per type from its fields (each type
    once), before the walk or a layout builds anything: the cost of planning the columns of
    a type is then bounded by these numbers, not by what a definition unfolds into."""
    memo: dict[str, tuple[int, int]] = {}

    def measure(name: str) -> tuple[int, int]:  # (columns, characters of their names)
        got = memo.get(name)
        if got is not None:
            return got
        cols = chars = 0
        for f in compiler.msgdef(name).fields:
            t, n = f.type, len(f.name)
            base = t.base
            if t.array == 0:
                continue
            each = 1 if t.array is None else t.array
            if t.array is not None and t.array < 0:  # a sequence: one column
                sub_cols, sub_chars, each = 1, 0, 1
            elif base in PRIMITIVE_FORMATS:  # a fixed array: one column per element up to 64
                sub_cols, sub_chars, each = 1, 0, each if each <= FIXED_SPLIT else 1
            elif base in TIME_TYPES or base in ("string", "wstring"):
                sub_cols, sub_chars = 1, 0
            else:
                sub_cols, sub_chars = measure(base)
            index = len(str(each)) + 2 if t.array is not None else 0  # ``[i]``
            cols += each * sub_cols
            chars += each * (sub_chars + sub_cols * (n + 1 + index))
            if cols > MAX_COLUMNS or chars > MAX_COLUMN_NAME_CHARS:
                what = (
                    f"more than {MAX_COLUMNS} columns (polybag.codecs.columns_layout.MAX_COLUMNS)"
                    if cols > MAX_COLUMNS
                    else f"more than {MAX_COLUMN_NAME_CHARS} characters of column names "
                    "(polybag.codecs.columns_layout.MAX_COLUMN_NAME_CHARS)"
                )
                raise MsgDefError(f"{name} has {what}: over the limit of columns of one type", type_name=short_name(type_name))
        memo[name] = (cols, chars)
        return cols, chars

    if type_name not in TIME_TYPES:
        measure(type_name)


# --- fixed layout: every field at a known offset, but for the bytes of strings ---------------
# A type whose only variable-size parts are strings (sensor_msgs/Imu: ``header.frame_id``) is
# planned once as *segments*: runs of fixed-size fields, each segment but the last ending with
# the u32 length of a string whose bytes come before the next segment.  When every payload has
# the same string lengths (the usual case: one frame id per topic) every field is at the same
# offset in every payload and the rows are read as typed strided views of the blob
# (:func:`_fixed_layout`); otherwise the segments are gathered per block of rows at offsets
# computed from the string lengths as vectors (:func:`_string_layout`).
Leaf = tuple[str, str, int, int, str, int]  # (kind, column, segment, offset in it, primitive or type, count)


class _NotFixed(Exception):
    """The type has variable-length parts other than strings (or nests too deep)."""


class Layout:
    """The leaves of a type (fixed-size but for its strings) and the fixed bytes per segment.

    ``leaves`` in definition order: ``("prim", name, seg, off, prim, 1)``, ``("array", ...,
    count)`` for a fixed primitive array, ``("time", ..., type, 0)`` and ``("string", name,
    seg, off, "string", 0)`` where ``off`` is the string's length field, the last 4 bytes of
    segment ``seg``.  ``segs[j]`` is segment j's size; its bytes start where the previous
    segment's string ends.
    """

    def __init__(self, compiler: Any, type_name: str) -> None:
        self.compiler = compiler
        self.leaves: list[Leaf] = []
        self.segs: list[int] = []
        self.off = 0
        self.message(type_name, "", 0)
        self.segs.append(self.off)

    def message(self, type_name: str, prefix: str, depth: int) -> None:
        if depth > 64:
            raise _NotFixed
        for f in self.compiler.msgdef(type_name).fields:
            t = f.type
            name = prefix + f.name
            base = t.base
            if t.array is None:
                self.scalar(base, name, depth)
            elif t.array < 0:
                raise _NotFixed
            elif base in PRIMITIVE_FORMATS:
                if t.array > 0:
                    self.leaves.append(("array", name, len(self.segs), self.off, base, t.array))
                    self.off += PRIMITIVE_FORMATS[base][1] * t.array
            elif base in TIME_TYPES or base in ("string", "wstring") or self.compiler.fixed_size(base) != 0:
                for i in range(t.array):
                    self.scalar(base, f"{name}[{i}]", depth)

    def scalar(self, base: str, name: str, depth: int) -> None:
        seg = len(self.segs)
        if base in PRIMITIVE_FORMATS:
            self.leaves.append(("prim", name, seg, self.off, base, 1))
            self.off += PRIMITIVE_FORMATS[base][1]
        elif base in TIME_TYPES:
            self.leaves.append(("time", name, seg, self.off, base, 0))
            self.off += 8
        elif base == "string":
            self.leaves.append(("string", name, seg, self.off, base, 0))
            self.segs.append(self.off + 4)
            self.off = 0
        elif base == "wstring":
            raise _NotFixed
        elif self.compiler.fixed_size(base) != 0:  # an empty message (or only empty ones): no bytes
            self.message(base, name + ".", depth + 1)


def layout_of(codec: Any) -> Layout | None:
    try:
        return Layout(codec.compiler, codec.type_name)
    except _NotFixed:
        return None


class Columns:
    """The output columns of a layout, allocated once and filled block by block.

    One-dimensional columns of one dtype are the rows of one ``(k, n)`` array: a few large
    allocations instead of one per column (numpy asks the kernel for huge pages for large
    arrays, so filling them costs a few page faults instead of one per 4 KiB), and fields that follow each other
    in the payload with the same dtype are copied as one ``(rows, k)`` strided view
    transposed into the block (one pass over the rows for all of them).  Each column is a
    C-contiguous row of its block.

    ``at``: where each segment starts in every row, when that is the same for all rows (the
    jobs then use offsets in the row: one segment).  ``rows``: the ``(n, size)`` rows
    themselves, in memory numpy owns: fields are then not copied at all but handed out as
    typed strided views of the rows (one structured record per message), as the ULog
    reader's columns are; times and strings are still computed.
    """

    def __init__(
        self,
        lay: Layout,
        n: int,
        want: Callable[[str], bool],
        at: Sequence[int] | None = None,
        rows: np.ndarray | None = None,
        block_bytes: int = 1 << 62,
    ) -> None:
        self.n = n
        self.out: dict[str, np.ndarray] = {}
        # (segment, offset, view dtype, output rows (k, n) block, first row, k): copied runs
        self.runs: list[tuple[int, int, np.dtype, np.ndarray, int, int]] = []
        self.wide: list[
            tuple[int, int, np.dtype, np.ndarray, int]
        ] = []  # (seg, off, dt, (n, count) output, count)
        self.times: list[tuple[int, int, str, np.ndarray]] = []  # (seg, off, type, int64 column)
        self.strings: list[
            tuple[int, int, np.ndarray | None]
        ] = []  # (seg, offset of the length, column or None)
        flat, order = self._plan(lay, want, at, rows)
        if rows is not None:
            self._views(flat, order, rows)
        else:
            self._blocks(flat, order, block_bytes)

    def _plan(
        self, lay: Layout, want: Callable[[str], bool], at: Sequence[int] | None, rows: np.ndarray | None
    ) -> tuple[list[tuple[str, int, int, np.dtype]], list[tuple[str, Any]]]:
        """The wanted leaves: ``flat`` the 1-D columns ``(name, seg, off, dtype of the view)``,
        ``order`` every column in definition order ``(name, array or index in flat)``; time,
        string and wide array columns are allocated (or viewed) here."""
        n = self.n

        def where(seg: int, off: int) -> tuple[int, int]:
            return (0, at[seg] + off) if at is not None else (seg, off)

        flat: list[tuple[str, int, int, np.dtype]] = []  # 1-D columns: (name, seg, off, dtype of the view)
        order: list[tuple[str, Any]] = []  # the columns in definition order: (name, array or index in flat)
        for kind, name, seg, off, prim, count in lay.leaves:
            seg, off = where(seg, off)
            if kind == "string":
                col = np.empty(n, dtype=object) if want(name) else None
                self.strings.append((seg, off, col))
                if col is not None:
                    order.append((name, col))
                continue
            if not want(name):
                continue
            if kind == "time":
                col = np.empty(n, np.int64)
                self.times.append((seg, off, prim, col))
                order.append((name, col))
                continue
            dt = np.dtype("?") if prim == "bool" else np.dtype("<" + NUMPY_TYPES[prim])
            if kind == "prim" or count <= FIXED_SPLIT:
                for i in range(count):
                    sub = name if kind == "prim" else f"{name}[{i}]"
                    flat.append((sub, seg, off + i * dt.itemsize, dt))
                    order.append((sub, len(flat) - 1))
            elif rows is not None:
                order.append((name, np.ndarray((n, count), dt, rows, off, (rows.shape[1], dt.itemsize))))
            else:
                col = np.empty((n, count), dt.newbyteorder("="))
                self.wide.append((seg, off, dt, col, count))
                order.append((name, col))
        return flat, order

    def _views(
        self, flat: list[tuple[str, int, int, np.dtype]], order: list[tuple[str, Any]], rows: np.ndarray
    ) -> None:
        """Every 1-D column a typed strided view of the ``(n, size)`` rows (no copy)."""
        for name, how in order:
            if isinstance(how, int):
                _name, _seg, off, dt = flat[how]
                self.out[name] = np.ndarray((self.n,), dt, rows, off, (rows.shape[1],))
            else:
                self.out[name] = how

    def _blocks(
        self, flat: list[tuple[str, int, int, np.dtype]], order: list[tuple[str, Any]], block_bytes: int
    ) -> None:
        """One block per output dtype, rows in definition order; neighbouring fields of one
        dtype become one copied run."""
        n = self.n
        groups: dict[np.dtype, list[int]] = {}
        for i, (_name, _seg, _off, dt) in enumerate(flat):
            groups.setdefault(dt.newbyteorder("="), []).append(i)
        home: dict[int, tuple[np.ndarray, int]] = {}
        for odt, members in groups.items():
            per = max(1, block_bytes // max(1, n * odt.itemsize))
            for g in range(0, len(members), per):
                part = members[g : g + per]
                block = np.empty((len(part), n), odt)
                for r, i in enumerate(part):
                    home[i] = (block, r)
        for name, how in order:
            if not isinstance(how, int):
                self.out[name] = how
                continue
            block, r = home[how]
            self.out[name] = block[r]
            _name, seg, off, dt = flat[how]
            last = self.runs[-1] if self.runs else None
            if (
                last is not None
                and last[0] == seg
                and last[2] == dt
                and last[3] is block
                and last[4] + last[5] == r
                and last[1] + last[5] * dt.itemsize == off
            ):
                self.runs[-1] = (*last[:5], last[5] + 1)
            else:
                self.runs.append((seg, off, dt, block, r, 1))

    @staticmethod
    def view_bytes(lay: Layout, want: Callable[[str], bool]) -> int:
        """Bytes per row of the wanted fields that would be views (all but times and strings)."""
        total = 0
        for kind, name, _seg, _off, prim, count in lay.leaves:
            if kind in ("prim", "array") and want(name):
                total += PRIMITIVE_FORMATS[prim][1] * count
        return total

    def fill(self, a: int, mats: Sequence[np.ndarray]) -> None:
        """Rows ``a:a+m`` from the segments' ``(m, width)`` uint8 matrices (C-contiguous)."""
        m = len(mats[0])
        b = a + m
        for seg, off, dt, block, r, k in self.runs:
            rows = mats[seg]
            w = rows.shape[1]
            if k == 1:
                block[r, a:b] = np.ndarray((m,), dt, rows, off, (w,))
            else:
                block[r : r + k, a:b].T[...] = np.ndarray((m, k), dt, rows, off, (w, dt.itemsize))
        for seg, off, dt, col, count in self.wide:
            rows = mats[seg]
            col[a:b] = np.ndarray((m, count), dt, rows, off, (rows.shape[1], dt.itemsize))
        for seg, off, prim, col in self.times:
            rows = mats[seg]
            w = rows.shape[1]
            sec_dt = "<u4" if prim == "time" else "<i4"
            nsec_dt = "<i4" if prim == "duration" else "<u4"
            part = col[a:b]
            np.multiply(np.ndarray((m,), sec_dt, rows, off, (w,)), 1_000_000_000, out=part, dtype=np.int64)
            part += np.ndarray((m,), nsec_dt, rows, off + 4, (w,))
