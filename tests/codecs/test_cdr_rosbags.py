"""CDR against rosbags: every bundled ROS 2 type, hypothesis-generated values, both byte orders.

For each bundled type the same values are serialized by polybag and by rosbags'
``serialize_cdr`` (the bytes must be equal) and the peer's bytes decoded by polybag (the
values must be the ones generated).  The bundled field lists are compared with rosbags'
ROS 2 Jazzy type store, type by type.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from polybag.codecs.cdr import CdrCodec
from polybag.codecs.definition_model import PRIMITIVE_FORMATS, FieldType
from polybag.codecs.ros2 import bundled, full_name
from polybag.codecs.type_set import TypeSet

typesys = pytest.importorskip("rosbags.typesys")
interfaces = pytest.importorskip("rosbags.interfaces")

JAZZY = typesys.get_typestore(typesys.Stores.ROS2_JAZZY)
BUNDLED = bundled()
NAMES = sorted(full_name(n) for n in BUNDLED.types)
_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "uint8": (0, 2**8 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint64": (0, 2**64 - 1),
}
_CHARS = st.characters(exclude_categories=("Cs",), exclude_characters="\x00")


def _prim(base: str) -> st.SearchStrategy[Any]:
    if base == "bool":
        return st.booleans()
    if base == "float32":
        return st.floats(width=32, allow_nan=False)
    if base == "float64":
        return st.floats(allow_nan=False)
    lo, hi = _INT_RANGES[base]
    return st.integers(lo, hi)


def _value(ts: TypeSet, t: FieldType, depth: int) -> st.SearchStrategy[Any]:
    if t.array is not None:
        if t.array >= 0:
            size: dict[str, int] = {"min_size": t.array, "max_size": t.array}
        else:
            size = {"min_size": 0, "max_size": min(t.bound if t.bound is not None else 4, 4)}
        if t.base == "uint8" and not t.raw.startswith("byte"):
            return st.binary(**size)
        elem = FieldType(t.base, None, None, t.string_bound, t.raw.split("[")[0])
        return st.lists(_value(ts, elem, depth), **size)
    if t.base in PRIMITIVE_FORMATS:
        if t.raw.startswith("byte"):  # rosbags packs a ROS 2 byte (uint8) as a signed int8
            return st.integers(0, 127)
        return _prim(t.base)
    if t.base in ("string", "wstring"):
        return st.text(_CHARS, max_size=12 if t.string_bound is None else t.string_bound)
    return _message(ts, t.base, depth + 1)


@functools.cache
def _message(ts: TypeSet, name: str, depth: int = 0) -> st.SearchStrategy[dict[str, Any]]:
    d = ts.get(name)
    return st.fixed_dictionaries({f.name: _value(ts, f.type, depth) for f in d.fields})


def _to_rosbags(ts: TypeSet, name: str, v: dict[str, Any]) -> Any:
    """The generated dict as a rosbags message object (numpy arrays for numeric arrays)."""
    d = ts.get(name)
    kwargs = {}
    for f in d.fields:
        x = v[f.name]
        t = f.type
        if t.base in PRIMITIVE_FORMATS and t.array is not None:
            dtype = np.dtype(t.base if t.base != "bool" else "?")
            x = np.frombuffer(x, np.uint8) if isinstance(x, bytes) else np.array(x, dtype=dtype)
        elif t.is_nested:
            x = [_to_rosbags(ts, t.base, e) for e in x] if t.array is not None else _to_rosbags(ts, t.base, x)
        kwargs[f.name] = x
    return JAZZY.types[full_name(name)](**kwargs)


_PLACEHOLDER = "structure_needs_at_least_one_member"  # the byte an empty struct is written as


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        a = {k: x for k, x in a.items() if k != _PLACEHOLDER}
        b = {k: x for k, x in b.items() if k != _PLACEHOLDER}
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (bytes, bytearray)) or isinstance(b, (bytes, bytearray)):
        return bytes(a) == bytes(b)
    if isinstance(a, (list, tuple, np.ndarray)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return float(a) == float(b) or (math.isnan(a) and math.isnan(b))
    return bool(a == b)


@functools.cache
def _codec(name: str) -> CdrCodec:
    return CdrCodec(BUNDLED, name)


@pytest.mark.parametrize("name", NAMES)
def test_bundled_fields_are_jazzy(name: str) -> None:
    """Every bundled type has rosbags' Jazzy field list: names, types, array sizes and bounds."""
    Nodetype = interfaces.Nodetype
    consts, fields = JAZZY.fielddefs[name]
    d = BUNDLED.get(name)

    def desc(t: FieldType) -> tuple[Any, ...]:
        base = t.base
        if base in PRIMITIVE_FORMATS or base in ("string", "wstring"):
            raw = t.raw.split("[")[0].split("<=")[0] if t.raw else base
            inner: tuple[Any, ...] = (Nodetype.BASE, (raw, t.string_bound or 0))
        else:
            inner = (Nodetype.NAME, full_name(base))
        if t.array is None:
            return inner
        if t.array >= 0:
            return (Nodetype.ARRAY, (inner, t.array))
        return (Nodetype.SEQUENCE, (inner, t.bound or 0))

    ours = [(f.name, desc(f.type)) for f in d.fields]
    theirs = [(n, _plain(x)) for n, x in fields if n != _PLACEHOLDER]
    assert ours == theirs
    assert [(c.name, c.value) for c in d.constants] == [(n, v) for n, _, v in consts]


def _plain(desc: Any) -> Any:
    kind, rest = desc
    if kind in (interfaces.Nodetype.ARRAY, interfaces.Nodetype.SEQUENCE):
        return (kind, (_plain(rest[0]), rest[1]))
    return (kind, rest)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("little", [True, False], ids=["le", "be"])
@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(data=st.data())
def test_bundled_type_matches_rosbags(name: str, little: bool, data: st.DataObject) -> None:
    value = data.draw(_message(BUNDLED, name))
    codec = _codec(name)
    theirs = bytes(JAZZY.serialize_cdr(_to_rosbags(BUNDLED, name, value), name, little_endian=little))
    ours = codec.encode(value, "<" if little else ">")
    assert ours == theirs
    assert _same(value, codec.to_dict(theirs))
    back = JAZZY.deserialize_cdr(ours, name)
    assert _same(codec.to_dict(bytes(JAZZY.serialize_cdr(back, name, little_endian=little))), value)
