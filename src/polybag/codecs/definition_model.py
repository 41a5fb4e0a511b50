"""Message definition model: the primitive types and their aliases per dialect, and a parsed
type (:class:`MsgDef`: its :class:`Field` list, each of a :class:`FieldType`, and its
:class:`Constant` list), shared by the ROS 1 and the CDR serializers.

:mod:`polybag.codecs.msg_parser` builds these from ``.msg`` text; :mod:`polybag.codecs.type_set`
holds them by name and resolves the names they use.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: primitive type -> (struct format char, size); ``string``/``wstring`` are variable sized
PRIMITIVE_FORMATS: dict[str, tuple[str, int]] = {
    "bool": ("?", 1),
    "int8": ("b", 1),
    "uint8": ("B", 1),
    "int16": ("h", 2),
    "uint16": ("H", 2),
    "int32": ("i", 4),
    "uint32": ("I", 4),
    "int64": ("q", 8),
    "uint64": ("Q", 8),
    "float32": ("f", 4),
    "float64": ("d", 8),
}
NUMPY_TYPES: dict[str, str] = {
    "bool": "?",
    "int8": "i1",
    "uint8": "u1",
    "int16": "i2",
    "uint16": "u2",
    "int32": "i4",
    "uint32": "u4",
    "int64": "i8",
    "uint64": "u8",
    "float32": "f4",
    "float64": "f8",
}
ROS1_BUILTINS = {*PRIMITIVE_FORMATS, "string", "time", "duration", "char", "byte"}
ROS2_BUILTINS = {
    *PRIMITIVE_FORMATS,
    "string",
    "wstring",
    "char",
    "byte",
    "octet",
    "float",
    "double",
    "long",
    "short",
    "wchar",
}
# alias -> canonical primitive, per dialect
ROS1_ALIASES = {"char": "uint8", "byte": "int8"}
ROS2_ALIASES = {
    "char": "uint8",
    "byte": "uint8",
    "octet": "uint8",
    "float": "float32",
    "double": "float64",
    "long": "int32",
    "short": "int16",
    "wchar": "uint16",
}

#: base types that are not message types (primitives, strings, ROS 1 time and duration)
BUILTIN_BASES = frozenset({*PRIMITIVE_FORMATS, "string", "wstring", "time", "duration"})


@dataclass(frozen=True, slots=True)
class FieldType:
    """A field's type.

    ``base`` is a canonical primitive (``float64``, ``string``, ``time``...) or a message
    type name (``pkg/Type``, canonical form without ``/msg/``).  ``array`` is ``None`` for a
    scalar, ``-1`` for a variable-length sequence, ``n`` for a fixed array.
    """

    base: str
    array: int | None = None
    bound: int | None = None  # upper bound of a bounded sequence (ROS 2)
    string_bound: int | None = None  # upper bound of a bounded string (ROS 2)
    raw: str = ""  # the type as written, for md5 (``float64[9]``, ``char``)

    @property
    def is_primitive(self) -> bool:
        return self.base in PRIMITIVE_FORMATS

    @property
    def is_message(self) -> bool:
        return "/" in self.base

    @property
    def is_nested(self) -> bool:
        """A message type (anything that is not a primitive, a string or a ROS 1 time)."""
        return self.base not in BUILTIN_BASES


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    type: FieldType
    #: the default value a ROS 2 ``.msg`` gives (``int32 x 5``, ``float64[] v [1.0, 2.0]``,
    #: ``string s "a b"``); None when it gives none.  It changes no byte on the wire: new
    #: messages and the dict encoder's missing keys take it.
    default: object = None


@dataclass(frozen=True, slots=True)
class Constant:
    name: str
    type: str
    value: object
    text: str  # the value as written (md5 input)


@dataclass(slots=True)
class MsgDef:
    name: str  # canonical pkg/Type
    fields: list[Field] = field(default_factory=list)
    constants: list[Constant] = field(default_factory=list)
    full_name: str = ""  # as the file spells it (pkg/msg/Type)
    # ROS 1 md5 inputs: (type text or None for messages, base message name, field name)
    md5_fields: list[tuple[str, str, str]] = field(default_factory=list)
    md5_constants: list[str] = field(default_factory=list)


def canonical(name: str) -> str:
    """``pkg/msg/Type`` -> ``pkg/Type``; other names unchanged."""
    parts = name.strip().split("/")
    if len(parts) == 3 and parts[1] == "msg":
        return f"{parts[0]}/{parts[2]}"
    return name.strip()



def render_msg(d: MsgDef) -> str:
    lines = [f"{c.type} {c.name}={c.text}" for c in d.constants]
    for f in d.fields:
        t = f.type
        if t.raw:
            raw = t.raw
        else:
            raw = t.base
            if t.array is not None:
                raw += "[]" if t.array < 0 else f"[{t.array}]"
        lines.append(f"{raw} {f.name}")
    return "\n".join(lines) + "\n"
