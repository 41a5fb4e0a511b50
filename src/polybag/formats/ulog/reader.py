"""PX4 ULog reader.

The data section has no index, so the reader walks the ``msg_size`` chain once at open, but
not message by message: every byte offset whose type byte is ``D`` is found with numpy,
candidates that link to each other (``offset + 3 + size`` is the next candidate) form runs,
and the walk jumps over whole runs, stepping one by one only between them (the result is
exactly the one-by-one walk; the runs only make it fast).  Message types, sizes and
``msg_id`` of every message are then read at once from the mapped file, data messages are
matched to their subscription in bulk, and a topic's columns are one fancy-indexing gather
of its payloads into a structured array (no Python object per message).

Model mapping:

* each subscription (``A``) is a :class:`~polybag.model.Channel` whose topic is the message
  name, ``message_encoding`` ``"ulog"``, metadata ``{"multi_id": "0", "msg_id": "3"}``, and
  whose schema (encoding ``"ulog"``) is the format of the type and of every nested type;
* each ``D`` message is a message with ``log_time = publish_time = timestamp * 1000`` ns
  (``uint8`` timestamps are milliseconds; narrow timestamps are unwrapped);
* logged strings (``L`` and tagged ``C``) are messages on the channel :data:`LOG_TOPIC`
  (``"log_message"``, schema ``ulog_logged_string``), see :mod:`polybag.codecs.ulog`;
* info, multi-info, parameters, defaults, logged strings, dropouts and flag bits are on
  ``reader.ulog`` (a :class:`UlogData`, names like pyulog's).

Damage: a log that ends inside a message keeps every complete message.  A data message
with no subscription or the wrong size is dropped where it is when the next message is
good (pyulog does the same); an impossible header means the size chain is lost, and
reading resumes at the next sync message or the next offset where three valid headers
follow each other.  A subscription whose format cannot be laid out (see
:func:`~polybag.codecs.ulog.compile_type`) is one damage report at its ``A`` message
that counts its data messages, which are skipped; the other topics read as usual.
``reader.ulog.corruptions`` lists each with the bytes skipped (``recovery_report["errors"]``
has one line per kind of dropped data message and subscription, with the count).  Without
``recover=True``, :meth:`UlogReader.messages` raises a :class:`~polybag.errors.FormatError`
(or :class:`~polybag.errors.TruncatedError`) after the last intact message before the
first damage; columns and extras always hold everything that could be read (like pyulog).
An unknown incompat flag bit is always refused (:class:`~polybag.errors.UnsupportedError`).

Differences from pyulog, on purpose: appended data keeps its subscriptions (pyulog drops
the data messages after the first appended offset), and data messages that carry their
trailing ``_padding`` are read (pyulog drops them); both follow the ULog spec.

Where things are: :class:`UlogReader` (here) owns a few parts, one module each:
:mod:`~polybag.formats.ulog.index` (the one pass at open: :func:`read_index` returns a
:class:`~polybag.formats.ulog.index.UlogIndex`), which uses
:mod:`~polybag.formats.ulog.definitions` (the definitions section and control messages),
:mod:`~polybag.formats.ulog.scan` (the mapped bytes, message boundaries in the data
section: candidates, walk, resync), :mod:`~polybag.formats.ulog.batches` (each batch of
walked messages checked and sorted; the hot kernels are plain functions there) and
:mod:`~polybag.formats.ulog.damage` (damage reports, the first damage as a value); then
:mod:`~polybag.formats.ulog.data` (positions, timestamps, records, columns),
:mod:`~polybag.formats.ulog.facts` (``reader.ulog``) and :mod:`~polybag.formats.ulog.info`
(info extras).  This module keeps the opener, the channels and messages, and the step
sizes of the scan (tests change them here).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from polybag.codecs.ulog import (
    LOGGED_STRING_SCHEMA,
    LOGGED_STRING_TEXT,
    logged_string_payload,
    schema_text,
)
from polybag.formats.ulog import records as rec
from polybag.formats.ulog.damage import DamageLog
from polybag.formats.ulog.data import LOG_TOPIC, MAX_US, TopicData, multi_id_of
from polybag.formats.ulog.data import TopicNotFoundError as TopicNotFoundError
from polybag.formats.ulog.definitions import LoggedEntry
from polybag.formats.ulog.facts import UlogData as UlogData
from polybag.formats.ulog.index import read_index
from polybag.formats.ulog.info import info_extras
from polybag.formats.ulog.scan import MappedLog, ScanTuning
from polybag.formats.ulog.subscriptions import SubscriptionEntry
from polybag.io.source import MappedSource, Source, StreamSource
from polybag.model import Channel, Message, RecoveryReport, Schema, Summary
from polybag.reader import Reader, TopicSelector, topic_filter
from polybag.util import threads as _threads

# The step sizes of the scan, read at each use through scan_tuning (tests set them here).
_WALK_LIMIT = 1 << 16  # messages handled at once (bounds the index arrays)
_LINK_LOOKAHEAD = 6  # a candidate is kept when its end is one of the next this many
_SCAN_CHUNK = 1 << 20  # bytes compared for the D type byte at once (cache-sized)
_SCAN_PART = 8  # chunks at least per scanning thread


def scan_tuning() -> ScanTuning:
    """The step sizes of the scan, read from this module now (tests change them)."""
    return ScanTuning(_SCAN_CHUNK, _LINK_LOOKAHEAD, _WALK_LIMIT, _scan_workers, _part_capacity)


def _scan_workers(nchunks: int) -> int:
    """Threads for the candidate scan of ``nchunks`` chunks: one per core, up to 4, and
    only for logs large enough to gain from it (plain threads, started per scan: a 30 MB
    log's scan in a fresh process takes 40 instead of 51 ms with two)."""
    return max(1, min(_threads.workers(), nchunks // _SCAN_PART))


def _part_capacity(nbytes: int) -> int:
    """First guess of the candidates in ``nbytes`` of data (one per 24 bytes; a real log
    has one per 40-100): the buffer grows when a log holds more."""
    return max(1024, nbytes // 24)


# The heap hint (see _hint_heap): done once per process, for logs of at least this size
# (not smaller: its memory cost is fixed, its gain grows with the log; and a full parse of
# such a log allocates more than the hint's block anyway, so no peak of allocations grows).
_HEAP_HINT = 16 << 20
_HEAP_HINT_MIN = _HEAP_HINT
_heap_hinted = False


def _hint_heap(size: int) -> None:
    """Once per process, before the first large log is read: allocate and free (untouched)
    a block of :data:`_HEAP_HINT` bytes, which makes glibc's malloc serve blocks up to that
    size from its heap from then on (its documented dynamic mmap threshold; any program
    that frees a numpy array of that size gets the same), instead of mapping fresh pages
    for each and unmapping them when freed.

    Why: every page first touched costs a page fault, about 2 us on the machines measured
    (a VM), and the default thresholds (128 KiB, then the size of the largest block freed
    so far) make the scan's buffers and the batch temporaries fresh mappings, and the
    topics' records arrays then fault in fresh pages again instead of reusing the scratch
    just freed.  With the hint, a fresh process reading the 30 MB bench log into columns
    takes 12.8k -> 7.9k page faults (open + columns), columns 32 -> 24 ms, open 61 -> 54
    ms (medians), the whole run ~11 ms less.  What it costs: the peak resident memory of
    an in-process full parse (``all_topic_columns``) is 1-3 MB more (1.40x -> 1.47x the
    30 MB log, 1.18x -> 1.19x for 100 MB), and the heap keeps up to twice the hint's size
    of freed memory for reuse instead of returning it to the system at once (glibc's own
    rule once such a block was freed).  Elsewhere (no glibc) it is a plain allocation and
    free."""
    global _heap_hinted
    if _heap_hinted or size < _HEAP_HINT_MIN:
        return
    _heap_hinted = True
    np.empty(_HEAP_HINT, np.uint8)  # freed at once: never touched, so never resident


class ChannelsAtOpen:
    """The schemas and the selected channels of a log with their message counts, and the
    channel of the logged strings (None when there are none or they are not selected).
    (The values the reader keeps from open are plain classes, not NamedTuples: each
    NamedTuple costs ~0.1 ms of import time, paid by every process that opens a ULog.)"""

    __slots__ = ("schemas", "channels", "counts", "log_channel")

    def __init__(
        self, schemas: dict[int, Schema], channels: dict[int, Channel], counts: dict[int, int], log_channel: Channel | None
    ) -> None:
        self.schemas = schemas
        self.channels = channels
        self.counts = counts
        self.log_channel = log_channel


def build_channels(
    subs: list[SubscriptionEntry], ulog: UlogData, logged: list[LoggedEntry], topics: TopicSelector
) -> ChannelsAtOpen:
    """A schema per message name, a channel per subscription (set on each) and one for the
    logged strings; which of them ``topics`` selects (``selected`` set on each)."""
    schemas: dict[str, Schema] = {}
    channels: dict[int, Channel] = {}
    counts: dict[int, int] = {}
    for s in subs:
        assert s.type is not None
        sch = schemas.get(s.sub.name)
        if sch is None:
            sch = schemas[s.sub.name] = Schema(
                len(schemas) + 1, s.sub.name, "ulog", schema_text(s.sub.name, ulog.formats)
            )
        s.channel = Channel(
            s.index,
            s.sub.name,
            "ulog",
            sch,
            {"multi_id": str(s.sub.multi_id), "msg_id": str(s.sub.msg_id)},
        )
    selected = topic_filter(topics, [s.channel for s in subs if s.channel is not None])
    for s in subs:
        assert s.channel is not None
        s.selected = selected is None or s.channel.id in selected
        if s.selected:
            channels[s.channel.id] = s.channel
            counts[s.channel.id] = s.count
    log_channel: Channel | None = None
    if logged:
        lsch = Schema(len(schemas) + 1, LOGGED_STRING_SCHEMA, "ulog", LOGGED_STRING_TEXT)
        ch = Channel(len(subs), LOG_TOPIC, "ulog", lsch, {})
        sel = topic_filter(topics, [ch])
        if sel is None or ch.id in sel:
            log_channel = ch
            channels[ch.id] = ch
            counts[ch.id] = len(logged)
    all_schemas = {sc.id: sc for sc in schemas.values()}
    if log_channel is not None and log_channel.schema is not None:
        all_schemas[log_channel.schema.id] = log_channel.schema
    return ChannelsAtOpen(all_schemas, channels, counts, log_channel)


class UlogReader(Reader):
    """A ULog file read through its mapped bytes (see the module docstring)."""

    format = "ulog"
    #: ULog channels become ROS 1 in other formats (an MCAP written from a ULog gets the
    #: ``ros1`` profile)
    native_profile = "ros1"
    #: ``polybag info`` lays a ULog out as pyulog's ``ulog_info`` does: :mod:`polybag.cli.render`
    info_style = "ulog"

    @property
    def ulogs(self) -> tuple[UlogData]:
        """This log's data as the one item (:attr:`polybag.reader.Reader.ulogs`)."""
        return (self.ulog,)

    def __init__(self, source: Source, path: str | None = None, *, recover: bool = False, topics: TopicSelector = None, warn: bool = True) -> None:
        if isinstance(source, StreamSource):
            source = source.spool()  # bounded memory: a long stream goes to a temporary file
        super().__init__(source, path)
        assert isinstance(self.source, MappedSource)
        self.recover = recover
        self.ulog: UlogData = UlogData()
        self._topics = topics
        self._summary: Summary | None = None
        # the mapped bytes (pages given back to the OS as they are read, unless topics are
        # selected up front: their data is read again right after the scan)
        self._log = MappedLog(self.source, self.source.view, self.source.size, release_pages=topics is None)
        _hint_heap(self._log.size)
        index = read_index(self._log, self.ulog, DamageLog(self.ulog, self.path, warn), scan_tuning)
        self._scanner = index.scanner
        self._subs = index.subscriptions.entries
        self._logged = index.logged
        self._first_damage = index.first_damage  # (offset, message, truncated)
        # set at open (damage is all found then); "messages": what the last read gave so far
        self.recovery_report: RecoveryReport = index.recovery_report
        self._data = TopicData(self._log, self._subs, self.ulog, index.logged, index.timed, index.data_start)
        self._data.group_positions(index.positions, index.subscription_indexes, topics)
        for _pos, level, ts, tag, text in index.logged:
            self.ulog.logged_messages.append(rec.LoggedMessage(ts, level, rec.parse_string(text), tag))
        self.ulog.defer_timed_facts(self._data.resolve_times)
        self._channels_built = build_channels(self._subs, self.ulog, index.logged, topics)

    def _make_summary(self) -> Summary:
        """The summary: the selected channels, their counts, the time span and the info
        extras."""
        built = self._channels_built
        data = self._data
        data.group_all()
        data.times_many([s for s in self._subs if s.selected])
        times = []
        for s in self._subs:
            if s.selected and s.positions is not None and len(s.positions):
                ts = data.sub_times(s)
                times.extend([int(ts.min()), int(ts.max())])
        if built.log_channel is not None:
            times.extend(min(e[2], MAX_US) for e in self._logged)
        info = self.ulog.info
        summary = Summary(
            format="ulog",
            profile="px4" if info.get("sys_name") == "PX4" else "",
            library=" ".join(str(info[k]) for k in ("sys_name", "ver_sw") if isinstance(info.get(k), str)),
            version=str(self.ulog.version),
            schemas=built.schemas,
            channels=built.channels,
            message_counts=built.counts,
            start_time=min(times) * 1000 if times else None,
            end_time=max(times) * 1000 if times else None,
            file_size=self._log.size,
            indexed=False,
            extras={},
        )
        summary.extras = self.info_extras()
        return summary

    # --- Reader interface -----------------------------------------------------------------
    def channels(self) -> dict[int, Channel]:
        """The selected channels by id, known at open (the same as ``summary.channels``
        without making the summary, whose time span reads every message's timestamp)."""
        return self._channels_built.channels

    @property
    def summary(self) -> Summary:
        """The summary of the log (made on first use: the time span needs the timestamps)."""
        if self._summary is None:
            self._summary = self._make_summary()
        return self._summary

    def info_extras(self) -> dict[str, Any]:
        """The ULog facts of ``polybag info`` (the summary's ``extras``)."""
        self._data.ensure_counts()
        return info_extras(self.ulog, self._subs)

    def _messages(self, topics: TopicSelector, start: int | None, end: int | None, reverse: bool, order: str) -> Iterator[Message]:
        """:meth:`~polybag.reader.Reader.messages`: the messages of the selected channels in
        log time (or file) order, the logged strings among them; raises at the first damage
        without ``recover=True``."""
        chans = self._channels_built.channels
        data = self._data
        data.group_all()
        wanted = topic_filter(topics, chans.values())
        sel = [s for s in self._subs if s.selected and (wanted is None or s.index in wanted)]
        data.times_many(sel)
        pos_parts = []
        cid_parts = []
        t_parts = []
        for s in sel:
            if s.positions is None or len(s.positions) == 0:
                continue
            pos_parts.append(s.positions)
            cid_parts.append(np.full(len(s.positions), s.index, dtype=np.int64))
            t_parts.append(data.sub_times(s) * 1000)
        log_ch = self._channels_built.log_channel
        logged = self._logged
        if log_ch is not None and (wanted is None or log_ch.id in wanted) and logged:
            pos_parts.append(np.array([e[0] for e in logged], dtype=np.int64))
            cid_parts.append(np.full(len(logged), -1, dtype=np.int64))
            t_parts.append(np.array([min(e[2], MAX_US) for e in logged], dtype=np.int64) * 1000)
        damage = None if self.recover else self._first_damage
        if not pos_parts:
            if damage is not None:
                raise damage.error(self.path)
            return
        pos = np.concatenate(pos_parts)
        cid = np.concatenate(cid_parts)
        tns = np.concatenate(t_parts)
        keep = np.ones(len(pos), dtype=bool)
        if damage is not None:
            keep &= pos < damage.offset
        if start is not None:
            keep &= tns >= start
        if end is not None:
            keep &= tns < end
        pos, cid, tns = pos[keep], cid[keep], tns[keep]
        idx = np.argsort(pos, kind="stable") if order == "file" else np.lexsort((pos, tns))
        if reverse:
            idx = idx[::-1]
        yield from self._emit(pos[idx], cid[idx], tns[idx])
        if damage is not None:
            raise damage.error(self.path)

    def _emit(self, pos: np.ndarray, cid: np.ndarray, tns: np.ndarray) -> Iterator[Message]:
        """The messages at ``pos`` (channel index, -1: logged string; log time in ns)."""
        view = self._log.view
        chans: dict[int, Channel] = {s.index: s.channel for s in self._subs if s.channel is not None}
        log_ch = self._channels_built.log_channel
        log_by_pos = {e[0]: e for e in self._logged} if log_ch is not None else {}
        # payload ends and per-channel sequence numbers (in file order) in bulk
        ends = (pos + 3 + self._data.gather_sparse(pos, np.dtype("<u2"))).tolist() if len(pos) else []
        forder = np.lexsort((pos, cid))
        seqs = np.empty(len(pos), dtype=np.int64)
        if len(pos):
            scid = cid[forder]
            starts = np.flatnonzero(np.concatenate([[True], scid[1:] != scid[:-1]]))
            run = np.arange(len(pos)) - np.repeat(starts, np.diff(np.concatenate([starts, [len(pos)]])))
            seqs[forder] = run
        report = self.recovery_report
        count = 0
        for q, c, t, e_, sq in zip(pos.tolist(), cid.tolist(), tns.tolist(), ends, seqs.tolist()):
            count += 1
            report["messages"] = count
            if c < 0:
                assert log_ch is not None
                e = log_by_pos[q]
                data: bytes | memoryview = logged_string_payload(e[1], e[3], e[2], e[4])
                yield Message(log_ch, t, t, sq, data)
            else:
                yield Message(chans[c], t, t, sq, view[q + 5 : e_])

    # --- columns (ULog topics are addressed by name and multi_id) ---------------------------
    def records(self, name: str, multi_id: int | str = 0) -> np.ndarray:
        """All data of one subscription as a numpy structured array (pyulog's flat fields);
        ``multi_id`` as an int or its decimal string."""
        return self._data.records(name, multi_id)

    def all_records(self) -> dict[tuple[str, int], np.ndarray]:
        """Every selected subscription's data as structured arrays, keyed ``(name, multi_id)``,
        gathered in one pass over the file in order (the full parse ``pyulog.ULog`` does)."""
        return self._data.all_records()

    def all_topic_columns(self, *, padding: bool = False) -> dict[tuple[str, int], dict[str, np.ndarray]]:
        """Columns of every selected topic instance (see :meth:`topic_columns`), built in
        one ordered pass: ``{(name, multi_id): {"timestamp": ..., "accel[0]": ...}}``."""
        return self._data.all_topic_columns(padding=padding)

    # ULog topics are instances: a multi_id comes before the fields (a sequence in its
    # place is taken as the fields, so every call of the base signature works)
    def topic_columns(  # type: ignore[override]
        self,
        topic: str,
        multi_id: int | str | Sequence[str] | None = 0,
        fields: Sequence[str] | None = None,
        *,
        time: str | None = None,
        keep_times: bool = False,
        arrays: str = "columns",
        padding: bool = False,
        log_time: bool = False,
    ) -> dict[str, np.ndarray]:
        """One numpy array per flattened field (``timestamp``, ``accel[0]``, ``nested.x``),
        keyed exactly like pyulog's ``data`` dict.  ``_padding`` fields are left out unless
        ``padding=True``; ``log_time=True`` adds the log time in ns (``timestamp * 1000``).

        ``time`` puts a time column first, as every format's ``topic_columns`` does:
        ``"log_time"`` or ``"publish_time"`` (the same here: the log time in ns),
        ``"timestamp"`` (pyulog's field, microseconds as stored, moved first); a ULog type
        has no ``header.stamp`` (a UsageError).  Then ``timestamp`` stays a field where it
        is not the chosen time, and ``keep_times=True`` adds ``log_time`` after a chosen
        ``publish_time`` or ``timestamp``.  ``arrays="lists"``: each fixed array as one 2-D
        column.  ``time=None`` (the default) gives pyulog's keys alone.

        ``multi_id`` is the instance as an int or as the string found in
        ``channel.metadata["multi_id"]`` (``1`` and ``"1"`` are the same instance); a
        sequence of names in its place is taken as ``fields``."""
        from polybag.codecs.columns_export import check_arrays, check_time, lists_of_arrays

        if isinstance(multi_id, (list, tuple)):
            fields, multi_id = multi_id, 0
        check_arrays(arrays)
        mid = multi_id_of(multi_id)
        if time is None:
            cols = self._data.topic_columns(topic, mid, fields, padding=padding, log_time=log_time)
            return lists_of_arrays(cols) if arrays == "lists" else cols
        check_time(time)
        if time == "header.stamp":
            from polybag.errors import UsageError

            raise UsageError(
                f"time='header.stamp': topic {topic} (a ULog topic) has no std_msgs/Header field 'header'; "
                "its times: log_time, publish_time, timestamp"
            )
        want = list(fields) if fields is not None else None
        if want is not None and time == "timestamp" and "timestamp" not in want:
            want.append("timestamp")
        cols = self._data.topic_columns(topic, mid, want, padding=padding, log_time=True)
        lt = cols.pop("log_time")
        out = {time: cols.pop("timestamp") if time == "timestamp" else lt}
        if keep_times and time != "log_time":
            out["log_time"] = lt
        out.update(cols)
        return lists_of_arrays(out) if arrays == "lists" else out

    # ULog topics are instances: a multi_id comes before the fields (a sequence in its
    # place is taken as the fields, so every call of the base signature works)
    def to_pandas(  # type: ignore[override]
        self,
        topic: str | Sequence[str | tuple[str, int | str]],
        multi_id: int | str | Sequence[str] | None = 0,
        fields: Sequence[str] | None = None,
        *,
        time: str = "log_time",
        keep_times: bool = False,
        datetimes: bool = False,
        arrays: str = "columns",
        **align: Any,
    ) -> Any:
        """A ``pandas.DataFrame`` of one subscription indexed by the chosen time (see
        :meth:`topic_columns`; by default ``log_time``, int64 ns, ``timestamp * 1000``), like
        every other format's ``to_pandas``.  ``datetimes=True``: the index is
        ``datetime64[ns, UTC]``, the integers kept as ``<time>_ns`` (``timestamp_us`` for
        ``timestamp``, microseconds).  Several topics (a list of names or ``(name,
        multi_id)`` pairs) are one frame on one time axis (:meth:`polybag.reader.Reader.to_pandas`;
        ``fields`` then by keyword)."""
        if not isinstance(topic, str):
            return Reader.to_pandas(self, topic, fields, time=time, keep_times=keep_times, datetimes=datetimes, arrays=arrays, **align)
        if align:
            Reader.to_pandas(self, topic, **align)  # the UsageError of options for several topics
        from polybag.codecs.columns_export import columns_to_pandas

        cols = self.topic_columns(topic, multi_id, fields, time=time, keep_times=keep_times, arrays=arrays)
        return columns_to_pandas(cols, time=time, datetimes=datetimes, time_unit="us" if time == "timestamp" else "ns")

    # ULog topics are instances: a multi_id comes before the fields (a sequence in its
    # place is taken as the fields, so every call of the base signature works)
    def to_arrow(  # type: ignore[override]
        self,
        topic: str | Sequence[str | tuple[str, int | str]],
        multi_id: int | str | Sequence[str] | None = 0,
        fields: Sequence[str] | None = None,
        *,
        time: str = "log_time",
        keep_times: bool = False,
        datetimes: bool = False,
        arrays: str = "columns",
        **align: Any,
    ) -> Any:
        """A ``pyarrow.Table`` of one subscription, the chosen time first (see
        :meth:`topic_columns`; by default ``log_time``, int64 ns), like every other format's
        ``to_arrow``; ``datetimes=True`` adds ``<time>_utc`` (``timestamp[ns, UTC]``) after it.
        Several topics (a list) are one table on one time axis, as :meth:`to_pandas` says."""
        if not isinstance(topic, str):
            return Reader.to_arrow(self, topic, fields, time=time, keep_times=keep_times, datetimes=datetimes, arrays=arrays, **align)
        if align:
            Reader.to_arrow(self, topic, **align)  # the UsageError of options for several topics
        from polybag.codecs.columns_export import columns_to_arrow

        cols = self.topic_columns(topic, multi_id, fields, time=time, keep_times=keep_times, arrays=arrays)
        return columns_to_arrow(cols, time=time if datetimes else None, time_unit="us" if time == "timestamp" else "ns", topic=topic)

    def close(self) -> None:
        """Drop the views of the file and the gathered records, then close the source."""
        self._log.u8 = np.zeros(0, np.uint8)
        for s in self._subs:
            s.records = None
        super().close()


def open_ulog(source: Source, path: str | None = None, *, recover: bool = False, topics: TopicSelector = None, **opts: Any) -> UlogReader:
    """Opener registered in :data:`polybag.formats.sniff.READERS`."""
    from polybag.io.compression import max_chunk_bytes

    # ULog has no compression: the chunk cap is accepted (checked) and has nothing to bound
    max_chunk_bytes(opts.pop("max_chunk_bytes", None))
    unknown = set(opts) - {"warn"}
    if unknown:
        raise TypeError(f"unknown ULog reader options: {', '.join(sorted(unknown))}")
    return UlogReader(source, path, recover=recover, topics=topics, **opts)
