"""The recorder's writer thread: takes queued messages and snapshot jobs in order from the
:class:`~polybag.record.items.WorkQueue` and writes them into the
:class:`~polybag.record.files.OutputFiles`, starting the next part at ``--size`` /
``--duration`` (a part of :class:`polybag.record.recorder.Recorder`).  Each snapshot is
written to its own file (:meth:`OutputFiles.spawn`); one whose window goes on after its
trigger (``--snapshot-window PRE:POST``) stays open, taking its messages as they come,
until its window ends (at most :data:`~polybag.record.items.MAX_OPEN_SNAPSHOTS` at once)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from polybag.errors import OutputExistsError, WriteError
from polybag.record.files import OutputFiles
from polybag.record.items import PostEntry, QueuedMessage, SnapshotJob, WorkQueue
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
        self._open: dict[SnapshotJob, OutputFiles] = {}  # snapshots still recording: their files
        self._no_space = False

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
                        assert isinstance(job, SnapshotJob)
                        self._write_snapshot(job)
                    elif kind == "post":
                        assert isinstance(job, tuple)
                        self._write_post(job)
                    elif files.writer is not None:
                        files.disk_ok()
                finally:
                    work.done_one()
        except Exception as e:  # noqa: BLE001 - reported by close() and the CLI
            self._errors.append(f"{type(e).__name__}: {e}")
            work.finish(f"write error: {e}")
        finally:
            for snap in list(self._open):  # (after an error: each keeps what it has)
                snap.complete = False
                try:
                    self._finish_snapshot(snap)
                except Exception as e:  # noqa: BLE001
                    self._errors.append(f"finishing {snap.file}: {e}")
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

    def _put(
        self, item: QueuedMessage, *, count: bool = True, out: OutputFiles | None = None, job: SnapshotJob | None = None
    ) -> None:
        """Write ``item`` into the open file (``out``: a snapshot's, of ``job``), counted as
        written (``count``; once, whatever the snapshots it is in) or, when the file cannot
        take it, as refused."""
        if (out or self.files).put(item):
            if count:
                self.work.count_written(item)
            if job is not None:
                job.count += 1
        else:
            self.work.count_refused(item)

    def _write_snapshot(self, job: SnapshotJob) -> None:
        """Start one trigger's file and write the ring's messages to it; finish it and settle
        its future, unless its window goes on (then :meth:`_write_post` writes the rest)."""
        files, work = self.files, self.work
        out = files.spawn()
        try:
            if not files.disk_ok():
                raise WriteError(work.stop_reason or "not enough free disk space")
            out.open(job.time, path=job.path)
        except BaseException as e:
            work.count_unwritten(job)
            job.error = str(e)
            job.items = []
            job.future.set_exception(e)
            if job.post:
                work.snapshot_done(job)
            if isinstance(e, OutputExistsError):
                return  # (the caller's path: the recording goes on)
            raise
        job.file = out.current_file
        self._open[job] = out
        items, job.items = job.items, []  # (the ring's messages: not kept longer than needed)
        for it in items:
            self._put(it, out=out, job=job)
        if not job.post:
            self._finish_snapshot(job)

    def _write_post(self, entry: PostEntry) -> None:
        """A message of snapshots still recording, written to each one's file; or (None)
        the end of their windows: their files are finished."""
        item, jobs = entry
        if item is None:
            for job in jobs:
                self._finish_snapshot(job)
            return
        files = self.files
        if not self._no_space and time.monotonic() >= files.next_disk_check and not files.disk_ok():
            self._no_space = True
        if not self._no_space:
            for job in jobs:
                out = self._open.get(job)
                if out is not None and out.writer is not None:
                    self._put(item, out=out, job=job)
        self.work.count_unwritten_item(item)  # (unless written: counted once)

    def _finish_snapshot(self, job: SnapshotJob) -> None:
        """Finish the file of ``job`` (if it was started) and settle its future."""
        out = self._open.pop(job, None)
        if out is None:
            return
        name = out.current_file
        try:
            out.close()
        except BaseException as e:
            job.error = str(e)
            job.future.set_exception(e)
            raise
        finally:
            if job.post:
                self.work.snapshot_done(job)
        job.future.set_result(Path(name) if name is not None else Path())
