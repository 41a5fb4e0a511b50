"""Launch to first recorded message: ``polybag record`` beside ``/usr/lib/rosbag/record``,
idle and loaded (issue 28).

One ``rosmaster`` on a free port and one rospy publisher (Debian's ``/usr/bin/python3``)
sending ``std_msgs/Header`` at 50 Hz (``seq`` counts, ``stamp`` is the wall-clock time of
the send), already running.  Each round launches ``polybag record -O p.bag /start`` and
``/usr/lib/rosbag/record -O r.bag /start`` at the same moment (the order alternates between
rounds; each side's launch time is taken just before its own ``Popen``), waits
``--window`` s plus a second, and stops both with SIGINT.  From each bag:

- ``first (stamp)``: the first recorded message's header stamp minus the launch time, the
  time from launch until the recorder got the first message sent after it was connected;
- ``first (recv)``: the same with the bag's receive time (log time) of that message;
- ``in W s``: messages whose stamp falls in ``[launch, launch + W]`` (``due`` = 50 * W).

Modes: ``idle``, and ``loaded`` with ``--load`` busy processes (``python -c "while 1:
pass"``, default 4 per core: "load 8 on 2 cores") running through the whole round, the
publisher and master included.  Printed: the medians per mode and side (a round in which a
side recorded nothing counts as later than any time; ``-`` when most did), and polybag /
rosbag (for times, > 1 is slower; for counts, < 1 is fewer).  ``--phases`` adds when
polybag's start reached each phase (:data:`PHASES`) and the CPU seconds it had used by its
first message: on a CPU-starved machine the start delay follows that CPU time.

The bench's own interpreter was started by this venv's ``ros_wheels_bootstrapper`` (the
rclpy wheels' ``.pth``, which re-executes every fresh interpreter of the venv once with
``LD_LIBRARY_PATH`` set); its children inherit the guard variable, so the recorders measured
here start once.  A ``polybag`` launched from a shell in this venv starts twice.

Fresh processes import from bytecode: the script runs ``compileall`` over ``src/polybag``
first (the shell here exports ``PYTHONDONTWRITEBYTECODE=1``, so nothing else writes the
``.pyc`` files of a changed tree); ``--no-compile`` skips it.  ``--src DIR`` runs polybag from
another tree (a copy of ``src/`` before a change) for a before/after comparison.

    .venv/bin/python bench/bench_record_start.py                      # 5 rounds idle, 5 loaded
    .venv/bin/python bench/bench_record_start.py --rounds 3 --modes loaded --json
    .venv/bin/python bench/bench_record_start.py --phases             # + where polybag's start time goes
"""

from __future__ import annotations

import argparse
import compileall
import json
import math
import os
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import textwrap
import time
import xmlrpc.client
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
sys.path.insert(0, str(SRC))
sys.path.insert(0, str(HERE.parent / "tests"))

import polybag  # noqa: E402
from ros1_graph import free_port, wait_for  # noqa: E402

ROSBAG_RECORD = "/usr/lib/rosbag/record"
ROS_PYTHON = "/usr/bin/python3"
TOPIC = "/start"
RATE = 50.0

PUBLISHER = textwrap.dedent(
    """
    import sys, time
    import rospy
    from std_msgs.msg import Header
    rate = float(sys.argv[1])
    rospy.init_node("bench_start_pub", disable_signals=True)
    pub = rospy.Publisher(sys.argv[2], Header, queue_size=100)
    h = Header(frame_id="bench")
    period = 1.0 / rate
    nxt = time.monotonic()
    print("ready", flush=True)
    while True:
        now = time.monotonic()
        if now < nxt:
            time.sleep(nxt - now)
        nxt += period
        if nxt < time.monotonic() - 1.0:  # (starved for a second: do not send a burst)
            nxt = time.monotonic()
        h.seq += 1
        h.stamp = rospy.Time.from_sec(time.time())
        pub.publish(h)
    """
)

BUSY = "while 1: pass"

