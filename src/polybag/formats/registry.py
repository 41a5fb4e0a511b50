"""The one list of formats polybag reads and writes.

Each format is one :class:`FormatSpec`: its name, the magic bytes that start its files, the
file extensions it is written with, how to open it (an opener taking a byte source) and how
to write it (a writer class), the chunk compressions its writer knows, and for formats that
are a directory or several files, a probe that recognises such a path and an opener that
takes the path.  Everything that needs the list asks here: :func:`polybag.open`,
:class:`polybag.Writer`, the command line's ``--format`` choices, ``play``'s file
arguments, ``compress``, ``dask`` and the operations.  Openers and writers are named as
``"module:attribute"`` strings, so looking a format up imports nothing until it is used.

Adding a format: write its package under ``polybag/formats/NAME/`` (a reader implementing
:class:`polybag.reader.Reader` with an opener ``open_NAME(source, path, **options)``, and a
:class:`polybag.writer.Writer` subclass if it can be written), then add one
``register(FormatSpec(...))`` call below.  A directory format (a ROS 2 bag) gives
``probe`` (does this directory or file belong to the format?) and ``open_path`` (open it
by path); ``polybag.open("run_0/")`` then finds it without any other change.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from polybag.errors import UnsupportedError

#: bytes read from the start of a file to tell its format
SNIFF_BYTES = 16


@dataclass(frozen=True)
class FormatSpec:
    """Everything polybag knows about one format, in one place."""

    name: str
    #: what files of this format start with (any of them)
    magics: tuple[bytes, ...]
    #: extensions the format is written with, the preferred one first (lower case, with the dot)
    extensions: tuple[str, ...]
    #: ``"module:function"``: ``function(source, path, **options) -> Reader`` for a byte source
    opener: str
    #: ``"module:Class"``: the :class:`~polybag.writer.Writer` subclass, or None (read only)
    writer: str | None = None
    #: chunk compressions the writer takes (:data:`polybag.io.compression.NAMES` spelling)
    compressions: tuple[str, ...] = ()
    #: the default chunk compression of the writer
    default_compression: str = "none"
    #: compression names that mean another one for this format (MCAP has no bz2: zstd)
    compression_aliases: tuple[tuple[str, str], ...] = ()
    #: ``"module:function"``: ``function(src, dst, compression, progress) -> report`` that
    #: rewrites a file with other chunk compression keeping every record as it is (bags);
    #: None: ``compress`` copies the messages through the writer
    recompress: str | None = None
    #: other names accepted for ``format=`` / ``--format`` (``ulg`` for ``ulog``)
    aliases: tuple[str, ...] = ()
    #: extensions whose files are this format even without magic bytes (ROSLOG version 0 bags)
    headless_extensions: tuple[str, ...] = ()
    #: for directory or multi-file formats: ``probe(path) -> bool``
    probe: Callable[[str], bool] | None = None
    #: ``"module:function"``: ``function(path, **options) -> Reader`` for a path ``probe`` accepts
    open_path: str | None = None
    #: free text for ``--help`` and error messages
    description: str = ""
    #: the reader asks its source for the byte ranges it reads (``source.need``), so a remote
    #: file is fetched by range requests; False: a remote file is fetched whole before opening
    ranged: bool = False
    #: ``"module:function"``: ``function(url, storage_options, options) -> Reader | None``, a
    #: remote log of this format that is no single object (a rosbag2 bag directory at a URL);
    #: None when the URL is not one (then it is opened as one object, by range requests)
    open_url: str | None = None
    #: the message encodings the writer's files hold (None: any)
    holds: frozenset[str] | None = None
    #: the files always hold metadata records (``Writer.add_metadata``; a rosbag2 bag only
    #: with MCAP storage: False), so a ULog's info and parameters are kept as such records
    holds_metadata: bool = False
    #: the writer keeps a ULog's extras itself (info, parameters, their changes, dropouts:
    #: ``copy_extras``, ``add_param``); other formats get them as metadata or a warning
    keeps_ulog_extras: bool = False
    #: the opener options of a tolerant read (``polybag.open(path, tolerant=True)``, what a
    #: writing command such as convert, filter or split asks for): ``(("recover", True),)``
    #: for a ULog, where a log cut by power loss is the normal case and its recovering read
    #: costs no more; ``()``: a tolerant read is a plain one
    tolerant_options: tuple[tuple[str, Any], ...] = ()
    #: the opener takes ``topics=`` (parsing only those) and ``warn=`` (silence its warnings)
    opener_selects: bool = False
    #: the files have no index to split a read by (a ULog): read as one part
    unindexed: bool = False
    #: the chunk size ``split`` plans its parts with (None: the writer's own chunking)
    split_chunk_size: int | None = None
    #: the storages a bag of this format is written in (rosbag2: ``sqlite3``, ``mcap``)
    storages: tuple[str, ...] = ()
    #: ``"module:function"``: ``function(path) -> dict`` (``problems``, ``notes``,
    #: ``messages``), a check of the file's own records that ``polybag check`` runs for this
    #: format (a bag's connection and index records); None: the reader's check
    check: str | None = None
    #: ``"module:function"``: ``function(path, **options) -> report``, rebuilding a file's
    #: index (``polybag reindex``); None: the format has no index to rebuild
    reindex: str | None = None
    #: ``"module:function"``: ``function(reader) -> [(timestamp_us, level, text)] | None``,
    #: the events a log stores decoded with the definitions it holds (PX4 events in a ULog);
    #: None when it has no definitions
    events: str | None = None
    #: a topic is logged in instances (a ULog's ``multi_id``), each a table of its own
    #: records whose ``timestamp`` column is the log's own time in microseconds
    instance_tables: bool = False
    #: the ``profile=`` values the writer takes (MCAP's ``ros1`` and ``ros2``)
    profiles: tuple[str, ...] = ()
    #: what a recording counts towards ``--size``: the bytes a message adds besides its
    #: payload (record header, index entry) and the bytes a new file starts with
    message_overhead: int = 0
    header_overhead: int = 0

    def load_recompress(self) -> Callable[..., Any] | None:
        """The format's recompressor (imported on first use), or None: ``compress`` copies."""
        return None if self.recompress is None else _load(self.recompress)

    def load_events(self) -> Callable[..., Any] | None:
        """The format's event decoder (imported on first use), or None."""
        return None if self.events is None else _load(self.events)

    def load_check(self) -> Callable[..., Any] | None:
        """The format's own check (imported on first use), or None."""
        return None if self.check is None else _load(self.check)

    def load_reindex(self) -> Callable[..., Any] | None:
        """The format's index rebuilder (imported on first use), or None."""
        return None if self.reindex is None else _load(self.reindex)

    def load_opener(self) -> Callable[..., Any]:
        """The opener function (imported on first use)."""
        opener: Callable[..., Any] = _load(self.opener)
        return opener

    def load_writer(self) -> type:
        """The writer class (imported on first use); :class:`UnsupportedError` if read only."""
        if self.writer is None:
            raise UnsupportedError(f"polybag cannot write {self.name} files")
        cls: type = _load(self.writer)
        return cls

    def chunk_compression(self, name: str) -> str:
        """``name`` as this format's chunk compression (aliases applied); a
        :class:`UnsupportedError` naming the ones it has."""
        name = dict(self.compression_aliases).get(name.lower(), name.lower())
        if name not in self.compressions:
            raise UnsupportedError(f"{self.name} chunks can be {', '.join(self.compressions)}, not {name}")
        return name

    def open_by_url(self, url: str, storage_options: dict[str, Any] | None, options: dict[str, Any]) -> Any:
        """Open the remote log at ``url`` with the format's ``open_url`` hook (None: the URL
        is not one the hook takes, or the format has no hook)."""
        if self.open_url is None:
            return None
        return _load(self.open_url)(url, storage_options, options)

    def open_by_path(self, path: str, **options: Any) -> Any:
        """Open a directory or multi-file log of this format by its path (``open_path``)."""
        if self.open_path is None:
            raise UnsupportedError(f"{self.name} logs are opened from a byte source, not by path")
        return _load(self.open_path)(path, **options)

    @property
    def extension(self) -> str:
        """The preferred extension (``.mcap``)."""
        return self.extensions[0] if self.extensions else "." + self.name


