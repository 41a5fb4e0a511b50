"""``polybag record --ros2``: a publisher that starts during the recording (a real rclpy
node on Fast DDS that publishes at once, waiting for nobody) keeps its first messages,
beside an rclpy subscriber that was up before it.

A transient_local publisher whose history holds every message must reach the recording
whole (the recorder requests transient_local, so the history comes to its late reader); a
volatile publisher's messages sent before the recorder's reader matched cannot be had by
anyone: the recording may miss only the first few that the already running subscriber got.

``python test_record_ros2_late_publisher.py pub TOPIC DURABILITY DEPTH N HZ SUBS``: a node
that publishes N std_msgs/msg/String ``"<i>"`` on TOPIC at HZ as soon as its publisher exists
(reliable, DURABILITY ``volatile``/``transient_local``, keep_last DEPTH), waits (at most
20 s each) until SUBS subscribers matched and acknowledged them, prints the publish times
(ns) as JSON.  ``... sub TOPIC DURABILITY STOPFILE``: subscribes (reliable, depth 1000) and
publishes one latched String on /probe (to show the recorder is up); prints the indices
it got and each one's receive time (ns) as JSON once STOPFILE exists (at most 120 s).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()


def _qos(durability: str, depth: int) -> Any:
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    return QoSProfile(
        depth=depth,
        durability=DurabilityPolicy.TRANSIENT_LOCAL if durability == "transient_local" else DurabilityPolicy.VOLATILE,
        reliability=ReliabilityPolicy.RELIABLE,
    )


def pub_node(topic: str, durability: str, depth: int, n: int, hz: float, subs: int) -> None:
    import rclpy
    from std_msgs.msg import String

    rclpy.init()
    node = rclpy.create_node("polybag_late_pub")
    pub = node.create_publisher(String, topic, _qos(durability, depth))
    stamps = []
    due = time.monotonic()
    for i in range(n):  # (at once: a Jazzy publisher waits for nobody)
        stamps.append(time.time_ns())
        pub.publish(String(data=str(i)))
        due += 1.0 / hz
        left = due - time.monotonic()
        if left > 0:
            time.sleep(left)
    end = time.monotonic() + 20  # (its history goes with it: stay until both took it)
    while time.monotonic() < end and pub.get_subscription_count() < subs:
        time.sleep(0.02)
    acked = pub.wait_for_all_acked(rclpy.duration.Duration(seconds=20))
    print(json.dumps({"stamps": stamps, "acked": bool(acked)}), flush=True)
    node.destroy_node()
    rclpy.shutdown()


def sub_node(topic: str, durability: str, stopfile: str) -> None:
    import rclpy
    from std_msgs.msg import String

    rclpy.init()
    node = rclpy.create_node("polybag_late_sub")
    got: list[list[int]] = []
    node.create_subscription(String, topic, lambda m: got.append([int(m.data), time.time_ns()]), _qos(durability, 1000))
    probe = node.create_publisher(String, "/probe", _qos("transient_local", 1))
    probe.publish(String(data="probe"))
    print("ready", file=sys.stderr, flush=True)
    end = time.monotonic() + 120
    while time.monotonic() < end and not os.path.exists(stopfile):
        rclpy.spin_once(node, timeout_sec=0.05)
    for _ in range(20):  # (what is already queued)
        rclpy.spin_once(node, timeout_sec=0.0)
    print(json.dumps({"got": got}), flush=True)
    node.destroy_node()
    rclpy.shutdown()


if __name__ == "__main__":
    if sys.argv[1] == "pub":
        pub_node(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6]), int(sys.argv[7]))
    elif sys.argv[1] == "sub":
        sub_node(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        raise SystemExit(f"unknown mode {sys.argv[1]}")
    raise SystemExit(0)

from record_helpers import wait_text as _wait_text  # noqa: E402 - (the nodes above run without pytest's path)
from ros2_graph import (  # noqa: E402
    NEEDS_RCLPY,
    POLYBAG,
    finish,
    last_json,
    process,
    ros2_env,
    wait_ready,
)

pytestmark = NEEDS_RCLPY


def run_late_publisher(
    tmp: Path, durability: str, depth: int, n: int, hz: float, extra: list[str] | None = None
) -> dict[str, Any]:
    """Recorder and rclpy subscriber up, then an rclpy publisher of ``n`` messages on /late:
    what each got (``sub``, ``rec``: indices), the publish times (``stamps``), the
    recorder's exit code and stderr."""
    import polybag

    env = ros2_env()
    out = tmp / "rec.mcap"
    log = tmp / "stderr.txt"
    stop = tmp / "stop"
    args = ["record", "--ros2", "/probe", "/late", "-O", str(out), *(extra or [])]
    me = [sys.executable, str(HERE)]
    with process([*me, "sub", "/late", durability, str(stop)], env) as sub:
        wait_ready(sub)
        with log.open("w") as err_file:
            rec = subprocess.Popen(
                [*POLYBAG, *args], env=env, stdout=subprocess.PIPE, stderr=err_file, text=True, start_new_session=True
            )
        try:
            _wait_text(log, "Subscribing to /probe", rec)  # (its discovery runs)
            with process([*me, "pub", "/late", durability, str(depth), str(n), str(hz), "2"], env) as pub:
                code, pub_out, pub_err = finish(pub, 120)
                assert code == 0, pub_err
            sent = last_json(pub_out)
            stop.touch()
            code, sub_out, sub_err = finish(sub, 60)
            assert code == 0, sub_err
            rec.send_signal(signal.SIGINT)
            rec.communicate(timeout=30)
        finally:
            if rec.poll() is None:
                os.killpg(rec.pid, signal.SIGKILL)
                rec.communicate(timeout=10)
    err = log.read_text(errors="replace")
    got = [i for i, _t in last_json(sub_out)["got"]]
    with polybag.open(out) as r:
        recorded = [int(m.decode().data) for m in r.messages(topics=["/late"])]
    return {"sub": got, "rec": recorded, "stamps": sent["stamps"], "acked": sent["acked"], "code": rec.returncode, "err": err}


