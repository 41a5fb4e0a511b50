"""The live stats view of ``polybag record`` (polybag.record.stats) from fake counts: the
table's columns, the JSON line's figures, rates over the window, time left, the terminal
handling (in place, plain, cleared at the end) and ``--json-stats SEC``'s bounds."""

from __future__ import annotations

import io
import json
import re
import sys
from types import SimpleNamespace
from typing import Any

import pytest

from polybag.cli import main
from polybag.errors import UsageError
from polybag.record import Recorder, RecordOptions, TopicStats
from polybag.record.stats import (
    StatsSampler,
    StatsView,
    check_json_every,
    human_bytes,
    json_line,
    plain_terminal,
    read_counts,
    table_lines,
)

S = 1_000_000_000
WALL0 = 1_800_000_000 * S


class Clock:
    """A fake monotonic clock (s) and wall clock (ns) moved by hand."""

    def __init__(self) -> None:
        self.t = 100.0

    def mono(self) -> float:
        return self.t

    def wall(self) -> int:
        return WALL0 + int((self.t - 100.0) * S)


def fake(options: RecordOptions | None = None, **out: Any) -> SimpleNamespace:
    o = SimpleNamespace(current_file="/data/run.bag", size=0, split_index=0, start=None)
    o.__dict__.update(out)
    return SimpleNamespace(
        stats={},
        options=options or RecordOptions(output_name="/data/run.bag"),
        output=o,
        queued_bytes=0,
        stop_reason=None,
    )


def add(rec: SimpleNamespace, topic: str, n: int, size: int, last: int, typ: str = "std_msgs/String", **kw: int) -> None:
    st = rec.stats.get(topic) or TopicStats(type=typ)
    st.received += n
    st.written += n - sum(kw.values())
    st.received_bytes += n * size
    st.last_receive = last
    for k, v in kw.items():
        setattr(st, k, getattr(st, k) + v)
    rec.stats[topic] = st


def sampler(rec: SimpleNamespace, clock: Clock, index: int | None = None, free: int = 5 * 10**9) -> StatsSampler:
    return StatsSampler(rec, index, window=2.0, clock=clock.mono, wall=clock.wall, disk_free=lambda d: free)


