"""The ``.msg`` text parser (ROS 1 and ROS 2 dialects).

A full definition, as stored in bags (connection ``message_definition``) and MCAP
(``ros1msg``/``ros2msg`` schemas), is the main type's text followed by dependency sections,
each introduced by a line of ``=`` characters and ``MSG: pkg/Type``.  :func:`parse_full`
turns it into a :class:`~polybag.codecs.type_set.TypeSet`: a name ->
:class:`~polybag.codecs.definition_model.MsgDef` map with type resolution (package-relative
names, ``Header``), shared by the ROS 1 and the CDR serializers.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from polybag.codecs.definition_limits import (
    DEFAULT_LIMITS,
    MAX_ARRAY,
    DefinitionCount,
    DefinitionLimits,
    MsgDefError,
    short_name,
)
from polybag.codecs.definition_model import (
    PRIMITIVE_FORMATS,
    ROS1_ALIASES,
    ROS1_BUILTINS,
    ROS2_ALIASES,
    ROS2_BUILTINS,
    Constant,
    Field,
    FieldType,
    MsgDef,
    canonical,
)
from polybag.codecs.type_set import TypeSet

# a line of '=' (spaces around it, no other whitespace: ``\s*`` would span blank lines and make
# a text of newlines cost quadratic time)
_SEPARATOR = re.compile(r"^[ \t\f\v\r]*={3,}[ \t\f\v\r]*$", re.MULTILINE)
_CONSTANT = re.compile(r"^[A-Za-z_]\w*\s*=")
# characters a field name cannot hold: they build column paths (``a.b``, ``c[0]``)
_PATH_CHARS = frozenset(".[]")


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
