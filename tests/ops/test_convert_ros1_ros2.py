"""convert: ROS 1 <-> ROS 2 message conversion, against rosbags-convert on the same inputs.

* corpus bags -> ``--profile ros2`` MCAP: the same topics, types, counts and payload bytes
  as rosbags-convert's rosbag2 output;
* ROS 2 (rosbag2 MCAP samples) -> bag: the same topics, types, md5sums, counts and bytes as
  rosbags-convert's bag;
* bag -> ROS 2 -> bag: every message decodes to the same values (``seq`` aside) and every
  md5sum is the original's;
* bundled counterparts (CameraInfo's renamed fields), Header seq, latched <-> transient_local,
  and types or messages that cannot be carried (named, counted, exit 1).
"""

from __future__ import annotations

import contextlib
import io
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import polybag
from ops_helpers import BAGS, CORPORA
from polybag import ops
from polybag.bridges.ros1_ros2 import LATCHED_QOS
from polybag.cli import main
from polybag.codecs import message_to_dict
from polybag.codecs.ros1 import codec_for_type as ros1_codec
from polybag.codecs.ros1 import definition_for as ros1_definition

rconvert = pytest.importorskip("rosbags.convert").convert
AnyReader = pytest.importorskip("rosbags.highlevel").AnyReader

ROS2 = CORPORA / "mcap-samples" / "rosbag2"
# rosbags cannot read these: a definition whose md5 it disagrees with, a damaged index
ROSBAGS_CANNOT = {"constants.bag"}
SMALL_BAGS = [p for p in BAGS if p.stat().st_size < 3_000_000]


def _rosbags_convert(src: Path, dst: Path) -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        rconvert([src], dst, "mcap", 8, None, "file", None, None, [], [], [], [])


def _by_topic_polybag(path: Path, ros1: bool) -> dict[str, list[tuple[bytes, str, str]]]:
    out: dict[str, list[tuple[bytes, str, str]]] = defaultdict(list)
    with polybag.open(path) as r:
        for m in r.messages(order="file"):
            ch = m.channel
            name = ch.metadata.get("type", "") if ros1 else ch.schema.name  # type: ignore[union-attr]
            out[ch.topic].append((bytes(m.data), name, ch.metadata.get("md5sum", "")))
    return out


def _by_topic_rosbags(path: Path) -> dict[str, list[tuple[bytes, str, str]]]:
    out: dict[str, list[tuple[bytes, str, str]]] = defaultdict(list)
    with AnyReader([path]) as r:
        for c, _t, raw in r.messages():
            out[c.topic].append((bytes(raw), c.msgtype, c.digest))
    return out


def _norm(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in v.items() if k != "seq"}
    if isinstance(v, np.ndarray):
        return _norm(v.tolist())
    if isinstance(v, (list, tuple)):
        return [_norm(x) for x in v]
    if isinstance(v, (bytes, bytearray)):
        return list(v)
    if isinstance(v, float) and v != v:
        return "nan"
    return v


@pytest.mark.parametrize("bag", SMALL_BAGS, ids=lambda p: str(p.relative_to(CORPORA / "rosbag")))
def test_bag_to_ros2_like_rosbags_convert(bag: Path, tmp_path: Path) -> None:
    out = tmp_path / "ros2.mcap"
    r = ops.convert(bag, out, profile="ros2")
    assert r.profile == "ros2" and r.dropped_messages == 0
    ours = _by_topic_polybag(out, ros1=False)
    with polybag.open(out) as rd:
        assert {c.message_encoding for c in rd.summary.channels.values()} <= {"cdr"}
    if bag.name in ROSBAGS_CANNOT:
        return
    _rosbags_convert(bag, tmp_path / "rb")
    theirs = _by_topic_rosbags(tmp_path / "rb")
    assert {t for t, v in ours.items() if v} == {t for t, v in theirs.items() if v}
    for topic, msgs in theirs.items():
        assert len(ours[topic]) == len(msgs), topic
        assert {n for _, n, _ in ours[topic]} == {n for _, n, _ in msgs}, topic
        # rosbags reads in log-time order, polybag's convert writes in file order
        assert sorted(b for b, _, _ in ours[topic]) == sorted(b for b, _, _ in msgs), topic


