"""MCAP read speed: polybag against the official ``mcap`` library on the same file.

    python bench/bench_mcap.py [--messages N] [--rebuild]

Builds ``bench/data/bench_1m.mcap`` (N messages on 5 topics, 16..80-byte payloads, zstd
chunks of 1 MiB, written by the mcap library so neither side reads its own output) and
prints, for each task, both times and the ratio (mcap time / polybag time).  Times are the
best of ``--repeat`` runs in process CPU time, so other load on a shared machine does not
skew the ratios; the write task also shows elapsed time (polybag compresses chunks in
worker threads, whose CPU time counts too).
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
TOPICS = [f"/topic_{i}" for i in range(5)]


def build(path: Path, n: int) -> None:
    from mcap.writer import CompressionType
    from mcap.writer import Writer as McapLibWriter

    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        w = McapLibWriter(f, compression=CompressionType.ZSTD, chunk_size=1 << 20)
        w.start(profile="", library="bench")
        sid = w.register_schema("bench/Msg", "jsonschema", b"{}")
        cids = [w.register_channel(t, "json", sid) for t in TOPICS]
        payloads = [bytes(range(16 + 16 * i)) for i in range(5)]
        for i in range(n):
            k = i % 5
            t = 1_000_000_000 + i * 1000
            w.add_message(cids[k], log_time=t, publish_time=t, data=payloads[k], sequence=i)
        w.finish()
    os.replace(tmp, path)


# raw iteration, every message of the file (also used by run_all.py)
def pb_stream(path: Path) -> int:
    """polybag reading the file as a non-seekable pipe, in file order."""
    import polybag

    with open(path, "rb") as f:
        with polybag.open(_Pipe(f)) as r:
            return sum(1 for _ in r.messages(order="file"))


def mc_stream(path: Path) -> int:
    """The mcap library on the same pipe: ``make_reader`` gives its ``StreamReader`` path."""
    from mcap.reader import make_reader

    with open(path, "rb") as f:
        return sum(1 for _ in make_reader(_Pipe(f)).iter_messages())


def pb_indexed(path: Path) -> int:
    import polybag

    with polybag.open(path) as r:
        return sum(1 for _ in r.messages())


def mc_indexed(path: Path) -> int:
    from mcap.reader import make_reader

    with open(path, "rb") as f:
        return sum(1 for _ in make_reader(f).iter_messages())


def timeit(fn: Callable[[], int], repeat: int = 3, clock: Callable[[], float] = time.process_time) -> tuple[float, int]:
    best = float("inf")
    out = 0
    for _ in range(repeat):
        t0 = clock()
        out = fn()
        best = min(best, clock() - t0)
    return best, out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    from mcap.reader import make_reader

    import polybag

    DATA.mkdir(parents=True, exist_ok=True)
    path = DATA / ("bench_1m.mcap" if args.messages == 1_000_000 else f"bench_{args.messages}.mcap")
    if args.rebuild or not path.exists():
        print(f"building {path} ({args.messages} messages)...", flush=True)
        build(path, args.messages)
    size = path.stat().st_size
    print(f"{path}: {size / 1e6:.1f} MB, {args.messages} messages, 5 topics, zstd chunks")

    with polybag.open(path) as r0:
        s = r0.summary
        t_start, t_end = s.start_time or 0, s.end_time or 0
    w0 = t_start + (t_end - t_start) // 2
    w1 = w0 + (t_end - t_start) // 100

    def pb_topic() -> int:
        with polybag.open(path) as r:
            return sum(1 for _ in r.messages(topics=[TOPICS[2]]))

    def pb_window() -> int:
        with polybag.open(path) as r:
            return sum(1 for _ in r.messages(start=w0, end=w1))

    def pb_info() -> int:
        with polybag.open(path) as r:
            return r.summary.message_count

    def mc_topic() -> int:
        with open(path, "rb") as f:
            return sum(1 for _ in make_reader(f).iter_messages(topics=[TOPICS[2]]))

    def mc_window() -> int:
        with open(path, "rb") as f:
            return sum(1 for _ in make_reader(f).iter_messages(starting_at=w0, ending_before=w1))

    def mc_info() -> int:
        with open(path, "rb") as f:
            st = make_reader(f).get_summary()
            return st.statistics.message_count if st and st.statistics else 0

    n_write = min(args.messages, 200_000)
    payloads = [bytes(range(16 + 16 * i)) for i in range(5)]

    def pb_write() -> int:
        w = polybag.Writer(io.BytesIO(), format="mcap", compression="zstd")
        sid = w.add_schema("bench/Msg", "jsonschema", b"{}")
        chans = [w.add_channel(t, "json", sid) for t in TOPICS]
        write = w.write
        for i in range(n_write):
            write(chans[i % 5], payloads[i % 5], 1000 * i, 1000 * i, i)
        w.close()
        return n_write

    def mc_write() -> int:
        from mcap.writer import CompressionType
        from mcap.writer import Writer as McapLibWriter

        w = McapLibWriter(io.BytesIO(), compression=CompressionType.ZSTD)
        w.start(profile="", library="bench")
        sid = w.register_schema("bench/Msg", "jsonschema", b"{}")
        chans = [w.register_channel(t, "json", sid) for t in TOPICS]
        for i in range(n_write):
            w.add_message(
                chans[i % 5], log_time=1000 * i, publish_time=1000 * i, data=payloads[i % 5], sequence=i
            )
        w.finish()
        return n_write

    tasks = [
        ("raw iteration, streamed (pipe)", lambda: pb_stream(path), lambda: mc_stream(path)),
        ("raw iteration, indexed", lambda: pb_indexed(path), lambda: mc_indexed(path)),
        ("one topic of 5", pb_topic, mc_topic),
        ("1% time window", pb_window, mc_window),
        ("info / summary", pb_info, mc_info),
        (f"write {n_write} messages (zstd)", pb_write, mc_write),
    ]
    print(f"{'task':34} {'polybag':>10} {'mcap':>10} {'ratio':>8}  messages")
    for name, pb, mc in tasks:
        tp, np_ = timeit(pb, args.repeat)
        tm, nm = timeit(mc, max(1, args.repeat - 1))
        flag = "" if np_ == nm else f"  COUNT MISMATCH polybag={np_} mcap={nm}"
        print(f"{name:34} {_fmt(tp):>10} {_fmt(tm):>10} {tm / tp:7.1f}x  {np_}{flag}", flush=True)
        if pb is pb_write:
            # the writer compresses chunks in worker threads: CPU time adds them up, so the
            # elapsed time is shown too (best of the same runs' count)
            tp, _ = timeit(pb, args.repeat, time.perf_counter)
            tm, _ = timeit(mc, max(1, args.repeat - 1), time.perf_counter)
            print(f"{'  (elapsed time)':34} {_fmt(tp):>10} {_fmt(tm):>10} {tm / tp:7.1f}x", flush=True)
    return 0


def _fmt(t: float) -> str:
    return f"{t * 1000:.1f} ms" if t < 1 else f"{t:.2f} s"


class _Pipe(io.RawIOBase):
    """A file seen as a non-seekable pipe."""

    def __init__(self, f: io.BufferedReader) -> None:
        self._f = f

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        return self._f.readinto(b)

    def read(self, n: int = -1) -> bytes:
        return self._f.read(n)


if __name__ == "__main__":
    sys.exit(main())
