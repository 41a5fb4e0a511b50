"""PX4 ULog records: one small class or function per message table of the spec.

Layout (little endian): a 16-byte file header (magic ``ULog\\x01\\x12\\x35``, version byte,
uint64 start time in us), then messages, each ``uint16 msg_size, uint8 msg_type`` followed
by ``msg_size`` bytes.  The definitions section (``B``, ``F``, ``I``, ``M``, ``P``, ``Q``)
ends at the first ``A``, ``L`` or ``C``; the data section holds ``A``, ``R``, ``D``, ``L``,
``C``, ``S``, ``O`` and again ``I``, ``M``, ``P``, ``Q``.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

MAGIC = b"ULog\x01\x12\x35"
HEADER = struct.Struct("<7sBQ")
MSG_HEADER = struct.Struct("<HB")
SYNC_MAGIC = b"\x2f\x73\x13\x20\x25\x0c\xbb\x12"

# the message types (ULog spec "Message types"), by their one-letter codes
FLAG_BITS, FORMAT, INFO, INFO_MULTIPLE, PARAMETER, PARAMETER_DEFAULT = (ord(c) for c in "BFIMPQ")
ADD_LOGGED, REMOVE_LOGGED, DATA, LOGGING, LOGGING_TAGGED, SYNC, DROPOUT = (ord(c) for c in "ARDLCSO")
KNOWN_TYPES = frozenset(ord(c) for c in "BFIMPQARDLCSO")

# compat_flags[0]
COMPAT_DEFAULT_PARAMETERS = 0x01
# incompat_flags[0]
INCOMPAT_DATA_APPENDED = 0x01
KNOWN_INCOMPAT = (INCOMPAT_DATA_APPENDED, 0, 0, 0, 0, 0, 0, 0)
FLAG_BITS_SIZE = 40

LEVEL_NAMES = {
    ord("0"): "EMERGENCY",
    ord("1"): "ALERT",
    ord("2"): "CRITICAL",
    ord("3"): "ERROR",
    ord("4"): "WARNING",
    ord("5"): "NOTICE",
    ord("6"): "INFO",
    ord("7"): "DEBUG",
}

_INFO_TYPES = {
    "int8_t": "<b",
    "uint8_t": "<B",
    "int16_t": "<h",
    "uint16_t": "<H",
    "int32_t": "<i",
    "uint32_t": "<I",
    "int64_t": "<q",
    "uint64_t": "<Q",
    "float": "<f",
    "double": "<d",
    "bool": "<?",
    "char": "<c",
}


def level_name(level: int) -> str:
    return LEVEL_NAMES.get(level, "UNKNOWN")


def parse_string(raw: bytes | memoryview) -> str:
    return bytes(raw).decode("utf-8", "ignore")


class _Record:
    """Plain records with ``__slots__``, compared and shown field by field like a
    dataclass (a ``@dataclass`` costs ~0.3 ms of import time each, paid by every process
    that reads a ULog log)."""

    __slots__: tuple[str, ...] = ()

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, f) for f in self.__slots__)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _Record) or other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()

    # mutable records are unhashable; typeshed types __hash__ as a method, not as the
    # None that Python's data model asks for here
    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        inner = ", ".join(f"{f}={getattr(self, f)!r}" for f in self.__slots__)
        return f"{self.__class__.__qualname__}({inner})"


class FileHeader(_Record):
    """The 16-byte file header: format version and start time (us)."""

    __slots__ = ("version", "timestamp")

    def __init__(self, version: int, timestamp: int) -> None:
        self.version = version
        self.timestamp = timestamp

    @staticmethod
    def unpack(data: bytes | memoryview) -> FileHeader:
        _, version, ts = HEADER.unpack_from(data, 0)
        return FileHeader(version, ts)

    def pack(self) -> bytes:
        return HEADER.pack(MAGIC, self.version, self.timestamp)


class FlagBits(_Record):
    """A ``B`` message: compat and incompat flag bytes, appended data offsets (trailing
    zeros removed)."""

    __slots__ = ("compat_flags", "incompat_flags", "appended_offsets")

    def __init__(
        self,
        compat_flags: list[int] | None = None,
        incompat_flags: list[int] | None = None,
        appended_offsets: list[int] | None = None,
    ) -> None:
        self.compat_flags = [0] * 8 if compat_flags is None else compat_flags
        self.incompat_flags = [0] * 8 if incompat_flags is None else incompat_flags
        self.appended_offsets = [] if appended_offsets is None else appended_offsets

    @staticmethod
    def unpack(body: bytes | memoryview) -> FlagBits:
        """Parse a ``B`` body; a body longer than 40 bytes is fine (the rest is ignored)."""
        if len(body) < FLAG_BITS_SIZE:
            raise ValueError(f"flag bits message has {len(body)} bytes, expected at least {FLAG_BITS_SIZE}")
        compat = list(body[0:8])
        incompat = list(body[8:16])
        offsets = list(struct.unpack_from("<3Q", body, 16))
        while offsets and offsets[-1] == 0:
            offsets.pop()
        return FlagBits(compat, incompat, offsets)

    def unknown_incompat(self) -> list[tuple[int, int]]:
        """(byte index, unknown bits) for every incompat bit this reader does not know."""
        return [
            (i, v & ~KNOWN_INCOMPAT[i]) for i, v in enumerate(self.incompat_flags) if v & ~KNOWN_INCOMPAT[i]
        ]

    def pack(self) -> bytes:
        offs = (list(self.appended_offsets) + [0, 0, 0])[:3]
        body = bytes(self.compat_flags[:8]) + bytes(self.incompat_flags[:8]) + struct.pack("<3Q", *offs)
        return MSG_HEADER.pack(len(body), FLAG_BITS) + body


class InfoValue(NamedTuple):
    type: str
    key: str
    value: Any


def parse_info_body(body: bytes | memoryview) -> InfoValue:
    """``uint8 key_len, char key[key_len] ("type name"), value`` (I, P and the tail of M, Q)."""
    if len(body) < 1:
        raise ValueError("empty info message")
    key_len = body[0]
    if 1 + key_len > len(body):
        raise ValueError(f"info key length {key_len} runs past the message")
    type_key = parse_string(body[1 : 1 + key_len])
    parts = type_key.split(" ")
    if len(parts) < 2:
        raise ValueError(f"info key {type_key!r} is not 'type name'")
    typ, key = parts[0], parts[1]
    raw = body[1 + key_len :]
    value: Any
    if typ.startswith("char["):
        value = parse_string(raw)
    elif typ in _INFO_TYPES:
        value = struct.unpack(_INFO_TYPES[typ], raw)[0]  # struct.error on a wrong size
    else:
        value = bytes(raw)
    return InfoValue(typ, key, value)


def pack_info_value(typ: str, value: Any) -> bytes:
    if typ.startswith("char["):
        return value.encode("utf-8") if isinstance(value, str) else bytes(value)
    if typ in _INFO_TYPES:
        return struct.pack(_INFO_TYPES[typ], value)
    return bytes(value)


def info_type_for(value: Any) -> str:
    """The ULog type of a Python info value (strings as char[len])."""
    if isinstance(value, str):
        return f"char[{len(value.encode('utf-8'))}]"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int32_t" if -(1 << 31) <= value < (1 << 31) else "int64_t"
    if isinstance(value, float):
        return "float"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return f"uint8_t[{len(value)}]"
    raise TypeError(f"cannot store info value of type {type(value).__name__}")


def pack_info(msg_type: int, typ: str, key: str, value: Any, prefix: bytes = b"") -> bytes:
    """A whole I/M/P/Q message (``prefix``: M's is_continued, Q's default_types)."""
    k = f"{typ} {key}".encode()
    if len(k) > 255:
        raise ValueError(f"info key {key!r} is longer than 255 bytes")
    body = prefix + bytes([len(k)]) + k + pack_info_value(typ, value)
    if len(body) > 0xFFFF:
        raise ValueError(f"info {key!r} is longer than a ULog message can hold")
    return MSG_HEADER.pack(len(body), msg_type) + body


def param_type_for(value: Any) -> str:
    if isinstance(value, float):
        return "float"
    if isinstance(value, (int,)) and not isinstance(value, bool):
        return "int32_t"
    raise TypeError(f"parameter values are int32 or float, not {type(value).__name__}")


def pack_message(msg_type: int, body: bytes) -> bytes:
    if len(body) > 0xFFFF:
        raise ValueError(f"a ULog message holds at most 65535 bytes, not {len(body)}")
    return MSG_HEADER.pack(len(body), msg_type) + body


class Subscription(_Record):
    """An ``A`` message: ``uint8 multi_id, uint16 msg_id, char message_name[]`` (and the
    file offset of the message)."""

    __slots__ = ("multi_id", "msg_id", "name", "offset")

    def __init__(self, multi_id: int, msg_id: int, name: str, offset: int = 0) -> None:
        self.multi_id = multi_id
        self.msg_id = msg_id
        self.name = name
        self.offset = offset

    @staticmethod
    def unpack(body: bytes | memoryview, offset: int = 0) -> Subscription:
        if len(body) < 4:
            raise ValueError(f"subscription message has {len(body)} bytes, expected at least 4")
        multi_id, msg_id = struct.unpack_from("<BH", body, 0)
        return Subscription(multi_id, msg_id, parse_string(body[3:]), offset)

    def pack(self) -> bytes:
        return pack_message(ADD_LOGGED, struct.pack("<BH", self.multi_id, self.msg_id) + self.name.encode())


class LoggedMessage(NamedTuple):
    """A logged string (``L``, tag None) or tagged logged string (``C``)."""

    timestamp: int
    level: int
    text: str
    tag: int | None = None

    @property
    def level_name(self) -> str:
        return level_name(self.level)


def unpack_logging(body: bytes | memoryview) -> tuple[int, int, bytes]:
    if len(body) < 9:
        raise ValueError(f"logged string message has {len(body)} bytes, expected at least 9")
    level, ts = struct.unpack_from("<BQ", body, 0)
    return level, ts, bytes(body[9:])


def unpack_logging_tagged(body: bytes | memoryview) -> tuple[int, int, int, bytes]:
    if len(body) < 11:
        raise ValueError(f"tagged logged string message has {len(body)} bytes, expected at least 11")
    level, tag, ts = struct.unpack_from("<BHQ", body, 0)
    return level, tag, ts, bytes(body[11:])


def pack_logging(level: int, timestamp: int, text: bytes, tag: int | None = None) -> bytes:
    if tag is None:
        return pack_message(LOGGING, struct.pack("<BQ", level, timestamp) + text)
    return pack_message(LOGGING_TAGGED, struct.pack("<BHQ", level, tag, timestamp) + text)


class Dropout(NamedTuple):
    """An ``O`` message: ``duration`` ms lost, at the last data timestamp seen (us)."""

    timestamp: int
    duration: int


def pack_dropout(duration: int) -> bytes:
    return pack_message(DROPOUT, struct.pack("<H", duration))


def pack_sync() -> bytes:
    return pack_message(SYNC, SYNC_MAGIC)
