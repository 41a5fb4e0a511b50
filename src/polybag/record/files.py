"""The recorder's files: names (``-o``/``-O``, date stamps, snapshot counters), opening,
writing messages into the open file, splitting, ``--max-splits`` and the free-space check
(:class:`OutputFiles`, a part of :class:`polybag.record.recorder.Recorder`)."""

from __future__ import annotations

import copy
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from polybag.errors import OutputExistsError, WriteError
from polybag.formats import registry
from polybag.record.items import ConnectionKey, QueuedMessage
from polybag.record.options import RecordOptions, named_format


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


class OutputFiles:
    """The output files of one :class:`~polybag.record.recorder.Recorder` (ROS 1 messages
    to a bag or MCAP file; :class:`~polybag.record.ros2_recorder.Ros2Files` writes ROS 2 ones).

    A recorder never writes into a file that exists: ``NAME.active`` is created exclusively
    (``O_EXCL``: a symlink planted there is refused, never followed) and renamed to ``NAME``
    only if ``NAME`` is still free.  The first file of a recording named without a date
    (``-O NAME``) is refused when ``NAME`` or ``NAME.active`` exists; later files and dated
    names take ``-1``, ``-2``... instead.

    What the recorder and its writer thread read: :attr:`writer` (None while no file is
    open), :attr:`current_file`, :attr:`files` (finished, in order, deleted ones included),
    :attr:`deleted` (by ``--max-splits``), :attr:`size` (the bytes the open file counts
    towards ``--size``), :attr:`messages` (written to it), :attr:`start` (the receive time
    its ``--duration`` window starts at, ns), :attr:`split_index`.  ``names``: the paths
    claimed (a group's recorders share one); ``disk_free(directory)``, ``say(text)``,
    ``errors`` (a list problems are added to) and ``low_space(reason)`` (ends the
    recording) come from the recorder.
    """

    #: the ``profile=`` asked of writers that take one (MCAP)
    profile = "ros1"

    def __init__(
        self,
        options: RecordOptions,
        *,
        names: NameRegistry,
        disk_free: Callable[[str], int],
        say: Callable[[str], None],
        errors: list[str],
        low_space: Callable[[str], None],
    ) -> None:
        self.options = options
        self.names = names
        self._disk_free = disk_free
        self._say = say
        self._errors = errors
        self._low_space = low_space
        self._min_space = options.min_space_bytes
        self.open_hooks: list[Callable[[str], None]] = []
        self.writer: Any = None
        self.channels: dict[tuple[str, ConnectionKey], Any] = {}
        self.current_file: str | None = None  # the file being written (as NAME.active)
        self.files: list[str] = []
        self.deleted: list[str] = []
        self.size = 0
        self.messages = 0
        self.start: int | None = None
        self.split_index = 0
        self.next_disk_check = 0.0
        self._kept: deque[str] = deque()
        self._opened_any = False
        #: bytes a message adds besides its payload (``--size``)
        self.overhead = registry.get(options.output_format).message_overhead

    # --- names -------------------------------------------------------------------------------------
    def _unique(self, name: str) -> str:
        o = self.options
        if not self._opened_any and not o.snapshot and not o.dated:
            for what in (name, name + ".active"):
                if os.path.lexists(what):
                    raise OutputExistsError(
                        f"{what} exists; a recording never replaces a file (move it away, or choose another -O name)"
                    )
            if not self.names.claim(name, self, again=True):
                raise OutputExistsError(f"{name} is written by another recorder (choose another -O name)")
            return name
        stem, ext = os.path.splitext(name)
        candidate, n = name, 0
        while _exists(candidate) or not self.names.claim(candidate, self):
            n += 1
            candidate = f"{stem}-{n}{ext}"
        return candidate

    def check_first(self) -> None:
        """Before anything starts: an :class:`OutputExistsError` if the first file is named
        without a date (``-O NAME``) and that name is taken."""
        o = self.options
        if not o.snapshot and not o.dated:
            self.target(None, None)

    def target(self, t: float | None, path: str | None) -> tuple[str, str]:
        """The format and the name of the file :meth:`open` starts (``t``: the time its name
        is made of; ``path``: a snapshot's own name)."""
        o = self.options
        fmt = o.output_format
        if path is None:
            return fmt, self._unique(o.file_name(self.split_index if o.split else None, t))
        named = named_format(path)
        if named is not None:
            fmt = named
        else:
            path += o.extension
        return fmt, self.snapshot_path(path)

    def snapshot_path(self, path: str) -> str:
        """``path`` (in the options' directory when relative); an :class:`OutputExistsError`
        when it names a file that exists or was recorded: a snapshot never replaces one."""
        if self.options.directory and not os.path.isabs(path):
            path = os.path.join(self.options.directory, path)
        if _exists(path) or not self.names.claim(path, self):
            raise OutputExistsError(f"{path} exists; a snapshot never replaces a file")
        return path

    def spawn(self) -> OutputFiles:
        """Another files part for a file open at the same time as this one's (a snapshot that
        goes on recording after its trigger): the same options, names, hooks and file lists
        (:attr:`files` grows with its files), no file open."""
        child = copy.copy(self)
        child.writer = None
        child.channels = {}
        child.current_file = None
        child.size = child.messages = 0
        child.start = None
        return child

    # --- the open file -----------------------------------------------------------------------------
    def open(self, t: float | None = None, *, path: str | None = None) -> None:
        """Start the next file (``t``: the time its name is made of), or the file ``path``
        (a snapshot's own name: never replacing a file)."""
        fmt, name = self.target(t, path)
        self._opened_any = True
        directory = os.path.dirname(os.path.abspath(name))
        if not os.path.isdir(directory):
            raise WriteError(f"cannot record to {name}: directory {directory} does not exist")
        # (never replacing: NAME.active is created exclusively, NAME linked into place if free)
        try:
            w, header = self.new_writer(name, fmt, overwrite=False)
        except OSError as e:  # (a folder on the way that is not one, a name too long...)
            raise WriteError(f"cannot record to {name}: {e.strerror or e}") from None
        self.writer = w
        self.channels = {}
        self.current_file = name
        self.size = header
        self.messages = 0
        self.start = None
        self._say(f"Recording to '{name}'.")
        for hook in self.open_hooks:
            try:
                hook(name)
            except Exception as e:  # noqa: BLE001
                self._errors.append(f"on-open hook: {e}")

    def new_writer(self, name: str, fmt: str, overwrite: bool) -> tuple[Any, int]:
        """A :class:`polybag.writer.Writer` of file ``name`` in ``fmt`` and the bytes its
        header is counted as (towards ``--size``): the options' chunk size and compression
        (``-j``/``--lz4`` if the format has it, else the format's default), the
        :attr:`profile` if the format takes one."""
        from polybag.writer import Writer

        o = self.options
        spec = registry.writer_spec(fmt)
        extra: dict[str, Any] = {"profile": self.profile} if self.profile in spec.profiles else {}
        compression = o.compression if o.compression in spec.compressions and (o.bz2 or o.lz4) else spec.default_compression
        w = Writer(name, format=fmt, compression=compression, chunk_size=o.chunk_bytes, overwrite=overwrite, **extra)
        return w, spec.header_overhead

    def put(self, item: QueuedMessage) -> bool:
        """Write ``item`` into the open file; True (False: the file cannot take it, see
        :class:`~polybag.record.ros2_recorder.Ros2Files`)."""
        ck = (item.topic, item.key)
        ch = self.channels.get(ck)
        if ch is None:
            ch = self.channels[ck] = self.add_channel(self.writer, item)
        self.writer.write(ch, item.data, item.time, item.publish)
        self.size += len(item.data) + self.overhead
        self.messages += 1
        return True

    def add_channel(self, w: Any, item: QueuedMessage) -> Any:
        """The channel of ``item``'s topic and connection in writer ``w`` (its bytes counted
        towards ``--size``)."""
        typ, md5, definition, callerid, latching = item.key
        md = {"md5sum": md5, "type": typ, "latching": "1" if latching else "0"}
        if callerid:
            md["callerid"] = callerid
        schema = w.add_schema(typ, "ros1msg", definition.encode("utf-8"))
        ch = w.add_channel(item.topic, "ros1", schema, md)
        self.size += 100 + len(item.topic) + len(typ) + len(md5) + len(definition) + len(callerid)
        return ch

    def close(self) -> None:
        """Finish the open file (if any)."""
        w = self.writer
        if w is None:
            return
        self.writer = None
        w.close()
        assert self.current_file is not None
        self.files.append(self.current_file)
        self._say(f"Closing '{self.current_file}'.")
        self.current_file = None

    def abandon(self) -> None:
        """A start that failed: drop the file begun (``NAME.active`` removed)."""
        w, self.writer = self.writer, None
        self.current_file = None
        if w is not None:
            try:
                w.abort(discard=True)
            except Exception as e:  # noqa: BLE001 - reported
                self._errors.append(f"dropping the file begun: {e}")

    def rotate(self) -> None:
        """Finish the open file (deleting the oldest beyond ``--max-splits``) and start the
        next part if there is space."""
        closed = self.current_file
        self.close()
        if closed is not None and self.options.max_splits:
            self._kept.append(closed)
            while len(self._kept) > self.options.max_splits:
                old = self._kept.popleft()
                try:
                    os.remove(old)
                    self.deleted.append(old)
                except OSError as e:
                    self._errors.append(f"--max-splits: cannot remove {old}: {e}")
        self.split_index += 1
        if self.disk_ok():
            self.open()

    # --- free space --------------------------------------------------------------------------------
    def disk_check_due(self) -> bool:
        """Whether a file is open and its free-space check (every second) is due."""
        return self.writer is not None and time.monotonic() >= self.next_disk_check

    def disk_ok(self) -> bool:
        """Check the free space (``-L``/``--min-space``): below it the recording ends
        (``low_space``) and False."""
        self.next_disk_check = time.monotonic() + 1.0
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
            self._low_space(
                f"less than {self.options.min_space} of space free on the disk of {directory} "
                f"({free} bytes free, -L/--min-space {self._min_space}); recording stopped"
            )
            return False
        if free < 5 * self._min_space:
            self._say(f"less than 5 x {self.options.min_space} of space free on the disk of {directory}")
        return True
