"""Live recording under load: ``polybag record`` side by side with ``/usr/lib/rosbag/record``.

One run: a ``rosmaster`` on a free port; both recorders subscribe to the same two topics;
then two rospy publishers (Debian's ``/usr/bin/python3``) start, each waiting until both
recorders are connected: ``/small`` sends 100-byte messages as fast as rospy can, ``/big``
sends 1 MB messages at 100 Hz, for ``--seconds``.  After the publishers stop (and a second
to drain) both recorders get SIGINT.  Printed: the messages each bag holds per topic, the
ratio polybag / rosbag (the issue's bar: >= 0.95), and each recorder's CPU seconds (user +
system, from ``wait4``).

    .venv/bin/python bench/bench_record.py                   # 10 s
    .venv/bin/python bench/bench_record.py --seconds 5 --json
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import xmlrpc.client
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

import polybag  # noqa: E402

ROSBAG_RECORD = "/usr/lib/rosbag/record"
ROS_PYTHON = "/usr/bin/python3"

PUBLISHER = textwrap.dedent(
    """
    import sys, time
    import rospy
    from std_msgs.msg import String
    topic, size, rate, seconds, wait_for = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
    rospy.init_node("bench_pub" + topic.replace("/", "_"), disable_signals=True)
    pub = rospy.Publisher(topic, String, queue_size=1000)
    end = time.monotonic() + 60
    while pub.get_num_connections() < wait_for and time.monotonic() < end:
        time.sleep(0.05)
    time.sleep(0.5)
    msg = String(data="x" * (size - 4))
    n = 0
    start = time.monotonic()
    stop = start + seconds
    period = 1.0 / rate if rate > 0 else 0.0
    nxt = start
    while True:
        now = time.monotonic()
        if now >= stop:
            break
        if period:
            if now < nxt:
                time.sleep(nxt - now)
            nxt += period
        pub.publish(msg)
        n += 1
    time.sleep(1.0)
    print(n, flush=True)
    """
)


# the free port and the wait of the live tests' graph (tests/ros1_graph.py, stdlib only)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from ros1_graph import free_port as _free_port  # noqa: E402
from ros1_graph import wait_for as _wait  # noqa: E402


def _cpu_and_wait(p: subprocess.Popen[Any], timeout: float = 60) -> float:
    """Wait for ``p`` and return its CPU seconds (user + system) from wait4."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            p.returncode = os.waitstatus_to_exitcode(status)
            return ru.ru_utime + ru.ru_stime
        time.sleep(0.05)
    p.kill()
    _pid, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return ru.ru_utime + ru.ru_stime


def _counts(path: Path) -> dict[str, int]:
    r = polybag.open(str(path))
    return {t: int(n) for t, n in r.summary.topic_message_counts().items()}


def run(seconds: float = 10.0, tmp: Path | None = None, big_rate: float = 100.0) -> dict[str, Any]:
    """One side-by-side run; returns counts, ratios and CPU seconds."""
    own_tmp = tmp is None
    tmpdir = Path(tempfile.mkdtemp(prefix="bench_record_")) if tmp is None else tmp
    port = _free_port()
    uri = f"http://127.0.0.1:{port}"
    env = dict(
        os.environ,
        ROS_MASTER_URI=uri,
        ROS_HOSTNAME="127.0.0.1",
        ROS_IP="127.0.0.1",
        ROS_HOME=str(tmpdir),
        ROS_LOG_DIR=str(tmpdir),
    )
    procs: list[subprocess.Popen[Any]] = []

    def start(cmd: list[str], **kw: Any) -> subprocess.Popen[Any]:
        kw.setdefault("stdout", subprocess.DEVNULL)
        kw.setdefault("stderr", subprocess.DEVNULL)
        p = subprocess.Popen(cmd, env=env, cwd=tmpdir, **kw)
        procs.append(p)
        return p

    pub_script = tmpdir / "bench_pub.py"
    pub_script.write_text(PUBLISHER)
    topics = ["/small", "/big"]
    try:
        start(["rosmaster", "--core", "-p", str(port)])
        master = xmlrpc.client.ServerProxy(uri)
        _wait(lambda: master.getSystemState("/bench")[0] == 1, 30, "rosmaster")

        def subs(topic: str) -> list[str]:
            return next((list(n) for t, n in master.getSystemState("/bench")[2][1] if t == topic), [])

        poly = start(
            [sys.executable, "-m", "polybag", "record", "-q", "-O", str(tmpdir / "polybag.bag"), *topics]
        )
        ros = start([ROSBAG_RECORD, "-q", "-O", str(tmpdir / "rosbag.bag"), *topics])
        _wait(lambda: all(len(subs(t)) == 2 for t in topics), 60, "both recorders subscribed")
        small = start(
            [ROS_PYTHON, str(pub_script), "/small", "100", "0", str(seconds), "2"], stdout=subprocess.PIPE
        )
        big = start(
            [ROS_PYTHON, str(pub_script), "/big", str(1 << 20), str(big_rate), str(seconds), "2"],
            stdout=subprocess.PIPE,
        )
        sent = {}
        for topic, p in (("/small", small), ("/big", big)):
            out, _ = p.communicate(timeout=seconds + 120)
            sent[topic] = int(out.decode().split()[-1]) if out.strip() else 0
        time.sleep(1.0)
        poly.send_signal(signal.SIGINT)
        ros.send_signal(signal.SIGINT)
        cpu = {"polybag": _cpu_and_wait(poly), "rosbag": _cpu_and_wait(ros)}
        got = {"polybag": _counts(tmpdir / "polybag.bag"), "rosbag": _counts(tmpdir / "rosbag.bag")}
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
        if own_tmp:
            for f in tmpdir.glob("*.bag*"):
                f.unlink()
    ratios = {
        t: (got["polybag"].get(t, 0) / got["rosbag"][t]) if got["rosbag"].get(t) else None for t in topics
    }
    return {"seconds": seconds, "sent": sent, "counts": got, "ratios": ratios, "cpu_seconds": cpu}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=10.0, help="how long the publishers send (default 10)")
    ap.add_argument("--big-rate", type=float, default=100.0, help="rate of the 1 MB topic (default 100 Hz)")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args()
    if not (os.path.exists(ROSBAG_RECORD) and os.path.exists(ROS_PYTHON)):
        sys.exit("needs Debian's ROS 1 packages (python3-rosbag python3-rospy python3-rosmaster)")
    res = run(args.seconds, big_rate=args.big_rate)
    if args.json:
        print(json.dumps(res, indent=2))
        return
    print(f"record under load, {res['seconds']:.0f} s (publishers: {res['sent']})")
    print(f"{'topic':<8} {'polybag':>9} {'rosbag':>9} {'ratio':>7}")
    for t, ratio in res["ratios"].items():
        p, r = res["counts"]["polybag"].get(t, 0), res["counts"]["rosbag"].get(t, 0)
        print(f"{t:<8} {p:>9} {r:>9} {ratio if ratio is None else f'{ratio:.3f}':>7}")
    cpu = res["cpu_seconds"]
    print(f"CPU seconds: polybag {cpu['polybag']:.2f}, rosbag {cpu['rosbag']:.2f}")


if __name__ == "__main__":
    main()
