"""Readers for the bag versions before 2.0 (all described in ``../shared/specs``).

* ``#ROSRECORD V1.2`` (rosbag-format-v1.x "Version 1.2"): records ``<header_len><header>
  <data_len><data>``; op 1 message definition (topic, md5, type, def), op 2 message data
  (topic, md5, type and the receive time, as a ``time`` field or ``sec``/``nsec`` fields),
  op 3 bag header (``index_pos``, padded to 4096 bytes), op 4 index data ver 0 (topic, type,
  count; count x (sec, nsec, pos u64)).
* ``#ROSRECORD V1.1`` and ``#ROSLOG V1.1`` (rosbag-format-v1.x "Version 1.1",
  versions-overview "Version 1.1"/"Alternative Version 1.1"): per message a
  newline-terminated topic, md5sum and type, then u32 sec, u32 nsec, u32 length, data.
* ``#ROSLOG V1.0`` (versions-overview "Version 1.0"): a ``quantity`` line, then
  ``quantity`` x (topic, md5sum, type) lines, then per message a topic line, sec, nsec,
  length, data.
* version 0 (versions-overview "Version 0"): as 1.1 without the version line.

One reader, :class:`BagV1Reader`, reads them all: it owns a :class:`MessageTable` (the
channels and, per message, its time, channel, payload offset and length) that a scan of
the version's records fills (:func:`scan_text_records`, :func:`scan_v12_records`), and for
1.2 the summary its index gives (:func:`read_v12_index`) until a read needs the scan.

None of the line formats carries definition text: channels keep type and md5sum in their
metadata and have a schema with empty data, unless ``definitions=`` (``{md5sum: text}`` or
other open readers, e.g. a 2.0 bag recorded with the same types) supplies the text.  The whole file is scanned once into numpy
arrays; messages are zero-copy slices of the mapped file.
"""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

import numpy as np

from polybag.errors import FormatError, TruncatedError
from polybag.io.source import MappedSource
from polybag.model import Channel, Message, Schema, Summary, TopicPayloads
from polybag.reader import MessageOrder, Reader, TopicSelector, topic_filter

from .damage import Damage
from .info import bag_info, bag_summary
from .messages import gc_paused
from .records import (
    INDEX_V0_DTYPE,
    OP_FILE_HEADER,
    OP_INDEX_DATA,
    OP_MSG_DATA,
    OP_MSG_DEF,
    OP_NAMES,
    HeaderFields,
    index_data_count,
    op_of,
    read_record_at,
)

_TAIL = struct.Struct("<III")
MAX_LINE = 4096
_HEX = frozenset(b"0123456789abcdefABCDEF")


def _line(view: memoryview, pos: int, size: int, what: str, path: str | None) -> tuple[bytes, int]:
    """A newline-terminated line at ``pos``: (text without newline, position after it)."""
    chunk = bytes(view[pos : min(size, pos + MAX_LINE)])
    i = chunk.find(b"\n")
    if i < 0:
        if pos + len(chunk) >= size:
            raise TruncatedError(f"file ends inside the {what} line", path, pos)
        raise FormatError(f"{what} line longer than {MAX_LINE} bytes (no newline)", path, pos)
    return chunk[:i], pos + i + 1


def _plausible_text(b: bytes) -> bool:
    return all(0x20 <= c < 0x7F for c in b)


def looks_like_version0(view: memoryview) -> bool:
    """Whether the file starts with a plausible version 0 record (topic, md5, type lines)."""
    size = len(view)
    try:
        topic, p = _line(view, 0, size, "topic", None)
        md5, p = _line(view, p, size, "md5sum", None)
        typ, p = _line(view, p, size, "type", None)
    except FormatError:
        return False
    if not topic or not _plausible_text(topic) or not _plausible_text(typ) or not typ:
        return False
    if not (md5 == b"*" or (len(md5) == 32 and all(c in _HEX for c in md5))):
        return False
    return p + 12 <= size


def _definition_map(definitions: Any) -> dict[str, bytes]:
    """``definitions=`` as md5sum -> definition text.

    Accepts a mapping ``{md5sum: text}``, or another open reader (or a list of them) whose
    channels carry definitions (a 2.0 bag or MCAP file recorded with the same types).
    """
    if definitions is None:
        return {}
    if isinstance(definitions, Mapping):
        return {str(k): (v.encode() if isinstance(v, str) else bytes(v)) for k, v in definitions.items()}
    readers = definitions if isinstance(definitions, (list, tuple)) else [definitions]
    out: dict[str, bytes] = {}
    for r in readers:
        for ch in r.summary.channels.values():
            md5 = str(ch.metadata.get("md5sum", ""))
            if md5 and ch.schema is not None and ch.schema.data:
                out.setdefault(md5, bytes(ch.schema.data))
    return out


