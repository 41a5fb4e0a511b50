"""ROS 1 <-> ROS 2 message conversion (``convert --profile ros2`` and ROS 2 -> bag).

Types
  ROS 1 ``pkg/Type`` becomes ROS 2 ``pkg/msg/Type``.  A type with a known ROS 2 counterpart
  (the bundled interfaces of :mod:`polybag.codecs.ros2`, or types added with ``--types``)
  uses it (``std_msgs/Header`` loses ``seq``, ``tf/tfMessage`` is ``tf2_msgs/msg/TFMessage``, ``sensor_msgs/CameraInfo``'s ``D``/``K``/``R``/``P``
  are ``d``/``k``/``r``/``p``); any other type is translated field by field: ``time`` and
  ``duration`` become ``builtin_interfaces/Time``/``Duration``, ``byte`` (ROS 1: int8) is
  written ``int8`` and ``char`` (ROS 1: uint8) ``uint8`` so every value keeps its range.
  The other way, ROS 2 ``pkg/msg/Type`` (or ``pkg/srv/Type_Event``) becomes ``pkg/Type``;
  a known ROS 1 counterpart (bundled or ``POLYBAG_MSG_PATH``) is used, other types are
  translated (``builtin_interfaces/Time`` -> ``time``, bounded strings and sequences ->
  unbounded, ``wstring`` -> ``string``); the md5sum is computed from the generated ROS 1
  definitions, and a ``Header`` gains ``seq = 0``.

Values
  Each message is decoded to plain dicts, its fields matched by name (case-insensitively
  when the exact name is not there), ``time`` <-> ``Time`` (``nsec`` <-> ``nanosec``),
  integers of one width and the other signedness wrapped (ROS 1 ``byte`` -128 is ROS 2
  ``byte`` 128), fields the target lacks left out and fields the source lacks given their
  defaults, then encoded.  A message that cannot be carried (a value out of the target's
  range, a damaged payload) is counted as dropped and its topic named in a warning.

Type hashes
  A ROS 2 channel made from a ROS 1 one carries its type's REP 2011 hash (``RIHS01_...``) in
  ``topic_type_hash`` (rosbag2 writes it to metadata.yaml as ``type_description_hash``).

QoS
  A latched ROS 1 topic gets a transient-local ``offered_qos_profiles`` (as rosbag2 writes
  it); a ROS 2 topic offered transient-local becomes ``latching=1``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from polybag.bridges.protocol import BridgedChannel
from polybag.codecs import codec_for
from polybag.codecs.cdr import CdrCodec
from polybag.codecs.definition_model import NUMPY_TYPES, PRIMITIVE_FORMATS, FieldType, MsgDef, canonical
from polybag.codecs.msg_parser import parse_msg
from polybag.codecs.ros1 import Ros1Codec
from polybag.codecs.ros1 import known_types as ros1_known
from polybag.codecs.ros2 import definition_for, full_name
from polybag.codecs.ros2 import known_types as ros2_known
from polybag.codecs.ros2.typehash import type_hash
from polybag.codecs.serde.compiler import Compiler, run_encoder
from polybag.codecs.type_set import TypeSet
from polybag.errors import PolybagError, UnsupportedError
from polybag.model import Channel, Schema

__all__ = [
    "LATCHED_QOS",
    "Mapped",
    "ros1_channel_to_ros2",
    "ros1_name",
    "ros1_to_ros2",
    "ros2_channel_to_ros1",
    "ros2_to_ros1",
]

Conv = Callable[[Any], Any]
_TIME2 = {"time": "builtin_interfaces/Time", "duration": "builtin_interfaces/Duration"}
_TIME1 = {v: k for k, v in _TIME2.items()}
_STRINGS = ("string", "wstring")
#: the offered QoS rosbag2 records for a latched (transient-local, reliable) publisher
LATCHED_QOS = """- history: 3
  depth: 0
  reliability: 1
  durability: 1
  deadline:
    sec: 2147483647
    nsec: 4294967295
  lifespan:
    sec: 2147483647
    nsec: 4294967295
  liveliness: 1
  liveliness_lease_duration:
    sec: 2147483647
    nsec: 4294967295
  avoid_ros_namespace_conventions: false
