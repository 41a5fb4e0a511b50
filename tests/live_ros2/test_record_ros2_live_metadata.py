"""``polybag record --ros2`` into a sqlite3 rosbag2 bag with real rclpy publishers (Fast DDS):
the QoS profile of every publisher of a topic is recorded, also of one that appears after the
recording began (issue 28: sqlite3 bags listed only the first), and metadata.yaml is in the
``.active`` directory while it records (refreshed: a killed recording opens as it is)."""

from __future__ import annotations

import signal
import sqlite3
import warnings
from pathlib import Path

import pytest
import yaml
from record_helpers import durabilities, listed_durabilities, string_publisher, wait_for
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

def _publisher(name: str, durability: str, period: float, env: dict[str, str]) -> object:
    return string_publisher(TOPIC, name, env, durability=durability, period=period)


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
            wait_for("the first profile in the live metadata.yaml", lambda: listed_durabilities(active, TOPIC) == [first_durability])
            with _publisher("polybag_qos_second", second, 0.0, env) as later:
                wait_ready(later, 90)
                # metadata.yaml of the recording in progress lists both (refreshed as it goes)
                wait_for("both profiles in the live metadata.yaml", lambda: listed_durabilities(active, TOPIC) == want)
                code, _report, err = stop_recorder(rec, 60)
    assert code == 0, err
    meta = yaml.safe_load((out / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    (topic,) = [t for t in meta["topics_with_message_count"] if t["topic_metadata"]["name"] == TOPIC]
    assert durabilities(topic["topic_metadata"]["offered_qos_profiles"]) == want
    assert topic["message_count"] >= 6
    (db,) = out.glob("*.db3")
    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT offered_qos_profiles FROM topics WHERE name = ?", (TOPIC,)).fetchall()
    finally:
        con.close()
    assert [durabilities(r[0]) for r in rows] == [want]
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

        wait_for("20 messages in the live metadata.yaml", recorded)
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
