"""rclpy nodes for the receive-time and late-type-description tests (run as subprocesses).

``python stamp_nodes.py imu N HZ``: publishes N sensor_msgs/msg/Imu on /imu at HZ (reliable,
depth N), each stamped with the wall clock just before it is published, once /imu has a
subscriber (at most 30 s); prints the stamps (ns) as JSON and stays 1 s for the acknowledgements.
"""

import json
import sys
import time


def imu(n: int, hz: float) -> None:
    import rclpy
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import Imu

    rclpy.init()
    node = rclpy.create_node("polybag_stamp_imu")
    qos = QoSProfile(depth=n, durability=DurabilityPolicy.VOLATILE, reliability=ReliabilityPolicy.RELIABLE)
    pub = node.create_publisher(Imu, "/imu", qos)
    print("ready", file=sys.stderr, flush=True)
    end = time.monotonic() + 30
    while time.monotonic() < end and not pub.get_subscription_count():
        time.sleep(0.02)
    time.sleep(0.3)  # (the subscription's reader matched on both sides)
    period = 1.0 / hz
    stamps = []
    due = time.monotonic()
    for i in range(n):
        due += period
        msg = Imu()
        now = time.time_ns()
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(now, 1_000_000_000)
        msg.header.frame_id = str(i)
        pub.publish(msg)
        stamps.append(now)
        left = due - time.monotonic()
        if left > 0:
            time.sleep(left)
    time.sleep(1.0)
    print(json.dumps({"stamps": stamps}), flush=True)
    node.destroy_node()
    rclpy.shutdown()


if __name__ == "__main__":
    if sys.argv[1] == "imu":
        imu(int(sys.argv[2]), float(sys.argv[3]))
    else:
        raise SystemExit(f"unknown mode {sys.argv[1]}")
