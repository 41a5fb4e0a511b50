"""Play logs back in (scaled) real time, like ``rosbag play``, to a :class:`Sink`.

``Player(paths, options, sink).run()`` opens every input (bag, MCAP, ULog: anything
:func:`polybag.open` reads), merges their messages by log time (ties keep the order of the
inputs, then file order) and hands each message to the sink when it is due.

Timing.  Every deadline is computed from one anchor ``(wall, bag)`` pair: a message logged at
``t`` is due at ``wall + (t - bag) / rate`` on a monotonic clock, so sleeping late for one
message never delays the next ones (no drift over long runs).  Pausing freezes bag time; on
resume the anchor moves to ``(now, bag time at pause)``, so the time spent paused is excluded.
``step()`` while paused publishes the next message at once and moves paused bag time to it.
``--skip-empty`` re-anchors on the next message when the gap before it is longer than the
given span.  Each loop re-anchors at the loop's start time.  The real clock
(:class:`MonotonicClock`) sleeps until a short margin before a deadline and spins the rest;
every timed publish's lateness goes into ``PlayStats.lateness`` (a bounded histogram); with
``realtime`` the playing thread runs at ``SCHED_FIFO`` meanwhile.  One thread plays every
topic in log-time order (the inputs merged by a priority queue); the ROS sink's ``publish``
never blocks (the node hands a message to the socket at once, or queues it per subscriber).

The clock is injectable (:class:`Clock`): tests pass a simulated one whose ``wait`` advances
its time instead of sleeping, so timing is tested without wall-clock assertions.
"""

from __future__ import annotations

import heapq
import os
import select
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from os import PathLike
from typing import Any, Protocol

from polybag.errors import UsageError
from polybag.model import Channel, Message
from polybag.play.timing import LatenessHistogram
from polybag.reader import Reader, topic_filter
from polybag.selection import MAX_NS, duration_seconds

NS = 1_000_000_000


# --- options ----------------------------------------------------------------------------
@dataclass
class PlayOptions:
    """``rosbag play``'s options (same names as its long options).

    Times are seconds (floats), as rosbag takes them; a text is read as the CLI reads a
    length of time (``"500ms"``, ``"2m"``, ``"+5"``; see :mod:`polybag.selection`).  ``loop_count`` (polybag's) limits
    ``loop`` to that many passes (``None``: forever).  ``queue`` is the ROS sink's send
    queue per subscriber.  ``remap`` maps output topic names (after ``prefix``) to the
    names to publish on, as ROS remapping arguments ``/a:=/b`` do (``/clock`` too).
    ``realtime`` (polybag's, Linux) runs the thread that plays at that ``SCHED_FIFO``
    priority (1..99) while it plays, so other busy processes cannot delay its wakeups; it
    needs the privilege to (``CAP_SYS_NICE`` or an ``rtprio`` limit): ``PlayStats.realtime``
    says whether it was granted.  ``wait_for_known_subscribers`` (polybag's, seconds; 0: off):
    how long a sink that can tell (ROS 2) waits, after ``delay``, for every subscriber
    discovery already knows to be matched before the clock starts.
    """

    rate: float = 1.0
    start: float = 0.0
    duration: float | None = None
    loop: bool = False
    loop_count: int | None = None
    clock: bool = False
    hz: float = 100.0
    topics: Sequence[str] | None = None
    pause_topics: Sequence[str] = ()
    pause: bool = False
    delay: float = 0.2
    immediate: bool = False
    skip_empty: float | None = None
    queue: int = 100
    quiet: bool = False
    keep_alive: bool = False
    wait_for_subscribers: bool = False
    wait_for_known_subscribers: float = 2.0
    realtime: int | None = None
    prefix: str = ""
    rate_control_topic: str | None = None
    rate_control_max_delay: float = 1.0
    remap: dict[str, str] = field(default_factory=dict)
    open_options: dict[str, Any] = field(default_factory=dict)

    def validate(self) -> None:
        for name in ("start", "duration", "delay", "skip_empty", "rate_control_max_delay", "wait_for_known_subscribers"):
            value = getattr(self, name)
            flag = "--" + name.replace("_", "-")
            if isinstance(value, str):
                try:
                    setattr(self, name, duration_seconds(value))
                except UsageError as e:
                    raise UsageError(f"{flag}: {e}") from None
            elif value is not None and not abs(value) <= MAX_NS / NS:  # inf, nan, past int64 ns
                raise UsageError(f"{flag} {value!r}: not a length of time in seconds")
        if not self.rate > 0:
            raise UsageError(f"--rate must be positive, got {self.rate}")
        if self.start < 0:
            raise UsageError(f"--start must not be negative, got {self.start}")
        if self.duration is not None and self.duration < 0:
            raise UsageError(f"--duration must not be negative, got {self.duration}")
        if not self.hz > 0:
            raise UsageError(f"--hz must be positive, got {self.hz}")
        if self.delay < 0:
            raise UsageError(f"--delay must not be negative, got {self.delay}")
        if self.wait_for_known_subscribers < 0:
            raise UsageError(
                f"--wait-for-known-subscribers must not be negative, got {self.wait_for_known_subscribers}"
            )
        if self.skip_empty is not None and self.skip_empty < 0:
            raise UsageError(f"--skip-empty must not be negative, got {self.skip_empty}")
        if self.realtime is not None and not 1 <= self.realtime <= 99:
            raise UsageError(f"--realtime priority must be 1..99, got {self.realtime}")
        if self.loop_count is not None and self.loop_count < 1:
            raise UsageError(f"loop count must be at least 1, got {self.loop_count}")
        if self.rate_control_max_delay < 0:
            raise UsageError("--rate-control-max-delay must not be negative")
        for src, dst in self.remap.items():
            if not src or not dst:
                raise UsageError(f"remapping {src!r} to {dst!r}: a name is empty")


