"""`polybag play`'s rosbag options on a live ROS 1 graph (rosmaster started by the test, a
polybag Node subscribing): --loop / --loop-count, --clock with --hz (and /clock remapped),
--delay, --skip-empty, --wait-for-subscribers, topic remapping /a:=/b with __name,
--rate-control-topic remapped, --json.  Timing is only ever checked as a lower bound
(a wait that must have happened), never as a speed limit."""

from __future__ import annotations

import json
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from play_helpers import NS, T0, make_bag
from polybag.net.ros1 import Node
from ros1_graph import Graph, wait_for

POLYBAG = [sys.executable, "-m", "polybag", "play"]

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(not shutil.which("rosmaster"), reason="Debian ROS 1 (rosmaster) not installed"),
]


class Listener:
    """A polybag node subscribed to some topics, noting (topic, receive time, payload text)."""

    def __init__(self, graph: Graph) -> None:
        self.node = Node("/listener", graph.uri, host="127.0.0.1", anonymous=True)
        self.got: list[tuple[str, float, bytes]] = []
        self.lock = threading.Lock()

    def subscribe(self, topic: str) -> None:
        def cb(m, topic=topic) -> None:
            with self.lock:
                self.got.append((topic, time.monotonic(), bytes(m.data)))

        self.node.subscribe(topic, cb)

    def topics(self) -> list[str]:
        with self.lock:
            return [t for t, _, _ in self.got]

    def texts(self, topic: str | None = None) -> list[str]:
        with self.lock:
            return [d[4:].decode() for t, _, d in self.got if topic is None or t == topic]

    def count(self) -> int:
        with self.lock:
            return len(self.got)


@pytest.fixture
def graph(tmp_path) -> Iterator[Graph]:
    g = Graph(tmp_path, PYTHONUNBUFFERED="1")
    try:
        yield g
    finally:
        g.close()


@pytest.fixture
def listener(graph) -> Iterator[Listener]:
    lst = Listener(graph)
    try:
        yield lst
    finally:
        lst.node.close()


def _texts(bag: Path, items: list[tuple[str, int]]) -> list[str]:
    return [f"{bag.stem} {topic} {t}" for topic, t in items]


