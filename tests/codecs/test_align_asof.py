"""The numpy alignment (polybag.codecs.align) against pandas' own merge_asof, cell by cell,
and resampling against a brute-force per-row computation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from polybag.codecs.align import (
    AsofAccumulator,
    ResampleAccumulator,
    asof_join,
    parse_align,
    parse_tolerance,
    resample_grid,
)
from polybag.errors import UsageError

_TIMES = st.lists(st.integers(0, 60), max_size=25)
_SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _pandas_asof(lt: list[int], rt: list[int], direction: str, tol: int | None, exact: bool) -> pd.DataFrame:
    """merge_asof on stably sorted copies (pandas requires sorted keys)."""
    left = pd.DataFrame({"t": np.array(lt, np.int64)}).sort_values("t", kind="stable").reset_index(drop=True)
    n = len(rt)
    right = pd.DataFrame(
        {
            "t": np.array(rt, np.int64),
            "rt": np.array(rt, np.int64),
            "f": np.arange(n, dtype=np.float64) * 1.5,
            "i": np.arange(n, dtype=np.int64) + 100,
            "s": np.array([f"s{k}" for k in range(n)], dtype=object),
        }
    ).sort_values("t", kind="stable").reset_index(drop=True)
    return pd.merge_asof(left, right, on="t", direction=direction, tolerance=tol, allow_exact_matches=exact)


def _ours(lt: list[int], rt: list[int], direction: str, tol: int | None, exact: bool, blocks: int) -> tuple[np.ma.MaskedArray, dict[str, np.ma.MaskedArray]]:
    left = np.sort(np.array(lt, np.int64), kind="stable")
    n = len(rt)
    cols = {
        "f": np.arange(n, dtype=np.float64) * 1.5,
        "i": np.arange(n, dtype=np.int64) + 100,
        "s": np.array([f"s{k}" for k in range(n)], dtype=object),
    }
    rtimes = np.array(rt, np.int64)
    acc = AsofAccumulator(left, direction, exact)
    # blocks in message order, each unsorted: the result must not depend on the cut
    cuts = np.linspace(0, n, blocks + 1).astype(int)
    for a, b in zip(cuts[:-1], cuts[1:]):
        acc.add(rtimes[a:b], {k: v[a:b] for k, v in cols.items()})
    return acc.finish(tol)


def _same(ours: np.ma.MaskedArray, theirs: pd.Series) -> None:
    missing = theirs.isna().to_numpy()
    assert np.array_equal(np.ma.getmaskarray(ours), missing)
    got = np.asarray(ours.data, dtype=object)[~missing]
    want = theirs.to_numpy(dtype=object)[~missing]
    assert list(got) == list(want)


@_SETTINGS
@given(
    lt=_TIMES,
    rt=_TIMES,
    direction=st.sampled_from(["backward", "forward", "nearest"]),
    tol=st.one_of(st.none(), st.integers(0, 20)),
    exact=st.booleans(),
    blocks=st.integers(1, 4),
)
def test_asof_equals_merge_asof(lt: list[int], rt: list[int], direction: str, tol: int | None, exact: bool, blocks: int) -> None:
    want = _pandas_asof(lt, rt, direction, tol, exact)
    t, cols = _ours(lt, rt, direction, tol, exact, blocks)
    _same(t, want["rt"])
    for name in ("f", "i", "s"):
        if name in cols:
            _same(cols[name], want[name])
        else:  # no right rows at all: every left row is unmatched
            assert len(rt) == 0 or len(lt) == 0
    # floats hold NaN where masked (what merge_asof gives)
    if "f" in cols:
        assert np.array_equal(np.isnan(cols["f"].data), np.ma.getmaskarray(cols["f"]))


@_SETTINGS
@given(lt=_TIMES, r1=_TIMES, r2=_TIMES, direction=st.sampled_from(["backward", "forward", "nearest"]), tol=st.integers(0, 10))
def test_two_right_topics(lt: list[int], r1: list[int], r2: list[int], direction: str, tol: int) -> None:
    """Each right topic joins onto the left independently, as two chained merge_asof do."""
    left = pd.DataFrame({"t": np.sort(np.array(lt, np.int64))})
    frames = []
    for k, rt in enumerate((r1, r2)):
        right = pd.DataFrame({"t": np.array(rt, np.int64), f"v{k}": np.arange(len(rt), dtype=np.float64)})
        right = right.sort_values("t", kind="stable").reset_index(drop=True)
        frames.append(right)
    want = pd.merge_asof(left, frames[0], on="t", direction=direction, tolerance=tol)
    want = pd.merge_asof(want, frames[1], on="t", direction=direction, tolerance=tol)
    lt_sorted = left["t"].to_numpy()
    for k, rt in enumerate((r1, r2)):
        _, cols = asof_join(lt_sorted, np.array(rt, np.int64), {f"v{k}": np.arange(len(rt), dtype=np.float64)}, direction=direction, tolerance=tol)
        if len(rt) and len(lt):
            _same(cols[f"v{k}"], want[f"v{k}"])


def test_tolerance_as_text_and_timedelta() -> None:
    """A tolerance with a unit means what pandas' Timedelta tolerance means on datetimes."""
    lt = np.array([0, 5_000_000, 12_000_000, 30_000_000], np.int64)
    rt = np.array([1_000_000, 4_000_000, 20_000_000], np.int64)
    _, cols = asof_join(lt, rt, {"v": np.array([1.0, 2.0, 3.0])}, tolerance="2ms")
    left = pd.DataFrame({"t": pd.to_datetime(lt, unit="ns")})
    right = pd.DataFrame({"t": pd.to_datetime(rt, unit="ns"), "v": [1.0, 2.0, 3.0]})
    want = pd.merge_asof(left, right, on="t", tolerance=pd.Timedelta("2ms"))
    _same(cols["v"], want["v"])
    assert parse_tolerance("0.5s") == 500_000_000
    assert parse_tolerance("250us") == 250_000
    assert parse_tolerance(7) == 7
    assert parse_tolerance(None) is None


