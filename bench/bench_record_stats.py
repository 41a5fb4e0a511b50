"""The CPU cost of watching a recording (issue 28): ``polybag record`` at rospy's top rate with
and without the live table (stderr a pty) and ``--json-stats 0.25``.

One run: a ``rosmaster`` on a free port, ``polybag record -l N`` on ``--topics`` topics (so it
ends by itself after N messages per topic), then one rospy publisher per topic (Debian's
``/usr/bin/python3``) sending 100-byte ``std_msgs/String`` as fast as rospy goes once polybag
is connected.  Measured: polybag's CPU seconds (user + system, from ``wait4``) for the run.
Modes: ``plain`` (stderr a pipe, as today), ``table`` (stderr a pty: the table 4 times a
second), ``json`` (``--json-stats 0.25`` to a pipe), ``both``; ``--repeat`` runs of each,
interleaved; printed: the median CPU seconds per mode and its ratio to ``plain``.

    .venv/bin/python bench/bench_record_stats.py                     # 1 topic, 50000 messages, 3 runs
    .venv/bin/python bench/bench_record_stats.py --topics 4 --count 20000 --json
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import xmlrpc.client
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
from ros1_graph import free_port, wait_for  # noqa: E402

ROS_PYTHON = "/usr/bin/python3"
MODES = ("plain", "table", "json", "both")

PUBLISHER = textwrap.dedent(
    """
    import sys, time
    import rospy
    from std_msgs.msg import String
    topic = sys.argv[1]
    rospy.init_node("stats_pub" + topic.replace("/", "_"), disable_signals=True)
    pub = rospy.Publisher(topic, String, queue_size=10000)
    end = time.monotonic() + 60
    while pub.get_num_connections() < 1 and time.monotonic() < end:
        time.sleep(0.05)
    time.sleep(0.3)
    msg = String(data="x" * 96)
    stop = time.monotonic() + 300
    while time.monotonic() < stop and pub.get_num_connections():
        for _ in range(100):
            pub.publish(msg)
    """
)


def _drain(fd: int) -> threading.Thread:
    def run() -> None:
        while True:
            try:
                if not os.read(fd, 65536):
                    return
            except OSError:
                return

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def _cpu_and_wait(p: subprocess.Popen[Any], timeout: float) -> tuple[float, int]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            p.returncode = os.waitstatus_to_exitcode(status)
            return ru.ru_utime + ru.ru_stime, p.returncode
        time.sleep(0.02)
    p.send_signal(signal.SIGINT)
    _pid, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return ru.ru_utime + ru.ru_stime, p.returncode


def one_run(mode: str, count: int, topics: int, tmp: Path) -> dict[str, Any]:
    """One recording of ``count`` messages per topic in ``mode``: CPU seconds, wall seconds, exit code."""
    port = free_port()
    uri = f"http://127.0.0.1:{port}"
    env = dict(
        os.environ,
        ROS_MASTER_URI=uri,
        ROS_HOSTNAME="127.0.0.1",
        ROS_IP="127.0.0.1",
        ROS_HOME=str(tmp),
        ROS_LOG_DIR=str(tmp),
        TERM="xterm",
        COLUMNS="120",
        LINES="40",
    )
    env.pop("NO_COLOR", None)
    names = [f"/fast{i}" for i in range(topics)]
    procs: list[subprocess.Popen[Any]] = []
    fds: list[int] = []
    try:
        procs.append(
            subprocess.Popen(["rosmaster", "--core", "-p", str(port)], env=env, cwd=tmp,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        )
        master = xmlrpc.client.ServerProxy(uri)
        wait_for(lambda: master.getSystemState("/bench")[0] == 1, 30, "rosmaster")
        out_file = tmp / f"{mode}_{time.monotonic_ns()}.bag"
        cmd = [sys.executable, "-m", "polybag", "record", "-l", str(count), "-O", str(out_file), *names]
        if mode in ("json", "both"):
            cmd[4:4] = ["--json-stats", "0.25"]
        kw: dict[str, Any] = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
        if mode in ("table", "both"):
            m, s = pty.openpty()
            kw["stderr"] = s
            fds.append(m)
        poly = subprocess.Popen(cmd, env=env, cwd=tmp, **kw)
        procs.append(poly)
        if fds:
            os.close(kw["stderr"])
            _drain(fds[0])
        else:
            _drain(poly.stderr.fileno())  # type: ignore[union-attr]
        _drain(poly.stdout.fileno())  # type: ignore[union-attr]

        def subscribed() -> bool:
            subs = {t: n for t, n in master.getSystemState("/bench")[2][1]}
            return all(subs.get(t) for t in names)

        wait_for(subscribed, 60, "polybag subscribed")
        script = tmp / "stats_pub.py"
        script.write_text(PUBLISHER)
        for t in names:
            procs.append(subprocess.Popen([ROS_PYTHON, str(script), t], env=env, cwd=tmp,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))  # fmt: skip
        t0 = time.monotonic()
        cpu, code = _cpu_and_wait(poly, 600)
        wall = time.monotonic() - t0
        try:
            os.remove(out_file)
        except OSError:
            pass
        return {"mode": mode, "cpu": cpu, "wall": wall, "code": code}
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in reversed(procs):
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)
        for fd in fds:
            os.close(fd)


def refresh_cost(topics: int = 20, refreshes: int = 2000) -> float:
    """CPU seconds of one refresh (sample, table drawn, JSON line) of a recorder with ``topics``
    topics, in this process (the view's own cost, without the noise of a live run)."""
    import io

    sys.path.insert(0, str(HERE.parent / "src"))
    from polybag.record import Recorder, RecordOptions
    from polybag.record.stats import StatsView

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    with tempfile.TemporaryDirectory(prefix="bench_record_stats_") as d:
        rec = Recorder(RecordOptions(output_name=str(Path(d) / "r.bag"), quiet=True))
        rec.start()
        for i in range(topics):
            rec.write(f"/topic{i}", b"\0\0\0\0", type="std_msgs/String", md5sum="992ce8a1687cec8c8bd883ec73ca41d1",
                      definition="string data\n")  # fmt: skip
        view = StatsView([rec], term=Tty(), json_every=0.25, out=io.StringIO())
        t0 = time.process_time()
        for _ in range(refreshes):
            figs = view.figures()
            view.draw(figs)
            view.write_json(figs)
        cost = (time.process_time() - t0) / refreshes
        rec.close()
    return cost


def run(count: int = 50000, topics: int = 1, repeat: int = 3, modes: tuple[str, ...] = MODES) -> dict[str, Any]:
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench_record_stats_") as d:
        for _ in range(repeat):
            for mode in modes:
                runs.append(one_run(mode, count, topics, Path(d)))
    cpu = {m: statistics.median(r["cpu"] for r in runs if r["mode"] == m) for m in modes}
    wall = {m: statistics.median(r["wall"] for r in runs if r["mode"] == m) for m in modes}
    base = cpu.get("plain")
    ratio = {m: (cpu[m] / base if base else None) for m in modes}
    per = refresh_cost(max(topics, 20))
    return {"count": count, "topics": topics, "repeat": repeat, "cpu_seconds": cpu, "wall_seconds": wall,
            "ratio_to_plain": ratio, "refresh_cpu_seconds": per, "runs": runs}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=50000, help="messages per topic (default 50000)")
    ap.add_argument("--topics", type=int, default=1, help="topics, one rospy publisher each (default 1)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each mode (default 3)")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args()
    if not os.path.exists(ROS_PYTHON):
        sys.exit("needs Debian's ROS 1 packages (python3-rospy python3-rosmaster)")
    res = run(args.count, args.topics, args.repeat)
    if args.json:
        print(json.dumps(res, indent=2))
        return
    n = res["count"] * res["topics"]
    print(f"polybag record of {n} messages ({res['topics']} topic(s)), median of {res['repeat']} runs")
    print(f"{'mode':<6} {'CPU s':>7} {'wall s':>7} {'msg/s':>8} {'ratio':>6}")
    for m in MODES:
        c, w, r = res["cpu_seconds"][m], res["wall_seconds"][m], res["ratio_to_plain"][m]
        print(f"{m:<6} {c:>7.2f} {w:>7.2f} {n / w:>8.0f} {r:>6.3f}")
    per = res["refresh_cpu_seconds"]
    print(f"one refresh (sample + table + JSON line, {max(res['topics'], 20)} topics): {per * 1e3:.3f} ms CPU; "
          f"at 4 Hz: {per * 4 * 100:.2f} % of a core")  # fmt: skip
    bad = [r for r in res["runs"] if r["code"] != 0]
    if bad:
        print(f"warning: {len(bad)} runs exited with a non-zero code: {bad}")


if __name__ == "__main__":
    main()
