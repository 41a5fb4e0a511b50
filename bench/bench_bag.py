"""Read a large generated bag with polybag, rosbags and rosbag-standalone; print ratios.

    .venv/bin/python bench/bench_bag.py [--messages 1000000] [--skip-standalone]

Messages: 5 topics of std_msgs/String-like payloads (20-40 bytes), 100 Hz-ish spacing.
Measures raw iteration (every message's bytes touched), `info` (open + summary + per-topic
counts), one topic, and a 1% time window, for uncompressed and lz4 bags.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import polybag
from polybag.formats.bag.writer import BagWriter

DEF = b"string data\n"
MD5 = "992ce8a1687cec8c8bd883ec73ca41d1"
T0 = 1_700_000_000_000_000_000


def generate(path: Path, n: int, compression: str) -> None:
    w = BagWriter(path, compression=compression)
    s = w.add_schema("std_msgs/String", "ros1msg", DEF)
    chans = [w.add_channel(f"/topic{i}", "ros1", s, {"md5sum": MD5, "callerid": "/bench"}) for i in range(5)]
    payloads = [(20 + i % 21).to_bytes(4, "little") + b"x" * (20 + i % 21) for i in range(64)]
    for i in range(n):
        w.write(chans[i % 5], payloads[i % 64], T0 + i * 1_000_000)
    w.close()


def timed(fn: Callable[[], int], repeat: int = 1) -> tuple[float, int]:
    best = float("inf")
    out = 0
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


# --- polybag ---------------------------------------------------------------------------------
def pb_all(p: Path) -> int:
    n = 0
    with polybag.open(p) as r:
        for m in r.messages():
            n += len(m.data)
    return n


def pb_info(p: Path) -> int:
    with polybag.open(p) as r:
        s = r.summary
        return sum(s.topic_message_counts().values())


def pb_topic(p: Path) -> int:
    n = 0
    with polybag.open(p) as r:
        for m in r.messages(topics=["/topic3"]):
            n += len(m.data)
    return n


def pb_window(p: Path, n_msgs: int) -> int:
    n = 0
    a = T0 + n_msgs * 1_000_000 // 2
    with polybag.open(p) as r:
        for m in r.messages(start=a, end=a + n_msgs * 1_000_000 // 100):
            n += len(m.data)
    return n


# --- rosbags ----------------------------------------------------------------------------------
def rb_all(p: Path) -> int:
    from rosbags.rosbag1 import Reader

    n = 0
    with Reader(p) as r:
        for _c, _t, raw in r.messages():
            n += len(raw)
    return n


def rb_info(p: Path) -> int:
    from rosbags.rosbag1 import Reader

    with Reader(p) as r:
        return sum(c.msgcount for c in r.connections)


def rb_topic(p: Path) -> int:
    from rosbags.rosbag1 import Reader

    n = 0
    with Reader(p) as r:
        conns = [c for c in r.connections if c.topic == "/topic3"]
        for _c, _t, raw in r.messages(connections=conns):
            n += len(raw)
    return n


def rb_window(p: Path, n_msgs: int) -> int:
    from rosbags.rosbag1 import Reader

    n = 0
    a = T0 + n_msgs * 1_000_000 // 2
    with Reader(p) as r:
        for _c, _t, raw in r.messages(start=a, stop=a + n_msgs * 1_000_000 // 100):
            n += len(raw)
    return n


# --- writing ready-serialized messages (run_all.py: 100k sensor_msgs/Imu) --------------------
IMU_TOPIC = "/imu"


def write_polybag(path: Path, payloads: list[bytes], compression: str, type_name: str = "sensor_msgs/Imu") -> int:
    """polybag's bag writer with its defaults; one log time per message, 5 ms apart."""
    from polybag.codecs.ros1 import codec_for_type, definition_for

    text = definition_for(type_name)
    md5 = codec_for_type(type_name, text).md5sum
    w = polybag.Writer(str(path), format="bag", compression=compression)
    ch = w.add_channel(IMU_TOPIC, "ros1", w.add_schema(type_name, "ros1msg", text), {"md5sum": md5})
    write = w.write
    for i, p in enumerate(payloads):
        t = T0 + i * 5_000_000
        write(ch, p, t, t, i)
    w.close()
    return len(payloads)


