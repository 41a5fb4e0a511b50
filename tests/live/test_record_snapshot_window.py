"""Snapshots that keep recording after the trigger (``--snapshot-window PRE:POST``): the
window grammar, window membership with overlapping triggers (a message is in every snapshot
whose window holds it), edges, a window still open at the stop, the bound on open snapshot
files, the queue bound; in-process first, then on a live ROS 1 graph."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polybag
from polybag.errors import UsageError
from polybag.record import Recorder, RecordOptions
from polybag.record.group import options_from_mapping
from polybag.record.items import (
    LATE_NS,
    MAX_LISTED_SNAPSHOTS,
    MAX_OPEN_SNAPSHOTS,
    MAX_WAITING_SNAPSHOTS,
    MESSAGE_COST,
)
from polybag.record.options import parse_snapshot_window

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_record import put_string, texts  # noqa: E402

from ros1_graph import Graph, wait_for  # noqa: E402

S = 1_000_000_000
MS = 1_000_000
T0 = 1_700_000_000 * S


def quiet(**kw: object) -> RecordOptions:
    return RecordOptions(quiet=True, min_space=0, snapshot=True, **kw)  # type: ignore[arg-type]


def seqs(path: str | Path, topic: str | None = None) -> list[int]:
    return [int(x[:6]) for x in texts(path, topic)]


def feed(rec: Recorder, start: int, stop: int, period: int = 100 * MS, topic: str = "/a") -> None:
    """Messages ``start``..``stop - 1`` on ``topic``: number i received at T0 + i * period."""
    for i in range(start, stop):
        put_string(rec, topic, f"{i:06d}", T0 + i * period)


# --- the grammar -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "want"),
    [("10", (10.0, None)), ("10:5", (10.0, 5.0)), (":5", (None, 5.0)), ("1.5m:500ms", (90.0, 0.5)), ("2s:1h", (2.0, 3600.0))],
)
def test_window_texts(text, want):
    assert parse_snapshot_window(text) == want
    o = quiet(snapshot_window=text)
    assert (o.snapshot_window, o.snapshot_post) == want
    assert o.post_ns == (0 if want[1] is None else int(want[1] * S))
    o.validate()


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("10:", "PRE\\[:POST\\]"),
        (":", "PRE\\[:POST\\]"),
        ("1:2:3", "PRE\\[:POST\\]"),
        ("soon:5", "not a length of time"),
        ("5:soon", "not a length of time"),
        ("0:5", "positive"),
        ("5:0", "POST.*positive"),
        ("5:2000000000", "largest"),
        ("5:1e12", "too large"),
        ("5:" + "9" * 200, "PRE\\[:POST\\]"),
    ],
)
def test_bad_window_texts_are_usage_errors(text, needle):
    with pytest.raises(UsageError, match=needle):
        quiet(snapshot_window=text).validate()


def test_post_needs_snapshot_mode():
    with pytest.raises(UsageError, match="snapshot mode"):
        RecordOptions(snapshot_post=2.0).validate()
    with pytest.raises(UsageError, match="POST.*negative"):
        quiet(snapshot_post=-1).validate()
    with pytest.raises(UsageError, match="POST.*finite"):
        quiet(snapshot_post=float("inf")).validate()


def test_config_key_takes_the_same_text():
    o = options_from_mapping({"topics": ["/a"], "snapshot": True, "snapshot_window": "2:1.5"})
    assert (o.snapshot_window, o.snapshot_post) == (2.0, 1.5)
    o = options_from_mapping({"topics": ["/a"], "snapshot": True, "snapshot_window": ":500ms"})
    assert (o.snapshot_window, o.snapshot_post) == (None, 0.5)
    for bad in ("2:", "2:0", "2:x", ":" * 3):
        with pytest.raises(UsageError, match="snapshot_window"):
            options_from_mapping({"topics": ["/a"], "snapshot": True, "snapshot_window": bad})


def test_cli_takes_pre_post():
    from polybag.cli import build_parser
    from polybag.cli.record import options_from_args

    o = options_from_args(build_parser().parse_args(["record", "--snapshot-window", "3:1.5", "/a"]))
    assert o.snapshot and (o.snapshot_window, o.snapshot_post) == (3.0, 1.5)


# --- membership ----------------------------------------------------------------------------------
def test_overlapping_triggers_each_get_their_window(tmp_path):
    # 10 Hz on /a; PRE 2 s, POST 1 s; triggers at 5.0 s and 5.5 s: windows [3, 6] and [3.5, 6.5]
    rec = Recorder(quiet(output_prefix=str(tmp_path / "o"), snapshot_window="2:1", buffsize=0)).start()
    feed(rec, 0, 51)
    f1 = rec.trigger(at=T0 + 5 * S)
    feed(rec, 51, 56)
    f2 = rec.trigger(at=T0 + 55 * S // 10)
    assert not f1.done() and not f2.done()  # (still recording)
    feed(rec, 56, 71)  # 7.0 s: past the first window's end + LATE_NS (0.5 s): it ends
    p1 = f1.result(60)
    assert not f2.done()
    feed(rec, 71, 90)
    p2 = f2.result(60)
    assert p1 != p2
    assert seqs(p1) == list(range(30, 61))  # both edges: 3.0 s and 6.0 s included
    assert seqs(p2) == list(range(35, 66))
    rep = rec.close()
    s1, s2 = rep["snapshots"]
    assert (s1["file"], s1["messages"], s1["complete"]) == (str(p1), 31, True)
    assert (s1["start_ns"], s1["trigger_ns"], s1["end_ns"]) == (T0 + 3 * S, T0 + 5 * S, T0 + 6 * S)
    assert (s2["file"], s2["messages"], s2["complete"]) == (str(p2), 31, True)
    a = rep["topics"]["/a"]
    assert a["written"] == 36  # 30..65: each message counted once, in however many files
    assert a["received"] == 90 == a["written"] + a["dropped"]
    assert rep["files"] == [str(p1), str(p2)]


def test_the_text_report_names_each_window(tmp_path):
    from polybag.cli.record import report_lines

    rec = Recorder(quiet(output_prefix=str(tmp_path / "r"), snapshot_window="2:1", buffsize=0)).start()
    feed(rec, 0, 51)
    fut = rec.trigger(at=T0 + 5 * S)
    feed(rec, 51, 60)
    rep = rec.close()
    lines = report_lines(rep)
    assert f"snapshot {fut.result(60)}: 30 messages, 2 s before its trigger to 1 s after, cut short by the stop" in lines


def test_messages_just_outside_the_edges_are_not_in(tmp_path):
    rec = Recorder(quiet(output_prefix=str(tmp_path / "e"), snapshot_window="1:1", buffsize=0)).start()
    at = T0 + 10 * S
    for k, t in enumerate([at - S - 1, at - S, at, at + S, at + S + 1, at + S + LATE_NS + 1]):
        put_string(rec, "/a", f"{k:06d}", t)
        if k == 2:
            fut = rec.trigger(at=at)
    assert seqs(fut.result(60)) == [1, 2, 3]
    rep = rec.close()
    assert rep["snapshots"][0]["messages"] == 3 and rep["snapshots"][0]["complete"]


def test_a_window_open_at_the_stop_keeps_what_it_has(tmp_path):
    rec = Recorder(quiet(output_prefix=str(tmp_path / "s"), snapshot_window="1:60", buffsize=0)).start()
    feed(rec, 0, 20)
    fut = rec.trigger(at=T0 + 19 * 100 * MS)
    feed(rec, 20, 40)
    rep = rec.close()
    path = fut.result(60)
    assert seqs(path) == list(range(9, 40))
    assert path.exists() and not Path(str(path) + ".active").exists()
    (snap,) = rep["snapshots"]
    assert (snap["messages"], snap["complete"], snap["error"]) == (31, False, None)


def test_post_only_takes_the_whole_ring(tmp_path):
    rec = Recorder(quiet(output_prefix=str(tmp_path / "p"), snapshot_window=":1", buffsize=0)).start()
    feed(rec, 0, 30)
    fut = rec.trigger(at=T0 + 29 * 100 * MS)
    feed(rec, 30, 50)
    assert seqs(fut.result(60)) == list(range(0, 40))  # all the ring, then 1 s
    rep = rec.close()
    assert rep["snapshots"][0]["start_ns"] is None


def test_a_trigger_now_ends_by_the_clock(tmp_path):
    # no message after the trigger: the file is finished POST (+ LATE_NS) after it anyway
    rec = Recorder(quiet(output_prefix=str(tmp_path / "c"), snapshot_window="5:0.2", buffsize=0)).start()
    for k in range(5):
        put_string(rec, "/a", f"{k:06d}")
    fut = rec.trigger()
    path = fut.result(60)  # (bounded wait: the window ends by itself, nothing else happens)
    assert seqs(path) == list(range(5))
    assert rec.report()["snapshots"][0]["complete"]
    rec.close()


def test_more_open_snapshots_than_allowed_are_refused(tmp_path):
    logs: list[str] = []
    opts = quiet(output_prefix=str(tmp_path / "m"), snapshot_window="1:10", buffsize=0)
    rec = Recorder(opts, log=logs.append).start()
    feed(rec, 0, 10)
    futs = [rec.trigger(at=T0 + k * 100 * MS) for k in range(MAX_OPEN_SNAPSHOTS)]
    over = rec.trigger(at=T0 + 9 * 100 * MS)
    with pytest.raises(UsageError, match="still recording"):
        over.result(60)
    assert sum("refused" in line for line in logs) == 1
    feed(rec, 10, 200)  # 19.9 s: every window ended (the last at 10.7 s + LATE_NS)
    for f in futs:
        assert f.result(60).exists()
    again = rec.trigger(at=T0 + 199 * 100 * MS)  # room again
    rep = rec.close()
    assert again.result(60).exists()
    assert len(rep["snapshots"]) == MAX_OPEN_SNAPSHOTS + 1
    assert any("1 snapshot trigger(s) refused" in w for w in rep["warnings"])


def test_a_flood_of_triggers_opens_no_more_files(tmp_path):
    logs: list[str] = []
    opts = quiet(output_prefix=str(tmp_path / "f"), snapshot_window="1:5", buffsize=0)
    rec = Recorder(opts, log=logs.append).start()
    feed(rec, 0, 5)
    futs = [rec.trigger(at=T0 + 4 * 100 * MS) for _ in range(1000)]
    refused = [f for f in futs if f.done() and isinstance(f.exception(60), UsageError)]
    assert len(refused) == 1000 - MAX_OPEN_SNAPSHOTS
    assert sum("refused" in line for line in logs) == 1
    assert len(list(tmp_path.glob("*.active"))) <= MAX_OPEN_SNAPSHOTS
    rep = rec.close()
    assert len(rep["files"]) == MAX_OPEN_SNAPSHOTS
    assert any(f"{1000 - MAX_OPEN_SNAPSHOTS} snapshot trigger(s) refused" in w for w in rep["warnings"])


def test_the_post_queue_is_bounded_by_buffsize(tmp_path):
    # the writer is held: what waits for the open window is bounded like the ring (-b)
    rec = Recorder(quiet(output_prefix=str(tmp_path / "q"), snapshot_window="1:100", buffsize=0.01)).start()
    put_string(rec, "/a", "000000", T0)
    gate = hold_writer(rec, "_put")
    fut = rec.trigger(at=T0)
    for i in range(1, 60):  # 1000-byte messages, 10 KB of room
        put_string(rec, "/a", f"{i:06d}".ljust(996, "."), T0 + i * MS)
    assert rec._work.post_bytes <= rec.options.buffer_bytes
    gate.set()
    rep = rec.close()
    got = seqs(fut.result(60))
    assert got[0] == 0 and got[-1] == 59 and got == sorted(got)
    a = rep["topics"]["/a"]
    assert a["dropped_buffer"] > 0 and a["written"] == len(got)
    assert a["received"] == a["written"] + a["dropped"]


# --- bounded bookkeeping: what peers send (triggers, empty messages) never grows memory -----------
EMPTY_MD5 = "d41d8cd98f00b204e9800998ecf8427e"


def put_empty(rec: Recorder, topic: str, t: int) -> bool:
    return rec.write(topic, b"", type="std_msgs/Empty", md5sum=EMPTY_MD5, definition="", receive_time=t)


def test_5000_triggers_leave_a_bounded_list_and_true_counts(tmp_path):
    # every trigger is written (each waits for its file), by message times alone (a fake clock)
    from polybag.cli.record import report_lines

    rec = Recorder(quiet(output_prefix=str(tmp_path / "t"), snapshot_window="0.1:0.1", buffsize=0)).start()
    n = 5000
    for k in range(n):
        t = T0 + k * S  # one message per second: each window [t - 0.1 s, t + 0.1 s] holds exactly it
        put_string(rec, "/a", f"{k:06d}", t)
        fut = rec.trigger(at=t)
        put_string(rec, "/b", "closer", t + 100 * MS + LATE_NS + 1)  # past the window: it ends
        assert fut.result(60).exists()
        assert len(rec._work.snapshots) <= MAX_LISTED_SNAPSHOTS
    rep = rec.close()
    snaps = rep["snapshots"]
    assert len(snaps) == MAX_LISTED_SNAPSHOTS
    assert rep["snapshots_not_listed"] == n - MAX_LISTED_SNAPSHOTS
    assert [s["trigger_ns"] for s in snaps] == [T0 + k * S for k in range(n - MAX_LISTED_SNAPSHOTS, n)]
    assert all(s["messages"] == 1 and s["complete"] and s["error"] is None for s in snaps)
    assert seqs(snaps[-1]["file"]) == [n - 1] and seqs(snaps[0]["file"]) == [n - MAX_LISTED_SNAPSHOTS]
    a = rep["topics"]["/a"]
    assert a["received"] == a["written"] == n
    assert len(rep["files"]) == n
    assert f"{n - MAX_LISTED_SNAPSHOTS} earlier snapshots not listed" in report_lines(rep)


def test_few_snapshots_are_all_listed(tmp_path):
    rec = Recorder(quiet(output_prefix=str(tmp_path / "f"))).start()
    put_string(rec, "/a", "000000", T0)
    rec.trigger().result(60)
    rep = rec.close()
    assert len(rep["snapshots"]) == 1 and rep["snapshots_not_listed"] == 0


def hold_writer(rec: Recorder, step: str = "_write_snapshot") -> threading.Event:
    """Hold the writer thread before each ``step`` (a snapshot file; ``"_put"``: each message
    of an open window) until the returned event is set."""
    gate = threading.Event()
    real = getattr(rec._writing, step)

    def held(*args, **kw):
        gate.wait(60)
        real(*args, **kw)

    setattr(rec._writing, step, held)
    return gate


def test_a_flood_of_triggers_waits_for_the_writer_bounded(tmp_path):
    # the writer is held: at most MAX_WAITING_SNAPSHOTS triggers wait; refused ones leave the
    # ring for a later trigger
    logs: list[str] = []
    rec = Recorder(quiet(output_prefix=str(tmp_path / "w"), buffsize=1), log=logs.append).start()
    work = rec._work
    gate = hold_writer(rec)
    put_string(rec, "/a", "000000", T0)
    first = rec.trigger()
    wait_for(lambda: not work.jobs, 60, "the writer thread to take the first snapshot")
    futs = []
    for k in range(1, 1001):
        put_string(rec, "/a", f"{k:06d}", T0 + k)
        futs.append(rec.trigger())
        assert len(work.jobs) <= MAX_WAITING_SNAPSHOTS
    refused = [f for f in futs if f.done() and isinstance(f.exception(60), UsageError)]
    assert len(refused) == 1000 - MAX_WAITING_SNAPSHOTS
    assert futs[:MAX_WAITING_SNAPSHOTS] == [f for f in futs if f not in refused]
    assert sum("waiting to be written" in line for line in logs) == 1
    gate.set()
    wait_for(lambda: len(work.jobs) < MAX_WAITING_SNAPSHOTS, 60, "the writer thread to take a waiting snapshot")
    last = rec.trigger()
    written = [first.result(60)] + [f.result(60) for f in futs[:MAX_WAITING_SNAPSHOTS]]
    assert [seqs(p) for p in written] == [[k] for k in range(MAX_WAITING_SNAPSHOTS + 1)]
    assert seqs(last.result(60)) == list(range(MAX_WAITING_SNAPSHOTS + 1, 1001))  # the refused ones' ring
    rep = rec.close()
    assert len(rep["files"]) == MAX_WAITING_SNAPSHOTS + 2
    assert rep["topics"]["/a"]["written"] == 1001
    assert any(f"{1000 - MAX_WAITING_SNAPSHOTS} snapshot trigger(s) refused" in w for w in rep["warnings"])


def test_rings_waiting_for_the_writer_count_against_buffsize(tmp_path):
    rec = Recorder(quiet(output_prefix=str(tmp_path / "b"), buffsize=0.01)).start()
    work = rec._work
    gate = hold_writer(rec)
    put_string(rec, "/a", "000000", T0)
    futs = [rec.trigger()]
    wait_for(lambda: not work.jobs, 60, "the writer thread to take the first snapshot")
    for k in range(1, 60):
        put_string(rec, "/a", f"{k:06d}".ljust(496, "."), T0 + k)  # 500 bytes, 10 KB of room
        futs.append(rec.trigger())
        assert work.ring_bytes + work.waiting_bytes <= rec.options.buffer_bytes
    gate.set()
    got = [s for f in futs for s in seqs(f.result(60))]  # (none refused: fewer than the bound)
    rep = rec.close()
    a = rep["topics"]["/a"]
    assert got == sorted(set(got)) and a["written"] == len(got) < 60
    assert a["dropped_buffer"] == 60 - len(got) and a["received"] == 60


def test_empty_messages_are_bounded_in_the_ring(tmp_path):
    # 0-byte messages (ROS 1 std_msgs/Empty) do not count against -b by their payload:
    # the ring keeps at most buffsize // MESSAGE_COST of them
    rec = Recorder(quiet(output_prefix=str(tmp_path / "e"), buffsize=0.01)).start()
    cap = rec.options.buffer_bytes // MESSAGE_COST
    for k in range(10_000):
        put_empty(rec, "/e", T0 + k)
        assert rec._work.ring_count <= cap
    path = rec.trigger().result(60)
    rep = rec.close()
    e = rep["topics"]["/e"]
    assert (e["received"], e["written"], e["dropped_buffer"]) == (10_000, cap, 10_000 - cap)
    assert [m.log_time for m in polybag.open(str(path)).messages()] == [T0 + k for k in range(10_000 - cap, 10_000)]


def test_empty_messages_are_bounded_in_the_post_queue(tmp_path):
    rec = Recorder(quiet(output_prefix=str(tmp_path / "p"), snapshot_window="1:100", buffsize=0.01)).start()
    cap = rec.options.buffer_bytes // MESSAGE_COST
    put_empty(rec, "/e", T0)
    gate = hold_writer(rec, "_put")
    fut = rec.trigger(at=T0)
    for k in range(1, 5000):
        put_empty(rec, "/e", T0 + k * MS)
        assert rec._work.post_count <= cap and rec._work.ring_count <= cap
    gate.set()
    rep = rec.close()
    n = len(list(polybag.open(str(fut.result(60))).messages()))
    e = rep["topics"]["/e"]
    assert e["dropped_buffer"] > 0 and e["written"] == n
    assert e["received"] == 5000 == e["written"] + e["dropped"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    events=st.lists(
        st.one_of(
            st.tuples(st.sampled_from(["/a", "/b"]), st.integers(0, S)),
            st.just("trigger"),
        ),
        max_size=80,
    ),
    pre=st.sampled_from([None, 0.5, 2.0]),
    post=st.sampled_from([0.3, 1.0, 3.0]),
)
def test_each_file_holds_exactly_its_window(tmp_path_factory, events, pre, post):
    tmp = tmp_path_factory.mktemp("win")
    text = f"{'' if pre is None else pre}:{post}"
    rec = Recorder(quiet(output_prefix=str(tmp / "w"), snapshot_window=text, buffsize=0)).start()
    now = T0
    sent: list[tuple[int, int]] = []  # (number, receive time)
    trig: list[tuple[object, int]] = []
    for k, ev in enumerate(events):
        if ev == "trigger":
            if len(trig) < MAX_OPEN_SNAPSHOTS:
                trig.append((rec.trigger(at=now), now))
            continue
        topic, dt = ev
        now += dt
        put_string(rec, topic, f"{k:06d}", now)
        sent.append((k, now))
    rep = rec.close()
    for (fut, at), snap in zip(trig, rep["snapshots"]):
        lo = None if pre is None else at - int(pre * S)
        hi = at + int(post * S)
        want = [k for k, t in sent if (lo is None or lo <= t) and t <= hi]
        assert sorted(seqs(fut.result(60))) == want  # type: ignore[attr-defined]
        assert snap["messages"] == len(want)
    assert len(rep["files"]) == len(trig) == len(set(rep["files"]))
    n = sum(s["received"] for s in rep["topics"].values())
    assert n == len(sent) == sum(s["written"] + s["dropped"] for s in rep["topics"].values())


# --- live ----------------------------------------------------------------------------------------
NEEDED = [shutil.which("rosmaster"), shutil.which("rostopic")]
live = pytest.mark.skipif(not all(NEEDED), reason="Debian ROS 1 tools not installed")
POLYBAG = [sys.executable, "-m", "polybag"]


def point_seqs(path: str) -> list[tuple[int, int]]:
    """(header.seq, log time) of each geometry_msgs/PointStamped in ``path``."""
    import struct

    return [
        (struct.unpack_from("<I", bytes(m.data))[0], m.log_time)
        for m in polybag.open(path).messages(order="file")
    ]


def check_overlapping_pair(snaps: list[dict], read) -> list[list[tuple[int, int]]]:
    """The last two snapshots (by trigger time) of ``snaps``: their windows overlap, each file
    (``read(file)``: (sequence number, time) of each message) holds its window
    (:func:`check_windows`), some messages are in both and each edge is inside the stream.
    Returns what ``read`` gave of each."""
    a, b = sorted(snaps, key=lambda s: s["trigger_ns"])[-2:]
    assert b["start_ns"] < a["end_ns"], "the two windows do not overlap"
    got = [read(s["file"]) for s in (a, b)]
    for snap, msgs in zip((a, b), got):
        print(f"{snap['file']}: seq {msgs[0][0]}..{msgs[-1][0]} ({len(msgs)} messages)")
    check_windows([a, b], got)
    assert set(got[0]) & set(got[1])  # messages in both files
    assert got[0][0][0] < got[1][0][0] and got[0][-1][0] < got[1][-1][0]  # each edge inside the stream
    return got


def check_windows(snaps: list[dict], got: list[list[tuple[int, int]]]) -> None:
    """Each file holds the messages of its window: every time inside it, sequence numbers
    without a gap, messages before and after its trigger; and every message of the other
    files whose time is in its window is in it too."""
    for snap, msgs in zip(snaps, got):
        assert msgs, snap
        numbers = [q for q, _t in msgs]
        assert numbers == list(range(numbers[0], numbers[-1] + 1)), f"a gap in {snap['file']}"
        times = [t for _q, t in msgs]
        assert all(snap["start_ns"] <= t <= snap["end_ns"] for t in times), snap
        assert times[0] < snap["trigger_ns"] < times[-1], snap  # before and after the trigger
        assert snap["messages"] == len(msgs) and snap["complete"]
    for i, (snap, msgs) in enumerate(zip(snaps, got)):
        mine = set(msgs)
        for j, other in enumerate(got):
            if j != i:
                inside = {(q, t) for q, t in other if snap["start_ns"] <= t <= snap["end_ns"]}
                assert inside <= mine, f"{snap['file']} misses {sorted(inside - mine)[:5]}"


@live
@pytest.mark.live
def test_live_overlapping_snapshots_keep_recording(graph: Graph):
    tmp = graph.tmp
    graph.start(
        ["rostopic", "pub", "-s", "-r", "50", "/points", "geometry_msgs/PointStamped", "{header: {stamp: now}}"]
    )
    rec = graph.start(
        [*POLYBAG, "record", "--snapshot-window", "1:5", "-o", str(tmp / "snap"), "--json", "/points"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for(
            lambda: graph.subscribers("/points") and graph.subscribers("/snapshot_trigger"),
            60,
            "the recorder's subscriptions",
        )
        # the recorder has had messages for longer than PRE: another subscriber got 100 (2 s)
        echo = subprocess.run(
            ["rostopic", "echo", "-n", "100", "/points/header/seq"], env=graph.env, timeout=120, capture_output=True
        )
        assert echo.returncode == 0, echo.stderr
        trig = graph.start(["rostopic", "pub", "-1", "/snapshot_trigger", "std_msgs/Empty", "{}"])
        rec.send_signal(signal.SIGUSR1)  # the first; the topic's comes when rostopic is up
        assert trig.wait(120) == 0
        wait_for(
            lambda: len(list(tmp.glob("snap_*.bag"))) == 2 and not list(tmp.glob("*.active")),
            120,
            "both snapshots finished by themselves",
        )
        assert rec.poll() is None  # still recording
    finally:
        rec.send_signal(signal.SIGINT)
        out, err = rec.communicate(timeout=60)
    assert rec.returncode == 0, err.decode()
    rep = json.loads(out)
    snaps = rep["snapshots"]
    assert len(snaps) == 2 and sorted(s["file"] for s in snaps) == sorted(rep["files"])
    got = check_overlapping_pair(snaps, point_seqs)
    s = rep["topics"]["/points"]
    assert s["received"] == s["written"] + s["dropped"]
    assert s["written"] == len(set(got[0]) | set(got[1]))
