"""ROS 2 nodes the live tests run as subprocesses (real rclpy on Fast DDS, or Cyclone DDS).

``python nodes.py talker N``: publishes a transient_local String on /latched at once, waits
(at most 30 s) until /chatter, /imu and /scan have a subscriber, publishes N messages on
each, prints what it published as JSON, stays 1 s for the last acknowledgements.
``python nodes.py listener N SECONDS [N_IMU]``: subscribes to /chatter (reliable), /imu,
/latched (transient_local) and /clock (best effort); prints what it got as JSON once it has N on /chatter and /imu
and the latched one, or when SECONDS pass.
``python nodes.py trigger TOPIC``: one std_msgs/msg/Empty on TOPIC (rclpy) once matched.
``python nodes.py empties TOPIC SECONDS``: counts std_msgs/msg/Empty on TOPIC (rclpy).
``python nodes.py typed N``: an rclpy node ``/ns1/typed_talker`` publishing test_msgs/msg/Arrays
on /arr and test_msgs/msg/BasicTypes on /basic (types polybag does not bundle), and
std_msgs/msg/String on the hidden /_hidden and /vis/_priv/x and on /shown; waits (at most
30 s) for subscribers on /arr and /basic, publishes N of each, prints what it sent as JSON
(``typed N nospin``: never spins, so its type description service never answers).
``python nodes.py rate_control TOPIC ACK N STAMP_NS LATER_NS``: publishes a std_msgs/msg/Header
stamped STAMP_NS on ACK (transient_local), counts the std_msgs/msg/String on TOPIC; once they
stop for 1.5 s it notes how many came (``held_at``) and publishes LATER_NS; prints JSON when
N came (or after 40 s).
``python nodes.py ddspub TOPIC DDS_TYPE RELIABILITY N``: a plain Cyclone DDS writer of a
struct {int32 a; string b;} (no ROS 2 stack), waiting for a reader first (at most 30 s).
"""

import json
import sys
import time
from dataclasses import dataclass

try:  # (the ddspub struct's annotations are resolved in this module)
    from cyclonedds.idl.types import int32
except ImportError:  # pragma: no cover
    int32 = int  # type: ignore[misc]


def _qos(depth: int, latched: bool = False, best_effort: bool = False) -> object:
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    return QoSProfile(
        depth=depth,
        durability=DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE,
        reliability=ReliabilityPolicy.BEST_EFFORT if best_effort else ReliabilityPolicy.RELIABLE,
    )


def talker(n: int) -> None:
    import rclpy
    from sensor_msgs.msg import Imu, LaserScan
    from std_msgs.msg import String

    rclpy.init()
    node = rclpy.create_node("polybag_test_talker")
    latched = node.create_publisher(String, "/latched", _qos(1, latched=True))
    chatter = node.create_publisher(String, "/chatter", _qos(n + 10))
    imu = node.create_publisher(Imu, "/imu", _qos(n + 10))
    scan = node.create_publisher(LaserScan, "/scan", _qos(n + 10, best_effort=True))
    latched.publish(String(data="latched hello"))
    print("ready", file=sys.stderr, flush=True)
    end = time.monotonic() + 30
    while time.monotonic() < end and not all(p.get_subscription_count() for p in (chatter, imu, scan)):
        time.sleep(0.05)
    time.sleep(0.5)  # (discovery of the subscriber's side finishes too)
    out: dict[str, list] = {"/latched": ["latched hello"], "/chatter": [], "/imu": [], "/scan": []}
    for i in range(n):
        s = String(data=f"hello {i} ü")
        chatter.publish(s)
        out["/chatter"].append(s.data)
        m = Imu()
        m.header.frame_id = f"imu{i}"
        m.header.stamp.sec = 100 + i
        m.header.stamp.nanosec = 7 * i
        m.orientation.w = 1.0 + i
        m.angular_velocity.z = -0.5 * i
        m.linear_acceleration_covariance = [float(i + k) for k in range(9)]
        imu.publish(m)
        out["/imu"].append(
            [
                m.header.frame_id,
                m.header.stamp.sec,
                m.orientation.w,
                m.angular_velocity.z,
                list(m.linear_acceleration_covariance),
            ]
        )
        sc = LaserScan()
        sc.header.frame_id = "laser"
        sc.ranges = [float(i)] * (i % 5)
        sc.angle_max = 0.25 * i
        scan.publish(sc)
        out["/scan"].append([sc.angle_max, list(sc.ranges)])
        time.sleep(0.02)
    time.sleep(1.0)
    print(json.dumps(out), flush=True)
    node.destroy_node()
    rclpy.shutdown()


