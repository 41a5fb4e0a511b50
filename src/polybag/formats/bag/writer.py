"""``#ROSBAG V2.0`` writer.

Layout (as rosbag writes it): version line; bag header record padded to 4096 bytes
(``index_pos``, ``conn_count``, ``chunk_count``; rewritten on close); chunks, each followed
by one index data record (ver 1) per connection in it; then the index section: every
connection record, then one chunk info record per chunk.  A connection record is also
written inside the chunk where the connection's first message is, so an unindexed file
(a killed writer leaves ``NAME.bag.active`` with ``index_pos`` 0) can be reindexed.

Per message (:meth:`BagWriter.write`) the work is one dict lookup of the connection's state
for the open chunk, one ``Struct.pack`` of the record header (its constant part precomputed
per connection), two appends to the chunk buffer and one list append (the record's offset).
The first message of a connection in a chunk takes the slow path that checks the channel and
writes the connection record.  A full chunk is compressed on a worker thread (when
compression is on and there is more than one core; by this thread when the workers are all
busy) while the next one fills; its index data records are built in one pass (numpy gathers
the times from the chunk's records at the offsets, sorts them stably and packs the entries)
and the chunk goes to the file in three writes (its head, its data, its index records).  The bytes are those of the simple one-record-at-a-time writer
(``tests/formats/bag/test_bag_write_bytes.py`` holds their hashes).
"""

from __future__ import annotations

import functools
import io
import os
import struct
from array import array
from collections import deque
from collections.abc import Mapping
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, BinaryIO

from polybag.errors import UnsupportedError, WriteError
from polybag.io.compression import compress, normalize
from polybag.io.output_files import AtomicFile
from polybag.model import Channel, Schema
from polybag.util import threads as _threads
from polybag.writer import Writer, check_open

from . import records as R
from .records import (
    BAG_HEADER_RECORD_LEN,
    MAGIC_V20,
    U32,
    U64,
    build_header,
    build_record,
    pack_time,
)

if TYPE_CHECKING:
    import numpy as np

_ENTRY = struct.Struct("<III")
_ENTRY_FIELDS = (("sec", "<u4"), ("nsec", "<u4"), ("offset", "<u4"))  # as a numpy dtype == _ENTRY
_NUMPY_FROM = 32  # index entries per connection from which numpy packs them
_MAX_NS = 0xFFFFFFFF * 1_000_000_000 + 999_999_999  # the last time with 32-bit seconds
_OP = {op: bytes([op]) for op in range(1, 8)}

_TIME = struct.Struct("<II")
_TIME_AT = 34  # a message record's time (sec, nsec) from the record's start, as write lays it out
_TIME_FIELDS = (("sec", "<u4"), ("nsec", "<u4"))

# a chunk's index: connection id -> (times ns, or None: read them from the chunk's message
# records; record offsets), in the order written
ChunkIndex = dict[int, tuple[list[int] | None, "list[int] | array[int]"]]


@functools.cache
def _dtype(fields: tuple[tuple[str, str], ...]) -> np.dtype[np.void]:
    """The numpy dtype of ``fields`` (numpy imported on first use, not with the module)."""
    import numpy as np

    return np.dtype(list(fields))


