"""Compiled (de)serializers for ROS 1 and CDR (ROS 2) messages.

One :class:`Compiler` per (type set, wire format, byte order) generates Python source for
each message type once and ``exec``s it: runs of fixed-size fields (across nested messages)
become a single ``struct.unpack_from`` / ``pack`` call; strings and sequences are read with
their length checked against the bytes that remain before anything is allocated.  Objects
are instances of small generated ``__slots__`` classes; dicts are plain JSON-ready dicts.

CDR alignment is tracked statically where the position modulo 8 is known (so padding is
folded into the struct formats) and computed at run time after variable-length data.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from polybag.codecs.definition_limits import MsgDefError, short_name
from polybag.codecs.definition_model import NUMPY_TYPES, PRIMITIVE_FORMATS, Field, FieldType, MsgDef
from polybag.codecs.serde._encoders import EncodeError, _as_bytes, _enc_str, _EncGen, _fixbytes, _seq, _wenc
from polybag.codecs.serde._generator import (
    _INLINE_FIELDS,
    _U32,
    _ZERO_LIMIT,
    _dict_default,
    _Gen,
    _key,
    _Short,
)
from polybag.codecs.serde.decoders import DecoderGenerator, decode_wstring
from polybag.codecs.serde.messages import (
    DURATION_MSGDEF,
    TIME_MSGDEF,
    Duration,
    RosMessage,
    Time,
    allocator,
    get_field,
    make_class,
    plain_name,
    positional_maker,
)
from polybag.codecs.type_set import TypeSet
from polybag.errors import DecodeError

__all__ = [
    "Compiler",
    "Duration",
    "EncodeError",
    "RosMessage",
    "Time",
    "allocator",
    "get_field",
    "make_class",
    "plain_name",
    "positional_maker",
    "run_encoder",
]

_EMPTY_CDR_FIELD = Field("structure_needs_at_least_one_member", FieldType("uint8"))
#: fields all generated functions of one kind and mode may inline together: this many, plus
#: :data:`_INLINE_PER_FIELD` per field written in the definition
_INLINE_BUDGET = 2 * _INLINE_FIELDS
_INLINE_PER_FIELD = 8
#: Python source one compiler may generate (all its functions together); with the limits of
#: :class:`~polybag.codecs.definition_limits.DefinitionLimits` real types need a few KB and the
#: largest definition allowed some MB: past this a type is refused, naming the limit
MAX_SOURCE_BYTES = 32 << 20


def left_over(end: int, pos: int, topic: str | None, type_name: str) -> DecodeError:
    """The error of a payload of ``end`` bytes whose message ended at ``pos``."""
    return DecodeError(f"{end - pos} bytes left over after the message ({end} byte payload)", topic=topic, type_name=type_name, offset=pos)


def run_encoder(fn: Callable[[bytearray, Any], Any], obj: Any, type_name: str) -> bytearray:
    """``fn(out, obj)`` with a compiled encoder (ROS 1 or CDR) into a new buffer; a value
    that does not fit its field is an :class:`EncodeError` naming the type and the field."""
    out = bytearray()
    try:
        fn(out, obj)
    except DecodeError as e:
        reason = getattr(e, "reason", str(e))
        raise EncodeError(reason, type_name=type_name, field=e.field) from None
    return out


class Compiler:
    """Generates and caches decoders/encoders for every type of one :class:`~polybag.codecs.type_set.TypeSet`."""

    def __init__(self, ts: TypeSet, wire: str = "ros1", endian: str = "<", origin: int = 0) -> None:
        assert wire in ("ros1", "cdr") and endian in "<>"
        self.ts = ts
        self.cdr = wire == "cdr"
        self.e = endian
        # where CDR alignment counts from in ``buf`` (decoders) and ``out`` (encoders): 4 for a
        # whole payload, read or written after its encapsulation header
        self.origin = origin
        self.ns: dict[str, Any] = {
            "_new": object.__new__,
            "_np_array": np.array,
            "_frombuffer": np.frombuffer,
            "_Short": _Short,
            "_U32": _U32[endian],
            "_ZEROS": bytes(8),
            "_asarray": np.ascontiguousarray,
            "_enc_str": _enc_str,
            "_as_bytes": _as_bytes,
            "_fixbytes": _fixbytes,
            "_seq": _seq,
            "_wenc": _wenc,
            "_wdec": decode_wstring,
        }
        self._structs: dict[str, str] = {}
        self._funcs: dict[tuple[str, str], str] = {}
        self._count = 0
        self._type_ids: dict[str, int] = {}  # type name -> number in generated identifiers
        self._consts: dict[str, str] = {}  # string -> namespace variable holding it
        self._pending: list[tuple[tuple[str, str], _Gen]] | None = None  # functions still to generate
        self._min: dict[str, int] = {}
        self.classes: dict[str, type] = {}
        self.class_source: Compiler | None = None
        self._sizes: dict[str, int] = {}
        self._errinfo: dict[str, list[Any]] = {}
        self.ns["_errinfo"] = self._errinfo
        self._inline_left: dict[tuple[str, str], int] = {}  # (generator, mode) -> fields it may still inline
        #: bytes of Python source generated so far (refused past :data:`MAX_SOURCE_BYTES`)
        self.source_bytes = 0

    # --- helpers ----------------------------------------------------------------------
    def enc_align_code(self, a: int) -> str:
        """Encoder source padding ``out`` to ``a`` relative to :attr:`origin` (the bytes
        before it, a CDR encapsulation header, are already in ``out``)."""
        o = self.origin % a
        if not o:
            return f"out += _ZEROS[:-len(out) & {a - 1}]"
        return f"out += _ZEROS[:({o} - len(out)) & {a - 1}]"

    def align_code(self, a: int) -> str:
        """Decoder source aligning ``pos`` to ``a`` relative to :attr:`origin`."""
        o = self.origin % a
        if not o:
            return f"pos = (pos + {a - 1}) & -{a}"
        return f"pos = ((pos + {a - 1 - o}) & -{a}) + {o}"

    def msgdef(self, name: str) -> MsgDef:
        if name == "time":
            return TIME_MSGDEF
        if name == "duration":
            return DURATION_MSGDEF
        d = self.ts.get(name)
        if self.cdr and not d.fields:
            d = MsgDef(d.name, [_EMPTY_CDR_FIELD], d.constants, d.full_name)
        return d

    def cls(self, name: str) -> type:
        c = self.classes.get(name)
        if c is None:
            if self.class_source is not None:  # another compiler's classes (same type set)
                c = self.class_source.cls(name)
            elif name == "time":
                c = Time
            elif name == "duration":
                c = Duration
            else:
                d = self.msgdef(name)
                c = make_class(d, d.full_name or d.name, self.cls)
            self.classes[name] = c
            self.ns[self._ident("C", name)] = c
            self.ns[self._ident("A", name)] = allocator(c)
        return c

    def maker(self, name: str) -> str:
        """The namespace variable of type ``name``'s positional constructor, made when first
        needed (compiling it costs as much as the type has fields)."""
        var = self._ident("P", name)
        if var not in self.ns:
            self.ns[var] = positional_maker(self.cls(name))
        return var

    def spend_inline(self, gen: _Gen, fields: int) -> bool:
        """Whether ``gen`` may inline a nested type of ``fields`` expanded fields, taking them
        from the budget all generators of its kind and mode share: a few times the fields
        written in the definition, so a type shared by many others (a diamond of types that
        doubles at every level) is inlined into some functions and called from the rest, and
        the source generated stays linear in the definition, not in its expansion."""
        key = (type(gen).__name__, gen.mode)
        left = self._inline_left.get(key)
        if left is None:
            left = _INLINE_BUDGET + _INLINE_PER_FIELD * self._defined_fields()
        if fields > left:
            self._inline_left[key] = left
            return False
        self._inline_left[key] = left - fields
        return True

    def _defined_fields(self) -> int:
        """Fields written in the type set's own definitions (its fallback's are not counted)."""
        return sum(len(d.fields) for d in self.ts.types.values())

    def _ident(self, prefix: str, name: str) -> str:
        """The namespace variable of type ``name`` (``_C3``): numbered, never built from the name."""
        i = self._type_ids.setdefault(name, len(self._type_ids))
        return f"_{prefix}{i}"

    def const(self, value: str) -> str:
        """A namespace variable holding ``value`` (a field name that is not plain)."""
        var = self._consts.get(value)
        if var is None:
            var = self._consts[value] = f"_K{len(self._consts)}"
            self.ns[var] = value
        return var

    def attr(self, o: str, name: str, mode: str, t: FieldType | None = None, default: Any = None) -> str:
        """Source reading field ``name`` of ``o`` (an object, or a dict in dict modes: a
        missing key is the field's ``default`` from its definition, or its zero value)."""
        if mode != "obj":
            if t is None:
                return f"{o}[{_key(name)}]"
            if default is not None:
                var = f"_DV{len(self.ns)}"
                self.ns[var] = default
                return f"{o}.get({_key(name)}, {var})"
            return f"{o}.get({_key(name)}, {_dict_default(t)})"
        if plain_name(name):
            return f"{o}.{name}"
        self.ns.setdefault("_get_field", get_field)
        return f"_get_field({o}, {self.const(name)})"

    def zero_limit(self, name: str) -> int:
        """Most elements of a sequence of a zero-sized type (so bounded objects from no bytes)."""
        return max(1, _ZERO_LIMIT // self.size(name))

    def depth(self, name: str) -> int:
        """Message nesting levels of a type (times count as one)."""
        return 1 if name in ("time", "duration") else self.ts.depth(name)

    def size(self, name: str) -> int:
        """Fields of a type fully expanded (:meth:`~polybag.codecs.type_set.TypeSet.size`)."""
        return 3 if name in ("time", "duration") else self.ts.size(name) + (1 if self.cdr else 0)

    def struct(self, fmt: str) -> str:
        var = self._structs.get(fmt)
        if var is None:
            var = self._structs[fmt] = f"_S{len(self._structs)}"
            self.ns[var] = struct.Struct(self.e + fmt)
        return var

    def ustruct(self, fmt: str) -> str:
        """A struct for unpacking ``fmt``: native mode when that reads the same bytes.

        On a little-endian host, native mode (``@``) unpacks floats and integers with a
        plain copy instead of the portable byte-by-byte path (a run of 37 float64 values
        unpacks a quarter faster).  It is used only when it has the same layout: no
        alignment padding inserted (equal sizes) and no ``?`` (a native bool byte other
        than 0/1 is undefined in C).
        """
        if self.e == "<" and sys.byteorder == "little" and "?" not in fmt:
            try:
                native = struct.calcsize("@" + fmt) == struct.calcsize("<" + fmt)
            except struct.error:
                native = False
            if native:
                key = "@" + fmt
                var = self._structs.get(key)
                if var is None:
                    var = self._structs[key] = f"_S{len(self._structs)}"
                    self.ns[var] = struct.Struct(key)
                return var
        return self.struct(fmt)

    def dtype(self, prim: str) -> str:
        var = f"_DT_{prim}"
        if var not in self.ns:
            self.ns[var] = np.dtype(self.e + NUMPY_TYPES[prim]) if prim != "bool" else np.dtype("?")
            self.ns[f"_NDT_{prim}"] = np.dtype(NUMPY_TYPES[prim]) if prim != "bool" else np.dtype("?")
        return var

    def fixed_size(self, name: str) -> int:
        """ROS 1 wire size of a message type, or -1 if it has variable-length parts."""
        if self.cdr:
            return -1
        s = self._sizes.get(name)
        if s is None:
            total = 0
            for f in self.msgdef(name).fields:
                t = f.type
                if t.array == -1 or t.base in ("string", "wstring"):
                    total = -1
                    break
                if t.base in PRIMITIVE_FORMATS:
                    es = PRIMITIVE_FORMATS[t.base][1]
                else:
                    es = self.fixed_size(t.base)
                    if es < 0:
                        total = -1
                        break
                total += es * (t.array if t.array is not None else 1)
            s = self._sizes[name] = total
        return s

    def min_size(self, name: str) -> int:
        """The fewest bytes a value of the type takes (memoized: types are checked acyclic)."""
        s = self._min.get(name)
        if s is not None:
            return s
        total = 0
        for f in self.msgdef(name).fields:
            t = f.type
            if t.array == -1:
                total += 4
                continue
            n = t.array if t.array is not None else 1
            if t.base in PRIMITIVE_FORMATS:
                total += PRIMITIVE_FORMATS[t.base][1] * n
            elif t.base in ("string", "wstring"):
                total += 4 * n
            else:
                total += self.min_size(t.base) * n
        self._min[name] = total
        return total

    # --- public -------------------------------------------------------------------------
    def top_decoder(self, name: str, label: str) -> Callable[..., Any]:
        """``f(data, topic=None) -> object``: a whole payload, errors naming topic and ``label``."""
        self.ns["_TYPE_LABEL"] = label
        f: Callable[..., Any] = self.ns[self._func("t", name, "obj")]
        return f

    def decoder(self, name: str, mode: str = "obj") -> Callable[[Any, int, int], tuple[Any, int]]:
        """``f(buf, pos, end) -> (value, pos)`` for type ``name``; mode obj|dict|dictnp."""
        f: Callable[[Any, int, int], tuple[Any, int]] = self.ns[self._func("d", name, mode)]
        return f

    def encoder(self, name: str, mode: str = "obj") -> Callable[[bytearray, Any], None]:
        """``f(out, value)`` appending the serialization of ``value`` to ``out``."""
        f: Callable[[bytearray, Any], None] = self.ns[self._func("e", name, mode)]
        return f

    def _func(self, kind: str, name: str, mode: str) -> str:
        """The name of the generated function for (kind, mode, type), generating it if needed.

        A function needed while another is being generated (a nested type called out of
        line) is only named here and generated after it, in a loop: generating never recurses
        from one function into the next, however deep the types nest.  If any function of a
        batch fails, the whole batch is forgotten (no name points at a missing function).
        """
        key = (f"{kind}{mode}", name)
        fn = self._funcs.get(key)
        if fn is not None:
            return fn
        if name not in ("time", "duration"):
            self.ts.check(name)
        fn = self._funcs[key] = f"_{kind}{mode}{self._count}"
        self._count += 1
        gen: _Gen = (DecoderGenerator if kind in ("d", "t") else _EncGen)(self, mode, name, fn)
        gen.top = kind == "t"
        if self._pending is not None:
            self._pending.append((key, gen))
            return fn
        pending: list[tuple[tuple[str, str], _Gen]] = [(key, gen)]
        self._pending = pending
        done = 0
        try:
            while done < len(pending):
                _, g = pending[done]
                done += 1
                src = g.source()
                self.source_bytes += len(src)
                if self.source_bytes > MAX_SOURCE_BYTES:
                    raise MsgDefError(
                        f"the code generated for this type is over the limit of {MAX_SOURCE_BYTES} bytes "
                        "(polybag.codecs.serde.compiler.MAX_SOURCE_BYTES)",
                        type_name=short_name(name),
                    )
                code = compile(src, f"<polybag {g.fname} {short_name(g.name, 60)!r}>", "exec")
                exec(code, self.ns)  # noqa: S102
        except DecodeError:
            self._forget(pending)
            raise
        except (SyntaxError, RecursionError, MemoryError, ValueError, OverflowError, struct.error) as e:
            self._forget(pending)
            raise MsgDefError(
                f"cannot build a decoder for this type: {type(e).__name__}: {e}", type_name=name
            ) from None
        finally:
            self._pending = None
        return fn

    def _forget(self, batch: list[tuple[tuple[str, str], _Gen]]) -> None:
        for key, g in batch:
            self._funcs.pop(key, None)
            self.ns.pop(g.fname, None)
