"""The classes of ROS messages as Python objects: :class:`RosMessage` and its generated subclasses.

:func:`make_class` builds one small ``__slots__`` class per message type (cached by name,
fields and nested classes); :func:`allocator` and :func:`positional_maker` are the fast
constructors the generated decoders use.  ROS 1 ``time`` and ``duration`` are the two-field
classes :data:`Time` and :data:`Duration`.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from polybag.codecs.definition_limits import MsgDefError
from polybag.codecs.definition_model import NUMPY_TYPES, PRIMITIVE_FORMATS, Field, FieldType, MsgDef


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
# bounds of the class cache (classes, and their fields together): past either it starts over
_CLASS_CACHE_MAX = 8192
_CLASS_CACHE_FIELDS = 1 << 17
_class_cache_fields = 0


def _default_factory(
    t: FieldType, resolve: Callable[[str], type] | None, default: Any = None
) -> Callable[[], Any]:
    """A new field's value: its ``default`` from the definition (ROS 2), else a zero value:
    0, '', b'', zeros arrays, default nested messages."""
    base, n = t.base, t.array
    if default is not None:
        if n is None:
            return lambda: default
        if base == "uint8":
            return lambda: bytes(default)
        if base in PRIMITIVE_FORMATS:
            ddt = np.dtype(NUMPY_TYPES[base])
            return lambda: np.array(default, ddt)
        return lambda: list(default)
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

    # the other ROS's name of the nanoseconds, read-only (ROS 1 ``nsec``, ROS 2 ``nanosec``): a
    # time of either serializes as the other's (ROS 1 <-> ROS 2 conversion of whole objects)
    other = "nanosec" if nsec == "nsec" else "nsec"
    alias = property(
        lambda self: getattr(self, nsec),
        doc=f"``{nsec}`` under its ROS {'2' if other == 'nanosec' else '1'} name",
    )
    return {"to_nsec": to_nsec, "to_sec": to_sec, other: alias}


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


def _lazy_fill(names: tuple[str, ...], plain: tuple[bool, ...], factories: list[Callable[[], Any]]) -> Any:
    """``_pb_fill`` compiled when first called (the decoders never call it: a type read from
    a file pays for compiling it only when the user constructs one), then installed on the
    class in its place."""

    def _pb_fill(self: Any, /, *args: Any, **kwargs: Any) -> None:
        real = _make_fill(names, plain, factories)
        for cls in type(self).__mro__:
            if cls.__dict__.get("_pb_fill") is _pb_fill:
                type.__setattr__(cls, "_pb_fill", real)
        real(self, *args, **kwargs)

    return _pb_fill


def make_class(d: MsgDef, full_name: str | None = None, resolve: Callable[[str], type] | None = None) -> type:
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
    factories: list[Callable[[], Any]] = [_default_factory(f.type, sub, f.default) for f in d.fields]
    fill = _lazy_fill(names, plain, factories)
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
    global _class_cache_fields
    if len(_CLASS_CACHE) >= _CLASS_CACHE_MAX or _class_cache_fields + len(names) > _CLASS_CACHE_FIELDS:
        _CLASS_CACHE.clear()
        _class_cache_fields = 0
    _CLASS_CACHE[key] = cls
    _class_cache_fields += len(names)
    return cls


def allocator(cls: type) -> Callable[[], Any]:
    """A C-level call creating an empty instance of a generated class (fields unset)."""
    make: Callable[[], Any] = type.__call__.__get__(cls)
    return make


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
TIME_MSGDEF = MsgDef(
    "time", [Field("sec", FieldType("uint32")), Field("nsec", FieldType("uint32"))], full_name="time"
)
DURATION_MSGDEF = MsgDef(
    "duration", [Field("sec", FieldType("int32")), Field("nsec", FieldType("int32"))], full_name="duration"
)
Time = make_class(TIME_MSGDEF)
Duration = make_class(DURATION_MSGDEF)
_EMPTY_CDR_FIELD = Field("structure_needs_at_least_one_member", FieldType("uint8"))
