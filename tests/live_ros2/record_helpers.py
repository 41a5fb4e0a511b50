"""Helpers shared by the live ``record --ros2`` tests: an rclpy publisher of std_msgs/String,
bounded waits for a condition or for the recorder's words, the --json-stats lines of a
recorder, and the run of a topic whose type a later publisher describes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ros2_graph import POLYBAG, cyclone_problem, finish, node, process, rclpy_problem, wait_ready

# an rclpy publisher of std_msgs/String "NAME:i" on TOPIC (reliable, DURABILITY, DEPTH, node
# NAME): waits (at most 60 s) for a subscriber, publishes FIRST, says "ready", then one every
# PERIOD s (0: no more) and spins until killed
STRING_PUBLISHER = textwrap.dedent(
    """
    import sys, time
    import rclpy
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import String

    topic, name, durability = sys.argv[1], sys.argv[2], sys.argv[3]
    depth, period, first = int(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])
    rclpy.init()
    node = rclpy.create_node(name)
    dur = DurabilityPolicy.TRANSIENT_LOCAL if durability == "transient_local" else DurabilityPolicy.VOLATILE
    qos = QoSProfile(depth=depth, durability=dur, reliability=ReliabilityPolicy.RELIABLE)
    pub = node.create_publisher(String, topic, qos)
    end = time.monotonic() + 60
    while time.monotonic() < end and not pub.get_subscription_count():
        rclpy.spin_once(node, timeout_sec=0.05)
    count = [0]

    def send():
        pub.publish(String(data=f"{name}:{count[0]}"))
        count[0] += 1

    for _ in range(first):
        send()
    print("ready", file=sys.stderr, flush=True)
    if period > 0:
        node.create_timer(period, send)
    rclpy.spin(node)
    """
)

#: metadata.yaml (up to version 8) spells a durability as a number
DURABILITY = {1: "transient_local", 2: "volatile"}


def string_publisher(
    topic: str, name: str, env: dict[str, str], *, durability: str = "volatile", depth: int = 1, period: float = 0.05, first: int = 3
) -> Any:
    """A :data:`STRING_PUBLISHER` process (a context manager: killed when the block ends)."""
    return process(
        [sys.executable, "-c", STRING_PUBLISHER, topic, name, durability, str(depth), str(period), str(first)], env
    )


def wait_for(what: str, check: Callable[[], bool], timeout: float = 90) -> None:
    """Until ``check()`` holds (polled, bounded); fails naming ``what``."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():
            return
        time.sleep(0.2)  # (polling a condition, bounded)
    raise AssertionError(f"{what}: not seen within {timeout} s")


def wait_text(path: Path, text: str, p: subprocess.Popen[str], timeout: float = 60) -> None:
    """Until ``text`` is in the file ``path`` (the recorder's stderr), bounded."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if text in path.read_text(errors="replace"):
            return
        if p.poll() is not None:
            break
        time.sleep(0.05)
    raise AssertionError(f"the recorder did not say {text!r}:\n{path.read_text(errors='replace')}")


def collect(stream: Any, into: list[str]) -> threading.Thread:
    """A thread appending each line of ``stream`` to ``into`` (until it ends)."""

    def read() -> None:
        for line in iter(stream.readline, ""):
            into.append(line)

    t = threading.Thread(target=read, daemon=True)
    t.start()
    return t


def stats_lines(lines: list[str]) -> list[dict[str, Any]]:
    """The --json-stats lines among a recorder's stdout ``lines``."""
    return [json.loads(ln) for ln in list(lines) if ln.startswith('{"time"')]


def typedesc_problem() -> str:
    """Why rclpy nodes with ros-jazzy-test-msgs types cannot run here ("" when they can)."""
    if cyclone_problem():
        return cyclone_problem()
    try:
        import test_msgs.msg  # noqa: F401
    except Exception as e:  # noqa: BLE001
        return f"ros-jazzy-test-msgs cannot be imported: {e}"
    return rclpy_problem()


def record_late_description(args: list[str], env: dict[str, str], log: Path, n: int, stop_timeout: float) -> int:
    """``polybag ARGS`` (stderr into ``log``) beside a first publisher of /arr and /basic
    (nodes.py "typed", ``n`` messages) whose type description service never answers, then a
    second one that answers: stopped (SIGINT) once it said the topics took the later
    publisher's descriptions.  Returns its exit code."""
    with node("typed", n, "nospin", env=env) as first:
        wait_ready(first)
        with log.open("w") as err_file:
            rec = subprocess.Popen(
                [*POLYBAG, *args], env=env, stdout=subprocess.PIPE, stderr=err_file, text=True, start_new_session=True
            )
        try:
            code1, _out1, err1 = finish(first, 90)
            assert code1 == 0, err1
            wait_text(log, "did not answer", rec)  # (the first n are written raw)
            with node("typed", n, env=env) as second:
                wait_ready(second)
                code2, _out2, err2 = finish(second, 90)
                assert code2 == 0, err2
            wait_text(log, "from a later publisher", rec)
            rec.send_signal(signal.SIGINT)
            rec.communicate(timeout=stop_timeout)
        finally:
            if rec.poll() is None:
                os.killpg(rec.pid, signal.SIGKILL)
                rec.communicate(timeout=10)
    return rec.returncode


def durabilities(qos_text: str) -> list[str]:
    """The durabilities of a QoS profile list as metadata.yaml writes it, sorted."""
    import yaml

    return sorted(DURABILITY.get(int(p["durability"]), "?") for p in yaml.safe_load(qos_text) or [])


def listed_durabilities(bag: Path, topic: str) -> list[str]:
    """The durabilities metadata.yaml of ``bag`` lists for ``topic`` ([] while there is none)."""
    import yaml

    try:
        meta = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    except (OSError, yaml.YAMLError, TypeError, KeyError):
        return []
    for t in meta.get("topics_with_message_count") or []:
        if t["topic_metadata"]["name"] == topic:
            return durabilities(str(t["topic_metadata"]["offered_qos_profiles"]))
    return []


def check_late_described(out: Path, err: str, n: int) -> None:
    """The recording ``out`` of :func:`record_late_description`: both publishers' ``n``
    messages of /arr and /basic, /basic with the one definition the later publisher gave,
    and every message of it (the first publisher's too) decodes with it."""
    import polybag

    with polybag.open(out) as r:
        msgs = list(r.messages(topics=["/basic"]))
        assert len(msgs) == 2 * n, err
        assert len(list(r.messages(topics=["/arr"]))) == 2 * n, err
        schemas = {bytes(m.channel.schema.data) for m in msgs if m.channel.schema is not None}
        assert len(schemas) == 1 and b"int16 int16_value" in next(iter(schemas)), schemas
        values = [m.decode().int16_value for m in msgs]  # the first publisher's too
    assert sorted(values) == sorted([i - 100 for i in range(n)] * 2)
