"""The writer interface every format implements, and the atomic-file helper.

``polybag.Writer(path, format=None, **options)`` is this class: constructing it picks the
format's subclass from ``format=`` or the file extension.
"""

from __future__ import annotations

import errno
import io
import os
from collections.abc import Mapping
from typing import Any, BinaryIO

from polybag.errors import OutputExistsError, UnsupportedError, WriteError
from polybag.model import Attachment, Channel, Message, Metadata, Schema


def format_for_path(path: str | os.PathLike[str]) -> str:
    """The writable format an output path's extension asks for (see
    :func:`polybag.formats.registry.format_for_path`)."""
    from polybag.formats import registry

    return registry.format_for_path(path)


class Writer:
    """Base of all format writers.

    ``Writer("out.mcap", compression="zstd")`` returns the MCAP writer; subclasses implement
    ``add_schema``, ``add_channel``, ``write``, ``add_attachment``, ``add_metadata``,
    ``close`` and ``abort``.

    A path is written as ``NAME.active`` and renamed to ``NAME`` by ``close``.  Every writer
    takes ``overwrite``: ``True`` (the default, like ``open(path, "w")``) replaces an
    existing ``NAME``; ``False`` raises :class:`~polybag.errors.OutputExistsError` before
    anything is written when ``NAME`` (or ``NAME.active``) exists, and ``close`` never
    replaces a ``NAME`` that appeared meanwhile (the operations and the CLI use ``False``
    unless asked to overwrite).  ``abort(discard=True)`` stops without finishing and
    removes ``NAME.active``.  A failed write (a full disk) raises an ``OSError`` naming ``NAME``.

    A URL (``s3://bucket/run.mcap``; ``storage_options=`` for fsspec) is written to a local
    temporary file and uploaded by ``close`` (:mod:`polybag.remote_write`).
    """

    format: str = ""

    def __new__(cls, path: Any = None, *args: Any, format: str | None = None, **kwargs: Any) -> Writer:
        if cls is Writer:
            if isinstance(path, str) and "://" in path:
                from polybag.remote import is_url

                if is_url(path):  # written locally, then uploaded (file://: the local path)
                    from polybag.remote_write import RemoteWriter

                    return RemoteWriter.__new__(RemoteWriter)
            from polybag.formats import registry

            spec = registry.writer_spec(format) if format else registry.get(format_for_path(path))
            sub = spec.load_writer()
            return super().__new__(sub)
        return super().__new__(cls)

    # Subclasses define __init__(self, path_or_stream, *, format=None, compression=..., chunk_size=..., ...)

    def add_schema(self, name: str, encoding: str, data: bytes) -> Schema:
        raise NotImplementedError

    def add_channel(self, topic: str, message_encoding: str, schema: Schema | None = None, metadata: Mapping[str, str] | None = None) -> Channel:
        raise NotImplementedError

    def write(self, channel: Channel, data: bytes | memoryview, log_time: int, publish_time: int | None = None, sequence: int = 0) -> None:
        raise NotImplementedError

    def add_attachment(self, name: str, media_type: str, data: bytes, log_time: int = 0, create_time: int = 0) -> None:
        raise UnsupportedError(f"{self.format} files cannot hold attachments")

    def add_metadata(self, name: str, metadata: Mapping[str, str]) -> None:
        raise UnsupportedError(f"{self.format} files cannot hold metadata")

    def add_format_extras(self, name: str, metadata: Mapping[str, str]) -> bool:
        """Take a metadata record that carries this format's own data back into the
        format's own records; True when taken.

        A ULog converted to MCAP keeps its info and parameters as the metadata records
        ``ulog_info``, ``ulog_params`` and ``ulog_default_params_<bit>``; the ULog writer
        turns them back into info and parameter messages.  Every other writer answers
        False (not here): the caller writes the record with :meth:`add_metadata` (or
        drops it when the format has no metadata).
        """
        return False

    def close(self) -> None:
        raise NotImplementedError

    def abort(self, *, discard: bool = False) -> None:
        """Stop without finishing: ``NAME.active`` stays as a killed writer leaves it (for
        ``reindex``/``recover``), or is removed with ``discard=True``."""
        raise NotImplementedError

    def _check_channel(self, channel: Channel, known: Channel | None) -> None:
        """A channel passed to ``write`` must be one this writer handed out (or equal to it)."""
        if known is not channel and known != channel:
            raise WriteError(f"topic {channel.topic}: channel was not added to this writer")

    # --- conveniences built on the primitives ------------------------------------------
    def copy_channel(self, channel: Channel) -> Channel:
        """Add ``channel`` (and its schema) from another file, once; returns this file's channel."""
        cache: dict[int, Channel] = self.__dict__.setdefault("_copied_channels", {})
        key = id(channel)
        got = cache.get(key)
        if got is None:
            schema = None
            if channel.schema is not None:
                scache: dict[tuple[str, str, bytes], Schema] = self.__dict__.setdefault("_copied_schemas", {})
                skey = (channel.schema.name, channel.schema.encoding, bytes(channel.schema.data))
                schema = scache.get(skey)
                if schema is None:
                    schema = scache[skey] = self.add_schema(*skey)
            got = cache[key] = self.add_channel(channel.topic, channel.message_encoding, schema, dict(channel.metadata))
        return got

    def write_message(self, message: Message) -> None:
        """Write a message read from another file (its channel is added on first use)."""
        self.write(
            self.copy_channel(message.channel),
            message.data,
            message.log_time,
            message.publish_time,
            message.sequence,
        )

    def write_attachment(self, a: Attachment) -> None:
        self.add_attachment(a.name, a.media_type, a.data, a.log_time, a.create_time)

    def write_metadata(self, m: Metadata) -> None:
        self.add_metadata(m.name, m.metadata)

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.close()


