"""ROS 2 messages in CDR (XCDR1 plain, little- and big-endian) from ``ros2msg``/``ros2idl`` schemas.

The payload starts with a 4-byte encapsulation header (``00 01`` little-endian, ``00 00``
big-endian, then two option bytes); alignment is relative to the byte after it.  The
definition parsing is shared with ROS 1 (:mod:`polybag.codecs.ros1.msgdef`, dialect
``ros2``); IDL text is parsed here.  Serializers are the same generated code as ROS 1
(:mod:`polybag.codecs.ros1.serde`) with CDR alignment and strings.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Any

from polybag.codecs import CostCache, definition_key
from polybag.codecs.ros1.msgdef import (
    DEFAULT_LIMITS,
    MAX_ARRAY,
    MAX_DEPTH,
    Constant,
    DefinitionLimits,
    Field,
    FieldType,
    MsgDef,
    MsgDefError,
    TypeSet,
    _Count,
    canonical,
    check_field_names,
    defined_fields,
    parse_full,
)
from polybag.codecs.ros1.serde import Compiler, EncodeError, left_over, run_encoder  # noqa: F401 - importable here as before
from polybag.errors import DecodeError, UnsupportedError
from polybag.model import Channel, Schema

__all__ = [
    "CdrCodec",
    "DefinitionLimits",
    "UndefinedCodec",
    "check_definition",
    "codec_for_known",
    "codec_for_schema",
    "codec_for_type",
    "decoding_definition",
    "differs_from_known",
    "parse_idl",
    "ros2_typeset",
]


def _builtins() -> TypeSet:
    """What a schema's own text may leave out: the known ROS 2 types (added, then bundled)."""
    from polybag.codecs.ros2 import known_types

    return known_types()


_SEP_RE = re.compile(r"^[ \t\f\v\r]*={3,}[ \t\f\v\r]*$", re.MULTILINE)  # no \s*: see msgdef._SEPARATOR


_SRV_SUFFIXES = ("_Event", "_Request", "_Response")
_SRV_HEAD_RE = re.compile(r"\A\s*={3,}[ \t\f\v\r]*\n[ \t]*SRV:[^\n]*\n?")
_SRV_SPLIT_RE = re.compile(r"^---[ \t\f\v\r]*$", re.MULTILINE)


def service_of(name: str) -> tuple[str, str, str] | None:
    """``pkg/srv/Name_Event`` (``_Request``, ``_Response``) -> ``("pkg", "Name", "_Event")``;
    None for any other name."""
    parts = name.strip().split("/")
    if len(parts) != 3 or parts[1] != "srv":
        return None
    for suffix in _SRV_SUFFIXES:
        if parts[2].endswith(suffix) and len(parts[2]) > len(suffix):
            return parts[0], parts[2][: -len(suffix)], suffix
    return None


def service_sections(base: str, text: str) -> tuple[dict[str, str], str] | None:
    """The ``.msg`` texts of service ``base``'s (``pkg/srv/Name``) types built from its
    definition (``request --- response``, then ``MSG:`` sections), as rosbag2 stores one: the
    ``.srv`` text alone (MCAP storage), or after an ``SRV: pkg/srv/Name`` section header
    (rosbag2 from Jazzy).  ``({"_Event": ..., "_Request": ..., "_Response": ...}, the MSG:
    sections after the service's)``; the event type is rosidl's: ``service_msgs/ServiceEventInfo
    info``, ``Name_Request[<=1] request``, ``Name_Response[<=1] response``.  None when
    ``text`` is no service definition."""
    text = _SRV_HEAD_RE.sub("", text, count=1)
    m = _SEP_RE.search(text)
    main, tail = (text[: m.start()], text[m.start() :]) if m else (text, "")
    halves = _SRV_SPLIT_RE.split(main, maxsplit=1)
    if len(halves) != 2:
        return None
    req, resp = halves
    event = (
        "service_msgs/ServiceEventInfo info\n"
        f"{base}_Request[<=1] request\n"
        f"{base}_Response[<=1] response\n"
    )
    return {"_Event": event, "_Request": req, "_Response": resp}, tail


