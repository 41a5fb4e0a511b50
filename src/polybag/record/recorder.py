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
- ``--snapshot``: messages stay in a ring buffer of the last ``buffsize`` MB (older ones
  counted as ``dropped_buffer``); :meth:`trigger` (live: a message on ``snapshot_trigger``)
  writes the buffer to a new file; what is still buffered at the end is counted as
  ``dropped_stopped``;
- ``--min-space``: free space is checked when a file starts and every second; below it the
  recording stops with a clear message (``stop_reason``).
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from polybag.errors import UsageError, WriteError
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

    @property
    def dropped(self) -> int:
        return self.dropped_buffer + self.dropped_limit + self.dropped_stopped

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


def _free_bytes(path: str) -> int:
    return shutil.disk_usage(path).free


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
        self._jobs: deque[tuple[list[_Item], float]] = deque()
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
                if not rep["totals"]["written"]:  # (no empty bag left behind by a failed start)
                    for f in rep["files"]:
                        try:
                            os.remove(f)
                        except OSError:
                            pass
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
            if self._limit:
                n = self._accepted.get(topic, 0)
                if n >= self._limit:
                    st.dropped_limit += 1
                    return False
                self._accepted[topic] = n + 1
                limit_hit = n + 1 == self._limit
            if latching and self.options.repeat_latched:
                self._latched[(topic, item.key[3])] = item
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

    def trigger(self) -> None:
        """Snapshot mode: write the buffered messages to a new file (now, from the writer thread)."""
        if not self.options.snapshot:
            raise UsageError("trigger() needs snapshot mode (-s/--snapshot)")
        with self._cond:
            items = list(self._queue)
            self._queue.clear()
            self._queue_bytes = 0
            self._jobs.append((items, time.time()))
            self._cond.notify_all()

    # --- writer thread --------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            while True:
                kind = ""
                item: _Item | None = None
                job: tuple[list[_Item], float] | None = None
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
                        self._write_snapshot(*job)
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
                for items, _t in self._jobs:
                    for it in items:
                        self.stats[it.topic].dropped_stopped += 1
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
            typ, md5, definition, callerid, latching = item.key
            md = {"md5sum": md5, "type": typ, "latching": "1" if latching else "0"}
            if callerid:
                md["callerid"] = callerid
            schema = w.add_schema(typ, "ros1msg", definition.encode("utf-8"))
            ch = self._channels[ck] = w.add_channel(item.topic, "ros1", schema, md)
            self._bag_bytes += 100 + len(item.topic) + len(typ) + len(md5) + len(definition) + len(callerid)
        w.write(ch, item.data, item.time, item.time)
        self._bag_bytes += len(item.data) + self._overhead
        self._part_messages += 1
        if count:
            with self._cond:
                self.stats[item.topic].written += 1

    def _write_snapshot(self, items: list[_Item], t: float) -> None:
        if not self._disk_ok():
            with self._cond:
                for it in items:
                    self.stats[it.topic].dropped_stopped += 1
            return
        self._open(t)
        try:
            for it in items:
                self._put(it)
        finally:
            self._close_file()

    # --- files ---------------------------------------------------------------------------------
    def _unique(self, name: str) -> str:
        if name not in self._used_names:
            return name
        stem, ext = os.path.splitext(name)
        n = 1
        while f"{stem}-{n}{ext}" in self._used_names:
            n += 1
        return f"{stem}-{n}{ext}"

    def _open(self, t: float | None = None) -> None:
        from polybag.writer import Writer

        o = self.options
        name = self._unique(o.file_name(self._split_index if o.split else None, t))
        self._used_names.add(name)
        directory = os.path.dirname(os.path.abspath(name))
        if not os.path.isdir(directory):
            raise WriteError(f"cannot record to {name}: directory {directory} does not exist")
        if o.output_format == "mcap":
            w = Writer(
                name,
                format="mcap",
                compression="lz4" if o.lz4 else "zstd",
                chunk_size=o.chunk_bytes,
                profile="ros1",
            )
            header = 8 + 9 + 64
        else:
            w = Writer(name, format="bag", compression=o.compression, chunk_size=o.chunk_bytes)
            header = _BAG_HEADER
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
        return self._queue_bytes

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
            "topics": topics,
            "totals": totals,
        }
