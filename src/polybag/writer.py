"""The writer interface every format implements and the factory that picks a format's writer
(the atomic-file helpers are in :mod:`polybag.io.output_files`).

``polybag.Writer(path, format=None, **options)`` is this class: calling it picks the
format's subclass from ``format=`` or the file extension (:class:`WriterFactory`).  A URL
output is the format's writer on a local staging path wired to an
:class:`~polybag.io.upload.Upload`: its ``close`` uploads, its ``abort`` drops.

``polybag.open_writer`` is :func:`open_writer`, typed in the package root (which can name
the formats' writer classes, this module cannot): ``format="mcap"`` is a ``McapWriter``
taking :class:`McapOptions`, and so for each format's options here.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, BinaryIO, ClassVar, Literal, TypedDict

from polybag.errors import OutputExistsError, UnsupportedError, WriteError
from polybag.io.output_files import log_file_refusal
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
    writer class constructs it as any class.

    Type checkers see ``Writer(...)`` as :meth:`Writer.__new__`, a ``Writer`` (mypy ignores
    a metaclass ``__call__``); typing it per format would need this module to name the
    formats' writer classes, which import it (a circle).  ``polybag.open_writer`` is the
    typed call."""

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
    #: ``add_channel`` again for a topic it has merges the new metadata (the QoS profiles of
    #: publishers seen later) into that topic, rather than adding a channel (rosbag2).  False:
    #: ``add_channel`` adds a channel; a writer whose channels can still take the QoS profiles
    #: of later publishers has ``grow_qos(channel, text)`` for it (MCAP: given at close)
    merges_topic_metadata: ClassVar[bool] = False
    #: bytes a file of this format still being written may end with for now (overwritten by
    #: the next write), so that readers needing a file's end open it; empty: none (MCAP: a
    #: Footer without summary and the closing magic)
    provisional_end: ClassVar[bytes] = b""
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
        """Register a message type: its ``name`` (``std_msgs/String``), the ``encoding`` of
        its definition (``ros1msg``, ``ros2msg``, ``ros2idl``, ``jsonschema``...) and the
        definition's bytes; returns the :class:`~polybag.model.Schema` to give channels."""
        raise NotImplementedError

    def add_channel(self, topic: str, message_encoding: str, schema: Schema | None = None, metadata: Mapping[str, str] | None = None) -> Channel:
        """Register a topic: its name, the encoding of its messages (``ros1``, ``cdr``,
        ``json``...), its schema and metadata (ROS 2 QoS, for example); returns the
        :class:`~polybag.model.Channel` to write messages on."""
        raise NotImplementedError

    def write(self, channel: Channel, data: bytes | memoryview, log_time: int, publish_time: int | None = None, sequence: int = 0) -> None:
        """Write one message of ``channel``: its serialized bytes and its log time (integer
        ns since the epoch; ``publish_time`` defaults to it)."""
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
        """Store a file in the log (MCAP): an :class:`~polybag.errors.UnsupportedError` from
        formats that cannot hold attachments."""
        raise UnsupportedError(f"{self.format} files cannot hold attachments")

    def add_metadata(self, name: str, metadata: Mapping[str, str]) -> None:
        """Store a named record of string pairs in the log (MCAP, rosbag2 with MCAP storage):
        an :class:`~polybag.errors.UnsupportedError` from formats that cannot hold metadata."""
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


def check_open(closed: bool) -> None:
    if closed:
        raise WriteError("the writer is closed")
