"""ULog subscriptions as ROS 1 messages: the mapping ``convert``/``merge`` use for MCAP and bag.

The mapping (documented here, relied on by users of converted files):

* A ULog format ``name:type field;...`` becomes the ROS 1 type ``ulog_msgs/<name>``.  Every
  field keeps its name and order; ``_padding*`` fields are left out (also inside nested
  types).  A name used twice in one format becomes ``name``, ``name_1``... (as the ULog
  reader addresses it), and a name that is no ROS 1 identifier has each other character
  replaced by ``_`` (and ``f`` put in front when it does not start with a letter).  Types translate as ``int8_t..uint64_t -> int8..uint64``, ``float -> float32``,
  ``double -> float64``, ``bool -> bool``, ``char -> char`` (so ``char[N]`` is a fixed
  ``char[N]`` array, i.e. N bytes), fixed arrays stay fixed arrays ``T[N]``, and a nested
  ULog type ``B`` becomes ``ulog_msgs/B`` with its definition appended as a ``MSG:``
  section, exactly as ROS stores full definitions.
* The payload is the ULog ``D`` payload with the padding bytes removed.  ULog structs are
  little-endian and packed, and a ROS 1 message made only of fixed-size fields is its fields
  packed little-endian in order, so the repacked bytes *are* the ROS 1 serialization.  A
  trailing padding field missing from the data is tolerated; a message shorter than its
  fields is dropped (counted, with a warning, by the caller).
* Topic: ``/<name>`` for multi_id 0 and ``/<name>_<multi_id>`` for other instances (the
  ``ulog2csv`` naming).  Channel metadata keeps ``type``, ``md5sum`` (computed as ROS does),
  ``ulog_name`` and ``ulog_multi_id``.  Log time stays the ULog ``timestamp`` (in ns); the
  ``timestamp`` field itself is kept in the payload in microseconds.
* Logged strings (the reader's ``log_message`` channel) become ``/log_message`` messages of
  type ``ulog_msgs/logged_string`` (``uint64 timestamp``, ``uint8 log_level``, ``int32 tag``
  (-1 when untagged), ``string message``).
"""

from __future__ import annotations

import hashlib
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass

from polybag.bridges.protocol import BridgedChannel, Payload
from polybag.codecs.ulog import MAX_DEPTH, FormatDef, compile_type, parse_schema_text, unique_names
from polybag.errors import FormatError, UnsupportedError
from polybag.model import Channel, Schema

PACKAGE = "ulog_msgs"

# ULog type -> (ROS 1 type, size)
BASIC: dict[str, tuple[str, int]] = {
    "int8_t": ("int8", 1), "uint8_t": ("uint8", 1), "int16_t": ("int16", 2), "uint16_t": ("uint16", 2),
    "int32_t": ("int32", 4), "uint32_t": ("uint32", 4), "int64_t": ("int64", 8), "uint64_t": ("uint64", 8),
    "float": ("float32", 4), "double": ("float64", 8), "bool": ("bool", 1), "char": ("char", 1),
}



def check_nesting(type_name: str, stack: tuple[str, ...], err: type[Exception], itself: str, too_deep: str) -> None:
    """Raise ``err`` when ``type_name`` is already on ``stack`` (a type that contains itself:
    ``itself`` formatted with the name) or the stack is :data:`MAX_DEPTH` deep (``too_deep``
    formatted with the outermost name and the limit)."""
    if type_name in stack:
        raise err(itself.format(type_name))
    if len(stack) >= MAX_DEPTH:
        raise err(too_deep.format(stack[0], MAX_DEPTH))


_NAME = re.compile(r"[^A-Za-z0-9_]")
_IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Field:
    type: str
    array: int | None
    name: str  # the ROS 1 field name (see ros_field_names)
    ulog_name: str = ""  # the name the ULog reader addresses it by, when not ``name``

    @property
    def padding(self) -> bool:
        return (self.ulog_name or self.name).startswith("_padding")


def _identifier(name: str) -> str:
    if _IDENTIFIER.fullmatch(name):
        return name
    out = _NAME.sub("_", name)
    return out if out[:1].isalpha() else "f" + out


def ros_field_names(fmt: FormatDef) -> list[str]:
    """The ROS 1 name of each field of ``fmt``: the name the ULog reader gives it (a repeated
    name is ``name_1``...) as a valid identifier, distinct from the others (padding fields,
    left out of the definition, keep their ULog names)."""
    real = [i for i, f in enumerate(fmt.fields) if not f.is_padding]
    ros = dict(zip(real, unique_names([_identifier(fmt.names[i]) for i in real])))
    return [ros.get(i, fmt.names[i]) for i in range(len(fmt.fields))]


