"""Writing a rosbag2 directory: :class:`Rosbag2Writer`.

``polybag.Writer("out", format="rosbag2", storage="sqlite3"|"mcap", compression="none"|"zstd",
compression_mode="file"|"message")`` writes the directory ``out/`` that ``ros2 bag`` and
rosbags read: one storage file ``out_0.db3`` or ``out_0.mcap`` (``.zstd`` appended with
file compression), message definitions stored (``message_definitions`` table, MCAP schemas),
the topics' QoS profiles kept (channel metadata ``offered_qos_profiles``), and
``metadata.yaml`` (version 8 by default: the QoS profiles stay the YAML strings rosbag2
before Jazzy reads, as they are in channel metadata; ``version=9`` for Jazzy's layout, QoS
as YAML lists with enum names).

Crash safety, as the other writers: the directory is written as ``out.active/`` and renamed
to ``out/`` by :meth:`close`, after the final ``metadata.yaml``.  While it is written,
``metadata.yaml`` is there from the start and refreshed as it goes (every
:data:`REFRESH_SECONDS` or :data:`REFRESH_MESSAGES` messages, and when a topic is added or its
QoS grows; atomically, a temporary file renamed over it; the SQLite batch is committed
first, the MCAP chunk finished): a killed writer leaves ``out.active/`` with its storage file (SQLite batches committed
as they go, MCAP chunks as they are finished) and a ``metadata.yaml`` whose counts lag it.
polybag and rosbags open it as it is (polybag warns that it did not close and counts what the
storage holds); ``polybag recover out.active fixed`` still writes a complete bag.

The QoS profiles of a topic grow: :meth:`add_channel` again for a topic (same type and
format) with other profiles in ``offered_qos_profiles`` adds the ones not listed yet (a
publisher that appeared later), to ``metadata.yaml`` and the sqlite3 ``topics`` row.  MCAP
storage: a Channel record cannot change once written, and rosbags reads no message of a topic
whose channel's profiles differ from metadata.yaml's, so while the bag is written (and in a
killed one) metadata.yaml lists the profiles the channel holds; at close the file is copied
once with the channels given all of them (:mod:`polybag.formats.mcap.late_definitions`, the
same pass that gives late type descriptions to their schemas), then metadata.yaml lists them
too (if the copy cannot be made: a warning, and the profiles the channels hold).

``overwrite`` replaces only exactly a bag (:func:`bag_entries`: a real directory with a
readable ``metadata.yaml`` and only the storage files it lists), never a folder of other
things, a file or a symbolic link; the old bag stays until the new one is complete, is then
renamed aside and only its own files removed.  An existing ``out.active`` is never touched.
"""

from __future__ import annotations

import os
import posixpath
import secrets
import shutil
import stat
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from polybag._version import __version__
from polybag.codecs.ros2_qos import MAX_QOS_PROFILES  # noqa: F401  (QoS profiles one topic keeps)
from polybag.codecs.ros2_qos import merged_qos as _merged_qos
from polybag.errors import OutputExistsError, UnsupportedError, WriteError
from polybag.formats import registry
from polybag.formats.rosbag2.metadata import (
    MAX_METADATA_BYTES,
    METADATA_FILE,
    BagInfo,
    FileInfo,
    TopicInfo,
    dump_metadata,
    parse_metadata,
    qos_for_version,
    qos_to_text,
)
from polybag.formats.rosbag2.sqlite_writer import SqliteStorageWriter
from polybag.io.compression import compress
from polybag.io.output_files import (
    named_os_error,
    open_new,
    refuse_existing,
    refuse_replacing,
    temp_beside,
    unlink_quietly,
    write_atomically,
)
from polybag.model import Channel, Schema
from polybag.writer import Writer, check_open

