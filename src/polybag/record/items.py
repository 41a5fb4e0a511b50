"""What the recorder's parts share: a queued message, a snapshot job, the per-topic counts,
and the work queue between the recorder (which takes messages) and its writer thread
(which writes them)."""

from __future__ import annotations

import shutil
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from polybag.errors import WriteError

#: what a connection of a topic is recorded by: (type, md5sum, definition, callerid, latching)
ConnectionKey = tuple[str, str, str, str, bool]

#: what the writer thread does next (:meth:`WorkQueue.next_work`): write a snapshot job or
#: a message, exit, or (``""``) check the free space while idle
WorkKind = Literal["snapshot", "message", "exit", ""]


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

    @property
    def dropped(self) -> int:
        return (
            self.dropped_buffer
            + self.dropped_limit
            + self.dropped_stopped
            + self.dropped_window
            + self.dropped_type
        )

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["dropped"] = self.dropped
        return d


class QueuedMessage:
    """One serialized message taken by the recorder and waiting to be written: its topic,
    its connection (:data:`ConnectionKey`), its bytes, its receive time (ns) and the time it
    was sent (ns; its receive time when not known)."""

    __slots__ = ("topic", "key", "data", "time", "publish")

    def __init__(self, topic: str, key: ConnectionKey, data: bytes, t: int, publish: int | None = None) -> None:
        self.topic = topic
        self.key = key
        self.data = data
        self.time = t
        self.publish = t if publish is None else publish


class SnapshotJob:
    """One snapshot trigger: the ring's messages (in receive order), when, where to, and the
    caller's future of the file's path."""

    __slots__ = ("items", "time", "path", "future")

    def __init__(self, items: list[QueuedMessage], t: float, path: str | None, future: Future[Path]) -> None:
        self.items = items
        self.time = t
        self.path = path
        self.future = future


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
        self.stats: dict[str, TopicStats] = {}
        self.accepting = True
        self.stopping = False
        self.paused = False
        self.busy = False  # the writer thread is writing a message or a snapshot
        self.stop_reason: str | None = None

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
        self.cond.notify_all()

    # --- the writer thread's side ----------------------------------------------------------------
    def next_work(
        self, idle_check_due: Callable[[], bool]
    ) -> tuple[WorkKind, QueuedMessage | None, SnapshotJob | None]:
        """Wait for the next thing to do: ``("snapshot", None, job)``, ``("message", item,
        None)``, ``("exit", ...)`` once stopping, or ``("", ...)`` when ``idle_check_due()``
        says the free-space check is due while idle (asked every second)."""
        kind: WorkKind = ""
        item: QueuedMessage | None = None
        job: SnapshotJob | None = None
        with self.cond:
            while True:
                if self.jobs:
                    job = self.jobs.popleft()
                    kind = "snapshot"
                    break
                if self.messages and not self.paused and not self.snapshot:
                    item = self.messages.popleft()
                    self.queued_bytes -= len(item.data)
                    kind = "message"
                    break
                if self.stopping:
                    kind = "exit"
                    break
                self.cond.wait(1.0)
                if not self.stopping and idle_check_due():
                    break
            self.busy = kind in ("snapshot", "message")
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
                    self.stats[it.topic].dropped_stopped += 1
            self.ring = {}
            self.ring_bytes = 0
            for job in self.jobs:
                for it in job.items:
                    self.stats[it.topic].dropped_stopped += 1
                if not job.future.done():
                    job.future.set_exception(WriteError("the recording stopped before this snapshot was written"))
            self.jobs.clear()
            self.cond.notify_all()

    def count_written(self, topic: str) -> None:
        with self.cond:
            self.stats[topic].written += 1

    def count_stopped(self, topic: str) -> None:
        """Count a message of ``topic`` as not written because the recording has stopped
        (or stops now)."""
        with self.cond:
            self.stats[topic].dropped_stopped += 1

    def count_unwritten(self, job: SnapshotJob) -> None:
        """Count the messages of ``job`` as not written (its file could not be started)."""
        with self.cond:
            for it in job.items:
                self.stats[it.topic].dropped_stopped += 1

    def count_refused(self, topic: str) -> None:
        """Count a message of ``topic`` the file could not take (``dropped_type``)."""
        with self.cond:
            self.stats[topic].dropped_type += 1
