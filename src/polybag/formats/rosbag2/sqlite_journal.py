"""A rosbag2 ``.db3``'s rollback journal read as SQLite reads it, without SQLite and without
writing the input (:func:`read_journal`, :func:`writer_lock`, :func:`restore_into`).

A recording killed during a commit leaves ``NAME.db3`` and ``NAME.db3-journal`` (a *hot*
journal: rosbag2 with ``journal_mode`` DELETE/TRUNCATE/PERSIST in its storage config, and
polybag's own sqlite3 writer).  SQLite, opening such a file, rolls the transaction back: it
WRITES the database and deletes the journal, and may delete a "super-journal" the journal
names.  polybag never lets SQLite see it (inputs are opened ``immutable``); it plays the
journal itself, following SQLite's ``pager.c`` (``hasHotJournal``, ``pager_playback``):

* hot: the journal exists, is not empty, its first byte is not zero (a PERSIST journal's
  zeroed header is not hot) and no other process holds the database's RESERVED lock (a
  writer still at work: :func:`writer_lock`);
* segments: a header (magic ``d9 d5 05 f9 20 a1 63 d7``, record count, checksum nonce, the
  database's size in pages before the transaction, sector size, page size) padded to the
  sector size, then records (page number, the page as it was, a checksum: the nonce plus
  every 200th byte of the page from the end); a count of ``0xFFFFFFFF`` means "to the end of
  the file"; the next header starts on the next sector;
* the first header's page and sector sizes must be sane powers of two (else SQLite reports
  the database corrupt: a :class:`FormatError` naming the journal and offset) and the page
  size the database's (polybag does not re-page a database: refused the same way);
* playback stops, keeping what it has, at a header without the magic, a short read (a
  truncated journal), a record for page 0 or the lock-byte page, or a record whose checksum
  fails; a record for a page past the original size is skipped; every other record is
  written in journal order (SQLite's hot-journal playback keeps no "done" set, so a later
  valid copy of a page wins: a writer journals a page once a transaction, so this only
  matters for hostile journals); the database is then cut to its size before the
  transaction;
* a journal ending in a super-journal record (only multi-database transactions write one;
  rosbag2 never does) is refused: SQLite would look the named file up, and delete it.

Everything is bounded by the real file sizes: at most ``journal size / (page size + 8)``
records are looked at, and the rolled-back database is never larger than the database file
and the pages the journal restores.
"""

from __future__ import annotations

import os
import struct
import sys
from dataclasses import dataclass, field
from typing import IO

from polybag.errors import FormatError

JOURNAL_MAGIC = bytes.fromhex("d9d505f920a163d7")
#: SQLite's lock bytes (the "pending byte" at 1 GiB, then RESERVED, then the SHARED range)
PENDING_BYTE = 0x40000000
RESERVED_BYTE = PENDING_BYTE + 1
SHARED_FIRST = PENDING_BYTE + 2
SHARED_SIZE = 510
#: SQLite's sector size before the journal header says otherwise (unix, power-safe overwrite)
_FIRST_SECTOR = 512
_MAX_SECTOR = 0x10000
_MAX_PAGE = 65536