#: ``--phases``: runs ``polybag record`` (``python PHASES ARGS...``) and prints on stderr
#: ``polybag-record-phase NAME SECONDS`` (wall clock) as the start reaches each phase: the
#: interpreter runs this file, ``polybag.cli`` imported, the parser built (the command modules
#: it imports), the output file open, the node up, registerSubscriber answered, the first
#: publisher connected (requestTopic and the TCPROS handshake), the first message handed to
#: the recorder (then also ``polybag-record-cpu SECONDS``, the process's CPU time so far; with
#: ``BENCH_MODULES_OUT=FILE`` the names of the modules imported by then go to FILE).  The patches are installed as the modules load, so imports stay where they were.
PHASES = textwrap.dedent(
    """
    import time
    T0 = time.time()
    import os
    import sys
    import importlib.abc

    def say(name):
        sys.stderr.write(f"polybag-record-phase {name} {time.time():.6f}\\n")

    sys.stderr.write(f"polybag-record-phase python {T0:.6f}\\n")

    def after(fn, name, once=True):
        done = []

        def wrapped(*a, **kw):
            out = fn(*a, **kw)
            if not (once and done):
                done.append(1)
                say(name)
                if name == "first_message":
                    t = os.times()
                    sys.stderr.write(f"polybag-record-cpu {t.user + t.system:.3f}\\n")
                if name == "first_message" and os.environ.get("BENCH_MODULES_OUT"):
                    with open(os.environ["BENCH_MODULES_OUT"], "w") as f:
                        f.write("\\n".join(sorted(sys.modules)))
            return out

        return wrapped

    PATCHES = {
        "polybag.record.files": lambda m: setattr(m.OutputFiles, "open", after(m.OutputFiles.open, "file_open")),
        "polybag.net.ros1.node": lambda m: setattr(m.Node, "__init__", after(m.Node.__init__, "node_up")),
        "polybag.net.ros1.master": lambda m: setattr(
            m.MasterClient, "register_subscriber", after(m.MasterClient.register_subscriber, "registered")
        ),
        "polybag.net.ros1.subscriber": lambda m: setattr(
            m._PublisherLink, "_connect", after(m._PublisherLink._connect, "connected")
        ),
        "polybag.record.live": lambda m: setattr(m.LiveSource, "_callback", after(m.LiveSource._callback, "first_message")),
    }

    class Hook(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name not in PATCHES:
                return None
            sys.meta_path.remove(self)
            try:
                import importlib.util
                spec = importlib.util.find_spec(name)
            finally:
                sys.meta_path.insert(0, self)
            run = spec.loader.exec_module

            def exec_module(module):
                run(module)
                PATCHES[name](module)

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, Hook())
    import polybag.cli
    say("cli_imported")
    polybag.cli.build_parser = after(polybag.cli.build_parser, "parser_built")
    sys.exit(polybag.cli.main(sys.argv[1:]))
    """
)


def records(path: Path) -> list[tuple[int, int, int]]:
    """(seq, header stamp ns, receive time ns) of each message of ``path`` (std_msgs/Header)."""
    out: list[tuple[int, int, int]] = []
    if not path.exists():
        return out
    with polybag.open(str(path)) as r:
        for m in r.messages():
            seq, sec, nsec = struct.unpack_from("<III", m.data)
            out.append((seq, sec * 1_000_000_000 + nsec, int(m.log_time)))
    return out


def _side(path: Path, launch_ns: int, window: float) -> dict[str, Any]:
    rows = [(stamp, recv) for _seq, stamp, recv in records(path)]
    end = launch_ns + int(window * 1e9)
    if not rows:
        return {"first_stamp": None, "first_recv": None, "in_window": 0, "messages": 0}
    stamp, recv = min(rows)
    return {
        "first_stamp": (stamp - launch_ns) / 1e9,
        "first_recv": (recv - launch_ns) / 1e9,
        "in_window": sum(1 for s, _r in rows if launch_ns <= s <= end),
        "messages": len(rows),
    }


def _stop(p: subprocess.Popen[Any], timeout: float = 60) -> None:
    if p.poll() is None:
        p.send_signal(signal.SIGINT)
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(10)


