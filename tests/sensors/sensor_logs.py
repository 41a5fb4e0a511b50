"""Sensor messages made by a peer (rosbags' serializers) and logs holding them.

ROS 1 messages go into a bag (``ros1msg`` schema from rosbags' definitions), ROS 2 messages
into an MCAP file (``ros2msg`` schema, CDR payloads), both written with ``polybag.Writer``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
from rosbags.typesys import Stores, get_typestore

import polybag

TS1 = get_typestore(Stores.ROS1_NOETIC)
TS2 = get_typestore(Stores.ROS2_HUMBLE)
STORES = {"ros1": TS1, "ros2": TS2}


def T(store: Any, name: str) -> Any:  # noqa: N802 - a type
    """The rosbags class of ``pkg/Name`` (``pkg/msg/Name``)."""
    pkg, _, short = name.partition("/")
    return store.types[f"{pkg}/msg/{short}"]


def header(profile: str, sec: int = 1, nsec: int = 2, frame: str = "cam") -> Any:
    store = STORES[profile]
    stamp = T(store, "builtin_interfaces/Time")(sec=sec, nanosec=nsec)
    if profile == "ros1":
        return T(store, "std_msgs/Header")(seq=0, stamp=stamp, frame_id=frame)
    return T(store, "std_msgs/Header")(stamp=stamp, frame_id=frame)


def image(
    profile: str, data: bytes, height: int, width: int, encoding: str, step: int, big: bool = False
) -> Any:
    return T(STORES[profile], "sensor_msgs/Image")(
        header=header(profile),
        height=height,
        width=width,
        encoding=encoding,
        is_bigendian=int(big),
        step=step,
        data=np.frombuffer(data, np.uint8).copy(),
    )


def compressed(profile: str, data: bytes, fmt: str) -> Any:
    return T(STORES[profile], "sensor_msgs/CompressedImage")(
        header=header(profile), format=fmt, data=np.frombuffer(data, np.uint8).copy()
    )


def point_field(profile: str, name: str, offset: int, datatype: int, count: int = 1) -> Any:
    return T(STORES[profile], "sensor_msgs/PointField")(
        name=name, offset=offset, datatype=datatype, count=count
    )


def cloud(
    profile: str,
    fields: list[tuple[str, int, int, int]],
    data: bytes,
    height: int,
    width: int,
    point_step: int,
    row_step: int,
    big: bool = False,
    dense: bool = True,
) -> Any:
    return T(STORES[profile], "sensor_msgs/PointCloud2")(
        header=header(profile),
        height=height,
        width=width,
        fields=[point_field(profile, *f) for f in fields],
        is_bigendian=big,
        point_step=point_step,
        row_step=row_step,
        data=np.frombuffer(data, np.uint8).copy(),
        is_dense=dense,
    )


def type_name(msg: Any) -> str:
    """``sensor_msgs/Image`` of a rosbags message object."""
    pkg, _, name = msg.__msgtype__.split("/")
    return f"{pkg}/{name}"


def serialize(profile: str, msg: Any) -> bytes:
    store = STORES[profile]
    if profile == "ros1":
        return bytes(store.serialize_ros1(msg, msg.__msgtype__))
    return bytes(store.serialize_cdr(msg, msg.__msgtype__))


def deserialize(profile: str, data: bytes, msgtype: str) -> Any:
    store = STORES[profile]
    full = msgtype if "/msg/" in msgtype else msgtype.replace("/", "/msg/", 1)
    if profile == "ros1":
        return store.deserialize_ros1(data, full)
    return store.deserialize_cdr(data, full)


def write_log(
    path: Path,
    profile: str,
    items: Iterable[tuple[str, Any, int]],
    definitions: dict[str, str] | None = None,
    **options: Any,
) -> Path:
    """A bag (``ros1``) or MCAP file (``ros2``) with ``(topic, rosbags message, log time)``
    items.  ``definitions``: a message definition text per type, instead of rosbags' own;
    ``options`` go to the writer (``compression``, ``chunk_size``)."""
    store = STORES[profile]
    with polybag.Writer(str(path), **options) as w:
        channels: dict[tuple[str, str], Any] = {}
        for topic, msg, t in items:
            tn = type_name(msg)
            key = (topic, tn)
            if key not in channels:
                full = msg.__msgtype__
                text = (definitions or {}).get(tn) or store.generate_msgdef(full)[0]
                if profile == "ros1":
                    s = w.add_schema(tn, "ros1msg", text.encode())
                    channels[key] = w.add_channel(topic, "ros1", s)
                else:
                    s = w.add_schema(full, "ros2msg", text.encode())
                    channels[key] = w.add_channel(topic, "cdr", s)
            w.write(channels[key], serialize(profile, msg), t)
    return path


def log_path(tmp: Path, profile: str, name: str = "log") -> Path:
    return tmp / (f"{name}.bag" if profile == "ros1" else f"{name}.mcap")
