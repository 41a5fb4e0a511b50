"""ROS 2 messages in CDR (XCDR1 plain, little- and big-endian) from ``ros2msg``/``ros2idl`` schemas.

The payload starts with a 4-byte encapsulation header (``00 01`` little-endian, ``00 00``
big-endian, then two option bytes); alignment is relative to the byte after it.  The
definitions come from the ROS 2 type system below (:mod:`polybag.codecs.ros2`: a schema
parsed, the known types, type hashes; the ``.msg`` parsing is shared with ROS 1,
:mod:`polybag.codecs.msg_parser`, dialect ``ros2``).  Serializers are the same generated
code as ROS 1 (:mod:`polybag.codecs.serde.compiler`) with CDR alignment and strings.
"""

from __future__ import annotations

import functools
from typing import Any

from polybag.codecs.cache import CostCache, definition_key, on_definitions_added
from polybag.codecs.definition_limits import DEFAULT_LIMITS, DefinitionLimits, MsgDefError
from polybag.codecs.definition_model import canonical
from polybag.codecs.ros2.definitions import definition_for, ros2_typeset
from polybag.codecs.ros2.store import known_types
from polybag.codecs.ros2.typehash import type_hash_of
from polybag.codecs.serde.compiler import Compiler, EncodeError, left_over
from polybag.codecs.type_set import TypeSet, defined_fields
from polybag.errors import DecodeError, UnsupportedError
from polybag.model import Channel, Schema

__all__ = [
    "CdrCodec",
    "UndefinedCodec",
    "codec_for_known",
    "codec_for_schema",
    "codec_for_type",
    "decoding_definition",
    "differs_from_known",
    "forget_known",
]


# --- codec ---------------------------------------------------------------------------------
_HEADERS = {"<": b"\x00\x01\x00\x00", ">": b"\x00\x00\x00\x00"}


class CdrCodec:
    """Decode/encode CDR payloads of one ROS 2 message type."""

    def __init__(self, typeset: TypeSet, msg_type: str) -> None:
        self.typeset = typeset
        self.type_name = canonical(msg_type)
        self.full_name = msg_type
        typeset.check(self.type_name)
        self._compilers: dict[str, Compiler] = {}
        self._payload: dict[str, Compiler] = {}  # decoders of whole payloads (origin 4)
        self._fns: dict[tuple[str, str, str], Any] = {}
        c = self.payload_compiler("<")  # compile now: definition errors surface early
        c.ns["_OTHER"] = self._other
        # the whole-payload decoder, bound as an instance attribute: one Python call per message
        self.decode = c.top_decoder(self.type_name, self.full_name)  # type: ignore[method-assign]

    def compiler(self, endian: str) -> Compiler:
        c = self._compilers.get(endian)
        if c is None:
            c = self._compilers[endian] = Compiler(self.typeset, "cdr", endian)
        return c

    def payload_compiler(self, endian: str) -> Compiler:
        """The decoders that read a whole payload (alignment counted from byte 4, after the
        encapsulation header), so no message is sliced before it is decoded."""
        c = self._payload.get(endian)
        if c is None:
            c = self._payload[endian] = Compiler(self.typeset, "cdr", endian, origin=4)
            c.class_source = self.compiler("<")  # one message class per type for both
        return c

    @property
    def message_class(self) -> type:
        return self.compiler("<").cls(self.type_name)

    def fn(self, kind: str, mode: str, endian: str) -> Any:
        key = (kind, mode, endian)
        f = self._fns.get(key)
        if f is None:
            c = self.payload_compiler(endian)
            f = c.decoder(self.type_name, mode) if kind == "d" else c.encoder(self.type_name, mode)
            self._fns[key] = f
        return f

    def _run(self, mode: str, data: bytes | memoryview, topic: str | None) -> Any:
        n = len(data)
        if n < 4:
            raise DecodeError(
                f"{n} byte payload is shorter than the 4-byte CDR header",
                topic=topic,
                type_name=self.full_name,
                offset=0,
            )
        kind = data[1]
        if data[0] != 0 or kind not in (0, 1):
            raise DecodeError(
                f"unsupported CDR encapsulation {bytes(data[:2]).hex()} (only plain CDR 0000/0001)",
                topic=topic,
                type_name=self.full_name,
                offset=0,
            )
        fn = self.fn("d", mode, "<" if kind == 1 else ">")
        try:
            value, pos = fn(data, 4, n)
        except DecodeError as e:
            msg = getattr(e, "reason", str(e))
            raise DecodeError(
                msg, topic=topic, type_name=self.full_name, field=e.field, offset=e.offset
            ) from None
        if n - pos >= 4 or pos > n:
            raise left_over(n, pos, topic, self.full_name)
        return value

    def _other(self, data: bytes | memoryview, topic: str | None = None) -> Any:
        """Payloads the little-endian decoder does not take: big-endian ones, and errors."""
        return self._run("obj", data, topic)

    def decode(self, data: bytes | memoryview, topic: str | None = None) -> Any:
        """The message as an object with attribute access (replaced per instance by the
        compiled whole-payload decoder; this is what it does)."""
        return self._run("obj", data, topic)

    def to_dict(self, data: bytes | memoryview, topic: str | None = None, numpy: bool = False) -> Any:
        return self._run("dictnp" if numpy else "dict", data, topic)

    def encode(self, obj: Any, endian: str = "<") -> bytes:
        fn = self.fn("e", "dict" if isinstance(obj, dict) else "obj", endian)
        out = bytearray(_HEADERS[endian])  # the encoders align relative to the byte after it
        try:
            fn(out, obj)
        except DecodeError as e:
            raise EncodeError(getattr(e, "reason", str(e)), type_name=self.full_name, field=e.field) from None
        return bytes(out)


