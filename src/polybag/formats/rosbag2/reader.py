"""Reading a rosbag2 directory: :class:`Rosbag2Reader` and its openers.

``open_rosbag2(path)`` takes the bag directory or its ``metadata.yaml`` (or a lone ``.db3``).
The summary (topics, counts, times) comes from ``metadata.yaml`` without reading messages;
the channels' definitions come from the storage files' own tables (``message_definitions``,
MCAP schemas).  A topic whose file carries no definition (bags before ROS 2 Iron) gets a
``ros2msg`` schema with the type name and empty data: the CDR codec fills it in from its
bundled interface definitions (and writers write the full definition).  A stored definition
that does not decode its topic's first message (a placeholder such as ``uint8 level``) gives
way to the known one when that decodes it, with a warning.  A topic's type is metadata.yaml's
when the storage's topics table names another (as rosbag2 reads it), with a warning.

Messages of several storage files are merged in log-time order (ties in file order).  With
``compression_mode: message`` each payload is zstd-decompressed with the bounded helper
(``max_chunk_bytes`` caps one message); with ``file`` each file is decompressed to a
temporary file first.

A directory without ``metadata.yaml`` (a writer killed before it finished) opens only with
``recover=True`` (what ``polybag recover`` passes): the storage files found in it are read
and the summary is rebuilt from them.
"""

from __future__ import annotations

import dataclasses
import heapq
import os
from collections.abc import Iterator
from functools import partial
from itertools import chain
from operator import itemgetter
from typing import Any

from polybag.errors import FormatError, PolybagError, UnsupportedError
from polybag.formats.rosbag2.layout import LocalLayout
from polybag.formats.rosbag2.metadata import METADATA_FILE, BagInfo, qos_summary
from polybag.formats.rosbag2.opening import MAX_OPEN_STORAGES, Rosbag2Opening, storage_files
from polybag.formats.rosbag2.storage import Decompressed, Storage, renamed
from polybag.io.compression import decompress
from polybag.io.source import MappedSource, Source
from polybag.model import Attachment, Channel, Message, Metadata, Schema, Summary, TopicPayloads
from polybag.reader import MessageOrder, Reader, TopicSelector, topic_filter

_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def bag_directory(path: str) -> str | None:
    """The bag directory ``path`` names (the directory, or the one of its ``metadata.yaml``),
    or None when ``path`` is not a rosbag2 bag."""
    if os.path.isdir(path):
        if os.path.isfile(os.path.join(path, METADATA_FILE)):
            return path
        return path if storage_files(path) else None
    if os.path.basename(path) == METADATA_FILE and os.path.isfile(path):
        return os.path.dirname(path) or "."
    return None


def looks_like_rosbag2(path: str) -> bool:
    """The registry's probe: a directory with a ``metadata.yaml`` (or, after an interrupted
    write, with rosbag2-named storage files), a ``metadata.yaml``, or a ``.db3`` file."""
    if bag_directory(path) is not None:
        return True
    return path.lower().endswith(".db3") and os.path.isfile(path)


