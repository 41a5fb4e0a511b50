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

Where things are: :class:`UlogReader` (here) is made of parts, one module each, that work
on its state: :mod:`~polybag.formats.ulog.definitions` (the definitions section, control
messages, :class:`UlogData`), :mod:`~polybag.formats.ulog.scan` (message boundaries in the
data section: candidates, walk, resync), :mod:`~polybag.formats.ulog.batches` (each batch of
walked messages checked and sorted), :mod:`~polybag.formats.ulog.data` (positions,
timestamps, records, columns), :mod:`~polybag.formats.ulog.damage` (damage reports) and
:mod:`~polybag.formats.ulog.info` (info extras and text).  This module keeps the opener,
the step sizes of the scan (tests change them here) and the names other modules import.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from polybag.codecs.ulog import (
    LOGGED_STRING_SCHEMA,
    LOGGED_STRING_TEXT,
    UlogType,
    logged_string_payload,
    schema_text,
)
from polybag.errors import FormatError, TruncatedError
from polybag.formats.shared.recovery import Recovery
from polybag.formats.ulog import records as rec
from polybag.formats.ulog.batches import _Batches
from polybag.formats.ulog.damage import _MAX_REPORTS as _MAX_REPORTS
from polybag.formats.ulog.damage import _Damage
from polybag.formats.ulog.data import _GATHER_SPAN as _GATHER_SPAN
from polybag.formats.ulog.data import _MAX_US, LOG_TOPIC, _Data
from polybag.formats.ulog.data import TopicNotFoundError as TopicNotFoundError
from polybag.formats.ulog.data import _count_subs as _count_subs
from polybag.formats.ulog.data import _gather as _gather
from polybag.formats.ulog.data import _multi_id as _multi_id
from polybag.formats.ulog.definitions import UlogData, _Definitions, _Sub
from polybag.formats.ulog.definitions import _DeadSub as _DeadSub
from polybag.formats.ulog.info import _Info
from polybag.formats.ulog.scan import _LETTER as _LETTER
from polybag.formats.ulog.scan import _LOW16 as _LOW16
from polybag.formats.ulog.scan import _MAX_UNKNOWN as _MAX_UNKNOWN
from polybag.formats.ulog.scan import _MIN_BODY as _MIN_BODY
from polybag.formats.ulog.scan import _MIN_TABLE as _MIN_TABLE
from polybag.formats.ulog.scan import _RESYNC_WINDOW as _RESYNC_WINDOW
from polybag.formats.ulog.scan import _SHIFT24 as _SHIFT24
from polybag.formats.ulog.scan import ScanTuning, _Scan
from polybag.formats.ulog.scan import _run_ends as _run_ends
from polybag.formats.ulog.scan import _unsound as _unsound
from polybag.io.source import MappedSource, Source, StreamSource
from polybag.model import Channel, Message, Schema, Summary
from polybag.reader import Reader, TopicSelector, topic_filter
from polybag.util import threads as _threads

# The step sizes of the scan, read at each use through UlogReader._tuning (tests set them here).
_WALK_LIMIT = 1 << 16  # messages handled at once (bounds the index arrays)
_LINK_LOOKAHEAD = 6  # a candidate is kept when its end is one of the next this many
_SCAN_CHUNK = 1 << 20  # bytes compared for the D type byte at once (cache-sized)
_SCAN_PART = 8  # chunks at least per scanning thread


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