def test_figures_rate_over_the_window_and_last_seen():
    clock = Clock()
    rec = fake()
    s = sampler(rec, clock)
    add(rec, "/imu", 100, 50, clock.wall())
    first = s.sample()
    assert first["topics"]["/imu"]["rate"] is None  # (no earlier sample: no rate yet)
    assert first["topics"]["/imu"]["received"] == 100 and first["topics"]["/imu"]["bytes"] == 5000
    # 1 s later 200 more at 50 bytes, the last 0.25 s ago
    clock.t += 1.0
    add(rec, "/imu", 200, 50, clock.wall() - S // 4)
    f = s.sample()
    t = f["topics"]["/imu"]
    assert t["rate"] == 200.0 and t["bandwidth"] == 10000.0
    assert t["last_seen"] == 0.25
    # the window is 2 s: after 3 more seconds at 10/s the rate is 10, not the average since the start
    for _ in range(6):
        clock.t += 0.5
        add(rec, "/imu", 5, 50, clock.wall())
        f = s.sample()
    assert f["topics"]["/imu"]["rate"] == 10.0
    assert f["topics"]["/imu"]["received"] == 330
    # a topic that stops: rate falls to 0 within the window, last seen grows
    clock.t += 2.5
    f = s.sample()
    assert f["topics"]["/imu"]["rate"] == 0.0 and f["topics"]["/imu"]["last_seen"] == 2.5


def test_totals_drops_and_disk():
    clock = Clock()
    rec = fake(size=123456, current_file="/data/run_3.bag", split_index=2)
    rec.queued_bytes = 2048
    s = sampler(rec, clock, index=1, free=7 * 10**9)
    add(rec, "/a", 10, 100, clock.wall(), dropped_buffer=3)
    add(rec, "/b", 4, 8, clock.wall(), typ="std_msgs/Int32", dropped_limit=1)
    s.sample()
    clock.t += 1
    add(rec, "/a", 10, 100, clock.wall())
    f = s.sample()
    assert f["recorder"] == 1
    assert f["file"] == "/data/run_3.bag" and f["size"] == 123456 and f["free"] == 7 * 10**9
    assert f["buffered"] == 2048
    assert f["split"] is None  # (no --split)
    assert f["topics"]["/a"]["dropped"] == 3 and f["topics"]["/b"]["dropped"] == 1
    assert f["topics"]["/b"]["type"] == "std_msgs/Int32"
    assert f["totals"] == {
        "received": 24,
        "written": 20,
        "dropped": 4,
        "bytes": 2032,
        "rate": 10.0,
        "bandwidth": 1000.0,
    }
    assert json.loads(json_line(f)) == f and "\n" not in json_line(f)


def test_time_left_under_duration_and_split():
    clock = Clock()
    # --duration 60 without --split: the recording stops 60 s after its first message
    rec = fake(RecordOptions(output_name="/data/run.bag", duration="60"))
    s = sampler(rec, clock)
    assert s.sample()["time_left"] == 60.0  # (nothing received: the window has not started)
    rec.output.start = clock.wall()
    clock.t += 15.5
    f = s.sample()
    assert f["time_left"] == 44.5 and f["split_in"] is None
    clock.t += 100
    assert s.sample()["time_left"] == 0.0
    # --split --duration 10 --max-splits 3: the next part in ..., part number and parts kept
    rec = fake(RecordOptions(output_name="/data/run.bag", duration="10", split=True, max_splits=3), split_index=4)
    s = sampler(rec, clock)
    rec.output.start = clock.wall() - 7 * S
    f = s.sample()
    assert f["split_in"] == 3.0 and f["time_left"] is None
    assert f["split"] == 5 and f["max_splits"] == 3
    head = table_lines([f])[0]
    assert "part 5 (keeping 3)" in head and "next part in 3.0 s" in head
    # neither: no time left
    f = sampler(fake(), clock).sample()
    assert f["time_left"] is None and f["split_in"] is None


def test_table_columns():
    clock = Clock()
    rec = fake(size=2_500_000)
    s = sampler(rec, clock, free=12_300_000_000)
    add(rec, "/camera/image", 30, 921_654, clock.wall())
    add(rec, "/tf", 1000, 100, clock.wall(), dropped_buffer=7)
    s.sample()
    clock.t += 1
    add(rec, "/camera/image", 30, 921_654, clock.wall() - S // 2)
    add(rec, "/tf", 1000, 100, clock.wall())
    lines = table_lines([s.sample()])
    assert lines[0] == "/data/run.bag  size 2.5 MB  free 12.3 GB"
    assert re.split(r"\s{2,}", lines[1]) == ["topic", "msgs", "rate", "bandwidth", "drops", "last seen"]
    rows = {ln.split()[0]: re.split(r"\s{2,}", ln.strip()) for ln in lines[2:]}
    assert rows["/camera/image"] == ["/camera/image", "60", "30.0 Hz", "27.6 MB/s", "0", "0.5 s"]
    assert rows["/tf"] == ["/tf", "2000", "1000.0 Hz", "100.0 kB/s", "7", "0.0 s"]
    assert rows["total"] == ["total", "2060", "1030.0 Hz", "27.7 MB/s", "7"]
    # cut to the terminal: at most `columns` - 1 characters, topics left out to fit the rows
    for i in range(30):
        add(rec, f"/many/{i:02d}", 1, 1, clock.wall())
    cut = table_lines([s.sample()], columns=30, rows=10)
    assert len(cut) <= 10 and all(len(ln) < 30 for ln in cut)
    assert any(ln.startswith("... ") and "more topics" in ln for ln in cut)


def test_groups_one_block_per_recorder():
    clock = Clock()
    a, b = fake(current_file="/d/a.bag"), fake(current_file="/d/b.bag")
    add(a, "/x", 1, 1, clock.wall())
    add(b, "/y", 2, 1, clock.wall())
    lines = table_lines([sampler(a, clock, 0).sample(), sampler(b, clock, 1).sample()])
    heads = [ln for ln in lines if ln.startswith("recorder ")]
    assert heads == [ln for ln in lines if "free" in ln]
    assert [h.split()[:3] for h in heads] == [["recorder", "0:", "/d/a.bag"], ["recorder", "1:", "/d/b.bag"]]
    assert lines.index(heads[1]) > next(i for i, ln in enumerate(lines) if ln.startswith("/x"))


def test_human_bytes():
    assert [human_bytes(n) for n in (0, 999, 1000, 1_500_000, 2 * 10**12, None)] == [
        "0 B",
        "999 B",
        "1.0 kB",
        "1.5 MB",
        "2.0 TB",
        "-",
    ]


def test_read_counts_of_a_real_recorder(tmp_path):
    with Recorder(RecordOptions(output_name=str(tmp_path / "r.bag"), quiet=True, min_space=0)) as rec:
        for i in range(5):
            rec.write(
                "/s",
                b"\x01\x00\x00\x00" + bytes([65 + i]),
                type="std_msgs/String",
                md5sum="992ce8a1687cec8c8bd883ec73ca41d1",
                definition="string data\n",
                receive_time=S * (10 + i),
            )
        rec.flush(60)
        counts = read_counts(rec)
        f = StatsSampler(rec).sample()
    assert counts == {"/s": ("std_msgs/String", 5, 5, 0, 25, 14 * S)}
    assert f["file"] == str(tmp_path / "r.bag") and f["size"] > 0
    assert rec.report()["topics"]["/s"]["received_bytes"] == 25


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def _view_over(rec: SimpleNamespace, **kw: Any) -> StatsView:
    v = StatsView([rec], **kw)
    clock = Clock()
    v.samplers = [sampler(rec, clock)]
    return v


def test_view_draws_in_place_and_clears():
    rec = fake()
    add(rec, "/chatter", 3, 10, WALL0)
    term = Tty()
    v = _view_over(rec, term=term)
    v.draw(v.figures())
    first = term.getvalue()
    n = first.count("\x1b[K\n")
    assert n == 4 and "/chatter" in first and "\x1b[" in first
    v.draw(v.figures())
    second = term.getvalue()[len(first) :]
    assert second.startswith(f"\r\x1b[{n}A")  # (back to the table's first line, drawn again)
    v._erase()
    assert term.getvalue().endswith(f"\r\x1b[{n}A\x1b[J")
    assert v._drawn == 0


def test_view_plain_on_dumb_terminals():
    assert plain_terminal({"TERM": "dumb"}) and plain_terminal({"TERM": "xterm", "NO_COLOR": "1"})
    assert not plain_terminal({"TERM": "xterm-256color"})
    rec = fake()
    add(rec, "/chatter", 3, 10, WALL0)
    term = Tty()
    v = _view_over(rec, term=term, plain=True)
    assert v.table_every == 5.0
    v.draw(v.figures())
    v.draw(v.figures())
    text = term.getvalue()
    assert "\x1b" not in text and text.count("/chatter") == 2


def test_view_guard_erases_the_table_before_a_log_line(monkeypatch):
    rec = fake()
    add(rec, "/chatter", 3, 10, WALL0)
    term = Tty()
    monkeypatch.setattr(sys, "stderr", term)
    v = _view_over(rec, term=term, table_every=3600)
    v.start()
    try:
        assert sys.stderr is not term
        v.draw(v.figures())
        n = v._drawn
        print("[polybag record] Recording to 'x'.", file=sys.stderr)
        text = term.getvalue()
        assert text.endswith(f"\r\x1b[{n}A\x1b[J[polybag record] Recording to 'x'.\n")
    finally:
        v.finish()
    assert sys.stderr is term


def test_view_json_lines_and_final_line():
    rec = fake()
    add(rec, "/chatter", 3, 10, WALL0)
    out = io.StringIO()
    v = _view_over(rec, json_every=3600, out=out).start()
    v.write_json(v.figures())
    add(rec, "/chatter", 2, 10, WALL0)
    v.finish()
    lines = [json.loads(ln) for ln in out.getvalue().splitlines()]
    assert [ln["topics"]["/chatter"]["received"] for ln in lines] == [3, 5]
    assert "final" not in lines[0] and lines[1]["final"] is True


def test_view_closed_pipe_stops_json_not_recording():
    rec = fake()
    out = io.StringIO()
    out.close()
    v = _view_over(rec, json_every=0.25, out=out)
    v.write_json(v.figures())
    assert v.out is None


@pytest.mark.parametrize("bad", [0, 0.05, -1, float("nan"), float("inf"), 1e9])
def test_json_stats_bounds(bad):
    with pytest.raises(UsageError, match="--json-stats"):
        check_json_every(bad)


def test_json_stats_bounds_on_the_command_line(capsys):
    assert check_json_every(0.1) == 0.1 and check_json_every(None) is None
    for bad in ("0.05", "nan", "1e6"):
        assert main(["record", "--json-stats", bad, "/chatter"]) == 2
    with pytest.raises(SystemExit) as e:  # (not a number: argparse's error)
        main(["record", "--json-stats", "x", "/chatter"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "--json-stats" in err and "0.1" in err


def test_hostile_topic_names_stay_on_their_line():
    """A peer's topic name with escape sequences, line breaks or 10,000 characters: the table
    shows it escaped and cut, one line per topic; the JSON line escapes it."""
    clock = Clock()
    rec = fake()
    evil = "/x\x1b]0;pwned\x07\x1b[2J\n/forged\u202e"
    add(rec, evil, 1, 1, clock.wall())
    add(rec, "/" + "y" * 10_000, 1, 1, clock.wall())
    f = sampler(rec, clock).sample()
    lines = table_lines([f])
    assert len(lines) == 5
    text = "\n".join(lines)
    assert not any(ch in text for ch in "\x1b\x07\u202e")
    assert "\\x1b]0;pwned\\x07" in text and "\\u202e" in text
    assert max(len(ln) for ln in lines) < 200
    line = json_line(f)
    assert "\n" not in line and "\x1b" not in line and "\x07" not in line
    assert evil in json.loads(line)["topics"]


def test_view_failure_ends_the_view_not_the_recording():
    rec = fake()
    del rec.output  # (sampling fails)
    out = io.StringIO()
    v = StatsView([rec], json_every=0.1, out=out).start()
    assert v._thread is not None
    v._thread.join(60)  # (the thread ends on the error)
    assert v.error is not None and "output" in v.error
    v.finish()
    assert out.getvalue() == ""


def test_final_report_escapes_peer_topic_names():
    """The end-of-recording report prints topic names that peers chose: an escape sequence
    or a line break in one is written as a visible escape, never sent to the terminal."""
    from polybag.cli.record import report_lines

    counts = {
        "received": 3, "written": 3, "dropped": 0, "dropped_buffer": 0, "dropped_limit": 0, "dropped_stopped": 0,
    }
    rep = {
        "topics": {"/evil\x1b[2J\nforged: line": counts, "/ok": counts},
        "totals": {"received": 6, "written": 6, "dropped": 0},
        "files": [], "deleted": [], "stop_reason": "stopped", "errors": [],
    }
    text = "\n".join(report_lines(rep))
    assert "\x1b" not in text
    assert "/evil\\x1b[2J\\x0aforged: line" in text
    assert len(report_lines(rep)) == 4  # header, two topics, total: no forged line
