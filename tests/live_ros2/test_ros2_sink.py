"""Ros2Sink without a graph: routes, QoS, remapping, /clock, bad channels and payloads."""

import struct
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from polybag.model import Channel, Message, Schema
from polybag.play.player import PlayOptions
from polybag.play.ros2_sink import Ros2Sink, clock_payload


class FakeWriter:
    def __init__(self, topic: str, dds_type: str, profile: dict[str, Any], depth: int | None) -> None:
        self.topic, self.dds_type, self.profile, self.depth = topic, dds_type, profile, depth
        self.sent: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.sent.append(data)

    def subscriber_count(self) -> int:
        return 1

    def wait_for_acks(self, timeout: float) -> bool:
        return True

    def close(self) -> None:
        pass


class FakeGraph:
    def __init__(self) -> None:
        self.writers: list[FakeWriter] = []

    def writer(
        self, topic: str, dds_type: str, profile: dict[str, Any], depth: int | None = None
    ) -> FakeWriter:
        w = FakeWriter(topic, dds_type, profile, depth)
        self.writers.append(w)
        return w


LATCHED = "- history: keep_last\n  depth: 3\n  reliability: reliable\n  durability: transient_local\n"


def _ch(
    cid: int, topic: str, enc: str, schema: str, md: dict[str, str] | None = None, senc: str = "ros2msg"
) -> Channel:
    return Channel(cid, topic, enc, Schema(cid, schema, senc, b"string data\n"), md or {})


def test_routes_qos_remap_clock_and_skips() -> None:
    g = FakeGraph()
    warnings: list[str] = []
    sink = Ros2Sink(g, warn=warnings.append)
    chans = [
        _ch(1, "/chatter", "cdr", "std_msgs/msg/String"),
        _ch(2, "/latched", "cdr", "std_msgs/msg/String", {"offered_qos_profiles": LATCHED}),
        _ch(3, "/j", "json", "x", senc="jsonschema"),
        _ch(4, "/bad_qos", "cdr", "std_msgs/msg/String", {"offered_qos_profiles": ": ["}),
        _ch(
            5,
            "/r1",
            "ros1",
            "std_msgs/String",
            {"md5sum": "992ce8a1687cec8c8bd883ec73ca41d1"},
            senc="ros1msg",
        ),
    ]
    sink.open(chans, PlayOptions(clock=True, queue=7, remap={"/chatter": "/talk"}))
    by_topic = {w.topic: w for w in g.writers}
    assert set(by_topic) == {"/talk", "/latched", "/bad_qos", "/r1", "/clock"}
    assert by_topic["/talk"].dds_type == "std_msgs::msg::dds_::String_" and by_topic["/talk"].depth == 7
    assert by_topic["/latched"].profile["durability"] == "transient_local" and by_topic["/latched"].depth == 3
    assert by_topic["/bad_qos"].profile["reliability"] == "reliable"  # (unreadable QoS: the default)
    assert by_topic["/clock"].dds_type == "rosgraph_msgs::msg::dds_::Clock_"
    assert sink.skipped == ["/j"] and "json" in warnings[0]
    cdr = b"\x00\x01\x00\x00\x03\x00\x00\x00hi\x00"
    sink.publish(Message(chans[0], 1, 1, 0, cdr))
    sink.publish(Message(chans[4], 1, 1, 0, struct.pack("<I", 2) + b"hi"))
    sink.publish(Message(chans[0], 2, 2, 0, b"\x00\x01"))
    sink.clock(5_000_000_007)
    assert by_topic["/talk"].sent == [cdr]
    assert by_topic["/r1"].sent == [cdr]  # ROS 1 String converted to the same CDR
    assert sink.bad == 1 and any("not CDR" in w for w in warnings)
    assert by_topic["/clock"].sent == [clock_payload(5_000_000_007)]
    assert clock_payload(5_000_000_007) == b"\x00\x01\x00\x00" + struct.pack("<iI", 5, 7)
    sink.close()
    assert sink.writers == {}


@given(st.text(max_size=60), st.text(max_size=200))
def test_any_schema_name_or_qos_text_is_skipped_or_routed(name: str, qos: str) -> None:
    g = FakeGraph()
    warnings: list[str] = []
    sink = Ros2Sink(g, warn=warnings.append)
    ch = _ch(1, "/t", "cdr", name, {"offered_qos_profiles": qos})
    sink.open([ch], PlayOptions())
    assert (sink.skipped == ["/t"] and warnings) or (len(g.writers) == 1 and g.writers[0].topic == "/t")