def _entries(times: list[int] | None, offsets: list[int] | array[int], buf: Any) -> tuple[bytes, int, int]:
    """The index data entries (sorted by time, stably), the first and the last time.

    ``times`` None: the times are read from the message records at ``offsets`` in ``buf``
    (the chunk's uncompressed data, as :meth:`BagWriter.write` lays them out).  numpy is
    imported at the first chunk with enough entries, not with the module (a recording starts
    without it)."""
    n = len(offsets)
    try:
        if n < _NUMPY_FROM:
            if times is None:
                unpack = _TIME.unpack_from
                times = [s * 1_000_000_000 + ns for s, ns in (unpack(buf, o + _TIME_AT) for o in offsets)]
            ents = sorted(zip(times, offsets), key=lambda e: e[0])
            body = b"".join([_ENTRY.pack(t // 1_000_000_000, t % 1_000_000_000, o) for t, o in ents])
            return body, ents[0][0], ents[-1][0]
        import numpy as np

        if times is None:  # every record's (sec, nsec), gathered at each offset
            o64 = np.frombuffer(offsets, np.int64) if isinstance(offsets, array) else np.array(offsets, np.int64)
            return _entries_from_records(o64, buf)
        o = np.array(offsets, dtype=np.uint64)
        t = np.array(times, dtype=np.uint64)
    except (struct.error, OverflowError, TypeError, ValueError) as e:
        raise WriteError(f"bag index entry out of range: {e}") from None
    if (t[1:] < t[:-1]).any():
        order = np.argsort(t, kind="stable")
        t, o = t[order], o[order]
    if int(t[-1]) > _MAX_NS or int(o.max()) > 0xFFFFFFFF:  # (as struct would refuse)
        raise WriteError("bag index entry out of range: 32-bit seconds and offsets")
    rec = np.empty(n, dtype=_dtype(_ENTRY_FIELDS))
    rec["sec"] = t // 1_000_000_000
    rec["nsec"] = t % 1_000_000_000
    rec["offset"] = o
    return rec.tobytes(), int(t[0]), int(t[-1])


def _entries_from_records(o: np.ndarray, buf: Any) -> tuple[bytes, int, int]:
    """:func:`_entries` of message records as :meth:`BagWriter.write` lays them out (their
    times already checked: u32 seconds, nanoseconds below 1e9), ``o`` their offsets (int64):
    each record's (sec, nsec) gathered through one view with an item at every byte, sorted
    by (sec, nsec) only if they are not in order already."""
    import numpy as np

    view = np.ndarray((len(buf) - _TIME_AT - 7,), _dtype(_TIME_FIELDS), buffer=buf, offset=_TIME_AT, strides=(1,))
    pairs = view[o]
    sec, nsec = pairs["sec"], pairs["nsec"]
    if len(o) > 1:
        key = (sec.astype(np.uint64) << np.uint64(32)) | nsec
        if bool((key[1:] < key[:-1]).any()):
            order = np.argsort(key, kind="stable")
            pairs, o = pairs[order], o[order]
            sec, nsec = pairs["sec"], pairs["nsec"]
    if int(o.max()) > 0xFFFFFFFF:  # (as struct would refuse)
        raise WriteError("bag index entry out of range: 32-bit seconds and offsets")
    rec = np.empty(len(o), dtype=_dtype(_ENTRY_FIELDS))
    rec["sec"] = sec
    rec["nsec"] = nsec
    rec["offset"] = o
    first = int(sec[0]) * 1_000_000_000 + int(nsec[0])
    last = int(sec[-1]) * 1_000_000_000 + int(nsec[-1])
    return rec.tobytes(), first, last


def _md5_for(type_name: str, definition: bytes) -> str | None:
    try:
        from polybag.codecs.ros1 import compute_md5
    except Exception:
        return None
    try:
        return str(compute_md5(type_name, definition.decode("utf-8", "replace")))
    except Exception:
        return None


def _bundled_definition(type_name: str, md5: str) -> bytes:
    """The definition text of a known type whose md5sum matches (old bags carry none)."""
    try:
        from polybag.codecs.ros1 import definition_for, lookup_md5

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
            "op": _OP[R.OP_FILE_HEADER],
        }
    )
    pad = BAG_HEADER_RECORD_LEN - 4 - len(h) - 4
    return U32.pack(len(h)) + h + U32.pack(pad) + b" " * pad


def connection_record(cid: int, topic: str, fields: Mapping[str, bytes]) -> bytes:
    return build_record(
        {"topic": topic.encode("utf-8"), "conn": U32.pack(cid), "op": _OP[R.OP_CONNECTION]},
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
        self._header: dict[int, Any] = {}  # conn -> Struct(prefix, sec, nsec, len).pack
        self._chunk_infos: list[tuple[int, int, int, dict[int, int]]] = []  # pos, start, end, counts
        self._inflight: deque[tuple[Future[bytes], bytearray, ChunkIndex]] = deque()
        self._depth = _threads.helpers()  # chunks compressed by worker threads at once
        self._pipeline = self._depth > 0
        # a file of ours goes to disk while it is written (the fsync on close waits less)
        self._writeback = _threads.Writeback(self._f if self._atomic is not None else None)
        self._new_chunk()

    # --- chunk buffer ---------------------------------------------------------------------
    def _new_chunk(self) -> None:
        self._buf = bytearray()
        self._index: ChunkIndex = {}
        # conn -> (channel, pack, prefix, offsets.append) of the connections written to in
        # this chunk (the others, and a closed writer, take write's slow path)
        self._hot: dict[int, tuple[Channel, Any, bytes, Any]] = {}

    def add_schema(self, name: str, encoding: str, data: bytes | str) -> Schema:
        check_open(self.closed)
        raw = data.encode() if isinstance(data, str) else bytes(data)  # (text as the MCAP writer takes it)
        key = (name, encoding, raw)
        s = self._schemas.get(key)
        if s is None:
            s = self._schemas[key] = Schema(len(self._schemas) + 1, name, encoding, raw)
        return s

    def add_channel(self, topic: str, message_encoding: str, schema: Schema | None = None, metadata: Mapping[str, str] | None = None) -> Channel:
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
        self._prefix[cid] = prefix = (
            U32.pack(38)
            + U32.pack(4)
            + b"op=\x02"
            + U32.pack(9)
            + b"conn="
            + U32.pack(cid)
            + U32.pack(13)
            + b"time="
        )
        # the message record's header and data length: the prefix, time sec, nsec, len
        self._header[cid] = struct.Struct(f"<{len(prefix)}sIII").pack

    def write(self, channel: Channel, data: bytes | memoryview, log_time: int, publish_time: int | None = None, sequence: int = 0) -> None:
        st = self._hot.get(channel.id)
        if st is None or st[0] is not channel:
            st = self._enter(channel, log_time)
        buf = self._buf
        off = len(buf)
        try:
            # (a time out of range makes its seconds out of the u32 range: struct refuses it)
            buf += st[1](st[2], log_time // 1_000_000_000, log_time % 1_000_000_000, len(data))
            buf += data
        except (struct.error, TypeError) as e:  # (a float time, data that is not bytes)
            del buf[off:]
            if isinstance(log_time, int) and not 0 <= log_time <= _MAX_NS:
                self._bad_time(channel, log_time)
            raise WriteError(f"topic {channel.topic}: cannot write a message at {log_time} ns: {e}") from None
        st[3](off)
        if len(buf) >= self.chunk_size:
            self._flush_chunk()

    def _enter(self, channel: Channel, log_time: int) -> tuple[Channel, Any, bytes, Any]:
        """``write``'s slow path: the first message of a connection in this chunk (or a
        channel equal to, not the same object as, the one handed out; or a closed writer).
        Checks the channel, writes the connection record before the connection's first
        message in the file and returns the connection's state for this chunk."""
        check_open(self.closed)
        cid = channel.id
        known = self._channels.get(cid)
        self._check_channel(channel, known)
        assert known is not None
        if log_time < 0:
            self._bad_time(channel, log_time)
        if cid not in self._conn_written:
            topic, fields = self._conn_fields[cid]
            self._buf += connection_record(cid, topic, fields)
            self._conn_written.add(cid)
        st = self._hot.get(cid)
        if st is None:
            got = self._index.get(cid)
            offsets: list[int] | array[int] = array("q") if got is None else got[1]
            self._index[cid] = (None, offsets)  # (the times are in the records)
            st = self._hot[cid] = (known, self._header[cid], self._prefix[cid], offsets.append)
        return st

    @staticmethod
    def _bad_time(channel: Channel, log_time: int) -> None:
        if log_time < 0:
            raise WriteError(f"topic {channel.topic}: bag times cannot be negative, got {log_time} ns")
        raise WriteError(f"topic {channel.topic}: bag times must fit 32-bit seconds, got {log_time} ns")

    def _flush_chunk(self) -> None:
        if not self._buf:
            return
        buf, index = self._buf, self._index
        self._new_chunk()  # (a new buffer: the closed one is the compressing thread's)
        if self._pipeline and self.compression != "none":
            # compressed by a worker thread while the next chunks fill (or by this thread
            # when the workers are all busy); written in order, so the bytes are the
            # one-thread writer's
            q = self._inflight
            if sum(1 for item in q if not item[0].done()) < self._depth:
                fut = _threads.pool().submit(compress, self.compression, buf, self.level)
            else:
                fut = _threads.finished(compress(self.compression, buf, self.level))
            q.append((fut, buf, index))
            self._drain(_threads.keep_in_flight(self._depth, sum(len(item[1]) for item in q)))
        else:  # (nothing in flight)
            comp = self.compression
            data = compress(comp, buf, self.level) if comp != "none" else buf
            self._write_chunk(comp, data, len(buf), index, buf)

    def _drain(self, keep: int = 0) -> None:
        """Write the chunks in flight, oldest first, until at most ``keep`` remain and the
        oldest is not compressed yet (and raise a failed one's error)."""
        q = self._inflight
        while q and (len(q) > keep or q[0][0].done()):
            fut, buf, index = q.popleft()
            self._write_chunk(self.compression, fut.result(), len(buf), index, buf)

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
        ``uncompressed`` to compress it here.  ``index`` maps connection id to a list of
        ``(time ns, record offset in the uncompressed data)``.
        """
        self._drain()
        chunk_index: ChunkIndex = {cid: ([t for t, _ in e], [o for _, o in e]) for cid, e in index.items()}
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
        self._write_chunk(comp, data, size, chunk_index)

    def _write_chunk(
        self,
        comp: str,
        data: bytes | bytearray | memoryview,
        size: int,
        index: ChunkIndex,
        uncompressed: bytes | bytearray | memoryview | None = None,
    ) -> None:
        """The chunk record (``data`` compressed with ``comp``, ``size`` bytes uncompressed)
        and its index data records (one per connection, entries sorted by time).
        ``uncompressed``: the chunk's data, where the times an index without them are read
        from."""
        f = self._f
        pos = self._pos
        head = build_header({"compression": comp.encode(), "op": _OP[R.OP_CHUNK], "size": U32.pack(size)})
        counts: dict[int, int] = {}
        start = None
        end = 0
        recs: list[bytes] = []
        for cid in sorted(index):
            times, offsets = index[cid]
            if not offsets:
                continue
            counts[cid] = len(offsets)
            body, first, last = _entries(times, offsets, uncompressed)
            start = first if start is None else min(start, first)
            end = max(end, last)
            h = build_header(
                {
                    "op": _OP[R.OP_INDEX_DATA],
                    "ver": U32.pack(1),
                    "conn": U32.pack(cid),
                    "count": U32.pack(len(offsets)),
                }
            )
            recs += (U32.pack(len(h)), h, U32.pack(len(body)), body)
        tail = b"".join(recs)
        lead = b"".join((U32.pack(len(head)), head, U32.pack(len(data))))
        # three writes, not one of the three joined: the data would be copied once more
        f.write(lead)
        f.write(data)
        f.write(tail)
        self._pos = pos + len(lead) + len(data) + len(tail)
        self._chunk_infos.append((pos, start or 0, end, counts))
        f.flush()  # a killed writer leaves every finished chunk on disk
        self._writeback.wrote(self._pos)

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
    def finish_output(self) -> None:
        if self.closed:
            return
        self._flush_chunk()
        self._drain()
        self.closed = True
        self._hot = {}
        f = self._f
        index_pos = self._pos
        for cid in sorted(self._conn_fields):
            topic, fields = self._conn_fields[cid]
            f.write(connection_record(cid, topic, fields))
        for pos, start, end, counts in self._chunk_infos:
            f.write(
                build_record(
                    {
                        "op": _OP[R.OP_CHUNK_INFO],
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
            self._writeback.wait()
            self._atomic.commit()
        else:
            f.flush()

    def abort_output(self, *, discard: bool = False) -> None:
        """Stop without finishing: the ``.active`` file stays as a killed writer leaves it
        (or is removed with ``discard``)."""
        self.closed = True
        self._hot = {}
        if discard:
            for fut, _, _ in self._inflight:  # nothing more is written: drop what is in flight
                fut.cancel()
            self._inflight.clear()
            self._writeback.wait()
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
        self._writeback.wait()
        if self._atomic is not None:
            try:
                self._atomic.file.close()
            except (OSError, ValueError):
                pass
            self._atomic.closed = True
