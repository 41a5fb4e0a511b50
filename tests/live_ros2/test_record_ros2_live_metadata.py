"""``polybag record --ros2`` into a sqlite3 rosbag2 bag with real rclpy publishers (Fast DDS):
the QoS profile of every publisher of a topic is recorded, also of one that appears after the
recording began (issue 28: sqlite3 bags listed only the first), and metadata.yaml is in the
``.active`` directory while it records (refreshed: a killed recording opens as it is)."""

from __future__ import annotations

import signal
import sqlite3
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest
import yaml
from ros2_graph import (
    NEEDS_RCLPY,
    POLYBAG,
    process,
    ros2_env,
    stop_recorder,
    wait_ready,
)

pytestmark = NEEDS_RCLPY

TOPIC = "/qos_topic"

# an rclpy publisher of std_msgs/String on TOPIC (reliable, DURABILITY, depth 1, node NAME):
# waits (at most 60 s) for a subscriber, publishes, says "ready", then keeps publishing every
# PERIOD s (0: never) and spins until killed
_PUBLISHER = textwrap.dedent(
    """
    import sys, time
    import rclpy
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import String

    topic, name, durability, period = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    rclpy.init()
    node = rclpy.create_node(name)
    dur = DurabilityPolicy.TRANSIENT_LOCAL if durability == "transient_local" else DurabilityPolicy.VOLATILE
    qos = QoSProfile(depth=1, durability=dur, reliability=ReliabilityPolicy.RELIABLE)
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


def _publisher(name: str, durability: str, period: float, env: dict[str, str]) -> object:
    return process([sys.executable, "-c", _PUBLISHER, TOPIC, name, durability, str(period)], env)


#: metadata.yaml (version 8) spells durability as a number
_DURABILITY = {1: "transient_local", 2: "volatile"}


def _durabilities(qos_text: str) -> list[str]:
    return sorted(_DURABILITY.get(int(p["durability"]), "?") for p in yaml.safe_load(qos_text) or [])


def _wait_for(what: str, check: object, timeout: float = 90) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.1)  # (polling a condition, bounded)
    raise AssertionError(f"{what}: not seen within {timeout} s")


def _active_profiles(active: Path) -> list[str]:
    try:
        meta = yaml.safe_load((active / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    except (OSError, yaml.YAMLError, TypeError, KeyError):
        return []
    for t in meta.get("topics_with_message_count") or []:
        if t["topic_metadata"]["name"] == TOPIC:
            return _durabilities(str(t["topic_metadata"]["offered_qos_profiles"]))
    return []


@pytest.mark.parametrize("first_durability", ["transient_local", "volatile"])
def test_qos_of_a_later_publisher_is_recorded_in_sqlite3(tmp_path: Path, first_durability: str) -> None:
    """Two publishers, the second (transient_local) appearing during the recording: with the
    first's profile (two /tf_static broadcasters: listed twice, as rosbag2 lists them) or after
    a volatile one (another profile; both recordable by the reader made for the first)."""
    from rosbags.rosbag2 import Reader

    second = "transient_local"
    want = sorted([first_durability, second])

    env = ros2_env()
    out = tmp_path / "rec"
    active = tmp_path / "rec.active"
    args = [*POLYBAG, "record", "--ros2", TOPIC, "-O", str(out), "--storage", "sqlite3", "--json"]
    with process(args, env) as rec:
        with _publisher("polybag_qos_first", first_durability, 0.05, env) as first:  # (keeps publishing)
            wait_ready(first, 90)  # the recorder subscribed to it
            _wait_for("the first profile in the live metadata.yaml", lambda: _active_profiles(active) == [first_durability])
            with _publisher("polybag_qos_second", second, 0.0, env) as later:
                wait_ready(later, 90)
                # metadata.yaml of the recording in progress lists both (refreshed as it goes)
                _wait_for("both profiles in the live metadata.yaml", lambda: _active_profiles(active) == want)
                code, _report, err = stop_recorder(rec, 60)
    assert code == 0, err
    meta = yaml.safe_load((out / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    (topic,) = [t for t in meta["topics_with_message_count"] if t["topic_metadata"]["name"] == TOPIC]
    assert _durabilities(topic["topic_metadata"]["offered_qos_profiles"]) == want
    assert topic["message_count"] >= 6
    (db,) = out.glob("*.db3")
    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT offered_qos_profiles FROM topics WHERE name = ?", (TOPIC,)).fetchall()
    finally:
        con.close()
    assert [_durabilities(r[0]) for r in rows] == [want]
    with Reader(out) as r:
        (conn,) = [c for c in r.connections if c.topic == TOPIC]
        assert sorted(p.durability.name.lower() for p in conn.ext.offered_qos_profiles) == want


def test_a_killed_recording_opens_as_it_is(tmp_path: Path) -> None:
    """SIGKILL the recorder: ``rec.active/`` opens as it is (polybag warns, rosbags reads it)."""
    from rosbags.rosbag2 import Reader

    import polybag

    env = ros2_env()
    out = tmp_path / "rec"
    active = tmp_path / "rec.active"
    args = [*POLYBAG, "record", "--ros2", TOPIC, "-O", str(out), "--storage", "sqlite3"]
    with process(args, env) as rec, _publisher("polybag_qos_pub", "volatile", 0.01, env) as pub:
        wait_ready(pub, 90)

        def recorded() -> bool:
            meta = active / "metadata.yaml"
            if not meta.exists():
                return False
            info = yaml.safe_load(meta.read_text())["rosbag2_bagfile_information"]
            return int(info["message_count"]) >= 20

        _wait_for("20 messages in the live metadata.yaml", recorded)
        rec.send_signal(signal.SIGKILL)
        rec.wait(30)
    assert not out.exists() and active.is_dir()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with polybag.open(active) as r:
            texts = [bytes(m.data) for m in r.messages(TOPIC)]
            assert r.summary.message_count == len(texts) >= 20
    assert any("did not close" in str(w.message) for w in caught)
    with Reader(active) as rr:
        assert sum(1 for _ in rr.messages()) == len(texts)
