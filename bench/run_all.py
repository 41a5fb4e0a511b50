"""Issue 13's speed table: every row, polybag side by side with its peer, in one run.

    .venv/bin/python bench/run_all.py                 # full sizes (a few minutes, ~1.2 GB of disk)
    .venv/bin/python bench/run_all.py --quick         # small sizes: a smoke test (under a minute)
    .venv/bin/python bench/run_all.py --json out.json # also save every figure
    .venv/bin/python bench/run_all.py --only ulog --profile-ulog   # where a fresh ULog process spends its time

Each row runs polybag and the peer on the same generated file, alternately (polybag, peer,
polybag, peer...), and keeps each side's best run; the ratio is peer time / polybag time
(``median``: the same of each side's median run, on a shared machine the steadier figure).
The measuring code lives in the other bench modules (``bench_mcap``, ``bench_decode``,
``bench_bag``, ``bench_convert``, ``bench_ulog``); this script only builds the files, picks
the clock and prints the table.

Clock per row: ``cpu`` (this process's user + system time) for the single-threaded read
paths, so other jobs on a shared machine do not skew them; ``wall`` where polybag uses its
worker threads (bag write, convert, ULog), since CPU time would add the threads up.  The
ULog rows run each side in a fresh interpreter per run (start, imports, open, columns), as
a user's script does.  Rows marked ``ref`` have no target: they are there to explain the
others (other access paths, the in-process ULog figures of ``bench_ulog.py``).

Generated files live in ``bench/data/run_all/`` (gitignored) and are reused by later runs.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

import bench_bag  # noqa: E402
import bench_convert  # noqa: E402
import bench_decode  # noqa: E402
import bench_mcap  # noqa: E402
import bench_ulog  # noqa: E402
import polybag  # noqa: E402

DATA = HERE / "data" / "run_all"
FULL = {"mcap": 300_000, "imu": 100_000, "images": 600, "ulog_mb": 30.0}
QUICK = {"mcap": 30_000, "imu": 10_000, "images": 40, "ulog_mb": 3.0}
ULOG_TOPIC = "vehicle_local_position"
GROUPS = ("mcap", "decode", "columns", "write", "convert", "ulog")


# --- timing --------------------------------------------------------------------------------
@dataclass
class Run:
    wall: float
    cpu: float = math.nan  # nan: not measured (the convert routes report elapsed time only)
    out: Any = None
    extra: dict[str, Any] = field(default_factory=dict)


Runner = Callable[[], Run]


def inproc(fn: Callable[[], Any]) -> Runner:
    """Time ``fn`` in this process: wall and CPU time (every thread of the process)."""

    def run() -> Run:
        gc.collect()
        w, c = time.perf_counter(), time.process_time()
        out = fn()
        return Run(time.perf_counter() - w, time.process_time() - c, out)

    return run


def fresh_ulog(side: str, what: str, path: Path) -> Runner:
    """One new interpreter per run (``bench_ulog.fresh``): wall and the child's CPU time."""

    def run() -> Run:
        r = bench_ulog.fresh(side, what, str(path), ULOG_TOPIC)
        return Run(r["wall"], r["cpu"], r["rows"], {"import": r["import"], "work": r["work"]})

    return run


def fresh_bare(code: str, reexec: bool = False) -> Runner:
    """``python -c code`` in a new interpreter (``bench_ulog.bare``): the fixed cost rows."""

    def run() -> Run:
        r = bench_ulog.bare(code, reexec)
        return Run(r["wall"], r["cpu"], 0)

    return run


def convert_route(route: str, src: Path, dst: Path) -> Runner:
    """``bench_convert.run``: the route in a fresh process, elapsed time."""

    def run() -> Run:
        t, anon, rss = bench_convert.run(route, src, dst, "zstd")
        if dst.exists():
            dst.unlink()
        return Run(t, extra={"anon_peak": anon, "rss_peak": rss})

    return run


@dataclass
class Row:
    key: str
    what: str
    peer_name: str
    clock: str  # "cpu" or "wall"
    target: float | None  # None: a reference row
    polybag: float = math.nan
    peer: float = math.nan
    ratio: float = math.nan
    ratio_median: float = math.nan  # median peer run / median polybag run (the best runs: ``ratio``)
    met: bool | None = None
    polybag_runs: list[dict[str, Any]] = field(default_factory=list)
    peer_runs: list[dict[str, Any]] = field(default_factory=list)
    note: str = ""


