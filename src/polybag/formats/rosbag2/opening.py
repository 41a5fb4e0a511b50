"""Opening a rosbag2 directory for :class:`~polybag.formats.rosbag2.reader.Rosbag2Reader`.

:class:`Rosbag2Opening` is the reader's mixin that reads ``metadata.yaml`` (when there is
one), opens the storage files it lists (or, without one, those found in the directory by
content: MCAP files and rosbag2 SQLite databases whatever their names, see :func:`storage_files`),
checks the compression settings and builds the channels: one per (topic, type,
serialization format) over every file, each file's local topic ids mapped to them.

The listed files are untrusted: each must be a regular file inside the bag directory (a
symbolic link out of it, ``..`` or an absolute path is refused), a file listed twice under
any spelling (``a.db3``, ``./a.db3``, a link or hard link to it) is read once, and storage
files beside them that metadata.yaml does not list are reported (a warning, and
``definition_problems`` for ``check``) but not read, as rosbag2 does (a recovering read
reads them).  Each file is a :class:`LazyStorage`: open only while used, at most
:data:`MAX_OPEN_STORAGES` at once, so a bag of thousands of files costs a few KB per file.
"""

from __future__ import annotations

import os
import re
import stat
import threading
import warnings
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from polybag.errors import FormatError, PolybagError, PolybagWarning, UnsupportedError
from polybag.formats.rosbag2.metadata import (
    MAX_METADATA_BYTES,
    MAX_STORAGE_FILES,
    METADATA_FILE,
    BagInfo,
    FileInfo,
    TopicInfo,
    parse_metadata,
    topic_type,
    type_disagreement,
)
from polybag.formats.rosbag2.storage import (
    Decompressed,
    ForwardingStorage,
    Storage,
    StorageTopic,
    open_storage,
)
from polybag.model import Channel, Message, Schema, Summary

#: storage file names recognised in a directory without metadata.yaml, whatever their bytes
#: (a damaged ``.db3``, an unfinished ``.active`` file, a whole-file ``.zstd``): every ``.db3``
#: and ``.mcap`` files named after the directory as rosbag2 and rosbags name them
_STORAGE_RE = re.compile(r".+\.(db3|mcap)(\.zstd|\.active)?$")
_MCAP_MAGIC = b"\x89MCAP"
_SQLITE_MAGIC = b"SQLite format 3\x00"
#: a table of rosbag2's in an SQLite schema (the first page(s) of the file hold the schema)
_ROSBAG2_TABLE = re.compile(rb"CREATE\s+TABLE\s+[\"'`\[]?(topics|messages)\b", re.IGNORECASE)
#: the bytes of an SQLite file read to find rosbag2's tables in its schema
_SQLITE_SNIFF = 64 << 10
#: files of a directory without metadata.yaml whose content is looked at, at most
_MAX_SNIFFED = 4 * MAX_STORAGE_FILES


def _named_storage(name: str, base: str) -> bool:
    """Whether a file name alone says rosbag2 storage (``.db3``, ``NAME_<n>.mcap``)."""
    if not _STORAGE_RE.fullmatch(name):
        return False
    return ".db3" in name or re.fullmatch(re.escape(base) + r"(_\d+)?\.mcap(\.zstd|\.active)?", name) is not None


def _storage_content(p: str, root: str) -> tuple[tuple[int, int], bytes] | None:
    """(identity, first bytes) of the file ``p`` of the directory ``root`` (real path): None
    for a link out of the directory, anything but a regular file (never opened: a FIFO would
    block) or an unreadable file."""
    try:
        real = os.path.realpath(p)
        if os.path.commonpath([root, real]) != root:
            return None
        st = os.stat(real)
        if not stat.S_ISREG(st.st_mode):
            return None
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError):
        return None
    try:
        fst = os.fstat(fd)
        if not stat.S_ISREG(fst.st_mode):
            return None
        head = os.read(fd, 16)
        if head.startswith(_SQLITE_MAGIC):
            head += os.read(fd, _SQLITE_SNIFF)
        return (fst.st_dev, fst.st_ino), head
    except OSError:
        return None
    finally:
        os.close(fd)


