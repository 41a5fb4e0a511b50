"""Snapshot recording: the rolling time window per topic, non-blocking triggers (Python,
SIGUSR1, the namespaced ``snapshot_trigger`` topic), one new file per trigger; and topics
whose type changes.  In-process first, then on a live graph."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polybag
from polybag.errors import OutputExistsError, UsageError
from polybag.record import Recorder, RecorderOptions, RecordOptions

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_record import INT_DEF, INT_MD5, STRING_MD5, put_int, put_string, texts  # noqa: E402

from ros1_graph import Graph, wait_for  # noqa: E402

S = 1_000_000_000
T0 = 1_700_000_000 * S


def quiet(**kw: object) -> RecordOptions:
    return RecorderOptions(quiet=True, min_space=0, **kw)  # type: ignore[arg-type]


def log_times(path: str | Path) -> list[int]:
    return [m.log_time for m in polybag.open(str(path)).messages(order="file")]


# --- in-process -------------------------------------------------------------------------------------
def test_window_keeps_last_seconds_per_topic(tmp_path):
    opts = quiet(output_prefix=str(tmp_path / "w"), snapshot=True, snapshot_window=2.0, buffsize=0)
    rec = Recorder(opts).start()
    for i in range(100):  # 10 Hz for 10 s on /a; /b only in the first second
        put_string(rec, "/a", f"a{i}", T0 + i * S // 10)
        if i < 10:
            put_int(rec, "/b", i, T0 + i * S // 10)
    fut = rec.trigger(at=T0 + 99 * S // 10)
    assert isinstance(fut, Future)
    path = fut.result(60)
    assert path.exists() and path.suffix == ".bag"
    got = texts(path, "/a")
    assert got == [f"a{i}" for i in range(79, 100)]  # receive times >= the trigger - 2 s (7.9 s)
    assert texts(path, "/b") == []  # its last message is 8.9 s old
    rep = rec.close()
    a, b = rep["topics"]["/a"], rep["topics"]["/b"]
    assert (a["written"], a["dropped_window"], a["dropped_buffer"]) == (21, 79, 0)
    assert (b["written"], b["dropped_window"]) == (0, 10)
    assert a["received"] == a["written"] + a["dropped"]


def test_buffsize_bounds_the_window_too(tmp_path):
    # 1000-byte messages, 10 KB ring: the byte bound is hit before the 5 s window
    opts = quiet(output_prefix=str(tmp_path / "b"), snapshot=True, snapshot_window=5.0, buffsize=0.01)
    rec = Recorder(opts).start()
    for i in range(30):
        put_string(rec, "/a", f"{i:02d}".ljust(996, "."), T0 + i * S // 10)
    path = rec.trigger(at=T0 + 3 * S).result(60)
    assert [x[:2] for x in texts(path)] == [f"{i:02d}" for i in range(20, 30)]
    a = rec.close()["topics"]["/a"]
    assert (a["written"], a["dropped_buffer"], a["dropped_window"]) == (10, 20, 0)


def test_buffer_drops_the_oldest_of_any_topic(tmp_path):
    opts = quiet(output_prefix=str(tmp_path / "o"), snapshot=True, buffsize=0.01)
    rec = Recorder(opts).start()
    for i in range(20):  # /a and /b interleaved, 1000 bytes each: the ring holds the last 10
        topic = "/a" if i % 2 == 0 else "/b"
        put_string(rec, topic, f"{i:02d}".ljust(996, "."), T0 + i)
    path = rec.trigger().result(60)
    assert [x[:2] for x in texts(path)] == [f"{i:02d}" for i in range(10, 20)]  # in receive order
    rep = rec.close()
    assert rep["topics"]["/a"]["dropped_buffer"] == 5 and rep["topics"]["/b"]["dropped_buffer"] == 5


def test_each_trigger_writes_a_new_file_and_never_replaces(tmp_path):
    (tmp_path / "snap.bag").write_bytes(b"an earlier run")
    opts = quiet(output_name=str(tmp_path / "snap"), snapshot=True)
    rec = Recorder(opts).start()
    paths = []
    for k in range(3):
        put_string(rec, "/a", f"m{k}", T0 + k)
        paths.append(rec.trigger().result(60))
    assert (tmp_path / "snap.bag").read_bytes() == b"an earlier run"
    assert [p.name for p in paths] == ["snap-1.bag", "snap-2.bag", "snap-3.bag"]
    assert [texts(p) for p in paths] == [["m0"], ["m1"], ["m2"]]  # the ring restarts empty
    # an explicit path, and one that exists (refused; the recording goes on)
    put_string(rec, "/a", "mine", T0 + 10)
    mine = rec.trigger(tmp_path / "mine.mcap").result(60)
    assert mine == tmp_path / "mine.mcap" and texts(mine) == ["mine"]
    put_string(rec, "/a", "again", T0 + 11)
    with pytest.raises(OutputExistsError):
        rec.trigger(tmp_path / "mine.mcap").result(60)
    put_string(rec, "/a", "after", T0 + 12)
    assert texts(rec.trigger().result(60)) == ["after"]
    rep = rec.close()
    assert rep["topics"]["/a"]["dropped_stopped"] == 1  # "again": its file was refused
    assert not rep["errors"]


def test_trigger_returns_at_once_while_the_file_is_written(tmp_path):
    opts = quiet(output_prefix=str(tmp_path / "slow"), snapshot=True, buffsize=0)
    rec = Recorder(opts).start()
    for i in range(2000):
        put_string(rec, "/a", "x" * 5000, T0 + i)
    gate = threading.Event()
    real_put = rec._writing._put

    def slow_put(item, **kw):  # the writer thread waits for the test
        gate.wait(60)
        real_put(item, **kw)

    rec._writing._put = slow_put  # type: ignore[method-assign]
    fut = rec.trigger()
    assert not fut.done()  # returned before anything was written
    # recording goes on into the new (empty) ring meanwhile
    assert put_string(rec, "/a", "during", T0 + 5000)
    assert rec.queued_bytes == len("during") + 4
    gate.set()
    path = fut.result(120)
    assert len(texts(path)) == 2000
    rec._writing._put = real_put  # type: ignore[method-assign]
    assert texts(rec.trigger().result(60)) == ["during"]
    rec.close()


def test_trigger_after_close_fails_the_future(tmp_path):
    rec = Recorder(quiet(output_prefix=str(tmp_path / "c"), snapshot=True)).start()
    rec.close()
    with pytest.raises(UsageError, match="stopped"):
        rec.trigger().result(10)


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({"snapshot_window": 2.0}, "snapshot"),
        ({"snapshot": True, "snapshot_window": 0}, "positive"),
        ({"snapshot": True, "snapshot_window": float("nan")}, "positive"),
        ({"namespace": "bad ns!"}, "namespace"),
    ],
)
def test_refused_snapshot_options(kw, needle):
    with pytest.raises(UsageError, match=needle):
        Recorder(RecordOptions(**kw))


def test_namespace_names_the_trigger_topic():
    assert RecordOptions().trigger_topic == "/snapshot_trigger"
    assert RecordOptions(namespace="robot1").trigger_topic == "/robot1/snapshot_trigger"
    assert RecordOptions(namespace="/a/b/").trigger_topic == "/a/b/snapshot_trigger"


def test_topic_changing_type_is_refused_with_a_warning(tmp_path):
    logs: list[str] = []
    out = tmp_path / "t.bag"
    rec = Recorder(RecordOptions(output_name=str(out), min_space=0), log=logs.append).start()
    put_string(rec, "/x", "first", T0)
    put_int(rec, "/x", 7, T0 + 1)  # another type on the same topic
    put_int(rec, "/x", 8, T0 + 2)
    put_string(rec, "/x", "second", T0 + 3)
    rep = rec.close()
    assert texts(out) == ["first", "second"]
    x = rep["topics"]["/x"]
    assert (x["written"], x["dropped_type"]) == (2, 2)
    (w,) = rep["warnings"]
    assert "/x" in w and "std_msgs/Int32" in w and INT_MD5 in w and STRING_MD5 in w
    assert sum("warning" in line and "/x" in line for line in logs) == 1  # warned once
    (ch,) = polybag.open(str(out)).summary.channels.values()
    assert ch.metadata["type"] == "std_msgs/String"
    assert INT_DEF  # (the refused type's definition is never written)


# --- live ------------------------------------------------------------------------------------------
NEEDED = [shutil.which("rosmaster"), shutil.which("rostopic")]
live = pytest.mark.skipif(not all(NEEDED), reason="Debian ROS 1 tools not installed")
POLYBAG = [sys.executable, "-m", "polybag"]


def _stop(p: subprocess.Popen, timeout: float = 60) -> tuple[int, str, str]:
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=timeout)
    return p.returncode, out.decode(), err.decode()


@live
@pytest.mark.live
def test_live_window_sigusr1_and_namespaced_topic(graph: Graph):
    tmp = graph.tmp
    graph.start(["rostopic", "pub", "-r", "50", "/chatter", "std_msgs/String", "data: hello"])
    rec = graph.start(
        [*POLYBAG, "record", "--snapshot-window", "1", "-o", str(tmp / "snap"), "--json"]
        + ["__ns:=/robot1", "/chatter"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for(
            lambda: graph.subscribers("/chatter") and graph.subscribers("/robot1/snapshot_trigger"),
            60,
            "the recorder's subscriptions",
        )
        assert not graph.subscribers("/snapshot_trigger")  # the trigger is in its namespace
        time.sleep(3.0)  # 3 s of messages; the window keeps 1 s
        assert not list(tmp.glob("snap*.bag"))
        t_sig = time.time_ns()
        rec.send_signal(signal.SIGUSR1)
        wait_for(lambda: len(list(tmp.glob("snap_*.bag"))) == 1, 60, "the SIGUSR1 snapshot")
        time.sleep(1.5)
        trig = subprocess.run(
            ["rostopic", "pub", "-1", "/robot1/snapshot_trigger", "std_msgs/Empty", "{}"],
            env=graph.env,
            timeout=120,
            capture_output=True,
        )
        assert trig.returncode == 0, trig.stderr
        wait_for(lambda: len(list(tmp.glob("snap_*.bag"))) == 2, 60, "the topic's snapshot")
        assert rec.poll() is None  # still recording
    finally:
        rc, out, err = _stop(rec)
    assert rc == 0, err
    rep = json.loads(out)
    first, second = rep["files"]
    assert first != second and os.path.exists(first) and os.path.exists(second)
    t1, t2 = log_times(first), log_times(second)
    assert 20 <= len(t1) <= 60, len(t1)  # about 1 s at 50 Hz
    assert t1[-1] - t1[0] <= 1.05 * S and t1[-1] <= t_sig + S // 2
    assert t2 and t2[0] > t1[-1]  # the ring restarted empty: no message in both files
    assert t2[-1] - t2[0] <= 1.05 * S
    s = rep["topics"]["/chatter"]
    assert s["dropped_window"] > 0 and s["written"] == len(t1) + len(t2)
    assert s["received"] == s["written"] + s["dropped"]


def test_cli_snapshot_options():
    from polybag.cli import build_parser
    from polybag.cli.record import options_from_args

    def opts(*argv: str) -> RecordOptions:
        return options_from_args(build_parser().parse_args(["record", *argv]))

    o = opts("--snapshot-window", "2.5", "/a")
    assert o.snapshot and o.snapshot_window == 2.5 and o.topics == ["/a"]
    o = opts("-s", "/a", "__ns:=/robot1", "__name:=rec")
    assert o.topics == ["/a"] and o.trigger_topic == "/robot1/snapshot_trigger" and o.node_name == "rec"
    assert opts("--namespace", "r2", "-s", "/a").trigger_topic == "/r2/snapshot_trigger"
    with pytest.raises(UsageError, match="remapping"):
        opts("/a", "/a:=/b")


def test_cli_refuses_a_bad_window(capsys):
    from polybag.cli import main

    assert main(["record", "--snapshot-window", "-1", "/a"]) == 2
    assert "--snapshot-window" in capsys.readouterr().err


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    events=st.lists(
        st.one_of(
            st.tuples(st.sampled_from(["/a", "/b", "/c"]), st.integers(0, 3 * S), st.integers(1, 3000)),
            st.just("trigger"),
        ),
        max_size=60,
    ),
    window=st.sampled_from([None, 0.5, 2.0]),
    buffsize=st.sampled_from([0, 0.005, 0.05]),
)
def test_snapshot_never_loses_or_duplicates(tmp_path_factory, events, window, buffsize):
    tmp = tmp_path_factory.mktemp("prop")
    opts = quiet(output_prefix=str(tmp / "p"), snapshot=True, snapshot_window=window, buffsize=buffsize)
    rec = Recorder(opts).start()
    now = T0
    sent: dict[str, int] = {}
    futures = []
    for k, ev in enumerate(events):
        if ev == "trigger":
            futures.append((rec.trigger(at=now), now))
            continue
        topic, dt, size = ev
        now += dt
        put_string(rec, topic, f"{k:05d}".ljust(size, "."), now)
        sent[topic] = sent.get(topic, 0) + 1
    seen: list[str] = []
    for fut, at in futures:
        path = fut.result(60)
        times = log_times(path)
        assert times == sorted(times)  # receive order
        if window is not None:
            assert all(t >= at - int(window * S) for t in times)
        if buffsize:
            assert sum(len(m.data) for m in polybag.open(str(path)).messages()) <= buffsize * (1 << 20)
        seen += [x[:5] for x in texts(path)]
    assert len(seen) == len(set(seen))  # no message in two files
    rep = rec.close()
    for topic, n in sent.items():
        s = rep["topics"][topic]
        assert s["received"] == n == s["written"] + s["dropped"]
    assert sum(s["written"] for s in rep["topics"].values()) == len(seen)
    assert len(rep["files"]) == len(futures) == len(set(rep["files"]))
