"""rosbag2's ``sqlite3`` storage (``.db3``), read and written through the standard library.

A ``.db3`` holds the tables ``topics`` (id, name, type, serialization_format (from late
2018; ``cdr`` without it), offered_qos_profiles (schema >= 2), type_description_hash
(schema 4)), ``messages`` (id, topic_id, timestamp, data) with the index ``timestamp_idx``,
and from schema 3 on ``schema`` and ``metadata``, from schema 4 ``message_definitions``.

Reading never lets SQLite see a journal or write-ahead log that came with the input: a
storage file is opened read-only and ``immutable`` (SQLite then ignores any ``-journal``,
``-wal`` and ``-shm`` beside it, locks nothing and writes nothing), or read from its pages
(:mod:`polybag.formats.rosbag2.pages`).  A rollback journal may name a "super-journal" that
SQLite would delete after rolling back, anywhere on the machine; a write-ahead log is the
input's to choose too.  So a *hot* journal (non-empty, its first byte not zero) or a live
write-ahead log (the database in WAL mode, a valid WAL header and a committed transaction in
valid frames after it: :func:`wal_has_commit`) beside a database is damage
left by an interrupted writer: a plain read refuses it (:class:`FormatError` naming the
journal), and a recovering read (``polybag recover``) rolls the journal back itself, page by
checked page (:func:`roll_back`; the super-journal record is never read), into a private
copy of the database, or lets SQLite replay the write-ahead log in that copy (a WAL names
no other file).  An empty journal, a zeroed journal header (``PERSIST`` mode) and a WAL
with nothing to replay (empty, as any read-only open of a WAL database leaves it beside a
``-shm``; a header alone; stale frames SQLite ignores) are not damage.  A ``-journal`` or ``-wal`` that is not a regular file (a symlink, a
device, a FIFO) is refused and never opened or copied; a ``-shm`` is never read.  Topic
filters and time windows are ``WHERE`` clauses; log-time order is the ``timestamp`` index
(ties by row id, the order they were written); without that index only the keys (row id,
timestamp) are sorted, by SQLite, spilling to temporary files past :data:`SORT_CACHE_KIB`
(memory does not grow with the table; about 10 bytes of temporary disk a row), and the rows
are then looked up by row id a batch at a time.

Only the plain rosbag2 tables are read: ``messages``, ``topics`` and
``message_definitions`` must be ordinary tables (not views, not virtual tables) without
generated columns, so every value SQLite hands back is stored in the file; and a row whose
``data`` is over ``max_chunk_bytes`` is refused before its blob is fetched
(``length(data)`` is checked in the query).

Every ``sqlite3`` error becomes a :class:`~polybag.errors.FormatError` naming the file; a
read yields every message it could read before raising.  With ``recover`` a read goes
on past damage by row id and notes what it skipped.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import struct
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import Any

from polybag.errors import FormatError
from polybag.io.compression import LIMIT_HINT, ChunkLimitError, max_chunk_bytes

SQLITE_MAGIC = b"SQLite format 3\x00"
_READ_TABLES = {"messages", "topics", "message_definitions"}
JOURNAL_MAGIC = bytes.fromhex("d9d505f920a163d7")
_WAL_MAGICS = (bytes.fromhex("377f0682"), bytes.fromhex("377f0683"))
#: the memory (KiB) SQLite may use for its page cache and a sort before it spills to temporary files
SORT_CACHE_KIB = 16 << 10
_BATCH = 2048
_MAX_NOTES = 200
# what SQLite raises on a damaged file: its own errors, and a UnicodeDecodeError (a ValueError)
# when an error message quotes undecodable bytes of the file
_DB_ERRORS = (sqlite3.Error, ValueError)
_MMAP = 256 << 20
# SQLite checks that a row is a message (the reader then builds a batch without looking)
_OK = "(typeof(topic_id) = 'integer' AND typeof(timestamp) = 'integer' AND timestamp >= 0 AND typeof(data) = 'blob')"


def _fetched(cur: sqlite3.Cursor) -> Iterator[list[Any]]:
    """A query's rows in batches of :data:`_BATCH`."""
    while rows := cur.fetchmany(_BATCH):
        yield rows


@dataclass(frozen=True)
class TopicRow:
    """One row of ``topics``."""

    id: int
    name: str
    type: str
    serialization_format: str
    offered_qos_profiles: str
    type_description_hash: str


def _text(b: bytes) -> str:
    return b.decode("utf-8", "replace")


