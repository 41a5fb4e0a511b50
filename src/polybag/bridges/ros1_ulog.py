"""ROS 1 channels as ULog subscriptions: the mapping ``convert``/``merge``/``split`` use for
ULog targets (the reverse of :mod:`polybag.bridges.ulog_ros1`).

* ``ulog_msgs/<name>`` channels (made from a ULog by :mod:`polybag.bridges.ulog_ros1`) go back to
  the ULog format ``<name>``: every field keeps its name, order and type (``int8..uint64 ->
  int8_t..uint64_t``, ``float32 -> float``, ``float64 -> double``, ``bool``, ``char``), nested
  ``ulog_msgs/B`` become the format ``B``, fixed arrays stay fixed arrays.  The original
  ``_padding`` fields are not in the ROS 1 definition, so the fields are laid out naturally
  (packed, as ULog structs are): the payload is the ROS 1 payload unchanged and every value
  is the original one.  The subscription is ``<name>`` with ``multi_id`` from the
  ``ulog_multi_id`` metadata (or a ``/<name>_<n>`` topic).  ``/log_message``
  (``ulog_msgs/logged_string``) becomes logged strings again.
* Other ROS 1 types whose layout is fixed (only fixed-size primitives, fixed arrays and
  nested fixed types; ``time``/``duration`` become the nested formats ``ros_time`` /
  ``ros_duration`` of two 32-bit fields) become a format named after the topic
  (``/turtle1/pose`` -> ``turtle1_pose``) with a leading ``uint64_t timestamp`` added: the
  log time in microseconds.  Nested types are formats named after the ROS type
  (``geometry_msgs/Vector3`` -> ``geometry_msgs__Vector3``).  The payload is the timestamp
  followed by the ROS 1 payload.
* Types ULog cannot hold (``string``, variable-length arrays, arrays over 65535 items,
  nesting deeper than the ULog reader accepts, more bytes than a ULog data message holds)
  raise :class:`UnsupportedError` naming the field; the caller drops the channel with a
  warning.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from dataclasses import dataclass

from polybag.bridges.protocol import BridgedChannel, Payload, TimedTransform, Transform
from polybag.bridges.ulog_ros1 import BASIC, LOGGED_TYPE, PACKAGE, check_nesting, logged_string_to_ulog
from polybag.codecs.ulog import LOGGED_STRING_SCHEMA, LOGGED_STRING_TEXT, MAX_ARRAY, MAX_PAYLOAD
from polybag.errors import UnsupportedError
from polybag.model import Channel, Schema

# ROS 1 primitive -> (ULog type, size)
PRIMITIVES: dict[str, tuple[str, int]] = {ros: (ul, n) for ul, (ros, n) in BASIC.items() if ul != "char"} | {
    "byte": ("int8_t", 1),
    "char": ("uint8_t", 1),
}
TIME_FORMATS = {
    "time": ("ros_time", "ros_time:uint32_t sec;uint32_t nsec;"),
    "duration": ("ros_duration", "ros_duration:int32_t sec;int32_t nsec;"),
}

_SEPARATOR = re.compile(r"^=+\s*$")
_FIELD = re.compile(r"^([A-Za-z_][A-Za-z0-9_/]*)\s*(?:\[\s*(\d*)\s*\])?\s+([A-Za-z_][A-Za-z0-9_]*)\s*$")
_NAME = re.compile(r"[^A-Za-z0-9_]")
_TS = struct.Struct("<Q")


@dataclass(frozen=True)
class RosField:
    type: str  # a primitive, "time", "duration", "string" or a full "pkg/Type"
    array: int | None  # None: scalar, -1: variable length, N: fixed
    name: str


def parse_definition(root: str, text: str) -> dict[str, list[RosField]]:
    """A ROS 1 full definition (main type, then ``MSG:`` sections) -> fields per full type name."""
    sections: list[tuple[str, list[str]]] = [(root, [])]
    for line in text.splitlines():
        if _SEPARATOR.match(line.strip()):
            sections.append(("", []))
            continue
        s = line.strip()
        if s.startswith("MSG:") and not sections[-1][1] and not sections[-1][0]:
            sections[-1] = (s[4:].strip(), [])
            continue
        sections[-1][1].append(line)
    names = {n for n, _ in sections if n}
    short = {n.rsplit("/", 1)[-1]: n for n in names}
    out: dict[str, list[RosField]] = {}
    for name, lines in sections:
        if not name:
            continue
        pkg = name.rsplit("/", 1)[0] if "/" in name else ""
        fields = []
        for raw in lines:
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            head = line.split(None, 1)
            if len(head) == 2 and "=" in head[1]:
                continue  # a constant
            m = _FIELD.match(line)
            if m is None:
                raise UnsupportedError(f"type {name}: cannot read the field {line!r}")
            t, arr, fname = m.group(1), m.group(2), m.group(3)
            if arr and (len(arr) > 9 or int(arr) > MAX_ARRAY):
                raise UnsupportedError(f"type {name}: array {line!r} is longer than a ULog array ({MAX_ARRAY})")
            if t not in PRIMITIVES and t not in ("string", "time", "duration"):
                if t == "Header":
                    t = "std_msgs/Header"
                elif "/" not in t:
                    t = f"{pkg}/{t}" if f"{pkg}/{t}" in names or t not in short else short[t]
            array = None if arr is None else (-1 if arr == "" else int(arr))
            fields.append(RosField(t, array, fname))
        out[name] = fields
    return out


def _format_name(type_name: str, ulog: bool) -> str:
    if ulog and type_name.startswith(PACKAGE + "/"):
        return _NAME.sub("_", type_name[len(PACKAGE) + 1 :])
    return _NAME.sub("_", type_name.replace("/", "__"))


def topic_format_name(topic: str) -> str:
    return _NAME.sub("_", topic.strip("/").replace("/", "_")) or "root"


class _Builder:
    def __init__(self, types: dict[str, list[RosField]], ulog: bool) -> None:
        self.types = types
        self.ulog = ulog
        self.formats: dict[str, str] = {}  # format name -> text, nested first
        self.sizes: dict[str, int] = {}

    def field_text(self, f: RosField, where: str, stack: tuple[str, ...]) -> tuple[str, int]:
        if f.array == -1:
            raise UnsupportedError(f"{where}.{f.name}: variable-length array {f.type}[] (ULog holds fixed layouts only)")
        if f.type == "string":
            raise UnsupportedError(f"{where}.{f.name}: string field (ULog holds fixed layouts only)")
        if (f.array or 0) > MAX_ARRAY:
            raise UnsupportedError(f"{where}.{f.name}: array of {f.array} items (ULog holds at most {MAX_ARRAY})")
        count = f.array or 1
        if f.type in PRIMITIVES:
            t, size = PRIMITIVES[f.type]
            if self.ulog and f.type == "char":
                t = "char"
        elif f.type in TIME_FORMATS:
            t, text = TIME_FORMATS[f.type]
            self.formats.setdefault(t, text)
            size = 8
        else:
            t, size = self.nested(f.type, stack)
        arr = f"[{f.array}]" if f.array is not None else ""
        return f"{t}{arr} {f.name}", size * count

    def nested(self, type_name: str, stack: tuple[str, ...]) -> tuple[str, int]:
        name = _format_name(type_name, self.ulog)
        if name in self.sizes:
            return name, self.sizes[name]
        check_nesting(type_name, stack, UnsupportedError, "type {} contains itself", "type {} nests types more than {} deep (ULog's limit)")
        fields = self.types.get(type_name)
        if fields is None:
            raise UnsupportedError(f"type {type_name}: no definition in the schema")
        parts, size = self.body(fields, type_name, stack + (type_name,))
        self.formats[name] = f"{name}:{parts}"
        self.sizes[name] = size
        return name, size

    def body(self, fields: list[RosField], where: str, stack: tuple[str, ...]) -> tuple[str, int]:
        parts = []
        size = 0
        for f in fields:
            text, n = self.field_text(f, where, stack)
            parts.append(text + ";")
            size += n
            if size > MAX_PAYLOAD:
                raise UnsupportedError(
                    f"{where}: more than {MAX_PAYLOAD} bytes, more than a ULog data message holds"
                )
        return "".join(parts), size


@dataclass
class UlogMapping:
    """How one ROS 1 channel is written to a ULog file."""

    name: str  # subscription / format name ("" for logged strings)
    multi_id: int
    formats: list[str]  # format texts, nested ones first
    transform: Callable[..., Payload | None] | None
    timed: bool = False  # transform(data, log_time)
    logged_strings: bool = False


def ros1_channel_to_ulog(ch: Channel) -> UlogMapping:
    """The ULog subscription for a ROS 1 channel; UnsupportedError when ULog cannot hold it."""
    s = ch.schema
    if s is None or s.encoding != "ros1msg":
        raise UnsupportedError(f"topic {ch.topic}: a ROS 1 channel without a ros1msg schema")
    type_name = s.name or str(ch.metadata.get("type", ""))
    if type_name == LOGGED_TYPE:
        return UlogMapping("", 0, [], logged_string_to_ulog, logged_strings=True)
    text = bytes(s.data).decode("utf-8", "replace")
    types = parse_definition(type_name, text)
    ulog = type_name.startswith(PACKAGE + "/")
    b = _Builder(types, ulog)
    fields = types[type_name]
    if ulog:
        name = _format_name(type_name, True)
        first = fields[0] if fields else None
        if first is None or first.name != "timestamp" or first.array is not None or first.type not in ("uint64", "uint32"):
            raise UnsupportedError(f"topic {ch.topic}: {type_name} has no leading timestamp field")
        body, size = b.body(fields, type_name, (type_name,))
        b.formats[name] = f"{name}:{body}"
        multi = _multi_id(ch, name)

        def check(data: bytes | memoryview) -> bytes | memoryview | None:
            return data if len(data) == size else None

        return UlogMapping(name, multi, list(b.formats.values()), check)
    if any(f.name == "timestamp" for f in fields):
        raise UnsupportedError(f"topic {ch.topic}: {type_name} has its own 'timestamp' field")
    name = topic_format_name(ch.topic)
    body, size = b.body(fields, type_name, (type_name,))
    b.formats[name] = f"{name}:uint64_t timestamp;{body}"
    pack = _TS.pack

    def add_time(data: bytes | memoryview, log_time: int) -> bytes | None:
        if len(data) != size:
            return None
        return pack(max(log_time, 0) // 1000) + bytes(data)

    return UlogMapping(name, 0, list(b.formats.values()), add_time, timed=True)


def _multi_id(ch: Channel, name: str) -> int:
    for key in ("ulog_multi_id", "multi_id"):
        v = ch.metadata.get(key)
        if v is not None:
            try:
                return int(v)
            except ValueError:
                pass
    m = re.fullmatch(rf"/?{re.escape(name)}_(\d+)", ch.topic)
    return int(m.group(1)) if m else 0


def ros1_to_ulog(ch: Channel) -> BridgedChannel:
    """The ROS 1 -> ULog bridge (:mod:`polybag.bridges.registry`): :func:`ros1_channel_to_ulog`
    as a ULog subscription (topic and schema: the format name; ``multi_id`` in the metadata;
    the formats for the writer), or the logged strings' ``log_message`` channel."""
    mp = ros1_channel_to_ulog(ch)
    if mp.logged_strings:
        schema = Schema(0, LOGGED_STRING_SCHEMA, "ulog", LOGGED_STRING_TEXT)
        return BridgedChannel("log_message", "ulog", schema, {}, mp.transform, key=("logged_strings",))
    tf: Transform | None = mp.transform
    if mp.timed and mp.transform is not None:
        tf = TimedTransform(mp.transform)
    schema = Schema(0, mp.name, "ulog", "\n".join(mp.formats).encode())
    key = ("ulog", mp.name, mp.multi_id)
    return BridgedChannel(mp.name, "ulog", schema, {"multi_id": str(mp.multi_id)}, tf, key=key, formats=tuple(mp.formats))
