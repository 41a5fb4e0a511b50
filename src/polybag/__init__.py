"""polybag: robot logs (ROS 1 bags, MCAP, PX4 ULog) without ROS.

>>> import polybag
>>> with polybag.open("in.mcap") as r:
...     for m in r.messages(topics=["/a"]):
...         print(m.channel.topic, m.log_time, bytes(m.data))
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import TYPE_CHECKING, Any, BinaryIO

from polybag._version import __version__
from polybag.errors import (
    ChecksumError,
    DecodeError,
    EmptySelectionError,
    FormatError,
    NoObjectError,
    OutputExistsError,
    PolybagError,
    PolybagWarning,
    TruncatedError,
    UnknownFormatError,
    UnsupportedError,
    UsageError,
    WriteError,
)
from polybag.io.source import MappedSource, StreamSource, open_source
from polybag.io.urls import url_target
from polybag.model import Attachment, Channel, ChunkInfo, Message, Metadata, Schema, Summary
from polybag.reader import Reader
from polybag.writer import Writer

if TYPE_CHECKING:
    from typing import Literal, overload

    from typing_extensions import Unpack  # Python 3.10 has no typing.Unpack

    from polybag.formats.bag.writer import BagWriter
    from polybag.formats.mcap.writer import McapWriter
    from polybag.formats.registry import FormatSpec
    from polybag.formats.rosbag2.writer import Rosbag2Writer
    from polybag.formats.ulog.writer import UlogWriter
    from polybag.writer import BagOptions, McapOptions, Rosbag2Options, UlogOptions, WriterOptions

    #: what a writer writes to: a path, a URL or a binary stream
    WriterTarget = str | os.PathLike[str] | BinaryIO

    # The typed face of `polybag.writer.open_writer` (which the package root exports as
    # it is): the package root sits above the formats, so it can name each format's writer
    # class, which `polybag.writer` (below them) cannot.  A format named by a literal (its
    # registry name or an alias) types as its writer class with its own options; any other
    # `format=` (or none: the extension decides) as `Writer`.
    @overload
    def open_writer(path: WriterTarget, *, format: Literal["mcap"], **options: Unpack[McapOptions]) -> McapWriter: ...
    @overload
    def open_writer(
        path: WriterTarget, *, format: Literal["bag", "rosbag", "bag1"], **options: Unpack[BagOptions]
    ) -> BagWriter: ...
    @overload
    def open_writer(path: WriterTarget, *, format: Literal["ulog", "ulg"], **options: Unpack[UlogOptions]) -> UlogWriter: ...
    @overload
    def open_writer(
        path: str | os.PathLike[str], *, format: Literal["rosbag2", "ros2bag"], **options: Unpack[Rosbag2Options]
    ) -> Rosbag2Writer: ...
    @overload
    def open_writer(path: WriterTarget, *, format: str | None = None, **options: Unpack[WriterOptions]) -> Writer: ...
    def open_writer(path: Any = None, *args: Any, format: str | None = None, **options: Any) -> Writer:  # noqa: A002
        """The format's writer of ``path`` (see :func:`polybag.writer.open_writer`)."""
        ...
else:
    from polybag.writer import open_writer


def open(  # noqa: A001 - the public name the issue asks for
    target: str | os.PathLike[str] | BinaryIO | bytes | bytearray | memoryview,
    format: str | None = None,  # noqa: A002
    *,
    tolerant: bool = False,
    **options: Any,
) -> Reader:
    """Open a log for reading; the format comes from its magic bytes (or ``format=``).

    ``target`` is a path, a URL (any fsspec URL: ``s3://``, ``gs://``, ``http(s)://``,
    ``file://``; read by range requests, see :mod:`polybag.io.remote`; pass
    ``storage_options={...}`` for fsspec), a bytes-like buffer, or a binary stream (seekable files are
    mapped; pipes such as ``sys.stdin.buffer`` are read forward only).  A path may also be a
    directory (or a file inside one) of a format registered with a path probe
    (:mod:`polybag.formats.registry`).  ``options`` go to the format's reader (for example
    ``validate_crcs=False`` for MCAP).

    Every reader takes ``max_chunk_bytes``: what any single chunk may decompress to (bytes,
    or a size such as ``"1G"``; default 512 MiB, or the process-wide value of
    :func:`polybag.io.compression.set_max_chunk_bytes`).  A chunk over it is a
    :class:`FormatError` naming the file, the offset and the option, never an allocation.

    ``tolerant=True`` reads a local log file (a path, not a URL, a pipe or a directory) as a
    writing command reads its input: with its format's tolerant options
    (:attr:`~polybag.formats.registry.FormatSpec.tolerant_options`: a ULog is read
    recovering, so every intact message is read and the damage reported); ``options`` given
    here win over them.  Other formats, and other targets, are read plainly.

    How: the target is resolved to a byte source (:mod:`polybag.io`: mapped, streamed, or
    read by range requests) or, for a directory format, a path (or a remote layout of one,
    the registry's ``open_url`` hook); the format is found (the registry: a path probe, the
    magic bytes, the extension); its reader opens it.
    """
    from polybag.io.compression import max_chunk_bytes

    if options.get("max_chunk_bytes") is not None:
        options["max_chunk_bytes"] = max_chunk_bytes(options["max_chunk_bytes"])  # UsageError if not a size
    storage_options = options.pop("storage_options", None)
    # a tolerant read is one of a local file: its path names no URL (not even file://)
    tolerant = tolerant and isinstance(target, (str, os.PathLike)) and "://" not in os.fspath(target)
    url = url_target(target)
    if url is not None and url.local is not None:
        target = url.local  # a file:// URL is its local path
    elif url is not None:  # a URL: a format's remote layout (a bag directory), else one object
        reader = _open_remote_layout(url.url, format, storage_options, options)
        if reader is not None:
            return reader
        from polybag.io.remote import open_url  # here: it loads the transports (and numpy)

        return _open_source(open_url(url.url, storage_options), format, options)
    if isinstance(target, (str, os.PathLike)):  # a path: a directory (or multi-file) format's
        spec = _directory_format(target, format)
        if spec is not None:
            by_path: Reader = spec.open_by_path(os.fspath(target), **options)
            return by_path
    source = open_source(target)  # a file, a buffer or a stream
    return _open_source(source, format, options, tolerant=tolerant and isinstance(source, MappedSource))


