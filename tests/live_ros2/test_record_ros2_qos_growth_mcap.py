"""``polybag record --ros2 --storage mcap`` with two real rclpy publishers of one topic, the
second (another QoS profile) starting during the recording (issue 28): rosbags, which matches
each MCAP channel with metadata.yaml's topic (QoS profiles included), reads every message of
both -- in the closed bag (both profiles listed, the file rewritten at close so that its
channel lists them too) and in a killed one (metadata.yaml lists the profile the channel holds)."""

from __future__ import annotations

import signal
import warnings
from pathlib import Path

import pytest
import yaml
from record_helpers import listed_durabilities, string_publisher, wait_for
from ros2_graph import NEEDS_RCLPY, POLYBAG, process, ros2_env, stop_recorder, wait_ready

pytestmark = NEEDS_RCLPY

TOPIC = "/qos_growth_mcap"

FIRST, SECOND = "polybag_qosg_first", "polybag_qosg_second"


def _publisher(name: str, durability: str, period: float, env: dict[str, str]) -> object:
    return string_publisher(TOPIC, name, env, durability=durability, period=period)


def _polybag_payloads(bag: Path) -> list[bytes]:
    import polybag

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (a bag being written: "did not close")
        with polybag.open(bag) as r:
            return [bytes(m.data) for m in r.messages(topics=[TOPIC])]


def _second_recorded(active: Path) -> bool:
    """The recording in progress holds messages of the second publisher (in finished chunks)."""
    try:
        return any(SECOND.encode() in d for d in _polybag_payloads(active))
    except Exception:  # noqa: BLE001 - a bag being written may not open at every moment
        return False


def _rosbags(bag: Path) -> tuple[list[bytes], list[str]]:
    from rosbags.rosbag2 import Reader

    with Reader(bag) as rr:
        (conn,) = [c for c in rr.connections if c.topic == TOPIC]
        profiles = sorted(p.durability.name.lower() for p in conn.ext.offered_qos_profiles)
        return [bytes(raw) for _c, _t, raw in rr.messages(connections=[conn])], profiles


@pytest.mark.parametrize("end", ["closed", "killed"])
def test_a_later_publisher_with_another_qos_reads_in_rosbags(tmp_path: Path, end: str) -> None:
    env = ros2_env()
    out = tmp_path / "rec"
    active = tmp_path / "rec.active"
    args = [*POLYBAG, "record", "--ros2", TOPIC, "-O", str(out), "--storage", "mcap", "--json"]
    with process(args, env) as rec:
        with _publisher(FIRST, "volatile", 0.05, env) as first:  # (keeps publishing)
            wait_ready(first, 90)  # the recorder subscribed to it
            wait_for("the first profile in the live metadata.yaml", lambda: listed_durabilities(active, TOPIC) == ["volatile"])
            with _publisher(SECOND, "transient_local", 0.05, env) as later:
                wait_ready(later, 90)
                wait_for("the second publisher's messages in the recording", lambda: _second_recorded(active))
                # the recording in progress lists the profile its MCAP channel holds
                assert listed_durabilities(active, TOPIC) == ["volatile"]
                if end == "killed":
                    rec.send_signal(signal.SIGKILL)
                    rec.wait(30)
                else:
                    code, _report, err = stop_recorder(rec, 60)
                    assert code == 0, err
    bag = active if end == "killed" else out
    assert bag.is_dir() and not (out if end == "killed" else active).exists()
    mine = _polybag_payloads(bag)
    assert sum(FIRST.encode() in d for d in mine) >= 3 and sum(SECOND.encode() in d for d in mine) >= 3
    got, profiles = _rosbags(bag)
    assert sorted(got) == sorted(mine)  # rosbags reads every message polybag does, of both publishers
    if end == "closed":
        assert listed_durabilities(out, TOPIC) == ["transient_local", "volatile"] == profiles
        from mcap.reader import make_reader

        (mcap_file,) = out.glob("*.mcap")
        with mcap_file.open("rb") as f:  # the mcap library reads it; the channel lists both too
            rd = make_reader(f)
            assert sum(1 for _ in rd.iter_messages()) == len(mine)
            summary = rd.get_summary()
            assert summary is not None
            (ch,) = [c for c in summary.channels.values() if c.topic == TOPIC]
            assert len(yaml.safe_load(ch.metadata["offered_qos_profiles"])) == 2
        assert sorted(p.name for p in out.iterdir()) == sorted(["metadata.yaml", mcap_file.name])
    else:
        assert profiles == ["volatile"]
