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
"""

from __future__ import annotations

import bisect
import mmap
import struct
import warnings
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from polybag import _threads
from polybag.codecs.ulog import (
    BASE_TYPES,
    LOGGED_STRING_SCHEMA,
    LOGGED_STRING_TEXT,
    MAX_PAYLOAD,
    FormatDef,
    UlogType,
    compile_type,
    logged_string_payload,
    parse_format,
    schema_text,
)
from polybag.errors import FormatError, PolybagError, PolybagWarning, TruncatedError, UnsupportedError
from polybag.formats.ulog import records as rec
from polybag.model import Channel, Message, Schema, Summary
from polybag.reader import Reader, TopicSelector, check_order, topic_filter
from polybag.source import MappedSource, Source, StreamSource

LOG_TOPIC = "log_message"

_MIN_BODY = {
    rec.FORMAT: 1,
    rec.INFO: 2,
    rec.INFO_MULTIPLE: 3,
    rec.PARAMETER: 2,
    rec.PARAMETER_DEFAULT: 3,
    rec.ADD_LOGGED: 4,
    rec.REMOVE_LOGGED: 2,
    rec.DATA: 2,
    rec.LOGGING: 9,
    rec.LOGGING_TAGGED: 11,
    rec.SYNC: 0,
    rec.DROPOUT: 2,
    rec.FLAG_BITS: 0,
}
# per type byte: minimum body size, or -1 for "unknown type"
_MIN_TABLE = np.full(256, -1, dtype=np.int64)
for _t, _m in _MIN_BODY.items():
    _MIN_TABLE[_t] = _m
_LETTER = np.zeros(256, dtype=bool)
_LETTER[ord("A") : ord("Z") + 1] = True
_LETTER[ord("a") : ord("z") + 1] = True
_MAX_UNKNOWN = 10000
_RESYNC_WINDOW = 1 << 20
_WALK_LIMIT = 1 << 16  # messages handled at once (bounds the index arrays)
_LINK_LOOKAHEAD = 6  # a candidate is kept when its end is one of the next this many
_LOW16 = np.uint64(0xFFFF)
_SHIFT24 = np.uint64(24)
_GATHER_SPAN = 16 << 20  # file bytes between releases of mapped pages in a sparse gather
_SCAN_CHUNK = 1 << 20  # bytes compared for the D type byte at once (cache-sized)
_SCAN_PART = 16  # chunks at least per scanning thread


def _unsound(types: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Which headers of non-``D`` messages are structurally impossible: a known type
    shorter than its fixed part, or an unknown type that is no letter or has a size of 0
    or over the bound for skipped messages."""
    nn = sizes.astype(np.int64)
    mins = _MIN_TABLE[types]
    return np.where(mins < 0, (nn == 0) | (nn > _MAX_UNKNOWN) | ~_LETTER[types], nn < mins)


