"""The ULog -> ROS 1 mapping used by convert: definitions, md5sums and repacked payloads.

Checked against an independent ROS 1 implementation (rosbags' type system and deserializer)
and against struct-packed ULog payloads built here.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polybag.bridges.ulog_ros1 import (
    make_repacker,
    parse_formats,
    ros1_definition,
    ros1_md5,
    ulog_channel_to_ros1,
)
from polybag.errors import FormatError
from polybag.model import Channel, Schema

rosbags_typesys = pytest.importorskip("rosbags.typesys")

ULOG_FORMATS = (
    "vehicle_thing:uint64_t timestamp;float[4] q;inner_t[2] ins;char[5] name;uint8_t[3] _padding0;\n"
    "inner_t:int16_t a;bool b;uint8_t[1] _padding0;\n"
)
STRUCT = {"int8_t": "b", "uint8_t": "B", "int16_t": "h", "uint16_t": "H", "int32_t": "i",
          "uint32_t": "I", "int64_t": "q", "uint64_t": "Q", "float": "f", "double": "d",
          "bool": "?", "char": "c"}  # fmt: skip


def _typestore(definition: str, type_name: str):  # type: ignore[no-untyped-def]
    ts = rosbags_typesys.get_typestore(rosbags_typesys.Stores.EMPTY)
    pkg, name = type_name.split("/")
    ts.register(rosbags_typesys.get_types_from_msg(definition, f"{pkg}/msg/{name}"))
    return ts, f"{pkg}/msg/{name}"


def test_definition_md5_and_payload_match_rosbags() -> None:
    ch = Channel(3, "vehicle_thing", "ulog", Schema(1, "vehicle_thing", "ulog", ULOG_FORMATS.encode()),
                 {"multi_id": "1"})  # fmt: skip
    topic, schema, meta, repack = ulog_channel_to_ros1(ch)
    assert topic == "/vehicle_thing_1"
    assert schema.name == "ulog_msgs/vehicle_thing" and schema.encoding == "ros1msg"
    text = schema.data.decode()
    assert "_padding" not in text
    ts, tname = _typestore(text, schema.name)
    _, md5 = ts.generate_msgdef(tname, ros_version=1)
    assert meta["md5sum"] == md5
    # a ULog payload: 8 + 16 + 2*(2+1+1) + 5 + 3 = 40 bytes
    inner = [struct.pack("<h?x", -5, True), struct.pack("<h?x", 7, False)]
    payload = struct.pack("<Q4f", 123456, 1.0, 2.0, 3.0, 4.0) + b"".join(inner) + b"hello" + b"\0\0\0"
    out = repack(payload)
    assert out is not None and len(out) == 8 + 16 + 2 * 3 + 5
    msg = ts.deserialize_ros1(bytes(out), tname)
    assert msg.timestamp == 123456
    assert list(msg.q) == [1.0, 2.0, 3.0, 4.0]
    assert [(i.a, i.b) for i in msg.ins] == [(-5, True), (7, False)]
    assert bytes(msg.name) == b"hello"
    # the trailing padding may be missing; a short payload is refused (None)
    assert repack(payload[:-3]) == out
    assert repack(payload[:20]) is None


def test_multi_id_zero_topic_and_errors() -> None:
    ch = Channel(1, "a", "ulog", Schema(1, "a", "ulog", b"a:uint64_t timestamp;b_t x;\n"), {"multi_id": "0"})
    with pytest.raises(FormatError):
        ulog_channel_to_ros1(ch)  # b_t undefined
    ch = Channel(
        1, "a", "ulog", Schema(1, "a", "ulog", b"a:uint64_t timestamp;int32_t x;\n"), {"multi_id": "0"}
    )
    topic, schema, _, repack = ulog_channel_to_ros1(ch)
    assert topic == "/a"
    data = struct.pack("<Qi", 5, -1)
    assert bytes(repack(data)) == data  # no padding: bytes pass through


_basic = st.sampled_from(sorted(STRUCT))


@st.composite
def _formats(draw):  # type: ignore[no-untyped-def]
    nested_fields = draw(
        st.lists(st.tuples(_basic, st.one_of(st.none(), st.integers(1, 3))), min_size=1, max_size=4)
    )
    fields = [("uint64_t", None, "timestamp")]
    n = draw(st.integers(0, 6))
    for i in range(n):
        kind = draw(st.integers(0, 3))
        if kind == 0:
            fields.append(("uint8_t", draw(st.integers(1, 7)), f"_padding{i}"))
        elif kind == 1:
            fields.append(("sub_t", draw(st.one_of(st.none(), st.integers(1, 2))), f"s{i}"))
        else:
            t, arr = draw(st.tuples(_basic, st.one_of(st.none(), st.integers(1, 4))))
            fields.append((t, arr, f"f{i}"))
    sub = ";".join(f"{t}{'' if a is None else f'[{a}]'} g{j}" for j, (t, a) in enumerate(nested_fields))
    main = ";".join(f"{t}{'' if a is None else f'[{a}]'} {name}" for t, a, name in fields)
    return f"top_t:{main};\nsub_t:{sub};\n"


@settings(max_examples=40, deadline=None)
@given(_formats(), st.randoms(use_true_random=False))
def test_random_formats_decode_like_struct(text: str, rnd) -> None:  # type: ignore[no-untyped-def]
    formats = parse_formats(text)
    definition = ros1_definition(formats, "top_t")
    ts, tname = _typestore(definition, "ulog_msgs/top_t")
    assert ros1_md5(formats, "top_t") == ts.generate_msgdef(tname, ros_version=1)[1]

    # pack random values field by field, remembering the expected non-padding ones
    expected: list[tuple[str, object]] = []

    def pack(type_name: str, prefix: str) -> bytes:
        out = b""
        for f in formats[type_name]:
            for k in range(f.array or 1):
                key = f"{prefix}{f.name}" + (f"[{k}]" if f.array is not None else "")
                if f.type in STRUCT:
                    code = STRUCT[f.type]
                    if code == "?":
                        v: object = bool(rnd.getrandbits(1))
                    elif code == "c":
                        v = bytes([rnd.randrange(32, 127)])
                    elif code in "fd":
                        v = float(np.float32(rnd.uniform(-1e3, 1e3)))
                    else:
                        size = struct.calcsize(code)
                        lo = -(1 << (8 * size - 1)) if code.islower() else 0
                        v = rnd.randrange(lo, lo + (1 << (8 * size)))
                    out += struct.pack("<" + code, v)
                    if not f.name.startswith("_padding"):
                        expected.append((key, v))
                else:
                    sub = pack(f.type, key + ".")
                    out += sub
        return out

    payload = pack("top_t", "")
    _, repack = make_repacker(formats, "top_t")
    msg = ts.deserialize_ros1(bytes(repack(payload)), tname)

    def get(obj: object, key: str) -> object:
        for part in key.split("."):
            name, _, idx = part.partition("[")
            obj = getattr(obj, name)
            if idx:
                obj = obj[int(idx[:-1])]
        return obj

    for key, v in expected:
        got = get(msg, key)
        if isinstance(v, bytes):
            assert int(got) == v[0], key  # type: ignore[call-overload]
        elif isinstance(v, float):
            assert float(got) == pytest.approx(v), key  # type: ignore[arg-type]
        else:
            assert got == v, key
