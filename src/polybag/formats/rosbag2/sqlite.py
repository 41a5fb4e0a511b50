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
input's to choose too.  So a *hot* journal (non-empty, its first byte not zero, no other
process holding the database's RESERVED lock) or a live write-ahead log (the database in
WAL mode, a valid WAL header and a committed transaction in valid frames after it:
:func:`~.sqlite_files.wal_has_commit`) beside a database, left by a killed writer, is
applied to a private copy (issue 28; the input is never written): the journal played by
polybag itself, page by checked page, as SQLite plays it (:mod:`~.sqlite_journal`; a
journal naming a super-journal is refused, recovering plays it without that record), or
the log replayed by SQLite in the copy (a WAL names no other file); a warning says so
("rolled back an unfinished transaction from NAME-journal, N pages").  A journal whose
writer is still at work (RESERVED held) is not hot: the file is read as last committed;
one whose writer is writing the file right now (EXCLUSIVE) is refused.  An empty journal, a zeroed journal header (``PERSIST`` mode) and a WAL
with nothing to replay (empty, as any read-only open of a WAL database leaves it beside a
``-shm``; a header alone; stale frames SQLite ignores) are not damage.  A ``-journal`` or ``-wal`` that is not a regular file (a symlink, a
device, a FIFO) is refused and never opened or copied; a ``-shm`` is never read.  Topic
filters and time windows are ``WHERE`` clauses; log-time order is the ``timestamp`` index
(ties by row id, the order they were written); without that index only the keys (row id,
timestamp) are sorted, by SQLite, spilling to temporary files past :data:`~.sqlite_files.SORT_CACHE_KIB`
(memory does not grow with the table; about 10 bytes of temporary disk a row), and the rows
are then looked up by row id a batch at a time.

Only the plain rosbag2 tables are read: ``messages``, ``topics`` and
``message_definitions`` must be ordinary tables (not views, not virtual tables) without
generated columns, so every value SQLite hands back is stored in the file; and a row whose
``data`` is over ``max_chunk_bytes`` is refused before its blob is fetched
(``length(data)`` is checked in the query).

Where things are: :class:`SqliteStorage` (here) owns the parts, each in its module:
:class:`~.sqlite_files.SqliteFile` (opening: the checks above, journals and write-ahead
logs, repaired copies; the journal player is :mod:`~.sqlite_journal`), :class:`~.sqlite_queries.MessageQueries` (the tables through SQLite),
:class:`PagedReads` (here: the ``messages`` table from the file's pages,
:mod:`~polybag.formats.rosbag2.pages`) and :class:`~.sqlite_salvage.Salvage` (a recovering
read); the writer is :mod:`~.sqlite_writer`'s.

Every ``sqlite3`` error becomes a :class:`~polybag.errors.FormatError` naming the file; a
read yields every message it could read before raising.  With ``recover`` a read goes
on past damage by row id and notes what it skipped.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from polybag.errors import FormatError
from polybag.io.compression import max_chunk_bytes

from .sqlite_files import SqliteFile
from .sqlite_queries import MessageQueries, TopicRow
from .sqlite_salvage import Salvage


class PagedReads:
    """The ``messages`` table of one opened ``.db3`` (``file``) read straight from its pages
    when it can be (:class:`~polybag.formats.rosbag2.pages.PageTable`, opened on first use)."""

    def __init__(self, file: SqliteFile, max_bytes: int) -> None:
        self.file = file
        self.max_bytes = max_bytes
        self._pages: Any = None  # the PageTable (pages.py) once opened; False: not for this file

    @property
    def table(self) -> Any:
        """The :class:`~polybag.formats.rosbag2.pages.PageTable` (None: not opened; False: the
        file is read through SQLite)."""
        return self._pages

    def page_rows(
        self, topic_ids: set[int] | None, start: int | None, end: int | None, reverse: bool, order: str, known: Iterable[int]
    ) -> tuple[Any, Iterator[Any]] | None:
        """``(PageTable, batches of Rows)``: the selected rows read straight from the file's
        pages (:mod:`polybag.formats.rosbag2.pages`, 2-4x faster than rows through the
        ``sqlite3`` module), every row of the table checked before the first batch; None when
        the read goes through SQLite instead: recovering, a time window (the timestamp index
        serves it without reading the rest), or a file or table the fast path does not read
        (found out before anything is given).  A database rolled back or replayed in a
        private copy is read from the copy's pages."""
        if self.file.recover or start is not None or end is not None or self._pages is False:
            return None
        from polybag.formats.rosbag2.pages import PageTable
        from polybag.formats.rosbag2.sqlite_records import GiveUp

        if self._pages is None:
            self._pages = PageTable.open(self.file.read_path, self.file.conn, self.max_bytes) or False
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
        from polybag.formats.rosbag2.sqlite_records import GiveUp

        if first is None:
            return
        yield first
        try:
            yield from rest
        except GiveUp as e:  # the second pass over an immutable file: the first one passed
            raise FormatError(f"the messages table changed while it was read: {e}", self.file.path) from None

    def payload_arrays(self, topic_ids: set[int], known: Iterable[int]) -> tuple[Any, Any, Any, Any] | None:
        """``(log times, blob, starts, sizes)`` of the topic ids in log-time order as numpy
        arrays, from the file's pages: ``blob`` is the mapped file itself when no payload
        spilled into overflow pages (nothing copied), else the payloads joined.  None: not
        from the pages (:meth:`page_rows`)."""
        import numpy as np

        from polybag.formats.rosbag2.pages_leaves import Rows
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

    def close(self) -> None:
        """Close the page table (the file is then read through SQLite only)."""
        if self._pages:
            self._pages.close()
        self._pages = False


