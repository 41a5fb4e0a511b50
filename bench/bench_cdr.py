"""ROS 2 CDR speed: polybag vs rosbags (and mcap-ros2-support), side by side in one run.

    .venv/bin/python bench/bench_cdr.py [--n 100000] [--repeat 3] [--wall]

Makes ``n`` sensor_msgs/msg/Imu CDR payloads (random values, one frame id) in memory and
measures, each the best of ``--repeat`` runs in CPU time of this process:
  1. decode to objects: ``CdrCodec.decode`` vs rosbags' ``Typestore.deserialize_cdr`` (and
     mcap-ros2-support's dynamic decoder, once);
  2. encode objects: ``CdrCodec.encode`` vs rosbags' ``serialize_cdr`` of rosbags' objects;
  3. columns of the whole topic (``payload_columns``: every field as a numpy column) vs
     rosbags decoding every message and collecting the same fields;
  4. a ROS 1 bag of the same messages converted to ROS 2: ``polybag convert --profile ros2``
     (to MCAP) vs rosbags-convert (to a rosbag2 directory with MCAP storage), and a rosbag2
     directory (sqlite3) converted to a ROS 1 bag by both, wall time.
Prints the times and the ratios (peer time / polybag time: above 1 means polybag is faster).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import polybag
from polybag.codecs.cdr import codec_for_type
from polybag.codecs.columns import payload_columns
from polybag.codecs.ros2 import definition_for

TYPE = "sensor_msgs/msg/Imu"
CLOCK: dict[str, Callable[[], float]] = {"fn": time.process_time}
REPEAT = {"n": 3}


def timed(label: str, fn: Callable[[], Any], repeat: int | None = None) -> float:
    """Best of ``repeat`` runs (the machine is shared: the minimum is the least disturbed)."""
    runs = []
    for _ in range(repeat or REPEAT["n"]):
        gc.collect()
        t = CLOCK["fn"]()
        fn()
        runs.append(CLOCK["fn"]() - t)
    best = min(runs)
    print(f"  {label:<46} {best:8.3f} s  (median {sorted(runs)[len(runs) // 2]:.3f} s)")
    return best


def each(fn: Callable[[Any], Any], items: list[Any]) -> None:
    """The usual loop (as bench_decode's): decode or encode a message, use it, drop it."""
    for x in items:
        fn(x)


def ratio(what: str, ours: float, peers: dict[str, float]) -> None:
    for name, t in peers.items():
        print(f"  -> {what}: polybag is {t / ours:.1f}x faster than {name}")


def make_values(n: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(1)
    v = rng.normal(size=(n, 10))
    t0 = 1_700_000_000_000_000_000
    out = []
    for i in range(n):
        t = t0 + i * 5_000_000
        out.append(
            {
                "header": {"stamp": {"sec": t // 10**9, "nanosec": t % 10**9}, "frame_id": "imu_link"},
                "orientation": {"x": v[i, 0], "y": v[i, 1], "z": v[i, 2], "w": v[i, 3]},
                "angular_velocity": {"x": v[i, 4], "y": v[i, 5], "z": v[i, 6]},
                "linear_acceleration": {"x": v[i, 7], "y": v[i, 8], "z": v[i, 9]},
                "orientation_covariance": [0.01] * 9,
            }
        )
    return out


def bench_codec(n: int) -> None:
    text = definition_for(TYPE)
    codec = codec_for_type(TYPE, text)
    payloads = [codec.encode(v) for v in make_values(n)]
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_JAZZY)
    print(f"{n} {TYPE} CDR payloads ({len(payloads[0])} bytes each), decode to objects:")
    ours = timed("polybag CdrCodec.decode", lambda: each(codec.decode, payloads))
    peers = {
        "rosbags": timed(
            "rosbags deserialize_cdr", lambda: each(lambda p: store.deserialize_cdr(p, TYPE), payloads)
        )
    }
    try:
        from mcap.records import Schema
        from mcap_ros2.decoder import DecoderFactory

        dec = DecoderFactory().decoder_for(
            "cdr", Schema(id=1, name=TYPE, encoding="ros2msg", data=text.encode())
        )
        if dec is not None:
            peers["mcap-ros2-support"] = timed("mcap-ros2-support decoder", lambda: each(dec, payloads), 1)
    except ImportError:
        pass
    ratio("decode", ours, peers)

    print("encode objects:")
    objs = [codec.decode(p) for p in payloads]
    robjs = [store.deserialize_cdr(p, TYPE) for p in payloads]
    ours = timed("polybag CdrCodec.encode", lambda: each(codec.encode, objs))
    theirs = timed("rosbags serialize_cdr", lambda: each(lambda o: store.serialize_cdr(o, TYPE), robjs))
    assert codec.encode(objs[0]) == bytes(store.serialize_cdr(robjs[0], TYPE))
    ratio("encode", ours, {"rosbags": theirs})

    print("columns of the topic (every numeric field as a column):")

    def rosbags_columns() -> dict[str, np.ndarray]:
        msgs = [store.deserialize_cdr(p, TYPE) for p in payloads]
        return {
            "orientation.x": np.array([m.orientation.x for m in msgs]),
            "orientation.w": np.array([m.orientation.w for m in msgs]),
            "angular_velocity.z": np.array([m.angular_velocity.z for m in msgs]),
            "linear_acceleration.x": np.array([m.linear_acceleration.x for m in msgs]),
            "header.stamp": np.array([m.header.stamp.sec * 10**9 + m.header.stamp.nanosec for m in msgs]),
            "orientation_covariance": np.stack([m.orientation_covariance for m in msgs]),
        }

    ours = timed("polybag payload_columns (all 40 columns)", lambda: payload_columns(codec, payloads))
    theirs = timed("rosbags deserialize + 6 columns", rosbags_columns)
    ratio("columns", ours, {"rosbags": theirs})


def bench_convert(n: int) -> None:
    from polybag.codecs.ros1 import codec_for_type as ros1_codec
    from polybag.codecs.ros1 import definition_for as ros1_def

    tmp = Path(tempfile.mkdtemp(prefix="bench-cdr-"))
    try:
        bag = tmp / "imu.bag"
        t1 = "sensor_msgs/Imu"
        c1 = ros1_codec(t1, ros1_def(t1))
        with polybag.Writer(bag) as w:
            ch = w.add_channel(
                "/imu", "ros1", w.add_schema(t1, "ros1msg", ros1_def(t1).encode()), {"md5sum": c1.md5sum}
            )
            for i, v in enumerate(make_values(n)):
                v["header"]["stamp"] = {
                    "sec": v["header"]["stamp"]["sec"],
                    "nsec": v["header"]["stamp"]["nanosec"],
                }
                w.write(ch, c1.encode(v), i + 1)
        print(f"convert a bag of {n} sensor_msgs/Imu to ROS 2 (wall time, one run each):")
        from rosbags.convert import convert as rconvert

        from polybag.ops import convert

        t = time.perf_counter()
        convert(bag, tmp / "ours.mcap", profile="ros2")
        ours = time.perf_counter() - t
        print(f"  {'polybag convert --profile ros2 (MCAP)':<46} {ours:8.3f} s")
        t = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            rconvert([bag], tmp / "rb", "mcap", 8, None, "file", None, None, [], [], [], [])
        theirs = time.perf_counter() - t
        print(f"  {'rosbags-convert (rosbag2, MCAP storage)':<46} {theirs:8.3f} s")
        ratio("convert", ours, {"rosbags-convert": theirs})
        print(f"convert a rosbag2 directory (sqlite3) of {n} sensor_msgs/msg/Imu to a ROS 1 bag (wall time):")
        convert(bag, tmp / "r2", format="rosbag2", compression="none")
        t = time.perf_counter()
        convert(tmp / "r2", tmp / "back.bag")
        ours = time.perf_counter() - t
        print(f"  {'polybag convert (bag)':<46} {ours:8.3f} s")
        t = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            rconvert([tmp / "r2"], tmp / "rb.bag", "sqlite3", 8, None, "file", None, None, [], [], [], [])
        theirs = time.perf_counter() - t
        print(f"  {'rosbags-convert (bag)':<46} {theirs:8.3f} s")
        ratio("convert back", ours, {"rosbags-convert": theirs})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--wall", action="store_true", help="wall time instead of CPU time")
    p.add_argument("--no-convert", action="store_true", help="skip the conversion row")
    a = p.parse_args()
    REPEAT["n"] = a.repeat
    if a.wall:
        CLOCK["fn"] = time.perf_counter
    bench_codec(a.n)
    if not a.no_convert:
        bench_convert(a.n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
