"""The storage files of a rosbag2 directory behind one interface: ``sqlite3`` (``.db3``) and
``mcap`` (through the MCAP reader the registry names, never its internals), each possibly
zstd-compressed as a whole file (decompressed to a temporary file, a block at a time,
only when it holds an SQLite or MCAP file, within ``max_storage_bytes`` and the free space
of the temporary folder; every error names the input, never only the copy).

A storage gives its topics (:class:`StorageTopic`, with the message definition when the
file carries one) and its messages as ``(local topic id, log time, publish time, sequence,
data)``; the reader maps local ids to the bag's channels and merges the files.
"""

from __future__ import annotations

import copy
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any

from polybag.errors import FormatError, PolybagError, UsageError
from polybag.formats import registry
from polybag.formats.rosbag2.layout import SourceFactory, source_for
from polybag.formats.rosbag2.sqlite import SqliteStorage
from polybag.formats.rosbag2.sqlite_files import SQLITE_MAGIC
from polybag.model import Attachment, Channel, Message, Metadata
from polybag.reader import RAW_FIELDS

_PAGE_BATCH = 2048  # messages built per batch from rows read off the pages

_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_BLOCK = 1 << 20


@dataclass(frozen=True)
class StorageTopic:
    """A topic as a storage file declares it."""

    id: int
    name: str
    type: str
    serialization_format: str
    offered_qos_profiles: str = ""
    type_description_hash: str = ""
    #: the message definition's encoding (``ros2msg``/``ros2idl``) and text; "" when absent
    definition_encoding: str = ""
    definition: bytes = b""


class Storage:
    """One storage file opened for reading."""

    kind = ""

    def __init__(self, path: str, recover: bool = False) -> None:
        self.path = path
        self.recover = recover
        self.errors: list[str] = []
        self.bytes_skipped = 0

    def topics(self) -> list[StorageTopic]:
        """The topics the file declares, with their definitions when it has them."""
        raise NotImplementedError

    def counts(self) -> dict[int, int]:
        """Messages per local topic id."""
        raise NotImplementedError

    def times(self) -> tuple[int | None, int | None]:
        """The first and last log time of the file's messages (None, None when empty)."""
        raise NotImplementedError

    def messages(
        self, local: dict[int, Channel], topic_ids: set[int] | None, start: int | None, end: int | None, reverse: bool, order: str
    ) -> Iterator[Iterable[Message]]:
        """Batches of the messages selected (``topic_ids``: local ids), each on the bag's
        channel ``local`` maps its local topic id to.  A message on a topic id the file does
        not declare is a FormatError (noted in :attr:`errors` and skipped when recovering)."""
        raise NotImplementedError

    def raw_batches(
        self, local: dict[int, Channel], topic_ids: set[int] | None, start: int | None, end: int | None, reverse: bool, order: str
    ) -> Iterator[Iterable[tuple[Channel, int, bytes | memoryview]]]:
        """:meth:`messages` as batches of ``(channel, log_time, data)`` tuples; a storage
        that can make them without a Message each overrides this."""
        for batch in self.messages(local, topic_ids, start, end, reverse, order):
            yield map(RAW_FIELDS, batch)

    def payloads(self, topic_ids: set[int]) -> tuple[Sequence[int], Sequence[bytes | memoryview]] | None:
        """``(log times, payloads)`` of the local topic ids in log-time order, in bulk; None:
        not offered (the reader iterates the messages)."""
        return None

    def payload_arrays(self, topic_ids: set[int], known: Iterable[int]) -> tuple[Any, Any, Any, Any] | None:
        """``(log times, blob, starts, sizes)`` of the local topic ids in log-time order as
        numpy arrays (``known``: every local topic id); None: not offered (:meth:`payloads`)."""
        return None

    def time_buckets(self, topic_ids: set[int] | None) -> list[tuple[int, int, int]] | None:
        """``(first, last log time, count)`` per piece of the file (chunks, spans of time)
        for the selected local topic ids, from indexes only; None when there is none."""
        return None

    def records(self) -> tuple[list[Attachment], list[Metadata]]:
        """The file's attachments and metadata records (MCAP storage), but rosbag2's own
        ``rosbag2`` metadata record (the bag's metadata.yaml, kept in the file)."""
        return [], []

    def unknown_topic(self, tid: Any) -> None:
        """A message on a topic id the file does not declare: raised, or noted when recovering."""
        text = f"{self.path}: a message on topic id {tid}, which the file does not declare"
        if not self.recover:
            raise FormatError(f"a message on topic id {tid}, which the file does not declare", self.path)
        if text not in self.errors and len(self.errors) < 200:
            self.errors.append(text)

    def size(self) -> int:
        """Bytes of the storage file."""
        try:
            return os.path.getsize(self.path)
        except OSError:
            return 0

    def release_pages(self) -> None:
        """Drop mapped pages of the file from memory (nothing for SQLite)."""
        return None

    def close(self) -> None:
        """Close the file (and what was opened for it)."""
        return None


