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
  unsubscribes); when every named topic has its N, recording stops;
- ``--snapshot``: messages stay in a ring per topic, bounded by ``buffsize`` MB in all (the
  oldest message of any topic goes first, counted as ``dropped_buffer``) and, with
  ``--snapshot-window S``, by time: only the last S seconds (by receive time) of each topic
  are kept (older ones counted as ``dropped_window``).  :meth:`trigger` (live: SIGUSR1 or a
  message on ``snapshot_trigger`` in the recorder's namespace) returns at once with a future:
  the ring is handed to the writer thread, which writes it to a NEW file (the date stamp, and
  ``-1``, ``-2``... when that name is taken) while recording goes on into an empty ring; the
  future's result is the final path.  What is still buffered at the end is counted as
  ``dropped_stopped``;
- a topic keeps the type (and md5sum) of its first message: messages of another type on it
  are refused (``dropped_type``) with a warning naming the topic (``warnings``);
- ``--min-space``: free space is checked when a file starts and every second; below it the
  recording stops with a clear message (``stop_reason``).
"""

from __future__ import annotations

import heapq
import os
import shutil
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from polybag.errors import OutputExistsError, UsageError, WriteError
from polybag.record.options import RecordOptions

# Bytes a message adds besides its payload (bag: record header, length, index entry; MCAP:
# message record and its index entry): enough to keep --size honest for small messages.
_BAG_MSG_OVERHEAD = 4 + 38 + 4 + 12
_MCAP_MSG_OVERHEAD = 31 + 16
_BAG_HEADER = 13 + 4096


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


class _Item:
    __slots__ = ("topic", "key", "data", "time")

    def __init__(self, topic: str, key: tuple[str, str, str, str, bool], data: bytes, t: int) -> None:
        self.topic = topic
        self.key = key  # (type, md5sum, definition, callerid, latching)
        self.data = data
        self.time = t


class _Snapshot:
    """One trigger: the ring's messages (in receive order), when, where to, and the caller's future."""

    __slots__ = ("items", "time", "path", "future")

    def __init__(self, items: list[_Item], t: float, path: str | None, future: Future[Path]) -> None:
        self.items = items
        self.time = t
        self.path = path
        self.future = future


def _free_bytes(path: str) -> int:
    return shutil.disk_usage(path).free


def _remove_if_unwritten(report: dict[str, Any], files: Iterable[str]) -> None:
    """After a failed start: delete ``files`` when ``report`` (a :meth:`Recorder.report`)
    counts no message written, so that no empty bag is left behind (a file that cannot be
    deleted is left)."""
    if report["totals"]["written"]:
        return
    for f in files:
        try:
            os.remove(f)
        except OSError:
            pass


class Recorder:
    """Record messages to bag/MCAP files with rosbag's options (see the module docstring).

    ``source``: an object with ``start(recorder)`` and ``stop()`` that calls :meth:`write`
    (``polybag.record.live.LiveSource`` subscribes on a ROS master); None for the in-process
    API.  ``disk_free(directory) -> bytes`` and ``log(text)`` can be replaced (tests).
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
        self._disk_free = disk_free or _free_bytes
        self._log = log
        self._cond = threading.Condition()
        self._queue: deque[_Item] = deque()
        self._queue_bytes = 0
        self._buffer = options.buffer_bytes
        self._limit = int(options.limit)
        self._max_size = options.max_size_bytes
        self._max_dur = options.max_duration_ns
        self._min_space = options.min_space_bytes
        self.stats: dict[str, TopicStats] = {}
        self._accepted: dict[str, int] = {}
        self.files: list[str] = []  # finished files, in order (deleted ones included)
        self.deleted: list[str] = []  # removed by --max-splits
        self.current_file: str | None = None  # the file being written (as NAME.active)
        self.stop_reason: str | None = None
        self.errors: list[str] = []
        self.done = threading.Event()  # set when the writer thread has finished everything
        self._accepting = True
        self._stopping = False
        self._paused = False
        self._jobs: deque[_Snapshot] = deque()
        self._ring: dict[str, deque[_Item]] = {}  # snapshot mode: per topic, oldest first
        self._ring_bytes = 0
        self._window = options.window_ns
        self._types: dict[str, tuple[str, str]] = {}  # topic -> (type, md5sum) of its first message
        self._refused: set[tuple[str, str, str]] = set()
        self.warnings: list[str] = []
        self._latched: dict[tuple[str, str], _Item] = {}
        self._kept: deque[str] = deque()
        self._used_names: set[str] = set()
        self._writer: Any = None
        self._channels: dict[tuple[str, tuple[str, str, str, str, bool]], Any] = {}
        self._bag_bytes = 0
        self._bag_start: int | None = None
        self._split_index = 0
        self._next_disk_check = 0.0
        self._thread: threading.Thread | None = None
        self._started = False
        self._closed = False
        self._open_hooks: list[Callable[[str], None]] = []
        self._overhead = _MCAP_MSG_OVERHEAD if options.output_format == "mcap" else _BAG_MSG_OVERHEAD

    # --- lifecycle ----------------------------------------------------------------------------
    def start(self) -> Recorder:
        if self._started:
            return self
        self._started = True
        if not self.options.snapshot and self._disk_ok():
            self._open()
        self._thread = threading.Thread(target=self._run, name="polybag-record-writer", daemon=True)
        self._thread.start()
        if self.source is not None:
            try:
                self.source.start(self)
            except BaseException:
                rep = self.close(raise_errors=False)
                _remove_if_unwritten(rep, rep["files"])
                raise
        return self

    def on_open(self, hook: Callable[[str], None]) -> None:
        """Call ``hook(path)`` whenever a file starts (``--publish`` uses it)."""
        self._open_hooks.append(hook)

    def stop(self, reason: str = "stopped") -> None:
        """Stop accepting messages; the writer thread writes what is queued and finishes the file."""
        with self._cond:
            if self.stop_reason is None:
                self.stop_reason = reason
            self._accepting = False
            self._stopping = True
            self._paused = False
            self._cond.notify_all()
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
            self._paused = True

    def resume(self) -> None:
        with self._cond:
            self._paused = False
            self._cond.notify_all()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything queued so far is written (True) or ``timeout`` passes."""
        end = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while (
                (self._queue and not self.options.snapshot and not self.done.is_set())
                or self._jobs
                or self._busy
            ):
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(0.05 if left is None else min(left, 0.05))
        return True

    _busy = False

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
    ) -> bool:
        """Queue one serialized message; True if it was queued (False: not selected, over the
        limit, or the recording stopped; counted in :attr:`stats` except when not selected)."""
        if not type:
            raise UsageError(f"topic {topic}: a message type is needed (type=)")
        if not self._started:
            self.start()
        if not self.options.selects(topic):
            return False
        t = time.time_ns() if receive_time is None else int(receive_time)
        if isinstance(definition, (bytes, bytearray, memoryview)):
            definition = bytes(definition).decode("utf-8", "replace")
        item = _Item(topic, (type, md5sum or "*", definition, callerid or "", bool(latching)), bytes(data), t)
        limit_hit = False
        with self._cond:
            st = self.stats.get(topic)
            if st is None:
                st = self.stats[topic] = TopicStats(type=type)
            st.received += 1
            if not self._accepting:
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
                self._ring_add(item)
                return True
            q = self._queue
            q.append(item)
            self._queue_bytes += len(item.data)
            if self._buffer:
                while self._queue_bytes > self._buffer and q:
                    old = q.popleft()
                    self._queue_bytes -= len(old.data)
                    self.stats[old.topic].dropped_buffer += 1
            self._cond.notify_all()
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
            self._say(f"warning: {text}")
        return False

    def _ring_add(self, item: _Item) -> None:
        """Snapshot mode: keep ``item`` in its topic's ring; drop what the window or the
        buffer no longer holds (called with the lock held)."""
        ring = self._ring.get(item.topic)
        if ring is None:
            ring = self._ring[item.topic] = deque()
        ring.append(item)
        self._ring_bytes += len(item.data)
        if self._window:
            self._prune_window(ring, item.time - self._window)
        if self._buffer:
            while self._ring_bytes > self._buffer:
                oldest = min((r for r in self._ring.values() if r), key=lambda r: r[0].time)
                old = oldest.popleft()
                self._ring_bytes -= len(old.data)
                self.stats[old.topic].dropped_buffer += 1

    def _prune_window(self, ring: deque[_Item], cutoff: int) -> None:
        while ring and ring[0].time < cutoff:
            old = ring.popleft()
            self._ring_bytes -= len(old.data)
            self.stats[old.topic].dropped_window += 1

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
                    if self.stop_reason is None:
                        self.stop_reason = f"-l/--limit: {self._limit} messages recorded on every topic"
                    self._accepting = False
                    self._stopping = True
                    self._paused = False
                    self._cond.notify_all()

    def trigger(self, path: str | os.PathLike[str] | None = None, *, at: int | None = None) -> Future[Path]:
        """Snapshot mode: hand the ring to the writer thread and return at once.

        The ring restarts empty (recording goes on); the writer thread writes what it held
        (the last ``--snapshot-window`` seconds before ``at``, default now, in ns) to a new
        file: ``path`` if given (refused if it exists), else a name from ``-o``/``-O`` with the
        date, and ``-1``, ``-2``... if that name is taken.  The returned future's result is
        the final :class:`~pathlib.Path` once the file is complete; it fails with the error if
        the file cannot be written (or the recording has stopped).
        """
        if not self.options.snapshot:
            raise UsageError("trigger() needs snapshot mode (-s/--snapshot)")
        fut: Future[Path] = Future()
        fut.set_running_or_notify_cancel()
        if not self._started:
            self.start()
        with self._cond:
            if self._stopping or self.done.is_set():
                fut.set_exception(UsageError("the recording has stopped; no snapshot written"))
                return fut
            if self._window:
                cutoff = (time.time_ns() if at is None else int(at)) - self._window
                for ring in self._ring.values():
                    self._prune_window(ring, cutoff)
            rings = [r for r in self._ring.values() if r]
            items = list(heapq.merge(*rings, key=lambda it: it.time)) if len(rings) > 1 else list(*rings)
            self._ring = {}
            self._ring_bytes = 0
            self._jobs.append(_Snapshot(items, time.time(), None if path is None else os.fspath(path), fut))
            self._cond.notify_all()
        return fut

    # --- writer thread --------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            while True:
                kind = ""
                item: _Item | None = None
                job: _Snapshot | None = None
                with self._cond:
                    while True:
                        if self._jobs:
                            job = self._jobs.popleft()
                            kind = "snapshot"
                            break
                        if self._queue and not self._paused and not self.options.snapshot:
                            item = self._queue.popleft()
                            self._queue_bytes -= len(item.data)
                            kind = "message"
                            break
                        if self._stopping:
                            kind = "exit"
                            break
                        self._cond.wait(1.0)
                        if (
                            not self._stopping
                            and self._writer is not None
                            and time.monotonic() >= self._next_disk_check
                        ):
                            break
                    self._busy = kind in ("snapshot", "message")
                if kind == "exit":
                    break
                try:
                    if kind == "message":
                        assert item is not None
                        self._write_item(item)
                    elif kind == "snapshot":
                        assert job is not None
                        self._write_snapshot(job)
                    elif self._writer is not None:
                        self._disk_ok()
                finally:
                    with self._cond:
                        self._busy = False
                        self._cond.notify_all()
        except Exception as e:  # noqa: BLE001 - reported by close() and the CLI
            self.errors.append(f"{type(e).__name__}: {e}")
            self._finish(f"write error: {e}")
        finally:
            try:
                self._close_file()
            except Exception as e:  # noqa: BLE001
                self.errors.append(f"finishing {self.current_file}: {e}")
            with self._cond:
                left = list(self._queue)
                self._queue.clear()
                self._queue_bytes = 0
                for it in left:
                    self.stats[it.topic].dropped_stopped += 1
                for ring in self._ring.values():
                    for it in ring:
                        self.stats[it.topic].dropped_stopped += 1
                self._ring = {}
                self._ring_bytes = 0
                for job in self._jobs:
                    for it in job.items:
                        self.stats[it.topic].dropped_stopped += 1
                    if not job.future.done():
                        job.future.set_exception(
                            WriteError("the recording stopped before this snapshot was written")
                        )
                self._jobs.clear()
                self._cond.notify_all()
            self.done.set()

    def _finish(self, reason: str) -> None:
        """End the recording by itself (the queue's rest is counted as dropped)."""
        with self._cond:
            if self.stop_reason is None:
                self.stop_reason = reason
                self._say(reason)
            self._accepting = False
            self._stopping = True
            self._paused = False
            for it in self._queue:
                self.stats[it.topic].dropped_stopped += 1
            self._queue.clear()
            self._queue_bytes = 0
            self._cond.notify_all()

    def _drop_stopped(self, item: _Item) -> None:
        """Count ``item`` as not written because the recording has stopped (or stops now)."""
        with self._cond:
            self.stats[item.topic].dropped_stopped += 1

    def _write_item(self, item: _Item) -> None:
        if self._writer is None:  # (finished)
            self._drop_stopped(item)
            return
        t = item.time
        if time.monotonic() >= self._next_disk_check and not self._disk_ok():
            self._drop_stopped(item)
            return
        if self._max_size and self._bag_bytes > self._max_size and self._part_messages:
            if not self.options.split:
                self._finish(f"--size: the bag reached {self.options.size} MB")
                self._drop_stopped(item)
                return
            self._rotate()
            if self._writer is None:
                self._drop_stopped(item)
                return
            self._bag_start = t
        if self._max_dur:
            if self._bag_start is None:
                self._bag_start = t
            elif t - self._bag_start > self._max_dur:
                if not self.options.split:
                    self._finish(f"--duration: the bag reached {self.options.duration}")
                    self._drop_stopped(item)
                    return
                d = self._max_dur
                self._bag_start += ((t - self._bag_start + d - 1) // d - 1) * d
                start = self._bag_start
                self._rotate()
                self._bag_start = start
                if self._writer is None:
                    self._drop_stopped(item)
                    return
        if self.options.repeat_latched and not self._part_messages and self._split_index > 0:
            for lat in list(self._latched.values()):
                if lat is not item:
                    self._put(_Item(lat.topic, lat.key, lat.data, t), count=False)
        self._put(item)

    def _put(self, item: _Item, *, count: bool = True) -> None:
        w = self._writer
        ck = (item.topic, item.key)
        ch = self._channels.get(ck)
        if ch is None:
            ch = self._channels[ck] = self._add_channel(w, item)
        w.write(ch, item.data, item.time, item.time)
        self._bag_bytes += len(item.data) + self._overhead
        self._part_messages += 1
        if count:
            with self._cond:
                self.stats[item.topic].written += 1

    def _add_channel(self, w: Any, item: _Item) -> Any:
        """The channel of ``item``'s topic and connection in writer ``w`` (its bytes counted
        towards ``--size``)."""
        typ, md5, definition, callerid, latching = item.key
        md = {"md5sum": md5, "type": typ, "latching": "1" if latching else "0"}
        if callerid:
            md["callerid"] = callerid
        schema = w.add_schema(typ, "ros1msg", definition.encode("utf-8"))
        ch = w.add_channel(item.topic, "ros1", schema, md)
        self._bag_bytes += 100 + len(item.topic) + len(typ) + len(md5) + len(definition) + len(callerid)
        return ch

    def _write_snapshot(self, job: _Snapshot) -> None:
        """Write one trigger's messages to a new file (writer thread); settle its future."""
        try:
            if not self._disk_ok():
                raise WriteError(self.stop_reason or "not enough free disk space")
            self._open(job.time, path=job.path)
        except BaseException as e:
            with self._cond:
                for it in job.items:
                    self.stats[it.topic].dropped_stopped += 1
            job.future.set_exception(e)
            if isinstance(e, OutputExistsError):
                return  # (the caller's path: the recording goes on)
            raise
        try:
            for it in job.items:
                self._put(it)
            name = self.current_file
            self._close_file()
        except BaseException as e:
            job.future.set_exception(e)
            raise
        job.future.set_result(Path(name) if name is not None else Path())

    # --- files ---------------------------------------------------------------------------------
    def _taken(self, name: str) -> bool:
        if name in self._used_names:
            return True
        # snapshots never replace a file (an earlier run's, or another recorder's)
        return self.options.snapshot and (os.path.lexists(name) or os.path.lexists(name + ".active"))

    def _unique(self, name: str) -> str:
        if not self._taken(name):
            return name
        stem, ext = os.path.splitext(name)
        n = 1
        while self._taken(f"{stem}-{n}{ext}"):
            n += 1
        return f"{stem}-{n}{ext}"

    def _open(self, t: float | None = None, *, path: str | None = None) -> None:
        """Start the next file (``t``: the time its name is made of), or the file ``path``
        (a snapshot's own name: never replacing a file)."""
        fmt, name = self._target(t, path)
        self._used_names.add(name)
        directory = os.path.dirname(os.path.abspath(name))
        if not os.path.isdir(directory):
            raise WriteError(f"cannot record to {name}: directory {directory} does not exist")
        w, header = self._new_writer(name, fmt, overwrite=not self.options.snapshot)
        self._writer = w
        self._channels = {}
        self.current_file = name
        self._bag_bytes = self._fresh_bytes = header
        self._part_messages = 0
        self._bag_start = None
        self._say(f"Recording to '{name}'.")
        for hook in self._open_hooks:
            try:
                hook(name)
            except Exception as e:  # noqa: BLE001
                self.errors.append(f"on-open hook: {e}")

    def _target(self, t: float | None, path: str | None) -> tuple[str, str]:
        """The format (``bag`` or ``mcap``) and the name of the file :meth:`_open` starts."""
        o = self.options
        fmt = o.output_format
        if path is None:
            return fmt, self._unique(o.file_name(self._split_index if o.split else None, t))
        low = path.lower()
        if low.endswith(".mcap"):
            fmt = "mcap"
        elif low.endswith(".bag"):
            fmt = "bag"
        else:
            path += o.extension
        return fmt, self._snapshot_path(path)

    def _snapshot_path(self, path: str) -> str:
        """``path`` (in the options' directory when relative); an :class:`OutputExistsError`
        when it names a file that exists or was recorded: a snapshot never replaces one."""
        if self.options.directory and not os.path.isabs(path):
            path = os.path.join(self.options.directory, path)
        if path in self._used_names or os.path.lexists(path) or os.path.lexists(path + ".active"):
            raise OutputExistsError(f"{path} exists; a snapshot never replaces a file")
        return path

    #: the profile of the MCAP files written
    _mcap_profile = "ros1"

    def _new_writer(self, name: str, fmt: str, overwrite: bool) -> tuple[Any, int]:
        """A :class:`polybag.writer.Writer` of file ``name`` in ``fmt`` and the bytes its
        header is counted as (towards ``--size``)."""
        from polybag.writer import Writer

        o = self.options
        if fmt == "mcap":
            w = Writer(
                name,
                format="mcap",
                compression="lz4" if o.lz4 else "zstd",
                chunk_size=o.chunk_bytes,
                profile=self._mcap_profile,
                overwrite=overwrite,
            )
            return w, 8 + 9 + 64
        w = Writer(name, format="bag", compression=o.compression, chunk_size=o.chunk_bytes, overwrite=overwrite)
        return w, _BAG_HEADER

    _fresh_bytes = 0
    _part_messages = 0

    def _close_file(self) -> None:
        w = self._writer
        if w is None:
            return
        self._writer = None
        w.close()
        assert self.current_file is not None
        self.files.append(self.current_file)
        self._say(f"Closing '{self.current_file}'.")
        self.current_file = None

    def _rotate(self) -> None:
        closed = self.current_file
        self._close_file()
        if closed is not None and self.options.max_splits:
            self._kept.append(closed)
            while len(self._kept) > self.options.max_splits:
                old = self._kept.popleft()
                try:
                    os.remove(old)
                    self.deleted.append(old)
                except OSError as e:
                    self.errors.append(f"--max-splits: cannot remove {old}: {e}")
        self._split_index += 1
        if self._disk_ok():
            self._open()

    def _disk_ok(self) -> bool:
        self._next_disk_check = time.monotonic() + 1.0
        if not self._min_space:
            return True
        name = self.current_file or self.options.file_name(0)
        directory = os.path.dirname(os.path.abspath(name))
        try:
            free = self._disk_free(directory)
        except OSError as e:
            self._say(f"cannot check free space in {directory}: {e}")
            return True
        if free < self._min_space:
            self._finish(
                f"less than {self.options.min_space} of space free on the disk of {directory} "
                f"({free} bytes free, -L/--min-space {self._min_space}); recording stopped"
            )
            return False
        if free < 5 * self._min_space:
            self._say(f"less than 5 x {self.options.min_space} of space free on the disk of {directory}")
        return True

    def _say(self, text: str) -> None:
        if self._log is not None:
            self._log(text)
        elif not self.options.quiet:
            print(f"[polybag record] {text}", file=sys.stderr, flush=True)

    # --- results ----------------------------------------------------------------------------------
    @property
    def queued_bytes(self) -> int:
        """Bytes of payload waiting: the write queue, or the snapshot ring."""
        return self._ring_bytes if self.options.snapshot else self._queue_bytes

    def report(self) -> dict[str, Any]:
        with self._cond:
            topics = {t: s.to_dict() for t, s in sorted(self.stats.items())}
        totals = {k: sum(s[k] for s in topics.values()) for k in ("received", "written", "dropped")}
        return {
            "files": [f for f in self.files if f not in self.deleted],
            "deleted": list(self.deleted),
            "current_file": self.current_file,
            "stop_reason": self.stop_reason,
            "errors": list(self.errors),
            "warnings": list(self.warnings),
            "topics": topics,
            "totals": totals,
        }
