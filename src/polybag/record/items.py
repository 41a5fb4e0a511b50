"""What the recorder's parts share: a queued message, a snapshot job, the per-topic counts,
and the work queue between the recorder (which takes messages) and its writer thread
(which writes them)."""

from __future__ import annotations

import shutil
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from polybag.errors import WriteError

#: what a connection of a topic is recorded by: (type, md5sum, definition, callerid, latching)
ConnectionKey = tuple[str, str, str, str, bool]

#: what the writer thread does next (:meth:`WorkQueue.next_work`): write a snapshot job, a
#: message of (or the end of) snapshots still recording, or a message, exit, or (``""``)
#: check the free space while idle
WorkKind = Literal["snapshot", "post", "message", "exit", ""]


@dataclass
class TopicStats:
    """Per-topic counts.  ``dropped`` is the sum of the reasons."""

    type: str = ""
    received: int = 0
    written: int = 0
    dropped_buffer: int = 0  # the queue (or the snapshot ring) was full
    dropped_limit: int = 0  # over -l/--limit
    dropped_stopped: int = 0  # arrived after the recording stopped, or left unwritten at the end
    dropped_window: int = 0  # snapshot: older than --snapshot-window
    dropped_type: int = 0  # refused: not the type the topic was first recorded with
    received_bytes: int = 0  # payload bytes of the messages received
    last_receive: int = 0  # receive time (ns) of the last message received (0: none yet)

    @property
    def dropped(self) -> int:
        return (
            self.dropped_buffer
            + self.dropped_limit
            + self.dropped_stopped
            + self.dropped_window
            + self.dropped_type
        )

    def counts(self) -> tuple[str, int, int, int, int, int]:
        """(type, received, written, dropped, received bytes, last receive time)."""
        return (self.type, self.received, self.written, self.dropped, self.received_bytes, self.last_receive)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["dropped"] = self.dropped
        return d


#: a snapshot ring message's fate (:attr:`QueuedMessage.state`): only in the ring; handed to
#: a snapshot (its writer thread counts it); counted (written or dropped, never counted again)
IN_RING, TAKEN, COUNTED = 0, 1, 2


class QueuedMessage:
    """One serialized message taken by the recorder and waiting to be written: its topic,
    its connection (:data:`ConnectionKey`), its bytes, its receive time (ns) and the time it
    was sent (ns; its receive time when not known).  ``state`` (snapshot mode): see
    :data:`IN_RING` (a message can be in several overlapping snapshots; it is counted once)."""

    __slots__ = ("topic", "key", "data", "time", "publish", "state")

    def __init__(self, topic: str, key: ConnectionKey, data: bytes, t: int, publish: int | None = None) -> None:
        self.topic = topic
        self.key = key
        self.data = data
        self.time = t
        self.publish = t if publish is None else publish
        self.state = IN_RING


class SnapshotJob:
    """One snapshot trigger: the ring's messages (in receive order), when, where to, and the
    caller's future of the file's path.

    Its window is ``[start, end]`` (receive times, ns, both ends included; ``start`` None: all
    the ring held).  With a POST part (``post``: the window goes on after the trigger) the
    file stays open after the ring's messages are written: messages arriving in the window
    are written as they come (``post`` entries of the :class:`WorkQueue`) until the window
    is closed (``closed``: by the recorder, no more messages; the writer then finishes the
    file).  ``deadline``: the monotonic time it closes by itself (a trigger "now"), or None
    (closed by a message past its end, or at the stop).  ``count``: messages in its file;
    ``file``, ``error``, ``complete`` (its window ended before the recording): for the report.
    """

    __slots__ = ("items", "time", "path", "future", "at", "start", "end", "post", "deadline", "closed",
                 "count", "file", "error", "complete", "held")  # fmt: skip

    def __init__(
        self,
        items: list[QueuedMessage],
        t: float,
        path: str | None,
        future: Future[Path],
        *,
        at: int = 0,
        start: int | None = None,
        post: int = 0,
        deadline: float | None = None,
    ) -> None:
        self.items = items
        self.time = t
        self.path = path
        self.future = future
        self.at = at
        self.start = start
        self.end = at + post
        self.post = post
        self.deadline = deadline
        self.closed = not post
        self.count = 0
        self.file: str | None = None
        self.error: str | None = None
        self.complete = not post
        self.held = (0, 0)  # (bytes, messages) of the ring it took, waiting for the writer (no POST)

    def holds(self, t: int) -> bool:
        """Whether receive time ``t`` (ns) is in the window."""
        return (self.start is None or self.start <= t) and t <= self.end

    def to_dict(self) -> dict[str, Any]:
        """For the report: its file, its window (receive times in ns since the epoch, both
        ends included; ``start_ns`` None: all the ring held), the messages in it, whether its
        window ended before the recording did."""
        return {
            "file": self.file,
            "trigger_ns": self.at,
            "start_ns": self.start,
            "end_ns": self.end,
            "messages": self.count,
            "complete": self.complete,
            "error": self.error,
        }


