"""Hostile CDR payloads: truncated, lying lengths, absurd sequence sizes, random bytes.

Every failure is a :class:`polybag.errors.DecodeError`; nothing allocates by a length the
payload declares (peak memory stays far below what the lengths claim).
"""

from __future__ import annotations

import struct
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polybag.codecs.cdr import CdrCodec, codec_for_type
from polybag.codecs.ros2 import bundled
from polybag.errors import DecodeError

TYPES = [
    "sensor_msgs/msg/Imu",
    "sensor_msgs/msg/PointCloud2",
    "diagnostic_msgs/msg/DiagnosticArray",
    "visualization_msgs/msg/MarkerArray",
    "nav_msgs/msg/Path",
    "rcl_interfaces/msg/ParameterEvent",
]
MIXED = "string<=4 s\nint64[<=3] q\nwstring w\nfloat32[2] f\nstring[] names\nuint8[] blob\n"


def _codec(name: str) -> CdrCodec:
    return CdrCodec(bundled(), name)


def _sample(name: str) -> bytes:
    codec = _codec(name)
    if name == "sensor_msgs/msg/PointCloud2":
        value = {
            "header": {"frame_id": "map"},
            "fields": [{"name": "x", "datatype": 7, "count": 1}],
            "data": b"abcd" * 4,
        }
    elif name == "diagnostic_msgs/msg/DiagnosticArray":
        value = {"status": [{"name": "n", "values": [{"key": "k", "value": "v"}]}, {"message": "m"}]}
    elif name == "visualization_msgs/msg/MarkerArray":
        value = {"markers": [{"ns": "a", "points": [{"x": 1.0}], "text": "t"}]}
    elif name == "nav_msgs/msg/Path":
        value = {"header": {"frame_id": "odom"}, "poses": [{"pose": {"position": {"x": 2.0}}}] * 2}
    elif name == "rcl_interfaces/msg/ParameterEvent":
        value = {"node": "/n", "new_parameters": [{"name": "p", "value": {"type": 4, "string_value": "s"}}]}
    else:
        value = {"header": {"frame_id": "imu"}, "orientation_covariance": [1.0] * 9}
    return codec.encode(value)


def _decodes_or_fails_cleanly(codec: CdrCodec, raw: bytes) -> None:
    for call in (codec.decode, codec.to_dict):
        try:
            call(raw)
        except DecodeError:
            pass


@pytest.mark.parametrize("name", TYPES)
def test_every_truncation_is_a_decode_error(name: str) -> None:
    raw = _sample(name)
    codec = _codec(name)
    for n in range(len(raw)):
        try:
            codec.to_dict(raw[:n])
        except DecodeError as e:
            assert e.type_name == name
        else:  # only trailing padding may go missing
            assert len(raw) - n < 4 and codec.to_dict(raw[:n]) == codec.to_dict(raw)


@pytest.mark.parametrize("name", TYPES)
@pytest.mark.parametrize("lie", [0xFFFFFFFF, 0x7FFFFFFF, 0x10000, 3])
def test_lying_lengths(name: str, lie: int) -> None:
    """Every 4-byte word replaced by a length that lies: a value or a DecodeError, quickly."""
    raw = bytearray(_sample(name))
    codec = _codec(name)
    for pos in range(4, len(raw) - 3, 4):
        bad = bytearray(raw)
        struct.pack_into("<I", bad, pos, lie)
        _decodes_or_fails_cleanly(codec, bytes(bad))


@pytest.mark.parametrize(
    "text",
    ["float64[] big", "string[] names", "std_msgs/Header[] headers", "uint8[] blob", "wstring w", "string s"],
)
def test_absurd_sizes_allocate_nothing(text: str) -> None:
    codec = codec_for_type("h/msg/Huge", text + "\n")
    raw = b"\x00\x01\x00\x00" + struct.pack("<I", 0xFFFFFFF0) + bytes(64)
    tracemalloc.start()
    try:
        with pytest.raises(DecodeError) as e:
            codec.to_dict(raw)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20
    assert e.value.field is not None


def test_bad_headers() -> None:
    codec = _codec("sensor_msgs/msg/Imu")
    good = _sample("sensor_msgs/msg/Imu")
    for raw in (
        b"",
        b"\x00",
        b"\x00\x01\x00",
        b"\x00\x02\x00\x00" + good[4:],
        b"\x01\x01\x00\x00" + good[4:],
    ):
        with pytest.raises(DecodeError):
            codec.decode(raw)
        with pytest.raises(DecodeError):
            codec.to_dict(raw)


def test_leftover_bytes_are_an_error() -> None:
    codec = _codec("sensor_msgs/msg/Imu")
    with pytest.raises(DecodeError, match="left over"):
        codec.decode(_sample("sensor_msgs/msg/Imu") + bytes(8))


@settings(max_examples=300, deadline=None)
@given(body=st.binary(max_size=200), big=st.booleans(), which=st.sampled_from([*TYPES, "mixed"]))
def test_random_payloads_only_raise_decode_errors(body: bytes, big: bool, which: str) -> None:
    codec = codec_for_type("h/msg/Mixed", MIXED) if which == "mixed" else _codec(which)
    _decodes_or_fails_cleanly(codec, (b"\x00\x00\x00\x00" if big else b"\x00\x01\x00\x00") + body)


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_random_mutations_of_real_payloads(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(TYPES))
    raw = bytearray(_sample(name))
    for _ in range(data.draw(st.integers(1, 6))):
        pos = data.draw(st.integers(0, len(raw) - 1))
        raw[pos] = data.draw(st.integers(0, 255))
    _decodes_or_fails_cleanly(_codec(name), bytes(raw))


@settings(max_examples=300, deadline=None)
@given(
    typ=st.sampled_from(
        ["int32", "uint8[]", "float64[3]", "string", "string<=3", "bool", "string[]", "byte"]
    ),
    default=st.text(max_size=30),
)
def test_any_default_value_text_parses_or_is_a_definition_error(typ: str, default: str) -> None:
    """Whatever follows a field name (a default value, a comment, junk) gives a type or a
    MsgDefError; a default that cannot be read is left out, never changing the layout."""
    from polybag.codecs.definition_limits import MsgDefError
    from polybag.codecs.msg_parser import parse_msg

    line = f"{typ} f {default}".replace("\r", " ").split("\n")[0]
    try:
        d = parse_msg("h/msg/D", line + "\nuint8 after\n", "ros2")
    except MsgDefError:
        return
    assert [f.name for f in d.fields][-1] == "after"
