"""ROS bag record layout: op codes, record headers, fixed-width index entries.

Every bag version from ``#ROSRECORD V1.2`` on is a sequence of records
``<header_len u32><header><data_len u32><data>``, the header a sequence of
``<field_len u32><name>=<value>`` fields.  This module parses and builds them, with
every length checked against the bytes that remain, and defines numpy dtypes for the
fixed-width arrays (index data entries, chunk info entries) read in bulk.  numpy is imported
when a dtype is first asked for (the readers), not with the module: writing a bag (``polybag
record``) needs none of it to start.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from polybag.errors import FormatError, TruncatedError

if TYPE_CHECKING:
    import numpy as np

    INDEX_V1_DTYPE: np.dtype[np.void]
    INDEX_V0_DTYPE: np.dtype[np.void]
    CHUNK_INFO_DTYPE: np.dtype[np.void]

# --- op codes (ROS bag format 1.2 and 2.0) ---------------------------------------------
OP_MSG_DEF = 0x01  # 1.2 only: message definition
OP_MSG_DATA = 0x02
OP_FILE_HEADER = 0x03
OP_INDEX_DATA = 0x04
OP_CHUNK = 0x05  # 2.0
OP_CHUNK_INFO = 0x06  # 2.0
OP_CONNECTION = 0x07  # 2.0

OP_NAMES = {
    OP_MSG_DEF: "message definition",
    OP_MSG_DATA: "message data",
    OP_FILE_HEADER: "bag header",
    OP_INDEX_DATA: "index data",
    OP_CHUNK: "chunk",
    OP_CHUNK_INFO: "chunk info",
    OP_CONNECTION: "connection",
}

MAGIC_V20 = b"#ROSBAG V2.0\n"
BAG_HEADER_RECORD_LEN = 4096  # the bag header record is padded to this many bytes

U32 = struct.Struct("<I")
U64 = struct.Struct("<Q")
TIME = struct.Struct("<II")
_u32 = U32.unpack_from

_DTYPES: dict[str, list[tuple[str, str]]] = {
    # IndexData ver 1 (2.0): count x (sec, nsec, offset-in-uncompressed-chunk)
    "INDEX_V1_DTYPE": [("sec", "<u4"), ("nsec", "<u4"), ("offset", "<u4")],
    # IndexData ver 0 (1.2): count x (sec, nsec, file position u64)
    "INDEX_V0_DTYPE": [("sec", "<u4"), ("nsec", "<u4"), ("pos", "<u8")],
    # ChunkInfo ver 1 data: count x (conn, message count)
    "CHUNK_INFO_DTYPE": [("conn", "<u4"), ("count", "<u4")],
}
_INDEX_V0_SIZE = 16  # INDEX_V0_DTYPE.itemsize
_INDEX_V1_SIZE = 12  # INDEX_V1_DTYPE.itemsize


def __getattr__(name: str) -> Any:
    """The numpy dtypes, made (and numpy imported) when first asked for."""
    fields = _DTYPES.get(name)
    if fields is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import numpy as np

    dtype = globals()[name] = np.dtype(fields)
    return dtype

Header = dict[str, bytes]


def parse_header(view: memoryview | bytes, start: int, length: int, path: str | None, offset: int) -> Header:
    """The ``name=value`` fields of a record header at ``view[start:start+length]``.

    ``offset`` is the absolute file offset of the header (for error messages).
    """
    end = start + length
    if end > len(view):
        raise TruncatedError(f"record header of {length} bytes runs past the end", path, offset)
    out: Header = {}
    pos = start
    while pos < end:
        if pos + 4 > end:
            raise FormatError(
                f"record header field length needs 4 bytes, header has {end - pos} left", path, offset + pos - start
            )
        (flen,) = _u32(view, pos)
        pos += 4
        if flen > end - pos:
            raise FormatError(
                f"record header field of {flen} bytes runs past the header end ({end - pos} bytes left)",
                path,
                offset + pos - 4 - start,
            )
        field = bytes(view[pos : pos + flen])
        eq = field.find(b"=")
        if eq < 0:
            raise FormatError("record header field has no '='", path, offset + pos - start)
        out[field[:eq].decode("latin-1")] = field[eq + 1 :]
        pos += flen
    return out


def build_header(fields: Mapping[str, bytes]) -> bytes:
    parts = []
    for k, v in fields.items():
        kb = k.encode("ascii")
        parts.append(U32.pack(len(kb) + 1 + len(v)))
        parts.append(kb)
        parts.append(b"=")
        parts.append(v)
    return b"".join(parts)


def build_record(fields: Mapping[str, bytes], data: bytes | memoryview = b"") -> bytes:
    h = build_header(fields)
    return b"".join((U32.pack(len(h)), h, U32.pack(len(data)), data))


class HeaderFields:
    """Typed access to a parsed header with errors that name the record."""

    __slots__ = ("h", "path", "offset", "what")

    def __init__(self, h: Header, path: str | None, offset: int, what: str) -> None:
        self.h = h
        self.path = path
        self.offset = offset
        self.what = what

    def raw(self, name: str) -> bytes:
        v = self.h.get(name)
        if v is None:
            raise FormatError(f"{self.what} record header lacks the {name!r} field", self.path, self.offset)
        return v

    def has(self, name: str) -> bool:
        return name in self.h

    def u8(self, name: str) -> int:
        v = self.raw(name)
        if len(v) != 1:
            raise FormatError(f"{self.what} field {name!r} must be 1 byte, is {len(v)}", self.path, self.offset)
        return v[0]

    def u32(self, name: str) -> int:
        v = self.raw(name)
        if len(v) != 4:
            raise FormatError(f"{self.what} field {name!r} must be 4 bytes, is {len(v)}", self.path, self.offset)
        return int(_u32(v)[0])

    def u64(self, name: str) -> int:
        v = self.raw(name)
        if len(v) != 8:
            raise FormatError(f"{self.what} field {name!r} must be 8 bytes, is {len(v)}", self.path, self.offset)
        return int(U64.unpack(v)[0])

    def time(self, name: str) -> int:
        v = self.raw(name)
        if len(v) != 8:
            raise FormatError(f"{self.what} field {name!r} must be 8 bytes, is {len(v)}", self.path, self.offset)
        s: int
        ns: int
        s, ns = TIME.unpack(v)
        return s * 1_000_000_000 + ns

    def str(self, name: str, default: str | None = None) -> str:
        v = self.h.get(name)
        if v is None:
            if default is not None:
                return default
            raise FormatError(f"{self.what} record header lacks the {name!r} field", self.path, self.offset)
        return v.decode("utf-8", "replace")


def index_data_count(f: HeaderFields, data_len: int, version: int, path: str | None, offset: int) -> int:
    """The entry count of an index data record (header ``f``, ``data_len`` data bytes) once
    its ``ver`` is ``version`` (0 in 1.2 bags, 1 in 2.0 bags) and its data holds exactly
    that many entries; a FormatError otherwise."""
    ver = f.u32("ver")
    if ver != version:
        raise FormatError(
            f"index data version {ver} in a {'1.2' if version == 0 else '2.0'} bag (expected {version})", path, offset
        )
    count = f.u32("count")
    size = _INDEX_V0_SIZE if version == 0 else _INDEX_V1_SIZE
    if data_len != count * size:
        raise FormatError(f"index data holds {data_len} bytes, count {count} needs {count * size}", path, offset)
    return count


def op_of(h: Header, path: str | None, offset: int) -> int:
    v = h.get("op")
    if v is None or len(v) != 1:
        raise FormatError("record header has no 1-byte 'op' field", path, offset)
    return v[0]


def read_record_at(view: memoryview | bytes, pos: int, limit: int, path: str | None, base: int = 0) -> tuple[Header, int, int, int]:
    """Parse the record at ``view[pos:]`` (not past ``limit``).

    Returns ``(header, data_start, data_len, next_pos)``.  ``base`` is added to ``pos``
    for error offsets (for records inside a decompressed chunk it is the chunk's file
    offset; then offsets name the position inside the uncompressed chunk).
    """
    hl = _length_at(view, pos, limit, path, base, "header")
    h = parse_header(view, pos + 4, hl, path, base + pos + 4)
    dpos = pos + 4 + hl
    dl = _length_at(view, dpos, limit, path, base, "data")
    return h, dpos + 4, dl, dpos + 4 + dl


def _length_at(view: memoryview | bytes, pos: int, limit: int, path: str | None, base: int, what: str) -> int:
    """The u32 length at ``pos`` of a record's ``what`` (header or data), checked against
    the bytes left before ``limit`` (TruncatedError at ``base + pos`` otherwise)."""
    if pos + 4 > limit:
        raise TruncatedError(f"expected a 4-byte record {what} length, {limit - pos} bytes left", path, base + pos)
    n: int
    (n,) = _u32(view, pos)
    if n > limit - pos - 4:
        raise TruncatedError(f"record {what} length {n} runs past the end ({limit - pos - 4} bytes left)", path, base + pos)
    return n


def time_to_ns(sec: np.ndarray, nsec: np.ndarray) -> np.ndarray:
    import numpy as np

    return sec.astype(np.int64) * 1_000_000_000 + nsec.astype(np.int64)


def pack_time(ns: int) -> bytes:
    if ns < 0:
        raise ValueError(f"bag times cannot be negative: {ns}")
    s, n = divmod(ns, 1_000_000_000)
    if s > 0xFFFFFFFF:
        raise ValueError(f"bag times must fit in 32-bit seconds: {ns}")
    return TIME.pack(s, n)
