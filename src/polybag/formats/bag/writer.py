"""``#ROSBAG V2.0`` writer.

Layout (as rosbag writes it): version line; bag header record padded to 4096 bytes
(``index_pos``, ``conn_count``, ``chunk_count``; rewritten on close); chunks, each followed
by one index data record (ver 1) per connection in it; then the index section: every
connection record, then one chunk info record per chunk.  A connection record is also
written inside the chunk where the connection's first message is, so an unindexed file
(a killed writer leaves ``NAME.bag.active`` with ``index_pos`` 0) can be reindexed.
"""

from __future__ import annotations

import io
import os
import struct
from collections import deque
from collections.abc import Mapping
from concurrent.futures import Future
from typing import Any, BinaryIO

from polybag import _threads
from polybag.compression import compress, normalize
from polybag.errors import UnsupportedError, WriteError
from polybag.model import Channel, Schema
from polybag.writer import AtomicFile, Writer, check_open

from .records import (
    BAG_HEADER_RECORD_LEN,
    MAGIC_V20,
    OP_CHUNK,
    OP_CHUNK_INFO,
    OP_CONNECTION,
    OP_FILE_HEADER,
    OP_INDEX_DATA,
    U32,
    U64,
    build_header,
    build_record,
    pack_time,
)

_MSG_TAIL = struct.Struct("<III")  # time sec, time nsec, data_len
_ENTRY = struct.Struct("<III")
_OP = {op: bytes([op]) for op in range(1, 8)}


def _md5_for(type_name: str, definition: bytes) -> str | None:
    try:
        from polybag.codecs.ros1 import compute_md5  # type: ignore[attr-defined]
    except Exception:
        return None
    try:
        return str(compute_md5(type_name, definition.decode("utf-8", "replace")))
    except Exception:
        return None


def _bundled_definition(type_name: str, md5: str) -> bytes:
    """The definition text of a known type whose md5sum matches (old bags carry none)."""
    try:
        from polybag.codecs.ros1 import definition_for, lookup_md5  # type: ignore[attr-defined]

        name = lookup_md5(md5)
        if name is None or name.split("/")[-1] != type_name.split("/")[-1]:
            return b""
        return str(definition_for(name)).encode("utf-8")
    except Exception:
        return b""


def bag_header_record(index_pos: int, conn_count: int, chunk_count: int) -> bytes:
    h = build_header(
        {
            "index_pos": U64.pack(index_pos),
            "conn_count": U32.pack(conn_count),
            "chunk_count": U32.pack(chunk_count),
            "op": _OP[OP_FILE_HEADER],
        }
    )
    pad = BAG_HEADER_RECORD_LEN - 4 - len(h) - 4
    return U32.pack(len(h)) + h + U32.pack(pad) + b" " * pad


def connection_record(cid: int, topic: str, fields: Mapping[str, bytes]) -> bytes:
    return build_record(
        {"topic": topic.encode("utf-8"), "conn": U32.pack(cid), "op": _OP[OP_CONNECTION]},
        build_header(fields),
    )


