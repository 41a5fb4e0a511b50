"""``polybag record --ros2 --snapshot-window PRE:POST``: snapshots by a message on
``snapshot_trigger`` from a real rclpy node, then two overlapping ones (SIGUSR1 0.5 s
apart) of a real rclpy publisher at 50 Hz; each keeps recording POST seconds after its
trigger and holds exactly the messages whose receive times fall in its window.

``python test_record_ros2_snapshot_window.py pub TOPIC HZ``: a node publishing
std_msgs/msg/String ``"<i>"`` (i = 0, 1, ...) on TOPIC at HZ (reliable, depth 100) until it
is killed; it says ``ready`` on stderr, then ``sent I TIME_NS`` after every tenth message.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()


def pub_node(topic: str, hz: float) -> None:
    import rclpy
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from std_msgs.msg import String

    rclpy.init()
    node = rclpy.create_node("polybag_snapshot_pub")
    pub = node.create_publisher(String, topic, QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE))
    print("ready", file=sys.stderr, flush=True)
    due = time.monotonic()
    i = 0
    while True:
        pub.publish(String(data=str(i)))
        if i % 10 == 0:
            print(f"sent {i} {time.time_ns()}", file=sys.stderr, flush=True)
        i += 1
        due += 1.0 / hz
        left = due - time.monotonic()
        if left > 0:
            time.sleep(left)


if __name__ == "__main__":
    if sys.argv[1] == "pub":
        pub_node(sys.argv[2], float(sys.argv[3]))
    else:
        raise SystemExit(f"unknown mode {sys.argv[1]}")
    raise SystemExit(0)

sys.path.insert(0, str(HERE.parents[1] / "live"))
from ros2_graph import NEEDS_RCLPY, POLYBAG, finish, node, process, ros2_env, wait_ready  # noqa: E402

pytestmark = NEEDS_RCLPY


def _finished(tmp: Path, count: int, p: subprocess.Popen[str], timeout: float = 120) -> list[Path]:
    """Until ``count`` snapshots are finished (``snap_*`` bags, none ``.active``), bounded."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        done = sorted(d for d in tmp.glob("snap_*") if not d.name.endswith(".active"))
        if len(done) >= count and not list(tmp.glob("*.active")):
            return done
        if p.poll() is not None:
            break
        time.sleep(0.05)
    raise AssertionError(f"{count} snapshots were not finished in time: {sorted(tmp.iterdir())}")


def _sent_after(pub: subprocess.Popen[str], t_ns: int, timeout: float = 120) -> None:
    """Read the publisher's ``sent I TIME_NS`` lines until one is later than ``t_ns`` (bounded)."""
    assert pub.stderr is not None
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        line = pub.stderr.readline()
        if line.startswith("sent ") and int(line.split()[2]) > t_ns:
            return
        if not line and pub.poll() is not None:
            raise AssertionError(f"the publisher exited ({pub.returncode})")
    raise AssertionError("the publisher did not go on sending")


def _messages(path: str) -> list[tuple[int, int]]:
    import polybag

    with polybag.open(path) as r:
        return [(int(m.decode().data), m.log_time) for m in r.messages(topics=["/seq"])]


def test_overlapping_snapshots_keep_recording_ros2(tmp_path: Path) -> None:
    from test_record_snapshot_window import check_overlapping_pair  # (tests/live: the same checks as ROS 1)

    env = ros2_env()
    log = tmp_path / "stderr.txt"
    args = [*POLYBAG, "record", "--ros2", "/seq", "--snapshot-window", "1:3", "-o", str(tmp_path / "snap"), "--json"]
    with process([sys.executable, str(HERE), "pub", "/seq", "50"], env) as pub:
        wait_ready(pub, 60)
        with log.open("w") as err_file:
            rec = subprocess.Popen(
                args, env=env, stdout=subprocess.PIPE, stderr=err_file, text=True, start_new_session=True
            )
        try:
            # until a snapshot (by the topic) has messages: the recorder's readers are matched
            # and its ring fills; SIGUSR1 is handled from then on.  (A trigger sample sent while
            # the recorder's side of the match is not complete is lost: the node tries again.)
            done: list[Path] = []
            for _attempt in range(20):
                with node("trigger", "/snapshot_trigger", env=env) as trig:
                    code, _o, err = finish(trig, 120)
                    assert code == 0, err
                try:
                    done = _finished(tmp_path, len(done) + 1, rec, 30)
                except AssertionError:
                    continue
                if _messages(str(done[-1])):
                    break
            else:
                raise AssertionError("no snapshot by the trigger topic got a message")
            n = len(done)
            t1 = time.time_ns()
            rec.send_signal(signal.SIGUSR1)
            _sent_after(pub, t1 + 500_000_000)  # (the publisher went on for 0.5 s)
            rec.send_signal(signal.SIGUSR1)
            _finished(tmp_path, n + 2, rec)  # (both windows ended by themselves)
            assert rec.poll() is None  # still recording
            rec.send_signal(signal.SIGINT)
            out, _ = rec.communicate(timeout=60)
        finally:
            if rec.poll() is None:
                os.killpg(rec.pid, signal.SIGKILL)
                rec.communicate(timeout=10)
    assert rec.returncode == 0, log.read_text(errors="replace")
    import json

    rep: dict[str, Any] = json.loads(out)
    snaps = rep["snapshots"]
    assert len(snaps) == n + 2 and sorted(s["file"] for s in snaps) == sorted(rep["files"])
    check_overlapping_pair(snaps, _messages)
    s = rep["topics"]["/seq"]
    assert s["received"] == s["written"] + s["dropped"]
    everything = set().union(*(_messages(x["file"]) for x in snaps))
    assert s["written"] == len(everything)  # (each counted once, in however many files)
