"""The in-process player: timing with a simulated clock (no wall-clock assertions), options,
merged inputs, pause/step, and the ROS 1 sink against a recording fake node."""

from __future__ import annotations

import struct
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polybag
from play_helpers import _string, make_bag, make_mcap  # noqa: F401
from polybag.cli import main
from polybag.formats.bag.writer import BagWriter
from polybag.play import CallbackSink, Player, PlayOptions, Ros1Sink
from polybag.play.ros1_sink import CLOCK_MD5, clock_payload, ros1_connection

NS = 1_000_000_000
T0 = 1_700_000_000 * NS
STRING_MD5 = "992ce8a1687cec8c8bd883ec73ca41d1"


class FakeClock:
    """Simulated monotonic time: a timed wait advances time instead of sleeping.

    ``late_ns`` makes every timed wait overshoot (a slow machine); an untimed wait (paused)
    blocks for real until the player is notified.
    """

    def __init__(self, late_ns: int = 0) -> None:
        self.t = 5 * NS
        self.late_ns = late_ns
        self.timed_waits = 0
        self.blocked = threading.Event()

    def now_ns(self) -> int:
        return self.t

    def wait(self, cond: threading.Condition, timeout_ns: int | None) -> None:
        if timeout_ns is None:
            self.blocked.set()
            cond.wait(0.05)
            return
        self.timed_waits += 1
        self.t += max(0, timeout_ns) + self.late_ns