class ForwardingStorage(Storage):
    """A storage that answers from another one through :meth:`_call` (the lazy file of a bag,
    a decompressed copy): the calls it passes on unchanged."""

    def _call(self, name: str, *args: Any) -> Any:
        """``name(*args)`` of the storage behind this one."""
        raise NotImplementedError

    def payloads(self, topic_ids: set[int]) -> tuple[Sequence[int], Sequence[bytes | memoryview]] | None:
        return self._call("payloads", topic_ids)  # type: ignore[no-any-return]

    def payload_arrays(self, topic_ids: set[int], known: Iterable[int]) -> tuple[Any, Any, Any, Any] | None:
        return self._call("payload_arrays", topic_ids, known)  # type: ignore[no-any-return]

    def time_buckets(self, topic_ids: set[int] | None) -> list[tuple[int, int, int]] | None:
        return self._call("time_buckets", topic_ids)  # type: ignore[no-any-return]

    def records(self) -> tuple[list[Attachment], list[Metadata]]:
        return self._call("records")  # type: ignore[no-any-return]


def _service_name(type_name: str) -> str:
    """``pkg/srv/Name_Event`` -> ``pkg/srv/Name``, the type rosbag2 (from Jazzy) stores a
    service event topic's definition (the ``.srv`` text) under; "" for other types."""
    parts = type_name.split("/")
    if len(parts) == 3 and parts[1] == "srv":
        for suffix in ("_Event", "_Request", "_Response"):
            if parts[2].endswith(suffix) and len(parts[2]) > len(suffix):
                return type_name[: -len(suffix)]
    return ""