"""
#: legacy ROS 1 types whose ROS 2 counterpart has another name (the same fields)
LEGACY_RENAMES = {"tf/tfMessage": "tf2_msgs/TFMessage"}
_ROS2_KEYS = ("offered_qos_profiles", "type_description_hash", "topic_type_hash")
_ROS1_KEYS = ("md5sum", "type", "message_definition", "callerid", "latching")


@dataclass
class Mapped:
    """A channel as the other ROS: its schema (name, encoding, text), message encoding,
    channel metadata and the payload transform (``None`` for a message it cannot carry)."""

    schema_name: str
    schema_encoding: str
    schema_data: bytes
    message_encoding: str
    metadata: dict[str, str]
    transform: Callable[[bytes | memoryview], bytes | None]
    failures: int = 0
    last_error: str = ""
    name_problems: list[str] = field(default_factory=list)


def ros1_name(name: str) -> str:
    """``pkg/msg/Type`` (or ``pkg/srv/Type_Event``) -> ``pkg/Type``."""
    parts = canonical(name).split("/")
    return f"{parts[0]}/{parts[-1]}" if len(parts) > 1 else parts[0]


# --- types ---------------------------------------------------------------------------------
def _suffix(t: FieldType, bounded: bool) -> str:
    if t.array is None:
        return ""
    if t.array >= 0:
        return f"[{t.array}]"
    return f"[<={t.bound}]" if bounded and t.bound is not None else "[]"


def _word(t: FieldType) -> str:
    """A primitive field's type word: ``byte`` and ``char`` as written (both ROS keep the
    words, so a type's text and md5sum survive a round trip), others canonical."""
    w = t.raw.split("[")[0].split("<=")[0].strip() if t.raw else ""
    return w if w in ("byte", "char") else t.base


def _const_word(typ: str) -> str:
    base = typ.split("<=")[0].strip()
    if base in ("byte", "char", "bool", "string", "wstring") or base in PRIMITIVE_FORMATS:
        return "string" if base == "wstring" else base
    aliases = {"octet": "uint8", "wchar": "uint16", "float": "float32", "double": "float64"}
    return {"short": "int16", "long": "int32", **aliases}.get(base, base)


def _ros2_text(d: MsgDef) -> str:
    """A ROS 1 type as ROS 2 ``.msg`` text (nested types as ``pkg/Type``)."""
    lines = []
    for c in d.constants:
        ctype = _const_word(c.type)
        if ctype == "string":
            text = str(c.value).replace("\\", "\\\\").replace('"', '\\"')
            lines.append(f'string {c.name}="{text}"')
        else:
            lines.append(f"{ctype} {c.name}={c.text}")
    lines += _field_lines(d, lambda b: b, lambda b: _TIME2.get(b) or LEGACY_RENAMES.get(b, b))
    return "\n".join(lines) + "\n"


def _ros1_text(d: MsgDef) -> str:
    """A ROS 2 type as ROS 1 ``.msg`` text (bounds dropped, Time/Duration as time/duration)."""
    lines = []
    for c in d.constants:
        base = _const_word(c.type)
        if base == "string":
            lines.append(f"string {c.name}={c.value}")
        elif base == "bool":
            lines.append(f"bool {c.name}={bool(c.value)}")
        else:
            lines.append(f"{base} {c.name}={c.text}")
    lines += _field_lines(d, lambda b: "string", lambda b: _TIME1.get(b) or ros1_name(b))
    return "\n".join(lines) + "\n"


def _field_lines(d: MsgDef, string: Callable[[str], str], nested: Callable[[str], str]) -> list[str]:
    """The ``.msg`` lines of ``d``'s fields: primitives by their word, strings as ``string``
    names them, other types as ``nested`` names them (suffixes: arrays, bounds dropped)."""
    out = []
    for f in d.fields:
        t = f.type
        if t.base in PRIMITIVE_FORMATS:
            base = _word(t)
        elif t.base in _STRINGS:
            base = string(t.base)
        else:
            base = nested(t.base)
        out.append(f"{base}{_suffix(t, False)} {f.name}")
    return out


def ros2_types_for(src: TypeSet, name: str) -> TypeSet:
    """The ROS 2 types of ROS 1 type ``name`` (from ``src``): known counterparts, the rest
    translated (see the module notes)."""
    known = ros2_known()
    out = TypeSet("ros2", fallback=known)
    for n in [canonical(name), *src.dependencies(name)]:
        n2 = LEGACY_RENAMES.get(n, n)
        if n2 == "std_msgs/Header" or known.lookup(n2) is not None:
            continue
        out.add(parse_msg(full_name(n2), _ros2_text(src.get(n)), "ros2"))
    out.finalize()
    return out


