"""Bag write of ready-serialized messages: polybag's writer vs rosbags' ``rosbag1.Writer``.

The issue 13 row: 100k ``sensor_msgs/Imu`` payloads (already serialized, in memory), one
topic, log times 5 ms apart, written with each writer's defaults (polybag: 768 KiB chunks;
rosbags: 1 MiB chunks).  The two sides run alternately in this process and each keeps its
best wall time (polybag compresses chunks on its worker threads, so CPU time would add the
threads up).  polybag's writer fsyncs the file on close; the rosbags side is fsynced after its
close too (``--no-peer-fsync``: not), so both end with the file on disk.

    .venv/bin/python bench/bench_write.py                  # lz4 (the row), none, bz2
    .venv/bin/python bench/bench_write.py -n 20000 --compression lz4 --repeat 3
    .venv/bin/python bench/bench_write.py --profile lz4    # cProfile of one polybag write
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

import polybag  # noqa: E402

sys.path.insert(0, str(HERE))
import bench_bag  # noqa: E402
from bench_bag import write_polybag  # noqa: E402, F401 - the one polybag write of the benches

TYPE = "sensor_msgs/Imu"
T0 = 1_700_000_000_000_000_000
TARGET = 3.0  # the lz4 row of issue 13
PEER_FSYNC = True


def payloads(n: int) -> list[bytes]:
    """``n`` serialized Imu messages (varying header and values)."""
    import numpy as np

    from polybag.codecs.ros1 import codec_for_type, definition_for

    codec = codec_for_type(TYPE, definition_for(TYPE))
    o = codec.message_class()
    o.header.frame_id = "imu_link"
    vals = np.random.default_rng(1).normal(size=(n, 10)).tolist()
    out = []
    for i in range(n):
        t = T0 + i * 5_000_000
        o.header.seq = i
        o.header.stamp.sec, o.header.stamp.nsec = divmod(t, 1_000_000_000)
        v = vals[i]
        o.orientation.x, o.orientation.y, o.orientation.z, o.orientation.w = v[0:4]
        o.angular_velocity.x, o.angular_velocity.y, o.angular_velocity.z = v[4:7]
        o.linear_acceleration.x, o.linear_acceleration.y, o.linear_acceleration.z = v[7:10]
        out.append(codec.encode(o))
    return out


def write_rosbags(path: Path, data: list[bytes], compression: str) -> int:
    return bench_bag.write_rosbags(path, data, compression, TYPE, fsync=PEER_FSYNC)


def timed(fn, *args) -> float:  # type: ignore[no-untyped-def]
    gc.collect()
    t = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=100_000, help="messages (default 100,000)")
    ap.add_argument("--compression", nargs="*", default=["lz4", "none", "bz2"])
    ap.add_argument("--repeat", type=int, default=5, help="alternate runs per side (default 5)")
    ap.add_argument("--profile", metavar="COMPRESSION", help="cProfile one polybag write instead")
    ap.add_argument("--no-peer-fsync", action="store_true", help="leave the rosbags file unsynced")
    args = ap.parse_args()
    global PEER_FSYNC
    PEER_FSYNC = not args.no_peer_fsync
    data = payloads(args.n)
    with tempfile.TemporaryDirectory(prefix="bench_write_") as tmp:
        a, b = Path(tmp) / "polybag.bag", Path(tmp) / "rosbags.bag"
        if args.profile:
            write_polybag(a, data, args.profile)  # warm up (imports, the pool)
            prof = cProfile.Profile()
            prof.enable()
            write_polybag(a, data, args.profile)
            prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats(15)
            return
        print(f"bag write, {args.n} ready-serialized {TYPE} messages, best of {args.repeat} (wall)")
        for comp in args.compression:
            pb: list[float] = []
            rb: list[float] = []
            for _ in range(args.repeat):
                pb.append(timed(write_polybag, a, data, comp))
                rb.append(timed(write_rosbags, b, data, comp))
            for p in (a, b):
                with polybag.open(str(p)) as r:
                    got = r.summary.message_count
                if got != args.n:
                    raise SystemExit(f"{p.name}: {got} messages, not {args.n}")
            ratio = min(rb) / min(pb)
            tgt = f"  (target >= {TARGET}x)" if comp == "lz4" else ""
            med = sorted(rb)[len(rb) // 2] / sorted(pb)[len(pb) // 2]
            print(
                f"  {comp:<5} polybag {min(pb) * 1e3:7.1f} ms   rosbags {min(rb) * 1e3:7.1f} ms   "
                f"polybag {ratio:.2f}x faster (medians: {med:.2f}x){tgt}"
            )


if __name__ == "__main__":
    main()
