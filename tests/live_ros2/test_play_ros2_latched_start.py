"""``polybag play --ros2`` into real rclpy nodes (Fast DDS): every latched message reaches a
late joiner, and subscribers already running get the first messages with default flags."""

import subprocess
import sys
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

pytestmark = NEEDS_RCLPY

PLAY_NODES = Path(__file__).with_name("play_nodes.py")
T0 = 1_700_000_000_000_000_000
LATCHED_1 = "- history: keep_last\n  depth: 1\n  reliability: reliable\n  durability: transient_local\n"
RELIABLE = "- history: keep_last\n  depth: 10\n  reliability: reliable\n  durability: volatile\n"
N = 30


def _latched_bag(path: Path) -> list[str]:
    """A rosbag2 bag written by polybag: two latched TransformStamped on /frames_static (as
    two /tf_static broadcasters: two transient_local depth-1 publishers in the offered QoS),
    then /go messages."""
    from rosbags.typesys import Stores, get_typestore

    import polybag
    from polybag.codecs.ros2 import definition_for

    store = get_typestore(Stores.ROS2_JAZZY)
    TS = store.types["geometry_msgs/msg/TransformStamped"]
    Header = store.types["std_msgs/msg/Header"]
    Time = store.types["builtin_interfaces/msg/Time"]
    Transform = store.types["geometry_msgs/msg/Transform"]
    Vec = store.types["geometry_msgs/msg/Vector3"]
    Quat = store.types["geometry_msgs/msg/Quaternion"]
    String = store.types["std_msgs/msg/String"]
    frames = ["camera", "lidar"]
    with polybag.Writer(str(path), format="rosbag2") as w:
        s_ts = w.add_schema(
            "geometry_msgs/msg/TransformStamped",
            "ros2msg",
            definition_for("geometry_msgs/msg/TransformStamped").encode(),
        )
        s_str = w.add_schema("std_msgs/msg/String", "ros2msg", definition_for("std_msgs/msg/String").encode())
        c_tf = w.add_channel("/frames_static", "cdr", s_ts, {"offered_qos_profiles": LATCHED_1 + LATCHED_1})
        c_go = w.add_channel("/go", "cdr", s_str, {"offered_qos_profiles": RELIABLE})
        for i, child in enumerate(frames):
            m = TS(
                header=Header(stamp=Time(sec=1, nanosec=0), frame_id="base_link"),
                child_frame_id=child,
                transform=Transform(
                    translation=Vec(x=float(i), y=0.0, z=0.0), rotation=Quat(x=0.0, y=0.0, z=0.0, w=1.0)
                ),
            )
            t = T0 + i * 10_000_000
            w.write(c_tf, bytes(store.serialize_cdr(m, "geometry_msgs/msg/TransformStamped")), t, t)
        for i in range(20):
            t = T0 + (i + 2) * 50_000_000
            w.write(c_go, bytes(store.serialize_cdr(String(data=f"go {i}"), "std_msgs/msg/String")), t, t)
    return frames


def test_late_transient_local_subscriber_gets_every_latched_message(tmp_path: Path) -> None:
    bag = tmp_path / "latched"
    frames = _latched_bag(bag)
    env = ros2_env()
    late = subprocess.Popen(
        [sys.executable, str(PLAY_NODES), "late_latched", "/go", "/frames_static", str(len(frames)), "60"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        wait_ready(late)
        # -k: the writers stay after the end, as a broadcaster stays up
        with process([*POLYBAG, "play", "--ros2", "-k", str(bag)], env) as play:
            code, out, err = finish(late, 120)
            assert play.poll() is None, f"play ended under -k: {play.returncode}"
    finally:
        if late.poll() is None:
            late.kill()
            late.communicate(timeout=10)
    got = last_json(out)
    assert got["go"], f"the late subscriber never saw /go: {err[-2000:]}"
    # both broadcasters' transforms, as from the live graph (not only the last one)
    assert sorted(got["got"]) == frames, got


def _rounds_bag(path: Path) -> list[str]:
    from test_play_ros2 import _make_bag

    texts, _ = _make_bag(path)
    return texts


def test_running_subscriber_gets_the_first_messages_with_default_flags(tmp_path: Path) -> None:
    bag = tmp_path / "bag"
    texts = _rounds_bag(bag)
    env = ros2_env()
    with node("listener", N, 60, N, env=env) as lis:
        wait_ready(lis)
        # default flags: no --wait-for-subscribers (the subscriber is already running)
        with process([*POLYBAG, "play", "--ros2", str(bag)], env) as play:
            code, _o, err = finish(play, 90)
            assert code == 0, err
        code, out, _ = finish(lis, 90)
    got = last_json(out)
    lost = [t for t in texts if t not in got["/chatter"]]
    assert not lost, f"lost at playback start: {len(lost)} of {len(texts)}: {lost[:5]}"
    assert got["/chatter"] == texts
