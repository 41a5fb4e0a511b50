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

It is a fast path, never the only path.  :meth:`PageTable.open` accepts only a database
that the caller opened immutable (no journal or write-ahead log beside it), with a sane
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

import mmap
import os
import sqlite3
import struct
from collections.abc import Iterator

import numpy as np

from polybag.errors import FormatError
from polybag.formats.rosbag2.sqlite_records import (
    INT_SIZE,
    INT_TYPE,
    GiveUp,
    all_int_types,
    be_int,
    be_ints,
    short_header,
    varint,
    varints,
    widths,
)

# bytes of leaf pages parsed per batch (1,024 pages of 4 KiB, ~50-200 small rows each; the
# batch's numpy temporaries take ~15x the bytes of its cell pointers)
BATCH_BYTES = 4 << 20
# selected rows kept in memory from the checking pass (40 bytes each)
KEEP_ROWS = 4_000_000
# a table of up to this many rows is kept parsed while the file is open (80 MB at most)
CACHE_ROWS = 2_000_000
_MAX_DEPTH = 40
_COLUMNS = [("id", "INTEGER", 1), ("topic_id", "INTEGER", 0), ("timestamp", "INTEGER", 0), ("data", "BLOB", 0)]
_U32 = struct.Struct(">I")


class Rows:
    """Parsed rows in row-id order: numpy columns plus the payloads of spilled cells."""

    __slots__ = ("rowid", "tid", "ts", "start", "size", "extra")

    def __init__(self, rowid: np.ndarray, tid: np.ndarray, ts: np.ndarray, start: np.ndarray, size: np.ndarray, extra: dict[int, bytes]) -> None:
        self.rowid = rowid
        self.tid = tid
        self.ts = ts
        self.start = start  # file offset of the payload; -1 where it spilled (in ``extra``)
        self.size = size
        self.extra = extra  # position in these rows -> the assembled payload

    def __len__(self) -> int:
        return len(self.rowid)

    def take(self, sel: np.ndarray) -> Rows:
        """The rows at ``sel`` (a boolean mask or positions), in that order."""
        pos = np.flatnonzero(sel) if sel.dtype == np.bool_ else sel
        extra: dict[int, bytes] = {}
        if self.extra:
            inv = np.full(len(self), -1, np.int64)
            inv[pos] = np.arange(len(pos))
            extra = {int(inv[k]): v for k, v in self.extra.items() if inv[k] >= 0}
        return Rows(self.rowid[pos], self.tid[pos], self.ts[pos], self.start[pos], self.size[pos], extra)

    @staticmethod
    def join(parts: list[Rows]) -> Rows:
        """Rows one after the other."""
        if len(parts) == 1:
            return parts[0]
        extra: dict[int, bytes] = {}
        at = 0
        for p in parts:
            extra.update({k + at: v for k, v in p.extra.items()})
            at += len(p)
        cat = np.concatenate
        return Rows(
            cat([p.rowid for p in parts]),
            cat([p.tid for p in parts]),
            cat([p.ts for p in parts]),
            cat([p.start for p in parts]),
            cat([p.size for p in parts]),
            extra,
        )


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

    def __init__(self, path: str, mm: mmap.mmap, page_size: int, usable: int, root: int, max_bytes: int | None = None) -> None:
        self.path = path
        self.max_bytes = (1 << 62) if max_bytes is None else max_bytes  # a payload over it: GiveUp
        self.mm = mm
        self.buf = np.frombuffer(mm, dtype=np.uint8)
        self.buf16 = self.buf[: len(self.buf) // 2 * 2].view(">u2")  # cell pointers: aligned
        self.ps = page_size
        self.usable = usable
        self.npages = len(mm) // page_size
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
        try:
            with open(path, "rb") as f:
                if os.fstat(f.fileno()).st_size < 512:
                    return None
                mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):
            return None
        head = mm[:100]
        ps = int.from_bytes(head[16:18], "big")
        ps = 65536 if ps == 1 else ps
        usable = ps - head[20]
        if ps < 512 or ps & (ps - 1) or usable < 480 or head[18] not in (1, 2) or head[19] not in (1, 2):
            mm.close()
            return None
        return cls(path, mm, ps, usable, got[0][0], max_bytes)

    # --- the B-tree ---------------------------------------------------------------------------
    def leaves(self) -> np.ndarray:
        """The table's leaf pages in key order (interior pages walked, each checked)."""
        if self._leaves is not None:
            return self._leaves
        out: list[np.ndarray] = []
        seen: set[int] = set()
        self._walk(self.root, 0, out, seen)
        self._leaves = np.concatenate(out) if out else np.zeros(0, np.int64)
        if len(self._leaves) and (len(np.unique(self._leaves)) != len(self._leaves) or seen & set(self._leaves.tolist())):
            raise GiveUp("a page is reached twice")
        return self._leaves

    def _page(self, pg: int) -> int:
        if not 2 <= pg <= self.npages:
            raise GiveUp(f"page {pg} is outside the file")
        return (pg - 1) * self.ps

    def _walk(self, pg: int, depth: int, out: list[np.ndarray], seen: set[int]) -> None:
        if depth > _MAX_DEPTH or pg in seen:
            raise GiveUp("a loop in the B-tree")
        base = self._page(pg)
        kind = self.mm[base]
        if kind == 13:
            out.append(np.array([pg], np.int64))
            return
        if kind != 5:
            raise GiveUp(f"page {pg} is not a table B-tree page")
        seen.add(pg)
        n = int.from_bytes(self.mm[base + 3 : base + 5], "big")
        right = _U32.unpack_from(self.mm, base + 8)[0]
        if 12 + 2 * n > self.usable:
            raise GiveUp(f"page {pg}: too many cells")
        ptrs = np.frombuffer(self.mm, ">u2", n, base + 12).astype(np.int64)
        if n and (int(ptrs.min()) < 12 + 2 * n or int(ptrs.max()) + 4 > self.usable):
            raise GiveUp(f"page {pg}: a cell outside the page")
        at = base + ptrs
        kids = self.buf[at[:, None] + np.arange(4)].view(">u4").ravel().astype(np.int64)
        # the children of the level above leaves are leaves: take them in one go when they are
        first = self._page(int(kids[0])) if n else None
        if n and self.mm[first] == 13:  # type: ignore[index]
            every = np.append(kids, right)
            if int(every.min()) < 2 or int(every.max()) > self.npages:
                raise GiveUp(f"page {pg}: a child outside the file")
            if not bool(np.all(self.buf[(every - 1) * self.ps] == 13)):
                raise GiveUp(f"page {pg}: children of mixed kinds")
            out.append(every)
            return
        for k in kids.tolist():
            self._walk(k, depth + 1, out, seen)
        self._walk(right, depth + 1, out, seen)

    # --- leaf pages -----------------------------------------------------------------------------
    def parse(self, pages: np.ndarray) -> Rows:
        """Every row of these leaf pages, in order (module notes: what is checked)."""
        buf, ps, u = self.buf, self.ps, self.usable
        base = (pages - 1) * ps
        n = (buf[base + 3].astype(np.int64) << 8) | buf[base + 4]
        if bool(np.any(8 + 2 * n > u)):
            raise GiveUp("a leaf page with too many cells")
        total = int(n.sum())
        pbase = np.repeat(base, n)
        pn = np.repeat(n, n)
        k = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(n) - n, n)
        off = self.buf16[(pbase >> 1) + 4 + k].astype(np.int64)
        if total and (bool(np.any(off < 8 + 2 * pn)) or bool(np.any(off >= u))):
            raise GiveUp("a cell outside its page")
        end = pbase + u
        cell = pbase + off
        psize, lp = varints(buf, cell, end)
        rowid, lr = varints(buf, cell + lp, end)
        if total > 1 and bool(np.any(rowid[1:] <= rowid[:-1])):
            raise GiveUp("row ids out of order")
        if total and (int(psize.min()) < 0 or int(psize.max()) > len(buf)):
            raise GiveUp("a payload larger than the file")
        pay = cell + lp + lr
        spill = psize > u - 35
        if not bool(spill.any()):  # the common case: every record wholly in its page
            tid, ts, start, size = self._records(pay, psize, end)
            if total and int(ts.min()) < 0:
                raise GiveUp("a negative timestamp")
            return Rows(rowid, tid, ts, start, size, {})
        tid = np.zeros(total, np.int64)
        ts = np.zeros(total, np.int64)
        start = np.full(total, -1, np.int64)
        size = np.zeros(total, np.int64)
        loc = np.flatnonzero(~spill)
        if len(loc):
            tid[loc], ts[loc], start[loc], size[loc] = self._records(pay[loc], psize[loc], end[loc])
        extra: dict[int, bytes] = {}
        used: set[int] = set()  # an overflow page serves one record once: assembled bytes <= the file
        for i in np.flatnonzero(spill).tolist():
            t, s, data = self._spilled(int(pay[i]), int(psize[i]), int(end[i]), used)
            tid[i], ts[i], size[i] = t, s, len(data)
            extra[i] = data
        if total and int(ts.min()) < 0:
            raise GiveUp("a negative timestamp")
        return Rows(rowid, tid, ts, start, size, extra)

    def _records(self, s: np.ndarray, p: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Records wholly in their pages (header, four serial types, two integers, a blob):
        their topic ids, timestamps, payload starts and sizes."""
        buf = self.buf
        if bool(np.any(s + p > end)):
            raise GiveUp("a record past the end of its page")
        m = short_header(buf, s)
        if m is not None:  # one byte each: the header is five bytes, read from one word
            h: int | np.ndarray = 5
            if bool(np.any(m[:, 0] != 5)) or bool(np.any(m[:, 1] != 0)):
                raise GiveUp("a record that is not (id, topic_id, timestamp, data)")
            t1, t2, t3 = m[:, 2], m[:, 3], m[:, 4]
            if not (bool(np.all(INT_TYPE[t1])) and bool(np.all(INT_TYPE[t2]))):
                raise GiveUp("topic_id or timestamp is not an integer")
        else:
            # the header's varints are checked together: their lengths add up to its size,
            # which lies within the record, which lies within its page
            hv, lh = varints(buf, s)
            t0, l0 = varints(buf, s + lh)
            t1, l1 = varints(buf, s + lh + l0)
            t2, l2 = varints(buf, s + lh + l0 + l1)
            t3, l3 = varints(buf, s + lh + l0 + l1 + l2)
            if bool(np.any(lh + l0 + l1 + l2 + l3 != hv)) or bool(np.any(hv > p)) or bool(np.any(t0 != 0)):
                raise GiveUp("a record that is not (id, topic_id, timestamp, data)")
            h = hv
            if not (all_int_types(t1) and all_int_types(t2)):
                raise GiveUp("topic_id or timestamp is not an integer")
        if bool(np.any(t3 < 12)) or bool(np.any(t3 & 1)):
            raise GiveUp("data is not a blob")
        n1, n2 = widths(t1), widths(t2)
        blob = (t3.astype(np.int64) - 12) >> 1
        if len(blob) and int(blob.max()) > self.max_bytes:
            raise GiveUp("a payload over max_chunk_bytes")
        if bool(np.any(h + n1 + n2 + blob != p)):
            raise GiveUp("a record whose lengths do not add up")
        v = s + h
        return be_ints(buf, v, t1), be_ints(buf, v + n1, t2), v + (n1 + n2), blob

    def _spilled(self, s: int, p: int, end: int, used: set[int]) -> tuple[int, int, bytes]:
        """A record whose payload goes on in overflow pages, assembled and parsed."""
        u, mm = self.usable, self.mm
        if p > self.max_bytes + 64:  # a record holds its payload, a header and two integers
            raise GiveUp("a payload over max_chunk_bytes")
        least = (u - 12) * 32 // 255 - 23
        keep = least + (p - least) % (u - 4)
        local = keep if keep <= u - 35 else least
        if s + local + 4 > end:
            raise GiveUp("a spilled record past the end of its page")
        parts = [mm[s : s + local]]
        got = local
        pg = _U32.unpack_from(mm, s + local)[0]
        while got < p:
            if pg in used:
                raise GiveUp(f"overflow page {pg} is used twice")
            used.add(pg)
            base = self._page(pg)
            take = min(u - 4, p - got)
            parts.append(mm[base + 4 : base + 4 + take])
            got += take
            pg = _U32.unpack_from(mm, base)[0]
        data = b"".join(parts)
        h, at = varint(data, 0)
        types = []
        for _ in range(4):
            t, at = varint(data, at)
            types.append(t)
        t0, t1, t2, t3 = types
        if at != h or t0 != 0 or t1 not in INT_SIZE or t2 not in INT_SIZE or t3 < 12 or t3 & 1:
            raise GiveUp("a spilled record that is not (id, topic_id, timestamp, data)")
        n1, n2 = INT_SIZE[t1], INT_SIZE[t2]
        if (t3 - 12) // 2 > self.max_bytes:
            raise GiveUp("a payload over max_chunk_bytes")
        if h + n1 + n2 + (t3 - 12) // 2 != p:
            raise GiveUp("a spilled record whose lengths do not add up")
        return be_int(data, h, t1), be_int(data, h + n1, t2), data[h + n1 + n2 :]

    # --- reading ----------------------------------------------------------------------------------
    def batches(self) -> Iterator[Rows]:
        """Every row, a batch of leaf pages at a time."""
        leaves = self.leaves()
        step = max(1, BATCH_BYTES // self.ps)
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
        step = max(1, BATCH_BYTES // self.ps)
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
        mm = self.mm
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
        self.buf = self.buf16 = np.zeros(0, np.uint8)
        self._cache = None
        try:
            self.mm.close()
        except BufferError:
            pass
