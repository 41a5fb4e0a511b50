"""The encoder source generator: Python source of ``f(out, value)`` appending to a bytearray.

:class:`_EncGen` writes one encoder per (type, mode) (``obj`` reads attributes, the dict
modes read keys with defaults for missing ones); the helpers below (``_enc_str``,
``_as_bytes``, ``_fixbytes``, ``_seq``) are called by the generated code.  A value that does
not fit its field is an :class:`EncodeError` naming the field (:func:`_efail_factory`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from polybag.codecs.definition_model import PRIMITIVE_FORMATS, FieldType, MsgDef
from polybag.codecs.serde._generator import _UNROLL, _Gen
from polybag.errors import DecodeError


class EncodeError(DecodeError):
    """A value that cannot be serialized with its message type."""


def _enc_str(v: Any) -> bytes:
    if isinstance(v, str):
        return v.encode("utf-8", "surrogateescape")
    return bytes(v)


def _wenc(v: Any, big: bool, bound: int | None = None) -> tuple[int, bytes]:
    """A CDR wstring as rmw_fastrtps writes it: its UTF-16 code units, each widened to a
    4-byte ``wchar_t`` (no terminator); returns (units, bytes).  ``bound``: at most that many."""
    units = np.frombuffer(str(v).encode("utf-16-le", "surrogatepass"), "<u2")
    if bound is not None and len(units) > bound:
        raise ValueError(f"wstring longer than {bound} characters")
    return len(units), units.astype(">u4" if big else "<u4").tobytes()


def _as_bytes(v: Any) -> bytes:
    if isinstance(v, (bytes, bytearray)):
        return bytes(v)
    if isinstance(v, str):
        return v.encode("latin-1")
    if isinstance(v, np.ndarray):
        return v.astype(np.uint8, copy=False).tobytes()
    return bytes(v)


def _fixbytes(v: Any, n: int) -> bytes:
    b = _as_bytes(v)
    if len(b) != n:
        raise ValueError(f"expected {n} bytes, got {len(b)}")
    return b


def _seq(v: Any, n: int) -> Any:
    if len(v) != n:
        raise ValueError(f"expected {n} elements, got {len(v)}")
    return v


class _EncGen(_Gen):
    """Encoder source generator: ``f(out, o)`` appends to the bytearray ``out``."""

    string_bound: int | None = None

    def source(self) -> str:
        d = self.c.msgdef(self.name)
        self.acc = "obj" if self.mode == "obj" else "dict"
        self.ind = 2
        self.message(self.name, d, "o", "")
        self.flush()
        head = [f"def {self.fname}(out, o):", "    _at = -1", "    try:"]
        tail = [
            "    except _DecodeError:",
            "        raise",
            "    except Exception as e:",
            f"        raise _efail({self.fname!r}, _at, e) from None",
        ]
        self.c.ns.setdefault("_DecodeError", DecodeError)
        self.c.ns.setdefault("_efail", _efail_factory(self.c._errinfo))
        return "\n".join(head + self.lines + ["        pass"] + tail) + "\n"

    def dyn_align(self, a: int) -> None:
        self.emit(self.c.enc_align_code(a))

    def flush(self) -> None:
        if not self.run_size:
            return
        self.mark([p for _, _, p in self.run_fields])  # type: ignore[arg-type]
        fmt = "".join(self.run_fmt)
        self.emit(f"out += {self.c.struct(fmt)}.pack({', '.join(self.run_vals)})")
        self.run_fmt, self.run_vals, self.run_fields = [], [], []
        self.run_size = 0

    def prim(self, fmt: str, size: int, count: int, align: int, path: str, val: str) -> None:
        self.align(align)
        self.run_fields.append((self.run_size, size * count, path))
        self.run_fmt.append(f"{count}{fmt}" if count != 1 else fmt)
        self.run_size += size * count
        self.advance(size * count)
        self.run_vals.append(val)

    def bind(self, expr: str) -> str:
        """Evaluate ``expr`` once into a local (values referenced by several run slots)."""
        v = self.new("_o")
        self.emit(f"{v} = {expr}")
        return v

    def message(self, name: str, d: MsgDef, o: str, path: str) -> None:
        if len(d.fields) > 1 and o != "o":
            o = self.bind(o)
        self.inlined += len(d.fields)
        for f in d.fields:
            p = f"{path}.{f.name}" if path else f.name
            self.value(f.type, self.c.attr(o, f.name, self.acc, f.type, f.default), p)

    def count(self, n: str, path: str) -> None:
        self.prim("I", 4, 1, 4, path + " (length)", n)
        self.flush()

    def value(self, t: FieldType, v: str, path: str) -> None:
        base = t.base
        c = self.c
        self.string_bound = t.string_bound
        if t.array is None:
            self.scalar(base, v, path)
            return
        if base in PRIMITIVE_FORMATS:
            fmt, size = PRIMITIVE_FORMATS[base]
            if t.array >= 0:
                n = t.array
                if n == 0:
                    return
                if base == "uint8":
                    self.prim("s", 1, n, 1, path, f"_fixbytes({v}, {n})")
                else:
                    self.prim(fmt, size, n, size, path, f"*_seq({v}, {n})")
                return
            if base == "uint8":
                b = self.bind(f"_as_bytes({v})")
                self.bound(t, b, path)
                self.count(f"len({b})", path)
                self.emit(f"out += {b}")
                self.reset_align(unknown=True)
                return
            c.dtype(base)
            a = self.bind(f"_asarray({v}, _DT_{base})")
            self.bound(t, a, path)
            self.count(f"len({a})", path)
            if size > 4 and c.cdr:
                self.emit(f"if len({a}): {c.enc_align_code(size)}")
            self.emit(f"out += {a}.tobytes()")
            self.m, self.r = (min(size, 4), 0) if c.cdr else (1, 0)
            return
        if t.array >= 0 and t.array <= _UNROLL:
            lst = self.bind(f"_seq({v}, {t.array})")
            for i in range(t.array):
                self.scalar(base, f"{lst}[{i}]", f"{path}[{i}]")
            return
        lst = self.bind(v if t.array < 0 else f"_seq({v}, {t.array})")
        if t.array < 0:
            self.bound(t, lst, path)
            self.count(f"len({lst})", path)
        else:
            self.flush()
        self.mark(path)
        self.emit(f"for _x in {lst}:")
        self.ind += 1
        if base in ("string", "wstring"):
            if c.cdr:
                self.emit(self.c.enc_align_code(4))
            self.string_code(base, "_x", t.string_bound)
        else:
            fn = c._func("e", base, self.mode)
            self.emit(f"{fn}(out, _x)")
        self.ind -= 1
        self.reset_align(unknown=True)

    def bound(self, t: FieldType, v: str, path: str) -> None:
        """Refuse to write a bounded sequence longer than its bound."""
        if t.bound is not None:
            self.mark(path)
            self.emit(f"if len({v}) > {t.bound}: raise ValueError('more than {t.bound} elements')")

    def string_code(self, base: str, v: str, string_bound: int | None = None) -> None:
        b = self.new("_b")
        if base == "wstring":
            self.emit(f"_u, {b} = _wenc({v}, {self.c.e == '>'}, {string_bound})")
            self.emit("out += _U32.pack(_u)")
            self.emit(f"out += {b}")
            return
        self.emit(f"{b} = {v}.encode('utf-8', 'surrogateescape') if {v}.__class__ is str else _enc_str({v})")
        if string_bound is not None:
            self.emit(
                f"if len({b}) > {string_bound}: raise ValueError('string longer than {string_bound} bytes')"
            )
        if self.c.cdr:
            self.emit(f"out += _U32.pack(len({b}) + 1)")
            self.emit(f"out += {b}")
            self.emit("out += b'\\0'")
        else:
            self.emit(f"out += _U32.pack(len({b}))")
            self.emit(f"out += {b}")

    def scalar(self, base: str, v: str, path: str) -> None:
        if base in PRIMITIVE_FORMATS:
            fmt, size = PRIMITIVE_FORMATS[base]
            self.prim(fmt, size, 1, size, path, v)
            return
        if base in ("string", "wstring"):
            self.align(4)
            self.flush()
            self.mark(path)
            self.string_code(base, v, self.string_bound)
            if base == "wstring":
                self.m, self.r = 4, 0
            else:
                self.reset_align(unknown=True)
            return
        if base in ("time", "duration") and self.acc == "dict":
            o = self.bind(v)
            fmt = "I" if base == "time" else "i"
            self.prim(fmt, 4, 1, 4, path + ".sec", f"{o}.get('sec', 0)")
            self.prim(fmt, 4, 1, 4, path + ".nsec", f"{o}.get('nsec', 0)")
            return
        if not self.inline(base):  # a nested message encoded by its own function
            self.flush()
            self.mark(path)
            self.emit(f"{self.c._func('e', base, self.mode)}(out, {v})")
            self.reset_align(unknown=True)
            return
        self.depth += 1
        try:
            self.message(base, self.c.msgdef(base), v, path)
        finally:
            self.depth -= 1


def _efail_factory(errinfo: dict[str, list[Any]]) -> Callable[..., DecodeError]:
    def _efail(fname: str, at: int, e: object) -> DecodeError:
        info = errinfo.get(fname, [])
        field = info[at] if 0 <= at < len(info) else None
        if isinstance(field, list):
            field = field[0] if len(field) == 1 else f"{field[0]}..{field[-1]}"
        msg = f"cannot serialize: {type(e).__name__}: {e}"
        err = EncodeError(msg, field=field)
        err.reason = msg  # type: ignore[attr-defined]
        return err

    return _efail