_FORMATS: dict[str, FormatSpec] = {}
_ALIASES: dict[str, str] = {}


def register(spec: FormatSpec) -> FormatSpec:
    """Add (or replace) a format."""
    _FORMATS[spec.name] = spec
    for a in (spec.name, *spec.aliases):
        _ALIASES[a.lower()] = spec.name
    return spec


def formats() -> Iterator[FormatSpec]:
    """Every registered format, in registration order."""
    return iter(list(_FORMATS.values()))


def names() -> list[str]:
    """The registered format names (``mcap``, ``bag``, ``ulog``...)."""
    return list(_FORMATS)


def writable() -> list[str]:
    """The names of the formats polybag can write."""
    return [s.name for s in _FORMATS.values() if s.writer is not None]


def lookup(name: str) -> FormatSpec | None:
    """The format called ``name`` (or one of its aliases, any case), or None."""
    key = _ALIASES.get(name.lower())
    return _FORMATS[key] if key is not None else None


def get(name: str) -> FormatSpec:
    """The format called ``name``; :class:`UnsupportedError` naming the known ones."""
    spec = lookup(name)
    if spec is None:
        raise UnsupportedError(f"unknown format {name!r} (known: {', '.join(_FORMATS)})")
    return spec


def writer_spec(name: str) -> FormatSpec:
    """The writable format called ``name``; :class:`UnsupportedError` otherwise."""
    spec = lookup(name)
    if spec is None or spec.writer is None:
        raise UnsupportedError(f"no writer for format {name!r} (known: {', '.join(writable())})")
    return spec


