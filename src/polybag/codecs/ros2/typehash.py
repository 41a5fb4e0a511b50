"""The ROS 2 type hash (REP 2011, ``RIHS01_<sha256>``) of a message type.

The hash is SHA-256 over a JSON text of the type's description: its name and fields (name,
type id, capacity, string capacity, nested type name; no constants, no default values) and
those of every type it uses, sorted by name.  rosbag2 (Iron and later) stores it per topic as
``type_description_hash``; ``ros2 bag`` and the middleware compare it to decide whether two
sides speak the same type.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from polybag.codecs.definition_limits import MsgDefError
from polybag.codecs.definition_model import FieldType, canonical
from polybag.codecs.ros2.definitions import full_definition, ros2_typeset
from polybag.codecs.ros2.store import full_name
from polybag.codecs.type_set import TypeSet
from polybag.errors import UnsupportedError

__all__ = ["type_hash", "type_hash_of"]

# field type ids of type_description_interfaces/msg/FieldType
_IDS = {  # (13 is FIELD_TYPE_CHAR, which no .msg type produces)
    "int8": 2,
    "uint8": 3,
    "int16": 4,
    "uint16": 5,
    "int32": 6,
    "uint32": 7,
    "int64": 8,
    "uint64": 9,
    "float32": 10,
    "float64": 11,
    "char": 3,  # a .msg char is a uint8 to rosidl (recorded bags' hashes say so; rosbags uses 13)
    "wchar": 14,
    "bool": 15,
    "byte": 16,
    "string": 17,
    "wstring": 18,
}
_BOUNDED = {"string": 21, "wstring": 22}
_ARRAY, _BOUNDED_SEQ, _SEQ = 48, 96, 144
_PLACEHOLDER = {"name": "structure_needs_at_least_one_member", "type": {
    "type_id": 3, "capacity": 0, "string_capacity": 0, "nested_type_name": ""}}  # fmt: skip


def _field_type(t: FieldType) -> dict[str, Any]:
    word = t.raw.split("[")[0].split("<=")[0].strip() if t.raw else ""
    nested = ""
    string_capacity = 0
    if t.is_nested:
        tid = 1
        nested = full_name(t.base)
    elif t.base in _BOUNDED and t.string_bound is not None:
        tid = _BOUNDED[t.base]
        string_capacity = t.string_bound
    else:
        tid = _IDS[word if word in ("byte", "char", "wchar") else t.base]
    capacity = 0
    if t.array is not None and t.array >= 0:
        tid += _ARRAY
        capacity = t.array
    elif t.array is not None and t.bound is not None:
        tid += _BOUNDED_SEQ
        capacity = t.bound
    elif t.array is not None:
        tid += _SEQ
    return {
        "type_id": tid,
        "capacity": capacity,
        "string_capacity": string_capacity,
        "nested_type_name": nested,
    }


def _description(ts: TypeSet, name: str) -> dict[str, Any]:
    d = ts.get(name)
    fields = [{"name": f.name, "type": _field_type(f.type)} for f in d.fields] or [_PLACEHOLDER]
    return {"type_name": full_name(name), "fields": fields}


def type_hash(ts: TypeSet, name: str) -> str:
    """``RIHS01_...`` of type ``name`` (and the types it uses) from ``ts``."""
    key = canonical(name)
    ts.check(key)
    refs = sorted((_description(ts, dep) for dep in ts.dependencies(key)), key=lambda x: x["type_name"])
    text = json.dumps({"type_description": _description(ts, key), "referenced_type_descriptions": refs})
    return "RIHS01_" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def type_hash_of(name: str, encoding: str, data: bytes | memoryview) -> str:
    """The REP 2011 ``RIHS01_...`` hash of type ``name`` as its ``ros2msg``/``ros2idl``
    definition ``data`` describes it (empty: the known type's), or ``""`` when the
    definition cannot be read."""
    encoding, data = full_definition(name, encoding, data)
    if encoding not in ("ros2msg", "ros2idl") or not data.strip():
        return ""
    try:
        ts = ros2_typeset(name, data, encoding)
        if ts.lookup(name) is None:
            return ""
        return type_hash(ts, name)
    except (MsgDefError, KeyError, UnsupportedError):
        return ""