def _parse(text: str) -> tuple[dict[str, FormatDef], dict[str, list[Field]]]:
    try:
        defs = parse_schema_text(text.replace("\x00", ""))
    except ValueError as e:
        raise FormatError(f"ULog format: {e}") from None
    formats: dict[str, list[Field]] = {}
    for name, fmt in defs.items():
        formats[name] = [
            Field(f.type, f.array or None, ros, uname if uname != ros else "")
            for f, uname, ros in zip(fmt.fields, fmt.names, ros_field_names(fmt))
        ]
    return defs, formats


def parse_formats(text: str) -> dict[str, list[Field]]:
    """``name:type f;type[n] g;`` lines (one format per line) -> fields with their ROS 1 names."""
    return _parse(text)[1]


class _Layout:
    def __init__(self, formats: dict[str, list[Field]]) -> None:
        self.formats = formats
        self.sizes: dict[str, int] = {}

    def size(self, type_name: str, stack: tuple[str, ...] = ()) -> int:
        if type_name in BASIC:
            return BASIC[type_name][1]
        if type_name in self.sizes:
            return self.sizes[type_name]
        check_nesting(type_name, stack, FormatError, "ULog format {} contains itself", "ULog format {} nests formats more than {} deep")
        fields = self.formats.get(type_name)
        if fields is None:
            raise FormatError(f"ULog type {type_name!r} has no format definition")
        n = 0
        for f in fields:
            n += self.size(f.type, stack + (type_name,)) * (f.array or 1)
        self.sizes[type_name] = n
        return n

    def segments(self, type_name: str, base: int, out: list[list[int]]) -> int:
        """Append the (offset, length) byte ranges of non-padding data; returns the size."""
        pos = base
        for f in self.formats[type_name]:
            count = f.array or 1
            if f.type in BASIC:
                n = BASIC[f.type][1] * count
                if not f.padding:
                    if out and out[-1][0] + out[-1][1] == pos:
                        out[-1][1] += n
                    else:
                        out.append([pos, n])
                pos += n
            else:
                sz = self.size(f.type)
                if f.padding:
                    pos += sz * count
                    continue
                for _ in range(count):
                    self.segments(f.type, pos, out)
                    pos += sz
        return pos - base


def ros_type(name: str) -> str:
    return f"{PACKAGE}/{_NAME.sub('_', name)}"


def _definition_lines(formats: dict[str, list[Field]], type_name: str) -> list[str]:
    lines = []
    for f in formats[type_name]:
        if f.padding:
            continue
        t = BASIC[f.type][0] if f.type in BASIC else ros_type(f.type)
        arr = f"[{f.array}]" if f.array is not None else ""
        lines.append(f"{t}{arr} {f.name}")
    return lines


def _nested_order(formats: dict[str, list[Field]], root: str) -> list[str]:
    order: list[str] = []

    def visit(t: str) -> None:
        for f in formats[t]:
            if f.padding or f.type in BASIC or f.type in order:
                continue
            order.append(f.type)
            visit(f.type)

    visit(root)
    return order


def ros1_definition(formats: dict[str, list[Field]], root: str) -> str:
    """The full ROS 1 definition text (main type, then ``MSG:`` sections) for ``root``."""
    parts = ["\n".join(_definition_lines(formats, root))]
    for t in _nested_order(formats, root):
        parts.append("=" * 80 + f"\nMSG: {ros_type(t)}\n" + "\n".join(_definition_lines(formats, t)))
    return "\n".join(parts) + "\n"


def ros1_md5(formats: dict[str, list[Field]], root: str, _memo: dict[str, str] | None = None) -> str:
    """The md5sum ROS computes for the translated type (no constants, so fields only)."""
    memo = {} if _memo is None else _memo
    if root in memo:
        return memo[root]
    lines = []
    for f in formats[root]:
        if f.padding:
            continue
        if f.type in BASIC:
            arr = f"[{f.array}]" if f.array is not None else ""
            lines.append(f"{BASIC[f.type][0]}{arr} {f.name}")
        else:
            lines.append(f"{ros1_md5(formats, f.type, memo)} {f.name}")
    md5 = hashlib.md5("\n".join(lines).encode()).hexdigest()
    memo[root] = md5
    return md5


def _root_name(schema: Schema, formats: dict[str, list[Field]]) -> str:
    if schema.name in formats:
        return schema.name
    # the first format listed is the subscription's own type
    return next(iter(formats))


