"""net/ros2/typedesc: the GetTypeDescription request and reply, the definition from a reply.

The reply is one a real rclpy (Jazzy, Fast DDS) node sent for test_msgs/msg/Arrays.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polybag.net.ros2 import Ros2GraphError
from polybag.net.ros2.names import hidden, type_service_node
from polybag.net.ros2.typedesc import decode_reply, definition_from_reply, encode_request

REPLY = (Path(__file__).parent / "data" / "arrays_type_description_reply.bin").read_bytes()
ARRAYS_HASH = "RIHS01_8a321b80dae8c44dfd1ce558eaf1b1cd5ebbe5950863ed675836535511a7f91a"


def test_request_layout() -> None:
    req = encode_request("a/msg/B", "RIHS01_x")
    assert req[:4] == b"\x00\x01\x00\x00"
    n = struct.unpack_from("<I", req, 4)[0]
    assert req[8 : 8 + n] == b"a/msg/B\x00"
    off = 8 + n + (-(4 + n) % 4)
    m = struct.unpack_from("<I", req, off)[0]
    assert req[off + 4 : off + 4 + m] == b"RIHS01_x\x00" and req[-1:] == b"\x01"


def test_decode_real_reply() -> None:
    r = decode_reply(REPLY)
    assert r.successful and r.failure_reason == ""
    assert r.type_name == "test_msgs/msg/Arrays"
    assert set(r.types) == {
        "test_msgs/msg/Arrays",
        "test_msgs/msg/BasicTypes",
        "test_msgs/msg/Constants",
        "test_msgs/msg/Defaults",
    }
    names = [f.name for f in r.types["test_msgs/msg/Arrays"]]
    assert names[0] == "bool_values" and "basic_types_values" in names
    assert {enc for _n, enc, _t in r.sources} == {"msg"}


def test_definition_from_sources_and_from_fields_have_the_announced_hash() -> None:
    r = decode_reply(REPLY)
    text = definition_from_reply(r, "test_msgs/msg/Arrays", ARRAYS_HASH)
    assert "MSG: test_msgs/msg/BasicTypes" in text and "int32 INT32_CONST=-30000" in text
    r.sources = []  # (a node that sends no sources: the fields alone)
    text2 = definition_from_reply(r, "test_msgs/msg/Arrays", ARRAYS_HASH)
    assert "bool[3] bool_values" in text2 and "MSG: test_msgs/msg/Defaults" in text2

    with pytest.raises(Ros2GraphError, match="not the announced"):
        definition_from_reply(r, "test_msgs/msg/Arrays", "RIHS01_" + "0" * 64)
    with pytest.raises(Ros2GraphError, match="not test_msgs/msg/Nested"):
        definition_from_reply(r, "test_msgs/msg/Nested", "")


def test_refusal_and_truncation_are_graph_errors() -> None:
    refused = (
        b"\x00\x01\x00\x00\x00\x00\x00\x00" + struct.pack("<I", 5) + b"nope\x00" + b"\x00" * 3 + b"\x00" * 20
    )
    r = decode_reply(refused)
    assert not r.successful and r.failure_reason == "nope"
    with pytest.raises(Ros2GraphError, match="refused: nope"):
        definition_from_reply(r, "a/msg/B")
    for cut in (0, 3, 10, 100, len(REPLY) // 2, len(REPLY) - 1):
        with pytest.raises(Ros2GraphError):
            decode_reply(REPLY[:cut])


def test_huge_declared_count_is_refused_without_allocating() -> None:
    # the first field count (after "test_msgs/msg/Arrays") claims 2**31 fields
    i = REPLY.index(b"test_msgs/msg/Arrays\x00") + 21
    i += -(i - 4) % 4
    bad = REPLY[:i] + struct.pack("<I", 2**31) + REPLY[i + 4 :]
    with pytest.raises(Ros2GraphError, match="does not fit"):
        decode_reply(bad)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, len(REPLY) - 1), st.integers(0, 255))
def test_any_corrupted_byte_decodes_or_is_a_graph_error(pos: int, value: int) -> None:
    bad = REPLY[:pos] + bytes([value]) + REPLY[pos + 1 :]
    try:
        r = decode_reply(bad)
        definition_from_reply(r, "test_msgs/msg/Arrays", ARRAYS_HASH)
    except Ros2GraphError:
        pass


def test_names() -> None:
    assert hidden("/_hidden") and hidden("/vis/_priv/x") and hidden("/fib/_action/status")
    assert not hidden("/chatter") and not hidden("/a_b/c_")
    t = "type_description_interfaces::srv::dds_::GetTypeDescription_Response_"
    assert type_service_node("rr/ns1/talker/get_type_descriptionReply", t) == "/ns1/talker"
    assert type_service_node("rr/talker/get_parametersReply", t) is None
    assert type_service_node("rt/talker/get_type_descriptionReply", t) is None
    assert type_service_node("rr/talker/get_type_descriptionReply", "x::y") is None