def service_types(name: str, text: str) -> str | None:
    """The full ``ros2msg`` text of ``name`` (``pkg/srv/Name_Event``, ``_Request`` or
    ``_Response``) from its service's definition (:func:`service_sections`): that type first,
    the other two as ``MSG:`` sections (keeping their ``srv/`` names, as the event's type hash
    names them), then the dependencies the text carries.  None when ``name`` is no service
    type or ``text`` no service definition."""
    parts = service_of(name)
    if parts is None:
        return None
    pkg, srv, suffix = parts
    base = f"{pkg}/srv/{srv}"
    got = service_sections(base, text)
    if got is None:
        return None
    sections, tail = got
    sep = "=" * 80
    out = [sections.pop(suffix).rstrip("\n") + "\n"]
    out += [f"{sep}\nMSG: {base}{k}\n{v.strip(chr(10))}\n" for k, v in sections.items()]
    return "".join(out) + tail.lstrip("\n")


def _idl_service(name: str, text: str) -> tuple[str, str] | None:
    """A ``ros2idl`` definition of a service type as rosbag2 stores one whose dependencies
    are ``.idl`` files: an ``SRV:`` section, then ``MSG:`` sections (empty for the IDL types)
    and ``IDL:`` sections.  ``(the service type's ros2msg text, the IDL sections)``, or None
    for any other definition."""
    if service_of(name) is None or not _SRV_HEAD_RE.match(text):
        return None
    sep = "=" * 80
    msg, idl = [], []
    for part in _SEP_RE.split(text):
        head, _, body = part.lstrip("\n").partition("\n")
        if head.startswith("IDL:"):
            idl.append(f"{sep}\n{head}\n{body}")
        elif head.startswith(("SRV:", "MSG:")) and body.strip():
            msg.append(f"{sep}\n{head}\n{body}")
    srv = service_types(name, "\n".join(msg))
    return (srv, "\n".join(idl)) if srv is not None else None


def ros2_typeset(
    name: str, text: str | bytes, encoding: str = "ros2msg", limits: DefinitionLimits | None = None
) -> TypeSet:
    """Parse a ``ros2msg`` or ``ros2idl`` schema into a resolved :class:`TypeSet`.

    A definition over ``limits`` (:data:`~polybag.codecs.ros1.msgdef.DEFAULT_LIMITS`: text
    size, types, fields, name length; nesting and expansion are checked when a type is
    compiled, :meth:`TypeSet.check`) is a :class:`MsgDefError` naming the limit.  A service
    type (``pkg/srv/Name_Event``, ``_Request``, ``_Response``) given its service's definition
    is built from it (:func:`service_types`)."""
    limits = limits or DEFAULT_LIMITS
    limits.check_text(text, name)
    if isinstance(text, (bytes, bytearray, memoryview)):
        text = bytes(text).decode("utf-8", "replace")
    text = text.replace("\r\n", "\n")
    if encoding == "ros2idl":
        ts = TypeSet("ros2", fallback=_builtins(), limits=limits)
        mixed = _idl_service(name, text)
        if mixed is not None:
            text = mixed[1]
        for d in parse_idl(text, limits, name):
            if d.name not in ts.types:
                ts.add(d)
        ts.finalize()
        if mixed is not None:  # the service's types, over the IDL types they use
            return parse_full(name, mixed[0], "ros2", fallback=ts, limits=limits)
        return ts
    srv = service_types(name, text)
    if srv is not None:
        text = srv
    return parse_full(name, text, "ros2", fallback=_builtins(), limits=limits)


def check_definition(
    name: str, text: str | bytes, encoding: str = "ros2msg", limits: DefinitionLimits | None = None
) -> TypeSet:
    """Parse a ``ros2msg``/``ros2idl`` definition and check type ``name`` against ``limits``
    (text, types, fields, names, nesting, expansion), without compiling anything; a
    :class:`MsgDefError` naming the limit, else the resolved :class:`TypeSet`.  A recorder
    taking definitions from live peers calls it with lower limits before storing one."""
    ts = ros2_typeset(name, text, encoding, limits)
    if ts.lookup(name) is None:
        raise MsgDefError(f"the definition does not define {name}", type_name=name)
    ts.check(name)
    return ts