class UlogReader(_Info, _Data, _Batches, _Scan, _Definitions, _Damage, Reader):
    """A ULog file read through its mapped bytes (see the module docstring)."""

    format = "ulog"

    def __init__(self, source: Source, path: str | None = None, *, recover: bool = False, topics: TopicSelector = None, warn: bool = True) -> None:
        if isinstance(source, StreamSource):
            source = source.spool()  # bounded memory: a long stream goes to a temporary file
        super().__init__(source, path)
        assert isinstance(self.source, MappedSource)
        self.recover = recover
        self._warn = warn
        self.ulog = UlogData()
        self._recovery = Recovery()  # its errors: made from _errors at the end of the scan
        # set at open (damage is all found then); "messages": what the last read gave so far
        self.recovery_report: dict[str, Any] = self._recovery.report(0)
        self._view = self.source.view
        self._size = self.source.size
        self._u8 = np.frombuffer(self._view, dtype=np.uint8) if self._size else np.zeros(0, np.uint8)
        self._subs: list[_Sub] = []
        self._by_msg_id: dict[int, _Sub] = {}
        self._types: dict[str, UlogType | None] = {}
        self._type_errors: dict[str, str] = {}  # why a format did not compile
        self._dead: dict[int, int] = {}  # msg_id -> index in _dead_subs (format unusable)
        self._dead_subs: list[_DeadSub] = []
        # (offset, text) of each damage line of recovery_report["errors"] (sorted at the end)
        self._errors: list[tuple[int, str]] = []
        # dropped data messages of one kind: key -> [index in _errors, first text, count, bytes]
        self._drop_groups: dict[tuple[int, int], list[Any]] = {}
        self._damage: tuple[int, str, bool] | None = None  # (offset, message, truncated)
        # (file offset, level, timestamp us, tag, text) of each logged string
        self._log_entries: list[tuple[int, int, int, int | None, bytes]] = []
        self._topics = topics
        self._summary: Summary | None = None
        self._d_pos_chunks: list[np.ndarray] = []
        self._d_sub_chunks: list[np.ndarray] = []
        self._pending_ts: list[tuple[str, int, Any]] = []  # ("P"/"O"/"S", file offset, payload)
        self._pending_damage: list[tuple[int, str]] = []
        self._times_done = False
        self._u16 = (
            np.ndarray(buffer=self._view, dtype="<u2", shape=(self._size - 1,), strides=(1,))
            if self._size > 1
            else np.zeros(0, np.uint16)
        )
        self._cands: tuple[list[int], list[tuple[np.ndarray, ...]]] | None = None
        self._u64: np.ndarray | None = None
        # msg_id lookup tables of the data check, kept while the subscriptions stay the same
        self._tables: tuple[Any, ...] | None = None
        self._d_chunks: tuple[list[np.ndarray], list[np.ndarray]] | None = None
        self._counts_pending = False
        self._grouping_pending = False  # offsets of every subscription left in _d_chunks
        self._masked = False  # a topic's offsets were pulled out of _d_chunks by a mask
        self._by_key: dict[tuple[str, int], list[_Sub]] | None = None
        _hint_heap(self._size)
        self._scan()

    def _tuning(self) -> ScanTuning:
        """The step sizes of the scan, read from this module now (tests change them)."""
        return ScanTuning(_SCAN_CHUNK, _LINK_LOOKAHEAD, _WALK_LIMIT, _scan_workers, _part_capacity)

    # --- open: header, definitions, data section ------------------------------------------
    def _scan(self) -> None:
        """Read the log at open: file header, definitions section, data section (one
        segment per appended part), then settle what needs all of it."""
        view, size = self._view, self._size
        if size < rec.HEADER.size:
            raise TruncatedError(f"expected a 16-byte ULog header, file has {size} bytes", self.path, 0)
        if bytes(view[:7]) != rec.MAGIC:
            raise FormatError(f"expected ULog magic {rec.MAGIC!r}, found {bytes(view[:7])!r}", self.path, 0)
        hdr = rec.FileHeader.unpack(view)
        self.ulog.version = hdr.version
        self.ulog.start_timestamp = hdr.timestamp
        if hdr.version > 1:
            self._note(f"unknown ULog version {hdr.version}; reading it anyway")
        pos = self._read_definitions(rec.HEADER.size)
        self._data_start = pos
        segments = self._segments(pos)
        for seg_start, seg_end, last in segments:
            self._read_data(seg_start, seg_end, last)
        self._cands = None
        self._finish()

    def _segments(self, pos: int) -> list[tuple[int, int, bool]]:
        """The parts of the data section from ``pos``: ``(start, end, last)``, split at the
        appended offsets of the flag bits."""
        ends: list[int] = []
        if self.ulog.has_data_appended:
            prev = pos
            for off in self.ulog.appended_offsets:
                if off < prev or off > self._size:
                    # e.g. a log cut before its appended part: the data itself is fine
                    self._note(
                        f"appended offset {off} is outside the data section ({prev}..{self._size}); ignored"
                    )
                    continue
                ends.append(off)
                prev = off
        out = []
        start = pos
        for e in ends:
            out.append((start, e, False))
            start = e
        out.append((start, self._size, True))
        return out

    def _finish(self) -> None:
        """The end of the scan: the damage reports settled, data offsets grouped by
        subscription, the logged strings and the channels made."""
        self._report_damage()
        self._group_positions()
        u = self.ulog
        for _pos, level, ts, tag, text in self._log_entries:
            u.logged_messages.append(rec.LoggedMessage(ts, level, rec.parse_string(text), tag))
        u._resolve = self._resolve_times
        self._build_channels()

    def _build_channels(self) -> None:
        """A schema per message name, a channel per subscription and one for the logged
        strings; which of them the ``topics`` given at open select."""
        schemas: dict[str, Schema] = {}
        channels: dict[int, Channel] = {}
        counts: dict[int, int] = {}
        for s in self._subs:
            assert s.type is not None
            sch = schemas.get(s.sub.name)
            if sch is None:
                sch = schemas[s.sub.name] = Schema(
                    len(schemas) + 1, s.sub.name, "ulog", schema_text(s.sub.name, self.ulog.formats)
                )
            s.channel = Channel(
                s.index,
                s.sub.name,
                "ulog",
                sch,
                {"multi_id": str(s.sub.multi_id), "msg_id": str(s.sub.msg_id)},
            )
        selected = topic_filter(self._topics, [s.channel for s in self._subs if s.channel is not None])
        for s in self._subs:
            assert s.channel is not None
            s.selected = selected is None or s.channel.id in selected
            if s.selected:
                channels[s.channel.id] = s.channel
                counts[s.channel.id] = s.count
        self._log_channel: Channel | None = None
        if self._log_entries:
            lsch = Schema(len(schemas) + 1, LOGGED_STRING_SCHEMA, "ulog", LOGGED_STRING_TEXT)
            ch = Channel(len(self._subs), LOG_TOPIC, "ulog", lsch, {})
            sel = topic_filter(self._topics, [ch])
            if sel is None or ch.id in sel:
                self._log_channel = ch
                channels[ch.id] = ch
                counts[ch.id] = len(self._log_entries)
        all_schemas = {sc.id: sc for sc in schemas.values()}
        if self._log_channel is not None and self._log_channel.schema is not None:
            all_schemas[self._log_channel.schema.id] = self._log_channel.schema
        self._channels_built = (all_schemas, channels, counts)

    def _make_summary(self) -> Summary:
        """The summary: the selected channels, their counts, the time span and the info
        extras."""
        all_schemas, channels, counts = self._channels_built
        self._group_all()
        self._times_many([s for s in self._subs if s.selected])
        times = []
        for s in self._subs:
            if s.selected and s.positions is not None and len(s.positions):
                ts = self._sub_times(s)
                times.extend([int(ts.min()), int(ts.max())])
        if self._log_channel is not None:
            times.extend(min(e[2], _MAX_US) for e in self._log_entries)
        info = self.ulog.info
        summary = Summary(
            format="ulog",
            profile="px4" if info.get("sys_name") == "PX4" else "",
            library=" ".join(str(info[k]) for k in ("sys_name", "ver_sw") if isinstance(info.get(k), str)),
            version=str(self.ulog.version),
            schemas=all_schemas,
            channels=channels,
            message_counts=counts,
            start_time=min(times) * 1000 if times else None,
            end_time=max(times) * 1000 if times else None,
            file_size=self._size,
            indexed=False,
            extras={},
        )
        summary.extras = self.info_extras()
        return summary

    # --- Reader interface -----------------------------------------------------------------
    def channels(self) -> dict[int, Channel]:
        """The selected channels by id, known at open (the same as ``summary.channels``
        without making the summary, whose time span reads every message's timestamp)."""
        return self._channels_built[1]

    @property
    def summary(self) -> Summary:
        """The summary of the log (made on first use: the time span needs the timestamps)."""
        if self._summary is None:
            self._summary = self._make_summary()
        return self._summary

    def _messages(self, topics: TopicSelector, start: int | None, end: int | None, reverse: bool, order: str) -> Iterator[Message]:
        """:meth:`~polybag.reader.Reader.messages`: the messages of the selected channels in
        log time (or file) order, the logged strings among them; raises at the first damage
        without ``recover=True``."""
        chans = self._channels_built[1]
        self._group_all()
        wanted = topic_filter(topics, chans.values())
        sel = [s for s in self._subs if s.selected and (wanted is None or s.index in wanted)]
        self._times_many(sel)
        pos_parts = []
        cid_parts = []
        t_parts = []
        for s in sel:
            if s.positions is None or len(s.positions) == 0:
                continue
            pos_parts.append(s.positions)
            cid_parts.append(np.full(len(s.positions), s.index, dtype=np.int64))
            t_parts.append(self._sub_times(s) * 1000)
        log_ch = self._log_channel
        if log_ch is not None and (wanted is None or log_ch.id in wanted) and self._log_entries:
            pos_parts.append(np.array([e[0] for e in self._log_entries], dtype=np.int64))
            cid_parts.append(np.full(len(self._log_entries), -1, dtype=np.int64))
            t_parts.append(np.array([min(e[2], _MAX_US) for e in self._log_entries], dtype=np.int64) * 1000)
        damage = None if self.recover else self._damage
        if not pos_parts:
            if damage is not None:
                self._raise_damage()
            return
        pos = np.concatenate(pos_parts)
        cid = np.concatenate(cid_parts)
        tns = np.concatenate(t_parts)
        keep = np.ones(len(pos), dtype=bool)
        if damage is not None:
            keep &= pos < damage[0]
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
            self._raise_damage()

    def _emit(self, pos: np.ndarray, cid: np.ndarray, tns: np.ndarray) -> Iterator[Message]:
        """The messages at ``pos`` (channel index, -1: logged string; log time in ns)."""
        view = self._view
        chans: dict[int, Channel] = {s.index: s.channel for s in self._subs if s.channel is not None}
        log_ch = self._log_channel
        log_by_pos = {e[0]: e for e in self._log_entries} if log_ch is not None else {}
        # payload ends and per-channel sequence numbers (in file order) in bulk
        ends = (pos + 3 + self._gather_sparse(pos, np.dtype("<u2"))).tolist() if len(pos) else []
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

    def close(self) -> None:
        """Drop the views of the file and the gathered records, then close the source."""
        self._u8 = np.zeros(0, np.uint8)
        for s in self._subs:
            s._records = None
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
