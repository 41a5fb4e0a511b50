"""Ros2Sink without a graph: a transient_local writer keeps every latched message the inputs
hold (bounded), and the player waits for known subscribers only as told."""

from pathlib import Path
from typing import Any

import pytest

import polybag
from polybag.errors import UsageError
from polybag.model import Channel, Schema
from polybag.play.player import CallbackSink, Player, PlayOptions
from polybag.play.ros2_sink import MAX_LATCHED, Ros2Sink


class FakeWriter:
    def __init__(self, topic: str, depth: int | None) -> None:
        self.topic, self.depth = topic, depth
        self.sent: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.sent.append(data)

    def wait_for_acks(self, timeout: float) -> bool:
        return True

    def close(self) -> None:
        pass


class FakeGraph:
    def __init__(self) -> None:
        self.writers: dict[str, FakeWriter] = {}

    def writer(self, topic: str, dds_type: str, profile: dict[str, Any], depth: int | None = None) -> FakeWriter:
        self.writers[topic] = w = FakeWriter(topic, depth)
        return w


def _latched(depth: Any) -> str:
    return f"- history: keep_last\n  depth: {depth}\n  reliability: reliable\n  durability: transient_local\n"


def _ch(cid: int, topic: str, qos: str) -> Channel:
    return Channel(cid, topic, "cdr", Schema(cid, "std_msgs/msg/String", "ros2msg", b"string data\n"), {"offered_qos_profiles": qos})


@pytest.mark.parametrize(
    ("recorded", "counts", "depth"),
    [
        (0, [2], 2),  # two /tf_static broadcasters recorded with depth 0: both kept
        (1, [1, 1], 2),  # two channels played on one topic: their messages add up
        (5, [2], 5),  # the recorded depth when it is larger
        (0, [0], 1),  # no count (an unindexed input): at least 1
        (0, [10**9], MAX_LATCHED),  # a huge count from the file: bounded
        (10**15, [1], MAX_LATCHED),  # a hostile recorded depth: bounded
        ("x", [3], 3),  # a depth that is not a number
    ],
)
def test_latched_writer_depth(recorded: Any, counts: list[int], depth: int) -> None:
    g = FakeGraph()
    sink = Ros2Sink(g, warn=lambda _t: None)
    chans = [_ch(i + 1, "/tf_static", _latched(recorded)) for i in range(len(counts))]
    sink.message_counts.update({id(c): n for c, n in zip(chans, counts, strict=True)})
    sink.open(chans, PlayOptions())
    assert g.writers["/tf_static"].depth == depth


def test_volatile_writer_keeps_the_queue_depth() -> None:
    g = FakeGraph()
    sink = Ros2Sink(g, warn=lambda _t: None)
    ch = _ch(1, "/chatter", "- history: keep_last\n  depth: 1\n  reliability: reliable\n  durability: volatile\n")
    sink.message_counts[id(ch)] = 500
    sink.open([ch], PlayOptions(queue=7))
    assert g.writers["/chatter"].depth == 7


class KnownSink(CallbackSink):
    """A sink that can wait for known subscribers and counts the messages of its channels."""

    def __init__(self) -> None:
        super().__init__(lambda _m: None)
        self.waited: list[float] = []
        self.message_counts: dict[int, int] = {}

    def wait_for_known_subscribers(self, timeout: float, stopped: Any) -> bool:
        self.waited.append(timeout)
        return True


def _bag(path: Path) -> Path:
    from polybag.codecs.ros2 import definition_for

    with polybag.Writer(str(path), format="rosbag2") as w:
        s = w.add_schema("std_msgs/msg/String", "ros2msg", definition_for("std_msgs/msg/String").encode())
        c = w.add_channel("/tf_static", "cdr", s, {"offered_qos_profiles": _latched(0)})
        for i in range(3):
            w.write(c, b"\x00\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00", 1000 + i, 1000 + i)
    return path


@pytest.mark.parametrize(("given", "waited"), [(None, [2.0]), ("500ms", [0.5]), (0, [])])
def test_player_waits_for_known_subscribers_as_told(tmp_path: Path, given: Any, waited: list[float]) -> None:
    sink = KnownSink()
    opts = PlayOptions(immediate=True, delay=0)
    if given is not None:
        opts.wait_for_known_subscribers = given
    with Player(_bag(tmp_path / "bag"), opts, sink) as p:
        p.run()
        assert [c.topic for c in p.channels] == ["/tf_static"]
        assert sink.message_counts == {id(p.channels[0]): 3}  # the player told the sink the counts
    assert sink.waited == waited


@pytest.mark.parametrize("bad", [-1, "-1", float("inf"), "soon"])
def test_wait_for_known_subscribers_refuses_bad_values(bad: Any) -> None:
    with pytest.raises(UsageError, match="--wait-for-known-subscribers"):
        PlayOptions(wait_for_known_subscribers=bad).validate()
