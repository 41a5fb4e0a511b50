"""Watching a live ROS 2 recording (issue 28): ``polybag record --ros2 --json-stats SEC``
beside an rclpy publisher (Fast DDS) writes JSON lines whose counts grow and end at the final
report's."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from record_helpers import collect, stats_lines, string_publisher
from ros2_graph import NEEDS_RCLPY, POLYBAG, process, ros2_env, wait_ready

from pty_helpers import PtyText, check_table_cleared

pytestmark = NEEDS_RCLPY

TOPIC = "/stats_chatter"

def _publisher(env: dict[str, str]) -> Any:
    """An rclpy publisher on TOPIC (reliable, depth 100), one message every 0.02 s."""
    return string_publisher(TOPIC, "polybag_stats_talker", env, depth=100, period=0.02, first=0)


def _received(line: dict[str, Any]) -> int:
    t = line["topics"].get(TOPIC)
    return 0 if t is None else int(t["received"])


@pytest.mark.parametrize("group", [False, True], ids=["one", "config"])
def test_ros2_json_stats_lines_grow_and_end_at_the_report(tmp_path: Path, group: bool) -> None:
    env = ros2_env()
    names = ["rec0", "rec1"] if group else ["rec"]
    if group:
        cfg = tmp_path / "rec.yaml"
        cfg.write_text("recorders:\n" + "".join(f"  - topics: [{TOPIC}]\n    output_name: {tmp_path / n}\n" for n in names))
        args = [*POLYBAG, "record", "--ros2", "--config", str(cfg), "--json", "--json-stats", "0.2"]
    else:
        args = [*POLYBAG, "record", "--ros2", TOPIC, "-O", str(tmp_path / "rec"), "--json", "--json-stats", "0.2"]
    with process(args, env) as rec:
        out: list[str] = []
        err: list[str] = []
        readers = [collect(rec.stdout, out), collect(rec.stderr, err)]
        with _publisher(env) as pub:
            wait_ready(pub, 90)
            end = time.monotonic() + 120
            want = 5 * len(names)
            while time.monotonic() < end and len([s for s in stats_lines(out) if _received(s)]) < want:
                assert rec.poll() is None, "".join(err)
                time.sleep(0.05)
            assert len([s for s in stats_lines(out) if _received(s)]) >= want, ("stats lines with messages", out, err)
            rec.send_signal(signal.SIGINT)
            rec.wait(60)
        for r in readers:
            r.join(30)
    assert rec.returncode == 0, "".join(err)
    whole = json.loads("".join(ln for ln in out if not ln.startswith('{"time"')))
    reports = whole["recorders"] if group else [whole]
    assert len(reports) == len(names)
    for i, (name, report) in enumerate(zip(names, reports)):
        lines = [ln for ln in stats_lines(out) if ln.get("recorder") == (i if group else None)]
        _check(lines, report, name)


def _check(lines: list[dict[str, Any]], report: dict[str, Any], name: str) -> None:
    assert [bool(ln.get("final")) for ln in lines] == [False] * (len(lines) - 1) + [True]
    counts = [_received(ln) for ln in lines]
    assert counts == sorted(counts) and counts[-1] > counts[0], counts
    sizes = [ln["topics"][TOPIC]["bytes"] for ln in lines if TOPIC in ln["topics"]]
    assert sizes == sorted(sizes) and sizes[-1] > 0
    assert any(ln["topics"].get(TOPIC, {}).get("rate") for ln in lines)
    assert all(ln["topics"][TOPIC]["type"] == "std_msgs/msg/String" for ln in lines if TOPIC in ln["topics"])
    last = lines[-1]
    for k in ("received", "written", "dropped"):
        assert last["topics"][TOPIC][k] == report["topics"][TOPIC][k], k
        assert last["totals"][k] == report["totals"][k], k
    assert report["topics"][TOPIC]["written"] > 0
    recording = [ln for ln in lines[:-1] if ln["file"]]
    assert recording and all(Path(ln["file"]).name == name for ln in recording)
    assert any(ln["size"] > 0 for ln in recording)


def test_ros2_table_on_a_terminal_shown_then_cleared(tmp_path: Path) -> None:
    """``record --ros2`` with stderr on a pty: the table with the topic, redrawn in place,
    erased before the plain final report."""
    import os
    import pty
    import re
    import subprocess

    env = dict(ros2_env(), TERM="xterm", COLUMNS="300", LINES="40")
    env.pop("NO_COLOR", None)
    master, slave = pty.openpty()
    rec = subprocess.Popen(
        [*POLYBAG, "record", "--ros2", TOPIC, "-O", str(tmp_path / "tty")],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=slave,
        start_new_session=True,
    )
    os.close(slave)
    pty_text = PtyText(master)
    text = pty_text.text

    def counts() -> list[int]:
        return [int(n) for n in re.findall(rf"\n{TOPIC} +(\d+) ", text().replace("\x1b[K", ""))]

    try:
        with _publisher(env) as pub:
            wait_ready(pub, 90)
            end = time.monotonic() + 120
            while time.monotonic() < end and not (len(counts()) >= 3 and counts()[-1] > 0):
                assert rec.poll() is None, text()
                time.sleep(0.05)
            assert len(counts()) >= 3 and counts()[-1] > 0, ("the table drawn 3 times", text())
            rec.send_signal(signal.SIGINT)
            rec.wait(60)
        pty_text.thread.join(30)
    finally:
        if rec.poll() is None:
            rec.kill()
            rec.wait(10)
        os.close(master)
    out = text()
    assert rec.returncode == 0, out
    c = counts()
    assert c == sorted(c) and c[-1] > c[0]
    check_table_cleared(out, [TOPIC])