class MessageTable:
    """An old bag's channels (one per (topic, md5sum, type)) and messages: per message its
    time, channel id, payload offset and length, gathered by a scan (lists) and then held
    as numpy arrays (:meth:`finish`)."""

    def __init__(self, definitions: dict[str, bytes]) -> None:
        self.definitions = definitions  # md5sum -> text, from ``definitions=``
        self.channels: dict[tuple[str, str, str], Channel] = {}
        self.defs: dict[str, bytes] = {}  # topic + "\0" + md5sum -> text, from definition records
        self.t: list[int] = []
        self.c: list[int] = []
        self.d: list[int] = []
        self.n: list[int] = []
        self.times = self.conns = self.dstart = self.dlen = np.zeros(0, np.int64)
        self.channels_by_id: dict[int, Channel] = {}

    def channel(self, topic: str, md5: str, typ: str) -> int:
        """The id of the channel of (``topic``, ``md5``, ``typ``), made when first met."""
        key = (topic, md5, typ)
        ch = self.channels.get(key)
        if ch is None:
            cid = len(self.channels)
            definition = self.defs.get(topic + "\0" + md5, b"") or self.definitions.get(md5, b"")
            schema = Schema(cid + 1, typ, "ros1msg", definition)
            ch = self.channels[key] = Channel(cid, topic, "ros1", schema, {"md5sum": md5, "type": typ})
        return ch.id

    def add(self, t: int, cid: int, data_start: int, data_len: int) -> None:
        """One message: its time, channel id and payload."""
        self.t.append(t)
        self.c.append(cid)
        self.d.append(data_start)
        self.n.append(data_len)

    def finish(self) -> None:
        """The lists as arrays, and the channels by id."""
        self.times = np.array(self.t, np.int64)
        self.conns = np.array(self.c, np.int64)
        self.dstart = np.array(self.d, np.int64)
        self.dlen = np.array(self.n, np.int64)
        self.t, self.c, self.d, self.n = [], [], [], []
        self.channels_by_id = {ch.id: ch for ch in self.channels.values()}


class V12Index(NamedTuple):
    """What a 1.2 bag's index gives without a scan: message counts per channel id, the
    first and last time, the sorted times per channel id and the index facts for
    ``extras``."""

    counts: dict[int, int]
    start: int | None
    end: int | None
    times: dict[int, np.ndarray]
    info: dict[str, Any]


