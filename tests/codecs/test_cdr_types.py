"""ROS 2 type definitions and CDR rules: bundled types for files without definitions,
``add_types``/``--types`` (.msg and .idl), the ros2msg text polybag writes (read by the
rosidl parser of mcap-ros2-support), bounds, wstrings, default values, alignment."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

import polybag
from polybag import codecs
from polybag.cli import main
from polybag.codecs.cdr import codec_for_type
from polybag.codecs.ros2 import bundled, definition_for, full_name, known_types
from polybag.errors import DecodeError, UnsupportedError
from polybag.model import Channel, Schema

mcap_ros2 = pytest.importorskip("mcap_ros2.decoder")


def _channel(name: str, encoding: str = "ros2msg", data: bytes = b"", topic: str = "/t") -> Channel:
    return Channel(1, topic, "cdr", Schema(1, name, encoding, data), {})


def test_bundled_packages_are_there() -> None:
    pkgs = {n.split("/")[0] for n in bundled().types}
    want = {
        "builtin_interfaces", "std_msgs", "geometry_msgs", "sensor_msgs", "nav_msgs", "tf2_msgs",
        "diagnostic_msgs", "visualization_msgs", "rcl_interfaces", "action_msgs", "shape_msgs",
        "trajectory_msgs", "stereo_msgs", "unique_identifier_msgs",
    }  # fmt: skip
    assert want <= pkgs


@pytest.mark.parametrize("name", sorted(full_name(n) for n in bundled().types))
def test_definition_text_reads_in_rosidl(name: str) -> None:
    """The ros2msg text polybag writes for a type is read by the rosidl parser (mcap-ros2-support),
    which decodes polybag's bytes to the same values."""
    text = definition_for(name)
    codec = codec_for_type(name, text)
    raw = codec.encode({})
    schema = type("S", (), {"name": name, "encoding": "ros2msg", "data": text.encode(), "id": 1})()
    if name.rsplit("/", 1)[-1][0].islower():
        pytest.skip("rosidl refuses lower-case type names")
    decoded = mcap_ros2.DecoderFactory().decoder_for("cdr", schema)(raw)
    assert decoded is not None
    assert codec.encode(codec.to_dict(raw)) == raw


def test_schema_without_definition_uses_bundled() -> None:
    imu = codec_for_type("sensor_msgs/msg/Imu", definition_for("sensor_msgs/msg/Imu"))
    raw = imu.encode(
        {"header": {"frame_id": "imu"}, "orientation": {"w": 1.0}, "linear_acceleration": {"z": 9.8}}
    )
    ch = _channel("sensor_msgs/msg/Imu")  # rosbag2 before Iron: a name, no text
    d = codecs.message_to_dict(ch, raw)
    assert d["header"]["frame_id"] == "imu"
    assert d["orientation"]["w"] == 1.0
    assert d["linear_acceleration"]["z"] == 9.8


def test_unknown_type_without_definition_is_named_then_added(tmp_path: Path) -> None:
    ch = _channel("my_pkg/msg/Thing", encoding="", topic="/thing")
    with pytest.raises(UnsupportedError, match="my_pkg/msg/Thing"):
        codecs.codec_for(ch)
    (tmp_path / "my_pkg" / "msg").mkdir(parents=True)
    (tmp_path / "my_pkg" / "msg" / "Thing.msg").write_text(
        '# a thing\nuint8 KIND_A=1\nstd_msgs/Header header\nuint8 kind 1\nfloat64[<=3] xyz\nstring<=8 label "x"\n'
    )
    added = codecs.add_types(tmp_path)
    assert added == ["my_pkg/msg/Thing"]
    codec = codecs.codec_for(ch)
    raw = codec.encode(
        {"header": {"stamp": {"sec": 3, "nanosec": 4}}, "kind": 2, "xyz": [1.0, 2.0], "label": "ok"}
    )
    d = codec.to_dict(raw)
    assert d["header"]["stamp"] == {"sec": 3, "nanosec": 4}
    assert (d["kind"], list(d["xyz"]), d["label"]) == (2, [1.0, 2.0], "ok")
    assert known_types().get("my_pkg/Thing").constants[0].value == 1


def test_add_types_reads_idl(tmp_path: Path) -> None:
    (tmp_path / "idl_pkg" / "msg").mkdir(parents=True)
    (tmp_path / "idl_pkg" / "msg" / "Pair.idl").write_text(
        "module idl_pkg { module msg {\n"
        "  module Pair_Constants { const int32 LIMIT = 7; };\n"
        "  struct Pair { @default (value=2) int32 a; sequence<double, 2> b; wstring<4> w; };\n"
        "}; };\n"
    )
    assert codecs.add_types(tmp_path) == ["idl_pkg/msg/Pair"]
    codec = codecs.codec_for(_channel("idl_pkg/msg/Pair", encoding=""))
    raw = codec.encode({"a": 5, "b": [0.5], "w": "hé"})
    assert codec.to_dict(raw) == {"a": 5, "b": [0.5], "w": "hé"}
    with pytest.raises(DecodeError, match="more than 2 elements"):
        codec.encode({"b": [1.0, 2.0, 3.0]})


def test_add_types_errors_name_the_folder(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedError, match="not a directory"):
        codecs.add_types(tmp_path / "missing")
    (tmp_path / "bad" / "msg").mkdir(parents=True)
    (tmp_path / "bad" / "msg" / "Oops.msg").write_text("int32[ broken\n")
    with pytest.raises(UnsupportedError, match="bad"):
        codecs.add_types(tmp_path)


