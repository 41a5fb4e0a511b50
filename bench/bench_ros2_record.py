"""Live ROS 2 recording: ``polybag record --ros2`` side by side with an rclpy Python subscriber.

One run, in a private ROS 2 domain on the loopback (``ROS_LOCALHOST_ONLY=1``): both
``polybag record --ros2 /small /big`` and an rclpy subscriber of the same topics start; then
an rclpy publisher (Fast DDS, from PyPI) waits until both are matched and, for
``--seconds``, sends ``/small`` (std_msgs/String, 100 bytes) as fast as it can and ``/big``
(sensor_msgs/Image, 1 MB) at up to ``--big-hz``.  A second after it stops, both receivers
get SIGINT.  Printed per topic: messages sent, recorded by polybag, received by rclpy, the
ratios polybag / sent and polybag / rclpy, and each receiver's CPU (user + system, from
``wait4``) in all and per message.  The issue's target: polybag records everything the
Python publisher sends.

    .venv/bin/python bench/bench_ros2_record.py                  # 5 s
    .venv/bin/python bench/bench_ros2_record.py --seconds 3 --json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

import polybag  # noqa: E402

PUBLISHER = textwrap.dedent(
    """
    import json, sys, time
    import rclpy
    from rclpy.qos import QoSProfile
    from sensor_msgs.msg import Image
    from std_msgs.msg import String
    seconds, big_hz = float(sys.argv[1]), float(sys.argv[2])
    rclpy.init()
    n = rclpy.create_node("bench_pub")
    small = n.create_publisher(String, "/small", QoSProfile(depth=1000))
    big = n.create_publisher(Image, "/big", QoSProfile(depth=100))
    end = time.monotonic() + 60
    while time.monotonic() < end and (small.get_subscription_count() < 2 or big.get_subscription_count() < 2):
        time.sleep(0.05)
    time.sleep(1.0)
    s = String(data="x" * 100)
    img = Image(height=512, width=512, encoding="rgba8", step=2048, data=bytes(1 << 20))
    sent = {"/small": 0, "/big": 0}
    t0 = time.monotonic(); stop = t0 + seconds; next_big = t0
    while True:
        now = time.monotonic()
        if now >= stop:
            break
        if now >= next_big:
            big.publish(img); sent["/big"] += 1; next_big += 1.0 / big_hz
        for _ in range(20):
            small.publish(s)
        sent["/small"] += 20
    time.sleep(1.0)
    print(json.dumps(sent), flush=True)
    """
)

SUBSCRIBER = textwrap.dedent(
    """
    import json, signal, sys
    import rclpy
    from rclpy.qos import QoSProfile
    from sensor_msgs.msg import Image
    from std_msgs.msg import String
    from rclpy.signals import SignalHandlerOptions
    stop = []
    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
    signal.signal(signal.SIGINT, lambda *a: stop.append(1))
    n = rclpy.create_node("bench_sub")
    got = {"/small": 0, "/big": 0}
    def inc(t):
        def f(m):
            got[t] += 1
        return f
    n.create_subscription(String, "/small", inc("/small"), QoSProfile(depth=1000))
    n.create_subscription(Image, "/big", inc("/big"), QoSProfile(depth=100))
    print("ready", file=sys.stderr, flush=True)
    while not stop:
        rclpy.spin_once(n, timeout_sec=0.1)
    print(json.dumps(got), flush=True)
    """
)


def _cpu(pid: int) -> tuple[int, float]:
    _, status, ru = os.wait4(pid, 0)
    return os.waitstatus_to_exitcode(status), ru.ru_utime + ru.ru_stime


def run(seconds: float, big_hz: float) -> dict[str, Any]:
    env = dict(os.environ)
    env["ROS_DOMAIN_ID"] = str(random.randint(0, 101))
    env["ROS_LOCALHOST_ONLY"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rec"
        rec = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "polybag",
                "record",
                "--ros2",
                "/small",
                "/big",
                "-O",
                str(out),
                "-q",
                "--json",
                "-b",
                "0",
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        sub = subprocess.Popen(
            [sys.executable, "-c", SUBSCRIBER],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        pub = subprocess.Popen(
            [sys.executable, "-c", PUBLISHER, str(seconds), str(big_hz)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            pub_out, _ = pub.communicate(timeout=seconds + 90)
            sent = json.loads(pub_out.strip().splitlines()[-1])
            for p in (rec, sub):
                p.send_signal(signal.SIGINT)
            rec_out = rec.stdout.read() if rec.stdout else ""
            sub_out = sub.stdout.read() if sub.stdout else ""
            _, rec_cpu = _cpu(rec.pid)
            _, sub_cpu = _cpu(sub.pid)
        finally:
            for p in (pub, rec, sub):
                if p.poll() is None:
                    p.kill()
        report = json.loads(rec_out)
        got_sub = json.loads(sub_out.strip().splitlines()[-1])
        in_bag: dict[str, int] = {}
        with polybag.open(out) as r:  # (what the bag holds, not only what the report says)
            for m in r.messages():
                in_bag[m.channel.topic] = in_bag.get(m.channel.topic, 0) + 1
        assert all(in_bag.get(t, 0) == s["written"] for t, s in report["topics"].items()), report
    rows = {}
    for t in ("/small", "/big"):
        n_sent, n_rec, n_sub = sent[t], in_bag.get(t, 0), got_sub.get(t, 0)
        rows[t] = {
            "sent": n_sent,
            "polybag": n_rec,
            "rclpy": n_sub,
            "polybag/sent": round(n_rec / n_sent, 4) if n_sent else None,
            "polybag/rclpy": round(n_rec / n_sub, 4) if n_sub else None,
        }
    total_rec = sum(r["polybag"] for r in rows.values()) or 1
    total_sub = sum(r["rclpy"] for r in rows.values()) or 1
    return {
        "seconds": seconds,
        "topics": rows,
        "cpu_s": {"polybag": round(rec_cpu, 2), "rclpy": round(sub_cpu, 2)},
        "cpu_us_per_msg": {
            "polybag": round(rec_cpu / total_rec * 1e6, 1),
            "rclpy": round(sub_cpu / total_sub * 1e6, 1),
        },
        "msgs_per_s": {"polybag": round(total_rec / seconds), "rclpy": round(total_sub / seconds)},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--big-hz", type=float, default=30.0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    res = run(a.seconds, a.big_hz)
    if a.json:
        print(json.dumps(res, indent=2))
        return 0
    print(f"ROS 2 live recording, {a.seconds:g} s, rclpy publisher (Fast DDS) on the loopback")
    print(f"{'topic':8} {'sent':>8} {'polybag':>8} {'rclpy':>8} {'pb/sent':>8} {'pb/rclpy':>8}")
    for t, r in res["topics"].items():
        print(
            f"{t:8} {r['sent']:>8} {r['polybag']:>8} {r['rclpy']:>8} {r['polybag/sent']!s:>8} {r['polybag/rclpy']!s:>8}"
        )
    c, u = res["cpu_s"], res["cpu_us_per_msg"]
    print(
        f"CPU: polybag {c['polybag']} s ({u['polybag']} us/msg), rclpy subscriber {c['rclpy']} s ({u['rclpy']} us/msg)"
    )
    print(f"msgs/s: polybag {res['msgs_per_s']['polybag']}, rclpy {res['msgs_per_s']['rclpy']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