def _play(graph: Graph, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    res = subprocess.run([*POLYBAG, *args], env=graph.env, cwd=graph.tmp, capture_output=True, text=True,
                         timeout=timeout)
    assert res.returncode == 0, res.stderr
    return res


def test_loop_until_stopped_and_loop_count(graph, listener, tmp_path):
    items = [("/a", T0 + i * NS // 20) for i in range(4)]
    bag = make_bag(tmp_path / "in.bag", items)
    listener.subscribe("/a")
    play = graph.start([*POLYBAG, "-q", "-l", "--wait-for-subscribers", "-d", "0", str(bag)])
    wait_for(lambda: listener.count() >= 10, 120, "two and a half passes")
    assert play.poll() is None  # still looping
    play.send_signal(signal.SIGTERM)
    assert play.wait(60) == 0
    got = listener.texts()
    one = _texts(bag, items)
    assert len(got) >= 10
    assert got == (one * (len(got) // 4 + 1))[: len(got)]  # pass after pass, in order

    listener.got.clear()
    res = _play(graph, "--json", "--loop-count", "3", "--wait-for-subscribers", "-d", "0", str(bag))
    stats = json.loads(res.stdout)
    assert stats["loops"] == 3 and stats["published"] == 12
    wait_for(lambda: listener.count() >= 12, 60, "three passes")
    assert listener.texts() == one * 3


def test_clock_at_hz_remapped(graph, listener, tmp_path):
    items = [("/a", T0 + i * NS // 10) for i in range(11)]  # 1 s of bag time
    bag = make_bag(tmp_path / "in.bag", items)
    listener.subscribe("/sim_clock")
    listener.subscribe("/a")
    _play(graph, "-q", "--clock", "--hz", "20", "--wait-for-subscribers", "/clock:=/sim_clock", str(bag))
    wait_for(lambda: len(listener.texts("/a")) >= 11, 60, "every message")
    with listener.lock:
        ticks = [struct.unpack("<II", d) for t, _, d in listener.got if t == "/sim_clock"]
    times = [s * NS + n for s, n in ticks]
    assert times == sorted(times) and all(T0 <= t <= T0 + NS for t in times)
    assert len(times) >= 5  # 20 Hz over 1 s of playback (loose: a busy machine may skip ticks)
    assert graph.publishers("/clock") == []  # nothing on the unremapped name
    assert listener.texts("/a") == _texts(bag, items)


def test_delay_lets_subscribers_connect_first(graph, listener, tmp_path):
    items = [("/a", T0 + i * NS // 50) for i in range(10)]
    bag = make_bag(tmp_path / "in.bag", items)
    listener.subscribe("/a")
    play = graph.start([*POLYBAG, "-q", "-d", "1.5", str(bag)])  # no --wait-for-subscribers
    wait_for(lambda: len(graph.publishers("/a")) > 0, 60, "the player advertising")
    advertised = time.monotonic()
    assert play.wait(120) == 0
    wait_for(lambda: listener.count() >= 10, 60, "every message")
    assert listener.texts() == _texts(bag, items)  # nothing lost: the delay let us connect
    first = listener.got[0][1]
    assert first - advertised >= 1.0  # it waited (1.5 s after advertising; we saw that late)


def test_skip_empty_skips_a_long_gap(graph, listener, tmp_path):
    gap = 30 * NS
    items = [("/a", T0 + i * NS // 10) for i in range(3)] + [("/a", T0 + gap + i * NS // 10) for i in range(3)]
    bag = make_bag(tmp_path / "in.bag", items)
    listener.subscribe("/a")
    res = _play(graph, "--json", "--skip-empty", "1", "--wait-for-subscribers", "-d", "0", str(bag))
    assert json.loads(res.stdout)["published"] == 6
    wait_for(lambda: listener.count() >= 6, 60, "every message")
    assert listener.texts() == _texts(bag, items)
    recv = [r for _, r, _ in listener.got]
    assert recv[3] - recv[2] < 15  # the 30 s gap was skipped (it would take 30 s otherwise)
    assert recv[5] - recv[3] >= 0.15  # the spacing after the gap is kept (0.2 s)


def test_wait_for_subscribers_on_every_topic(graph, listener, tmp_path):
    items = [("/a", T0), ("/b", T0 + NS // 10), ("/a", T0 + 2 * NS // 10), ("/b", T0 + 3 * NS // 10)]
    bag = make_bag(tmp_path / "in.bag", items)
    listener.subscribe("/a")
    play = graph.start([*POLYBAG, "-q", "--wait-for-subscribers", "-d", "0", str(bag)])
    wait_for(lambda: len(graph.publishers("/b")) > 0, 60, "the player advertising /b")
    time.sleep(1.5)
    assert listener.count() == 0 and play.poll() is None  # /b has nobody yet: still waiting
    listener.subscribe("/b")
    assert play.wait(120) == 0
    wait_for(lambda: listener.count() >= 4, 60, "every message")
    assert sorted(listener.texts()) == sorted(_texts(bag, items))
    assert listener.texts("/a") == _texts(bag, items[0::2])


def test_remapping_and_node_name(graph, listener, tmp_path):
    items = [("/a", T0), ("/b", T0 + NS // 10), ("/a", T0 + 2 * NS // 10)]
    bag = make_bag(tmp_path / "in.bag", items)
    listener.subscribe("/renamed")
    listener.subscribe("/ns/b")
    play = graph.start([*POLYBAG, "-q", "-k", "-d", "0", "--wait-for-subscribers", "-p", "/ns", str(bag),
                        "/ns/a:=/renamed", "__name:=/my_player"])
    wait_for(lambda: listener.count() >= 3, 60, "every message")
    assert graph.publishers("/renamed") == ["/my_player"]
    assert graph.publishers("/ns/b") == ["/my_player"]
    assert graph.publishers("/a") == [] and graph.publishers("/ns/a") == []
    play.send_signal(signal.SIGTERM)
    assert play.wait(60) == 0
    assert listener.topics() == ["/renamed", "/ns/b", "/renamed"]
    assert listener.texts() == _texts(bag, items)  # same payloads, other names


def test_rate_control_topic_is_remapped_too(graph, listener, tmp_path):
    items = [("/a", T0 + i * NS // 10) for i in range(20)]  # 2 s
    bag = make_bag(tmp_path / "in.bag", items)
    listener.subscribe("/a")
    with Node("/acker", graph.uri, host="127.0.0.1", anonymous=True) as acker:
        header_md5 = "2176decaecbce78abc3b96ef049fabed"
        ack = acker.advertise("/ack_remapped", "std_msgs/Header", header_md5,
                              "uint32 seq\ntime stamp\nstring frame_id\n", latch=True)

        def stamp(secs: float) -> bytes:
            t = T0 + int(secs * NS)
            return struct.pack("<III", 0, t // NS, t % NS) + struct.pack("<I", 0)

        ack.publish(stamp(0.5))  # latched: the player gets it on subscribing
        play = graph.start([*POLYBAG, "-q", "-d", "0", "--wait-for-subscribers", "--rate-control-topic", "/ack",
                            "--rate-control-max-delay", "0.3", "/ack:=/ack_remapped", str(bag)])
        wait_for(lambda: len(graph.subscribers("/ack_remapped")) > 0, 60, "the player subscribing")
        wait_for(lambda: listener.count() >= 9, 60, "messages up to 0.8 s")
        time.sleep(1.5)
        assert play.poll() is None  # held: bag time may not run more than 0.3 s past the stamp
        held = listener.count()
        assert held == 9  # 0.0 .. 0.8 s
        ack.publish(stamp(100.0))
        assert play.wait(120) == 0
    wait_for(lambda: listener.count() >= 20, 60, "the rest")
    assert listener.texts() == _texts(bag, items)


def test_master_and_namespace_from_special_arguments(graph, listener, tmp_path):
    items = [("/a", T0), ("rel", T0 + NS // 10)]  # a relative name lands in __ns
    bag = make_bag(tmp_path / "in.bag", items)
    listener.subscribe("/a")
    listener.subscribe("/robot1/rel")
    env = dict(graph.env, ROS_MASTER_URI="http://127.0.0.1:9")  # wrong on purpose: __master wins
    res = subprocess.run([*POLYBAG, "--json", "--wait-for-subscribers", "-d", "0", str(bag),
                          f"__master:={graph.uri}", "__ns:=/robot1", "__name:=player"],
                         env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["published"] == 2
    wait_for(lambda: listener.count() >= 2, 60, "both messages")
    assert listener.topics() == ["/a", "/robot1/rel"]