_ROS2_TYPE = re.compile(r"[A-Z][A-Za-z0-9]*")
_ROS2_FIELD = re.compile(r"[a-z]([a-z0-9_]?[a-z0-9]+)*")
_ROS2_CONSTANT = re.compile(r"[A-Z]([A-Z0-9_]?[A-Z0-9]+)*")


def ros2_name_problems(types: TypeSet) -> list[str]:
    """Names of translated types (``types``' own, not the known ones) that ROS 2 tools
    (rosidl) refuse: lower-case type names, upper-case field names, lower-case constants.
    They are kept as they are (as rosbags-convert does); this says which."""
    out = []
    for d in types.types.values():
        short = d.name.rsplit("/", 1)[-1]
        bad = [] if _ROS2_TYPE.fullmatch(short) else [f"type name {short!r}"]
        bad += [f"field {f.name!r}" for f in d.fields if not _ROS2_FIELD.fullmatch(f.name)]
        bad += [f"constant {c.name!r}" for c in d.constants if not _ROS2_CONSTANT.fullmatch(c.name)]
        if bad:
            out.append(f"{full_name(d.name)}: {', '.join(bad)}")
    return out


def ros1_types_for(src: TypeSet, name: str) -> TypeSet:
    """The ROS 1 types of ROS 2 type ``name`` (from ``src``), see the module notes."""
    known = ros1_known()
    out = TypeSet("ros1", fallback=known)
    for n in [canonical(name), *src.dependencies(name)]:
        if n in _TIME1:
            continue
        n1 = ros1_name(n)
        if n1 == "std_msgs/Header" or known.lookup(n1) is not None:
            continue
        out.add(parse_msg(n1, _ros1_text(src.get(n)), "ros1"))
    out.finalize()
    return out


# --- values --------------------------------------------------------------------------------
_BITS = {
    "int8": 8,
    "uint8": 8,
    "int16": 16,
    "uint16": 16,
    "int32": 32,
    "uint32": 32,
    "int64": 64,
    "uint64": 64,
}


def _int_conv(src: str, dst: str) -> Conv | None:
    """Integers of one width, the other signedness: wrapped (two's complement)."""
    if src == dst or src not in _BITS or dst not in _BITS or _BITS[src] != _BITS[dst]:
        return None
    bits = _BITS[dst]
    if dst.startswith("u"):
        mask = (1 << bits) - 1
        return lambda v: int(v) & mask
    half, full = 1 << (bits - 1), 1 << bits
    return lambda v: int(v) - full if v >= half else int(v)


def _array_conv(elem: Conv, dst: str) -> Conv:
    np_dtype = np.dtype(NUMPY_TYPES[dst]) if dst in NUMPY_TYPES else None

    def conv(v: Any) -> Any:
        if np_dtype is not None:
            if isinstance(v, (bytes, bytearray, memoryview)):
                v = np.frombuffer(v, "u1")
            if isinstance(v, np.ndarray):
                return v.astype(np_dtype)
        return [elem(x) for x in v]

    return conv


