"""(Was bench_remote.py until issue 30.) Remote reads and many files (issue 17): bytes fetched and wall time over HTTP and S3,
and the 2-worker speed-up of exporting one topic from 8 files.

    .venv/bin/python bench/bench_remote_17.py         # 200 MB logs, 8 files of 1,000,000 messages
    .venv/bin/python bench/bench_remote_17.py --quick # 40 MB logs, 8 files of 50,000 messages

Part 1: an indexed MCAP and bag (100 KB payloads on /big, a small /small every ten, ~1 MB
uncompressed chunks) served from local disk, from a local HTTP server honouring Range
requests (the tests' server) and from moto's S3 server through s3fs.  For each: ``info``
(open + summary), a 1% time window, and a full read (every message, its payload touched):
wall time, bytes fetched, requests, and the time ratio to the local read ("local": the file
in the page cache; "disk": its pages dropped first with posix_fadvise, so read from disk;
the HTTP server reads from the page cache); ``gs``: the same server as a GCS endpoint,
read through the XML API without gcsfs (``polybag.io.gcs``).

Part 3 (issue 17's writes): ``ops.convert`` of the big bag to MCAP to the local disk and to
``s3://`` on moto (a local file uploaded with ``put_file``): wall times and the upload's share.

Part 2: 8 MCAP files of N small messages (two topics), ``export`` of one topic to csv:
one process (``jobs=1``) against 2 local processes (``jobs=2``) and a 2-worker
``dask.distributed`` LocalCluster (``--scheduler``); the per-partition overhead is the wall
time per file of the same runs on 8 files of 10 messages (and of ``polybag.dask.read_topic``
per partition).  The target: 2 workers at most 0.6x the single-process time.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "remote"))

from remote_helpers import STEP, T0, serve, write_big  # noqa: E402

import polybag  # noqa: E402


def timed(fn: Callable[[], Any], repeat: int = 2) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def _read(target: str, opts: dict[str, Any], job: str, n: int) -> dict[str, Any] | None:
    with polybag.open(target, **opts) as r:
        if job == "info":
            r.summary  # noqa: B018
        elif job == "window":
            lo = T0 + n // 2 * STEP
            sum(len(m.data) for m in r.messages(start=lo, end=lo + n // 100 * STEP))
        else:
            sum(len(m.data) + m.data[-1] for m in r.messages())
        return r.source.stats


def _evicted(path: Path) -> str:
    """``path`` after dropping its pages from the page cache (``posix_fadvise DONTNEED``):
    the next read comes from the disk.  (Each timed run evicts again: see ``timed``.)"""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return str(path)


def part1(d: Path, n: int, repeat: int, formats: tuple[str, ...] = ("mcap", "bag")) -> None:
    print(f"== remote reads: {n} messages of 100 KB (+{n // 10} small), ~1 MB chunks, no compression")
    files = [d / f"big.{fmt}" for fmt in formats]
    for f in files:
        if not f.exists():
            write_big(f, n=n)
    targets: list[tuple[str, Callable[[str], tuple[str, dict[str, Any]]]]] = [
        ("local", lambda name: (str(d / name), {})),
        ("disk", lambda name: (_evicted(d / name), {})),
    ]
    gen = serve(d)
    srv = next(gen)
    targets.append(("http", lambda name: (f"{srv.url}/{name}", {})))
    # gs:// without gcsfs: GCS's XML API (/<bucket>/<object>) against the same kind of server,
    # serving the parent directory so that this directory is the bucket
    gen_gs = serve(d.parent)
    srv_gs = next(gen_gs)
    gso = {"storage_options": {"endpoint_url": srv_gs.url}}
    targets.append(("gs", lambda name: (f"gs://{d.name}/{name}", gso)))
    moto = None
    try:
        import boto3
        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
        moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        moto.start()
        host, port = moto.get_host_and_port()
        ep = f"http://{host}:{port}"
        client = boto3.client("s3", endpoint_url=ep, aws_access_key_id="k", aws_secret_access_key="s", region_name="us-east-1")
        client.create_bucket(Bucket="logs")
        for f in files:
            client.upload_file(str(f), "logs", f.name)
        s3o = {"storage_options": {"key": "k", "secret": "s", "client_kwargs": {"endpoint_url": ep, "region_name": "us-east-1"}}}
        targets.append(("s3", lambda name: (f"s3://logs/{name}", s3o)))
    except ImportError as e:
        print(f"(no S3 rows: {e})")
    print(f"{'file':10} {'job':7} {'where':6} {'wall s':>8} {'x local':>8} {'x disk':>7} {'fetched':>12} {'% file':>7} {'requests':>8} {'MB/s':>8}")
    try:
        for f in files:
            size = f.stat().st_size
            for job in ("info", "window", "full"):
                base = disk = None
                for where, make in targets:
                    target, opts = make(f.name)
                    cold = where == "disk"
                    wall, stats = timed(
                        lambda t=target, o=opts, j=job, c=cold: _read(_evicted(Path(t)) if c else t, o, j, n), repeat
                    )
                    base = wall if base is None else base
                    disk = wall if where == "disk" else disk
                    got = stats["bytes_fetched"] if stats else 0
                    reqs = stats["requests"] if stats else 0
                    rate = (got / wall / 1e6) if stats else size / wall / 1e6 if job == "full" else 0
                    print(
                        f"{f.name:10} {job:7} {where:6} {wall:8.3f} {wall / base:8.2f} {wall / (disk or wall):7.2f} {got:12d} "
                        f"{100 * got / size:6.2f}% {reqs:8d} {rate:8.0f}"
                    )
    finally:
        gen.close()
        gen_gs.close()
        if moto is not None:
            moto.stop()


def part3(d: Path, repeat: int) -> None:
    """Writing to a URL: ``ops.convert`` of the big bag to MCAP on the local disk against the
    same convert to ``s3://`` (moto; written locally, then uploaded with put_file)."""
    import boto3
    import fsspec.config
    import s3fs
    from moto.server import ThreadedMotoServer

    from polybag import ops

    src = d / "big.bag"
    if not src.exists():
        print("(no write rows: run part 1 first, it makes big.bag)")
        return
    size = src.stat().st_size
    print(f"== writes: convert {src.name} ({size / 1e6:.0f} MB) to MCAP (uncompressed), local vs s3:// (moto)")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    tmp = Path(tempfile.mkdtemp(prefix="bench-write-", dir=d))
    try:
        host, port = moto.get_host_and_port()
        ep = f"http://{host}:{port}"
        boto3.client(
            "s3", endpoint_url=ep, aws_access_key_id="k", aws_secret_access_key="s", region_name="us-east-1"
        ).create_bucket(Bucket="out")
        fsspec.config.conf["s3"] = {"key": "k", "secret": "s", "client_kwargs": {"endpoint_url": ep, "region_name": "us-east-1"}}
        s3fs.S3FileSystem.clear_instance_cache()
        k = iter(range(1000))

        def local() -> None:
            ops.convert(str(src), str(tmp / f"{next(k)}.mcap"), compression="none")

        def remote() -> None:
            ops.convert(str(src), f"s3://out/{next(k)}.mcap", compression="none")

        t_local, _ = timed(local, repeat)
        t_s3, _ = timed(remote, repeat)
        out = max(tmp.glob("*.mcap"), key=lambda p: p.stat().st_mtime)
        osize = out.stat().st_size
        fs = s3fs.S3FileSystem()
        t_put, _ = timed(lambda: fs.put_file(str(out), f"out/raw-{next(k)}.mcap"), repeat)
        print(f"{'where':22} {'wall s':>8} {'x local':>8} {'output MB':>10}")
        print(f"{'local':22} {t_local:8.3f} {1.0:8.2f} {osize / 1e6:10.1f}")
        print(f"{'s3 (polybag)':22} {t_s3:8.3f} {t_s3 / t_local:8.2f} {osize / 1e6:10.1f}")
        print(f"{'ref: local + put_file':22} {t_local + t_put:8.3f} {(t_local + t_put) / t_local:8.2f} {osize / 1e6:10.1f}")
        print(
            f"upload: {t_s3 - t_local:.3f} s more ({osize / max(t_s3 - t_local, 1e-9) / 1e6:.0f} MB/s to moto); "
            f"s3fs put_file alone {t_put:.3f} s"
        )
    finally:
        fsspec.config.conf.pop("s3", None)
        shutil.rmtree(tmp, ignore_errors=True)
        moto.stop()