@pytest.mark.parametrize("bag", SMALL_BAGS, ids=lambda p: str(p.relative_to(CORPORA / "rosbag")))
def test_bag_ros2_bag_round_trip_keeps_values_and_md5sums(bag: Path, tmp_path: Path) -> None:
    mid, back = tmp_path / "ros2.mcap", tmp_path / "back.bag"
    ops.convert(bag, mid, profile="ros2")
    r = ops.convert(mid, back)
    assert r.dropped_messages == 0
    with polybag.open(bag) as a, polybag.open(back) as b:
        ma, mb = list(a.messages(order="file")), list(b.messages(order="file"))
        assert len(ma) == len(mb)
        for x, y in zip(ma, mb):
            assert x.channel.topic == y.channel.topic
            assert x.log_time == y.log_time
            tx = x.channel.metadata.get("type")
            assert (tx, x.channel.metadata.get("md5sum")) == (
                "tf/tfMessage" if y.channel.metadata.get("type") == "tf2_msgs/TFMessage" and tx == "tf/tfMessage"
                else y.channel.metadata.get("type"),
                y.channel.metadata.get("md5sum"),
            )  # fmt: skip
            assert _norm(message_to_dict(x.channel, x.data)) == _norm(message_to_dict(y.channel, y.data))


@pytest.mark.parametrize("bag", SMALL_BAGS, ids=lambda p: str(p.relative_to(CORPORA / "rosbag")))
def test_bag_rosbag2_bag_like_rosbags_convert(bag: Path, tmp_path: Path) -> None:
    """Corpus bag -> rosbag2 directory (sqlite3) -> bag: rosbags reads the directory with the
    payloads rosbags-convert writes; the bag that comes back has the original values and md5sums."""
    r2, back = tmp_path / "r2", tmp_path / "back.bag"
    r = ops.convert(bag, r2, format="rosbag2")
    assert r.dropped_messages == 0
    if bag.name not in ROSBAGS_CANNOT:  # (its lower-case constant names are not ROS 2 names)
        ours = _by_topic_rosbags(r2)
        _rosbags_convert(bag, tmp_path / "rb")
        theirs = _by_topic_rosbags(tmp_path / "rb")
        assert {t for t, v in ours.items() if v} == {t for t, v in theirs.items() if v}
        for topic, msgs in theirs.items():
            assert sorted(b for b, _, _ in ours[topic]) == sorted(b for b, _, _ in msgs), topic
            assert {n for _, n, _ in ours[topic]} == {n for _, n, _ in msgs}, topic
    ops.convert(r2, back)
    with polybag.open(bag) as a, polybag.open(back) as b:
        ma = sorted(a.messages(), key=lambda m: (m.channel.topic, m.log_time, bytes(m.data)))
        mb = sorted(b.messages(), key=lambda m: (m.channel.topic, m.log_time))
        assert len(ma) == len(mb)
        for x, y in zip(ma, mb):
            assert (x.channel.topic, x.log_time) == (y.channel.topic, y.log_time)
            assert x.channel.metadata.get("md5sum") == y.channel.metadata.get("md5sum")
            assert _norm(message_to_dict(x.channel, x.data)) == _norm(message_to_dict(y.channel, y.data))