# --- IDL -----------------------------------------------------------------------------------
_IDL_TOKEN = re.compile(
    r'\s+|//[^\n]*|/\*.*?\*/|(?P<str>"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\')'
    r"|(?P<num>[-+]?(?:0[xX][0-9a-fA-F]+|\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?))"
    r"|(?P<id>[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*)|(?P<p>::|[{}();<>,=\[\]@:#.-])",
    re.DOTALL,
)
_IDL_PRIMS = {
    "boolean": "bool",
    "octet": "uint8",
    "char": "uint8",
    "wchar": "uint16",
    "short": "int16",
    "long": "int32",
    "float": "float32",
    "double": "float64",
    "int8": "int8",
    "uint8": "uint8",
    "int16": "int16",
    "uint16": "uint16",
    "int32": "int32",
    "uint32": "uint32",
    "int64": "int64",
    "uint64": "uint64",
    "string": "string",
    "wstring": "wstring",
}


_IDL_NAME = re.compile(r"[A-Za-z_]\w*")


def _tokens(text: str, limits: DefinitionLimits = DEFAULT_LIMITS) -> Iterator[str]:
    """The tokens of an IDL text, one at a time (never a list of them all); a name (``a::b``
    scoped names: each part) longer than ``limits.name_chars`` is refused."""
    max_name = 3 * limits.name_chars + 4
    text = "\n".join(line for line in text.split("\n") if not line.lstrip().startswith("#"))
    pos = 0
    while pos < len(text):
        m = _IDL_TOKEN.match(text, pos)
        if m is None:
            raise MsgDefError(f"IDL: unexpected character {text[pos]!r} at {pos}")
        pos = m.end()
        tok = m.group("str") or m.group("num") or m.group("id") or m.group("p")
        if tok:
            if len(tok) > max_name and m.group("id"):
                raise limits.refuse(f"IDL: name {tok[:40]!r}... is {len(tok)} characters", "name_chars", None)
            yield tok