def phase_times(err: str) -> dict[str, float]:
    """The phase lines of polybag's stderr (see :data:`PHASES`): phase -> wall-clock time."""
    out: dict[str, float] = {}
    for line in err.splitlines():
        if line.startswith("polybag-record-phase "):
            _tag, name, t = line.split()
            out.setdefault(name, float(t))
    return out


class Launch:
    """Both recorders of one round, just launched."""

    def __init__(self, i: int, paths: dict[str, Path], order: list[str], phases: bool) -> None:
        self.i = i
        self.paths = paths
        self.order = order
        self.phases = phases
        self.times: dict[str, int] = {}  # side -> launch time (ns, wall clock)
        self.procs: dict[str, subprocess.Popen[Any]] = {}


class Bench:
    """A master and the 50 Hz publisher, for several rounds."""

    def __init__(self, tmp: Path, polybag_python: str = sys.executable, src: Path | None = None) -> None:
        self.tmp = tmp
        self.python = polybag_python
        self.src = src
        port = free_port()
        self.uri = f"http://127.0.0.1:{port}"
        self.env = dict(
            os.environ,
            ROS_MASTER_URI=self.uri,
            ROS_HOSTNAME="127.0.0.1",
            ROS_IP="127.0.0.1",
            ROS_HOME=str(tmp),
            ROS_LOG_DIR=str(tmp),
        )
        self.procs: list[subprocess.Popen[Any]] = []
        self.busy: list[subprocess.Popen[Any]] = []
        self._start(["rosmaster", "--core", "-p", str(port)])
        master = xmlrpc.client.ServerProxy(self.uri)
        wait_for(lambda: master.getSystemState("/bench")[0] == 1, 60, "rosmaster")
        self.master = master
        script = tmp / "start_pub.py"
        script.write_text(PUBLISHER)
        self.phases_script = tmp / "record_phases.py"
        self.phases_script.write_text(PHASES)
        self.pub = self._start([ROS_PYTHON, str(script), str(RATE), TOPIC])
        wait_for(lambda: self._publishers() != [], 60, "the publisher registered")

    def _publishers(self) -> list[str]:
        state = self.master.getSystemState("/bench")[2]
        return next((list(n) for t, n in state[0] if t == TOPIC), [])

    def _subscribers(self) -> list[str]:
        state = self.master.getSystemState("/bench")[2]
        return next((list(n) for t, n in state[1] if t == TOPIC), [])

    def _start(self, cmd: list[str], **kw: Any) -> subprocess.Popen[Any]:
        kw.setdefault("stdout", subprocess.DEVNULL)
        kw.setdefault("stderr", subprocess.DEVNULL)
        p = subprocess.Popen(cmd, env=self.env, cwd=self.tmp, **kw)
        self.procs.append(p)
        return p

    def load(self, n: int) -> None:
        """``n`` busy processes (0: none)."""
        self.unload()
        for _ in range(n):
            self.busy.append(subprocess.Popen([sys.executable, "-c", BUSY]))

    def unload(self) -> None:
        for p in self.busy:
            p.kill()
        for p in self.busy:
            p.wait(10)
        self.busy = []

    def launch(self, i: int, polybag_first: bool, phases: bool = False) -> Launch:
        """Start both recorders at once (``polybag_first``: which one is started first)."""
        paths = {"polybag": self.tmp / f"p{i}.bag", "rosbag": self.tmp / f"r{i}.bag"}
        entry = [str(self.phases_script)] if phases else ["-m", "polybag"]
        cmds = {
            "polybag": [self.python, *entry, "record", "-q", "-O", str(paths["polybag"]), TOPIC],
            "rosbag": [ROSBAG_RECORD, "-q", "-O", str(paths["rosbag"]), TOPIC],
        }
        order = ["polybag", "rosbag"] if polybag_first else ["rosbag", "polybag"]
        launched = Launch(i, paths, order, phases)
        for side in order:
            launched.times[side] = time.time_ns()
            launched.procs[side] = subprocess.Popen(
                cmds[side],
                env=dict(self.env, PYTHONPATH=str(self.src)) if self.src is not None and side == "polybag" else self.env,
                cwd=self.tmp,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE if side == "polybag" else subprocess.DEVNULL,
                text=True,
            )
        return launched

    def finish(self, launched: Launch) -> str:
        """Stop both recorders (SIGINT), wait for them; polybag's stderr."""
        err = ""
        for side in launched.order:
            p = launched.procs[side]
            if side == "polybag":
                p.send_signal(signal.SIGINT)
                try:
                    _out, err = p.communicate(timeout=60)
                except subprocess.TimeoutExpired:
                    p.kill()
                    _out, err = p.communicate()
            else:
                _stop(p)
        try:  # (a recorder killed after a stuck stop leaves its registration behind)
            wait_for(lambda: self._subscribers() == [], 30, "both recorders unregistered")
        except AssertionError as e:
            print(f"round {launched.i}: {e}: {self._subscribers()}", file=sys.stderr)
        if launched.procs["polybag"].returncode != 0:
            print(f"round {launched.i}: polybag record exited {launched.procs['polybag'].returncode}: {err[-2000:]}", file=sys.stderr)
        return err

    def round(self, i: int, window: float, polybag_first: bool, phases: bool = False) -> dict[str, Any]:
        """One round (see the module docstring)."""
        launched = self.launch(i, polybag_first, phases)
        # each side's launch, the window, and a second for the last messages to be written
        time.sleep(max(0.0, launched.times[launched.order[0]] / 1e9 + window + 1.0 - time.time()))
        err = self.finish(launched)
        res: dict[str, Any] = {side: _side(launched.paths[side], launched.times[side], window) for side in launched.order}
        res["returncodes"] = {side: p.returncode for side, p in launched.procs.items()}
        if phases:
            t0 = launched.times["polybag"] / 1e9
            res["polybag"]["phases"] = {k: v - t0 for k, v in phase_times(err).items()}
            cpu = [line.split()[1] for line in err.splitlines() if line.startswith("polybag-record-cpu ")]
            res["polybag"]["cpu_to_first"] = float(cpu[0]) if cpu else None
        res["polybag_first"] = polybag_first
        for p in launched.paths.values():
            for f in (p, p.with_name(p.name + ".active")):
                if f.exists():
                    f.unlink()
        return res

    def close(self) -> None:
        self.unload()
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in reversed(self.procs):
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)


