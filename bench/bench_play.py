"""Play lateness: `polybag play` and `rosbag play` (Debian's /usr/lib/rosbag/play) of the same
100 Hz bag, received by a rospy subscriber, in one run; prints median, p99 and max lateness
of each and the ratios.

    .venv/bin/python bench/bench_play.py [--seconds 10] [--hz 100] [--rounds 2] [--size 200]

Lateness is receive time minus scheduled time (see polybag.play.timing.received_lateness: the
subscriber cannot know when playback started, so the schedule is anchored on the least late
message of each run).  The subscriber is rospy (Debian's /usr/bin/python3) with
``tcp_nodelay``, raw messages (``rospy.AnyMsg``, no deserialization), stamping each message
with ``time.monotonic_ns()`` first thing in its callback.  Rounds alternate the players on one
master (the order reversed every other round).  ``polybag play --json`` also reports its own
send lateness (publish call minus due time) and the bench each player's CPU seconds.
``--realtime`` adds ``polybag play --realtime`` (a SCHED_FIFO player thread; not a like-for-like
comparison, rosbag play has no such option).

The same file is the subscriber: ``/usr/bin/python3 bench/bench_play.py listen TOPIC COUNT
OUT.json [TIMEOUT]`` (the live tests run it too).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xmlrpc.client
from pathlib import Path
from typing import Any

ROSBAG_PLAY = "/usr/lib/rosbag/play"
SYSTEM_PYTHON = "/usr/bin/python3"
TOPIC = "/bench_play"
STRING_MD5 = "992ce8a1687cec8c8bd883ec73ca41d1"
NS = 1_000_000_000
T0 = 1_700_000_000 * NS


# --- the subscriber (runs under Debian's python3 with rospy; imports nothing of polybag) -------
def listen(topic: str, count: int, out: str, timeout: float = 120.0) -> int:
    """Subscribe to ``topic`` until ``count`` messages arrived (or ``timeout`` s passed); write
    ``[[index, monotonic_ns], ...]`` to ``out``, index being the number the payload starts with."""
    import threading

    import rospy  # type: ignore[import-not-found]

    got: list[tuple[int, int]] = []
    done = threading.Event()

    def cb(msg: Any) -> None:
        now = time.monotonic_ns()
        buff = msg._buff  # std_msgs/String: uint32 length, then the text "<index> ..."
        got.append((int(bytes(buff[4:16]).split(b" ")[0]), now))
        if len(got) >= count:
            done.set()

    rospy.init_node("play_listener", anonymous=True, disable_signals=True)
    rospy.Subscriber(topic, rospy.AnyMsg, cb, tcp_nodelay=True, queue_size=10000)
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    done.wait(timeout)
    rospy.signal_shutdown("done")
    Path(out + ".tmp").write_text(json.dumps(got))
    os.replace(out + ".tmp", out)
    return 0 if len(got) >= count else 1


# --- the bag ---------------------------------------------------------------------------------
def payload(i: int, size: int) -> bytes:
    text = f"{i} ".encode().ljust(max(size, 12), b"x")
    return len(text).to_bytes(4, "little") + text


def make_bag(path: Path, n: int, hz: float, size: int) -> list[int]:
    """A bag of ``n`` std_msgs/String on TOPIC at ``hz``; returns the log times."""
    from polybag.formats.bag.writer import BagWriter

    times = [T0 + round(i * NS / hz) for i in range(n)]
    with BagWriter(path, compression="none") as w:
        s = w.add_schema("std_msgs/String", "ros1msg", b"string data\n")
        ch = w.add_channel(TOPIC, "ros1", s, {"md5sum": STRING_MD5, "callerid": "/bench"})
        for i, t in enumerate(times):
            w.write(ch, payload(i, size), t)
    return times


# --- a graph ---------------------------------------------------------------------------------
# the free port and the wait of the live tests' graph (tests/ros1_graph.py, stdlib only)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from ros1_graph import free_port as _free_port  # noqa: E402
from ros1_graph import wait_for as _wait  # noqa: E402


class Master:
    def __init__(self, tmp: Path) -> None:
        port = _free_port()
        self.uri = f"http://127.0.0.1:{port}"
        self.env = dict(
            os.environ, ROS_MASTER_URI=self.uri, ROS_HOSTNAME="127.0.0.1", ROS_IP="127.0.0.1",
            ROS_HOME=str(tmp), ROS_LOG_DIR=str(tmp), PYTHONUNBUFFERED="1",
        )
        self.proc = subprocess.Popen(["rosmaster", "--core", "-p", str(port)], env=self.env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.rpc = xmlrpc.client.ServerProxy(self.uri)
        _wait(lambda: self.rpc.getSystemState("/bench")[0] == 1, 30, "rosmaster")

    def subscribed(self, topic: str) -> bool:
        subs = self.rpc.getSystemState("/bench")[2][1]
        return any(t == topic and nodes for t, nodes in subs)

    def close(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def run_once(
    master: Master, tmp: Path, cmd: list[str], n: int, name: str, listener_prefix: list[str] | None = None
) -> tuple[list[tuple[int, int]], str, float]:
    """Start a listener, play with ``cmd``, return the listener's ``(index, recv_ns)``, the
    player's stdout and its CPU seconds (user + system)."""
    out = tmp / f"recv_{name}.json"
    out.unlink(missing_ok=True)
    listener = subprocess.Popen([*(listener_prefix or []), SYSTEM_PYTHON, __file__, "listen", TOPIC, str(n), str(out)],
                                env=master.env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _wait(lambda: master.subscribed(TOPIC), 60, "the listener subscribing")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        player = subprocess.run(cmd, env=master.env, capture_output=True, text=True, timeout=600)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        if player.returncode != 0:
            raise SystemExit(f"{name} failed ({player.returncode}): {player.stderr}")
        listener.wait(60)
    finally:
        if listener.poll() is None:
            listener.send_signal(signal.SIGTERM)
            listener.wait(30)
    if not out.exists():
        err = listener.stderr.read().decode() if listener.stderr else ""
        raise SystemExit(f"the listener wrote nothing: {err}")
    return [tuple(x) for x in json.loads(out.read_text())], player.stdout, cpu  # type: ignore[misc]


def lateness_of(times: list[int], got: list[tuple[int, int]]) -> list[int]:
    from polybag.play.timing import received_lateness

    got = sorted(got, key=lambda x: x[1])
    return received_lateness([times[i] for i, _ in got], [r for _, r in got])


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] == "listen":
        return listen(args[1], int(args[2]), args[3], float(args[4]) if len(args) > 4 else 120.0)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0, help="bag length (default 10)")
    ap.add_argument("--hz", type=float, default=100.0, help="message rate (default 100)")
    ap.add_argument("--rounds", type=int, default=2, help="runs of each player (default 2)")
    ap.add_argument("--size", type=int, default=200, help="payload bytes (default 200)")
    ap.add_argument("--realtime", action="store_true",
                    help="also run polybag play --realtime (SCHED_FIFO; needs the privilege)")
    ap.add_argument("--listener-fifo", action="store_true",
                    help="run the subscriber at SCHED_FIFO (chrt -f 20), so that on a busy machine the "
                    "lateness measured is the players' and not the subscriber's own scheduling")
    a = ap.parse_args(args)
    missing = [p for p in (ROSBAG_PLAY, SYSTEM_PYTHON, shutil.which("rosmaster")) if not p or not os.path.exists(p)]
    if missing:
        print(f"needs Debian's ROS 1 (python3-rosbag python3-rospy python3-rosmaster): missing {missing}")
        return 1
    n = max(2, round(a.seconds * a.hz))
    listener_prefix = ["chrt", "-f", "20"] if a.listener_fifo else None
    with tempfile.TemporaryDirectory(prefix="bench_play_") as d:
        tmp = Path(d)
        bag = tmp / "in.bag"
        times = make_bag(bag, n, a.hz, a.size)
        master = Master(tmp)
        players = {
            "polybag": [sys.executable, "-m", "polybag", "play", "-q", "--json", "--wait-for-subscribers", str(bag)],
            "rosbag": [ROSBAG_PLAY, "-q", "--wait-for-subscribers", str(bag)],
        }
        if a.realtime:
            players["polybag-rt"] = [*players["polybag"][:-1], "--realtime", str(bag)]
        runs: dict[str, list[tuple[list[int], float]]] = {k: [] for k in players}
        own: list[dict[str, Any]] = []
        try:
            for r in range(a.rounds):
                order = list(players) if r % 2 == 0 else list(reversed(players))  # neither always first
                for name in order:
                    got, stdout, cpu = run_once(master, tmp, players[name], n, f"{name}{r}", listener_prefix)
                    if len(got) != n:
                        print(f"{name} round {r}: received {len(got)} of {n}")
                    idx = [i for i, _ in sorted(got, key=lambda x: x[1])]
                    if idx != sorted(idx):
                        print(f"{name} round {r}: messages out of order")
                    runs[name].append((lateness_of(times, got), cpu))
                    if name.startswith("polybag"):
                        report = json.loads(stdout)
                        own.append({"name": name, **report["lateness"], "realtime": report["realtime"]})
        finally:
            master.close()
    from polybag.play.timing import summarize

    fifo = " (SCHED_FIFO)" if a.listener_fifo else ""
    print(f"play lateness, {n} messages at {a.hz:g} Hz ({a.size} B), rospy subscriber{fifo}, {a.rounds} rounds, "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(f"{'player':10} {'round':>5} {'median ms':>10} {'p99 ms':>10} {'max ms':>10} {'cpu s':>7}")
    pooled = {}
    for name, rs in runs.items():
        for r, (late, cpu) in enumerate(rs):
            s = summarize(late)
            print(f"{name:10} {r:5d} {s.median_ns / 1e6:10.3f} {s.p99_ns / 1e6:10.3f} {s.max_ns / 1e6:10.3f} {cpu:7.2f}")
        pooled[name] = summarize([v for late, _ in rs for v in late])
        cpu = sum(c for _, c in rs)
        s = pooled[name]
        print(f"{name:10} {'all':>5} {s.median_ns / 1e6:10.3f} {s.p99_ns / 1e6:10.3f} {s.max_ns / 1e6:10.3f} {cpu:7.2f}")
    rb = pooled["rosbag"]
    for name in (k for k in pooled if k != "rosbag"):
        pb = pooled[name]
        for attr, label in (("median_ns", "median"), ("p99_ns", "p99")):
            x, y = getattr(pb, attr) / 1e6, getattr(rb, attr) / 1e6
            ratio = x / y if y > 0 else float("inf")
            print(f"{label:7}: {name} {x:.3f} ms, rosbag {y:.3f} ms (all rounds): {name}/rosbag {ratio:.2f}")
    for o in own:
        rt = "" if o["realtime"] is None else f" (realtime: {o['realtime']})"
        print(f"{o['name']}'s own send lateness: median {o['median_ms']:.3f} ms, p99 {o['p99_ms']:.3f} ms{rt}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
