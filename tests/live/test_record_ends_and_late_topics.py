"""``polybag record`` on a real ROS 1 graph: topics whose publisher appears after the recorder
started are recorded (``-e``, ``-a``, a named topic), ``-l N`` ends the recorder when every
topic subscribed has its N (as rosbag's), ``--duration`` ends a snapshot recorder (the
snapshots triggered are written), and the report's warnings carry the ``polybag record:``
prefix.  Every wait is for a condition (the master's lists, a JSON stats line, a file, the
process's exit), never a fixed sleep; the long timeouts only keep a broken build from
hanging the suite."""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import polybag
from polybag.cli.record import report_lines
from polybag.record import Recorder, RecordOptions

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from ros1_graph import Graph, free_port, wait_for  # noqa: E402

ROBOT_BAG = str(Path(__file__).resolve().parents[2] / "samples" / "robot.bag")
POLYBAG = [sys.executable, "-m", "polybag"]
HANG = 180  # seconds: only a guard against a recorder that never ends (the bug), never a speed check

live = pytest.mark.skipif(not shutil.which("rosmaster"), reason="Debian's rosmaster is not installed")


class Proc:
    """A process of the graph whose stdout and stderr lines are collected as they come."""

    def __init__(self, graph: Graph, cmd: list[str]) -> None:
        self.p = graph.start(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.out: list[str] = []
        self.err: list[str] = []
        self._threads = [
            threading.Thread(target=self._read, args=(self.p.stdout, self.out), daemon=True),
            threading.Thread(target=self._read, args=(self.p.stderr, self.err), daemon=True),
        ]
        for t in self._threads:
            t.start()

    @staticmethod
    def _read(stream: Any, lines: list[str]) -> None:
        for raw in stream:
            lines.append(raw.decode("utf-8", "replace").rstrip("\n"))

    def stats(self) -> list[dict[str, Any]]:
        """The ``--json-stats`` lines so far."""
        return [json.loads(ln) for ln in list(self.out) if ln.startswith("{") and ln.endswith("}")]

    def wait(self) -> int:
        """Wait for the process to end by itself; its exit status (fails if it never ends)."""
        try:
            rc = self.p.wait(HANG)
        except subprocess.TimeoutExpired:
            Graph.stop(self.p)
            pytest.fail(f"the recorder did not end by itself; stderr: {self.err[-10:]}")
        for t in self._threads:
            t.join(30)
        return rc


def _counts(path: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for m in polybag.open(str(path)).messages():
        out[m.topic] = out.get(m.topic, 0) + 1
    return out


def _play(graph: Graph) -> None:
    graph.start([*POLYBAG, "play", "-q", "-l", ROBOT_BAG])


def _started(rec: Proc) -> None:
    """The recorder has started (its first stats line comes after its first look at the master)."""
    wait_for(lambda: rec.stats() or rec.p.poll() is not None, HANG, "the recorder's first stats line")
    assert rec.p.poll() is None, rec.err


@live
@pytest.mark.parametrize(
    ("select", "limit", "expected"),
    [
        (["-e", "/(imu|odom)"], 5, {"/imu", "/odom"}),
        (["-a"], 3, {"/camera/image_raw", "/chatter", "/gps", "/imu", "/odom", "/scan"}),
    ],
    ids=["regex", "all"],
)
def test_late_publisher_recorded_and_limit_ends(graph: Graph, select: list[str], limit: int, expected: set[str]):
    """The publisher starts after the recorder; -l N ends the recorder once every topic it
    subscribed to has N messages (before the fix it never ended with -e or -a)."""
    out = graph.tmp / "motion.mcap"
    rec = Proc(graph, [*POLYBAG, "record", *select, "-l", str(limit), "-O", str(out), "--json-stats", "0.2"])
    _started(rec)
    assert not graph.publishers("/imu")  # (nothing published yet: the topics come later)
    _play(graph)
    assert rec.wait() == 0, rec.err
    assert out.exists() and not Path(str(out) + ".active").exists()
    assert _counts(out) == {t: limit for t in expected}
    assert any("stopped: -l/--limit" in ln for ln in rec.err), rec.err


@live
def test_late_publisher_of_named_topic_recorded(graph: Graph):
    out = graph.tmp / "named.bag"
    rec = Proc(graph, [*POLYBAG, "record", "/imu", "/odom", "-l", "4", "-O", str(out), "--json-stats", "0.2"])
    wait_for(lambda: graph.subscribers("/imu") and graph.subscribers("/odom"), HANG, "the recorder subscribed")
    assert not graph.publishers("/imu")
    _play(graph)
    assert rec.wait() == 0, rec.err
    assert _counts(out) == {"/imu": 4, "/odom": 4}


@live
def test_snapshot_duration_ends_and_writes_the_snapshot(graph: Graph):
    """``-s --duration N``: the recorder ends N s after it started; the snapshot triggered
    before is written, the report says why it stopped, the live time_left counts down."""
    _play(graph)
    wait_for(lambda: graph.publishers("/imu"), HANG, "the player publishing /imu")
    rec = Proc(graph, [*POLYBAG, "record", "-s", "--duration", "10", "-o", str(graph.tmp / "snap"), "/imu", "--json-stats", "0.2"])
    wait_for(lambda: any(s["topics"].get("/imu", {}).get("received") for s in rec.stats()), HANG, "/imu in the ring")
    rec.p.send_signal(signal.SIGUSR1)
    assert rec.wait() == 0, rec.err
    snaps = glob.glob(str(graph.tmp / "snap_*.bag"))
    assert len(snaps) == 1 and not glob.glob(str(graph.tmp / "*.active")), (snaps, rec.err)
    assert _counts(Path(snaps[0]))["/imu"] > 0
    assert "stopped: --duration: the recording reached 10" in rec.err, rec.err
    stats = rec.stats()
    assert stats[-1].get("final") and stats[-1]["stop_reason"].startswith("--duration")
    lefts = [s["time_left"] for s in stats]
    assert lefts[0] <= 10 and min(lefts) < lefts[0], lefts  # (not stuck at 10)


def test_snapshot_duration_ends_in_process(tmp_path: Path):
    """The in-process recorder: --duration in snapshot mode ends it without any message,
    after writing the snapshot triggered before; later messages are not taken."""
    rec = Recorder(RecordOptions(snapshot=True, duration=0.5, directory=str(tmp_path), output_prefix="s", quiet=True))
    rec.start()
    assert rec.write("/a", b"\x01\x00\x00\x00x", type="std_msgs/String", md5sum="992ce8a1687cec8c8bd883ec73ca41d1")
    path = rec.trigger().result(HANG)
    assert rec.wait(HANG), "snapshot mode with --duration never ended"
    assert not rec.write("/a", b"\x01\x00\x00\x00y", type="std_msgs/String")
    report = rec.close()
    assert report["stop_reason"] == "--duration: the recording reached 0.5"
    assert report["files"] == [str(path)] and _counts(path) == {"/a": 1}


def test_report_warnings_and_errors_carry_the_command():
    lines = report_lines(
        {
            "topics": {},
            "totals": {"received": 0, "written": 0, "dropped": 0},
            "files": [],
            "deleted": [],
            "stop_reason": "stopped",
            "errors": ["source: boom"],
            "warnings": ["source: the ROS master did not answer for a while (x)"],
        }
    )
    assert "polybag record: warning: source: the ROS master did not answer for a while (x)" in lines
    assert "polybag record: error: source: boom" in lines
    assert not any(ln.startswith(("warning:", "error:")) for ln in lines)


def test_no_master_warnings_have_the_prefix(tmp_path: Path):
    """No master: the recorder warns, keeps going, and its report's warnings (on stderr)
    read ``polybag record: warning: ...`` as every command's."""
    env = dict(os.environ, ROS_HOME=str(tmp_path), ROS_LOG_DIR=str(tmp_path))
    uri = f"http://127.0.0.1:{free_port()}"
    p = subprocess.Popen(
        [*POLYBAG, "record", "--master-uri", uri, "-e", "/x.*", "-O", str(tmp_path / "n.bag")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path, env=env,
    )
    err: list[str] = []
    reader = threading.Thread(target=Proc._read, args=(p.stderr, err), daemon=True)
    reader.start()
    try:
        wait_for(lambda: any("does not answer" in ln for ln in err) or p.poll() is not None, HANG, "the warning")
        p.send_signal(signal.SIGINT)
        p.wait(HANG)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    reader.join(30)
    warned = [ln for ln in err if "warning:" in ln]
    assert warned and all(ln.startswith("polybag record: warning: ") for ln in warned), err
    assert p.returncode == 0, err

