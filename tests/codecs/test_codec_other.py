"""JSON and protobuf codecs; decoding through polybag.open for every encoding."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import polybag
from polybag.codecs import codec_for
from polybag.codecs.jsoncodec import JsonCodec
from polybag.errors import DecodeError, UnsupportedError
from polybag.model import Channel, Schema

CORPORA = Path(__file__).resolve().parents[2].parent / "shared" / "corpora"


def test_json_mcap_sample() -> None:
    path = CORPORA / "mcap-samples" / "lichtblick" / "example.mcap"
    with polybag.open(str(path)) as r:
        msgs = list(r.messages())
        assert msgs
        for m in msgs:
            assert m.to_dict() == json.loads(bytes(m.data))
            obj = m.decode()
            assert obj == m.to_dict()
            for k, v in obj.items():
                assert getattr(obj, k) == v
        topic = msgs[0].channel.topic
        cols = r.topic_columns(topic)
        assert len(cols["log_time"]) == sum(1 for m in msgs if m.channel.topic == topic)


def test_json_errors_and_roundtrip() -> None:
    codec = JsonCodec("t")
    assert codec.to_dict(codec.encode({"a": [1, 2.5, "é"], "b": None})) == {"a": [1, 2.5, "é"], "b": None}
    with pytest.raises(DecodeError) as ei:
        codec.decode(b'{"a": ', topic="/j")
    assert ei.value.topic == "/j" and ei.value.offset == 6
    with pytest.raises(DecodeError):
        codec.decode(b"\xff\xfe")
    with pytest.raises(DecodeError):
        codec.decode(b"[" * 100_000)


def _descriptor_set() -> bytes:
    from google.protobuf import descriptor_pb2

    fds = descriptor_pb2.FileDescriptorSet()
    f = fds.file.add(name="demo.proto", package="demo", syntax="proto3")
    inner = f.message_type.add(name="Vec")
    for i, n in enumerate("xyz", 1):
        inner.field.add(name=n, number=i, type=descriptor_pb2.FieldDescriptorProto.TYPE_DOUBLE)
    msg = f.message_type.add(name="Reading")
    F = descriptor_pb2.FieldDescriptorProto
    msg.field.add(name="stamp", number=1, type=F.TYPE_INT64)
    msg.field.add(name="label", number=2, type=F.TYPE_STRING)
    msg.field.add(name="blob", number=3, type=F.TYPE_BYTES)
    msg.field.add(name="values", number=4, type=F.TYPE_DOUBLE, label=F.LABEL_REPEATED)
    msg.field.add(name="vec", number=5, type=F.TYPE_MESSAGE, type_name=".demo.Vec")
    return fds.SerializeToString()


def test_protobuf_codec(tmp_path: Path) -> None:
    pytest.importorskip("google.protobuf")
    schema = Schema(1, "demo.Reading", "protobuf", _descriptor_set())
    ch = Channel(1, "/pb", "protobuf", schema)
    codec = codec_for(ch)
    msg = codec.message_class(stamp=5, label="hi", blob=b"\x00\x01", values=[1.5, 2.5])
    msg.vec.x = 3.0
    raw = codec.encode(msg)
    back = codec.decode(raw)
    assert back.label == "hi" and list(back.values) == [1.5, 2.5] and back.vec.x == 3.0
    d = codec.to_dict(raw)
    assert d["label"] == "hi" and d["stamp"] == "5" and d["vec"]["x"] == 3.0
    assert codec.encode(d) == raw
    with pytest.raises(DecodeError):
        codec.decode(b"\xff\xff\xff", topic="/pb")
    # through an MCAP file
    out = tmp_path / "pb.mcap"
    w = polybag.Writer(str(out))
    s = w.add_schema("demo.Reading", "protobuf", _descriptor_set())
    c = w.add_channel("/pb", "protobuf", s)
    w.write(c, raw, 10)
    w.close()
    with polybag.open(str(out)) as r:
        (m,) = list(r.messages())
        assert m.decode().label == "hi"
        assert r.topic_columns("/pb")["vec.x"].tolist() == [3.0]


def test_protobuf_missing_package(monkeypatch: pytest.MonkeyPatch) -> None:
    import polybag.codecs.protobuf as pbmod

    monkeypatch.setitem(sys.modules, "google.protobuf", None)
    with pytest.raises(UnsupportedError, match="pip install"):
        pbmod.ProtobufCodec("demo.Reading", b"")


def test_message_decode_through_open_bag_and_mcap() -> None:
    with polybag.open(str(CORPORA / "rosbag" / "foxglove-rosbag" / "example.bag")) as r:
        (m, obj), *_ = list(r.decoded_messages(topics=["/tf"]))
        t = obj.transforms[0]
        assert t.child_frame_id == "turtle2" and t.header.frame_id == "world"
        assert (t.header.stamp.sec, t.header.stamp.nsec) == (1396293888, 56065082)
        assert (t.transform.translation.x, t.transform.translation.y) == (4.0, 9.088889122009277)
        assert m.to_dict()["transforms"][0]["header"]["stamp"] == {"sec": 1396293888, "nsec": 56065082}
    with polybag.open(str(CORPORA / "mcap-samples" / "rosbag2" / "talker" / "talker.mcap")) as r:
        texts = [m.decode().data for m in r.messages(topics=["/topic"])]
        assert texts == [f"Hello, world! {i}" for i in range(10)]
    with polybag.open(
        str(CORPORA / "mcap-samples" / "rosbag2" / "wrong_rmw_test" / "wrong_rmw_test_0.mcap")
    ) as r:
        wrong = [m for m in r.messages() if m.channel.message_encoding == "wrong_format"]
        assert len(wrong) == 7
        for m in wrong:
            with pytest.raises(UnsupportedError):
                m.decode()


def test_codec_for_by_identity_equal_channels_and_forgetting() -> None:
    """``codec_for`` finds a Channel's codec by the object first: the same codec for the
    same object and for an equal one; ``forget_failures`` forgets both caches (a type made
    known afterwards is tried again); the identity cache stays bounded."""
    from polybag import codecs
    from polybag.model import Channel, Schema

    schema = Schema(1, "std_msgs/String", "ros1msg", b"string data\n")
    a = Channel(1, "/a", "ros1", schema, {})
    b = Channel(1, "/a", "ros1", Schema(1, "std_msgs/String", "ros1msg", b"string data\n"), {})
    ca = codecs.codec_for(a)
    assert codecs.codec_for(a) is ca and codecs.codec_for(b) is ca
    assert ca.decode(b"\x02\x00\x00\x00hi").data == "hi"
    assert codecs._by_identity[id(a)] == (a, ca)
    codecs.forget_failures()
    assert not codecs._by_identity and not codecs._by_channel
    assert codecs.codec_for(a).decode(b"\x02\x00\x00\x00ok").data == "ok"
    many = [Channel(i, f"/t{i}", "ros1", schema, {}) for i in range(codecs._IDENTITY_MAX + 10)]
    for ch in many:
        assert codecs.codec_for(ch).decode(b"\x00\x00\x00\x00").data == ""
    assert len(codecs._by_identity) <= codecs._IDENTITY_MAX
