"""A rosbag2 ``sqlite3`` database mapped for reading its pages (:class:`DatabasePages`: the
header's page geometry checked) and the leaf pages of a table's B-tree in key order
(:func:`table_leaves`: every interior page checked as it is walked).  What is not as it
should be is a :class:`~polybag.formats.rosbag2.sqlite_records.GiveUp`."""

from __future__ import annotations

import mmap
import os
import struct

import numpy as np

from polybag.formats.rosbag2.sqlite_records import GiveUp

_MAX_DEPTH = 40
#: a big-endian page number (a child pointer, the next overflow page)
U32 = struct.Struct(">I")


class DatabasePages:
    """The pages of one database file: ``mm`` (the mapped file), ``buf`` (its bytes as
    uint8), ``buf16`` (as big-endian 16-bit words: cell pointers are aligned), the page size
    ``ps``, the ``usable`` bytes of a page and the number of pages."""

    def __init__(self, path: str, mm: mmap.mmap, page_size: int, usable: int) -> None:
        self.path = path
        self.mm = mm
        self.buf = np.frombuffer(mm, dtype=np.uint8)
        self.buf16 = self.buf[: len(self.buf) // 2 * 2].view(">u2")  # cell pointers: aligned
        self.ps = page_size
        self.usable = usable
        self.npages = len(mm) // page_size

    @classmethod
    def map(cls, path: str) -> DatabasePages | None:
        """The pages of the database at ``path``, or None when it cannot be mapped or its
        header's page geometry is not sane."""
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
        return cls(path, mm, ps, usable)

    def offset(self, pg: int) -> int:
        """Where page ``pg`` starts in the file (page 1 holds the header: never a table's)."""
        if not 2 <= pg <= self.npages:
            raise GiveUp(f"page {pg} is outside the file")
        return (pg - 1) * self.ps

    def close(self) -> None:
        """Unmap the file (left to the garbage collector while a payload array still views it)."""
        self.buf = self.buf16 = np.zeros(0, np.uint8)
        try:
            self.mm.close()
        except BufferError:
            pass


def table_leaves(db: DatabasePages, root: int) -> np.ndarray:
    """The leaf pages of the table whose B-tree starts at page ``root``, in key order
    (interior pages walked, each checked)."""
    out: list[np.ndarray] = []
    seen: set[int] = set()
    _walk(db, root, 0, out, seen)
    leaves = np.concatenate(out) if out else np.zeros(0, np.int64)
    if len(leaves) and (len(np.unique(leaves)) != len(leaves) or seen & set(leaves.tolist())):
        raise GiveUp("a page is reached twice")
    return leaves


def _walk(db: DatabasePages, pg: int, depth: int, out: list[np.ndarray], seen: set[int]) -> None:
    if depth > _MAX_DEPTH or pg in seen:
        raise GiveUp("a loop in the B-tree")
    mm = db.mm
    base = db.offset(pg)
    kind = mm[base]
    if kind == 13:
        out.append(np.array([pg], np.int64))
        return
    if kind != 5:
        raise GiveUp(f"page {pg} is not a table B-tree page")
    seen.add(pg)
    n = int.from_bytes(mm[base + 3 : base + 5], "big")
    right = U32.unpack_from(mm, base + 8)[0]
    if 12 + 2 * n > db.usable:
        raise GiveUp(f"page {pg}: too many cells")
    ptrs = np.frombuffer(mm, ">u2", n, base + 12).astype(np.int64)
    if n and (int(ptrs.min()) < 12 + 2 * n or int(ptrs.max()) + 4 > db.usable):
        raise GiveUp(f"page {pg}: a cell outside the page")
    at = base + ptrs
    kids = db.buf[at[:, None] + np.arange(4)].view(">u4").ravel().astype(np.int64)
    # the children of the level above leaves are leaves: take them in one go when they are
    if n and mm[db.offset(int(kids[0]))] == 13:
        every = np.append(kids, right)
        if int(every.min()) < 2 or int(every.max()) > db.npages:
            raise GiveUp(f"page {pg}: a child outside the file")
        if not bool(np.all(db.buf[(every - 1) * db.ps] == 13)):
            raise GiveUp(f"page {pg}: children of mixed kinds")
        out.append(every)
        return
    for k in kids.tolist():
        _walk(db, k, depth + 1, out, seen)
    _walk(db, right, depth + 1, out, seen)
