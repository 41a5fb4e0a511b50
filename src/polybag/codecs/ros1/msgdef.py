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
from dataclasses import dataclass, field

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

_SEPARATOR = re.compile(r"^\s*={3,}\s*$", re.MULTILINE)
_ARRAY = re.compile(r"^(?P<base>[^\[\]]+?)\s*\[(?P<inner>[^\]]*)\]$")
_CONSTANT = re.compile(r"^[A-Za-z_]\w*\s*=")


class MsgDefError(DecodeError):
    """A message definition that cannot be parsed or resolved."""


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


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    type: FieldType


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

    def __init__(self, dialect: str = "ros1", fallback: TypeSet | None = None) -> None:
        self.dialect = dialect
        self.types: dict[str, MsgDef] = {}
        self.fallback = fallback
        self._md5: dict[str, str] = {}

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
        matches = [n for n in self.types if n.rsplit("/", 1)[-1] == base]
        if len(matches) == 1:
            return matches[0]
        if self.fallback is not None:
            fm = [n for n in self.fallback.types if n.rsplit("/", 1)[-1] == base]
            if len(fm) == 1:
                return fm[0]
        return f"{package}/{base}" if package else base

    def finalize(self) -> None:
        """Resolve package-relative names of every field (after all sections are added)."""
        for d in self.types.values():
            pkg = _package(d.name)
            new = []
            changed = False
            for f in d.fields:
                t = f.type
                if t.base not in PRIMITIVE_FORMATS and t.base not in ("string", "wstring", "time", "duration"):
                    full = self.resolve(t.base, pkg)
                    if full != t.base:
                        t = FieldType(full, t.array, t.bound, t.string_bound, t.raw)
                        changed = True
                new.append(Field(f.name, t))
            if changed:
                d.fields = new
        self._md5.clear()

    def check(self, name: str) -> None:
        """Raise :class:`MsgDefError` if ``name`` or a dependency is undefined or recursive."""
        seen: set[str] = set()

        def walk(n: str, stack: tuple[str, ...]) -> None:
            if n in stack:
                raise MsgDefError(f"recursive message definition through {n}", type_name=name)
            if n in seen:
                return
            d = self.lookup(n)
            if d is None:
                raise MsgDefError(f"definition of {n} is missing", type_name=name)
            for f in d.fields:
                if f.type.is_message:
                    walk(f.type.base, (*stack, n))
            seen.add(n)

        walk(canonical(name), ())

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
        out: list[str] = []

        def walk(n: str) -> None:
            for f in self.get(n).fields:
                if f.type.is_message and f.type.base not in out:
                    out.append(f.type.base)
                    walk(f.type.base)

        walk(name)
        return out


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


def parse_type(text: str, dialect: str) -> FieldType:
    """``float64[9]``, ``string<=5[<=3]``, ``Header``... -> :class:`FieldType` (unresolved)."""
    raw = text.strip()
    t = raw
    array: int | None = None
    bound: int | None = None
    m = _ARRAY.match(t)
    if m:
        t = m.group("base").strip()
        inner = m.group("inner").strip()
        if inner == "":
            array = -1
        elif inner.startswith("<="):
            array = -1
            bound = int(inner[2:])
        else:
            array = int(inner)
            if array < 0:
                raise ValueError(f"negative array size in {raw!r}")
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


def parse_msg(name: str, text: str, dialect: str = "ros1") -> MsgDef:
    """One ``.msg`` text (no ``MSG:`` sections) -> :class:`MsgDef` with unresolved types."""
    cname = canonical(name)
    d = MsgDef(cname, full_name=name.strip())
    for lineno, orig in enumerate(text.split("\n"), 1):
        clean = orig.split("#", 1)[0].strip()
        if not clean:
            continue
        try:
            typ_text, _, rest = clean.partition(" ")
            if not rest and "\t" in clean:
                typ_text, _, rest = clean.partition("\t")
            rest = rest.strip()
            if _CONSTANT.match(rest) and "[" not in typ_text:
                ctype = parse_type(typ_text, dialect).base
                if ctype in ("string", "wstring"):
                    # string constants: everything right of '=', verbatim (comments included)
                    idx = orig.find("=")
                    cname_ = orig[orig.find(" ") + 1 : idx] if dialect == "ros1" else orig[:idx].split()[-1]
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
            ft = parse_type(typ_text, dialect)
            d.fields.append(Field(fname, ft))
            if ft.base in ROS1_BUILTINS or ft.base in ("string", "wstring"):
                d.md5_fields.append((ft.raw, "", fname))
            else:
                d.md5_fields.append(("", ft.base, fname))
        except (ValueError, IndexError) as e:
            raise MsgDefError(f"line {lineno}: cannot parse {orig.strip()!r}: {e}", type_name=name) from None
    return d


def split_sections(text: str) -> Iterator[tuple[str | None, str]]:
    """(name or None for the main type, section text) for each ``===`` separated part."""
    parts = _SEPARATOR.split(text)
    for i, part in enumerate(parts):
        if i == 0:
            yield None, part
            continue
        lines = part.lstrip("\n").split("\n")
        head = lines[0].strip() if lines else ""
        if head.startswith("MSG:"):
            yield head[4:].strip(), "\n".join(lines[1:])
        elif head.startswith("IDL:"):
            raise MsgDefError("an IDL section in a .msg definition", type_name=head[4:].strip())
        elif part.strip():
            # a section without a MSG: line (should not happen); keep it unnamed
            yield "", part


def parse_full(
    name: str, text: str | bytes, dialect: str = "ros1", fallback: TypeSet | None = None
) -> TypeSet:
    """Parse a full definition (main type plus ``MSG:`` sections) into a resolved TypeSet."""
    if isinstance(text, (bytes, bytearray, memoryview)):
        text = bytes(text).decode("utf-8", "replace")
    text = text.replace("\r\n", "\n")
    ts = TypeSet(dialect, fallback)
    for sec_name, body in split_sections(text):
        if sec_name is None:
            ts.add(parse_msg(name, body, dialect))
        elif sec_name:
            d = parse_msg(sec_name, body, dialect)
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

