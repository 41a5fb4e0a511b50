"""The recorder core, independent of where messages come from.

``Recorder(options)`` takes serialized ROS 1 messages through :meth:`Recorder.write` (the
in-process API, also what the live source calls from its connection threads), keeps them in
a bounded queue and writes them from one writer thread through ``polybag.Writer``::

    with Recorder(RecordOptions(output_name="run.bag")) as rec:
        rec.write("/chatter", payload, type="std_msgs/String", md5sum=md5, definition=text)
    print(rec.report())

As rosbag does:

- the queue holds at most ``buffsize`` MB of payload (0: no limit); when a message would
  exceed it the OLDEST queued messages are dropped.  Every drop is counted per topic
  (``stats[topic].dropped_buffer``), nothing is lost silently;
- ``--split``: before a message is written, a part that is over ``--size`` (bytes of the
  file so far, the open chunk counted uncompressed) or whose time window of ``--duration``
  the message falls after is finished and the next part started; the message goes into the
  new part, so no message is lost or duplicated at a boundary.  The duration windows start
  at the first message's receive time and are back to back (a message exactly at the end of a
  window stays in it).  Without ``--split`` reaching a limit stops the recording;
- ``--max-splits N`` keeps N finished parts (plus the one being written), deleting the oldest;
- ``-l N``: N messages per topic, the rest counted as ``dropped_limit`` (the live source
  unsubscribes); when every named topic has its N, recording stops (with ``-a``/``-e``/
  ``--node``, as rosbag: when every topic subscribed so far has its N; the source's
  ``limit_done()`` says so);
- ``--snapshot``: messages stay in a ring per topic, bounded by ``buffsize`` MB in all (the
  oldest message of any topic goes first, counted as ``dropped_buffer``) and, with
  ``--snapshot-window S``, by time: only the last S seconds (by receive time) of each topic
  are kept (older ones counted as ``dropped_window``).  :meth:`trigger` (live: SIGUSR1 or a
  message on ``snapshot_trigger`` in the recorder's namespace) returns at once with a future:
  the ring is handed to the writer thread, which writes it to a NEW file (the date stamp, and
  ``-1``, ``-2``... when that name is taken) while recording goes on into an empty ring; the
  future's result is the final path.  What is still buffered at the end is counted as
  ``dropped_stopped``.  ``--duration`` (without ``--split``) ends a snapshot recording that
  long after it started, as a stop does: the snapshots triggered are written and finished;
- ``--snapshot-window PRE:POST`` (``snapshot_post``): each snapshot also keeps recording POST
  seconds after its trigger.  Its window is ``[trigger - PRE, trigger + POST]`` by receive
  time, both ends included (``:POST``: all the ring holds, then POST s); a message belongs to
  EVERY snapshot whose window holds it (so triggers never empty the ring: each snapshot is
  its own file; a message written to several counts once as ``written``; the report's
  ``snapshots`` gives each one's file, window and messages).  The ring's part is written at
  the trigger, the rest as it arrives (queued at most ``buffsize`` MB, like the ring); the
  file is finished when the window ends: POST s after a trigger "now" (plus
  :data:`~polybag.record.items.LATE_NS` for messages late to the recorder), when a message
  that much past its end arrives, or at the stop (then it keeps what it has: ``complete``
  false).  At most :data:`~polybag.record.items.MAX_OPEN_SNAPSHOTS` are open at once: a
  trigger beyond is refused (its future fails; a warning counts them);
- what snapshots keep stays bounded whatever peers send (the trigger topic is open to any
  of them): the ring and the POST queue each hold at most ``buffsize`` MB and
  ``buffsize // MESSAGE_COST`` messages (empty ones too), the ring together with the rings
  taken by triggers still waiting for the writer thread; at most
  :data:`~polybag.record.items.MAX_WAITING_SNAPSHOTS` triggers wait (more are refused, the
  ring waits for a later one); the report lists
  the last :data:`~polybag.record.items.MAX_LISTED_SNAPSHOTS` snapshots and counts the
  earlier ones (``snapshots_not_listed``);
- a topic keeps the type (and md5sum) of its first message: messages of another type on it
  are refused (``dropped_type``) with a warning naming the topic (``warnings``);
- ``--min-space``: free space is checked when a file starts and every second; below it the
  recording stops with a clear message (``stop_reason``).
"""

