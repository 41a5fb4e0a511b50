"""MCAP writing: chunked or not, compressed, fully indexed, with every CRC.

Layout (the same as the reference writers, so the conformance suite's files come out
byte-identical): magic, Header, data records (Schema/Channel/Message inside chunks, each
chunk followed by its Message Index records in the order its channels were first seen;
Attachments and Metadata outside chunks), DataEnd, then the summary groups (Schemas,
Channels, Statistics, Metadata indexes, Attachment indexes, Chunk indexes), Summary
Offsets, Footer and magic.  A path is written as ``<name>.active`` and renamed on close.
"""

from __future__ import annotations

import os
import struct
import sys
import threading
import zlib
from array import array
from collections import deque
from collections.abc import Mapping
from concurrent.futures import Future
from typing import Any, BinaryIO

import zstandard

from polybag import _threads
from polybag import compression as _compression
from polybag.errors import UnsupportedError, WriteError
from polybag.formats.mcap import records as R
from polybag.formats.mcap.records import MAGIC, RECORD_MESSAGE_HEAD, Opcode
from polybag.model import Channel, Schema
from polybag.writer import AtomicFile, Writer, check_open

_LITTLE = sys.byteorder == "little"
_MSG_PACK = RECORD_MESSAGE_HEAD.pack
_MSG_PACK_INTO = RECORD_MESSAGE_HEAD.pack_into
_KEEP_BUFFER = 64 << 20  # a chunk buffer up to this size is kept for the next chunk
_LARGE = 1 << 16  # a payload this large makes the chunk buffer worth keeping
# a Chunk record up to its compression name: opcode, length, start, end, size, crc, name length
_CHUNK_RECORD_HEAD = struct.Struct("<BQQQQII")


def _default_library() -> str:
    from polybag._version import __version__

    return f"polybag {__version__}"