class _IdlParser:
    def __init__(self, text: str, count: _Count | None = None) -> None:
        self.count = count if count is not None else _Count(DEFAULT_LIMITS, "IDL")
        self.t = _tokens(text, self.count.limits)
        self.cur = next(self.t, "")
        self.prev = ""
        self.structs: dict[str, MsgDef] = {}
        self.consts: dict[str, list[Constant]] = {}
        self.typedefs: dict[str, FieldType] = {}

    def peek(self) -> str:
        return self.cur

    def take(self, want: str | None = None) -> str:
        tok = self.cur
        if not tok or (want is not None and tok != want):
            raise MsgDefError(f"IDL: expected {want or 'a token'}, found {tok or 'end of text'!r}")
        self.prev = tok
        self.cur = next(self.t, "")
        return tok

    def annotations(self) -> None:
        while self.peek() == "@":
            self.take()
            self.take()
            if self.peek() == "(":
                depth = 0
                while True:
                    tok = self.take()
                    depth += tok == "("
                    depth -= tok == ")"
                    if depth == 0:
                        break

    def parse(self) -> list[MsgDef]:
        try:
            self.definitions([])
        except (ValueError, KeyError, IndexError) as e:  # a number or keyword that is not one
            raise MsgDefError(f"IDL: cannot parse near {self.prev[:40]!r}: {e}") from None
        out = []
        for name, d in self.structs.items():
            owner = name + "_Constants"
            for cname, consts in self.consts.items():
                if cname == owner:
                    d.constants.extend(consts)
            out.append(d)
        return out

    def definitions(self, scope: list[str]) -> None:
        """The definitions of module ``scope`` up to its closing ``}`` (or the end)."""
        while self.peek() and self.peek() != "}":
            self.annotations()
            tok = self.peek()
            if tok == "module":
                self.module(scope)
            elif tok == "struct":
                self.struct(scope)
            elif tok == "typedef":
                self.typedef(scope)
            elif tok == "const":
                self.const(scope)
            elif tok == "enum":
                self.enum()
            elif tok == ";":
                self.take()
            else:
                raise MsgDefError(f"IDL: unexpected {tok!r}")

    def module(self, scope: list[str]) -> None:
        """``module NAME { ... };``: its definitions, scoped in ``NAME``."""
        self.take()
        name = self.take()
        self.count.check_name(name, "module name")
        if len(scope) >= MAX_DEPTH:
            raise MsgDefError(f"IDL: modules nested more than {MAX_DEPTH} levels deep")
        self.take("{")
        self.definitions([*scope, name])
        self.take("}")
        self.take(";")

    def typedef(self, scope: list[str]) -> None:
        """``typedef TYPE NAME[N]...;`` into :attr:`typedefs` (one array dimension at most)."""
        self.take()
        t = self.type_spec(scope)
        name = self.take()
        while self.peek() == "[":
            self.take()
            n = self.size()
            self.take("]")
            if t.array is not None:
                raise MsgDefError(
                    f"IDL: typedef {name}: arrays of arrays or sequences are not supported"
                )
            t = FieldType(t.base, n, None, t.string_bound, "")
        self.take(";")
        self.typedefs["/".join([*scope, name])] = t

    def const(self, scope: list[str]) -> None:
        """``const TYPE NAME = VALUE;`` into :attr:`consts` (the text kept if not a value)."""
        self.take()
        t = self.type_spec(scope)
        name = self.take()
        self.take("=")
        val = []
        while self.peek() != ";":
            val.append(self.take())
        self.take(";")
        text = " ".join(val)
        value: Any = text
        try:
            if t.base in ("string", "wstring"):
                value = text[1:-1] if text[:1] in "\"'" else text
            elif t.base == "bool":
                value = text.upper() == "TRUE"
            elif t.base.startswith("float"):
                value = float(text.replace(" ", ""))
            else:
                value = int(text.replace(" ", ""), 0)
        except ValueError:
            pass
        self.consts.setdefault("/".join(scope), []).append(Constant(name, t.base, value, text))

    def enum(self) -> None:
        """``enum NAME { ... };``: skipped."""
        self.take()
        self.take()
        self.take("{")
        while self.take() != "}":
            pass
        self.take(";")

    def scoped(self, name: str, scope: list[str]) -> str:
        parts = name.split("::")
        if len(parts) == 1:
            # relative: search enclosing scopes
            for k in range(len(scope), -1, -1):
                cand = "/".join([*scope[:k], name])
                if cand in self.typedefs or cand in self.structs:
                    return cand
            return "/".join([*scope, name])
        return "/".join(parts)

    def size(self) -> int:
        """An array size or bound: a non-negative integer token."""
        tok = self.take()
        n = int(tok, 0)
        if not 0 <= n <= MAX_ARRAY:
            raise MsgDefError(f"IDL: array size or bound {tok} out of range")
        return n

    def type_spec(self, scope: list[str]) -> FieldType:
        tok = self.take()
        if tok == "sequence":
            self.take("<")
            if self.peek() == "sequence":  # refused before recursing (``sequence<`` 5000 deep)
                raise MsgDefError("IDL: sequences of sequences or arrays are not supported")
            inner = self.type_spec(scope)  # one level: the inner type is no sequence
            if inner.array is not None:
                raise MsgDefError("IDL: sequences of sequences or arrays are not supported")
            bound = None
            if self.peek() == ",":
                self.take()
                bound = self.size()
            self.take(">")
            return FieldType(inner.base, -1, bound, inner.string_bound, "")
        if tok in ("string", "wstring"):
            sb = None
            if self.peek() == "<":
                self.take()
                sb = self.size()
                self.take(">")
            return FieldType(tok, None, None, sb, "")
        if tok == "unsigned":
            nxt = self.take()
            if nxt == "long" and self.peek() == "long":
                self.take()
                return FieldType("uint64")
            return FieldType({"short": "uint16", "long": "uint32"}[nxt])
        if tok == "long" and self.peek() == "long":
            self.take()
            return FieldType("int64")
        if tok == "long" and self.peek() == "double":
            raise MsgDefError("IDL: long double is not supported")
        if tok in _IDL_PRIMS:
            return FieldType(_IDL_PRIMS[tok])
        full = self.scoped(tok, scope)
        if full in self.typedefs:
            return self.typedefs[full]
        return FieldType(canonical(full))

    def struct(self, scope: list[str]) -> None:
        self.take("struct")
        name = self.take()
        full = "/".join([*scope, name])
        self.count.add_type(full)
        d = MsgDef(canonical(full), full_name=full)
        self.take("{")
        while self.peek() != "}":
            self.annotations()
            t = self.type_spec(scope)
            while True:
                fname = self.take()
                if not _IDL_NAME.fullmatch(fname):
                    raise MsgDefError(f"IDL: expected a member name, found {fname[:40]!r}", type_name=full)
                self.count.add_field(fname)
                ft = t
                if self.peek() == "[":
                    self.take()
                    n = self.size()
                    self.take("]")
                    if ft.array is not None:
                        raise MsgDefError("IDL: arrays of sequences are not supported", type_name=full)
                    ft = FieldType(ft.base, n, None, ft.string_bound, "")
                d.fields.append(Field(fname, ft))
                if self.peek() == ",":
                    self.take()
                    continue
                break
            self.take(";")
        self.take("}")
        self.take(";")
        check_field_names(d)
        self.structs[full] = d