def _scan_workers(nchunks: int) -> int:
    """Threads for the candidate scan of ``nchunks`` chunks: one per core, up to 4, and
    only for logs large enough to gain from it."""
    return max(1, min(_threads.workers(), nchunks // _SCAN_PART))


def _part_capacity(nbytes: int) -> int:
    """First guess of the candidates in ``nbytes`` of data (one per 24 bytes; a real log
    has one per 40-100): the buffer grows when a log holds more."""
    return max(1024, nbytes // 24)


def _run_ends(c: np.ndarray, nxt: np.ndarray) -> np.ndarray:
    """Index of the last candidate of each run (where a candidate's end is not the next
    candidate's start)."""
    m = len(c)
    link = np.zeros(m, dtype=bool)
    if m > 1:
        np.equal(nxt[:-1], c[1:], out=link[:-1])
    return np.flatnonzero(~link)


def _count_subs(sub_chunks: list[np.ndarray], n: int) -> np.ndarray:
    """Data messages per subscription index in chunks of subscription indexes (-1: the
    offset of a control message, kept by the fast path)."""
    counts = np.zeros(n, np.int64)
    for sc in sub_chunks:
        counts += np.bincount(np.maximum(sc, -1) + 1, minlength=n + 1)[1 : n + 1]  # < -1: dropped too
    return counts




_MAX_REPORTS = 1000  # damage reports kept one by one
_MAX_US = (2**63 - 1) // 1000  # larger (damaged) timestamps are clamped for log times


class TopicNotFoundError(PolybagError, KeyError):
    """No such topic (or instance, or field) in the log."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


@dataclass
class UlogData:
    """The ULog-only facts of a log (``reader.ulog``), named like pyulog's where they exist."""

    version: int = 0
    start_timestamp: int = 0  # us
    compat_flags: list[int] = field(default_factory=lambda: [0] * 8)
    incompat_flags: list[int] = field(default_factory=lambda: [0] * 8)
    appended_offsets: list[int] = field(default_factory=list)
    formats: dict[str, FormatDef] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    info_types: dict[str, str] = field(default_factory=dict)
    info_multiple: dict[str, list[list[Any]]] = field(default_factory=dict)
    info_multiple_types: dict[str, str] = field(default_factory=dict)
    params: dict[str, int | float] = field(default_factory=dict)
    default_params: dict[int, dict[str, int | float]] = field(default_factory=dict)
    logged_messages: list[rec.LoggedMessage] = field(default_factory=list)
    subscriptions: list[rec.Subscription] = field(default_factory=list)
    unsubscriptions: list[tuple[int, int]] = field(default_factory=list)  # (offset, msg_id)
    sync_count: int = 0
    sync_offsets: list[int] = field(default_factory=list)  # file offset of each sync (S) message
    corruptions: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # damage beyond the first reports (counted only)
    unreported_damage: int = 0
    # skipped (unknown) message types -> count
    unknown_types: dict[str, int] = field(default_factory=dict)
    # facts that need every data timestamp are worked out on first use
    _last_timestamp: int | None = field(default=None, repr=False)
    _changed_params: list[tuple[int, str, int | float]] | None = field(default=None, repr=False)
    _dropouts: list[rec.Dropout] | None = field(default=None, repr=False)
    _syncs: list[int] | None = field(default=None, repr=False)
    _resolve: Callable[[], None] | None = field(default=None, repr=False, compare=False)

    def _need(self) -> None:
        if self._resolve is not None:
            self._resolve()

    @property
    def last_timestamp(self) -> int:
        """The largest data timestamp (us), or the start timestamp."""
        self._need()
        return self._last_timestamp if self._last_timestamp is not None else self.start_timestamp

    @property
    def changed_params(self) -> list[tuple[int, str, int | float]]:
        """(timestamp us, name, value) of parameters set in the data section."""
        self._need()
        return self._changed_params if self._changed_params is not None else []

    @property
    def dropouts(self) -> list[rec.Dropout]:
        """(timestamp us, duration ms) of every dropout mark."""
        self._need()
        return self._dropouts if self._dropouts is not None else []

    @property
    def syncs(self) -> list[int]:
        """Timestamp (us) of each sync message: the largest data timestamp before it (like
        dropouts), so a writer can put them back in the same places of the data."""
        self._need()
        return self._syncs if self._syncs is not None else []

    @property
    def has_default_parameters(self) -> bool:
        return bool(self.compat_flags[0] & rec.COMPAT_DEFAULT_PARAMETERS)

    @property
    def has_data_appended(self) -> bool:
        return bool(self.incompat_flags[0] & rec.INCOMPAT_DATA_APPENDED)

    @property
    def file_corruption(self) -> bool:
        return bool(self.corruptions)

    @property
    def initial_parameters(self) -> dict[str, int | float]:
        return self.params

    @property
    def logged_messages_untagged(self) -> list[rec.LoggedMessage]:
        return [m for m in self.logged_messages if m.tag is None]

    @property
    def logged_messages_tagged(self) -> dict[int, list[rec.LoggedMessage]]:
        out: dict[int, list[rec.LoggedMessage]] = {}
        for m in self.logged_messages:
            if m.tag is not None:
                out.setdefault(m.tag, []).append(m)
        return out

    def get_default_parameters(self, default_type: int) -> dict[str, int | float]:
        return self.default_params.get(default_type, {})

    def version_info_str(self, key: str = "ver_sw_release") -> str | None:
        val = self.info.get(key)
        if not isinstance(val, int):
            return None
        major, minor, patch, typ = (val >> 24) & 0xFF, (val >> 16) & 0xFF, (val >> 8) & 0xFF, val & 0xFF
        if typ < 64:
            return None
        kind = " (alpha)" if typ < 128 else " (beta)" if typ < 192 else " (RC)" if typ < 255 else ""
        return f"v{major}.{minor}.{patch}{kind}"


@dataclass
class _DeadSub:
    """A subscription whose format cannot be compiled: its data messages are counted and
    skipped."""

    sub: rec.Subscription
    offset: int  # of its A message
    reason: str
    index: int  # position in the reader's list of them
    count: int = 0
    nbytes: int = 0


@dataclass
class _Sub:
    """A subscription as the reader tracks it."""

    sub: rec.Subscription
    type: UlogType | None
    index: int  # position in the subscription list
    channel: Channel | None = None
    selected: bool = True
    positions: np.ndarray | None = None  # file offsets of its D messages (header start)
    count: int = 0  # number of its D messages
    ts_us: np.ndarray | None = None  # timestamps in us (unwrapped)
    _records: np.ndarray | None = None


def _gather(buf: Any, size: int, starts: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """One ``dtype`` item at each byte offset of ``starts`` (any alignment), in one fancy index.

    The file is viewed as overlapping items (stride 1 byte), so numpy copies each record
    with a single indexing operation and no index array per byte."""
    width = dtype.itemsize
    if len(starts) == 0 or width == 0 or size < width:
        return np.zeros(len(starts), dtype=dtype)
    items = np.ndarray(buffer=buf, dtype=dtype, shape=(size - width + 1,), strides=(1,))
    return items[starts]


def _multi_id(value: object) -> int:
    """A multi_id given as an int or as its decimal string (channel metadata holds strings)."""
    if value is None:
        return 0
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    raise TopicNotFoundError(f"multi_id must be an int or a decimal string, not {value!r}")


class UlogReader(Reader):
    format = "ulog"

    def __init__(
        self,
        source: Source,
        path: str | None = None,
        *,
        recover: bool = False,
        topics: TopicSelector = None,
        warn: bool = True,
    ) -> None:
        if isinstance(source, StreamSource):
            source = source.spool()  # bounded memory: a long stream goes to a temporary file
        super().__init__(source, path)
        assert isinstance(self.source, MappedSource)
        self.recover = recover
        self._warn = warn
        self.ulog = UlogData()
        self.recovery_report: dict[str, Any] = {"messages": 0, "bytes_skipped": 0, "errors": []}
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
        self._by_key: dict[tuple[str, int], list[_Sub]] | None = None
        self._scan()

    # --- scanning ------------------------------------------------------------------------
    def _note(self, text: str) -> None:
        self.ulog.warnings.append(text)
        if self._warn:
            warnings.warn(PolybagWarning(f"{self.path or '<buffer>'}: {text}"), stacklevel=4)

    def _unknown_type(self, t: int, n: int, pos: int) -> None:
        """Unknown message types are skipped (the spec asks parsers to); one warning each."""
        count = self.ulog.unknown_types.get(chr(t), 0)
        self.ulog.unknown_types[chr(t)] = count + 1
        if not count:
            self._note(f"offset {pos}: skipping unknown message type {chr(t)!r} ({n} bytes)")

    def _damaged(
        self, offset: int, message: str, skipped: int = 0, truncated: bool = False, grouped: bool = False
    ) -> None:
        """One piece of damage; ``grouped``: a dropped data message whose line in
        ``recovery_report["errors"]`` is its group's (see :meth:`_drop_group`)."""
        self.recovery_report["bytes_skipped"] += skipped
        if len(self.ulog.corruptions) < _MAX_REPORTS:
            self.ulog.corruptions.append({"offset": offset, "bytes_skipped": skipped, "error": message})
            if not grouped:
                self._errors.append((offset, message))
        else:
            self.ulog.unreported_damage += 1
        if self._damage is None or offset < self._damage[0]:
            self._damage = (offset, message, truncated)

    def _drop_group(self, key: tuple[int, int], offset: int, text: str, n: int, nbytes: int) -> None:
        """Count ``n`` dropped data messages of one kind (``key``: no room for the msg_id, no
        subscription for a msg_id, a wrong size for a subscription): the first is the
        group's line in ``recovery_report["errors"]``, which gets the total at the end."""
        g = self._drop_groups.get(key)
        if g is None:
            self._drop_groups[key] = [len(self._errors), text, n, nbytes]
            self._errors.append((offset, text))
        else:
            g[2] += n
            g[3] += nbytes

    def _count_dead(self, cand: np.ndarray, nbytes: np.ndarray) -> None:
        """Data messages of subscriptions without a usable format (``cand``: -2 - index)."""
        k = -2 - cand.astype(np.int64)
        counts = np.bincount(k)
        sums = np.bincount(k, weights=nbytes.astype(np.float64))
        for i in np.flatnonzero(counts).tolist():
            d = self._dead_subs[i]
            d.count += int(counts[i])
            d.nbytes += int(sums[i])

    def _scan(self) -> None:
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

    def _read_definitions(self, pos: int) -> int:
        view, size = self._view, self._size
        u = self.ulog
        first = True
        while pos + 3 <= size:
            n, t = rec.MSG_HEADER.unpack_from(view, pos)
            if t in (rec.ADD_LOGGED, rec.LOGGING, rec.LOGGING_TAGGED):
                return pos
            if pos + 3 + n > size:
                self._damaged(
                    pos,
                    f"expected {n} bytes of message {chr(t) if 32 <= t < 127 else t!r}, file has "
                    f"{size - pos - 3} left",
                    truncated=True,
                )
                return size
            body = view[pos + 3 : pos + 3 + n]
            if t not in rec.KNOWN_TYPES or t == rec.DATA:
                if t == 0 or n == 0 or n > _MAX_UNKNOWN or not _LETTER[t]:
                    # not a message header: look for the next one a byte further on
                    nxt = self._resync_definitions(pos + 1)
                    self._damaged(pos, f"invalid message header (type {t}, size {n})", nxt - pos)
                    pos = nxt
                    first = False
                    continue
                self._unknown_type(t, n, pos)
                pos += 3 + n
                first = False
                continue
            try:
                if t == rec.FLAG_BITS:
                    if not first:
                        self._note(f"offset {pos}: flag bits message is not the first message")
                    fb = rec.FlagBits.unpack(body)
                    if n > rec.FLAG_BITS_SIZE:
                        self._note(f"offset {pos}: flag bits message has {n} bytes (extra ignored)")
                    u.compat_flags, u.incompat_flags, u.appended_offsets = (
                        fb.compat_flags,
                        fb.incompat_flags,
                        fb.appended_offsets,
                    )
                    bad = fb.unknown_incompat()
                    if bad:
                        desc = ", ".join(f"incompat_flags[{i}] bits 0x{b:02x}" for i, b in bad)
                        raise UnsupportedError(
                            f"{self.path or '<buffer>'}: offset {pos}: the log sets unknown incompatible "
                            f"flag bits ({desc}); polybag cannot read it safely"
                        )
                else:
                    self._handle_control(t, body, pos, defs=True)
            except UnsupportedError:
                raise
            except (ValueError, struct.error, IndexError, KeyError, UnicodeDecodeError) as e:
                self._damaged(pos, f"bad {chr(t)} message: {e}")
            first = False
            pos += 3 + n
        if pos < size:
            self._damaged(
                pos, f"expected a 3-byte message header, file has {size - pos} bytes left", truncated=True
            )
            return size
        return pos

    def _resync_definitions(self, pos: int) -> int:
        """Next plausible header in the definitions section (known type, size fits)."""
        size = self._size
        u8 = self._u8
        while pos + 3 <= size:
            end = min(size - 2, pos + _RESYNC_WINDOW)
            q = np.arange(pos, end, dtype=np.int64)
            t = u8[q + 2]
            n = u8[q].astype(np.int64) | (u8[q + 1].astype(np.int64) << 8)
            mins = _MIN_TABLE[t]
            ok = (mins >= 0) & (n >= mins) & (q + 3 + n <= size) & (t != rec.DATA)
            hit = np.flatnonzero(ok)
            if len(hit):
                return int(q[hit[0]])
            pos = end
        return size

    def _handle_control(self, t: int, body: memoryview, pos: int, defs: bool = False) -> None:
        u = self.ulog
        if t == rec.FORMAT:
            fmt = parse_format(rec.parse_string(body))
            u.formats[fmt.name] = fmt
            self._types.clear()
        elif t == rec.INFO:
            iv = rec.parse_info_body(body)
            u.info[iv.key] = iv.value
            u.info_types[iv.key] = iv.type
        elif t == rec.INFO_MULTIPLE:
            continued = body[0]
            iv = rec.parse_info_body(body[1:])
            lst = u.info_multiple.get(iv.key)
            if lst is None:
                u.info_multiple[iv.key] = [[iv.value]]
                u.info_multiple_types[iv.key] = iv.type
            elif continued:
                lst[-1].append(iv.value)
            else:
                lst.append([iv.value])
        elif t == rec.PARAMETER:
            iv = rec.parse_info_body(body)
            if defs:
                u.params[iv.key] = iv.value
            else:
                self._pending_ts.append(("P", pos, (iv.key, iv.value)))
        elif t == rec.PARAMETER_DEFAULT:
            types = body[0]
            iv = rec.parse_info_body(body[1:])
            bit = 0
            while types >> bit:
                if types >> bit & 1:
                    u.default_params.setdefault(bit, {})[iv.key] = iv.value
                bit += 1
        elif t == rec.DROPOUT:
            (duration,) = struct.unpack_from("<H", body, 0)
            self._pending_ts.append(("O", pos, duration))
        elif t == rec.SYNC:
            u.sync_count += 1
            u.sync_offsets.append(pos)
            self._pending_ts.append(("S", pos, None))
        elif t == rec.LOGGING:
            level, ts, text = rec.unpack_logging(body)
            self._log_entries.append((pos, level, ts, None, text))
        elif t == rec.LOGGING_TAGGED:
            level, tag, ts, text = rec.unpack_logging_tagged(body)
            self._log_entries.append((pos, level, ts, tag, text))
        elif t == rec.REMOVE_LOGGED:
            (msg_id,) = struct.unpack_from("<H", body, 0)
            u.unsubscriptions.append((pos, msg_id))
        elif t == rec.FLAG_BITS:
            self._note(f"offset {pos}: flag bits message in the data section ignored")

    def _type(self, name: str) -> UlogType | None:
        if name in self._types:
            return self._types[name]
        try:
            t: UlogType | None = compile_type(name, self.ulog.formats)
        except (ValueError, KeyError, RecursionError) as e:
            t = None
            self._type_errors[name] = str(e) if isinstance(e, ValueError) else f"format {name} is too deep"
        self._types[name] = t
        return t

    def _table_key(self) -> tuple[int, int, int]:
        """Changes whenever a subscription is added (the msg_id tables are made again)."""
        return (len(self._subs), len(self._by_msg_id), len(self._dead_subs))

    def _words(self, q: np.ndarray) -> np.ndarray:
        """The 8 bytes at each (ascending) offset of ``q`` as a little-endian uint64 (zero past the end):
        a message's size (bits 0-15), type (16-23) and, for ``D``, msg_id (24-39) in one
        gather."""
        size = self._size
        if len(q) == 0 or size < 8:
            out = np.zeros(len(q), "<u8")
            for j, x in enumerate(q.tolist()):
                chunk = bytes(self._view[x : x + 8])
                out[j] = int.from_bytes(chunk, "little")
            return out
        if self._u64 is None:
            self._u64 = np.ndarray(buffer=self._view, dtype="<u8", shape=(size - 7,), strides=(1,))
        if int(q[-1]) <= size - 8:  # offsets ascend: the last is the largest
            return self._u64[q]
        qc = np.minimum(q, size - 8)
        w = self._u64[qc]
        tail = np.flatnonzero(q != qc)
        w[tail] >>= ((q[tail] - qc[tail]) * 8).astype(np.uint64)
        return w

    def _cand_parts(self) -> tuple[list[int], list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]]:
        """Likely ``D`` message starts in the data section, to jump over runs of them.

        Every position whose type byte is ``D`` and whose size field fits one of the
        defined formats (``min_size + 2 .. size + 2``: PX4 leaves trailing padding out) is a
        candidate; a ``D`` byte inside a payload rarely passes that size check.  The
        candidates are split into runs where each one's end is exactly the next one's
        start.  The walk uses a run only after landing on its first position, so the
        result is exactly the sequential walk whatever the candidates are (a missing or
        spurious one only costs a step of the walk); the candidates only make it fast.
        Returns the first offset each part of the data section covers and, per part,
        (positions, ends, header words (see :meth:`_words`), index of the last candidate of
        each run in ascending order); the parts are scanned by parallel threads.  The file
        is compared for the type byte in cache-sized chunks into one reused buffer, and
        each candidate's header is read once, as one word, while its chunk is in the
        cache."""
        if self._cands is not None:
            return self._cands
        start, size = self._data_start, self._size
        sizes_ok = np.zeros(65536, dtype=bool)
        for name in list(self.ulog.formats):
            t = self._type(name)
            if t is not None and t.min_size + 2 <= 0xFFFF:
                sizes_ok[t.min_size + 2 : min(t.size + 2, 0xFFFF) + 1] = True
        if self._u64 is None and size >= 8:  # made once here, before the threads share it
            self._u64 = np.ndarray(buffer=self._view, dtype="<u8", shape=(size - 7,), strides=(1,))
        chunk = _SCAN_CHUNK
        stop = size - 4
        nchunks = max(0, -(-(stop - start) // chunk))
        workers = _scan_workers(nchunks)
        # contiguous parts of whole chunks, one per thread (numpy releases the GIL)
        bounds = [start + chunk * (nchunks * k // workers) for k in range(workers)] + [stop]
        # The output buffers are made here, in the main thread: memory a worker thread
        # allocates stays in its own malloc arena after it is freed, which would raise the
        # peak of a full parse by about a third of the file.
        jobs = [
            (
                a,
                b,
                sizes_ok,
                np.empty(_part_capacity(b - a), np.int64),
                np.empty(_part_capacity(b - a), "<u8"),
            )
            for a, b in zip(bounds[:-1], bounds[1:])
        ]
        if workers > 1:
            # the first part here, the others in the pool: no thread waits idle
            futs = [_threads.pool().submit(self._scan_part, *job) for job in jobs[1:]]
            try:
                first = self._scan_part(*jobs[0])
            finally:
                rest = [f.result() for f in futs]
            found = [first, *rest]
        else:
            found = [self._scan_part(*jobs[0])]
        del jobs
        self._release(start, size)
        parts = []
        for c, w in found:  # (here, in the main thread, for the same reason)
            nxt = np.bitwise_and(w, _LOW16).view(np.int64)
            nxt += c
            nxt += 3
            parts.append((c, nxt, w, _run_ends(c, nxt)))
        # The parts stay apart (no copy into one array): runs end at part boundaries.
        self._cands = (bounds[:-1], parts)
        return self._cands

    def _candidates(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The candidates of :meth:`_cand_parts` as one set of arrays (for tests and tools:
        the walk uses the parts)."""
        _lo, parts = self._cand_parts()
        c = np.concatenate([x[0] for x in parts]) if parts else np.zeros(0, np.int64)
        nxt = np.concatenate([x[1] for x in parts]) if parts else np.zeros(0, np.int64)
        w = np.concatenate([x[2] for x in parts]) if parts else np.zeros(0, "<u8")
        return c, nxt, w, _run_ends(c, nxt)

    def _scan_part(
        self, a0: int, a1: int, sizes_ok: np.ndarray, cbuf: np.ndarray, wbuf: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The candidates (positions, header words) of the chunks in ``[a0, a1)`` (one part of
        :meth:`_cand_parts`), written into ``cbuf``/``wbuf`` (grown if too small); runs in
        a worker thread."""
        u8 = self._u8
        size = self._size
        chunk = _SCAN_CHUNK
        look = _LINK_LOOKAHEAD
        buf = np.empty(chunk, dtype=bool)
        n = 0
        for a in range(a0, a1, chunk):
            if (a - a0) % (chunk * 4) == 0 and a > a0:
                # the pages of the last four chunks, done with for now (also after a dense one)
                self._release(a - chunk * 4, a - 8)
            seg = u8[a + 2 : min(a + 2 + chunk, a1 + 2, size - 2)]
            hits = np.flatnonzero(np.equal(seg, rec.DATA, out=buf[: len(seg)]))
            if len(hits) > len(seg) // 8:  # denser is not a log; walk it one by one
                continue
            hits += a
            # each candidate's header read once, and the run links found, while the
            # chunk is in the cache (sizes as a contiguous intp array: indexing and adding
            # with a strided uint16 view is several times slower)
            w = self._words(hits)
            n64 = np.bitwise_and(w, _LOW16).view(np.int64)
            keep = sizes_ok[n64]
            oki = np.flatnonzero(keep)
            h2 = hits[oki]
            nx2 = n64[oki]
            nx2 += h2
            nx2 += 3
            m = len(h2)
            if m > 1:
                # a real message holding a D byte (with a plausible size) in its payload:
                # its end is one of the next few candidates; those in between are noise.
                # A break followed by another type of message is a real one.
                brk = np.flatnonzero(nx2[:-1] != h2[1:])
                brk = brk[u8[np.minimum(nx2[brk] + 2, size - 1)] == rec.DATA]
                for k in range(2, look + 1):
                    brk = brk[brk + k < m]
                    if not len(brk):
                        break
                    hit = nx2[brk] == h2[brk + k]
                    at = brk[hit]
                    for j in range(1, k):
                        keep[oki[at + j]] = False
                    brk = brk[~hit]
            k = int(np.count_nonzero(keep))
            if n + k > len(cbuf):
                cap = max(2 * len(cbuf), n + k)
                cbuf = np.concatenate([cbuf[:n], np.empty(cap - n, cbuf.dtype)])
                wbuf = np.concatenate([wbuf[:n], np.empty(cap - n, wbuf.dtype)])
            cbuf[n : n + k] = hits[keep]
            wbuf[n : n + k] = w[keep]
            n += k
        return cbuf[:n], wbuf[:n]

    def _walk_fast(self, pos: int, end: int, limit: int | None = None) -> tuple[np.ndarray, int]:
        """Offsets of the complete messages from ``pos`` (exactly what a one-by-one walk of
        the size chain finds) and where it stopped: ``end``, the start of a message that
        does not fit before ``end``, or (after about ``limit`` messages) the next message."""
        p, _w, stop = self._walk_words(pos, end, limit)
        return p, stop

    def _walk_words(self, pos: int, end: int, limit: int | None = None) -> tuple[np.ndarray, np.ndarray, int]:
        """:meth:`_walk_fast` with each message's header word (see :meth:`_words`)."""
        if limit is None:
            limit = _WALK_LIMIT
        part_lo, parts = self._cand_parts()
        view = self._view
        pieces: list[np.ndarray] = []
        wpieces: list[np.ndarray] = []
        singles: array[int] = array("q")
        k_part = -1
        c = nxt = cw = ends = np.zeros(0, np.int64)

        def flush() -> None:
            nonlocal singles
            sp = np.frombuffer(singles, dtype=np.int64).copy()
            pieces.append(sp)
            wpieces.append(self._words(sp))
            singles = array("q")

        count = 0
        while pos + 3 <= end:
            if count >= limit:
                break
            k = bisect.bisect_right(part_lo, pos) - 1
            if k != k_part:
                k_part = k
                c, nxt, cw, ends = parts[k] if k >= 0 else (np.zeros(0, np.int64),) * 4
            i = int(c.searchsorted(pos))
            if i < len(c) and c[i] == pos:
                r = int(ends[ends.searchsorted(i)])
                r = min(r, i + limit)
                if nxt[r] > end:  # the run crosses the segment end: keep what fits
                    r = i + int(np.searchsorted(nxt[i : r + 1], end, side="right")) - 1
                    if r < i:
                        break
                count += r + 1 - i
                if singles:
                    flush()
                pieces.append(c[i : r + 1])
                wpieces.append(cw[i : r + 1])
                pos = int(nxt[r])
                continue
            nx = pos + 3 + (view[pos] | (view[pos + 1] << 8))
            if nx > end:
                break
            singles.append(pos)
            count += 1
            pos = nx
        if singles:
            flush()
        if not pieces:
            return np.zeros(0, np.int64), np.zeros(0, "<u8"), pos
        if len(pieces) == 1:
            return pieces[0], wpieces[0], pos
        return np.concatenate(pieces), np.concatenate(wpieces), pos

    def _plausible_header(self, q: int) -> bool:
        """Whether the header at ``q`` could start a real message (used to tell a log cut
        inside a message from a damaged size field)."""
        t = int(self._u8[q + 2])
        n = int(self._u16[q])
        if _MIN_TABLE[t] < 0:
            return bool(_LETTER[t]) and 0 < n <= _MAX_UNKNOWN
        if n < _MIN_TABLE[t]:
            return False
        if t == rec.DATA:
            if q + 5 > self._size:
                return True
            mid = int(self._u16[q + 3])
            if mid in self._dead:
                return True
            entry = self._by_msg_id.get(mid)
            return (
                entry is not None
                and entry.type is not None
                and entry.type.min_size <= n - 2 <= entry.type.size
            )
        return True

    def _read_data(self, start: int, end: int, last: bool) -> None:
        u8 = self._u8
        pos = start
        limit = _WALK_LIMIT
        while pos < end:
            p, words, stop = self._walk_words(pos, end, limit)
            more = len(p) >= limit and stop + 3 <= end and stop + 3 + int(self._u16[stop]) <= end
            bad = self._process_chunk(p, end, words)
            if len(p):
                self._release(pos, int(p[-1]))
            if bad is not None:
                bad_pos = int(p[bad])
                nxt, why = self._resync(bad_pos, end)
                self._damaged(bad_pos, why, nxt - bad_pos)
                pos = nxt
                limit = 4096  # after damage, small steps first so that more damage stays cheap
                continue
            limit = min(limit * 8, _WALK_LIMIT)
            if more:
                pos = stop
                continue
            if stop < end and stop + 3 <= end and not self._plausible_header(stop):
                # not a cut-off message but a damaged header: skip to the next good one
                self._bad_reason = (
                    f"invalid message header (type {int(u8[stop + 2])}, size {int(self._u16[stop])})"
                )
                nxt, why = self._resync(stop, end)
                self._damaged(stop, why, nxt - stop)
                pos = nxt
                limit = 4096
                continue
            if stop < end:
                if last:
                    n = int(u8[stop]) | (int(u8[stop + 1]) << 8) if stop + 2 <= end else -1
                    what = f"{n} bytes of message" if n >= 0 else "a 3-byte message header"
                    self._damaged(
                        stop,
                        f"log ends inside a message: expected {what}, file has {end - stop} bytes left",
                        truncated=True,
                    )
                # else: the partial message before an appended offset is discarded (spec)
            break

    def _control(self, tc: int, q: int, sz: int) -> None:
        """One control (not ``D``, not ``A``) message of type ``tc`` at ``q``."""
        if _MIN_TABLE[tc] < 0:
            self._unknown_type(tc, sz, q)
            return
        try:
            self._handle_control(tc, self._view[q + 3 : q + 3 + sz], q)
        except (ValueError, struct.error, IndexError, KeyError, UnicodeDecodeError) as e:
            self._damaged(q, f"bad {chr(tc)} message: {e}")

    def _fast_chunk(self, p: np.ndarray, words: np.ndarray) -> bool:
        """The common batch, handled in bulk: the subscriptions stay as they are (their
        lookup tables are made), every data message is valid for its subscription, and the
        other messages are sound control messages (no ``A``).  Returns False, having
        changed nothing, for any other batch (the general path of
        :meth:`_process_chunk` then handles it).  Data offsets are stored with their
        subscription index, other messages' offsets with -1 (no copy of the offsets)."""
        tables = self._tables
        if tables is None or tables[0] != self._table_key() or self._pending_damage:
            return False
        _key, sub_of, _head_m, lo_m, hi_m, ranged, head_s = tables
        dead = None
        n_p = len(p)
        t = np.ndarray(buffer=words, dtype=np.uint8, shape=(n_p,), strides=(8,), offset=2)
        size = np.ndarray(buffer=words, dtype="<u2", shape=(n_p,), strides=(8,), offset=0)
        mid = np.ndarray(buffer=words, dtype="<u2", shape=(n_p,), strides=(8,), offset=3)
        idx = np.right_shift(words, _SHIFT24)
        idx &= _LOW16
        g = head_s[idx.view(np.int64)]
        del idx
        x = g ^ words
        x <<= np.uint64(24)
        bad = np.flatnonzero(x != 0)
        del x
        ctrl = bad
        if len(bad):
            isd = t[bad] == rec.DATA
            if isd.any():
                if not ranged:
                    return False
                dbad = bad[isd]
                rm = mid[dbad]
                rs = size[dbad].astype(np.int64) - 2
                if not ((hi_m[rm] >= 0) & (rs >= lo_m[rm]) & (rs <= hi_m[rm])).all():
                    return False
                ctrl = bad[~isd]
                if self._dead:
                    dead = dbad[sub_of[rm] <= -2]
            tt = t[ctrl]
            if _unsound(tt, size[ctrl]).any() or (tt == rec.ADD_LOGGED).any():
                return False
        cand = (g >> np.uint64(40)).astype(np.int32)
        del g
        cand -= 1
        cand[ctrl] = -1
        if dead is not None and len(dead):
            self._count_dead(sub_of[mid[dead]], size[dead].astype(np.int64) + 3)
        for ci in ctrl.tolist():
            q = int(p[ci])
            self._control(int(t[ci]), q, int(self._u16[q]))
        self._d_pos_chunks.append(p)
        self._d_sub_chunks.append(cand)
        return True

    def _process_chunk(self, p: np.ndarray, end: int, words: np.ndarray | None = None) -> int | None:
        """Handle complete messages at offsets ``p`` (``words``: their header words, see
        :meth:`_words`); index of the first damaged one, or None."""
        n_p = len(p)
        if n_p == 0:
            return None
        u16 = self._u16
        words = np.ascontiguousarray(self._words(p) if words is None else words, dtype="<u8")
        if self._fast_chunk(p, words):
            return None
        # size, type and msg_id are strided views into the header words (no copies)
        t = np.ndarray(buffer=words, dtype=np.uint8, shape=(n_p,), strides=(8,), offset=2)
        size_all = np.ndarray(buffer=words, dtype="<u2", shape=(n_p,), strides=(8,), offset=0)
        mid_all = np.ndarray(buffer=words, dtype="<u2", shape=(n_p,), strides=(8,), offset=3)
        is_d = t == rec.DATA
        other = np.flatnonzero(~is_d)
        tt = t[other]
        hits = np.flatnonzero(_unsound(tt, size_all[other]))
        k = int(other[hits[0]]) if len(hits) else n_p
        ctrl = other[other < k]
        if len(other) == 0:  # the common case: data messages only
            d_idx = np.arange(n_p)
            dpos = p
            dwords = words
            msg_id = mid_all
        else:
            dmask = is_d[:k]
            d_idx = np.flatnonzero(dmask)
            dpos = p[:k][dmask]
            dwords = words[:k][dmask]
            msg_id = (  # bytes 3-4 of each header word (a view, no copy)
                np.ndarray(buffer=dwords, dtype="<u2", shape=(len(dwords),), strides=(8,), offset=3)
                if len(dwords)
                else np.zeros(0, "<u2")
            )
        # body sizes without the msg_id: only needed where a size is checked one by one
        dsize = (dwords & np.uint64(0xFFFF)).astype(np.int32) - 2 if len(dwords) < 4096 else None

        def sizes() -> np.ndarray:
            nonlocal dsize
            if dsize is None:
                dsize = (dwords & np.uint64(0xFFFF)).astype(np.int32) - 2
            return dsize

        # (a D too short to hold its msg_id reads other bytes and fails the size check)
        view = self._view
        # Subscriptions (A) in this chunk, parsed up front: a D belongs to the latest A for
        # its msg_id before it.
        new_subs: list[tuple[int, _Sub]] = []
        # subscriptions whose format does not compile: their data is counted and skipped
        # (cand -2 - index), one damage report for each at the end
        new_dead: list[tuple[int, _DeadSub]] = []
        for i in ctrl[t[ctrl] == rec.ADD_LOGGED].tolist():
            q = int(p[i])
            sz = int(u16[q])
            try:
                sub = rec.Subscription.unpack(view[q + 3 : q + 3 + sz], q)
            except (ValueError, struct.error) as e:
                self._pending_damage.append((q, f"bad subscription message: {e}"))
                continue
            utype = self._type(sub.name)
            if utype is None:
                why = self._type_errors.get(sub.name, f"no format for type {sub.name!r}")
                new_dead.append((i, _DeadSub(sub, q, why, len(self._dead_subs) + len(new_dead))))
                continue
            new_subs.append((i, _Sub(sub, utype, len(self._subs) + len(new_subs))))
        all_entries = self._subs + [e for _, e in new_subs]
        lo = np.array([e.type.min_size if e.type else 1 << 30 for e in all_entries] + [1 << 30], np.int64)
        hi = np.array([e.type.size if e.type else -1 for e in all_entries] + [-1], np.int64)
        new_ids = [e.sub.msg_id for _, e in new_subs] + [d.sub.msg_id for _, d in new_dead]
        known_ids = set(self._by_msg_id) | set(self._dead)
        if len(set(new_ids)) == len(new_ids) and not (set(new_ids) & known_ids):
            # common case: each msg_id subscribed once -> lookup tables by msg_id
            # a data header without trailing padding (size, "D", msg_id: PX4 leaves the
            # padding out) is one 40-bit value: a single table lookup and compare checks
            # it; the others of types with trailing padding are checked against the range
            entries = [(mid, e, -1) for mid, e in self._by_msg_id.items()]
            entries += [(e.sub.msg_id, e, i) for i, e in new_subs]
            dead_entries = [(mid, self._dead_subs[k], -1) for mid, k in self._dead.items()]
            dead_entries += [(d.sub.msg_id, d, i) for i, d in new_dead]
            key = self._table_key()
            if new_subs or new_dead or self._tables is None or self._tables[0] != key:
                sub_of = np.full(65536, -1, dtype=np.int32)
                head_m = np.zeros(65536, dtype=np.uint64)
                lo_m = np.full(65536, 1 << 30, dtype=np.int32)
                hi_m = np.full(65536, -1, dtype=np.int32)
                ranged = False
                for mid, entry, _ in entries:
                    if entry.type is not None:
                        sub_of[mid] = entry.index
                        if entry.type.min_size + 2 <= 0xFFFF:
                            head_m[mid] = (entry.type.min_size + 2) | (rec.DATA << 16) | (mid << 24)
                        if entry.type.min_size < entry.type.size or entry.type.min_size + 2 > 0xFFFF:
                            lo_m[mid], hi_m[mid] = entry.type.min_size, entry.type.size
                            ranged = True
                for mid, dead, _ in dead_entries:  # any size: counted, then skipped
                    sub_of[mid] = -2 - dead.index
                    lo_m[mid], hi_m[mid] = 0, MAX_PAYLOAD
                    ranged = True
                # expected header (low 40 bits) and subscription index + 1 (high bits) in
                # one word: the fast path checks and assigns a data message with one lookup
                live = np.maximum(sub_of, -1).astype(np.int64) + 1
                head_s = head_m | (live.astype(np.uint64) << np.uint64(40))
                tables = (key, sub_of, head_m, lo_m, hi_m, ranged, head_s)
                if not new_subs and not new_dead:  # the same tables serve the next chunks
                    self._tables = tables
            else:
                tables = self._tables
            _key, sub_of, head_m, lo_m, hi_m, ranged, _hs = tables
            cand = sub_of[msg_id]
            # the low 40 bits equal the expected header (in place: large temporaries are slow)
            head = head_m[msg_id]
            head ^= dwords
            head <<= np.uint64(24)
            ok = head == 0
            del head
            if ranged:
                rest = np.flatnonzero(~ok)
                rest = rest[hi_m[msg_id[rest]] >= 0]
                if len(rest):
                    rs = (dwords[rest] & np.uint64(0xFFFF)).astype(np.int32) - 2
                    rm = msg_id[rest]
                    ok[rest] = (rs >= lo_m[rm]) & (rs <= hi_m[rm])
            if new_subs or new_dead:  # data before its subscription in this chunk has none yet
                a_at = np.full(65536, -1, dtype=np.int64)
                for mid, _entry, i in entries:
                    a_at[mid] = i
                for mid, _dead, i in dead_entries:
                    a_at[mid] = i
                early = a_at[msg_id] >= d_idx
                cand = np.where(early, -1, cand)
                ok &= ~early
        else:
            nmax = len(p) + 1
            mid64 = msg_id.astype(np.int64)
            keys = [mid * nmax for mid in self._by_msg_id] + [
                e.sub.msg_id * nmax + i + 1 for i, e in new_subs
            ]
            subs_ = [e.index for e in self._by_msg_id.values()] + [e.index for _, e in new_subs]
            keys += [mid * nmax for mid in self._dead] + [d.sub.msg_id * nmax + i + 1 for i, d in new_dead]
            subs_ += [-2 - k for k in self._dead.values()] + [-2 - d.index for _, d in new_dead]
            order = np.argsort(np.asarray(keys, dtype=np.int64), kind="stable")
            ekey = np.asarray(keys, dtype=np.int64)[order]
            esub = np.asarray(subs_, dtype=np.int64)[order]
            cand = np.full(len(d_idx), -1, dtype=np.int64)
            if len(ekey):
                loc = np.searchsorted(ekey, mid64 * nmax + d_idx + 1, side="left") - 1
                locc = np.maximum(loc, 0)
                found = (loc >= 0) & ((ekey[locc] // nmax) == mid64)
                cand = np.where(found, esub[locc], -1)
            live = np.maximum(cand, -1)
            ok = ((cand >= 0) & (sizes() >= lo[live]) & (sizes() <= hi[live])) | ((cand <= -2) & (sizes() >= 0))
        badd = np.flatnonzero(~ok)
        b = k

        def reason(w: int) -> str:
            dsize = sizes()
            if dsize[w] < 0:
                return f"data message of {int(dsize[w]) + 2} bytes cannot hold its msg_id"
            if cand[w] < 0:
                return f"data message for msg_id {int(msg_id[w])} that has no subscription"
            e = all_entries[int(cand[w])]
            assert e.type is not None
            return (
                f"data message for {e.sub.name} has {int(dsize[w])} bytes, expected "
                f"{e.type.min_size}..{e.type.size}"
            )

        dropped = np.zeros(0, dtype=np.int64)
        if len(badd):
            # A bad data message followed by a good message is dropped where it is (like
            # pyulog); one followed by garbage means the size chain is lost: resynchronise.
            good = np.ones(len(p) + 1, dtype=bool)
            good[k:] = False
            good[d_idx[badd]] = False
            nxt_good = good[d_idx[badd] + 1] | (d_idx[badd] + 1 == len(p))
            cut = np.flatnonzero(~nxt_good)
            if len(cut) and int(d_idx[badd[cut[0]]]) < k:
                b = int(d_idx[badd[cut[0]]])
                self._bad_reason = reason(int(badd[cut[0]]))
            dropped = badd[d_idx[badd] < b]
            for w in dropped[:_MAX_REPORTS].tolist():
                q = int(dpos[w])
                self._damaged(q, reason(w) + " (dropped)", int(sizes()[w]) + 5, grouped=True)
            if len(dropped) > _MAX_REPORTS:
                extra = dropped[_MAX_REPORTS:]
                self.recovery_report["bytes_skipped"] += int((sizes()[extra] + 5).sum())
                self.ulog.unreported_damage += len(extra)
            if len(dropped):
                # one line of recovery_report["errors"] per kind: no room for the msg_id (0),
                # no subscription for a msg_id (1), a wrong size for a subscription (2)
                ds = sizes()[dropped]
                dc = np.asarray(cand)[dropped].astype(np.int64)
                kind = np.where(ds < 0, 0, np.where(dc < 0, 1, 2))
                what = np.where(kind == 1, msg_id[dropped].astype(np.int64), np.where(kind == 2, dc, 0))
                gkey = kind * (1 << 20) + what
                uk, first, inv = np.unique(gkey, return_index=True, return_inverse=True)
                counts = np.bincount(inv)
                nbytes = np.bincount(inv, weights=(ds + 5).astype(np.float64))
                for j, w in enumerate(dropped[first].tolist()):
                    self._drop_group(
                        (int(uk[j]) >> 20, int(uk[j]) & 0xFFFFF),
                        int(dpos[w]),
                        reason(w) + " (dropped)",
                        int(counts[j]),
                        int(nbytes[j]),
                    )
        if b == k and k < len(p):
            self._bad_reason = f"invalid message header (type {int(t[k])}, size {int(u16[p[k]])})"
        # Everything before b, in file order: control messages one by one, D in bulk.
        new_by_i = dict(new_subs)
        dead_by_i = dict(new_dead)
        for q, msg in self._pending_damage:
            if q < (int(p[b]) if b < len(p) else end):
                self._damaged(q, msg)
        self._pending_damage = []
        for ci in ctrl[ctrl < b].tolist():
            tc = int(t[ci])
            q = int(p[ci])
            sz = int(u16[q])
            if tc == rec.ADD_LOGGED:
                entry = new_by_i.get(ci)
                dead = dead_by_i.get(ci)
                mid = entry.sub.msg_id if entry is not None else dead.sub.msg_id if dead is not None else -1
                if mid >= 0 and (mid in self._by_msg_id or mid in self._dead):
                    name = entry.sub.name if entry is not None else dead.sub.name if dead is not None else ""
                    self._note(f"offset {q}: msg_id {mid} subscribed again ({name})")
                if entry is not None:
                    self._subs.append(entry)
                    self.ulog.subscriptions.append(entry.sub)
                    self._dead.pop(mid, None)
                    self._by_msg_id[mid] = entry
                elif dead is not None:
                    self._dead_subs.append(dead)
                    self._by_msg_id.pop(mid, None)
                    self._dead[mid] = dead.index
                continue
            self._control(tc, q, sz)
        nd = int(np.searchsorted(d_idx, b))
        if nd:
            cnd = cand[:nd].astype(np.int32)  # a copy
            keep = None
            if len(dropped):
                keep = np.ones(nd, dtype=bool)
                keep[dropped] = False
            # a data message of a subscription without a usable format (-2 - index) is counted
            # and dropped; such candidates may exist although self._dead is empty again (the
            # msg_id was subscribed again later in this batch)
            dead_at = cnd <= -2
            if dead_at.any():
                if keep is not None:
                    dead_at &= keep
                dd = np.flatnonzero(dead_at)
                if len(dd):
                    self._count_dead(cnd[dd], sizes()[dd].astype(np.int64) + 5)
                    cnd[dd] = -1  # kept like a control message's offset: dropped in _finish
            if keep is not None:
                self._d_pos_chunks.append(dpos[:nd][keep])
                self._d_sub_chunks.append(cnd[keep])
            else:
                self._d_pos_chunks.append(dpos[:nd])
                self._d_sub_chunks.append(cnd)
        return b if b < len(p) else None

    def _resync(self, bad: int, end: int) -> tuple[int, str]:
        """Where reading resumes after damage at ``bad``: the next sync message or the next
        position where three consecutive valid message headers start."""
        why = getattr(self, "_bad_reason", "damaged message")
        u8 = self._u8
        lo = np.full(65536, 1 << 30, dtype=np.int64)
        hi = np.full(65536, -1, dtype=np.int64)
        for mid, entry in self._by_msg_id.items():
            if entry.type is not None:
                lo[mid] = entry.type.min_size + 2
                hi[mid] = entry.type.size + 2
        for mid in self._dead:
            lo[mid], hi[mid] = 2, MAX_PAYLOAD + 2
        pos = bad + 1
        view = self._view
        window = 4096  # grows: damage is usually short
        while pos < end:
            wend = min(end, pos + window)
            window = min(window * 16, _RESYNC_WINDOW)
            # sync magic: resume at the S message header (or right after the magic)
            m = bytes(view[pos : min(end, wend + 7)]).find(rec.SYNC_MAGIC)
            sync_at = -1
            if m >= 0:
                ms = pos + m
                if ms - 3 >= pos and u8[ms - 1] == rec.SYNC and u8[ms - 3] == 8 and u8[ms - 2] == 0:
                    sync_at = ms - 3
                else:
                    sync_at = ms + 8
            lim = sync_at if sync_at >= 0 else wend
            if lim > pos:
                q = np.arange(pos, lim, dtype=np.int64)
                ok, nxt = self._valid_headers(q, end, lo, hi)
                ok2, nxt2 = self._valid_headers(nxt, end, lo, hi)
                ok3, _ = self._valid_headers(nxt2, end, lo, hi)
                chain = ok & (ok2 | (nxt == end)) & (ok3 | (nxt2 == end) | (nxt == end))
                hit = np.flatnonzero(chain)
                if len(hit):
                    return int(q[hit[0]]), why
            if sync_at >= 0:
                return sync_at, why
            pos = wend
        return end, why

    def _valid_headers(
        self, q: np.ndarray, end: int, lo: np.ndarray, hi: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        u8 = self._u8
        size = self._size
        inb = q + 3 <= end
        qc = np.where(inb, q, 0)
        qc = np.minimum(qc, max(size - 3, 0))
        t = u8[qc + 2]
        n = u8[qc].astype(np.int64) | (u8[qc + 1].astype(np.int64) << 8)
        nxt = q + 3 + n
        mins = _MIN_TABLE[t]
        ok = inb & (mins >= 0) & (n >= mins) & (nxt <= end) & (t != rec.FLAG_BITS)
        isd = t == rec.DATA
        q5 = np.minimum(qc + 4, max(size - 1, 0))
        mid = u8[np.minimum(qc + 3, max(size - 1, 0))].astype(np.int64) | (u8[q5].astype(np.int64) << 8)
        dok = (n >= lo[mid]) & (n <= hi[mid])
        ok &= ~isd | dok
        return ok, np.where(ok, nxt, end + 1)

    def _report_damage(self) -> None:
        """The damage reports that need the whole scan: one per subscription without a
        usable format (with its data message count) and the totals of each group of
        dropped data messages; then ``recovery_report["errors"]`` in file order."""
        for d in self._dead_subs:
            s = d.sub
            self._damaged(
                d.offset,
                f"subscription {s.name!r} (msg_id {s.msg_id}, multi_id {s.multi_id}) has no usable format "
                f"({d.reason}): its {d.count} data message(s) ({d.nbytes} bytes) are skipped",
                d.nbytes,
            )
        for at, text, n, nbytes in self._drop_groups.values():
            if n > 1:
                self._errors[at] = (
                    self._errors[at][0],
                    f"{text}, and {n - 1} more data message(s) like it ({n} in all, {nbytes} bytes)",
                )
        self._errors.sort(key=lambda e: e[0])
        self.recovery_report["errors"] = [f"offset {o}: {m}" for o, m in self._errors]
        if self._dead_subs:
            self.ulog.corruptions.sort(key=lambda c: c["offset"])

    def _finish(self) -> None:
        self._report_damage()
        subs = self._subs
        pos_chunks, sub_chunks = self._d_pos_chunks, self._d_sub_chunks
        self._d_pos_chunks = []
        self._d_sub_chunks = []
        picked = topic_filter(self._topics, [Channel(s.index, s.sub.name, "ulog", None) for s in subs])
        if picked is not None and len(picked) <= 8:
            # a few topics selected up front: only their offsets are pulled out now (chunk
            # by chunk); the others' offsets, and their counts, wait in the chunks until
            # asked for (see _ensure_counts)
            for s in subs:
                if s.index in picked:
                    found = [pc[sc == s.index] for pc, sc in zip(pos_chunks, sub_chunks)]
                    s.positions = np.concatenate(found) if found else np.zeros(0, np.int64)
                    s.count = len(s.positions)
            self._d_chunks = (pos_chunks, sub_chunks)
            self._counts_pending = True
        else:
            counts = _count_subs(sub_chunks, len(subs))
            for s in subs:
                s.count = int(counts[s.index])
            d_pos = np.concatenate(pos_chunks) if pos_chunks else np.zeros(0, np.int64)
            d_sub = np.concatenate(sub_chunks) if sub_chunks else np.zeros(0, np.int32)
            del pos_chunks, sub_chunks
            if len(d_sub) and int(d_sub.min()) < 0:
                is_data = d_sub >= 0
                d_pos, d_sub = d_pos[is_data], d_sub[is_data]
            # group data messages by subscription (stable: file order within each; radix sort)
            key = d_sub.astype(np.int16) if len(subs) < (1 << 15) else d_sub
            order = np.argsort(key, kind="stable")
            bounds = np.concatenate([[0], np.cumsum(counts)])
            for s in subs:
                s.positions = d_pos[order[bounds[s.index] : bounds[s.index + 1]]]
        u = self.ulog
        for _pos, level, ts, tag, text in self._log_entries:
            u.logged_messages.append(rec.LoggedMessage(ts, level, rec.parse_string(text), tag))
        u._resolve = self._resolve_times
        self._build_channels()

    def _gather_sparse(self, starts: np.ndarray, dtype: np.dtype) -> np.ndarray:
        """:func:`_gather` of a few bytes per message, with the mapped pages released every
        ``_GATHER_SPAN`` bytes of file: the kernel maps the pages around each fault too, so
        a topic of big messages would otherwise leave the whole file resident."""
        if (
            len(starts) == 0
            or int(starts[-1]) - int(starts[0]) <= _GATHER_SPAN
            or not bool(np.all(starts[1:] >= starts[:-1]))  # out of file order: one gather
        ):
            return _gather(self._view, self._size, starts, dtype)
        out = np.empty(len(starts), dtype)
        i = 0
        while i < len(starts):
            j = int(np.searchsorted(starts, int(starts[i]) + _GATHER_SPAN, side="right"))
            j = max(j, i + 1)
            out[i:j] = _gather(self._view, self._size, starts[i:j], dtype)
            self._release(int(starts[i]), int(starts[j - 1]) + dtype.itemsize)
            i = j
        return out

    def _sub_times(self, s: _Sub) -> np.ndarray:
        """Timestamps (us, unwrapped) of one subscription's data messages."""
        if s.ts_us is not None:
            return s.ts_us
        t = s.type
        pos = s.positions if s.positions is not None else np.zeros(0, np.int64)
        assert t is not None
        if t.timestamp_offset < 0 or len(pos) == 0:
            s.ts_us = np.full(len(pos), -1, dtype=np.int64)  # filled in by _resolve_times
            if len(pos) == 0:
                return s.ts_us
            self._resolve_times()
            assert s.ts_us is not None
            return s.ts_us
        width = BASE_TYPES[t.timestamp_type][1]
        raw = self._gather_sparse(pos + 5 + t.timestamp_offset, np.dtype(f"<u{width}"))
        if width == 8:
            us = np.minimum(raw, np.uint64(_MAX_US)).astype(np.int64)  # log times fit int64 ns
        else:
            iv = raw.astype(np.int64)
            wraps = np.concatenate([[0], np.cumsum(np.diff(iv) < 0)])
            us = (iv + wraps * (1 << (8 * width))) * (1000 if width == 1 else 1)
        s.ts_us = us
        return us

    def _resolve_times(self) -> None:
        """Fill the facts that need every data timestamp: the last timestamp, when parameter
        changes and dropouts happened (pyulog: the largest data timestamp before them), and
        times of subscriptions without a timestamp field."""
        u = self.ulog
        if self._times_done:
            return
        self._times_done = True
        start = u.start_timestamp
        timed = [s for s in self._subs if s.type is not None and s.type.timestamp_offset >= 0]
        per = []
        for s in timed:
            ts = self._sub_times(s)
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

        u._last_timestamp = last
        u._changed_params = []
        u._dropouts = []
        u._syncs = []
        for kind, q, payload in self._pending_ts:
            if kind == "S":
                u._syncs.append(last_before(q))
            elif kind == "P":
                u._changed_params.append((last_before(q), payload[0], payload[1]))
            else:
                u._dropouts.append(rec.Dropout(last_before(q), payload))
        for s in self._subs:
            if s.type is not None and s.type.timestamp_offset < 0 and s.positions is not None:
                s.ts_us = np.array([last_before(int(q)) for q in s.positions], dtype=np.int64)

    def _build_channels(self) -> None:
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
        all_schemas, channels, counts = self._channels_built
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
    @property
    def summary(self) -> Summary:
        if self._summary is None:
            self._summary = self._make_summary()
        return self._summary

    def _subscription(self, name: str, multi_id: int = 0) -> _Sub:
        if self._by_key is None:
            self._by_key = {}
            for x in self._subs:
                self._by_key.setdefault((x.sub.name, x.sub.multi_id), []).append(x)
        found = self._by_key.get((name, multi_id), [])
        if not found:
            known = sorted({f"{s.sub.name}/{s.sub.multi_id}" for s in self._subs})
            raise TopicNotFoundError(
                f"no topic {name!r} with multi_id {multi_id} (topics: {', '.join(known)})"
            )
        self._ensure_counts()
        with_data = [s for s in found if s.count]
        s = (with_data or found)[0]
        if s.positions is None and self._d_chunks is not None:  # not selected up front
            pos_chunks, sub_chunks = self._d_chunks
            found = [pc[sc == s.index] for pc, sc in zip(pos_chunks, sub_chunks)]
            s.positions = np.concatenate(found) if found else np.zeros(0, np.int64)
        return s

    def _release(self, start: int, end: int) -> None:
        """Tell the OS this process is done with the mapped pages in ``[start, end)`` for now
        (they stay in the page cache), so a full parse's resident memory stays near the
        size of what it builds instead of that plus the whole file.  Not done when topics are
        selected up front: their data is read again right after the scan, and faulting the
        pages back in would cost more than keeping them."""
        mm = getattr(self.source, "_buffer", None)
        if not isinstance(mm, mmap.mmap) or self._topics is not None:
            return
        page = mmap.PAGESIZE
        a = (start // page) * page
        b = min(end, self._size)
        if b <= a:
            return
        try:
            mm.madvise(mmap.MADV_DONTNEED, a, b - a)
        except (AttributeError, OSError, ValueError):
            pass

    def all_records(self) -> dict[tuple[str, int], np.ndarray]:
        """Every selected subscription's data as structured arrays, keyed ``(name, multi_id)``,
        gathered in one pass over the file in order (the full parse ``pyulog.ULog`` does)."""
        todo = [s for s in self._subs if s.selected and s._records is None and s.type is not None]
        outs: dict[int, np.ndarray] = {}
        for s in todo:
            assert s.type is not None
            n = 0 if s.positions is None else len(s.positions)
            outs[s.index] = np.empty(n, dtype=s.type.dtype)
        step = 1 << 22
        for a in range(self._data_start, self._size, step):
            b = a + step
            for s in todo:
                pos = s.positions
                assert s.type is not None
                width = s.type.dtype.itemsize
                if pos is None or not len(pos) or width == 0:
                    continue
                i0, i1 = np.searchsorted(pos, [a, b])
                if i1 > i0:
                    got = _gather(self._view, self._size, pos[i0:i1] + 5, np.dtype(f"V{width}"))
                    outs[s.index][i0:i1] = got.view(s.type.dtype)
            self._release(a, b)
        for s in todo:
            if s.type is not None and s.type.dtype.itemsize == 0:
                outs[s.index] = np.zeros(len(outs[s.index]), dtype=s.type.dtype)
            s._records = outs[s.index]
        out: dict[tuple[str, int], np.ndarray] = {}
        for s in self._subs:
            key = (s.sub.name, s.sub.multi_id)
            if s.selected and key not in out:
                out[key] = self.records(*key)
        return out

    def all_topic_columns(self, *, padding: bool = False) -> dict[tuple[str, int], dict[str, np.ndarray]]:
        """Columns of every selected topic instance (see :meth:`topic_columns`), built in
        one ordered pass: ``{(name, multi_id): {"timestamp": ..., "accel[0]": ...}}``."""
        self.all_records()
        out: dict[tuple[str, int], dict[str, np.ndarray]] = {}
        for s in self._subs:
            key = (s.sub.name, s.sub.multi_id)
            if s.selected and key not in out:
                out[key] = self.topic_columns(s.sub.name, s.sub.multi_id, padding=padding)
        return out

    def records(self, name: str, multi_id: int | str = 0) -> np.ndarray:
        """All data of one subscription as a numpy structured array (pyulog's flat fields);
        ``multi_id`` as an int or its decimal string."""
        s = self._subscription(name, _multi_id(multi_id))
        if s._records is None:
            assert s.type is not None
            dt = s.type.dtype
            pos = s.positions if s.positions is not None else np.zeros(0, np.int64)
            if dt.itemsize == 0 or len(pos) == 0:
                s._records = np.zeros(len(pos), dtype=dt)
            else:
                s._records = _gather(self._view, self._size, pos + 5, np.dtype(f"V{dt.itemsize}")).view(dt)
        return s._records

    def topic_columns(  # type: ignore[override]
        self,
        topic: str,
        multi_id: int | str | Sequence[str] | None = 0,
        fields: Sequence[str] | None = None,
        *,
        padding: bool = False,
        log_time: bool = False,
    ) -> dict[str, np.ndarray]:
        """One numpy array per flattened field (``timestamp``, ``accel[0]``, ``nested.x``),
        keyed exactly like pyulog's ``data`` dict.  ``_padding`` fields are left out unless
        ``padding=True``; ``log_time=True`` adds the log time in ns (``timestamp * 1000``).

        ``multi_id`` is the instance as an int or as the string found in
        ``channel.metadata["multi_id"]`` (``1`` and ``"1"`` are the same instance); a
        sequence of names in its place is taken as ``fields``."""
        if isinstance(multi_id, (list, tuple)):
            fields, multi_id = multi_id, 0
        mid = _multi_id(multi_id)
        if topic == LOG_TOPIC and not any(x.sub.name == LOG_TOPIC for x in self._subs):
            cols = self._log_columns()
            names = list(cols)
            if log_time:
                cols["log_time"] = np.minimum(cols["timestamp"], np.uint64(_MAX_US)).astype(np.int64) * 1000
        else:
            arr = self.records(topic, mid)
            s = self._subscription(topic, mid)
            assert s.type is not None
            names = s.type.column_names(padding=padding)
            cols = {n: arr[n] for n in (arr.dtype.names or ())}
            if log_time:
                cols["log_time"] = self._sub_times(s) * 1000
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

    def _log_columns(self) -> dict[str, np.ndarray]:
        """The logged strings as columns (the ``log_message`` channel)."""
        e = self._log_entries
        return {
            "timestamp": np.array([x[2] for x in e], dtype=np.uint64),
            "log_level": np.array([x[1] for x in e], dtype=np.uint8),
            "tag": np.array([-1 if x[3] is None else x[3] for x in e], dtype=np.int32),
            "message": np.array([rec.parse_string(x[4]) for x in e], dtype=object),
        }

    def to_pandas(  # type: ignore[override]
        self, topic: str, multi_id: int | str | Sequence[str] | None = 0, fields: Sequence[str] | None = None
    ) -> Any:
        """A ``pandas.DataFrame`` of one subscription indexed by ``log_time`` (int64 ns,
        ``timestamp * 1000``), like every other format's ``to_pandas``."""
        from polybag.codecs.columns import columns_to_pandas

        return columns_to_pandas(self.topic_columns(topic, multi_id, fields, log_time=True))

    def to_arrow(  # type: ignore[override]
        self, topic: str, multi_id: int | str | Sequence[str] | None = 0, fields: Sequence[str] | None = None
    ) -> Any:
        """A ``pyarrow.Table`` of one subscription with a ``log_time`` column (int64 ns), like
        every other format's ``to_arrow``."""
        from polybag.codecs.columns import columns_to_arrow

        return columns_to_arrow(self.topic_columns(topic, multi_id, fields, log_time=True))

    def messages(
        self,
        topics: TopicSelector = None,
        start: int | None = None,
        end: int | None = None,
        reverse: bool = False,
        order: str = "log_time",
    ) -> Iterator[Message]:
        check_order(order)
        chans = self._channels_built[1]
        wanted = topic_filter(topics, chans.values())
        sel = [s for s in self._subs if s.selected and (wanted is None or s.index in wanted)]
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
        self._u8 = np.zeros(0, np.uint8)
        for s in self._subs:
            s._records = None
        super().close()

    def _raise_damage(self) -> None:
        assert self._damage is not None
        off, msg, truncated = self._damage
        cls = TruncatedError if truncated else FormatError
        raise cls(
            msg + (" (open with recover=True to read past it)" if not truncated else ""), self.path, off
        )

    # --- info -------------------------------------------------------------------------------
    def _ensure_counts(self) -> None:
        """The data message count of every subscription (those of topics not selected up
        front are counted on first need)."""
        if not self._counts_pending or self._d_chunks is None:
            return
        self._counts_pending = False
        counts = _count_subs(self._d_chunks[1], len(self._subs))
        for s in self._subs:
            if s.positions is None:
                s.count = int(counts[s.index])

    def info_extras(self) -> dict[str, Any]:
        self._ensure_counts()
        u = self.ulog
        subs = []
        for s in self._subs:
            assert s.type is not None
            subs.append(
                {
                    "name": s.sub.name,
                    "multi_id": s.sub.multi_id,
                    "msg_id": s.sub.msg_id,
                    "message_size": s.type.min_size,
                    "count": s.count,
                }
            )
        return {
            "ulog_version": u.version,
            "start_timestamp_us": u.start_timestamp,
            "last_timestamp_us": u.last_timestamp,
            "duration_us": u.last_timestamp - u.start_timestamp,
            "compat_flags": list(u.compat_flags),
            "incompat_flags": list(u.incompat_flags),
            "appended_offsets": list(u.appended_offsets),
            "info": {k: (v.hex() if isinstance(v, bytes) else v) for k, v in u.info.items()},
            "info_multiple": {
                k: [[(x.hex() if isinstance(x, bytes) else x) for x in vs] for vs in v]
                for k, v in u.info_multiple.items()
            },
            "param_count": len(u.params),
            "default_param_counts": {str(k): len(v) for k, v in u.default_params.items()},
            "changed_param_count": len(u.changed_params),
            "logged_message_count": len(u.logged_messages),
            "dropouts": [{"timestamp_us": d.timestamp, "duration_ms": d.duration} for d in u.dropouts],
            "sync_count": u.sync_count,
            "subscriptions": subs,
            "corruptions": list(u.corruptions),
        }

    def info_text(self, verbose: bool = True) -> str:
        """What ``ulog_info -v`` prints: start, duration, dropouts, info, subscriptions."""
        u = self.ulog
        lines = []
        if u.file_corruption:
            lines.append("Warning: file has data corruption(s)")

        def hms(us: int) -> str:
            m, s = divmod(int(us / 1e6), 60)
            h, m = divmod(m, 60)
            return f"{h:d}:{m:02d}:{s:02d}"

        lines.append(
            f"Logging start time: {hms(u.start_timestamp)}, duration: {hms(u.last_timestamp - u.start_timestamp)}"
        )
        durs = [d.duration for d in u.dropouts]
        if not durs:
            lines.append("No Dropouts")
        else:
            lines.append(
                f"Dropouts: count: {len(durs)}, total duration: {sum(durs) / 1000.0:.1f} s, "
                f"max: {max(durs)} ms, mean: {int(sum(durs) / len(durs))} ms"
            )
        ver = u.version_info_str()
        if ver is not None:
            lines.append(f"SW Version: {ver}")
        lines.append("Info Messages:")
        for k in sorted(u.info):
            if verbose or not k.startswith("perf_"):
                lines.append(f" {k}: {u.info[k]}")
        if u.info_multiple:
            if verbose:
                lines.append("Info Multiple Messages:")
                for k in sorted(u.info_multiple):
                    lines.append(f" {k}: {u.info_multiple[k]}")
            else:
                lines.append(
                    "Info Multiple Messages: "
                    + ", ".join(f"[{k}: {len(u.info_multiple[k])}]" for k in sorted(u.info_multiple))
                )
        lines.append("")
        lines.append(
            "{:<41} {:7}, {:10}".format(
                "Name (multi id, message size in bytes)", "number of data points", "total bytes"
            )
        )
        self._ensure_counts()
        rows = [s for s in self._subs if s.count]
        rows.sort(key=lambda s: s.sub.name + str(s.sub.multi_id))
        for s in rows:
            assert s.type is not None
            size = s.type.min_size
            cnt = s.count
            name_id = f"{s.sub.name} ({s.sub.multi_id}, {size})"
            lines.append(f" {name_id:<40} {cnt:7d} {size * cnt:10d}")
        return "\n".join(lines)


def open_ulog(
    source: Source,
    path: str | None = None,
    *,
    recover: bool = False,
    topics: TopicSelector = None,
    **opts: Any,
) -> UlogReader:
    """Opener registered in :data:`polybag.formats.sniff.READERS`."""
    from polybag.compression import max_chunk_bytes

    # ULog has no compression: the chunk cap is accepted (checked) and has nothing to bound
    max_chunk_bytes(opts.pop("max_chunk_bytes", None))
    unknown = set(opts) - {"warn"}
    if unknown:
        raise TypeError(f"unknown ULog reader options: {', '.join(sorted(unknown))}")
    return UlogReader(source, path, recover=recover, topics=topics, **opts)