class BagV1Reader(Reader):
    """Reads a bag of a version before 2.0 (``version``: ``1.2``, ``1.1``, ``ROSLOG 1.1``,
    ``ROSLOG 1.0`` or ``0``; its records start at ``start``), held as arrays of (time,
    channel, payload offset, payload length).  Use :func:`~polybag.formats.bag.reader.open_bag`
    (or ``polybag.open``)."""

    format = "bag"
    #: every bag channel is ROS 1 (an MCAP written from a bag gets the ``ros1`` profile)
    native_profile = "ros1"
    #: ``polybag info`` lays a bag out as ``rosbag info`` (``rosbag info --yaml``) does
    info_style = "rosbag"

    def __init__(
        self, source: MappedSource, path: str | None, *, version: str, start: int, recover: bool = False, **options: Any
    ) -> None:
        super().__init__(source, path)
        self.view = source.view
        self.size = source.size
        self.version = version
        self.recover = recover
        self.damage = Damage(recover)
        self.table = MessageTable(_definition_map(options.get("definitions")))
        self.index_info: dict[str, Any] = {}
        self._data_start = start
        self._scanned = False
        # a 1.2 bag's index, when it gives the summary without a scan
        self._index: V12Index | None = None
        if version == "1.2" and not recover:
            self._index = read_v12_index(self.view, self.size, self.path, start, self.table)
            if self._index is not None:
                self.index_info = self._index.info
        if self._index is None:
            self._ensure()

    def _ensure(self) -> None:
        """Scan the records once (lazily when an index gave the summary)."""
        if not self._scanned:
            self._scanned = True
            if self.version == "1.2":
                info = scan_v12_records(self.view, self.size, self.path, self._data_start, self.table, self.damage)
                if info is not None:  # (a scan stopped by damage leaves what the index said)
                    self.index_info = info
            else:
                scan_text_records(self.view, self.size, self.path, self._data_start, self.version, self.table, self.damage)
            self.table.finish()

    def info_extras(self) -> dict[str, Any]:
        return bag_info(self)

    @property
    def summary(self) -> Summary:
        table = self.table
        if not self._scanned and self._index is not None:
            chans = {ch.id: ch for ch in table.channels.values()}
            ix = self._index
            return bag_summary(
                self.version,
                self.size,
                chans,
                message_counts=dict(ix.counts),
                start_time=ix.start,
                end_time=ix.end,
                indexed=True,
                extras={"bag_version": self.version, **self.index_info},
            )
        self._ensure()
        chans = table.channels_by_id
        counts = {cid: 0 for cid in chans}
        if len(table.conns):
            u, n = np.unique(table.conns, return_counts=True)
            counts.update(dict(zip(u.tolist(), n.tolist())))
        extras: dict[str, Any] = {"bag_version": self.version}
        if self.damage.recovery.errors:
            extras["errors"] = list(self.damage.recovery.errors)
        extras.update(self.index_info)
        return bag_summary(
            self.version,
            self.size,
            dict(chans),
            message_counts=counts,
            start_time=int(table.times.min()) if len(table.times) else None,
            end_time=int(table.times.max()) if len(table.times) else None,
            indexed=False,
            extras=extras,
        )

    def _messages(self, topics: TopicSelector, start: int | None, end: int | None, reverse: bool, order: MessageOrder) -> Iterator[Message]:
        self._ensure()
        table = self.table
        chans = table.channels_by_id
        sel = topic_filter(topics, chans.values())
        t, c, d, n = table.times, table.conns, table.dstart, table.dlen
        mask = np.ones(len(t), bool)
        if sel is not None:
            mask &= np.isin(c, np.fromiter(sel, np.int64, len(sel)))
        if start is not None:
            mask &= t >= start
        if end is not None:
            mask &= t < end
        idx = np.nonzero(mask)[0]
        if order == "log_time":
            idx = idx[np.argsort(t[idx], kind="stable")]
        if reverse:
            idx = idx[::-1]
        view = self.view
        get = chans.__getitem__
        with self.damage.reading(self) as done:
            for k in range(0, len(idx), 65536):
                part = idx[k : k + 65536]
                with gc_paused():  # see messages.gc_paused
                    batch = [
                        Message(get(cc), tt, tt, 0, view[a:b])
                        for tt, cc, a, b in zip(
                            t[part].tolist(), c[part].tolist(), d[part].tolist(), (d[part] + n[part]).tolist()
                        )
                    ]
                yield from batch
                done.count += len(batch)

    def topic_payloads(self, topic: str) -> TopicPayloads:
        """Every payload of ``topic`` at once (see :meth:`BagV2Reader.topic_payloads`)."""
        from polybag.formats.shared.payloads import Arena

        self._ensure()
        table = self.table
        sel = topic_filter([topic], table.channels_by_id.values()) or set()
        idx = np.nonzero(np.isin(table.conns, np.fromiter(sel, np.int64, len(sel))))[0]
        t, d, n = table.times[idx], table.dstart[idx], table.dlen[idx]
        with self.damage.reading(self) as done:
            arena = Arena(int(n.sum()))
            arena.add(np.frombuffer(self.view, np.uint8), t, d, n)
            result = arena.result()
            done.count = len(idx)
        return result

    def message_times(self, cids: set[int] | None = None) -> dict[int, np.ndarray]:
        if not self._scanned and self._index is not None:
            return {k: v for k, v in self._index.times.items() if cids is None or k in cids}
        self._ensure()
        table = self.table
        out = {}
        for cid in table.channels_by_id:
            if cids is None or cid in cids:
                out[cid] = np.sort(table.times[table.conns == cid])
        return out