def make_repacker(formats: dict[str, list[Field]], root: str) -> tuple[int, Callable[[Payload], Payload | None]]:
    """``(size without padding, repack(data) -> bytes | None)``."""
    layout = _Layout(formats)
    full = layout.size(root)
    segs: list[list[int]] = []
    layout.segments(root, 0, segs)
    needed = segs[-1][0] + segs[-1][1] if segs else 0
    packed = sum(n for _, n in segs)

    if len(segs) == 1 and segs[0][0] == 0:
        n0 = segs[0][1]

        def repack_one(data: bytes | memoryview) -> bytes | memoryview | None:
            if len(data) < needed:
                return None
            return data if len(data) == n0 else data[:n0]

        return packed, repack_one

    slices = [slice(o, o + n) for o, n in segs]
    join = b"".join

    def repack(data: bytes | memoryview) -> bytes | None:
        if len(data) < needed:
            return None
        return join([data[s] for s in slices])

    del full
    return packed, repack


LOGGED_SCHEMA = "ulog_logged_string"
LOGGED_TOPIC = "/log_message"
LOGGED_TYPE = f"{PACKAGE}/logged_string"
LOGGED_DEFINITION = "uint64 timestamp\nuint8 log_level\nint32 tag\nstring message\n"
ULOG_LOGGED = struct.Struct("<BBHQ")  # the ULog reader's logged string: level, tagged, tag, timestamp
ROS1_LOGGED = struct.Struct("<QBiI")  # logged_string: timestamp, log_level, tag, message length


def _logged_string(data: bytes | memoryview) -> bytes | None:
    """ULog log channel payload (level, tagged, tag, timestamp, text) -> ROS 1 logged_string."""
    if len(data) < ULOG_LOGGED.size:
        return None
    level, tagged, tag, ts = ULOG_LOGGED.unpack_from(data, 0)
    text = bytes(data[ULOG_LOGGED.size :])
    return ROS1_LOGGED.pack(ts, level, tag if tagged else -1, len(text)) + text


def logged_string_to_ulog(data: bytes | memoryview) -> bytes | None:
    """The reverse of :func:`_logged_string`: ROS 1 ``ulog_msgs/logged_string`` -> the ULog
    reader's logged-string payload (:mod:`polybag.bridges.ros1_ulog`)."""
    if len(data) < ROS1_LOGGED.size:
        return None
    ts, level, tag, n = ROS1_LOGGED.unpack_from(data, 0)
    text = bytes(data[ROS1_LOGGED.size : ROS1_LOGGED.size + n])
    return ULOG_LOGGED.pack(level, 0 if tag < 0 else 1, max(tag, 0) & 0xFFFF, ts) + text


def ulog_channel_to_ros1(ch: Channel) -> tuple[str, Schema, dict[str, str], Callable[[Payload], Payload | None]]:
    """``(topic, ros1msg schema, metadata, repack)`` for a ULog channel.

    The reader's logged-string channel (schema ``ulog_logged_string``) becomes
    ``/log_message`` of type ``ulog_msgs/logged_string``: ``uint64 timestamp`` (us),
    ``uint8 log_level`` (ASCII '0'..'7'), ``int32 tag`` (-1 when untagged), ``string message``.
    """
    if ch.schema is None or ch.schema.encoding != "ulog":
        raise UnsupportedError(f"topic {ch.topic}: ULog channel without a ulog schema")
    if ch.schema.name == LOGGED_SCHEMA:
        md5 = hashlib.md5(LOGGED_DEFINITION.strip().encode()).hexdigest()
        schema = Schema(0, LOGGED_TYPE, "ros1msg", LOGGED_DEFINITION.encode())
        return LOGGED_TOPIC, schema, {"md5sum": md5, "type": LOGGED_TYPE}, _logged_string
    text = bytes(ch.schema.data).decode("utf-8", "replace")
    defs, formats = _parse(text)
    if not formats:
        raise FormatError(f"topic {ch.topic}: empty ULog format")
    root = _root_name(ch.schema, formats)
    try:  # every nested type defined, no cycle, depth and size within what a ULog holds
        compile_type(root, defs)
    except ValueError as e:
        raise FormatError(f"topic {ch.topic}: {e}") from None
    definition = ros1_definition(formats, root)
    md5 = ros1_md5(formats, root)
    _, repack = make_repacker(formats, root)
    name = str(ch.metadata.get("ulog_name") or ch.topic.lstrip("/") or root)
    multi = str(ch.metadata.get("multi_id", ch.metadata.get("ulog_multi_id", "0")))
    topic = f"/{name}" if multi in ("", "0") else f"/{name}_{multi}"
    tname = ros_type(root)
    schema = Schema(0, tname, "ros1msg", definition.encode())
    metadata = {"md5sum": md5, "type": tname, "ulog_name": name, "ulog_multi_id": multi or "0"}
    return topic, schema, metadata, repack


def ulog_to_ros1(ch: Channel) -> BridgedChannel:
    """The ULog -> ROS 1 bridge (:mod:`polybag.bridges.registry`): :func:`ulog_channel_to_ros1`."""
    topic, schema, metadata, repack = ulog_channel_to_ros1(ch)
    return BridgedChannel(topic, "ros1", schema, metadata, repack)
