"""The pure read planner :func:`~polybag.formats.mcap.read_plan.plan_read`: from the summary's
Chunk Indexes or a scan, the runs a read loads (no I/O).

Hand-made indexes check the rules (windows, topic selections, chunks without times or
Message Indexes, overlapping chunks, Chunk Indexes out of file order, loose messages, file and
log-time order, reversed); written files check that a read loads exactly the planned chunks.
"""

from __future__ import annotations

from typing import Any

import pytest

from mcap_helpers import TOPICS, Row, expected, key, to_bytes
from polybag.formats.mcap import records as R
from polybag.formats.mcap.context import McapContext
from polybag.formats.mcap.index import ScanIndex, SummaryIndex, chunk_index_array
from polybag.formats.mcap.read_plan import PlannedRun, plan_read, read_order
from polybag.formats.mcap.reader import McapReader
from polybag.formats.mcap.vocabulary import MAX_TIME
from polybag.io.source import MappedSource


def summary(*chunks: tuple[int, int, int, dict[int, int]]) -> SummaryIndex:
    """A summary index of chunks given as (offset, start, end, channel id -> Message Index offset)."""
    cis = [R.ChunkIndex(s, e, off, 100, mi, 10 * len(mi), "", 100, 100) for off, s, e, mi in chunks]
    return SummaryIndex(chunk_indexes=cis, chunk_index_array=chunk_index_array(cis))


# five chunks, listed out of file order; B and C overlap, D has no times, E no Message Indexes
CHUNKS = summary(
    (3000, 300, 399, {1: 3100}),  # C: /1 only
    (1000, 100, 199, {1: 1100, 2: 1110}),  # A
    (2000, 150, 349, {2: 2100}),  # B: /2 only, overlaps A and C
    (4000, 0, 0, {1: 4100}),  # D: no times
    (5000, 500, 599, {}),  # E: no Message Indexes
)


def offsets(runs: list[PlannedRun]) -> list[int]:
    return [r.offset for r in runs]


@pytest.mark.parametrize(
    ("want", "window", "chunks"),
    [
        (None, (None, None), [3000, 1000, 2000, 4000, 5000]),
        (None, (100, 150), [1000, 4000]),  # end is exclusive: B starts at 150
        (None, (100, 151), [1000, 2000, 4000]),
        (None, (199, 200), [1000, 2000, 4000]),  # start is inclusive: A ends at 199
        (None, (200, 300), [2000, 4000]),
        (None, (350, 500), [3000, 4000]),
        (None, (600, None), [4000]),
        (None, (None, 100), [4000]),
        ({1}, (None, None), [3000, 1000, 4000, 5000]),
        ({2}, (None, None), [1000, 2000, 5000]),
        ({2}, (300, 400), [2000]),  # C and D have no /2; E is after the window
        ({1, 2}, (150, 160), [1000, 2000, 4000]),
        ({7}, (None, None), [5000]),
        (set(), (None, None), [5000]),
    ],
)
def test_summary_selection_and_window(want: set[int] | None, window: tuple[int | None, int | None], chunks: list[int]) -> None:
    plan = plan_read(CHUNKS, want, window)
    assert offsets(plan.runs) == chunks  # in Chunk Index order
    for r in plan.runs:
        assert r.chunk is not None and CHUNKS.chunk_indexes[r.chunk].chunk_start_offset == r.offset
        assert r.loose is None


def test_summary_claimed_ranges_ranks_and_window_positions() -> None:
    plan = plan_read(CHUNKS, {2}, (100, 300))
    assert plan.runs == [
        PlannedRun(100, 199, 0, 1000, 1),
        PlannedRun(150, 349, 1, 2000, 2),
    ]
    # every chunk whose times meet the window, wanted channels or not (a log-time read checks them)
    assert plan.in_window == [1, 2, 3]
    d = plan_read(CHUNKS, None, (None, None)).runs[3]
    assert (d.start, d.end, d.rank) == (0, MAX_TIME, 3)  # no times: read wherever
    # without a window a chunk without times keeps its (0, 0) range only in its index
    assert plan_read(CHUNKS, None, (None, None)).in_window == [0, 1, 2, 3, 4]


def test_two_indexes_of_one_chunk_get_two_ranks() -> None:
    idx = summary((2000, 10, 20, {1: 1}), (1000, 0, 9, {1: 1}), (2000, 10, 20, {1: 1}))
    runs = plan_read(idx, None).runs
    assert [(r.offset, r.rank) for r in runs] == [(2000, 1), (1000, 0), (2000, 2)]


@pytest.mark.parametrize(
    ("order", "reverse", "ranks"),
    [
        (None, False, [2, 0, 1, 3, 4]),
        ("file", False, [0, 1, 2, 3, 4]),
        ("file", True, [4, 3, 2, 1, 0]),
        # by claimed start (D has none: 0), then rank
        ("log_time", False, [3, 0, 1, 2, 4]),
        # reversed: by claimed end, latest first (D's is the largest), then rank, latest first
        ("log_time", True, [3, 4, 2, 1, 0]),
    ],
)
def test_read_order(order: Any, reverse: bool, ranks: list[int]) -> None:
    runs = plan_read(CHUNKS, None, (None, None), reverse, order).runs
    assert [r.rank for r in runs] == ranks
    if order is not None:
        assert read_order(plan_read(CHUNKS, None).runs, order, reverse) == runs


def scan_index() -> ScanIndex:
    """A scan: loose messages (rank 0), two overlapping chunks, one without times, loose again."""
    return ScanIndex(
        chunks=[(100, 50, 10, 30), (200, 50, 20, 40), (300, 50, 0, 0)],
        chunk_ranks=[1, 2, 3],
        loose=[(0, 5, 15, [20, 40, 60]), (4, 50, 60, [400, 450])],
    )


