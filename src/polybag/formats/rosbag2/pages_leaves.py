"""The rows of a rosbag2 ``messages`` table's leaf pages, parsed a batch of pages at a time
in numpy (:func:`parse_leaves`: cell pointers, varints, record headers and big-endian
integers of every cell at once; a payload is a ``(start, size)`` in the mapped file, and
only cells whose payload spills into overflow pages are assembled one by one), as
:class:`Rows`.  What does not add up is a
:class:`~polybag.formats.rosbag2.sqlite_records.GiveUp`."""

from __future__ import annotations

import numpy as np

from polybag.formats.rosbag2.pages_btree import U32, DatabasePages
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


def parse_leaves(db: DatabasePages, pages: np.ndarray, max_bytes: int) -> Rows:
    """Every row of these leaf pages, in order (:mod:`polybag.formats.rosbag2.pages`: what is
    checked); a payload over ``max_bytes`` gives up."""
    buf, ps, u = db.buf, db.ps, db.usable
    base = (pages - 1) * ps
    n = (buf[base + 3].astype(np.int64) << 8) | buf[base + 4]
    if bool(np.any(8 + 2 * n > u)):
        raise GiveUp("a leaf page with too many cells")
    total = int(n.sum())
    pbase = np.repeat(base, n)
    pn = np.repeat(n, n)
    k = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(n) - n, n)
    off = db.buf16[(pbase >> 1) + 4 + k].astype(np.int64)
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
        tid, ts, start, size = _records(buf, pay, psize, end, max_bytes)
        if total and int(ts.min()) < 0:
            raise GiveUp("a negative timestamp")
        return Rows(rowid, tid, ts, start, size, {})
    tid = np.zeros(total, np.int64)
    ts = np.zeros(total, np.int64)
    start = np.full(total, -1, np.int64)
    size = np.zeros(total, np.int64)
    loc = np.flatnonzero(~spill)
    if len(loc):
        tid[loc], ts[loc], start[loc], size[loc] = _records(buf, pay[loc], psize[loc], end[loc], max_bytes)
    extra: dict[int, bytes] = {}
    used: set[int] = set()  # an overflow page serves one record once: assembled bytes <= the file
    for i in np.flatnonzero(spill).tolist():
        t, s, data = _spilled(db, int(pay[i]), int(psize[i]), int(end[i]), used, max_bytes)
        tid[i], ts[i], size[i] = t, s, len(data)
        extra[i] = data
    if total and int(ts.min()) < 0:
        raise GiveUp("a negative timestamp")
    return Rows(rowid, tid, ts, start, size, extra)


def _records(
    buf: np.ndarray, s: np.ndarray, p: np.ndarray, end: np.ndarray, max_bytes: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Records wholly in their pages (header, four serial types, two integers, a blob):
    their topic ids, timestamps, payload starts and sizes."""
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
    if len(blob) and int(blob.max()) > max_bytes:
        raise GiveUp("a payload over max_chunk_bytes")
    if bool(np.any(h + n1 + n2 + blob != p)):
        raise GiveUp("a record whose lengths do not add up")
    v = s + h
    return be_ints(buf, v, t1), be_ints(buf, v + n1, t2), v + (n1 + n2), blob


def _spilled(db: DatabasePages, s: int, p: int, end: int, used: set[int], max_bytes: int) -> tuple[int, int, bytes]:
    """A record whose payload goes on in overflow pages, assembled and parsed."""
    u, mm = db.usable, db.mm
    if p > max_bytes + 64:  # a record holds its payload, a header and two integers
        raise GiveUp("a payload over max_chunk_bytes")
    least = (u - 12) * 32 // 255 - 23
    keep = least + (p - least) % (u - 4)
    local = keep if keep <= u - 35 else least
    if s + local + 4 > end:
        raise GiveUp("a spilled record past the end of its page")
    parts = [mm[s : s + local]]
    got = local
    pg = U32.unpack_from(mm, s + local)[0]
    while got < p:
        if pg in used:
            raise GiveUp(f"overflow page {pg} is used twice")
        used.add(pg)
        base = db.offset(pg)
        take = min(u - 4, p - got)
        parts.append(mm[base + 4 : base + 4 + take])
        got += take
        pg = U32.unpack_from(mm, base)[0]
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
    if (t3 - 12) // 2 > max_bytes:
        raise GiveUp("a payload over max_chunk_bytes")
    if h + n1 + n2 + (t3 - 12) // 2 != p:
        raise GiveUp("a spilled record whose lengths do not add up")
    return be_int(data, h, t1), be_int(data, h + n1, t2), data[h + n1 + n2 :]