class _OutputRaw(io.FileIO):
    """The raw file under an :class:`AtomicFile`: a failed write (a full disk, ``ulimit -f``)
    raises an ``OSError`` that names the output file, not the bare errno."""

    output_name = ""

    def write(self, b: Any) -> int:  # type: ignore[override]
        try:
            return super().write(b)  # type: ignore[no-any-return]
        except OSError as e:
            raise named_os_error(e, self.output_name) from None


def named_os_error(e: OSError, path: str) -> OSError:
    """``e`` as an ``OSError`` of the same errno whose message names ``path``."""
    if e.filename is not None:
        return e
    what = e.strerror or str(e) or type(e).__name__
    return OSError(e.errno, f"cannot write: {what}", path)


# errors of os.link on a file system without hard links (vfat, some FUSE and network mounts)
_NO_LINK = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV, errno.EMLINK, errno.ENOSYS, errno.EACCES}


def place_file(tmp: str | os.PathLike[str], final: str | os.PathLike[str], overwrite: bool) -> None:
    """Rename the finished ``tmp`` to ``final``.  ``overwrite=False`` never replaces a
    ``final`` that exists (it may have appeared while ``tmp`` was written): the file is
    hard-linked into place (``EEXIST`` if taken) and ``tmp`` unlinked, or, on a file system
    without hard links, checked then renamed.  A refused ``tmp`` is removed."""
    t, f = os.fspath(tmp), os.fspath(final)
    if overwrite:
        os.replace(t, f)
        return
    try:
        os.link(t, f)
    except FileExistsError:
        _unlink_quietly(t)
        raise OutputExistsError(
            f"{f}: a file of that name appeared while writing; not overwritten (the new output was discarded)"
        ) from None
    except OSError as e:
        if e.errno not in _NO_LINK:
            raise
        if os.path.lexists(f):
            _unlink_quietly(t)
            raise OutputExistsError(
                f"{f}: a file of that name appeared while writing; not overwritten (the new output was discarded)"
            ) from None
        os.replace(t, f)
        return
    _unlink_quietly(t)


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def refuse_existing(path: str | os.PathLike[str], what: str = "output") -> None:
    """OutputExistsError if ``path`` exists (a dangling symlink counts: it is a name in use)."""
    p = os.fspath(path)
    if os.path.lexists(p):
        raise OutputExistsError(f"{p}: {what} exists; not overwritten (--force replaces it; in Python overwrite=True)")


class AtomicFile:
    """A file written as ``<name>.active`` and renamed to ``<name>`` on :meth:`commit`.

    If the process dies, ``<name>.active`` stays behind for ``recover``/``reindex``; a
    writer that fails or is interrupted calls :meth:`discard` instead, which removes it.  A
    stream passed in instead of a path is written directly.

    ``overwrite=False`` never replaces an existing file: an existing ``<name>`` is refused
    here, before anything is written; ``<name>.active`` is created exclusively (an existing
    one may be a recording in progress); and :meth:`commit` links the finished file into
    place, so a ``<name>`` that appeared meanwhile is not clobbered either.  With
    ``overwrite=True`` (the default, as ``open(name, "w")``) both are replaced.

    A failed write raises an ``OSError`` naming ``<name>``.
    """

    def __init__(self, target: str | os.PathLike[str] | BinaryIO, buffering: int = 1 << 20, *, overwrite: bool = True) -> None:
        self.final_path: str | None
        self.overwrite = overwrite
        self.committed = False
        if isinstance(target, (str, os.PathLike)):
            final = self.final_path = os.fspath(target)
            active = final + ".active"
            self.active_path: str | None = active
            flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
            if overwrite:
                flags |= os.O_TRUNC
            else:
                refuse_existing(final)
                flags |= os.O_EXCL
            try:
                fd = os.open(active, flags, 0o666)
            except FileExistsError:
                raise OutputExistsError(
                    f"{active} exists (a recording in progress, or an interrupted write?); not overwritten: "
                    "move it away, or rebuild it with `polybag reindex`/`polybag recover`"
                ) from None
            raw = _OutputRaw(fd, "r+", closefd=True)
            raw.output_name = final
            self.file: BinaryIO = io.BufferedRandom(raw, buffer_size=buffering)  # type: ignore[assignment]
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
            _unlink_quietly(self.active_path)


def check_open(closed: bool) -> None:
    if closed:
        raise WriteError("the writer is closed")
