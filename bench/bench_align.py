"""Aligning two topics of a large log (issue 31): polybag's aligned table vs the pandas route.

Writes an MCAP (ROS 2, zstd chunks) of about ``--size`` MB: ``/imu`` (sensor_msgs/msg/Imu,
200 Hz), ``/gps`` (sensor_msgs/msg/NavSatFix, 10 Hz) and ``/camera`` (CompressedImage, 10 Hz,
random bytes sized to reach the size), then runs, each in a fresh subprocess (wall time of
the work after the imports; peak RSS as ``ru_maxrss`` of that process, which counts the
pages of the mapped file it touched; and, in one more run each, the peak of the memory
``tracemalloc`` traces, numpy arrays included, which leaves the mapped file out):

- ``aligned``: ``aligned_pandas(r, ["/imu", "/gps"])`` (polybag.codecs.aligned);
- ``pandas``: ``r.to_pandas("/imu")``, ``r.to_pandas("/gps")``, prefixed, ``pd.merge_asof``
  (the pandas route with polybag's columns);
- ``decoded``: ``r.decoded_messages`` of both topics, one dict per message
  (``m.to_dict()`` flattened by ``pd.json_normalize``), two frames, ``pd.merge_asof``
  (the route a user writes without columns; ``--skip-decoded`` leaves it out);
- ``baseline``: the imports and the open alone.

    .venv/bin/python bench/bench_align.py --size 200
    .venv/bin/python bench/bench_align.py --size 1000 --runs 1
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
IMU_HZ, GPS_HZ, CAM_HZ = 200, 10, 10


def build(path: Path, size_mb: int) -> dict[str, int]:
    """Write the log (skipped when a file of that name exists) and say what it holds."""
    import numpy as np

    import polybag
    from polybag.codecs.cdr import codec_for_type
    from polybag.codecs.ros2 import definition_for

    cam_bytes = 100_000
    seconds = max(1, size_mb * 1_000_000 // (CAM_HZ * cam_bytes))
    facts = {"seconds": seconds, "imu": seconds * IMU_HZ, "gps": seconds * GPS_HZ, "camera": seconds * CAM_HZ}
    if path.exists():
        return facts
    path.parent.mkdir(parents=True, exist_ok=True)
    types = ("sensor_msgs/msg/Imu", "sensor_msgs/msg/NavSatFix", "sensor_msgs/msg/CompressedImage")
    codecs = {t: codec_for_type(t, definition_for(t)) for t in types}
    rng = np.random.default_rng(7)
    tmp = path.with_suffix(".part")
    with polybag.Writer(tmp, format="mcap", profile="ros2") as w:
        ch = {
            t: w.add_channel(topic, "cdr", w.add_schema(t, "ros2msg", definition_for(t).encode()))
            for t, topic in zip(types, ("/imu", "/gps", "/camera"))
        }
        imu, gps, cam = (codecs[t] for t in types)
        t0 = 1_700_000_000_000_000_000
        step = 1_000_000_000 // IMU_HZ
        for k in range(seconds * IMU_HZ):
            t = t0 + k * step + int(rng.integers(0, 200_000))
            sec, ns = divmod(t, 1_000_000_000)
            hdr = {"frame_id": "imu", "stamp": {"sec": sec, "nanosec": ns}}
            w.write(
                ch[types[0]],
                imu.encode({"header": hdr, "angular_velocity": {"x": k * 1e-3, "y": 0.5, "z": -0.5}, "linear_acceleration": {"z": 9.81}}),
                t,
            )
            if k % (IMU_HZ // GPS_HZ) == 7:
                w.write(
                    ch[types[1]],
                    gps.encode({"header": {**hdr, "frame_id": "gps"}, "latitude": 48.0 + k * 1e-7, "longitude": 11.0, "altitude": 500.0}),
                    t + 1_000,
                )
            if k % (IMU_HZ // CAM_HZ) == 3:
                w.write(
                    ch[types[2]],
                    cam.encode({"header": hdr, "format": "jpeg", "data": rng.bytes(cam_bytes)}),
                    t + 2_000,
                )
    tmp.rename(path)
    return facts


def child(mode: str, path: str, trace: bool = False) -> None:
    """One measured run (in its own process): prints a JSON line."""
    import tracemalloc

    import pandas as pd

    import polybag
    from polybag.codecs.aligned import aligned_pandas

    if trace:
        tracemalloc.start()
    t = time.perf_counter()
    with polybag.open(path) as r:
        if mode == "aligned":
            df = aligned_pandas(r, ["/imu", "/gps"])
        elif mode == "pandas":
            a = r.to_pandas("/imu").reset_index()
            b = r.to_pandas("/gps").reset_index()
            a = a.rename(columns={c: f"/imu.{c}" for c in a.columns if c != "log_time"})
            b = b.rename(columns={c: f"/gps.{c}" for c in b.columns if c != "log_time"})
            b["/gps.log_time"] = b["log_time"]
            df = pd.merge_asof(a, b, on="log_time").set_index("log_time")
        elif mode == "decoded":
            rows: dict[str, list[dict[str, object]]] = {"/imu": [], "/gps": []}
            for m, _obj in r.decoded_messages(topics=["/imu", "/gps"]):
                d = m.to_dict()
                d["log_time"] = m.log_time
                rows[m.channel.topic].append(d)
            a = pd.json_normalize(rows["/imu"]).add_prefix("/imu.").rename(columns={"/imu.log_time": "log_time"})
            b = pd.json_normalize(rows["/gps"]).add_prefix("/gps.")
            b["log_time"] = b["/gps.log_time"]
            df = pd.merge_asof(a.sort_values("log_time"), b.sort_values("log_time"), on="log_time").set_index("log_time")
        else:
            df = pd.DataFrame()
    wall = time.perf_counter() - t
    traced = tracemalloc.get_traced_memory()[1] if trace else 0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    matched = int(df["/gps.latitude"].notna().sum()) if "/gps.latitude" in df else 0
    print(json.dumps({"mode": mode, "wall": wall, "rss": rss, "traced": traced, "rows": len(df), "cols": df.shape[1], "matched": matched}))


def run(mode: str, path: Path, trace: bool = False) -> dict[str, float]:
    argv = [sys.executable, __file__, "--child", mode, str(path)] + (["--trace"] if trace else [])
    out = subprocess.run(argv, capture_output=True, text=True, check=True)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=1000, help="MB of log to write (default 1000)")
    ap.add_argument("--runs", type=int, default=2, help="runs of each side (best kept)")
    ap.add_argument("--skip-decoded", action="store_true", help="leave out the per-message decode route")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--trace", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(*a.child, trace=a.trace)
        return
    path = HERE / "data" / f"align_{a.size}mb.mcap"
    t = time.perf_counter()
    facts = build(path, a.size)
    print(f"log: {path} {os.path.getsize(path) / 1e6:.0f} MB, {facts} (ready in {time.perf_counter() - t:.1f} s)")
    modes = ["baseline", "aligned", "pandas"] + ([] if a.skip_decoded else ["decoded"])
    best: dict[str, dict[str, float]] = {}
    for _ in range(a.runs):
        for mode in modes:  # the sides take turns
            res = run(mode, path)
            if mode not in best or res["wall"] < best[mode]["wall"]:
                best[mode] = {**res, "rss": min(res["rss"], best.get(mode, res)["rss"])}
    for mode in modes:  # one more run each under tracemalloc: the peak of Python and numpy allocations
        best[mode]["traced"] = run(mode, path, trace=True)["traced"]
    print(f"{'route':10} {'time s':>8} {'peak RSS MB':>12} {'traced MB':>10} {'rows':>9} {'cols':>5} {'matched':>8}")
    for mode in modes:
        r = best[mode]
        print(
            f"{mode:10} {r['wall']:8.2f} {r['rss'] / 1e6:12.0f} {r['traced'] / 1e6:10.1f} {int(r['rows']):9d} {int(r['cols']):5d} {int(r['matched']):8d}"
        )
    base = best["baseline"]["rss"]
    for other in modes[2:]:
        o, p = best[other], best["aligned"]
        print(
            f"{other} / aligned: time x{o['wall'] / p['wall']:.2f}, peak RSS x{o['rss'] / p['rss']:.2f}, "
            f"RSS above the baseline x{(o['rss'] - base) / max(1.0, p['rss'] - base):.2f}, "
            f"traced peak x{o['traced'] / max(1.0, p['traced']):.2f}"
        )


if __name__ == "__main__":
    main()