def _str(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bytes):
        return _text(v)
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
    copy) as SQLite would, without SQLite: each segment's header (magic, record count,
    checksum nonce, the database's size in pages before the transaction, sector and page
    size) and its page records (page number, the page as it was, a checksum over every
    200th byte) are checked, and every record up to the first that fails a check is written
    back; the file is then cut to its size before the transaction (never grown past the
    pages written).  The super-journal record at the journal's end is never read.  Returns
    the pages restored and a note (empty, or what stopped the rollback early)."""
    with open(db, "rb") as f:
        head = f.read(100)
    ps = int.from_bytes(head[16:18], "big") if len(head) >= 18 else 0
    ps = 65536 if ps == 1 else ps
    restored: set[int] = set()
    note = ""
    with os.fdopen(_open_regular(journal, follow=False), "rb") as j, open(db, "r+b") as out:
        size = os.fstat(j.fileno()).st_size
        end = os.fstat(out.fileno()).st_size
        at = 0
        orig: int | None = None
        while at + 28 <= size:
            j.seek(at)
            hdr = j.read(28)
            if hdr[:8] != JOURNAL_MAGIC:
                if orig is None:
                    note = "; its header is not a journal header: nothing restored"
                break
            nrec, nonce, npages, sector, jps = struct.unpack(">5I", hdr[8:28])
            if orig is None:
                if not (32 <= sector <= 65536 and sector & (sector - 1) == 0) or jps != ps or ps < 512:
                    note = "; its header does not match the database: nothing restored"
                    break
                orig = npages
            at += sector
            if nrec == 0xFFFFFFFF:
                nrec = (size - at) // (ps + 8)
            pending = (1 << 30) // ps + 1  # the page holding SQLite's lock bytes: never journaled
            stop = False
            for _ in range(nrec):
                if at + ps + 8 > size:
                    stop = True
                    break
                j.seek(at)
                rec = j.read(ps + 8)
                pgno = int.from_bytes(rec[:4], "big")
                page = rec[4 : 4 + ps]
                want = int.from_bytes(rec[4 + ps :], "big")
                # SQLite's checksum: the nonce plus the bytes at ps-200, ps-400, ... (above 0)
                if pgno in (0, pending) or (nonce + sum(page[ps - 200 :: -200])) & 0xFFFFFFFF != want:
                    stop = True
                    break
                if pgno <= orig and pgno not in restored:
                    out.seek((pgno - 1) * ps)
                    out.write(page)
                    restored.add(pgno)
                    end = max(end, pgno * ps)
                at += ps + 8
            if stop:
                note = "; the journal ends in a record that does not check out: the rest ignored"
                break
            at = -(-at // sector) * sector  # the next segment's header starts on a sector
        if orig:
            out.truncate(min(orig * ps, end))
        elif orig == 0:
            note += "; it says the database was empty before: read as it is"
    return len(restored), note


class SqliteStorage:
    """One ``.db3`` file opened for reading (see the module notes)."""

    def __init__(self, path: str, *, recover: bool = False, max_bytes: int | None = None) -> None:
        self.path = path
        self.recover = recover
        self.max_bytes = max_chunk_bytes(max_bytes)
        self.errors: list[str] = []
        self.noted = 0
        self._tmp: str | None = None
        self._checked: dict[tuple[Any, ...], bool] = {}
        self._pages: Any = None  # the PageTable (pages.py) once opened; False: not for this file
        # the data column as fetched: a blob over the cap comes as its length + 0.5 (a REAL: no
        # stored value is mistaken for it where it matters) and is never read; text, too, by bytes
        cap = self.max_bytes
        self._data = (
            f"iif(length(data) <= {cap} AND (typeof(data) != 'text' OR length(CAST(data AS BLOB)) <= {cap}),"
            " data, length(data) + 0.5)"
        )
        self._ok = f"({_OK} AND length(data) <= {cap})"
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
        try:
            self.conn = self._connect(head)
            self.conn.text_factory = _text
            self._tables = self._plain_tables()
            if not {"topics", "messages"} <= self._tables:
                raise FormatError("not a rosbag2 database: no 'topics' and 'messages' tables", path)
            self._topic_columns = {_str(r[1]) for r in self.conn.execute("PRAGMA table_info(topics)")}
        except _DB_ERRORS as e:
            self.close()
            raise FormatError(f"damaged SQLite database: {e}", path) from None
        except BaseException:
            self.close()
            raise

    def _plain_tables(self) -> set[str]:
        """The names of the database's tables; a FormatError when one of those read
        (``messages``, ``topics``, ``message_definitions``) is not a plain table: a view, a
        virtual table, a table with a generated (computed) column: what SQLite would hand
        back would not be stored in the file, so its size would be the file's choice."""
        tables: set[str] = set()
        for kind, name, sql in self.conn.execute("SELECT type, name, sql FROM sqlite_master"):
            name = _str(name)
            if name.lower() not in _READ_TABLES:
                if kind == "table":
                    tables.add(name)
                continue
            if kind in ("index", "trigger"):
                continue  # an index's values are stored; a trigger never runs on a read-only file
            text = _str(sql).lstrip().upper()
            if kind != "table" or not text.startswith("CREATE TABLE"):
                what = "a virtual table" if kind == "table" else f"a {_str(kind)}"
                raise FormatError(f"{name!r} is {what}, not a plain rosbag2 table: refused", self.path)
            tables.add(name)
        for name in tables & _READ_TABLES:
            cols = self.conn.execute(f'PRAGMA table_xinfo("{name}")').fetchall()
            computed = [_str(c[1]) for c in cols if c[6] != 0]
            if computed:
                raise FormatError(
                    f"table {name!r} has generated (computed) column(s) {', '.join(map(repr, computed))}:"
                    " not a rosbag2 table; refused",
                    self.path,
                )
        return tables

    def _connect(self, head: bytes) -> sqlite3.Connection:
        """The connection to the database, immutable: the input itself when nothing beside
        it is damage, else (recovering) a private copy with the journal rolled back or the
        write-ahead log replayed (module notes)."""
        journal, wal = self._side_files(head)
        target = self.path
        if journal is not None or wal is not None:
            target = self._repaired(journal, wal)
        uri = Path(target).resolve().as_uri() + "?mode=ro&immutable=1"
        conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
        conn.execute(f"PRAGMA mmap_size={_MMAP}")  # pages read in place, not copied to the cache
        conn.execute("PRAGMA query_only=1")
        # a sort SQLite needs (no timestamp index, a GROUP BY) spills to temporary files past
        # this much memory, so memory does not grow with the table
        conn.execute("PRAGMA temp_store=FILE")
        conn.execute(f"PRAGMA cache_size=-{SORT_CACHE_KIB}")
        return conn

    def _side_files(self, head: bytes) -> tuple[str | None, str | None]:
        """The hot journal and the live write-ahead log beside the database that a
        recovering read applies to a copy (None: none, or ignored); a plain read refuses
        either (FormatError naming it), and a ``-journal``/``-wal`` that is not a regular file
        is refused (recovering: noted and ignored)."""
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
                what = "a hot rollback journal (an interrupted write)"
            else:
                what = "a write-ahead log with transactions not yet in the database (an interrupted write)"
            if not self.recover:
                raise FormatError(
                    f"{what} beside {os.path.basename(self.path)}: the database may be inconsistent;"
                    " never applied to the input (`polybag recover` rebuilds the bag from a copy)",
                    side,
                )
            found[suffix] = side
        return found["-journal"], found["-wal"]

    def _refuse(self, why: str, side: str) -> None:
        if not self.recover:
            raise FormatError(why, side)
        self.errors.append(f"{side}: {why}; the database is read without it")

    def _repaired(self, journal: str | None, wal: str | None) -> str:
        """A private copy of the database with ``journal`` rolled back (:func:`roll_back`)
        and ``wal`` replayed by SQLite in the copy; the copy's path."""
        try:
            self._tmp = tempfile.mkdtemp(prefix="polybag-db3-")
            copy = os.path.join(self._tmp, "bag.db3")
            _copy_regular(self.path, copy)
            if journal is not None:
                pages, note = roll_back(journal, copy)
                self.errors.append(
                    f"{self.path}: an interrupted write left {os.path.basename(journal)}; "
                    f"its transaction was rolled back in a copy ({pages} page(s) restored{note})"
                )
            if wal is not None:
                _copy_regular(wal, copy + "-wal")
                con = sqlite3.connect(copy, check_same_thread=False)  # the copy: SQLite replays the log
                try:
                    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                    con.execute("PRAGMA journal_mode=DELETE")  # the copy leaves WAL mode
                finally:
                    con.close()
                self.errors.append(
                    f"{self.path}: an interrupted write left {os.path.basename(wal)}; "
                    "its committed transactions were replayed in a copy"
                )
        except OSError as e:
            raise FormatError(f"cannot repair the database in a copy: {e.strerror or e}", self.path) from None
        except _DB_ERRORS as e:
            raise FormatError(f"cannot replay the write-ahead log in a copy: {e}", wal or self.path) from None
        return copy

    # --- the tables ----------------------------------------------------------------------------
    def topics(self) -> list[TopicRow]:
        """The ``topics`` table (the columns the database's schema has; the others empty).
        The first schema (2018) has only id, name and type: its messages are ``cdr``."""
        cols = ["id", "name", "type"]
        for col in ("serialization_format", "offered_qos_profiles", "type_description_hash"):
            cols.append(col if col in self._topic_columns else "''")
        rows = self._all(f"SELECT {', '.join(cols)} FROM topics ORDER BY id")
        out = []
        for r in rows:
            if not isinstance(r[0], int):
                raise FormatError(f"topics: row id {r[0]!r} is not an integer", self.path)
            out.append(TopicRow(r[0], _str(r[1]), _str(r[2]), _str(r[3]) or "cdr", _str(r[4]), _str(r[5])))
        return out

    def definitions(self) -> dict[str, tuple[str, str]]:
        """``type -> (encoding, definition text)`` from ``message_definitions`` (schema 4)."""
        if "message_definitions" not in self._tables:
            return {}
        out: dict[str, tuple[str, str]] = {}
        q = "SELECT topic_type, encoding, encoded_message_definition FROM message_definitions ORDER BY id"
        for name, enc, text in self._all(q):
            out.setdefault(_str(name), (_str(enc), _str(text)))
        return out

    def counts(self) -> dict[int, int]:
        """Messages per topic id (a scan of the ``messages`` table's topic ids)."""
        return {
            int(t): int(n)
            for t, n in self._all("SELECT topic_id, COUNT(*) FROM messages GROUP BY topic_id")
            if isinstance(t, int)
        }

    def times(self) -> tuple[int | None, int | None]:
        """The first and last timestamp (the index's ends)."""
        rows = self._all("SELECT MIN(timestamp), MAX(timestamp) FROM messages")
        lo, hi = rows[0] if rows else (None, None)
        return (lo if isinstance(lo, int) else None, hi if isinstance(hi, int) else None)

    def _all(self, q: str, args: tuple[Any, ...] = ()) -> list[Any]:
        try:
            return self.conn.execute(q, args).fetchall()
        except _DB_ERRORS as e:
            raise FormatError(f"damaged SQLite database: {e}", self.path) from None

    # --- messages --------------------------------------------------------------------------------
    def messages(
        self,
        topic_ids: set[int] | None,
        start: int | None,
        end: int | None,
        reverse: bool,
        order: str,
        known: Iterable[int] = (),
    ) -> Iterator[list[Any]]:
        """Batches of the rows selected, in log-time order (``timestamp`` then row id) or file
        order (row id); reversed when asked.  Rows are ``(topic_id, timestamp, data)`` when
        SQLite checked every selected row beforehand (one aggregate pass: each is a message,
        on one of the ``known`` topic ids), else ``(topic_id, timestamp, data, ok)`` with
        ``ok`` that check per row; :meth:`checked` turns a row that is not into its error."""
        where, args = self._where(topic_ids, start, end)
        desc = " DESC" if reverse else ""
        if self.recover:
            yield from self._salvage(where, args, reverse, order, {int(k) for k in known})
            return
        by = f"timestamp{desc}, id{desc}" if order == "log_time" else f"id{desc}"
        ids = sorted({int(k) for k in known})
        if self._all_ok(where, args, ids):  # checked in one pass: the rows need no check column
            ok = ""
        elif ids:  # integers made here, not text from the file: safe in the query
            ok = f"({self._ok} AND topic_id IN ({', '.join(map(str, ids))}))"
        else:
            ok = self._ok
        cols = f"topic_id, timestamp, {self._data}{', ' + ok if ok else ''}"
        q = f"SELECT {cols} FROM messages{where} ORDER BY {by}"
        try:
            if order == "log_time" and self._sorts(q, args):
                yield from self._by_sorted_keys(cols, where, args, by)
                return
            yield from _fetched(self.conn.execute(q, args))
        except _DB_ERRORS as e:
            raise FormatError(f"damaged SQLite database: {e}", self.path) from None

    def _sorts(self, q: str, args: tuple[Any, ...]) -> bool:
        """Whether SQLite would sort the rows of query ``q`` (no ``timestamp`` index serves
        its order), from its query plan."""
        try:
            plan = self.conn.execute(f"EXPLAIN QUERY PLAN {q}", args).fetchall()
        except _DB_ERRORS:
            return False  # the query itself reports it
        return any("TEMP B-TREE" in _str(r[-1]).upper() for r in plan)

    def _by_sorted_keys(self, cols: str, where: str, args: tuple[Any, ...], by: str) -> Iterator[list[Any]]:
        """The rows of ``SELECT cols ... ORDER BY by`` when SQLite has to sort them: only the
        keys (row id, timestamp) are sorted (SQLite's sorter spills to temporary files past
        :data:`SORT_CACHE_KIB`: a few bytes a row on disk, not the payloads), then each batch
        of rows is looked up by row id.  A table without row ids sorts whole rows instead."""
        try:
            keys = self.conn.execute(f"SELECT rowid FROM messages{where} ORDER BY {by}", args)
        except _DB_ERRORS:
            yield from _fetched(self.conn.execute(f"SELECT {cols} FROM messages{where} ORDER BY {by}", args))
            return
        while batch := keys.fetchmany(_BATCH):
            ids = [r[0] for r in batch]
            got = self.conn.execute(
                f"SELECT rowid, {cols} FROM messages WHERE rowid IN ({', '.join('?' * len(ids))})", ids
            ).fetchall()
            rows = {r[0]: r[1:] for r in got}
            yield [rows[i] for i in ids if i in rows]

    def page_rows(
        self, topic_ids: set[int] | None, start: int | None, end: int | None, reverse: bool, order: str, known: Iterable[int]
    ) -> tuple[Any, Iterator[Any]] | None:
        """``(PageTable, batches of Rows)``: the selected rows read straight from the file's
        pages (:mod:`polybag.formats.rosbag2.pages`, 2-4x faster than rows through the
        ``sqlite3`` module), every row of the table checked before the first batch; None when
        the read goes through SQLite instead: recovering, a time window (the timestamp index
        serves it without reading the rest), a database rolled back in a copy, or a file or
        table the fast path does not read (found out before anything is given)."""
        if self.recover or start is not None or end is not None or self._tmp is not None or self._pages is False:
            return None
        from polybag.formats.rosbag2.pages import GiveUp, PageTable

        if self._pages is None:
            self._pages = PageTable.open(self.path, self.conn, self.max_bytes) or False
            if self._pages is False:
                return None
        table = self._pages
        batches = table.select(topic_ids, {int(k) for k in known}, order, reverse)
        try:
            first = next(batches, None)
        except GiveUp:
            self._pages = False  # SQLite reads it, and reports what is wrong
            table.close()
            return None
        return table, self._page_batches(first, batches)

    def _page_batches(self, first: Any, rest: Iterator[Any]) -> Iterator[Any]:
        from polybag.formats.rosbag2.pages import GiveUp

        if first is None:
            return
        yield first
        try:
            yield from rest
        except GiveUp as e:  # the second pass over an immutable file: the first one passed
            raise FormatError(f"the messages table changed while it was read: {e}", self.path) from None

    def payload_arrays(self, topic_ids: set[int], known: Iterable[int]) -> tuple[Any, Any, Any, Any] | None:
        """``(log times, blob, starts, sizes)`` of the topic ids in log-time order as numpy
        arrays, from the file's pages: ``blob`` is the mapped file itself when no payload
        spilled into overflow pages (nothing copied), else the payloads joined.  None: not
        from the pages (:meth:`page_rows`)."""
        import numpy as np

        from polybag.formats.rosbag2.pages import Rows
        from polybag.formats.shared.payloads import packed

        got = self.page_rows(topic_ids, None, None, False, "log_time", known)
        if got is None:
            return None
        table, batches = got
        parts = list(batches)
        if not parts:
            e = np.zeros(0, np.int64)
            return e.astype(np.uint64), np.zeros(0, np.uint8), e, e
        rows = Rows.join(parts)
        times = rows.ts.astype(np.uint64)
        if not rows.extra:
            return times, table.buf, rows.start, rows.size
        return (times, *packed(table.payloads(rows, 0, len(rows))))

    def _all_ok(self, where: str, args: tuple[Any, ...], ids: list[int]) -> bool:
        """Whether every selected row is a message on one of the topic ``ids`` (any id when
        none are given), asked of SQLite in one aggregate pass: a column of checks on every
        row costs more than this pass (the whole table's answer is kept: the file is opened
        read-only)."""
        if "timestamp" not in where:
            where, args = "", ()  # a topic selection: the whole table, checked once for all
        key = (where, args, tuple(ids))
        if key in self._checked:
            return self._checked[key]
        q = f"SELECT SUM(NOT {self._ok}), MIN(topic_id), MAX(topic_id) FROM messages{where}"
        try:
            bad, lo, hi = self.conn.execute(q, args).fetchone()
        except _DB_ERRORS:
            return False  # the read itself reports the damage
        good = not bad
        if good and ids and isinstance(lo, int) and isinstance(hi, int):
            have = set(ids)
            good = hi - lo < 1 << 16 and all(k in have for k in range(lo, hi + 1))
        if not where:
            self._checked[key] = good
            if good and ids:
                self._checked[("", (), ())] = True
        return good

    def time_buckets(self, topic_ids: set[int] | None, buckets: int = 64) -> list[tuple[int, int, int]]:
        """``(first, last log time, count)`` of the selected messages in up to ``buckets``
        equal spans of time, computed by SQLite (the timestamp index alone when no topic is
        selected), for planners that split a read."""
        where, args = self._where(topic_ids, None, None)
        lo_hi = self._all(f"SELECT MIN(timestamp), MAX(timestamp) FROM messages{where}", args)
        lo, hi = lo_hi[0] if lo_hi else (None, None)
        if not isinstance(lo, int) or not isinstance(hi, int):
            return []
        width = max(1, (hi - lo) // max(1, buckets) + 1)
        q = (
            f"SELECT MIN(timestamp), MAX(timestamp), COUNT(*) FROM messages{where} "
            "GROUP BY (timestamp - ?) / ? ORDER BY 1"
        )
        rows = self._all(q, (*args, lo, width))
        return [(int(a), int(b), int(n)) for a, b, n in rows if isinstance(a, int) and isinstance(b, int)]

    def payloads(self, topic_ids: set[int]) -> tuple[Sequence[int], Sequence[bytes]]:
        """Log times and payloads of the topic ids, in log-time order (ties by row id).

        The rows come in row-id order (a scan of the table: no walk of the timestamp index
        with a table lookup per row) and are sorted by time afterwards when they are not in
        order already (a stable sort, so equal times stay in row-id order).  Their types are
        checked on the columns as Python sees them; a row that is not a message sends the
        read through the checked query, which names it."""
        import numpy as np

        where, args = self._where(topic_ids, None, None)
        try:
            rows = self.conn.execute(f"SELECT timestamp, {self._data} FROM messages{where} ORDER BY id", args).fetchall()
        except _DB_ERRORS as e:
            raise FormatError(f"damaged SQLite database: {e}", self.path) from None
        if not rows:
            return [], []
        times = list(map(itemgetter(0), rows))  # (zip(*rows) costs 5x more)
        datas = list(map(itemgetter(1), rows))
        del rows
        if set(map(type, times)) != {int} or set(map(type, datas)) != {bytes}:
            return self._checked_payloads(where, args)
        t = np.array(times, dtype=np.int64)  # SQLite integers are 64-bit: they fit
        if int(t.min()) < 0:
            return self._checked_payloads(where, args)
        if len(t) > 1 and bool((t[1:] < t[:-1]).any()):
            order = np.argsort(t, kind="stable").tolist()
            return [times[i] for i in order], [datas[i] for i in order]
        return times, datas

    def _checked_payloads(self, where: str, args: tuple[Any, ...]) -> tuple[list[int], list[bytes]]:
        """:meth:`payloads` with every row checked as :meth:`messages` checks it (text data
        is taken as its bytes); the first row that is not a message is a FormatError."""
        q = f"SELECT topic_id, timestamp, {self._data} FROM messages{where} ORDER BY timestamp, id"
        try:
            rows = [self.checked(r) for r in self.conn.execute(q, args).fetchall()]
        except _DB_ERRORS as e:
            raise FormatError(f"damaged SQLite database: {e}", self.path) from None
        return [r[1] for r in rows], [r[2] for r in rows]

    def _where(self, topic_ids: set[int] | None, start: int | None, end: int | None) -> tuple[str, tuple[Any, ...]]:
        conds: list[str] = []
        args: list[Any] = []
        if topic_ids is not None:
            ids = sorted(topic_ids)
            conds.append(f"topic_id IN ({', '.join('?' * len(ids))})" if ids else "0")
            args.extend(ids)
        if start is not None:
            conds.append("timestamp >= ?")
            args.append(min(start, (1 << 63) - 1))
        if end is not None:
            conds.append("timestamp < ?")
            args.append(min(end, (1 << 63) - 1))
        return (" WHERE " + " AND ".join(conds) if conds else ""), tuple(args)

    def checked(self, row: Any) -> tuple[int, int, bytes]:
        """A row as ``(topic_id, timestamp, data)``; a FormatError saying what is wrong."""
        tid, ts, data = row[:3]
        if not isinstance(tid, int) or not isinstance(ts, int) or ts < 0:
            raise FormatError(
                f"messages: row with topic_id {tid!r}, timestamp {ts!r} is not a message", self.path
            )
        if not isinstance(data, bytes):
            if isinstance(data, float) and data > self.max_bytes:  # the query's stand-in for a big blob
                raise ChunkLimitError(
                    f"messages: the row at timestamp {ts} holds {int(data)} bytes, over the cap of"
                    f" {self.max_bytes} ({LIMIT_HINT})",
                    self.path,
                )
            if isinstance(data, str):
                data = data.encode("utf-8", "surrogateescape")
            else:
                raise FormatError(f"messages: row at timestamp {ts} has no data", self.path)
        return tid, ts, data

    def _salvage(
        self, where: str, args: tuple[Any, ...], reverse: bool, order: str, known: set[int]
    ) -> Iterator[list[tuple[int, int, bytes, int]]]:
        """A recovering read, streamed: log-time order through the index while the index
        reads, then (or for file order) a walk in row-id order that steps past damaged
        pages; rows that are not messages and what the walk cannot reach are reported in
        :attr:`errors`, never raised.  After damage the rest comes in row-id order."""
        last: tuple[int, int] | None = None  # (timestamp, id) of the last row given
        if order == "log_time":
            desc = " DESC" if reverse else ""
            q = f"SELECT topic_id, timestamp, {self._data}, id FROM messages{where} ORDER BY timestamp{desc}, id{desc}"
            try:
                for rows in _fetched(self.conn.execute(q, args)):
                    yield self._good(rows, known)
                    r = rows[-1]
                    last = (r[1], r[3]) if isinstance(r[1], int) and isinstance(r[3], int) else last
                return
            except _DB_ERRORS as e:
                self.note(f"{self.path}: the timestamp index is damaged ({e}); the rest in row order")

        def after(r: Any) -> bool:  # not given yet by the index pass
            if last is None or not isinstance(r[1], int):
                return True
            return (r[1], r[3]) < last if reverse else (r[1], r[3]) > last

        cond = where + (" AND " if where else " WHERE ") + "id > ?"
        pos = -(1 << 63)
        skips = 0
        walked = 0
        try:
            limit = os.path.getsize(self.path) // 4 + _BATCH  # a row takes more than 4 bytes
        except OSError:
            limit = 1 << 40
        while True:
            try:
                got = self.conn.execute(
                    f"SELECT topic_id, timestamp, {self._data}, id FROM messages{cond} ORDER BY id LIMIT {_BATCH}",
                    (*args, pos),
                ).fetchall()
            except _DB_ERRORS as e:
                skips += 1
                self.note(f"{self.path}: damaged rows after id {pos}: {e}")
                if skips > 40:
                    return
                pos = pos + (1 << skips) if pos >= 0 else 0
                continue
            if not got:
                return
            ids = [r[3] for r in got if isinstance(r[3], int)]
            nxt = max(ids) if ids else pos
            # a damaged b-tree may give rows out of order: the walk always moves forward
            pos = nxt if nxt > pos else (pos + _BATCH if pos >= 0 else 0)
            walked += len(got)
            if walked > limit:  # more rows than the file can hold: a loop in damaged pages
                self.note(f"{self.path}: the row walk found more rows than the file can hold; stopped")
                return
            yield self._good([r for r in got if after(r)], known)

    def note(self, text: str) -> None:
        """Record damage a recovering read met; past :data:`_MAX_NOTES` only counted."""
        self.noted += 1
        if self.noted <= _MAX_NOTES:
            self.errors.append(text)
        elif self.noted == _MAX_NOTES + 1:
            self.errors.append(f"{self.path}: more damage; only the first {_MAX_NOTES} places are listed")

    def _good(self, rows: list[Any], known: set[int]) -> list[tuple[int, int, bytes, int]]:
        """The rows that are messages, each with its check flag: 0 for a topic id not ``known``
        (when any are), which the caller looks up (and notes) row by row."""
        out = []
        for r in rows:
            try:
                tid, ts, data = self.checked(r)
            except FormatError as e:
                self.note(str(e))
                continue
            out.append((tid, ts, data, 1 if not known or tid in known else 0))
        return out

    def close(self) -> None:
        """Close the database and remove a temporary copy."""
        if self._pages:
            self._pages.close()
        self._pages = False
        conn = getattr(self, "conn", None)
        if conn is not None:
            try:
                conn.close()
            except _DB_ERRORS:
                pass
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None


# --- writing --------------------------------------------------------------------------------------
SCHEMA_SQL = """
CREATE TABLE schema(schema_version INTEGER PRIMARY KEY, ros_distro TEXT NOT NULL);
CREATE TABLE metadata(id INTEGER PRIMARY KEY, metadata_version INTEGER NOT NULL, metadata TEXT NOT NULL);
CREATE TABLE topics(id INTEGER PRIMARY KEY, name TEXT NOT NULL, type TEXT NOT NULL,
  serialization_format TEXT NOT NULL, offered_qos_profiles TEXT NOT NULL, type_description_hash TEXT NOT NULL);
CREATE TABLE message_definitions(id INTEGER PRIMARY KEY, topic_type TEXT NOT NULL, encoding TEXT NOT NULL,
  encoded_message_definition TEXT NOT NULL, type_description_hash TEXT NOT NULL);
CREATE TABLE messages(id INTEGER PRIMARY KEY, topic_id INTEGER NOT NULL, timestamp INTEGER NOT NULL, data BLOB NOT NULL);
CREATE INDEX timestamp_idx ON messages (timestamp ASC);
"""


class SqliteStorageWriter:
    """A new ``.db3`` (schema 4).  Messages go in batches, each a committed transaction,
    so a killed writer leaves every batch before the last one readable."""

    def __init__(self, path: str, *, ros_distro: str = "polybag", batch_bytes: int = 8 << 20) -> None:
        self.path = path
        self.batch_bytes = batch_bytes
        self._rows: list[tuple[int, int, bytes | memoryview]] = []
        self._pending = 0
        try:
            self.conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self.conn.execute("PRAGMA journal_mode=DELETE")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn.execute("BEGIN")
            for stmt in SCHEMA_SQL.split(";"):
                if stmt.strip():
                    self.conn.execute(stmt)
            self.conn.execute("INSERT INTO schema(schema_version, ros_distro) VALUES (4, ?)", (ros_distro,))
            self.conn.execute("COMMIT")
            self.conn.execute("BEGIN")
        except _DB_ERRORS as e:
            raise OSError(f"cannot create the database: {e}", path) from None

    def add_definition(self, type_name: str, encoding: str, text: str, type_hash: str) -> None:
        """A ``message_definitions`` row (schema 4)."""
        self._exec(
            "INSERT INTO message_definitions(topic_type, encoding, encoded_message_definition, type_description_hash)"
            " VALUES (?, ?, ?, ?)",
            (type_name, encoding, text, type_hash),
        )

    def add_topic(self, tid: int, name: str, type_name: str, fmt: str, qos: str, type_hash: str) -> None:
        """A ``topics`` row."""
        self._exec(
            "INSERT INTO topics VALUES (?, ?, ?, ?, ?, ?)", (tid, name, type_name, fmt, qos, type_hash)
        )

    def write(self, tid: int, timestamp: int, data: bytes | memoryview) -> None:
        """Queue one message; a full batch is written and committed."""
        self._rows.append((tid, timestamp, data))
        self._pending += len(data) + 32
        if self._pending >= self.batch_bytes or len(self._rows) >= 50_000:
            self.flush()

    def flush(self) -> None:
        """Write the pending messages and commit them."""
        try:
            if self._rows:
                self.conn.executemany(
                    "INSERT INTO messages(topic_id, timestamp, data) VALUES (?, ?, ?)", self._rows
                )
            self.conn.execute("COMMIT")
            self.conn.execute("BEGIN")
        except _DB_ERRORS as e:
            raise OSError(f"cannot write the database: {e}", self.path) from None
        self._rows = []
        self._pending = 0

    def close(self, version: int, metadata_text: str) -> None:
        """Write what is pending and the ``metadata`` row, commit, close."""
        self.flush()
        self._exec("INSERT INTO metadata(metadata_version, metadata) VALUES (?, ?)", (version, metadata_text))
        try:
            self.conn.execute("COMMIT")
            self.conn.close()
        except _DB_ERRORS as e:
            raise OSError(f"cannot write the database: {e}", self.path) from None

    def abort(self) -> None:
        """Close, keeping what was committed (the last batch is rolled back)."""
        try:
            self.conn.close()
        except _DB_ERRORS:
            pass

    def _exec(self, q: str, args: tuple[Any, ...]) -> None:
        try:
            self.conn.execute(q, args)
        except _DB_ERRORS as e:
            raise OSError(f"cannot write the database: {e}", self.path) from None
