"""Helpers of the aligned-table tests: two-topic logs of every format (an IMU-like topic at
200 Hz, a GPS-like one at 10 Hz) and the pandas route a user would write."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import polybag
from polybag.codecs.cdr import codec_for_type as cdr_codec
from polybag.codecs.ros1 import codec_for_type as ros1_codec
from polybag.codecs.ros1 import definition_for as ros1_definition
from polybag.codecs.ros2 import definition_for as ros2_definition

N_IMU = 120


def imu_msg(i: int) -> dict[str, Any]:
    # header stamps go backwards now and then (a sensor's clock is no log clock)
    stamp = 1_000 + i * 5 - (7 if i % 9 == 4 else 0)
    return {
        "header": {"frame_id": "imu", "stamp": {"sec": stamp // 1000, "nanosec": (stamp % 1000) * 1_000_000}},
        "angular_velocity": {"x": float(i), "y": -i * 0.5},
        "linear_acceleration": {"z": 9.81 + i},
    }


def gps_msg(i: int) -> dict[str, Any]:
    return {
        "header": {"frame_id": "gps", "stamp": {"sec": 1 + i // 10, "nanosec": (i % 10) * 100_000_000}},
        "status": {"status": i % 3 - 1, "service": i},
        "latitude": 48.0 + i * 1e-3,
        "position_covariance": [float(i)] * 9,
    }


def ros1_dict(d: dict[str, Any]) -> dict[str, Any]:
    h = dict(d["header"])
    h["stamp"] = {"sec": h["stamp"]["sec"], "nsec": h["stamp"]["nanosec"]}
    return {**d, "header": h}


def write_log(path: Path, kind: str, empty_gps: bool = False) -> Path:
    """An IMU topic at 200 Hz and a GPS one at 10 Hz (log times in ms steps), in ``kind``."""
    ros1 = kind in ("bag", "mcap-ros1")
    if ros1:
        types = {t: ros1_codec(t, ros1_definition(t)) for t in ("sensor_msgs/Imu", "sensor_msgs/NavSatFix")}
    else:
        types = {t: cdr_codec(t, ros2_definition(t)) for t in ("sensor_msgs/msg/Imu", "sensor_msgs/msg/NavSatFix")}
    imu_t, gps_t = types
    opts: dict[str, Any] = {}
    if kind == "mcap-ros1":
        opts["profile"] = "ros1"
    elif kind == "mcap-ros2":
        opts["profile"] = "ros2"
    elif kind == "rosbag2":
        opts.update(format="rosbag2", storage="sqlite3")
    with polybag.Writer(path, **opts) as w:
        chans = {}
        for t, codec in types.items():
            if ros1:
                sch = w.add_schema(t, "ros1msg", ros1_definition(t).encode())
                chans[t] = w.add_channel("/imu" if t == imu_t else "/gps", "ros1", sch, {"md5sum": codec.md5sum, "type": t})
            else:
                sch = w.add_schema(t, "ros2msg", ros2_definition(t).encode())
                chans[t] = w.add_channel("/imu" if t == imu_t else "/gps", "cdr", sch)
        for i in range(N_IMU):
            t_ns = 1_000_000_000 + i * 5_000_000
            conv = ros1_dict if ros1 else (lambda d: d)
            w.write(chans[imu_t], types[imu_t].encode(conv(imu_msg(i))), t_ns)
            if i % 20 == 3 and not empty_gps:
                # a GPS message at the same log time as an IMU one, and one just after
                w.write(chans[gps_t], types[gps_t].encode(conv(gps_msg(i))), t_ns if i % 40 == 3 else t_ns + 1_000_000)
    return path


def pandas_route(r: Any, left: str, right: str, on: str = "log_time", **options: Any) -> pd.DataFrame:
    a = r.to_pandas(left).reset_index()
    b = r.to_pandas(right).reset_index()
    a = a.rename(columns={c: f"{left}.{c}" for c in a.columns if c != on})
    b = b.rename(columns={c: f"{right}.{c}" for c in b.columns if c != on})
    b[f"{right}.{on}"] = b[on]
    return pd.merge_asof(a, b, on=on, **options).set_index(on)


def cells_equal(ours: pd.Series, theirs: pd.Series) -> None:
    assert len(ours) == len(theirs)
    miss_o, miss_t = ours.isna().to_numpy(), theirs.isna().to_numpy()
    assert np.array_equal(miss_o, miss_t), ours.name
    for x, y in zip(ours.to_numpy(dtype=object)[~miss_o], theirs.to_numpy(dtype=object)[~miss_t]):
        if isinstance(x, (np.ndarray, list)):
            assert np.array_equal(np.asarray(x), np.asarray(y)), ours.name
        else:
            assert x == y, (ours.name, x, y)


