"""``polybag play --ros2`` into a real rclpy subscriber (Fast DDS)."""

from pathlib import Path

import pytest
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

pytestmark = NEEDS_RCLPY

N = 30
T0 = 1_700_000_000_000_000_000
RELIABLE = "- history: keep_last\n  depth: 10\n  reliability: reliable\n  durability: volatile\n"
LATCHED = "- history: keep_last\n  depth: 1\n  reliability: reliable\n  durability: transient_local\n"


def _make_bag(path: Path, chatter: str = "/chatter", fmt: str = "rosbag2") -> tuple[list[str], list[list]]:
    """A bag written by polybag with payloads serialized by rosbags (the peer)."""
    from rosbags.typesys import Stores, get_typestore

    import polybag

    store = get_typestore(Stores.ROS2_JAZZY)
    String = store.types["std_msgs/msg/String"]
    Imu = store.types["sensor_msgs/msg/Imu"]
    Header = store.types["std_msgs/msg/Header"]
    Time = store.types["builtin_interfaces/msg/Time"]
    Quat = store.types["geometry_msgs/msg/Quaternion"]
    Vec = store.types["geometry_msgs/msg/Vector3"]
    import numpy as np

    from polybag.codecs.ros2 import definition_for

    kw = {"profile": "ros2"} if fmt == "mcap" else {}
    texts, imus = [], []
    with polybag.Writer(str(path), format=fmt, **kw) as w:
        s_str = w.add_schema("std_msgs/msg/String", "ros2msg", definition_for("std_msgs/msg/String").encode())
        s_imu = w.add_schema("sensor_msgs/msg/Imu", "ros2msg", definition_for("sensor_msgs/msg/Imu").encode())
        c_chat = w.add_channel(chatter, "cdr", s_str, {"offered_qos_profiles": RELIABLE})
        c_imu = w.add_channel("/imu", "cdr", s_imu, {"offered_qos_profiles": RELIABLE})
        c_lat = w.add_channel("/latched", "cdr", s_str, {"offered_qos_profiles": LATCHED})
        w.write(c_lat, bytes(store.serialize_cdr(String(data="latched!"), "std_msgs/msg/String")), T0, T0)
        for i in range(N):
            t = T0 + (i + 1) * 10_000_000
            text = f"msg {i} é"
            w.write(c_chat, bytes(store.serialize_cdr(String(data=text), "std_msgs/msg/String")), t, t)
            cov = np.arange(9, dtype=np.float64) + i
            m = Imu(
                header=Header(stamp=Time(sec=i, nanosec=3 * i), frame_id=f"f{i}"),
                orientation=Quat(x=0.0, y=0.0, z=0.0, w=float(i)),
                orientation_covariance=np.zeros(9),
                angular_velocity=Vec(x=0.0, y=0.0, z=0.0),
                angular_velocity_covariance=np.zeros(9),
                linear_acceleration=Vec(x=1.0, y=2.0, z=3.0),
                linear_acceleration_covariance=cov,
            )
            w.write(c_imu, bytes(store.serialize_cdr(m, "sensor_msgs/msg/Imu")), t + 1, t + 1)
            texts.append(text)
            imus.append([f"f{i}", i, float(i), [float(x) for x in cov]])
    return texts, imus


@pytest.mark.parametrize("fmt", ["rosbag2", "mcap"])
def test_play_into_rclpy_every_message_in_order(tmp_path: Path, fmt: str) -> None:
    bag = tmp_path / ("bag.mcap" if fmt == "mcap" else "bag")
    texts, imus = _make_bag(bag, fmt=fmt)
    env = ros2_env()
    with node("listener", N, 60, env=env) as lis:
        wait_ready(lis)
        with process(
            [*POLYBAG, "play", "--ros2", "--wait-for-subscribers", "--clock", "-r", "4", str(bag)], env
        ) as play:
            code, out, err = finish(play, 90)
            assert code == 0, err
        code, out, _ = finish(lis, 90)
    got = last_json(out)
    assert got["/chatter"] == texts
    assert got["/imu"] == imus
    assert got["/latched"] == ["latched!"]
    # /clock carried the bag time (best effort: some ticks, inside the bag's range)
    assert got["/clock"] and all(T0 <= c <= T0 + (N + 1) * 10_000_000 for c in got["/clock"])


def test_play_remaps_topic_and_transient_local_reaches_late_subscriber(tmp_path: Path) -> None:
    bag = tmp_path / "bag"
    texts, _ = _make_bag(bag, chatter="/talk")
    env = ros2_env()
    with node("listener", N, 60, env=env) as lis:
        wait_ready(lis)
        args = [*POLYBAG, "play", "--ros2", "--wait-for-subscribers", "-r", "4", str(bag), "/talk:=/chatter"]
        with process(args, env) as play:
            code, _o, err = finish(play, 90)
            assert code == 0, err
        code, out, _ = finish(lis, 90)
    got = last_json(out)
    assert got["/chatter"] == texts
    assert got["/latched"] == ["latched!"]


def test_play_ros1_bag_converted_into_rclpy(tmp_path: Path) -> None:
    from play_helpers import make_bag

    items = [("/latched", T0)] + [("/chatter", T0 + (i + 1) * 10_000_000) for i in range(N)]
    bag = make_bag(tmp_path / "r1.bag", items, latch_topic="/latched")
    env = ros2_env()
    with node("listener", N, 60, 0, env=env) as lis:
        wait_ready(lis)
        args = [
            *POLYBAG,
            "play",
            "--ros2",
            "--wait-for-subscribers",
            "-r",
            "4",
            "--topics",
            "/chatter",
            "/latched",
            str(bag),
        ]
        with process(args, env) as play:
            code, _o, err = finish(play, 90)
            assert code == 0, err
        code, out, _ = finish(lis, 90)
    got = last_json(out)
    assert got["/chatter"] == [f"r1 /chatter {t}" for topic, t in items if topic == "/chatter"]
    assert got["/latched"] == [f"r1 /latched {T0}"]
