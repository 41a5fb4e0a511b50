"""The decoder source generator: Python source of ``f(buf, pos, end) -> (value, pos)``.

:class:`DecoderGenerator` writes one decoder per (type, mode): ``obj`` (message objects, fixed
arrays as tuples, numeric sequences as numpy arrays), ``dict`` (lists) or ``dictnp`` (numpy
arrays); the top-level variant ``f(buf, topic=None)`` checks that the whole payload is used.
Every length is checked against the bytes that remain before anything is allocated; a
failure becomes a :class:`~polybag.errors.DecodeError` naming the field (:func:`_fail_factory`).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from typing import Any

from polybag.codecs.definition_model import PRIMITIVE_FORMATS, FieldType, MsgDef
from polybag.codecs.serde._generator import _INLINE_DEPTH, _INLINE_FIELDS, _UNROLL, _Gen, _key, _Short
from polybag.codecs.serde.messages import plain_name
from polybag.errors import DecodeError

_LOCAL_RUN = 64  # runs of at most this many values are unpacked into local variables
_CACHED_STRING = 64  # string fields remember their last value up to this many bytes
_RUN_SLICE = re.compile(r"\b_t(\d+)\[(\d+):(\d+)\]")
_RUN_ITEM = re.compile(r"\b_t(\d+)\[(\d+)\]")


def decode_wstring(raw: bytes | memoryview, big: bool) -> str:
    """A CDR wstring's 4-byte ``wchar_t`` units (rmw_fastrtps: UTF-16 code units, widened)
    as text; surrogate pairs are joined, a lone surrogate becomes U+FFFD (as invalid UTF-8 in
    a ``string`` does), so the text can always be written as UTF-8."""
    text = str(raw, "utf-32-be" if big else "utf-32-le", "surrogatepass")
    if any("\ud800" <= ch <= "\udfff" for ch in text):
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


class _Left(Exception):
    """Internal: bytes remain after the message."""


def _leftover(label: str, topic: str | None, pos: int, end: int) -> DecodeError:
    msg = f"{end - pos} bytes left over after the message ({end} byte payload)"
    err = DecodeError(msg, topic=topic, type_name=label, offset=pos)
    err.reason = msg  # type: ignore[attr-defined]
    return err


def _totop(e: DecodeError, label: str, topic: str | None) -> DecodeError:
    reason = getattr(e, "reason", str(e))
    err = DecodeError(reason, topic=topic, type_name=label, field=e.field, offset=e.offset)
    err.reason = reason  # type: ignore[attr-defined]
    return err


class DecoderGenerator(_Gen):
    """Decoder source generator."""

    def source(self) -> str:
        c = self.c
        d = c.msgdef(self.name)
        self.ctor_mode = "obj" if self.mode == "obj" else "dict"
        self.np_arrays = self.mode in ("obj", "dictnp")
        self.ind = 2
        self.stmt = self.ctor_mode == "obj"
        self.post: list[str] = []
        self.local_runs: set[int] = set()
        self.uses_isb = False
        if self.top and c.cdr:
            self.reset_align(unknown=False)  # a whole payload: pos starts at the origin
        expr = self.message(self.name, d, "")
        self.flush()
        top = self.top
        if top and self.c.cdr:  # up to 3 bytes of final padding may follow a CDR message
            self.emit("if end - pos >= 4 or pos > end: raise _Left(pos)")
        elif top:
            self.emit("if pos != end: raise _Left(pos)")
        for line in self.post:
            self.emit(line)
        self.emit(f"return {expr}" if top else f"return {expr}, pos")
        if self.local_runs:
            self.lines = [self.localize(line) for line in self.lines]
        if self.uses_isb:
            self.lines.insert(0, "    " * self.ind + "_isb = buf.__class__ is bytes")
        head, tail = self.frame(top)
        c.ns.setdefault("_fail", _fail_factory(c._errinfo))
        c.ns.setdefault("_DecodeError", DecodeError)
        return "\n".join(head + self.lines + tail) + "\n"

    def frame(self, top: bool) -> tuple[list[str], list[str]]:
        """The lines around the body: the signature, and the handlers turning errors into
        :class:`~polybag.errors.DecodeError` (the top-level variant names topic and type)."""
        short = f"_fail({self.fname!r}, _at, pos, end, 'length ' + str(e.args[0]) + ' exceeds the ' + str(end - pos) + ' bytes left')"
        other = f"_fail({self.fname!r}, _at, pos, end, e)"
        if top and self.c.cdr:
            # a whole CDR payload: its encapsulation header checked here; any other byte order
            # or representation goes to _OTHER (the codec's general path)
            kind = 1 if self.c.e == "<" else 0
            head = [
                f"def {self.fname}(buf, topic=None):",
                "    end = len(buf)",
                f"    if end < 4 or buf[1] != {kind} or buf[0]: return _OTHER(buf, topic)",
                f"    pos = {self.c.origin}",
                "    _at = -1",
                "    try:",
            ]
        elif top:
            head = [
                f"def {self.fname}(buf, topic=None):",
                "    pos = 0",
                "    end = len(buf)",
                "    _at = -1",
                "    try:",
            ]
        if top:
            tail = [
                "    except _Left:",
                "        raise _leftover(_TYPE_LABEL, topic, pos, end) from None",
                "    except _Short as e:",
                f"        raise _totop({short}, _TYPE_LABEL, topic) from None",
                "    except _DecodeError as e:",
                "        raise _totop(e, _TYPE_LABEL, topic) from None",
                "    except Exception as e:",
                f"        raise _totop({other}, _TYPE_LABEL, topic) from None",
            ]
            self.c.ns.setdefault("_Left", _Left)
            self.c.ns.setdefault("_leftover", _leftover)
            self.c.ns.setdefault("_totop", _totop)
        else:
            head = [
                f"def {self.fname}(buf, pos, end):",
                "    _at = -1",
                "    try:",
            ]
            tail = [
                "    except _Short as e:",
                f"        raise {short} from None",
                "    except _DecodeError:",
                "        raise",
                "    except Exception as e:",
                f"        raise {other} from None",
            ]
        return head, tail

    def cached_string(self, v: str, n: str, cut: int = 0) -> None:
        """A string at pos (``n`` bytes, checked; the last ``cut`` bytes, a CDR string's
        terminator, left out): decoded, or the previous value again.

        Each string field remembers its last short value (a topic's ``frame_id`` rarely
        changes): when the same bytes come again (compared in place, bytes buffers only)
        the same immutable ``str`` is used instead of slicing and decoding them again.
        """
        cache = f"_SC{len(self.c.ns)}"
        self.c.ns[cache] = [(-1, b"", "")]
        self.uses_isb = True
        c = self.new("_c")
        self.emit(f"{c} = {cache}[0]")
        self.emit(f"if {n} == {c}[0] and _isb and buf.startswith({c}[1], pos):")
        self.emit(f"    {v} = {c}[2]")
        self.emit("else:")
        if cut:
            self.emit(f"    {v} = str(buf[pos:pos + {n} - {cut}], 'utf-8', 'replace') if {n} else ''")
        else:
            self.emit(f"    {v} = str(buf[pos:pos + {n}], 'utf-8', 'replace')")
        self.emit(f"    if {n} <= {_CACHED_STRING}: {cache}[0] = ({n}, bytes(buf[pos:pos + {n}]), {v})")

    def localize(self, line: str) -> str:
        """Refer to the values of short runs by their local names (``_t1_4``), not ``_t1[4]``.

        Unpacking a run straight into locals saves a subscript per value; a slice (a fixed
        array) becomes a tuple display of those locals.
        """
        local = self.local_runs

        def sl(m: re.Match[str]) -> str:
            rid, a, b = int(m[1]), int(m[2]), int(m[3])
            if rid not in local:
                return m[0]
            return "(" + "".join(f"_t{rid}_{k}, " for k in range(a, b)) + ")"

        def item(m: re.Match[str]) -> str:
            return f"_t{m[1]}_{m[2]}" if int(m[1]) in local else m[0]

        return _RUN_ITEM.sub(item, _RUN_SLICE.sub(sl, line))

    def dyn_align(self, a: int) -> None:
        self.emit(self.c.align_code(a))

    def flush(self) -> None:
        if not self.run_size:
            return
        fmt = "".join(self.run_fmt)
        self.mark(("run", list(self.run_fields)))  # type: ignore[arg-type]
        local_runs = getattr(self, "local_runs", None)
        if self.run_nvals and local_runs is not None and self.run_nvals <= _LOCAL_RUN:
            names = "".join(f"_t{self.run_id}_{k}, " for k in range(self.run_nvals))
            self.emit(f"{names}= {self.c.ustruct(fmt)}.unpack_from(buf, pos)")
            local_runs.add(self.run_id)
        elif self.run_nvals:
            self.emit(f"_t{self.run_id} = {self.c.ustruct(fmt)}.unpack_from(buf, pos)")
        else:
            self.emit(f"if pos + {self.run_size} > end: raise _Short({self.run_size})")
        self.emit(f"pos += {self.run_size}")
        self.run_fmt = []
        self.run_size = 0
        self.run_nvals = 0
        self.run_fields = []
        self.run_id += 1

    def prim(self, fmt: str, size: int, count: int, align: int, path: str) -> tuple[str, int]:
        """Queue ``count`` values in the current run; returns (tuple var, first index)."""
        self.align(align)
        self.run_fields.append((self.run_size, size * count, path))
        self.run_fmt.append(f"{count}{fmt}" if count != 1 else fmt)
        self.run_size += size * count
        self.advance(size * count)
        idx = self.run_nvals
        self.run_nvals += 1 if fmt == "s" else count
        return f"_t{self.run_id}", idx

    def message(self, name: str, d: MsgDef, path: str) -> str:
        parts = []
        self.inlined += len(d.fields)
        for f in d.fields:
            p = f"{path}.{f.name}" if path else f.name
            parts.append((f.name, self.value(f.type, p)))
        if self.ctor_mode == "obj":
            self.c.cls(name)
            if not self.stmt:
                return f"{self.c.maker(name)}({', '.join(v for _, v in parts)})"
            # a C-level allocation and slot stores: a third of the cost of calling __init__
            var = self.new("_o")
            self.post.append(f"{var} = {self.c._ident('A', name)}()")
            for n, v in parts:
                if plain_name(n):
                    self.post.append(f"{var}.{n} = {v}")
                else:  # kept under its own name in the instance dict, named through a constant
                    self.post.append(f"{var}.__dict__[{self.c.const(n)}] = {v}")
            return var
        return "{" + ", ".join(f"{_key(n)}: {v}" for n, v in parts) + "}"

    def call(self, base: str, path: str) -> str:
        """A nested message decoded by its own function (not inlined)."""
        self.flush()
        self.mark(path)
        fn = self.c._func("d", base, self.mode)
        v = self.new()
        self.emit(f"{v}, pos = {fn}(buf, pos, end)")
        self.reset_align(unknown=True)
        return v

    def count(self, path: str) -> str:
        var, idx = self.prim("I", 4, 1, 4, path + " (length)")
        self.flush()
        n = self.new("_n")
        self.emit(f"{n} = {var}[{idx}]")
        return n

    def value(self, t: FieldType, path: str) -> str:
        base = t.base
        if t.array is None:
            return self.scalar(base, path, t.string_bound)
        if base in PRIMITIVE_FORMATS:
            return self.primitive_array(base, t.array, path, t.bound)
        return self.element_array(base, t.array, path, t.bound, t.string_bound)

    def primitive_array(self, base: str, array: int, path: str, bound: int | None = None) -> str:
        """A fixed (``array >= 0``) or variable-length array of a primitive type."""
        c = self.c
        fmt, size = PRIMITIVE_FORMATS[base]
        if array >= 0:
            length = array
            if length == 0:
                return "b''" if base == "uint8" else ("[]" if not self.np_arrays else "_np_array([])")
            if base == "uint8":
                var, idx = self.prim("s", 1, length, 1, path)
                return f"{var}[{idx}]"
            var, idx = self.prim(fmt, size, length, size, path)
            sl = f"{var}[{idx}:{idx + length}]"
            if self.mode == "dictnp":
                c.dtype(base)
                return f"_np_array({sl}, _NDT_{base})"
            # objects: tuples (like genpy; numpy costs 2 us per array); dicts: lists
            return sl if self.mode == "obj" else f"list({sl})"
        n = self.count(path)
        self.mark(path)
        self.seq_check(n, bound)
        if base != "uint8" and size > 4 and c.cdr:
            self.emit(f"if {n}: {c.align_code(size)}")
        nb = f"{n} * {size}" if size > 1 else n
        self.emit(f"if {nb} > end - pos: raise _Short({nb})")
        v = self.new()
        if base == "uint8":
            self.emit(f"{v} = bytes(buf[pos:pos + {n}])")
        else:
            dt = c.dtype(base)
            if self.np_arrays:
                conv = ".copy()" if self.c.e == "<" or size == 1 else f".astype(_NDT_{base})"
                self.emit(f"{v} = _frombuffer(buf, {dt}, {n}, pos){conv}")
            else:
                self.emit(f"{v} = _frombuffer(buf, {dt}, {n}, pos).tolist()")
        self.emit(f"pos += {nb}")
        self.m, self.r = (min(size, 4), 0) if c.cdr else (1, 0)
        return v

    def element_array(
        self, base: str, array: int, path: str, bound: int | None = None, string_bound: int | None = None
    ) -> str:
        """An array of strings or messages: unrolled when short and fixed, else a loop."""
        c = self.c
        if array >= 0 and array <= _UNROLL:
            return (
                "[" + ", ".join(self.scalar(base, f"{path}[{i}]", string_bound) for i in range(array)) + "]"
            )
        if array >= 0:
            self.flush()
            n = str(array)
        else:
            n = self.count(path)
        self.mark(path)
        if array < 0:
            self.seq_check(n, bound)
        if base in ("string", "wstring"):
            self.emit(f"if {n} * 4 > end - pos: raise _Short({n})")
        else:
            ms = c.min_size(base)
            if ms:
                self.emit(f"if {n} * {ms} > end - pos: raise _Short({n})")
            else:  # zero-sized elements: a bounded number of objects from no bytes
                self.emit(f"if {n} > {c.zero_limit(base)}: raise _Short({n})")
        lst = self.new("_l")
        if (
            base not in ("string", "wstring")
            and not c.cdr
            and c.fixed_size(base) > 0
            and c.depth(base) <= _INLINE_DEPTH
            and c.size(base) <= _INLINE_FIELDS
            and c.spend_inline(self, c.size(base))
        ):
            self.fixed_elements(base, n, lst)
            return lst
        self.emit(f"{lst} = []")
        self.emit(f"for _ in range({n}):")
        self.ind += 1
        if base in ("string", "wstring"):
            self.string_code(base, lst + ".append", string_bound)
        else:
            fn = c._func("d", base, self.mode)
            v = self.new()
            self.emit(f"{v}, pos = {fn}(buf, pos, end)")
            self.emit(f"{lst}.append({v})")
        self.ind -= 1
        self.reset_align(unknown=True)
        return lst

    def fixed_elements(self, base: str, n: str, lst: str) -> None:
        """``n`` fixed-size messages into ``lst``: one iter_unpack over the whole array."""
        c = self.c
        size = c.fixed_size(base)
        sub = DecoderGenerator(c, self.mode, base, self.fname + "_t")
        sub.ctor_mode, sub.np_arrays, sub.stmt, sub.post = self.ctor_mode, self.np_arrays, False, []
        sub.force_inline = True
        sub.run_id = 0
        expr = sub.message(base, c.msgdef(base), "").replace("_t0[", "t[")
        fmt = "".join(sub.run_fmt)
        s = c.ustruct(fmt)
        self.emit(f"if {n} * {size} > end - pos: raise _Short({n})")
        self.emit(f"{lst} = [{expr} for t in {s}.iter_unpack(buf[pos:pos + {n} * {size}])]")
        self.emit(f"pos += {n} * {size}")

    def string_code(self, base: str, sink: str, string_bound: int | None = None) -> None:
        """Read one string at pos (inside a loop: dynamic alignment) and pass it to sink."""
        cdr = self.c.cdr
        if cdr:
            self.emit(self.c.align_code(4))
        self.emit("_m = _U32.unpack_from(buf, pos)[0]")
        self.emit("pos += 4")
        if base == "wstring":
            self.emit("if _m * 4 > end - pos: raise _Short(_m)")
            self.string_check("_m", string_bound, 0)
            self.emit(f"{sink}(_wdec(buf[pos:pos + _m * 4], {self.c.e == '>'}))")
            self.emit("pos += _m * 4")
            return
        self.emit("if _m > end - pos: raise _Short(_m)")
        self.string_check("_m", string_bound, 1 if cdr else 0)
        if cdr:
            self.emit(f"{sink}(str(buf[pos:pos + _m - 1], 'utf-8', 'replace') if _m else '')")
        else:
            self.emit(f"{sink}(str(buf[pos:pos + _m], 'utf-8', 'replace'))")
        self.emit("pos += _m")

    def string_check(self, n: str, bound: int | None, extra: int) -> None:
        """Refuse a bounded string longer than its bound (``extra``: the CDR terminator)."""
        if bound is not None:
            self.emit(
                f"if {n} > {bound + extra}: raise ValueError('string longer than its bound of {bound}')"
            )

    def seq_check(self, n: str, bound: int | None) -> None:
        """Refuse a bounded sequence longer than its bound."""
        if bound is not None:
            self.emit(
                f"if {n} > {bound}: raise ValueError('sequence of ' + str({n}) + ' elements, bound {bound}')"
            )

    def scalar(self, base: str, path: str, string_bound: int | None = None) -> str:
        if base in PRIMITIVE_FORMATS:
            fmt, size = PRIMITIVE_FORMATS[base]
            var, idx = self.prim(fmt, size, 1, size, path)
            return f"{var}[{idx}]"
        if base in ("string", "wstring"):
            n = self.count(path)
            self.mark(path)
            v = self.new()
            if base == "wstring":
                self.emit(f"if {n} * 4 > end - pos: raise _Short({n})")
                self.string_check(n, string_bound, 0)
                self.emit(f"{v} = _wdec(buf[pos:pos + {n} * 4], {self.c.e == '>'})")
                self.emit(f"pos += {n} * 4")
                self.m, self.r = 4, 0
                return v
            self.emit(f"if {n} > end - pos: raise _Short({n})")
            self.string_check(n, string_bound, 1 if self.c.cdr else 0)
            self.cached_string(v, n, 1 if self.c.cdr else 0)
            self.emit(f"pos += {n}")
            self.reset_align(unknown=True)
            return v
        d = self.c.msgdef(base)
        if base in ("time", "duration") and self.ctor_mode == "dict":
            fmt = "I" if base == "time" else "i"
            var, idx = self.prim(fmt, 4, 2, 4, path)
            return f"{{'sec': {var}[{idx}], 'nsec': {var}[{idx + 1}]}}"
        if not self.inline(base):
            return self.call(base, path)
        self.depth += 1
        try:
            return self.message(base, d, path)
        finally:
            self.depth -= 1


def _fail_factory(errinfo: dict[str, list[Any]]) -> Callable[..., DecodeError]:
    def _fail(fname: str, at: int, pos: int, end: int, e: object) -> DecodeError:
        field = None
        offset = pos
        info = errinfo.get(fname, [])
        if 0 <= at < len(info):
            entry = info[at]
            if isinstance(entry, tuple) and entry and entry[0] == "run":
                left = end - pos
                field = entry[1][0][2] if entry[1] else None
                need = 0
                for off, size, p in entry[1]:
                    if off + size > left:
                        field, offset, need = p, pos + off, size
                        break
                if isinstance(e, (struct.error, _Short)):
                    e = f"payload ends at byte {end}, field needs {need} bytes at {offset}"
            else:
                field = entry
        err = DecodeError(str(e), field=field, offset=offset)
        err.reason = str(e)  # type: ignore[attr-defined]
        return err

    return _fail
