"""`polybag play` against a live ROS 1 master: Debian's real recorder and `rostopic echo`
receive exactly the bytes, types, md5sums, definitions and latching in the played logs."""

from __future__ import annotations

import os
import shutil
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import polybag

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from play_helpers import NS, STRING_MD5, T0, make_bag, make_mcap  # noqa: E402
from ros1_graph import Graph as _Graph  # noqa: E402
from ros1_graph import wait_for as _wait  # noqa: E402

RECORD = "/usr/lib/rosbag/record"
NEEDED = [shutil.which("rosmaster"), shutil.which("rostopic"), RECORD]
POLYBAG = [sys.executable, "-m", "polybag"]

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(not all(n and os.path.exists(n) for n in NEEDED), reason="Debian ROS 1 tools not installed"),
]


class Graph(_Graph):
    def __init__(self, tmp: Path) -> None:
        super().__init__(tmp, PYTHONUNBUFFERED="1")

    def record(self, out: Path, topics: list[str]) -> subprocess.Popen:
        rec = self.start([RECORD, "-O", str(out), *topics])
        for t in topics:
            _wait(lambda t=t: len(self.subscribers(t)) > 0, 30, f"the recorder subscribing {t}")
        return rec


@pytest.fixture
def graph(tmp_path) -> Iterator[Graph]:
    g = Graph(tmp_path)
    try:
        yield g
    finally:
        g.close()


