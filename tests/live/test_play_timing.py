"""Play timing: the lateness statistics (histogram, exact summaries, receive-side lateness),
the player's own lateness with a simulated clock, the real clock's sleep-then-spin, and on a
live graph a rospy subscriber receiving a 100 Hz bag from `polybag play` and from
`rosbag play` (order and counts checked, timing stats computed; speed is bench_play's job)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from play_helpers import NS, T0, make_bag
from polybag.errors import UsageError
from polybag.play import CallbackSink, MonotonicClock, Player, PlayOptions
from polybag.play.timing import LatenessHistogram, LatenessStats, received_lateness, summarize

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_play.py"
ROSBAG_PLAY = "/usr/lib/rosbag/play"
SYSTEM_PYTHON = "/usr/bin/python3"


class FakeClock:
    """Simulated time: a timed wait advances time (plus ``late_ns``) instead of sleeping."""

    def __init__(self, late_ns: int = 0) -> None:
        self.t = 7 * NS
        self.late_ns = late_ns

    def now_ns(self) -> int:
        return self.t

    def wait(self, cond: threading.Condition, timeout_ns: int | None) -> None:
        if timeout_ns is None:
            cond.wait(0.05)
            return
        self.t += max(0, timeout_ns) + self.late_ns


# --- statistics -------------------------------------------------------------------------------
def test_summarize_exact():
    s = summarize([5, 1, 3, 2, 4])
    assert (s.count, s.median_ns, s.p99_ns, s.max_ns, s.mean_ns) == (5, 3, 5, 5, 3.0)
    assert summarize([1, 2, 3, 4]).median_ns == 2  # the mean of the middle two, rounded down
    assert summarize([-5, 10]).median_ns == 5  # negatives count as 0
    assert summarize([]) == LatenessStats()
    hundred = summarize(range(1, 101))
    assert hundred.p99_ns == 99 and hundred.max_ns == 100


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=10**11), min_size=1, max_size=300),
       st.sampled_from([0.01, 0.25, 0.5, 0.9, 0.99, 1.0]))
def test_histogram_quantiles_within_bucket_error(values, q):
    h = LatenessHistogram()
    for v in values:
        h.add(v)
    exact = sorted(values)
    rank = max(1, -(-int(q * len(values) * 1_000_000) // 1_000_000))
    want = exact[min(rank, len(values)) - 1]
    got = h.quantile(q)
    assert abs(got - want) <= want * 0.032 + 1  # 32 buckets per power of two
    assert h.count == len(values) and h.max_ns == max(values)
    assert h.stats().mean_ns == pytest.approx(sum(values) / len(values))


def test_histogram_memory_is_bounded():
    h = LatenessHistogram()
    for i in range(200_000):
        h.add((i * 7919) % (1 << 40))
    h.add(-3)
    h.add(1 << 62)
    assert h.count == 200_002
    assert h.buckets < 2200  # whatever was added: at most 32 per power of two
    assert h.quantile(0.0) == 0 and h.quantile(1.0) == 1 << 62
    assert LatenessHistogram().stats() == LatenessStats()


def test_stats_str_and_dict():
    s = summarize([1_000_000, 2_000_000, 3_000_000])
    d = s.as_dict()
    assert d["count"] == 3 and d["median_ms"] == 2.0 and d["max_ms"] == 3.0
    assert "median 2.000 ms" in str(s)
    assert str(LatenessStats()) == "no timed messages"


def test_received_lateness_anchors_on_the_least_late():
    logs = [T0 + i * 10_000_000 for i in range(5)]
    delay = 400_000  # a constant transport delay does not count
    recv = [123 * NS + delay + i * 10_000_000 for i in range(5)]
    recv[3] += 2_000_000
    assert received_lateness(logs, recv) == [0, 0, 0, 2_000_000, 0]
    # at rate 2 the schedule is twice as fast
    recv2 = [NS + i * 5_000_000 for i in range(5)]
    assert received_lateness(logs, recv2, rate=2.0) == [0] * 5
    assert received_lateness([], []) == []
    with pytest.raises(UsageError):
        received_lateness(logs, recv[:2])
    with pytest.raises(UsageError):
        received_lateness(logs, recv, rate=0)


# --- the player's own lateness (simulated clock) ------------------------------------------------
def _until(pred, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < end, "condition never became true"
        time.sleep(0.01)


def _bag(tmp_path: Path, n: int = 50, period: int = 10_000_000) -> Path:
    return make_bag(tmp_path / "x.bag", [("/a", T0 + i * period) for i in range(n)])


def test_player_lateness_counts_every_timed_publish(tmp_path):
    bag = _bag(tmp_path)
    got: list[int] = []
    clock = FakeClock(late_ns=250_000)
    with Player(bag, PlayOptions(delay=0), CallbackSink(lambda m: got.append(m.log_time)), clock=clock) as p:
        stats = p.run()
    assert got == [T0 + i * 10_000_000 for i in range(50)]
    s = stats.lateness.stats()
    assert s.count == 50
    # the first message is due at once; every later wait overshoots by 0.25 ms
    assert s.median_ns == pytest.approx(250_000, rel=0.032)
    assert s.max_ns == 250_000
    d = stats.as_dict()
    assert d["published"] == 50 and d["lateness"]["count"] == 50 and d["per_topic"] == {"/a": 50}


def test_player_on_time_with_an_exact_clock(tmp_path):
    with Player(_bag(tmp_path), PlayOptions(delay=0), CallbackSink(lambda m: None), clock=FakeClock()) as p:
        s = p.run().lateness.stats()
    assert s.count == 50 and s.max_ns == 0


def test_immediate_and_stepped_messages_are_not_timed(tmp_path):
    bag = _bag(tmp_path, 5)
    with Player(bag, PlayOptions(delay=0, immediate=True), CallbackSink(lambda m: None), clock=FakeClock()) as p:
        stats = p.run()
    assert stats.published == 5 and stats.lateness.count == 0

    clock = FakeClock()
    got: list[int] = []
    player = Player(bag, PlayOptions(delay=0, pause=True), CallbackSink(lambda m: got.append(m.log_time)),
                    clock=clock)
    th = threading.Thread(target=player.run)
    th.start()
    try:
        for k in range(2):
            player.step()
            _until(lambda k=k: len(got) > k)
        assert len(got) == 2
        player.resume()
        th.join(60)
        assert not th.is_alive()
    finally:
        player.stop()
        th.join(60)
        player.close()
    assert player.stats.published == 5 and player.stats.lateness.count == 3


# --- the real clock ------------------------------------------------------------------------
def test_monotonic_clock_sleeps_then_spins():
    clock = MonotonicClock(min_margin_ns=100_000, max_margin_ns=1_000_000)
    cond = threading.Condition()
    with cond:
        start = clock.now_ns()
        end = start + 5_000_000
        calls = 0
        while clock.now_ns() < end:
            clock.wait(cond, end - clock.now_ns())
            calls += 1
    assert clock.now_ns() >= end  # never early
    assert calls >= 1
    assert 100_000 <= clock.margin_ns <= 1_000_000  # adapted, within its bounds
    with cond:
        clock.wait(cond, clock.margin_ns // 2)  # within the margin: returns (spins) without sleeping
    with pytest.raises(UsageError):
        MonotonicClock(min_margin_ns=5, max_margin_ns=1)


def test_monotonic_clock_wakes_when_notified():
    clock = MonotonicClock()
    cond = threading.Condition()
    woke = threading.Event()

    def waiter() -> None:
        with cond:
            clock.wait(cond, None)
        woke.set()

    th = threading.Thread(target=waiter)
    th.start()
    for _ in range(600):
        with cond:
            cond.notify_all()
        if woke.wait(0.1):
            break
    th.join(60)
    assert woke.is_set()


def test_real_clock_lateness_is_computed(tmp_path):
    bag = _bag(tmp_path, 30, 2_000_000)  # 500 Hz, 60 ms
    got: list[int] = []
    with Player(bag, PlayOptions(delay=0), CallbackSink(lambda m: got.append(m.log_time))) as p:
        stats = p.run()
    assert got == sorted(got) and len(got) == 30
    s = stats.lateness.stats()
    assert s.count == 30 and 0 <= s.median_ns <= s.p99_ns <= s.max_ns


# --- live: a rospy subscriber, polybag play and rosbag play ---------------------------------------
def _has_ros() -> bool:
    if not all(os.path.exists(p) for p in (ROSBAG_PLAY, SYSTEM_PYTHON)) or not shutil.which("rosmaster"):
        return False
    return subprocess.run([SYSTEM_PYTHON, "-c", "import rospy"], capture_output=True).returncode == 0


live_tools = pytest.mark.skipif(not _has_ros(), reason="Debian ROS 1 (rosmaster, rosbag play, rospy) not installed")


@pytest.fixture
def graph(tmp_path):
    from ros1_graph import Graph

    g = Graph(tmp_path, PYTHONUNBUFFERED="1")
    try:
        yield g
    finally:
        g.close()


def _listen(graph, topic: str, n: int, out: Path) -> subprocess.Popen:
    from ros1_graph import wait_for

    p = graph.start([SYSTEM_PYTHON, str(BENCH), "listen", topic, str(n), str(out), "120"], stderr=subprocess.PIPE)
    wait_for(lambda: len(graph.subscribers(topic)) > 0, 60, "the rospy listener subscribing")
    return p


@pytest.mark.live
@live_tools
@pytest.mark.parametrize("player", ["polybag", "rosbag"])
def test_rospy_subscriber_gets_a_100hz_bag_in_order(graph, tmp_path, player):
    sys.path.insert(0, str(BENCH.parent))
    try:
        import bench_play
    finally:
        sys.path.remove(str(BENCH.parent))
    n = 150
    bag = tmp_path / "in.bag"
    times = bench_play.make_bag(bag, n, 100.0, 64)
    out = tmp_path / "recv.json"
    listener = _listen(graph, bench_play.TOPIC, n, out)
    if player == "polybag":
        cmd = [sys.executable, "-m", "polybag", "play", "-q", "--json", "--wait-for-subscribers", str(bag)]
    else:
        cmd = [ROSBAG_PLAY, "-q", "--wait-for-subscribers", str(bag)]
    res = subprocess.run(cmd, env=graph.env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert listener.wait(120) == 0
    got = json.loads(out.read_text())
    assert [i for i, _ in got] == list(range(n))  # all of them, in order
    recv = [r for _, r in got]
    assert recv == sorted(recv)
    late = received_lateness([times[i] for i, _ in got], recv)
    s = summarize(late)
    assert s.count == n and min(late) == 0 and 0 <= s.median_ns <= s.p99_ns <= s.max_ns
    if player == "polybag":
        own = json.loads(res.stdout)
        assert own["published"] == n and own["per_topic"] == {bench_play.TOPIC: n}
        assert own["lateness"]["count"] == n
        assert 0 <= own["lateness"]["median_ms"] <= own["lateness"]["p99_ms"] <= own["lateness"]["max_ms"]


# --- --realtime -----------------------------------------------------------------------------
@pytest.mark.skipif(not hasattr(os, "sched_setscheduler"), reason="no sched_setscheduler here")
def test_realtime_runs_fifo_and_restores_the_policy(tmp_path):
    bag = _bag(tmp_path, 10, 1_000_000)
    seen: list[int] = []
    before = os.sched_getscheduler(0)
    with Player(bag, PlayOptions(delay=0, realtime=10),
                CallbackSink(lambda m: seen.append(os.sched_getscheduler(0)))) as p:
        stats = p.run()
    assert stats.published == 10
    assert os.sched_getscheduler(0) == before  # restored
    if stats.realtime == "granted":
        assert set(seen) == {os.SCHED_FIFO}  # the sink was called from the FIFO thread
    else:
        assert stats.realtime.startswith("refused") and set(seen) == {before}
    assert p.stats.as_dict()["realtime"] == stats.realtime


def test_realtime_refused_plays_anyway(tmp_path, monkeypatch):
    def refuse(*a):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "sched_setscheduler", refuse, raising=False)
    monkeypatch.setattr(os, "SCHED_FIFO", 1, raising=False)
    with Player(_bag(tmp_path, 5), PlayOptions(delay=0, realtime=5), CallbackSink(lambda m: None),
                clock=FakeClock()) as p:
        stats = p.run()
    assert stats.published == 5 and stats.realtime == "refused: Operation not permitted"
    with Player(_bag(tmp_path, 5), PlayOptions(delay=0), CallbackSink(lambda m: None), clock=FakeClock()) as p:
        assert p.run().realtime is None  # not asked for


@pytest.mark.parametrize("prio", [0, 100, -1])
def test_realtime_priority_validated(prio):
    with pytest.raises(UsageError):
        PlayOptions(realtime=prio).validate()