class Rosbag2Reader(Rosbag2Opening, Reader):
    """A rosbag2 bag directory (``sqlite3`` or ``mcap`` storage, one or several files);
    opening it (metadata.yaml, storage files, channels) is :class:`Rosbag2Opening`'s."""

    format = "rosbag2"
    native_profile = "ros2"
    #: ``polybag info`` lays a bag out as ``ros2 bag info`` does: :mod:`polybag.cli.render`
    info_style = "rosbag2"
    #: where a remote bag was laid out locally (:mod:`polybag.formats.rosbag2.remote`); None for a local bag
    local_layout: str | None = None

    def __init__(self, path: str, *, recover: bool = False, **options: Any) -> None:
        directory = bag_directory(path)
        single: str | None = None
        if directory is None:
            if path.lower().endswith(".db3") and os.path.isfile(path):
                directory, single = os.path.dirname(path) or ".", os.path.basename(path)
            else:
                raise FormatError("not a rosbag2 bag (no metadata.yaml, no storage files)", path)
        super().__init__(MappedSource(directory, b""), directory)
        self.recover = recover
        self._errors: list[str] = []
        self._noted = 0
        self._storages: list[Storage] = []
        self._temps: list[Decompressed] = []
        self._unlisted: list[str] = []
        self.info: BagInfo | None = None
        layout: LocalLayout | None = options.pop("layout", None)  # a remote bag laid out locally
        self._layout = layout
        shown = layout.shown if layout is not None else options.pop("shown_as", None)  # errors name it
        if layout is not None:
            options["sources"] = layout.sources  # its MCAP files read by range requests
        self._shown = [(directory.rstrip(os.sep) + os.sep, shown.rstrip("/") + "/"), (directory, shown)] if shown else []
        try:
            self._open(directory, single, options)
            self._prefer_decoding_definitions()
        except PolybagError as e:
            self.close()
            raise self._named(e) from None
        except BaseException:
            self.close()
            raise
        if layout is not None:
            self.path = layout.url  # what it is to the user (info, errors)
            self.local_layout = layout.directory

    def _prefer_decoding_definitions(self) -> None:
        """A definition stored in the bag that does not decode its topic's messages (a
        placeholder such as ``uint8 level`` for ``rcl_interfaces/msg/Log``) gives way to
        the known one (``--types``, then bundled) when that decodes the topic's first message:
        the channel then carries the known full definition, so decoding and every
        conversion use it, and a warning says so once per topic."""
        from polybag.codecs.cdr import decoding_definition, differs_from_known

        replaced: dict[int, Channel] = {}
        for ch in self._channels.values():
            s = ch.schema
            if ch.message_encoding != "cdr" or s is None or not differs_from_known(s.name, s.encoding, s.data):
                continue
            try:  # the topic's first message (the iterator is dropped, and its cursor with it)
                first = next((m for m in self.messages([ch.topic], order="file") if m.channel.id == ch.id), None)
            except PolybagError:
                continue
            if first is None:
                continue
            got = decoding_definition(s.name, s.encoding, s.data, first.data)
            if got is None:
                continue
            enc, text, why = got
            schema = Schema(s.id, s.name, enc, text)
            replaced[ch.id] = dataclasses.replace(ch, schema=schema)
            self._schemas[s.id] = schema
            self._warn(
                f"{self.path}: topic {ch.topic}: the bag's definition of {s.name} does not decode its messages "
                f"({why}); polybag's own definition of {s.name} does and is used"
            )
        if not replaced:
            return
        self._channels.update(replaced)
        for local in self._local:
            for lid, c in local.items():
                if c.id in replaced:
                    local[lid] = replaced[c.id]
        for key, c in self._meta_channel.items():
            if c.id in replaced:
                self._meta_channel[key] = replaced[c.id]
        self._summary = None

    def _named(self, e: PolybagError) -> PolybagError:
        """``e`` naming what the user gave (``shown_as``) instead of the local layout."""
        return renamed(e, self._shown) if self._shown else e

    def _naming(self, it: Iterator[Any]) -> Iterator[Any]:
        """``it`` with every error :meth:`_named`."""
        if not self._shown:
            return it
        return self._naming_all(it)

    def _naming_all(self, it: Iterator[Any]) -> Iterator[Any]:
        try:
            yield from it
        except PolybagError as e:
            raise self._named(e) from None

    # --- the interface ---------------------------------------------------------------------------
    @property
    def summary(self) -> Summary:
        """Topics, counts and times from metadata.yaml (from the storage files when recovering or without it)."""
        if self._summary is None:
            try:
                self._summary = self._make_summary()
            except PolybagError as e:
                raise self._named(e) from None
        return self._summary

    def _make_summary(self) -> Summary:
        info = self.info
        s = Summary(
            format="rosbag2",
            profile="ros2",
            version=str(info.version) if info is not None else "",
            schemas=dict(self._schemas),
            channels=dict(self._channels),
            file_size=self.source_size,
        )
        if info is not None and not self.recover and not self._unclosed:
            for cid in self._channels:
                s.message_counts[cid] = 0
            for t in info.topics:
                ch = self._meta_channel.get(id(t))
                if ch is not None:
                    s.message_counts[ch.id] += t.message_count
            if info.message_count and info.starting_time is not None:
                s.start_time = info.starting_time
                s.end_time = info.starting_time + (info.duration or 0)
            s.indexed = True
        else:  # rebuilt from the storage files
            s.indexed = False
            lo: list[int] = []
            hi: list[int] = []
            for st, local in zip(self._storages, self._local):
                try:
                    for lid, n in st.counts().items():
                        ch = local.get(lid)
                        if ch is not None:
                            s.message_counts[ch.id] = s.message_counts.get(ch.id, 0) + n
                    a, b = st.times()
                except PolybagError as e:
                    self._note(str(e))
                    continue
                if a is not None and b is not None:
                    lo.append(a)
                    hi.append(b)
            for cid in self._channels:
                s.message_counts.setdefault(cid, 0)
            if lo:
                s.start_time, s.end_time = min(lo), max(hi)
        s.extras = self.info_extras()
        return s

    @property
    def definition_problems(self) -> list[str]:  # type: ignore[override]
        """Storage files in the bag directory that metadata.yaml does not list (not read:
        `polybag check` reports them)."""
        return list(self._unlisted)

    @property
    def has_index(self) -> bool:
        """True when metadata.yaml gives the summary without reading the storage."""
        return self.info is not None and not self.recover and not self._unclosed

    def chunk_message_counts(self, channel_ids: set[int] | None = None) -> list[tuple[int, int, int]] | None:
        """Pieces of the bag for planners (``polybag.dask``): each MCAP file's chunks, each
        SQLite file's messages in up to 64 spans of time (counted by SQLite from its
        timestamp index), sorted by time; None without metadata.yaml or when a file has
        no index."""
        if not self.has_index:
            return None
        out: list[tuple[int, int, int]] = []
        for st, local in zip(self._storages, self._local):
            lids = None if channel_ids is None else {lid for lid, ch in local.items() if ch.id in channel_ids}
            if lids is not None and not lids:
                continue
            got = st.time_buckets(lids)
            if got is None:
                return None
            out.extend(got)
        return sorted(out)

    def info_extras(self) -> dict[str, Any]:
        """Storage, metadata version, files, compression, ros_distro, custom data and each topic's QoS."""
        info = self.info
        kinds = sorted({st.kind for st in self._storages})
        out: dict[str, Any] = {
            "storage": kinds[0]
            if len(kinds) == 1
            else (",".join(kinds) or (info.storage_identifier if info else "")),
            "rosbag2_version": info.version if info is not None else None,
            "files": [f.path for f in self._files],
            "compression_mode": info.compression_mode if info is not None else "",
            "compression_format": info.compression_format if info is not None else "",
        }
        if info is not None and info.ros_distro:
            out["ros_distro"] = info.ros_distro
        if info is not None and info.custom_data:
            out["custom_data"] = dict(info.custom_data)
        qos = {
            c.topic: qos_summary(c.metadata["offered_qos_profiles"])
            for c in self._channels.values()
            if c.metadata.get("offered_qos_profiles")
        }
        if qos:
            out["qos"] = qos
        return out

    def _messages(self, topics: TopicSelector, start: int | None, end: int | None, reverse: bool, order: MessageOrder) -> Iterator[Message]:
        ids = topic_filter(topics, self._channels.values())
        streams = [
            self._file_messages(i, ids, start, end, reverse, order) for i in range(len(self._storages))
        ]
        return self._naming(_merged(streams, order, reverse, _log_time, self._bounds(range(len(streams)), start, end, reverse)))

    def _raw_messages(self, topics: TopicSelector, start: int | None, end: int | None, reverse: bool, order: MessageOrder) -> Iterator[tuple[Channel, int, bytes | memoryview]]:
        """:meth:`_messages` as tuples: a storage read without compressed messages or
        recovery makes them straight from its rows (:meth:`Storage.raw_batches`)."""
        if self._per_message or self._sniff_zstd or self.recover:
            return super()._raw_messages(topics, start, end, reverse, order)
        ids = topic_filter(topics, self._channels.values())
        streams: list[Iterator[Any]] = []
        which = []
        for i, st in enumerate(self._storages):
            local_ids = self._local_ids(i, ids)
            if local_ids is None or local_ids:
                streams.append(chain.from_iterable(st.raw_batches(self._local[i], local_ids, start, end, reverse, order)))
                which.append(i)
        return self._naming(_merged(streams, order, reverse, itemgetter(1), self._bounds(which, start, end, reverse)))

    def _bounds(self, which: Any, start: int | None, end: int | None, reverse: bool) -> list[Any]:
        """For each storage file of ``which``, a function giving the first log time its
        stream can give (the last when ``reverse``), None when unknown: the merge of many
        files starts each file's stream only when it reaches that time."""

        def bound(i: int) -> int | None:
            lo, hi = self._storages[i].times()
            if reverse:
                return hi if end is None or hi is None else min(hi, end)
            return lo if start is None or lo is None else max(lo, start)

        return [partial(bound, i) for i in which]

    def _local_ids(self, i: int, ids: set[int] | None) -> set[int] | None:
        """Storage file ``i``'s local topic ids of the bag's channel ids ``ids`` (None: all)."""
        return None if ids is None else {lid for lid, ch in self._local[i].items() if ch.id in ids}

    def _file_messages(self, i: int, ids: set[int] | None, start: int | None, end: int | None, reverse: bool, order: str) -> Iterator[Message]:
        """Storage file ``i``'s messages selected; without compressed messages and not
        recovering, the storage's batches flattened in C (no Python frame per message)."""
        local = self._local[i]
        local_ids = self._local_ids(i, ids)
        if local_ids is not None and not local_ids:
            return iter(())
        if not self._per_message and not self._sniff_zstd and not self.recover:
            return chain.from_iterable(self._storages[i].messages(local, local_ids, start, end, reverse, order))
        return self._file_messages_checked(i, local_ids, start, end, reverse, order)

    def _file_messages_checked(
        self, i: int, local_ids: set[int] | None, start: int | None, end: int | None, reverse: bool, order: str
    ) -> Iterator[Message]:
        """:meth:`_file_messages` decompressing messages, or noting damage when recovering."""
        st = self._storages[i]
        try:
            batches = st.messages(self._local[i], local_ids, start, end, reverse, order)
            if not self._per_message and not self._sniff_zstd:
                for batch in batches:
                    yield from batch
                return
            for batch in batches:
                for m in batch:
                    if not self._per_message and bytes(m.data[:4]) != _ZSTD_MAGIC:
                        yield m
                        continue
                    try:
                        m.data = decompress("zstd", m.data, None, path=st.path, max_bytes=self._max_bytes)
                    except PolybagError as e:
                        what = f"topic {m.channel.topic}, time {m.log_time}: {e}"
                        if not self.recover:
                            raise FormatError(what, st.path) from None
                        self._note(f"{st.path}: {what}")
                        continue
                    yield m
        except PolybagError as e:
            if not self.recover:
                raise
            self._note(str(e))

    def attachments(self) -> Iterator[Attachment]:
        """Attachments of MCAP storage files (rosbag2 itself writes none)."""
        return self._naming(a for st in self._storages for a in st.records()[0])

    def metadata(self) -> Iterator[Metadata]:
        """Metadata records of MCAP storage files, but rosbag2's own ``rosbag2`` record."""
        return self._naming(m for st in self._storages for m in st.records()[1])

    def topic_payloads(self, topic: str) -> TopicPayloads | None:
        """Every payload of ``topic`` at once, in log-time order (``(log_times, blob, starts,
        sizes)``); for SQLite storage straight from one query per file."""
        import numpy as np

        from polybag.formats.shared.payloads import packed

        ids = topic_filter([topic], self._channels.values()) or set()
        if len(self._storages) == 1 and not self._per_message and not self.recover:
            lids = {lid for lid, ch in self._local[0].items() if ch.id in ids}
            arrays = self._storages[0].payload_arrays(lids, self._local[0]) if lids else None
            if arrays is not None:  # straight from the database's pages (no row through Python)
                return TopicPayloads(*arrays)
        times: list[int] = []
        datas: list[bytes | memoryview] = []
        for i, st in enumerate(self._storages):
            local = self._local[i]
            lids = {lid for lid, ch in local.items() if ch.id in ids}
            if not lids:
                continue
            got = None if self._per_message or self.recover else st.payloads(lids)
            if got is None:
                ts: list[int] = []
                ds: list[bytes | memoryview] = []
                for m in self._file_messages(i, ids, None, None, False, "log_time"):
                    ts.append(m.log_time)
                    ds.append(m.data)
                got = (ts, ds)
            times.extend(got[0])
            datas.extend(got[1])
        t = np.array(times, dtype=np.uint64)
        if len(self._storages) > 1 and len(t) > 1:
            order = np.argsort(t, kind="stable")  # several files: by time, ties in file order
            t = t[order]
            datas = [datas[k] for k in order.tolist()]
        return TopicPayloads(t, *packed(datas))

    @property
    def recovery_report(self) -> dict[str, Any] | None:  # type: ignore[override]
        """What a recovering read met (files, journals, rows or chunks it had to skip)."""
        if not self.recover:
            return None
        errors = list(self._errors)
        for st in self._storages:
            errors.extend(e for e in st.errors if e not in errors)
        for old, new in self._shown:
            errors = [e.replace(old, new) for e in errors]
        return {
            "messages": None,
            "bytes_skipped": sum(st.bytes_skipped for st in self._storages),
            "errors": errors,
        }

    @property
    def fetch_stats(self) -> dict[str, Any] | None:
        """A remote bag's: the sum over its files (see LocalLayout.fetch_stats); None for a local one."""
        layout = getattr(self, "_layout", None)
        return None if layout is None else layout.fetch_stats()

    @property
    def source_size(self) -> int:
        """Bytes of the storage files."""
        return sum(st.size() for st in self._storages)

    def release_pages(self) -> None:
        """Drop the mapped pages of the storage files."""
        for st in self._storages:
            st.release_pages()

    def close(self) -> None:
        """Close every storage file and remove temporary decompressed copies."""
        for st in getattr(self, "_storages", []):
            try:
                st.close()
            except PolybagError:
                pass
        for t in getattr(self, "_temps", []):
            t.close()
        self._storages = []
        self._temps = []
        super().close()
        layout = getattr(self, "_layout", None)
        if layout is not None:
            layout.remove()


