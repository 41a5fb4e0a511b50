"""The recorder's writer thread: takes queued messages and snapshot jobs in order from the
:class:`~polybag.record.items.WorkQueue` and writes them into the
:class:`~polybag.record.files.OutputFiles`, starting the next part at ``--size`` /
``--duration`` (a part of :class:`polybag.record.recorder.Recorder`)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from polybag.errors import OutputExistsError, WriteError
from polybag.record.files import OutputFiles
from polybag.record.items import QueuedMessage, SnapshotJob, WorkQueue
from polybag.record.options import RecordOptions


class WriterThread:
    """Writes what ``work`` holds into ``files`` until the recording stops, then finishes
    the file, counts what was left unwritten and sets ``done``.

    ``latched``: the recorder's last latched message per (topic, callerid), written again at
    the start of each part with ``--repeat-latched``; ``errors``: the list a write error is
    added to.
    """

    def __init__(
        self,
        options: RecordOptions,
        work: WorkQueue,
        files: OutputFiles,
        *,
        latched: dict[tuple[str, str], QueuedMessage],
        errors: list[str],
        done: threading.Event,
    ) -> None:
        self.options = options
        self.work = work
        self.files = files
        self._latched = latched
        self._errors = errors
        self._done = done
        self._max_size = options.max_size_bytes
        self._max_dur = options.max_duration_ns

    def start(self) -> threading.Thread:
        """Run :meth:`run` in a new thread (RuntimeError when no thread can be started)."""
        thread = threading.Thread(target=self.run, name="polybag-record-writer", daemon=True)
        thread.start()
        return thread

    def run(self) -> None:
        """Take work in order until stopped, then finish the file and count what was left
        unwritten."""
        work, files = self.work, self.files
        due = files.disk_check_due
        try:
            while True:
                kind, item, job = work.next_work(due)
                if kind == "exit":
                    break
                try:
                    if kind == "message":
                        assert item is not None
                        self._write_item(item)
                    elif kind == "snapshot":
                        assert job is not None
                        self._write_snapshot(job)
                    elif files.writer is not None:
                        files.disk_ok()
                finally:
                    work.done_one()
        except Exception as e:  # noqa: BLE001 - reported by close() and the CLI
            self._errors.append(f"{type(e).__name__}: {e}")
            work.finish(f"write error: {e}")
        finally:
            try:
                files.close()
            except Exception as e:  # noqa: BLE001
                self._errors.append(f"finishing {files.current_file}: {e}")
            work.drop_left()
            self._done.set()

    def _write_item(self, item: QueuedMessage) -> None:
        files, work, o = self.files, self.work, self.options
        if files.writer is None:  # (finished)
            work.count_stopped(item.topic)
            return
        t = item.time
        if time.monotonic() >= files.next_disk_check and not files.disk_ok():
            work.count_stopped(item.topic)
            return
        if self._max_size and files.size > self._max_size and files.messages:
            if not o.split:
                work.finish(f"--size: the bag reached {o.size} MB")
                work.count_stopped(item.topic)
                return
            files.rotate()
            if files.writer is None:
                work.count_stopped(item.topic)
                return
            files.start = t
        if self._max_dur:
            if files.start is None:
                files.start = t
            elif t - files.start > self._max_dur:
                if not o.split:
                    work.finish(f"--duration: the bag reached {o.duration}")
                    work.count_stopped(item.topic)
                    return
                d = self._max_dur
                start = files.start + ((t - files.start + d - 1) // d - 1) * d
                files.rotate()
                files.start = start
                if files.writer is None:
                    work.count_stopped(item.topic)
                    return
        if o.repeat_latched and not files.messages and files.split_index > 0:
            for lat in list(self._latched.values()):
                if lat is not item:
                    self._put(QueuedMessage(lat.topic, lat.key, lat.data, t), count=False)
        self._put(item)

    def _put(self, item: QueuedMessage, *, count: bool = True) -> None:
        """Write ``item`` into the open file, counted as written (``count``) or, when the
        file cannot take it, as refused."""
        if self.files.put(item):
            if count:
                self.work.count_written(item.topic)
        else:
            self.work.count_refused(item.topic)

    def _write_snapshot(self, job: SnapshotJob) -> None:
        """Write one trigger's messages to a new file; settle its future."""
        files, work = self.files, self.work
        try:
            if not files.disk_ok():
                raise WriteError(work.stop_reason or "not enough free disk space")
            files.open(job.time, path=job.path)
        except BaseException as e:
            work.count_unwritten(job)
            job.future.set_exception(e)
            if isinstance(e, OutputExistsError):
                return  # (the caller's path: the recording goes on)
            raise
        try:
            for it in job.items:
                self._put(it)
            name = files.current_file
            files.close()
        except BaseException as e:
            job.future.set_exception(e)
            raise
        job.future.set_result(Path(name) if name is not None else Path())