class SqliteFile(Storage):
    """A ``.db3`` (see :mod:`polybag.formats.rosbag2.sqlite`)."""

    kind = "sqlite3"

    def __init__(self, path: str, *, recover: bool = False, max_bytes: int | None = None) -> None:
        super().__init__(path, recover)
        self.db = SqliteStorage(path, recover=recover, max_bytes=max_bytes)
        self.errors = self.db.errors

    def topics(self) -> list[StorageTopic]:
        defs = self.db.definitions()
        out = []
        for t in self.db.topics():
            enc, text = defs.get(t.type) or defs.get(_service_name(t.type)) or ("", "")
            if enc not in ("ros2msg", "ros2idl") or not text:
                enc, text = "", ""
            out.append(
                StorageTopic(
                    t.id,
                    t.name,
                    t.type,
                    t.serialization_format,
                    t.offered_qos_profiles,
                    t.type_description_hash,
                    enc,
                    text.encode("utf-8", "surrogateescape"),
                )
            )
        return out

    def counts(self) -> dict[int, int]:
        return self.db.counts()

    def payloads(self, topic_ids: set[int]) -> tuple[Sequence[int], Sequence[bytes | memoryview]] | None:
        return self.db.payloads(topic_ids)

    def payload_arrays(self, topic_ids: set[int], known: Iterable[int]) -> tuple[Any, Any, Any, Any] | None:
        return self.db.payload_arrays(topic_ids, known)

    def time_buckets(self, topic_ids: set[int] | None) -> list[tuple[int, int, int]] | None:
        return self.db.time_buckets(topic_ids)

    def times(self) -> tuple[int | None, int | None]:
        return self.db.times()

    def messages(
        self, local: dict[int, Channel], topic_ids: set[int] | None, start: int | None, end: int | None, reverse: bool, order: str
    ) -> Iterator[Iterable[Message]]:
        paged = self.db.page_rows(topic_ids, start, end, reverse, order, known=local)
        if paged is not None:  # read from the file's pages: every row already checked
            # built one at a time as they are taken (map, not a list): a message the caller
            # is done with is freed before the next is made, so the cyclic garbage collector,
            # which counts live tracked objects, is not set off every 700 messages (a list of
            # 2,048 live Message objects cost ~15% of a read of small messages)
            for cs, times, datas in _page_slices(*paged, local):
                yield map(Message, cs, times, times, repeat(0), datas)
            return
        chans = _by_id(local)
        for rows in self.db.messages(topic_ids, start, end, reverse, order, known=local):
            try:  # the common case: every row a message on a known topic, built in one go
                if rows and len(rows[0]) == 3:  # SQLite checked every row beforehand
                    batch = [Message(chans[t], ts, ts, 0, d) for t, ts, d in rows]
                else:
                    batch = [Message(chans[t], ts, ts, 0, d) for t, ts, d, ok in rows if ok]
            except (KeyError, IndexError, TypeError):
                batch = []
            if len(batch) != len(rows):
                batch = []
                for row in rows:
                    try:
                        tid, ts, data = self.db.checked(row)
                    except FormatError:
                        if batch:
                            yield batch  # every intact message before the bad row
                        raise
                    ch = local.get(tid)
                    if ch is None:
                        if batch and not self.recover:
                            yield batch
                            batch = []
                        self.unknown_topic(tid)
                        continue
                    batch.append(Message(ch, ts, ts, 0, data))
            yield batch

    def raw_batches(
        self, local: dict[int, Channel], topic_ids: set[int] | None, start: int | None, end: int | None, reverse: bool, order: str
    ) -> Iterator[Iterable[tuple[Channel, int, bytes | memoryview]]]:
        """From the file's pages, the tuples are zipped in C: no Message, no Python frame per
        message; through SQLite, :meth:`messages` as tuples."""
        paged = self.db.page_rows(topic_ids, start, end, reverse, order, known=local)
        if paged is None:
            yield from super().raw_batches(local, topic_ids, start, end, reverse, order)
            return
        for cs, times, datas in _page_slices(*paged, local):
            yield zip(cs, times, datas)

    def close(self) -> None:
        self.db.close()


def _by_id(local: dict[int, Channel]) -> Any:
    """Channels by local topic id: a list when the ids are small (every row's id is known to
    be one of them), else the dict itself."""
    top = max(local, default=-1)
    if all(isinstance(k, int) and k >= 0 for k in local) and top < 4 * len(local) + 64:
        return [local.get(k) for k in range(top + 1)]
    return local


def _page_slices(table: Any, batches: Iterator[Any], local: dict[int, Channel]) -> Iterator[tuple[list[Channel], list[int], list[bytes]]]:
    """Rows read off the pages (every topic id one of ``local``'s), ``_PAGE_BATCH`` at a
    time: channels, times, payloads.  The channels come from an object array indexed by the
    topic ids when the ids are small (numpy picks them in C), else one dict lookup each."""
    import numpy as np

    by_id = _by_id(local)
    if isinstance(by_id, list):
        arr = np.empty(len(by_id), object)
        arr[:] = by_id

        def channels(tids: Any) -> list[Channel]:
            return arr[tids].tolist()  # type: ignore[no-any-return]
    else:

        def channels(tids: Any) -> list[Channel]:
            return list(map(by_id.__getitem__, tids.tolist()))

    for rows in batches:
        for lo in range(0, len(rows), _PAGE_BATCH):
            hi = lo + _PAGE_BATCH
            yield channels(rows.tid[lo:hi]), rows.ts[lo:hi].tolist(), table.payloads(rows, lo, hi)


#: messages per batch of an MCAP storage file's messages (after the first few, smaller)
_BATCH = 512


