"""Command line of the fuzz harness (see README.md)."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
import traceback
from pathlib import Path


def _replay(target_name: str, files: list[str], timeout: float) -> int:
    """Run saved inputs in this process; print what escaped."""
    import warnings

    from fuzz import engine
    from fuzz import targets as T

    warnings.simplefilter("ignore")
    target = T.all_targets()[target_name]()
    target.setup()
    signal.signal(signal.SIGALRM, engine._on_alarm)
    bad = 0
    for f in files:
        data = Path(f).read_bytes()
        stats = T.Stats()
        T.CURRENT = stats
        signal.setitimer(signal.ITIMER_REAL, timeout)
        t = time.monotonic()
        try:
            target.run(data, stats)
            print(f"{f}: ok ({time.monotonic() - t:.2f} s)")
        except engine.CaseTimeout:
            bad += 1
            print(f"{f}: TIMEOUT after {timeout} s")
        except BaseException as e:  # noqa: BLE001
            bad += 1
            print(f"{f}: ESCAPE {type(e).__name__} at {engine._where(e)}")
            traceback.print_exception(e)
            if isinstance(e, T.Masked):
                traceback.print_exception(e.inner)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            T.reset_caches()
    target.teardown()
    return 1 if bad else 0


def _minimize(target_name: str, file: str, seconds: float, timeout: float) -> int:
    """Shrink a failing input while it fails the same way (same exception type and place)."""
    import warnings

    from fuzz import engine
    from fuzz import targets as T

    warnings.simplefilter("ignore")
    target = T.all_targets()[target_name]()
    target.setup()
    signal.signal(signal.SIGALRM, engine._on_alarm)

    def sig(data: bytes) -> str | None:
        signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            target.run(data, T.Stats())
            return None
        except engine.CaseTimeout:
            return "timeout"
        except BaseException as e:  # noqa: BLE001
            return f"{type(getattr(e, 'inner', e)).__name__}@{engine._where(e)}"
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            T.reset_caches()

    data = Path(file).read_bytes()
    want = sig(data)
    if want is None:
        print(f"{file} does not fail")
        return 1
    deadline = time.time() + seconds
    step = max(1, len(data) // 2)
    while step >= 1 and time.time() < deadline:
        i = 0
        changed = False
        while i < len(data) and time.time() < deadline:
            cand = data[:i] + data[i + step :]
            if sig(cand) == want:
                data = cand
                changed = True
            else:
                i += step
        if not changed:
            step //= 2
    out = Path(file).with_suffix(".min.bin")
    out.write_bytes(data)
    print(f"{want}: {len(data)} bytes -> {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fuzz", description=__doc__)
    ap.add_argument("--target", "-t", action="append", help="target name (repeatable) or 'all'")
    ap.add_argument("--seconds", type=float, help="run each target this long")
    ap.add_argument("--cases", type=int, help="run each target for this many cases")
    ap.add_argument("--seed", default="0", help="seed of the case sequence (default 0)")
    ap.add_argument("--case-timeout", type=float, default=20.0, help="seconds one case may take (default 20)")
    ap.add_argument("--mem-mb", type=int, default=1536, help="address-space cap of a worker, MiB (default 1536)")
    ap.add_argument("--rss-mb", type=int, default=1024, help="peak resident memory allowed, MiB (default 1024)")
    ap.add_argument("--work", type=Path, default=None, help="pool and state folder (default fuzz/.work)")
    ap.add_argument("--crashes", type=Path, default=None, help="where failing inputs go (default fuzz/crashes)")
    ap.add_argument("--fresh", action="store_true", help="start at case 0 instead of resuming")
    ap.add_argument("--json", type=Path, help="write the results as JSON to this file")
    ap.add_argument("--replay", nargs="+", metavar="FILE", help="run saved inputs in this process")
    ap.add_argument("--minimize", metavar="FILE", help="shrink a failing input (writes FILE.min.bin)")
    ap.add_argument("--list", action="store_true", help="list the targets")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)

    if a.worker:
        from fuzz.engine import worker_main

        return worker_main(json.loads(a.worker))

    from fuzz import engine
    from fuzz.targets import all_targets

    names = all_targets()
    if a.list:
        for n, cls in names.items():
            if not n.startswith("_"):
                print(f"{n:14} {cls.doc}")
        return 0
    chosen = a.target or []
    if chosen == ["all"] or "all" in chosen:
        chosen = [n for n in names if not n.startswith("_")]
    for n in chosen:
        if n not in names:
            ap.error(f"unknown target {n!r} (known: {', '.join(names)})")
    if not chosen:
        ap.error("give --target NAME (or --list)")
    if a.replay:
        return _replay(chosen[0], a.replay, a.case_timeout)
    if a.minimize:
        return _minimize(chosen[0], a.minimize, a.seconds or 120.0, a.case_timeout)
    if a.seconds is None and a.cases is None:
        ap.error("give --seconds and/or --cases")
    work = a.work or engine.DEFAULT_WORK
    crashes = a.crashes or engine.DEFAULT_CRASHES
    results = []

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    for n in chosen:
        res = engine.run(
            n, seed=a.seed, cases=a.cases, seconds=a.seconds, case_timeout=a.case_timeout, mem_mb=a.mem_mb,
            rss_mb=a.rss_mb, work=work, crashes=crashes, resume=not a.fresh, log=log,
        )
        d = res.as_dict()
        results.append(d)
        print(
            f"{n}: {d['cases']} cases in {d['seconds']} s, {d['escapes']} escape signatures "
            f"({d['failing_cases']} failing cases), peak RSS {d['max_rss_mb']} MiB, "
            f"max_chunk_bytes {'passed' if d['info'].get('max_chunk_bytes') else 'not supported'}"
            if n in ("mcap_indexed", "mcap_stream", "bag", "ulog")
            else f"{n}: {d['cases']} cases in {d['seconds']} s, {d['escapes']} escape signatures "
            f"({d['failing_cases']} failing cases), peak RSS {d['max_rss_mb']} MiB",
            flush=True,
        )
        for s, info in d["signatures"].items():
            print(f"    {s}: {info['count']} cases, e.g. {info['file']}\n        {info['message'][:200]}")
    if a.json:
        a.json.write_text(json.dumps(results, indent=2))
    return 1 if any(r["escapes"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
