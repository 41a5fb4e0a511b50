"""rosbag2 ``sqlite3`` storage: the ``messages`` table read straight from the file's pages.

Why: the standard library's ``sqlite3`` hands every row to Python as a tuple of three new
objects, which costs three times what SQLite itself spends finding the rows (1M small
messages: 0.62 s of tuples against 0.23 s of SQLite, `bench/README.md`).  A rosbag2
database is written once and read many times, and its ``messages`` table is a plain rowid
table whose rows (``id INTEGER PRIMARY KEY, topic_id INTEGER, timestamp INTEGER, data
BLOB``) are laid out in the table's B-tree leaf pages as the SQLite file format documents.
This module walks that B-tree and parses a batch of leaf pages at a time in numpy: cell
pointers, varints, record headers and big-endian integers are gathered for every cell of the
batch at once, and a payload is a ``(start, size)`` in the mapped file; only cells whose
payload spills into overflow pages (large messages: few, each big) are assembled one by one.

The parts: the mapped file and its B-tree (:mod:`~polybag.formats.rosbag2.pages_btree`), the
leaf pages parsed into :class:`~polybag.formats.rosbag2.pages_leaves.Rows`
(:mod:`~polybag.formats.rosbag2.pages_leaves`), and here the selection, order and caching of
the rows (:class:`PageTable`).

It is a fast path, never the only path.  :meth:`PageTable.open` accepts only a database
that the caller opened immutable (the input, or its private copy with a killed writer's
journal rolled back or log replayed), with a sane
header and the ``messages`` table exactly as rosbag2 creates it.  Everything else in the
file is checked as it is read: a page that is not the B-tree page it should be, a page
reached twice, a cell pointer outside its page, a record whose header and lengths do not
add up, a column that is not an integer or blob, a negative timestamp, a topic id the
``topics`` table does not name, an overflow chain that leaves the file.  Any of these makes
the whole read give up (:class:`GiveUp`) *before anything is yielded*, and the caller reads
through SQLite, which reports the damage as it always has.  Nothing here raises anything
else on a damaged file: every index is bounds-checked before it is used.

Memory: the parsed columns take 40 bytes a selected row (at least as much as the row takes
in the file).  Up to :data:`KEEP_ROWS` selected rows are kept from the checking pass and
given out from memory; above that, the first pass only checks (and learns whether the rows
are in time order) and a second pass parses again batch by batch, so memory stays bounded
by a batch whatever the file holds.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import numpy as np

from polybag.errors import FormatError
from polybag.formats.rosbag2.pages_btree import DatabasePages, table_leaves
from polybag.formats.rosbag2.pages_leaves import Rows, parse_leaves
from polybag.formats.rosbag2.sqlite_records import GiveUp

# bytes of leaf pages parsed per batch (1,024 pages of 4 KiB, ~50-200 small rows each; the
# batch's numpy temporaries take ~15x the bytes of its cell pointers)
BATCH_BYTES = 4 << 20
# selected rows kept in memory from the checking pass (40 bytes each)
KEEP_ROWS = 4_000_000
# a table of up to this many rows is kept parsed while the file is open (80 MB at most)
CACHE_ROWS = 2_000_000
_COLUMNS = [("id", "INTEGER", 1), ("topic_id", "INTEGER", 0), ("timestamp", "INTEGER", 0), ("data", "BLOB", 0)]


def _in_order(parts: list[Rows]) -> bool:
    """Whether the rows of ``parts``, one batch after the other, are in time order."""
    last = -1
    for r in parts:
        ts = r.ts
        if len(ts):
            if int(ts[0]) < last or (len(ts) > 1 and bool(np.any(ts[1:] < ts[:-1]))):
                return False
            last = int(ts[-1])
    return True


class PageTable:
    """The ``messages`` table of one rosbag2 database, read from its pages (module notes)."""

    def __init__(self, db: DatabasePages, root: int, max_bytes: int | None = None) -> None:
        self.db = db
        self.path = db.path
        self.max_bytes = (1 << 62) if max_bytes is None else max_bytes  # a payload over it: GiveUp
        self.root = root
        self._leaves: np.ndarray | None = None
        self._cache: list[Rows] | None = None  # the whole table, parsed (CACHE_ROWS), in batches
        self._cache_in_order = True  # whether its rows are in time order
        self._cache_ids = np.zeros(0, np.int64)  # the known ids the cache was checked against

    @classmethod
    def open(cls, path: str, conn: sqlite3.Connection, max_bytes: int | None = None) -> PageTable | None:
        """The table of the database at ``path`` (opened immutable as ``conn``), or None when
        the file or the table is not what this module reads.  A row whose payload is over
        ``max_bytes`` makes a read give up (SQLite's path names it)."""
        try:
            cols = [(str(r[1]), str(r[2]).upper(), int(r[5])) for r in conn.execute("PRAGMA table_info(messages)")]
            got = conn.execute("SELECT rootpage FROM sqlite_master WHERE type='table' AND name='messages'").fetchall()
        except (sqlite3.Error, ValueError, TypeError):
            return None
        if cols != _COLUMNS or len(got) != 1 or not isinstance(got[0][0], int):
            return None
        db = DatabasePages.map(path)
        return None if db is None else cls(db, got[0][0], max_bytes)

    @property
    def buf(self) -> np.ndarray:
        """The file's bytes (uint8; empty once closed): payloads are ``(start, size)`` in it."""
        return self.db.buf

    def leaves(self) -> np.ndarray:
        """The table's leaf pages in key order (interior pages walked, each checked)."""
        if self._leaves is None:
            self._leaves = table_leaves(self.db, self.root)
        return self._leaves

    def parse(self, pages: np.ndarray) -> Rows:
        """Every row of these leaf pages, in order (module notes: what is checked)."""
        return parse_leaves(self.db, pages, self.max_bytes)

    # --- reading ----------------------------------------------------------------------------------
    def batches(self) -> Iterator[Rows]:
        """Every row, a batch of leaf pages at a time."""
        leaves = self.leaves()
        step = max(1, BATCH_BYTES // self.db.ps)
        for i in range(0, len(leaves), step):
            yield self.parse(leaves[i : i + step])

    def select(self, topic_ids: set[int] | None, known: set[int], order: str, reverse: bool) -> Iterator[Rows]:
        """The rows on ``topic_ids`` (every one when None), in log-time order (timestamp, then
        row id) or row-id order, reversed when asked: batches of rows.  Every row of the table
        is checked (a known topic id among them) before the first batch is given; raises
        :class:`GiveUp` before that when something is not as it should be.

        A table of up to :data:`CACHE_ROWS` rows is parsed once and kept while the file is
        open, so that reading it topic by topic (columns of every topic, an export) parses
        it once."""
        ids = np.array(sorted(known), np.int64)
        want = None if topic_ids is None else np.array(sorted(topic_ids), np.int64)
        if self._cache is not None:
            cache = self._cache
            if not np.array_equal(ids, self._cache_ids) and not all(bool(np.all(np.isin(r.tid, ids))) for r in cache):
                raise GiveUp("a row on a topic id the topics table does not have")
            parts = cache if want is None else [r.take(np.isin(r.tid, want)) for r in cache]
            in_order = self._cache_in_order or _in_order(parts)
            yield from self._ordered(parts, in_order, order, reverse)
            return
        kept: list[Rows] | None = []
        whole: list[Rows] | None = []  # every row, while the table may be small enough to keep
        count = total = 0
        last = -1
        in_order = True
        for rows in self.batches():
            if len(rows) and not bool(np.all(np.isin(rows.tid, ids))):
                raise GiveUp("a row on a topic id the topics table does not have")
            total += len(rows)
            if whole is not None:
                whole.append(rows)
                if total > CACHE_ROWS:
                    whole = None
            if want is not None:
                rows = rows.take(np.isin(rows.tid, want))
            if len(rows):
                ts = rows.ts
                if int(ts[0]) < last or (len(ts) > 1 and bool(np.any(ts[1:] < ts[:-1]))):
                    in_order = False
                last = int(ts[-1])
                count += len(rows)
                if kept is not None:
                    kept.append(rows)
                    if count > KEEP_ROWS:
                        kept = None  # too many to keep: a second pass parses them again
        if whole is not None:
            self._cache = whole
            self._cache_ids = ids  # every row's topic id is one of these
            self._cache_in_order = in_order if want is None else _in_order(whole)
            if want is None:
                kept = whole  # the same rows
        if kept is not None:
            yield from self._ordered(kept, in_order, order, reverse)
            return
        if order == "log_time" and not in_order:
            raise GiveUp("too many rows to sort in memory")  # SQLite's index gives the order
        yield from self._again(want, reverse)

    @staticmethod
    def _ordered(kept: list[Rows], in_order: bool, order: str, reverse: bool) -> Iterator[Rows]:
        """Kept rows, sorted by time (stable: ties in row-id order) when asked and needed."""
        if not kept:
            return
        if order != "log_time" or in_order:  # in order already: the batches as they are
            for rows in reversed(kept) if reverse else kept:
                if len(rows):
                    yield rows.take(np.arange(len(rows) - 1, -1, -1)) if reverse else rows
            return
        rows = Rows.join(kept)
        if order == "log_time" and not in_order:
            rows = rows.take(np.argsort(rows.ts, kind="stable"))
        if reverse:
            rows = rows.take(np.arange(len(rows) - 1, -1, -1))
        if len(rows):
            yield rows

    def _again(self, want: np.ndarray | None, reverse: bool) -> Iterator[Rows]:
        leaves = self.leaves()
        step = max(1, BATCH_BYTES // self.db.ps)
        spans = list(range(0, len(leaves), step))
        for i in reversed(spans) if reverse else spans:
            rows = self.parse(leaves[i : i + step])
            if want is not None:
                rows = rows.take(np.isin(rows.tid, want))
            if reverse:
                rows = rows.take(np.arange(len(rows) - 1, -1, -1))
            if len(rows):
                yield rows

    def payloads(self, rows: Rows, lo: int, hi: int) -> list[bytes]:
        """The payloads of ``rows[lo:hi]`` as bytes."""
        mm = self.db.mm
        if mm.closed:
            raise FormatError("the database was closed while its messages were read", self.path)
        a = rows.start[lo:hi]
        out = [mm[i:j] for i, j in zip(a.tolist(), (a + rows.size[lo:hi]).tolist())]
        if rows.extra:
            for k, v in rows.extra.items():
                if lo <= k < hi:
                    out[k - lo] = v
        return out

    def close(self) -> None:
        """Unmap the file (left to the garbage collector while a payload array still views it)."""
        self._cache = None
        self.db.close()
