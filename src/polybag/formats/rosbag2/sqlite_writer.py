"""rosbag2's ``sqlite3`` storage written: :class:`SqliteStorageWriter` makes a new ``.db3``
(schema 4, :data:`SCHEMA_SQL`) through the standard library (read: :mod:`.sqlite`)."""

from __future__ import annotations

import sqlite3
from typing import Any

from .sqlite_files import DB_ERRORS

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
        except DB_ERRORS as e:
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

    def set_topic_qos(self, tid: int, qos: str) -> None:
        """A ``topics`` row's QoS profiles replaced (committed with the next batch)."""
        self._exec("UPDATE topics SET offered_qos_profiles = ? WHERE id = ?", (qos, tid))

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
        except DB_ERRORS as e:
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
        except DB_ERRORS as e:
            raise OSError(f"cannot write the database: {e}", self.path) from None

    def abort(self) -> None:
        """Close, keeping what was committed (the last batch is rolled back)."""
        try:
            self.conn.close()
        except DB_ERRORS:
            pass

    def _exec(self, q: str, args: tuple[Any, ...]) -> None:
        try:
            self.conn.execute(q, args)
        except DB_ERRORS as e:
            raise OSError(f"cannot write the database: {e}", self.path) from None
