"""Remote fetch economy (issue 30): requests and bytes per question, per format, on real servers.

    .venv/bin/python bench/bench_remote.py                 # 20 MB logs, 3 repetitions
    .venv/bin/python bench/bench_remote.py --size 200      # the issue's 200 MB logs
    .venv/bin/python bench/bench_remote.py --json out.json

Servers (the tests' own starters, tests/remote/): SeaweedFS (``weed server -s3``,
tests/remote/seaweed.py) for S3 and nginx (tests/remote/nginx.py) for HTTP, each behind a
counting proxy (tests/remote/counting_proxy.py: requests and body bytes per path; s3fs
signs for the proxy's host, SeaweedFS checks the signature against the Host it receives, so
the proxy forwards S3 requests unchanged).  Everything runs on 127.0.0.1.

Logs: one of each format, ``--size`` MB, four topics ``/t0``..``/t3`` written round robin,
10 KB payloads 1 ms apart (bag and MCAP: ~1 MB uncompressed chunks; ULog; rosbag2 with
sqlite3 storage and with MCAP storage).  For each format and each of S3 and HTTP:

- ``info``: ``polybag info --json URL`` (a subprocess, as a user types it) and ``r.summary``;
- ``first``: the first message of ``messages()`` (log-time order);
- ``window``: every message of a 1% time window in the middle;
- ``topic``: every message of ``/t1`` (one topic of four);

each as requests and bytes through the proxy (and % of the log's bytes).  Then a full read
(every message, its payload touched) from the local file, over HTTP and over S3: the median
of ``--reps`` wall times, as ratios to the local one.  Then Dask (``polybag.dask.read_topic``
of ``/t1`` over the bag and MCAP URLs, computed with the synchronous scheduler): bytes
fetched / the files' size, and the bytes the driver fetched building the frame.

Targets (issue 30): info <= 3 requests; first message <= 4 requests and <= 2 chunks' bytes;
a 1% window <= 2% of the file.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "remote"))

import counting_proxy  # noqa: E402
import nginx as nginx_mod  # noqa: E402
import seaweed as seaweed_mod  # noqa: E402

import polybag  # noqa: E402

PAYLOAD = 10_000
TOPICS = ("/t0", "/t1", "/t2", "/t3")
T0 = 1_700_000_000_000_000_000
STEP = 1_000_000  # 1 ms
CHUNK = 1 << 20
#: (name, what it is): the logs written
FORMATS = {
    "bag": "log.bag",
    "mcap": "log.mcap",
    "ulog": "log.ulg",
    "r2-sqlite": "r2_sqlite/",
    "r2-mcap": "r2_mcap/",
}


def _count(size_mb: float) -> int:
    return max(40, int(size_mb * 1e6 / (PAYLOAD + 60)))


def write_logs(d: Path, size_mb: float, formats: list[str]) -> dict[str, Path]:
    n = _count(size_mb)
    out: dict[str, Path] = {}
    body = bytearray(PAYLOAD)
    for fmt in formats:
        p = d / FORMATS[fmt].rstrip("/")
        out[fmt] = p
        if fmt in ("bag", "mcap"):
            w = polybag.Writer(str(p), format=fmt, compression="none", chunk_size=CHUNK)
            s = w.add_schema("test_msgs/Blob", "ros1msg", b"uint8[] data\n")
            chans = [w.add_channel(t, "ros1", s) for t in TOPICS]
            head = PAYLOAD.to_bytes(4, "little")
        elif fmt.startswith("r2-"):
            w = polybag.Writer(str(p), format="rosbag2", storage="sqlite3" if fmt == "r2-sqlite" else "mcap")
            s = w.add_schema("polybag_bench/msg/Blob", "ros2msg", b"uint8[] data\n")
            chans = [w.add_channel(t, "cdr", s) for t in TOPICS]
            head = b"\x00\x01\x00\x00" + PAYLOAD.to_bytes(4, "little")
        else:
            from polybag.formats.ulog.writer import UlogWriter

            w = UlogWriter(str(p))
            for i in range(len(TOPICS)):
                w.add_format(f"t{i}:uint64_t timestamp;uint8_t[{PAYLOAD}] data;")
            chans = [w.add_subscription(f"t{i}") for i in range(len(TOPICS))]
            head = b""
        for i in range(n):
            t = T0 + i * STEP
            body[:8] = i.to_bytes(8, "little")
            if fmt == "ulog":
                data = (t // 1000).to_bytes(8, "little") + bytes(body)
            else:
                data = head + bytes(body)
            w.write(chans[i % len(chans)], data, log_time=t)
        w.close()
    return out


def _size(p: Path) -> int:
    return sum(f.stat().st_size for f in p.iterdir()) if p.is_dir() else p.stat().st_size


class Servers:
    """nginx and SeaweedFS, each behind a counting proxy; ``url(fmt, kind)``."""

    def __init__(self, root: Path, logs: dict[str, Path], stack: contextlib.ExitStack) -> None:
        self.root = root
        ng = nginx_mod.serve_nginx(root, Path(tempfile.mkdtemp(prefix="bench-nginx-")))
        self.nginx = next(ng)
        stack.callback(lambda: next(ng, None))
        hp = counting_proxy.serve_proxy(("127.0.0.1", self.nginx.port))
        self.http_proxy = next(hp)
        stack.callback(lambda: next(hp, None))
        self.seaweed = stack.enter_context(seaweed_mod.start(Path(tempfile.mkdtemp(prefix="bench-seaweed-"))))
        files: dict[str, Path] = {}
        for p in logs.values():
            if p.is_dir():
                files.update({f"{p.name}/{f.name}": f for f in p.iterdir()})
            else:
                files[p.name] = p
        seaweed_mod.upload(self.seaweed, "logs", files)
        host, port = self.seaweed.endpoint.split("//", 1)[1].split(":")
        sp = counting_proxy.serve_proxy((host, int(port)))
        self.s3_proxy = next(sp)
        stack.callback(lambda: next(sp, None))

    def proxy(self, kind: str) -> counting_proxy.CountingProxy:
        return self.http_proxy if kind == "http" else self.s3_proxy

    def url(self, p: Path, kind: str, direct: bool = False) -> str:
        """The URL of ``p`` through the counting proxy (``direct``: straight to the server)."""
        rel = p.relative_to(self.root).as_posix() + ("/" if p.is_dir() else "")
        http = f"http://127.0.0.1:{self.nginx.port}" if direct else self.http_proxy.url
        return f"{http}/{rel}" if kind == "http" else f"s3://logs/{rel}"

    def options(self, kind: str) -> dict[str, Any]:
        if kind == "http":
            return {}
        o = self.seaweed.storage_options()
        o["client_kwargs"] = dict(o["client_kwargs"], endpoint_url=self.s3_proxy.url)
        return {"storage_options": o}

    def direct_options(self, kind: str) -> dict[str, Any]:
        return {} if kind == "http" else {"storage_options": self.seaweed.storage_options()}

    def env(self, kind: str) -> dict[str, str]:
        env = self.seaweed.env()
        env["FSSPEC_S3_ENDPOINT_URL"] = self.s3_proxy.url
        return env


def _fresh_s3() -> None:
    with contextlib.suppress(ImportError):
        import s3fs

        s3fs.S3FileSystem.clear_instance_cache()


def counted(srv: Servers, kind: str, fn: Callable[[], Any]) -> tuple[int, int, Any]:
    """(requests, bytes, result) of ``fn`` through ``kind``'s proxy."""
    _fresh_s3()
    px = srv.proxy(kind)
    px.reset()
    out = fn()
    return px.requests, px.bytes, out