def side_by_side(row: Row, pb: Runner, peer: Runner, repeat: int, same_out: bool = True) -> Row:
    """Alternate the two sides ``repeat`` times; keep each side's best by the row's clock."""
    pbs: list[Run] = []
    peers: list[Run] = []
    for _ in range(max(1, repeat)):
        pbs.append(pb())
        peers.append(peer())
    key = (lambda r: r.cpu) if row.clock == "cpu" else (lambda r: r.wall)
    row.polybag = min(key(r) for r in pbs)
    row.peer = min(key(r) for r in peers)
    row.ratio = row.peer / row.polybag
    row.ratio_median = statistics.median(key(r) for r in peers) / statistics.median(key(r) for r in pbs)
    row.met = None if row.target is None else row.ratio >= row.target
    row.polybag_runs = [{"wall": r.wall, "cpu": r.cpu, **r.extra} for r in pbs]
    row.peer_runs = [{"wall": r.wall, "cpu": r.cpu, **r.extra} for r in peers]
    if same_out and pbs[0].out != peers[0].out:
        row.note += f" OUTPUT MISMATCH polybag={pbs[0].out} peer={peers[0].out}"
    _print_row(row)
    return row


# --- the files -----------------------------------------------------------------------------
def _stamped(path: Path, stamp: str, make: Callable[[], Any]) -> Path:
    """Make ``path`` unless it exists with the same ``stamp`` (sizes, generator version)."""
    s = path.with_name(path.name + ".stamp")
    if path.exists() and s.exists() and s.read_text() == stamp:
        return path
    print(f"generating {path.name}...", flush=True)
    t = time.perf_counter()
    make()
    s.write_text(stamp)
    print(f"  {path.stat().st_size / 1e6:.1f} MB in {time.perf_counter() - t:.1f} s", flush=True)
    return path


def mcap_file(n: int) -> Path:
    p = DATA / f"mcap_{n}.mcap"
    return _stamped(p, str(n), lambda: bench_mcap.build(p, n))


def imu_bag(n: int) -> Path:
    p = DATA / f"imu_{n}.bag"
    return _stamped(p, str(n), lambda: bench_decode.make_bag(p, n))


def image_bag(n: int) -> Path:
    p = DATA / f"images_{n}.bag"
    return _stamped(p, str(n), lambda: bench_convert.make_image_bag(p, n))


def ulog_file(size_mb: float) -> Path:
    p = DATA / f"ulog_{size_mb:g}mb.ulg"
    version = hashlib.sha256(repr(bench_ulog.TOPICS).encode()).hexdigest()[:16]
    return _stamped(p, f"{size_mb} {version}", lambda: bench_ulog.generate(str(p), size_mb))


# --- the rows ------------------------------------------------------------------------------
def rows_mcap(sz: dict[str, Any], rep: dict[str, int]) -> list[Row]:
    n = sz["mcap"]
    p = mcap_file(n)
    out = [
        side_by_side(
            Row("mcap", f"MCAP raw iteration, {n // 1000}k small msgs, zstd (pipe)", "mcap StreamReader", "cpu", 9.0),
            inproc(lambda: bench_mcap.pb_stream(p)),
            inproc(lambda: bench_mcap.mc_stream(p)),
            rep["inproc"],
        ),
        side_by_side(
            Row("mcap_indexed", "  ref: the same, indexed (file path)", "mcap make_reader(file)", "cpu", None),
            inproc(lambda: bench_mcap.pb_indexed(p)),
            inproc(lambda: bench_mcap.mc_indexed(p)),
            rep["inproc"],
        ),
    ]
    return out


def rows_decode(sz: dict[str, Any], rep: dict[str, int]) -> list[Row]:
    n = sz["imu"]
    payloads = bench_decode.load_payloads(imu_bag(n))
    ours, theirs = bench_decode.polybag_decoder(), bench_decode.rosbags_decoder()
    return [
        side_by_side(
            Row("decode", f"bag decode, {n // 1000}k sensor_msgs/Imu to objects", "rosbags deserialize_ros1", "cpu", 3.0),
            inproc(lambda: bench_decode.decode_each(ours, payloads)),
            inproc(lambda: bench_decode.decode_each(theirs, payloads)),
            rep["inproc"],
        )
    ]


