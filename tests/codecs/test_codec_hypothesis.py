"""Random definitions and values: round trips, byte-for-byte agreement with rosbags, malformed input."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _codec_helpers import norm_rosbags, same
from polybag.codecs.cdr import codec_for_type as cdr_codec
from polybag.codecs.ros1 import codec_for_type as ros1_codec
from polybag.errors import DecodeError

typesys = pytest.importorskip("rosbags.typesys")

INTS = {
    "int8": (-(2**7), 2**7 - 1),
    "uint8": (0, 2**8 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint64": (0, 2**64 - 1),
}
PRIMS = [*INTS, "float32", "float64", "bool", "string"]
ROS1_EXTRA = ["time", "duration", "char", "byte"]
SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


@st.composite
def definitions(draw: Any, ros1: bool) -> tuple[str, dict[str, list[tuple[str, str, Any]]]]:
    """(full definition text, {type: [(field name, base type, array)]}) with up to 2 sub-types."""
    n_sub = draw(st.integers(0, 2))
    types: dict[str, list[tuple[str, str, Any]]] = {}
    names = [f"Sub{i}" for i in range(n_sub)]
    prims = PRIMS + (ROS1_EXTRA if ros1 else [])
    for tname in [*reversed(names), "Main"]:
        avail = prims + [n for n in names if n in types]
        nf = draw(st.integers(1, 5))
        fields = []
        for i in range(nf):
            base = draw(st.sampled_from(avail))
            # ROS 2 (IDL) has no zero-length fixed arrays
            array = draw(st.sampled_from([None, None, -1, draw(st.integers(0 if ros1 else 1, 4))]))
            fields.append((f"f{i}", base, array))
        types[tname] = fields
    blocks = []
    for tname in ["Main", *names]:
        lines = []
        for fname, base, array in types[tname]:
            suffix = "" if array is None else ("[]" if array == -1 else f"[{array}]")
            lines.append(f"{base}{suffix} {fname}")
        body = "\n".join(lines) + "\n"
        blocks.append(body if tname == "Main" else f"{'=' * 80}\nMSG: pkg/{tname}\n{body}")
    return "\n".join(blocks), types


def value_for(draw: Any, base: str, types: dict[str, Any], ros1: bool) -> Any:
    if base in INTS:
        lo, hi = INTS[base]
        return draw(st.integers(lo, hi))
    if base in ("char", "byte"):
        return draw(st.integers(0, 255) if base == "char" else st.integers(-128, 127))
    if base == "float32":
        return draw(st.floats(width=32, allow_nan=False))
    if base == "float64":
        return draw(st.floats(allow_nan=False))
    if base == "bool":
        return draw(st.booleans())
    if base == "string":
        return draw(st.text(max_size=8))
    if base in ("time", "duration"):
        # ROS 1 time is (uint32, uint32) and duration (int32, int32); rosbags reads both as
        # (int32 sec, uint32 nanosec), so stay in the range where the two agree
        lo, hi = (0, 2**31 - 1) if base == "time" else (-(2**31), 2**31 - 1)
        nlo = 0
        return {"sec": draw(st.integers(lo, hi)), "nsec": draw(st.integers(nlo, hi))}
    return message_value(draw, types[base], types, ros1)


def message_value(draw: Any, fields: list[tuple[str, str, Any]], types: dict[str, Any], ros1: bool) -> dict:
    out: dict[str, Any] = {}
    for fname, base, array in fields:
        if array is None:
            out[fname] = value_for(draw, base, types, ros1)
            continue
        n = array if array >= 0 else draw(st.integers(0, 3))
        items = [value_for(draw, base, types, ros1) for _ in range(n)]
        if base in ("uint8", "char") or (base == "byte" and not ros1):
            items = bytes(x & 0xFF for x in items)
        out[fname] = items
    return out


def _store(text: str, name: str) -> Any:
    store = typesys.get_typestore(typesys.Stores.EMPTY)
    store.register(typesys.get_types_from_msg(text, name))
    return store


@SETTINGS
@given(st.data())
def test_ros1_random_roundtrip_and_rosbags(data: Any) -> None:
    text, types = data.draw(definitions(ros1=True))
    value = message_value(data.draw, types["Main"], types, True)
    codec = ros1_codec("pkg/Main", text)
    raw = codec.encode(value)
    same(codec.to_dict(raw), value)
    assert codec.encode(codec.decode(raw)) == raw
    store = _store(text, "pkg/msg/Main")
    theirs = store.deserialize_ros1(raw, "pkg/msg/Main")
    same(codec.to_dict(raw), norm_rosbags(theirs, ros1=True, store=store))
    assert bytes(store.serialize_ros1(theirs, "pkg/msg/Main")) == raw
    _malformed(codec, raw, data)


@SETTINGS
@given(st.data())
def test_cdr_random_roundtrip_and_rosbags(data: Any) -> None:
    text, types = data.draw(definitions(ros1=False))
    value = message_value(data.draw, types["Main"], types, False)
    codec = cdr_codec("pkg/msg/Main", text)
    little = data.draw(st.booleans())
    raw = codec.encode(value, endian="<" if little else ">")
    same(codec.to_dict(raw), value)
    assert codec.encode(codec.decode(raw), endian="<" if little else ">") == raw
    store = _store(text, "pkg/msg/Main")
    theirs = store.deserialize_cdr(raw, "pkg/msg/Main")
    assert bytes(store.serialize_cdr(theirs, "pkg/msg/Main", little_endian=little)) == raw
    _malformed(codec, raw, data)


def _malformed(codec: Any, raw: bytes, data: Any) -> None:
    """Cuts, extra bytes, flipped bytes and lying lengths give DecodeError or a value, nothing else."""
    cut = data.draw(st.integers(0, max(len(raw) - 1, 0)))
    if cut < len(raw):
        _only_decode_error(codec, raw[:cut])
    _only_decode_error(codec, raw + data.draw(st.binary(min_size=4, max_size=8)), must_fail=True)
    if raw:
        buf = bytearray(raw)
        i = data.draw(st.integers(0, len(buf) - 1))
        buf[i] ^= data.draw(st.integers(1, 255))
        _only_decode_error(codec, bytes(buf))
        # a huge length at every 4-byte position that could hold one
        for pos in range(0, min(len(buf) - 3, 64), 4):
            lie = bytearray(raw)
            lie[pos : pos + 4] = struct.pack("<I", 0xFFFFFFF0)
            _only_decode_error(codec, bytes(lie))


def _only_decode_error(codec: Any, payload: bytes, must_fail: bool = False) -> None:
    try:
        codec.decode(payload)
        codec.to_dict(payload)
    except DecodeError as e:
        assert e.type_name
        return
    assert not must_fail, "extra bytes were accepted"


@SETTINGS
@given(st.data())
def test_columns_agree_with_messages(data: Any) -> None:
    from _codec_helpers import _equal, _lookup
    from polybag.codecs.columns import payload_columns

    ros1 = data.draw(st.booleans())
    text, types = data.draw(definitions(ros1=ros1))
    n = data.draw(st.integers(1, 5))
    values = [message_value(data.draw, types["Main"], types, ros1) for _ in range(n)]
    if ros1:
        codec: Any = ros1_codec("pkg/Main", text)
        payloads = [codec.encode(v) for v in values]
    else:
        codec = cdr_codec("pkg/msg/Main", text)
        endian = data.draw(st.sampled_from("<>"))
        payloads = [codec.encode(v, endian=endian) for v in values]
    cols = payload_columns(codec, payloads)
    for i, p in enumerate(payloads):
        d = codec.to_dict(p)
        for name, col in cols.items():
            assert len(col) == n
            assert _equal(col[i], _lookup(d, name)), (name, i)


_IDL_TYPES = {"float32": "float", "float64": "double", "bool": "boolean"}


def _idl_text(types: dict[str, list[tuple[str, str, Any]]]) -> str:
    structs = []
    for tname, fields in types.items():  # dependencies come first (see definitions())
        members = []
        for fname, base, array in fields:
            t = f"pkg::msg::{base}" if base.startswith("Sub") else _IDL_TYPES.get(base, base)
            if array is None:
                members.append(f"{t} {fname};")
            elif array < 0:
                members.append(f"sequence<{t}> {fname};")
            else:
                members.append(f"{t} {fname}[{array}];")
        structs.append(f"    struct {tname} {{\n      " + "\n      ".join(members) + "\n    };")
    return "module pkg {\n  module msg {\n" + "\n".join(structs) + "\n  };\n};\n"


@SETTINGS
@given(st.data())
def test_idl_schema_serializes_like_msg_schema(data: Any) -> None:
    text, types = data.draw(definitions(ros1=False))
    value = message_value(data.draw, types["Main"], types, False)
    msg = cdr_codec("pkg/msg/Main", text)
    idl = cdr_codec("pkg/msg/Main", _idl_text(types), "ros2idl")
    raw = msg.encode(value)
    assert idl.encode(value) == raw
    same(idl.to_dict(raw), value)