def _log_time(m: Message) -> int:
    return m.log_time


def _merged(streams: list[Iterator[Any]], order: str, reverse: bool, key: Any, bounds: list[Any]) -> Iterator[Any]:
    """The storage files' streams as one: in file order one after the other, else merged by
    log time (``key``) with ties in stream order (file order), as heapq.merge does; more
    than :data:`MAX_OPEN_STORAGES` files through :func:`_lazy_merged`."""
    if len(streams) == 1:
        return streams[0]
    if order == "file":
        return chain.from_iterable(streams[::-1] if reverse else streams)
    if len(streams) > MAX_OPEN_STORAGES:
        return _lazy_merged(streams, bounds, reverse, key)
    return heapq.merge(*streams, key=key, reverse=reverse)


def _lazy_merged(streams: list[Iterator[Any]], bounds: list[Any], reverse: bool, key: Any) -> Iterator[Any]:
    """heapq.merge's order, but stream ``i`` is started only when the merge reaches
    ``bounds[i]()`` (the first time it can give; None: at once), so files that follow each
    other in time are read (and open) a few at a time, not all at once."""
    sign = -1 if reverse else 1
    first: list[float] = []
    for b in bounds:
        try:
            t = b()
        except PolybagError:
            t = None
        first.append(float("-inf") if t is None else sign * t)
    pending = sorted(range(len(streams)), key=lambda i: (first[i], i))
    heap: list[tuple[int, int, Any, Iterator[Any]]] = []
    done = object()
    p = 0
    while True:
        while p < len(pending) and (not heap or first[pending[p]] <= heap[0][0]):
            i = pending[p]
            p += 1
            it = iter(streams[i])
            item = next(it, done)
            if item is not done:
                heapq.heappush(heap, (sign * key(item), i, item, it))
        if not heap:
            return
        _k, i, item, it = heap[0]
        yield item
        nxt = next(it, done)
        if nxt is done:
            heapq.heappop(heap)
        else:
            heapq.heapreplace(heap, (sign * key(nxt), i, nxt, it))