def parse_idl(text: str, limits: DefinitionLimits | None = None, name: str = "IDL") -> list[MsgDef]:
    """Every struct of an IDL text (``IDL:`` sections allowed) as :class:`MsgDef` (unresolved);
    a text over ``limits`` (types, fields, names) is a :class:`MsgDefError` naming the limit."""
    count = _Count(limits or DEFAULT_LIMITS, name)
    out: list[MsgDef] = []
    for sec in _SEP_RE.split(text):
        lines = sec.lstrip().split("\n")
        if lines and lines[0].strip().startswith("IDL:"):
            sec = "\n".join(lines[1:])
        out.extend(_IdlParser(sec, count).parse())
    return out


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
    msg_type: str, definition: str | bytes, encoding: str = "ros2msg", limits: DefinitionLimits | None = None
) -> CdrCodec:
    """The codec of ``msg_type`` from its ``ros2msg``/``ros2idl`` definition (cached; a
    definition over ``limits`` is a :class:`MsgDefError` naming the limit)."""
    limits = limits or DEFAULT_LIMITS
    limits.check_text(definition, msg_type)
    key = (msg_type, encoding, definition_key(definition), limits)
    codec = _codecs.get(key)
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
        from polybag.codecs.ros2 import known_types

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
    from polybag.codecs.ros2 import known_types

    ts = known_types()
    if ts.lookup(msg_type) is None:
        where = f"topic {topic}: " if topic else ""
        raise UnsupportedError(
            f"{where}the file has no definition of {msg_type} and it is not a bundled type; "
            "add its .msg/.idl files with --types DIR (polybag.codecs.add_types)"
        )
    key = (msg_type, "known", "")
    codec = _codecs.get(key)
    if codec is None or codec.typeset is not ts:
        codec = _codecs.put(key, CdrCodec(ts, msg_type))
    return codec


def differs_from_known(name: str, encoding: str, data: bytes | memoryview) -> bool:
    """True when a file's non-empty definition of ``name`` describes another structure than
    the known type of that name (``--types``, then bundled; REP 2011 hashes compared), or
    cannot be read: its messages may not decode with it (a placeholder such as ``uint8
    level`` for ``rcl_interfaces/msg/Log``).  False for a type known nowhere."""
    from polybag.codecs.ros2 import known_types

    raw = bytes(data)
    if not raw.strip() or known_types().lookup(name) is None:
        return False
    known = _hash_of(name, "ros2msg", b"")
    return bool(known) and _hash_of(name, encoding or "ros2msg", raw) != known


@functools.lru_cache(maxsize=512)
def _hash_of(name: str, encoding: str, data: bytes) -> str:
    """:func:`polybag.codecs.ros2.type_hash_of`, remembered (forgotten when types are added)."""
    from polybag.codecs.ros2 import type_hash_of

    return type_hash_of(name, encoding, data)


def decoding_definition(name: str, encoding: str, data: bytes | memoryview, sample: bytes | memoryview) -> tuple[str, bytes, str] | None:
    """When a file's definition of CDR type ``name`` does not decode ``sample`` (one of its
    messages: too short, bytes left over, or a definition that does not parse) and the
    known type of that name (``--types``, then bundled) does: ``(encoding, full text, why
    the file's failed)`` of the known one, which is then the one to decode and write with;
    None otherwise (the file's definition stays)."""
    from polybag.codecs.ros2 import definition_for, known_types

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
