"""The writer interface every format implements, the factory that picks a format's writer,
and the atomic-file helper.

``polybag.Writer(path, format=None, **options)`` is this class: calling it picks the
format's subclass from ``format=`` or the file extension (:class:`WriterFactory`).  A URL
output is the format's writer on a local staging path wired to an
:class:`~polybag.io.upload.Upload`: its ``close`` uploads, its ``abort`` drops.

``polybag.open_writer`` is :func:`open_writer`, typed in the package root (which can name
the formats' writer classes, this module cannot): ``format="mcap"`` is a ``McapWriter``
taking :class:`McapOptions`, and so for each format's options here.
"""

from __future__ import annotations

import errno
import io
import os
import posixpath
import stat
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, BinaryIO, ClassVar, Literal, TypedDict

from polybag.errors import OutputExistsError, UnsupportedError, WriteError
from polybag.io.urls import url_target
from polybag.model import Attachment, Channel, Message, Metadata, Schema

if TYPE_CHECKING:
    from typing_extensions import Self, Unpack  # Python 3.10 has neither

    from polybag.io.upload import Upload


class OutputOptions(TypedDict, total=False):
    """The options every writer made by ``Writer(...)`` takes: where its output goes."""

    #: replace an existing output once the new one is complete (default True)
    overwrite: bool
    #: a URL output: fsspec's options, and an upload bar (None: only on a terminal)
    storage_options: dict[str, Any] | None
    progress: bool | None


class WriterOptions(OutputOptions, total=False):
    """The options ``Writer(...)`` takes (each format's writer takes its own of them, and
    says so when given one it does not know); one format's own are :class:`McapOptions`,
    :class:`BagOptions`, :class:`UlogOptions` and :class:`Rosbag2Options`."""

    #: chunk (or file) compression: ``"zstd"``, ``"lz4"``, ``"bz2"``, ``"none"``... as the format takes
    compression: str | None
    compression_level: int | None
    chunk_size: int | None
    # MCAP
    profile: str
    library: str | None
    use_chunking: bool
    use_message_index: bool
    use_chunk_index: bool
    use_statistics: bool
    use_summary_offsets: bool
    use_attachment_index: bool
    use_metadata_index: bool
    repeat_schemas: bool
    repeat_channels: bool
    use_crcs: bool
    # ULog
    start_timestamp: int | None
    compat_flags: Sequence[int] | None
    sync_interval: int
    spool_size: int
    # ULog (file version), rosbag2 (metadata version)
    version: int
    # rosbag2
    storage: str
    compression_mode: str
    chunk_compression: str
    ros_distro: str
    custom_data: Mapping[str, str] | None



class McapOptions(OutputOptions, total=False):
    """The options of the MCAP writer (``format="mcap"``)."""

    compression: Literal["none", "zstd", "lz4"] | None
    compression_level: int | None
    chunk_size: int
    profile: str
    library: str | None
    use_chunking: bool
    use_message_index: bool
    use_chunk_index: bool
    use_statistics: bool
    use_summary_offsets: bool
    use_attachment_index: bool
    use_metadata_index: bool
    repeat_schemas: bool
    repeat_channels: bool
    use_crcs: bool


class BagOptions(OutputOptions, total=False):
    """The options of the ROS 1 bag writer (``format="bag"``)."""

    compression: Literal["none", "bz2", "lz4"] | None
    compression_level: int | None
    chunk_size: int


class UlogOptions(OutputOptions, total=False):
    """The options of the ULog writer (``format="ulog"``)."""

    start_timestamp: int | None
    version: int
    compat_flags: Sequence[int] | None
    sync_interval: int
    spool_size: int


class Rosbag2Options(OutputOptions, total=False):
    """The options of the rosbag2 writer (``format="rosbag2"``)."""

    storage: Literal["sqlite3", "mcap"]
    compression: Literal["none", "zstd"] | None
    compression_mode: Literal["file", "message"]
    version: int
    #: the chunks of MCAP storage
    chunk_size: int | None
    chunk_compression: Literal["none", "zstd", "lz4"]
    ros_distro: str
    custom_data: Mapping[str, str] | None