def listener(n: int, seconds: float, n_imu: int | None = None) -> None:
    import rclpy
    from sensor_msgs.msg import Imu
    from std_msgs.msg import String

    rclpy.init()
    node = rclpy.create_node("polybag_test_listener")
    got: dict[str, list] = {"/chatter": [], "/imu": [], "/latched": []}
    node.create_subscription(String, "/chatter", lambda m: got["/chatter"].append(m.data), _qos(1000))
    node.create_subscription(
        Imu,
        "/imu",
        lambda m: got["/imu"].append(
            [m.header.frame_id, m.header.stamp.sec, m.orientation.w, list(m.linear_acceleration_covariance)]
        ),
        _qos(1000),
    )
    node.create_subscription(
        String, "/latched", lambda m: got["/latched"].append(m.data), _qos(1, latched=True)
    )
    from rclpy.qos import qos_profile_sensor_data
    from rosgraph_msgs.msg import Clock

    got["/clock"] = []
    node.create_subscription(
        Clock,
        "/clock",
        lambda m: got["/clock"].append(m.clock.sec * 10**9 + m.clock.nanosec),
        qos_profile_sensor_data,
    )
    print("ready", file=sys.stderr, flush=True)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        rclpy.spin_once(node, timeout_sec=0.05)
        if (
            len(got["/chatter"]) >= n
            and len(got["/imu"]) >= (n if n_imu is None else n_imu)
            and got["/latched"]
        ):
            break
    print(json.dumps(got), flush=True)
    node.destroy_node()
    rclpy.shutdown()


def trigger(topic: str) -> None:
    """Publish one std_msgs/msg/Empty on ``topic`` once a subscriber is matched (at most 30 s)."""
    import rclpy
    from std_msgs.msg import Empty

    rclpy.init()
    node = rclpy.create_node("polybag_test_trigger")
    pub = node.create_publisher(Empty, topic, _qos(10))
    print("ready", file=sys.stderr, flush=True)
    end = time.monotonic() + 30
    while time.monotonic() < end and not pub.get_subscription_count():
        time.sleep(0.05)
    time.sleep(0.5)
    pub.publish(Empty())
    time.sleep(1.0)
    print(json.dumps({"triggered": topic}), flush=True)
    node.destroy_node()
    rclpy.shutdown()


def empties(topic: str, seconds: float) -> None:
    """Count std_msgs/msg/Empty on ``topic`` (transient_local) for ``seconds``; print the count."""
    import rclpy
    from std_msgs.msg import Empty

    rclpy.init()
    node = rclpy.create_node("polybag_test_empties")
    got: list[int] = []
    node.create_subscription(Empty, topic, lambda m: got.append(1), _qos(10, latched=True))
    print("ready", file=sys.stderr, flush=True)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        rclpy.spin_once(node, timeout_sec=0.05)
    print(json.dumps({"empties": len(got)}), flush=True)
    node.destroy_node()
    rclpy.shutdown()


def _spin(node: object, spin: bool, seconds: float) -> None:
    """Serve the node's callbacks (its services) for up to ``seconds``, or just sleep."""
    import rclpy

    if spin:
        rclpy.spin_once(node, timeout_sec=seconds)
    else:
        time.sleep(seconds)


def typed(n: int, spin: bool = True) -> None:
    import rclpy
    from std_msgs.msg import String
    from test_msgs.msg import Arrays, BasicTypes

    rclpy.init()
    node = rclpy.create_node("typed_talker", namespace="/ns1")
    arr = node.create_publisher(Arrays, "/arr", _qos(n + 10))
    basic = node.create_publisher(BasicTypes, "/basic", _qos(n + 10))
    strings = {
        t: node.create_publisher(String, t, _qos(n + 10)) for t in ("/_hidden", "/vis/_priv/x", "/shown")
    }
    print("ready", file=sys.stderr, flush=True)
    end = time.monotonic() + 30
    while time.monotonic() < end and not (arr.get_subscription_count() and basic.get_subscription_count()):
        _spin(node, spin, 0.05)
    out: dict[str, list] = {"/arr": [], "/basic": [], "/_hidden": [], "/vis/_priv/x": [], "/shown": []}
    # (the type description service answers from this thread: spin between messages)
    t = time.monotonic() + 0.5
    while time.monotonic() < t:
        _spin(node, spin, 0.02)
    for i in range(n):
        a = Arrays()
        a.int32_values = [i, -i, 7]
        a.float64_values = [0.5 * i, 1.0, -2.0]
        a.string_values = [f"s{i}", "", "ü"]
        a.bool_values = [True, False, i % 2 == 0]
        a.basic_types_values[1].int8_value = -i
        a.basic_types_values[2].uint64_value = 2**63 + i
        arr.publish(a)
        out["/arr"].append(
            [
                [int(x) for x in a.int32_values],
                [float(x) for x in a.float64_values],
                list(a.string_values),
                [bool(x) for x in a.bool_values],
                int(a.basic_types_values[1].int8_value),
                int(a.basic_types_values[2].uint64_value),
            ]
        )
        b = BasicTypes(int16_value=i - 100, float32_value=0.25 * i, uint8_value=i % 256, bool_value=True)
        basic.publish(b)
        out["/basic"].append(
            [int(b.int16_value), float(b.float32_value), int(b.uint8_value), bool(b.bool_value)]
        )
        for topic, pub in strings.items():
            pub.publish(String(data=f"{topic} {i}"))
            out[topic].append(f"{topic} {i}")
        _spin(node, spin, 0.02)
    t = time.monotonic() + 1.0
    while time.monotonic() < t:
        _spin(node, spin, 0.05)
    print(json.dumps(out), flush=True)
    node.destroy_node()
    rclpy.shutdown()


