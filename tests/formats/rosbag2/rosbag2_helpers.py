"""Shared by the rosbag2 tests: bags written by rosbags' rosbag2 Writer, and readers' views."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polybag

CORPORA = Path(__file__).resolve().parents[3].parent / "shared" / "corpora"
ROSBAG2_CORPUS = CORPORA / "mcap-samples" / "rosbag2"

STRING = "std_msgs/msg/String"
IMU = "sensor_msgs/msg/Imu"


def typestore() -> Any:
    from rosbags.typesys import Stores, get_typestore

    return get_typestore(Stores.ROS2_HUMBLE)


def imu(ts: Any, i: int) -> Any:
    t = ts.types
    header = t["std_msgs/msg/Header"](
        stamp=t["builtin_interfaces/msg/Time"](sec=i, nanosec=7 * i), frame_id=f"imu{i % 3}"
    )
    q = t["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=float(i), w=1.0)
    v = t["geometry_msgs/msg/Vector3"](x=1.5 * i, y=-2.0, z=0.25)
    import numpy as np

    cov = np.arange(9, dtype=np.float64) * i
    return t[IMU](
        header=header,
        orientation=q,
        orientation_covariance=cov,
        angular_velocity=v,
        angular_velocity_covariance=cov,
        linear_acceleration=v,
        linear_acceleration_covariance=cov,
    )


def write_rosbags_bag(
    path: Path,
    *,
    storage: str = "sqlite3",
    compression: str | None = None,
    version: int = 9,
    n: int = 30,
    qos: bool = True,
) -> list[tuple[str, int, bytes]]:
    """A bag with two topics (String and Imu, out of time order) written by rosbags; returns
    ``(topic, time, bytes)`` in the order written."""
    from rosbags.interfaces import Qos, QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime
    from rosbags.rosbag2 import CompressionFormat, CompressionMode, StoragePlugin, Writer

    ts = typestore()
    plugin = StoragePlugin.SQLITE3 if storage == "sqlite3" else StoragePlugin.MCAP
    w = Writer(path, version=version, storage_plugin=plugin)  # type: ignore[arg-type]
    if compression:
        w.set_compression(CompressionMode[compression.upper()], CompressionFormat.ZSTD)
    profile = Qos(
        QosHistory.KEEP_LAST,
        10,
        QosReliability.RELIABLE,
        QosDurability.TRANSIENT_LOCAL,
        QosTime(0, 0),
        QosTime(0, 0),
        QosLiveliness.AUTOMATIC,
        QosTime(0, 0),
        False,
    )
    written = []
    with w:
        a = w.add_connection("/chatter", STRING, typestore=ts, offered_qos_profiles=[profile] if qos else [])
        b = w.add_connection("/imu", IMU, typestore=ts)
        for i in range(n):
            t = 1_000_000_000 + ((i * 7919) % n) * 1000  # not in time order
            if i % 3:
                data = ts.serialize_cdr(ts.types[STRING](data=f"hello {i} ü"), STRING)
                w.write(a, t, data)
                written.append(("/chatter", t, bytes(data)))
            else:
                data = ts.serialize_cdr(imu(ts, i), IMU)
                w.write(b, t, data)
                written.append(("/imu", t, bytes(data)))
    return written


def rosbags_view(path: Path) -> list[tuple[str, str, int, bytes]]:
    """What rosbags' rosbag2 Reader reads: ``(topic, type, time, bytes)`` in its order."""
    from rosbags.rosbag2 import Reader

    with Reader(path) as r:
        return [(c.topic, c.msgtype, t, bytes(d)) for c, t, d in r.messages()]


def polybag_view(path: Path | str, **kw: Any) -> list[tuple[str, str, int, bytes]]:
    with polybag.open(path) as r:
        return [(m.topic, m.channel.type_name, m.log_time, bytes(m.data)) for m in r.messages(**kw)]
