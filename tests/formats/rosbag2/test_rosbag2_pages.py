"""The sqlite3 storage's ``messages`` table read straight from the database pages
(``formats/rosbag2/pages.py``): the same rows, values, payloads and order as SQLite gives,
over every shape SQLite writes (page sizes, integer widths, payloads that spill into
overflow pages, deleted rows, deep B-trees, rows out of time order); anything else makes it
give up before yielding and SQLite read the file; damaged files never raise anything but
polybag errors."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polybag
from polybag.errors import PolybagError
from polybag.formats.rosbag2 import pages, sqlite_records
from polybag.formats.rosbag2.pages import PageTable
from polybag.formats.rosbag2.sqlite_records import GiveUp
from polybag.formats.rosbag2.sqlite_writer import SCHEMA_SQL

TOPICS = [(1, "/a", "std_msgs/msg/String"), (2, "/b", "std_msgs/msg/Int32"), (7, "/c", "std_msgs/msg/Float64")]
Row = tuple[int, int, bytes]  # topic id, timestamp, data


def make_db(path: Path, rows: list[Row], page_size: int = 4096, schema: str = SCHEMA_SQL, delete: list[int] = ()) -> Path:  # type: ignore[assignment]
    """A rosbag2 database with ``rows`` inserted in that order (row ids 1, 2, ...)."""
    con = sqlite3.connect(path)
    con.execute(f"PRAGMA page_size={page_size}")
    for stmt in schema.split(";"):
        if stmt.strip():
            con.execute(stmt)
    con.execute("INSERT INTO schema VALUES (3, 'jazzy')")
    for tid, name, typ in TOPICS:
        con.execute("INSERT INTO topics VALUES (?, ?, ?, 'cdr', '', '')", (tid, name, typ))
    con.executemany("INSERT INTO messages (topic_id, timestamp, data) VALUES (?, ?, ?)", rows)
    for rid in delete:
        con.execute("DELETE FROM messages WHERE id = ?", (rid,))
    con.commit()
    con.close()
    return path


def sqlite_rows(db: Path, order: str = "log_time") -> list[tuple[int, int, int, bytes]]:
    """(id, topic id, timestamp, data) as SQLite reads them, scanning the table itself."""
    con = sqlite3.connect(db)
    got = con.execute("SELECT id, topic_id, timestamp, data FROM messages NOT INDEXED ORDER BY id").fetchall()
    con.close()
    if order == "log_time":
        got.sort(key=lambda r: r[2])  # stable: ties in row-id order
    return got


def page_rows(db: Path, topic_ids: set[int] | None = None, order: str = "log_time", reverse: bool = False) -> list[tuple[int, int, int, bytes]]:
    con = sqlite3.connect(db.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
    table = PageTable.open(str(db), con)
    assert table is not None
    try:
        out = []
        for rows in table.select(topic_ids, {t[0] for t in TOPICS}, order, reverse):
            datas = table.payloads(rows, 0, len(rows))
            out.extend(zip(rows.rowid.tolist(), rows.tid.tolist(), rows.ts.tolist(), datas, strict=True))
        return out
    finally:
        table.close()
        con.close()


def _table_gives_up(db: Path) -> bool:
    """Whether the page reader refuses the file: no table (the schema is not rosbag2's), or
    GiveUp before the first batch; False when it would read it."""
    ro = sqlite3.connect(db.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
    table = PageTable.open(str(db), ro)
    try:
        if table is None:
            return True
        try:
            next(table.select(None, {1, 2, 7}, "log_time", False), None)
        except GiveUp:
            return True
        return False
    finally:
        if table is not None:
            table.close()
        ro.close()


def _rows(n: int, seed: int = 1, sizes: tuple[int, ...] = (0, 1, 8, 30), shuffle_times: bool = False) -> list[Row]:
    rng = random.Random(seed)
    times = [1_000_000_000 + i * 1000 for i in range(n)]
    if shuffle_times:
        rng.shuffle(times)
    return [(rng.choice(TOPICS)[0], t, rng.randbytes(rng.choice(sizes))) for t in times]


@pytest.mark.parametrize("page_size", [512, 1024, 4096, 65536])
def test_every_row_as_sqlite_reads_it(tmp_path: Path, page_size: int) -> None:
    rows = _rows(3000, sizes=(0, 3, 40, 200, 480, 600, 5000, 70_000))  # spilled at every page size
    db = make_db(tmp_path / "b.db3", rows, page_size)
    want = sqlite_rows(db)
    assert page_rows(db) == want
    assert page_rows(db, order="file") == sqlite_rows(db, "file")
    assert page_rows(db, reverse=True) == want[::-1]
    assert page_rows(db, {2, 7}) == [r for r in want if r[1] in (2, 7)]


def test_integer_widths_and_time_order(tmp_path: Path) -> None:
    """Timestamps of every SQLite integer width (constants 0/1, 1-8 bytes), out of row order,
    with ties: sorted by time, ties by row id."""
    stamps = [0, 1, 2, 127, 128, 40_000, 8_000_000, 2_000_000_000, 1 << 40, (1 << 63) - 1, 5, 5, 1, 0]
    rows = [(TOPICS[i % 3][0], t, bytes([i])) for i, t in enumerate(stamps)]
    db = make_db(tmp_path / "b.db3", rows)
    got = page_rows(db)
    assert got == sqlite_rows(db)
    assert [r[2] for r in got] == sorted(stamps)


def test_deep_trees_and_deleted_rows(tmp_path: Path) -> None:
    rows = _rows(30_000, sizes=(0, 10, 100))
    db = make_db(tmp_path / "b.db3", rows, 512, delete=list(range(5, 30_000, 7)))
    con = sqlite3.connect(db)
    depth_pages = con.execute("SELECT count(*) FROM dbstat WHERE name='messages' AND pagetype='internal'").fetchone()
    con.close()
    assert depth_pages[0] > 10  # several levels of interior pages
    assert page_rows(db) == sqlite_rows(db)


def test_rows_out_of_time_order_are_sorted(tmp_path: Path) -> None:
    db = make_db(tmp_path / "b.db3", _rows(5000, shuffle_times=True))
    assert page_rows(db) == sqlite_rows(db)


def test_reads_through_polybag_equal_sqlite(tmp_path: Path) -> None:
    """``messages()`` and ``topic_payloads`` of a lone .db3 take the page path and give what
    SQLite gives (the payload blob is the mapped file itself when nothing spilled)."""
    db = make_db(tmp_path / "b.db3", _rows(2000))
    want = sqlite_rows(db)
    with polybag.open(db) as r:
        got = [(m.channel.topic, m.log_time, bytes(m.data)) for m in r.messages()]
        names = {t[0]: t[1] for t in TOPICS}
        assert got == [(names[t], ts, d) for _i, t, ts, d in want]
        assert r._storages[0].db.paged.table  # read from the pages, not through SQLite
        t, blob, starts, sizes = r.topic_payloads("/b")
        sel = [x for x in want if x[1] == 2]
        assert t.tolist() == [x[2] for x in sel]
        assert [blob[a : a + n].tobytes() for a, n in zip(starts.tolist(), sizes.tolist(), strict=True)] == [x[3] for x in sel]
        assert len(blob) == db.stat().st_size  # the mapped file, nothing copied
    # the payload array outlives the reader (the mapping is kept by the array)
    assert blob[starts[0] : starts[0] + sizes[0]].tobytes() == sel[0][3]


def test_topic_payloads_with_spilled_rows_are_joined(tmp_path: Path) -> None:
    db = make_db(tmp_path / "b.db3", _rows(300, sizes=(5, 9000)))
    want = [x for x in sqlite_rows(db) if x[1] == 1]
    with polybag.open(db) as r:
        t, blob, starts, sizes = r.topic_payloads("/a")
    assert t.tolist() == [x[2] for x in want]
    assert [blob[a : a + n].tobytes() for a, n in zip(starts.tolist(), sizes.tolist(), strict=True)] == [x[3] for x in want]
    assert len(blob) == sum(len(x[3]) for x in want)


@pytest.mark.parametrize(
    "schema_change",
    [
        ("data BLOB NOT NULL", "data BLOB NOT NULL, extra INTEGER"),  # another column
        ("topic_id INTEGER NOT NULL, timestamp INTEGER NOT NULL", "timestamp INTEGER NOT NULL, topic_id INTEGER NOT NULL"),
        ("id INTEGER PRIMARY KEY", "id INTEGER"),  # no rowid alias
    ],
)
def test_another_table_shape_is_read_through_sqlite(tmp_path: Path, schema_change: tuple[str, str]) -> None:
    schema = SCHEMA_SQL.replace(*schema_change)
    assert schema != SCHEMA_SQL
    db = tmp_path / "b.db3"
    con = sqlite3.connect(db)
    for stmt in schema.split(";"):
        if stmt.strip():
            con.execute(stmt)
    for tid, name, typ in TOPICS:
        con.execute("INSERT INTO topics VALUES (?, ?, ?, 'cdr', '', '')", (tid, name, typ))
    con.executemany("INSERT INTO messages (topic_id, timestamp, data) VALUES (?, ?, ?)", [(1, 10 + i, b"x%d" % i) for i in range(50)])
    con.commit()
    con.close()
    ro = sqlite3.connect(db.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
    assert PageTable.open(str(db), ro) is None
    ro.close()
    with polybag.open(db) as r:
        assert [bytes(m.data) for m in r.messages()] == [b"x%d" % i for i in range(50)]


@pytest.mark.parametrize(
    ("update", "error"),
    [
        ("UPDATE messages SET data = 'text' WHERE id = 20", False),  # text, taken as its bytes
        ("UPDATE messages SET timestamp = -5 WHERE id = 20", True),
        ("UPDATE messages SET timestamp = 1.5 WHERE id = 20", True),
        ("UPDATE messages SET topic_id = 99 WHERE id = 20", True),  # no such topic
    ],
)
def test_rows_that_are_not_messages_give_up_before_yielding(tmp_path: Path, update: str, error: bool) -> None:
    db = make_db(tmp_path / "b.db3", _rows(100))
    con = sqlite3.connect(db)
    con.execute(update)
    con.commit()
    con.close()
    assert _table_gives_up(db)
    # and the reader reads through SQLite, which names the row after every message before it
    n = 0
    try:
        with polybag.open(db) as r:
            for m in r.messages(order="file"):
                n += 1
                assert isinstance(m.data, bytes)
    except PolybagError:
        assert error
        assert n == 19
    else:
        assert not error
        assert n == 100


def test_tables_larger_than_what_is_kept_are_read_twice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Above KEEP_ROWS selected rows the checking pass keeps nothing and a second pass
    streams them; out of time order they are read through SQLite's index instead."""
    monkeypatch.setattr(pages, "KEEP_ROWS", 100)
    monkeypatch.setattr(pages, "CACHE_ROWS", 100)
    monkeypatch.setattr(pages, "BATCH_BYTES", 3 * 1024)
    db = make_db(tmp_path / "b.db3", _rows(4000), 1024)
    assert page_rows(db) == sqlite_rows(db)
    assert page_rows(db, reverse=True) == sqlite_rows(db)[::-1]
    assert page_rows(db, {1}, order="file") == [r for r in sqlite_rows(db, "file") if r[1] == 1]
    shuffled = make_db(tmp_path / "s.db3", _rows(4000, shuffle_times=True), 1024)
    assert _table_gives_up(shuffled)
    with polybag.open(shuffled) as r:
        assert [m.log_time for m in r.messages()] == [x[2] for x in sqlite_rows(shuffled)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rows=st.lists(
        st.tuples(st.sampled_from([1, 2, 7]), st.integers(0, (1 << 63) - 1), st.binary(max_size=1500)), max_size=120
    ),
    page_size=st.sampled_from([512, 1024, 4096]),
    drop=st.lists(st.integers(1, 120), max_size=10),
)
def test_any_table_reads_as_sqlite_reads_it(tmp_path_factory: pytest.TempPathFactory, rows: list[Row], page_size: int, drop: list[int]) -> None:
    db = make_db(tmp_path_factory.mktemp("h") / "b.db3", rows, page_size, delete=drop)
    assert page_rows(db) == sqlite_rows(db)
    assert page_rows(db, {7}, order="file", reverse=True) == [r for r in sqlite_rows(db, "file") if r[1] == 7][::-1]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_damaged_pages_give_sqlites_rows_or_a_polybag_error(tmp_path_factory: pytest.TempPathFactory, data: st.DataObject) -> None:
    """Bytes of the messages table's pages overwritten: the reader gives what SQLite reads of
    the damaged file, or a polybag error; nothing else escapes, nothing hangs.  What SQLite
    reads: the table itself, or the rows through the timestamp index, whose copy of a
    timestamp a damaged table may no longer agree with (the SQLite path orders by it)."""
    base = tmp_path_factory.mktemp("d")
    db = make_db(base / "b.db3", _rows(400, sizes=(0, 7, 60, 900, 3000)), 1024)
    raw = bytearray(db.read_bytes())
    for _ in range(data.draw(st.integers(1, 6))):
        at = data.draw(st.integers(4 * 1024, len(raw) - 1))  # past the schema pages
        raw[at] = data.draw(st.integers(0, 255))
    db.write_bytes(bytes(raw))
    try:
        with polybag.open(db) as r:
            got = [(m.log_time, bytes(m.data)) for m in r.messages()]
    except PolybagError:
        return
    views = _sqlite_views(db)
    if views:
        assert sorted(got) in views


def _sqlite_views(db: Path) -> list[list[tuple[int, bytes]]]:
    """The messages SQLite reads of ``db`` (topic ids known, blobs, times >= 0), sorted: by a
    scan of the table and through the timestamp index; a view SQLite cannot read is left out."""
    out = []
    con = sqlite3.connect(db)
    for q in (
        "SELECT topic_id, timestamp, data FROM messages NOT INDEXED ORDER BY id",
        "SELECT topic_id, timestamp, data FROM messages ORDER BY timestamp, id",
    ):
        try:
            rows = con.execute(q).fetchall()
        except (sqlite3.Error, ValueError):
            continue
        if all(t in (1, 2, 7) and isinstance(d, bytes) for t, _ts, d in rows):
            out.append(sorted((ts, d) for _t, ts, d in rows if isinstance(ts, int) and ts >= 0))
    con.close()
    return out


def test_reading_on_after_close_is_a_polybag_error(tmp_path: Path) -> None:
    db = make_db(tmp_path / "b.db3", _rows(5000))
    r = polybag.open(db)
    it = r.messages()
    next(it)
    r.close()
    with pytest.raises(PolybagError):
        for _m in it:
            pass


def test_varints_of_every_length() -> None:
    """The vectorized varint reader against a one-at-a-time one, lengths 1 to 9."""
    rng = np.random.default_rng(3)
    values = [0, 1, 127, 128, 16383, 16384, (1 << 21) - 1, 1 << 21, (1 << 56) - 1, 1 << 56, (1 << 64) - 1]
    values += rng.integers(0, 1 << 62, 200).tolist()
    enc = bytearray()
    pos = []
    for v in values:
        pos.append(len(enc))
        enc += _encode_varint(v)
    buf = np.frombuffer(bytes(enc) + b"\0" * 9, np.uint8)
    got, ln = sqlite_records.varints(buf, np.array(pos, np.int64), len(buf))
    assert got.view(np.uint64).tolist() == values
    assert (np.array(pos) + ln).tolist() == pos[1:] + [len(enc)]
    with pytest.raises(GiveUp):
        sqlite_records.varints(buf, np.array(pos, np.int64), 3)  # crosses its page's end


def _encode_varint(v: int) -> bytes:
    if v >= 1 << 56:
        out = [v & 0xFF]
        v >>= 8
        for _ in range(8):
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        return bytes(reversed(out))
    out = [v & 0x7F]
    v >>= 7
    while v:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    return bytes(reversed(out))


def _root(db: Path) -> int:
    con = sqlite3.connect(db)
    (root,) = con.execute("SELECT rootpage FROM sqlite_master WHERE name = 'messages'").fetchone()
    con.close()
    return int(root)


def _gives_up(db: Path) -> None:
    assert _table_gives_up(db)
    try:  # and the reader: SQLite's answer, or a polybag error
        with polybag.open(db) as r:
            sum(1 for _m in r.messages())
    except PolybagError:
        pass


@pytest.mark.parametrize(
    "damage",
    [
        "child_is_root",  # an interior page that points at itself: a loop
        "child_outside",  # a child page past the end of the file
        "right_is_sibling",  # two interior entries to one child: a page reached twice
        "cells_overflow",  # a cell count whose pointer array runs off the page
        "kind",  # the root is no B-tree page
    ],
)
def test_hostile_tree_shapes_give_up(tmp_path: Path, damage: str) -> None:
    db = make_db(tmp_path / "b.db3", _rows(3000, sizes=(10, 50)), 1024)
    root = _root(db)
    raw = bytearray(db.read_bytes())
    base = (root - 1) * 1024
    assert raw[base] == 5  # an interior table page
    first = int.from_bytes(raw[base + 12 : base + 14], "big")  # the first cell's offset
    if damage == "child_is_root":
        raw[base + first : base + first + 4] = root.to_bytes(4, "big")
    elif damage == "child_outside":
        raw[base + first : base + first + 4] = (10**6).to_bytes(4, "big")
    elif damage == "right_is_sibling":
        raw[base + 8 : base + 12] = raw[base + first : base + first + 4]
    elif damage == "cells_overflow":
        raw[base + 3 : base + 5] = (0xFFFF).to_bytes(2, "big")
    else:
        raw[base] = 0x42
    db.write_bytes(bytes(raw))
    _gives_up(db)


def test_an_overflow_chain_that_loops_gives_up(tmp_path: Path) -> None:
    db = make_db(tmp_path / "b.db3", [(1, 5, b"a" * 5000), (2, 6, b"b" * 5000)], 1024)
    raw = bytearray(db.read_bytes())
    # every overflow page of the first payload points back at the first overflow page
    con = sqlite3.connect(db)
    pages_of = con.execute("SELECT pageno FROM dbstat WHERE name = 'messages' AND pagetype = 'overflow' ORDER BY pageno").fetchall()
    con.close()
    first = pages_of[0][0]
    for (pg,) in pages_of:
        raw[(pg - 1) * 1024 : (pg - 1) * 1024 + 4] = first.to_bytes(4, "big")
    db.write_bytes(bytes(raw))
    _gives_up(db)


def test_an_absurd_header_is_read_through_sqlite(tmp_path: Path) -> None:
    db = make_db(tmp_path / "b.db3", _rows(50))
    raw = bytearray(db.read_bytes())
    raw[16:18] = (3000).to_bytes(2, "big")  # not a power of two
    db.write_bytes(bytes(raw))
    ro = sqlite3.connect(db.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
    try:
        assert PageTable.open(str(db), ro) is None
    except sqlite3.Error:
        pass  # SQLite itself refuses the file
    ro.close()


_BITS = st.integers(1, 64).flatmap(lambda b: st.integers(0, (1 << b) - 1))  # every varint length


@settings(max_examples=200, deadline=None)
@given(st.lists(_BITS, min_size=1, max_size=60), st.integers(0, 3), st.booleans())
def test_varints_of_every_length_decode_as_one_by_one(values: list[int], gap: int, short: bool) -> None:
    """The batch decoder (its 1-4 byte word path and its general path alike) gives what the
    one-by-one decoder gives, for values of every varint length, packed at any offset
    (``short``: every value below 2**28, so the word path takes them all)."""
    if short:
        values = [v & ((1 << 28) - 1) for v in values]
    blob = bytearray()
    pos = []
    for v in values:
        blob.extend(b"\xff" * gap)
        pos.append(len(blob))
        blob.extend(_encode_varint(v))
    blob.extend(b"\0" * 16)
    buf = np.frombuffer(bytes(blob), np.uint8)
    val, ln = sqlite_records.varints(buf, np.array(pos, np.int64))
    got = list(zip(val.view(np.uint64).tolist(), np.broadcast_to(ln, (len(pos),)).tolist()))
    want = []
    for p in pos:
        v, end = sqlite_records.varint(bytes(blob), p)
        want.append((v & ((1 << 64) - 1), end - p))
    assert got == want
    short = sqlite_records.short_varints(buf, np.array(pos, np.int64))
    if all(v < 1 << 28 for v in values):
        assert short is not None and short[0].tolist() == [w for w, _ in want]
    else:
        assert short is None


def test_short_header_is_refused_when_a_serial_type_takes_two_bytes() -> None:
    """A record header whose blob serial type needs two bytes (payload of 58 bytes or more)
    is read by the general path: the word path answers None for it, never a wrong type."""
    one = bytes([5, 0, 1, 6, 12 + 2 * 57]) + b"\0" * 16
    two = bytes([6, 0, 1, 6]) + _encode_varint(12 + 2 * 58) + b"\0" * 16
    buf1 = np.frombuffer(one, np.uint8)
    m = sqlite_records.short_header(buf1, np.array([0], np.int64))
    assert m is not None and m[0].tolist()[:5] == [5, 0, 1, 6, 126]
    assert sqlite_records.short_header(np.frombuffer(two, np.uint8), np.array([0], np.int64)) is None
    assert sqlite_records.short_header(buf1, np.array([len(one) - 7], np.int64)) is None  # the word would leave the file