class _Planner:
    """Dict -> dict converters between a source and a target type set (memoized by type)."""

    def __init__(self, src: TypeSet, dst: TypeSet, rename: Callable[[str], str]) -> None:
        self.src = src
        self.dst = dst
        self.rename = rename
        self.memo: dict[str, Conv | None] = {}
        self.objects: dict[str, bool] = {}
        #: target fields a source object may lack (scalar numbers and strings: ``Header.seq``),
        #: by name -> the source of their zero value; None: no field may be missing
        self.missing: dict[str, str] | None = None

    def message(self, src_name: str) -> Conv | None:
        """The converter of a message of ``src_name`` (None: the dict is already right)."""
        if src_name in self.memo:
            return self.memo[src_name]
        self.memo[src_name] = None  # a placeholder while it is built (types are not recursive)
        sd = self.src.get(src_name)
        dd = self.dst.get(self.rename(src_name))
        by_name = {f.name: f for f in sd.fields}
        by_lower = {f.name.lower(): f for f in sd.fields}
        steps: list[tuple[str, str, Conv | None]] = []
        identity = True
        for f in dd.fields:
            sf = by_name.get(f.name) or by_lower.get(f.name.lower())
            if sf is None:
                identity = False  # the encoder gives the default
                continue
            ok, conv = self.value(sf.type, f.type)
            if not ok:
                identity = False
                continue
            if conv is not None or sf.name != f.name:
                identity = False
            steps.append((f.name, sf.name, conv))
        if identity:
            return None
        items = tuple(steps)

        def conv_msg(d: dict[str, Any]) -> dict[str, Any]:
            out = {}
            for dk, sk, c in items:
                v = d[sk]
                out[dk] = v if c is None else c(v)
            return out

        self.memo[src_name] = conv_msg
        return conv_msg

    def objects_carry(self, src_name: str) -> bool:
        """Whether a decoded object of ``src_name`` encodes as the target type as it is: every
        target field is a source field of the same name and kind (a time of either ROS reads
        as the other's), no integer changes signedness.  Then no dict is built at all."""
        got = self.objects.get(src_name)
        if got is not None:
            return got
        self.objects[src_name] = False  # (types are not recursive)
        by_name = {f.name: f.type for f in self.src.get(src_name).fields}
        fields = self.dst.get(self.rename(src_name)).fields
        ok = bool(fields)  # (an empty CDR struct is written with a placeholder byte field)
        for f in fields:
            s, t = by_name.get(f.name), f.type
            if s is None and self.missing is not None and t.array is None and not t.is_nested:
                zero = "''" if t.base in _STRINGS else ("False" if t.base == "bool" else "0")
                ok = self.missing.setdefault(f.name, zero) == zero
            elif s is None or s.array != t.array:
                ok = False
            elif (s.base in _TIME2 and t.base == _TIME2[s.base]) or (
                s.base in _TIME1 and t.base == _TIME1[s.base]
            ):
                continue
            elif s.base in PRIMITIVE_FORMATS or t.base in PRIMITIVE_FORMATS:
                ok = s.base == t.base
            elif s.base in _STRINGS or t.base in _STRINGS:
                ok = s.base in _STRINGS and t.base in _STRINGS
            else:
                ok = s.is_nested and t.is_nested and self.objects_carry(s.base)
            if not ok:
                break
        self.objects[src_name] = ok
        return ok

    def value(self, s: FieldType, t: FieldType) -> tuple[bool, Conv | None]:
        """(can be carried, converter) of a field of type ``s`` into a field of type ``t``."""
        if (s.array is None) != (t.array is None):
            return False, None
        elem: Conv | None
        sb, tb = s.base, t.base
        if sb in _TIME2 and tb == _TIME2[sb]:
            elem = _time_to2
        elif sb in _TIME1 and tb == _TIME1[sb]:
            elem = _time_to1
        elif sb in PRIMITIVE_FORMATS and tb in PRIMITIVE_FORMATS:
            elem = _int_conv(sb, tb)
        elif sb in _STRINGS and tb in _STRINGS:
            elem = None
        elif s.is_nested and t.is_nested and sb not in _TIME1 and tb not in _TIME1:
            elem = self.message(sb)
        else:
            return False, None
        if elem is None:
            return True, None
        if s.array is None:
            return True, elem
        return True, _array_conv(elem, tb)


def _time_to2(v: dict[str, Any]) -> dict[str, Any]:
    return {"sec": v["sec"], "nanosec": v["nsec"]}


def _time_to1(v: dict[str, Any]) -> dict[str, Any]:
    return {"sec": v["sec"], "nsec": v["nanosec"]}


def _transform(mapped: Mapped, decode: Callable[[Any], Any], conv: Conv | None, encode: Callable[[Any], bytes]) -> Callable[[bytes | memoryview], bytes | None]:
    def tf(data: bytes | memoryview) -> bytes | None:
        try:
            d = decode(data)
            return encode(d if conv is None else conv(d))
        except PolybagError as e:
            mapped.failures += 1
            mapped.last_error = str(e)
            return None

    return tf


def _bridge(mapped: Mapped, codec: Any, plan: _Planner, name: str, encode: Callable[[Any], bytes], topic: str) -> Callable[[bytes | memoryview], bytes | None]:
    """The payload transform: decoded objects re-encoded when they carry over as they are
    (:meth:`_Planner.objects_carry`), else dicts converted by the plan."""
    if plan.objects_carry(name):
        return _transform(mapped, lambda b: codec.decode(b, topic=topic), None, encode)
    conv = plan.message(name)
    return _transform(mapped, lambda b: codec.to_dict(b, topic=topic, numpy=True), conv, encode)


def _qos_latched(text: str) -> bool:
    """Whether an ``offered_qos_profiles`` YAML text offers transient-local durability."""
    for line in text.splitlines():
        key, _, value = line.strip().lstrip("- ").partition(":")
        if key.strip() == "durability" and value.strip() in ("1", "transient_local"):
            return True
    return False