@pytest.mark.parametrize("sample", ["cdr_test", "wbag", "talker", "rewriter_a"])
def test_ros2_to_bag_like_rosbags_convert(sample: str, tmp_path: Path) -> None:
    ours: dict[str, list[tuple[bytes, str, str]]] = defaultdict(list)
    for i, f in enumerate(sorted((ROS2 / sample).glob("*.mcap"))):
        out = tmp_path / f"{i}.bag"
        r = ops.convert(f, out)
        assert r.dropped_messages == 0
        with polybag.open(f) as src:
            assert r.messages == src.summary.message_count
        for topic, msgs in _by_topic_polybag(out, ros1=True).items():
            ours[topic] += msgs
    for msgs in ours.values():
        assert all(n.count("/") == 1 for _, n, _ in msgs)
    if sample in ("talker", "rewriter_a"):  # rosbags-convert writes no messages for these
        return
    rb = tmp_path / "rb.bag"
    _rosbags_convert(ROS2 / sample, rb)
    theirs = _by_topic_rosbags(rb)
    assert set(ours) == {t for t, v in theirs.items() if v}
    for topic, msgs in theirs.items():
        assert [b for b, _, _ in ours[topic]] == [b for b, _, _ in msgs], topic
        assert {(n, d) for _, n, d in ours[topic]} == {(n.replace("/msg/", "/"), d) for _, n, d in msgs}, (
            topic
        )


def _write_bag(
    path: Path, topic: str, type_name: str, values: list[dict[str, Any]], latching: str = "0"
) -> None:
    text = ros1_definition(type_name)
    codec = ros1_codec(type_name, text)
    with polybag.Writer(path) as w:
        sch = w.add_schema(type_name, "ros1msg", text.encode())
        ch = w.add_channel(
            topic, "ros1", sch, {"md5sum": codec.md5sum, "type": type_name, "latching": latching}
        )
        for i, v in enumerate(values):
            w.write(ch, codec.encode(v), 1_000 + i)


def test_bundled_counterpart_renamed_fields(tmp_path: Path) -> None:
    bag, out = tmp_path / "cam.bag", tmp_path / "cam.mcap"
    info = {
        "header": {"seq": 7, "stamp": {"sec": 5, "nsec": 6}, "frame_id": "cam"},
        "height": 480, "width": 640, "distortion_model": "plumb_bob",
        "D": [0.1, 0.2, 0.0, 0.0, 0.0], "K": [1.0] * 9, "R": [2.0] * 9, "P": [3.0] * 12,
        "roi": {"x_offset": 1, "do_rectify": True},
    }  # fmt: skip
    _write_bag(bag, "/cam/info", "sensor_msgs/CameraInfo", [info])
    ops.convert(bag, out, profile="ros2")
    with polybag.open(out) as r:
        (m,) = list(r.messages())
        assert m.channel.schema is not None and m.channel.schema.name == "sensor_msgs/msg/CameraInfo"
        d = _norm(message_to_dict(m.channel, m.data))
    assert d["header"] == {"stamp": {"sec": 5, "nanosec": 6}, "frame_id": "cam"}
    assert (d["d"], d["k"], d["p"][0], d["roi"]["x_offset"], d["roi"]["do_rectify"]) == (
        [0.1, 0.2, 0.0, 0.0, 0.0], [1.0] * 9, 3.0, 1, True,
    )  # fmt: skip
    back = tmp_path / "back.bag"
    ops.convert(out, back)
    with polybag.open(back) as r:
        (m,) = list(r.messages())
        assert m.channel.metadata["md5sum"] == ros1_codec("sensor_msgs/CameraInfo").md5sum
        d1 = message_to_dict(m.channel, m.data)
    assert (
        d1["header"]["seq"] == 0
        and list(d1["D"]) == info["D"]
        and d1["header"]["stamp"] == {"sec": 5, "nsec": 6}
    )


def test_latched_becomes_transient_local_and_back(tmp_path: Path) -> None:
    bag, out, back = tmp_path / "l.bag", tmp_path / "l.mcap", tmp_path / "back.bag"
    _write_bag(bag, "/map_meta", "std_msgs/String", [{"data": "x"}], latching="1")
    ops.convert(bag, out, profile="ros2")
    with polybag.open(out) as r:
        (ch,) = r.summary.channels.values()
        assert ch.metadata["offered_qos_profiles"] == LATCHED_QOS
        assert "latching" not in ch.metadata and "md5sum" not in ch.metadata
    ops.convert(out, back)
    with polybag.open(back) as r:
        (ch,) = r.summary.channels.values()
        assert ch.metadata.get("latching") == "1"


