"""ROS 2 ``.idl`` text (OMG IDL as rosidl writes it) parsed into message definitions.

Modules, structs, typedefs, constants (a struct's ``NAME_Constants`` module) and enums
(skipped); annotations are read and dropped.  Every name, type and field counts against the
definition limits (:class:`~polybag.codecs.definition_limits.DefinitionLimits`), and the tokens
are read one at a time, so a hostile text costs no more than its limits allow.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from polybag.codecs.definition_limits import (
    DEFAULT_LIMITS,
    MAX_ARRAY,
    MAX_DEPTH,
    DefinitionCount,
    DefinitionLimits,
    MsgDefError,
)
from polybag.codecs.definition_model import Constant, Field, FieldType, MsgDef, canonical
from polybag.codecs.msg_parser import check_field_names
from polybag.codecs.ros2.sections import SECTION_SEPARATOR

__all__ = ["parse_idl"]

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
    def __init__(self, text: str, count: DefinitionCount | None = None) -> None:
        self.count = count if count is not None else DefinitionCount(DEFAULT_LIMITS, "IDL")
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
    count = DefinitionCount(limits or DEFAULT_LIMITS, name)
    out: list[MsgDef] = []
    for sec in SECTION_SEPARATOR.split(text):
        lines = sec.lstrip().split("\n")
        if lines and lines[0].strip().startswith("IDL:"):
            sec = "\n".join(lines[1:])
        out.extend(_IdlParser(sec, count).parse())
    return out
