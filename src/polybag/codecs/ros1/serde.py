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

import keyword
import re
import struct
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from polybag.codecs.ros1.msgdef import (
    NUMPY_TYPES,
    PRIMITIVE_FORMATS,
    Field,
    FieldType,
    MsgDef,
    MsgDefError,
    TypeSet,
)
from polybag.errors import DecodeError

_U32 = {"<": struct.Struct("<I"), ">": struct.Struct(">I")}
_ZERO_LIMIT = 1 << 16  # max elements of a zero-sized type in one sequence
_UNROLL = 8
_LOCAL_RUN = 64  # runs of at most this many values are unpacked into local variables
_CACHED_STRING = 64  # string fields remember their last value up to this many bytes
_INLINE_DEPTH = 16  # nested messages inlined into one generated function at most this deep
_INLINE_FIELDS = 4096  # ... and a function inlines about this many fields; then it calls out
_RUN_SLICE = re.compile(r"\b_t(\d+)\[(\d+):(\d+)\]")
_RUN_ITEM = re.compile(r"\b_t(\d+)\[(\d+)\]")


class EncodeError(DecodeError):
    """A value that cannot be serialized with its message type."""


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


class _Short(Exception):
    """Internal: a length field points past the end of the payload."""


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


class _MessageType(type):
    """Metaclass of the generated message classes: ``Cls(...)`` fills defaults and arguments.

    The classes themselves have no ``__init__``, so the decoders create instances with the
    C-level ``type.__call__`` bound to the class (no Python frame, no argument parsing) and
    store every field; users calling the class get the generated ``_pb_fill`` (positional or
    keyword fields, defaults for the others).  A user subclass with its own ``__init__`` is
    constructed the usual way.
    """

    def __call__(cls, /, *args: Any, **kwargs: Any) -> Any:
        if cls.__init__ is not object.__init__:  # type: ignore[misc]
            return super().__call__(*args, **kwargs)
        obj = type.__call__(cls)
        cls._pb_fill(obj, *args, **kwargs)  # type: ignore[attr-defined]
        return obj


#: a field name that is an attribute slot of its class and may appear in generated code as
#: ``obj.name`` / a keyword parameter: ASCII letters, digits and ``_`` (no leading ``_``, so no
#: dunder or internal name), not a keyword, not a method of the message classes
_PLAIN_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_NOT_PLAIN = frozenset({"self", "to_dict", "to_sec", "to_nsec"})


def plain_name(name: str) -> bool:
    """Whether a field is stored in a slot and written as ``obj.name`` by generated code.

    Other names (``__msgtype__``, ``_pb_fill``, ``class``, ``to_dict``, ``a-b``, non-ASCII
    names...) are kept as written too: their values live in the instance ``__dict__`` under the
    original name (``getattr(msg, name)`` reads them; ``vars(msg)[name]`` for the two names
    ``object`` owns, ``__class__`` and ``__dict__``), and generated code reaches them through
    constants, never by pasting the name into source.
    """
    return _PLAIN_NAME.fullmatch(name) is not None and not keyword.iskeyword(name) and name not in _NOT_PLAIN


def _field_values(o: Any) -> list[Any]:
    """The field values of a generated message object, in definition order."""
    cls = type(o)
    plain: tuple[bool, ...] = cls._pb_plain
    names: tuple[str, ...] = cls.__fieldnames__
    if all(plain):
        return [getattr(o, n) for n in names]
    d = o.__dict__
    return [getattr(o, n) if p else d[n] for n, p in zip(names, plain)]


class RosMessage(metaclass=_MessageType):
    """Base of generated message classes (attribute access, equality, repr)."""

    __slots__ = ()
    __msgtype__ = ""
    __fieldnames__: tuple[str, ...] = ()
    _pb_plain: tuple[bool, ...] = ()

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        for a, b in zip(_field_values(self), _field_values(other)):
            if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
                if not np.array_equal(a, b):
                    return False
            elif a != b:
                return False
        return True

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        cls = type(self)
        inner = ", ".join(
            f"{n}={v!r}" if p else f"{n!r}={v!r}"
            for n, p, v in zip(cls.__fieldnames__, cls._pb_plain, _field_values(self))
        )
        return f"{cls.__msgtype__}({inner})"

    def to_dict(self) -> dict[str, Any]:
        return _message_dict(self)