def _median(values: list[float | None]) -> float | None:
    """The median; None (no message recorded) counts as later than any time."""
    if not values:
        return None
    m = statistics.median_low([math.inf if v is None else v for v in values])
    return None if m == math.inf else m


def summarize(rounds: list[dict[str, Any]], window: float) -> dict[str, Any]:
    out: dict[str, Any] = {"due": RATE * window}
    for side in ("polybag", "rosbag"):
        out[side] = {
            k: _median([r[side][k] for r in rounds]) for k in ("first_stamp", "first_recv", "in_window")
        }
    out["ratio"] = {
        k: (out["polybag"][k] / out["rosbag"][k]) if out["polybag"][k] is not None and out["rosbag"][k] else None
        for k in ("first_stamp", "first_recv", "in_window")
    }
    cpu = [r["polybag"].get("cpu_to_first") for r in rounds if "cpu_to_first" in r["polybag"]]
    if cpu:
        out["polybag_cpu_to_first"] = _median(cpu)
    ph = [r["polybag"].get("phases") for r in rounds if r["polybag"].get("phases")]
    if ph:
        names = sorted({k for p in ph for k in p}, key=lambda k: _median([p.get(k) for p in ph]) or 0)
        out["polybag_phases"] = {k: _median([p.get(k) for p in ph]) for k in names}
    return out


