"""A recovering read of a rosbag2 ``.db3``: :class:`Salvage` streams every row it can reach
past damage (see :mod:`polybag.formats.rosbag2.sqlite`) and notes the rest."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from polybag.errors import FormatError

from .sqlite_files import DB_ERRORS
from .sqlite_queries import BATCH, MessageQueries, fetched

#: places of damage listed; past them only counted
MAX_NOTES = 200


class Salvage:
    """The recovering reads of one ``.db3`` through its ``queries``; what they meet goes to
    ``errors`` (at most :data:`MAX_NOTES` places; ``noted`` counts them all)."""

    def __init__(self, queries: MessageQueries, errors: list[str]) -> None:
        self.queries = queries
        self.path = queries.path
        self.errors = errors
        self.noted = 0

    def rows(
        self, where: str, args: tuple[Any, ...], reverse: bool, order: str, known: set[int]
    ) -> Iterator[list[tuple[int, int, bytes, int]]]:
        """A recovering read, streamed: log-time order through the index while the index
        reads, then (or for file order) a walk in row-id order that steps past damaged
        pages; rows that are not messages and what the walk cannot reach are reported in
        :attr:`errors`, never raised.  After damage the rest comes in row-id order."""
        last: tuple[int, int] | None = None  # (timestamp, id) of the last row given
        if order == "log_time":
            desc = " DESC" if reverse else ""
            q = f"SELECT topic_id, timestamp, {self.queries.data_column}, id FROM messages{where} ORDER BY timestamp{desc}, id{desc}"
            try:
                for rows in fetched(self.queries.conn.execute(q, args)):
                    yield self._good(rows, known)
                    r = rows[-1]
                    last = (r[1], r[3]) if isinstance(r[1], int) and isinstance(r[3], int) else last
                return
            except DB_ERRORS as e:
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
            limit = os.path.getsize(self.path) // 4 + BATCH  # a row takes more than 4 bytes
        except OSError:
            limit = 1 << 40
        while True:
            try:
                got = self.queries.conn.execute(
                    f"SELECT topic_id, timestamp, {self.queries.data_column}, id FROM messages{cond} ORDER BY id LIMIT {BATCH}",
                    (*args, pos),
                ).fetchall()
            except DB_ERRORS as e:
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
            pos = nxt if nxt > pos else (pos + BATCH if pos >= 0 else 0)
            walked += len(got)
            if walked > limit:  # more rows than the file can hold: a loop in damaged pages
                self.note(f"{self.path}: the row walk found more rows than the file can hold; stopped")
                return
            yield self._good([r for r in got if after(r)], known)

    def note(self, text: str) -> None:
        """Record damage a recovering read met; past :data:`MAX_NOTES` only counted."""
        self.noted += 1
        if self.noted <= MAX_NOTES:
            self.errors.append(text)
        elif self.noted == MAX_NOTES + 1:
            self.errors.append(f"{self.path}: more damage; only the first {MAX_NOTES} places are listed")

    def _good(self, rows: list[Any], known: set[int]) -> list[tuple[int, int, bytes, int]]:
        """The rows that are messages, each with its check flag: 0 for a topic id not ``known``
        (when any are), which the caller looks up (and notes) row by row."""
        out = []
        for r in rows:
            try:
                tid, ts, data = self.queries.checked(r)
            except FormatError as e:
                self.note(str(e))
                continue
            out.append((tid, ts, data, 1 if not known or tid in known else 0))
        return out