N = 10


def test_transient_local_late_publisher_keeps_every_message(tmp_path: Path) -> None:
    """Its history (depth N) holds all N: the recording gets all N, in order, as the subscriber."""
    got = run_late_publisher(tmp_path, "transient_local", N, N, 100.0)
    assert got["code"] == 0, got["err"]
    assert got["sub"] == list(range(N)), got
    assert got["rec"] == list(range(N)), got


#: how late (publisher time, after its first message) the recording may start a volatile
#: publisher's topic.  Measured (10 runs, load 4-12 on 2 cores): 0-0.16 s, the rclpy
#: subscriber that was up before the publisher lost all 100 messages of 1 s in 8 of them.
#: Polling discovery every 0.25 s, and Cyclone's 1.1 s second answer to a Fast DDS
#: participant that ignored its first (see ``graph.LOCALHOST_SPDP_INTERVAL``), lost 0.06 s
#: to over 1 s in 10 of 10.
LATE = 1.0


def test_volatile_late_publisher_loses_at_most_its_first_moments(tmp_path: Path) -> None:
    """Nothing can be had of what a volatile publisher sent before our reader matched: the
    recording has every message from its first on (none lost after it, so every one the
    rclpy subscriber got from then on), and that first one was sent at most LATE s after
    the publisher's first."""
    n = 300  # (3 s at 100 Hz)
    got = run_late_publisher(tmp_path, "volatile", n, n, 100.0)
    assert got["code"] == 0, got["err"]
    rec, sub, stamps = got["rec"], got["sub"], got["stamps"]
    assert rec, got
    assert rec == list(range(rec[0], n)), got  # (from the first on, every one, in order)
    assert stamps[rec[0]] - stamps[0] <= LATE * 1e9, (f"first recorded: #{rec[0]}", f"subscriber's first: {sub[:1]}")
