"""polybag.dask.read_topic on N generated MCAP files against plain loops; print ratios.

    .venv/bin/python bench/bench_dask.py [--files 4] [--messages 250000] [--workers 2]

Each file: an IMU-like ROS 1 topic (``/imu``: header + 10 float64) and a second topic, zstd
chunks of 256 KiB.  The job: one pandas frame of ``/imu`` (log_time + every field) for
all files.  Compared:

* mcap library loop: ``make_reader(f).iter_messages(topics=["/imu"])`` per file, the
  fields unpacked with ``struct`` per message, one frame at the end;
* polybag loop: ``polybag.open(f).to_pandas("/imu")`` per file, concatenated;
* polybag.dask ``read_topic(glob, "/imu")`` computed with the sync, threads and processes
  schedulers (``--workers``), also a column mean (``df["ax"].mean()``) through dask.
"""

from __future__ import annotations

import argparse
import struct
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

IMU_DEF = b"uint32 seq\ntime stamp\nstring frame_id\nfloat64 ax\nfloat64 ay\nfloat64 az\nfloat64 gx\nfloat64 gy\nfloat64 gz\nfloat64 qx\nfloat64 qy\nfloat64 qz\nfloat64 qw\n"
FRAME = b"imu_link"
HEAD = struct.Struct("<III")
TAIL = struct.Struct("<10d")
T0 = 1_700_000_000_000_000_000


def payload(i: int, t: int) -> bytes:
    s, ns = divmod(t, 1_000_000_000)
    vals = (i * 0.001, 0.1, 9.81, 0.0, 0.01, -0.01, 0.0, 0.0, 0.0, 1.0)
    return HEAD.pack(i, s, ns) + struct.pack("<I", len(FRAME)) + FRAME + TAIL.pack(*vals)


def generate(path: Path, n: int, k: int) -> None:
    from polybag.formats.mcap.writer import McapWriter

    with McapWriter(path, chunk_size=256 << 10, compression="zstd") as w:
        s = w.add_schema("bench/Imu", "ros1msg", IMU_DEF)
        o = w.add_schema("std_msgs/UInt32", "ros1msg", b"uint32 data\n")
        imu = w.add_channel("/imu", "ros1", s)
        other = w.add_channel("/other", "ros1", o)
        base = T0 + k * 10**12
        for i in range(n):
            t = base + i * 1_000_000
            w.write(imu, payload(i, t), log_time=t)
            if i % 10 == 0:
                w.write(other, struct.pack("<I", i), log_time=t)


def timed(fn: Callable[[], Any], repeat: int = 2) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


NAMES = ["ax", "ay", "az", "gx", "gy", "gz", "qx", "qy", "qz", "qw"]


def mcap_loop(files: list[Path]) -> Any:
    import pandas as pd
    from mcap.reader import make_reader

    times: list[int] = []
    rows: list[tuple[float, ...]] = []
    for p in files:
        with open(p, "rb") as f:
            for _s, _c, m in make_reader(f).iter_messages(topics=["/imu"]):
                d = m.data
                flen = struct.unpack_from("<I", d, 12)[0]
                times.append(m.log_time)
                rows.append(TAIL.unpack_from(d, 16 + flen))
    arr = np.array(rows)
    return pd.DataFrame({n: arr[:, i] for i, n in enumerate(NAMES)}, index=pd.Index(times, name="log_time"))


def polybag_loop(files: list[Path]) -> Any:
    import pandas as pd

    import polybag

    frames = []
    for p in files:
        with polybag.open(p) as r:
            frames.append(r.to_pandas("/imu"))
    return pd.concat(frames)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--messages", type=int, default=250_000)
    ap.add_argument("--partition-messages", type=int, default=250_000)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()

    import polybag.dask as pbd

    with tempfile.TemporaryDirectory() as d:
        files = [Path(d) / f"run{k:02d}.mcap" for k in range(args.files)]
        for k, p in enumerate(files):
            generate(p, args.messages, k)
        total = args.files * args.messages
        print(
            f"{args.files} files x {args.messages} /imu messages ({sum(p.stat().st_size for p in files) >> 20} MiB)"
        )

        t_mcap, ref = timed(lambda: mcap_loop(files), repeat=1)
        t_loop, got = timed(lambda: polybag_loop(files))
        assert len(ref) == len(got) == total and np.allclose(ref["ax"].to_numpy(), got["ax"].to_numpy())

        def dask_df() -> Any:
            return pbd.read_topic(str(Path(d) / "*.mcap"), "/imu", partition_messages=args.partition_messages)

        t_plan, df = timed(dask_df)
        print(
            f"  dask plan: {df.npartitions} partitions, divisions known: {df.known_divisions}, {t_plan * 1e3:.1f} ms"
        )
        results = {}
        for sched in ("sync", "threads", "processes"):
            kw: dict[str, Any] = {"scheduler": sched}
            if sched != "sync":
                kw["num_workers"] = args.workers
            t, out = timed(lambda kw=kw: dask_df().compute(**kw))
            assert len(out) == total and np.allclose(out["ax"].to_numpy(), ref["ax"].to_numpy())
            results[sched] = t
        t_mean, mean = timed(
            lambda: dask_df()["ax"].mean().compute(scheduler="threads", num_workers=args.workers)
        )
        assert abs(mean - ref["ax"].mean()) < 1e-9

        def line(name: str, t: float) -> None:
            print(
                f"  {name:38s} {t:8.3f} s  {total / t / 1e6:6.2f} M msg/s  mcap loop / this: {t_mcap / t:6.2f}x"
            )

        line("mcap library loop (struct unpack)", t_mcap)
        line("polybag to_pandas loop", t_loop)
        for sched, t in results.items():
            line(f"polybag.dask read_topic [{sched}]", t)
        line("polybag.dask ax.mean() [threads]", t_mean)


if __name__ == "__main__":
    main()
