"""Message definitions: parse ``.msg`` text (ROS 1 and ROS 2 dialects) and compute ROS 1 md5sums.

A full definition, as stored in bags (connection ``message_definition``) and MCAP
(``ros1msg``/``ros2msg`` schemas), is the main type's text followed by dependency sections,
each introduced by a line of ``=`` characters and ``MSG: pkg/Type``.  :func:`parse_full`
turns it into a :class:`TypeSet`: a name -> :class:`MsgDef` map with type resolution
(package-relative names, ``Header``), shared by the ROS 1 and the CDR serializers.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from polybag.errors import DecodeError

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

# a line of '=' (spaces around it, no other whitespace: ``\s*`` would span blank lines and make
# a text of newlines cost quadratic time)
_SEPARATOR = re.compile(r"^[ \t\f\v\r]*={3,}[ \t\f\v\r]*$", re.MULTILINE)
_CONSTANT = re.compile(r"^[A-Za-z_]\w*\s*=")

#: message types nested deeper than this are refused (real types nest about 10 levels); every
#: recursive walk over a type (decoders, columns, ``to_dict`` of objects) stays well inside
#: Python's recursion limit at this depth
MAX_DEPTH = 100
#: fields of a type fully expanded (nested messages and fixed-size arrays of messages counted
#: element by element, primitive arrays and sequences as one): a type over this is refused, so a few lines of
#: definition cannot unfold into billions of fields (``A a; A b`` repeated level after level)
MAX_FIELDS = 1 << 18
#: largest fixed array length accepted
MAX_ARRAY = (1 << 31) - 1
#: bytes of one definition's text (every section or IDL module together); real ones are a few
#: KB, the largest bundled-with-comments ones (MoveIt's) about 100 KB
MAX_TEXT_BYTES = 4 << 20
#: message types (``MSG:`` sections, IDL structs) in one definition; real ones hold 1-50
MAX_TYPES = 10_000
#: fields written in one definition, all its types together (what the decoders are generated
#: from: compiling costs time and memory in proportion to it); real ones hold a few hundred
MAX_DEFINED_FIELDS = 1 << 14
#: characters of one field or type name (real ones: a few dozen)
MAX_NAME = 256
_BUILTIN_BASES = frozenset({*PRIMITIVE_FORMATS, "string", "wstring", "time", "duration"})
# characters a field name cannot hold: they build column paths (``a.b``, ``c[0]``)
_PATH_CHARS = frozenset(".[]")


class MsgDefError(DecodeError):
    """A message definition that cannot be parsed or resolved."""


@dataclass(frozen=True, slots=True)
class DefinitionLimits:
    """What one message definition may hold before it is refused (a :class:`MsgDefError` naming
    the limit and the type), so that parsing and compiling it costs time and memory in
    proportion to these numbers, never to what the input declares.

    ``text_bytes``: its text; ``types``: message types (sections, IDL structs); ``fields``:
    fields written in all its types together (compiling costs about this much); ``name_chars``:
    one field or type name; ``depth``: nesting levels; ``expanded_fields``: fields of a type
    fully expanded (nested messages and fixed arrays of messages counted field by field).

    :data:`DEFAULT_LIMITS` applies to definitions from files; a caller with less trusted
    definitions (a live peer's) passes lower ones, e.g.
    ``DEFAULT_LIMITS.lower(fields=2000)``, to :func:`parse_full`,
    :func:`polybag.codecs.ros2.ros2_typeset`, :func:`polybag.codecs.ros2.check_definition` or
    :func:`polybag.codecs.cdr.codec_for_type`.
    """

    text_bytes: int = MAX_TEXT_BYTES
    types: int = MAX_TYPES
    fields: int = MAX_DEFINED_FIELDS
    name_chars: int = MAX_NAME
    depth: int = MAX_DEPTH
    expanded_fields: int = MAX_FIELDS

    def lower(self, **limits: int) -> DefinitionLimits:
        """These limits with some replaced (``lower(fields=2000, depth=16)``)."""
        return replace(self, **limits)

    def refuse(self, what: str, limit: str, type_name: str | None) -> MsgDefError:
        """The error of a definition over limit ``limit`` (an attribute name)."""
        return MsgDefError(
            f"{what} (over the limit DefinitionLimits.{limit} = {getattr(self, limit)})",
            type_name=short_name(type_name) if type_name else None,
        )

    def check_text(self, text: str | bytes | bytearray | memoryview, type_name: str | None) -> None:
        """Refuse a definition text over :attr:`text_bytes` (before anything is parsed)."""
        n = len(text) if not isinstance(text, str) or text.isascii() else len(text.encode("utf-8", "replace"))
        if n > self.text_bytes:
            raise self.refuse(f"the definition text is {n} bytes", "text_bytes", type_name)


#: the limits of definitions read from files (replace it to change them process-wide)
DEFAULT_LIMITS = DefinitionLimits()


def short_name(name: str, keep: int = 120) -> str:
    """A name from the input cut for an error message."""
    return name if len(name) <= keep else f"{name[:keep]}... ({len(name)} characters)"


class DefinitionCount:
    """Types and fields of one definition counted while it is parsed, refused past its limits."""

    __slots__ = ("limits", "name", "types", "fields")

    def __init__(self, limits: DefinitionLimits, name: str) -> None:
        self.limits = limits
        self.name = name
        self.types = 0
        self.fields = 0

    def add_type(self, type_name: str) -> None:
        self.types += 1
        if self.types > self.limits.types:
            raise self.limits.refuse(f"the definition holds more than {self.limits.types} message types", "types", self.name)
        self.check_name(type_name, "type name")

    def add_field(self, field_name: str) -> None:
        self.fields += 1
        if self.fields > self.limits.fields:
            raise self.limits.refuse(
                f"the definition holds more than {self.limits.fields} fields, all its types together", "fields", self.name
            )
        self.check_name(field_name, "field name")

    def check_name(self, name: str, what: str) -> None:
        if len(name) > self.limits.name_chars:
            raise self.limits.refuse(f"{what} {short_name(name, 40)!r} is {len(name)} characters", "name_chars", self.name)


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
        return self.base not in _BUILTIN_BASES


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


def _package(name: str) -> str:
    return name.split("/", 1)[0] if "/" in name else ""


def _convert_constant(typ: str, text: str, dialect: str) -> object:
    t = text.strip()
    if typ in ("string", "wstring"):
        if dialect == "ros2" and len(t) >= 2 and t[0] == t[-1] and t[0] in "'\"":
            return t[1:-1].encode().decode("unicode_escape")
        return t
    if typ == "bool":
        return t.lower() in ("true", "1")
    if typ in ("float32", "float64", "float", "double"):
        return float(t)
    return int(t, 0)


class TypeSet:
    """Message definitions by canonical name, with resolution and md5 computation."""

    def __init__(
        self, dialect: str = "ros1", fallback: TypeSet | None = None, limits: DefinitionLimits | None = None
    ) -> None:
        self.dialect = dialect
        self.types: dict[str, MsgDef] = {}
        self.fallback = fallback
        #: depth and expansion limits of :meth:`check` (None: :data:`DEFAULT_LIMITS`)
        self.limits = limits
        self._md5: dict[str, str] = {}
        self._shape: dict[str, tuple[int, int]] = {}  # checked type -> (depth, expanded fields)
        self._short: dict[str, list[str]] | None = None

    def __contains__(self, name: str) -> bool:
        return self.lookup(name) is not None

    def lookup(self, name: str) -> MsgDef | None:
        key = canonical(name)
        d = self.types.get(key)
        if d is None and self.fallback is not None:
            d = self.fallback.lookup(key)
        return d

    def get(self, name: str) -> MsgDef:
        d = self.lookup(name)
        if d is None:
            raise MsgDefError(f"unknown message type {name!r}", type_name=name)
        return d

    def add(self, d: MsgDef) -> None:
        self.types[d.name] = d
        self._md5.clear()
        self._shape.clear()
        self._short = None

    def resolve(self, base: str, package: str) -> str:
        """The canonical name of type ``base`` used inside ``package``."""
        if "/" in base:
            return canonical(base)
        if base == "Header":
            cand = f"{package}/Header" if package else ""
            if cand and cand in self.types:
                return cand
            return "std_msgs/Header"
        if package:
            cand = f"{package}/{base}"
            if self.lookup(cand) is not None:
                return cand
        # not in its own package: take a unique type of that name from anywhere in the text
        matches = self._by_short().get(base, [])
        if len(matches) == 1:
            return matches[0]
        if self.fallback is not None:
            fm = self.fallback._by_short().get(base, [])
            if len(fm) == 1:
                return fm[0]
        return f"{package}/{base}" if package else base

    def _by_short(self) -> dict[str, list[str]]:
        """Type names by their last part (one pass, kept until a type is added)."""
        if self._short is None:
            self._short = {}
            for n in self.types:
                self._short.setdefault(n.rsplit("/", 1)[-1], []).append(n)
        return self._short

    def finalize(self) -> None:
        """Resolve package-relative names of every field (after all sections are added)."""
        for d in self.types.values():
            pkg = _package(d.name)
            new = []
            changed = False
            for f in d.fields:
                t = f.type
                if t.base not in PRIMITIVE_FORMATS and t.base not in (
                    "string",
                    "wstring",
                    "time",
                    "duration",
                ):
                    full = self.resolve(t.base, pkg)
                    if full != t.base:
                        t = FieldType(full, t.array, t.bound, t.string_bound, t.raw)
                        changed = True
                new.append(Field(f.name, t))
            if changed:
                d.fields = new
        self._md5.clear()
        self._shape.clear()

    def check(self, name: str) -> None:
        """Raise :class:`MsgDefError` if ``name`` or a dependency is undefined or recursive, or
        the type nests deeper than :data:`MAX_DEPTH` or expands to more than :data:`MAX_FIELDS`.

        The walk is iterative (no Python recursion, whatever the definition) and stops as soon
        as the chain it follows is too deep; results are kept per type.
        """
        key = canonical(name)
        if key in self._shape:
            return
        max_depth = (self.limits or DEFAULT_LIMITS).depth
        shape = self._shape
        path: list[str] = []
        on_path: set[str] = set()
        todo: list[Iterator[Field]] = []

        def enter(n: str) -> None:
            d = self.lookup(n)
            if d is None:
                raise MsgDefError(f"definition of {n} is missing", type_name=key)
            if len(path) >= max_depth:
                raise MsgDefError(
                    f"message types nested more than {max_depth} levels deep ({_chain([*path, n])}; "
                    "the limit is DefinitionLimits.depth)",
                    type_name=key,
                )
            path.append(n)
            on_path.add(n)
            todo.append(iter(d.fields))

        enter(key)
        while path:
            n = path[-1]
            for f in todo[-1]:
                b = f.type.base
                if b in _BUILTIN_BASES or b in shape:
                    continue
                if b in on_path:
                    loop = path[path.index(b) :] + [b]
                    raise MsgDefError(f"recursive message definition: {_chain(loop)}", type_name=key)
                enter(b)
                break
            else:
                shape[n] = self._measure(n, key)
                path.pop()
                on_path.discard(n)
                todo.pop()

    def _measure(self, n: str, top: str) -> tuple[int, int]:
        """(depth, expanded fields) of ``n`` from its (already measured) nested types."""
        limits = self.limits or DEFAULT_LIMITS
        depth, size = 1, 1
        for f in self.get(n).fields:
            t = f.type
            if t.base in _BUILTIN_BASES:
                size += 1
                continue
            sub_depth, sub_size = self._shape[t.base]
            depth = max(depth, sub_depth + 1)
            if t.array is None:
                size += sub_size
            elif t.array >= 0:
                size += 1 + t.array * sub_size
            else:  # a sequence: its elements are paid for by payload bytes (or bounded when empty)
                size += 1
            if size > limits.expanded_fields:
                raise MsgDefError(
                    f"{n} expands to more than {limits.expanded_fields} fields (nested messages and fixed-size "
                    "arrays of messages counted field by field; the limit is DefinitionLimits.expanded_fields)",
                    type_name=top,
                )
        if depth > limits.depth:
            raise MsgDefError(
                f"message types nested more than {limits.depth} levels deep (in {n}; the limit is "
                "DefinitionLimits.depth)",
                type_name=top,
            )
        return depth, size

    def depth(self, name: str) -> int:
        """Message nesting levels of a type (1: only primitive fields); checks it first."""
        key = canonical(name)
        self.check(key)
        return self._shape[key][0]

    def size(self, name: str) -> int:
        """Fields of a type fully expanded (see :data:`MAX_FIELDS`); checks it first."""
        key = canonical(name)
        self.check(key)
        return self._shape[key][1]

    # --- md5 ----------------------------------------------------------------------------
    def md5_text(self, name: str) -> str:
        d = self.get(name)
        lines = list(d.md5_constants)
        for f, (raw, _base, fname) in zip(d.fields, d.md5_fields):
            if raw:
                lines.append(f"{raw} {fname}")
            else:
                lines.append(f"{self.md5(f.type.base)} {fname}")
        return "\n".join(lines).strip()

    def md5(self, name: str) -> str:
        key = canonical(name)
        v = self._md5.get(key)
        if v is None:
            self.check(key)
            v = self._md5[key] = hashlib.md5(self.md5_text(key).encode()).hexdigest()
        return v

    def full_text(self, name: str) -> str:
        """A ROS 1 style full definition text (main type and all dependencies)."""
        sep = "=" * 80
        out = [render_msg(self.get(name))]
        for dep in self.dependencies(name):
            out.append(f"{sep}\nMSG: {dep}\n{render_msg(self.get(dep))}")
        return "\n".join(out)

    def dependencies(self, name: str) -> list[str]:
        """Every message type ``name`` uses (depth first, each once), walked without recursion."""
        out: list[str] = []
        seen: set[str] = set()
        todo: list[Iterator[Field]] = [iter(self.get(name).fields)]
        while todo:
            for f in todo[-1]:
                b = f.type.base
                if f.type.is_nested and b not in seen:
                    seen.add(b)
                    out.append(b)
                    todo.append(iter(self.get(b).fields))
                    break
            else:
                todo.pop()
        return out


def _chain(names: list[str], keep: int = 6) -> str:
    """``a -> b -> c``, the middle of a long chain elided."""
    if len(names) > 2 * keep:
        names = [*names[:keep], f"... ({len(names) - 2 * keep} more)", *names[-keep:]]
    return " -> ".join(names)


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


def _split_array(t: str) -> tuple[str, str] | None:
    """``base[inner]`` -> (base, inner) (no brackets in either), else None; a scan, not a
    backtracking regular expression (linear in the text)."""
    if not t.endswith("]"):
        return None
    lb = t.find("[")
    if lb <= 0 or "]" in t[:lb] or "]" in t[lb + 1 : -1]:
        return None
    return t[:lb], t[lb + 1 : -1]


def _quoted_items(text: str) -> list[str]:
    """The quoted strings (``"a"``, ``'b'``, quotes kept) in ``text``, left to right; one
    linear scan (a backslash escapes the next character)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        q = text[i]
        if q not in "'\"":
            i += 1
            continue
        j = i + 1
        while j < n and text[j] != q:
            j += 2 if text[j] == "\\" else 1
        if j >= n:  # not closed: nothing more to take
            break
        out.append(text[i : j + 1])
        i = j + 1
    return out


def parse_type(text: str, dialect: str) -> FieldType:
    """``float64[9]``, ``string<=5[<=3]``, ``Header``... -> :class:`FieldType` (unresolved)."""
    raw = text.strip()
    t = raw
    array: int | None = None
    bound: int | None = None
    m = _split_array(t)
    if m:
        t = m[0].strip()
        inner = m[1].strip()
        if inner == "":
            array = -1
        elif inner.startswith("<="):
            array = -1
            bound = int(inner[2:])
        else:
            array = int(inner)
            if array < 0:
                raise ValueError(f"negative array size in {raw!r}")
            if array > MAX_ARRAY:
                raise ValueError(f"array size over {MAX_ARRAY} in {raw!r}")
    string_bound = None
    if "<=" in t:
        t, _, sb = t.partition("<=")
        t = t.strip()
        string_bound = int(sb)
    aliases = ROS1_ALIASES if dialect == "ros1" else ROS2_ALIASES
    builtins = ROS1_BUILTINS if dialect == "ros1" else ROS2_BUILTINS
    if t in builtins or t in ("time", "duration"):
        base = aliases.get(t, t)
    elif re.fullmatch(r"[A-Za-z_][\w]*(/[A-Za-z_]\w*){0,2}", t):
        base = t if "/" not in t else canonical(t)
    else:
        raise ValueError(f"bad type {raw!r}")
    return FieldType(base, array, bound, string_bound, raw)


_QUOTED = re.compile(r"""\s*("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')\s*""")


def _scalar_default(base: str, text: str) -> object:
    t = text.strip()
    if base in ("string", "wstring"):
        if len(t) >= 2 and t[0] == t[-1] and t[0] in "'\"":
            return t[1:-1].encode("utf-8", "surrogateescape").decode("unicode_escape")
        return t
    if base == "bool":
        if t.lower() not in ("true", "false", "1", "0"):
            raise ValueError(t)
        return t.lower() in ("true", "1")
    if base in ("float32", "float64"):
        return float(t)
    return int(t, 0)


def parse_default(t: FieldType, text: str) -> object:
    """A ROS 2 field's default value from its text (the rest of the line), or None.

    A default that cannot be read (or a nested message's, which ``.msg`` has none of) is
    left out: it changes no byte of any message, so it is no reason to refuse the type.
    """
    text = text.strip()
    if text.startswith("#") or not text:
        return None
    if t.base not in PRIMITIVE_FORMATS and t.base not in ("string", "wstring"):
        return None
    try:
        if t.array is None:
            if t.base in ("string", "wstring"):
                m = _QUOTED.match(text)
                return _scalar_default(t.base, m.group(1) if m else text.split("#", 1)[0])
            return _scalar_default(t.base, text.split("#", 1)[0])
        inner = text.split("#", 1)[0].strip() if t.base not in ("string", "wstring") else text.strip()
        if not (inner.startswith("[") and "]" in inner):
            return None
        inner = inner[1 : inner.rindex("]")]
        if t.base in ("string", "wstring"):
            items = _quoted_items(inner) if "'" in inner or '"' in inner else inner.split(",")
        else:
            items = inner.split(",")
        values = [_scalar_default(t.base, x) for x in items if x.strip()]
        if t.array >= 0 and len(values) != t.array:
            return None
        return tuple(values)  # a tuple: a Field stays hashable
    except (ValueError, UnicodeError):
        return None


_NOT_BLANK = re.compile(r"\S[^\n]*")


def _lines(text: str) -> Iterator[tuple[int, str]]:
    """``(start, line)`` of each line of ``text`` that is not blank, one at a time: a
    definition refused at its field limit is not split into all its lines first, and runs of
    blank lines are skipped by the regular expression engine, not line by line."""
    for m in _NOT_BLANK.finditer(text):
        start = text.rfind("\n", 0, m.start()) + 1
        yield start, text[start : m.end()]


def parse_msg(name: str, text: str, dialect: str = "ros1", count: DefinitionCount | None = None) -> MsgDef:
    """One ``.msg`` text (no ``MSG:`` sections) -> :class:`MsgDef` with unresolved types.

    ``count``: the types and fields of the whole definition so far (refused past its limits;
    by default this text alone is held to :data:`DEFAULT_LIMITS`)."""
    if count is None:
        DEFAULT_LIMITS.check_text(text, name)
        count = DefinitionCount(DEFAULT_LIMITS, name)
    count.add_type(name)
    cname = canonical(name)
    d = MsgDef(cname, full_name=name.strip())
    for start, orig in _lines(text):
        clean = orig.split("#", 1)[0].strip()
        if not clean:
            continue
        try:
            typ_text, _, rest = clean.partition(" ")
            if not rest and "\t" in clean:
                typ_text, _, rest = clean.partition("\t")
            count.check_name(typ_text, "type name")
            rest = rest.strip()
            if _CONSTANT.match(rest) and "[" not in typ_text:
                ctype = parse_type(typ_text, dialect).base
                if ctype in ("string", "wstring"):
                    # string constants: everything right of '=', verbatim (comments included)
                    idx = orig.find("=")
                    cname_ = rest.partition("=")[0]
                    val = orig[idx + 1 :]
                    if dialect == "ros2":
                        val = val.strip()
                        q = val[:1]
                        if q in ("'", '"'):  # a quoted value may be followed by a comment
                            end = 1
                            while end < len(val) and val[end] != q:
                                end += 2 if val[end] == "\\" else 1
                            val = val[: end + 1]
                        else:
                            val = val.split("#", 1)[0].strip()
                else:
                    cname_, _, val = rest.partition("=")
                    cname_ = cname_.strip()
                    val = val.strip()
                    if dialect == "ros2":
                        val = val.split()[0] if val.split() else val
                vtext = val.strip()
                d.constants.append(
                    Constant(cname_.strip(), typ_text, _convert_constant(ctype, vtext, dialect), vtext)
                )
                d.md5_constants.append(f"{typ_text} {cname_.strip()}={vtext}")
                continue
            parts = rest.split()
            if not parts:
                raise ValueError("missing field name")
            fname = parts[0]
            count.add_field(fname)
            ft = parse_type(typ_text, dialect)
            default = None
            if dialect == "ros2" and len(parts) > 1:
                # the default's text from the line as written (a '#' inside quotes is no comment)
                after = orig.strip()[len(typ_text) :].lstrip()[len(fname) :].strip()
                default = parse_default(ft, after)
            d.fields.append(Field(fname, ft, default))
            if ft.base in ROS1_BUILTINS or ft.base in ("string", "wstring"):
                d.md5_fields.append((ft.raw, "", fname))
            else:
                d.md5_fields.append(("", ft.base, fname))
        except (ValueError, IndexError) as e:
            lineno = text.count("\n", 0, start) + 1
            raise MsgDefError(
                f"line {lineno}: cannot parse {short_name(orig.strip(), 200)!r}: {e}", type_name=name
            ) from None
    check_field_names(d)
    return d


def field_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a field name, or None.

    Any other text is accepted and kept as written (dict keys, column names and object
    attributes use it unchanged; generated code never contains it).
    """
    if not name:
        return "an empty field name"
    if not name.isprintable() or any(ch.isspace() for ch in name):
        return f"field name {name!r} holds a control or space character"
    if _PATH_CHARS.intersection(name):
        return f"field name {name!r} holds '.', '[' or ']' (reserved for column paths)"
    return None


def check_field_names(d: MsgDef) -> None:
    """Raise :class:`MsgDefError` naming the type and the field for an unusable or repeated name."""
    seen: set[str] = set()
    for f in d.fields:
        why = field_name_problem(f.name)
        if why is None and f.name in seen:
            why = (
                f"field {f.name!r} is defined twice (like genmsg and rosidl, polybag refuses a repeated name)"
            )
        if why is not None:
            raise MsgDefError(why, type_name=d.full_name or d.name, field=f.name)
        seen.add(f.name)


def split_sections(text: str) -> Iterator[tuple[str | None, str]]:
    """(name or None for the main type, section text) for each ``===`` separated part."""
    parts = _SEPARATOR.split(text)
    for i, part in enumerate(parts):
        if i == 0:
            yield None, part
            continue
        lines = part.lstrip().split("\n")
        head = lines[0].strip() if lines else ""
        if head.startswith("MSG:"):
            yield head[4:].strip(), "\n".join(lines[1:])
        elif head.startswith("IDL:"):
            raise MsgDefError("an IDL section in a .msg definition", type_name=head[4:].strip())
        elif part.strip():
            # a section without a MSG: line (should not happen); keep it unnamed
            yield "", part


def parse_full(
    name: str,
    text: str | bytes,
    dialect: str = "ros1",
    fallback: TypeSet | None = None,
    limits: DefinitionLimits | None = None,
) -> TypeSet:
    """Parse a full definition (main type plus ``MSG:`` sections) into a resolved TypeSet.

    A definition over ``limits`` (:data:`DEFAULT_LIMITS`) is a :class:`MsgDefError` naming
    the limit, raised as soon as the limit is passed (the rest is not parsed)."""
    limits = limits or DEFAULT_LIMITS
    limits.check_text(text, name)
    if isinstance(text, (bytes, bytearray, memoryview)):
        text = bytes(text).decode("utf-8", "replace")
    text = text.replace("\r\n", "\n")
    ts = TypeSet(dialect, fallback, limits)
    count = DefinitionCount(limits, name)
    for sec_name, body in split_sections(text):
        if sec_name is None:
            ts.add(parse_msg(name, body, dialect, count))
        elif sec_name:
            d = parse_msg(sec_name, body, dialect, count)
            if d.name not in ts.types:
                ts.add(d)
    ts.finalize()
    return ts


def add_folder(ts: TypeSet, folder: str, package: str | None = None) -> list[str]:
    """Add every ``.msg`` file under ``folder`` to ``ts``; returns the type names added.

    The package of ``a/b/pkg/msg/Type.msg`` is ``pkg`` (the parent of ``msg/``), or the
    parent folder name otherwise, unless ``package`` is given.
    """
    from pathlib import Path

    added = []
    for p in sorted(Path(folder).rglob("*.msg")):
        if package:
            pkg = package
        elif p.parent.name == "msg":
            pkg = p.parent.parent.name
        else:
            pkg = p.parent.name
        d = parse_msg(f"{pkg}/{p.stem}", p.read_text(encoding="utf-8"), ts.dialect)
        ts.add(d)
        added.append(d.name)
    ts.finalize()
    return added


def defined_fields(ts: TypeSet) -> int:
    """Fields written in a type set's own definitions: what compiling its types costs."""
    return sum(len(d.fields) for d in ts.types.values())