class McapFile(Storage):
    """An ``.mcap`` read by the registered MCAP reader; ``sources`` (a remote bag laid out
    locally, :class:`~polybag.formats.rosbag2.layout.LocalLayout`) opens a stand-in path by
    range requests instead of mapping it."""

    kind = "mcap"

    def __init__(self, path: str, *, sources: Mapping[str, SourceFactory] | None = None, **options: Any) -> None:
        super().__init__(path, bool(options.get("recover")))
        opener = registry.get("mcap").load_opener()
        source = source_for(path, sources)  # mapped; a remote bag's file by range requests
        try:
            self.reader = opener(source, path, **options)
        except BaseException:
            source.close()
            raise
        self._channels = self.reader.summary.channels

    def topics(self) -> list[StorageTopic]:
        out = []
        for cid, ch in sorted(self._channels.items()):
            s = ch.schema
            enc = s.encoding if s is not None and s.encoding in ("ros2msg", "ros2idl") and s.data else ""
            out.append(
                StorageTopic(
                    cid,
                    ch.topic,
                    (s.name if s is not None else "") or str(ch.metadata.get("type", "")),
                    ch.message_encoding,
                    str(ch.metadata.get("offered_qos_profiles", "")),
                    str(
                        ch.metadata.get("topic_type_hash", "") or ch.metadata.get("type_description_hash", "")
                    ),
                    enc,
                    bytes(s.data) if enc and s is not None else b"",
                )
            )
        return out

    def counts(self) -> dict[int, int]:
        s = self.reader.summary
        if s.indexed and s.message_counts:
            return dict(s.message_counts)
        out: dict[int, int] = {}
        try:
            for m in self.reader.messages(order="file"):
                out[m.channel.id] = out.get(m.channel.id, 0) + 1
        finally:
            self._collect()
        return out

    def _collect(self) -> None:
        """The damage a recovering MCAP read met, into :attr:`errors`."""
        report = self.reader.recovery_report
        if report:
            self.errors.extend(str(e) for e in report.get("errors", []) or [] if str(e) not in self.errors)
            self.bytes_skipped = max(self.bytes_skipped, int(report.get("bytes_skipped", 0) or 0))

    def times(self) -> tuple[int | None, int | None]:
        s = self.reader.summary
        return s.start_time, s.end_time

    def messages(
        self, local: dict[int, Channel], topic_ids: set[int] | None, start: int | None, end: int | None, reverse: bool, order: str
    ) -> Iterator[list[Message]]:
        return self._batches(local, topic_ids, start, end, reverse, order, False)

    def raw_batches(
        self, local: dict[int, Channel], topic_ids: set[int] | None, start: int | None, end: int | None, reverse: bool, order: str
    ) -> Iterator[Iterable[tuple[Channel, int, bytes | memoryview]]]:
        return self._batches(local, topic_ids, start, end, reverse, order, True)

    def _batches(
        self, local: dict[int, Channel], topic_ids: set[int] | None, start: int | None, end: int | None, reverse: bool, order: str, raw: bool
    ) -> Iterator[list[Any]]:
        """The MCAP reader's messages on the bag's channels, up to 512 at a time: Message objects,
        or ``(channel, log_time, data)`` tuples when ``raw``."""
        topics = None
        if topic_ids is not None:
            topics = sorted({self._channels[i].topic for i in topic_ids if i in self._channels})
        batch: list[Any] = []
        # batches grow from one message to _BATCH: the first message goes out as soon as
        # it is read (a remote file's first message then costs about one chunk, not the
        # chunks of 512 messages and the read-ahead they switch on)
        limit = 1
        try:
            for m in self.reader.messages(topics=topics, start=start, end=end, reverse=reverse, order=order):
                cid = m.channel.id
                if topic_ids is not None and cid not in topic_ids:
                    continue
                ch = local.get(cid)
                if ch is None:
                    if batch and not self.recover:
                        yield batch
                        batch = []
                    self.unknown_topic(cid)
                    continue
                if raw:
                    batch.append((ch, m.log_time, m.data))
                else:
                    m.channel = ch  # the message is ours: it goes out on the bag's channel
                    batch.append(m)
                if len(batch) >= limit:
                    yield batch
                    batch = []
                    limit = min(_BATCH, 2 * limit)
        except PolybagError:
            if batch:
                yield batch  # every intact message before the damage
            raise
        if batch:
            yield batch
        self._collect()

    def time_buckets(self, topic_ids: set[int] | None) -> list[tuple[int, int, int]] | None:
        if not self.reader.has_index:
            return None
        counts: list[tuple[int, int, int]] | None = self.reader.chunk_message_counts(topic_ids)
        return counts

    def records(self) -> tuple[list[Attachment], list[Metadata]]:
        return list(self.reader.attachments()), [m for m in self.reader.metadata() if m.name != "rosbag2"]

    def size(self) -> int:
        return int(self.reader.source_size) or super().size()

    def release_pages(self) -> None:
        self.reader.release_pages()

    def close(self) -> None:
        self.reader.close()