from __future__ import annotations

import heapq
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from polybag.errors import PolybagError, UsageError, WriteError
from polybag.record.files import NameRegistry, OutputFiles
from polybag.record.items import (
    IN_RING,
    LATE_NS,
    MAX_OPEN_SNAPSHOTS,
    MAX_WAITING_SNAPSHOTS,
    TAKEN,
    QueuedMessage,
    SnapshotJob,
    TopicStats,
    WorkQueue,
    free_bytes,
)
from polybag.record.options import RecordOptions
from polybag.record.writing import WriterThread


def remove_unwritten(report: dict[str, Any]) -> list[str]:
    """After a failed start: remove the files of ``report`` (a :meth:`Recorder.report`) if no
    message was written to them, so that no empty bag is left behind; only what the
    recording created (it never replaces a file): a rosbag2 bag directory loses its own
    files, and the directory only if nothing else is in it.  The paths removed."""
    if report["totals"]["written"]:
        return []
    removed: list[str] = []
    for f in report["files"]:
        try:
            if os.path.isdir(f) and not os.path.islink(f):
                base = os.path.basename(os.path.normpath(f))
                for entry in os.listdir(f):
                    stem = entry.split(".", 1)[0]
                    if entry == "metadata.yaml" or stem.startswith(base + "_"):
                        os.remove(os.path.join(f, entry))
                os.rmdir(f)
            else:
                os.remove(f)
            removed.append(f)
        except OSError:
            pass
    return removed


def start_failure(e: BaseException, what: str) -> WriteError | None:
    """The error to raise when starting ``what`` (a recording, the recorders' ROS node) failed
    with ``e``: a RuntimeError or MemoryError (no thread or memory left) becomes a WriteError
    saying so; None: ``e`` itself is raised."""
    if isinstance(e, (RuntimeError, MemoryError)) and not isinstance(e, PolybagError):
        return WriteError(
            f"cannot start {what}: {type(e).__name__}: {e} "
            "(too many recorders or threads for the memory or limits allowed?)"
        )
    return None