_DEFINITION_ENCODINGS = ("ros2msg", "ros2idl")
_I64 = (1 << 63) - 1
#: the metadata.yaml version written unless asked (QoS as strings, as rosbag2 before Jazzy reads)
DEFAULT_VERSION = 8
#: the largest metadata.yaml of a bag ``overwrite`` replaces (read to list the bag's own files)
MAX_REPLACED_METADATA = 4 << 20
#: metadata.yaml of a bag being written is refreshed at least this often (seconds) ...
REFRESH_SECONDS = 2.0
#: ... and after this many messages
REFRESH_MESSAGES = 50_000
def _checked_options(
    storage: str, compression: str | None, compression_mode: str, version: int
) -> tuple[str, str, str]:
    """The storage id, compression and compression mode asked for, normalised (lower case,
    ``none`` for no compression); an :class:`UnsupportedError` for one polybag cannot write."""
    storage_id = (storage or "sqlite3").lower()
    if storage_id not in ("sqlite3", "mcap"):
        raise UnsupportedError(f"rosbag2 storage can be sqlite3 or mcap, not {storage!r}")
    comp = (compression or "none").lower()
    if comp in ("", "none"):
        comp = "none"
    if comp not in ("none", "zstd"):
        raise UnsupportedError(f"rosbag2 bags can be compressed with zstd, not {compression!r}")
    mode = (compression_mode or "file").lower()
    if mode not in ("file", "message"):
        raise UnsupportedError(
            f"rosbag2 compression mode can be file or message, not {compression_mode!r}"
        )
    if version not in (5, 6, 7, 8, 9):
        raise UnsupportedError(f"polybag writes rosbag2 metadata versions 5-9, not {version!r}")
    return storage_id, comp, mode