def _message_dict(o: Any) -> dict[str, Any]:
    return {n: _plain(v) for n, v in zip(type(o).__fieldnames__, _field_values(o))}


def _plain(v: Any) -> Any:
    if isinstance(v, RosMessage):
        return _message_dict(v)
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, np.ndarray):
        return v.tolist()
    return v


_CLASS_CACHE: dict[tuple[Any, ...], type] = {}


def _default_factory(t: FieldType, resolve: Callable[[str], type] | None) -> Callable[[], Any]:
    """A zero value for a field: 0, '', b'', zeros arrays, default nested messages."""
    base, n = t.base, t.array
    if n is None:
        if base in PRIMITIVE_FORMATS:
            v: Any = False if base == "bool" else (0.0 if base.startswith("float") else 0)
            return lambda: v
        if base in ("string", "wstring"):
            return str
        if resolve is None:
            return lambda: None
        return lambda: resolve(base)()
    if base == "uint8":
        return (lambda: bytes(n)) if n > 0 else bytes
    if base in PRIMITIVE_FORMATS:
        dt = np.dtype(NUMPY_TYPES[base])
        return lambda: np.zeros(max(n, 0), dt)
    if n > 0:
        one = _default_factory(FieldType(base), resolve)
        return lambda: [one() for _ in range(n)]
    return list


_TIME_NAMES = {"time", "duration", "builtin_interfaces/Time", "builtin_interfaces/Duration"}


def _time_methods(nsec: str) -> dict[str, Any]:
    def to_nsec(self: Any) -> int:
        """The time as integer nanoseconds."""
        return int(self.sec) * 1_000_000_000 + int(getattr(self, nsec))

    def to_sec(self: Any) -> float:
        """The time as float seconds."""
        return int(self.sec) + int(getattr(self, nsec)) * 1e-9

    return {"to_nsec": to_nsec, "to_sec": to_sec}


def _make_fill(names: tuple[str, ...], plain: tuple[bool, ...], factories: list[Callable[[], Any]]) -> Any:
    """``_pb_fill(self, *values, **fields)``: the given fields, defaults for the others.

    When every name is plain (:func:`plain_name`: an ASCII identifier that cannot clash with
    ``self``, ``_D``, ``_N``, ``_d`` or ``_a<i>``) the generated function takes the fields as
    keyword parameters.  Otherwise it takes ``_a<i>`` parameters, reaches the other fields through
    the ``_N`` tuple of names (no field name is ever source text), and a wrapper maps keywords.
    """
    simple = all(plain)
    params = list(names) if simple else [f"_a{i}" for i in range(len(names))]
    lines = ["def _pb_fill(self" + "".join(f", {p}=None" for p in params) + "):"]
    if not simple:
        lines.append("    _d = self.__dict__")
    for i, (n, p, ok) in enumerate(zip(names, params, plain)):
        value = f"{p} if {p} is not None else _D[{i}]()"
        lines.append(f"    self.{n} = {value}" if ok else f"    _d[_N[{i}]] = {value}")
    lines.append("    pass")
    ns: dict[str, Any] = {"_N": names, "_D": factories}
    exec(compile("\n".join(lines) + "\n", "<polybag message fill>", "exec"), ns)  # noqa: S102
    positional = ns["_pb_fill"]
    if simple:
        return positional
    index = {n: i for i, n in enumerate(names)}
    count = len(names)

    def _pb_fill(self: Any, /, *args: Any, **kwargs: Any) -> None:
        if len(args) > count:
            raise TypeError(f"{type(self).__msgtype__} has {count} fields, {len(args)} values given")
        if kwargs:
            vals = [*args, *([None] * (count - len(args)))]
            for k, v in kwargs.items():
                i = index.get(k)
                if i is None:
                    raise TypeError(f"{type(self).__msgtype__} has no field {k!r}")
                if i < len(args):
                    raise TypeError(f"{type(self).__msgtype__}: field {k!r} given twice")
                vals[i] = v
            args = tuple(vals)
        positional(self, *args)

    return _pb_fill