#: the most snapshot files open at once (windows still recording after their trigger): a
#: trigger beyond it is refused (its future fails, a warning is reported)
MAX_OPEN_SNAPSHOTS = 8
#: the most snapshot jobs waiting for the writer thread (triggered, their file not started;
#: each holds at most one ring): a trigger beyond it is refused like one beyond
#: :data:`MAX_OPEN_SNAPSHOTS` (a flood of triggers from a peer never queues without bound;
#: the ring then goes to a later trigger)
MAX_WAITING_SNAPSHOTS = 64
#: the snapshots the report lists (the last ones); earlier ones are only counted
#: (``snapshots_not_listed``), so a recording taking triggers for days stays bounded
MAX_LISTED_SNAPSHOTS = 1000
#: the least a message counts against ``buffsize`` in the snapshot ring and the POST queue
#: beside its payload: at most ``buffsize // MESSAGE_COST`` messages are kept, so a flood
#: of empty messages (a 0-byte std_msgs/Empty) is bounded too
MESSAGE_COST = 256
#: how late a message may reach the recorder after its receive time (threads, a loaded
#: machine): a window is closed by a message this much past its end, or this long after it
LATE_NS = 500_000_000

#: what the writer thread writes of a snapshot still recording: a message and the snapshots
#: it belongs to, or (None) the end of those snapshots' windows
PostEntry = tuple["QueuedMessage | None", tuple[SnapshotJob, ...]]


def free_bytes(path: str) -> int:
    """The free bytes on the disk of folder ``path``."""
    return shutil.disk_usage(path).free