class Rosbag2Writer(Writer):
    """A rosbag2 bag directory (see the module notes).

    Options: ``storage`` (``sqlite3``, the default, or ``mcap``), ``compression``
    (``none`` or ``zstd``), ``compression_mode`` (``file``: each storage file compressed
    whole, the default; ``message``: each payload), ``version`` (8, the default, or 9),
    ``chunk_size``/``chunk_compression`` (MCAP storage chunks), ``overwrite``,
    ``ros_distro`` and ``custom_data`` (metadata.yaml's, versions 8 and 6 on).
    """

    format = "rosbag2"
    directory_output = True
    merges_topic_metadata = True

    @classmethod
    def replace_refusal(cls, path: str) -> str | None:
        """Why ``overwrite`` may not replace what is at ``path`` (None: nothing is there, or
        it is exactly a bag, see :func:`bag_entries`)."""
        return bag_entries(path)[0]

    @classmethod
    def upload_order(cls, files: Sequence[str]) -> list[str]:
        """metadata.yaml last: a reader never finds metadata naming files not there yet."""
        return sorted(files, key=lambda rel: (rel == METADATA_FILE, rel))

    @classmethod
    def replaceable_files(cls, read: Callable[[str, int], bytes], url: str) -> list[str]:
        """The files the bag at ``url`` lists (metadata.yaml too): what replacing it may remove.
        Anything else there is refused, even with overwrite: replacing a folder that is not a
        bag would mean deleting what is in it."""
        try:
            info = parse_metadata(read(METADATA_FILE, MAX_METADATA_BYTES), posixpath.join(url, METADATA_FILE))
        except Exception as e:  # noqa: BLE001 - no readable metadata.yaml: not a bag
            raise OutputExistsError(
                f"{url}: exists and is not a rosbag2 bag ({type(e).__name__}: {e}); not replaced, even with --force"
            ) from None
        return [METADATA_FILE] + [posixpath.normpath(f.path) for f in info.files]

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        format: str | None = None,  # noqa: A002 - part of the Writer(...) signature
        storage: str = "sqlite3",
        compression: str | None = "none",
        compression_mode: str = "file",
        version: int = DEFAULT_VERSION,
        chunk_size: int | None = None,
        chunk_compression: str = "none",
        overwrite: bool = True,
        ros_distro: str = "polybag",
        custom_data: Mapping[str, str] | None = None,
        **unknown: Any,
    ) -> None:
        if unknown:
            raise WriteError(f"Rosbag2Writer got unknown option(s): {', '.join(sorted(unknown))}")
        if format not in (None, "rosbag2"):
            raise UnsupportedError(f"Rosbag2Writer writes rosbag2, not {format!r}")
        if not isinstance(path, (str, os.PathLike)):
            raise UnsupportedError("a rosbag2 bag is a directory: give a path, not a stream")
        self.storage_id, comp, mode = _checked_options(storage, compression, compression_mode, version)
        self.compression = comp
        self.compression_mode = mode if comp == "zstd" else ""
        self.version = version
        self.overwrite = overwrite
        self.ros_distro = str(ros_distro)
        self.custom_data = {str(k): str(v) for k, v in (custom_data or {}).items()}
        self.final_path = os.path.normpath(os.fspath(path))
        self.active_path = self.final_path + ".active"
        self.name = os.path.basename(self.final_path)
        self.closed = False
        self._make_directory()
        ext = ".db3" if self.storage_id == "sqlite3" else ".mcap"
        self._storage_name = f"{self.name}_0{ext}"
        self._db: SqliteStorageWriter | None = None
        self._mcap: Any = None
        self._mcap_file: Any = None
        self._open_storage(os.path.join(self.active_path, self._storage_name), chunk_size, chunk_compression)
        self._schemas: dict[int, Schema] = {}
        self._channels: dict[int, Channel] = {}
        self._by_key: dict[tuple[str, str, str], Channel] = {}
        self._mcap_channels: dict[int, Any] = {}
        self._mcap_schemas: dict[tuple[str, str, bytes], Any] = {}
        self._defined: set[str] = set()
        self._undefined: dict[str, str] = {}  # see undefined_types
        self._ros2_texts = False  # a ROS 2 definition with text was given: the input stores them
        self._counts: dict[int, int] = {}
        self._qos: dict[int, str] = {}  # channel id -> its QoS profiles (grown by add_channel)
        self._qos_rewritten = False  # MCAP storage: the channels were given the grown profiles at close
        self._start = _I64
        self._end = -1
        self._since_refresh = 0
        self._next_refresh = 0.0
        try:
            self._refresh_metadata()
        except BaseException:
            self.abort_output(discard=True)
            raise

    def _open_storage(self, storage_path: str, chunk_size: int | None, chunk_compression: str) -> None:
        """Create the storage file (a SQLite database or an MCAP writer) in the ``.active``
        directory; the directory is removed when that fails."""
        try:
            if self.storage_id == "sqlite3":
                self._db = SqliteStorageWriter(storage_path)
            else:
                opts: dict[str, Any] = {
                    "compression": chunk_compression,
                    "profile": "ros2",
                    "overwrite": False,
                }
                opts["library"] = f"polybag {__version__}"
                if chunk_size is not None:
                    opts["chunk_size"] = chunk_size
                # (a stream: the file has its final name in the .active directory, which is
                # what makes it atomic, so metadata.yaml can list it while it is written)
                mcap_writer: type[Writer] = registry.get("mcap").load_writer()
                self._mcap_file = _TailedFile(open_new(storage_path, "wb"), mcap_writer.provisional_end)
                self._mcap = mcap_writer(self._mcap_file, **opts)
        except BaseException:
            if self._mcap_file is not None:
                self._mcap_file.close()
            shutil.rmtree(self.active_path, ignore_errors=True)
            raise

    def _make_directory(self) -> None:
        if not self.overwrite:
            refuse_existing(self.final_path)
        else:  # only exactly a bag is ever replaced (when the new one is complete)
            refuse_replacing(self.final_path, bag_entries(self.final_path)[0])
        try:
            os.mkdir(self.active_path)
        except FileExistsError:
            raise OutputExistsError(
                f"{self.active_path} exists (a recording in progress, or an interrupted write?); not overwritten: "
                "move it away, or rebuild it with `polybag recover`"
            ) from None
        except OSError as e:
            raise named_os_error(e, self.final_path) from None

    # --- the Writer interface --------------------------------------------------------------------
    def add_schema(self, name: str, encoding: str, data: bytes) -> Schema:
        """A message definition (``ros2msg``/``ros2idl`` ones are stored for their type)."""
        check_open(self.closed)
        s = Schema(len(self._schemas) + 1, name, encoding, bytes(data))
        self._schemas[s.id] = s
        return s

    def add_channel(self, topic: str, message_encoding: str, schema: Schema | None = None, metadata: Mapping[str, str] | None = None) -> Channel:
        """A topic (one per topic, type and serialization format); its QoS profiles and type hash are kept from ``metadata``."""
        check_open(self.closed)
        md = dict(metadata or {})
        type_name = (schema.name if schema is not None else "") or str(md.get("type", ""))
        if not type_name:
            raise WriteError(f"topic {topic}: a rosbag2 topic needs a message type (a schema name)")
        fmt = message_encoding or "cdr"
        key = (topic, type_name, fmt)
        qos = qos_to_text(qos_for_version(str(md.get("offered_qos_profiles", "")), self.version))
        got = self._by_key.get(key)
        if got is not None:
            self._grow_qos(got, qos)
            if (  # sqlite3: a definition given after the topic's first messages is its type's, for all of them
                self._db is not None
                and type_name not in self._defined
                and schema is not None
                and schema.encoding in _DEFINITION_ENCODINGS
                and bytes(schema.data).strip()
            ):
                text = bytes(schema.data).decode("utf-8", "replace")
                late_hash = str(md.get("topic_type_hash", "") or md.get("type_description_hash", ""))
                try:
                    self._db.add_definition(type_name, schema.encoding, text, late_hash)
                except OSError as e:
                    raise named_os_error(e, self.final_path) from None
                self._defined.add(type_name)
                self._ros2_texts = True
                self._undefined.pop(type_name, None)
            elif (  # mcap: the same, its schema rewritten at close (McapWriter.define_late)
                self._mcap is not None
                and schema is not None
                and schema.encoding in _DEFINITION_ENCODINGS
                and bytes(schema.data).strip()
            ):
                self._mcap.define_late(type_name, schema.encoding, bytes(schema.data))
                if self._mcap.late:
                    self._ros2_texts = True
                    self._undefined.pop(type_name, None)
            return got
        type_hash = str(md.get("topic_type_hash", "") or md.get("type_description_hash", ""))
        if schema is not None and schema.encoding in _DEFINITION_ENCODINGS and bytes(schema.data).strip():
            self._ros2_texts = True
        schema = self._full_schema(type_name, fmt, schema)
        if fmt == "cdr" and type_name not in self._undefined:
            from polybag.codecs.ros2 import undefined_type

            enc, given = (schema.encoding, schema.data) if schema is not None else ("ros2msg", b"")
            if undefined_type(type_name, enc, given):
                self._undefined[type_name] = topic
        if not type_hash and self.version >= 8 and schema is not None and schema.encoding == "ros2msg":
            from polybag.codecs.ros2 import type_hash_of

            type_hash = type_hash_of(type_name, schema.encoding, schema.data)
        cid = len(self._channels) + 1
        keep = {"offered_qos_profiles": qos} if qos else {}
        if type_hash:
            keep["topic_type_hash"] = type_hash
        ch = Channel(cid, topic, fmt, schema, keep)
        defined = schema is not None and schema.encoding in _DEFINITION_ENCODINGS and bool(schema.data)
        try:
            if self._db is not None:
                if defined and type_name not in self._defined:
                    assert schema is not None
                    text = bytes(schema.data).decode("utf-8", "replace")
                    self._db.add_definition(type_name, schema.encoding, text, type_hash)
                    self._defined.add(type_name)
                self._db.add_topic(cid, topic, type_name, fmt, qos, type_hash)
            else:
                enc = schema.encoding if defined and schema is not None else "ros2msg"
                data = bytes(schema.data) if defined and schema is not None else b""
                skey = (type_name, enc, data)
                ms = self._mcap_schemas.get(skey)
                if ms is None:
                    ms = self._mcap_schemas[skey] = self._mcap.add_schema(type_name, enc, data)
                self._mcap_channels[cid] = self._mcap.add_channel(topic, fmt, ms, keep)
        except OSError as e:
            raise named_os_error(e, self.final_path) from None
        self._channels[cid] = ch
        self._by_key[key] = ch
        self._counts[cid] = 0
        self._qos[cid] = qos
        self._soon()  # (listed at a write soon)
        return ch

    def _grown_mcap_channels(self) -> dict[int, dict[str, str]]:
        """MCAP channel id -> its metadata with the QoS profiles the topic lists now, for the
        channels whose profiles grew after they were written (a rewrite gives them these, so
        the file agrees with metadata.yaml: rosbags matches the two)."""
        out: dict[int, dict[str, str]] = {}
        for cid, ch in self._channels.items():
            qos = self._qos.get(cid, "")
            mch = self._mcap_channels.get(cid)
            if mch is not None and qos and qos != ch.metadata.get("offered_qos_profiles", ""):
                out[mch.id] = {**mch.metadata, "offered_qos_profiles": qos}
        return out

    def _grow_qos(self, ch: Channel, qos: str) -> None:
        """Add the profiles of ``qos`` that ``ch``'s topic does not list yet."""
        old = self._qos.get(ch.id, "")
        merged = _merged_qos(old, qos)
        if merged == old:
            return
        self._qos[ch.id] = merged
        if self._db is not None:
            try:
                self._db.set_topic_qos(ch.id, merged)
            except OSError as e:
                raise named_os_error(e, self.final_path) from None
        self._soon()

    def _soon(self) -> None:
        """Refresh metadata.yaml at a write within a quarter of a second (a burst of new
        topics at the start costs one refresh)."""
        self._next_refresh = min(self._next_refresh, time.monotonic() + 0.25)

    def undefined_types(self) -> dict[str, str]:
        return {} if self._ros2_texts else dict(self._undefined)

    def _full_schema(self, type_name: str, fmt: str, schema: Schema | None) -> Schema | None:
        """``schema``, or for a CDR topic whose schema has no text (rosbag2 before Iron) the
        known type's full definition (:func:`polybag.codecs.ros2.full_definition`)."""
        if fmt != "cdr" or (schema is not None and (schema.encoding not in ("ros2msg", "") or bytes(schema.data).strip())):
            return schema
        from polybag.codecs.ros2 import full_definition

        enc, data = full_definition(type_name, "ros2msg", b"")
        if not data:
            return schema
        return self.add_schema(type_name, enc, data)

    def write(self, channel: Channel, data: bytes | memoryview, log_time: int, publish_time: int | None = None, sequence: int = 0) -> None:
        """One message (zstd-compressed first with ``compression_mode='message'``)."""
        check_open(self.closed)
        self._check_channel(channel, self._channels.get(channel.id))
        if not 0 <= log_time <= _I64:
            raise WriteError(
                f"topic {channel.topic}: log time {log_time} does not fit rosbag2's signed 64-bit time"
            )
        if self.compression_mode == "message":
            data = compress("zstd", data)
        try:
            if self._db is not None:
                self._db.write(channel.id, log_time, data)
            else:
                pub = log_time if publish_time is None else publish_time
                self._mcap.write(self._mcap_channels[channel.id], data, log_time, pub, sequence)
        except OSError as e:
            raise named_os_error(e, self.final_path) from None
        self._counts[channel.id] += 1
        if log_time < self._start:
            self._start = log_time
        if log_time > self._end:
            self._end = log_time
        self._since_refresh += 1
        if self._since_refresh >= REFRESH_MESSAGES or time.monotonic() >= self._next_refresh:
            self._refresh_metadata()

    def _refresh_metadata(self) -> None:
        """Write ``metadata.yaml`` of what is written so far into the ``.active`` directory
        (the SQLite batch committed first), so a killed writer leaves a bag that opens."""
        self._since_refresh = 0
        self._next_refresh = time.monotonic() + REFRESH_SECONDS
        try:
            if self._db is not None:
                self._db.flush()
            elif self._mcap is not None:
                self._mcap.flush()
            _replace_file(os.path.join(self.active_path, METADATA_FILE), dump_metadata(self.bag_info(live=True)))
        except OSError as e:
            raise named_os_error(e, self.final_path) from None

    def add_metadata(self, name: str, metadata: Mapping[str, str]) -> None:
        """MCAP storage keeps metadata records; a sqlite3 bag has nowhere to put them."""
        check_open(self.closed)
        if self._mcap is None:
            raise UnsupportedError("rosbag2 bags with sqlite3 storage cannot hold metadata records")
        self._mcap.add_metadata(name, metadata)

    # --- finishing -------------------------------------------------------------------------------
    def bag_info(self, *, live: bool = False, all_qos: bool | None = None) -> BagInfo:
        """The ``metadata.yaml`` content for what has been written so far (``live``: while
        writing, the storage file not compressed yet).  ``all_qos``: each topic with the QoS
        profiles of every publisher seen (the default, but for MCAP storage until its file
        was rewritten at close: there a topic lists the profiles its MCAP channel holds,
        those known when it was written -- rosbags reads no message of a topic whose
        metadata.yaml profiles differ from its channel's, and a killed recording keeps the
        channels it has)."""
        if all_qos is None:
            all_qos = self._db is not None or self._qos_rewritten
        count = sum(self._counts.values())
        start = self._start if count else 0
        duration = self._end - self._start if count else 0
        whole = self.compression_mode == "file" and not live
        fname = self._storage_name + (".zstd" if whole else "")
        mode = "" if live and self.compression_mode == "file" else self.compression_mode
        topics = []
        for ch in self._channels.values():
            topics.append(
                TopicInfo(
                    name=ch.topic,
                    type=(ch.schema.name if ch.schema is not None and ch.schema.name else ch.type_name),
                    serialization_format=ch.message_encoding,
                    offered_qos_profiles=(
                        self._qos.get(ch.id, "") if all_qos else str(ch.metadata.get("offered_qos_profiles", ""))
                    ),
                    type_description_hash=str(ch.metadata.get("topic_type_hash", "")),
                    message_count=self._counts[ch.id],
                )
            )
        return BagInfo(
            version=self.version,
            storage_identifier=self.storage_id,
            files=[FileInfo(fname, start, duration, count)],
            topics=topics,
            starting_time=start,
            duration=duration,
            message_count=count,
            compression_mode=mode,
            compression_format="zstd" if mode else "",
            ros_distro=self.ros_distro,
            custom_data=dict(self.custom_data),
        )

    def finish_output(self) -> None:
        """Finish the storage file, compress it (file mode), write ``metadata.yaml``, and
        rename ``NAME.active/`` to ``NAME/``."""
        if self.closed:
            return
        self.closed = True
        storage_path = os.path.join(self.active_path, self._storage_name)
        try:
            if self._db is not None:
                self._db.close(self.version, _inner(dump_metadata(self.bag_info())))
            else:
                # the file's own copy of metadata.yaml as its channels are; with the profiles
                # of later publishers when the rewrite gives them to the channels
                grown = self._grown_mcap_channels()
                self._mcap.add_metadata("rosbag2", {"serialized_metadata": _inner(dump_metadata(self.bag_info(all_qos=False)))})
                self._mcap_file.tail = False  # (its own Footer and magic come last)
                self._mcap.close()
                self._mcap_file.truncate()
                self._mcap_file.flush()
                os.fsync(self._mcap_file.fileno())
                self._mcap_file.close()
                if self._mcap.late or grown:
                    # one copy of the file (late_definitions): schemas given a definition
                    # learned late, channels the QoS profiles of publishers seen after them
                    final = {"serialized_metadata": _inner(dump_metadata(self.bag_info(all_qos=True)))}
                    done = self._mcap.rewrite_late(storage_path, grown, {"rosbag2": final} if grown else None)
                    self._qos_rewritten = bool(done and grown)
            text = dump_metadata(self.bag_info())
            if self.compression_mode == "file":
                _compress_file(storage_path, storage_path + ".zstd")
            write_atomically(os.path.join(self.active_path, METADATA_FILE), text)
            _fsync_dir(self.active_path)
        except OSError as e:
            raise named_os_error(e, self.final_path) from None
        self._place()

    def _place(self) -> None:
        """Rename ``NAME.active/`` to ``NAME/``.  An existing ``NAME`` (``overwrite``) must
        still be exactly a bag: it is renamed aside, the new bag put in its place, then its
        own files removed (anything that appeared in it meanwhile stays, and so does it)."""
        final = self.final_path
        if not os.path.lexists(final):
            try:
                os.rename(self.active_path, final)
            except OSError as e:
                if not os.path.lexists(final):
                    raise named_os_error(e, final) from None
                # appeared meanwhile (rename replaces only an empty directory): as below
            else:
                _fsync_dir(os.path.dirname(os.path.abspath(final)))
                return
        reason, names = bag_entries(final)
        if not self.overwrite or reason is not None:
            # as the other writers: the new output goes, the other stays
            shutil.rmtree(self.active_path, ignore_errors=True)
            what = "a file of that name appeared while writing" if not self.overwrite else f"exists and {reason}"
            raise OutputExistsError(f"{final}: {what}; not overwritten (the new output was discarded)")
        aside = f"{final}.replaced-{secrets.token_hex(4)}"
        try:
            os.rename(final, aside)
            os.rename(self.active_path, final)
        except OSError as e:
            raise named_os_error(e, final) from None
        _fsync_dir(os.path.dirname(os.path.abspath(final)))
        _remove_own_files(aside, names)

    def abort_output(self, *, discard: bool = False) -> None:
        """Stop without finishing: ``NAME.active/`` stays for ``polybag recover`` (what was
        committed so far), or is removed with ``discard=True``."""
        if self.closed and not os.path.isdir(self.active_path):
            return
        self.closed = True
        if self._db is not None:
            self._db.abort()
        elif self._mcap is not None:
            self._mcap.abort(discard=False)
            try:
                self._mcap_file.close()
            except (OSError, ValueError):
                pass
        if discard:
            shutil.rmtree(self.active_path, ignore_errors=True)




