"""CDR codec: every ROS 2 MCAP sample message against mcap-ros2-support and rosbags; IDL."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from _codec_helpers import norm_dynamic, norm_rosbags, same, strip_placeholder
from polybag.codecs.cdr import codec_for_type
from polybag.errors import DecodeError

mcap_reader = pytest.importorskip("mcap.reader")
mcap_ros2 = pytest.importorskip("mcap_ros2.decoder")
typesys = pytest.importorskip("rosbags.typesys")

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpora" / "mcap-samples" / "rosbag2"
FILES = sorted(CORPUS.rglob("*.mcap"))


@functools.cache
def _rosbags_store(name: str, text: str) -> object:
    store = typesys.get_typestore(typesys.Stores.EMPTY)
    store.register(typesys.get_types_from_msg(text, name))
    return store


def _padding_only_diff(ours: bytes, orig: bytes) -> bool:
    """Bytes differ only where ours has zero padding (some writers leave padding uninitialised)."""
    return len(ours) == len(orig) and all(a == b or a == 0 for a, b in zip(ours, orig))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_samples_decode_like_peers_and_roundtrip(path: Path) -> None:
    factory = mcap_ros2.DecoderFactory()
    decoders: dict[int, object] = {}
    n = 0
    with path.open("rb") as fh:
        for schema, channel, message in mcap_reader.make_reader(fh).iter_messages():
            if channel.message_encoding != "cdr":
                continue
            raw = bytes(message.data)
            codec = codec_for_type(schema.name, schema.data, schema.encoding)
            d = codec.to_dict(raw)
            obj = codec.decode(raw)
            same(obj.to_dict(), d)
            ours = codec.encode(obj)
            assert codec.encode(d) == ours
            assert ours == raw or _padding_only_diff(ours, raw)
            is_event = "---" in schema.data.decode()
            if not is_event:  # rosbag2 stores service events as .srv text; peers cannot read those
                dec = decoders.get(schema.id) or decoders.setdefault(
                    schema.id, factory.decoder_for("cdr", schema)
                )
                assert dec is not None
                same(strip_placeholder(d), norm_dynamic(dec(raw)), signed_bytes=True)
                rname = schema.name if schema.name.count("/") == 2 else schema.name.replace("/", "/msg/", 1)
                store = _rosbags_store(rname, schema.data.decode())
                theirs = store.deserialize_cdr(raw, rname)
                same(d, norm_rosbags(theirs, ros1=False, store=store), signed_bytes=True)
                assert bytes(store.serialize_cdr(theirs, rname)) == ours
            n += 1
    if "wrong_rmw" not in path.name:
        assert n > 0


def test_service_event_layout() -> None:
    text = "int64 a\nint64 b\n---\nint64 sum\n"
    codec = codec_for_type("example_interfaces/srv/AddTwoInts_Event", text)
    d = {
        "info": {
            "event_type": 1,
            "stamp": {"sec": 5, "nanosec": 6},
            "client_gid": bytes(range(16)),
            "sequence_number": 9,
        },
        "request": [{"a": 2, "b": 3}],
        "response": [],
    }
    raw = codec.encode(d)
    assert codec.to_dict(raw) == d
    # header 4; event_type at 0, stamp 4..12, gid 12..28, pad, seq 32..40, count 40..44, pad,
    # a 48..56, b 56..64, count 64..68: the 72 bytes rosbag2 writes for AddTwoInts events
    assert len(raw) == 4 + 68


IDL = """
// generated from rosidl_adapter
module pkg {
  module msg {
    module Thing_Constants {
      const uint8 MODE_A = 1;
      const string NAME = "thing";
    };
    typedef double double__9[9];
    @verbatim (language="comment", text="A thing")
    struct Thing {
      builtin_interfaces::msg::Time stamp;
      @default (value=0)
      int8 small;
      double__9 cov;
      sequence<pkg::msg::Inner, 3> inners;
      string<10> label;
      sequence<float> values;
      boolean flag;
      unsigned long long big;
      wstring wide;
    };
  };
};
================================================================================
IDL: pkg/msg/Inner
module pkg { module msg { struct Inner { long x; string name; }; }; };
================================================================================
IDL: builtin_interfaces/msg/Time
module builtin_interfaces { module msg { struct Time { int32 sec; uint32 nanosec; }; }; };
"""

MSG = (
    "builtin_interfaces/Time stamp\nint8 small\nfloat64[9] cov\nInner[<=3] inners\nstring<=10 label\n"
    "float32[] values\nbool flag\nuint64 big\n"
    + "=" * 80
    + "\nMSG: pkg/Inner\nint32 x\nstring name\n"
    + "=" * 80
    + "\nMSG: builtin_interfaces/Time\nint32 sec\nuint32 nanosec\n"
)


def test_idl_matches_msg_and_rosbags() -> None:
    idl = codec_for_type("pkg/msg/Thing", IDL, "ros2idl")
    msg = codec_for_type("pkg/msg/Thing", MSG, "ros2msg")
    cls = idl.message_class
    assert cls.MODE_A == 1 and cls.NAME == "thing"
    d = {
        "stamp": {"sec": -3, "nanosec": 7},
        "small": -1,
        "cov": [float(i) for i in range(9)],
        "inners": [{"x": 1, "name": "a"}, {"x": -2, "name": "bc"}],
        "label": "hi",
        "values": [0.5, 1.5],
        "flag": True,
        "big": 2**64 - 1,
    }
    raw_msg = msg.encode(d)
    raw_idl = idl.encode({**d, "wide": ""})
    assert raw_idl[: len(raw_msg)] == raw_msg  # same layout; the IDL adds an empty wstring
    assert idl.to_dict(raw_idl) == {**d, "wide": ""}
    assert idl.to_dict(idl.encode({**d, "wide": "wé"}))["wide"] == "wé"
    store = _rosbags_store("pkg/msg/Thing", MSG)
    theirs = store.deserialize_cdr(raw_msg, "pkg/msg/Thing")
    same(msg.to_dict(raw_msg), norm_rosbags(theirs, ros1=False, store=store))
    assert bytes(store.serialize_cdr(theirs, "pkg/msg/Thing")) == raw_msg
    # big-endian
    be = msg.encode(d, endian=">")
    assert be[:2] == b"\x00\x00" and be != raw_msg
    assert msg.to_dict(be) == d
    assert bytes(store.serialize_cdr(theirs, "pkg/msg/Thing", little_endian=False)) == be


def test_cdr_errors() -> None:
    codec = codec_for_type("pkg/msg/Thing", MSG)
    with pytest.raises(DecodeError, match="CDR header"):
        codec.decode(b"\x00\x01")
    with pytest.raises(DecodeError, match="encapsulation"):
        codec.decode(b"\x00\x03\x00\x00" + bytes(64))
    raw = codec.encode({"label": "x", "inners": [{"x": 1, "name": "q"}]})
    for cut in range(4, len(raw)):
        with pytest.raises(DecodeError) as ei:
            codec.decode(raw[:cut], topic="/t")
        assert ei.value.topic == "/t" and ei.value.offset is not None
    with pytest.raises(DecodeError, match="left over"):
        codec.decode(raw + bytes(8))


def test_ros2_string_constants_and_defaults() -> None:
    text = 'string A="x # y"  # comment\nstring B=plain # c\nint32[] values [1, 2, 3]\nstring s "default"\n'
    codec = codec_for_type("p/msg/T", text)
    cls = codec.message_class
    assert (cls.A, cls.B) == ("x # y", "plain")
    assert codec.to_dict(codec.encode({"values": [4], "s": "z"})) == {"values": [4], "s": "z"}


def test_bounds_enforced_when_encoding() -> None:
    from polybag.codecs.serde.compiler import EncodeError

    codec = codec_for_type("p/msg/B", "string<=3 s\nint32[<=2] v\nstring<=2[] names\n")
    assert codec.to_dict(codec.encode({"s": "abc", "v": [1, 2], "names": ["ab"]}))["s"] == "abc"
    for bad in ({"s": "abcd"}, {"v": [1, 2, 3]}, {"names": ["abc"]}):
        with pytest.raises(EncodeError):
            codec.encode(bad)