def _window(r: polybag.Reader) -> tuple[int, int]:
    s = r.summary
    lo, hi = s.start_time, s.end_time
    a = lo + (hi - lo) * 495 // 1000
    return a, a + (hi - lo) // 100


def questions(url: str, opts: dict[str, Any]) -> dict[str, Callable[[], Any]]:
    def summary() -> Any:
        with polybag.open(url, **opts) as r:
            return r.summary.message_count

    def first() -> Any:
        with polybag.open(url, **opts) as r:
            m = next(iter(r.messages()))
            return m.log_time

    def window() -> Any:
        with polybag.open(url, **opts) as r:
            a, b = _window(r)
            return sum(1 for _ in r.messages(start=a, end=b))

    def topic() -> Any:
        with polybag.open(url, **opts) as r:
            return sum(1 for _ in r.messages(topics=["/t1"]))

    return {"summary": summary, "first": first, "window": window, "topic": topic}


def cli_info(srv: Servers, kind: str, url: str) -> dict[str, Any]:
    def run() -> Any:
        p = subprocess.run(
            [sys.executable, "-m", "polybag", "info", "--json", url],
            capture_output=True, text=True, env=srv.env(kind), timeout=600,
        )
        if p.returncode:
            raise RuntimeError(f"polybag info {url}: {p.stderr.strip()[-400:]}")
        return json.loads(p.stdout)

    req, nbytes, out = counted(srv, kind, run)
    return {"requests": req, "bytes": nbytes, "own": out.get("fetched")}