class _TailedFile:
    """The MCAP storage file while it is written: each write is followed by a provisional
    end (``end``: the MCAP writer's :attr:`~polybag.writer.Writer.provisional_end`, a Footer
    without summary: readers scan the records), which the next write overwrites, so a killed
    writer leaves a file that readers needing the end of an MCAP file (rosbags) open; at close
    the writer's own Footer comes last instead."""

    def __init__(self, f: Any, end: bytes) -> None:
        self._f = f
        self._end = end
        self.tail = bool(end)

    def write(self, b: bytes | bytearray | memoryview) -> int:
        n: int = self._f.write(b)
        if self.tail:
            self._f.write(self._end)
            self._f.seek(-len(self._end), os.SEEK_CUR)
        return n

    def flush(self) -> None:
        self._f.flush()

    def truncate(self) -> None:
        self._f.truncate()

    def fileno(self) -> int:
        return int(self._f.fileno())

    def close(self) -> None:
        self._f.close()


def _replace_file(path: str, text: str) -> None:
    """``text`` into a temporary file beside ``path``, renamed over it: a reader (or a
    killed writer) finds the old file or the new one, never a part.  Not synced (the final
    metadata.yaml is, by :func:`write_atomically`): a killed process loses nothing the
    system has, and a refresh costs no disk flush."""
    fd, tmp = temp_beside(path)
    try:
        with open(fd, "wb") as f:
            f.write(text.encode("utf-8"))
        os.replace(tmp, path)
    except BaseException:
        unlink_quietly(tmp)
        raise


