"""The recorder's writer thread: takes queued messages and snapshot jobs in order and
writes them (see :class:`polybag.record.recorder.Recorder`; this is its writer-thread part)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from polybag.errors import OutputExistsError, WriteError
from polybag.record.items import (
    _Item,
    _Snapshot,
)


class WriterThreadMixin:
    """The writer thread of :class:`~polybag.record.recorder.Recorder`."""

    def _run(self) -> None:
        """The writer thread: take work in order until stopped, then finish the file and
        count what was left unwritten."""
        try:
            while True:
                kind, item, job = self._next_work()
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
            self._drop_left()
            self.done.set()

    def _next_work(self) -> tuple[str, _Item | None, _Snapshot | None]:
        """Wait for the next thing to do: ``("snapshot", None, job)``, ``("message", item,
        None)``, ``("exit", ...)`` once stopping, or ``("", ...)`` when the free-space check is
        due while idle."""
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
                if not self._stopping and self._writer is not None and time.monotonic() >= self._next_disk_check:
                    break
            self._busy = kind in ("snapshot", "message")
        return kind, item, job

    def _drop_left(self) -> None:
        """At the end: every message still queued, in the snapshot ring or in an unwritten
        snapshot job is counted as ``dropped_stopped``; such jobs' futures fail."""
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
                    job.future.set_exception(WriteError("the recording stopped before this snapshot was written"))
            self._jobs.clear()
            self._cond.notify_all()

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