def test_values_that_do_not_fit_are_counted_and_named(tmp_path: Path) -> None:
    """ROS 1 time seconds past 2**31 do not fit ROS 2's int32: those messages are dropped and counted."""
    bag, out = tmp_path / "t.bag", tmp_path / "t.mcap"
    stamps = [{"header": {"stamp": {"sec": s, "nsec": 0}}} for s in (1, 2**31 + 5, 3)]
    _write_bag(bag, "/pose", "geometry_msgs/PoseStamped", stamps)
    r = ops.convert(bag, out, profile="ros2")
    assert (r.messages, r.dropped_messages, r.dropped_topics) == (2, 1, {"/pose": 1})
    assert any("/pose" in w and "could not be converted" in w for w in r.warnings)


def test_unmappable_type_is_named_and_counted(tmp_path: Path) -> None:
    src, out = tmp_path / "u.mcap", tmp_path / "u.bag"
    with polybag.Writer(src, profile="ros2") as w:
        sch = w.add_schema("nowhere_pkg/msg/Unknown", "", b"")  # no definition, not a known type
        ch = w.add_channel("/unknown", "cdr", sch)
        ok = w.add_channel("/ok", "cdr", w.add_schema("std_msgs/msg/String", "ros2msg", b"string data\n"))
        w.write(ch, b"\x00\x01\x00\x00\x01\x00\x00\x00", 1)
        w.write(ok, b"\x00\x01\x00\x00\x02\x00\x00\x00a\x00", 2)
    r = ops.convert(src, out)
    assert (r.messages, r.dropped_messages, r.dropped_topics) == (1, 1, {"/unknown": 1})
    assert any("nowhere_pkg/msg/Unknown" in w and "/unknown" in w for w in r.warnings)
    with polybag.open(out) as rd:
        (m,) = list(rd.messages())
        assert m.decode().data == "a" and m.channel.metadata["type"] == "std_msgs/String"