def sniff(head: bytes) -> str | None:
    """The format whose magic bytes ``head`` starts with, or None."""
    for spec in _FORMATS.values():
        if any(head.startswith(m) for m in spec.magics):
            return spec.name
    return None


def by_extension(path: str | os.PathLike[str], *, headless: bool = False) -> str | None:
    """The format a file name's extension says (``x.bag.active`` counts as ``x.bag``), or
    None.  ``headless``: only formats whose files may lack magic bytes (ROSLOG version 0)."""
    p = os.fspath(path).lower()
    if p.endswith(".active"):
        p = p[: -len(".active")]
    for spec in _FORMATS.values():
        exts = spec.headless_extensions if headless else spec.extensions
        if p.endswith(tuple(exts)):
            return spec.name
    return None


def format_for_path(path: str | os.PathLike[str]) -> str:
    """The writable format an output path's extension asks for; :class:`UnsupportedError`
    with a hint to pass ``format=`` when the extension says nothing."""
    p = os.fspath(path)
    if p.endswith(".active"):
        p = p[: -len(".active")]
    ext = os.path.splitext(p)[1].lower()
    for spec in _FORMATS.values():
        if ext in spec.extensions and spec.writer is not None:
            return spec.name
    raise UnsupportedError(f"{p}: cannot tell the format from the extension {ext!r}; pass format=")


def probe_path(path: str | os.PathLike[str]) -> FormatSpec | None:
    """The directory or multi-file format ``path`` belongs to, or None."""
    p = os.fspath(path)
    for spec in _FORMATS.values():
        if spec.probe is not None and spec.open_path is not None:
            try:
                if spec.probe(p):
                    return spec
            except OSError:
                continue
    return None


def sniff_path(path: str | os.PathLike[str]) -> str | None:
    """The format of the file or directory at ``path``: a directory format's probe, then the
    magic bytes, then (for files without a header line) the extension; None when unknown.
    An unreadable path is a :class:`~polybag.errors.PolybagError`."""
    from polybag.errors import PolybagError

    spec = probe_path(path)
    if spec is not None:
        return spec.name
    p = os.fspath(path)
    try:
        with open(p, "rb") as f:
            head = f.read(SNIFF_BYTES)
    except OSError as e:
        raise PolybagError(f"{p}: cannot open: {e.strerror or e}") from None
    return sniff(head) or (by_extension(p, headless=True) if head else None)


def file_extensions() -> tuple[str, ...]:
    """Every extension of every format, and ``.active`` (what a log file argument ends with)."""
    out: list[str] = []
    for spec in _FORMATS.values():
        out.extend(e for e in spec.extensions if e not in out)
    return (*out, ".active")


