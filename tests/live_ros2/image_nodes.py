"""An rclpy image subscriber for the live large-message playback test (run as a subprocess).

``python image_nodes.py images TOPIC N SECONDS IDLE``: subscribes (reliable, volatile, depth
1000, raw: empty samples are counted, not thrown by the CDR reader) to TOPIC
(sensor_msgs/msg/Image) and prints, as JSON, the frames it got intact (width x height rgb8,
``header.frame_id`` ``f<i>`` and the data :func:`pattern` of ``i``), the number of
zero-length and of other invalid samples, once it has N intact frames, or IDLE seconds after
the last sample, or SECONDS after it started.

``python image_nodes.py image_pub TOPIC N HZ``: once a subscriber matched (bounded), publishes
N such frames (reliable, keep_last N) at HZ, waits until every subscriber acknowledged them
(bounded) and prints ``{"sent": N, "acked": bool}``.
"""

import json
import sys
import time

W, H = 640, 480


def pattern(i: int) -> bytes:
    """The image data of frame ``i``: its index (4 bytes, little endian) then a ramp from it."""
    import numpy as np

    a = (np.arange(W * H * 3, dtype=np.uint32) + i).astype(np.uint8)
    a[:4] = np.frombuffer(i.to_bytes(4, "little"), dtype=np.uint8)
    return a.tobytes()


def images(topic: str, n: int, seconds: float, idle: float) -> None:
    import rclpy
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
    from rclpy.serialization import deserialize_message
    from sensor_msgs.msg import Image

    rclpy.init()
    node = rclpy.create_node("polybag_test_images")
    frames: set[int] = set()
    stats = {"samples": 0, "empty": 0, "invalid": 0, "duplicate": 0}
    last = [time.monotonic()]

    def on_raw(raw: bytes) -> None:
        last[0] = time.monotonic()
        stats["samples"] += 1
        if not raw:
            stats["empty"] += 1
            return
        try:
            m = deserialize_message(raw, Image)
            i = int(m.header.frame_id[1:]) if m.header.frame_id.startswith("f") else -1
            ok = (
                m.width == W
                and m.height == H
                and m.encoding == "rgb8"
                and m.step == W * 3
                and i >= 0
                and bytes(m.data) == pattern(i)
            )
        except Exception:  # noqa: BLE001 - any unreadable sample counts as invalid
            ok = False
        if not ok:
            stats["invalid"] += 1
        elif i in frames:
            stats["duplicate"] += 1
        else:
            frames.add(i)

    qos = QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=1000,
        reliability=ReliabilityPolicy.RELIABLE,
        durability=DurabilityPolicy.VOLATILE,
    )
    node.create_subscription(Image, topic, on_raw, qos, raw=True)
    print("ready", file=sys.stderr, flush=True)
    end = time.monotonic() + seconds
    while time.monotonic() < end and len(frames) < n:
        if stats["samples"] and time.monotonic() - last[0] > idle:
            break
        rclpy.spin_once(node, timeout_sec=0.05)
    print(json.dumps({"frames": sorted(frames), **stats}), flush=True)
    node.destroy_node()
    rclpy.shutdown()


def image_pub(topic: str, n: int, hz: float) -> None:
    import numpy as np
    import rclpy
    from rclpy.duration import Duration
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import Image

    rclpy.init()
    node = rclpy.create_node("polybag_test_image_pub")
    qos = QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=n,
        reliability=ReliabilityPolicy.RELIABLE,
        durability=DurabilityPolicy.VOLATILE,
    )
    pub = node.create_publisher(Image, topic, qos)
    print("ready", file=sys.stderr, flush=True)
    end = time.monotonic() + 60
    while time.monotonic() < end and not pub.get_subscription_count():
        time.sleep(0.05)
    start = time.monotonic()
    for i in range(n):
        due = start + i / hz
        while time.monotonic() < due:  # (the camera's rate)
            time.sleep(max(0.0, min(0.01, due - time.monotonic())))
        m = Image()
        m.header.frame_id = f"f{i}"
        m.height, m.width, m.encoding, m.step = H, W, "rgb8", W * 3
        m.data = np.frombuffer(pattern(i), dtype=np.uint8)
        pub.publish(m)
    acked = pub.wait_for_all_acked(Duration(seconds=120))
    print(json.dumps({"sent": n, "acked": bool(acked)}), flush=True)
    node.destroy_node()
    rclpy.shutdown()


if __name__ == "__main__":
    mode, *rest = sys.argv[1:]
    if mode == "images":
        images(rest[0], int(rest[1]), float(rest[2]), float(rest[3]))
    elif mode == "image_pub":
        image_pub(rest[0], int(rest[1]), float(rest[2]))
    else:
        raise SystemExit(f"unknown mode {mode!r}")