def test_cli_profile_ros2_and_back(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bag = CORPORA / "rosbag" / "foxglove-rosbag" / "example.bag"
    out, back = tmp_path / "e.mcap", tmp_path / "e.bag"
    assert main(["convert", "--profile", "ros2", str(bag), str(out), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["profile"] == "ros2" and res["messages"] == 8647 and res["dropped_messages"] == 0
    assert main(["convert", str(out), str(back)]) == 0
    assert "8647 messages" in capsys.readouterr().out
    with polybag.open(out) as r:
        types = {c.schema.name for c in r.summary.channels.values() if c.schema is not None}
    assert "tf2_msgs/msg/TFMessage" in types and "rosgraph_msgs/msg/Log" in types


EDGE = """time[] ts
duration[2] ds
byte[] bs
char[3] cs
byte b
uint8[] raw
edge_pkg/Inner[] inner
edge_pkg/Inner one
string[] names
Header header
================================================================================
MSG: edge_pkg/Inner
time t
float32[2] f
string s
================================================================================
MSG: std_msgs/Header
uint32 seq
time stamp
string frame_id
"""


def test_translated_type_round_trip(tmp_path: Path) -> None:
    """A type without a ROS 2 counterpart: time arrays, byte (int8 <-> uint8: the same bytes,
    the values wrap) and char, nested arrays; back to ROS 1 with the original md5sum."""
    codec = ros1_codec("edge_pkg/Edge", EDGE)
    value = {
        "ts": [{"sec": 1, "nsec": 2}, {"sec": 3, "nsec": 4}], "ds": [{"sec": -1, "nsec": 5}, {"sec": 2, "nsec": 0}],
        "bs": [-1, 5, -128], "cs": b"abc", "b": -7, "raw": b"\x00\xff",
        "inner": [{"t": {"sec": 9, "nsec": 9}, "f": [1.5, 2.5], "s": "x"}], "one": {"s": "y"},
        "names": ["a", ""], "header": {"seq": 4, "stamp": {"sec": 5, "nsec": 6}, "frame_id": "f"},
    }  # fmt: skip
    bag, mid, back = tmp_path / "e.bag", tmp_path / "e.mcap", tmp_path / "back.bag"
    with polybag.Writer(bag) as w:
        ch = w.add_channel(
            "/e", "ros1", w.add_schema("edge_pkg/Edge", "ros1msg", EDGE.encode()), {"md5sum": codec.md5sum}
        )
        w.write(ch, codec.encode(value), 1)
    assert ops.convert(bag, mid, profile="ros2").dropped_messages == 0
    with polybag.open(mid) as r:
        (m,) = list(r.messages())
        assert m.channel.schema is not None and m.channel.schema.name == "edge_pkg/msg/Edge"
        d2 = _norm(message_to_dict(m.channel, m.data))
    assert d2["ts"] == [{"sec": 1, "nanosec": 2}, {"sec": 3, "nanosec": 4}]
    assert (d2["bs"], d2["b"], d2["header"]) == (
        [255, 5, 128],
        249,
        {"stamp": {"sec": 5, "nanosec": 6}, "frame_id": "f"},
    )
    assert ops.convert(mid, back).dropped_messages == 0
    with polybag.open(back) as r:
        (m,) = list(r.messages())
        assert m.channel.metadata["md5sum"] == codec.md5sum
        value["header"]["seq"] = 0
        assert _norm(message_to_dict(m.channel, m.data)) == _norm(codec.to_dict(codec.encode(value)))


def test_ros2_without_definitions_uses_bundled_types(tmp_path: Path) -> None:
    """A ROS 2 file that names its types and carries no definitions (rosbag2 before Iron):
    the bundled Jazzy definitions decode it, and the bag gets ROS 1's own md5sum."""
    from polybag.codecs.cdr import codec_for_type as cdr_codec
    from polybag.codecs.ros2 import definition_for as ros2_definition

    imu = cdr_codec("sensor_msgs/msg/Imu", ros2_definition("sensor_msgs/msg/Imu"))
    src, out = tmp_path / "old.mcap", tmp_path / "old.bag"
    with polybag.Writer(src, profile="ros2") as w:
        ch = w.add_channel("/imu", "cdr", w.add_schema("sensor_msgs/msg/Imu", "ros2msg", b""))
        w.write(
            ch,
            imu.encode(
                {"header": {"frame_id": "imu", "stamp": {"sec": 2, "nanosec": 3}}, "orientation": {"w": 1.0}}
            ),
            5,
        )
    r = ops.convert(src, out)
    assert (r.messages, r.dropped_messages) == (1, 0)
    with polybag.open(out) as rd:
        (m,) = list(rd.messages())
        assert m.channel.metadata["md5sum"] == ros1_codec("sensor_msgs/Imu").md5sum
        d = m.to_dict()
    assert (
        d["header"] == {"seq": 0, "stamp": {"sec": 2, "nsec": 3}, "frame_id": "imu"}
        and d["orientation"]["w"] == 1.0
    )


def test_names_ros2_refuses_are_kept_and_named(tmp_path: Path) -> None:
    bag = CORPORA / "rosbag" / "matlab_rosbag" / "constants.bag"
    r = ops.convert(bag, tmp_path / "c.mcap", profile="ros2")
    assert r.dropped_messages == 0
    (warning,) = [w for w in r.warnings if "ROS 2 tools refuse" in w]
    assert "test_roscpp_serialization/msg/Constants" in warning and "constant 'a'" in warning
    clean = ops.convert(
        CORPORA / "rosbag" / "foxglove-rosbag" / "example.bag", tmp_path / "e.mcap", profile="ros2"
    )
    assert not [w for w in clean.warnings if "refuse" in w]