class Recorder:
    """A CallbackSink that notes (fake time, topic, log time, payload) per message."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.got: list[tuple[int, str, int, bytes]] = []
        self.ticks: list[tuple[int, int]] = []
        self.sink = CallbackSink(self.on_message, self.on_clock)
        self.cond = threading.Condition()

    def on_message(self, m: polybag.Message) -> None:
        with self.cond:
            self.got.append((self.clock.now_ns(), m.topic, m.log_time, bytes(m.data)))
            self.cond.notify_all()

    def on_clock(self, t: int) -> None:
        self.ticks.append((self.clock.now_ns(), t))

    def wait_count(self, n: int) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.got) >= n, timeout=60), f"only {len(self.got)} of {n}"


def play(paths, fake: FakeClock | None = None, **kw) -> tuple[Recorder, Player]:
    fake = fake or FakeClock()
    rec = Recorder(fake)
    kw.setdefault("delay", 0.0)
    with Player(paths, PlayOptions(**kw), rec.sink, clock=fake) as p:
        p.run()
    return rec, p


def _until(pred, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < end, "condition never became true"
        time.sleep(0.01)


def rel(rec: Recorder, start_wall: int) -> list[int]:
    return [w - start_wall for w, *_ in rec.got]


SECS = [("/a", T0 + i * NS) for i in range(6)]


def test_real_time_schedule_and_delay(tmp_path):
    bag = make_bag(tmp_path / "x.bag", SECS)
    clock = FakeClock()
    start = clock.t
    rec, _ = play(bag, clock, delay=0.5)
    assert rel(rec, start) == [int(0.5 * NS) + i * NS for i in range(6)]
    assert [lt for _, _, lt, _ in rec.got] == [t for _, t in SECS]


@pytest.mark.parametrize("rate", [2.0, 0.5, 3.0])
def test_rate(tmp_path, rate):
    bag = make_bag(tmp_path / "x.bag", SECS)
    clock = FakeClock()
    start = clock.t
    rec, _ = play(bag, clock, rate=rate)
    assert rel(rec, start) == [int(i * NS / rate) for i in range(6)]


def test_start_and_duration(tmp_path):
    bag = make_bag(tmp_path / "x.bag", [("/a", T0 + i * NS // 2) for i in range(20)])  # every 0.5 s
    clock = FakeClock()
    start = clock.t
    rec, p = play(bag, clock, start=2.0, duration=3.0)
    times = [lt for _, _, lt, _ in rec.got]
    # rosbag: from begin + start to begin + start + duration inclusive
    assert times == [T0 + i * NS // 2 for i in range(4, 11)]
    assert rel(rec, start) == [i * NS // 2 for i in range(7)]
    assert p.start_time == T0 + 2 * NS and p.end_time == T0 + 5 * NS


def test_start_counts_from_all_topics_not_the_filtered_ones(tmp_path):
    bag = make_bag(tmp_path / "x.bag", [("/early", T0), ("/late", T0 + 3 * NS), ("/late", T0 + 4 * NS)])
    clock = FakeClock()
    start = clock.t
    rec, _ = play(bag, clock, topics=["/late"])
    assert [tp for _, tp, _, _ in rec.got] == ["/late", "/late"]
    assert rel(rec, start) == [3 * NS, 4 * NS]  # rosbag waits from the bag's start


def test_loop_count_restarts_cleanly(tmp_path):
    items = [("/a", T0 + i * NS) for i in range(3)]
    bag = make_bag(tmp_path / "x.bag", items)
    clock = FakeClock()
    start = clock.t
    rec, p = play(bag, clock, loop=True, loop_count=3)
    assert p.stats.loops == 3 and p.stats.published == 9
    assert [lt for _, _, lt, _ in rec.got] == [t for _, t in items] * 3
    # each pass restarts at the end of the previous one with the same spacing
    assert rel(rec, start) == [0, NS, 2 * NS, 2 * NS, 3 * NS, 4 * NS, 4 * NS, 5 * NS, 6 * NS]


def test_loop_forever_until_stopped(tmp_path):
    bag = make_bag(tmp_path / "x.bag", [("/a", T0), ("/a", T0 + NS)])
    clock = FakeClock()
    rec = Recorder(clock)
    holder: list[Player] = []

    def fn(m: polybag.Message) -> None:
        rec.on_message(m)
        if len(rec.got) == 7:
            holder[0].stop()

    with Player(bag, PlayOptions(loop=True, delay=0), CallbackSink(fn), clock=clock) as p:
        holder.append(p)
        p.run()
    assert len(rec.got) == 7 and p.stats.loops == 4


def test_topics_filter(tmp_path):
    items = [("/a", T0), ("/b", T0 + 1), ("/c", T0 + 2), ("/a", T0 + 3)]
    bag = make_bag(tmp_path / "x.bag", items)
    rec, p = play(bag, topics=["/a", "/c"])
    assert [(tp, lt) for _, tp, lt, _ in rec.got] == [("/a", T0), ("/c", T0 + 2), ("/a", T0 + 3)]
    assert sorted(c.topic for c in p.channels) == ["/a", "/c"]
    rec, _ = play(bag, topics=["/nothing"])
    assert rec.got == []


def test_multiple_files_merged_by_log_time(tmp_path):
    a = make_bag(tmp_path / "one.bag", [("/a", T0), ("/a", T0 + 2 * NS), ("/a", T0 + 4 * NS)])
    b = make_mcap(tmp_path / "two.mcap", [("/b", T0 + NS), ("/b", T0 + 2 * NS), ("/b", T0 + 5 * NS)])
    clock = FakeClock()
    start = clock.t
    rec, _ = play([a, b], clock)
    got = [(tp, lt) for _, tp, lt, _ in rec.got]
    # ties keep the order of the inputs
    assert got == [
        ("/a", T0), ("/b", T0 + NS), ("/a", T0 + 2 * NS), ("/b", T0 + 2 * NS), ("/a", T0 + 4 * NS), ("/b", T0 + 5 * NS)
    ]
    assert rel(rec, start) == [0, NS, 2 * NS, 2 * NS, 4 * NS, 5 * NS]
    assert rec.got[1][3] == _string(f"two /b {T0 + NS}")


def test_skip_empty(tmp_path):
    items = [("/a", T0), ("/a", T0 + NS), ("/a", T0 + 100 * NS), ("/a", T0 + 101 * NS), ("/a", T0 + 103 * NS)]
    bag = make_bag(tmp_path / "x.bag", items)
    clock = FakeClock()
    start = clock.t
    rec, _ = play(bag, clock, skip_empty=5.0)
    assert rel(rec, start) == [0, NS, NS, 2 * NS, 4 * NS]
    clock = FakeClock()
    start = clock.t
    rec, _ = play(bag, clock)  # without it the gap is waited out
    assert rel(rec, start)[2] == 100 * NS


def test_order_equals_reader_order(corpora, tmp_path):
    for path in [corpora / "rosbag" / "ros_comm" / "rosbag_storage_test.bag", corpora / "ulog" / "sample_log_small.ulg"]:
        with polybag.open(path) as r:
            expected = [(m.topic, m.log_time, bytes(m.data)) for m in r.messages()]
        rec, _ = play(path, immediate=True)
        assert [(tp, lt, d) for _, tp, lt, d in rec.got] == expected
        rec, _ = play(path, rate=50.0)
        assert [(tp, lt, d) for _, tp, lt, d in rec.got] == expected
        walls = [w for w, *_ in rec.got]
        assert walls == sorted(walls)


def test_immediate_does_not_wait(tmp_path):
    bag = make_bag(tmp_path / "x.bag", [("/a", T0 + i * 1000 * NS) for i in range(50)])
    clock = FakeClock()
    start = clock.t
    rec, _ = play(bag, clock, immediate=True)
    assert len(rec.got) == 50 and clock.timed_waits == 0 and rel(rec, start) == [0] * 50


def test_no_drift_when_every_wakeup_is_late(tmp_path):
    n = 2000
    bag = make_bag(tmp_path / "x.bag", [("/a", T0 + i * 1_000_000) for i in range(n)])  # 1 kHz
    late = 300_000  # every wait overshoots by 0.3 ms
    clock = FakeClock(late_ns=late)
    start = clock.t
    rec, _ = play(bag, clock)
    errors = [r - i * 1_000_000 for i, r in enumerate(rel(rec, start))]
    assert min(errors) >= 0
    assert max(errors) <= late  # scheduled against the start: lateness never accumulates
    assert len(errors) == n


def test_pause_step_resume_excludes_paused_time(tmp_path):
    bag = make_bag(tmp_path / "x.bag", SECS)
    clock = FakeClock()
    rec = Recorder(clock)
    player = Player(bag, PlayOptions(pause=True, delay=0), rec.sink, clock=clock)
    th = threading.Thread(target=player.run)
    th.start()
    try:
        assert clock.blocked.wait(60)
        assert rec.got == [] and player.paused and player.time == T0
        player.step()
        rec.wait_count(1)
        clock.blocked.clear()
        assert clock.blocked.wait(60)  # paused again after the step
        player.step()
        rec.wait_count(2)
        assert [lt for _, _, lt, _ in rec.got] == [T0, T0 + NS]
        assert player.time == T0 + NS  # the step moved bag time to the stepped message
        clock.t += 1000 * NS  # a long pause
        resumed = clock.t
        player.resume()
        th.join(60)
        assert not th.is_alive()
    finally:
        player.stop()
        th.join(60)
        player.close()
    assert [lt for _, _, lt, _ in rec.got] == [t for _, t in SECS]
    # after resuming, the rest keeps the bag's spacing from the stepped message
    assert rel(rec, resumed)[2:] == [NS, 2 * NS, 3 * NS, 4 * NS]


def test_pause_from_callback_and_pause_topics(tmp_path):
    bag = make_bag(tmp_path / "x.bag", [("/a", T0), ("/p", T0 + NS), ("/a", T0 + 2 * NS), ("/a", T0 + 3 * NS)])
    clock = FakeClock()
    rec = Recorder(clock)
    player = Player(bag, PlayOptions(pause_topics=["/p"], delay=0), rec.sink, clock=clock)
    th = threading.Thread(target=player.run)
    th.start()
    try:
        assert clock.blocked.wait(60)
        assert [tp for _, tp, _, _ in rec.got] == ["/a", "/p"] and player.paused
        clock.t += 50 * NS
        resumed = clock.t
        assert player.toggle_pause() is False
        th.join(60)
    finally:
        player.stop()
        th.join(60)
        player.close()
    assert rel(rec, resumed)[2:] == [NS, 2 * NS]


def test_stop_while_paused_and_keep_alive(tmp_path):
    bag = make_bag(tmp_path / "x.bag", SECS)
    for opts in (PlayOptions(pause=True, delay=0), PlayOptions(keep_alive=True, delay=0)):
        clock = FakeClock()
        rec = Recorder(clock)
        player = Player(bag, opts, rec.sink, clock=clock)
        th = threading.Thread(target=player.run)
        th.start()
        assert clock.blocked.wait(60)
        assert player.finished == opts.keep_alive
        assert len(rec.got) == (6 if opts.keep_alive else 0)
        player.stop()
        th.join(60)
        assert not th.is_alive()
        player.close()


def test_clock_ticks(tmp_path):
    bag = make_bag(tmp_path / "x.bag", [("/a", T0), ("/a", T0 + NS), ("/a", T0 + 2 * NS)])
    clock = FakeClock()
    start = clock.t
    rec, _ = play(bag, clock, clock=True, hz=10.0, rate=2.0)
    walls = [w - start for w, _ in rec.ticks]
    times = [t for _, t in rec.ticks]
    assert walls == [i * NS // 10 for i in range(len(walls))]  # 10 Hz of wall time
    assert times == [T0 + i * NS // 5 for i in range(len(times))]  # bag time at rate 2
    assert len(times) == 10  # until the last message (2 s of bag time at rate 2)
    assert rel(rec, start) == [0, NS // 2, NS]


def test_time_is_bag_time(tmp_path):
    bag = make_bag(tmp_path / "x.bag", SECS)
    clock = FakeClock()
    seen: list[int] = []
    holder: list[Player] = []
    sink = CallbackSink(lambda m: seen.append(holder[0].time - m.log_time))
    with Player(bag, PlayOptions(delay=0), sink, clock=clock) as p:
        holder.append(p)
        p.run()
    assert seen == [0] * 6


def test_options_validated(tmp_path):
    bag = make_bag(tmp_path / "x.bag", SECS)
    for bad in (dict(rate=0), dict(rate=-1), dict(hz=0), dict(start=-1), dict(duration=-2), dict(delay=-1)):
        with pytest.raises(polybag.PolybagError):
            Player(bag, PlayOptions(**bad), CallbackSink(print))


def test_damaged_input_raises_polybag_error(tmp_path):
    bag = make_bag(tmp_path / "x.bag", [("/a", T0 + i) for i in range(200)])
    data = bag.read_bytes()
    cut = tmp_path / "cut.bag"
    cut.write_bytes(data[: len(data) // 2])
    got: list[int] = []
    with pytest.raises(polybag.PolybagError):
        with Player(cut, PlayOptions(immediate=True, delay=0), CallbackSink(lambda m: got.append(m.log_time))) as p:
            p.run()


def test_real_clock_smoke(tmp_path):
    """The real monotonic clock at a high rate: everything arrives in order."""
    bag = make_bag(tmp_path / "x.bag", [("/a", T0 + i * 10_000_000) for i in range(20)])
    got: list[int] = []
    t = time.monotonic()
    with Player(bag, PlayOptions(rate=100.0, delay=0), CallbackSink(lambda m: got.append(m.log_time))) as p:
        p.run()
    assert got == [T0 + i * 10_000_000 for i in range(20)]
    assert time.monotonic() - t >= 0.0019  # 190 ms of bag time at rate 100


# --- the ROS 1 sink against a fake node ---------------------------------------------------
class FakePublisher:
    def __init__(self, topic, type_, md5, definition, latch) -> None:
        self.topic, self.type, self.md5, self.definition, self.latch = topic, type_, md5, definition, latch
        self.sent: list[bytes] = []
        self.closed = False
        self.num_subscribers = 1

    def publish(self, data: bytes) -> None:
        assert isinstance(data, bytes)
        self.sent.append(data)

    def wait_for_subscribers(self, n: int = 1, timeout: float = 5.0) -> bool:
        return True

    def close(self) -> None:
        self.closed = True


class FakeNode:
    def __init__(self) -> None:
        self.pubs: dict[str, FakePublisher] = {}

    def advertise(self, topic, type, md5sum, message_definition, *, latch=False, callerid=None, queue_size=100):  # noqa: A002
        assert topic not in self.pubs
        self.pubs[topic] = FakePublisher(topic, type, md5sum, message_definition, latch)
        return self.pubs[topic]


def test_ros1_sink_bag_and_mcap(tmp_path):
    a = make_bag(tmp_path / "one.bag", [("/a", T0), ("/l", T0 + 1)], latch_topic="/l")
    b = make_mcap(tmp_path / "two.mcap", [("/a", T0 + 2), ("/m", T0 + 3)])
    node = FakeNode()
    sink = Ros1Sink(node)
    clock = FakeClock()
    with Player([a, b], PlayOptions(clock=True, delay=0), sink, clock=clock) as p:
        p.run()
    assert sorted(node.pubs) == ["/a", "/clock", "/l", "/m"]
    for topic in ("/a", "/l", "/m"):
        pub = node.pubs[topic]
        assert (pub.type, pub.md5, pub.definition) == ("std_msgs/String", STRING_MD5, "string data\n")
        assert pub.closed
    assert node.pubs["/l"].latch and not node.pubs["/a"].latch
    assert node.pubs["/a"].sent == [_string(f"one /a {T0}"), _string(f"two /a {T0 + 2}")]
    assert node.pubs["/m"].sent == [_string(f"two /m {T0 + 3}")]  # md5 computed from the MCAP schema
    ck = node.pubs["/clock"]
    assert (ck.type, ck.md5) == ("rosgraph_msgs/Clock", CLOCK_MD5)
    assert ck.sent and ck.sent[0] == struct.pack("<II", T0 // NS, T0 % NS)


def test_ros1_sink_prefix_and_skips(tmp_path, corpora):
    bag = make_bag(tmp_path / "x.bag", [("/a", T0)])
    node = FakeNode()
    warnings: list[str] = []
    with Player(bag, PlayOptions(prefix="/pre", delay=0), Ros1Sink(node, warn=warnings.append)) as p:
        p.run()
    assert list(node.pubs) == ["/pre/a"] and node.pubs["/pre/a"].sent == [_string(f"x /a {T0}")]
    # JSON channels cannot go to ROS 1: skipped with a warning, nothing advertised
    node = FakeNode()
    sink = Ros1Sink(node, warn=warnings.append)
    with Player(corpora / "mcap-samples" / "lichtblick" / "example.mcap", PlayOptions(immediate=True, delay=0), sink) as p:
        p.run()
    assert node.pubs == {} and sink.skipped and any("json" in w for w in warnings)


def test_ros1_sink_ulog_as_ulog_msgs(corpora):
    path = corpora / "ulog" / "sample_log_small.ulg"
    node = FakeNode()
    with Player(path, PlayOptions(immediate=True, delay=0), Ros1Sink(node)) as p:
        p.run()
    assert node.pubs and all(pub.type.startswith("ulog_msgs/") for pub in node.pubs.values())
    assert sum(len(pub.sent) for pub in node.pubs.values()) > 100
    with polybag.open(path) as r:
        ch = next(c for c in r.summary.channels.values() if c.schema and c.schema.name != "ulog_logged_string")
    topic, tname, md5, definition, latch, repack = ros1_connection(ch)
    assert node.pubs[topic].md5 == md5 and len(md5) == 32


def test_clock_payload():
    assert clock_payload(T0 + 123) == struct.pack("<II", T0 // NS, 123)
    assert clock_payload(-5) == b"\0" * 8


def test_cli_usage_and_input_errors(tmp_path, capsys):
    assert main(["play"]) == 2
    bag = make_bag(tmp_path / "x.bag", SECS)
    assert main(["play", "--rate", "0", str(bag)]) == 2
    assert main(["play", "--hz", "-1", str(bag)]) == 2
    assert main(["play", str(tmp_path / "missing.bag")]) == 3
    junk = tmp_path / "junk.bag"
    junk.write_bytes(b"#ROSBAG V2.0\n" + b"\xff" * 10)
    assert main(["play", str(junk)]) == 3


def test_rate_control_holds_until_the_topic_catches_up(tmp_path):
    bag = make_bag(tmp_path / "x.bag", SECS)
    clock = FakeClock()
    rec = Recorder(clock)
    holder: list[Player] = []

    def fn(m: polybag.Message) -> None:
        rec.on_message(m)
        if m.log_time <= T0 + 2 * NS:  # the "processing node" acknowledges up to 2 s, then stalls
            holder[0].rate_control(m.log_time)

    opts = PlayOptions(delay=0, rate_control_topic="/ack", rate_control_max_delay=1.5)
    player = Player(bag, opts, CallbackSink(fn), clock=clock)
    holder.append(player)
    th = threading.Thread(target=player.run)
    th.start()
    try:
        assert clock.blocked.wait(60)
        # 3 s is within 1.5 s of the last stamp (2 s), 4 s is not
        assert [lt for _, _, lt, _ in rec.got] == [T0, T0 + NS, T0 + 2 * NS, T0 + 3 * NS]
        assert player.held and player.time == T0 + 3 * NS  # bag time frozen while held
        clock.t += 100 * NS
        released = clock.t
        player.rate_control(T0 + 3 * NS)  # lets 4 s through, not 5 s
        rec.wait_count(5)
        _until(lambda: player.held and player.time == T0 + 4 * NS)
        assert len(rec.got) == 5
        player.rate_control(T0 + 10 * NS)
        th.join(60)
        assert not th.is_alive()
    finally:
        player.stop()
        th.join(60)
        player.close()
    assert [lt for _, _, lt, _ in rec.got] == [t for _, t in SECS]
    assert rec.got[4][0] - released == NS  # spacing kept from the frozen bag time


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    gaps=st.lists(st.integers(0, 3 * NS), min_size=1, max_size=30),
    rate=st.sampled_from([0.25, 0.5, 1.0, 1.7, 4.0, 100.0]),
    late=st.integers(0, 50_000_000),
    start=st.integers(0, 2),
)
def test_schedule_property(tmp_path, gaps, rate, late, start):
    """Whatever the times, rate and lateness: order is the reader's and each message goes
    out no earlier than its schedule and no later than one wake-up's lateness after it."""
    times = [T0 + sum(gaps[: i + 1]) for i in range(len(gaps))]
    bag = make_bag(tmp_path / f"p{len(gaps)}_{gaps[0]}.bag", [("/a", t) for t in times])
    clock = FakeClock(late_ns=late)
    t0 = clock.t
    rec, p = play(bag, clock, rate=rate, start=float(start))
    first = p.start_time
    kept = [t for t in times if t >= first]
    assert [lt for _, _, lt, _ in rec.got] == kept
    for (wall, _, lt, _) in rec.got:
        sched = int((lt - first) / rate)
        assert sched <= wall - t0 <= sched + late