def write_rosbags(
    path: Path, payloads: list[bytes], compression: str, type_name: str = "sensor_msgs/Imu", fsync: bool = True
) -> int:
    """rosbags' ``rosbag1.Writer`` with its defaults, the same messages and times; ``fsync``:
    the file is synced to disk at the end, as polybag's writer leaves it (equal work)."""
    from rosbags.rosbag1 import Writer

    from polybag.codecs.ros1 import codec_for_type, definition_for

    text = definition_for(type_name)
    md5 = codec_for_type(type_name, text).md5sum
    if path.exists():
        path.unlink()  # rosbags refuses to overwrite
    w = Writer(path)
    if compression != "none":  # before open()
        w.set_compression(getattr(Writer.CompressionFormat, compression.upper()))
    with w:
        pkg, name = type_name.split("/")
        c = w.add_connection(IMU_TOPIC, f"{pkg}/msg/{name}", msgdef=text, md5sum=md5)
        write = w.write
        for i, p in enumerate(payloads):
            write(c, T0 + i * 5_000_000, p)
    if fsync:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return len(payloads)


# --- rosbag-standalone -------------------------------------------------------------------------
def rs_all(p: Path) -> int:
    import rosbag

    n = 0
    with rosbag.Bag(str(p)) as b:
        for _tp, m, _t in b.read_messages(raw=True):
            n += len(m[1])
    return n


def rs_info(p: Path) -> int:
    import rosbag

    with rosbag.Bag(str(p)) as b:
        return sum(t.message_count for t in b.get_type_and_topic_info().topics.values())


def run(p: Path, comp: str, n: int, standalone: bool) -> None:
    t = time.perf_counter()
    generate(p, n, comp)
    print(
        f"\n== {n} messages, {comp}, {os.path.getsize(p) / 1e6:.1f} MB (written by polybag in "
        f"{time.perf_counter() - t:.2f} s)"
    )
    rows: list[tuple[str, float, float, float | None]] = []

    tp, a = timed(lambda: pb_all(p), 3)
    tr, b = timed(lambda: rb_all(p), 3)
    assert a == b, (a, b)
    ts = None
    if standalone:
        ts, c = timed(lambda: rs_all(p))
        assert a == c
    rows.append(("read all (raw)", tp, tr, ts))

    tp, a = timed(lambda: pb_info(p), 3)
    tr, b = timed(lambda: rb_info(p), 1)
    assert a == b == n
    ts = None
    if standalone:
        ts, c = timed(lambda: rs_info(p), 1)
        assert c == n
    rows.append(("info", tp, tr, ts))

    tp, a = timed(lambda: pb_topic(p), 2)
    tr, b = timed(lambda: rb_topic(p))
    assert a == b
    rows.append(("one topic of 5", tp, tr, None))

    tp, a = timed(lambda: pb_window(p, n), 3)
    tr, b = timed(lambda: rb_window(p, n))
    assert a == b
    rows.append(("1% time window", tp, tr, None))

    # an unindexed copy (as a killed recorder leaves it): polybag scans, rosbags refuses
    u = p.with_suffix(".unindexed.bag")
    with polybag.open(p) as r:
        index_pos = r.summary.extras["index_pos"]
    blob = bytearray(p.read_bytes()[:index_pos])
    blob[13:] = blob[13:].replace(index_pos.to_bytes(8, "little"), bytes(8), 1)
    u.write_bytes(bytes(blob))
    tp, a = timed(lambda: pb_all(u))
    try:
        rb_all(u)
        rb_state = "reads it"
    except Exception as e:
        rb_state = f"refuses it ({type(e).__name__})"
    print(f"unindexed copy: polybag reads all {n} messages in {tp:.3f}s by scanning; rosbags {rb_state}")
    u.unlink()

    with polybag.open(p) as r:
        chunks = len(r.summary.chunks)
        a0 = T0 + n * 1_000_000 // 2
        need = sum(
            1 for c in r.summary.chunks if c.end_time >= a0 and c.start_time < a0 + n * 1_000_000 // 100
        )
    print(f"({chunks} chunks; the 1% window touches {need} of them)")
    print(f"{'':18}{'polybag':>10}{'rosbags':>10}{'ratio':>8}{'rosbag':>10}{'ratio':>8}")
    for name, tp, tr, ts in rows:
        s1 = f"{ts:9.3f}s{ts / tp:7.1f}x" if ts is not None else f"{'-':>10}{'-':>8}"
        print(f"{name:18}{tp:9.3f}s{tr:9.3f}s{tr / tp:7.1f}x{s1}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--skip-standalone", action="store_true", help="skip rosbag-standalone (slowest)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        for comp in ("none", "lz4"):
            run(Path(d) / f"bench_{comp}.bag", comp, args.messages, not args.skip_standalone)


if __name__ == "__main__":
    main()
