"""Data messages of a ULog after the scan: positions, timestamps, records and columns.

The scan leaves, per subscription, the file offsets of its data messages
(:meth:`TopicData.group_positions`).  A topic's records are then one fancy-indexing gather
of its payloads into a numpy structured array (:func:`gather`, no Python object per
message), its columns are views of the fields of that array (named like pyulog's ``data``
dict), and its timestamps are gathered the same way and unwrapped (``uint8`` timestamps are
milliseconds).  The facts that need every timestamp (last timestamp, when parameters
changed, dropouts, syncs) are worked out on first use (:meth:`TopicData.resolve_times`).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from polybag.codecs.ulog import BASE_TYPES
from polybag.errors import PolybagError
from polybag.formats.ulog import records as rec
from polybag.formats.ulog.definitions import LoggedEntry, TimedEntry
from polybag.formats.ulog.facts import UlogData
from polybag.formats.ulog.scan import MappedLog
from polybag.formats.ulog.subscriptions import SubscriptionEntry
from polybag.model import Channel
from polybag.selection import TopicSelector, topic_filter

LOG_TOPIC = "log_message"

MAX_US = (2**63 - 1) // 1000  # larger (damaged) timestamps are clamped for log times
GATHER_SPAN = 16 << 20  # file bytes between releases of mapped pages in a sparse gather


class TopicNotFoundError(PolybagError, KeyError):
    """No such topic (or instance, or field) in the log."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def gather(buf: Any, size: int, starts: np.ndarray, dtype: np.dtype, offset: int = 0) -> np.ndarray:
    """One ``dtype`` item at each byte offset ``offset + starts`` (any alignment), in one
    fancy index.

    The file is viewed as overlapping items (stride 1 byte) from ``offset`` on, so numpy
    copies each record with a single indexing operation, no index array per byte and no
    ``starts + offset`` array (a message's payload: its offset, ``offset=5``)."""
    width = dtype.itemsize
    if len(starts) == 0 or width == 0 or size - offset < width:
        return np.zeros(len(starts), dtype=dtype)
    items = np.ndarray(buffer=buf, dtype=dtype, shape=(size - offset - width + 1,), offset=offset, strides=(1,))
    gathered: np.ndarray = items[starts]
    return gathered


def multi_id_of(value: object) -> int:
    """A multi_id given as an int or as its decimal string (channel metadata holds strings)."""
    if value is None:
        return 0
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    raise TopicNotFoundError(f"multi_id must be an int or a decimal string, not {value!r}")


def count_subscriptions(sub_chunks: list[np.ndarray], n: int) -> np.ndarray:
    """Data messages per subscription index in chunks of subscription indexes (-1: the
    offset of a control message, kept by the fast path)."""
    counts = np.zeros(n, np.int64)
    for sc in sub_chunks:
        counts += np.bincount(np.maximum(sc, -1) + 1, minlength=n + 1)[1 : n + 1]  # < -1: dropped too
    return counts


def unwrap_timestamps(raw: np.ndarray, width: int) -> np.ndarray:
    """Timestamps in us (int64) from their raw field of ``width`` bytes: 64-bit ones
    clamped so that log times fit int64 ns, narrower ones unwrapped where they run
    backwards (``uint8`` timestamps are milliseconds)."""
    us: np.ndarray
    if width == 8:
        us = np.minimum(raw, np.uint64(MAX_US)).astype(np.int64)
        return us
    iv = raw.astype(np.int64)
    wraps = np.concatenate([[0], np.cumsum(np.diff(iv) < 0)])
    us = (iv + wraps * (1 << (8 * width))) * (1000 if width == 1 else 1)
    return us