def _is_storage(head: bytes) -> bool:
    """Whether a file's first bytes are rosbag2 storage: MCAP, or SQLite with rosbag2's tables."""
    if head.startswith(_MCAP_MAGIC):
        return True
    if head.startswith(_SQLITE_MAGIC):
        return {m.group(1).lower() for m in _ROSBAG2_TABLE.finditer(head)} == {b"topics", b"messages"}
    return False


def storage_files(directory: str) -> list[str]:
    """rosbag2 storage files of a directory without metadata.yaml, found by content: MCAP
    files and SQLite databases with rosbag2's tables, whatever they are called (rosbag2's
    own test bags are ``foo.mcap``, ``bar.mcap`` in a folder of another name); and those
    whose name says so (every ``.db3``, ``NAME_<n>.mcap``, their ``.zstd`` and ``.active``
    forms, read even when damaged).  Only regular files inside the directory (a symbolic
    link out of it is not followed), each once (a hard link or a link to a file listed is
    the same file; a named link out of it is listed for the opening to refuse, never read),
    the content of at most :data:`_MAX_SNIFFED` unnamed files looked at; hidden files and
    SQLite's ``-wal``/``-shm``/``-journal`` are not storage."""
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    base = os.path.basename(os.path.normpath(directory))
    if base.endswith(".active"):
        base = base[: -len(".active")]
    root = os.path.realpath(directory)
    out: list[str] = []
    seen: set[tuple[int, int]] = set()
    sniffed = 0
    for n in names:
        if n.startswith(".") or n == METADATA_FILE or n.endswith(("-wal", "-shm", "-journal")):
            continue
        named = _named_storage(n, base)
        if not named:
            if sniffed >= _MAX_SNIFFED:
                continue
            sniffed += 1
        p = os.path.join(directory, n)
        got = _storage_content(p, root)
        if got is None:
            # a named file that links out of the directory is listed, so that opening it
            # refuses (and a recovering read reports) it; it is never read
            if named and os.path.isfile(p):
                out.append(n)
            continue
        if got[0] in seen:
            continue
        if named or _is_storage(got[1]):
            seen.add(got[0])
            out.append(n)

    def index(n: str) -> tuple[int, str]:
        m = re.search(r"_(\d+)\.(db3|mcap)", n)
        return (int(m.group(1)) if m else 0, n)

    return sorted(out, key=index)