def make_class(
    d: MsgDef, full_name: str | None = None, resolve: Callable[[str], type] | None = None
) -> type:
    """A ``__slots__`` class for message type ``d`` (cached by name and fields).

    Plain field names (:func:`plain_name`) are slots; the others are kept, under their
    original names, in the instance ``__dict__`` (the class then has a ``__dict__`` slot).
    """
    names = tuple(f.name for f in d.fields)
    plain = tuple(plain_name(n) for n in names)
    consts = tuple((c.name, repr(c.value)) for c in d.constants)
    msgtype = full_name or d.full_name or d.name
    # the classes of the nested types are part of the key: a type of the same name and fields
    # may nest differently defined types (another file, CDR's placeholder field in empty types)
    subs: dict[str, type] = {}
    if resolve is not None:
        for f in d.fields:
            if f.type.base not in PRIMITIVE_FORMATS and f.type.base not in ("string", "wstring"):
                subs.setdefault(f.type.base, resolve(f.type.base))
    key = (msgtype, tuple((f.name, f.type) for f in d.fields), consts, tuple(subs.values()))
    cls = _CLASS_CACHE.get(key)
    if cls is not None:
        return cls
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise MsgDefError(f"field {dup!r} is defined twice", type_name=msgtype, field=dup)
    sub = subs.__getitem__ if resolve is not None else None
    factories: list[Callable[[], Any]] = [_default_factory(f.type, sub) for f in d.fields]
    fill = _make_fill(names, plain, factories)
    slots = tuple(n for n, p in zip(names, plain) if p)
    attrs: dict[str, Any] = {
        "__slots__": slots if all(plain) else (*slots, "__dict__"),
        "_pb_fill": fill,
        "__msgtype__": msgtype,
        "__fieldnames__": names,
        "_pb_plain": plain,
    }
    taken = set(names)
    for c in d.constants:
        # constants are class attributes when that cannot shadow anything (``Cls.FOO``)
        if plain_name(c.name) and c.name not in taken and c.name not in attrs:
            attrs[c.name] = c.value
    if names in (("sec", "nsec"), ("sec", "nanosec")) and d.name in _TIME_NAMES:
        attrs.update(_time_methods(names[1]))
    short = msgtype.rsplit("/", 1)[-1]
    cls = _MessageType(short if short.isidentifier() and short.isascii() else "Msg", (RosMessage,), attrs)
    _CLASS_CACHE[key] = cls
    return cls


def allocator(cls: type) -> Callable[[], Any]:
    """A C-level call creating an empty instance of a generated class (fields unset)."""
    return type.__call__.__get__(cls)  # type: ignore[attr-defined,no-any-return]


def positional_maker(cls: type) -> Callable[..., Any]:
    """``make(v0, v1, ...)``: an instance with every field given in order (for decoders)."""
    names: tuple[str, ...] = cls.__fieldnames__  # type: ignore[attr-defined]
    plain: tuple[bool, ...] = cls._pb_plain  # type: ignore[attr-defined]
    params = [f"_a{i}" for i in range(len(names))]
    body = ["    _o = _alloc()"]
    if not all(plain):
        body.append("    _d = _o.__dict__")
    for i, (n, p, ok) in enumerate(zip(names, params, plain)):
        body.append(f"    _o.{n} = {p}" if ok else f"    _d[_N[{i}]] = {p}")
    src = f"def make({', '.join(params)}):\n" + "\n".join(body) + "\n    return _o\n"
    ns: dict[str, Any] = {"_alloc": allocator(cls), "_N": names}
    exec(compile(src, "<polybag message maker>", "exec"), ns)  # noqa: S102
    return ns["make"]  # type: ignore[no-any-return]


def get_field(o: Any, name: str) -> Any:
    """The value of field ``name`` (not a plain name) of a message object."""
    d = getattr(o, "__dict__", None)
    if type(d) is dict and name in d:
        return d[name]
    return getattr(o, name)