def _inner(text: str) -> str:
    """The mapping under ``rosbag2_bagfile_information`` of a metadata.yaml ``text``, as the
    storage keeps it."""
    return _dedent(text.split("\n", 1)[1] if "\n" in text else text)


def _dedent(text: str) -> str:
    lines = text.splitlines()
    return "\n".join(ln[2:] if ln.startswith("  ") else ln for ln in lines).strip()


def _compress_file(src: str, dst: str) -> None:
    """zstd-compress ``src`` to ``dst`` a block at a time, then remove ``src``."""
    import zstandard

    with open(src, "rb") as fin, open_new(dst) as fout:
        zstandard.ZstdCompressor(level=3).copy_stream(fin, fout, read_size=1 << 20, write_size=1 << 20)
        fout.flush()
        os.fsync(fout.fileno())
    os.unlink(src)


def _fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def bag_entries(path: str) -> tuple[str | None, list[str]]:
    """``(why not, names)``: whether ``path`` is exactly a rosbag2 bag that ``overwrite`` may
    replace -- a real directory (not a symbolic link) holding a readable ``metadata.yaml``
    and only the storage files it lists, each a regular file directly in it -- and then the
    names it holds.  ``(None, [])`` when nothing is at ``path``."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None, []
    except OSError as e:
        return f"cannot be examined ({e.strerror or e})", []
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link, not a rosbag2 bag", []
    if not stat.S_ISDIR(st.st_mode):
        return "is not a rosbag2 bag directory", []
    meta = os.path.join(path, METADATA_FILE)
    try:
        names = os.listdir(path)
        mst = os.lstat(meta)
        if not stat.S_ISREG(mst.st_mode):
            return f"its {METADATA_FILE} is not a regular file: not a rosbag2 bag", []
        if mst.st_size > MAX_REPLACED_METADATA:
            return f"its {METADATA_FILE} is larger than {MAX_REPLACED_METADATA} bytes", []
        fd = os.open(meta, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with open(fd, "rb") as f:
            text = f.read(MAX_REPLACED_METADATA + 1)
    except FileNotFoundError:
        return f"has no {METADATA_FILE}: not a rosbag2 bag", []
    except OSError as e:
        return f"cannot be read ({e.strerror or e})", []
    try:
        info = parse_metadata(text, meta)
    except Exception as e:  # noqa: BLE001 - any failure: not a bag polybag may replace
        return f"has no readable {METADATA_FILE} ({str(e).splitlines()[0] if str(e) else type(e).__name__})", []
    own = {METADATA_FILE}
    for fi in info.files:
        n = os.path.normpath(fi.path)
        if os.sep in n or (os.altsep and os.altsep in n) or n in (".", ".."):
            return f"lists a storage file {fi.path!r} not directly in it", []
        own.add(n)
    for n in names:
        if n not in own:
            return f"holds {n!r}, which is not one of its storage files: not exactly a rosbag2 bag", []
        try:
            if not stat.S_ISREG(os.lstat(os.path.join(path, n)).st_mode):
                return f"its {n!r} is not a regular file", []
        except OSError as e:
            return f"cannot be examined ({e.strerror or e})", []
    return None, sorted(names)


def _remove_own_files(path: str, names: list[str]) -> None:
    """Remove ``names`` (regular files only) from the directory ``path``, then the directory
    if that leaves it empty; never anything else, never raises (the new output is in place)."""
    for n in names:
        p = os.path.join(path, n)
        try:
            if stat.S_ISREG(os.lstat(p).st_mode):
                os.unlink(p)
        except OSError:
            pass
    try:
        os.rmdir(path)
    except OSError:
        pass
