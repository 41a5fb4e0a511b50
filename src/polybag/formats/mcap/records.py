"""MCAP records: one small class per table of the specification, read and write side by side.

Every record is ``<opcode u8><content length u64><content>``.  Readers of record content
follow the spec's compatibility rules: fields missing at the end of a record read as their
zero value, and bytes after the last known field (new fields, padding) are skipped.  A
length prefix that points past the end of its record is an error, never an allocation.

The hot paths (messages inside chunks) do not go through these classes: the reader walks
chunks with the precompiled structs defined here (:data:`MESSAGE_HEAD`, :data:`RECORD_HEAD`).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import ClassVar, Protocol, TypeVar

from polybag.errors import FormatError

MAGIC = b"\x89MCAP0\r\n"
MAGIC_LEN = 8


class Opcode(IntEnum):
    HEADER = 0x01
    FOOTER = 0x02
    SCHEMA = 0x03
    CHANNEL = 0x04
    MESSAGE = 0x05
    CHUNK = 0x06
    MESSAGE_INDEX = 0x07
    CHUNK_INDEX = 0x08
    ATTACHMENT = 0x09
    ATTACHMENT_INDEX = 0x0A
    STATISTICS = 0x0B
    METADATA = 0x0C
    METADATA_INDEX = 0x0D
    SUMMARY_OFFSET = 0x0E
    DATA_END = 0x0F


# --- precompiled structs ----------------------------------------------------------------
RECORD_HEAD = struct.Struct("<BQ")  # opcode, content length
RECORD_HEAD_LEN = 9
MESSAGE_HEAD = struct.Struct("<HIQQ")  # channel_id, sequence, log_time, publish_time
MESSAGE_HEAD_LEN = 22
RECORD_MESSAGE_HEAD = struct.Struct("<BQHIQQ")  # a whole message record head
RECORD_MESSAGE_HEAD_LEN = 31
CHUNK_HEAD = struct.Struct("<QQQI")  # start, end, uncompressed_size, uncompressed_crc
FOOTER_BODY = struct.Struct("<QQI")
FOOTER_RECORD_LEN = RECORD_HEAD_LEN + FOOTER_BODY.size  # 29
CHUNK_INDEX_HEAD = struct.Struct("<QQQQ")
U8 = struct.Struct("<B")
U16 = struct.Struct("<H")
U32 = struct.Struct("<I")
U64 = struct.Struct("<Q")
U16U64 = struct.Struct("<HQ")

# numpy dtype of one message index entry (log_time, offset)
MESSAGE_INDEX_DTYPE = [("log_time", "<u8"), ("offset", "<u8")]


class Cursor:
    """Reads the fields of one record body, applying the zero-value and skip rules.

    Once a field does not fit in what remains, it and every later field read as zero
    values (``missing`` becomes True).  A length-prefixed field whose prefix fits but
    whose content runs past the record is an error.
    """

    __slots__ = ("buf", "pos", "end", "path", "offset", "what", "missing")

    def __init__(self, buf: memoryview | bytes, pos: int, end: int, path: str | None, offset: int, what: str) -> None:
        self.buf = buf
        self.pos = pos
        self.end = end
        self.path = path
        self.offset = offset  # file offset of buf[0] (for error messages)
        self.what = what
        self.missing = False

    def _fixed(self, st: struct.Struct) -> int:
        if self.missing or self.pos + st.size > self.end:
            self.missing = True
            return 0
        v: int = st.unpack_from(self.buf, self.pos)[0]
        self.pos += st.size
        return v

    def u8(self) -> int:
        return self._fixed(U8)

    def u16(self) -> int:
        return self._fixed(U16)

    def u32(self) -> int:
        return self._fixed(U32)

    def u64(self) -> int:
        return self._fixed(U64)

    def _sized(self, n: int, field_name: str) -> memoryview | bytes:
        if self.pos + n > self.end:
            raise FormatError(
                f"{self.what} field {field_name} declares {n} bytes, record has {self.end - self.pos} left",
                self.path,
                self.offset + self.pos,
            )
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def bytes32(self, field_name: str) -> bytes:
        if self.missing or self.pos + 4 > self.end:
            self.missing = True
            return b""
        n = U32.unpack_from(self.buf, self.pos)[0]
        self.pos += 4
        return bytes(self._sized(n, field_name))

    def bytes64(self, field_name: str) -> bytes:
        if self.missing or self.pos + 8 > self.end:
            self.missing = True
            return b""
        n = U64.unpack_from(self.buf, self.pos)[0]
        self.pos += 8
        return bytes(self._sized(n, field_name))

    def string(self, field_name: str) -> str:
        raw = self.bytes32(field_name)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise FormatError(f"{self.what} field {field_name} is not UTF-8", self.path, self.offset + self.pos) from None

    def _map_body(self, field_name: str) -> tuple[memoryview | bytes, int] | None:
        if self.missing or self.pos + 4 > self.end:
            self.missing = True
            return None
        n = U32.unpack_from(self.buf, self.pos)[0]
        self.pos += 4
        start = self.pos
        self._sized(n, field_name)
        return self.buf, start

    def str_str_map(self, field_name: str) -> dict[str, str]:
        got = self._map_body(field_name)
        out: dict[str, str] = {}
        if got is None:
            return out
        end = self.pos
        sub = Cursor(self.buf, got[1], end, self.path, self.offset, self.what)
        while sub.pos < end:
            if sub.pos + 4 > end:
                raise FormatError(f"{self.what} field {field_name} ends inside an entry", self.path, self.offset + sub.pos)
            k = sub.string(field_name)
            if sub.pos + 4 > end:
                raise FormatError(f"{self.what} field {field_name} ends inside an entry", self.path, self.offset + sub.pos)
            out[k] = sub.string(field_name)
        return out

    def u16_u64_map(self, field_name: str) -> dict[int, int]:
        got = self._map_body(field_name)
        out: dict[int, int] = {}
        if got is None:
            return out
        end = self.pos
        p = got[1]
        if (end - p) % 10:
            raise FormatError(
                f"{self.what} field {field_name} is {end - p} bytes, not a multiple of 10", self.path, self.offset + p
            )
        buf = self.buf
        for k, v in U16U64.iter_unpack(buf[p:end]):
            out[k] = v
        return out

    def rest(self) -> memoryview | bytes:
        out = self.buf[self.pos : self.end]
        self.pos = self.end
        return out


# --- writing helpers ---------------------------------------------------------------------
def _str(s: str) -> bytes:
    b = s.encode("utf-8")
    return U32.pack(len(b)) + b


def _b32(b: bytes | memoryview) -> bytes:
    return U32.pack(len(b)) + bytes(b)


def _str_map(m: Mapping[str, str]) -> bytes:
    body = b"".join(_str(k) + _str(v) for k, v in m.items())
    return U32.pack(len(body)) + body


def _u16_u64_map(m: Mapping[int, int]) -> bytes:
    body = b"".join(U16U64.pack(k, v) for k, v in m.items())
    return U32.pack(len(body)) + body


def frame(opcode: int, body: bytes | memoryview) -> bytes:
    """A whole record: opcode, length, content."""
    return RECORD_HEAD.pack(opcode, len(body)) + bytes(body)


# --- one class per spec table ------------------------------------------------------------
@dataclass(slots=True)
class Header:
    opcode: ClassVar[int] = Opcode.HEADER
    profile: str = ""
    library: str = ""

    @classmethod
    def read(cls, c: Cursor) -> Header:
        return cls(c.string("profile"), c.string("library"))

    def body(self) -> bytes:
        return _str(self.profile) + _str(self.library)


@dataclass(slots=True)
class Footer:
    opcode: ClassVar[int] = Opcode.FOOTER
    summary_start: int = 0
    summary_offset_start: int = 0
    summary_crc: int = 0

    @classmethod
    def read(cls, c: Cursor) -> Footer:
        return cls(c.u64(), c.u64(), c.u32())

    def body(self) -> bytes:
        return FOOTER_BODY.pack(self.summary_start, self.summary_offset_start, self.summary_crc)


@dataclass(slots=True)
class SchemaRecord:
    opcode: ClassVar[int] = Opcode.SCHEMA
    id: int = 0
    name: str = ""
    encoding: str = ""
    data: bytes = b""

    @classmethod
    def read(cls, c: Cursor) -> SchemaRecord:
        return cls(c.u16(), c.string("name"), c.string("encoding"), c.bytes32("data"))

    def body(self) -> bytes:
        return U16.pack(self.id) + _str(self.name) + _str(self.encoding) + _b32(self.data)


NIL_UUID = bytes(16)


@dataclass(slots=True)
class ChannelRecord:
    opcode: ClassVar[int] = Opcode.CHANNEL
    id: int = 0
    schema_id: int = 0
    topic: str = ""
    message_encoding: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    uuid: bytes = NIL_UUID

    @classmethod
    def read(cls, c: Cursor) -> ChannelRecord:
        r = cls(c.u16(), c.u16(), c.string("topic"), c.string("message_encoding"), c.str_str_map("metadata"))
        if not c.missing and c.pos + 16 <= c.end:
            r.uuid = bytes(c.buf[c.pos : c.pos + 16])
            c.pos += 16
        return r

    def body(self) -> bytes:
        out = U16.pack(self.id) + U16.pack(self.schema_id) + _str(self.topic) + _str(self.message_encoding)
        out += _str_map(self.metadata)
        if self.uuid != NIL_UUID:  # older readers and the conformance suite expect no uuid
            out += self.uuid
        return out


@dataclass(slots=True)
class MessageRecord:
    opcode: ClassVar[int] = Opcode.MESSAGE
    channel_id: int = 0
    sequence: int = 0
    log_time: int = 0
    publish_time: int = 0
    data: bytes = b""

    @classmethod
    def read(cls, c: Cursor) -> MessageRecord:
        if c.pos + MESSAGE_HEAD_LEN <= c.end:
            cid, seq, lt, pt = MESSAGE_HEAD.unpack_from(c.buf, c.pos)
            c.pos += MESSAGE_HEAD_LEN
            return cls(cid, seq, lt, pt, bytes(c.rest()))
        # a message shorter than its fixed head: the fields present, zeros for the rest
        return cls(c.u16(), c.u32(), c.u64(), c.u64(), b"")

    def body(self) -> bytes:
        return MESSAGE_HEAD.pack(self.channel_id, self.sequence, self.log_time, self.publish_time) + bytes(self.data)


@dataclass(slots=True)
class Chunk:
    opcode: ClassVar[int] = Opcode.CHUNK
    message_start_time: int = 0
    message_end_time: int = 0
    uncompressed_size: int = 0
    uncompressed_crc: int = 0
    compression: str = ""
    records: bytes | memoryview = b""

    @classmethod
    def read(cls, c: Cursor) -> Chunk:
        start, end, usize, ucrc = c.u64(), c.u64(), c.u64(), c.u32()
        comp = c.string("compression")
        if c.missing or c.pos + 8 > c.end:
            c.missing = True
            return cls(start, end, usize, ucrc, comp, b"")
        n = U64.unpack_from(c.buf, c.pos)[0]
        c.pos += 8
        return cls(start, end, usize, ucrc, comp, c._sized(n, "records"))

    def body(self) -> bytes:
        return (
            CHUNK_HEAD.pack(self.message_start_time, self.message_end_time, self.uncompressed_size, self.uncompressed_crc)
            + _str(self.compression)
            + U64.pack(len(self.records))
            + bytes(self.records)
        )


@dataclass(slots=True)
class MessageIndex:
    opcode: ClassVar[int] = Opcode.MESSAGE_INDEX
    channel_id: int = 0
    records: list[tuple[int, int]] = field(default_factory=list)

    @classmethod
    def read(cls, c: Cursor) -> MessageIndex:
        cid = c.u16()
        raw = c.bytes32("records")
        if len(raw) % 16:
            raise FormatError(f"message index records are {len(raw)} bytes, not a multiple of 16", c.path, c.offset + c.pos)
        return cls(cid, list(struct.iter_unpack("<QQ", raw)))

    def body(self) -> bytes:
        recs = b"".join(struct.pack("<QQ", t, o) for t, o in self.records)
        return U16.pack(self.channel_id) + _b32(recs)


@dataclass(slots=True)
class ChunkIndex:
    opcode: ClassVar[int] = Opcode.CHUNK_INDEX
    message_start_time: int = 0
    message_end_time: int = 0
    chunk_start_offset: int = 0
    chunk_length: int = 0
    message_index_offsets: dict[int, int] = field(default_factory=dict)
    message_index_length: int = 0
    compression: str = ""
    compressed_size: int = 0
    uncompressed_size: int = 0

    @classmethod
    def read(cls, c: Cursor) -> ChunkIndex:
        return cls(
            c.u64(), c.u64(), c.u64(), c.u64(), c.u16_u64_map("message_index_offsets"),
            c.u64(), c.string("compression"), c.u64(), c.u64(),
        )  # fmt: skip

    def body(self) -> bytes:
        return (
            CHUNK_INDEX_HEAD.pack(self.message_start_time, self.message_end_time, self.chunk_start_offset, self.chunk_length)
            + _u16_u64_map(self.message_index_offsets)
            + U64.pack(self.message_index_length)
            + _str(self.compression)
            + U64.pack(self.compressed_size)
            + U64.pack(self.uncompressed_size)
        )


@dataclass(slots=True)
class AttachmentRecord:
    opcode: ClassVar[int] = Opcode.ATTACHMENT
    log_time: int = 0
    create_time: int = 0
    name: str = ""
    media_type: str = ""
    data: bytes = b""
    crc: int = 0
    crc_end: int = 0  # position in the buffer where the crc-covered bytes end (reading only)

    @classmethod
    def read(cls, c: Cursor) -> AttachmentRecord:
        lt, ct = c.u64(), c.u64()
        name, mt, data = c.string("name"), c.string("media_type"), c.bytes64("data")
        crc_end = c.pos
        return cls(lt, ct, name, mt, data, c.u32(), crc_end)

    def covered(self) -> bytes:
        return (
            struct.pack("<QQ", self.log_time, self.create_time)
            + _str(self.name)
            + _str(self.media_type)
            + U64.pack(len(self.data))
            + self.data
        )

    def body(self) -> bytes:
        return self.covered() + U32.pack(self.crc)


@dataclass(slots=True)
class AttachmentIndex:
    opcode: ClassVar[int] = Opcode.ATTACHMENT_INDEX
    offset: int = 0
    length: int = 0
    log_time: int = 0
    create_time: int = 0
    data_size: int = 0
    name: str = ""
    media_type: str = ""

    @classmethod
    def read(cls, c: Cursor) -> AttachmentIndex:
        return cls(c.u64(), c.u64(), c.u64(), c.u64(), c.u64(), c.string("name"), c.string("media_type"))

    def body(self) -> bytes:
        return (
            struct.pack("<QQQQQ", self.offset, self.length, self.log_time, self.create_time, self.data_size)
            + _str(self.name)
            + _str(self.media_type)
        )


@dataclass(slots=True)
class Statistics:
    opcode: ClassVar[int] = Opcode.STATISTICS
    message_count: int = 0
    schema_count: int = 0
    channel_count: int = 0
    attachment_count: int = 0
    metadata_count: int = 0
    chunk_count: int = 0
    message_start_time: int = 0
    message_end_time: int = 0
    channel_message_counts: dict[int, int] = field(default_factory=dict)

    @classmethod
    def read(cls, c: Cursor) -> Statistics:
        return cls(
            c.u64(), c.u16(), c.u32(), c.u32(), c.u32(), c.u32(), c.u64(), c.u64(),
            c.u16_u64_map("channel_message_counts"),
        )  # fmt: skip

    def body(self) -> bytes:
        return struct.pack(
            "<QHIIIIQQ",
            self.message_count,
            self.schema_count,
            self.channel_count,
            self.attachment_count,
            self.metadata_count,
            self.chunk_count,
            self.message_start_time,
            self.message_end_time,
        ) + _u16_u64_map(self.channel_message_counts)


@dataclass(slots=True)
class MetadataRecord:
    opcode: ClassVar[int] = Opcode.METADATA
    name: str = ""
    metadata: dict[str, str] = field(default_factory=dict)

    @classmethod
    def read(cls, c: Cursor) -> MetadataRecord:
        return cls(c.string("name"), c.str_str_map("metadata"))

    def body(self) -> bytes:
        return _str(self.name) + _str_map(self.metadata)


@dataclass(slots=True)
class MetadataIndex:
    opcode: ClassVar[int] = Opcode.METADATA_INDEX
    offset: int = 0
    length: int = 0
    name: str = ""

    @classmethod
    def read(cls, c: Cursor) -> MetadataIndex:
        return cls(c.u64(), c.u64(), c.string("name"))

    def body(self) -> bytes:
        return struct.pack("<QQ", self.offset, self.length) + _str(self.name)


@dataclass(slots=True)
class SummaryOffset:
    opcode: ClassVar[int] = Opcode.SUMMARY_OFFSET
    group_opcode: int = 0
    group_start: int = 0
    group_length: int = 0

    @classmethod
    def read(cls, c: Cursor) -> SummaryOffset:
        return cls(c.u8(), c.u64(), c.u64())

    def body(self) -> bytes:
        return struct.pack("<BQQ", self.group_opcode, self.group_start, self.group_length)


@dataclass(slots=True)
class DataEnd:
    opcode: ClassVar[int] = Opcode.DATA_END
    data_section_crc: int = 0

    @classmethod
    def read(cls, c: Cursor) -> DataEnd:
        return cls(c.u32())

    def body(self) -> bytes:
        return U32.pack(self.data_section_crc)


@dataclass(slots=True)
class UnknownRecord:
    """A record whose opcode this version does not know; kept as raw bytes."""

    op: int = 0
    data: bytes = b""

    @property
    def opcode(self) -> int:
        return self.op

    def body(self) -> bytes:
        return self.data


Record = (
    Header | Footer | SchemaRecord | ChannelRecord | MessageRecord | Chunk | MessageIndex | ChunkIndex
    | AttachmentRecord | AttachmentIndex | Statistics | MetadataRecord | MetadataIndex | SummaryOffset
    | DataEnd | UnknownRecord
)  # fmt: skip

class RecordClass(Protocol):
    """A record class: reads its record from a :class:`Cursor` over its content."""

    def read(self, c: Cursor) -> Record: ...


RECORD_CLASSES: dict[int, RecordClass] = {
    Opcode.HEADER: Header,
    Opcode.FOOTER: Footer,
    Opcode.SCHEMA: SchemaRecord,
    Opcode.CHANNEL: ChannelRecord,
    Opcode.MESSAGE: MessageRecord,
    Opcode.CHUNK: Chunk,
    Opcode.MESSAGE_INDEX: MessageIndex,
    Opcode.CHUNK_INDEX: ChunkIndex,
    Opcode.ATTACHMENT: AttachmentRecord,
    Opcode.ATTACHMENT_INDEX: AttachmentIndex,
    Opcode.STATISTICS: Statistics,
    Opcode.METADATA: MetadataRecord,
    Opcode.METADATA_INDEX: MetadataIndex,
    Opcode.SUMMARY_OFFSET: SummaryOffset,
    Opcode.DATA_END: DataEnd,
}

OPCODE_NAMES = {int(o): o.name.title().replace("_", "") for o in Opcode}


def parse_record(
    opcode: int, buf: memoryview | bytes, start: int, end: int, path: str | None = None, offset: int = 0
) -> Record:
    """The record whose content is ``buf[start:end]`` (``offset``: file offset of ``buf[0]``)."""
    cls = RECORD_CLASSES.get(opcode)
    if cls is None:
        return UnknownRecord(opcode, bytes(buf[start:end]))
    c = Cursor(buf, start, end, path, offset, OPCODE_NAMES[opcode])
    rec: Record = cls.read(c)
    return rec


# The least content each record's fields take, per the spec's tables (every length-prefixed
# field empty); Channel's trailing uuid, a later addition, is not counted.  ``check`` reports a
# record shorter than its fields (:func:`shortfall`); reading gives the missing ones zero values.
MIN_CONTENT: dict[int, int] = {
    Opcode.HEADER: 4 + 4,
    Opcode.FOOTER: 8 + 8 + 4,
    Opcode.SCHEMA: 2 + 4 + 4 + 4,
    Opcode.CHANNEL: 2 + 2 + 4 + 4 + 4,
    Opcode.MESSAGE: MESSAGE_HEAD_LEN,
    Opcode.CHUNK: 8 + 8 + 8 + 4 + 4 + 8,
    Opcode.MESSAGE_INDEX: 2 + 4,
    Opcode.CHUNK_INDEX: 8 * 4 + 4 + 8 + 4 + 8 + 8,
    Opcode.ATTACHMENT: 8 + 8 + 4 + 4 + 8 + 4,
    Opcode.ATTACHMENT_INDEX: 8 * 5 + 4 + 4,
    Opcode.STATISTICS: 8 + 2 + 4 * 4 + 8 + 8 + 4,
    Opcode.METADATA: 4 + 4,
    Opcode.METADATA_INDEX: 8 + 8 + 4,
    Opcode.SUMMARY_OFFSET: 1 + 8 + 8,
    Opcode.DATA_END: 4,
}

_FIXED_SIZE = frozenset({Opcode.FOOTER, Opcode.MESSAGE, Opcode.SUMMARY_OFFSET, Opcode.DATA_END})


def shortfall(opcode: int, buf: memoryview | bytes, start: int, end: int) -> str | None:
    """Why the content ``buf[start:end]`` of an ``opcode`` record is shorter than the fields
    its spec table lists, or None when they all fit (an unknown opcode always fits).  A length
    prefix that runs past the record is not judged here (parsing raises on it)."""
    least = MIN_CONTENT.get(opcode)
    if least is None:
        return None
    name = OPCODE_NAMES[opcode]
    n = end - start
    if n < least:
        return f"{name} record is {n} bytes, shorter than its fields (at least {least} bytes per the spec)"
    if opcode in _FIXED_SIZE:
        return None
    if not _misses(opcode, buf, start, end):
        return None
    # what its fields need: the shortest zero padding after which every field is there (at
    # most ``least`` bytes: missing fields read as empty ones)
    padded = bytes(buf[start:end]) + bytes(least)
    more = next((k for k in range(1, least + 1) if not _misses(opcode, padded, 0, n + k)), least)
    return f"{name} record is {n} bytes, shorter than its fields (they need {n + more} bytes here)"


def _misses(opcode: int, buf: memoryview | bytes, start: int, end: int) -> bool:
    """Whether a field of the record ``buf[start:end]`` does not fit (read as its zero value)."""
    c = Cursor(buf, start, end, None, 0, OPCODE_NAMES[opcode])
    try:
        RECORD_CLASSES[opcode].read(c)
    except FormatError:
        return False  # a length prefix running past the record: the read reports it
    return c.missing


_R = TypeVar("_R")


def parse_as(
    kind: type[_R], opcode: int, buf: memoryview | bytes, start: int, end: int, path: str | None = None, offset: int = 0
) -> _R:
    """:func:`parse_record` where the opcode is known to make a ``kind``."""
    rec = parse_record(opcode, buf, start, end, path, offset)
    assert isinstance(rec, kind)
    return rec


def encode(rec: Record) -> bytes:
    """The whole record: opcode, length and content."""
    return frame(rec.opcode, rec.body())


#: a Footer record without a summary (summary start 0, summary offset start 0, CRC 0) and the
#: closing magic, 37 bytes: what a file still being written may end with for now, so that
#: readers that need a file's end (rosbags) open it (the rosbag2 writer's MCAP storage while
#: it records)
PROVISIONAL_END = bytes([Opcode.FOOTER]) + (20).to_bytes(8, "little") + bytes(20) + MAGIC
