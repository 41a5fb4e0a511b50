"""A rosbag2 ``.db3`` file opened for reading, safely: :class:`SqliteFile`, and the journal
and write-ahead log handling it needs (see :mod:`polybag.formats.rosbag2.sqlite` for why).

The input is opened read-only and ``immutable``; a hot rollback journal or a live
write-ahead log beside it is applied to a private copy (the input never written): the
journal played as SQLite plays it (:mod:`.sqlite_journal`), the log replayed by SQLite in
the copy (:func:`wal_has_commit` tells a live log from one with nothing to replay); a plain
read says so in a warning, a recovering read in its notes.
Only plain rosbag2 tables are read (no views, virtual tables or generated columns).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import struct
import tempfile
import warnings
from pathlib import Path
from typing import Any

from polybag.errors import FormatError, PolybagWarning

from .sqlite_journal import Journal, read_journal, restore_into, writer_lock

SQLITE_MAGIC = b"SQLite format 3\x00"
_READ_TABLES = {"messages", "topics", "message_definitions"}
_WAL_MAGICS = (bytes.fromhex("377f0682"), bytes.fromhex("377f0683"))
#: the memory (KiB) SQLite may use for its page cache and a sort before it spills to temporary files
SORT_CACHE_KIB = 16 << 10
# what SQLite raises on a damaged file: its own errors, and a UnicodeDecodeError (a ValueError)
# when an error message quotes undecodable bytes of the file
DB_ERRORS = (sqlite3.Error, ValueError)
_MMAP = 256 << 20


def db_text(b: bytes) -> str:
    """Text SQLite hands back (the connection's text factory): UTF-8, undecodable bytes replaced."""
    return b.decode("utf-8", "replace")


def db_str(v: Any) -> str:
    """A value from the database as text (None: empty)."""
    if v is None:
        return ""
    if isinstance(v, bytes):
        return db_text(v)
    return str(v)




#: WAL frames looked at for a committed transaction (a log with more before its first commit
#: is taken as live, as SQLite would replay it)
_MAX_WAL_FRAMES = 1 << 16


def _wal_checksum(data: bytes, big: bool, s0: int, s1: int) -> tuple[int, int]:
    """SQLite's WAL checksum of ``data`` (a multiple of 8 bytes) continuing from (s0, s1)."""
    words = struct.unpack(f"{'>' if big else '<'}{len(data) // 4}I", data)
    for i in range(0, len(words), 2):
        s0 = (s0 + words[i] + s1) & 0xFFFFFFFF
        s1 = (s1 + words[i + 1] + s0) & 0xFFFFFFFF
    return s0, s1


def wal_has_commit(f: Any) -> bool:
    """Whether the write-ahead log open as ``f`` (at its start) holds a committed transaction
    SQLite would replay: a valid header, then frames whose salts and chained checksums match
    it up to a commit frame.  An empty log, a header alone, or frames of an earlier log
    (other salts, a broken chain: what SQLite ignores) are not: the database is whole."""
    head = f.read(32)
    if len(head) < 32 or head[:4] not in _WAL_MAGICS:
        return False
    big = head[3] == 0x83
    page_size = struct.unpack(">I", head[8:12])[0]
    if page_size == 1:
        page_size = 65536
    if page_size < 512 or page_size > 65536 or page_size & (page_size - 1):
        return False
    s0, s1 = _wal_checksum(head[:24], big, 0, 0)
    if (s0, s1) != struct.unpack(">II", head[24:32]):
        return False
    salts = head[16:24]
    for _ in range(_MAX_WAL_FRAMES):
        frame = f.read(24 + page_size)
        if len(frame) < 24 + page_size or frame[8:16] != salts:
            return False
        s0, s1 = _wal_checksum(frame[:8] + frame[24:], big, s0, s1)
        if (s0, s1) != struct.unpack(">II", frame[16:24]):
            return False
        if struct.unpack(">I", frame[4:8])[0] != 0:  # the database size after a commit: a commit frame
            return True
    return True


def _open_regular(path: str, *, follow: bool = True) -> int:
    """A read-only descriptor of ``path``, which must be a regular file (never blocks on a
    FIFO; with ``follow`` False a symlink is refused too); OSError otherwise."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | (0 if follow else getattr(os, "O_NOFOLLOW", 0))
    fd = os.open(path, flags)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{path} is not a regular file")
    return fd


def _copy_regular(src: str, dst: str) -> None:
    """Copy the regular file ``src`` (a symlink at ``src`` itself is not followed unless it is
    the database, checked by the caller) to the new file ``dst``."""
    with os.fdopen(_open_regular(src, follow=not src.endswith(("-journal", "-wal"))), "rb") as fin:
        fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(fd, "wb") as fout:
            shutil.copyfileobj(fin, fout, 1 << 20)


def roll_back(journal: str, db: str) -> tuple[int, str]:
    """Roll the rollback journal ``journal`` back into the database file ``db`` (a private
    copy, replaced) as SQLite would, without SQLite (:mod:`.sqlite_journal`; a super-journal
    record is never read).  Returns the pages restored and a note (empty, or what stopped
    the rollback early)."""
    plan, note = _plan(journal, db, recover=True)
    if plan is None or plan.orig_pages is None:
        return 0, note
    with os.fdopen(_open_regular(journal, follow=False), "rb") as j, open(db + ".rolled", "xb") as out:
        pages = restore_into(plan, j, db, out)
    os.replace(db + ".rolled", db)
    return pages, note


def _plan(journal: str, db: str, *, recover: bool) -> tuple[Journal | None, str]:
    """The hot journal ``journal`` of the database ``db`` read (:func:`.sqlite_journal.read_journal`)
    and a note of what stopped it early.  Recovering, a journal polybag does not play (a
    header that is not sane, another page size) is a note and None; a plain read raises."""
    with open(db, "rb") as f:
        head = f.read(100)
    ps = int.from_bytes(head[16:18], "big") if len(head) >= 18 else 0
    ps = 65536 if ps == 1 else ps
    try:
        with os.fdopen(_open_regular(journal, follow=False), "rb") as j:
            plan = read_journal(j, journal, ps, super_ok=recover)
    except FormatError as e:
        if not recover:
            raise
        return None, f"; {e}: nothing restored"
    note = "".join(f"; {n}" for n in plan.notes)
    if plan.orig_pages == 0:
        note += "; it says the database was empty before: read as it is"
    return plan, note


class SqliteFile:
    """One ``.db3`` file opened for reading: ``conn`` (immutable, read-only; a private
    repaired copy's when a recovering read applied a journal or a log), the names of its
    ``tables`` and the columns of ``topics``.  Problems a recovering open notes go to
    ``errors``."""

    conn: sqlite3.Connection

    def __init__(self, path: str, *, recover: bool, errors: list[str]) -> None:
        self.path = path
        self.recover = recover
        self.errors = errors
        self.tmp: str | None = None  # the directory of a repaired copy
        self.read_path = path  # the file read: the input, or the repaired copy
        try:
            st = os.stat(path)
            if not stat.S_ISREG(st.st_mode):
                raise FormatError("not a regular file: refused", path)
            with open(path, "rb") as f:
                head = f.read(100)
        except OSError as e:
            raise FormatError(f"cannot open: {e.strerror or e}", path) from None
        if head[: len(SQLITE_MAGIC)] != SQLITE_MAGIC:
            raise FormatError("not an SQLite database (no 'SQLite format 3' header)", path, 0)
        nomem = False
        try:
            self.conn = self._connect(head)
            self.conn.text_factory = db_text
            self.tables = self._plain_tables()
            if not {"topics", "messages"} <= self.tables:
                raise FormatError("not a rosbag2 database: no 'topics' and 'messages' tables", path)
            self.topic_columns = {db_str(r[1]) for r in self.conn.execute("PRAGMA table_info(topics)")}
        except MemoryError:
            # SQLITE_NOMEM: SQLite refuses an allocation past its own limits (a damaged schema
            # record declaring a huge size: fuzz target db3_pages, 24 MB peak), raised below
            # without this exception as its context (no memory was in fact exhausted)
            self.close()
            nomem = True
        except DB_ERRORS as e:
            self.close()
            raise FormatError(f"damaged SQLite database: {e}", path) from None
        except BaseException:
            self.close()
            raise
        if nomem:
            raise FormatError("damaged SQLite database: SQLite refused to allocate what it declares (SQLITE_NOMEM)", path)

    def _plain_tables(self) -> set[str]:
        """The names of the database's tables; a FormatError when one of those read
        (``messages``, ``topics``, ``message_definitions``) is not a plain table: a view, a
        virtual table, a table with a generated (computed) column: what SQLite would hand
        back would not be stored in the file, so its size would be the file's choice."""
        tables: set[str] = set()
        for kind, name, sql in self.conn.execute("SELECT type, name, sql FROM sqlite_master"):
            name = db_str(name)
            if name.lower() not in _READ_TABLES:
                if kind == "table":
                    tables.add(name)
                continue
            if kind in ("index", "trigger"):
                continue  # an index's values are stored; a trigger never runs on a read-only file
            text = db_str(sql).lstrip().upper()
            if kind != "table" or not text.startswith("CREATE TABLE"):
                what = "a virtual table" if kind == "table" else f"a {db_str(kind)}"
                raise FormatError(f"{name!r} is {what}, not a plain rosbag2 table: refused", self.path)
            tables.add(name)
        for name in tables & _READ_TABLES:
            cols = self.conn.execute(f'PRAGMA table_xinfo("{name}")').fetchall()
            computed = [db_str(c[1]) for c in cols if c[6] != 0]
            if computed:
                raise FormatError(
                    f"table {name!r} has generated (computed) column(s) {', '.join(map(repr, computed))}:"
                    " not a rosbag2 table; refused",
                    self.path,
                )
        return tables

    def _connect(self, head: bytes) -> sqlite3.Connection:
        """The connection to the database, immutable: the input itself when nothing beside
        it is damage, else a private copy with the journal rolled back or the write-ahead
        log replayed (module notes); ``read_path`` is the file read."""
        journal, wal = self._side_files(head)
        target = self.path
        if journal is not None or wal is not None:
            target = self._repaired(journal, wal)
        self.read_path = target
        uri = Path(target).resolve().as_uri() + "?mode=ro&immutable=1"
        conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
        conn.execute(f"PRAGMA mmap_size={_MMAP}")  # pages read in place, not copied to the cache
        conn.execute("PRAGMA query_only=1")
        # SQLite's own advice for database files from untrusted sources ("Defense Against The
        # Dark Arts"): check every cell's size as a page is read (a damaged B-tree page is
        # SQLITE_CORRUPT, not a read out of bounds: fuzz target db3_pages crashed SQLite
        # 3.40.1 without it), and no schema-defined functions or views with side effects
        conn.execute("PRAGMA cell_size_check=ON")
        conn.execute("PRAGMA trusted_schema=OFF")
        # a sort SQLite needs (no timestamp index, a GROUP BY) spills to temporary files past
        # this much memory, so memory does not grow with the table
        conn.execute("PRAGMA temp_store=FILE")
        conn.execute(f"PRAGMA cache_size=-{SORT_CACHE_KIB}")
        return conn

    def _side_files(self, head: bytes) -> tuple[str | None, str | None]:
        """The hot journal and the live write-ahead log beside the database that are applied
        to a private copy (None: none, or ignored).  A ``-journal``/``-wal`` that is not a
        regular file is refused (recovering: noted and ignored); a journal whose database
        another process holds locked for writing is not hot (a writer at work: SQLite reads
        the database as it is too), unless that writer is writing the file right now
        (refused: read it again when it is done)."""
        found: dict[str, str | None] = {"-journal": None, "-wal": None}
        for suffix in found:
            side = self.path + suffix
            try:
                st = os.lstat(side)
            except FileNotFoundError:
                continue
            except OSError as e:
                self._refuse(f"cannot inspect it: {e.strerror or e}", side)
                continue
            if not stat.S_ISREG(st.st_mode):
                self._refuse("not a regular file (a symlink, a device or a FIFO): refused, never read", side)
                continue
            try:
                with os.fdopen(_open_regular(side, follow=False), "rb") as f:
                    if suffix == "-journal":
                        first = f.read(32)
                        live = bool(first) and first[0] != 0
                    else:  # (a log SQLite would not use, the database not in WAL mode: ignored)
                        live = head[18:20] == b"\x02\x02" and wal_has_commit(f)
            except OSError as e:
                self._refuse(f"cannot read it: {e.strerror or e}", side)
                continue
            if not live:
                # an empty journal or its header zeroed (PERSIST mode): nothing to roll back; an
                # empty write-ahead log (any read-only open of a WAL database leaves one, with a
                # -shm), a header alone or stale frames: nothing to replay
                continue
            if suffix == "-journal":
                lock = writer_lock(self.path)
                if lock == "exclusive":
                    self._refuse("its database is being written by another process right now: read it again when it is done", side)
                    continue
                if lock == "reserved":
                    self._note(f"{os.path.basename(self.path)}: another process is writing it; read as last committed (its journal is not hot)")
                    continue
            found[suffix] = side
        return found["-journal"], found["-wal"]

    def _refuse(self, why: str, side: str) -> None:
        if not self.recover:
            raise FormatError(why, side)
        self.errors.append(f"{side}: {why}; the database is read without it")

    def _note(self, text: str) -> None:
        """Say what was done to read the input (recovering: in ``errors``; else a warning)."""
        if self.recover:
            self.errors.append(f"{self.path}: {text}")
        else:
            warnings.warn(PolybagWarning(text), stacklevel=5)

    def _repaired(self, journal: str | None, wal: str | None) -> str:
        """A private copy of the database (in a new temporary directory) with ``journal``
        rolled back (:mod:`.sqlite_journal`: the input's bytes up to its size before the
        transaction, the journal's pages over them) and ``wal`` replayed by SQLite in the
        copy; the copy's path (the input itself when the journal holds nothing to roll back)."""
        plan: Journal | None = None
        note = ""
        if journal is not None:
            plan, note = _plan(journal, self.path, recover=self.recover)
            if plan is not None and plan.orig_pages == 0 and not self.recover:
                raise FormatError(
                    "rolling back the unfinished transaction of a killed writer leaves the database empty"
                    " (it was before that transaction): nothing was recorded in it",
                    journal,
                )
            if plan is None or not plan.orig_pages:
                self._note(f"{os.path.basename(journal)}: nothing to roll back{note}; read as it is")
                plan = None
                if wal is None:
                    return self.path
        try:
            need = os.stat(self.path).st_size + (os.stat(wal).st_size if wal is not None else 0)
            base = tempfile.gettempdir()
            free = shutil.disk_usage(base).free
            if need > free:
                raise FormatError(
                    f"reading past {os.path.basename(journal or wal or '')} needs a private copy of {need} bytes;"
                    f" {base} has {free} free (set TMPDIR to a larger place)",
                    self.path,
                )
            self.tmp = tempfile.mkdtemp(prefix="polybag-db3-")
            copy = os.path.join(self.tmp, "bag.db3")
            if plan is not None and journal is not None:
                with (
                    os.fdopen(_open_regular(journal, follow=False), "rb") as j,
                    os.fdopen(os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600), "wb") as out,
                ):
                    pages = restore_into(plan, j, self.path, out)
                if self.recover:
                    self.errors.append(
                        f"{self.path}: an interrupted write left {os.path.basename(journal)}; "
                        f"its transaction was rolled back in a copy ({pages} page(s) restored{note})"
                    )
                # (a warning when recovering too: a killed recording's NAME.active/ is read so)
                warnings.warn(
                    PolybagWarning(
                        f"{self.path}: rolled back an unfinished transaction from {os.path.basename(journal)}, {pages} pages"
                        f" (a killed writer; read from a private copy, the input untouched{note})"
                    ),
                    stacklevel=4,
                )
            else:
                _copy_regular(self.path, copy)
            if wal is not None:
                _copy_regular(wal, copy + "-wal")
                con = sqlite3.connect(copy, check_same_thread=False)  # the copy: SQLite replays the log
                try:
                    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                    con.execute("PRAGMA journal_mode=DELETE")  # the copy leaves WAL mode
                finally:
                    con.close()
                if self.recover:
                    self.errors.append(
                        f"{self.path}: an interrupted write left {os.path.basename(wal)}; "
                        "its committed transactions were replayed in a copy"
                    )
                warnings.warn(
                    PolybagWarning(
                        f"{self.path}: replayed the committed transactions in {os.path.basename(wal)} (a write-ahead log"
                        " not yet checkpointed; read from a private copy, the input untouched)"
                    ),
                    stacklevel=4,
                )
        except OSError as e:
            raise FormatError(f"cannot repair the database in a copy: {e.strerror or e}", self.path) from None
        except DB_ERRORS as e:
            raise FormatError(f"cannot replay the write-ahead log in a copy: {e}", wal or self.path) from None
        return copy

    def close(self) -> None:
        """Close the database and remove a repaired copy."""
        conn = getattr(self, "conn", None)
        if conn is not None:
            try:
                conn.close()
            except DB_ERRORS:
                pass
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None