def rows_columns(sz: dict[str, Any], rep: dict[str, int]) -> list[Row]:
    from rosbags.typesys import Stores, get_typestore

    n = sz["imu"]
    p = imu_bag(n)
    store = get_typestore(Stores.ROS1_NOETIC)
    return [
        side_by_side(
            Row("columns", "one topic to numpy columns, same bag", "rosbags read + decode + 2 fields", "cpu", 30.0),
            inproc(lambda: bench_decode.polybag_columns(p)),
            inproc(lambda: bench_decode.rosbags_read_decode(p, store, gather=True)),
            rep["inproc"],
        )
    ]


def rows_write(sz: dict[str, Any], rep: dict[str, int]) -> list[Row]:
    n = sz["imu"]
    payloads = bench_decode.load_payloads(imu_bag(n))
    out: list[Row] = []
    for comp, target, label in (("lz4", 3.0, ""), ("none", None, "  ref: ")):
        a, b = DATA / f"write_polybag_{comp}.bag", DATA / f"write_rosbags_{comp}.bag"
        what = f"{label}bag write, {n // 1000}k ready-serialized Imu ({comp})"
        row = side_by_side(
            Row(f"write_{comp}", what, "rosbags rosbag1.Writer", "wall", target),
            inproc(lambda a=a, comp=comp: bench_bag.write_polybag(a, payloads, comp)),
            inproc(lambda b=b, comp=comp: bench_bag.write_rosbags(b, payloads, comp)),
            rep["inproc"],
        )
        for f in (a, b):  # both outputs hold every message
            with polybag.open(str(f)) as r:
                got = r.summary.message_count
            if got != n:
                row.note += f" {f.name}: {got} messages, not {n}"
            f.unlink()
        out.append(row)
    return out


def rows_convert(sz: dict[str, Any], rep: dict[str, int]) -> list[Row]:
    n = sz["images"]
    src = image_bag(n)
    mb = src.stat().st_size / 1e6
    dst = DATA / "convert_out.mcap"
    return [
        side_by_side(
            Row("convert", f"convert bag -> MCAP (zstd), {n} images, {mb:.0f} MB", "rosbags reader + mcap writer", "wall", 1.2),
            convert_route("polybag", src, dst),
            convert_route("peer_bag2mcap", src, dst),
            rep["convert"],
            same_out=False,
        )
    ]


def rows_ulog(sz: dict[str, Any], rep: dict[str, int]) -> list[Row]:
    p = ulog_file(sz["ulog_mb"])
    mb = p.stat().st_size / 1e6
    t = ULOG_TOPIC
    for side in ("polybag", "pyulog"):  # compile and cache each side's bytecode once (bench_ulog.fresh_env)
        bench_ulog.fresh(side, "full", p, t)
    return [
        side_by_side(
            Row("ulog_full", f"ULog {mb:.0f} MB, all topics to columns (fresh process)", "pyulog ULog(path)", "wall", 5.0),
            fresh_ulog("polybag", "full", p),
            fresh_ulog("pyulog", "full", p),
            rep["fresh"],
        ),
        side_by_side(
            Row("ulog_one", f"ULog one topic to columns (fresh process, {t})", "pyulog message_name_filter_list", "wall", 10.0),
            fresh_ulog("polybag", "one", p),
            fresh_ulog("pyulog", "one", p),
            rep["fresh"],
        ),
        side_by_side(
            Row("ulog_full_summary", "  ref: all topics, the channels listed by r.summary (times read)", "pyulog ULog(path)", "wall", None),
            fresh_ulog("polybag", "full_summary", p),
            fresh_ulog("pyulog", "full", p),
            rep["fresh"],
        ),
        # the fixed cost of a fresh process, paid by both sides (the same code on both)
        side_by_side(
            Row("ulog_pass", "  ref: fresh `python -c pass` (both sides)", "the same", "wall", None),
            fresh_bare("pass"),
            fresh_bare("pass"),
            rep["fresh"],
        ),
        side_by_side(
            Row("ulog_pass_reexec", "  ref: the same started from a shell (.pth re-exec)", "the same", "wall", None),
            fresh_bare("pass", reexec=True),
            fresh_bare("pass", reexec=True),
            rep["fresh"],
        ),
        side_by_side(
            Row("ulog_numpy", "  ref: fresh `python -c 'import numpy'` (both sides)", "the same", "wall", None),
            fresh_bare("import numpy"),
            fresh_bare("import numpy"),
            rep["fresh"],
        ),
        side_by_side(
            Row("ulog_imports", "  ref: fresh, imports only (numpy + ULog reader)", "from pyulog import ULog", "wall", None),
            fresh_ulog("polybag", "import", p),
            fresh_ulog("pyulog", "import", p),
            rep["fresh"],
        ),
        side_by_side(
            Row("ulog_full_inproc", "  ref: all topics, in-process (bench_ulog)", "pyulog ULog(path)", "wall", None),
            inproc(lambda: bench_ulog.polybag_full(str(p))),
            inproc(lambda: bench_ulog.pyulog_full(str(p))),
            rep["inproc"],
        ),
        side_by_side(
            Row("ulog_one_inproc", "  ref: one topic, in-process (bench_ulog, topics=)", "pyulog message_name_filter_list", "wall", None),
            inproc(lambda: bench_ulog.polybag_one(str(p), t)),
            inproc(lambda: bench_ulog.pyulog_one(str(p), t)),
            rep["inproc"],
        ),
        side_by_side(
            Row("ulog_one_inproc_open", "  ref: one topic, in-process, open(path) + topic_columns", "pyulog message_name_filter_list", "wall", None),
            inproc(lambda: bench_ulog.polybag_one(str(p), t, hint=False)),
            inproc(lambda: bench_ulog.pyulog_one(str(p), t)),
            rep["inproc"],
        ),
    ]


