"""The rosbag2 ``.db3`` tables read through SQLite: :class:`MessageQueries` (topics,
definitions, counts, times, the selected messages in batches, payloads of topics, time
buckets), each row checked to be a message (see :mod:`polybag.formats.rosbag2.sqlite`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from polybag.errors import FormatError
from polybag.io.compression import LIMIT_HINT, ChunkLimitError

from .sqlite_files import DB_ERRORS, SqliteFile, db_str

#: rows fetched at a time
BATCH = 2048
# SQLite checks that a row is a message (the reader then builds a batch without looking)
_OK = "(typeof(topic_id) = 'integer' AND typeof(timestamp) = 'integer' AND timestamp >= 0 AND typeof(data) = 'blob')"


def fetched(cur: sqlite3.Cursor) -> Iterator[list[Any]]:
    """A query's rows in batches of :data:`BATCH`."""
    while rows := cur.fetchmany(BATCH):
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


class MessageQueries:
    """The queries of one opened ``.db3`` (``file``); a row whose data is over ``max_bytes``
    is refused before its blob is fetched."""

    def __init__(self, file: SqliteFile, max_bytes: int) -> None:
        self.file = file
        self.conn = file.conn
        self.path = file.path
        self.max_bytes = max_bytes
        self._checked: dict[tuple[Any, ...], bool] = {}
        # the data column as fetched: a blob over the cap comes as its length + 0.5 (a REAL: no
        # stored value is mistaken for it where it matters) and is never read; text, too, by bytes
        cap = max_bytes
        self.data_column = (
            f"iif(length(data) <= {cap} AND (typeof(data) != 'text' OR length(CAST(data AS BLOB)) <= {cap}),"
            " data, length(data) + 0.5)"
        )
        self.ok_check = f"({_OK} AND length(data) <= {cap})"

    def topics(self) -> list[TopicRow]:
        """The ``topics`` table (the columns the database's schema has; the others empty).
        The first schema (2018) has only id, name and type: its messages are ``cdr``."""
        cols = ["id", "name", "type"]
        for col in ("serialization_format", "offered_qos_profiles", "type_description_hash"):
            cols.append(col if col in self.file.topic_columns else "''")
        rows = self.all_rows(f"SELECT {', '.join(cols)} FROM topics ORDER BY id")
        out = []
        for r in rows:
            if not isinstance(r[0], int):
                raise FormatError(f"topics: row id {r[0]!r} is not an integer", self.path)
            out.append(TopicRow(r[0], db_str(r[1]), db_str(r[2]), db_str(r[3]) or "cdr", db_str(r[4]), db_str(r[5])))
        return out

    def definitions(self) -> dict[str, tuple[str, str]]:
        """``type -> (encoding, definition text)`` from ``message_definitions`` (schema 4)."""
        if "message_definitions" not in self.file.tables:
            return {}
        out: dict[str, tuple[str, str]] = {}
        q = "SELECT topic_type, encoding, encoded_message_definition FROM message_definitions ORDER BY id"
        for name, enc, text in self.all_rows(q):
            out.setdefault(db_str(name), (db_str(enc), db_str(text)))
        return out

    def counts(self) -> dict[int, int]:
        """Messages per topic id (a scan of the ``messages`` table's topic ids)."""
        return {
            int(t): int(n)
            for t, n in self.all_rows("SELECT topic_id, COUNT(*) FROM messages GROUP BY topic_id")
            if isinstance(t, int)
        }

    def times(self) -> tuple[int | None, int | None]:
        """The first and last timestamp (the index's ends)."""
        rows = self.all_rows("SELECT MIN(timestamp), MAX(timestamp) FROM messages")
        lo, hi = rows[0] if rows else (None, None)
        return (lo if isinstance(lo, int) else None, hi if isinstance(hi, int) else None)

    def all_rows(self, q: str, args: tuple[Any, ...] = ()) -> list[Any]:
        """Every row of query ``q`` (a FormatError naming the file when SQLite fails)."""
        try:
            return self.conn.execute(q, args).fetchall()
        except DB_ERRORS as e:
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
        where, args = self.where(topic_ids, start, end)
        desc = " DESC" if reverse else ""
        by = f"timestamp{desc}, id{desc}" if order == "log_time" else f"id{desc}"
        ids = sorted({int(k) for k in known})
        if self._all_ok(where, args, ids):  # checked in one pass: the rows need no check column
            ok = ""
        elif ids:  # integers made here, not text from the file: safe in the query
            ok = f"({self.ok_check} AND topic_id IN ({', '.join(map(str, ids))}))"
        else:
            ok = self.ok_check
        cols = f"topic_id, timestamp, {self.data_column}{', ' + ok if ok else ''}"
        q = f"SELECT {cols} FROM messages{where} ORDER BY {by}"
        try:
            if order == "log_time" and self._sorts(q, args):
                yield from self._by_sorted_keys(cols, where, args, by)
                return
            yield from fetched(self.conn.execute(q, args))
        except DB_ERRORS as e:
            raise FormatError(f"damaged SQLite database: {e}", self.path) from None

    def _sorts(self, q: str, args: tuple[Any, ...]) -> bool:
        """Whether SQLite would sort the rows of query ``q`` (no ``timestamp`` index serves
        its order), from its query plan."""
        try:
            plan = self.conn.execute(f"EXPLAIN QUERY PLAN {q}", args).fetchall()
        except DB_ERRORS:
            return False  # the query itself reports it
        return any("TEMP B-TREE" in db_str(r[-1]).upper() for r in plan)

    def _by_sorted_keys(self, cols: str, where: str, args: tuple[Any, ...], by: str) -> Iterator[list[Any]]:
        """The rows of ``SELECT cols ... ORDER BY by`` when SQLite has to sort them: only the
        keys (row id, timestamp) are sorted (SQLite's sorter spills to temporary files past
        :data:`SORT_CACHE_KIB`: a few bytes a row on disk, not the payloads), then each batch
        of rows is looked up by row id.  A table without row ids sorts whole rows instead."""
        try:
            keys = self.conn.execute(f"SELECT rowid FROM messages{where} ORDER BY {by}", args)
        except DB_ERRORS:
            yield from fetched(self.conn.execute(f"SELECT {cols} FROM messages{where} ORDER BY {by}", args))
            return
        while batch := keys.fetchmany(BATCH):
            ids = [r[0] for r in batch]
            got = self.conn.execute(
                f"SELECT rowid, {cols} FROM messages WHERE rowid IN ({', '.join('?' * len(ids))})", ids
            ).fetchall()
            rows = {r[0]: r[1:] for r in got}
            yield [rows[i] for i in ids if i in rows]

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
        q = f"SELECT SUM(NOT {self.ok_check}), MIN(topic_id), MAX(topic_id) FROM messages{where}"
        try:
            bad, lo, hi = self.conn.execute(q, args).fetchone()
        except DB_ERRORS:
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
        where, args = self.where(topic_ids, None, None)
        lo_hi = self.all_rows(f"SELECT MIN(timestamp), MAX(timestamp) FROM messages{where}", args)
        lo, hi = lo_hi[0] if lo_hi else (None, None)
        if not isinstance(lo, int) or not isinstance(hi, int):
            return []
        width = max(1, (hi - lo) // max(1, buckets) + 1)
        q = (
            f"SELECT MIN(timestamp), MAX(timestamp), COUNT(*) FROM messages{where} "
            "GROUP BY (timestamp - ?) / ? ORDER BY 1"
        )
        rows = self.all_rows(q, (*args, lo, width))
        return [(int(a), int(b), int(n)) for a, b, n in rows if isinstance(a, int) and isinstance(b, int)]

    def payloads(self, topic_ids: set[int]) -> tuple[Sequence[int], Sequence[bytes]]:
        """Log times and payloads of the topic ids, in log-time order (ties by row id).

        The rows come in row-id order (a scan of the table: no walk of the timestamp index
        with a table lookup per row) and are sorted by time afterwards when they are not in
        order already (a stable sort, so equal times stay in row-id order).  Their types are
        checked on the columns as Python sees them; a row that is not a message sends the
        read through the checked query, which names it."""
        import numpy as np

        where, args = self.where(topic_ids, None, None)
        try:
            rows = self.conn.execute(f"SELECT timestamp, {self.data_column} FROM messages{where} ORDER BY id", args).fetchall()
        except DB_ERRORS as e:
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
        q = f"SELECT topic_id, timestamp, {self.data_column} FROM messages{where} ORDER BY timestamp, id"
        try:
            rows = [self.checked(r) for r in self.conn.execute(q, args).fetchall()]
        except DB_ERRORS as e:
            raise FormatError(f"damaged SQLite database: {e}", self.path) from None
        return [r[1] for r in rows], [r[2] for r in rows]

    def where(self, topic_ids: set[int] | None, start: int | None, end: int | None) -> tuple[str, tuple[Any, ...]]:
        """The ``WHERE`` clause (and its arguments) selecting the topic ids in [start, end)."""
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
