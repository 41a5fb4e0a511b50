"""``polybag play --ros2 --rate-control-topic``: playback holds while the topic's header stamps
lag more than ``--rate-control-max-delay`` behind the bag time (a real rclpy node publishes
the stamps and counts what is played)."""

from __future__ import annotations

from pathlib import Path

from ros2_graph import (
    NEEDS_RCLPY,
    POLYBAG,
    finish,
    last_json,
    node,
    process,
    ros2_env,
    wait_ready,
)

from polybag.play.ros2_sink import header_stamp

pytestmark = NEEDS_RCLPY

N = 30
T0 = 1_700_000_000_000_000_000
STEP = 100_000_000  # 0.1 s between messages
RELIABLE = "- history: keep_last\n  depth: 10\n  reliability: reliable\n  durability: volatile\n"


def _bag(path: Path) -> list[str]:
    from rosbags.typesys import Stores, get_typestore

    import polybag
    from polybag.codecs.ros2 import definition_for

    store = get_typestore(Stores.ROS2_JAZZY)
    String = store.types["std_msgs/msg/String"]
    texts = []
    with polybag.Writer(str(path), format="rosbag2") as w:
        s = w.add_schema("std_msgs/msg/String", "ros2msg", definition_for("std_msgs/msg/String").encode())
        c = w.add_channel("/chatter", "cdr", s, {"offered_qos_profiles": RELIABLE})
        for i in range(N):
            texts.append(f"m{i}")
            w.write(
                c,
                bytes(store.serialize_cdr(String(data=texts[-1]), "std_msgs/msg/String")),
                T0 + i * STEP,
                T0 + i * STEP,
            )
    return texts


def test_header_stamp_of_cdr() -> None:
    le = b"\x00\x01\x00\x00" + (7).to_bytes(4, "little") + (9).to_bytes(4, "little")
    be = b"\x00\x00\x00\x00" + (7).to_bytes(4, "big") + (9).to_bytes(4, "big")
    assert header_stamp(le) == header_stamp(be) == 7_000_000_009
    assert header_stamp(le[:11]) is None and header_stamp(b"\x00\x07" + le[2:]) is None


def test_rate_control_topic_holds_playback_until_the_stamps_catch_up(tmp_path: Path) -> None:
    texts = _bag(tmp_path / "bag")
    env = ros2_env()
    # stamps at T0 + 1 s, max delay 0.5 s: messages up to T0 + 1.5 s (16) play, then playback holds
    args = [
        *POLYBAG, "play", "--ros2", "-q", "-d", "2", "--wait-for-subscribers", "--rate-control-topic", "/ack",
        "--rate-control-max-delay", "0.5", str(tmp_path / "bag"),
    ]  # fmt: skip
    with node("rate_control", "/chatter", "/ack", N, T0 + 10 * STEP, T0 + 1000 * STEP, env=env) as rc:
        wait_ready(rc)
        with process(args, env) as play:
            code, _o, err = finish(rc, 90)
            assert code == 0, err
            pcode, _out, perr = finish(play, 60)
    assert pcode == 0, perr
    got = last_json(_o)
    assert got["held_at"] == 16, got
    assert got["got"] == texts


def test_which_types_carry_a_header_first() -> None:
    from polybag.play.ros2_sink import _starts_with_header

    assert _starts_with_header("sensor_msgs/msg/Imu") is True
    assert _starts_with_header("std_msgs/msg/Header") is True
    assert _starts_with_header("std_msgs/msg/String") is False
    assert _starts_with_header("nobody/msg/Knows") is None
