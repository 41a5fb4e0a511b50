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
from array import array
from collections.abc import Mapping
from typing import Any, BinaryIO

from polybag.errors import UnsupportedError, WriteError
from polybag.formats.mcap import records as R
from polybag.formats.mcap.records import MAGIC, RECORD_MESSAGE_HEAD, Opcode
from polybag.formats.mcap.writer_chunks import ChunkOutputMixin
from polybag.io import compression as _compression
from polybag.model import Channel, Schema
from polybag.writer import Writer, check_open

_MSG_PACK = RECORD_MESSAGE_HEAD.pack
_MSG_PACK_INTO = RECORD_MESSAGE_HEAD.pack_into
_LARGE = 1 << 16  # a payload this large makes the chunk buffer worth keeping


def _default_library() -> str:
    from polybag._version import __version__

    return f"polybag {__version__}"


def _check_options(unknown: Mapping[str, Any], fmt: str | None, compression: str | None) -> str:
    """The writer's compression name (normalized) once its options are known to be valid."""
    if unknown:
        # a misspelled option must not be silently dropped (chunksize= instead of chunk_size=)
        raise WriteError(f"McapWriter got unknown option(s): {', '.join(sorted(unknown))}")
    if fmt not in (None, "mcap"):
        raise UnsupportedError(f"McapWriter writes MCAP, not {fmt!r}")
    comp = _compression.normalize(compression)
    if comp not in ("none", "zstd", "lz4"):
        raise UnsupportedError(f"MCAP chunks cannot use {comp!r} compression (use zstd, lz4 or none)")
    return comp