def open_rosbag2(path: str, **options: Any) -> Rosbag2Reader:
    """The registry's ``open_path``: a bag directory, its ``metadata.yaml`` or a ``.db3``.
    Options: ``recover`` (read past damage, rebuild a missing metadata.yaml),
    ``max_chunk_bytes`` (caps a per-message decompression and an MCAP chunk),
    ``validate_crcs`` (MCAP storage), ``max_storage_bytes`` (what one zstd-compressed storage
    file may decompress to; default: 1024 times its size, at least 256 MiB, at most 64 GiB),
    ``shown_as`` (what the directory is to the user, a URL for a remote bag laid out
    locally: errors name it instead); others are ignored."""
    opts = {
        k: v
        for k, v in options.items()
        if k in ("max_chunk_bytes", "validate_crcs", "max_storage_bytes", "shown_as", "layout")
    }
    return Rosbag2Reader(os.fspath(path), recover=bool(options.get("recover")), **opts)


def open_rosbag2_file(source: Source, path: str | None = None, **options: Any) -> Rosbag2Reader:
    """The registry's byte-source opener: a rosbag2 bag is a directory, so only a source
    opened from a ``metadata.yaml`` or ``.db3`` path can be one (it is reopened by path)."""
    p = path if path is not None else source.path
    source.close()
    if p is None or not looks_like_rosbag2(p):
        raise UnsupportedError("a rosbag2 bag is a directory: open it by its path (or its metadata.yaml)")
    return open_rosbag2(p, **options)
