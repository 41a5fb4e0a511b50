"""Output files made safely: a file is created exclusively, written under a temporary name
beside its final one and renamed into place (:class:`AtomicFile`, :func:`place_file`,
:func:`write_atomically`); what may be replaced is checked first (:func:`file_refusal`,
:func:`log_file_refusal`: only a log polybag could have written, never a link, a directory
or another kind of file).
"""

from __future__ import annotations

import errno
import io
import os
import stat
from typing import Any, BinaryIO

from polybag.errors import OutputExistsError


class _OutputRaw(io.FileIO):
    """The raw file under an :class:`AtomicFile`: a failed write (a full disk, ``ulimit -f``)
    raises an ``OSError`` that names the output file, not the bare errno."""

    output_name = ""

    def write(self, b: Any) -> int:
        try:
            return super().write(b)
        except OSError as e:
            raise named_os_error(e, self.output_name) from None


def as_output_error(e: OSError, path: str) -> OSError:
    """``e`` (raised on a temporary file: ``NAME.active``, a staging file) as an ``OSError``
    of the same errno naming the output ``path`` the user gave, not the temporary name."""
    return OSError(e.errno, e.strerror or str(e) or type(e).__name__, path)


def named_os_error(e: OSError, path: str) -> OSError:
    """``e`` as an ``OSError`` of the same errno whose message names ``path``."""
    if e.filename is not None:
        return e
    what = e.strerror or str(e) or type(e).__name__
    return OSError(e.errno, f"cannot write: {what}", path)


# errors of os.link on a file system without hard links (vfat, some FUSE and network mounts)
_NO_LINK = {
    errno.EPERM,
    errno.EOPNOTSUPP,
    errno.ENOTSUP,
    errno.EXDEV,
    errno.EMLINK,
    errno.ENOSYS,
    errno.EACCES,
}


def place_file(tmp: str | os.PathLike[str], final: str | os.PathLike[str], overwrite: bool) -> None:
    """Rename the finished ``tmp`` to ``final``.  ``overwrite=False`` never replaces a
    ``final`` that exists (it may have appeared while ``tmp`` was written): the file is
    hard-linked into place (``EEXIST`` if taken) and ``tmp`` unlinked, or, on a file system
    without hard links, checked then renamed.  ``overwrite=True`` replaces a file (a symbolic
    link is replaced itself, never followed), never a directory.  A refused ``tmp`` is removed."""
    t, f = os.fspath(tmp), os.fspath(final)
    if overwrite:
        try:
            st = os.lstat(f)
        except FileNotFoundError:
            st = None
        if st is not None and stat.S_ISDIR(st.st_mode):
            unlink_quietly(t)
            raise OutputExistsError(
                f"{f}: a directory of that name appeared while writing; not replaced (the new output was discarded)"
            )
        try:
            os.replace(t, f)
        except OSError as e:  # (tmp kept: the caller decides; a recording's stays for recover)
            raise as_output_error(e, f) from None
        return
    try:
        os.link(t, f)
    except FileExistsError:
        unlink_quietly(t)
        raise OutputExistsError(
            f"{f}: a file of that name appeared while writing; not overwritten (the new output was discarded)"
        ) from None
    except OSError as e:
        if e.errno not in _NO_LINK:
            raise as_output_error(e, f) from None
        if os.path.lexists(f):
            unlink_quietly(t)
            raise OutputExistsError(
                f"{f}: a file of that name appeared while writing; not overwritten (the new output was discarded)"
            ) from None
        try:
            os.replace(t, f)
        except OSError as e2:
            raise as_output_error(e2, f) from None
        return
    unlink_quietly(t)


def unlink_quietly(path: str) -> None:
    """Remove ``path`` if it can be (a temporary file left by a failed write); never raises."""
    try:
        os.unlink(path)
    except OSError:
        pass




# --- files created exclusively ---------------------------------------------------------------
#: flags that create a new file and never follow a symbolic link planted at its name
NEW_FILE_FLAGS = os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def create_new(path: str | os.PathLike[str], mode: int = 0o666) -> int:
    """A file descriptor (read-write) of the new file ``path``, created exclusively
    (``O_CREAT|O_EXCL|O_NOFOLLOW``): anything at that name, a symbolic link too, is an
    :class:`OutputExistsError`, never opened or followed."""
    p = os.fspath(path)
    try:
        return os.open(p, os.O_RDWR | NEW_FILE_FLAGS, mode)
    except FileExistsError:
        raise OutputExistsError(
            f"{p} exists; not overwritten (polybag writes only files it creates)"
        ) from None