def sniff_file(path: str) -> str:
    """``sqlite3``, ``mcap`` or ``zstd`` from a storage file's first bytes; a FormatError otherwise."""
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except OSError as e:
        raise FormatError(f"cannot open: {e.strerror or e}", path) from None
    if head.startswith(SQLITE_MAGIC):
        return "sqlite3"
    if head.startswith(registry.MCAP_MAGIC):
        return "mcap"
    if head.startswith(_ZSTD_MAGIC):
        return "zstd"
    if not head:
        raise FormatError("empty storage file", path, 0)
    raise FormatError(f"not an SQLite or MCAP storage file (first bytes {head[:8]!r})", path, 0)


#: what one zstd-compressed storage file may decompress to, unless the caller sets
#: ``max_storage_bytes``
DEFAULT_MAX_STORAGE_BYTES = 64 << 30
#: with the default cap, a file may also expand at most this many times its compressed size
#: (zstd reaches a few tens on real bags; a bomb reaches thousands) ...
MAX_STORAGE_RATIO = 1024
#: ... but a file that expands to this much or less is never refused for its ratio
STORAGE_RATIO_FLOOR = 256 << 20
#: free space the decompressed copy leaves on the temporary folder's filesystem
TEMP_RESERVE_BYTES = 256 << 20
_FREE_CHECK = 16 * _BLOCK  # the free space is looked at again after this many bytes


#: the environment variable that sets ``max_storage_bytes`` when the caller does not
ENV_MAX_STORAGE = "POLYBAG_MAX_STORAGE_BYTES"


def storage_cap(value: Any, compressed_size: int) -> tuple[int, str]:
    """What a zstd storage file of ``compressed_size`` bytes may decompress to, and the
    limit's name for errors: ``value`` (``max_storage_bytes``: bytes or a size such as
    ``"8G"``; None: ``$POLYBAG_MAX_STORAGE_BYTES``), else the default cap and the ratio bound."""
    if value is None and os.environ.get(ENV_MAX_STORAGE):
        value = os.environ[ENV_MAX_STORAGE]
    if value is not None:
        if isinstance(value, str):
            from polybag.io.compression import parse_size

            return parse_size(value), f"the max_storage_bytes setting, {ENV_MAX_STORAGE}"
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise UsageError(f"max_storage_bytes must be a positive number of bytes, not {value!r}")
        return value, f"the max_storage_bytes setting, {ENV_MAX_STORAGE}"
    hint = f"a larger max_storage_bytes ({ENV_MAX_STORAGE}=SIZE) allows more"
    by_ratio = max(STORAGE_RATIO_FLOOR, MAX_STORAGE_RATIO * compressed_size)
    if by_ratio < DEFAULT_MAX_STORAGE_BYTES:
        return by_ratio, f"{MAX_STORAGE_RATIO} times its compressed size; {hint}"
    return DEFAULT_MAX_STORAGE_BYTES, f"the default max_storage_bytes; {hint}"


def _free_bytes(directory: str) -> int:
    try:
        return int(shutil.disk_usage(directory).free)
    except OSError:
        return 1 << 62  # unknown: the write itself fails when the disk is full