def full_read(url: str, opts: dict[str, Any]) -> int:
    n = 0
    with polybag.open(url, **opts) as r:
        for m in r.messages():
            n += m.data[-1] if len(m.data) else 0
    return n


def timed_median(fn: Callable[[], Any], reps: int) -> float:
    ts = []
    for _ in range(reps):
        _fresh_s3()
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def dask_figures(srv: Servers, kind: str, paths: list[Path]) -> dict[str, Any] | None:
    try:
        import dask

        import polybag.dask as pbd
    except ImportError:
        return None
    urls = [srv.url(p, kind) for p in paths]
    size = sum(_size(p) for p in paths)
    px = srv.proxy(kind)
    # polybag.dask takes no storage options: S3 credentials and endpoint come from the
    # environment, as a user of an S3-compatible store sets them
    import fsspec.config

    saved, saved_conf = dict(os.environ), dict(fsspec.config.conf)
    if kind == "s3":
        os.environ.update(srv.env(kind))
        # (fsspec reads FSSPEC_S3_* at import: the same setting, made now)
        fsspec.config.conf["s3"] = {"endpoint_url": srv.s3_proxy.url}
    try:
        _fresh_s3()
        px.reset()
        df = pbd.read_topic(urls, "/t1", partition_messages=max(100, _count(1) * 4))
        driver = px.bytes
        driver_req = px.requests
        px.reset()
        with dask.config.set(scheduler="sync"):
            rows = len(df.compute())
    finally:
        os.environ.clear()
        os.environ.update(saved)
        fsspec.config.conf.clear()
        fsspec.config.conf.update(saved_conf)
    return {
        "files": [p.name for p in paths], "size": size, "rows": rows, "partitions": df.npartitions,
        "driver_bytes": driver, "driver_requests": driver_req,
        "task_bytes": px.bytes, "task_requests": px.requests, "ratio": round(px.bytes / size, 3),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    formats = args.formats.split(",")
    t = time.perf_counter()
    logs = write_logs(root, args.size, formats)
    results: dict[str, Any] = {
        "size_mb": args.size, "messages": _count(args.size), "payload": PAYLOAD, "chunk": CHUNK,
        "write_s": round(time.perf_counter() - t, 1), "formats": {},
    }
    with contextlib.ExitStack() as stack:
        srv = Servers(root, logs, stack)
        for fmt, p in logs.items():
            size = _size(p)
            row: dict[str, Any] = {"size": size}
            local = {q: fn() for q, fn in questions(str(p), {}).items()}
            for kind in ("s3", "http"):
                url, opts = srv.url(p, kind), srv.options(kind)
                per: dict[str, Any] = {"info_cli": cli_info(srv, kind, url)}
                for q, fn in questions(url, opts).items():
                    req, nbytes, out = counted(srv, kind, fn)
                    if out != local[q]:
                        raise AssertionError(f"{fmt} {kind} {q}: {out!r} != local {local[q]!r}")
                    per[q] = {"requests": req, "bytes": nbytes}
                row[kind] = per
                print(f"  {fmt} {kind}: done", file=sys.stderr, flush=True)
            if not args.skip_time:
                hu, su, so = srv.url(p, "http"), srv.url(p, "s3"), srv.options("s3")
                tl = timed_median(lambda p=p: full_read(str(p), {}), args.reps)
                th = timed_median(lambda hu=hu: full_read(hu, {}), args.reps)
                ts = timed_median(lambda su=su, so=so: full_read(su, so), args.reps)
                row["full_read_s"] = {"local": round(tl, 3), "http": round(th, 3), "s3": round(ts, 3)}
                # the same reads straight to nginx and SeaweedFS (no Python proxy in the way)
                dh, ds, do = srv.url(p, "http", direct=True), srv.url(p, "s3", direct=True), srv.direct_options("s3")
                row["full_read_s"]["http_direct"] = round(timed_median(lambda dh=dh: full_read(dh, {}), args.reps), 3)
                row["full_read_s"]["s3_direct"] = round(timed_median(lambda ds=ds, do=do: full_read(ds, do), args.reps), 3)
            results["formats"][fmt] = row
        if not args.skip_dask:
            paths = [logs[f] for f in ("bag", "mcap") if f in logs]
            if paths:
                results["dask"] = {kind: dask_figures(srv, kind, paths) for kind in ("s3", "http")}
    return results


def _pct(b: int, size: int) -> str:
    return f"{100 * b / size:.2f}%" if size else "-"


def table(res: dict[str, Any]) -> Iterator[str]:
    yield (
        f"logs of {res['size_mb']} MB ({res['messages']} messages of {res['payload']} B on 4 topics); "
        "requests / bytes (% of the log) through the counting proxy"
    )
    yield "| format | server | info CLI | r.summary | first message | 1% window | one topic of 4 |"
    yield "|---|---|---|---|---|---|---|"
    for fmt, row in res["formats"].items():
        size = row["size"]
        for kind in ("s3", "http"):
            per = row[kind]
            cells = [
                f"{per[q]['requests']} / {per[q]['bytes']:,} ({_pct(per[q]['bytes'], size)})"
                for q in ("info_cli", "summary", "first", "window", "topic")
            ]
            yield f"| {fmt} ({size / 1e6:.0f} MB) | {kind} | " + " | ".join(cells) + " |"
    if any("full_read_s" in r for r in res["formats"].values()):
        yield ""
        yield "| format | full read local | HTTP via proxy (x local) | S3 via proxy (x local) | HTTP direct | S3 direct |"
        yield "|---|---|---|---|---|---|"
        for fmt, row in res["formats"].items():
            t = row.get("full_read_s")
            if t:
                yield (
                    f"| {fmt} | {t['local']:.3f} s | {t['http']:.3f} s ({t['http'] / t['local']:.1f}x) "
                    f"| {t['s3']:.3f} s ({t['s3'] / t['local']:.1f}x) "
                    f"| {t['http_direct']:.3f} s ({t['http_direct'] / t['local']:.1f}x) "
                    f"| {t['s3_direct']:.3f} s ({t['s3_direct'] / t['local']:.1f}x) |"
                )
    if res.get("dask"):
        yield ""
        yield "| Dask read_topic /t1 | partitions | driver | tasks' bytes / files' size |"
        yield "|---|---|---|---|"
        for kind, d in res["dask"].items():
            if d:
                yield (
                    f"| {kind}: {' + '.join(d['files'])} | {d['partitions']} | {d['driver_requests']} req, "
                    f"{d['driver_bytes']:,} B | {d['task_bytes']:,} / {d['size']:,} = {d['ratio']}x |"
                )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=float, default=20.0, help="MB per log (default 20; the issue's: 200)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions of each full read (median)")
    ap.add_argument("--formats", default=",".join(FORMATS), help=f"comma-separated of {', '.join(FORMATS)}")
    ap.add_argument("--dir", default="", help="where the logs go (default: a temporary directory, removed)")
    ap.add_argument("--skip-time", action="store_true", help="no full-read timings")
    ap.add_argument("--skip-dask", action="store_true")
    ap.add_argument("--json", default="", help="also write the figures to this file ('-': stdout only)")
    args = ap.parse_args()
    made = not args.dir
    if made:
        args.dir = tempfile.mkdtemp(prefix="bench-remote-")
    try:
        res = run(args)
    finally:
        if made:
            shutil.rmtree(args.dir, ignore_errors=True)
    if args.json == "-":
        print(json.dumps(res, indent=1))
        return
    print("\n".join(table(res)))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