class McapWriter(ChunkOutputMixin, Writer):
    """Write an MCAP file.

    ``compression`` is ``"zstd"`` (default), ``"lz4"`` or ``"none"``; ``chunk_size`` is the
    uncompressed size at which a chunk is closed.  The ``use_*`` and ``repeat_*`` options
    switch off individual index records (all on by default).  The output and the chunks are
    written by :class:`~polybag.formats.mcap.writer_chunks.ChunkOutputMixin`.
    """

    provisional_end = R.PROVISIONAL_END

    format = "mcap"

    def __init__(
        self, path_or_stream: str | os.PathLike[str] | BinaryIO, *,
        format: str | None = None,  # noqa: A002 - part of the Writer(...) signature
        compression: str | None = "zstd", chunk_size: int = 1 << 20, compression_level: int | None = None,
        profile: str = "", library: str | None = None, use_chunking: bool = True,
        use_message_index: bool = True, use_chunk_index: bool = True, use_statistics: bool = True,
        use_summary_offsets: bool = True, use_attachment_index: bool = True, use_metadata_index: bool = True,
        repeat_schemas: bool = True, repeat_channels: bool = True, use_crcs: bool = True,
        overwrite: bool = True, **unknown: Any,
    ) -> None:
        comp = _check_options(unknown, format, compression)
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

        self._init_output(path_or_stream, overwrite, use_chunking)
        self.closed = False
        self._init_tables()
        self._emit(MAGIC)
        self._emit(R.encode(R.Header(self.profile, self.library)))

    def _init_tables(self) -> None:
        """The schemas and channels added so far, and the statistics and index records the
        summary section is written from."""
        self._schemas: dict[int, Schema] = {}
        self._schema_records: list[R.SchemaRecord] = []
        self._schema_keys: dict[tuple[str, str, bytes], Schema] = {}
        self._undefined: dict[str, str] = {}  # see undefined_types
        self._undefined_schemas: set[int] = set()
        self._ros2_texts = False  # a ROS 2 definition with text was given: the input stores them
        self._channels: dict[int, Channel] = {}
        self._channel_records: list[R.ChannelRecord] = []
        self._next_schema_id = 1
        self._next_channel_id = 1
        self._late_names: dict[str, tuple[str, bytes]] = {}  # see define_late
        self.late: dict[int, tuple[str, bytes]] = {}  # schema id -> the definition it takes at close
        self.grown: dict[int, dict[str, str]] = {}  # channel id -> the metadata it takes at close (grow_qos)

        self.statistics = R.Statistics()
        self._counts: dict[int, int] = {}
        self._chunk_indexes: list[R.ChunkIndex] = []
        self._attachment_indexes: list[R.AttachmentIndex] = []
        self._metadata_indexes: list[R.MetadataIndex] = []

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
        if encoding in ("ros2msg", "ros2idl") and raw.strip():
            self._ros2_texts = True
        if id is None and not raw.strip() and name in self._late_names:  # (define_late: known now)
            encoding, raw = self._late_names[name]
        if encoding == "ros2msg" and id is None and not raw.strip():
            # no text (rosbag2 before Iron): the full definition polybag decodes the type with
            from polybag.codecs.ros2 import full_definition

            encoding, raw = full_definition(name, encoding, raw)
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
        if encoding == "ros2msg" and not raw.strip():
            from polybag.codecs.ros2 import undefined_type

            if undefined_type(name, encoding, raw):
                self._undefined_schemas.add(id)
        self._define(R.SchemaRecord(id, name, encoding, raw))
        return schema

    def undefined_types(self) -> dict[str, str]:
        return {} if self._ros2_texts else dict(self._undefined)

    def define_late(self, name: str, encoding: str, data: bytes) -> None:
        """The definition of the type ``name`` (``ros2msg``/``ros2idl`` text), learned after
        schemas of that name were written without one (a ROS 2 topic recorded before its type
        description arrived): those schemas carry it in the finished file (a file written to
        a path is rewritten at :meth:`close`, :mod:`~polybag.formats.mcap.late_definitions`;
        for a stream the owner calls :meth:`rewrite_late` with the file's path once it is
        closed), and a schema of that name added
        without a definition from now on takes it at once."""
        raw = bytes(data)
        if encoding not in ("ros2msg", "ros2idl") or not raw.strip() or name in self._late_names:
            return
        self._late_names[name] = (encoding, raw)
        for s in self._schemas.values():
            if s.name == name and not bytes(s.data).strip():
                self.late[s.id] = (encoding, raw)

    def grow_qos(self, channel: Channel | int, offered_qos_profiles: str) -> bool:
        """Add the QoS profiles of ``offered_qos_profiles`` (YAML text: a topic's publishers as
        they are now) that ``channel`` does not list yet to its ``offered_qos_profiles``
        metadata (the rule of rosbag2's topics, :func:`polybag.codecs.ros2_qos.merged_qos`, at
        most :data:`~polybag.codecs.ros2_qos.MAX_QOS_PROFILES`): a recording lists the profile
        of every publisher it saw, not only the first.  An MCAP Channel record cannot change
        once written, so the finished file is rewritten at :meth:`close` (with the late
        definitions, one pass, :mod:`~polybag.formats.mcap.late_definitions`; for a stream the
        owner calls :meth:`rewrite_late` with the file's path); a killed writer leaves the
        profiles it was first given.  True when the channel's profiles grew."""
        from polybag.codecs.ros2_qos import merged_qos

        check_open(self.closed)
        cid = channel if isinstance(channel, int) else channel.id
        ch = self._channels.get(cid)
        if ch is None:
            raise WriteError(f"channel {cid} was not added to this writer")
        md = self.grown.get(cid, ch.metadata)
        old = md.get("offered_qos_profiles", "")
        merged = merged_qos(old, str(offered_qos_profiles or ""))
        if merged == old:
            return False
        self.grown[cid] = {**md, "offered_qos_profiles": merged}
        return True

    def writer_options(self) -> dict[str, Any]:
        """The options this writer was made with (but the profile and library, which the
        file's Header holds): a rewrite of its file uses them."""
        return {
            "compression": self.compression, "chunk_size": self.chunk_size, "compression_level": self.compression_level,
            "use_chunking": self.use_chunking, "use_message_index": self.use_message_index,
            "use_chunk_index": self.use_chunk_index, "use_statistics": self.use_statistics,
            "use_summary_offsets": self.use_summary_offsets, "use_attachment_index": self.use_attachment_index,
            "use_metadata_index": self.use_metadata_index, "repeat_schemas": self.repeat_schemas,
            "repeat_channels": self.repeat_channels, "use_crcs": self.use_crcs,
        }

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
        if sid in self._undefined_schemas and model_schema is not None:
            self._undefined.setdefault(model_schema.name, topic)
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

    def add_attachment(self, name: str, media_type: str, data: bytes, log_time: int = 0, create_time: int = 0) -> None:
        check_open(self.closed)
        self._drain()
        rec = R.AttachmentRecord(log_time, create_time, name, media_type, bytes(data))
        covered = rec.covered()
        body = covered + R.U32.pack(_compression.crc32(covered) if self.use_crcs else 0)
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

    def flush(self) -> None:
        """Close the open chunk and hand every finished one to the OS (a killed process then
        leaves them in the file; the rosbag2 writer calls this when it refreshes metadata.yaml)."""
        check_open(self.closed)
        if self.use_chunking:
            self._finish_chunk()
        self._drain()
        self._file.flush()

    def finish_output(self) -> None:
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
            scrc = _compression.crc32(raw, scrc)
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
        scrc = _compression.crc32(head, scrc)
        self._file.write(head + R.U32.pack(scrc if self.use_crcs else 0) + MAGIC)
        self._pos += len(head) + 4 + 8
        self._writeback.wait()
        self._out.commit()
        if (self.late or self.grown) and self._out.final_path is not None:
            self.rewrite_late(self._out.final_path)

    def rewrite_late(
        self,
        path: str,
        channel_metadata: Mapping[int, Mapping[str, str]] | None = None,
        metadata_records: Mapping[str, Mapping[str, str]] | None = None,
    ) -> bool:
        """Give the schemas of :meth:`define_late` their definitions in the finished file at
        ``path`` (this writer's, or the file its stream was); ``channel_metadata``: channel
        id -> the metadata its Channel record takes instead (what grew meanwhile; by default
        that of :meth:`grow_qos`); ``metadata_records``: name -> the content Metadata records
        of that name take instead.  True when done; False, with a warning, the file as it
        was, when it cannot be."""
        import warnings

        from polybag.errors import PolybagError, PolybagWarning
        from polybag.formats.mcap.late_definitions import rewrite_with_definitions

        try:
            options = self.writer_options()

            def make(out: BinaryIO, profile: str, library: str) -> McapWriter:
                return McapWriter(out, profile=profile, library=library, **options)

            grown = self.grown if channel_metadata is None else channel_metadata
            rewrite_with_definitions(path, self.late, make, grown, metadata_records)
        except (OSError, PolybagError) as e:
            names = ", ".join(sorted({self._schemas[i].name for i in self.late if i in self._schemas}))
            what = (
                f"the definition of {names} learned during the recording could not be given to the"
                f" messages written before it ({e}); they stay without one"
                if names
                else "the QoS profiles of publishers that appeared during the recording could not be given to"
                f" the topics' channels ({e}); the bag lists the first ones only"
            )
            warnings.warn(PolybagWarning(f"{path}: {what}"), stacklevel=3)
            return False
        return True

    def abort_output(self, *, discard: bool = False) -> None:
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