def format_for_path(path: str | os.PathLike[str]) -> str:
    """The writable format an output path's extension asks for (see
    :func:`polybag.formats.registry.format_for_path`)."""
    from polybag.formats import registry

    return registry.format_for_path(path)


def writer_class(format: str) -> type[Writer]:  # noqa: A002
    """The writer class of the writable format ``format`` (a name or an alias)."""
    from polybag.formats import registry

    sub: type[Writer] = registry.writer_spec(format).load_writer()
    return sub


def writer_class_of(path: str | os.PathLike[str]) -> type[Writer] | None:
    """The writer class of the format of the log file or directory at ``path`` (None: no
    format, or one polybag cannot write); what a staged upload of a copy of it asks for its
    upload order (:class:`~polybag.io.upload.Upload`)."""
    from polybag.formats import registry

    name = registry.sniff_path(path)
    spec = registry.lookup(name) if name else None
    if spec is None or spec.writer is None:
        return None
    sub: type[Writer] = spec.load_writer()
    return sub


def _url_format(url: str, format: str | None) -> str:  # noqa: A002
    """The writable format of the output URL ``url``: ``format``, else its extension, else
    (no extension) the one directory format there is."""
    from polybag.formats import registry

    if format:
        return registry.writer_spec(format).name
    try:
        return registry.format_for_path(url.rstrip("/"))
    except UnsupportedError:
        dirs = [s.name for s in registry.formats() if s.writer is not None and s.open_path is not None]
        if posixpath.splitext(url.rstrip("/"))[1] or len(dirs) != 1:
            raise
        return dirs[0]


def open_writer(
    path: Any = None,
    *args: Any,
    format: str | None = None,  # noqa: A002
    **options: Any,
) -> Writer:
    """The format's writer of ``path`` (what ``Writer(...)`` returns): the format from
    ``format=`` or the extension.  A URL (``s3://bucket/run.mcap``) is written to a local
    staging path and uploaded by ``close`` (:class:`~polybag.io.upload.Upload`; the options
    ``storage_options``, ``overwrite`` (default True) and ``progress`` are the upload's); a
    ``file://`` URL is its local path.  ``polybag.open_writer`` is this function, typed by
    the format: ``format="mcap"`` returns a ``McapWriter``."""
    target = url_target(path)
    if target is None:  # a local path or a stream
        return writer_class(format or format_for_path(path))(path, *args, format=format, **options)
    fmt = _url_format(target.url, format)
    sub = writer_class(fmt)
    overwrite = bool(options.pop("overwrite", True))
    storage_options = options.pop("storage_options", None)
    progress = options.pop("progress", None)
    if target.local is not None:  # file://: written as its local path
        return sub(target.local, *args, format=fmt, overwrite=overwrite, **options)
    from polybag.io.upload import Upload  # here: it loads the transports (and numpy)

    upload = Upload(
        target.url,
        directory=sub.directory_output,
        overwrite=overwrite,
        storage_options=storage_options,
        progress=progress,
        files=sub,
    )
    try:
        writer = sub(upload.local, *args, format=fmt, overwrite=True, **options)
    except BaseException:
        upload.discard()
        raise
    writer.upload = upload
    return writer