class McapWriter(Writer):
    """Write an MCAP file.

    ``compression`` is ``"zstd"`` (default), ``"lz4"`` or ``"none"``; ``chunk_size`` is the
    uncompressed size at which a chunk is closed.  The ``use_*`` and ``repeat_*`` options
    switch off individual index records (all on by default).
    """

    format = "mcap"

    def __init__(
        self,
        path_or_stream: str | os.PathLike[str] | BinaryIO,
        *,
        format: str | None = None,  # noqa: A002 - part of the Writer(...) signature
        compression: str | None = "zstd",
        chunk_size: int = 1 << 20,
        compression_level: int | None = None,
        profile: str = "",
        library: str | None = None,
        use_chunking: bool = True,
        use_message_index: bool = True,
        use_chunk_index: bool = True,
        use_statistics: bool = True,
        use_summary_offsets: bool = True,
        use_attachment_index: bool = True,
        use_metadata_index: bool = True,
        repeat_schemas: bool = True,
        repeat_channels: bool = True,
        use_crcs: bool = True,
        overwrite: bool = True,
        **unknown: Any,
    ) -> None:
        if unknown:
            # a misspelled option must not be silently dropped (chunksize= instead of chunk_size=)
            raise WriteError(f"McapWriter got unknown option(s): {', '.join(sorted(unknown))}")
        if format not in (None, "mcap"):
            raise UnsupportedError(f"McapWriter writes MCAP, not {format!r}")
        comp = _compression.normalize(compression)
        if comp not in ("none", "zstd", "lz4"):
            raise UnsupportedError(f"MCAP chunks cannot use {comp!r} compression (use zstd, lz4 or none)")
        self.compression = comp
        self._comp_name = "" if comp == "none" else comp
        self._comp_name_raw = self._comp_name.encode()
        self.compression_level = compression_level
        self.chunk_size = max(1, int(chunk_size))
        self.profile = profile
        self.library = _default_library() if library is None else library
        self.use_chunking = use_chunking
        self.use_message_index = use_message_index and use_chunking
        self.use_chunk_index = use_chunk_index and use_chunking
        self.use_statistics = use_statistics
        self.use_summary_offsets = use_summary_offsets
        self.use_attachment_index = use_attachment_index
        self.use_metadata_index = use_metadata_index
        self.repeat_schemas = repeat_schemas
        self.repeat_channels = repeat_channels
        self.use_crcs = use_crcs

        self._out = AtomicFile(path_or_stream, overwrite=overwrite)
        self._file = self._out.file
        # a file of ours goes to disk while it is written (the fsync on close waits less)
        self._writeback = _threads.Writeback(self._file if self._out.active_path is not None else None)
        self._pos = 0
        self._crc = 0
        self.closed = False

        self._schemas: dict[int, Schema] = {}
        self._schema_records: list[R.SchemaRecord] = []
        self._schema_keys: dict[tuple[str, str, bytes], Schema] = {}
        self._channels: dict[int, Channel] = {}
        self._channel_records: list[R.ChannelRecord] = []
        self._next_schema_id = 1
        self._next_channel_id = 1

        self.statistics = R.Statistics()
        self._counts: dict[int, int] = {}
        self._chunk_indexes: list[R.ChunkIndex] = []
        self._attachment_indexes: list[R.AttachmentIndex] = []
        self._metadata_indexes: list[R.MetadataIndex] = []

        # The open chunk.  Small messages are appended to a fresh bytearray per chunk
        # (self._fill == -1: the chunk is all of it), the fastest per message.  After a chunk
        # that held a large payload the buffer is kept for the next chunk and overwritten in
        # place (its records are self._chunk[:self._fill]): payloads are copied into it
        # exactly once and its pages stay mapped, which matters per byte, not per message.
        self._chunk = bytearray()
        self._fill = -1
        self._large = False
        self._chunk_index: dict[int, array[int]] = {}
        # Closed chunks are checksummed and compressed by worker threads while the next
        # ones fill (one per core but this thread's; when they are all busy this thread
        # packs the chunk itself rather than wait); this thread writes them in order, so
        # the bytes are exactly the one-thread writer's.  Every other write first writes
        # out what is in flight.  Kept buffers come back as spares once written.
        self._inflight: deque[tuple[Future[tuple[int, bytes | None]], bytearray, int, int, int, Any, bool]]
        self._inflight = deque()
        self._spares: list[bytearray] = []
        self._depth = _threads.helpers()  # chunks packed by worker threads at once
        self._pipeline = use_chunking and self._depth > 0
        self._local = threading.local()

        self._emit(MAGIC)
        self._emit(R.encode(R.Header(self.profile, self.library)))

    # --- output ----------------------------------------------------------------------------------
    def _drain(self, keep: int = 0) -> None:
        """Write out the chunks in flight, oldest first, until at most ``keep`` remain and
        the oldest is not packed yet (and raise a failed one's error)."""
        q = self._inflight
        while q and (len(q) > keep or q[0][0].done()):
            fut, buf, fill, start, end, index, kept = q.popleft()
            crc, packed = fut.result()
            self._emit_chunk(buf, fill, start, end, index, crc, packed)
            if kept:
                self._spares.append(buf)

    def _emit(self, b: bytes | bytearray | memoryview) -> None:
        self._file.write(b)
        if self.use_crcs:
            self._crc = zlib.crc32(b, self._crc)
        self._pos += len(b)

    def _compress(self, raw: memoryview) -> bytes:
        """``raw`` compressed (zstd or lz4; thread-safe: one zstd context per thread)."""
        if self.compression == "zstd":
            c = getattr(self._local, "zstd", None)
            if c is None:
                # level 3 (zstd's default, as the reference writers use); one thread per
                # context: chunks are compressed in parallel instead
                lv = 3 if self.compression_level is None else self.compression_level
                c = self._local.zstd = zstandard.ZstdCompressor(level=lv)
            return c.compress(raw)
        return bytes(_compression.compress(self.compression, raw, self.compression_level))

    def _pack(self, buf: bytearray, fill: int) -> tuple[int, bytes | None]:
        """A chunk's CRC and compressed bytes (None: stored as it is); runs in a worker
        thread when pipelined."""
        with memoryview(buf) as whole, whole[:fill] as raw:
            crc = zlib.crc32(raw) if self.use_crcs else 0
            return crc, (None if self.compression == "none" else self._compress(raw))

    def _define(self, rec: R.SchemaRecord | R.ChannelRecord) -> None:
        """Keep a Schema/Channel record for the summary, count it in the statistics and
        write it (:meth:`_data_record`)."""
        if isinstance(rec, R.SchemaRecord):
            self._schema_records.append(rec)
            self.statistics.schema_count += 1
        else:
            self._channel_records.append(rec)
            self.statistics.channel_count += 1
        self._data_record(rec)

    def _data_record(self, rec: R.Record) -> None:
        """A Schema/Channel record: into the open chunk, or straight into the data section."""
        raw = R.encode(rec)
        if self.use_chunking:
            n = self._fill
            if n < 0:
                self._chunk += raw
            else:
                self._chunk[n : n + len(raw)] = raw
                self._fill = n + len(raw)
        else:
            self._emit(raw)

    # --- the Writer interface ---------------------------------------------------------------------
    def add_schema(self, name: str, encoding: str, data: bytes | str, *, id: int | None = None) -> Schema:  # noqa: A002
        check_open(self.closed)
        raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        key = (name, encoding, raw)
        if id is None:
            got = self._schema_keys.get(key)
            if got is not None:
                return got
            id = self._next_schema_id  # noqa: A001
        elif id in self._schemas:
            s = self._schemas[id]
            if (s.name, s.encoding, s.data) != key:
                raise WriteError(f"schema id {id} is already used by {s.name!r}")
            return s
        if not 0 < id < 1 << 16:
            raise WriteError(f"schema id {id} is outside 1..65535")
        self._next_schema_id = max(self._next_schema_id, id + 1)
        schema = Schema(id, name, encoding, raw)
        self._schemas[id] = schema
        self._schema_keys.setdefault(key, schema)
        self._define(R.SchemaRecord(id, name, encoding, raw))
        return schema

    def add_channel(
        self,
        topic: str,
        message_encoding: str,
        schema: Schema | int | None = None,
        metadata: Mapping[str, str] | None = None,
        *,
        id: int | None = None,  # noqa: A002
    ) -> Channel:
        check_open(self.closed)
        sid = 0
        model_schema: Schema | None = None
        if isinstance(schema, Schema):
            sid = schema.id
            model_schema = self._schemas.get(sid)
            if model_schema is None or model_schema != schema:
                raise WriteError(f"schema {schema.name!r} (id {schema.id}) was not added to this writer")
        elif isinstance(schema, int) and schema:
            model_schema = self._schemas.get(schema)
            if model_schema is None:
                raise WriteError(f"no schema with id {schema} in this writer")
            sid = schema
        if id is None:
            id = self._next_channel_id  # noqa: A001
        if id in self._channels:
            raise WriteError(f"channel id {id} is already used by topic {self._channels[id].topic!r}")
        if not 0 <= id < 1 << 16:
            raise WriteError(f"channel id {id} is outside 0..65535")
        self._next_channel_id = max(self._next_channel_id, id + 1)
        meta = {str(k): str(v) for k, v in (metadata or {}).items()}
        ch = Channel(id, topic, message_encoding, model_schema, meta)
        self._channels[id] = ch
        self._define(R.ChannelRecord(id, sid, topic, message_encoding, meta))
        return ch

    def write(self, channel: Channel | int, data: bytes | memoryview, log_time: int, publish_time: int | None = None, sequence: int = 0) -> None:
        if self.closed:
            check_open(True)
        cid = channel if isinstance(channel, int) else channel.id
        if cid not in self._channels:
            raise WriteError(f"channel {cid} was not added to this writer")
        if publish_time is None:
            publish_time = log_time
        size = len(data)
        if not self.use_chunking:
            try:
                head = _MSG_PACK(5, 22 + size, cid, sequence, log_time, publish_time)
            except struct.error as e:
                raise WriteError(f"message on channel {cid}: {e} (sequence is u32, times are u64 ns)") from None
            self._note_loose(cid, log_time)
            self._emit(head)
            self._emit(data)
            return
        buf = self._chunk
        n = self._fill
        try:
            if n < 0:  # appending to a fresh buffer
                n = len(buf)
                buf += _MSG_PACK(5, 22 + size, cid, sequence, log_time, publish_time)
                try:
                    buf += data
                except BaseException:
                    del buf[n:]  # no half record left behind
                    raise
                end = n + 31 + size
            else:  # overwriting a kept buffer; the head is packed into it where it fits
                end = n + 31 + size
                if end <= len(buf):
                    _MSG_PACK_INTO(buf, n, 5, 22 + size, cid, sequence, log_time, publish_time)
                else:
                    buf[n:] = _MSG_PACK(5, 22 + size, cid, sequence, log_time, publish_time)
                buf[n + 31 : end] = data  # the payload's only copy
                self._fill = end
        except struct.error as e:  # a value out of range
            raise WriteError(f"message on channel {cid}: {e} (sequence is u32, times are u64 ns)") from None
        if size >= _LARGE:
            self._large = True
        # statistics, chunk times and message indexes all come from these per-channel
        # (log_time, offset) arrays when the chunk is closed
        idx = self._chunk_index.get(cid)
        if idx is None:
            idx = self._chunk_index[cid] = array("Q")
        idx.append(log_time)
        idx.append(n)
        if end >= self.chunk_size:
            self._finish_chunk()

    def _note_loose(self, cid: int, log_time: int) -> None:
        st = self.statistics
        if st.message_count == 0:
            st.message_start_time = st.message_end_time = log_time
        else:
            if log_time < st.message_start_time:
                st.message_start_time = log_time
            if log_time > st.message_end_time:
                st.message_end_time = log_time
        st.message_count += 1
        self._counts[cid] = self._counts.get(cid, 0) + 1

    def _finish_chunk(self) -> None:
        fill = self._fill
        if fill < 0:
            fill = len(self._chunk)
        index = self._chunk_index
        if not fill and not index:
            return
        st = self.statistics
        n_msgs = 0
        start = end = 0
        for cid, idx in index.items():
            times = idx[0::2]
            n = len(times)
            lo, hi = min(times), max(times)
            if n_msgs == 0:
                start, end = lo, hi
            else:
                start, end = min(start, lo), max(end, hi)
            n_msgs += n
            self._counts[cid] = self._counts.get(cid, 0) + n
        if n_msgs:
            if st.message_count == 0:
                st.message_start_time, st.message_end_time = start, end
            else:
                st.message_start_time = min(st.message_start_time, start)
                st.message_end_time = max(st.message_end_time, end)
            st.message_count += n_msgs
        keep = self._large and len(self._chunk) <= max(4 * self.chunk_size, _KEEP_BUFFER)
        buf = self._chunk
        if self._pipeline:
            q = self._inflight
            if sum(1 for item in q if not item[0].done()) < self._depth:
                fut = _threads.pool().submit(self._pack, buf, fill)
            else:  # the workers are all busy: this thread packs the chunk rather than wait
                fut = _threads.finished(self._pack(buf, fill))
            q.append((fut, buf, fill, start, end, index, keep))
            self._drain(self._depth + 1)
        else:
            crc, packed = self._pack(buf, fill)
            self._emit_chunk(buf, fill, start, end, index, crc, packed)
            if keep:
                self._spares.append(buf)
        if keep:  # the next chunk overwrites a kept buffer (not after a huge message)
            self._chunk = self._spares.pop() if self._spares else bytearray()
            self._fill = 0
        else:
            self._chunk = bytearray()
            self._fill = -1
        self._large = False
        self._chunk_index = {}

    def _emit_chunk(self, buf: bytearray, fill: int, start: int, end: int, index: dict[int, array[int]], crc: int, packed: bytes | None) -> None:
        """Write one chunk record (the compressed bytes as they are, or the buffer itself:
        no concatenated copy) and its message indexes."""
        cname = self._comp_name_raw
        chunk_offset = self._pos
        with memoryview(buf) as whole, whole[:fill] as raw:
            body = raw if packed is None else packed
            packed_size = len(body)
            rec_len = 9 + 28 + 4 + len(cname) + 8 + packed_size
            self._emit(
                _CHUNK_RECORD_HEAD.pack(Opcode.CHUNK, rec_len - 9, start, end, fill, crc, len(cname))
                + cname
                + R.U64.pack(packed_size)
            )
            self._emit(body)
            del body
        mi_start = self._pos
        offsets: dict[int, int] = {}
        if self.use_message_index:
            for cid, idx in index.items():
                offsets[cid] = self._pos
                if not _LITTLE:
                    idx.byteswap()
                entries = idx.tobytes()
                self._emit(
                    R.RECORD_HEAD.pack(Opcode.MESSAGE_INDEX, 6 + len(entries)) + R.U16.pack(cid) + R.U32.pack(len(entries))
                )
                self._emit(entries)
        if self.use_chunk_index:
            self._chunk_indexes.append(
                R.ChunkIndex(
                    start, end, chunk_offset, rec_len, offsets, self._pos - mi_start,
                    self._comp_name, packed_size, fill,
                )  # fmt: skip
            )
        self.statistics.chunk_count += 1
        self._writeback.wrote(self._pos)

    def add_attachment(self, name: str, media_type: str, data: bytes, log_time: int = 0, create_time: int = 0) -> None:
        check_open(self.closed)
        self._drain()
        rec = R.AttachmentRecord(log_time, create_time, name, media_type, bytes(data))
        covered = rec.covered()
        body = covered + R.U32.pack(zlib.crc32(covered) if self.use_crcs else 0)
        offset = self._pos
        raw = R.frame(Opcode.ATTACHMENT, body)
        self._emit(raw)
        self.statistics.attachment_count += 1
        if self.use_attachment_index:
            self._attachment_indexes.append(
                R.AttachmentIndex(offset, len(raw), log_time, create_time, len(data), name, media_type)
            )

    def add_metadata(self, name: str, metadata: Mapping[str, str]) -> None:
        check_open(self.closed)
        raw = R.encode(R.MetadataRecord(name, {str(k): str(v) for k, v in metadata.items()}))
        self._drain()
        offset = self._pos
        self._emit(raw)
        self.statistics.metadata_count += 1
        if self.use_metadata_index:
            self._metadata_indexes.append(R.MetadataIndex(offset, len(raw), name))

    def close(self) -> None:
        if self.closed:
            return
        if self.use_chunking:
            self._finish_chunk()
        self._drain()
        self.closed = True
        self._emit(R.encode(R.DataEnd(self._crc if self.use_crcs else 0)))
        summary_start = self._pos
        scrc = 0
        groups: list[tuple[int, int, int]] = []

        def group(op: int, recs: list[Any]) -> None:
            nonlocal scrc
            if not recs:
                return
            start = self._pos
            raw = b"".join(R.encode(r) for r in recs)
            self._file.write(raw)
            scrc = zlib.crc32(raw, scrc)
            self._pos += len(raw)
            groups.append((op, start, len(raw)))

        if self.repeat_schemas:
            group(Opcode.SCHEMA, self._schema_records)
        if self.repeat_channels:
            group(Opcode.CHANNEL, self._channel_records)
        if self.use_statistics:
            self.statistics.channel_message_counts = dict(self._counts)
            group(Opcode.STATISTICS, [self.statistics])
        group(Opcode.METADATA_INDEX, self._metadata_indexes)
        group(Opcode.ATTACHMENT_INDEX, self._attachment_indexes)
        group(Opcode.CHUNK_INDEX, self._chunk_indexes)
        offsets_start = self._pos
        if self.use_summary_offsets and groups:
            group(Opcode.SUMMARY_OFFSET, [R.SummaryOffset(op, s, n) for op, s, n in groups])
        else:
            offsets_start = 0
        if self._pos == summary_start:
            summary_start = 0
        head = R.RECORD_HEAD.pack(Opcode.FOOTER, 20) + R.U64.pack(summary_start) + R.U64.pack(offsets_start)
        scrc = zlib.crc32(head, scrc)
        self._file.write(head + R.U32.pack(scrc if self.use_crcs else 0) + MAGIC)
        self._pos += len(head) + 4 + 8
        self._writeback.wait()
        self._out.commit()

    def abort(self, *, discard: bool = False) -> None:
        """Stop without finishing: the ``.active`` file stays as a killed writer leaves it (the
        chunks written so far; ``recover`` rebuilds it), or is removed with ``discard``."""
        if self._out.committed:
            return
        self.closed = True
        for item in self._inflight:  # nothing more is written: drop what is in flight
            item[0].cancel()
        self._inflight.clear()
        self._writeback.wait()
        if discard:
            self._out.discard()
            return
        try:
            self._out.file.close()
        except (OSError, ValueError):
            pass
        self._out.closed = True

    @property
    def bytes_written(self) -> int:
        self._drain()
        return self._pos

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.close()
