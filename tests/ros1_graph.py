"""A real ROS 1 graph for live tests: ``rosmaster --core`` on a free port, the environment
every ROS process of the test gets (see ../shared/design/ROS1-TESTING.md), and helpers to
start processes, ask the master who publishes and subscribes, and stop everything."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import xmlrpc.client
from collections.abc import Callable
from pathlib import Path
from typing import Any


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(pred: Callable[[], object], timeout: float, what: str) -> None:
    """Poll ``pred`` until it is true (errors from a graph still starting count as false)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if pred():
                return
        except (OSError, xmlrpc.client.Error):
            pass
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


class Graph:
    """A master on a free port and the processes a test starts in its environment."""

    def __init__(self, tmp: Path, **extra_env: str) -> None:
        self.tmp = tmp
        port = free_port()
        self.uri = f"http://127.0.0.1:{port}"
        self.env = dict(
            os.environ,
            ROS_MASTER_URI=self.uri,
            ROS_HOSTNAME="127.0.0.1",
            ROS_IP="127.0.0.1",
            ROS_HOME=str(tmp),
            ROS_LOG_DIR=str(tmp),
            **extra_env,
        )
        self.procs: list[subprocess.Popen[Any]] = []
        self.start(["rosmaster", "--core", "-p", str(port)])
        self.master = xmlrpc.client.ServerProxy(self.uri)
        wait_for(lambda: self.master.getSystemState("/test")[0] == 1, 30, "rosmaster")

    def start(self, cmd: list[str], **kw: Any) -> subprocess.Popen[Any]:
        kw.setdefault("stdout", subprocess.DEVNULL)
        kw.setdefault("stderr", subprocess.DEVNULL)
        p = subprocess.Popen(cmd, env=self.env, cwd=self.tmp, **kw)
        self.procs.append(p)
        return p

    def _state(self) -> Any:
        return self.master.getSystemState("/test")[2]

    def subscribers(self, topic: str) -> list[str]:
        return next((list(nodes) for t, nodes in self._state()[1] if t == topic), [])

    def publishers(self, topic: str) -> list[str]:
        return next((list(nodes) for t, nodes in self._state()[0] if t == topic), [])

    @staticmethod
    def stop(p: subprocess.Popen[Any], sig: int = signal.SIGINT, timeout: float = 30) -> None:
        if p.poll() is None:
            p.send_signal(sig)
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)

    def close(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in reversed(self.procs):
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)
