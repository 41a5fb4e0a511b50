"""Helpers for the live ROS 2 tests: a private domain per test and bounded subprocesses."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

NODES = Path(__file__).with_name("nodes.py")
POLYBAG = [sys.executable, "-m", "polybag"]


def rclpy_problem() -> str:
    """Why rclpy cannot run here ("" when it can)."""
    try:
        import rclpy  # noqa: F401
        from sensor_msgs.msg import Imu  # noqa: F401
        from std_msgs.msg import String  # noqa: F401
    except Exception as e:  # noqa: BLE001 - any failure means: no rclpy here
        return f"rclpy from PyPI (ros-jazzy-rclpy) cannot be imported: {e}"
    return ""


def cyclone_problem() -> str:
    try:
        import cyclonedds.domain  # noqa: F401
    except Exception as e:  # noqa: BLE001
        return f"the cyclonedds package cannot be imported: {e}"
    return ""


def ros2_env() -> dict[str, str]:
    """The environment of a test: a random ROS_DOMAIN_ID (0-101), localhost discovery only."""
    env = dict(os.environ)
    env["ROS_DOMAIN_ID"] = str(random.randint(0, 101))
    env["ROS_LOCALHOST_ONLY"] = "1"
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env.pop("CYCLONEDDS_URI", None)
    env.pop("RMW_IMPLEMENTATION", None)  # rclpy's default (Fast DDS)
    env["PYTHONUNBUFFERED"] = "1"
    return env


@contextmanager
def process(
    args: list[str], env: dict[str, str], cwd: str | Path | None = None
) -> Iterator[subprocess.Popen[str]]:
    """A subprocess killed (its whole process group) when the block ends."""
    p = subprocess.Popen(
        args,
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        yield p
    finally:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        p.communicate(timeout=10)


def node(mode: str, *args: Any, env: dict[str, str]) -> Any:
    return process([sys.executable, str(NODES), mode, *map(str, args)], env)


def wait_ready(p: subprocess.Popen[str], timeout: float = 30, word: str = "ready") -> None:
    """Until the node printed ``word`` on stderr (bounded)."""
    assert p.stderr is not None
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        line = p.stderr.readline()
        if word in line:
            return
        if not line and p.poll() is not None:
            raise AssertionError(f"node exited ({p.returncode}) before it said {word}")
    raise AssertionError(f"node did not say {word} in time")


def finish(p: subprocess.Popen[str], timeout: float = 60) -> tuple[int, str, str]:
    out, err = p.communicate(timeout=timeout)
    return p.returncode, out, err


def last_json(out: str) -> Any:
    for line in reversed(out.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise AssertionError(f"no JSON line in {out!r}")


def stop_recorder(p: subprocess.Popen[str], timeout: float = 30) -> tuple[int, Any, str]:
    """SIGINT the recorder, wait (bounded), and parse its --json report."""
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=timeout)
    return p.returncode, json.loads(out) if out.strip() else None, err


#: a test module's ``pytestmark`` when it runs real rclpy nodes beside polybag's Cyclone graph
NEEDS_RCLPY = [
    pytest.mark.skipif(bool(cyclone_problem()), reason=cyclone_problem() or "cyclonedds"),
    pytest.mark.skipif(bool(rclpy_problem()), reason=rclpy_problem() or "rclpy"),
]