class WorkQueue:
    """What the recorder and its writer thread share, under one lock (:attr:`cond`): the
    queue of messages (at most ``buffer`` bytes of payload, 0: no limit), the snapshot
    ring and jobs, the per-topic counts and the recording's state (accepting, stopping,
    paused, the writer busy, why it stopped).

    The recorder puts work in (:meth:`push`, the ring, :meth:`add_job`); the writer thread
    takes it (:meth:`next_work`) and counts what it wrote or could not write.  ``say(text)``
    logs a line (the reason the recording ends).
    """

    def __init__(self, *, buffer: int, snapshot: bool, say: Callable[[str], None]) -> None:
        self.cond = threading.Condition()
        self.buffer = buffer
        self.snapshot = snapshot
        self._say = say
        self.messages: deque[QueuedMessage] = deque()
        self.queued_bytes = 0
        self.jobs: deque[SnapshotJob] = deque()
        self.ring: dict[str, deque[QueuedMessage]] = {}  # snapshot mode: per topic, oldest first
        self.ring_bytes = 0
        self.ring_count = 0  # messages in the ring (at most max_items)
        #: payload bytes and messages of the rings taken by triggers (no POST part) and not yet
        #: handed to the writer thread: they count against the ring's bounds
        self.waiting_bytes = 0
        self.waiting_count = 0
        self.post: deque[PostEntry] = deque()  # snapshot windows still recording: what to write
        self.post_bytes = 0
        self.post_count = 0  # messages (not window ends) in ``post`` (at most max_items)
        #: the most messages the ring (and the POST queue) keeps (0: no limit, as ``buffer``)
        self.max_items = max(1, buffer // MESSAGE_COST) if buffer else 0
        self.windows: list[SnapshotJob] = []  # the snapshots whose windows take messages now
        self.open_snapshots = 0  # snapshots with a POST part triggered and not finished by the writer
        #: the last MAX_LISTED_SNAPSHOTS snapshots triggered, in order (the report) ...
        self.snapshots: deque[SnapshotJob] = deque(maxlen=MAX_LISTED_SNAPSHOTS)
        self.snapshots_not_listed = 0  # ... and how many earlier ones fell out of it
        self.stats: dict[str, TopicStats] = {}
        self.accepting = True
        self.stopping = False
        self.paused = False
        self.busy = False  # the writer thread is writing a message or a snapshot
        self.stop_reason: str | None = None
        #: snapshot mode with ``--duration`` (no ``--split``): when the recording ends by
        #: itself (``time.monotonic()``), and the reason then given; None: never
        self.deadline: float | None = None
        self.deadline_reason = ""

    def counts(self) -> dict[str, tuple[str, int, int, int, int, int]]:
        """Per topic (type, received, written, dropped, received bytes, last receive time),
        copied under the lock (the live view reads it a few times a second)."""
        with self.cond:
            return {t: s.counts() for t, s in self.stats.items()}

    # --- the recorder's side (with the lock held) -------------------------------------------------
    def push(self, item: QueuedMessage) -> None:
        """Queue ``item``; drop the oldest queued messages while over the buffer (counted
        as ``dropped_buffer``); wake the writer thread."""
        q = self.messages
        q.append(item)
        self.queued_bytes += len(item.data)
        if self.buffer:
            while self.queued_bytes > self.buffer and q:
                old = q.popleft()
                self.queued_bytes -= len(old.data)
                self.stats[old.topic].dropped_buffer += 1
        self.cond.notify_all()

    def end(self, reason: str | None) -> None:
        """Stop accepting (``reason`` kept unless one was given before); what is queued is
        still written (with the lock held)."""
        if self.stop_reason is None:
            self.stop_reason = reason
        self.accepting = False
        self.stopping = True
        self.paused = False
        self.close_windows()
        self.cond.notify_all()

    def list_snapshot(self, job: SnapshotJob) -> None:
        """Keep ``job`` for the report: the last :data:`MAX_LISTED_SNAPSHOTS` are listed,
        earlier ones counted (with the lock held)."""
        if len(self.snapshots) == MAX_LISTED_SNAPSHOTS:
            self.snapshots_not_listed += 1
        self.snapshots.append(job)

    def add_post(self, item: QueuedMessage, jobs: tuple[SnapshotJob, ...]) -> None:
        """Queue ``item`` for the snapshots ``jobs`` still recording (their writer writes it
        as it comes); while over the buffer (bytes, or :attr:`max_items` messages) the oldest
        queued messages are dropped (counted as ``dropped_buffer`` unless written to a
        snapshot before)."""
        if item.state == IN_RING:
            item.state = TAKEN
        self.post.append((item, jobs))
        self.post_bytes += len(item.data)
        self.post_count += 1
        if self.buffer and (self.post_bytes > self.buffer or self.post_count > self.max_items):
            kept: deque[PostEntry] = deque()
            while self.post:
                entry = self.post.popleft()
                old = entry[0]
                if old is not None and (self.post_bytes > self.buffer or self.post_count > self.max_items):
                    self.post_bytes -= len(old.data)
                    self.post_count -= 1
                    if old.state != COUNTED:
                        old.state = COUNTED
                        self.stats[old.topic].dropped_buffer += 1
                else:
                    kept.append(entry)
            self.post = kept
        self.cond.notify_all()

    def close_window(self, job: SnapshotJob, *, complete: bool = True) -> None:
        """End the window of ``job`` (a snapshot still recording): no more messages go to it;
        its writer finishes the file after what is queued for it."""
        if job.closed:
            return
        job.closed = True
        job.complete = complete
        if job in self.windows:
            self.windows.remove(job)
        self.post.append((None, (job,)))
        self.cond.notify_all()

    def close_windows(self, *, complete: bool = False) -> None:
        """End every window still open (the recording stops: their files keep what they have)."""
        for job in list(self.windows):
            self.close_window(job, complete=complete)

    def _close_due(self) -> float:
        """Close the windows whose deadline passed; the seconds until the next one (at most 1).
        At the recording's own :attr:`deadline` (snapshot ``--duration``) it ends: the
        snapshots triggered are still written, the ring is not (as at a stop)."""
        wait = 1.0
        if self.deadline is not None and not self.stopping:
            left = self.deadline - time.monotonic()
            if left <= 0:
                self.finish(self.deadline_reason)
            else:
                wait = min(wait, left)
        if self.windows:
            now = time.monotonic()
            for job in list(self.windows):
                if job.deadline is not None:
                    if job.deadline <= now:
                        self.close_window(job)
                    else:
                        wait = min(wait, job.deadline - now)
        return wait

    # --- the writer thread's side ----------------------------------------------------------------
    def next_work(
        self, idle_check_due: Callable[[], bool]
    ) -> tuple[WorkKind, QueuedMessage | None, SnapshotJob | PostEntry | None]:
        """Wait for the next thing to do: ``("snapshot", None, job)``, ``("post", None,
        entry)`` (a :data:`PostEntry`), ``("message", item, None)``, ``("exit", ...)`` once
        stopping, or ``("", ...)`` when ``idle_check_due()`` says the free-space check is due
        while idle (asked every second).  Windows whose deadline passed are closed here."""
        kind: WorkKind = ""
        item: QueuedMessage | None = None
        job: SnapshotJob | PostEntry | None = None
        with self.cond:
            while True:
                wait = self._close_due()
                if self.jobs:
                    job = self.jobs.popleft()
                    self.waiting_bytes -= job.held[0]
                    self.waiting_count -= job.held[1]
                    kind = "snapshot"
                    break
                if self.post:
                    entry = self.post.popleft()
                    if entry[0] is not None:
                        self.post_bytes -= len(entry[0].data)
                        self.post_count -= 1
                    job = entry
                    kind = "post"
                    break
                if self.messages and not self.paused and not self.snapshot:
                    item = self.messages.popleft()
                    self.queued_bytes -= len(item.data)
                    kind = "message"
                    break
                if self.stopping:
                    kind = "exit"
                    break
                self.cond.wait(wait)
                if not self.stopping and idle_check_due():
                    break
            self.busy = kind in ("snapshot", "post", "message")
        return kind, item, job

    def done_one(self) -> None:
        """The writer thread finished the work :meth:`next_work` gave it."""
        with self.cond:
            self.busy = False
            self.cond.notify_all()

    def finish(self, reason: str) -> None:
        """End the recording by itself (the queue's rest is counted as dropped)."""
        with self.cond:
            if self.stop_reason is None:
                self.stop_reason = reason
                self._say(reason)
            self.accepting = False
            self.stopping = True
            self.paused = False
            self.close_windows()
            for it in self.messages:
                self.stats[it.topic].dropped_stopped += 1
            self.messages.clear()
            self.queued_bytes = 0
            self.cond.notify_all()

    def drop_left(self) -> None:
        """At the end: every message still queued, in the snapshot ring or in an unwritten
        snapshot job is counted as ``dropped_stopped``; such jobs' futures fail."""
        with self.cond:
            left = list(self.messages)
            self.messages.clear()
            self.queued_bytes = 0
            for it in left:
                self.stats[it.topic].dropped_stopped += 1
            for ring in self.ring.values():
                for it in ring:
                    self._count_stopped(it)
            self.ring = {}
            self.ring_bytes = 0
            self.ring_count = 0
            for job in self.jobs:
                for it in job.items:
                    self._count_stopped(it)
                job.error = "the recording stopped before this snapshot was written"
                if not job.future.done():
                    job.future.set_exception(WriteError(job.error))
            self.jobs.clear()
            self.waiting_bytes = self.waiting_count = 0
            for entry in self.post:
                if entry[0] is not None:
                    self._count_stopped(entry[0])
            self.post.clear()
            self.post_bytes = 0
            self.post_count = 0
            self.windows = []
            self.cond.notify_all()

    def _count_stopped(self, it: QueuedMessage) -> None:
        if it.state != COUNTED:
            it.state = COUNTED
            self.stats[it.topic].dropped_stopped += 1

    def count_written(self, item: QueuedMessage) -> None:
        """Count ``item`` as written (once: a message written to several snapshots too)."""
        with self.cond:
            if item.state != COUNTED:
                item.state = COUNTED
                self.stats[item.topic].written += 1

    def count_unwritten_item(self, item: QueuedMessage) -> None:
        """Count ``item`` as not written (unless counted before)."""
        with self.cond:
            self._count_stopped(item)

    def snapshot_done(self, job: SnapshotJob) -> None:
        """The writer finished (or gave up) the file of ``job``, a snapshot with a POST part."""
        with self.cond:
            self.open_snapshots -= 1
            if job in self.windows:  # (its file could not be started: no more messages for it)
                job.closed = True
                self.windows.remove(job)
            self.cond.notify_all()

    def count_stopped(self, topic: str) -> None:
        """Count a message of ``topic`` as not written because the recording has stopped
        (or stops now)."""
        with self.cond:
            self.stats[topic].dropped_stopped += 1

    def count_unwritten(self, job: SnapshotJob) -> None:
        """Count the messages of ``job`` as not written (its file could not be started)."""
        with self.cond:
            for it in job.items:
                self._count_stopped(it)

    def count_refused(self, item: QueuedMessage) -> None:
        """Count ``item`` as one the file could not take (``dropped_type``; once)."""
        with self.cond:
            if item.state != COUNTED:
                item.state = COUNTED
                self.stats[item.topic].dropped_type += 1
