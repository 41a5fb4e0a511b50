"""The recorder's files: names (``-o``/``-O``, date stamps, snapshot counters), opening,
splitting, ``--max-splits`` and the free-space check (a part of
:class:`polybag.record.recorder.Recorder`)."""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

from polybag.errors import OutputExistsError, WriteError
from polybag.record.items import (
    _BAG_HEADER,
)


def path_key(name: str) -> str:
    """``name`` as a normalized absolute path, its folder's symlinks resolved (two spellings
    of one output give one key: ``run.bag``, ``./run.bag``, ``DIR/../run.bag``)."""
    folder, base = os.path.split(name)
    # (realpath walks the folder as the system will: ``link/..`` is the link target's parent)
    return os.path.join(os.path.realpath(folder or "."), base)


class NameRegistry:
    """The output paths claimed so far, by one recorder or shared by a group's recorders
    (so that no two of them ever write one file); thread safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owners: dict[str, int] = {}

    def __contains__(self, name: object) -> bool:
        with self._lock:
            return isinstance(name, str) and path_key(name) in self._owners

    def claim(self, name: str, owner: object = None, *, again: bool = False) -> bool:
        """Take ``name`` for ``owner``: False if it is taken (``again``: unless by ``owner``)."""
        key = path_key(name)
        with self._lock:
            if key in self._owners and not (again and owner is not None and self._owners[key] == id(owner)):
                return False
            self._owners[key] = id(owner) if owner is not None else 0
            return True

    def add(self, name: str) -> None:
        self.claim(name)


def _exists(name: str) -> bool:
    """Whether ``name`` or ``name.active`` is there (a planted symlink, even a dangling one, counts)."""
    return os.path.lexists(name) or os.path.lexists(name + ".active")


class FilesMixin:
    """The output files of :class:`~polybag.record.recorder.Recorder`.

    A recorder never writes into a file that exists: ``NAME.active`` is created exclusively
    (``O_EXCL``: a symlink planted there is refused, never followed) and renamed to ``NAME``
    only if ``NAME`` is still free.  The first file of a recording named without a date
    (``-O NAME``) is refused when ``NAME`` or ``NAME.active`` exists; later files and dated
    names take ``-1``, ``-2``... instead.
    """

    _opened_any = False

    def _unique(self, name: str) -> str:
        o = self.options
        if not self._opened_any and not o.snapshot and not o.dated:
            for what in (name, name + ".active"):
                if os.path.lexists(what):
                    raise OutputExistsError(
                        f"{what} exists; a recording never replaces a file (move it away, or choose another -O name)"
                    )
            if not self._used_names.claim(name, self, again=True):
                raise OutputExistsError(f"{name} is written by another recorder (choose another -O name)")
            return name
        stem, ext = os.path.splitext(name)
        candidate, n = name, 0
        while _exists(candidate) or not self._used_names.claim(candidate, self):
            n += 1
            candidate = f"{stem}-{n}{ext}"
        return candidate

    def _check_first(self) -> None:
        """Before anything starts: an :class:`OutputExistsError` if the first file is named
        without a date (``-O NAME``) and that name is taken."""
        o = self.options
        if not o.snapshot and not o.dated:
            self._target(None, None)

    def _open(self, t: float | None = None, *, path: str | None = None) -> None:
        """Start the next file (``t``: the time its name is made of), or the file ``path``
        (a snapshot's own name: never replacing a file)."""
        fmt, name = self._target(t, path)
        self._opened_any = True
        directory = os.path.dirname(os.path.abspath(name))
        if not os.path.isdir(directory):
            raise WriteError(f"cannot record to {name}: directory {directory} does not exist")
        # (never replacing: NAME.active is created exclusively, NAME linked into place if free)
        try:
            w, header = self._new_writer(name, fmt, overwrite=False)
        except OSError as e:  # (a folder on the way that is not one, a name too long...)
            raise WriteError(f"cannot record to {name}: {e.strerror or e}") from None
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
        if _exists(path) or not self._used_names.claim(path, self):
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
