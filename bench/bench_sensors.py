"""Sensor data to arrays (issue 19): images and point clouds, side by side in one run.

Rows (best of ``--repeat`` runs each, the sides alternating, the page cache warm):

- **images, read the bytes**: 2,000 640x480 ``rgb8`` images (1.8 GB, an uncompressed bag,
  ROS 1; ``--mcap``: an uncompressed ROS 2 MCAP) to arrays that own their pixels
  (``reader.images(topic, copy=True)``) vs just reading every payload's bytes
  (``bytes(m.data)`` for each message).  Target: within 1.5x.
- **images, views**: ``reader.images(topic)`` (views of the file) vs iterating the messages.
- **images, rosbags**: ``reader.images(topic)`` vs rosbags' ``Reader`` + ``deserialize_ros1``
  + rosbags-image's ``message_to_cvimage`` (the peer most people would use; it too gives
  arrays over the message's buffer), for reference.
- **PointCloud2**: ``--clouds`` clouds of 100k points (x, y, z, intensity, ring, time with
  padding: 32-byte points) to a structured array (``pointcloud2_to_numpy`` of the decoded
  message) vs per-point decoding as ROS's ``sensor_msgs.point_cloud2.read_points`` does it
  (one ``struct.unpack_from`` per point) of the same decoded message.  Target: >= 20x.

    .venv/bin/python bench/bench_sensors.py                 # the issue's sizes
    .venv/bin/python bench/bench_sensors.py -n 200 --repeat 1 --clouds 2   # a quick look
"""

from __future__ import annotations

import argparse
import gc
import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

import polybag  # noqa: E402
from polybag import sensors  # noqa: E402
from polybag.codecs.ros1 import codec_for_type, definition_for  # noqa: E402

DATA = HERE / "data" / "sensors"
T0 = 1_700_000_000_000_000_000
IMAGE_TARGET = 1.5
CLOUD_TARGET = 20.0


