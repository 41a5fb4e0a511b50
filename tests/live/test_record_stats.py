"""Watching a live ROS 1 recording (issue 28): ``polybag record --json-stats SEC`` writes JSON
lines whose counts grow and end at the final report's, for one recorder and for ``--config``
groups; on a terminal (a pty) the table shows the topics in place and is cleared before the
final report."""

from __future__ import annotations

import json
import os
import pty
import re
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pty_helpers import PtyText, check_table_cleared  # noqa: E402
from ros1_graph import Graph, wait_for  # noqa: E402

NEEDED = [shutil.which("rosmaster"), shutil.which("rostopic")]

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(not all(n and os.path.exists(n) for n in NEEDED), reason="Debian ROS 1 tools not installed"),
]

POLYBAG = [sys.executable, "-m", "polybag"]
PAYLOAD = 4 + len("hello")  # (a serialized std_msgs/String "hello")


class Lines:
    """The lines a stream gives, collected by a thread (read as they come)."""

    def __init__(self, stream: Any) -> None:
        self.lines: list[str] = []
        self._t = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._t.start()

    def _read(self, stream: Any) -> None:
        for line in iter(stream.readline, b""):
            self.lines.append(line.decode())

    def join(self) -> None:
        self._t.join(60)

    def stats(self) -> list[dict[str, Any]]:
        return [json.loads(ln) for ln in list(self.lines) if ln.startswith('{"time"')]


def _publish(graph: Graph, topic: str, rate: int = 20) -> None:
    graph.start(["rostopic", "pub", "-r", str(rate), topic, "std_msgs/String", "data: hello"])


def _received(line: dict[str, Any], topic: str) -> int:
    t = line["topics"].get(topic)
    return 0 if t is None else int(t["received"])


def _check_growing(lines: list[dict[str, Any]], topic: str) -> None:
    counts = [_received(ln, topic) for ln in lines]
    assert counts == sorted(counts), counts
    assert counts[-1] > counts[0], counts
    for ln in lines:
        t = ln["topics"].get(topic)
        if t is not None:
            assert t["bytes"] == PAYLOAD * t["received"]
            assert t["type"] == "std_msgs/String"
            assert t["last_seen"] is not None and t["last_seen"] >= 0
    assert any((ln["topics"].get(topic) or {}).get("rate") for ln in lines), "a rate above 0"
    times = [ln["time"] for ln in lines]
    assert times == sorted(times)


def _stop(p: subprocess.Popen[bytes], out: Lines, err: Lines, timeout: float = 60) -> tuple[int, str]:
    p.send_signal(signal.SIGINT)
    p.wait(timeout)
    out.join()
    err.join()
    return p.returncode, "".join(err.lines)


def _report(out: Lines) -> Any:
    rest = "".join(ln for ln in out.lines if not ln.startswith('{"time"'))
    return json.loads(rest)


