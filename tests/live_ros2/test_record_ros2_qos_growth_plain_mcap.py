"""``polybag record --ros2 -O x.mcap`` (a plain MCAP file, no rosbag2 directory) with two
real rclpy publishers of one topic, different QoS, the second starting during the recording
(issue 28 "QoS of every publisher"): the finished file's channel lists both profiles (the
file rewritten once at close, ``McapWriter.grow_qos``), and the mcap library and polybag
read every message of both publishers."""

from __future__ import annotations

import json
import signal
import sys
import textwrap
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from ros2_graph import NEEDS_RCLPY, POLYBAG, process, ros2_env, wait_ready

pytestmark = NEEDS_RCLPY

TOPIC = "/qos_growth_plain_mcap"

# an rclpy publisher of std_msgs/String on TOPIC (reliable, DURABILITY, DEPTH, node NAME):
# waits (at most 60 s) for a subscriber, publishes 3, says "ready", then one every PERIOD s
# (0: no more) and spins until killed
_PUBLISHER = textwrap.dedent(
    """
    import sys, time
    import rclpy
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import String

    topic, name, durability, depth, period = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
    rclpy.init()
    node = rclpy.create_node(name)
    dur = DurabilityPolicy.TRANSIENT_LOCAL if durability == "transient_local" else DurabilityPolicy.VOLATILE
    qos = QoSProfile(depth=depth, durability=dur, reliability=ReliabilityPolicy.RELIABLE)
    pub = node.create_publisher(String, topic, qos)
    end = time.monotonic() + 60
    while time.monotonic() < end and not pub.get_subscription_count():
        rclpy.spin_once(node, timeout_sec=0.05)
    count = [0]

    def send():
        pub.publish(String(data=f"{name}:{count[0]}"))
        count[0] += 1

    for _ in range(3):
        send()
    print("ready", file=sys.stderr, flush=True)
    if period > 0:
        node.create_timer(period, send)
    rclpy.spin(node)
    """
)
FIRST, SECOND = "polybag_qospm_first", "polybag_qospm_second"
_DURABILITY = {1: "transient_local", 2: "volatile"}  # (as numbers up to metadata version 8)


def _publisher(name: str, durability: str, depth: int, period: float, env: dict[str, str]) -> Any:
    return process([sys.executable, "-c", _PUBLISHER, TOPIC, name, durability, str(depth), str(period)], env)


def _wait_for(what: str, check: Callable[[], bool], timeout: float = 90) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():
            return
        time.sleep(0.2)  # (polling a condition, bounded)
    raise AssertionError(f"{what}: not seen within {timeout} s")


def _payloads(path: Path) -> list[bytes]:
    import polybag

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (a file being written: "did not close")
        with polybag.open(path, format="mcap") as r:
            return [bytes(m.data) for m in r.messages(topics=[TOPIC])]


def _collect(stream: Any, into: list[str]) -> threading.Thread:
    def read() -> None:
        for line in iter(stream.readline, ""):
            into.append(line)

    t = threading.Thread(target=read, daemon=True)
    t.start()
    return t


def _received(out: list[str]) -> int:
    """The messages of TOPIC the recorder received, as its last --json-stats line says."""
    for line in reversed(list(out)):
        if line.startswith('{"time"'):
            t = json.loads(line)["topics"].get(TOPIC)
            return 0 if t is None else int(t["received"])
    return 0


def test_a_plain_mcap_recording_lists_every_publishers_qos(tmp_path: Path) -> None:
    env = ros2_env()
    out = tmp_path / "x.mcap"
    args = [*POLYBAG, "record", "--ros2", TOPIC, "-O", str(out), "--json", "--json-stats", "0.2"]
    with process(args, env) as rec:
        lines: list[str] = []
        err: list[str] = []
        readers = [_collect(rec.stdout, lines), _collect(rec.stderr, err)]
        with _publisher(FIRST, "volatile", 7, 0.05, env) as first:
            wait_ready(first, 90)  # the recorder subscribed to it
            _wait_for("the first publisher's messages", lambda: _received(lines) >= 5)
        # the first publisher is gone (killed); the second starts, with another QoS
        before = _received(lines)
        with _publisher(SECOND, "transient_local", 3, 0.05, env) as later:
            wait_ready(later, 90)
            # (far more than the first could still have had in flight) messages of the second
            # received: the recorder has discovered it, its offered QoS with it
            _wait_for("messages of the second publisher", lambda: _received(lines) >= before + 20)
            assert rec.poll() is None, "".join(err)
            rec.send_signal(signal.SIGINT)
            rec.wait(60)
        for r in readers:
            r.join(30)
    assert rec.returncode == 0, "".join(err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.mcap"]  # no .active or temporary file left
    mine = _payloads(out)
    assert sum(FIRST.encode() in d for d in mine) >= 5 and sum(SECOND.encode() in d for d in mine) >= 10
    from mcap.reader import make_reader

    with out.open("rb") as f:  # the mcap library reads it: every message, the channel lists both
        rd = make_reader(f)
        lib = [bytes(m.data) for _s, ch, m in rd.iter_messages() if ch.topic == TOPIC]
        summary = rd.get_summary()
        assert summary is not None
        chans = [c for c in summary.channels.values() if c.topic == TOPIC]
    assert sorted(lib) == sorted(mine)
    assert chans, "no channel for the topic"
    for ch in chans:
        profiles = yaml.safe_load(ch.metadata["offered_qos_profiles"])
        # (the depth is not discovered: rosbag2 too lists "depth: 0"; the durability is)
        got = sorted(_DURABILITY.get(p["durability"], str(p["durability"])) for p in profiles)
        assert got == ["transient_local", "volatile"], ch.metadata["offered_qos_profiles"]
