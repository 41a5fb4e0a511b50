"""Build the bundled samples: small deterministic logs for the README, the docs and the tests.

    python samples/make_samples.py [OUTDIR]

- ``demo.mcap``: profile ``ros1``; two channels with ``ros1msg`` schemas so codecs can
  decode them: ``/chatter`` (std_msgs/String, 10 Hz) and ``/imu/accel``
  (geometry_msgs/Vector3, 20 Hz) over 10 seconds, in zstd chunks, plus one attachment and
  one metadata record.
- ``robot.bag``: a ROS 1 bag (lz4 chunks) of a small robot driving a circle for 10 s:
  ``/chatter`` (std_msgs/String, 1 Hz), ``/imu`` (sensor_msgs/Imu, 50 Hz), ``/gps``
  (sensor_msgs/NavSatFix, 5 Hz), ``/odom`` (nav_msgs/Odometry, 10 Hz), ``/scan``
  (sensor_msgs/LaserScan, 90 beams, 5 Hz) and ``/camera/image_raw`` (sensor_msgs/Image,
  32x24 rgb8, 2 Hz).
- ``robot_ros2/``: the same log as a rosbag2 directory (sqlite3 storage, ROS 2 CDR
  messages), written by converting ``robot.bag``.
- ``flight.ulg``: a PX4-style ULog of 10 s: ``vehicle_attitude`` (quaternion, 50 Hz),
  ``vehicle_gps_position`` (5 Hz), ``battery_status`` (1 Hz) and two instances of
  ``sensor_accel`` (100 Hz), with info, parameters and logged messages.
"""

from __future__ import annotations

import math
import struct
import sys
from pathlib import Path

import polybag

START = 1_700_000_000_000_000_000  # 2023-11-14T22:13:20Z

STRING_DEF = b"string data\n"
VECTOR3_DEF = (
    b"# This represents a vector in free space.\n"
    b"float64 x\n"
    b"float64 y\n"
    b"float64 z\n"
)
STRING_MD5 = "992ce8a1687cec8c8bd883ec73ca41d1"
VECTOR3_MD5 = "4a842b65f413084dc2b10fb484ea7f17"


def ros1_string(text: str) -> bytes:
    raw = text.encode("utf-8")
    return struct.pack("<I", len(raw)) + raw


def build(out: str | Path) -> None:
    with polybag.Writer(out, format="mcap", compression="zstd", chunk_size=8192, profile="ros1", library="polybag samples") as w:
        s_str = w.add_schema("std_msgs/String", "ros1msg", STRING_DEF)
        s_vec = w.add_schema("geometry_msgs/Vector3", "ros1msg", VECTOR3_DEF)
        chatter = w.add_channel("/chatter", "ros1", s_str, {"md5sum": STRING_MD5, "callerid": "/talker"})
        accel = w.add_channel("/imu/accel", "ros1", s_vec, {"md5sum": VECTOR3_MD5, "callerid": "/imu"})
        events = []
        for i in range(100):
            t = START + i * 100_000_000
            events.append((t, 0, i))
        for i in range(200):
            t = START + i * 50_000_000 + 1_000_000
            events.append((t, 1, i))
        events.sort()
        for t, kind, i in events:
            if kind == 0:
                w.write(chatter, ros1_string(f"hello world {i}"), log_time=t, publish_time=t, sequence=i)
            else:
                a = i * 0.05
                w.write(
                    accel,
                    struct.pack("<ddd", math.sin(a), math.cos(a), 9.81),
                    log_time=t,
                    publish_time=t - 500_000,
                    sequence=i,
                )
        w.add_attachment("calibration.yaml", "application/yaml", b"camera: {fx: 500.0, fy: 500.0}\n", START, START)
        w.add_metadata("robot", {"name": "demo", "serial": "0001"})


def ros1_channel(w: polybag.Writer, topic: str, msg_type: str) -> tuple[object, object]:
    """A bag channel of ``msg_type`` (its bundled definition) and the codec that encodes it."""
    from polybag.codecs import ros1

    text = ros1.definition_for(msg_type)
    md5 = ros1.compute_md5(msg_type, text)
    schema = w.add_schema(msg_type, "ros1msg", text.encode())
    return w.add_channel(topic, "ros1", schema, {"md5sum": md5, "callerid": "/robot"}), ros1.codec_for_type(msg_type, text)