def test_cli_types_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ws = tmp_path / "ws" / "cli_pkg" / "msg"
    ws.mkdir(parents=True)
    (ws / "Reading.msg").write_text("builtin_interfaces/Time stamp\nfloat32 value\n")
    codec = codec_for_type("cli_pkg/msg/Reading", "builtin_interfaces/Time stamp\nfloat32 value\n")
    log = tmp_path / "r.mcap"
    with polybag.Writer(log, profile="ros2") as w:
        sch = w.add_schema("cli_pkg/msg/Reading", "ros2msg", b"")  # no definition in the file
        ch = w.add_channel("/reading", "cdr", sch)
        w.write(ch, codec.encode({"stamp": {"sec": 1, "nanosec": 2}, "value": 1.5}), 10)
    assert main(["cat", str(log), "--json"]) != 0
    capsys.readouterr()
    assert main(["cat", str(log), "--json", "--types", str(tmp_path / "ws")]) == 0
    out = capsys.readouterr().out
    assert '"value":1.5' in out and '"nanosec":2' in out
    # before the command too (the top level's folders join the command's)
    assert main(["--types", str(tmp_path / "ws"), "cat", str(log), "--json", "--types", str(tmp_path)]) == 0
    assert '"value":1.5' in capsys.readouterr().out


# --- CDR rules ----------------------------------------------------------------------------
def test_bounded_strings_and_sequences_refused_both_ways() -> None:
    bounded = codec_for_type("b/msg/Bounded", "string<=3 s\nint16[<=2] q\nstring<=2[<=2] ss\n")
    free = codec_for_type("b/msg/Free", "string s\nint16[] q\nstring[] ss\n")
    assert bounded.to_dict(free.encode({"s": "abc", "q": [1, 2], "ss": ["ab"]})) == {
        "s": "abc", "q": [1, 2], "ss": ["ab"],
    }  # fmt: skip
    for value, field in (
        ({"s": "abcd"}, "s"),
        ({"q": [1, 2, 3]}, "q"),
        ({"ss": ["abc"]}, "ss"),
        ({"ss": ["a"] * 3}, "ss"),
    ):
        with pytest.raises(DecodeError) as e:
            bounded.encode(value)
        assert e.value.field == field
        with pytest.raises(DecodeError) as e2:
            bounded.decode(free.encode(value))
        assert e2.value.field == field


def test_wstring_as_fast_dds_writes_it() -> None:
    """rmw_fastrtps: a uint32 count of wchar_t, each a UTF-16 code unit in 4 bytes, no terminator
    (rosbags 0.11 cannot serialize wstrings at all)."""
    codec = codec_for_type("w/msg/W", "wstring w\nuint8 after\n")
    raw = codec.encode({"w": "a\U0001f600", "after": 7})
    units = [0x61, 0xD83D, 0xDE00]
    assert raw == b"\x00\x01\x00\x00" + struct.pack("<4I", 3, *units) + b"\x07"
    assert codec.to_dict(raw) == {"w": "a\U0001f600", "after": 7}
    big = codec.encode({"w": "a\U0001f600", "after": 7}, ">")
    assert big == b"\x00\x00\x00\x00" + struct.pack(">4I", 3, *units) + b"\x07"
    assert codec.to_dict(big)["w"] == "a\U0001f600"


def test_alignment_is_relative_to_the_body_and_8_for_64_bit() -> None:
    codec = codec_for_type("a/msg/A", "uint8 a\nfloat64 b\nuint8 c\nint64[] d\nstring s\nuint16 e\n")
    raw = codec.encode({"a": 1, "b": 2.0, "c": 3, "d": [4], "s": "x", "e": 5})
    body = raw[4:]
    assert body[0] == 1 and body[1:8] == bytes(7)  # b at 8
    assert struct.unpack_from("<d", body, 8)[0] == 2.0
    assert body[16] == 3
    assert struct.unpack_from("<I", body, 20)[0] == 1  # sequence length at 4-alignment
    assert struct.unpack_from("<q", body, 24)[0] == 4  # elements at 8-alignment
    assert struct.unpack_from("<I", body, 32)[0] == 2 and body[36:38] == b"x\x00"
    assert struct.unpack_from("<H", body, 38)[0] == 5
    assert len(body) == 40


def test_default_values_and_constants_parse() -> None:
    codec = codec_for_type(
        "d/msg/D",
        'int32 X=5\nstring NAME="a b" # comment\nint32 x 5\nstring s "hello # not a comment"\n'
        "float64[] v [1.0, 2.0]\nbool f true\n",
    )
    d = codec.typeset.get("d/D")
    assert [(c.name, c.value) for c in d.constants] == [("X", 5), ("NAME", "a b")]
    assert [f.name for f in d.fields] == ["x", "s", "v", "f"]
    assert codec.to_dict(codec.encode({"x": 1, "s": "q", "v": [3.0], "f": True})) == {
        "x": 1, "s": "q", "v": [3.0], "f": True,
    }  # fmt: skip
    # the defaults: what a new message and a dict without the key hold (no byte changes otherwise)
    assert [f.default for f in d.fields] == [5, "hello # not a comment", (1.0, 2.0), True]
    assert codec.to_dict(codec.encode({})) == {
        "x": 5,
        "s": "hello # not a comment",
        "v": [1.0, 2.0],
        "f": True,
    }
    obj = codec.message_class()
    assert (obj.x, obj.s, list(obj.v), obj.f) == (5, "hello # not a comment", [1.0, 2.0], True)
    # Jazzy's Quaternion is the identity by default; the text polybag writes keeps the defaults
    q = codec_for_type("geometry_msgs/msg/Quaternion", definition_for("geometry_msgs/msg/Quaternion"))
    assert q.to_dict(q.encode({})) == {"x": 0.0, "y": 0.0, "z": 0.0, "w": 1.0}
    assert q.message_class().w == 1.0
