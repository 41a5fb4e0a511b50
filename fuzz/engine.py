"""The fuzz loop: a supervisor process and a worker process per target.

The worker runs cases one after another under the invariants:

* only :class:`polybag.errors.PolybagError` may come out of the API (a PolybagError raised
  while a MemoryError or RecursionError was being handled counts as an escape too);
* each case ends within ``case_timeout`` seconds (``setitimer``; a case stuck in C code is
  killed by the supervisor ``HARD_GRACE`` seconds later);
* the process's address space is capped (``RLIMIT_AS``), so an unbounded allocation fails
  with MemoryError instead of eating the machine, and its peak resident memory is checked
  after each case against ``rss_mb``.

Case ``i`` of seed ``S`` is generated from ``random.Random(f"{S}/{target}/{i}")`` and the
pool of kept inputs, so a run is reproducible.  Inputs that reach something new (a new
error site, a new count of messages, channels, decoded messages...) are kept in the pool
(``<work>/<target>/pool``) and mutated further.  Escapes are saved under
``fuzz/crashes/<target>/`` (the input and a ``.txt`` with the traceback); the next index
is saved in ``<work>/<target>/state.json`` so a long run can be stopped and resumed.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import resource
import select
import signal
import subprocess
import sys
import threading
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

FUZZ_DIR = Path(__file__).resolve().parent
DEFAULT_WORK = FUZZ_DIR / ".work"
DEFAULT_CRASHES = FUZZ_DIR / "crashes"
HARD_GRACE = float(os.environ.get("POLYBAG_FUZZ_HARD_GRACE", "10"))
POOL_MAX = 3000
RESTART_EVERY = 4000


class CaseTimeout(BaseException):
    """Raised in the worker when a case runs past its time bound."""


def _on_alarm(signum: int, frame: Any) -> None:
    raise CaseTimeout


def _where(exc: BaseException) -> str:
    """The innermost polybag frame of ``exc`` (else the innermost frame): ``file.py:line``."""
    frames = traceback.extract_tb(exc.__traceback__)
    inner = getattr(exc, "inner", None)
    if inner is not None:  # a Masked error: where the MemoryError/RecursionError came from
        frames = traceback.extract_tb(inner.__traceback__) or frames
    mine = [f for f in frames if "/polybag/" in f.filename] or frames
    if not mine:
        return "?"
    f = mine[-1]
    return f"{f.filename.split('/polybag/')[-1] if '/polybag/' in f.filename else Path(f.filename).name}:{f.lineno}"


def _save(crashes: Path, kind: str, etype: str, where: str, data: bytes, text: str) -> str:
    crashes.mkdir(parents=True, exist_ok=True)
    sig = hashlib.sha1(f"{kind}|{etype}|{where}".encode()).hexdigest()[:10]
    existing = sorted(crashes.glob(f"{kind}-{etype}-{sig}-*.bin"), key=lambda p: p.stat().st_size)
    name = f"{kind}-{etype}-{sig}-{hashlib.sha1(data).hexdigest()[:8]}.bin"
    path = crashes / name
    if len(existing) >= 3 and len(data) >= existing[-1].stat().st_size:
        return str(existing[0])
    if len(existing) >= 3:
        existing[-1].unlink(missing_ok=True)
        existing[-1].with_suffix(".txt").unlink(missing_ok=True)
    path.write_bytes(data)
    path.with_suffix(".txt").write_text(text)
    return str(path)


# ================================================================================== worker
def _peak_rss_kb() -> int:
    """This process's peak resident memory in KiB: VmHWM of its own address space.  Not
    ``ru_maxrss``: that survives ``exec`` and starts from the parent's peak at ``fork``, so
    a worker started from a big process (a pytest worker that ran memory-heavy tests) would
    fail every case."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def worker_main(args: dict[str, Any]) -> int:
    """Run cases ``[start, end)``; report on ``args['out_fd']`` as JSON lines."""
    out = os.fdopen(args["out_fd"], "w", buffering=1)
    from fuzz import targets as T

    warnings.simplefilter("ignore")
    target = T.all_targets()[args["target"]]()
    work = Path(args["work"]) / target.name
    pool_dir = work / "pool"
    pool_dir.mkdir(parents=True, exist_ok=True)
    crashes = Path(args["crashes"]) / target.name
    target.setup()
    # pool files are named <sequence>-<shape>.bin: reloaded in the order they were kept, so a
    # restarted worker draws from the same pool as an uninterrupted one would
    pool_files = sorted(pool_dir.glob("*.bin"))
    seen = {p.stem.partition("-")[2] for p in pool_files}
    pool_names = [p for p in pool_files]
    pool = [p.read_bytes() for p in pool_names]
    seq = int(pool_files[-1].stem.partition("-")[0]) + 1 if pool_files else 0
    seed, end, deadline = args["seed"], args["end"], args["deadline"]
    rss_limit = args["rss_mb"] * 1024
    signal.signal(signal.SIGALRM, _on_alarm)
    current = {"i": -1, "data": b"", "t": 0.0}

    def dump_slow() -> None:  # a stuck case: leave its input where the supervisor finds it
        while True:
            time.sleep(1.0)
            i = current["i"]
            if i >= 0 and time.monotonic() - current["t"] > 2.0:
                (work / "current.bin").write_bytes(current["data"])
                (work / "current.json").write_text(json.dumps({"i": i}))
                while current["i"] == i:
                    time.sleep(0.5)

    threading.Thread(target=dump_slow, daemon=True).start()

    def send(**msg: Any) -> None:
        out.write(json.dumps(msg) + "\n")

    send(event="start", info=target.info)
    last = time.monotonic()
    done = 0
    i = args["start"]
    exit_code = 0
    while i < end and time.time() < deadline:
        rng = random.Random(f"{seed}/{target.name}/{i}")
        stats = T.Stats()
        T.CURRENT = stats
        failure: tuple[str, BaseException] | None = None
        data = b""
        current.update(i=i, data=data, t=time.monotonic())
        signal.setitimer(signal.ITIMER_REAL, args["case_timeout"])
        try:
            try:
                data = target.generate(rng, pool)
                current["data"] = data
                target.run(data, stats)
            finally:
                # the timer stops before anything else: an alarm due just as the case ends
                # is raised here, inside the outer try, and counts as this case's timeout
                # (never while a failure is being recorded, which would kill the worker)
                signal.setitimer(signal.ITIMER_REAL, 0)
        except CaseTimeout as e:
            failure = ("timeout", e)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:  # noqa: BLE001 - the point: anything but PolybagError escapes
            failure = ("masked" if isinstance(e, T.Masked) else "escape", e)
        finally:
            current["i"] = -1
        T.reset_caches()
        done += 1
        rss = _peak_rss_kb()
        if failure is None and rss > rss_limit:
            failure = ("memory", MemoryError(f"peak RSS {rss // 1024} MiB > {rss_limit // 1024} MiB"))
        if failure is not None:
            kind, exc = failure
            etype = type(getattr(exc, "inner", exc)).__name__ if kind != "timeout" else "Timeout"
            where = _where(exc) if kind in ("escape", "masked") else "-"
            tb = "".join(traceback.format_exception(exc)) if kind != "memory" else str(exc)
            if kind == "timeout":
                tb = f"case ran past {args['case_timeout']} s\n" + "".join(traceback.format_exception(exc))
            if isinstance(exc, T.Masked):
                tb += "\n--- inner ---\n" + "".join(traceback.format_exception(exc.inner))
            text = f"target {target.name} seed {seed} case {i}\n{kind}: {etype} at {where}\n\n{tb}"
            path = _save(crashes, kind, etype, where, data, text)
            send(event="failure", kind=kind, type=etype, where=where, index=i, file=path,
                 message=str(exc)[:300], size=len(data))
        else:
            key = hashlib.sha1("|".join(sorted(stats.marks)).encode()).hexdigest()[:16]
            if key not in seen and len(data) <= 4 << 20:
                seen.add(key)
                path = pool_dir / f"{seq:09d}-{key}.bin"
                seq += 1
                path.write_bytes(data)
                pool.append(data)
                pool_names.append(path)
                if len(pool) > POOL_MAX:
                    k = random.Random(i).randrange(len(pool))
                    pool.pop(k)
                    pool_names.pop(k).unlink(missing_ok=True)
        i += 1
        now = time.monotonic()
        if now - last > 0.5 or failure is not None:
            send(event="progress", next=i, done=done, pool=len(pool))
            last = now
        if failure is not None and (failure[0] in ("timeout", "memory", "masked") or isinstance(failure[1], MemoryError)):
            exit_code = 3  # state may be damaged (or the peak RSS is spent): start a fresh worker
            break
        if done >= RESTART_EVERY:
            exit_code = 3
            break
    send(event="progress", next=i, done=done, pool=len(pool))
    target.teardown()
    send(event="exit", next=i, maxrss_kb=_peak_rss_kb())
    out.flush()
    return exit_code


