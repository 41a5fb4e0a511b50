"""PX4 ULog message formats (``F`` messages) -> numpy dtypes, decoders and encoders.

A ULog format is one line ``name:type field;type[N] field;...`` where a type is a base C
type or another format's name (nested, defined in any order).  The schema of a ULog channel
holds the format of the message type first and then every nested format it uses, one per
line.

The flattened view follows pyulog exactly: ``accel[0]``, ``nested.x``, ``esc[3].rpm``; base
types map to the same numpy types pyulog uses (``bool`` and ``char`` as ``int8``).  Fields
whose name starts with ``_padding`` are alignment filler: a trailing padding field may be
missing from the logged data, and :meth:`UlogType.column_names` hides padding by default.

A name repeated within one format (two ``_padding0`` in a PX4 format with several padding
gaps, or a real name twice) is addressed as ``name``, ``name_1``, ``name_2``... in order
(a suffix that is another field's name is skipped), in the nested values and in the
flattened names alike (see :attr:`FormatDef.names`).  A format that cannot be laid out
(one that contains itself, nests more than :data:`MAX_DEPTH` deep, has more than
:data:`MAX_FIELDS` fields and nested items, or needs more bytes than a ULog message holds)
is refused with a ``ValueError`` before anything is allocated for it.

Logged strings (``L``/``C``) travel on a channel whose schema is :data:`LOGGED_STRING_SCHEMA`;
their payload is ``uint8 log_level, uint8 tagged, uint16 tag, uint64 timestamp, text``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np

from polybag.codecs.cache import CostCache, definition_key
from polybag.errors import DecodeError, FormatError
from polybag.model import Channel, Schema

# base type -> (struct code, size, numpy type of pyulog's columns)
BASE_TYPES: dict[str, tuple[str, int, type[np.generic]]] = {
    "int8_t": ("b", 1, np.int8), "uint8_t": ("B", 1, np.uint8), "int16_t": ("h", 2, np.int16), "uint16_t": ("H", 2, np.uint16),
    "int32_t": ("i", 4, np.int32), "uint32_t": ("I", 4, np.uint32), "int64_t": ("q", 8, np.int64), "uint64_t": ("Q", 8, np.uint64),
    "float": ("f", 4, np.float32), "double": ("d", 8, np.float64), "bool": ("?", 1, np.int8), "char": ("c", 1, np.int8),
}
TIMESTAMP_TYPES = {"uint64_t": 1, "uint32_t": 1, "uint16_t": 1, "uint8_t": 1000}

LOGGED_STRING_SCHEMA = "ulog_logged_string"
LOGGED_STRING_TEXT = (
    b"ulog_logged_string:uint8_t log_level;uint8_t tagged;uint16_t tag;uint64_t timestamp;char[] message;"
)
_LOG_HEAD = struct.Struct("<BBHQ")

MAX_ARRAY = 0xFFFF  # like pyulog: bigger arrays are corruption, not a reason to allocate
MAX_FLAT_FIELDS = 1 << 16
MAX_FIELDS = 1 << 17  # flattened fields plus nested items of one message type
MAX_DEPTH = 32  # levels of nested formats (PX4 uses three or four)
MAX_PAYLOAD = 0xFFFF - 2  # the most a data message holds after its msg_id
MAX_NAME = 255  # longest format or field name (PX4's are a few dozen characters)
MAX_FLAT_NAME_CHARS = 1 << 24  # characters of all flattened field names of one message type


@dataclass(frozen=True, slots=True)
class FieldDef:
    """One field of a format: base or nested type name, array length (0: scalar, N: fixed
    array of N), name."""

    type: str
    array: int
    name: str

    def __reduce__(self) -> tuple[Any, ...]:
        return (FieldDef, (self.type, self.array, self.name))

    @property
    def is_padding(self) -> bool:
        return self.name.startswith("_padding")

    def text(self) -> str:
        return f"{self.type}[{self.array}] {self.name}" if self.array else f"{self.type} {self.name}"


def unique_names(names: Sequence[str]) -> tuple[str, ...]:
    """The name each field is addressed by: its own for the first use of a name, then
    ``name_1``, ``name_2``... for repeats (skipping suffixes that are another field's name)."""
    taken = set(names)
    if len(taken) == len(names):
        return tuple(names)
    seen: set[str] = set()
    nxt: dict[str, int] = {}
    out = []
    for n in names:
        if n in seen:
            k = nxt.get(n, 1)
            while f"{n}_{k}" in taken:
                k += 1
            nxt[n] = k + 1
            n = f"{n}_{k}"
            taken.add(n)
        seen.add(n)
        out.append(n)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class FormatDef:
    """One format (``F`` message): its name and fields; ``names``: the name each field is
    addressed by (repeated names made distinct, see :func:`unique_names`; not compared or
    shown)."""

    name: str
    fields: tuple[FieldDef, ...]
    names: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # a value worked out from the fields once (the frozen dataclass way to set it)
        object.__setattr__(self, "names", unique_names([f.name for f in self.fields]))

    def __reduce__(self) -> tuple[Any, ...]:
        return (FormatDef, (self.name, self.fields))

    def text(self) -> str:
        return self.name + ":" + "".join(f.text() + ";" for f in self.fields)


def parse_format(text: str) -> FormatDef:
    """Parse one ``F`` message text; ValueError when it is malformed."""
    name, sep, rest = text.partition(":")
    if not sep or not name:
        raise ValueError(f"format {text[:60]!r} has no 'name:'")
    if len(name) > MAX_NAME:
        raise ValueError(f"format name {name[:60]!r}... is {len(name)} characters long (at most {MAX_NAME})")
    fields: list[FieldDef] = []
    for part in rest.split(";"):
        if not part:
            continue
        typ, _, fname = part.strip().partition(" ")
        fname = fname.strip()
        if not typ or not fname:
            raise ValueError(f"format {name}: field {part[:80]!r} is not 'type name'")
        if len(fname) > MAX_NAME or len(typ) > MAX_NAME + 8:
            raise ValueError(
                f"format {name}: field {part[:60]!r}... has a name or type longer than {MAX_NAME} characters"
            )
        array = 0
        lb = typ.find("[")
        if lb >= 0:
            rb = typ.find("]", lb)
            if rb < 0:
                raise ValueError(f"format {name}: field {part!r} has no ']'")
            digits = typ[lb + 1 : rb]
            if not digits.isdigit():
                raise ValueError(f"format {name}: field {part!r} has no array length")
            array = int(digits)
            if array > MAX_ARRAY:
                raise ValueError(f"format {name}: array length {array} is too big")
            typ = typ[:lb]
        fields.append(FieldDef(typ, array, fname))
    return FormatDef(name, tuple(fields))


@dataclass(slots=True)
class FlatField:
    """One flattened field of a compiled type."""

    name: str  # pyulog's flattened name
    type: str  # base type
    offset: int
    padding: bool  # the name or one of its parents is a _padding field


class UlogType:
    """A message type compiled for reading: flattened fields and a numpy dtype.

    Mutable and unhashable, compared and shown field by field (``_fields``) like the
    dataclass it was; a plain class because the flattened fields are made on first use
    (:attr:`flat`)."""

    __slots__ = (
        "name",
        "formats",
        "_flat",
        "size",
        "min_size",
        "timestamp_offset",
        "timestamp_type",
        "_dtype",
        "_struct",
        "_builder",
    )
    #: what is compared and shown: the slots, the flattened fields by their property
    _fields = tuple("flat" if n == "_flat" else n for n in __slots__)

    def __init__(
        self,
        name: str,
        formats: dict[str, FormatDef],
        flat: list[FlatField] | None = None,
        size: int = 0,
        min_size: int = 0,
        timestamp_offset: int = -1,
        timestamp_type: str = "",
        _dtype: np.dtype | None = None,
        _struct: struct.Struct | None = None,
        _builder: list[Any] | None = None,
    ) -> None:
        self.name = name
        self.formats = formats
        # the flattened fields, made when first needed (:attr:`flat`): knowing a type's sizes
        # (all a reader scanning for data messages needs) costs nothing per field
        self._flat: list[FlatField] | None = [] if flat is None else flat
        self.size = size  # full size including a trailing padding field
        self.min_size = min_size  # size without trailing padding fields (the least a D message holds)
        self.timestamp_offset = timestamp_offset
        self.timestamp_type = timestamp_type
        self._dtype = _dtype
        self._struct = _struct
        self._builder = _builder

    def __hash__(self) -> int:
        raise TypeError(f"unhashable type: {self.__class__.__name__!r}")  # mutable, like the dataclass it was

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, f) for f in self._fields)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, UlogType) or other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()

    def __repr__(self) -> str:
        inner = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._fields)
        return f"{self.__class__.__qualname__}({inner})"

    @property
    def flat(self) -> list[FlatField]:
        """pyulog's flattened fields (trailing padding fields dropped), made on first use."""
        if self._flat is None:
            self._flat = _flatten_type(self.name, self.formats)
        return self._flat

    @flat.setter
    def flat(self, value: list[FlatField]) -> None:
        self._flat = value

    @property
    def dtype(self) -> np.dtype:
        """A packed structured dtype of pyulog's flattened fields (trailing padding dropped)."""
        if self._dtype is None:
            self._dtype = np.dtype(
                {
                    "names": [f.name for f in self.flat],
                    "formats": [BASE_TYPES[f.type][2] for f in self.flat],
                    "offsets": [f.offset for f in self.flat],
                    "itemsize": max(self.min_size, 1),
                }
            ).newbyteorder("<")
        return self._dtype

    def column_names(self, padding: bool = False) -> list[str]:
        return [f.name for f in self.flat if padding or not f.padding]

    # --- per-message decoding ----------------------------------------------------------
    def _compile(self) -> None:
        codes = ["<"]
        pos = 0
        for f in self.flat:
            if f.offset > pos:
                codes.append(f"{f.offset - pos}x")
            codes.append(BASE_TYPES[f.type][0])
            pos = f.offset + BASE_TYPES[f.type][1]
        self._struct = struct.Struct("".join(codes))
        self._builder = self._build_plan(self.name, [0])

    def _build_plan(self, type_name: str, counter: list[int]) -> list[Any]:
        """A tree that maps the flat tuple back into nested values."""
        plan: list[Any] = []
        fmt = self.formats[type_name]
        for f, name in zip(fmt.fields, fmt.names):
            n = f.array or 1
            if f.type in BASE_TYPES:
                start = counter[0]
                counter[0] += n
                kind = "str" if f.type == "char" and f.array else ("bool" if f.type == "bool" else "")
                plan.append((name, f.array, start, kind, None))
            else:
                subs = [self._build_plan(f.type, counter) for _ in range(n)]
                plan.append((name, f.array, -1, "nested", subs))
        return plan

    def unpack(self, data: bytes | memoryview, topic: str | None = None) -> tuple[Any, ...]:
        if self._struct is None:
            self._compile()
        assert self._struct is not None
        if len(data) < self._struct.size:
            if len(data) < self.min_size:
                raise DecodeError(
                    f"expected at least {self.min_size} bytes, got {len(data)}",
                    topic=topic,
                    type_name=self.name,
                )
            data = bytes(data) + bytes(self._struct.size - len(data))
        return self._struct.unpack_from(data, 0)

    def to_dict(self, data: bytes | memoryview, topic: str | None = None, flat: bool = False) -> dict[str, Any]:
        values = self.unpack(data, topic)
        if flat:
            out = {}
            for f, v in zip(self.flat, values):
                if not f.padding:
                    out[f.name] = v[0] if isinstance(v, bytes) else v
            return out
        assert self._builder is not None
        return _build(self._builder, values)

    def decode(self, data: bytes | memoryview, topic: str | None = None) -> Any:
        return _to_namespace(self.to_dict(data, topic))

    def encode(self, obj: Any) -> bytes:
        """Bytes of one message from nested values (dict/object) or pyulog's flat names."""
        if self._struct is None:
            self._compile()
        assert self._struct is not None
        # pyulog's flat names (``accel[0]``, ``nested.x``) or nested values; when every field
        # is a plain scalar both spellings are the same
        top = self.formats[self.name].fields
        simple = all(f.type in BASE_TYPES and not f.array for f in top)
        flat_names = {f.name for f in self.flat}
        if isinstance(obj, Mapping) and (
            simple or any(k in flat_names and ("[" in k or "." in k) for k in obj)
        ):
            flat_values = [obj.get(f.name, 0) if not f.padding else 0 for f in self.flat]
        else:
            flat_values = []
            assert self._builder is not None
            try:
                _flatten(self._builder, obj, flat_values)
            except (TypeError, ValueError, KeyError, IndexError, AttributeError, OverflowError) as e:
                raise DecodeError(f"cannot encode: {e}", type_name=self.name) from None
        try:
            out = self._struct.pack(*self._pack_values(flat_values))
        except (struct.error, TypeError, ValueError, OverflowError, UnicodeError) as e:
            raise DecodeError(f"cannot encode: {e}", type_name=self.name) from None
        return out[: self.min_size] if self.min_size < len(out) else out

    def _pack_values(self, flat_values: list[Any]) -> list[Any]:
        """Values of the flattened fields as struct.pack takes them."""
        packed = []
        for f, v in zip(self.flat, flat_values):
            if f.type == "char":
                if isinstance(v, str):
                    v = v.encode("utf-8")[:1] or b"\0"
                elif isinstance(v, (int, np.integer)):
                    v = bytes([int(v) & 0xFF])
            elif f.type == "bool":
                v = bool(v)
            elif isinstance(v, np.generic):
                v = v.item()
            packed.append(v)
        return packed