# ROS 1 time and duration behave as two-field messages
_TIME = MsgDef("time", [Field("sec", FieldType("uint32")), Field("nsec", FieldType("uint32"))], full_name="time")
_DURATION = MsgDef(
    "duration", [Field("sec", FieldType("int32")), Field("nsec", FieldType("int32"))], full_name="duration"
)
Time = make_class(_TIME)
Duration = make_class(_DURATION)
_EMPTY_CDR_FIELD = Field("structure_needs_at_least_one_member", FieldType("uint8"))


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


class Compiler:
    """Generates and caches decoders/encoders for every type of one :class:`TypeSet`."""

    def __init__(self, ts: TypeSet, wire: str = "ros1", endian: str = "<") -> None:
        assert wire in ("ros1", "cdr") and endian in "<>"
        self.ts = ts
        self.cdr = wire == "cdr"
        self.e = endian
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
        }
        self._structs: dict[str, str] = {}
        self._funcs: dict[tuple[str, str], str] = {}
        self._count = 0
        self._type_ids: dict[str, int] = {}  # type name -> number in generated identifiers
        self._consts: dict[str, str] = {}  # string -> namespace variable holding it
        self._pending: list[tuple[tuple[str, str], _Gen]] | None = None  # functions still to generate
        self._min: dict[str, int] = {}
        self.classes: dict[str, type] = {}
        self._sizes: dict[str, int] = {}
        self._errinfo: dict[str, list[Any]] = {}
        self.ns["_errinfo"] = self._errinfo

    # --- helpers ----------------------------------------------------------------------
    def msgdef(self, name: str) -> MsgDef:
        if name == "time":
            return _TIME
        if name == "duration":
            return _DURATION
        d = self.ts.get(name)
        if self.cdr and not d.fields:
            d = MsgDef(d.name, [_EMPTY_CDR_FIELD], d.constants, d.full_name)
        return d

    def cls(self, name: str) -> type:
        c = self.classes.get(name)
        if c is None:
            if name == "time":
                c = Time
            elif name == "duration":
                c = Duration
            else:
                d = self.msgdef(name)
                c = make_class(d, d.full_name or d.name, self.cls)
            self.classes[name] = c
            self.ns[self._ident("C", name)] = c
            self.ns[self._ident("A", name)] = allocator(c)
            self.ns[self._ident("P", name)] = positional_maker(c)
        return c

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

    def attr(self, o: str, name: str, mode: str, t: FieldType | None = None) -> str:
        """Source reading field ``name`` of ``o`` (an object, or a dict in dict modes)."""
        if mode != "obj":
            if t is None:
                return f"{o}[{_key(name)}]"
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
        """Fields of a type fully expanded (:meth:`TypeSet.size`)."""
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
        return self.ns[self._func("t", name, "obj")]

    def decoder(self, name: str, mode: str = "obj") -> Callable[[Any, int, int], tuple[Any, int]]:
        """``f(buf, pos, end) -> (value, pos)`` for type ``name``; mode obj|dict|dictnp."""
        return self.ns[self._func("d", name, mode)]

    def encoder(self, name: str, mode: str = "obj") -> Callable[[bytearray, Any], None]:
        """``f(out, value)`` appending the serialization of ``value`` to ``out``."""
        return self.ns[self._func("e", name, mode)]

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
        gen = (_DecGen if kind in ("d", "t") else _EncGen)(self, mode, name, fn)
        gen.top = kind == "t"
        if self._pending is not None:
            self._pending.append((key, gen))
            return fn
        self._pending = pending = [(key, gen)]
        done = 0
        try:
            while done < len(pending):
                _, g = pending[done]
                done += 1
                src = g.source()
                code = compile(src, f"<polybag {g.fname} {g.name!r}>", "exec")
                exec(code, self.ns)  # noqa: S102
        except DecodeError:
            self._forget(pending)
            raise
        except (SyntaxError, RecursionError, MemoryError, ValueError, OverflowError, struct.error) as e:
            self._forget(pending)
            raise MsgDefError(f"cannot build a decoder for this type: {type(e).__name__}: {e}", type_name=name) from None
        finally:
            self._pending = None
        return fn

    def _forget(self, batch: list[tuple[tuple[str, str], _Gen]]) -> None:
        for key, g in batch:
            self._funcs.pop(key, None)
            self.ns.pop(g.fname, None)


