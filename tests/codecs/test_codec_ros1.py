"""ROS 1 codec: md5sums, decoding against rosbags and rosbag-standalone, byte-exact round trips."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest

from _codec_helpers import norm_genpy, norm_rosbags, same
from polybag.codecs.msg_parser import parse_full
from polybag.codecs.ros1 import (
    Time,
    bundled,
    codec_for_schema,
    codec_for_type,
    compute_md5,
    definition_for,
    lookup_md5,
)
from polybag.errors import DecodeError
from polybag.model import Channel, Schema

rosbag1 = pytest.importorskip("rosbags.rosbag1")
typesys = pytest.importorskip("rosbags.typesys")

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpora" / "rosbag"
BAGS = sorted(
    p
    for p in CORPUS.rglob("*.bag")
    if p.stat().st_size > 100  # empty-file.bag and the inconsistent dummy.bag hold no connections
)


def _bag_id(p: Path) -> str:
    return f"{p.parent.name}/{p.name}"


@functools.cache
def _connections(path: Path) -> list:
    r = rosbag1.Reader(path)
    r.open()
    try:
        out = []
        for c in r.connections:
            msgs = [bytes(raw) for cc, _t, raw in r.messages(connections=[c])]
            out.append((c, msgs))
        return out
    finally:
        r.close()


def _rosbags_store(msgtype: str, msgdef: str) -> object:
    store = typesys.get_typestore(typesys.Stores.EMPTY)
    store.register(typesys.get_types_from_msg(msgdef, msgtype))
    return store


@pytest.mark.parametrize("bag", BAGS, ids=_bag_id)
def test_md5_decode_roundtrip_against_rosbags(bag: Path) -> None:
    conns = _connections(bag)
    for c, msgs in conns:
        text = c.msgdef.data
        assert compute_md5(c.msgtype, text) == c.digest, c.msgtype
        codec = codec_for_type(c.msgtype, text)
        assert codec.md5sum == c.digest
        store = _rosbags_store(c.msgtype, text)
        # rosbags reads "uint8 a = 1" (spaces around '=') as a field, not a constant; for
        # such definitions only rosbag-standalone (below) is the reference
        rosbags_ok = not any(" = " in line for line in text.splitlines())
        for raw in msgs:
            d = codec.to_dict(raw)
            if rosbags_ok:
                theirs = norm_rosbags(store.deserialize_ros1(raw, c.msgtype), ros1=True, store=store)
                same(d, theirs)
                again = store.serialize_ros1(store.deserialize_ros1(raw, c.msgtype), c.msgtype)
                assert bytes(again) == raw
            obj = codec.decode(raw)
            same(obj.to_dict(), d)
            assert codec.encode(obj) == raw
            assert codec.encode(d) == raw


@pytest.mark.parametrize("bag", [b for b in BAGS if b.stat().st_size < 1_000_000], ids=_bag_id)
def test_decode_against_rosbag_standalone(bag: Path) -> None:
    rosbag = pytest.importorskip("rosbag")
    b = rosbag.Bag(str(bag))
    try:
        n = 0
        for _topic, (datatype, data, md5sum, _pos, pytype), _t in b.read_messages(raw=True):
            codec = codec_for_type(datatype, pytype._full_text)
            assert codec.md5sum == md5sum == pytype._md5sum
            genpy_msg = pytype()
            genpy_msg.deserialize(data)
            same(codec.to_dict(data), norm_genpy(genpy_msg))
            n += 1
        assert n == b.get_message_count()
    finally:
        b.close()


def test_md5_known_values() -> None:
    # documented md5sums of common types (ROS wiki / every bag ever recorded)
    assert bundled().md5("std_msgs/String") == "992ce8a1687cec8c8bd883ec73ca41d1"
    assert bundled().md5("sensor_msgs/Imu") == "6a62c6daae103f4ff57a132d6f95cec2"
    assert bundled().md5("tf2_msgs/TFMessage") == "94810edda583a504dfda3829e70d7eec"
    assert bundled().md5("sensor_msgs/PointCloud2") == "1158d486dd51d683ce2f1be655c3c181"
    assert lookup_md5("6a62c6daae103f4ff57a132d6f95cec2") == "sensor_msgs/Imu"
    assert compute_md5("sensor_msgs/Imu", definition_for("sensor_msgs/Imu")) == (
        "6a62c6daae103f4ff57a132d6f95cec2"
    )


def test_bundled_md5_agree_with_rosbags() -> None:
    store = typesys.get_typestore(typesys.Stores.ROS1_NOETIC)
    ts = bundled()
    checked = 0
    for name in ts.types:
        full = name.replace("/", "/msg/", 1)
        if full not in store.fielddefs:
            continue
        assert ts.md5(name) == store.generate_msgdef(full)[1], name
        checked += 1
    assert checked > 60


def test_bundled_used_when_schema_is_empty() -> None:
    # bag V1.1 style: no definition text, only type and md5sum
    ch = Channel(1, "/imu", "ros1", None, {"type": "sensor_msgs/Imu", "md5sum": "6a62c6daae103f4ff57a132d6f95cec2"})
    codec = codec_for_schema(Schema(0, "sensor_msgs/Imu", "ros1msg", b""), ch)
    obj = codec.message_class()
    ref = codec_for_type("sensor_msgs/Imu", definition_for("sensor_msgs/Imu"))
    raw = bytes(4 + 8 + 4) + bytes(8 * (4 + 9 + 3 + 9 + 3 + 9))
    o = ref.decode(raw)
    assert codec.encode(o) == raw
    assert obj.__msgtype__ == "sensor_msgs/Imu"


def test_constants_and_comments() -> None:
    text = (
        "# a comment\n\nuint8 A = 1 # trailing\nstring S = value # kept verbatim\n"
        "int32 x  # the x\nHeader header\nfloat64[3] v\nchar c\nbyte b\n"
        + "=" * 80
        + "\nMSG: std_msgs/Header\nuint32 seq\ntime stamp\nstring frame_id\n"
    )
    ts = parse_full("pkg/T", text)
    d = ts.get("pkg/T")
    assert [(c.name, c.value) for c in d.constants] == [("A", 1), ("S", "value # kept verbatim")]
    assert [f.name for f in d.fields] == ["x", "header", "v", "c", "b"]
    codec = codec_for_type("pkg/T", text)
    cls = codec.message_class
    assert cls.A == 1 and cls.S == "value # kept verbatim"
    o = cls(7, codec.compiler.cls("std_msgs/Header")(3, Time(1, 2), "map"), np.array([1.0, 2, 3]), 65, -3)
    raw = codec.encode(o)
    back = codec.decode(raw)
    assert back == o
    assert codec.to_dict(raw) == {
        "x": 7,
        "header": {"seq": 3, "stamp": {"sec": 1, "nsec": 2}, "frame_id": "map"},
        "v": [1.0, 2.0, 3.0],
        "c": 65,
        "b": -3,
    }
    np.testing.assert_array_equal(codec.to_dict(raw, numpy=True)["v"], np.array([1.0, 2.0, 3.0]))


def test_package_relative_and_uint8_arrays() -> None:
    text = "Inner[] items\nuint8[] blob\nchar[2] two\n" + "=" * 80 + "\nMSG: mypkg/Inner\nstring s\n"
    codec = codec_for_type("mypkg/Outer", text)
    d = {"items": [{"s": "a"}, {"s": "bé"}], "blob": b"\x00\xff", "two": b"xy"}
    raw = codec.encode(d)
    assert codec.to_dict(raw) == d
    o = codec.decode(raw)
    assert o.blob == b"\x00\xff" and o.items[1].s == "bé"


def test_decode_error_names_field_and_offset() -> None:
    codec = codec_for_type("sensor_msgs/Imu", definition_for("sensor_msgs/Imu"))
    raw = codec.encode(codec.message_class(codec.compiler.cls("std_msgs/Header")(1, Time(2, 3), "imu")))
    assert len(raw) > 40
    with pytest.raises(DecodeError) as ei:
        codec.decode(raw[:30], topic="/imu")
    e = ei.value
    assert e.topic == "/imu" and e.type_name == "sensor_msgs/Imu"
    assert e.field is not None and e.field.startswith("orientation")
    assert e.offset is not None and e.offset <= 30
    with pytest.raises(DecodeError, match="left over"):
        codec.decode(raw + b"\0")
    # lying string length
    bad = raw[:12] + (0xFFFFFFF0).to_bytes(4, "little") + raw[16:]
    with pytest.raises(DecodeError) as ei:
        codec.decode(bad)
    assert ei.value.field == "header.frame_id"


def test_user_msg_folder(tmp_path: Path) -> None:
    from polybag.codecs.ros1 import add_msg_folder

    folder = tmp_path / "my_robot_msgs" / "msg"
    folder.mkdir(parents=True)
    (folder / "Wheel.msg").write_text("# a wheel\nfloat32 speed\nstring name\n")
    (folder / "Wheels.msg").write_text("Header header\nWheel[4] wheels\n")
    added = add_msg_folder(tmp_path)
    assert set(added) == {"my_robot_msgs/Wheel", "my_robot_msgs/Wheels"}
    text = definition_for("my_robot_msgs/Wheels")
    md5 = compute_md5("my_robot_msgs/Wheels", text)
    assert lookup_md5(md5) == "my_robot_msgs/Wheels"
    # a V1.1-style channel: no text, only type and md5sum
    codec = codec_for_type("my_robot_msgs/Wheels", "", md5)
    d = codec.to_dict(codec.encode({"wheels": [{"speed": 1.5, "name": f"w{i}"} for i in range(4)]}))
    assert [w["name"] for w in d["wheels"]] == ["w0", "w1", "w2", "w3"]
    # no text and an md5sum no known type has: read as the file says, a message without
    # fields; a payload with bytes says the definition is missing (issue 27)
    unknown = codec_for_type("my_robot_msgs/Unknown", "", "0" * 32)
    assert unknown.to_dict(b"") == {}
    with pytest.raises(DecodeError, match="no definition"):
        unknown.to_dict(b"\x01")


def test_memoryview_and_zero_size_sequences() -> None:
    codec = codec_for_type("pkg/E", "std_msgs/Empty[] items\n")
    raw = codec.encode({"items": [{}, {}, {}]})
    assert raw == (3).to_bytes(4, "little")
    assert len(codec.decode(memoryview(bytearray(raw))).items) == 3
    with pytest.raises(DecodeError):
        codec.decode((0xFFFFFFFF).to_bytes(4, "little"))


def test_schemaless_ros1_channel_uses_bundled_types() -> None:
    from polybag.codecs import codec_for

    ch = Channel(7, "/s", "ros1", None, {"type": "std_msgs/String", "md5sum": "992ce8a1687cec8c8bd883ec73ca41d1"})
    codec = codec_for(ch)
    assert codec.to_dict(b"\x02\x00\x00\x00hi") == {"data": "hi"}


def test_time_helpers() -> None:
    from polybag.codecs.ros1 import Duration

    assert Time(3, 5).to_nsec() == 3_000_000_005 and Time(3, 5).to_sec() == 3.000000005
    assert Duration(-1, 5).to_nsec() == -999_999_995
    codec = codec_for_type("std_msgs/Header", definition_for("std_msgs/Header"))
    h = codec.decode(codec.encode({"seq": 1, "stamp": {"sec": 7, "nsec": 9}, "frame_id": "f"}))
    assert h.stamp.to_nsec() == 7_000_000_009


@pytest.mark.parametrize("bag", BAGS, ids=_bag_id)
def test_truncated_and_padded_corpus_payloads(bag: Path) -> None:
    """Every cut of a real payload, and extra bytes after it, give DecodeError only."""
    for c, msgs in _connections(bag):
        if not msgs:
            continue
        codec = codec_for_type(c.msgtype, c.msgdef.data)
        raw = msgs[0]
        cuts = range(len(raw)) if len(raw) <= 512 else np.linspace(0, len(raw) - 1, 64).astype(int)
        for cut in cuts:
            with pytest.raises(DecodeError) as ei:
                codec.decode(raw[: int(cut)], topic=c.topic)
            assert ei.value.topic == c.topic and ei.value.offset is not None
        with pytest.raises(DecodeError, match="left over"):
            codec.to_dict(raw + b"\x00")