def _play(graph: Graph, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    res = subprocess.run(
        [*POLYBAG, "play", *args], env=graph.env, cwd=graph.tmp, capture_output=True, text=True, timeout=timeout
    )
    assert res.returncode == 0, res.stderr
    return res


def _by_topic(path: Path) -> dict[str, list[bytes]]:
    out: dict[str, list[bytes]] = {}
    with polybag.open(path) as r:
        for m in r.messages():
            out.setdefault(m.topic, []).append(bytes(m.data))
    return out


def test_recorder_receives_the_played_bytes(graph, tmp_path):
    bag = make_bag(tmp_path / "in.bag", [("/a", T0 + i * NS // 50) for i in range(40)] + [("/l", T0 + 3)],
                   latch_topic="/l")
    mcap = make_mcap(tmp_path / "in2.mcap", [("/m", T0 + i * NS // 20) for i in range(10)])
    out = tmp_path / "out.bag"
    rec = graph.record(out, ["/a", "/l", "/m"])
    _play(graph, "-q", "--wait-for-subscribers", "-r", "4", str(bag), str(mcap))
    # the recorder got everything before we stop it (each message is counted once it is written)
    graph.stop(rec)
    got = _by_topic(out)
    want = {**_by_topic(bag), **_by_topic(mcap)}
    assert got == want
    with polybag.open(out) as r:
        conns = {c.topic: c for c in r.summary.channels.values()}
    for topic in ("/a", "/l", "/m"):
        c = conns[topic]
        assert c.type_name == "std_msgs/String" and c.metadata["md5sum"] == STRING_MD5
        assert bytes(c.schema.data) == b"string data\n"
    assert conns["/l"].metadata.get("latching") == "1"
    assert conns["/a"].metadata.get("latching", "0") == "0"


def test_clock_published(graph, tmp_path):
    bag = make_bag(tmp_path / "in.bag", [("/a", T0 + i * NS // 10) for i in range(11)])  # 1 s of bag time
    out = tmp_path / "clock.bag"
    rec = graph.record(out, ["/clock", "/a"])
    _play(graph, "-q", "--clock", "--hz", "50", "--wait-for-subscribers", str(bag))
    graph.stop(rec)
    with polybag.open(out) as r:
        conns = {c.topic: c for c in r.summary.channels.values()}
        assert conns["/clock"].type_name == "rosgraph_msgs/Clock"
        assert conns["/clock"].metadata["md5sum"] == "a9c97c1d230cfc112e270351a944ee47"
        ticks = [struct.unpack("<II", bytes(m.data)) for m in r.messages(topics=["/clock"])]
    times = [s * NS + n for s, n in ticks]
    assert all(0 <= n < NS for _, n in ticks)
    assert times == sorted(times)
    assert T0 <= times[0] and times[-1] <= T0 + NS
    assert len(times) >= 20  # 50 Hz over 1 s of playback (loose: a busy machine may skip ticks)
    assert _by_topic(out)["/a"] == _by_topic(bag)["/a"]


def test_rostopic_echo_learns_the_type_from_us(graph, tmp_path):
    bag = make_bag(tmp_path / "in.bag", [("/chatter", T0 + i * NS // 10) for i in range(30)])
    # rostopic learns the type from the master once the player advertises, and the player
    # waits for it (--wait-for-subscribers) before publishing
    play = graph.start([*POLYBAG, "play", "-q", "--wait-for-subscribers", "-d", "0", str(bag)])
    _wait(lambda: len(graph.publishers("/chatter")) > 0, 60, "the player advertising")
    echo = subprocess.run(["rostopic", "echo", "-n", "3", "/chatter"], env=graph.env, capture_output=True,
                          text=True, timeout=120)
    assert play.wait(120) == 0
    text = echo.stdout
    assert echo.returncode == 0, text + echo.stderr
    lines = [ln for ln in text.splitlines() if ln.startswith("data: ")]
    assert lines == [f'data: "in /chatter {T0 + i * NS // 10}"' for i in range(3)]


def test_keep_alive_serves_latched_topics_then_sigterm(graph, tmp_path):
    bag = make_bag(tmp_path / "in.bag", [("/l", T0)], latch_topic="/l")
    play = graph.start([*POLYBAG, "play", "-q", "-k", "-d", "0", str(bag)], stderr=subprocess.PIPE)
    _wait(lambda: len(graph.publishers("/l")) > 0, 60, "the player advertising /l")
    res = subprocess.run(["rostopic", "echo", "-n", "1", "/l"], env=graph.env, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0 and f"in /l {T0}" in res.stdout
    assert play.poll() is None  # still alive after the end
    play.send_signal(signal.SIGTERM)
    assert play.wait(60) == 0
    _wait(lambda: graph.publishers("/l") == [], 30, "the player unregistering")


def test_rate_control_topic_holds_playback(graph, tmp_path):
    bag = make_bag(tmp_path / "in.bag", [("/a", T0 + i * NS // 10) for i in range(30)])  # 3 s
    out = tmp_path / "out.bag"
    rec = graph.record(out, ["/a"])
    secs = T0 // NS

    def ack(stamp_secs: int, *extra: str) -> list[str]:
        return ["rostopic", "pub", *extra, "/ack", "std_msgs/Header",
                f"{{seq: 0, stamp: {{secs: {stamp_secs}, nsecs: 0}}, frame_id: x}}"]

    graph.start(ack(secs + 1, "-l"))  # latched: the player gets it when it subscribes
    _wait(lambda: len(graph.publishers("/ack")) > 0, 60, "the /ack publisher")
    play = graph.start([*POLYBAG, "play", "-q", "-d", "2", "--wait-for-subscribers", "--rate-control-topic", "/ack",
                        "--rate-control-max-delay", "0.5", str(bag)])
    # held at 1.5 s of bag time: wait until it has published and is still running past the bag's length
    _wait(lambda: len(graph.subscribers("/ack")) > 0, 60, "the player subscribing /ack")
    time.sleep(5.0)
    assert play.poll() is None, "playback was not held"
    released = time.time_ns()
    subprocess.run(ack(secs + 100, "-1"), env=graph.env, capture_output=True, timeout=120)
    assert play.wait(120) == 0
    graph.stop(rec)
    with polybag.open(out) as r:
        recv = [(m.log_time, bytes(m.data)) for m in r.messages()]
    assert [d for _, d in recv] == _by_topic(bag)["/a"]
    # messages up to 1.5 s went out before the release, the rest after it
    assert all(t < released for t, _ in recv[:16])
    assert all(t > released for t, _ in recv[16:])


def test_keyboard_pause_step_on_a_terminal(graph, tmp_path):
    import pty

    from polybag.net.ros1 import Node

    bag = make_bag(tmp_path / "in.bag", [("/a", T0 + i * NS // 10) for i in range(10)])
    got: list[bytes] = []
    with Node("/kbd_test", graph.uri, host="127.0.0.1", anonymous=True) as node:
        node.subscribe("/a", lambda m: got.append(m.data))
        master_fd, slave_fd = pty.openpty()
        try:
            play = graph.start([*POLYBAG, "play", "--pause", "--wait-for-subscribers", "-d", "0", str(bag)],
                               stdin=slave_fd, stderr=subprocess.PIPE)
            assert play.stderr is not None
            lines = []
            while "Paused." not in lines:  # printed once the keyboard is being read (on stderr)
                line = play.stderr.readline().decode()
                assert line, f"player output ended: {lines}"
                lines.append(line.strip())
            assert "Hit space to toggle paused, or 's' to step." in lines
            os.write(master_fd, b"s")
            _wait(lambda: len(got) >= 1, 60, "the stepped message")
            time.sleep(0.5)
            assert len(got) == 1  # still paused after the step
            os.write(master_fd, b" ")
            _wait(lambda: len(got) >= 10, 60, "the rest after resuming")
            assert play.wait(60) == 0
        finally:
            os.close(master_fd)
            os.close(slave_fd)
    assert got == _by_topic(bag)["/a"]