def run(
    rounds: int = 5,
    window: float = 5.0,
    modes: tuple[str, ...] = ("idle", "loaded"),
    load: int | None = None,
    tmp: Path | None = None,
    phases: bool = False,
    python: str = sys.executable,
    src: Path | None = None,
) -> dict[str, Any]:
    """The rounds of each mode; returns every round and the medians."""
    load = 4 * (os.cpu_count() or 1) if load is None else load
    tmpdir = Path(tempfile.mkdtemp(prefix="bench_record_start_")) if tmp is None else tmp
    bench = Bench(tmpdir, python, src)
    result: dict[str, Any] = {"window": window, "rate": RATE, "load": load, "cpus": os.cpu_count(), "modes": {}}
    try:
        for mode in modes:
            bench.load(load if mode == "loaded" else 0)
            time.sleep(1.0 if mode == "loaded" else 0.0)
            got = [bench.round(i, window, polybag_first=i % 2 == 0, phases=phases) for i in range(rounds)]
            bench.unload()
            result["modes"][mode] = {
                "rounds": got,
                "summary": summarize(got, window),
                "loadavg": os.getloadavg(),
            }
    finally:
        bench.close()
    return result


def _f(v: float | None, fmt: str = "{:.3f}") -> str:
    return "-" if v is None else fmt.format(v)


def print_table(res: dict[str, Any]) -> None:
    w = res["window"]
    print(
        f"launch -> first recorded message, {RATE:.0f} Hz std_msgs/Header, medians of each mode's rounds "
        f"({res['cpus']} CPUs; loaded: {res['load']} busy processes)"
    )
    head = f"{'mode':<7} {'side':<8} {'first (stamp) s':>16} {'first (recv) s':>15} {f'in {w:g} s':>8} {'due':>5}"
    print(head)
    for mode, m in res["modes"].items():
        s = m["summary"]
        for side in ("polybag", "rosbag"):
            v = s[side]
            print(
                f"{mode:<7} {side:<8} {_f(v['first_stamp']):>16} {_f(v['first_recv']):>15} "
                f"{_f(v['in_window'], '{:.0f}'):>8} {s['due']:>5.0f}"
            )
        r = s["ratio"]
        print(
            f"{mode:<7} {'ratio':<8} {_f(r['first_stamp'], '{:.2f}x'):>16} {_f(r['first_recv'], '{:.2f}x'):>15} "
            f"{_f(r['in_window'], '{:.2f}'):>8}"
        )
        if "polybag_cpu_to_first" in s:
            print(f"{mode:<7} polybag CPU seconds (user + system) until its first message: {_f(s['polybag_cpu_to_first'])}")
        if "polybag_phases" in s:
            print(f"{mode:<7} polybag phases (s after launch): " + ", ".join(f"{k} {v:.3f}" for k, v in s["polybag_phases"].items()))
        print(f"{mode:<7} load averages after: {', '.join(f'{x:.1f}' for x in m['loadavg'])}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5, help="rounds per mode (default 5)")
    ap.add_argument("--window", type=float, default=5.0, help="seconds counted after launch (default 5)")
    ap.add_argument("--modes", nargs="+", default=["idle", "loaded"], choices=["idle", "loaded"])
    ap.add_argument("--load", type=int, default=None, help="busy processes when loaded (default 4 per CPU)")
    ap.add_argument("--phases", action="store_true", help="run polybag through a wrapper that prints when its start reached each phase (see PHASES)")
    ap.add_argument("--no-compile", action="store_true", help="do not compileall the polybag tree first")
    ap.add_argument("--src", type=Path, default=None, help="run polybag from this tree (a copy of src/, on PYTHONPATH) instead of this checkout's, e.g. the tree before a change")
    ap.add_argument("--json", action="store_true", help="print every round as JSON")
    args = ap.parse_args()
    if not (os.path.exists(ROSBAG_RECORD) and os.path.exists(ROS_PYTHON)):
        sys.exit("needs Debian's ROS 1 packages (python3-rosbag python3-rospy python3-rosmaster)")
    if not args.no_compile:
        compileall.compile_dir(str((args.src or SRC) / "polybag"), quiet=1)
    res = run(args.rounds, args.window, tuple(args.modes), args.load, phases=args.phases, src=args.src)
    res["src"] = str(args.src or SRC)
    res["compiled"] = not args.no_compile
    if args.json:
        print(json.dumps(res, indent=2))
        return
    print_table(res)
    print(f"polybag from {res['src']}; bytecode: " + ("compileall before the rounds" if res["compiled"] else "as found (--no-compile)"))


if __name__ == "__main__":
    main()