# codecs by (type, encoding, definition digest, limits); bounded like polybag.codecs' cache
_codecs = CostCache(1 << 16, 4096)


def codec_for_type(
    msg_type: str,
    definition: str | bytes | bytearray | memoryview,
    encoding: str = "ros2msg",
    limits: DefinitionLimits | None = None,
) -> CdrCodec:
    """The codec of ``msg_type`` from its ``ros2msg``/``ros2idl`` definition (cached; a
    definition over ``limits`` is a :class:`MsgDefError` naming the limit)."""
    limits = limits or DEFAULT_LIMITS
    limits.check_text(definition, msg_type)
    key = (msg_type, encoding, definition_key(definition), limits)
    codec: CdrCodec | None = _codecs.get(key)
    if codec is None:
        text = definition if isinstance(definition, str) else bytes(definition).decode("utf-8", "replace")
        ts = ros2_typeset(msg_type, text, encoding, limits)
        name = msg_type
        if encoding == "ros2idl" and ts.lookup(name) is None:
            raise MsgDefError(f"IDL schema does not define {msg_type}", type_name=msg_type)
        codec = _codecs.put(key, CdrCodec(ts, name), 1 + defined_fields(ts))
    return codec


def codec_for_schema(schema: Schema, channel: Channel) -> CdrCodec:
    """Codec registry entry for ``("cdr", "ros2msg")`` and ``("cdr", "ros2idl")``."""
    name = schema.name or str(channel.metadata.get("type", ""))
    if not name:
        raise UnsupportedError(f"topic {channel.topic}: CDR channel without a schema name")
    if not bytes(schema.data).strip():
        if known_types().lookup(name) is not None or schema.encoding == "":
            return codec_for_known(name, topic=channel.topic)
        # an empty definition that names no known type: a message without fields (an Empty
        # .msg), or a type whose definition is missing (its payloads say so when decoded)
        return UndefinedCodec(ros2_typeset(name, ""), name)
    return codec_for_type(name, schema.data, schema.encoding or "ros2msg")


