"""Topic remapping for `polybag play` without a graph: parsing ROS remapping arguments,
the CLI's split of files/topics/remaps, and the ROS 1 sink publishing prefixed-then-remapped
names (``/clock`` too) against a recording fake node."""

from __future__ import annotations

import argparse
import threading

import pytest

from play_helpers import NS, T0, make_bag
from polybag.cli.play import _split_inputs, remapping_arguments
from polybag.errors import UsageError
from polybag.play import Player, PlayOptions, Ros1Sink
from polybag.play.ros1_sink import CLOCK_MD5


class FakePublisher:
    def __init__(self, topic: str, md5: str) -> None:
        self.topic, self.md5 = topic, md5
        self.sent: list[bytes] = []
        self.num_subscribers = 1

    def publish(self, data: bytes) -> None:
        self.sent.append(bytes(data))

    def flush(self, timeout: float = 5.0) -> bool:
        return True

    def close(self) -> None:
        pass


class FakeNode:
    def __init__(self) -> None:
        self.pubs: dict[str, FakePublisher] = {}

    def advertise(self, topic, type, md5sum, message_definition, *, latch=False, callerid=None, queue_size=100):  # noqa: A002
        assert topic not in self.pubs
        self.pubs[topic] = FakePublisher(topic, md5sum)
        return self.pubs[topic]


class InstantClock:
    def __init__(self) -> None:
        self.t = 0

    def now_ns(self) -> int:
        return self.t

    def wait(self, cond: threading.Condition, timeout_ns: int | None) -> None:
        self.t += timeout_ns or 0


def test_remapping_arguments():
    remap, special = remapping_arguments(["/a:=/b", "c:=/d/e", "__name:=my_player", "__ns:=robot", "__log:=x"])
    assert remap == {"/a": "/b", "/robot/c": "/d/e"}
    assert special == {"__name": "my_player", "__ns": "/robot", "__log": "x"}
    assert remapping_arguments([]) == ({}, {"__ns": "/"})
    assert remapping_arguments(["x:=y"])[0] == {"/x": "/y"}
    for bad in (":=/b", "/a:=", "__nope:=1", "_param:=3", "~private:=/x", "/a:=~b"):
        with pytest.raises(UsageError):
            remapping_arguments([bad])


def test_split_inputs_takes_remaps_from_anywhere(tmp_path):
    bag = make_bag(tmp_path / "x.bag", [("/a", T0)])
    ns = argparse.Namespace(files=[str(bag), "/a:=/b"], bags=[], topics=["/a", "/c:=/d", str(bag)],
                            pause_topics=["/p", "__name:=n"])
    assert _split_inputs(ns) == [str(bag), str(bag)]
    assert ns.topics == ["/a"] and ns.pause_topics == ["/p"]
    assert ns.remaps == ["/a:=/b", "/c:=/d", "__name:=n"]


def test_sink_prefixes_then_remaps(tmp_path):
    items = [("/a", T0), ("/b", T0 + NS // 10), ("/a", T0 + 2 * NS // 10)]
    bag = make_bag(tmp_path / "x.bag", items)
    node = FakeNode()
    opts = PlayOptions(delay=0, prefix="/ns", clock=True, remap={"/ns/a": "/renamed", "/clock": "/sim_clock"})
    with Player(bag, opts, Ros1Sink(node), clock=InstantClock()) as p:
        stats = p.run()
    assert stats.published == 3
    assert sorted(node.pubs) == ["/ns/b", "/renamed", "/sim_clock"]
    assert [d[4:].decode() for d in node.pubs["/renamed"].sent] == [f"x /a {T0}", f"x /a {T0 + 2 * NS // 10}"]
    assert len(node.pubs["/ns/b"].sent) == 1
    assert node.pubs["/sim_clock"].md5 == CLOCK_MD5


def test_sink_remaps_two_topics_onto_one(tmp_path):
    bag = make_bag(tmp_path / "x.bag", [("/a", T0), ("/b", T0 + 1)])
    node = FakeNode()
    with Player(bag, PlayOptions(delay=0, remap={"/a": "/m", "/b": "/m"}), Ros1Sink(node), clock=InstantClock()) as p:
        p.run()
    assert list(node.pubs) == ["/m"] and len(node.pubs["/m"].sent) == 2  # same type: shared


def test_remap_validated():
    with pytest.raises(UsageError):
        PlayOptions(remap={"/a": ""}).validate()


def test_cli_refuses_bad_remaps_and_priorities(tmp_path, capsys):
    from polybag.cli import main

    bag = make_bag(tmp_path / "x.bag", [("/a", T0)])
    for bad in (["_param:=1"], ["__nope:=x"], [":=/b"], ["~p:=/q"]):
        assert main(["play", str(bag), *bad]) == 2
    assert main(["play", "--realtime", "--realtime-priority", "0", str(bag)]) == 2
    assert main(["play", "--realtime", "--realtime-priority", "100", str(bag)]) == 2
    err = capsys.readouterr().err
    assert "private parameters" in err and "1..99" in err and "Traceback" not in err