def _open_remote_layout(
    url: str, format: str | None, storage_options: dict[str, Any] | None, options: dict[str, Any]  # noqa: A002
) -> Reader | None:
    """The reader a format's ``open_url`` hook makes of ``url`` (a rosbag2 bag directory at a
    URL), or None when no format takes the URL that way (it is then read as one object)."""
    from polybag.formats import registry

    wanted = registry.lookup(format) if format else None
    for spec in registry.formats():
        if spec.open_url is not None and (format is None or wanted is spec):
            reader: Reader | None = spec.open_by_url(url, storage_options, options)
            if reader is not None:
                return reader
    return None


def _directory_format(target: str | os.PathLike[str], format: str | None) -> FormatSpec | None:  # noqa: A002
    """The directory (or multi-file) format whose probe takes the path ``target`` (and that
    ``format`` names, if given), or None: the path is opened as one file."""
    from polybag.formats import registry

    by_path = registry.probe_path(target)
    if by_path is not None and (format is None or registry.lookup(format) is by_path):
        return by_path
    return None


def _open_source(
    source: MappedSource | StreamSource, format: str | None, options: dict[str, Any], *, tolerant: bool = False  # noqa: A002
) -> Reader:
    """The reader of an opened byte source (the format sniffed unless given); ``tolerant``:
    with the format's tolerant options under ``options``."""
    from polybag.formats import registry

    path = source.path
    if isinstance(source, MappedSource):
        head = bytes(source.view[: registry.SNIFF_BYTES])
    else:
        head = source.peek(registry.SNIFF_BYTES)
    fmt = format or registry.sniff(head)
    if fmt is None and path and head:
        fmt = registry.by_extension(path, headless=True)  # ROSLOG version 0 has no header line
    if fmt is None:
        source.close()
        if not head:
            raise UnknownFormatError("empty file: no magic bytes", path, 0)
        raise UnknownFormatError(
            f"not a log polybag can read: first bytes {head[:8]!r} match no {registry.magic_names()} magic",
            path,
            0,
        )
    spec = registry.lookup(fmt)
    if spec is None:
        source.close()
        raise UnsupportedError(f"unknown format {fmt!r} (known: {', '.join(registry.names())})")
    opener = spec.load_opener()
    if tolerant and spec.tolerant_options:
        options = {**dict(spec.tolerant_options), **options}
    try:
        if not spec.ranged:
            source.need_all()  # a remote file this format reads front to back (nothing locally)
        reader: Reader = opener(source, path, **options)
    except BaseException:
        source.close()
        raise
    return reader


__all__ = [
    "Attachment",
    "Channel",
    "ChecksumError",
    "ChunkInfo",
    "DecodeError",
    "EmptySelectionError",
    "FormatError",
    "Message",
    "Metadata",
    "NoObjectError",
    "OutputExistsError",
    "PolybagError",
    "PolybagWarning",
    "Reader",
    "Schema",
    "Summary",
    "TruncatedError",
    "UnknownFormatError",
    "UnsupportedError",
    "UsageError",
    "WriteError",
    "Writer",
    "__version__",
    "open",
    "open_writer",
]


def __dir__() -> list[str]:
    """What ``dir(polybag)`` lists: the public names (``__all__``), the module's own dunders
    and polybag's public subpackages loaded so far (``polybag.ops`` once imported), not the
    helpers the root imports for itself (``os``, ``Any``, ``open_source``...)."""
    own = globals()
    subpackages = (n for n, v in own.items() if isinstance(v, ModuleType) and not n.startswith("_") and v.__name__ == f"{__name__}.{n}")
    return sorted({*__all__, *(n for n in own if n.startswith("__") and n.endswith("__")), *subpackages})
