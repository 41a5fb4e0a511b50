"""rclpy nodes for the live playback tests of latched topics (run as subprocesses).

``python play_nodes.py late_latched GO TOPIC N SECONDS``: subscribes to GO
(std_msgs/msg/String, reliable, volatile); once a message comes there it subscribes
(transient_local, reliable, depth 100 as tf2's static listener) to TOPIC
(geometry_msgs/msg/TransformStamped: tf2_msgs is not packaged for pip) and prints, as JSON,
the child frame ids it got once it has N of them or when SECONDS have passed since it
joined (``{"go": false}`` when GO stayed silent for SECONDS).
"""

import json
import sys
import time


def late_latched(go: str, topic: str, n: int, seconds: float) -> None:
    import rclpy
    from geometry_msgs.msg import TransformStamped
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import String

    rclpy.init()
    node = rclpy.create_node("polybag_test_late_latched")
    went: list[str] = []
    node.create_subscription(
        String,
        go,
        lambda m: went.append(m.data),
        QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE),
    )
    print("ready", file=sys.stderr, flush=True)
    end = time.monotonic() + seconds
    while time.monotonic() < end and not went:
        rclpy.spin_once(node, timeout_sec=0.05)
    if not went:
        print(json.dumps({"go": False}), flush=True)
        return
    got: list[str] = []
    node.create_subscription(
        TransformStamped,
        topic,
        lambda m: got.append(m.child_frame_id),
        QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL),
    )
    end = time.monotonic() + seconds
    while time.monotonic() < end and len(got) < n:
        rclpy.spin_once(node, timeout_sec=0.05)
    print(json.dumps({"go": True, "got": got}), flush=True)
    node.destroy_node()
    rclpy.shutdown()


if __name__ == "__main__":
    mode, *rest = sys.argv[1:]
    if mode == "late_latched":
        late_latched(rest[0], rest[1], int(rest[2]), float(rest[3]))
    else:
        raise SystemExit(f"unknown mode {mode!r}")