def test_ros1_sink_same_topic_other_type_is_skipped(tmp_path):
    a = make_bag(tmp_path / "one.bag", [("/a", T0)])
    b = tmp_path / "two.bag"
    with BagWriter(b, compression="none") as w:
        s = w.add_schema("std_msgs/UInt32", "ros1msg", b"uint32 data\n")
        ch = w.add_channel("/a", "ros1", s, {"md5sum": "304a39449588c7f8ce2df6e8001c5fce"})
        w.write(ch, struct.pack("<I", 7), T0 + 1)
    node = FakeNode()
    warnings: list[str] = []
    sink = Ros1Sink(node, warn=warnings.append)
    with Player([a, b], PlayOptions(immediate=True, delay=0), sink) as p:
        p.run()
    assert list(node.pubs) == ["/a"] and node.pubs["/a"].type == "std_msgs/String"
    assert node.pubs["/a"].sent == [_string(f"one /a {T0}")]
    assert sink.skipped == ["/a"] and "already advertised" in warnings[0]


def test_cli_topics_swallowing_files_like_rosbag(tmp_path):
    import argparse

    from polybag.cli.play import _split_inputs, header_stamp

    bag = make_bag(tmp_path / "x.bag", SECS)
    ns = argparse.Namespace(files=[], bags=[], topics=["/a", str(bag)], pause_topics=["/p"])
    assert _split_inputs(ns) == [str(bag)] and ns.topics == ["/a"] and ns.pause_topics == ["/p"]
    assert header_stamp(struct.pack("<III", 9, 12, 34) + b"frame") == 12 * NS + 34
    assert header_stamp(b"short") is None


def test_cli_unreachable_master(tmp_path, monkeypatch, capsys):
    bag = make_bag(tmp_path / "x.bag", SECS)
    monkeypatch.setenv("ROS_MASTER_URI", "http://127.0.0.1:1")
    monkeypatch.setenv("ROS_IP", "127.0.0.1")
    assert main(["play", "-q", str(bag)]) == 3
    assert "cannot reach" in capsys.readouterr().err


def test_immediate_with_clock_ticks_each_message(tmp_path):
    bag = make_bag(tmp_path / "x.bag", SECS)
    rec, _ = play(bag, immediate=True, clock=True)
    assert [t for _, t in rec.ticks] == [t for _, t in SECS] and len(rec.got) == 6