class Decompressed:
    """A zstd-compressed storage file decompressed to a temporary file, a block at a time,
    so memory stays bounded whatever the file declares; removed on :meth:`close`.

    Nothing is written before the first decompressed bytes are known to begin an SQLite or
    MCAP file.  The copy stops with a :class:`~polybag.errors.FormatError` naming the input
    (never only the temporary file) when it would pass ``max_bytes`` (see
    :func:`storage_cap`) or leave less than :data:`TEMP_RESERVE_BYTES` free where it is
    written."""

    def __init__(self, path: str, *, recover: bool = False, max_bytes: Any = None) -> None:
        import zstandard

        self.errors: list[str] = []
        self.dir = ""
        self.source = path
        try:
            compressed = os.path.getsize(path)
        except OSError as e:
            raise FormatError(f"cannot open: {e.strerror or e}", path) from None
        cap, limit = storage_cap(max_bytes, compressed)
        try:
            fin = open(path, "rb")  # noqa: SIM115 (closed below)
        except OSError as e:
            raise FormatError(f"cannot open: {e.strerror or e}", path) from None
        try:
            reader = zstandard.ZstdDecompressor().stream_reader(fin, read_across_frames=True)
            head = b""
            try:
                while len(head) < 16:
                    piece = reader.read(_BLOCK)
                    if not piece:
                        break
                    head += piece
            except zstandard.ZstdError as e:
                raise FormatError(f"zstd file does not decompress: {e}", path) from None
            if not (head.startswith(SQLITE_MAGIC) or head.startswith(registry.MCAP_MAGIC)):
                what = f"first bytes {head[:8]!r}" if head else "nothing"
                raise FormatError(
                    f"zstd-compressed storage file does not hold an SQLite or MCAP file (it decompresses to {what})",
                    path,
                    0,
                )
            self.dir = tempfile.mkdtemp(prefix="polybag-rosbag2-")
            base = os.path.basename(path)
            self.path = os.path.join(self.dir, base[: -len(".zstd")] if base.endswith(".zstd") else base + ".raw")
            try:
                self._copy(reader, head, cap, limit, recover)
            except BaseException:
                self.close()
                raise
        finally:
            fin.close()

    def _copy(self, reader: Any, head: bytes, cap: int, limit: str, recover: bool) -> None:
        """The decompressed bytes into :attr:`path`, ``head`` first, within the bounds."""
        import zstandard

        path = self.source
        written = 0
        checked = 0
        free = _free_bytes(self.dir)
        try:
            with open(self.path, "xb") as fout:
                block = head
                while block:
                    if written + len(block) > cap:
                        raise FormatError(
                            f"zstd-compressed storage file decompresses to more than {cap} bytes ({limit})", path
                        )
                    if written + len(block) - checked > _FREE_CHECK:
                        free, checked = _free_bytes(self.dir), written
                    if free - (written - checked) - len(block) < TEMP_RESERVE_BYTES:
                        raise FormatError(
                            f"decompressing this zstd-compressed storage file would leave less than "
                            f"{TEMP_RESERVE_BYTES} bytes free in the temporary folder {os.path.dirname(self.dir)} "
                            f"(set TMPDIR to a folder with more room)",
                            path,
                        )
                    fout.write(block)
                    written += len(block)
                    try:
                        block = reader.read(_BLOCK)
                    except zstandard.ZstdError as e:
                        if not recover:
                            raise FormatError(f"zstd file does not decompress: {e}", path) from None
                        self.errors.append(f"{path}: zstd file does not decompress past byte {written}: {e}")
                        break
        except OSError as e:
            raise FormatError(
                f"cannot decompress to a temporary file in {os.path.dirname(self.dir)}: {e.strerror or e}", path
            ) from None

    def close(self) -> None:
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)


def renamed(e: PolybagError, pairs: list[tuple[str, str]]) -> PolybagError:
    """A copy of ``e`` with each local name of ``pairs`` (``(old, new)``, longest first)
    replaced in its text (and path): an error names what the user gave, not a copy."""

    def fix(text: str) -> str:
        for old, new in pairs:
            text = text.replace(old, new)
        return text

    out = copy.copy(e)
    if isinstance(out, FormatError):
        out.path = fix(str(out.path)) if out.path else out.path
        out.message = fix(out.message)
        out.args = (out._render(),)
    else:
        out.args = tuple(fix(a) if isinstance(a, str) else a for a in e.args)
    return out