@pytest.mark.parametrize("bad", [-1, 1.5, "soon", True])
def test_bad_tolerance(bad: object) -> None:
    with pytest.raises(UsageError):
        parse_tolerance(bad)  # type: ignore[arg-type]


def test_parse_align() -> None:
    assert parse_align("asof") == ("asof", "backward", None)
    assert parse_align("asof", "forward") == ("asof", "forward", None)
    assert parse_align("nearest") == ("asof", "nearest", None)
    assert parse_align("resample:10ms") == ("resample", "backward", 10_000_000)
    for bad, said in (("merge", "resample:<period>"), ("resample:x", "length of time"), ("resample:0", "more than 0")):
        with pytest.raises(UsageError, match=said):
            parse_align(bad)
    with pytest.raises(UsageError, match="backward, forward, nearest"):
        parse_align("asof", "sideways")


def test_ints_and_bools_keep_their_dtype() -> None:
    _, cols = asof_join(np.array([0, 10]), np.array([5]), {"i": np.array([7], np.int32), "b": np.array([True])})
    assert cols["i"].dtype == np.int32 and cols["b"].dtype == bool
    assert cols["i"].mask.tolist() == [True, False] and cols["i"][1] == 7


def test_two_dimensional_columns() -> None:
    _, cols = asof_join(np.array([0, 10, 20]), np.array([5, 15]), {"a": np.array([[1, 2], [3, 4]])})
    assert cols["a"].shape == (3, 2)
    assert np.ma.getmaskarray(cols["a"]).tolist() == [[True, True], [False, False], [False, False]]
    assert cols["a"][2].tolist() == [3, 4]


def _brute_resample(grid: np.ndarray, t: np.ndarray, v: np.ndarray, linear: bool) -> list[float | None]:
    order = np.argsort(t, kind="stable")
    t, v = t[order], v[order]
    out: list[float | None] = []
    for g in grid:
        prev = [k for k in range(len(t)) if t[k] <= g]
        nxt = [k for k in range(len(t)) if t[k] > g]
        if not prev or (t[prev[-1]] != g and not nxt):
            out.append(None)
            continue
        p = prev[-1]
        if t[p] == g or not linear:
            out.append(float(v[p]))
            continue
        q = nxt[0]
        out.append(float(v[p] + (v[q] - v[p]) * (g - t[p]) / (t[q] - t[p])))
    return out


@_SETTINGS
@given(rt=st.lists(st.integers(0, 100), max_size=25), period=st.integers(1, 30), blocks=st.integers(1, 3), linear=st.booleans())
def test_resample_equals_brute_force(rt: list[int], period: int, blocks: int, linear: bool) -> None:
    t = np.array(rt, np.int64)
    v = (np.arange(len(rt)) * 3 % 7).astype(np.float64)
    grid = resample_grid(0, 100, period)
    acc = ResampleAccumulator(grid)
    cuts = np.linspace(0, len(rt), blocks + 1).astype(int)
    for a, b in zip(cuts[:-1], cuts[1:]):
        acc.add(t[a:b], {"v": v[a:b], "s": np.array([str(x) for x in v[a:b]], dtype=object)})
    _, cols = acc.finish(None, "auto" if linear else "previous")
    want = _brute_resample(grid, t, v, linear)
    if not len(rt):  # an empty topic: its columns are known, every row missing
        assert set(cols) == {"v", "s"} and np.ma.getmaskarray(cols["v"]).all()
        return
    got = [None if m else float(x) for x, m in zip(cols["v"].data, np.ma.getmaskarray(cols["v"]))]
    assert len(got) == len(want)
    for a_, b_ in zip(got, want):
        assert (a_ is None) == (b_ is None)
        if a_ is not None:
            assert a_ == pytest.approx(b_, rel=1e-12, abs=1e-12)
    # strings take the previous value, whatever the mode
    prev = _brute_resample(grid, t, v, False)
    gots = [None if m else float(x) for x, m in zip(cols["s"].data, np.ma.getmaskarray(cols["s"]))]
    assert gots == prev


def test_resample_linear_matches_np_interp_on_unique_times() -> None:
    t = np.array([3, 10, 17, 40], np.int64)
    v = np.array([1.0, -2.0, 5.0, 0.5])
    grid = resample_grid(0, 50, 4)
    acc = ResampleAccumulator(grid)
    acc.add(t, {"v": v})
    _, cols = acc.finish()
    inside = (grid >= 3) & (grid <= 40)
    assert np.array_equal(~np.ma.getmaskarray(cols["v"]), inside)
    assert np.allclose(cols["v"].data[inside], np.interp(grid[inside], t, v))


def test_resample_grid_is_bounded() -> None:
    assert resample_grid(5, 31, 10).tolist() == [10, 20, 30]
    assert resample_grid(10, 10, 10).tolist() == [10]
    assert resample_grid(11, 19, 10).tolist() == []
    with pytest.raises(UsageError, match="longer period"):
        resample_grid(0, 10**18, 1)
