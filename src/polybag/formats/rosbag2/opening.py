"""Opening a rosbag2 directory for :class:`~polybag.formats.rosbag2.reader.Rosbag2Reader`.

:class:`Rosbag2Opening` is the reader's mixin that reads ``metadata.yaml`` (when there is
one), opens the storage files it lists (or, recovering, those found in the directory),
checks the compression settings and builds the channels: one per (topic, type,
serialization format) over every file, each file's local topic ids mapped to them.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from polybag.errors import FormatError, PolybagError, UnsupportedError
from polybag.formats.rosbag2.metadata import (
    MAX_METADATA_BYTES,
    METADATA_FILE,
    BagInfo,
    FileInfo,
    TopicInfo,
    parse_metadata,
)
from polybag.formats.rosbag2.storage import Decompressed, Storage, StorageTopic, open_storage
from polybag.model import Channel, Schema, Summary

#: storage file names recognised in a directory without metadata.yaml
_STORAGE_RE = re.compile(r".+\.(db3|mcap)(\.zstd|\.active)?$")


def _storage_files(directory: str) -> list[str]:
    """rosbag2 storage files of a directory without metadata.yaml: every ``.db3`` (and
    ``.db3.zstd``), and ``.mcap`` files named after the directory as rosbag2 and rosbags
    name them (``NAME_<n>.mcap``, ``NAME.mcap``)."""
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    base = os.path.basename(os.path.normpath(directory))
    if base.endswith(".active"):
        base = base[: -len(".active")]
    out = []
    for n in names:
        if not _STORAGE_RE.fullmatch(n) or not os.path.isfile(os.path.join(directory, n)):
            continue
        if ".db3" in n or re.fullmatch(re.escape(base) + r"(_\d+)?\.mcap(\.zstd|\.active)?", n):
            out.append(n)

    def index(n: str) -> tuple[int, str]:
        m = re.search(r"_(\d+)\.(db3|mcap)", n)
        return (int(m.group(1)) if m else 0, n)

    return sorted(out, key=index)


def _read_metadata(path: str) -> bytes:
    """The bytes of ``metadata.yaml`` (a :class:`FormatError` when unreadable or too big)."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_METADATA_BYTES + 1)
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
                qos, th = mt.offered_qos_profiles, mt.type_description_hash or t.type_description_hash
                local[t.id] = self.channel(t.name, t.type, mt.serialization_format, qos, th)
            else:
                local[t.id] = self.channel(
                    t.name,
                    t.type,
                    t.serialization_format,
                    t.offered_qos_profiles,
                    t.type_description_hash,
                )
        return local


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

    def _open(self, directory: str, single: str | None, options: dict[str, Any]) -> None:
        """Read metadata.yaml, open the storage files, check the compression, build the channels."""
        meta = os.path.join(directory, METADATA_FILE)
        files = self._storage_list(directory, single, meta)
        self._open_storages(directory, files, options)
        self._set_compression(meta, options)
        self._build_channels()

    def _storage_list(self, directory: str, single: str | None, meta: str) -> list[FileInfo]:
        """The storage files to open: metadata.yaml's (parsed into :attr:`info`), the lone
        ``single`` file, or (recovering without metadata.yaml) those found in ``directory``."""
        if single is None and os.path.isfile(meta):
            try:
                self.info = parse_metadata(_read_metadata(meta), meta)
            except PolybagError as e:
                if not self.recover:
                    raise
                self._note(f"{meta}: {e}")
        if self.info is not None:
            return self._listed_files(self.info, directory, meta)
        if single is not None:
            return [FileInfo(single)]
        if not self.recover:
            raise FormatError(
                "no metadata.yaml (an interrupted write?): `polybag recover` rebuilds the bag", directory
            )
        files = [FileInfo(n) for n in _storage_files(directory)]
        self._note(f"{directory}: no metadata.yaml; rebuilt from the storage files")
        return files

    def _listed_files(self, info: BagInfo, directory: str, meta: str) -> list[FileInfo]:
        """The storage files metadata.yaml lists (recovering: but the missing ones, and with
        those it does not list)."""
        files = list(info.files)
        if info.storage_identifier not in ("sqlite3", "mcap", ""):
            if not self.recover and not files:
                raise UnsupportedError(
                    f"{meta}: storage {info.storage_identifier!r} is not sqlite3 or mcap"
                )
        missing = [f.path for f in files if not os.path.isfile(os.path.join(directory, f.path))]
        if missing:
            if not self.recover:
                raise FormatError(f"storage file(s) missing: {', '.join(missing)}", meta)
            self._note(f"{meta}: storage file(s) missing: {', '.join(missing)}")
            files = [f for f in files if f.path not in missing]
        if self.recover:  # storage files the metadata does not list (a later split)
            known = {os.path.normpath(f.path) for f in files} | {os.path.normpath(m) for m in missing}
            files += [FileInfo(n) for n in _storage_files(directory) if n not in known]
        return files

    def _open_storages(self, directory: str, files: list[FileInfo], options: dict[str, Any]) -> None:
        """Open each storage file (recovering: skip, and note, those that do not open)."""
        declared = self.info.storage_identifier if self.info is not None else ""
        self._files = []  # the files opened, one per storage
        for f in files:
            p = os.path.join(directory, f.path)
            try:
                st, tmp = open_storage(p, declared, recover=self.recover, **options)
            except PolybagError as e:
                if not self.recover:
                    raise
                self._note(str(e))
                continue
            self._storages.append(st)
            self._files.append(f)
            if tmp is not None:
                self._temps.append(tmp)

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
            typ = st_topic.type if st_topic is not None else mt.type
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