# --- channels ------------------------------------------------------------------------------
def _source(ch: Channel, cls: type[Ros1Codec] | type[CdrCodec], what: str, types_for: Callable[[TypeSet, str], TypeSet]) -> tuple[Any, TypeSet, str, TypeSet]:
    """``ch``'s codec (a ``cls``: UnsupportedError otherwise), its types and type name, and
    the other ROS's types for that name (``types_for``)."""
    codec = codec_for(ch)
    if not isinstance(codec, cls):
        raise UnsupportedError(f"topic {ch.topic}: not a {what} channel")
    return codec, codec.typeset, codec.type_name, types_for(codec.typeset, codec.type_name)


def ros1_channel_to_ros2(ch: Channel) -> Mapped:
    """A ROS 1 channel as a ROS 2 (CDR, ``ros2msg``) one, see the module notes."""
    codec, src, name, dst = _source(ch, Ros1Codec, "ROS 1", ros2_types_for)
    name2 = LEGACY_RENAMES.get(name, name)
    dst_codec = CdrCodec(dst, full_name(name2))
    plan = _Planner(src, dst, lambda n: LEGACY_RENAMES.get(n, n))
    md = {k: v for k, v in ch.metadata.items() if k not in _ROS1_KEYS}
    if str(ch.metadata.get("latching", "0")).lower() in ("1", "true", "yes"):
        md["offered_qos_profiles"] = LATCHED_QOS
    md["topic_type_hash"] = type_hash(dst, name2)  # as rosbag2 keeps it in MCAP channels
    mapped = Mapped(
        full_name(name2), "ros2msg", definition_for(name2, dst).encode(), "cdr", md, lambda _d: None
    )
    mapped.name_problems = ros2_name_problems(dst)
    mapped.transform = _bridge(mapped, codec, plan, name, dst_codec.encode, ch.topic)
    return mapped


def ros2_channel_to_ros1(ch: Channel) -> Mapped:
    """A ROS 2 (CDR) channel as a ROS 1 one, see the module notes."""
    codec, src, name, dst = _source(ch, CdrCodec, "CDR", ros1_types_for)
    name1 = ros1_name(name)
    dst_codec = Ros1Codec(dst, name1)
    plan = _Planner(src, dst, ros1_name)
    plan.missing = {}
    encode: Callable[[Any], bytes] = dst_codec.encode
    if plan.objects_carry(name) and plan.missing:
        comp = _LenientCompiler(dst, plan.missing)
        fn = comp.encoder(name1, "obj")
        encode = lambda o: bytes(run_encoder(fn, o, name1))  # noqa: E731
    md = {k: v for k, v in ch.metadata.items() if k not in _ROS2_KEYS}
    md["type"] = name1
    md["md5sum"] = dst.md5(name1)
    if _qos_latched(str(ch.metadata.get("offered_qos_profiles", ""))):
        md["latching"] = "1"
    mapped = Mapped(name1, "ros1msg", dst.full_text(name1).encode(), "ros1", md, lambda _d: None)
    mapped.transform = _bridge(mapped, codec, plan, name, encode, ch.topic)
    return mapped


class _LenientCompiler(Compiler):
    """ROS 1 encoders of objects that may lack some fields (a ROS 2 ``Header`` has no
    ``seq``): those are read with their zero value as the default."""

    def __init__(self, ts: TypeSet, missing: dict[str, str]) -> None:
        super().__init__(ts, "ros1", "<")
        self.missing = missing

    def attr(self, o: str, name: str, mode: str, t: FieldType | None = None, default: Any = None) -> str:
        if mode == "obj" and name in self.missing:
            return f"getattr({o}, {self.const(name)}, {self.missing[name]})"
        return super().attr(o, name, mode, t, default)


def ros1_to_ros2(ch: Channel) -> BridgedChannel:
    """The ROS 1 -> ROS 2 bridge (:mod:`polybag.bridges.registry`): :func:`ros1_channel_to_ros2`."""
    return _bridged(ch, ros1_channel_to_ros2(ch))


def ros2_to_ros1(ch: Channel) -> BridgedChannel:
    """The ROS 2 -> ROS 1 bridge (:mod:`polybag.bridges.registry`): :func:`ros2_channel_to_ros1`."""
    return _bridged(ch, ros2_channel_to_ros1(ch))


def _bridged(ch: Channel, mp: Mapped) -> BridgedChannel:
    schema = Schema(0, mp.schema_name, mp.schema_encoding, mp.schema_data)
    return BridgedChannel(ch.topic, mp.message_encoding, schema, mp.metadata, mp.transform, conversion=mp)