def scan_text_records(
    view: memoryview, size: int, p: str | None, pos: int, version: str, table: MessageTable, damage: Damage
) -> None:
    """The messages of a ``#ROSRECORD V1.1``, ``#ROSLOG V1.1``, ``#ROSLOG V1.0`` or version 0
    bag (records from ``pos`` on) into ``table``; the first damage stops the scan (noted)."""
    topics_v10: dict[str, tuple[str, str]] = {}
    try:
        if version == "ROSLOG 1.0":
            q, pos = _line(view, pos, size, "quantity", p)
            try:
                quantity = int(q.decode("ascii").strip())
            except (UnicodeDecodeError, ValueError):
                raise FormatError(f"ROSLOG V1.0 quantity line is not a number: {q[:40]!r}", p, pos) from None
            if quantity < 0 or quantity * 3 > size - pos:
                raise FormatError(f"ROSLOG V1.0 quantity {quantity} is more than the file can hold", p, pos)
            for _ in range(quantity):
                tp, pos = _line(view, pos, size, "topic", p)
                md, pos = _line(view, pos, size, "md5sum", p)
                ty, pos = _line(view, pos, size, "type", p)
                topics_v10[tp.decode("utf-8", "replace")] = (
                    md.decode("ascii", "replace"),
                    ty.decode("utf-8", "replace"),
                )
    except FormatError as e:
        damage.fail(e)
        return
    while pos < size:
        rec = pos
        try:
            tp, pos = _line(view, pos, size, "topic", p)
            topic = tp.decode("utf-8", "replace")
            if version == "ROSLOG 1.0":
                if topic not in topics_v10:
                    raise FormatError(f"topic {topic!r} is not among the header's topics", p, rec)
                md5, typ = topics_v10[topic]
            else:
                md, pos = _line(view, pos, size, "md5sum", p)
                ty, pos = _line(view, pos, size, "type", p)
                md5, typ = md.decode("ascii", "replace"), ty.decode("utf-8", "replace")
            if pos + 12 > size:
                raise TruncatedError(f"expected 12 bytes of time and length, {size - pos} left", p, pos)
            s, ns, n = _TAIL.unpack_from(view, pos)
            pos += 12
            if n > size - pos:
                raise TruncatedError(f"message data of {n} bytes runs past the end ({size - pos} left)", p, pos - 4)
        except FormatError as e:
            damage.fail(e)
            return
        table.add(s * 1_000_000_000 + ns, table.channel(topic, md5, typ), pos, n)
        pos += n


def read_v12_index(view: memoryview, size: int, p: str | None, data_start: int, table: MessageTable) -> V12Index | None:
    """A ``#ROSRECORD V1.2`` bag's summary from the bag header's index_pos and the index data
    records (ver 0): counts and times per topic, and each topic's md5sum/definition from the
    record its first entry points at (its channels made in ``table``).  None when anything
    does not fit (and, for a damaged record, nothing kept in ``table``)."""
    try:
        h, _ds, _dl, pos = read_record_at(view, data_start, size, p)
        f = HeaderFields(h, p, data_start, "bag header")
        if op_of(h, p, data_start) != OP_FILE_HEADER:
            return None
        index_pos = f.u64("index_pos")
        if not pos <= index_pos < size:
            return None
        got = _read_index_records(view, size, p, index_pos, table)
        if got is None:
            return None
    except FormatError:
        table.channels.clear()
        table.defs.clear()
        return None
    per_topic, md5s = got
    counts: dict[int, int] = {}
    tmap: dict[int, np.ndarray] = {}
    t0: int | None = None
    t1: int | None = None
    for topic, (typ, times) in per_topic.items():
        cid = table.channel(topic, md5s.get(topic, ""), typ)
        counts[cid] = counts.get(cid, 0) + len(times)
        tmap[cid] = np.sort(times)
        if len(times):
            lo, hi = int(times.min()), int(times.max())
            t0 = lo if t0 is None else min(t0, lo)
            t1 = hi if t1 is None else max(t1, hi)
    info = {"index_pos": index_pos, "index_counts": {t: len(v[1]) for t, v in per_topic.items()}}
    return V12Index(counts, t0, t1, tmap, info)


def _read_index_records(
    view: memoryview, size: int, p: str | None, index_pos: int, table: MessageTable
) -> tuple[dict[str, tuple[str, np.ndarray]], dict[str, str]] | None:
    """The index data records from ``index_pos`` on: each topic's type and times, and its
    md5sum (definitions kept in ``table`` as they are found); None when a record does not fit."""
    per_topic: dict[str, tuple[str, np.ndarray]] = {}
    md5s: dict[str, str] = {}
    q = index_pos
    while q < size:
        h, ds, dl, nxt = read_record_at(view, q, size, p)
        f = HeaderFields(h, p, q, "index data")
        if op_of(h, p, q) != OP_INDEX_DATA or f.u32("ver") != 0:
            return None
        count = f.u32("count")
        if dl != count * INDEX_V0_DTYPE.itemsize:
            return None
        arr = np.frombuffer(view[ds : ds + dl], INDEX_V0_DTYPE)
        if len(arr) and int(arr["pos"].max()) >= index_pos:
            return None
        topic = f.str("topic")
        times = arr["sec"].astype(np.int64) * 1_000_000_000 + arr["nsec"].astype(np.int64)
        if topic in per_topic:
            times = np.concatenate([per_topic[topic][1], times])
        per_topic[topic] = (f.str("type"), times)
        if count:
            md5s[topic] = _first_md5(view, p, topic, int(arr["pos"][0]), index_pos, table)
        q = nxt
    return per_topic, md5s


