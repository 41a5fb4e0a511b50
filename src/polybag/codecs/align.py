"""Several topics on one time axis, in numpy: ``pandas.merge_asof`` on sorted int64 times.

The first topic is the *left*: its rows are the output's rows.  Every other topic (a
*right*) is fed to an accumulator in blocks, in message order (a block need not be sorted,
nor the blocks among themselves: each block is sorted stably, then ``np.searchsorted`` gives
every left row its candidate in the block, and the candidate replaces the row's match so far
when it is closer).  Ties follow ``merge_asof``: ``backward`` takes the last of equal right
times, ``forward`` the first, ``nearest`` the backward match when both are as far.  So a
right topic is never held whole: memory is the left's rows times the right's columns.

Right columns come back as ``numpy.ma.MaskedArray``: a masked row had no match (outside the
tolerance, or nothing in the direction); a float column also holds NaN there, so its
``.data`` (or ``np.asarray``) reads as ``merge_asof``'s NaN.  Integer and bool columns keep
their dtype (pandas nullable ``Int64``/``boolean`` in :func:`polybag.codecs.aligned.aligned_pandas`,
where ``merge_asof`` itself would give float64 or object).

``resample`` puts every topic on a grid of multiples of a period: numbers are interpolated
linearly between the samples on both sides (float64), everything else takes the previous
sample; a grid time before a topic's first or after its last sample is missing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import numpy as np

from polybag.errors import UnsupportedError, UsageError

__all__ = [
    "ALIGN_FORMS",
    "DIRECTIONS",
    "INTERPOLATIONS",
    "MAX_GRID_ROWS",
    "AsofAccumulator",
    "ResampleAccumulator",
    "as_rows",
    "asof_join",
    "parse_align",
    "parse_tolerance",
    "resample_grid",
    "sort_times",
    "time_array",
]

Direction = Literal["backward", "forward", "nearest"]
DIRECTIONS: tuple[str, ...] = ("backward", "forward", "nearest")
ALIGN_FORMS = "'asof', 'nearest' or 'resample:<period>' (a period such as 10ms, 0.5s, 250us)"
INTERPOLATIONS: tuple[str, ...] = ("linear", "previous")
MAX_GRID_ROWS = 100_000_000  # a resample grid larger than this is refused (the times come from the file)

_INT64_MAX = (1 << 63) - 1


def parse_tolerance(tolerance: int | str | None) -> int | None:
    """A tolerance in ns: None (no limit), an int of ns (0 or more) or a length of time with
    a unit as :func:`polybag.selection.parse_duration` reads it (``"10ms"``, ``"0.5s"``)."""
    if tolerance is None:
        return None
    if isinstance(tolerance, (bool, float)) or not isinstance(tolerance, (int, np.integer, str)):
        raise UsageError(f"tolerance is None, int ns or a length of time such as '10ms', not {tolerance!r}")
    if isinstance(tolerance, str):
        from polybag.selection import parse_duration

        return parse_duration(tolerance)
    if tolerance < 0:
        raise UsageError(f"tolerance must be 0 or more ns, not {tolerance}")
    return int(tolerance)


def parse_align(align: str, direction: str = "backward") -> tuple[str, str, int | None]:
    """``(kind, direction, period)`` of an ``align=`` text: ``("asof", direction, None)``,
    ``("asof", "nearest", None)`` for ``"nearest"``, ``("resample", direction, period_ns)``."""
    if direction not in DIRECTIONS:
        raise UsageError(f"direction must be one of {', '.join(DIRECTIONS)}, not {direction!r}")
    if not isinstance(align, str):
        raise UsageError(f"align must be {ALIGN_FORMS}, not {align!r}")
    a = align.strip()
    if a == "asof":
        return "asof", direction, None
    if a == "nearest":
        return "asof", "nearest", None
    if a.startswith("resample:") or a.startswith("resample="):
        from polybag.selection import parse_duration

        period = parse_duration(a[len("resample:") :])
        if period <= 0:
            raise UsageError(f"a resample period must be more than 0, not {a[len('resample:'):]!r}")
        return "resample", direction, period
    raise UsageError(f"align must be {ALIGN_FORMS}, not {align!r}")


def time_array(times: np.ndarray) -> np.ndarray:
    """Times as int64 ns (uint64 kept only when a time is 2**63 or more)."""
    t = np.asarray(times)
    if t.dtype == np.int64:
        return t
    if t.dtype == np.uint64:
        return t if len(t) and int(t.max()) > _INT64_MAX else t.astype(np.int64)
    if t.dtype.kind in "iu":
        return t.astype(np.int64)
    raise UnsupportedError(f"times must be integers (ns), not {t.dtype}")


def sort_times(times: np.ndarray) -> np.ndarray | None:
    """The stable order that sorts ``times``, or None when they are non-decreasing already."""
    t = np.asarray(times)
    if len(t) < 2 or bool(np.all(t[1:] >= t[:-1])):
        return None
    return np.argsort(t, kind="stable")


def _same_time_dtype(left: np.ndarray, right: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if left.dtype == right.dtype:
        return left, right
    # one holds a time of 2**63 or more: both as uint64 (a negative time cannot meet it)
    if (len(left) and int(left.min()) < 0) or (len(right) and int(right.min()) < 0):
        raise UnsupportedError("cannot align negative times with times of 2**63 ns or more")
    return left.astype(np.uint64), right.astype(np.uint64)


def as_rows(col: np.ndarray) -> np.ndarray:
    """A column as a 1-D object array of its rows (for columns whose shapes differ)."""
    if col.dtype == object and col.ndim == 1:
        return col
    out = np.empty(len(col), dtype=object)
    for i in range(len(col)):
        out[i] = col[i]
    return out


def _missing_fill(values: np.ndarray, missing: np.ndarray) -> None:
    """NaN (floats) or None (objects) in the rows without a value."""
    if missing.any():
        if values.dtype.kind in "fc":
            values[missing] = np.nan
        elif values.dtype == object:
            values[missing] = np.nan


def _masked(values: np.ndarray, missing: np.ndarray) -> np.ma.MaskedArray:
    _missing_fill(values, missing)
    mask = missing if values.ndim == 1 else np.broadcast_to(missing.reshape((-1,) + (1,) * (values.ndim - 1)), values.shape).copy()
    return np.ma.MaskedArray(values, mask=mask)


class _Side:
    """The closest right row so far in one direction, for every left row."""

    def __init__(self, left_times: np.ndarray, forward: bool, exact: bool) -> None:
        self.left = time_array(left_times)
        self.forward = forward
        self.exact = exact
        n = len(self.left)
        self.best = np.zeros(n, dtype=self.left.dtype)
        self.have = np.zeros(n, dtype=bool)
        self.values: dict[str, np.ndarray] = {}
        self.ok: dict[str, np.ndarray] = {}

    def add(self, times: np.ndarray, cols: Mapping[str, np.ndarray]) -> None:
        for name, col in cols.items():  # every column is known from its first block, matched or not
            if name not in self.values:
                self._alloc(name, np.asarray(col))
        tb = time_array(times)
        if not len(tb) or not len(self.left):
            return
        order = sort_times(tb)
        if order is not None:
            tb = tb[order]
        left, tb = _same_time_dtype(self.left, tb)
        if left.dtype != self.left.dtype:
            self.left, self.best = left, self.best.astype(left.dtype)
        n = len(tb)
        if self.forward:
            pos = np.searchsorted(tb, self.left, side="left" if self.exact else "right")
            valid = pos < n
            cand = tb[np.minimum(pos, n - 1)]
            better = valid & (~self.have | (cand < self.best))  # equal: the earlier block's stays
        else:
            pos = np.searchsorted(tb, self.left, side="right" if self.exact else "left") - 1
            valid = pos >= 0
            cand = tb[np.maximum(pos, 0)]
            better = valid & (~self.have | (cand >= self.best))  # equal: the later block's wins
        rows = np.flatnonzero(better)
        if not len(rows):
            return
        src = pos[rows] if order is None else order[pos[rows]]
        self.best[rows] = cand[rows]
        self.have[rows] = True
        for name, col in cols.items():
            self._put(name, np.asarray(col), rows, src)
        for name in self.values:
            if name not in cols:
                self.ok[name][rows] = False

    def _alloc(self, name: str, col: np.ndarray) -> None:
        vals = np.zeros((len(self.left),) + col.shape[1:], dtype=col.dtype)
        if vals.dtype == object:
            vals[...] = None
        self.values[name] = vals
        self.ok[name] = np.zeros(len(self.left), dtype=bool)

    def _put(self, name: str, col: np.ndarray, rows: np.ndarray, src: np.ndarray) -> None:
        vals = self.values[name]
        if vals.shape[1:] != col.shape[1:]:
            vals = self.values[name] = as_rows(vals)
            col = as_rows(col)
        elif vals.dtype != col.dtype:
            dt = np.result_type(vals.dtype, col.dtype) if vals.dtype != object and col.dtype != object else np.dtype(object)
            if dt != vals.dtype:
                vals = self.values[name] = vals.astype(dt)
        vals[rows] = col[src]
        self.ok[name][rows] = True

    def within(self, tolerance: int | None) -> np.ndarray:
        """Which left rows have a match within ``tolerance`` ns."""
        if tolerance is None:
            return self.have.copy()
        if self.forward:
            diff = self.best - self.left
        else:
            diff = self.left - self.best
        hit: np.ndarray = self.have & (diff <= tolerance)
        return hit


class AsofAccumulator:
    """The ``merge_asof`` of one right topic onto the left's times, fed in blocks.

    ``add(times, cols)`` takes a block of right rows (message order; times int ns, unsorted
    allowed); :meth:`finish` gives the matched right time and every right column for every
    left row, as masked arrays (masked: no match)."""

    def __init__(self, left_times: np.ndarray, direction: str = "backward", allow_exact_matches: bool = True) -> None:
        if direction not in DIRECTIONS:
            raise UsageError(f"direction must be one of {', '.join(DIRECTIONS)}, not {direction!r}")
        self.direction = direction
        self.sides: list[_Side] = []
        if direction in ("backward", "nearest"):
            self.sides.append(_Side(left_times, False, allow_exact_matches))
        if direction in ("forward", "nearest"):
            self.sides.append(_Side(left_times, True, allow_exact_matches))

    def add(self, times: np.ndarray, cols: Mapping[str, np.ndarray]) -> None:
        """Feed a block of right rows (``cols`` one array per column, as long as ``times``)."""
        for s in self.sides:
            s.add(times, cols)

    def names(self) -> list[str]:
        """The right columns seen so far."""
        return list(self.sides[0].values)

    def finish(self, tolerance: int | None = None) -> tuple[np.ma.MaskedArray, dict[str, np.ma.MaskedArray]]:
        """``(matched right time, {column: values})`` for every left row (masked: no match)."""
        if len(self.sides) == 1:
            s = self.sides[0]
            hit = s.within(tolerance)
            best = s.best
            values = s.values
            oks = s.ok
        else:
            b, f = self.sides
            hb, hf = b.within(tolerance), f.within(tolerance)
            both = hb & hf
            take_f = hf & ~hb
            # both: the closer; as far both ways: backward (merge_asof's choice)
            take_f[both] = (b.left - b.best)[both] > (f.best - f.left)[both]
            hit = hb | hf
            best = np.where(take_f, f.best, b.best)
            values, oks = {}, {}
            for name in dict.fromkeys([*b.values, *f.values]):
                bv, fv = b.values.get(name), f.values.get(name)
                if bv is None or fv is None:
                    src = bv if bv is not None else fv
                    assert src is not None
                    values[name] = src.copy()
                    oks[name] = (b.ok if bv is not None else f.ok)[name] & (~take_f if bv is not None else take_f)
                    continue
                if bv.shape[1:] != fv.shape[1:]:
                    bv, fv = as_rows(bv), as_rows(fv)
                dt = np.result_type(bv.dtype, fv.dtype) if object not in (bv.dtype, fv.dtype) else np.dtype(object)
                v = bv.astype(dt, copy=True)
                v[take_f] = fv[take_f]
                values[name] = v
                oks[name] = np.where(take_f, f.ok[name], b.ok[name])
        tmask = ~hit
        out = {name: _masked(values[name].copy() if len(self.sides) == 1 else values[name], ~(hit & oks[name])) for name in values}
        return np.ma.MaskedArray(best.copy(), mask=tmask), out


def asof_join(
    left_times: np.ndarray,
    right_times: np.ndarray,
    right_cols: Mapping[str, np.ndarray],
    *,
    direction: str = "backward",
    tolerance: int | str | None = None,
    allow_exact_matches: bool = True,
) -> tuple[np.ma.MaskedArray, dict[str, np.ma.MaskedArray]]:
    """``merge_asof`` of whole arrays: the matched right time and right columns for every
    left row (see :class:`AsofAccumulator`)."""
    acc = AsofAccumulator(left_times, direction, allow_exact_matches)
    acc.add(right_times, right_cols)
    return acc.finish(parse_tolerance(tolerance))


def resample_grid(first: int, last: int, period: int, max_rows: int = MAX_GRID_ROWS) -> np.ndarray:
    """The multiples of ``period`` from ``first`` to ``last`` (ns, both included when they
    are multiples), int64; more than ``max_rows`` rows is a UsageError."""
    if period <= 0:
        raise UsageError(f"a resample period must be more than 0 ns, not {period}")
    g0 = -(-first // period) * period
    g1 = (last // period) * period
    rows = 0 if g1 < g0 else (g1 - g0) // period + 1
    if rows > max_rows:
        raise UsageError(f"resampling {last - first} ns every {period} ns makes {rows} rows (at most {max_rows}): use a longer period")
    grid: np.ndarray = g0 + np.arange(rows, dtype=np.int64) * period
    return grid


def _numeric(col: np.ndarray) -> bool:
    return col.dtype.kind in "iuf"


class ResampleAccumulator:
    """One topic's values on a grid of times, fed in blocks like :class:`AsofAccumulator`."""

    def __init__(self, grid: np.ndarray) -> None:
        self.grid = time_array(grid)
        self.prev = _Side(self.grid, False, True)  # last sample at or before
        self.next = _Side(self.grid, True, False)  # first sample after

    def add(self, times: np.ndarray, cols: Mapping[str, np.ndarray]) -> None:
        """Feed a block of the topic's rows."""
        self.prev.add(times, cols)
        self.next.add(times, cols)

    def names(self) -> list[str]:
        """The columns seen so far."""
        return list(self.prev.values)

    def finish(self, how: Mapping[str, str] | None = None, default: str = "auto") -> tuple[np.ma.MaskedArray, dict[str, np.ma.MaskedArray]]:
        """``(time of the previous sample, {column: values})`` on the grid; ``how`` maps a
        column to ``"linear"`` or ``"previous"``, others follow ``default`` (``"auto"``:
        numbers linear, the rest previous; ``"previous"``; ``"linear"``: numbers linear)."""
        p, q = self.prev, self.next
        exact = p.have & (p.best == self.grid)
        inside = p.have & (exact | q.have)
        out: dict[str, np.ma.MaskedArray] = {}
        for name, pv in p.values.items():
            mode = (how or {}).get(name, default)
            ok = inside & p.ok[name]
            linear = mode in ("auto", "linear") and _numeric(pv)
            if mode == "linear" and name in (how or {}) and not _numeric(pv):
                raise UsageError(f"column {name} ({pv.dtype}) cannot be interpolated linearly; use 'previous'")
            if not linear:
                out[name] = _masked(pv.copy(), ~ok)
                continue
            qv = q.values.get(name)
            nok = q.ok[name] if qv is not None else np.zeros(len(self.grid), bool)
            ok = ok & (exact | nok)
            v = pv.astype(np.float64)
            between = ok & ~exact
            if qv is not None and between.any():
                rows = np.flatnonzero(between)
                t0 = p.best[rows].astype(np.float64)
                t1 = q.best[rows].astype(np.float64)
                w = (self.grid[rows].astype(np.float64) - t0) / (t1 - t0)
                a, b = v[rows], qv[rows].astype(np.float64)
                if a.ndim > 1:
                    w = w.reshape((-1,) + (1,) * (a.ndim - 1))
                v[rows] = a + (b - a) * w
            out[name] = _masked(v, ~ok)
        return np.ma.MaskedArray(p.best.copy(), mask=~inside), out