def _renamed(e: PolybagError, tmp: Decompressed) -> PolybagError:
    """``e`` with the temporary file's name replaced by the input's (``X.db3.zstd
    (decompressed)``): an error never names only the temporary copy."""
    shown = f"{tmp.source} (decompressed)"
    out = renamed(e, [(tmp.path, shown), (tmp.dir, os.path.dirname(tmp.source) or ".")])
    if isinstance(out, FormatError) and not out.path:
        out.path = shown
        out.args = (out._render(),)
    elif tmp.source not in str(out):
        out.args = (f"{shown}: {out}",)
    return out


class _Unpacked(ForwardingStorage):
    """The storage of a decompressed copy, every error (raised or noted) naming the input."""

    def __init__(self, inner: Storage, tmp: Decompressed) -> None:
        super().__init__(tmp.source, inner.recover)
        self.inner = inner
        self.tmp = tmp
        self.kind = inner.kind
        self.extra = list(tmp.errors)

    @property
    def errors(self) -> list[str]:
        t = self.tmp
        shown = f"{t.source} (decompressed)"
        return self.extra + [e.replace(t.path, shown) for e in self.inner.errors]

    @errors.setter
    def errors(self, value: list[str]) -> None:
        pass  # Storage.__init__'s empty list: the inner storage's are used

    @property
    def bytes_skipped(self) -> int:
        return self.inner.bytes_skipped

    @bytes_skipped.setter
    def bytes_skipped(self, value: int) -> None:
        pass

    def _call(self, name: str, *args: Any) -> Any:
        try:
            return getattr(self.inner, name)(*args)
        except PolybagError as e:
            raise _renamed(e, self.tmp) from None

    def _iter(self, it: Iterator[Any]) -> Iterator[Any]:
        try:
            yield from it
        except PolybagError as e:
            raise _renamed(e, self.tmp) from None

    def topics(self) -> list[StorageTopic]:
        return self._call("topics")  # type: ignore[no-any-return]

    def counts(self) -> dict[int, int]:
        return self._call("counts")  # type: ignore[no-any-return]

    def times(self) -> tuple[int | None, int | None]:
        return self._call("times")  # type: ignore[no-any-return]

    def messages(self, *args: Any) -> Iterator[Iterable[Message]]:
        return self._iter(self._call("messages", *args))

    def raw_batches(self, *args: Any) -> Iterator[Iterable[tuple[Channel, int, bytes | memoryview]]]:
        return self._iter(self._call("raw_batches", *args))

    def size(self) -> int:
        return self.inner.size()

    def release_pages(self) -> None:
        self.inner.release_pages()

    def close(self) -> None:
        self._call("close")  # the copy is the caller's (open_storage)


def _open_kind(real: str, kind: str, options: dict[str, Any]) -> Storage:
    """The ``sqlite3`` or ``mcap`` storage file at ``real``."""
    recover = bool(options.get("recover"))
    if kind == "sqlite3":
        return SqliteFile(real, recover=recover, max_bytes=options.get("max_chunk_bytes"))
    return McapFile(
        real,
        **{k: v for k, v in options.items() if k in ("recover", "max_chunk_bytes", "validate_crcs", "sources")},
    )


def open_storage(path: str, declared: str, **options: Any) -> tuple[Storage, Decompressed | None]:
    """The storage file at ``path`` (its content decides, not ``declared``: a metadata.yaml
    may name the wrong storage), decompressed first when it is a zstd file (within
    ``max_storage_bytes``, see :class:`Decompressed`; the caller closes the copy); every
    error names ``path``."""
    kind = sniff_file(path)
    if kind != "zstd":
        return _open_kind(path, kind, options), None
    tmp = Decompressed(path, recover=bool(options.get("recover")), max_bytes=options.get("max_storage_bytes"))
    try:
        return _from_copy(path, tmp, options), tmp
    except BaseException:
        tmp.close()
        raise


def _from_copy(path: str, tmp: Decompressed, options: dict[str, Any]) -> Storage:
    """The storage in ``tmp``, the decompressed copy of ``path``; every error names ``path``."""
    try:
        st = _open_kind(tmp.path, sniff_file(tmp.path), options)  # Decompressed checked the kind
    except PolybagError as e:
        raise _renamed(e, tmp) from None
    return _Unpacked(st, tmp)