class UndefinedCodec(CdrCodec):
    """A type named with an empty definition that no known type defines: decoded as a message
    without fields, and a payload with more in it is a :class:`DecodeError` saying the
    definition is missing (not that bytes are left over)."""

    def __init__(self, typeset: TypeSet, msg_type: str) -> None:
        super().__init__(typeset, msg_type)
        fast = self.decode

        def decode(data: bytes | memoryview, topic: str | None = None) -> Any:
            try:
                return fast(data, topic)
            except DecodeError as e:
                raise self._missing(e, topic) from None

        self.decode = decode  # type: ignore[method-assign]

    def missing(self, e: DecodeError, topic: str | None) -> DecodeError:
        """``e`` (bytes left over, too short...) said as what it is: the type's definition
        is missing (the columns and exports raise it too)."""
        return self._missing(e, topic)

    def _missing(self, e: DecodeError, topic: str | None) -> DecodeError:
        reason = getattr(e, "reason", str(e))
        if reason.startswith("no definition"):
            return e
        msg = f"no definition for {self.full_name} (add it with --types DIR)"
        err = DecodeError(msg, topic=topic, type_name=self.full_name, offset=e.offset)
        err.reason = msg  # type: ignore[attr-defined]
        return err

    def _run(self, mode: str, data: bytes | memoryview, topic: str | None) -> Any:
        try:
            return super()._run(mode, data, topic)
        except DecodeError as e:
            raise self._missing(e, topic) from None


def forget_known() -> None:
    """Drop the codecs made from the known types (after types were added)."""
    _hash_of.cache_clear()
    for key in [k for k in _codecs if k[1] == "known"]:
        del _codecs[key]


def codec_for_known(msg_type: str, topic: str | None = None) -> CdrCodec:
    """The codec of a known type (bundled, or added with :func:`polybag.codecs.add_types`),
    for files that carry a type name and no definition (rosbag2 before Iron)."""
    ts = known_types()
    if ts.lookup(msg_type) is None:
        where = f"topic {topic}: " if topic else ""
        raise UnsupportedError(
            f"{where}the file has no definition of {msg_type} and it is not a bundled type; "
            "add its .msg/.idl files with --types DIR (polybag.codecs.add_types)"
        )
    key = (msg_type, "known", "")
    codec: CdrCodec | None = _codecs.get(key)
    if codec is None or codec.typeset is not ts:
        codec = _codecs.put(key, CdrCodec(ts, msg_type))
    return codec


def differs_from_known(name: str, encoding: str, data: bytes | memoryview) -> bool:
    """True when a file's non-empty definition of ``name`` describes another structure than
    the known type of that name (``--types``, then bundled; REP 2011 hashes compared), or
    cannot be read: its messages may not decode with it (a placeholder such as ``uint8
    level`` for ``rcl_interfaces/msg/Log``).  False for a type known nowhere."""
    raw = bytes(data)
    if not raw.strip() or known_types().lookup(name) is None:
        return False
    known = _hash_of(name, "ros2msg", b"")
    return bool(known) and _hash_of(name, encoding or "ros2msg", raw) != known


@functools.lru_cache(maxsize=512)
def _hash_of(name: str, encoding: str, data: bytes) -> str:
    """:func:`polybag.codecs.ros2.type_hash_of`, remembered (forgotten when types are added)."""
    return type_hash_of(name, encoding, data)


def decoding_definition(name: str, encoding: str, data: bytes | memoryview, sample: bytes | memoryview) -> tuple[str, bytes, str] | None:
    """When a file's definition of CDR type ``name`` does not decode ``sample`` (one of its
    messages: too short, bytes left over, or a definition that does not parse) and the
    known type of that name (``--types``, then bundled) does: ``(encoding, full text, why
    the file's failed)`` of the known one, which is then the one to decode and write with;
    None otherwise (the file's definition stays)."""
    if known_types().lookup(name) is None:
        return None
    why = ""
    try:
        codec_for_type(name, data, encoding or "ros2msg").decode(sample)
        return None
    except (DecodeError, MsgDefError, UnsupportedError) as e:
        why = str(getattr(e, "reason", "") or e)
    try:
        codec_for_known(name).decode(sample)
        text = definition_for(name)
    except (DecodeError, MsgDefError, UnsupportedError):
        return None
    return "ros2msg", text.encode("utf-8"), why


# types added (--types): the codecs made from the known types are made again
on_definitions_added(forget_known)