class WriterFactory(type):
    """The metaclass of :class:`Writer`: calling ``Writer(...)`` itself is
    :func:`open_writer` (the format's writer, wired to an upload for a URL); calling a format's
    writer class constructs it as any class."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if cls is Writer:
            return open_writer(*args, **kwargs)
        return super().__call__(*args, **kwargs)


class Writer(metaclass=WriterFactory):
    """Base of all format writers.

    ``Writer("out.mcap", compression="zstd")`` returns the MCAP writer (typed as ``Writer``;
    ``polybag.open_writer("out.mcap", format="mcap")`` is the same call typed as the format's
    writer class, ``McapWriter``); subclasses implement
    ``add_schema``, ``add_channel``, ``write``, ``add_attachment``, ``add_metadata``,
    ``finish_output`` (what ``close`` does) and ``abort_output`` (what ``abort`` does).

    A path is written as ``NAME.active`` (created exclusively, never through a symbolic link
    planted at that name) and renamed to ``NAME`` by ``close``.  Every writer takes
    ``overwrite``: ``True`` (the default, like ``open(path, "w")``) replaces an existing file
    ``NAME`` once the new one is complete (never a directory; a rosbag2 writer only exactly a
    bag, see :meth:`replace_refusal`); ``False`` raises :class:`~polybag.errors.OutputExistsError` before
    anything is written when ``NAME`` (or ``NAME.active``) exists, and ``close`` never
    replaces a ``NAME`` that appeared meanwhile (the operations and the CLI use ``False``
    unless asked to overwrite).  ``abort(discard=True)`` stops without finishing and
    removes ``NAME.active``.  A failed write (a full disk) raises an ``OSError`` naming ``NAME``.

    A URL (``s3://bucket/run.mcap``; ``storage_options=`` for fsspec) is written to a local
    staging path and uploaded by ``close`` (:attr:`upload`, :mod:`polybag.io.upload`).
    """

    format: str = ""
    #: the output is a directory (a rosbag2 bag), staged and uploaded file by file
    directory_output: ClassVar[bool] = False
    #: a writer made for a URL: the staged output, uploaded by ``close``, dropped by ``abort``
    upload: Upload | None = None

    def __new__(
        cls,
        path: str | os.PathLike[str] | BinaryIO | None = None,
        *args: Any,
        format: str | None = None,  # noqa: A002 - the format's name or alias
        **options: Unpack[WriterOptions],
    ) -> Self:
        # what a format's writer class is constructed with (``Writer(...)`` itself is
        # :class:`WriterFactory`'s :func:`open_writer`)
        return super().__new__(cls)

    @classmethod
    def replace_refusal(cls, path: str) -> str | None:
        """Why ``overwrite=True`` may not replace what is at ``path`` (None: it may, or nothing
        is there).  A file writer replaces only a regular file that is a log by its magic
        bytes (:func:`log_file_refusal`); a directory format's writer overrides this."""
        return log_file_refusal(path)

    @classmethod
    def upload_order(cls, files: Sequence[str]) -> list[str]:
        """The files of a directory output (paths relative to it, ``/``-separated) in the order
        they are uploaded: sorted (a directory format whose readers find the rest through one
        file puts that one last)."""
        return sorted(files)

    @classmethod
    def replaceable_files(cls, read: Callable[[str, int], bytes], url: str) -> list[str]:
        """The files of the existing directory output at ``url`` that writing a new one there
        may replace (``read(name, most)``: the bytes of one of its files, at most ``most``);
        an :class:`~polybag.errors.OutputExistsError` when it is no output of this format."""
        raise OutputExistsError(f"{url}: exists and is not a {cls.format or 'log'} directory; not replaced, even with --force")

    # Subclasses define __init__(self, path_or_stream, *, format=None, compression=..., chunk_size=..., ...)

    def add_schema(self, name: str, encoding: str, data: bytes) -> Schema:
        raise NotImplementedError

    def add_channel(self, topic: str, message_encoding: str, schema: Schema | None = None, metadata: Mapping[str, str] | None = None) -> Channel:
        raise NotImplementedError

    def write(self, channel: Channel, data: bytes | memoryview, log_time: int, publish_time: int | None = None, sequence: int = 0) -> None:
        raise NotImplementedError

    @property
    def holds(self) -> frozenset[str] | None:
        """The message encodings this writer's files hold (None: any), as the format registry
        says (``FormatSpec.holds``); the channel map bridges other channels into them."""
        from polybag.formats import registry

        return registry.get(self.format).holds

    def add_ulog_subscription(self, name: str, multi_id: int, formats: Sequence[str]) -> Channel:
        """ULog message ``name`` as subscription ``multi_id``; ``formats`` are its ULog format
        and the nested ones (``name:type field;...``, nested first).  How a channel bridged
        into ULog is written (:mod:`polybag.bridges.ros1_ulog`); only a writer whose files
        hold ULog messages takes one."""
        raise UnsupportedError(f"{self.format} files cannot hold ULog subscriptions")

    def add_attachment(self, name: str, media_type: str, data: bytes, log_time: int = 0, create_time: int = 0) -> None:
        raise UnsupportedError(f"{self.format} files cannot hold attachments")

    def add_metadata(self, name: str, metadata: Mapping[str, str]) -> None:
        raise UnsupportedError(f"{self.format} files cannot hold metadata")

    def undefined_types(self) -> dict[str, str]:
        """The ROS 2 types written without a definition, each with its first topic: no text
        in the input (a rosbag2 bag before Iron stores none) and known nowhere (not bundled,
        not added with ``--types``), so other tools cannot decode them.  Only formats that
        store definitions (MCAP, rosbag2) have any; a file whose other ROS 2 definitions
        have text has none (an empty text there is a message without fields)."""
        return {}

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
        """Finish the output (``NAME.active`` renamed to ``NAME``); a URL's is then uploaded
        (the staged copy is removed either way)."""
        upload = self.upload
        if upload is None:
            self.finish_output()
            return
        if upload.closed:
            return
        upload.closed = True
        try:
            self.finish_output()
        except BaseException:
            self._drop_upload(upload)
            raise
        upload.commit()

    def abort(self, *, discard: bool = False) -> None:
        """Stop without finishing: ``NAME.active`` stays as a killed writer leaves it (for
        ``reindex``/``recover``), or is removed with ``discard=True``.  A URL's output is
        never uploaded and its staged copy removed (``discard`` is implied: there is no
        ``NAME.active`` to recover)."""
        upload = self.upload
        if upload is None:
            self.abort_output(discard=discard)
        elif not upload.closed:
            upload.closed = True
            self._drop_upload(upload)
        elif not upload.done:
            upload.discard()

    def _drop_upload(self, upload: Upload) -> None:
        try:
            self.abort_output(discard=True)
        except BaseException:  # noqa: BLE001 - already failing
            pass
        upload.discard()

    def finish_output(self) -> None:
        """Finish the output: what ``close`` does (each format writer implements it)."""
        raise NotImplementedError

    def abort_output(self, *, discard: bool = False) -> None:
        """Stop without finishing: what ``abort`` does (each format writer implements it)."""
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

    def write(self, b: Any) -> int:
        try:
            return super().write(b)
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
    without hard links, checked then renamed.  ``overwrite=True`` replaces a file (a symbolic
    link is replaced itself, never followed), never a directory.  A refused ``tmp`` is removed."""
    t, f = os.fspath(tmp), os.fspath(final)
    if overwrite:
        try:
            st = os.lstat(f)
        except FileNotFoundError:
            st = None
        if st is not None and stat.S_ISDIR(st.st_mode):
            _unlink_quietly(t)
            raise OutputExistsError(
                f"{f}: a directory of that name appeared while writing; not replaced (the new output was discarded)"
            )
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
        raise OutputExistsError(f"{p} exists; not overwritten (polybag writes only files it creates)") from None


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

    return tempfile.mkstemp(prefix=f".{os.path.basename(p)}.", suffix=".tmp", dir=folder)


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
        _unlink_quietly(tmp)
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
        raise OutputExistsError(f"{p}: {what} exists; not overwritten (--force replaces it; in Python overwrite=True)")


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

    def __init__(self, target: str | os.PathLike[str] | BinaryIO, buffering: int = 1 << 20, *, overwrite: bool = True) -> None:
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
            _unlink_quietly(self.active_path)


def check_open(closed: bool) -> None:
    if closed:
        raise WriteError("the writer is closed")