def magic_names() -> str:
    """``"MCAP, bag or ULog"``: the formats told by magic bytes, for error messages."""
    labels = [s.description or s.name for s in _FORMATS.values() if s.magics]
    return labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + " or " + labels[-1]


def _load(spec: str) -> Any:
    mod, _, name = spec.partition(":")
    return getattr(importlib.import_module(mod), name)


# --- the formats ------------------------------------------------------------------------------
MCAP_MAGIC = b"\x89MCAP0\r\n"
ULOG_MAGIC = b"ULog\x01\x12\x35"
BAG_MAGICS = (b"#ROSBAG V", b"#ROSRECORD V", b"#ROSLOG V")

register(
    FormatSpec(
        name="mcap", magics=(MCAP_MAGIC,), extensions=(".mcap",),
        opener="polybag.formats.mcap.reader:open_mcap",
        ranged=True,
        writer="polybag.formats.mcap.writer:McapWriter",
        compressions=("none", "zstd", "lz4"),
        default_compression="zstd",
        compression_aliases=(("bz2", "zstd"),),
        holds_metadata=True,
        split_chunk_size=1 << 20,
        description="MCAP",
        profiles=("ros1", "ros2"),
        message_overhead=31 + 16,  # message record and its index entry
        header_overhead=8 + 9 + 64,  # magic, header record, profile and library
    )
)
register(
    FormatSpec(
        name="bag", magics=BAG_MAGICS, extensions=(".bag",),
        opener="polybag.formats.bag.reader:open_bag",
        ranged=True,
        writer="polybag.formats.bag.writer:BagWriter",
        compressions=("none", "bz2", "lz4"),
        default_compression="none",
        recompress="polybag.formats.bag.reindex:recompress_bag_file",
        aliases=("rosbag", "bag1"),
        headless_extensions=(".bag",),  # ROSLOG version 0 has no header line
        holds=frozenset({"ros1"}),
        split_chunk_size=768 * 1024,
        check="polybag.formats.bag.check:check_bag",
        reindex="polybag.formats.bag.reindex:reindex_bag",
        description="bag",
        message_overhead=4 + 38 + 4 + 12,  # record header, its length, data length, index entry
        header_overhead=13 + 4096,  # the version line and the padded bag header record
    )
)
register(
    FormatSpec(
        name="ulog",
        magics=(ULOG_MAGIC,),
        extensions=(".ulg", ".ulog"),
        opener="polybag.formats.ulog.reader:open_ulog",
        writer="polybag.formats.ulog.writer:UlogWriter",
        compressions=("none",),
        aliases=("ulg",),
        holds=frozenset({"ulog"}),
        keeps_ulog_extras=True,
        tolerant_options=(("recover", True),),
        opener_selects=True,
        unindexed=True,
        events="polybag.formats.ulog.events:logged_events",
        instance_tables=True,
        description="ULog",
        message_overhead=2 + 1 + 2,  # message size, type, msg_id
        header_overhead=16,  # the file header
    )
)


def _probe_rosbag2(path: str) -> bool:
    # named as a string, like the openers: the registry imports no format
    probe: Callable[[str], bool] = _load("polybag.formats.rosbag2:looks_like_rosbag2")
    return probe(path)


register(
    FormatSpec(
        name="rosbag2",
        magics=(),
        extensions=(),
        opener="polybag.formats.rosbag2.reader:open_rosbag2_file",
        writer="polybag.formats.rosbag2.writer:Rosbag2Writer",
        compressions=("none", "zstd"),
        default_compression="none",
        recompress="polybag.formats.rosbag2.recompress:recompress_rosbag2",
        aliases=("ros2bag",),
        probe=_probe_rosbag2,  # a directory with metadata.yaml, its metadata.yaml, a .db3
        open_path="polybag.formats.rosbag2.reader:open_rosbag2",
        open_url="polybag.formats.rosbag2.remote:open_remote_bag",  # a bag directory at a URL
        holds=frozenset({"cdr"}),
        storages=("sqlite3", "mcap"),
        reindex="polybag.formats.rosbag2.reindex:reindex_rosbag2",
        description="rosbag2",
        message_overhead=31 + 16,  # counted as in its MCAP storage
        header_overhead=4096,  # metadata.yaml and the storage file's start
    )
)