@dataclass
class Journal:
    """A hot journal as SQLite plays it back: ``pages`` maps a page number to where the
    content SQLite leaves in it starts in the journal (its last valid record, page <= ``orig_pages``);
    ``orig_pages`` is the database's size in pages before the transaction (None: the journal
    holds nothing to play back); ``notes`` say where and why playback stopped early."""

    path: str
    page_size: int
    orig_pages: int | None = None
    pages: dict[int, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _super_journal(f: IO[bytes], size: int) -> bool:
    """Whether the journal ends in a valid super-journal record (SQLite's ``readSuperJournal``:
    the magic last, before it the checksum and length of the name, before the name the lock
    page's number)."""
    if size < 16:
        return False
    f.seek(size - 16)
    tail = f.read(16)
    if tail[8:] != JOURNAL_MAGIC:
        return False
    n, cksum = struct.unpack(">II", tail[:8])
    if n == 0 or n > min(size - 16, 4096):  # SQLite: at most a path name (mxPathname)
        return False
    f.seek(size - 16 - n)
    name = f.read(n)
    return len(name) == n and sum(name) & 0xFFFFFFFF == cksum and name[:1] != b"\0"


def read_journal(f: IO[bytes], path: str, db_page_size: int, *, super_ok: bool = False) -> Journal:
    """Play the hot journal open as ``f`` (``path`` names it) for a database of pages of
    ``db_page_size`` bytes, as SQLite would (module notes), without applying it.  Raises
    :class:`FormatError` (naming the journal and the offset) where SQLite would report
    corruption or polybag refuses.  ``super_ok`` (a recovering read): a super-journal record
    is not looked at (the journal's pages are played all the same)."""
    size = os.fstat(f.fileno()).st_size
    out = Journal(path, db_page_size)
    if not super_ok and _super_journal(f, size):
        raise FormatError(
            "a hot rollback journal that names a super-journal (a multi-database transaction; rosbag2 never"
            " writes one): refused, never played (`polybag recover` rolls it back in a copy without it)",
            path,
            size - 8,
        )
    if size < _FIRST_SECTOR:
        out.notes.append(f"shorter than one sector ({size} bytes): nothing to roll back")
        return out
    ps = db_page_size
    sector = _FIRST_SECTOR
    at = 0
    first = True
    lock_page = PENDING_BYTE // ps + 1 if ps else 0
    while True:
        at = -(-at // sector) * sector  # a header starts on a sector
        if at + sector > size or at + 28 > size:
            break
        f.seek(at)
        hdr = f.read(28)
        if hdr[:8] != JOURNAL_MAGIC:
            if first:
                out.notes.append(f"no journal header at offset {at}: nothing to roll back")
            break
        nrec, nonce, npages, jsector, jps = struct.unpack(">5I", hdr[8:28])
        if first:
            jps = jps or ps
            for bad, what, off in (
                (not (512 <= jps <= _MAX_PAGE and jps & (jps - 1) == 0), f"page size {jps}", 24),
                (not (32 <= jsector <= _MAX_SECTOR and jsector & (jsector - 1) == 0), f"sector size {jsector}", 20),
            ):
                if bad:
                    raise FormatError(
                        f"journal header: {what} is not a sane power of two: the database is corrupt (SQLite reports it so)",
                        path,
                        at + off,
                    )
            if jps != ps:
                raise FormatError(
                    f"journal header: page size {jps}, the database's is {ps}: refused (a rosbag2 database is never re-paged)",
                    path,
                    at + 24,
                )
            sector = jsector
            out.orig_pages = npages
            first = False
            if at + sector > size:
                break
        at += sector
        if nrec == 0xFFFFFFFF:
            nrec = (size - at) // (ps + 8)
        nrec = min(nrec, (size - at) // (ps + 8) + 1)  # bounded by the file: one more is a short read
        for _ in range(nrec):
            if at + ps + 8 > size:
                out.notes.append(f"the journal is cut short at offset {at}: playback stops there")
                return out
            f.seek(at)
            pgno = int.from_bytes(f.read(4), "big")
            if pgno == 0 or pgno == lock_page:
                out.notes.append(f"a record for page {pgno} at offset {at}: playback stops there")
                return out
            orig = out.orig_pages or 0
            if pgno > orig:  # past the original size: skipped
                at += ps + 8
                continue
            page = f.read(ps)
            want = int.from_bytes(f.read(4), "big")
            if (nonce + sum(page[ps - 200 :: -200])) & 0xFFFFFFFF != want:
                out.notes.append(f"the record at offset {at} (page {pgno}) fails its checksum: playback stops there")
                return out
            out.pages[pgno] = at + 4  # a later valid copy of a page is played over an earlier one
            at += ps + 8
    return out


def writer_lock(db: str) -> str | None:
    """Which lock another process holds on the database ``db`` (SQLite's POSIX advisory locks):
    ``"exclusive"`` (a writer is writing the file), ``"reserved"`` (a writer is in a
    transaction: its journal is not hot) or None (no writer; also where locks cannot be
    tested).  Only looks (``F_GETLK``): takes no lock."""
    if not sys.platform.startswith("linux"):
        return None
    import fcntl

    try:
        fd = os.open(db, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        # struct flock on Linux: short l_type, short l_whence, off_t l_start, off_t l_len, pid_t l_pid
        fmt = "hhqqi4x" if struct.calcsize("P") == 8 else "hhqqi"

        def held(kind: int, start: int, length: int) -> bool:
            """Whether another process holds a lock that would block a ``kind`` lock there."""
            got = fcntl.fcntl(fd, fcntl.F_GETLK, struct.pack(fmt, kind, os.SEEK_SET, start, length, 0))
            return bool(struct.unpack(fmt, got)[0] != fcntl.F_UNLCK)

        if held(fcntl.F_RDLCK, SHARED_FIRST, SHARED_SIZE):  # a write lock there: EXCLUSIVE
            return "exclusive"
        if held(fcntl.F_RDLCK, RESERVED_BYTE, 1):
            return "reserved"
    except OSError:
        return None
    finally:
        os.close(fd)
    return None


def restore_into(journal: Journal, f: IO[bytes], db: str, out: IO[bytes]) -> int:
    """Write the database ``db`` as the rollback leaves it into the new empty file ``out``:
    its bytes up to the original size, the journal's (open as ``f``) pages over them.  The
    result is never larger than the database file and the restored pages.  Returns the
    pages restored."""
    ps = journal.page_size
    orig = journal.orig_pages or 0
    with open(db, "rb") as src:
        have = os.fstat(src.fileno()).st_size
        keep = min(have, orig * ps)
        out.flush()
        left, at = keep, 0
        fast = hasattr(os, "copy_file_range")
        while left:  # in the kernel where it can (no copy through Python; a reflink on some file systems)
            n = 0
            if fast:
                try:
                    n = os.copy_file_range(src.fileno(), out.fileno(), min(left, 1 << 30), at, at)
                except OSError:
                    fast = False
            if not fast:
                src.seek(at)
                chunk = src.read(min(left, 8 << 20))
                out.seek(at)
                out.write(chunk)
                n = len(chunk)
            if n <= 0:
                break
            left -= n
            at += n
    end = keep
    for pgno, at in sorted(journal.pages.items()):
        f.seek(at)
        page = f.read(ps)
        out.seek((pgno - 1) * ps)
        out.write(page)
        end = max(end, pgno * ps)
    out.truncate(end)
    return len(journal.pages)


__all__ = ["JOURNAL_MAGIC", "Journal", "read_journal", "restore_into", "writer_lock"]