class TopicData:
    """Positions, timestamps, records and columns of the data messages of a log's
    subscriptions (``subs``), read from ``log``; ``logged``: the logged strings,
    ``timed``: the control messages whose time is the largest data timestamp before them,
    ``ulog``: where the facts worked out from every timestamp go (held by a weak reference:
    ``ulog`` keeps :meth:`resolve_times`, and the two holding each other would be a reference
    cycle that keeps the reader's data alive after its last use; whoever reaches this object
    reaches ``ulog`` too, through the reader or through ``ulog`` itself)."""

    def __init__(
        self,
        log: MappedLog,
        subs: list[SubscriptionEntry],
        ulog: UlogData,
        logged: list[LoggedEntry],
        timed: list[TimedEntry],
        data_start: int,
    ) -> None:
        self.log = log
        self.subs = subs
        self._ulog = weakref.ref(ulog)
        self.logged = logged
        self.timed = timed
        self.data_start = data_start
        self.times_done = False
        # the scan's chunks of (offsets, subscription indexes) not yet grouped
        self.chunks: tuple[list[np.ndarray], list[np.ndarray]] | None = None
        self.counts_pending = False
        self.grouping_pending = False  # offsets of every subscription left in chunks
        self.masked = False  # a topic's offsets were pulled out of chunks by a mask
        self.by_key: dict[tuple[str, int], list[SubscriptionEntry]] | None = None

    def group_positions(self, pos_chunks: list[np.ndarray], sub_chunks: list[np.ndarray], topics: TopicSelector) -> None:
        """The offsets of each subscription's data messages (``positions``, in file order)
        and their counts, from the scan's chunks of (offset, subscription index)."""
        subs = self.subs
        picked = topic_filter(topics, [Channel(s.index, s.sub.name, "ulog", None) for s in subs])
        if picked is not None and len(picked) <= 8:
            # a few topics selected up front: only their offsets are pulled out now (chunk
            # by chunk); the others' offsets, and their counts, wait in the chunks until
            # asked for (see ensure_counts)
            for s in subs:
                if s.index in picked:
                    found = [pc[sc == s.index] for pc, sc in zip(pos_chunks, sub_chunks)]
                    s.positions = np.concatenate(found) if found else np.zeros(0, np.int64)
                    s.count = len(s.positions)
            self.chunks = (pos_chunks, sub_chunks)
            self.counts_pending = True
        else:
            # every subscription's offsets on first need: one topic's by a mask per chunk
            # (subscription), all of them grouped at once when a read needs them all
            # (group_all); counting them is one bincount
            counts = count_subscriptions(sub_chunks, len(subs))
            for s in subs:
                s.count = int(counts[s.index])
            self.chunks = (pos_chunks, sub_chunks)
            self.grouping_pending = True

    def group_all(self) -> None:
        """The offsets of every subscription's data messages still left in the scan's chunks
        (a full read needs them all): one stable sort of the subscription indexes."""
        if not self.grouping_pending or self.chunks is None:
            return
        self.grouping_pending = False
        subs = self.subs
        pos_chunks, sub_chunks = self.chunks
        self.chunks = None
        counts = np.array([s.count for s in subs], dtype=np.int64)
        d_pos = np.concatenate(pos_chunks) if pos_chunks else np.zeros(0, np.int64)
        if len(subs) <= 128:
            # one byte per key: the radix sort takes one pass; the offsets of control
            # messages (-1) and dropped data (< -1) wrap to 128..255 and sort after every
            # subscription's
            key = np.concatenate([sc.astype(np.uint8) for sc in sub_chunks]) if sub_chunks else np.zeros(0, np.uint8)
        else:
            d_sub = np.concatenate(sub_chunks) if sub_chunks else np.zeros(0, np.int32)
            key = np.where(d_sub < 0, len(subs), d_sub).astype(np.int16 if len(subs) < (1 << 15) else np.int32)
        del pos_chunks, sub_chunks
        # group data messages by subscription (stable: file order within each; radix sort)
        order = np.argsort(key, kind="stable")
        del key
        bounds = np.concatenate([[0], np.cumsum(counts)]).tolist()
        grouped = d_pos[order[: bounds[-1]]]  # every subscription's offsets, one after the other
        del order, d_pos
        for s in subs:
            if s.positions is None:
                s.positions = grouped[bounds[s.index] : bounds[s.index + 1]]

    def ensure_counts(self) -> None:
        """The data message count of every subscription (those of topics not selected up
        front are counted on first need)."""
        if not self.counts_pending or self.chunks is None:
            return
        self.counts_pending = False
        counts = count_subscriptions(self.chunks[1], len(self.subs))
        for s in self.subs:
            if s.positions is None:
                s.count = int(counts[s.index])

    def subscription(self, name: str, multi_id: int = 0) -> SubscriptionEntry:
        """The subscription of a topic instance (the first with data when a name and
        multi_id are subscribed more than once), with its positions."""
        if self.by_key is None:
            self.by_key = {}
            for x in self.subs:
                self.by_key.setdefault((x.sub.name, x.sub.multi_id), []).append(x)
        found = self.by_key.get((name, multi_id), [])
        if not found:
            known = sorted({f"{s.sub.name}/{s.sub.multi_id}" for s in self.subs})
            raise TopicNotFoundError(
                f"no topic {name!r} with multi_id {multi_id} (topics: {', '.join(known)})"
            )
        self.ensure_counts()
        with_data = [s for s in found if s.count]
        s = (with_data or found)[0]
        if s.positions is None and self.grouping_pending and self.masked:
            # a second topic: every subscription's offsets in one sort (a mask per chunk for
            # each topic costs more from the third topic on)
            self.group_all()
        if s.positions is None and self.chunks is not None:  # not selected up front
            self.masked = True
            pos_chunks, sub_chunks = self.chunks
            parts = [pc[sc == s.index] for pc, sc in zip(pos_chunks, sub_chunks)]
            s.positions = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        return s

    def gather_sparse(self, starts: np.ndarray, dtype: np.dtype) -> np.ndarray:
        """:func:`gather` of a few bytes per message, with the mapped pages released every
        ``GATHER_SPAN`` bytes of file: the kernel maps the pages around each fault too, so
        a topic of big messages would otherwise leave the whole file resident."""
        if (
            len(starts) == 0
            or int(starts[-1]) - int(starts[0]) <= GATHER_SPAN
            or not bool(np.all(starts[1:] >= starts[:-1]))  # out of file order: one gather
        ):
            return gather(self.log.view, self.log.size, starts, dtype)
        out = np.empty(len(starts), dtype)
        i = 0
        while i < len(starts):
            j = int(np.searchsorted(starts, int(starts[i]) + GATHER_SPAN, side="right"))
            j = max(j, i + 1)
            out[i:j] = gather(self.log.view, self.log.size, starts[i:j], dtype)
            self.log.release(int(starts[i]), int(starts[j - 1]) + dtype.itemsize)
            i = j
        return out

    def sub_times(self, s: SubscriptionEntry) -> np.ndarray:
        """Timestamps (us, unwrapped) of one subscription's data messages."""
        if s.ts_us is not None:
            return s.ts_us
        t = s.type
        pos = s.positions if s.positions is not None else np.zeros(0, np.int64)
        assert t is not None
        if t.timestamp_offset < 0 or len(pos) == 0:
            s.ts_us = np.full(len(pos), -1, dtype=np.int64)  # filled in by resolve_times
            if len(pos) == 0:
                return s.ts_us
            self.resolve_times()
            assert s.ts_us is not None
            return s.ts_us
        width = BASE_TYPES[t.timestamp_type][1]
        raw = self.gather_sparse(pos + 5 + t.timestamp_offset, np.dtype(f"<u{width}"))
        s.ts_us = unwrap_timestamps(raw, width)
        return s.ts_us

    def times_many(self, subs: list[SubscriptionEntry]) -> None:
        """The timestamps of several subscriptions (:meth:`sub_times`) in one ordered pass
        over the file: each ``GATHER_SPAN`` window of it is read for every subscription,
        then released once.  (One pass per subscription faulted the whole file's pages in
        again for each: two thirds of the time of a summary of 23 topics.)"""
        todo = [
            s
            for s in subs
            if s.ts_us is None
            and s.type is not None
            and s.type.timestamp_offset >= 0
            and s.positions is not None
            and len(s.positions)
        ]
        if len(todo) < 2:
            return
        raws = []
        for s in todo:
            assert s.type is not None and s.positions is not None
            raws.append(np.empty(len(s.positions), np.dtype(f"<u{BASE_TYPES[s.type.timestamp_type][1]}")))
        lo = min(int(s.positions[0]) for s in todo if s.positions is not None)
        hi = max(int(s.positions[-1]) for s in todo if s.positions is not None) + 1
        for a in range(lo, hi, GATHER_SPAN):
            b = a + GATHER_SPAN
            for s, raw in zip(todo, raws):
                assert s.type is not None and s.positions is not None
                pos = s.positions
                i0, i1 = (int(x) for x in np.searchsorted(pos, [a, b]))
                if i1 > i0:
                    raw[i0:i1] = gather(self.log.view, self.log.size, pos[i0:i1], raw.dtype, 5 + s.type.timestamp_offset)
            self.log.release(a, b)
        for s, raw in zip(todo, raws):
            s.ts_us = unwrap_timestamps(raw, raw.dtype.itemsize)

    def resolve_times(self) -> None:
        """Fill the facts that need every data timestamp: the last timestamp, when parameter
        changes and dropouts happened (pyulog: the largest data timestamp before them), and
        times of subscriptions without a timestamp field."""
        u = self._ulog()
        assert u is not None  # (see the class)
        if self.times_done:
            return
        self.times_done = True
        self.group_all()
        start = u.start_timestamp
        timed = [s for s in self.subs if s.type is not None and s.type.timestamp_offset >= 0]
        self.times_many(timed)
        per = []
        for s in timed:
            ts = self.sub_times(s)
            if len(ts):
                assert s.positions is not None
                per.append((s.positions, np.maximum.accumulate(ts)))
        last = max([start] + [int(m[-1]) for _, m in per])

        def last_before(q: int) -> int:
            best = start
            for pos, runmax in per:
                i = int(np.searchsorted(pos, q))
                if i:
                    best = max(best, int(runmax[i - 1]))
            return best

        changed_params: list[tuple[int, str, int | float]] = []
        dropouts: list[rec.Dropout] = []
        syncs: list[int] = []
        u.set_timed_facts(last, changed_params, dropouts, syncs)
        for kind, q, payload in self.timed:
            if kind == "S":
                syncs.append(last_before(q))
            elif kind == "P":
                changed_params.append((last_before(q), payload[0], payload[1]))
            else:
                dropouts.append(rec.Dropout(last_before(q), payload))
        for s in self.subs:
            if s.type is not None and s.type.timestamp_offset < 0 and s.positions is not None:
                s.ts_us = np.array([last_before(int(q)) for q in s.positions], dtype=np.int64)

    def all_records(self) -> dict[tuple[str, int], np.ndarray]:
        """Every selected subscription's data as structured arrays, keyed ``(name, multi_id)``,
        gathered in one pass over the file in order (the full parse ``pyulog.ULog`` does)."""
        self.group_all()
        todo = [s for s in self.subs if s.selected and s.records is None and s.type is not None]
        outs: dict[int, np.ndarray] = {}
        raw: dict[int, np.ndarray] = {}
        for s in todo:
            assert s.type is not None
            n = 0 if s.positions is None else len(s.positions)
            outs[s.index] = np.empty(n, dtype=s.type.dtype)
            # filled through a plain bytes view: assigning one structured array to another
            # copies field by field (three times slower for a full parse)
            raw[s.index] = outs[s.index].view(np.dtype(f"V{s.type.dtype.itemsize}")) if s.type.dtype.itemsize else outs[s.index]
        step = 1 << 22
        for a in range(self.data_start, self.log.size, step):
            b = a + step
            for s in todo:
                pos = s.positions
                assert s.type is not None
                width = s.type.dtype.itemsize
                if pos is None or not len(pos) or width == 0:
                    continue
                i0, i1 = np.searchsorted(pos, [a, b])
                if i1 > i0:
                    raw[s.index][i0:i1] = gather(self.log.view, self.log.size, pos[i0:i1], np.dtype(f"V{width}"), 5)
            self.log.release(a, b)
        for s in todo:
            if s.type is not None and s.type.dtype.itemsize == 0:
                outs[s.index] = np.zeros(len(outs[s.index]), dtype=s.type.dtype)
            s.records = outs[s.index]
        out: dict[tuple[str, int], np.ndarray] = {}
        for s in self.subs:
            key = (s.sub.name, s.sub.multi_id)
            if s.selected and key not in out:
                out[key] = self.records(*key)
        return out

    def all_topic_columns(self, *, padding: bool = False) -> dict[tuple[str, int], dict[str, np.ndarray]]:
        """Columns of every selected topic instance (see :meth:`topic_columns`), built in
        one ordered pass: ``{(name, multi_id): {"timestamp": ..., "accel[0]": ...}}``."""
        self.all_records()
        out: dict[tuple[str, int], dict[str, np.ndarray]] = {}
        for s in self.subs:
            key = (s.sub.name, s.sub.multi_id)
            if s.selected and key not in out:
                out[key] = self.topic_columns(s.sub.name, s.sub.multi_id, padding=padding)
        return out

    def records(self, name: str, multi_id: int | str = 0) -> np.ndarray:
        """All data of one subscription as a numpy structured array (pyulog's flat fields);
        ``multi_id`` as an int or its decimal string."""
        s = self.subscription(name, multi_id_of(multi_id))
        if s.records is None:
            assert s.type is not None
            dt = s.type.dtype
            pos = s.positions if s.positions is not None else np.zeros(0, np.int64)
            if dt.itemsize == 0 or len(pos) == 0:
                s.records = np.zeros(len(pos), dtype=dt)
            else:
                s.records = gather(self.log.view, self.log.size, pos, np.dtype(f"V{dt.itemsize}"), 5).view(dt)
        return s.records

    def topic_columns(
        self, topic: str, mid: int, fields: Sequence[str] | None = None, *, padding: bool = False, log_time: bool = False
    ) -> dict[str, np.ndarray]:
        """The columns of :meth:`polybag.formats.ulog.reader.UlogReader.topic_columns` (see
        there) of the instance ``mid``."""
        if topic == LOG_TOPIC and not any(x.sub.name == LOG_TOPIC for x in self.subs):
            cols = self.log_columns()
            names = list(cols)
            if log_time:
                cols["log_time"] = np.minimum(cols["timestamp"], np.uint64(MAX_US)).astype(np.int64) * 1000
        else:
            arr = self.records(topic, mid)
            s = self.subscription(topic, mid)
            assert s.type is not None
            names = s.type.column_names(padding=padding)
            cols = {n: arr[n] for n in (arr.dtype.names or ())}
            if log_time:
                cols["log_time"] = self.sub_times(s) * 1000
        if fields is not None:
            # a field selects itself and, as a prefix, its elements (``accel`` -> ``accel[0]``)
            chosen: list[str] = []
            for f in fields:
                hit = [n for n in cols if n == f or n.startswith(f + "[") or n.startswith(f + ".")]
                if not hit:
                    raise TopicNotFoundError(f"topic {topic}: no field {f!r}")
                chosen.extend(h for h in hit if h not in chosen and h != "log_time")
            names = chosen
        if log_time:
            names.append("log_time")
        return {n: cols[n] for n in names}

    def log_columns(self) -> dict[str, np.ndarray]:
        """The logged strings as columns (the ``log_message`` channel)."""
        e = self.logged
        return {
            "timestamp": np.array([x[2] for x in e], dtype=np.uint64),
            "log_level": np.array([x[1] for x in e], dtype=np.uint8),
            "tag": np.array([-1 if x[3] is None else x[3] for x in e], dtype=np.int32),
            "message": np.array([rec.parse_string(x[4]) for x in e], dtype=object),
        }