class Recorder:
    """Record messages to bag/MCAP files with rosbag's options (see the module docstring).

    ``source``: an object with ``start(recorder)`` and ``stop()`` that calls :meth:`write`
    (``polybag.record.live.LiveSource`` subscribes on a ROS master); None for the in-process
    API.  ``disk_free(directory) -> bytes`` and ``log(text)`` can be replaced (tests).

    The recorder takes messages (:meth:`write`, :meth:`trigger`) into a
    :class:`~polybag.record.items.WorkQueue`; a :class:`~polybag.record.writing.WriterThread`
    writes them into its :class:`~polybag.record.files.OutputFiles`.
    """

    def __init__(
        self,
        options: RecordOptions | None = None,
        source: Any = None,
        *,
        disk_free: Callable[[str], int] | None = None,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.options = options = options if options is not None else RecordOptions()
        options.validate()
        self.source = source
        self._log = log
        self._limit = int(options.limit)
        self._window = options.window_ns
        self._post = options.post_ns
        self._refused_triggers = 0
        self._refused_waiting = 0  # triggers refused: MAX_WAITING_SNAPSHOTS waiting for the writer
        self._work = WorkQueue(buffer=options.buffer_bytes, snapshot=options.snapshot, say=self.say)
        self._cond = self._work.cond
        self.stats: dict[str, TopicStats] = self._work.stats
        #: per topic (type, received, written, dropped, bytes, last receive), a locked copy
        self.counts = self._work.counts
        self._accepted: dict[str, int] = {}
        self.errors: list[str] = []
        self.warnings: list[str] = []
        self.done = threading.Event()  # set when the writer thread has finished everything
        self._types: dict[str, tuple[str, str]] = {}  # topic -> (type, md5sum) of its first message
        self._refused: set[tuple[str, str, str]] = set()
        self._latched: dict[tuple[str, str], QueuedMessage] = {}
        self._output = self._new_files(
            options,
            names=NameRegistry(),  # (a group's recorders share one: share_names)
            disk_free=disk_free or free_bytes,
            say=self.say,
            errors=self.errors,
            low_space=self._work.finish,
        )
        self._writing = WriterThread(
            options, self._work, self._output, latched=self._latched, errors=self.errors, done=self.done
        )
        self._thread: threading.Thread | None = None
        self._started = False
        self._closed = False

    def _new_files(self, options: RecordOptions, **parts: Any) -> OutputFiles:
        """The recorder's files part (:class:`~polybag.record.ros2_recorder.Ros2Recorder`: ROS 2 files)."""
        return OutputFiles(options, **parts)

    # --- state --------------------------------------------------------------------------------
    @property
    def files(self) -> list[str]:
        """The finished files, in order (deleted ones included)."""
        return self._output.files

    @property
    def deleted(self) -> list[str]:
        """The files removed by ``--max-splits``."""
        return self._output.deleted

    @property
    def current_file(self) -> str | None:
        """The file being written (as ``NAME.active``), or None."""
        return self._output.current_file

    @property
    def stop_reason(self) -> str | None:
        """Why the recording stopped (None while it goes on)."""
        return self._work.stop_reason

    def share_names(self, names: NameRegistry) -> None:
        """Claim output paths in ``names`` (shared by a group's recorders, so that no two of
        them ever take one name); before :meth:`start`."""
        self._output.names = names

    def say(self, text: str) -> None:
        """Log a line: to ``log`` if given, else to stderr unless quiet."""
        if self._log is not None:
            self._log(text)
        elif not self.options.quiet:
            print(f"[polybag record] {text}", file=sys.stderr, flush=True)

    # --- lifecycle ----------------------------------------------------------------------------
    def start(self) -> Recorder:
        if self._started:
            return self
        self._started = True
        output = self._output
        try:
            output.check_first()
            if not self.options.snapshot and output.disk_ok():
                output.open()
            thread = self._writing.start()  # (RuntimeError when no thread can be started: memory, limits)
        except BaseException as e:
            name = self.current_file or self.options.output_name or self.options.output_prefix or "the bag"
            self._abandon()
            failure = start_failure(e, f"recording {name}")
            if failure is not None:
                raise failure from None
            raise
        self._thread = thread
        o = self.options
        if o.snapshot and o.max_duration_ns and not o.split:  # (no file to time: the recording's own clock)
            with self._cond:
                output.start = time.time_ns()  # (the live view's time_left counts from it)
                self._work.deadline = time.monotonic() + o.max_duration_ns / 1e9
                self._work.deadline_reason = f"--duration: the recording reached {o.duration}"
                self._cond.notify_all()
        if self.source is not None:
            try:
                self.source.start(self)
            except BaseException:
                rep = self.close(raise_errors=False)
                remove_unwritten(rep)
                raise
        return self

    def _abandon(self) -> None:
        """A start that failed before the writer thread ran: drop the file begun
        (``NAME.active`` removed) and end."""
        with self._cond:
            self._work.accepting = False
            self._work.stopping = True
        self._output.abandon()
        self.done.set()

    def on_open(self, hook: Callable[[str], None]) -> None:
        """Call ``hook(path)`` whenever a file starts (``--publish`` uses it)."""
        self._output.open_hooks.append(hook)

    def stop(self, reason: str = "stopped") -> None:
        """Stop accepting messages; the writer thread writes what is queued and finishes the file."""
        with self._cond:
            self._work.end(reason)
        src = self.source
        if src is not None:
            try:
                src.stop()
            except Exception as e:  # noqa: BLE001 - stopping: report, keep finishing the bag
                self.errors.append(f"stopping the source: {e}")

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the recording ends by itself (limit, size/duration without --split, no space)."""
        return self.done.wait(timeout)

    def close(self, *, raise_errors: bool = True) -> dict[str, Any]:
        """Stop, write what is queued, finish the file; returns :meth:`report`."""
        if not self._started:
            self._started = True
            self.done.set()
        self.stop()
        if self._thread is not None:
            self._thread.join()
        self._closed = True
        if raise_errors and self.errors:
            raise WriteError("recording failed: " + "; ".join(self.errors))
        return self.report()

    def __enter__(self) -> Recorder:
        return self.start()

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.close(raise_errors=exc_type is None)

    # --- flow control (tests, tools) --------------------------------------------------------------
    def pause(self) -> None:
        """Hold the writer thread: messages stay queued (and the buffer can overflow)."""
        with self._cond:
            self._work.paused = True

    def resume(self) -> None:
        with self._cond:
            self._work.paused = False
            self._cond.notify_all()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything queued so far is written (True) or ``timeout`` passes."""
        end = None if timeout is None else time.monotonic() + timeout
        work = self._work
        with self._cond:
            while (
                (work.messages and not self.options.snapshot and not self.done.is_set())
                or work.jobs
                or work.post
                or work.busy
            ):
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(0.05 if left is None else min(left, 0.05))
        return True

    # --- input --------------------------------------------------------------------------------
    def selects(self, topic: str) -> bool:
        return self.options.selects(topic)

    def write(
        self,
        topic: str,
        data: bytes | bytearray | memoryview,
        type: str,  # noqa: A002 - rosbag's name
        md5sum: str = "*",
        definition: str | bytes = "",
        receive_time: int | None = None,
        *,
        callerid: str = "",
        latching: bool = False,
        publish_time: int | None = None,
    ) -> bool:
        """Queue one serialized message; True if it was queued (False: not selected, over the
        limit, or the recording stopped; counted in :attr:`stats` except when not selected).
        ``publish_time``: when it was sent (ns; default: its receive time)."""
        if not type:
            raise UsageError(f"topic {topic}: a message type is needed (type=)")
        if not self._started:
            self.start()
        if not self.options.selects(topic):
            return False
        t = time.time_ns() if receive_time is None else int(receive_time)
        if isinstance(definition, (bytes, bytearray, memoryview)):
            definition = bytes(definition).decode("utf-8", "replace")
        item = QueuedMessage(
            topic, (type, md5sum or "*", definition, callerid or "", bool(latching)), bytes(data), t, publish_time
        )
        limit_hit = False
        work = self._work
        with self._cond:
            st = work.stats.get(topic)
            if st is None:
                st = work.stats[topic] = TopicStats(type=type)
            st.received += 1
            st.received_bytes += len(item.data)
            st.last_receive = t
            if not work.accepting:
                st.dropped_stopped += 1
                return False
            if not self._type_ok(topic, type, item.key[1]):
                st.dropped_type += 1
                return False
            if self._limit:
                n = self._accepted.get(topic, 0)
                if n >= self._limit:
                    st.dropped_limit += 1
                    return False
                self._accepted[topic] = n + 1
                limit_hit = n + 1 == self._limit
            if latching and self.options.repeat_latched:
                self._latched[(topic, item.key[3])] = item
            if self.options.snapshot:
                if work.windows:
                    self._to_windows(item)
                self._ring_add(item)
                return True
            work.push(item)
        if limit_hit:
            self._limit_reached(topic)
        return True

    def _type_ok(self, topic: str, typ: str, md5: str) -> bool:
        """False (and a warning, once per topic and type) if ``topic`` was first seen with
        another type or md5sum (called with the lock held)."""
        known = self._types.get(topic)
        if known is None:
            self._types[topic] = (typ, md5)
            return True
        if known[0] == typ and (known[1] == md5 or "*" in (known[1], md5)):
            return True
        key = (topic, typ, md5)
        if key not in self._refused:
            self._refused.add(key)
            text = (
                f"topic {topic} changed type: it is recorded as {known[0]} ({known[1]}), "
                f"messages of {typ} ({md5}) on it are refused"
            )
            self.warnings.append(text)
            self.say(f"warning: {text}")
        return False

    def _ring_add(self, item: QueuedMessage) -> None:
        """Snapshot mode: keep ``item`` in its topic's ring; drop what the window or the
        buffer no longer holds (called with the lock held)."""
        work = self._work
        ring = work.ring.get(item.topic)
        if ring is None:
            ring = work.ring[item.topic] = deque()
        ring.append(item)
        work.ring_bytes += len(item.data)
        work.ring_count += 1
        if self._window:
            self._prune_window(ring, item.time - self._window)
        if work.buffer:  # (with the rings taken by triggers still waiting for the writer)
            while work.ring_count and (
                work.ring_bytes + work.waiting_bytes > work.buffer
                or work.ring_count + work.waiting_count > work.max_items
            ):
                oldest = min((r for r in work.ring.values() if r), key=lambda r: r[0].time)
                old = oldest.popleft()
                work.ring_bytes -= len(old.data)
                work.ring_count -= 1
                if old.state == IN_RING:
                    work.stats[old.topic].dropped_buffer += 1

    def _to_windows(self, item: QueuedMessage) -> None:
        """Snapshots still recording: queue ``item`` for each one whose window holds it;
        close those it is :data:`LATE_NS` past the end of (called with the lock held)."""
        work = self._work
        t = item.time
        members: list[SnapshotJob] = []
        for job in list(work.windows):
            if job.holds(t):
                members.append(job)
            elif t > job.end + LATE_NS:
                work.close_window(job)
        if members:
            work.add_post(item, tuple(members))

    def _prune_window(self, ring: deque[QueuedMessage], cutoff: int) -> None:
        work = self._work
        while ring and ring[0].time < cutoff:
            old = ring.popleft()
            work.ring_bytes -= len(old.data)
            work.ring_count -= 1
            if old.state == IN_RING:  # (else a snapshot has it: counted when written)
                work.stats[old.topic].dropped_window += 1

    def _limit_reached(self, topic: str) -> None:
        src = self.source
        if src is not None and hasattr(src, "unsubscribe"):
            try:
                src.unsubscribe(topic)
            except Exception as e:  # noqa: BLE001 - the messages are ignored anyway
                self.errors.append(f"unsubscribing {topic}: {e}")
        o = self.options
        if o.topics and not (o.all or o.regex or o.node):
            names = {t if t.startswith("/") else "/" + t for t in o.topics}
            with self._cond:
                full = [t for t, n in self._accepted.items() if n >= self._limit]
            got = {t if t.startswith("/") else "/" + t for t in full}
            if names <= got:
                with self._cond:  # (what is queued is still written)
                    self._work.end(f"-l/--limit: {self._limit} messages recorded on every topic")
        elif o.all or o.regex or o.node:  # (rosbag: every topic subscribed so far has its N)
            check = getattr(src, "limit_done", None)
            try:
                finished = bool(check()) if check is not None else False
            except Exception as e:  # noqa: BLE001 - asked again when the next topic has its N
                self.warnings.append(f"-l/--limit: cannot tell whether every topic has its messages: {e}")
                finished = False
            if finished:
                with self._cond:  # (what is queued is still written)
                    self._work.end(f"-l/--limit: {self._limit} messages recorded on every topic subscribed")

    def _refuse(self, fut: Future[Path], times: int, text: str) -> Future[Path]:
        """``fut`` failed with the refusal ``text``; said as a warning the first time (``times``
        is 1), counted in the summary after."""
        if times == 1:
            self.say(f"warning: {text}")
        fut.set_exception(UsageError(text))
        return fut

    def trigger(self, path: str | os.PathLike[str] | None = None, *, at: int | None = None) -> Future[Path]:
        """Snapshot mode: hand the ring to the writer thread and return at once.

        The ring restarts empty (recording goes on); the writer thread writes what it held
        (the last ``--snapshot-window`` seconds before ``at``, default now, in ns) to a new
        file: ``path`` if given (refused if it exists), else a name from ``-o``/``-O`` with the
        date, and ``-1``, ``-2``... if that name is taken.  The returned future's result is
        the final :class:`~pathlib.Path` once the file is complete; it fails with the error if
        the file cannot be written (or the recording has stopped).

        With ``--snapshot-window PRE:POST`` the ring is not emptied: the file gets what the
        ring holds in ``[at - PRE, at + POST]`` and then the messages of that window as they
        come; the future's result comes when the window has ended (see the module docstring;
        a trigger ``at`` a given time ends by message times or at the stop only).  Beyond
        :data:`MAX_OPEN_SNAPSHOTS` open at once, or with :data:`MAX_WAITING_SNAPSHOTS` triggers
        still waiting for the writer thread, the future fails with a :class:`UsageError` (the
        ring stays for a later trigger).
        """
        if not self.options.snapshot:
            raise UsageError("trigger() needs snapshot mode (-s/--snapshot)")
        fut: Future[Path] = Future()
        fut.set_running_or_notify_cancel()
        if not self._started:
            self.start()
        work = self._work
        with self._cond:
            if work.stopping or self.done.is_set():
                fut.set_exception(UsageError("the recording has stopped; no snapshot written"))
                return fut
            post = self._post
            if post and work.open_snapshots >= MAX_OPEN_SNAPSHOTS:
                self._refused_triggers += 1
                return self._refuse(
                    fut,
                    self._refused_triggers,
                    f"snapshot trigger refused: {MAX_OPEN_SNAPSHOTS} snapshots are still recording "
                    "(--snapshot-window PRE:POST); trigger again when one has ended",
                )
            if len(work.jobs) >= MAX_WAITING_SNAPSHOTS:
                self._refused_waiting += 1
                return self._refuse(
                    fut,
                    self._refused_waiting,
                    f"snapshot trigger refused: {MAX_WAITING_SNAPSHOTS} snapshots are waiting to be written; "
                    "the ring is kept for a later trigger",
                )
            t_at = time.time_ns() if at is None else int(at)
            start = t_at - self._window if self._window else None
            if start is not None:
                for ring in work.ring.values():
                    self._prune_window(ring, start)
            rings = [r for r in work.ring.values() if r]
            items = list(heapq.merge(*rings, key=lambda it: it.time)) if len(rings) > 1 else list(*rings)
            name = None if path is None else os.fspath(path)
            if post:  # (a message belongs to every window that holds it: the ring stays)
                items = [it for it in items if it.time <= t_at + post]
                deadline = None if at is not None else time.monotonic() + (post + LATE_NS) / 1e9
                job = SnapshotJob(items, time.time(), name, fut, at=t_at, start=start, post=post, deadline=deadline)
                work.windows.append(job)
                work.open_snapshots += 1
            else:
                job = SnapshotJob(items, time.time(), name, fut, at=t_at, start=start)
                job.held = (work.ring_bytes, work.ring_count)
                work.waiting_bytes += work.ring_bytes
                work.waiting_count += work.ring_count
                work.ring = {}
                work.ring_bytes = 0
                work.ring_count = 0
            for it in items:
                if it.state == IN_RING:
                    it.state = TAKEN
            work.list_snapshot(job)
            work.jobs.append(job)
            self._cond.notify_all()
        return fut

    # --- results ----------------------------------------------------------------------------------
    @property
    def output(self) -> OutputFiles:
        """The files part, read by the live stats view (:mod:`polybag.record.stats`): its
        ``size``, ``split_index``, ``start``, ``current_file``."""
        return self._output

    @property
    def queued_bytes(self) -> int:
        """Bytes of payload waiting: the write queue, or the snapshot ring (and what waits for
        the snapshots still recording)."""
        work = self._work
        return work.ring_bytes + work.post_bytes if self.options.snapshot else work.queued_bytes

    def report(self) -> dict[str, Any]:
        with self._cond:
            topics = {t: s.to_dict() for t, s in sorted(self.stats.items())}
            snapshots = [job.to_dict() for job in self._work.snapshots]
            refused = self._refused_triggers
            waiting = self._refused_waiting
            not_listed = self._work.snapshots_not_listed
        totals = {k: sum(s[k] for s in topics.values()) for k in ("received", "written", "dropped")}
        warnings = list(self.warnings)
        if refused:
            warnings.append(
                f"{refused} snapshot trigger(s) refused: {MAX_OPEN_SNAPSHOTS} snapshots were still recording"
            )
        if waiting:
            warnings.append(
                f"{waiting} snapshot trigger(s) refused: {MAX_WAITING_SNAPSHOTS} snapshots were waiting to be written"
            )
        extra: dict[str, Any] = (
            {"snapshots": snapshots, "snapshots_not_listed": not_listed} if self.options.snapshot else {}
        )
        return {
            "files": [f for f in self.files if f not in self.deleted],
            "deleted": list(self.deleted),
            "current_file": self.current_file,
            "stop_reason": self.stop_reason,
            "errors": list(self.errors),
            "warnings": warnings,
            "topics": topics,
            "totals": totals,
            **extra,
        }