def _small_files(d: Path, k: int, n: int) -> list[str]:
    out = []
    for i in range(k):
        p = d / f"f{i}.mcap"
        if not p.exists():
            w = polybag.Writer(str(p), compression="zstd", chunk_size=1 << 20)
            s = w.add_schema("bench/Pair", "ros1msg", b"float64 a\nfloat64 b\n")
            a = w.add_channel("/pair", "ros1", s)
            o = w.add_channel("/other", "ros1", s)
            base = T0 + i * 10**13
            import struct

            pk = struct.Struct("<dd").pack
            for j in range(n):
                w.write(a, pk(j * 0.5, -j), log_time=base + j * 1000)
                if j % 4 == 0:
                    w.write(o, pk(0.0, 1.0), log_time=base + j * 1000 + 1)
            w.close()
        out.append(str(p))
    return out


def _timed_task(src: str, dst: str, options: dict[str, Any]) -> dict[str, Any]:
    """``export`` of one file, with the worker's pid and the CPU seconds it took."""
    from polybag.ops.batch import _export_one

    c = time.process_time()
    res = _export_one(src, dst, options)
    return {"pid": os.getpid(), "cpu": time.process_time() - c, "messages": res.get("messages")}


def _run_export(d: Path, paths: list[str], **kw: Any) -> tuple[float, float, tuple[float, float]]:
    """One export of ``paths``: wall time, the busiest worker's CPU seconds, load before/after."""
    from polybag.ops.batch import run_many

    out = tempfile.mkdtemp(prefix="bench-remote-", dir=d)
    pairs = [(p, os.path.join(out, Path(p).stem)) for p in paths]
    load0 = os.getloadavg()[0]
    t = time.perf_counter()
    res = run_many(_timed_task, pairs, {"topics": ["/pair"], "format": "csv", "overwrite": True, "progress": None}, **kw)
    wall = time.perf_counter() - t
    assert res.failed == 0, res.to_dict()
    shutil.rmtree(out)
    per: dict[int, float] = {}
    for f in res.files:
        assert f.result is not None
        per[f.result["pid"]] = per.get(f.result["pid"], 0.0) + f.result["cpu"]
    return wall, max(per.values()), (load0, os.getloadavg()[0])