ROWS: dict[str, Callable[[dict[str, Any], dict[str, int]], list[Row]]] = {
    "mcap": rows_mcap,
    "decode": rows_decode,
    "columns": rows_columns,
    "write": rows_write,
    "convert": rows_convert,
    "ulog": rows_ulog,
}


# --- printing ------------------------------------------------------------------------------
HEAD = f"{'what':<64} {'polybag':>9} {'peer':>9} {'ratio':>7} {'median':>7} {'target':>7} {'met':>4}  clock  peer"


def _fmt(t: float) -> str:
    return f"{t * 1000:.0f} ms" if t < 1 else f"{t:.2f} s"


def _line(r: Row) -> str:
    target = f">={r.target:g}x" if r.target is not None else "ref"
    met = "-" if r.met is None else ("yes" if r.met else "NO")
    return (
        f"{r.what:<64} {_fmt(r.polybag):>9} {_fmt(r.peer):>9} {r.ratio:>6.2f}x {r.ratio_median:>6.2f}x {target:>7} {met:>4}  "
        f"{r.clock:<5}  {r.peer_name}{r.note}"
    )


def _print_row(r: Row) -> None:
    print("  " + _line(r), flush=True)


def _best_wall(r: Row) -> float:
    """The best wall time of either side of a row whose two sides run the same code."""
    return min(x["wall"] for x in r.polybag_runs + r.peer_runs)


def ulog_breakdown(rows: list[Row]) -> list[str]:
    """Where a fresh ULog process's time goes: interpreter start, imports, the work; the
    cost both sides pay (interpreter + numpy import, the ``ref`` rows of the same run); and
    whether each target is within reach of that floor."""
    by = {r.key: r for r in rows}
    bare = _best_wall(by["ulog_pass"])
    floor = _best_wall(by["ulog_numpy"])
    out = [
        "fresh-process ULog runs, best run of each side (`import` is the script's own import line; polybag "
        "imports its ULog reader and numpy inside polybag.open, so they count in `open + columns`):",
        f"  `python -c pass` {_fmt(bare)} ({_fmt(_best_wall(by['ulog_pass_reexec']))} started from a shell: "
        f"the .pth re-exec), `python -c 'import numpy'` {_fmt(floor)}: paid by both sides",
    ]
    imp = by["ulog_imports"]
    out.append(
        f"  imports only: polybag + numpy + ULog reader {_fmt(imp.polybag)} ({_fmt(imp.polybag - floor)} above numpy), "
        f"pyulog {_fmt(imp.peer)} ({_fmt(imp.peer - floor)} above numpy)"
    )
    for r in rows:
        if r.key not in ("ulog_full", "ulog_one"):
            continue
        for side, runs in (("polybag", r.polybag_runs), ("pyulog", r.peer_runs)):
            b = min(runs, key=lambda x: x["wall"])
            out.append(
                f"  {r.key:<10} {side:<8} wall {_fmt(b['wall']):>8}  cpu {_fmt(b['cpu']):>8}  "
                f"import {_fmt(b['import']):>7}  open + columns {_fmt(b['work']):>8}"
            )
        assert r.target is not None
        need = r.peer / r.target
        own = r.polybag - floor
        above = f"{(r.peer - floor) / own:.1f}x" if own > 0.005 else "n/a (polybag within noise of the floor)"
        out.append(
            f"  {r.key:<10} {r.target:g}x needs polybag <= {_fmt(need)} in all; the floor (python + numpy) is "
            f"{_fmt(floor)}: {'within reach' if need > floor else 'OUT OF REACH even for a process doing nothing but import numpy'}; "
            f"above the floor the ratio is {above}"
        )
    return out


