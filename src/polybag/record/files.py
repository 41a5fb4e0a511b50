"""The recorder's files: names (``-o``/``-O``, date stamps, snapshot counters), opening,
splitting, ``--max-splits`` and the free-space check (a part of
:class:`polybag.record.recorder.Recorder`)."""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from polybag.errors import OutputExistsError, WriteError
from polybag.record._items import (
    _BAG_HEADER,
)


class FilesMixin:
    """The output files of :class:`~polybag.record.recorder.Recorder`."""

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