def _median(xs: list[float]) -> float:
    ys = sorted(xs)
    return ys[len(ys) // 2] if len(ys) % 2 else (ys[len(ys) // 2 - 1] + ys[len(ys) // 2]) / 2


def part2(d: Path, n: int, files: int, rounds: int) -> None:
    """1 process, a 2-process pool and 2 Dask workers, in rotating order for ``rounds``
    rounds; best and median wall time, the load average around each run, and the critical
    path (the CPU seconds of the busiest worker: what the wall time would be on two idle
    cores, whatever else the machine runs)."""
    print(f"\n== export of one topic (csv) from {files} files of {n} messages: 1 process vs 2 workers")
    (d / "many").mkdir(exist_ok=True)
    (d / "tiny").mkdir(exist_ok=True)
    big = _small_files(d / "many", files, n)
    tiny = _small_files(d / "tiny", files, 10)

    import subprocess

    import distributed

    # the cluster runs in processes of its own (``dask scheduler`` / ``dask worker``): a
    # LocalCluster's threads in this process would make the pool start from the forkserver
    # (see polybag.ops.batch._mp_context) instead of forking, as it does from the CLI
    sched_file = str(d / "scheduler.json")
    if os.path.exists(sched_file):
        os.unlink(sched_file)
    dask = str(Path(sys.executable).with_name("dask"))
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    procs = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard", "--scheduler-file", sched_file], **quiet)]
    procs.append(
        subprocess.Popen([dask, "worker", "--nworkers", "2", "--nthreads", "1", "--no-dashboard", "--scheduler-file", sched_file], **quiet)
    )
    try:
        with distributed.Client(scheduler_file=sched_file, timeout=60) as cl:
            cl.wait_for_workers(2, timeout=60)
            addr = cl.scheduler.address
        _part2_runs(d, big, tiny, files, rounds, addr)
    finally:
        for pr in reversed(procs):
            pr.terminate()
            pr.wait(30)


def _part2_runs(d: Path, big: list[str], tiny: list[str], files: int, rounds: int, addr: str) -> None:
    from polybag.ops.batch import export_many

    def run(paths: list[str], **kw: Any) -> tuple[float, float, tuple[float, float]]:
        return _run_export(d, paths, **kw)

    if threading.active_count() > 1:
        print(f"(note: {threading.active_count()} threads in this process: the pool starts from the forkserver)")
    runners = [("1 process", {"jobs": 1}), ("2 processes (pool)", {"jobs": 2}), ("2 dask workers", {"scheduler": addr})]
    export_many(tiny, tempfile.mkdtemp(prefix="bench-remote-", dir=d), topics=["/pair"], format="csv", jobs=1)
    for _label, kw in runners[1:]:
        run(tiny, **kw)  # the dask workers import polybag on their first task
    walls: dict[str, list[float]] = {k: [] for k, _ in runners}
    crit: dict[str, list[float]] = {k: [] for k, _ in runners}
    over: dict[str, list[float]] = {k: [] for k, _ in runners}
    for r in range(rounds):
        for i in range(len(runners)):
            label, kw = runners[(i + r) % len(runners)]
            wall, cp, (l0, l1) = run(big, **kw)
            walls[label].append(wall)
            crit[label].append(cp)
            over[label].append(run(tiny, **kw)[0] / files)
            print(f"  round {r + 1} {label:20} wall {wall:7.2f} s  busiest worker {cp:6.2f} CPU s  load {l0:.2f} -> {l1:.2f}")
    one_b, one_m = min(walls["1 process"]), _median(walls["1 process"])
    one_c = _median(crit["1 process"])
    print(f"{'runner':22} {'best s':>8} {'median s':>9} {'x1 best':>8} {'x1 median':>10} {'busiest CPU s':>14} {'x1 CPU':>7} {'overhead/file ms':>17}")
    for label, _kw in runners:
        b, m, cp = min(walls[label]), _median(walls[label]), _median(crit[label])
        print(
            f"{label:22} {b:8.2f} {m:9.2f} {b / one_b:8.2f} {m / one_m:10.2f} {cp:14.2f} {cp / one_c:7.2f} "
            f"{_median(over[label]) * 1000:17.1f}"
        )
    best = min(min(walls[k]) for k, _ in runners[1:])
    print(f"2-worker speed-up (best): {one_b / best:.2f}x (target: wall <= 0.6x, i.e. >= 1.67x): {'met' if best <= 0.6 * one_b else 'NOT met'}")
    import distributed

    import polybag.dask as pbd

    with distributed.Client(addr):
        df = pbd.read_topic(tiny, "/pair")
        t = time.perf_counter()
        df.compute()
        per = (time.perf_counter() - t) / df.npartitions
    print(f"polybag.dask.read_topic per-partition overhead (tiny files, 2 workers): {per * 1000:.1f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="40 MB logs, 8 files of 50,000 messages, one run")
    ap.add_argument("--messages", type=int, default=None, help="100 KB messages of the remote logs (default 2000)")
    ap.add_argument("--export-messages", type=int, default=None, help="messages per export file (default 1,000,000)")
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--dir", default=str(Path(__file__).resolve().parent / "data" / "remote"))
    ap.add_argument("--skip-remote", action="store_true")
    ap.add_argument("--skip-export", action="store_true")
    ap.add_argument("--skip-write", action="store_true", help="skip the convert-to-s3:// rows")
    ap.add_argument("--formats", nargs="+", choices=["mcap", "bag"], default=["mcap", "bag"], help="part 1's files")
    ap.add_argument("--rounds", type=int, default=None, help="export rounds (default 5, --quick 2)")
    a = ap.parse_args()
    n = a.messages or (400 if a.quick else 2000)
    m = a.export_messages or (50_000 if a.quick else 1_000_000)
    d = Path(a.dir) / f"{n}_{m}"
    d.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "k")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "s")
    print(f"cpus: {os.cpu_count()}, load: {os.getloadavg()}, threads: {threading.active_count()}")
    if not a.skip_remote:
        part1(d, n, 1 if a.quick else 2, tuple(a.formats))
    if not a.skip_write:
        part3(d, 1 if a.quick else 2)
    if not a.skip_export:
        part2(d, m, a.files, a.rounds or (2 if a.quick else 5))


if __name__ == "__main__":
    main()