def stamp(t: int) -> dict[str, int]:
    return {"sec": t // 1_000_000_000, "nsec": t % 1_000_000_000}


def header(t: int, seq: int, frame: str) -> dict[str, object]:
    return {"seq": seq, "stamp": stamp(t), "frame_id": frame}


def build_bag(out: str | Path) -> None:
    """``robot.bag`` (see the module's docstring)."""
    streams = []  # (time, topic, encoder of the message)
    for i in range(10):
        streams.append((START + i * 1_000_000_000, "/chatter", lambda i=i: {"data": f"hello world {i}"}))
    for i in range(500):
        t = START + i * 20_000_000 + 2_000_000
        a = i * 0.02 * 2 * math.pi / 10

        def imu(i: int = i, t: int = t, a: float = a) -> dict[str, object]:
            yaw = a / 2
            return {
                "header": header(t, i, "imu_link"),
                "orientation": {"x": 0.0, "y": 0.0, "z": math.sin(yaw), "w": math.cos(yaw)},
                "orientation_covariance": [0.0] * 9,
                "angular_velocity": {"x": 0.0, "y": 0.0, "z": 2 * math.pi / 10},
                "angular_velocity_covariance": [0.0] * 9,
                "linear_acceleration": {"x": -math.cos(a) * 0.4, "y": -math.sin(a) * 0.4, "z": 9.81},
                "linear_acceleration_covariance": [0.0] * 9,
            }

        streams.append((t, "/imu", imu))
    for i in range(50):
        t = START + i * 200_000_000 + 5_000_000
        a = i * 0.2 * 2 * math.pi / 10

        def gps(i: int = i, t: int = t, a: float = a) -> dict[str, object]:
            return {
                "header": header(t, i, "gps"),
                "status": {"status": 0, "service": 1},
                "latitude": 47.3977 + 1e-5 * math.sin(a),
                "longitude": 8.5456 + 1e-5 * math.cos(a),
                "altitude": 488.0,
                "position_covariance": [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 4.0],
                "position_covariance_type": 2,
            }

        streams.append((t, "/gps", gps))

        def scan(i: int = i, t: int = t) -> dict[str, object]:
            ranges = [2.0 + 0.5 * math.sin(k * math.pi / 45 + i * 0.1) for k in range(90)]
            return {
                "header": header(t, i, "laser"),
                "angle_min": -math.pi,
                "angle_max": math.pi - 2 * math.pi / 90,
                "angle_increment": 2 * math.pi / 90,
                "time_increment": 0.0,
                "scan_time": 0.2,
                "range_min": 0.1,
                "range_max": 10.0,
                "ranges": ranges,
                "intensities": [100.0] * 90,
            }

        streams.append((t + 1_000_000, "/scan", scan))
    for i in range(100):
        t = START + i * 100_000_000 + 3_000_000
        a = i * 0.1 * 2 * math.pi / 10

        def odom(i: int = i, t: int = t, a: float = a) -> dict[str, object]:
            return {
                "header": header(t, i, "odom"),
                "child_frame_id": "base_link",
                "pose": {
                    "pose": {
                        "position": {"x": 2 * math.cos(a), "y": 2 * math.sin(a), "z": 0.0},
                        "orientation": {"x": 0.0, "y": 0.0, "z": math.sin(a / 2 + math.pi / 4), "w": math.cos(a / 2 + math.pi / 4)},
                    },
                    "covariance": [0.0] * 36,
                },
                "twist": {
                    "twist": {"linear": {"x": 0.4 * math.pi / 2.5, "y": 0.0, "z": 0.0}, "angular": {"x": 0.0, "y": 0.0, "z": 2 * math.pi / 10}},
                    "covariance": [0.0] * 36,
                },
            }

        streams.append((t, "/odom", odom))
    for i in range(20):
        t = START + i * 500_000_000 + 7_000_000

        def image(i: int = i, t: int = t) -> dict[str, object]:
            w, h = 32, 24
            pixels = bytearray()
            for y in range(h):
                for x in range(w):
                    pixels += bytes(((x * 8 + i * 12) % 256, (y * 10) % 256, (i * 12) % 256))
            return {"header": header(t, i, "camera"), "height": h, "width": w, "encoding": "rgb8", "is_bigendian": 0, "step": w * 3, "data": bytes(pixels)}

        streams.append((t, "/camera/image_raw", image))
    streams.sort(key=lambda s: (s[0], s[1]))
    types = {
        "/chatter": "std_msgs/String",
        "/imu": "sensor_msgs/Imu",
        "/gps": "sensor_msgs/NavSatFix",
        "/odom": "nav_msgs/Odometry",
        "/scan": "sensor_msgs/LaserScan",
        "/camera/image_raw": "sensor_msgs/Image",
    }
    with polybag.Writer(out, format="bag", compression="lz4", chunk_size=64 * 1024) as w:
        channels = {topic: ros1_channel(w, topic, msg_type) for topic, msg_type in types.items()}
        for t, topic, make in streams:
            channel, codec = channels[topic]
            w.write(channel, codec.encode(make()), log_time=t)  # type: ignore[attr-defined]


ULOG_FORMATS = [
    "vehicle_attitude:uint64_t timestamp;float[4] q;float rollspeed;float pitchspeed;float yawspeed;",
    "vehicle_gps_position:uint64_t timestamp;int32_t lat;int32_t lon;int32_t alt;uint8_t fix_type;uint8_t satellites_used;uint8_t[6] _padding0;",
    "battery_status:uint64_t timestamp;float voltage_v;float current_a;float remaining;",
    "sensor_accel:uint64_t timestamp;uint32_t device_id;float x;float y;float z;",
]


def build_ulog(out: str | Path) -> None:
    """``flight.ulg`` (see the module's docstring)."""
    import numpy as np

    t0 = 20_000_000  # microseconds since boot
    with polybag.Writer(out, format="ulog", start_timestamp=t0) as w:
        for f in ULOG_FORMATS:
            w.add_format(f)
        w.add_info("sys_name", "PX4")
        w.add_info("ver_hw", "PX4_SITL")
        w.add_info("sys_toolchain", "GNU GCC")
        w.add_param("MPC_XY_VEL_MAX", 12.0)
        w.add_param("COM_RC_LOSS_T", 0.5)
        w.add_param("SYS_AUTOSTART", 10016)
        n = 500
        ts = t0 + np.arange(n, dtype=np.uint64) * 20_000
        yaw = np.linspace(0, np.pi, n, dtype=np.float32)
        q = np.stack([np.cos(yaw / 2), np.zeros(n, np.float32), np.zeros(n, np.float32), np.sin(yaw / 2)], axis=1).astype(np.float32)
        tables = [
            (
                w.add_subscription("vehicle_attitude"),
                {"timestamp": ts, **{f"q[{k}]": q[:, k] for k in range(4)}, "rollspeed": np.zeros(n, np.float32), "pitchspeed": np.zeros(n, np.float32), "yawspeed": np.full(n, np.pi / 10, np.float32)},
            )
        ]
        m = 50
        a = np.linspace(0, 2 * np.pi, m)
        tables.append(
            (
                w.add_subscription("vehicle_gps_position"),
                {
                    "timestamp": t0 + np.arange(m, dtype=np.uint64) * 200_000 + 1000,
                    "lat": (473977000 + 100 * np.sin(a)).astype(np.int32),
                    "lon": (85456000 + 100 * np.cos(a)).astype(np.int32),
                    "alt": np.full(m, 488000, np.int32),
                    "fix_type": np.full(m, 3, np.uint8),
                    "satellites_used": np.full(m, 12, np.uint8),
                },
            )
        )
        tables.append(
            (
                w.add_subscription("battery_status"),
                {
                    "timestamp": t0 + np.arange(10, dtype=np.uint64) * 1_000_000 + 2000,
                    "voltage_v": np.linspace(16.8, 16.5, 10, dtype=np.float32),
                    "current_a": np.full(10, 12.5, np.float32),
                    "remaining": np.linspace(1.0, 0.97, 10, dtype=np.float32),
                },
            )
        )
        k = 1000
        for instance in (0, 1):
            tables.append(
                (
                    w.add_subscription("sensor_accel", instance),
                    {
                        "timestamp": t0 + np.arange(k, dtype=np.uint64) * 10_000 + 3000 + instance * 500,
                        "device_id": np.full(k, 1310988 + instance, np.uint32),
                        "x": (0.05 * np.sin(np.arange(k) / 10)).astype(np.float32),
                        "y": (0.05 * np.cos(np.arange(k) / 10)).astype(np.float32),
                        "z": np.full(k, -9.81, np.float32),
                    },
                )
            )
        # the data in time order, with the logged messages and a parameter change between
        events = [
            (t0 + 1_000_000, lambda: w.add_logged_string("INFO", "[commander] Takeoff detected", t0 + 1_000_000)),
            (t0 + 5_000_000, lambda: w.change_param("MPC_XY_VEL_MAX", 8.0)),
            (t0 + 6_000_000, lambda: w.add_logged_string("WARNING", "[battery] low battery warning threshold test", t0 + 6_000_000)),
            (t0 + 10_000_000, lambda: None),
        ]
        start = 0
        for until, event in events:
            part = []
            for channel, cols in tables:
                keep = (cols["timestamp"] >= start) & (cols["timestamp"] < until)
                if keep.any():
                    part.append((channel, {name: values[keep] for name, values in cols.items()}))
            w.write_columns_many(part)
            event()
            start = until


def build_rosbag2(bag: str | Path, out: str | Path) -> None:
    """``robot_ros2/``: ``robot.bag`` converted to a rosbag2 directory (sqlite3)."""
    import shutil

    from polybag.cli import main

    shutil.rmtree(out, ignore_errors=True)
    code = main(["convert", "-q", str(bag), str(out), "--format", "rosbag2"])
    if code != 0:
        raise SystemExit(f"convert to rosbag2 failed: exit {code}")


def build_all(folder: str | Path) -> None:
    folder = Path(folder)
    build(folder / "demo.mcap")
    build_bag(folder / "robot.bag")
    build_rosbag2(folder / "robot.bag", folder / "robot_ros2")
    build_ulog(folder / "flight.ulg")


if __name__ == "__main__":
    build_all(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent)