# --- clocks -----------------------------------------------------------------------------
class Clock(Protocol):
    """Where the player reads time and how it waits.

    ``wait`` is called with ``cond`` held and must return after at most ``timeout_ns``
    (``None``: until notified); returning early is always allowed (the player re-checks).
    """

    def now_ns(self) -> int: ...

    def wait(self, cond: threading.Condition, timeout_ns: int | None) -> None: ...


def _yield() -> None:
    """Release the GIL for a moment (other threads of this process may run) without giving up
    the processor: ``time.sleep(0)`` sleeps for the timer slack (about 50 us) on Linux, and
    ``sched_yield`` on a busy machine queues the spinning thread behind every other process
    for a whole time slice (milliseconds late), while a zero-timeout ``select`` returns at once."""
    select.select((), (), (), 0)


class MonotonicClock:
    """The real clock: ``time.monotonic_ns``; sleeps until shortly before a deadline, then spins.

    A timed wait sleeps on the condition (so ``stop``/``pause`` wake it at once) until
    ``margin`` ns before the deadline and returns; the player calls again, and within the
    margin each call only releases the GIL for a moment (the lock is released by the caller
    between calls), so the deadline is met to within a few microseconds instead of
    the scheduler's wakeup latency.  The margin adapts: twice the worst oversleep seen
    lately, between ``min_margin_ns`` and ``max_margin_ns`` (a loaded machine wakes later,
    so it spins longer; an idle one spins a fraction of a millisecond per message).
    """

    def __init__(self, min_margin_ns: int = 50_000, max_margin_ns: int = 300_000) -> None:
        if not 0 <= min_margin_ns <= max_margin_ns:
            raise UsageError("MonotonicClock needs 0 <= min_margin_ns <= max_margin_ns")
        self.min_margin_ns = min_margin_ns
        self.max_margin_ns = max_margin_ns
        self.margin_ns = max_margin_ns // 2

    def now_ns(self) -> int:
        return time.monotonic_ns()

    def wait(self, cond: threading.Condition, timeout_ns: int | None) -> None:
        if timeout_ns is None:
            cond.wait()
            return
        if timeout_ns <= self.margin_ns:
            _yield()  # spin: let the caller re-check (and other threads run meanwhile)
            return
        sleep_ns = timeout_ns - self.margin_ns
        target = time.monotonic_ns() + sleep_ns
        if cond.wait(sleep_ns / NS):
            return  # notified: the caller re-checks
        over = time.monotonic_ns() - target
        # follow a late wakeup at once, forget it slowly
        margin = max(2 * over, self.margin_ns - self.margin_ns // 16)
        self.margin_ns = min(self.max_margin_ns, max(self.min_margin_ns, margin))


# --- sinks ------------------------------------------------------------------------------
class Sink(Protocol):
    def open(self, channels: Sequence[Channel], options: PlayOptions) -> None: ...

    def publish(self, message: Message) -> None: ...

    def clock(self, time_ns: int) -> None: ...

    def wait_for_subscribers(self, stopped: Callable[[], bool]) -> bool: ...

    def close(self) -> None: ...


class CallbackSink:
    """Calls ``fn(message)`` in the player's thread for every message (and ``clock_fn(ns)``
    for every /clock tick when ``clock`` is on).

    ``message.data`` may be a view into the mapped file: copy it (``bytes(m.data)``) to keep
    it after :meth:`Player.run` returns.
    """

    def __init__(self, fn: Callable[[Message], Any], clock_fn: Callable[[int], Any] | None = None) -> None:
        self.fn = fn
        self.clock_fn = clock_fn

    def open(self, channels: Sequence[Channel], options: PlayOptions) -> None:
        pass

    def publish(self, message: Message) -> None:
        self.fn(message)

    def clock(self, time_ns: int) -> None:
        if self.clock_fn is not None:
            self.clock_fn(time_ns)

    def wait_for_subscribers(self, stopped: Callable[[], bool]) -> bool:
        return True

    def close(self) -> None:
        pass


# --- merged input -----------------------------------------------------------------------
PathArg = str | PathLike[str] | bytes


def _merged(iters: Sequence[Iterator[Message]]) -> Iterator[Message]:
    if len(iters) == 1:
        return iters[0]
    # the input index breaks ties, so equal log times keep the order of the inputs
    keyed = [((m.log_time, i, m) for m in it) for i, it in enumerate(iters)]
    return (m for _, _, m in heapq.merge(*keyed, key=lambda k: (k[0], k[1])))


@dataclass
class PlayStats:
    """What :meth:`Player.run` did: messages published (in all and per topic), passes, and
    the lateness of every timed publish (``sink.publish`` called minus the time the message
    was due; not stepped or ``--immediate`` messages) in a bounded histogram."""

    published: int = 0
    loops: int = 0
    per_topic: dict[str, int] = field(default_factory=dict)
    lateness: LatenessHistogram = field(default_factory=LatenessHistogram)
    realtime: str | None = None  # with PlayOptions.realtime: "granted" or why not

    def as_dict(self) -> dict[str, Any]:
        """For ``--json``: counts, and lateness in milliseconds."""
        return {
            "published": self.published,
            "loops": self.loops,
            "per_topic": dict(self.per_topic),
            "lateness": self.lateness.stats().as_dict(),
            "realtime": self.realtime,
        }


# --- the player -------------------------------------------------------------------------
@contextmanager
def _realtime(priority: int | None, stats: PlayStats) -> Iterator[None]:
    """The calling thread at ``SCHED_FIFO`` ``priority`` meanwhile (Linux), its policy restored
    after; ``stats.realtime`` says whether it was granted (refused: plays as before)."""
    if priority is None:
        yield
        return
    setsched = getattr(os, "sched_setscheduler", None)
    fifo = getattr(os, "SCHED_FIFO", None)
    if setsched is None or fifo is None:
        stats.realtime = "not supported on this platform"
        yield
        return
    try:
        before = (os.sched_getscheduler(0), os.sched_getparam(0))
        setsched(0, fifo, os.sched_param(priority))  # 0: this thread (Linux)
    except OSError as exc:
        stats.realtime = f"refused: {exc.strerror or exc}"
        yield
        return
    stats.realtime = "granted"
    try:
        yield
    finally:
        try:
            setsched(0, *before)
        except OSError:  # pragma: no cover - lowering one's own priority is always allowed
            pass


class Player:
    """Plays ``paths`` to ``sink`` according to ``options``.

    ``run()`` blocks until the end (or ``stop()``); ``pause()``, ``resume()``, ``step()``,
    ``toggle_pause()`` and ``stop()`` may be called from any thread (or from the sink's
    callback).  ``time`` is the current bag time in ns.
    """

    def __init__(
        self, paths: PathArg | Reader | Iterable[PathArg | Reader], options: PlayOptions | None = None, sink: Sink | None = None, *, clock: Clock | None = None
    ) -> None:
        import polybag

        self.options = options or PlayOptions()
        self.options.validate()
        if sink is None:
            raise UsageError("Player needs a sink (CallbackSink(fn) or Ros1Sink(node))")
        self.sink = sink
        self._clock: Clock = clock or MonotonicClock()
        if isinstance(paths, (str, bytes, PathLike, Reader)):
            paths = [paths]
        self._stack = ExitStack()
        self.readers: list[Reader] = []
        try:
            for p in paths:
                if isinstance(p, Reader):
                    self.readers.append(p)
                else:
                    self.readers.append(self._stack.enter_context(polybag.open(p, **self.options.open_options)))
        except BaseException:
            self._stack.close()
            raise
        if not self.readers:
            raise UsageError("nothing to play: no input files")
        self.stats = PlayStats()
        self._selectors = [self._select(r) for r in self.readers]
        self.channels: list[Channel] = [
            ch
            for r, sel in zip(self.readers, self._selectors, strict=True)
            for cid, ch in sorted(r.summary.channels.items())
            if sel is None or cid in sel
        ]
        self.begin_time = self._begin_time()
        opts = self.options
        self.start_time = self.begin_time + round(opts.start * NS)
        self.end_time: int | None = None
        if opts.duration is not None:
            self.end_time = self.start_time + round(opts.duration * NS)
        self._pause_topics = set(opts.pause_topics)
        # state, guarded by _cv
        self._cv = threading.Condition()
        self._stopped = False
        self._paused = opts.pause
        self._steps = 0
        self._anchor_wall = 0
        self._anchor_bag = self.start_time
        self._paused_bag = self.start_time
        self._last_bag = self.start_time
        self._next_bag: int | None = None
        self._running = False
        self._finished = False
        self._rc_stamp: int | None = None  # latest stamp seen on the rate-control topic
        self._held = False  # waiting for the rate-control topic
        self._due: int | None = None  # when the message _wait_due let through was due (None: stepped)

    # --- setup ----------------------------------------------------------------------
    def _select(self, r: Reader) -> set[int] | None:
        topics = self.options.topics
        if topics is None:
            return None
        return topic_filter(list(topics), r.summary.channels.values())

    def _begin_time(self) -> int:
        """The earliest start time of all inputs (all topics, as rosbag's full view)."""
        starts: list[int] = []
        for r in self.readers:
            s = r.summary
            if s.start_time is not None:
                starts.append(int(s.start_time))
            else:
                first = next(iter(r.messages()), None)
                if first is not None:
                    starts.append(first.log_time)
        return min(starts) if starts else 0

    def _messages(self) -> Iterator[Message]:
        end = None if self.end_time is None else self.end_time + 1  # rosbag's end is inclusive
        iters: list[Iterator[Message]] = []
        for r, sel in zip(self.readers, self._selectors, strict=True):
            if sel is not None and not sel:
                continue
            topics = None if sel is None else [r.summary.channels[c].topic for c in sel]
            iters.append(r.messages(topics=topics, start=self.start_time, end=end))
        return _merged(iters)

    # --- control (any thread) -------------------------------------------------------
    def stop(self) -> None:
        with self._cv:
            self._stopped = True
            self._cv.notify_all()

    def pause(self) -> None:
        with self._cv:
            if not self._paused:
                self._paused_bag = self._bag_now_locked()
                self._paused = True
                self._cv.notify_all()

    def resume(self) -> None:
        with self._cv:
            if self._paused:
                self._paused = False
                self._anchor_wall = self._clock.now_ns()
                self._anchor_bag = self._paused_bag
                self._cv.notify_all()

    def toggle_pause(self) -> bool:
        """Pause or resume; returns whether the player is now paused."""
        with self._cv:
            paused = self._paused
        if paused:
            self.resume()
        else:
            self.pause()
        return not paused

    def step(self) -> None:
        """While paused: publish the next message (ignored while playing)."""
        with self._cv:
            if self._paused:
                self._steps += 1
                self._cv.notify_all()

    def rate_control(self, stamp_ns: int) -> None:
        """A message stamped ``stamp_ns`` arrived on the rate-control topic (``--rate-control-topic``).

        While the next message's bag time is more than ``rate_control_max_delay`` ahead of the
        latest stamp, playback holds (bag time frozen, like a pause).  Nothing is held before
        the first stamp arrives.
        """
        with self._cv:
            if self._rc_stamp is None or stamp_ns > self._rc_stamp:
                self._rc_stamp = stamp_ns
            self._cv.notify_all()

    @property
    def held(self) -> bool:
        """True while waiting for the rate-control topic to catch up."""
        return self._held

    @property
    def paused(self) -> bool:
        return self._paused

    @property
    def stopped(self) -> bool:
        return self._stopped

    @property
    def finished(self) -> bool:
        """True once playback has reached the end (also while ``keep_alive`` holds on)."""
        return self._finished

    @property
    def time(self) -> int:
        """The current bag time (ns)."""
        with self._cv:
            return self._bag_now_locked()

    def _bag_now_locked(self) -> int:
        if self._paused or self._held or not self._running:
            return self._paused_bag if (self._paused or self._held) else self._last_bag
        t = self._anchor_bag + int((self._clock.now_ns() - self._anchor_wall) * self.options.rate)
        if self._next_bag is not None:
            t = min(t, self._next_bag)
        return max(t, self._last_bag)

    # --- running --------------------------------------------------------------------
    def run(self) -> PlayStats:
        """Play to the end (every loop), or until :meth:`stop`.  Returns the counts."""
        with _realtime(self.options.realtime, self.stats):
            return self._run()

    def _run(self) -> PlayStats:
        opts = self.options
        sink = self.sink
        try:
            counts = getattr(sink, "message_counts", None)
            if isinstance(counts, dict):  # (a ROS 2 sink sizes latched writers by them)
                for r, sel in zip(self.readers, self._selectors, strict=True):
                    for cid, ch in r.summary.channels.items():
                        if sel is None or cid in sel:
                            counts[id(ch)] = int(r.summary.message_counts.get(cid, 0))
            sink.open(self.channels, opts)
            if opts.delay > 0 and not self._sleep(round(opts.delay * NS)):
                return self.stats
            known = getattr(sink, "wait_for_known_subscribers", None)
            if (
                known is not None
                and opts.wait_for_known_subscribers > 0
                and not known(opts.wait_for_known_subscribers, lambda: self._stopped)
            ):
                return self.stats
            if opts.wait_for_subscribers and not sink.wait_for_subscribers(lambda: self._stopped):
                return self.stats
            with self._cv:
                self._anchor_wall = self._clock.now_ns()
                self._anchor_bag = self.start_time
                self._running = True
            self._next_tick = self._clock.now_ns()
            while not self._stopped:
                self.stats.loops += 1
                if opts.immediate and not opts.clock and not self._pause_topics and not opts.rate_control_topic:
                    self._play_immediate()
                else:
                    self._play_timed()
                if self._stopped or not opts.loop:
                    break
                if opts.loop_count is not None and self.stats.loops >= opts.loop_count:
                    break
                with self._cv:  # the next pass starts now, at the start time
                    self._anchor_wall = self._clock.now_ns()
                    self._anchor_bag = self.start_time
                    self._last_bag = self.start_time
                    if self._paused:
                        self._paused_bag = self.start_time
            self._finished = True
            if opts.keep_alive:
                with self._cv:
                    while not self._stopped:
                        self._clock.wait(self._cv, None)
            return self.stats
        finally:
            with self._cv:
                self._running = False
            sink.close()

    def close(self) -> None:
        self._stack.close()

    def __enter__(self) -> Player:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _count(self, m: Message) -> None:
        st = self.stats
        st.published += 1
        st.per_topic[m.channel.topic] = st.per_topic.get(m.channel.topic, 0) + 1

    def _play_immediate(self) -> None:
        """No timing: every message at once (pause and step still honoured)."""
        publish = self.sink.publish
        cv = self._cv
        for m in self._messages():
            if self._paused or self._stopped:
                with cv:
                    while self._paused and not self._stopped and self._steps == 0:
                        self._clock.wait(cv, None)
                    if self._stopped:
                        return
                    if self._paused:
                        self._steps -= 1
                        self._paused_bag = m.log_time
            publish(m)
            self._last_bag = m.log_time
            self._count(m)

    def _sleep(self, span_ns: int) -> bool:
        """Wait ``span_ns`` of wall time (before playing); False when stopped."""
        with self._cv:
            end = self._clock.now_ns() + span_ns
            while not self._stopped:
                left = end - self._clock.now_ns()
                if left <= 0:
                    return True
                self._clock.wait(self._cv, left)
        return False

    def _play_timed(self) -> None:
        opts = self.options
        skip_ns = None if opts.skip_empty is None else round(opts.skip_empty * NS)
        lateness = self.stats.lateness
        clock = self._clock
        for m in self._messages():
            t = m.log_time
            with self._cv:
                self._next_bag = t
                if skip_ns is not None and not opts.immediate and t - self._last_bag > skip_ns and not self._paused:
                    # a long empty stretch: publish the next message now, keep its spacing after
                    self._anchor_wall = self._clock.now_ns()
                    self._anchor_bag = t
            if not self._wait_due(t):
                return
            if opts.immediate and opts.clock:  # no waiting, so /clock follows the messages
                self.sink.clock(t)
            if self._due is not None:
                lateness.add(clock.now_ns() - self._due)
            self.sink.publish(m)
            with self._cv:
                self._last_bag = t
                self._next_bag = None
            self._count(m)
            if m.channel.topic in self._pause_topics:
                self.pause()

    def _wait_due(self, t: int) -> bool:
        """Wait until the message logged at ``t`` is due, publishing /clock ticks meanwhile.

        Returns False when stopped.  Sink calls are made without holding the lock.
        """
        opts = self.options
        period = max(1, round(NS / opts.hz))
        rc_delay = round(opts.rate_control_max_delay * NS)
        cv = self._cv
        self._due = None
        while True:
            tick: int | None = None
            wake: int | None
            with cv:
                if self._stopped:
                    return False
                now = self._clock.now_ns()
                if self._paused:
                    if self._steps > 0:
                        self._steps -= 1
                        self._paused_bag = t
                        return True
                    wake = None
                elif self._rc_stamp is not None and t - self._rc_stamp > rc_delay:
                    if not self._held:  # freeze bag time until the topic catches up
                        self._paused_bag = self._bag_now_locked()
                        self._held = True
                    wake = None
                else:
                    if self._held:
                        self._held = False
                        self._anchor_wall = now
                        self._anchor_bag = self._paused_bag
                    if opts.immediate:
                        return True
                    wake = self._anchor_wall + int((t - self._anchor_bag) / opts.rate)
                    if now >= wake:
                        self._due = wake
                        return True
                if opts.clock:  # also while paused: a stalled clock is still published
                    if now >= self._next_tick:
                        tick = self._bag_now_locked()
                        self._next_tick += period
                        if self._next_tick <= now:  # late: skip the missed ticks
                            self._next_tick = now + period
                    else:
                        wake = self._next_tick if wake is None else min(wake, self._next_tick)
                if tick is None:
                    self._clock.wait(cv, None if wake is None else wake - now)
            if tick is not None:
                self.sink.clock(tick)
