"""rosbag2 read: polybag vs rosbags' ``rosbag2.Reader``, sqlite3 and mcap storage, side by side.

Each bag holds ``-n`` (default 100,000) ``sensor_msgs/msg/Imu`` messages on one topic and a
``std_msgs/msg/String`` topic (every tenth message), written once by rosbags' own rosbag2
Writer (version 9) into ``bench/data``.  Rows:

* ``read``: every message's topic, time and bytes (``bytes(data)`` on both sides)
* ``read+decode``: every Imu decoded (polybag's compiled CDR codec; rosbags' typestore)
* ``window``: the middle tenth of the time range, one topic (pushed down to SQL / chunks)

The two sides alternate ``--repeat`` times; each keeps its best wall time; the ratio is
rosbags / polybag (above 1: polybag faster).

    .venv/bin/python bench/bench_rosbag2.py
    .venv/bin/python bench/bench_rosbag2.py -n 20000 --repeat 2 --storage sqlite3
"""

from __future__ import annotations

import argparse
import gc
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

import polybag  # noqa: E402

IMU = "sensor_msgs/msg/Imu"
STRING = "std_msgs/msg/String"
T0 = 1_700_000_000_000_000_000


def make_bag(path: Path, n: int, storage: str) -> None:
    """``n`` messages written by rosbags (reused when already there)."""
    if (path / "metadata.yaml").exists():
        return
    import numpy as np
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    shutil.rmtree(path, ignore_errors=True)
    ts = get_typestore(Stores.ROS2_HUMBLE)
    t = ts.types
    vals = np.random.default_rng(1).normal(size=(n, 10)).tolist()
    cov = np.zeros(9, dtype=np.float64)
    plugin = StoragePlugin.SQLITE3 if storage == "sqlite3" else StoragePlugin.MCAP
    with Writer(path, version=9, storage_plugin=plugin) as w:
        a = w.add_connection("/imu", IMU, typestore=ts)
        b = w.add_connection("/status", STRING, typestore=ts)
        for i in range(n):
            stamp = T0 + i * 5_000_000
            if i % 10 == 9:
                w.write(b, stamp, ts.serialize_cdr(t[STRING](data=f"status {i}"), STRING))
                continue
            v = vals[i]
            sec, nsec = divmod(stamp, 1_000_000_000)
            msg = t[IMU](
                header=t["std_msgs/msg/Header"](
                    stamp=t["builtin_interfaces/msg/Time"](sec=sec, nanosec=nsec), frame_id="imu_link"
                ),
                orientation=t["geometry_msgs/msg/Quaternion"](x=v[0], y=v[1], z=v[2], w=v[3]),
                orientation_covariance=cov,
                angular_velocity=t["geometry_msgs/msg/Vector3"](x=v[4], y=v[5], z=v[6]),
                angular_velocity_covariance=cov,
                linear_acceleration=t["geometry_msgs/msg/Vector3"](x=v[7], y=v[8], z=v[9]),
                linear_acceleration_covariance=cov,
            )
            w.write(a, stamp, ts.serialize_cdr(msg, IMU))


# --- the two sides ------------------------------------------------------------------------------
def pb_read(path: Path) -> int:
    n = 0
    with polybag.open(path) as r:
        for m in r.messages():
            bytes(m.data)
            n += 1
    return n


def rb_read(path: Path) -> int:
    from rosbags.rosbag2 import Reader

    n = 0
    with Reader(path) as r:
        for _c, _t, d in r.messages():
            bytes(d)
            n += 1
    return n


def pb_decode(path: Path) -> int:
    n = 0
    with polybag.open(path) as r:
        for _m, o in r.decoded_messages(topics=["/imu"]):
            n += o.header.stamp.sec > 0
    return n


def rb_decode(path: Path) -> int:
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_HUMBLE)
    n = 0
    with Reader(path) as r:
        conns = [c for c in r.connections if c.topic == "/imu"]
        for c, _t, d in r.messages(connections=conns):
            n += ts.deserialize_cdr(d, c.msgtype).header.stamp.sec > 0
    return n


def _window(path: Path) -> tuple[int, int]:
    with polybag.open(path) as r:
        s = r.summary
        assert s.start_time is not None and s.end_time is not None
        span = s.end_time - s.start_time
        return s.start_time + span * 45 // 100, s.start_time + span * 55 // 100


def pb_window(path: Path) -> int:
    lo, hi = _window(path)
    with polybag.open(path) as r:
        return sum(1 for m in r.messages(topics=["/status"], start=lo, end=hi) if bytes(m.data))


def rb_window(path: Path) -> int:
    from rosbags.rosbag2 import Reader

    lo, hi = _window(path)
    with Reader(path) as r:
        conns = [c for c in r.connections if c.topic == "/status"]
        return sum(1 for _c, _t, d in r.messages(connections=conns, start=lo, stop=hi) if bytes(d))


ROWS: dict[str, tuple[Callable[[Path], int], Callable[[Path], int]]] = {
    "read": (pb_read, rb_read),
    "read+decode": (pb_decode, rb_decode),
    "window": (pb_window, rb_window),
}


def best(fn: Callable[[Path], int], path: Path, repeat: int) -> tuple[float, Any]:
    out = None
    times = []
    for _ in range(repeat):
        gc.collect()
        t = time.perf_counter()
        out = fn(path)
        times.append(time.perf_counter() - t)
    return min(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=100_000, help="messages (default 100,000)")
    ap.add_argument("--storage", nargs="*", default=["sqlite3", "mcap"])
    ap.add_argument("--rows", nargs="*", default=list(ROWS))
    ap.add_argument("--repeat", type=int, default=3, help="alternate runs per side (default 3)")
    args = ap.parse_args()
    data = HERE / "data"
    data.mkdir(exist_ok=True)
    print(
        f"rosbag2 read, {args.n} messages; times are the best of {args.repeat} (rosbags/polybag: above 1, polybag faster)"
    )
    print(f"{'storage':<8} {'row':<12} {'polybag s':>10} {'rosbags s':>10} {'ratio':>7}")
    for storage in args.storage:
        path = data / f"rosbag2_{storage}_{args.n}"
        make_bag(path, args.n, storage)
        for row in args.rows:
            pb, rb = ROWS[row]
            tp = tr = float("inf")
            for _ in range(args.repeat):  # alternate the sides
                a, na = best(pb, path, 1)
                b, nb = best(rb, path, 1)
                if na != nb:
                    raise SystemExit(f"{storage} {row}: polybag counted {na}, rosbags {nb}")
                tp, tr = min(tp, a), min(tr, b)
            print(f"{storage:<8} {row:<12} {tp:>10.3f} {tr:>10.3f} {tr / tp:>7.2f}")


if __name__ == "__main__":
    main()