def _first_md5(view: memoryview, p: str | None, topic: str, first: int, index_pos: int, table: MessageTable) -> str:
    """The md5sum of the record at ``first`` (a topic's first index entry), keeping its
    definition in ``table`` when it is a definition record that has one."""
    rh, _rds, _rdl, _n = read_record_at(view, first, index_pos, p)
    rf = HeaderFields(rh, p, first, "record")
    md5 = rf.str("md5", rf.str("md5sum", ""))
    if op_of(rh, p, first) == OP_MSG_DEF and rf.has("def"):
        table.defs[topic + "\0" + md5] = rf.raw("def")
    return md5


def scan_v12_records(
    view: memoryview, size: int, p: str | None, pos: int, table: MessageTable, damage: Damage
) -> dict[str, Any] | None:
    """The messages of a ``#ROSRECORD V1.2`` bag (records from ``pos`` on) into ``table``;
    the first damage stops the scan (noted; None returned).  Returns the index facts for
    ``extras`` (``index_pos``, ``index_counts`` and, when those disagree with the messages
    found, ``index_mismatch``)."""
    index_pos = 0
    index_counts: dict[str, int] = {}
    while pos < size:
        try:
            h, ds, dl, nxt = read_record_at(view, pos, size, p)
            op = op_of(h, p, pos)
            f = HeaderFields(h, p, pos, OP_NAMES.get(op, f"op {op}"))
            if op == OP_MSG_DEF:
                topic = f.str("topic")
                md5 = f.str("md5", f.str("md5sum", ""))
                table.defs[topic + "\0" + md5] = f.raw("def") if f.has("def") else b""
                table.channel(topic, md5, f.str("type"))
            elif op == OP_MSG_DATA:
                topic = f.str("topic")
                md5 = f.str("md5", f.str("md5sum", ""))
                if f.has("time"):
                    t = f.time("time")
                else:
                    t = f.u32("sec") * 1_000_000_000 + f.u32("nsec")
                cid = table.channel(topic, md5, f.str("type"))  # (may raise: before appending)
                table.add(t, cid, ds, dl)
            elif op == OP_FILE_HEADER:
                index_pos = f.u64("index_pos")
            elif op == OP_INDEX_DATA:
                count = index_data_count(f, dl, 0, p, pos)
                arr = np.frombuffer(view[ds : ds + dl], INDEX_V0_DTYPE)
                if len(arr) and int(arr["pos"].max()) >= size:
                    raise FormatError("index data points past the end of the file", p, pos)
                topic = f.str("topic")
                index_counts[topic] = index_counts.get(topic, 0) + count
            # unknown ops are skipped
            pos = nxt
        except FormatError as e:
            damage.fail(e)
            return None
    # a definition record may follow the data of its topic in damaged files: refresh schemas
    for key, ch in list(table.channels.items()):
        d = table.defs.get(key[0] + "\0" + key[1])
        if d and ch.schema is not None and not ch.schema.data:
            table.channels[key] = Channel(
                ch.id, ch.topic, ch.message_encoding, Schema(ch.schema.id, ch.schema.name, "ros1msg", d), ch.metadata
            )
    index_info: dict[str, Any] = {"index_pos": index_pos, "index_counts": index_counts}
    if index_counts:
        per_id = Counter(table.c)
        seen: dict[str, int] = {}
        for (topic, _m, _t), ch in table.channels.items():
            seen[topic] = seen.get(topic, 0) + per_id.get(ch.id, 0)
        bad = {t: (n, seen.get(t, 0)) for t, n in index_counts.items() if seen.get(t, 0) != n}
        if bad:
            index_info["index_mismatch"] = bad
    return index_info


__all__ = ["BagV1Reader", "MessageTable", "looks_like_version0", "read_v12_index", "scan_text_records", "scan_v12_records"]