class SqliteStorage:
    """One ``.db3`` file opened for reading (see the module notes): its parts are ``file``
    (the opened database), ``queries``, ``paged`` and ``salvage``; ``errors`` lists what a
    recovering read met."""

    def __init__(self, path: str, *, recover: bool = False, max_bytes: int | None = None) -> None:
        self.path = path
        self.recover = recover
        self.max_bytes = max_chunk_bytes(max_bytes)
        self.errors: list[str] = []
        self.file = SqliteFile(path, recover=recover, errors=self.errors)
        self.queries = MessageQueries(self.file, self.max_bytes)
        self.paged = PagedReads(self.file, self.max_bytes)
        self.salvage = Salvage(self.queries, self.errors)

    def topics(self) -> list[TopicRow]:
        """The ``topics`` table (:meth:`MessageQueries.topics`)."""
        return self.queries.topics()

    def definitions(self) -> dict[str, tuple[str, str]]:
        """``type -> (encoding, definition text)`` from ``message_definitions`` (schema 4)."""
        return self.queries.definitions()

    def counts(self) -> dict[int, int]:
        """Messages per topic id."""
        return self.queries.counts()

    def times(self) -> tuple[int | None, int | None]:
        """The first and last timestamp."""
        return self.queries.times()

    def messages(
        self,
        topic_ids: set[int] | None,
        start: int | None,
        end: int | None,
        reverse: bool,
        order: str,
        known: Iterable[int] = (),
    ) -> Iterator[list[Any]]:
        """Batches of the rows selected (:meth:`MessageQueries.messages`; recovering:
        :meth:`Salvage.rows`, past damage)."""
        if self.recover:
            where, args = self.queries.where(topic_ids, start, end)
            yield from self.salvage.rows(where, args, reverse, order, {int(k) for k in known})
            return
        yield from self.queries.messages(topic_ids, start, end, reverse, order, known)

    def page_rows(
        self, topic_ids: set[int] | None, start: int | None, end: int | None, reverse: bool, order: str, known: Iterable[int]
    ) -> tuple[Any, Iterator[Any]] | None:
        """The selected rows from the file's pages (:meth:`PagedReads.page_rows`), or None."""
        return self.paged.page_rows(topic_ids, start, end, reverse, order, known)

    def payload_arrays(self, topic_ids: set[int], known: Iterable[int]) -> tuple[Any, Any, Any, Any] | None:
        """Payloads of the topic ids as numpy arrays, from the pages (:meth:`PagedReads.payload_arrays`)."""
        return self.paged.payload_arrays(topic_ids, known)

    def payloads(self, topic_ids: set[int]) -> tuple[Sequence[int], Sequence[bytes]]:
        """Log times and payloads of the topic ids (:meth:`MessageQueries.payloads`)."""
        return self.queries.payloads(topic_ids)

    def time_buckets(self, topic_ids: set[int] | None, buckets: int = 64) -> list[tuple[int, int, int]]:
        """The selected messages in spans of time (:meth:`MessageQueries.time_buckets`)."""
        return self.queries.time_buckets(topic_ids, buckets)

    def checked(self, row: Any) -> tuple[int, int, bytes]:
        """A row as ``(topic_id, timestamp, data)``; a FormatError saying what is wrong."""
        return self.queries.checked(row)

    def note(self, text: str) -> None:
        """Record damage a recovering read met (:meth:`Salvage.note`)."""
        self.salvage.note(text)

    def close(self) -> None:
        """Close the database and remove a temporary copy."""
        self.paged.close()
        self.file.close()


__all__ = ["PagedReads", "SqliteStorage"]