def write_created(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` into the file ``path`` that polybag has just created exclusively (for
    example ``placed()``'s ``NAME.active``) or that is its own to create (a private staging
    folder's), never through a symbolic link put there since."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    with open(os.open(os.fspath(path), flags, 0o666), "wb") as f:
        f.write(data)


def open_new(path: str | os.PathLike[str], mode: str = "wb", **kwargs: Any) -> Any:
    """``open(path, mode)`` of a new file created exclusively (:func:`create_new`)."""
    fd = create_new(path)
    try:
        return open(fd, mode, **kwargs)  # noqa: SIM115 - the caller closes it
    except BaseException:
        os.close(fd)
        raise


def temp_beside(path: str | os.PathLike[str]) -> tuple[int, str]:
    """``(fd, name)`` of a new temporary file in ``path``'s folder (``tempfile.mkstemp``:
    a random name, created exclusively, never through a symbolic link), to be renamed to
    ``path`` when complete."""
    p = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(p))
    import tempfile  # (here: a reader's import path stays free of it)

    try:
        return tempfile.mkstemp(prefix=f".{os.path.basename(p)}.", suffix=".tmp", dir=folder)
    except OSError as e:  # (named by the output, not the random temporary name)
        raise as_output_error(e, p) from None


def write_atomically(path: str | os.PathLike[str], data: bytes | str, *, overwrite: bool = True) -> None:
    """Write ``data`` to ``path`` through a synced temporary file beside it
    (:func:`temp_beside`), renamed into place (:func:`place_file`); the temporary file is
    removed on failure.  Nothing at ``path`` is opened or followed."""
    p = os.fspath(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = temp_beside(p)
    try:
        with open(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        place_file(tmp, p, overwrite)
    except BaseException as e:
        unlink_quietly(tmp)
        if isinstance(e, OSError) and not isinstance(e, OutputExistsError) and e.filename is None:
            raise named_os_error(e, p) from e
        raise


# --- what --force may replace ---------------------------------------------------------------------
#: extensions of files polybag writes that are not logs, and what such a file starts with
#: (a callable: whether its first bytes fit)
def _text_head(head: bytes) -> bool:
    return b"\0" not in head


MEDIA_MAGICS: dict[str, Any] = {
    ".png": (b"\x89PNG\r\n\x1a\n",),
    ".jpg": (b"\xff\xd8\xff",),
    ".jpeg": (b"\xff\xd8\xff",),
    ".npy": (b"\x93NUMPY",),
    ".pcd": (b"# .PCD", b"VERSION"),
    ".ply": (b"ply\n", b"ply\r\n"),
    ".pdf": (b"%PDF",),
    ".svg": (b"<?xml", b"<svg"),
    ".parquet": (b"PAR1",),
    ".mp4": lambda h: h[4:8] == b"ftyp",
    ".mov": lambda h: h[4:8] in (b"ftyp", b"moov", b"mdat", b"wide", b"free"),
    ".mkv": (b"\x1a\x45\xdf\xa3",),
    ".avi": lambda h: h[:4] == b"RIFF" and h[8:12] == b"AVI ",
    ".csv": _text_head,
    ".jsonl": lambda h: h == b"" or h.lstrip()[:1] == b"{",
}


def _head(path: str, n: int = 16) -> bytes:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    try:
        return os.read(fd, n)
    finally:
        os.close(fd)


def _what(st: os.stat_result) -> str:
    if stat.S_ISLNK(st.st_mode):
        return "a symbolic link"
    if stat.S_ISDIR(st.st_mode):
        return "a directory"
    return "not a regular file"


def file_refusal(path: str, kind: str = "") -> str | None:
    """Why ``--force`` may not replace what is at ``path`` with a file polybag writes (None:
    it may, or nothing is there): only a regular file (never a symbolic link, a directory or
    a device), and for ``kind`` ``"log"`` a log by its magic bytes, for a known media or
    table extension (``.png``, ``.csv``, ``.mp4``...) a file of that kind by its first bytes."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        return f"cannot be examined ({e.strerror or e})"
    if not stat.S_ISREG(st.st_mode):
        return f"is {_what(st)}, not a file polybag writes"
    ext = os.path.splitext(path)[1].lower()
    check = MEDIA_MAGICS.get(ext) if kind != "log" else None
    if check is None and kind != "log":
        return None
    try:
        head = _head(path, 64)
    except OSError as e:
        return f"cannot be read ({e.strerror or e})"
    if check is not None:
        ok = check(head) if callable(check) else head.startswith(check)
        return None if ok else f"is not a {ext[1:]} file (by its first bytes)"
    from polybag.formats import registry

    if registry.sniff(head[: registry.SNIFF_BYTES]) is not None:
        return None
    return "is not a log (no log format's magic bytes)"


def log_file_refusal(path: str) -> str | None:
    """:func:`file_refusal` for a log file."""
    return file_refusal(path, "log")


def refuse_replacing(path: str, reason: str | None) -> None:
    """An :class:`OutputExistsError` naming ``path`` when ``reason`` says it may not be replaced."""
    if reason is not None:
        raise OutputExistsError(
            f"{path}: exists and {reason}; not replaced even with --force (only what polybag could "
            "have written is replaced): move it away or choose another output"
        )


def refuse_existing(path: str | os.PathLike[str], what: str = "output") -> None:
    """OutputExistsError if ``path`` exists (a dangling symlink counts: it is a name in use)."""
    p = os.fspath(path)
    if os.path.lexists(p):
        raise OutputExistsError(
            f"{p}: {what} exists; not overwritten (--force replaces it; in Python overwrite=True)"
        )


class AtomicFile:
    """A file written as ``<name>.active`` and renamed to ``<name>`` on :meth:`commit`.

    If the process dies, ``<name>.active`` stays behind for ``recover``/``reindex``; a
    writer that fails or is interrupted calls :meth:`discard` instead, which removes it.  A
    stream passed in instead of a path is written directly.

    ``<name>.active`` is always created exclusively and never through a symbolic link (an
    existing one may be a recording in progress: an :class:`OutputExistsError`).
    ``overwrite=False`` never replaces an existing file: an existing ``<name>`` is refused
    here, before anything is written, and :meth:`commit` links the finished file into
    place, so a ``<name>`` that appeared meanwhile is not clobbered either.  With
    ``overwrite=True`` (the default, as ``open(name, "w")``) an existing file ``<name>`` is
    replaced when the new one is complete (never a directory; the old file stays until then).

    A failed write raises an ``OSError`` naming ``<name>``.
    """

    def __init__(
        self, target: str | os.PathLike[str] | BinaryIO, buffering: int = 1 << 20, *, overwrite: bool = True
    ) -> None:
        self.final_path: str | None
        self.overwrite = overwrite
        self.committed = False
        if isinstance(target, (str, os.PathLike)):
            final = self.final_path = os.fspath(target)
            active = final + ".active"
            self.active_path: str | None = active
            # created exclusively, never through a symbolic link planted at its name
            flags = os.O_RDWR | NEW_FILE_FLAGS
            if overwrite:
                try:
                    if stat.S_ISDIR(os.lstat(final).st_mode):
                        raise OutputExistsError(f"{final}: exists and is a directory; not replaced by a file")
                except FileNotFoundError:
                    pass
            else:
                refuse_existing(final)
            try:
                fd = os.open(active, flags, 0o666)
            except FileExistsError:
                raise OutputExistsError(
                    f"{active} exists (a recording in progress, or an interrupted write?); not overwritten: "
                    "move it away, or rebuild it with `polybag reindex`/`polybag recover`"
                ) from None
            except OSError as e:  # (an unwritable folder: named by the output the user gave)
                raise as_output_error(e, final) from None
            raw = _OutputRaw(fd, "r+", closefd=True)
            raw.output_name = final
            self.file: BinaryIO = io.BufferedRandom(raw, buffer_size=buffering)
            self._own = True
        else:
            self.final_path = self.active_path = None
            self.file = target
            self._own = False
        self.closed = False

    def commit(self) -> None:
        if self.closed:
            return
        self.closed = True
        if not self._own:
            self.file.flush()
            return
        assert self.active_path is not None and self.final_path is not None
        try:
            self.file.flush()
            os.fsync(self.file.fileno())
            self.file.close()
        except OSError as e:
            raise named_os_error(e, self.final_path) from None
        place_file(self.active_path, self.final_path, self.overwrite)
        self.committed = True

    def discard(self) -> None:
        """Give up: close the file and remove ``<name>.active`` (nothing is renamed).

        After a successful :meth:`commit` this does nothing; on a stream it only stops.
        """
        if self.committed:
            return
        self.closed = True
        if not self._own:
            return
        raw = getattr(self.file, "raw", None)
        try:
            self.file.close()  # flushes what is buffered: may fail again on a full disk
        except (OSError, ValueError):
            if raw is not None:
                try:
                    raw.close()
                except OSError:
                    pass
        if self.active_path is not None:
            unlink_quietly(self.active_path)
