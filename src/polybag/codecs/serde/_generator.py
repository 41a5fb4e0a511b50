"""What the decoder and encoder source generators share: :class:`_Gen` and its limits.

A generator writes the source of one function for one message type: it queues runs of
fixed-size fields (one ``struct`` call per run), tracks CDR alignment statically while the
position modulo 8 is known, and records for every ``_at`` mark which field the code after it
reads or writes (the error messages name that field).
"""

from __future__ import annotations

import struct
from typing import Any, Protocol

from polybag.codecs.definition_model import PRIMITIVE_FORMATS, FieldType, MsgDef

_U32 = {"<": struct.Struct("<I"), ">": struct.Struct(">I")}
_ZERO_LIMIT = 1 << 16  # max elements of a zero-sized type in one sequence
_UNROLL = 8
_INLINE_DEPTH = 16  # nested messages inlined into one generated function at most this deep
_INLINE_FIELDS = 4096  # ... and a function inlines about this many fields; then it calls out


class _Short(Exception):
    """Internal: a length field points past the end of the payload."""


def _dict_default(t: FieldType) -> str:
    """Source of the value a missing dict key stands for."""
    base, n = t.base, t.array
    if n is None:
        if base in PRIMITIVE_FORMATS:
            return "False" if base == "bool" else ("0.0" if base.startswith("float") else "0")
        if base in ("string", "wstring"):
            return "''"
        return "{}"
    if n < 0:
        return "()"
    if base == "uint8":
        return f"bytes({n})"
    if base in PRIMITIVE_FORMATS:
        return f"[{_dict_default(FieldType(base))}] * {n}"
    return f"[{_dict_default(FieldType(base))} for _ in range({n})]"


def _key(name: str) -> str:
    """A field name as a dict key in generated source: a string literal (``repr`` escapes it)."""
    lit = repr(name)
    assert lit[0] in "'\"" and lit[-1] == lit[0]
    return lit


class GeneratorHost(Protocol):
    """What a generator asks of the compiler it writes a function for (the compiler of
    :mod:`polybag.codecs.serde.compiler` is one): the wire (``cdr``, endianness ``e``, the
    ``origin`` alignment counts from), the namespace the generated source runs in, and the
    names and source snippets it hands out."""

    cdr: bool
    e: str
    origin: int
    ns: dict[str, Any]
    _errinfo: dict[str, list[Any]]

    def enc_align_code(self, a: int) -> str: ...

    def align_code(self, a: int) -> str: ...

    def msgdef(self, name: str) -> MsgDef: ...

    def cls(self, name: str) -> type: ...

    def maker(self, name: str) -> str: ...

    def spend_inline(self, gen: _Gen, fields: int) -> bool: ...

    def _ident(self, prefix: str, name: str) -> str: ...

    def const(self, value: str) -> str: ...

    def attr(self, o: str, name: str, mode: str, t: FieldType | None = None, default: Any = None) -> str: ...

    def size(self, name: str) -> int: ...

    def dtype(self, prim: str) -> str: ...

    def fixed_size(self, name: str) -> int: ...

    def min_size(self, name: str) -> int: ...

    def zero_limit(self, name: str) -> int: ...

    def depth(self, name: str) -> int: ...

    def struct(self, fmt: str) -> str: ...

    def ustruct(self, fmt: str) -> str: ...

    def _func(self, kind: str, name: str, mode: str) -> str: ...


class _Gen:
    #: a decoder of a whole payload (``t`` functions): checks what is left after the message
    top = False

    def __init__(self, c: GeneratorHost, mode: str, name: str, fname: str) -> None:
        self.c = c
        self.mode = mode
        self.name = name
        self.fname = fname
        self.lines: list[str] = []
        self.ind = 1
        self.tmp = 0
        self.errs: list[Any] = []
        c._errinfo[fname] = self.errs
        self.reset_align(unknown=True)
        self.run_fmt: list[str] = []
        self.run_size = 0
        self.run_vals: list[str] = []  # encoder: value expressions
        self.run_nvals = 0  # decoder: number of unpacked values
        self.run_id = 0
        self.run_fields: list[tuple[int, int, str]] = []  # (offset in run, size, path)
        self.depth = 0  # nested messages inlined around the current field
        self.inlined = 0  # fields inlined into this function so far
        self.force_inline = False  # an expression-only generator (fixed-size array elements)

    def inline(self, base: str) -> bool:
        """Whether nested type ``base`` is generated in place (else: a call to its function).

        Inlining is bounded in depth (Python's parser and compiler limit nesting), in the
        fields of one function (``A a; A b`` level after level doubles at every level) and in
        the fields all functions of one kind inline together (:meth:`Compiler.spend_inline`:
        a type shared by many others is inlined into a few, then called), so the code
        generated is linear in the definition; real types are far inside these bounds and are
        generated exactly as before.
        """
        if self.force_inline or base in ("time", "duration"):
            return True
        size = self.c.size(base)
        return self.depth < _INLINE_DEPTH and self.inlined + size <= _INLINE_FIELDS and self.c.spend_inline(self, size)

    def reset_align(self, unknown: bool) -> None:
        # position modulo self.m is self.r (relative to the CDR origin)
        self.m, self.r = (1, 0) if unknown else (8, 0)

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.ind + line)

    def new(self, prefix: str = "_v") -> str:
        self.tmp += 1
        return f"{prefix}{self.tmp}"

    def advance(self, size: int) -> None:
        if self.m > 1:
            self.r = (self.r + size) % self.m

    def align(self, a: int) -> None:
        """Pad to alignment ``a`` (CDR only): statically in the run when known."""
        if not self.c.cdr or a <= 1:
            return
        if self.m >= a:
            pad = (-self.r) % a
            if pad:
                self.run_fmt.append(f"{pad}x")
                self.run_size += pad
                self.advance(pad)
        else:
            self.flush()
            self.dyn_align(a)
            self.m, self.r = a, 0

    def err_entry(self, path: str) -> int:
        self.errs.append(path)
        return len(self.errs) - 1

    def mark(self, path: str) -> None:
        """Set ``_at``, the error entry naming ``path``, for the code that follows."""
        self.emit(f"_at = {self.err_entry(path)}")

    def source(self) -> str:
        """The generated function's source."""
        raise NotImplementedError

    def flush(self) -> None:
        raise NotImplementedError

    def dyn_align(self, a: int) -> None:
        """Emit code aligning the position to ``a`` when it is not known statically."""
        raise NotImplementedError
