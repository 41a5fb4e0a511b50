"""``polybag record --ros2``: each message's own receive time (log_time, non-decreasing per
topic) and its source timestamp (publish_time), against a real rclpy publisher at 1 kHz."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from ros2_graph import (
    POLYBAG,
    cyclone_problem,
    finish,
    last_json,
    process,
    rclpy_problem,
    ros2_env,
    stop_recorder,
    wait_ready,
)

pytestmark = pytest.mark.skipif(bool(cyclone_problem()), reason=cyclone_problem() or "cyclonedds")
needs_rclpy = pytest.mark.skipif(bool(rclpy_problem()), reason=rclpy_problem() or "rclpy")

STAMP_NODES = Path(__file__).with_name("stamp_nodes.py")
N = 3000
HZ = 1000


def _mcap_messages(out: Path, topic: str) -> list[tuple[int, int, int]]:
    """``(frame index, log_time, publish_time)`` of ``topic``'s messages, in file order."""
    from mcap.reader import make_reader
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_JAZZY)
    got = []
    for f in sorted(out.glob("*.mcap")):
        with f.open("rb") as fh:
            for _schema, channel, message in make_reader(fh).iter_messages(log_time_order=False):
                if channel.topic == topic:
                    msg = store.deserialize_cdr(message.data, "sensor_msgs/msg/Imu")
                    got.append((int(msg.header.frame_id), message.log_time, message.publish_time))
    return got


def equal_share(log_times: list[int]) -> float:
    pairs = list(zip(log_times, log_times[1:]))
    return sum(a == b for a, b in pairs) / max(1, len(pairs))


def record_imu(tmp_path: Path, env: dict[str, str]) -> tuple[list[int], list[tuple[int, int, int]], str]:
    """Record /imu while the rclpy node sends N messages at HZ: its stamps, what was recorded, stderr."""
    out = tmp_path / "rec"
    with process([sys.executable, str(STAMP_NODES), "imu", str(N), str(HZ)], env) as pub:
        wait_ready(pub)
        args = [*POLYBAG, "record", "--ros2", "/imu", "-O", str(out), "--storage", "mcap", "--json"]
        with process(args, env) as rec:
            code, pub_out, pub_err = finish(pub, 120)
            assert code == 0, pub_err
            stamps: list[int] = last_json(pub_out)["stamps"]
            rcode, _report, err = stop_recorder(rec)
            assert rcode == 0, err
    return stamps, _mcap_messages(out, "/imu"), err


@needs_rclpy
def test_record_ros2_1khz_own_receive_times_and_source_times(tmp_path: Path) -> None:
    env = ros2_env()
    stamps, got, err = record_imu(tmp_path, env)
    assert [i for i, _, _ in got] == list(range(N)), f"not every message, in order: {len(got)} of {N}\n{err}"
    logs = [t for _, t, _ in got]
    pubs = [p for _, _, p in got]
    # log_time: non-decreasing, and hardly ever shared by consecutive messages (one batch
    # time per take() gave 12-38 % equal pairs at 1 kHz)
    assert all(a <= b for a, b in zip(logs, logs[1:]))
    share = equal_share(logs)
    print(f"equal consecutive log_times: {share:.2%} of {len(logs) - 1}")
    assert share < 0.03, f"{share:.2%} of consecutive log_times equal"
    # publish_time: the publisher's source timestamp, taken between its stamp and the next one
    bounds = [*stamps[1:], stamps[-1] + 10**9]
    for i, (p, lo, hi) in enumerate(zip(pubs, stamps, bounds)):
        assert lo <= p <= hi, f"message {i}: publish_time {p} not within [{lo}, {hi}]"
    # a message is not received before it is sent (one machine, one clock)
    assert all(t >= p for t, p in zip(logs, pubs))