def test_json_stats_lines_grow_and_end_at_the_report(graph: Graph):
    tmp = graph.tmp
    rec = graph.start(
        [*POLYBAG, "record", "-O", str(tmp / "run.bag"), "--json", "--json-stats", "0.2", "/chatter"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, errs = Lines(rec.stdout), Lines(rec.stderr)
    wait_for(lambda: graph.subscribers("/chatter"), 60, "polybag subscribed")
    _publish(graph, "/chatter")
    wait_for(lambda: len([s for s in out.stats() if _received(s, "/chatter")]) >= 5, 120, "5 stats lines with messages")
    code, err = _stop(rec, out, errs)
    assert code == 0, err
    lines = out.stats()
    report = _report(out)
    assert len(lines) >= 6
    assert all("recorder" not in ln for ln in lines)
    assert [bool(ln.get("final")) for ln in lines] == [False] * (len(lines) - 1) + [True]
    _check_growing(lines, "/chatter")
    last = lines[-1]
    for k in ("received", "written", "dropped"):
        assert last["topics"]["/chatter"][k] == report["topics"]["/chatter"][k], k
        assert last["totals"][k] == report["totals"][k], k
    assert report["topics"]["/chatter"]["received_bytes"] == PAYLOAD * report["topics"]["/chatter"]["received"]
    while_recording = [ln for ln in lines[:-1] if ln["file"]]
    assert while_recording and all(ln["file"] == str(tmp / "run.bag") for ln in while_recording)
    assert any(ln["size"] > 0 and ln["free"] > 0 for ln in while_recording)


def test_json_stats_of_a_config_group(graph: Graph):
    tmp = graph.tmp
    cfg = tmp / "rec.yaml"
    cfg.write_text(
        f"recorders:\n  - topics: [/a]\n    output_name: {tmp}/a.bag\n"
        f"  - topics: [/a, /b]\n    output_name: {tmp}/ab.bag\n    duration: 10m\n"
    )
    rec = graph.start(
        [*POLYBAG, "record", "--config", str(cfg), "--json", "--json-stats", "0.2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, errs = Lines(rec.stdout), Lines(rec.stderr)
    wait_for(lambda: graph.subscribers("/a") and graph.subscribers("/b"), 60, "polybag subscribed")
    _publish(graph, "/a")
    _publish(graph, "/b", 10)

    def enough() -> bool:
        per = [[s for s in out.stats() if s["recorder"] == i and _received(s, "/a")] for i in (0, 1)]
        return all(len(p) >= 4 for p in per) and any(_received(s, "/b") for s in per[1])

    wait_for(enough, 120, "4 stats lines with messages from each recorder")
    code, err = _stop(rec, out, errs)
    assert code == 0, err
    report = _report(out)["recorders"]
    for i, topics in ((0, ["/a"]), (1, ["/a", "/b"])):
        mine = [s for s in out.stats() if s["recorder"] == i]
        _check_growing(mine, "/a")
        assert mine[-1]["final"] is True
        assert sorted(mine[-1]["topics"]) == topics
        for t in topics:
            assert mine[-1]["topics"][t]["written"] == report[i]["topics"][t]["written"]
        left = [s["time_left"] for s in mine]
        assert (left[0] is None) == (i == 0)
        if i == 1:
            assert all(0 < x <= 600 for x in left) and left == sorted(left, reverse=True)


def _under_pty(graph: Graph, args: list[str], topics: list[str], shown: Any, **env_extra: str) -> tuple[int, str]:
    """Run ``polybag ARGS`` with stderr on a pty while rostopic publishes on ``topics``, until
    ``shown(text)`` holds for what the terminal got; SIGINT; (exit code, text with the pty's
    ``\r\n`` as ``\n``)."""
    master, slave = pty.openpty()
    env = dict(graph.env, TERM="xterm", COLUMNS="300", LINES="40")
    env.pop("NO_COLOR", None)
    env.update(env_extra)
    rec = subprocess.Popen(
        [*POLYBAG, *args],
        env=env,
        cwd=graph.tmp,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=slave,
    )
    graph.procs.append(rec)
    os.close(slave)
    pty_text = PtyText(master)
    try:
        for t in topics:
            wait_for(lambda t=t: graph.subscribers(t), 60, f"polybag subscribed to {t}")
            _publish(graph, t)
        wait_for(lambda: shown(pty_text.text()), 120, "the table on the terminal")
        rec.send_signal(signal.SIGINT)
        rec.wait(60)
        pty_text.thread.join(30)
    finally:
        os.close(master)
    return rec.returncode, pty_text.text()


def _drawn_counts(text: str, topic: str) -> list[int]:
    return [int(n) for n in re.findall(rf"\n{re.escape(topic)} +(\d+) ", text.replace("\x1b[K", ""))]


def _check_cleared(text: str, topics: list[str]) -> None:
    """Redrawn in place; at the end the table erased, then the plain final report."""
    after = check_table_cleared(text, topics)
    assert "received" in after and "wrote " in after


def test_table_on_a_terminal_shown_then_cleared(graph: Graph):
    """Under a pty (stderr a terminal): the table with the topic, redrawn in place, erased
    before the final report, which is plain text after it."""

    def shown(text: str) -> bool:
        c = _drawn_counts(text, "/chatter")
        return len(c) >= 3 and c[-1] > 0

    code, text = _under_pty(graph, ["record", "-O", str(graph.tmp / "tty.bag"), "/chatter"], ["/chatter"], shown)
    assert code == 0, text
    counts = _drawn_counts(text, "/chatter")
    assert counts == sorted(counts) and counts[-1] > counts[0]
    assert "msgs" in text and "rate" in text and "last seen" in text and "free" in text
    assert "Recording to" in text  # (the recorder's own lines still come, the table erased first)
    _check_cleared(text, ["/chatter"])


def test_table_of_a_config_group_on_a_terminal(graph: Graph):
    tmp = graph.tmp
    cfg = tmp / "rec.yaml"
    cfg.write_text(
        f"recorders:\n  - topics: [/a]\n    output_name: {tmp}/a.bag\n"
        f"  - topics: [/b]\n    output_name: {tmp}/b.bag\n    split: true\n    duration: 10m\n"
    )

    def shown(text: str) -> bool:
        a, b = _drawn_counts(text, "/a"), _drawn_counts(text, "/b")
        return len(a) >= 3 and len(b) >= 3 and a[-1] > 0 and b[-1] > 0

    # (a wide terminal: the head lines hold the long test paths whole)
    code, text = _under_pty(graph, ["record", "--config", str(cfg)], ["/a", "/b"], shown, COLUMNS="400")
    assert code == 0, text
    assert re.search(r"recorder 0: +\S*a\.bag", text) and re.search(r"recorder 1: +\S*b_0\.bag +part 1", text)
    assert "next part in" in text
    _check_cleared(text, ["/a", "/b"])


def test_plain_blocks_on_a_dumb_terminal(graph: Graph):
    """TERM=dumb: no cursor moves, the table printed as plain blocks (every 5 s)."""

    def shown(text: str) -> bool:
        return len(_drawn_counts(text, "/chatter")) >= 2

    code, text = _under_pty(
        graph, ["record", "-O", str(graph.tmp / "dumb.bag"), "/chatter"], ["/chatter"], shown, TERM="dumb"
    )
    assert code == 0, text
    assert "\x1b" not in text
    # two blocks (the table and the final report's own line for /chatter come after)
    assert len(re.findall(r"^topic +msgs +rate", text, re.M)) >= 2