def _commit() -> str:
    try:
        return subprocess.run(
            ["git", "-C", str(HERE.parent), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        return ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes, one run per side (a smoke test)")
    ap.add_argument("--json", metavar="FILE", help="save every figure (runs, clocks, load) as JSON")
    ap.add_argument("--only", nargs="+", choices=GROUPS, help="run only these rows")
    ap.add_argument("--repeat", type=int, help="runs per side for in-process rows (default 3; quick 1)")
    ap.add_argument("--fresh-repeat", type=int, help="runs per side for fresh-process ULog rows (default 5; quick 2)")
    ap.add_argument("--convert-repeat", type=int, help="runs per side for convert (default 2; quick 1)")
    ap.add_argument(
        "--profile-ulog", action="store_true", help="after the table: cProfile and import times of the fresh ULog runs"
    )
    args = ap.parse_args()

    sz = QUICK if args.quick else FULL
    rep = {
        "inproc": args.repeat or (1 if args.quick else 3),
        "fresh": args.fresh_repeat or (2 if args.quick else 5),
        "convert": args.convert_repeat or (1 if args.quick else 2),
    }
    DATA.mkdir(parents=True, exist_ok=True)
    load0 = os.getloadavg()
    started = time.time()
    print(
        f"polybag {_commit()}, {'quick' if args.quick else 'full'} sizes {sz}, best of {rep}; "
        f"{os.cpu_count()} cores, load average {load0[0]:.2f} at start",
        flush=True,
    )
    print("  " + HEAD, flush=True)
    rows: list[Row] = []
    for g in GROUPS:
        if args.only and g not in args.only:
            continue
        rows.extend(ROWS[g](sz, rep))
    load1 = os.getloadavg()

    print()
    print(HEAD)
    for r in rows:
        print(_line(r))
    main_rows = [r for r in rows if r.target is not None]
    missed = [r.key for r in main_rows if not r.met]
    print(
        f"\n{len(main_rows) - len(missed)} of {len(main_rows)} targets met"
        + (f" (missed: {', '.join(missed)})" if missed else "")
        + f"; load average {load0[0]:.2f} at start, {load1[0]:.2f} at end; {time.time() - started:.0f} s"
    )
    report = {
        "commit": _commit(),
        "quick": args.quick,
        "sizes": sz,
        "repeat": rep,
        "cores": os.cpu_count(),
        "loadavg_start": load0,
        "loadavg_end": load1,
        "started": started,
        "rows": [asdict(r) for r in rows],
    }
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    breakdown = ulog_breakdown(rows) if any(r.key == "ulog_full" for r in rows) else []
    if breakdown:
        print("\n" + "\n".join(breakdown))
        if args.json:
            report["ulog_breakdown"] = breakdown
            Path(args.json).write_text(json.dumps(report, indent=1))
    if args.json:
        print(f"saved {args.json}")
    if args.profile_ulog:
        p = ulog_file(sz["ulog_mb"])
        for side, what in (("polybag", "full"), ("polybag", "one"), ("pyulog", "full"), ("pyulog", "one")):
            print(f"\n=== cProfile, fresh process: {side} {what} ===")
            print(bench_ulog.profile_fresh(side, what, str(p), ULOG_TOPIC))
    return 0


if __name__ == "__main__":
    sys.exit(main())