def _enc_str(v: Any) -> bytes:
    if isinstance(v, str):
        return v.encode("utf-8", "surrogateescape")
    return bytes(v)


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


class _Gen:
    def __init__(self, c: Compiler, mode: str, name: str, fname: str) -> None:
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

        Inlining is bounded in depth (Python's parser and compiler limit nesting) and in the
        fields of one function (``A a; A b`` level after level doubles at every level); real
        types are far inside both bounds and are generated exactly as before.
        """
        if self.force_inline or base in ("time", "duration"):
            return True
        return self.depth < _INLINE_DEPTH and self.inlined + self.c.size(base) <= _INLINE_FIELDS

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

    def flush(self) -> None:
        raise NotImplementedError


class _DecGen(_Gen):
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
        expr = self.message(self.name, d, "")
        self.flush()
        top = getattr(self, "top", False)
        if top:
            self.emit("if pos != end: raise _Left(pos)")
        for line in self.post:
            self.emit(line)
        self.emit(f"return {expr}" if top else f"return {expr}, pos")
        if self.local_runs:
            self.lines = [self.localize(line) for line in self.lines]
        if self.uses_isb:
            self.lines.insert(0, "    " * self.ind + "_isb = buf.__class__ is bytes")
        short = f"_fail({self.fname!r}, _at, pos, end, 'length ' + str(e.args[0]) + ' exceeds the ' + str(end - pos) + ' bytes left')"
        other = f"_fail({self.fname!r}, _at, pos, end, e)"
        if top:
            head = [
                f"def {self.fname}(buf, topic=None):",
                "    pos = 0",
                "    end = len(buf)",
                "    _at = -1",
                "    try:",
            ]
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
            c.ns.setdefault("_Left", _Left)
            c.ns.setdefault("_leftover", _leftover)
            c.ns.setdefault("_totop", _totop)
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
        c.ns.setdefault("_fail", _fail_factory(c._errinfo))
        c.ns.setdefault("_DecodeError", DecodeError)
        return "\n".join(head + self.lines + tail) + "\n"

    def cached_string(self, v: str, n: str) -> None:
        """A ROS 1 string at pos (``n`` bytes, checked): decoded, or the previous value again.

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
        self.emit(f"    {v} = str(buf[pos:pos + {n}], 'utf-8', 'surrogateescape')")
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
        self.emit(f"pos = (pos + {a - 1}) & -{a}")

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
                return f"{self.c._ident('P', name)}({', '.join(v for _, v in parts)})"
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
        c = self.c
        if t.array is None:
            return self.scalar(base, path)
        if base in PRIMITIVE_FORMATS:
            fmt, size = PRIMITIVE_FORMATS[base]
            if t.array >= 0:
                n = t.array
                if n == 0:
                    return "b''" if base == "uint8" else ("[]" if not self.np_arrays else "_np_array([])")
                if base == "uint8":
                    var, idx = self.prim("s", 1, n, 1, path)
                    return f"{var}[{idx}]"
                var, idx = self.prim(fmt, size, n, size, path)
                sl = f"{var}[{idx}:{idx + n}]"
                if self.mode == "dictnp":
                    c.dtype(base)
                    return f"_np_array({sl}, _NDT_{base})"
                # objects: tuples (like genpy; numpy costs 2 us per array); dicts: lists
                return sl if self.mode == "obj" else f"list({sl})"
            n = self.count(path)
            self.mark(path)
            if base != "uint8" and size > 4 and c.cdr:
                self.emit(f"if {n}: pos = (pos + {size - 1}) & -{size}")
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
        # arrays of strings and messages
        if t.array >= 0 and t.array <= _UNROLL:
            return "[" + ", ".join(self.scalar(base, f"{path}[{i}]") for i in range(t.array)) + "]"
        if t.array >= 0:
            self.flush()
            n = str(t.array)
        else:
            n = self.count(path)
        self.mark(path)
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
        ):
            # fixed-size elements: one iter_unpack over the whole array
            size = c.fixed_size(base)
            sub = _DecGen(c, self.mode, base, self.fname + "_t")
            sub.ctor_mode, sub.np_arrays, sub.stmt, sub.post = self.ctor_mode, self.np_arrays, False, []
            sub.force_inline = True
            sub.run_id = 0
            expr = sub.message(base, c.msgdef(base), "").replace("_t0[", "t[")
            fmt = "".join(sub.run_fmt)
            s = c.ustruct(fmt)
            self.emit(f"if {n} * {size} > end - pos: raise _Short({n})")
            self.emit(f"{lst} = [{expr} for t in {s}.iter_unpack(buf[pos:pos + {n} * {size}])]")
            self.emit(f"pos += {n} * {size}")
            return lst
        self.emit(f"{lst} = []")
        self.emit(f"for _ in range({n}):")
        self.ind += 1
        if base in ("string", "wstring"):
            self.string_code(base, lst + ".append")
        else:
            fn = c._func("d", base, self.mode)
            v = self.new()
            self.emit(f"{v}, pos = {fn}(buf, pos, end)")
            self.emit(f"{lst}.append({v})")
        self.ind -= 1
        self.reset_align(unknown=True)
        return lst

    def string_code(self, base: str, sink: str) -> None:
        """Read one string at pos (inside a loop: dynamic alignment) and pass it to sink."""
        cdr = self.c.cdr
        if cdr:
            self.emit("pos = (pos + 3) & -4")
        self.emit("_m = _U32.unpack_from(buf, pos)[0]")
        self.emit("pos += 4")
        if base == "wstring":
            self.emit("if _m * 4 > end - pos: raise _Short(_m)")
            self.emit(
                f"{sink}(str(buf[pos:pos + _m * 4], 'utf-32-{'le' if self.c.e == '<' else 'be'}', 'surrogatepass'))"
            )
            self.emit("pos += _m * 4")
            return
        self.emit("if _m > end - pos: raise _Short(_m)")
        if cdr:
            self.emit(f"{sink}(str(buf[pos:pos + _m - 1], 'utf-8', 'surrogateescape') if _m else '')")
        else:
            self.emit(f"{sink}(str(buf[pos:pos + _m], 'utf-8', 'surrogateescape'))")
        self.emit("pos += _m")

    def scalar(self, base: str, path: str) -> str:
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
                enc = "utf-32-le" if self.c.e == "<" else "utf-32-be"
                self.emit(f"{v} = str(buf[pos:pos + {n} * 4], {enc!r}, 'surrogatepass')")
                self.emit(f"pos += {n} * 4")
                self.m, self.r = 4, 0
                return v
            self.emit(f"if {n} > end - pos: raise _Short({n})")
            if self.c.cdr:
                self.emit(f"{v} = str(buf[pos:pos + {n} - 1], 'utf-8', 'surrogateescape') if {n} else ''")
            else:
                self.cached_string(v, n)
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
        self.emit(f"out += _ZEROS[:-len(out) & {a - 1}]")

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
            self.value(f.type, self.c.attr(o, f.name, self.acc, f.type), p)

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
                self.emit(f"if len({a}): out += _ZEROS[:-len(out) & {size - 1}]")
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
                self.emit("out += _ZEROS[:-len(out) & 3]")
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
            enc = "utf-32-le" if self.c.e == "<" else "utf-32-be"
            self.emit(f"{b} = {v}.encode({enc!r}, 'surrogatepass')")
            self.emit(f"out += _U32.pack(len({b}) // 4)")
            self.emit(f"out += {b}")
            return
        self.emit(f"{b} = _enc_str({v})")
        if string_bound is not None:
            self.emit(f"if len({b}) > {string_bound}: raise ValueError('string longer than {string_bound} bytes')")
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