def image_log(n: int, width: int, height: int, mcap: bool) -> Path:
    """``n`` rgb8 images on /camera/image_raw at 30 Hz (built once under bench/data)."""
    DATA.mkdir(parents=True, exist_ok=True)
    path = DATA / f"images_{n}_{width}x{height}.{'mcap' if mcap else 'bag'}"
    if path.exists():
        return path
    rng = np.random.default_rng(0)
    base = rng.integers(0, 255, (height, width, 3), dtype=np.uint8)
    with polybag.Writer(str(path), compression="none") as w:
        if mcap:
            from rosbags.typesys import Stores, get_typestore

            ts = get_typestore(Stores.ROS2_HUMBLE)
            text = ts.generate_msgdef("sensor_msgs/msg/Image")[0]
            ch = w.add_channel(
                "/camera/image_raw", "cdr", w.add_schema("sensor_msgs/msg/Image", "ros2msg", text.encode())
            )
        else:
            ch = w.add_channel(
                "/camera/image_raw",
                "ros1",
                w.add_schema("sensor_msgs/Image", "ros1msg", definition_for("sensor_msgs/Image").encode()),
            )
        for i in range(n):
            img = np.roll(base, i, axis=1)
            t = T0 + i * 33_333_333
            if mcap:
                body = _cdr_image(img, t)
            else:
                d = sensors.numpy_to_image(img, "rgb8")
                d["header"]["stamp"] = {"sec": t // 10**9, "nsec": t % 10**9}
                body = codec_for_type("sensor_msgs/Image").encode(d)
            w.write(ch, body, t)
    return path


def _cdr_image(img: np.ndarray, t: int) -> bytes:
    h, w = img.shape[:2]
    frame = b"camera\0"
    out = bytearray(b"\x00\x01\x00\x00")
    out += struct.pack("<iI", t // 10**9, t % 10**9) + struct.pack("<I", len(frame)) + frame
    out += b"\0" * (-(len(out) - 4) % 4)
    enc = b"rgb8\0"
    out += struct.pack("<II", h, w) + struct.pack("<I", len(enc)) + enc + b"\0"  # is_bigendian
    out += b"\0" * (-(len(out) - 4) % 4)
    out += struct.pack("<II", w * 3, h * w * 3) + img.tobytes()
    return bytes(out)


def read_bytes(path: Path) -> int:
    n = 0
    with polybag.open(path) as r:
        for m in r.messages("/camera/image_raw"):
            n += len(bytes(m.data))
    return n


def iterate(path: Path) -> int:
    n = 0
    with polybag.open(path) as r:
        for m in r.messages("/camera/image_raw"):
            n += len(m.data)
    return n


def arrays(path: Path, copy: bool) -> int:
    n = 0
    with polybag.open(path) as r:
        for _t, a in r.images("/camera/image_raw", copy=copy):
            n += a.nbytes
    return n


def rosbags_images(path: Path) -> int:
    from rosbags.image import message_to_cvimage
    from rosbags.rosbag1 import Reader
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS1_NOETIC)
    n = 0
    with Reader(path) as r:
        conns = [c for c in r.connections if c.topic == "/camera/image_raw"]
        for conn, _t, raw in r.messages(connections=conns):
            n += message_to_cvimage(ts.deserialize_ros1(raw, conn.msgtype)).nbytes
    return n


# --- point clouds ------------------------------------------------------------------------------
CLOUD_FIELDS = [("x", 0, 7), ("y", 4, 7), ("z", 8, 7), ("intensity", 16, 7), ("ring", 20, 4), ("time", 24, 7)]
POINT_STEP = 32


def cloud_payloads(count: int, points: int) -> list[bytes]:
    rng = np.random.default_rng(1)
    dt = np.dtype(
        {
            "names": [f[0] for f in CLOUD_FIELDS],
            "formats": ["<f4", "<f4", "<f4", "<f4", "<u2", "<f4"],
            "offsets": [f[1] for f in CLOUD_FIELDS],
            "itemsize": POINT_STEP,
        }
    )
    codec = codec_for_type("sensor_msgs/PointCloud2")
    out = []
    for _ in range(count):
        a = np.zeros(points, dt)
        for n in ("x", "y", "z", "intensity", "time"):
            a[n] = rng.normal(size=points)
        a["ring"] = rng.integers(0, 64, points)
        out.append(codec.encode(sensors.numpy_to_pointcloud2(a)))
    return out


_FMT = {1: "b", 2: "B", 3: "h", 4: "H", 5: "i", 6: "I", 7: "f", 8: "d"}


def read_points(msg: Any) -> list[tuple[Any, ...]]:
    """ROS's ``sensor_msgs.point_cloud2.read_points`` approach: a struct of the fields (with
    pad bytes between them), ``unpack_from`` once per point."""
    fmt = ">" if msg.is_bigendian else "<"
    offset = 0
    for f in sorted(msg.fields, key=lambda f: f.offset):
        if offset < f.offset:
            fmt += "x" * (f.offset - offset)
            offset = f.offset
        fmt += _FMT[f.datatype] * f.count
        offset += struct.calcsize(_FMT[f.datatype]) * f.count
    unpack = struct.Struct(fmt).unpack_from
    data = msg.data
    out = []
    for v in range(msg.height):
        row = v * msg.row_step
        for u in range(msg.width):
            out.append(unpack(data, row + u * msg.point_step))
    return out


def clouds_polybag(payloads: list[bytes]) -> int:
    codec = codec_for_type("sensor_msgs/PointCloud2")
    return sum(len(sensors.pointcloud2_to_numpy(codec.decode(p))) for p in payloads)


def clouds_per_point(payloads: list[bytes]) -> int:
    codec = codec_for_type("sensor_msgs/PointCloud2")
    return sum(len(read_points(codec.decode(p))) for p in payloads)


def best(fns: dict[str, Callable[[], int]], repeat: int) -> dict[str, float]:
    times = {k: float("inf") for k in fns}
    results: dict[str, int] = {}
    for _ in range(repeat):
        for k, fn in fns.items():
            gc.collect()
            t = time.perf_counter()
            results[k] = fn()
            times[k] = min(times[k], time.perf_counter() - t)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=2000, help="images (default 2000)")
    ap.add_argument("--width", type=int, default=640)
    ap.add_argument("--height", type=int, default=480)
    ap.add_argument("--mcap", action="store_true", help="the images in a ROS 2 MCAP instead of a ROS 1 bag")
    ap.add_argument("--points", type=int, default=100_000)
    ap.add_argument("--clouds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-rosbags", action="store_true", help="leave out the rosbags image row")
    args = ap.parse_args()

    path = image_log(args.n, args.width, args.height, args.mcap)
    size = path.stat().st_size
    read_bytes(path)  # warm the page cache
    fns: dict[str, Callable[[], int]] = {
        "read the bytes": lambda: read_bytes(path),
        "arrays (copy)": lambda: arrays(path, True),
        "iterate": lambda: iterate(path),
        "arrays (views)": lambda: arrays(path, False),
    }
    if not args.skip_rosbags and not args.mcap:
        fns["rosbags + rosbags-image"] = lambda: rosbags_images(path)
    t = best(fns, args.repeat)
    print(
        f"images: {args.n} {args.width}x{args.height} rgb8, {path.name} ({size / 1e9:.2f} GB), best of {args.repeat}"
    )
    rows = [
        (
            "images to arrays (copy) vs read the bytes",
            t["arrays (copy)"],
            t["read the bytes"],
            IMAGE_TARGET,
            True,
        ),
        ("images to arrays (views) vs iterate", t["arrays (views)"], t["iterate"], None, True),
    ]
    if "rosbags + rosbags-image" in t:
        rows.append(
            (
                "images to arrays (views) vs rosbags + rosbags-image",
                t["arrays (views)"],
                t["rosbags + rosbags-image"],
                None,
                False,
            )
        )

    payloads = cloud_payloads(args.clouds, args.points)
    c = best(
        {"polybag": lambda: clouds_polybag(payloads), "per point": lambda: clouds_per_point(payloads)},
        args.repeat,
    )
    rows.append(
        (
            f"PointCloud2 {args.clouds} x {args.points // 1000}k points vs per-point struct",
            c["polybag"],
            c["per point"],
            CLOUD_TARGET,
            False,
        )
    )

    print(f"{'what':<62} {'polybag':>9} {'other':>9} {'ratio':>8}  target")
    for what, ours, other, target, slower_is_ratio in rows:
        if slower_is_ratio:  # polybag time / baseline time: how many times the bare read
            ratio = ours / other
            goal = f"<= {target}x {'met' if ratio <= target else 'NOT met'}" if target else ""
            print(f"{what:<62} {ours:8.3f}s {other:8.3f}s {ratio:7.2f}x  {goal}  (polybag / baseline)")
        else:
            ratio = other / ours
            goal = f">= {target}x {'met' if ratio >= target else 'NOT met'}" if target else ""
            print(f"{what:<62} {ours:8.3f}s {other:8.3f}s {ratio:7.1f}x  {goal}  (other / polybag)")


if __name__ == "__main__":
    main()