class BagWriter(Writer):
    """Write a ROS 1 bag (format 2.0).

    ``compression`` is ``none``, ``bz2`` or ``lz4``; a chunk is closed when its uncompressed
    size reaches ``chunk_size`` bytes.
    """

    format = "bag"

    def __init__(
        self,
        path_or_stream: str | os.PathLike[str] | BinaryIO,
        *,
        format: str | None = None,  # noqa: A002
        compression: str | None = "none",
        chunk_size: int = 768 * 1024,
        compression_level: int | None = None,
        overwrite: bool = True,
        **options: Any,
    ) -> None:
        if format not in (None, "bag"):
            raise UnsupportedError(f"BagWriter writes bags, not {format!r}")
        comp = normalize(compression)
        if comp not in ("none", "bz2", "lz4"):
            raise UnsupportedError(f"bag chunks can be none, bz2 or lz4 compressed, not {compression!r}")
        if chunk_size <= 0:
            raise WriteError("chunk_size must be positive")
        self.compression = comp
        self.chunk_size = int(chunk_size)
        self.level = compression_level
        self._seekable = True
        self._final: BinaryIO | None = None
        if isinstance(path_or_stream, (str, os.PathLike)):
            self._atomic: AtomicFile | None = AtomicFile(path_or_stream, overwrite=overwrite)
            self._f: BinaryIO = self._atomic.file
        else:
            self._atomic = None
            stream = path_or_stream
            try:
                self._seekable = bool(stream.seekable()) and stream.tell() == 0
            except (AttributeError, OSError, ValueError):
                self._seekable = False
            if self._seekable:
                self._f = stream
            else:  # build in memory, hand over on close
                self._final = stream
                self._f = io.BytesIO()
        self.path = None if self._atomic is None else self._atomic.final_path
        self._f.write(MAGIC_V20)
        self._f.write(bag_header_record(0, 0, 0))
        self._f.flush()
        self._pos = len(MAGIC_V20) + BAG_HEADER_RECORD_LEN
        self.closed = False
        self._schemas: dict[tuple[str, str, bytes], Schema] = {}
        self._channels: dict[int, Channel] = {}
        self._conn_fields: dict[int, tuple[str, dict[str, bytes]]] = {}
        self._conn_written: set[int] = set()
        self._prefix: dict[int, bytes] = {}
        self._chunk_infos: list[tuple[int, int, int, dict[int, int]]] = []  # pos, start, end, counts
        self._inflight: deque[tuple[Future[bytes], int, dict[int, list[tuple[int, int]]]]] = deque()
        self._depth = _threads.workers()
        self._pipeline = self._depth > 1
        self._new_chunk()

    # --- chunk buffer ---------------------------------------------------------------------
    def _new_chunk(self) -> None:
        self._buf = bytearray()
        self._index: dict[int, list[tuple[int, int]]] = {}  # conn -> [(time ns, offset)]
        self._cstart: int | None = None
        self._cend = 0

    def add_schema(self, name: str, encoding: str, data: bytes | str) -> Schema:
        check_open(self.closed)
        raw = data.encode() if isinstance(data, str) else bytes(data)  # (text as the MCAP writer takes it)
        key = (name, encoding, raw)
        s = self._schemas.get(key)
        if s is None:
            s = self._schemas[key] = Schema(len(self._schemas) + 1, name, encoding, raw)
        return s

    def add_channel(
        self,
        topic: str,
        message_encoding: str,
        schema: Schema | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> Channel:
        check_open(self.closed)
        md = dict(metadata or {})
        if message_encoding not in ("ros1", "ros"):
            raise WriteError(f"topic {topic}: a bag holds ros1-serialized messages, not {message_encoding!r}")
        if schema is not None and schema.encoding not in ("ros1msg", ""):
            raise WriteError(f"topic {topic}: a bag needs ros1msg schemas, not {schema.encoding!r}")
        type_name = (schema.name if schema is not None and schema.name else "") or md.get("type", "")
        if not type_name:
            raise WriteError(f"topic {topic}: a bag connection needs a message type (schema name)")
        definition = bytes(schema.data) if schema is not None else b""
        md5 = md.get("md5sum") or _md5_for(type_name, definition) or "*"
        if not definition and md5 != "*":
            definition = _bundled_definition(type_name, md5)
        fields: dict[str, bytes] = {
            "topic": topic.encode("utf-8"),
            "type": type_name.encode("utf-8"),
            "md5sum": md5.encode("ascii", "replace"),
            "message_definition": definition,
        }
        if "callerid" in md:
            fields["callerid"] = str(md["callerid"]).encode("utf-8")
        if "latching" in md:
            lv = str(md["latching"]).lower()
            fields["latching"] = b"1" if lv in ("1", "true", "yes") else b"0"
        cid = len(self._conn_fields)
        md.update({"md5sum": md5, "type": type_name})
        if schema is None:
            schema = self.add_schema(type_name, "ros1msg", b"")
        ch = Channel(cid, topic, "ros1", schema, md)
        self._register(cid, topic, fields)
        self._channels[cid] = ch
        return ch

    def _register(self, cid: int, topic: str, fields: dict[str, bytes]) -> None:
        self._conn_fields[cid] = (topic, fields)
        self._prefix[cid] = (
            U32.pack(38)
            + U32.pack(4)
            + b"op=\x02"
            + U32.pack(9)
            + b"conn="
            + U32.pack(cid)
            + U32.pack(13)
            + b"time="
        )

    def write(
        self,
        channel: Channel,
        data: bytes | memoryview,
        log_time: int,
        publish_time: int | None = None,
        sequence: int = 0,
    ) -> None:
        check_open(self.closed)
        cid = channel.id
        self._check_channel(channel, self._channels.get(cid))
        prefix = self._prefix[cid]
        if log_time < 0:
            raise WriteError(f"topic {channel.topic}: bag times cannot be negative, got {log_time} ns")
        buf = self._buf
        if cid not in self._conn_written:
            topic, fields = self._conn_fields[cid]
            buf += connection_record(cid, topic, fields)
            self._conn_written.add(cid)
        off = len(buf)
        s, ns = divmod(log_time, 1_000_000_000)
        if s > 0xFFFFFFFF:
            raise WriteError(f"topic {channel.topic}: bag times must fit 32-bit seconds, got {log_time} ns")
        buf += prefix
        buf += _MSG_TAIL.pack(s, ns, len(data))
        buf += data
        idx = self._index.get(cid)
        if idx is None:
            idx = self._index[cid] = []
        idx.append((log_time, off))
        if self._cstart is None or log_time < self._cstart:
            self._cstart = log_time
        if log_time > self._cend:
            self._cend = log_time
        if len(buf) >= self.chunk_size:
            self._flush_chunk()

    def _flush_chunk(self) -> None:
        if not self._buf:
            return
        buf, index = self._buf, self._index
        self._new_chunk()  # (a new buffer: the closed one is the compressing thread's)
        if self._pipeline and self.compression != "none":
            # compressed by a worker thread while the next chunks fill (up to one per core
            # in flight); written in order here, so the bytes are the one-thread writer's
            fut = _threads.pool().submit(compress, self.compression, buf, self.level)
            self._inflight.append((fut, len(buf), index))
            self._drain(self._depth)
        else:
            self.write_chunk(self.compression, None, buf, index)  # (nothing in flight)

    def _drain(self, keep: int = 0) -> None:
        """Write the chunks in flight, oldest first, until at most ``keep`` remain (and
        raise a failed one's error)."""
        q = self._inflight
        while len(q) > keep:
            fut, size, index = q.popleft()
            self._write_chunk(self.compression, fut.result(), size, index)

    def write_chunk(
        self,
        compression: str,
        compressed: bytes | memoryview | None,
        uncompressed: bytes | bytearray | memoryview | None,
        index: Mapping[int, list[tuple[int, int]]],
        uncompressed_size: int | None = None,
    ) -> None:
        """Write one chunk record and its index data (also used by reindex/compress).

        Give ``compressed`` (with ``uncompressed_size``) to copy a chunk as it is, or
        ``uncompressed`` to compress it here.  ``index`` maps connection id to
        ``(time ns, record offset in the uncompressed data)``.
        """
        self._drain()
        comp = normalize(compression)
        if compressed is None:
            assert uncompressed is not None
            size = len(uncompressed)
            data: bytes | bytearray | memoryview = (
                compress(comp, uncompressed, self.level) if comp != "none" else uncompressed
            )
        else:
            assert uncompressed_size is not None
            size = uncompressed_size
            data = compressed
        self._write_chunk(comp, data, size, index)

    def _write_chunk(
        self, comp: str, data: bytes | bytearray | memoryview, size: int, index: Mapping[int, list[tuple[int, int]]]
    ) -> None:
        """The chunk record (``data`` compressed with ``comp``, ``size`` bytes uncompressed)
        and its index data records."""
        f = self._f
        pos = self._pos
        head = build_header({"compression": comp.encode(), "op": _OP[OP_CHUNK], "size": U32.pack(size)})
        f.write(U32.pack(len(head)))
        f.write(head)
        f.write(U32.pack(len(data)))
        f.write(data)
        n = 8 + len(head) + len(data)
        counts: dict[int, int] = {}
        start = None
        end = 0
        for cid in sorted(index):
            entries = sorted(index[cid], key=lambda e: e[0])
            if not entries:
                continue
            counts[cid] = len(entries)
            start = entries[0][0] if start is None else min(start, entries[0][0])
            end = max(end, entries[-1][0])
            body = b"".join(_ENTRY.pack(t // 1_000_000_000, t % 1_000_000_000, o) for t, o in entries)
            rec = build_record(
                {
                    "op": _OP[OP_INDEX_DATA],
                    "ver": U32.pack(1),
                    "conn": U32.pack(cid),
                    "count": U32.pack(len(entries)),
                },
                body,
            )
            f.write(rec)
            n += len(rec)
        self._pos = pos + n
        self._chunk_infos.append((pos, start or 0, end, counts))
        f.flush()  # a killed writer leaves every finished chunk on disk

    @property
    def chunk_count(self) -> int:
        """Chunks written so far."""
        return len(self._chunk_infos)

    def add_connection(self, cid: int, topic: str, fields: dict[str, bytes], *, in_chunks: bool = True) -> None:
        """Register a connection with a given id (reindex/compress copy chunks verbatim).

        ``in_chunks``: its connection record is already inside a copied chunk.
        """
        check_open(self.closed)
        self._register(cid, topic, dict(fields))
        if in_chunks:
            self._conn_written.add(cid)

    # --- closing ---------------------------------------------------------------------------
    def close(self) -> None:
        if self.closed:
            return
        self._flush_chunk()
        self._drain()
        self.closed = True
        f = self._f
        index_pos = self._pos
        for cid in sorted(self._conn_fields):
            topic, fields = self._conn_fields[cid]
            f.write(connection_record(cid, topic, fields))
        for pos, start, end, counts in self._chunk_infos:
            f.write(
                build_record(
                    {
                        "op": _OP[OP_CHUNK_INFO],
                        "ver": U32.pack(1),
                        "chunk_pos": U64.pack(pos),
                        "start_time": pack_time(start),
                        "end_time": pack_time(end),
                        "count": U32.pack(len(counts)),
                    },
                    b"".join(U32.pack(c) + U32.pack(n) for c, n in sorted(counts.items())),
                )
            )
        f.flush()
        header = bag_header_record(index_pos, len(self._conn_fields), len(self._chunk_infos))
        f.seek(len(MAGIC_V20))
        f.write(header)
        f.seek(0, io.SEEK_END)
        if self._final is not None:
            assert isinstance(f, io.BytesIO)
            self._final.write(f.getvalue())
            self._final.flush()
        elif self._atomic is not None:
            self._atomic.commit()
        else:
            f.flush()

    def abort(self, *, discard: bool = False) -> None:
        """Stop without finishing: the ``.active`` file stays as a killed writer leaves it
        (or is removed with ``discard``)."""
        self.closed = True
        if discard:
            for fut, _, _ in self._inflight:  # nothing more is written: drop what is in flight
                fut.cancel()
            self._inflight.clear()
            if self._atomic is not None:
                self._atomic.discard()
            return
        try:
            self._drain()  # the chunks already compressed are kept, as a killed writer's are
        except Exception:  # noqa: BLE001 - aborting: what cannot be written is given up
            self._inflight.clear()
        try:
            self._f.flush()
        except (OSError, ValueError):
            pass
        if self._atomic is not None:
            try:
                self._atomic.file.close()
            except (OSError, ValueError):
                pass
            self._atomic.closed = True