def _build(plan: list[Any], values: tuple[Any, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, array, start, kind, subs in plan:
        if name.startswith("_padding"):
            continue
        if kind == "nested":
            items = [_build(s, values) for s in subs]
            out[name] = items if array else items[0]
        elif kind == "str":
            raw = b"".join(values[start : start + array])
            out[name] = raw.split(b"\0", 1)[0].decode("utf-8", "replace")
        elif array:
            vals = list(values[start : start + array])
            if vals and isinstance(vals[0], bytes):
                vals = [v[0] for v in vals]
            out[name] = vals
        else:
            v = values[start]
            out[name] = v[0] if isinstance(v, bytes) else v
    return out


def _get(obj: Any, name: str, default: Any = 0) -> Any:
    """Field ``name`` of a mapping or an object.  An object's own attributes come first, so
    that a field named like a Python attribute (``__class__``, ``__dict__``) is the field,
    never the object's class or namespace."""
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    own = getattr(obj, "__dict__", None)
    if isinstance(own, dict):
        return own.get(name, default)
    if name.startswith("__"):
        return default
    return getattr(obj, name, default)


def _items(value: Any) -> list[Any] | None:
    """The items of an array field's value (None: not given)."""
    if value is None:
        return None
    if isinstance(value, (str, bytes, bytearray, Mapping)) or not isinstance(value, Iterable):
        raise TypeError(f"expected a sequence, got {type(value).__name__}")
    return list(value)


def _flatten(plan: list[Any], obj: Any, out: list[Any]) -> None:
    for name, array, _start, kind, subs in plan:
        value = None if name.startswith("_padding") else _get(obj, name, None)
        if kind == "nested":
            items = _items(value) if array else [value]
            for i, s in enumerate(subs):
                item = items[i] if items is not None and i < len(items) else {}
                _flatten(s, item if item is not None else {}, out)
        elif kind == "str":
            if isinstance(value, str):
                raw = value.encode("utf-8", "surrogatepass")
            elif value is None or isinstance(value, (bytes, bytearray, memoryview)):
                raw = bytes(value or b"")
            else:
                raw = bytes(int(v) & 0xFF if not isinstance(v, (str, bytes)) else ord(v[:1] or "\0")
                            for v in _items(value) or [])
            raw = raw[:array].ljust(array, b"\0")
            out.extend(raw[i : i + 1] for i in range(array))
        elif array:
            vals = _items(value) or []
            vals = vals[:array] + [0] * (array - len(vals))
            out.extend(vals)
        else:
            out.append(0 if value is None else value)


def _to_namespace(v: Any) -> Any:
    if isinstance(v, dict):
        return SimpleNamespace(**{k: _to_namespace(x) for k, x in v.items()})
    if isinstance(v, list) and v and isinstance(v[0], dict):
        return [_to_namespace(x) for x in v]
    return v


def _measure(root: str, formats: Mapping[str, FormatDef]) -> dict[str, int]:
    return _measure_all(root, formats)[0]


def _measure_all(root: str, formats: Mapping[str, FormatDef]) -> tuple[dict[str, int], dict[str, int]]:
    """Size in bytes of ``root`` and of every format it uses, walked without recursion;
    ValueError for an unknown type, a format that contains itself, nesting deeper than
    :data:`MAX_DEPTH` or more than :data:`MAX_FIELDS` fields and nested items."""
    sizes: dict[str, int] = {}
    items: dict[str, int] = {}  # flattened fields + nested items of each format
    nflat: dict[str, int] = {}  # flattened (base type) fields of each format
    chars: dict[str, int] = {}  # characters of the flattened names of each format
    path: list[str] = []
    at: list[int] = []  # per level of ``path``: the next field to look at

    def enter(tname: str) -> None:
        if tname in path:
            raise ValueError(f"format {tname} contains itself")
        if tname not in formats:
            raise ValueError(f"no format for type {tname!r}")
        if len(path) >= MAX_DEPTH:
            raise ValueError(f"format {root} nests formats more than {MAX_DEPTH} deep")
        path.append(tname)
        at.append(0)

    enter(root)
    while path:
        fields = formats[path[-1]].fields
        i = at[-1]
        while i < len(fields) and (fields[i].type in BASE_TYPES or fields[i].type in sizes):
            i += 1
        at[-1] = i
        if i < len(fields):
            enter(fields[i].type)
            continue
        size = count = flat = nchars = 0
        for f in fields:
            n = f.array or 1
            # the names of one field: ``name`` or ``name[0]`` ... ``name[n-1]`` (+1 for a
            # repeated name made distinct, ``name_1``)
            own = n * (len(f.name) + 4) + _index_chars(f.array)
            if f.type in BASE_TYPES:
                size += BASE_TYPES[f.type][1] * n
                count += n
                flat += n
                nchars += own
            else:
                size += sizes[f.type] * n
                count += (items[f.type] + 1) * n
                flat += nflat[f.type] * n
                nchars += chars[f.type] * n + nflat[f.type] * own  # ``name[i].`` before each
        if count > MAX_FIELDS:
            raise ValueError(f"format {root} has more than {MAX_FIELDS} fields and nested items")
        if nchars > MAX_FLAT_NAME_CHARS:
            raise ValueError(
                f"format {root} has {nchars} characters of flattened field names (at most {MAX_FLAT_NAME_CHARS})"
            )
        tname = path.pop()
        at.pop()
        sizes[tname] = size
        items[tname] = count
        nflat[tname] = flat
        chars[tname] = nchars
    return sizes, nflat


def _last_end(tname: str, formats: Mapping[str, FormatDef], sizes: Mapping[str, int], memo: dict[str, int | None]) -> int | None:
    """Where the last flattened field of format ``tname`` ends (None: it has none), from the
    sizes :func:`_measure_all` found (recursion as deep as the nesting: at most MAX_DEPTH)."""
    if tname in memo:
        return memo[tname]
    off = 0
    last: int | None = None
    for f in formats[tname].fields:
        n = f.array or 1
        if f.type in BASE_TYPES:
            last = off + BASE_TYPES[f.type][1] * n
            off += BASE_TYPES[f.type][1] * n
        else:
            sub = _last_end(f.type, formats, sizes, memo)
            if sub is not None:
                last = off + (n - 1) * sizes[f.type] + sub
            off += sizes[f.type] * n
    memo[tname] = last
    return last


def _index_chars(n: int) -> int:
    """Digits of the indexes 0 .. n-1 together."""
    total, lo, width = 0, 0, 1
    while lo < n:
        hi = min(n, 10**width)
        total += (hi - lo) * width
        lo, width = hi, width + 1
    return total


def _unique_flat(flat: list[FlatField]) -> None:
    """Make flattened names distinct in place: they collide only when a field's own name
    holds ``[i]`` or ``.x`` (a later one becomes ``name_1``, like a repeated field name)."""
    names = [f.name for f in flat]
    if len(set(names)) != len(names):
        for f, n in zip(flat, unique_names(names)):
            f.name = n


def compile_type(name: str, formats: Mapping[str, FormatDef]) -> UlogType:
    """Flatten ``name`` the way pyulog does (repeated names made distinct, see
    :func:`unique_names`); ValueError for a format that cannot be laid out (unknown types,
    cycles, too deep, too many fields, larger than a ULog message).

    Sizes, the timestamp and the checks come from each format's fields once (linear in the
    formats, whatever they unfold into); the flattened fields themselves are made when first
    used (:attr:`UlogType.flat`), so a reader that lays out every format of a log to scan it
    pays nothing per flattened field of the formats it does not read."""
    sizes, nflat = _measure_all(name, formats)
    t = UlogType(name, {f.name: f for f in nested_formats(name, formats)})
    t._flat = None  # made on first use
    t.size = sizes[name]
    top = formats[name]
    memo: dict[str, int | None] = {}
    # trailing fields named _padding... are dropped (their flattened names start with it)
    off = 0
    min_size = 0
    kept = 0  # flattened fields up to the last non-padding field
    seen = 0
    end: int | None
    for f, fname in zip(top.fields, top.names):
        n = f.array or 1
        if f.type in BASE_TYPES:
            width, leaves, end = BASE_TYPES[f.type][1] * n, n, BASE_TYPES[f.type][1] * n
        else:
            width, leaves = sizes[f.type] * n, nflat[f.type] * n
            sub = _last_end(f.type, formats, sizes, memo)
            end = None if sub is None else (n - 1) * sizes[f.type] + sub
        seen += leaves
        if end is not None and leaves and not fname.startswith("_padding"):
            min_size = off + end
            kept = seen
        off += width
    t.min_size = min_size
    if t.min_size > MAX_PAYLOAD:
        raise ValueError(
            f"format {name} needs {t.min_size} bytes, more than a ULog data message holds ({MAX_PAYLOAD})"
        )
    if kept > MAX_FLAT_FIELDS:
        raise ValueError(f"format {name} has more than {MAX_FLAT_FIELDS} fields")
    off = 0
    for f, fname in zip(top.fields, top.names):
        if fname == "timestamp" and f.type in TIMESTAMP_TYPES and not f.array:
            t.timestamp_offset = off
            t.timestamp_type = f.type
            break
        off += BASE_TYPES[f.type][1] * (f.array or 1) if f.type in BASE_TYPES else sizes[f.type] * (f.array or 1)
    return t


def _flatten_type(name: str, formats: Mapping[str, FormatDef]) -> list[FlatField]:
    """pyulog's flattened fields of a format :func:`compile_type` checked (trailing padding
    fields dropped)."""
    flat: list[FlatField] = []

    def walk(tname: str, prefix: str, offset: int, pad: bool) -> int:
        fmt = formats[tname]
        for f, fname in zip(fmt.fields, fmt.names):
            fpad = pad or f.is_padding
            if f.type in BASE_TYPES:
                sz = BASE_TYPES[f.type][1]
                if f.array:
                    for i in range(f.array):
                        flat.append(FlatField(f"{prefix}{fname}[{i}]", f.type, offset, fpad))
                        offset += sz
                else:
                    flat.append(FlatField(prefix + fname, f.type, offset, fpad))
                    offset += sz
            elif f.array:
                for i in range(f.array):
                    offset = walk(f.type, f"{prefix}{fname}[{i}].", offset, fpad)
            else:
                offset = walk(f.type, f"{prefix}{fname}.", offset, fpad)
        return offset

    walk(name, "", 0, False)  # recursion as deep as the nesting: at most MAX_DEPTH
    _unique_flat(flat)
    # A trailing padding field may be missing from the data (pyulog drops it too).
    while flat and flat[-1].name.startswith("_padding"):
        flat.pop()
    return flat


def nested_formats(name: str, formats: Mapping[str, FormatDef]) -> list[FormatDef]:
    """``name``'s format followed by every format it uses (depth first, each once; walked
    without recursion, so any chain of formats is safe)."""
    out: list[FormatDef] = []
    seen: set[str] = set()
    stack = [name]
    while stack:
        n = stack.pop()
        if n in seen or n in BASE_TYPES or n not in formats:
            continue
        seen.add(n)
        out.append(formats[n])
        stack.extend(reversed([f.type for f in formats[n].fields]))
    return out


def schema_text(name: str, formats: Mapping[str, FormatDef]) -> bytes:
    return "\n".join(f.text() for f in nested_formats(name, formats)).encode("utf-8")


def parse_schema_text(data: bytes | str) -> dict[str, FormatDef]:
    text = data.decode("utf-8", "replace") if isinstance(data, (bytes, bytearray, memoryview)) else data
    out: dict[str, FormatDef] = {}
    for line in text.splitlines():
        line = line.strip()
        if line:
            fmt = parse_format(line)
            out[fmt.name] = fmt
    return out


class UlogCodec:
    """Codec for a ULog channel: ``decode`` gives an object with nested attributes."""

    def __init__(self, utype: UlogType) -> None:
        self.type = utype

    def decode(self, data: bytes | memoryview, topic: str | None = None) -> Any:
        return self.type.decode(data, topic)

    def to_dict(self, data: bytes | memoryview, topic: str | None = None) -> Any:
        return self.type.to_dict(data, topic)

    def to_flat_dict(self, data: bytes | memoryview, topic: str | None = None) -> dict[str, Any]:
        """pyulog's flattened names (``accel[0]``, ``nested.x``) -> values."""
        return self.type.to_dict(data, topic, flat=True)

    def encode(self, obj: Any) -> bytes:
        return self.type.encode(obj)

    def records(self, payloads: Sequence[bytes | memoryview]) -> np.ndarray:
        """Many payloads as one structured array of pyulog's flattened fields (see
        :func:`payload_records`)."""
        return payload_records(self.type, payloads)

    def columns(self, payloads: Iterable[bytes | memoryview]) -> dict[str, np.ndarray]:
        """Columns of many payloads at once (each at least ``min_size`` bytes), keyed by
        pyulog's flattened names, ``_padding`` fields left out."""
        arr = payload_records(self.type, list(payloads))
        return {n: arr[n] for n in self.type.column_names()}


def payload_records(utype: UlogType, payloads: Sequence[bytes | memoryview]) -> np.ndarray:
    """Data message payloads (without the msg_id) as one structured array of ``utype.dtype``
    (pyulog's flattened field names), built by one ``np.frombuffer`` over the joined
    payloads.  Each payload is cut to the record size (a trailing padding field is dropped)
    and a short one is zero-filled, so the result always has ``len(payloads)`` rows."""
    dt = utype.dtype
    size = dt.itemsize
    if not payloads:
        return np.zeros(0, dtype=dt)
    if all(len(p) == size for p in payloads):
        buf = b"".join(payloads)
    else:
        buf = b"".join(bytes(p[:size]).ljust(size, b"\0") for p in payloads)
    return np.frombuffer(buf, dtype=dt)


class LoggedStringCodec:
    """Codec of the logged-string channel (``L`` and ``C`` messages)."""

    def decode(self, data: bytes | memoryview, topic: str | None = None) -> Any:
        return SimpleNamespace(**self.to_dict(data, topic))

    def to_dict(self, data: bytes | memoryview, topic: str | None = None) -> Any:
        if len(data) < _LOG_HEAD.size:
            raise DecodeError(f"logged string shorter than {_LOG_HEAD.size} bytes", topic=topic)
        level, tagged, tag, ts = _LOG_HEAD.unpack_from(data, 0)
        text = bytes(data[_LOG_HEAD.size :]).decode("utf-8", "replace")
        return {"log_level": level, "tag": tag if tagged else None, "timestamp": ts, "message": text}

    def encode(self, obj: Any) -> bytes:
        tag = _get(obj, "tag", None)
        text = _get(obj, "message", "")
        raw = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        return (
            _LOG_HEAD.pack(
                int(_get(obj, "log_level", ord("6"))),
                tag is not None,
                int(tag or 0),
                int(_get(obj, "timestamp", 0)),
            )
            + raw
        )


def logged_string_payload(level: int, tag: int | None, timestamp: int, text: bytes) -> bytes:
    return _LOG_HEAD.pack(level, tag is not None, tag or 0, timestamp) + text


def unpack_logged_string(data: bytes | memoryview) -> tuple[int, int | None, int, bytes]:
    level, tagged, tag, ts = _LOG_HEAD.unpack_from(data, 0)
    return level, (tag if tagged else None), ts, bytes(data[_LOG_HEAD.size :])


_TYPE_CACHE_SIZE = 512
#: bytes of the cached types' records together (a type's flattened fields are at most its size)
_TYPE_CACHE_BYTES = 1 << 19
# compiled types by (name, digest of the schema), least recently used dropped past the bounds
_type_cache = CostCache(_TYPE_CACHE_BYTES, _TYPE_CACHE_SIZE)


def type_for_schema(schema: Schema) -> UlogType:
    key = (schema.name, definition_key(schema.data))
    t: UlogType | None = _type_cache.get(key)
    if t is None:
        try:
            formats = parse_schema_text(schema.data)
            t = compile_type(schema.name, formats)
        except ValueError as e:
            raise FormatError(f"ULog schema {schema.name[:120]}: {e}") from None
        _type_cache.put(key, t, 1 + t.size)
    return t


def codec_for_schema(schema: Schema, channel: Channel | None = None) -> UlogCodec | LoggedStringCodec:
    if schema.name == LOGGED_STRING_SCHEMA:
        return LoggedStringCodec()
    return UlogCodec(type_for_schema(schema))
