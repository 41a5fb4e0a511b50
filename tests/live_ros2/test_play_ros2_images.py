"""``polybag play --ros2`` of camera-sized messages (640x480 rgb8 sensor_msgs/Image, 921,648
bytes, 30 Hz) into a real rclpy subscriber (Fast DDS): every frame intact, no empty samples.

Without polybag's Cyclone fragmentation settings (graph.cyclone_config) Fast DDS delivered
thousands of zero-length samples and lost most frames (issue 28).
"""

import sys
from pathlib import Path

import pytest
from ros2_graph import (
    NEEDS_RCLPY,
    POLYBAG,
    finish,
    last_json,
    process,
    ros2_env,
    wait_ready,
)

pytestmark = NEEDS_RCLPY

NODES = Path(__file__).with_name("image_nodes.py")
N = 90
T0 = 1_700_000_000_000_000_000
RELIABLE = "- history: keep_last\n  depth: 10\n  reliability: reliable\n  durability: volatile\n"


def make_image_bag(path: Path, n: int, fmt: str = "mcap", hz: float = 30.0) -> int:
    """A bag of ``n`` 640x480 rgb8 images on /camera at ``hz`` (frame ``i``: frame_id ``f<i>``,
    data ``image_nodes.pattern(i)``); returns the size of one serialized message."""
    import numpy as np
    from image_nodes import H, W, pattern
    from rosbags.typesys import Stores, get_typestore

    import polybag
    from polybag.codecs.ros2 import definition_for

    store = get_typestore(Stores.ROS2_JAZZY)
    Image = store.types["sensor_msgs/msg/Image"]
    Header = store.types["std_msgs/msg/Header"]
    Time = store.types["builtin_interfaces/msg/Time"]
    kw = {"profile": "ros2"} if fmt == "mcap" else {}
    size = 0
    with polybag.Writer(str(path), format=fmt, **kw) as w:
        s = w.add_schema("sensor_msgs/msg/Image", "ros2msg", definition_for("sensor_msgs/msg/Image").encode())
        c = w.add_channel("/camera", "cdr", s, {"offered_qos_profiles": RELIABLE})
        for i in range(n):
            t = T0 + int(i * 1e9 / hz)
            m = Image(
                header=Header(stamp=Time(sec=t // 10**9, nanosec=t % 10**9), frame_id=f"f{i}"),
                height=H,
                width=W,
                encoding="rgb8",
                is_bigendian=0,
                step=W * 3,
                data=np.frombuffer(pattern(i), dtype=np.uint8),
            )
            data = bytes(store.serialize_cdr(m, "sensor_msgs/msg/Image"))
            size = len(data)
            w.write(c, data, t, t)
    return size


def play_images(bag: Path, n: int, env: dict[str, str], idle: float = 20) -> dict:
    """Play ``bag`` into the rclpy image subscriber; its JSON report."""
    with process([sys.executable, str(NODES), "images", "/camera", str(n), "600", str(idle)], env) as sub:
        wait_ready(sub)
        with process([*POLYBAG, "play", "--ros2", "--wait-for-subscribers", str(bag)], env) as play:
            code, _o, err = finish(play, 600)
            assert code == 0, err
        _code, out, err = finish(sub, 600)
    assert out.strip(), err
    return last_json(out)


@pytest.mark.parametrize("fmt", ["mcap", "rosbag2"])
def test_play_images_into_rclpy_every_frame_intact(tmp_path: Path, fmt: str) -> None:
    bag = tmp_path / ("bag.mcap" if fmt == "mcap" else "bag")
    assert make_image_bag(bag, N, fmt) == 921_648
    got = play_images(bag, N, ros2_env())
    assert got["empty"] == 0, got["empty"]
    assert got["invalid"] == 0, got["invalid"]
    assert got["frames"] == list(range(N)), f"{len(got['frames'])} of {N} frames: {got}"


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_record_images_from_rclpy_every_frame_intact(tmp_path: Path, storage: str) -> None:
    """A Fast DDS publisher of camera frames into ``polybag record --ros2``: every frame."""
    from image_nodes import pattern
    from ros2_graph import stop_recorder
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_typestore

    env = ros2_env()
    out = tmp_path / "rec"
    rec_args = [*POLYBAG, "record", "--ros2", "/camera", "-O", str(out), "--storage", storage, "--json"]
    with process([sys.executable, str(NODES), "image_pub", "/camera", str(N), "30"], env) as pub:
        wait_ready(pub)
        with process(rec_args, env) as rec:
            _c, pub_out, pub_err = finish(pub, 300)
            sent = last_json(pub_out) if pub_out.strip() else pub_err
            code, _report, err = stop_recorder(rec, 120)
    assert sent == {"sent": N, "acked": True}, sent
    assert code == 0, err
    store = get_typestore(Stores.ROS2_JAZZY)
    frames = []
    with Reader(out) as r:
        for conn, _t, raw in r.messages():
            assert conn.topic == "/camera"
            m = store.deserialize_cdr(raw, conn.msgtype)
            i = int(m.header.frame_id[1:])
            assert (m.width, m.height, m.encoding) == (640, 480, "rgb8")
            assert bytes(m.data) == pattern(i), i
            frames.append(i)
    assert frames == list(range(N)), f"{len(frames)} of {N}: {frames}"