@pytest.mark.parametrize(
    ("window", "plan"),
    [
        (
            (None, None),
            [(5, 15, 0, 20, [20, 40, 60]), (10, 30, 1, 100, None), (20, 40, 2, 200, None), (0, MAX_TIME, 3, 300, None), (50, 60, 4, 400, [400, 450])],
        ),
        ((16, 20), [(10, 30, 1, 100, None), (0, MAX_TIME, 3, 300, None)]),
        ((15, 16), [(5, 15, 0, 20, [20, 40, 60]), (10, 30, 1, 100, None), (0, MAX_TIME, 3, 300, None)]),
        ((41, 50), [(0, MAX_TIME, 3, 300, None)]),
        ((60, None), [(0, MAX_TIME, 3, 300, None), (50, 60, 4, 400, [400, 450])]),
    ],
)
def test_scan_plan(window: tuple[int | None, int | None], plan: list[tuple[Any, ...]]) -> None:
    got = plan_read(scan_index(), None, window)
    assert [(r.start, r.end, r.rank, r.offset, r.loose) for r in got.runs] == plan  # file order
    assert all(r.chunk is None for r in got.runs)
    assert got.in_window == []
    # a scan has no Message Indexes: the selection does not narrow it
    assert plan_read(scan_index(), {99}, window).runs == got.runs


def test_scan_plan_orders() -> None:
    assert [r.rank for r in plan_read(scan_index(), None, (None, None), True, "file").runs] == [4, 3, 2, 1, 0]
    assert [r.rank for r in plan_read(scan_index(), None, (None, None), False, "log_time").runs] == [3, 0, 1, 2, 4]
    assert [r.rank for r in plan_read(scan_index(), None, (None, None), True, "log_time").runs] == [3, 4, 2, 1, 0]


# --- written files: a read loads exactly the planned chunks ----------------------------------------
def overlapping_rows() -> list[Row]:
    """Three topics in blocks of 20 messages, in chunks whose times overlap (the /d messages
    run behind the others)."""
    rows: list[Row] = []
    for i in range(240):
        t = TOPICS[(i // 20) % 3]
        lt = 1000 + 10 * i if t != "/d" else 1000 + 5 * i
        rows.append((t, lt, lt, i, bytes([i % 251]) * (40 + i % 7)))
    return rows


@pytest.fixture(scope="module")
def written() -> tuple[bytes, list[Row]]:
    rows = overlapping_rows()
    return to_bytes(rows, chunk_size=700, compression=None), rows


SELECTIONS = [None, ["/a"], ["/d"], ["/b/c", "/d"]]
WINDOWS = [(None, None), (1000, 1001), (1500, 1700), (2000, None), (None, 1100), (2400, 2500), (5000, None)]


@pytest.mark.parametrize("topics", SELECTIONS)
@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize(("order", "reverse"), [("file", False), ("file", True), ("log_time", False), ("log_time", True)])
def test_read_loads_the_planned_chunks(
    written: tuple[bytes, list[Row]], monkeypatch: pytest.MonkeyPatch, topics: list[str] | None, window: tuple[int | None, int | None], order: str, reverse: bool
) -> None:
    data, rows = written
    r = McapReader(MappedSource(None, data))
    assert len(r.chunk_indexes) > 5
    want = None if topics is None else {c.id for c in r.channels().values() if c.topic in topics}
    plan = plan_read(r.ctx.index, want, window)
    # the chunks claimed to meet the window, by brute force
    lo, hi = window[0] if window[0] is not None else -1, window[1] if window[1] is not None else 1 << 64
    brute = [
        ci.chunk_start_offset
        for ci in r.chunk_indexes
        if ci.message_end_time >= lo and ci.message_start_time < hi and (want is None or want & ci.message_index_offsets.keys())
    ]
    assert offsets(plan.runs) == brute
    loaded: list[int] = []
    orig = McapContext.chunk_data

    def spy(self: McapContext, off: int) -> Any:
        loaded.append(off)
        return orig(self, off)

    monkeypatch.setattr(McapContext, "chunk_data", spy)
    got = [key(m) for m in r.messages(topics=topics, start=window[0], end=window[1], order=order, reverse=reverse)]
    assert got == expected(rows, None if topics is None else set(topics), window[0], window[1], order, reverse)
    assert sorted(loaded) == sorted(offsets(plan.runs))
    if order == "file":
        assert loaded == offsets(plan_read(r.ctx.index, want, window, reverse, "file").runs)


@pytest.mark.parametrize("window", WINDOWS)
def test_scanned_file_loads_the_planned_runs(written: tuple[bytes, list[Row]], window: tuple[int | None, int | None]) -> None:
    rows = written[1]
    data = to_bytes(rows, chunk_size=700, compression=None, use_chunk_index=False)
    r = McapReader(MappedSource(None, data))
    assert not r.chunk_indexes
    plan = plan_read(r.ctx.scan(), None, window)
    assert all(s.loose is None for s in plan.runs)
    assert [s.rank for s in plan.runs] == sorted(s.rank for s in plan.runs)
    got = [key(m) for m in r.messages(start=window[0], end=window[1], order="file")]
    assert got == expected(rows, None, window[0], window[1], "file")
    loose = McapReader(MappedSource(None, to_bytes(rows[:30], use_chunking=False)))
    runs = plan_read(loose.ctx.scan(), None, (None, None)).runs
    assert len(runs) == 1 and runs[0].loose is not None and len(runs[0].loose) == 30