def _checked_file(p: str, root: str, name: str) -> tuple[int, int]:
    """The identity (device, inode) of storage file ``p`` of the bag directory ``root``
    (real path): FileNotFoundError when it is not there; a FormatError (naming ``name``)
    when it is, or links to, something outside the directory or not a regular file."""
    real = os.path.realpath(p)
    if os.path.commonpath([root, real]) != root:
        raise FormatError(f"storage file {name!r} links to {real!r}, outside the bag directory")
    try:
        st = os.stat(real)
    except FileNotFoundError:
        raise
    except OSError as e:
        raise FormatError(f"storage file {name!r}: {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        raise FormatError(f"storage file {name!r} is not a regular file")
    return st.st_dev, st.st_ino


def _contained(p: str, root: str, name: str, directory: str) -> None:
    """:func:`_checked_file` with every failure a FormatError naming ``directory``."""
    try:
        _checked_file(p, root, name)
    except FileNotFoundError:
        raise FormatError(f"storage file {name!r} is missing", directory) from None
    except FormatError as e:
        raise FormatError(e.message, directory) from None


def _read_metadata(path: str) -> bytes:
    """The bytes of ``metadata.yaml``: a :class:`FormatError` when unreadable, too big, not
    a regular file (a FIFO would block, ``/dev/zero`` never end) or a link out of the bag
    directory."""
    root = os.path.realpath(os.path.dirname(path) or ".")
    real = os.path.realpath(path)
    if os.path.commonpath([root, real]) != root:
        raise FormatError(f"metadata.yaml links to {real!r}, outside the bag directory", path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise FormatError(f"cannot read: {e.strerror or e}", path) from None
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        regular = False
    if not regular:  # (a directory: os.fdopen would raise)
        os.close(fd)
        raise FormatError("metadata.yaml is not a regular file", path)
    with os.fdopen(fd, "rb") as f:
        try:
            st = os.fstat(fd)
            if st.st_size > MAX_METADATA_BYTES:
                raise FormatError(
                    f"metadata.yaml is over {MAX_METADATA_BYTES} bytes: not a rosbag2 metadata file", path
                )
            pieces: list[bytes] = []
            got = 0
            while got <= MAX_METADATA_BYTES:  # read(MAX + 1) would allocate the whole cap
                piece = f.read(min(1 << 20, MAX_METADATA_BYTES + 1 - got))
                if not piece:
                    break
                pieces.append(piece)
                got += len(piece)
            data = b"".join(pieces)
        except OSError as e:
            raise FormatError(f"cannot read: {e.strerror or e}", path) from None
    if len(data) > MAX_METADATA_BYTES:
        raise FormatError(
            f"metadata.yaml is over {MAX_METADATA_BYTES} bytes: not a rosbag2 metadata file", path
        )
    return data


def _definitions(file_topics: list[list[StorageTopic]]) -> dict[str, tuple[str, bytes]]:
    """Each type's message definition ``(encoding, text)``: the first file that stores one."""
    defs: dict[str, tuple[str, bytes]] = {}
    for tops in file_topics:
        for t in tops:
            if t.definition_encoding and t.type not in defs:
                defs[t.type] = (t.definition_encoding, t.definition)
    return defs


class _MetaTopics:
    """metadata.yaml's topics, looked up for a storage topic: same name and type, or the one
    entry of its name (a metadata type spelled otherwise, ``pkg/Type``: the file's type is used)."""

    def __init__(self, meta_list: list[TopicInfo]) -> None:
        self.by_name_type: dict[tuple[str, str], TopicInfo] = {}
        for t in meta_list:
            self.by_name_type.setdefault((t.name, t.type), t)
        self.by_name: dict[str, list[TopicInfo]] = {}
        for t in self.by_name_type.values():
            self.by_name.setdefault(t.name, []).append(t)

    def meta_for(self, t: StorageTopic) -> TopicInfo | None:
        """The metadata.yaml entry of storage topic ``t``, or None."""
        got = self.by_name_type.get((t.name, t.type))
        if got is None and len(self.by_name.get(t.name, ())) == 1:
            got = self.by_name[t.name][0]
        return got

    def first_matches(self, file_topics: list[list[StorageTopic]]) -> dict[int, StorageTopic]:
        """id(metadata entry) -> the first storage topic that matches it."""
        matched: dict[int, StorageTopic] = {}
        for tops in file_topics:
            for t in tops:
                mt = self.meta_for(t)
                if mt is not None:
                    matched.setdefault(id(mt), t)
        return matched


@dataclass
class _ChannelTable:
    """The channels and schemas being built, numbered from 1 in the order they are first asked for."""

    defs: dict[str, tuple[str, bytes]]
    by_key: dict[tuple[str, str, str], Channel] = field(default_factory=dict)
    schemas: dict[tuple[str, str, bytes], Schema] = field(default_factory=dict)

    def channel(self, name: str, type_name: str, fmt: str, qos: str, type_hash: str) -> Channel:
        """The channel of (topic, type, serialization format), made on first use."""
        key = (name, type_name, fmt)
        ch = self.by_key.get(key)
        if ch is None:
            enc, data = self.defs.get(type_name, ("ros2msg", b""))
            skey = (type_name, enc, data)
            schema = self.schemas.get(skey)
            if schema is None:
                schema = self.schemas[skey] = Schema(len(self.schemas) + 1, type_name, enc, data)
            md: dict[str, str] = {}
            if qos:
                md["offered_qos_profiles"] = qos
            if type_hash:
                md["topic_type_hash"] = type_hash
            ch = self.by_key[key] = Channel(len(self.by_key) + 1, name, fmt, schema, md)
        return ch

    def file_channels(self, tops: list[StorageTopic], meta: _MetaTopics) -> dict[int, Channel]:
        """One file's local topic ids -> channels (serialization format and QoS from its
        metadata.yaml entry when it has one)."""
        local: dict[int, Channel] = {}
        for t in tops:
            mt = meta.meta_for(t)
            if mt is not None:
                typ = topic_type(mt.type, t.type)  # metadata.yaml's, as rosbag2 reads it
                own = t.type_description_hash if typ == t.type else ""
                qos, th = mt.offered_qos_profiles, mt.type_description_hash or own
                local[t.id] = self.channel(t.name, typ, mt.serialization_format, qos, th)
            else:
                local[t.id] = self.channel(
                    t.name,
                    t.type,
                    t.serialization_format,
                    t.offered_qos_profiles,
                    t.type_description_hash,
                )
        return local


#: storage files a reader keeps open at once (each costs a file descriptor and ~170 KB):
#: the others are opened again when used
MAX_OPEN_STORAGES = 16


class _Pool:
    """The storage files of one reader that are open, least recently used first."""

    def __init__(self, limit: int = MAX_OPEN_STORAGES) -> None:
        self.limit = limit
        self.lock = threading.RLock()  # a reader's files may be read from several threads
        self.open: OrderedDict[int, LazyStorage] = OrderedDict()

    def used(self, lazy: LazyStorage) -> None:
        self.open[id(lazy)] = lazy
        self.open.move_to_end(id(lazy))
        self.shrink(lazy)

    def shrink(self, keep: LazyStorage | None = None) -> None:
        """Close the least recently used files not being read (but ``keep``) until at most
        ``limit`` are open."""
        if len(self.open) <= self.limit:
            return
        for key, lazy in list(self.open.items()):
            if len(self.open) <= self.limit:
                break
            if lazy.pins == 0 and lazy is not keep:
                del self.open[key]
                lazy.shut()

    def forget(self, lazy: LazyStorage) -> None:
        self.open.pop(id(lazy), None)


class LazyStorage(ForwardingStorage):
    """A storage file that is open only while it is used: opened once to learn its topics,
    then again for each read; at most :data:`MAX_OPEN_STORAGES` of one reader stay open
    (a file being read is never closed under its reader), so a bag of thousands of files
    costs a few KB per file, not a connection and a descriptor each.  A zstd-compressed
    file's decompressed copy (``tmp``) lives while the file is open (it is decompressed
    again when reopened), so the temporary space is that of the open files."""

    def __init__(self, path: str, declared: str, options: dict[str, Any], pool: _Pool) -> None:
        super().__init__(path, bool(options.get("recover")))
        self.declared = declared
        self.options = options
        self.pool = pool
        self.inner: Storage | None = None
        self.tmp: Decompressed | None = None
        self.pins = 0
        self._kept: list[str] = []
        self._skipped = 0
        self._cache: dict[str, Any] = {}
        st, self.tmp = open_storage(path, declared, **options)
        self._attach(st)
        self._cache["size"] = st.size()
        try:  # asked for next (the channels, the merge's times): while the file is open
            self._cache["topics"] = st.topics()
            if self.tmp is not None:  # not decompressed again for them
                self._cache["times"] = st.times()
        except PolybagError:
            pass  # raised again when asked for (recovering: noted then)

    def __getattr__(self, name: str) -> Any:
        """What else the open file has (``db`` of an SQLite file...), opening it."""
        if name.startswith("_") or name in ("inner", "pool", "tmp", "options", "pins", "declared"):
            raise AttributeError(name)
        return getattr(self._get(), name)

    def _attach(self, st: Storage) -> None:
        self.inner = st
        self.kind = st.kind
        self.pool.used(self)

    def _get(self) -> Storage:
        with self.pool.lock:
            if self.inner is None:
                st, self.tmp = open_storage(self.path, self.declared, **self.options)
                self._attach(st)
            else:
                self.pool.used(self)
            assert self.inner is not None
            return self.inner

    def _pin(self) -> Storage:
        """The open file, kept open until :meth:`_unpin`."""
        with self.pool.lock:
            st = self._get()
            self.pins += 1
            return st

    def _unpin(self) -> None:
        with self.pool.lock:
            self.pins -= 1
            self.pool.shrink()

    def shut(self) -> None:
        """Close the file and remove its decompressed copy (its errors are kept); it opens
        again when used."""
        st, self.inner = self.inner, None
        tmp, self.tmp = self.tmp, None
        try:
            if st is not None:
                self._keep(st)
                st.close()
        except PolybagError:
            pass
        finally:
            if tmp is not None:
                tmp.close()

    def _keep(self, st: Storage) -> None:
        self._kept.extend(e for e in st.errors if e not in self._kept)
        self._skipped = max(self._skipped, st.bytes_skipped)

    @property
    def errors(self) -> list[str]:
        now = self.inner.errors if self.inner is not None else []
        return self._kept + [e for e in now if e not in self._kept]

    @errors.setter
    def errors(self, value: list[str]) -> None:
        pass  # Storage.__init__'s empty list: the file's own are used

    @property
    def bytes_skipped(self) -> int:
        return max(self._skipped, self.inner.bytes_skipped if self.inner is not None else 0)

    @bytes_skipped.setter
    def bytes_skipped(self, value: int) -> None:
        pass

    def _call(self, name: str, *args: Any) -> Any:
        st = self._pin()
        try:
            return getattr(st, name)(*args)
        finally:
            self._unpin()

    def _cached(self, name: str) -> Any:
        if name not in self._cache:
            self._cache[name] = self._call(name)
        return self._cache[name]

    def _stream(self, name: str, args: tuple[Any, ...]) -> Iterator[Any]:
        """The file's batches, opened when the first is asked for and pinned open until the last."""
        st = self._pin()
        try:
            yield from getattr(st, name)(*args)
        finally:
            self._unpin()

    def topics(self) -> list[StorageTopic]:
        return self._cached("topics")  # type: ignore[no-any-return]

    def counts(self) -> dict[int, int]:
        return self._cached("counts")  # type: ignore[no-any-return]

    def times(self) -> tuple[int | None, int | None]:
        return self._cached("times")  # type: ignore[no-any-return]

    def messages(self, *args: Any) -> Iterator[Iterable[Message]]:
        return self._stream("messages", args)

    def raw_batches(self, *args: Any) -> Iterator[Iterable[tuple[Channel, int, bytes | memoryview]]]:
        return self._stream("raw_batches", args)

    def size(self) -> int:
        if "size" not in self._cache:
            self._cache["size"] = self._get().size()
        return int(self._cache["size"])

    def release_pages(self) -> None:
        if self.inner is not None:
            self.inner.release_pages()

    def close(self) -> None:
        with self.pool.lock:
            self.pool.forget(self)
            self.shut()


class Rosbag2Opening:
    """The opening steps of :class:`~polybag.formats.rosbag2.reader.Rosbag2Reader` (a mixin):
    metadata.yaml, the storage files, the compression settings and the channels; and
    :meth:`_note`, the damage a recovering read met."""

    recover: bool
    info: BagInfo | None
    _errors: list[str]
    _noted: int
    _storages: list[Storage]
    _temps: list[Decompressed]
    _files: list[FileInfo]
    _per_message: bool
    _sniff_zstd: bool
    _max_bytes: int | None
    _local: list[dict[int, Channel]]
    _meta_channel: dict[int, Channel]
    _channels: dict[int, Channel]
    _schemas: dict[int, Schema]
    _summary: Summary | None
    #: an unfinished recording (a ``NAME.active`` directory with its metadata.yaml, refreshed
    #: as it was written: its counts lag the storage): read as it is, counted from the storage
    _unclosed: bool = False
    #: storage files beside the listed ones that metadata.yaml does not list (not read)
    _unlisted: list[str]

    def _open(self, directory: str, single: str | None, options: dict[str, Any]) -> None:
        """Read metadata.yaml, open the storage files, check the compression, build the channels."""
        meta = os.path.join(directory, METADATA_FILE)
        files = self._storage_list(directory, single, meta)
        self._open_storages(directory, files, options, single)
        self._set_compression(meta, options)
        self._build_channels()

    def _storage_list(self, directory: str, single: str | None, meta: str) -> list[FileInfo]:
        """The storage files to open: metadata.yaml's (parsed into :attr:`info`), the lone
        ``single`` file, or (without metadata.yaml) those found in ``directory`` by content
        (a plain read refuses an unfinished bag: a ``.active`` directory or file)."""
        if single is None and os.path.lexists(meta):  # (not a regular file: refused)
            try:
                self.info = parse_metadata(_read_metadata(meta), meta)
            except PolybagError as e:
                if not self.recover:
                    raise
                self._note(f"{meta}: {e}")
        if self.info is not None:
            if not self.recover and directory.rstrip(os.sep).endswith(".active"):
                self._unclosed = True
                self._warn(
                    f"{directory}: a recording that did not close (killed?): read as far as its storage "
                    "files go, counted from them (the counts in metadata.yaml lag them); "
                    "`polybag recover` completes it"
                )
            return self._listed_files(self.info, directory, meta)
        if single is not None:
            return [FileInfo(single)]
        names = storage_files(directory)
        if len(names) > MAX_STORAGE_FILES:
            raise FormatError(
                f"{len(names)} storage files, more than the {MAX_STORAGE_FILES} polybag opens (the limit)", directory
            )
        unfinished = directory.rstrip(os.sep).endswith(".active") or any(n.endswith(".active") for n in names)
        if not self.recover and (not names or unfinished):
            raise FormatError(
                "no metadata.yaml (an interrupted write?): `polybag recover` rebuilds the bag", directory
            )
        files = [FileInfo(n) for n in names]
        if self.recover:
            self._note(f"{directory}: no metadata.yaml; rebuilt from the storage files")
        else:  # rosbag2's own test bags come so: read from the storage files found by content
            self._warn(
                f"{directory}: no metadata.yaml; read from its storage file(s) {', '.join(names[:10])}"
                + (f" and {len(names) - 10} more" if len(names) > 10 else "")
                + " (`polybag reindex` writes one)"
            )
        return files

    def _listed_files(self, info: BagInfo, directory: str, meta: str) -> list[FileInfo]:
        """The storage files metadata.yaml lists, each once (by the file it is, so ``a.db3``
        and a link to it are one), none outside the bag directory (recovering: but the
        missing ones, and with those it does not list).  Storage files beside them that it
        does not list are not read (as rosbag2 does) but reported (:attr:`_unlisted`)."""
        files = list(info.files)
        if info.storage_identifier not in ("sqlite3", "mcap", ""):
            if not self.recover and not files:
                raise UnsupportedError(
                    f"{meta}: storage {info.storage_identifier!r} is not sqlite3 or mcap"
                )
        root = os.path.realpath(directory)
        missing: list[str] = []
        seen: dict[tuple[int, int], str] = {}
        kept: list[FileInfo] = []
        for f in files:
            p = os.path.join(directory, f.path)
            try:
                key = _checked_file(p, root, f.path)
            except FileNotFoundError:
                missing.append(f.path)
                continue
            except FormatError as e:
                if not self.recover:
                    raise FormatError(e.message, meta) from None
                self._note(f"{meta}: {e.message}")
                continue
            if key in seen:
                self._warn(f"{meta}: storage file {f.path!r} is listed twice (as {seen[key]!r}); read once")
                continue
            seen[key] = f.path
            kept.append(f)
        if missing:
            shown = ", ".join(missing[:10]) + (f" and {len(missing) - 10} more" if len(missing) > 10 else "")
            if not self.recover:
                raise FormatError(f"storage file(s) missing: {shown}", meta)
            self._note(f"{meta}: storage file(s) missing: {shown}")
        unlisted = []
        for n in storage_files(directory):
            try:
                key = _checked_file(os.path.join(directory, n), root, n)
            except (OSError, FormatError):
                continue
            if key not in seen:
                unlisted.append(n)
        if self.recover:  # storage files the metadata does not list (a later split)
            known = {os.path.normpath(m) for m in missing}
            kept += [FileInfo(n) for n in unlisted if n not in known]
        elif unlisted:
            shown = ", ".join(unlisted[:10]) + (f" and {len(unlisted) - 10} more" if len(unlisted) > 10 else "")
            self._unlisted.append(
                f"{meta}: does not list storage file(s) {shown} in the bag directory: not read "
                "(rosbag2 reads only the files listed; `polybag recover` reads them too)"
            )
            self._warn(self._unlisted[-1])
        return kept

    def _warn(self, text: str) -> None:
        warnings.warn(PolybagWarning(text), stacklevel=2)

    def _open_storages(self, directory: str, files: list[FileInfo], options: dict[str, Any], single: str | None) -> None:
        """Open each storage file (recovering: skip, and note, those that do not open)."""
        declared = self.info.storage_identifier if self.info is not None else ""
        self._files = []  # the files opened, one per storage
        root = os.path.realpath(directory)
        pool = _Pool()
        for f in files:
            p = os.path.join(directory, f.path)
            try:
                if self.info is not None or single is None:  # a lone .db3 is the caller's choice
                    _contained(p, root, f.path, directory)
                st = LazyStorage(p, declared, dict(options, recover=self.recover or self._unclosed), pool)
            except PolybagError as e:
                if not self.recover:
                    raise
                self._note(str(e))
                continue
            self._storages.append(st)
            self._files.append(f)

    def _set_compression(self, meta: str, options: dict[str, Any]) -> None:
        """Check metadata.yaml's compression mode and format; note how payloads are read."""
        mode = self.info.compression_mode if self.info is not None else ""
        fmt = self.info.compression_format if self.info is not None else ""
        if mode and mode not in ("file", "message", "none"):
            raise UnsupportedError(f"{meta}: compression mode {mode!r} is not file or message")
        if mode in ("file", "message") and fmt not in ("zstd", ""):
            raise UnsupportedError(f"{meta}: compression format {fmt!r} is not zstd")
        self._per_message = mode == "message"
        # without metadata.yaml (a killed writer) per-message compression is unknown: a
        # recovering read decompresses the payloads that are zstd frames (CDR starts 00 0x)
        self._sniff_zstd = self.recover and self.info is None
        self._max_bytes = options.get("max_chunk_bytes")

    def _build_channels(self) -> None:
        """One channel per (topic, type, serialization format) over every file, in the
        order metadata.yaml lists the topics; each file's local ids mapped to them."""
        meta_list = self.info.topics if self.info is not None else []
        meta = _MetaTopics(meta_list)
        self._local = []
        file_topics = self._file_topics()
        table = _ChannelTable(_definitions(file_topics))
        matched = meta.first_matches(file_topics)
        self._meta_channel = {}
        for mt in meta_list:  # the channels in metadata.yaml's order
            st_topic = matched.get(id(mt))
            typ = topic_type(mt.type, st_topic.type if st_topic is not None else None)
            if st_topic is not None:
                where = next(
                    (st.path for st, tops in zip(self._storages, file_topics) if st_topic in tops), "?"
                )
                text = type_disagreement(mt.name, mt.type, st_topic.type, where)
                if text is not None:
                    self._warn(text)
            ch = table.channel(
                mt.name, typ, mt.serialization_format, mt.offered_qos_profiles, mt.type_description_hash
            )
            self._meta_channel[id(mt)] = ch
        for tops in file_topics:
            self._local.append(table.file_channels(tops, meta))
        self._channels = {c.id: c for c in table.by_key.values()}
        self._schemas = {s.id: s for s in table.schemas.values()}
        self._summary = None

    def _file_topics(self) -> list[list[StorageTopic]]:
        """Each storage file's topics (recovering: none for a file whose table is damaged)."""
        file_topics: list[list[StorageTopic]] = []
        for st in self._storages:
            try:
                file_topics.append(st.topics())
            except PolybagError as e:
                if not self.recover:
                    raise
                self._note(str(e))
                file_topics.append([])
        return file_topics

    def _note(self, text: str) -> None:
        """Record damage a recovering read met (the first 200 places; then only a count)."""
        self._noted += 1
        if self._noted <= 200:
            self._errors.append(text)
        elif self._noted == 201:
            self._errors.append("more damage; only the first 200 places are listed")