def rate_control(topic: str, ack: str, n: int, stamp: int, later: int) -> None:
    import rclpy
    from std_msgs.msg import Header, String

    rclpy.init()
    node = rclpy.create_node("polybag_test_rate_control")
    got: list[str] = []
    node.create_subscription(String, topic, lambda m: got.append(m.data), _qos(1000))
    pub = node.create_publisher(Header, ack, _qos(1, latched=True))

    def header(ns: int) -> Header:
        h = Header(frame_id="ack")
        h.stamp.sec, h.stamp.nanosec = divmod(ns, 10**9)
        return h

    pub.publish(header(stamp))
    print("ready", file=sys.stderr, flush=True)
    held_at = None
    last_n, last_t = 0, time.monotonic()
    end = time.monotonic() + 40
    while time.monotonic() < end and len(got) < n:
        rclpy.spin_once(node, timeout_sec=0.02)
        if len(got) != last_n:
            last_n, last_t = len(got), time.monotonic()
        elif held_at is None and got and time.monotonic() - last_t > 1.5:
            held_at = len(got)
            pub.publish(header(later))
    print(json.dumps({"held_at": held_at, "got": got}), flush=True)
    node.destroy_node()
    rclpy.shutdown()


def ddspub(topic: str, dds_type: str, reliability: str, n: int) -> None:
    from cyclonedds.domain import Domain, DomainParticipant
    from cyclonedds.idl import IdlStruct
    from cyclonedds.pub import DataWriter
    from cyclonedds.qos import Policy, Qos
    from cyclonedds.topic import Topic

    from polybag.net.ros2 import cyclone_config, domain_id

    dom = domain_id()
    cfg = cyclone_config()
    keep = Domain(dom, cfg)

    @dataclass
    class Thing(IdlStruct, typename=dds_type):
        a: int32
        b: str

    t = Thing
    dp = DomainParticipant(dom)
    rel = (
        Policy.Reliability.BestEffort
        if reliability == "best_effort"
        else Policy.Reliability.Reliable(100_000_000)
    )
    w = DataWriter(
        dp,
        Topic(dp, topic, t),
        qos=Qos(
            rel, Policy.History.KeepLast(n + 10), Policy.DataRepresentation(use_cdrv0_representation=True)
        ),
    )
    print("ready", file=sys.stderr, flush=True)
    end = time.monotonic() + 30
    while time.monotonic() < end and not w.get_matched_subscriptions():
        time.sleep(0.05)
    print("matched", file=sys.stderr, flush=True)
    time.sleep(0.5)
    for i in range(n):
        w.write(t(a=i, b=f"thing {i}"))
        time.sleep(0.01)
    time.sleep(1.0)
    print(json.dumps({"sent": n}), flush=True)
    del keep


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "talker":
        talker(int(sys.argv[2]))
    elif mode == "listener":
        listener(int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else None)
    elif mode == "trigger":
        trigger(sys.argv[2])
    elif mode == "empties":
        empties(sys.argv[2], float(sys.argv[3]))
    elif mode == "typed":
        typed(int(sys.argv[2]), spin=len(sys.argv) < 4 or sys.argv[3] != "nospin")
    elif mode == "rate_control":
        rate_control(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]))
    elif mode == "ddspub":
        ddspub(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    else:
        raise SystemExit(f"unknown mode {mode}")