# ================================================================================== supervisor
class Result:
    def __init__(self, target: str, seed: str) -> None:
        self.target = target
        self.seed = seed
        self.cases = 0
        self.failures: list[dict[str, Any]] = []
        self.signatures: dict[str, dict[str, Any]] = {}
        self.max_rss_kb = 0
        self.info: dict[str, Any] = {}
        self.seconds = 0.0
        self.workers = 0

    def add_failure(self, f: dict[str, Any]) -> None:
        self.failures.append(f)
        sig = f"{f['kind']}:{f['type']}@{f['where']}"
        s = self.signatures.setdefault(sig, {"count": 0, "file": f.get("file"), "message": f.get("message", "")})
        s["count"] += 1

    def as_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "seed": self.seed,
            "cases": self.cases,
            "failing_cases": len(self.failures),
            "escapes": len(self.signatures),
            "signatures": self.signatures,
            "max_rss_mb": round(self.max_rss_kb / 1024, 1),
            "seconds": round(self.seconds, 1),
            "workers": self.workers,
            "info": self.info,
        }


def _limit_memory(mem_mb: int) -> None:
    lim = mem_mb << 20
    resource.setrlimit(resource.RLIMIT_AS, (lim, lim))


def run(
    target: str,
    *,
    seed: str = "0",
    cases: int | None = None,
    seconds: float | None = None,
    case_timeout: float = 20.0,
    mem_mb: int = 1536,
    rss_mb: int = 1024,
    work: Path = DEFAULT_WORK,
    crashes: Path = DEFAULT_CRASHES,
    resume: bool = True,
    log: Any = None,
) -> Result:
    """Fuzz ``target`` for ``cases`` cases and/or ``seconds`` seconds (in worker processes)."""
    res = Result(target, seed)
    tdir = work / target
    tdir.mkdir(parents=True, exist_ok=True)
    state_file = tdir / "state.json"
    start = 0
    if resume and state_file.exists():
        try:
            st = json.loads(state_file.read_text())
            if st.get("seed") == seed:
                start = int(st.get("next", 0))
        except (OSError, ValueError):
            pass
    end = start + cases if cases is not None else 1 << 62
    t0 = time.time()
    deadline = t0 + seconds if seconds is not None else float("inf")
    nxt = start
    env = dict(os.environ)
    env["MALLOC_ARENA_MAX"] = "2"
    env["POLYBAG_FUZZ_WORK"] = str(work)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(FUZZ_DIR.parent), env.get("PYTHONPATH", "")) if p)
    last_report = time.time()
    while nxt < end and time.time() < deadline:
        r_fd, w_fd = os.pipe()
        wargs = {
            "target": target, "seed": seed, "start": nxt, "end": end,
            "deadline": min(deadline, 1e18), "case_timeout": case_timeout, "rss_mb": rss_mb,
            "work": str(work), "crashes": str(crashes), "out_fd": w_fd,
        }
        errlog = open(tdir / "worker.log", "ab")  # noqa: SIM115
        proc = subprocess.Popen(
            [sys.executable, "-m", "fuzz", "--worker", json.dumps(wargs)],
            cwd=str(FUZZ_DIR.parent),
            env=env,
            pass_fds=(w_fd,),
            stdin=subprocess.DEVNULL,
            stdout=errlog,
            stderr=errlog,
            preexec_fn=lambda: _limit_memory(mem_mb),  # noqa: PLW1509
        )
        os.close(w_fd)
        res.workers += 1
        buf = b""
        last_msg = time.monotonic()
        started = False
        worker_next = nxt
        done_before = 0
        killed = False
        with os.fdopen(r_fd, "rb", buffering=0) as rf:
            while True:
                # setup (seeds, bombs) may take a while; a case gets case_timeout + grace
                limit = case_timeout + HARD_GRACE + (0 if started else 300)
                ready, _, _ = select.select([rf], [], [], 1.0)
                if ready:
                    chunk = rf.read(65536)
                    if not chunk:
                        break
                    buf += chunk
                    while b"\n" in buf:
                        line, buf = buf.split(b"\n", 1)
                        msg = json.loads(line)
                        last_msg = time.monotonic()
                        ev = msg["event"]
                        if ev == "start":
                            started = True
                            res.info = msg.get("info", {})
                        elif ev == "progress":
                            res.cases += msg["done"] - done_before
                            done_before = msg["done"]
                            worker_next = msg["next"]
                        elif ev == "failure":
                            new = f"{msg['kind']}:{msg['type']}@{msg['where']}" not in res.signatures
                            res.add_failure(msg)
                            if log and new:
                                log(f"[{target}] {msg['kind']}: {msg['type']} at {msg['where']} (case {msg['index']}) "
                                    f"-> {msg['file']}")
                        elif ev == "exit":
                            res.max_rss_kb = max(res.max_rss_kb, msg.get("maxrss_kb", 0))
                elif time.monotonic() - last_msg > limit:
                    os.kill(proc.pid, signal.SIGKILL)
                    killed = True
                    break
        code = proc.wait()
        errlog.close()
        if not started and not killed:
            res.seconds = time.time() - t0
            raise RuntimeError(f"fuzz worker for {target} failed to start (exit {code}); see {tdir / 'worker.log'}")
        if code not in (0, 3) or killed:
            # died hard (a signal, or the supervisor's watchdog): the case being run fails
            info: dict[str, Any] = {}
            data = b""
            try:
                info = json.loads((tdir / "current.json").read_text())
                data = (tdir / "current.bin").read_bytes()
            except (OSError, ValueError):
                pass
            idx = int(info.get("i", worker_next))
            if idx < worker_next:
                idx = worker_next
                data = b""
            kind = "hang" if killed else "crash"
            etype = "Killed" if killed else f"exit{code}"
            text = f"target {target} seed {seed} case {idx}\n{kind}: worker {'killed after no progress' if killed else f'exited with {code}'}\n"
            path = _save(crashes / target, kind, etype, "-", data, text) if data else ""
            new = f"{kind}:{etype}@-" not in res.signatures
            res.add_failure({"kind": kind, "type": etype, "where": "-", "index": idx, "file": path, "message": text})
            res.cases += 1
            worker_next = idx + 1
            if log and new:
                log(f"[{target}] {kind}: {etype} (case {idx}) -> {path or 'input not captured'}")
        nxt = worker_next
        state_file.write_text(json.dumps({"seed": seed, "next": nxt}))
        if log and time.time() - last_report > 30:
            last_report = time.time()
            log(f"[{target}] {res.cases} cases, {len(res.signatures)} escape signatures")
    res.seconds = time.time() - t0
    return res
