"""MCAP reading: indexed (footer -> summary -> chunk and message indexes) and streamed.

One reader class serves both sources.  A :class:`~polybag.source.MappedSource` with a
usable summary is read through its indexes: only the chunks that can hold a wanted message
are read, each decompressed whole and walked with one precompiled struct per record.
Without a summary (or with ``recover=True``) the same chunks are found by a linear scan of
the top-level records, which gives the same answers.  A :class:`~polybag.source.StreamSource`
is read strictly forward in file order (``order="file"``); log-time order and reverse need
the whole file, so a stream is then read into memory first (chunks stay compressed until
used).

Messages are parsed in bulk: the record offsets of a chunk come from its Message Index
records (or one tight loop over record heads), the fixed heads of all its messages are
gathered into a numpy structured array, and filtering and sorting happen there; Python code
runs once per message only to create the :class:`~polybag.model.Message`.

Log-time order is a lazy merge of per-chunk sorted runs: chunks are loaded in order of
their start time, and a heap is used only while chunks overlap.

Trusting indexes.  Chunk times (in the Chunk Index and again in the Chunk record's header)
and Message Index entries are claims that a damaged or badly written file may get wrong.
``messages()`` in log-time order is always sorted (ties in file order) and holds exactly
the file's matching messages as far as these checks reach:

* Before anything is read, every Chunk Index is compared with its Chunk record's header
  (no decompression; skipped when the summary's CRC is checked: the summary is then as
  written, so a damaged index cannot pass), and for a log-time merge the Message Index times of the chunks to
  be read are compared with their chunk's claimed range.
* Every chunk that is read is checked against its claims: a message outside the claimed
  range is a lie.  Message Index entries are checked against the records they point at
  (log time with a time window, channel with a topic filter; when every message is read,
  that the listed records tile the chunk); an entry that disagrees, repeats or (in a
  full read) misses a record makes the chunk be walked record by record instead.
* On a lie, the reader warns (:class:`McapIndexWarning`) and from then on uses each
  chunk's real log-time range, found by reading every chunk once (without Message
  Indexes); the remaining merge goes on with those.  A lie found only after messages that
  it put out of order were returned (the chunk's index, header and Message Index all agree
  on wrong times) raises :class:`~polybag.errors.FormatError`; calling ``messages()``
  again on the same reader is then correct.
* Chunk times that pass these checks are trusted to *skip* chunks outside a start/end
  window, and a Chunk Index's channel list to skip chunks without a wanted topic; a chunk
  with no times (0, 0) is never skipped.  Message Indexes are trusted to list every
  message of the channels they name when only some channels are read.
* ``recover=True`` trusts no chunk time at all: every chunk's real range is found first
  (each chunk is decompressed twice); the summary is ignored as before.

Redefined ids.  A Schema/Channel id defined again with different content (the spec forbids
it) is read as written: each message gets the channel in force where it lies, and each later
version is a model channel of its own (see :class:`_Census`); ``definition_problems`` lists
them for ``check``.  Streams follow the definitions as they come.  A mapped file builds the
timeline of every definition (one pass over the chunks) as soon as one is known: from a
summary that holds two versions or counts more Channel records than ids, from the top-level
records a scan meets, from the chunks a read opens (every chunk without a summary, read in
file order of definitions; the chunks of a complete read or a time window with one), or for a
topic filter that matches none of the summary's channels.  A summary that names one version
per id is otherwise believed by topic-filtered reads and by the summary (which never
decompresses a chunk), as the mcap library's indexed reader does.
"""

from __future__ import annotations

import bisect
import gc
import heapq
import struct
import warnings
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

import numpy as np

from polybag import compression
from polybag.errors import (
    ChecksumError,
    FormatError,
    PolybagError,
    PolybagWarning,
    TruncatedError,
    UnsupportedError,
)
from polybag.formats.mcap import records as R
from polybag.formats.mcap.records import (
    CHUNK_HEAD,
    FOOTER_RECORD_LEN,
    MAGIC,
    MESSAGE_HEAD_LEN,
    RECORD_HEAD,
    RECORD_MESSAGE_HEAD,
    RECORD_MESSAGE_HEAD_LEN,
    U16,
    U32,
    U64,
    Opcode,
)
from polybag.model import Attachment, Channel, ChunkInfo, Message, Metadata, Schema, Summary
from polybag.reader import Reader, TopicSelector, check_order, topic_filter
from polybag.source import MappedSource, Source, StreamSource

_LOG_TIME = attrgetter("log_time")
_MAX_TIME = (1 << 64) - 1
_INT64_MAX = (1 << 63) - 1
_NEG_LOG_TIME: Callable[[Message], int] = lambda m: -m.log_time  # noqa: E731
_OP_MESSAGE = int(Opcode.MESSAGE)
_OP_SCHEMA = int(Opcode.SCHEMA)
_OP_CHANNEL = int(Opcode.CHANNEL)
_OP_CHUNK = int(Opcode.CHUNK)
_OP_MESSAGE_INDEX = int(Opcode.MESSAGE_INDEX)
_OP_DATA_END = int(Opcode.DATA_END)
_OP_FOOTER = int(Opcode.FOOTER)
_OP_HEADER = int(Opcode.HEADER)
_OP_ATTACHMENT = int(Opcode.ATTACHMENT)
_OP_METADATA = int(Opcode.METADATA)

CHUNK_INDEX_DTYPE = np.dtype(
    [
        ("start", "<u8"),
        ("end", "<u8"),
        ("offset", "<u8"),
        ("length", "<u8"),
        ("mi_length", "<u8"),
        ("compressed_size", "<u8"),
        ("uncompressed_size", "<u8"),
    ]
)
_MI_DTYPE = np.dtype(R.MESSAGE_INDEX_DTYPE)


# one message record head as a packed numpy record (31 bytes), for bulk parsing
_REC_DTYPE = np.dtype(
    [("op", "u1"), ("len", "<u8"), ("cid", "<u2"), ("seq", "<u4"), ("lt", "<u8"), ("pt", "<u8")]
)
_AR31 = np.arange(RECORD_MESSAGE_HEAD_LEN, dtype=np.int64)
_COPY_BELOW = 4096  # average payloads smaller than this are copied (cheaper than views)


class McapIndexWarning(PolybagWarning):
    """An MCAP file's chunk times (Chunk Index or Chunk header) disagree with its messages."""


class _NeedSlowPath(Exception):
    """A chunk with unusual records (short messages): use the record-by-record walk."""


def _record_offsets(buf: bytes | memoryview) -> list[int]:
    """Offsets of every record in a decompressed chunk; _Bad if the records do not tile it."""
    head = RECORD_HEAD.unpack_from
    pos = 0
    n = len(buf)
    offs: list[int] = []
    app = offs.append
    try:
        while pos < n:
            _op, ln = head(buf, pos)
            app(pos)
            pos += 9 + ln
    except struct.error:
        raise _Bad(pos, f"record header needs 9 bytes, chunk has {n - pos} left") from None
    if pos != n:
        last = offs[-1]
        raise _Bad(last, f"record declares {pos - last - 9} bytes, chunk has {n - last - 9} left")
    return offs


def _bulk_heads(
    buf: bytes | memoryview,
    offs: np.ndarray,
    channels: dict[int, Channel],
    want: set[int] | None,
    start: int | None,
    end: int | None,
    sort: bool,
    expect_cid: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The wanted message record heads at ``offs`` (int64, file order), parsed in bulk.

    Returns (heads as a ``_REC_DTYPE`` array, their record offsets), filtered by channel
    and time, in log-time order (stable) if ``sort``.  ``expect_cid`` are the channel ids
    a Message Index gave for ``offs``: a record on another channel means the index lies
    (:class:`_NeedSlowPath`: the chunk is walked instead).
    """
    n = len(buf)
    if not len(offs):
        return np.zeros(0, _REC_DTYPE), offs
    if int(offs.max()) + RECORD_MESSAGE_HEAD_LEN > n or int(offs.min()) < 0:
        raise _NeedSlowPath
    a = np.frombuffer(buf, np.uint8)
    k = len(offs)
    step = int(offs[1] - offs[0]) if k > 1 else 0
    if step >= RECORD_MESSAGE_HEAD_LEN and bool((np.diff(offs) == step).all()):
        # records at a constant stride (one channel, equal sizes): rows of a strided view
        o0 = int(offs[0])
        heads = np.lib.stride_tricks.as_strided(a[o0:], (k, RECORD_MESSAGE_HEAD_LEN), (step, 1), writeable=False)
        rec = np.ascontiguousarray(heads).view(_REC_DTYPE)[:, 0]
    else:
        rec = a[offs[:, None] + _AR31].view(_REC_DTYPE)[:, 0]
    ln = rec["len"]
    if not bool(np.all(rec["op"] == 5)) or not bool(np.all(ln >= 22)):
        raise _NeedSlowPath
    if expect_cid is not None and not np.array_equal(rec["cid"], expect_cid):
        raise _NeedSlowPath
    room = (n - 9 - offs).astype(np.uint64)
    over = ln > room
    if bool(over.any()):
        i = int(np.argmax(over))
        raise _Bad(int(offs[i]), f"message declares {int(ln[i])} bytes, chunk has {int(room[i])} left")
    mask = None
    if start is not None:
        mask = rec["lt"] >= np.uint64(max(start, 0))
    if end is not None:
        m2 = rec["lt"] < np.uint64(min(max(end, 0), (1 << 64) - 1))
        mask = m2 if mask is None else mask & m2
    if want is not None:
        # a channel not defined yet must be found before it can be matched by topic
        for c in np.unique(rec["cid"]).tolist():
            if c not in channels:
                raise _UnknownChannel(c, 0)
        if len(want) == 1:
            m3 = rec["cid"] == np.uint16(next(iter(want)))
        else:
            m3 = np.isin(rec["cid"], np.fromiter(want, np.uint16, len(want)))
        mask = m3 if mask is None else mask & m3
    if mask is not None:
        rec = rec[mask]
        offs = offs[mask]
    if sort and len(rec) > 1:
        lt = rec["lt"]
        if not bool(np.all(lt[1:] >= lt[:-1])):
            o = np.argsort(lt, kind="stable")
            rec = rec[o]
            offs = offs[o]
    return rec, offs


def _bulk_messages(
    buf: bytes | memoryview,
    offs: np.ndarray,
    channels: dict[int, Channel],
    want: set[int] | None,
    start: int | None,
    end: int | None,
    sort: bool,
    expect_cid: np.ndarray | None = None,
) -> list[Message]:
    """Messages whose records start at ``offs`` (int64, file order), parsed in bulk with numpy."""
    rec, offs = _bulk_heads(buf, offs, channels, want, start, end, sort, expect_cid)
    if not len(offs):
        return []
    lens = rec["len"].astype(np.int64)
    starts = (offs + RECORD_MESSAGE_HEAD_LEN).tolist()
    ends = (offs + 9 + lens).tolist()
    cids = rec["cid"].tolist()
    try:
        chans = list(map(channels.__getitem__, cids))
    except KeyError as e:
        raise _UnknownChannel(e.args[0], 0) from None
    src = buf if isinstance(buf, memoryview) or int(lens.sum()) < _COPY_BELOW * len(lens) else memoryview(buf)
    was = gc.isenabled()
    gc.disable()
    try:
        data = list(map(src.__getitem__, map(slice, starts, ends)))
        return list(map(Message, chans, rec["lt"].tolist(), rec["pt"].tolist(), rec["seq"].tolist(), data))
    finally:
        if was:
            gc.enable()


@dataclass
class _Batch:
    """The wanted payloads of one segment (for :meth:`McapReader.topic_payloads`).

    ``lt``, ``starts`` and ``sizes`` are in log-time order (stable); the payloads lie in
    ``buf`` (the decompressed chunk) at ``starts``.
    """

    lt: np.ndarray  # uint64
    buf: np.ndarray  # uint8
    starts: np.ndarray  # int64
    sizes: np.ndarray  # int64


def _pack(a: np.ndarray, starts: np.ndarray, sizes: np.ndarray, out: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Copy the payloads ``a[starts[i]:starts[i] + sizes[i]]`` back to back: (blob, new starts).

    The blob holds them in the order of ``starts`` (file order); the new starts are in the
    order given.  Payloads must not overlap.  Equal sizes at a constant stride (one
    channel's records) are copied as the rows of a strided view; otherwise a byte mask
    selects them.  ``out`` (uint8, ``sizes.sum()`` long) receives the blob if given.
    """
    n = len(starts)
    if out is None:
        out = np.empty(int(sizes.sum()) if n else 0, np.uint8)
    if n == 0:
        return out, np.zeros(0, np.int64)
    if n > 1 and not bool(np.all(starts[1:] >= starts[:-1])):
        o = np.argsort(starts, kind="stable")
        blob, packed = _pack(a, starts[o], sizes[o], out)
        back = np.empty_like(packed)
        back[o] = packed
        return blob, back
    new = np.zeros(n, np.int64)
    np.cumsum(sizes[:-1], out=new[1:])
    s0 = int(starts[0])
    size0 = int(sizes[0])
    if bool((sizes == size0).all()):
        step = int(starts[1] - starts[0]) if n > 1 else size0
        if n == 1 or bool((np.diff(starts) == step).all()):
            rows = np.lib.stride_tricks.as_strided(a[s0:], shape=(n, size0), strides=(step, 1), writeable=False)
            out.reshape(n, size0)[...] = rows
            return out, new
    d = np.zeros(len(a) + 1, np.int8)
    nz = sizes > 0  # the others add nothing (and may share a start with the next payload)
    d[starts[nz]] += 1
    d[(starts + sizes)[nz]] -= 1
    mask = np.cumsum(d[:-1], dtype=np.int8).view(np.bool_)
    np.compress(mask, a, out=out)
    return out, new


def _batch_from_heads(buf: bytes | memoryview, rec: np.ndarray, offs: np.ndarray) -> _Batch:
    """A batch from the record heads (and offsets) :func:`_bulk_heads` selected."""
    starts = offs + RECORD_MESSAGE_HEAD_LEN
    sizes = rec["len"].astype(np.int64) - (RECORD_MESSAGE_HEAD_LEN - 9)
    return _Batch(rec["lt"].astype(np.uint64), np.frombuffer(buf, np.uint8), starts, sizes)


def _batch_from_messages(msgs: list[Message]) -> _Batch:
    """A batch from messages the record-by-record walk produced (unusual or damaged chunks)."""
    n = len(msgs)
    sizes = np.fromiter((len(m.data) for m in msgs), np.int64, n)
    starts = np.zeros(n, np.int64)
    if n:
        np.cumsum(sizes[:-1], out=starts[1:])
    buf = np.frombuffer(b"".join(bytes(m.data) for m in msgs), np.uint8)
    return _Batch(np.fromiter((m.log_time for m in msgs), np.uint64, n), buf, starts, sizes)


_AR_LEN = np.arange(1, 9, dtype=np.int64)
_AR8 = np.arange(8, dtype=np.int64)
_AR16 = np.arange(16, dtype=np.int64)


def _defs_between_messages(buf: bytes | memoryview, offs: np.ndarray, defs: Callable[[int, int, int], None]) -> bool:
    """Register the Schema/Channel records lying between the message records at ``offs``.

    False when the offsets do not tile the chunk consistently (then walk it whole).
    """
    n = len(buf)
    if not len(offs):
        _walk_defs(buf, defs)
        return True
    if int(offs[0]) < 0 or int(offs[-1]) + 9 > n:
        return False
    a = np.frombuffer(buf, np.uint8)
    lens = a[offs[:, None] + _AR_LEN].view("<u8")[:, 0]
    if bool((lens > np.uint64(n)).any()):
        return False
    ends = offs + 9 + lens.astype(np.int64)
    starts = np.concatenate(([0], ends))
    stops = np.concatenate((offs, [n]))
    if bool((starts > stops).any()):
        return False
    head = RECORD_HEAD.unpack_from
    for g0, g1 in zip(starts[starts < stops].tolist(), stops[starts < stops].tolist()):
        pos = g0
        while pos < g1:
            if pos + 9 > g1:
                return False
            op, ln = head(buf, pos)
            e = pos + 9 + ln
            if e > g1 or op == 5:
                return False  # a message the index does not list: the index is incomplete
            if op == 3 or op == 4:
                defs(op, pos, e)
            pos = e
    return True


def _u64_at(buf: bytes | memoryview, pos: np.ndarray) -> np.ndarray:
    """The little-endian u64 at each (int64) byte offset ``pos`` of ``buf`` (``pos + 16 <= len(buf)``
    rounded down to whole words must hold): two aligned words shifted together."""
    words = np.frombuffer(buf, "<u8", count=len(buf) // 8)
    q = pos >> 3
    r = (pos & 7).astype(np.uint64) * np.uint64(8)
    lo = words[q]
    hi = words[np.minimum(q + 1, len(words) - 1)]
    with np.errstate(over="ignore"):
        return np.where(r == 0, lo, (lo >> r) | (hi << (np.uint64(64) - r)))


def _positions_from_index_records(bodies: list[bytes], n: int) -> np.ndarray | None:
    """Message offsets (sorted) from Message Index record bodies that followed a chunk."""
    parts = []
    for body in bodies:
        if len(body) < 6:
            return None
        rlen = U32.unpack_from(body, 2)[0]
        if rlen % 16 or 6 + rlen > len(body):
            return None
        parts.append(np.frombuffer(body, _MI_DTYPE, count=rlen // 16, offset=6)["offset"])
    if not parts:
        return None
    pos = np.sort(np.concatenate(parts)) if len(parts) > 1 else np.sort(parts[0])
    if len(pos) and (int(pos[-1]) >= n or (len(pos) > 1 and not bool(np.all(pos[1:] > pos[:-1])))):
        return None
    return pos.astype(np.int64)


class _UnknownChannel(Exception):
    def __init__(self, cid: int, pos: int) -> None:
        self.cid = cid
        self.pos = pos


# --- redefined ids -------------------------------------------------------------------------
# The spec wants every Schema/Channel id defined once per file (repeats identical).  A file
# that redefines one anyway (a recorder restarted into the same file, a naive concatenation)
# is read as written: each message gets the channel in force where it lies, i.e. the last
# Channel record with its id before it in file order (bound to the last Schema record of
# its schema id before it).  Each later version of an id becomes a channel (or schema) of its
# own in the model: id ``file id + 65536 * k`` for the k-th redefinition; the first keeps the
# file id, so files without redefinitions read exactly as before.
_VERSION_STEP = 1 << 16
_FILE_ID = _VERSION_STEP - 1  # mask: internal id -> the id in the file

Where = tuple[int, int]  # (top-level record offset, offset inside its chunk or -1)


class _Redefined(Exception):
    """A definition changed an id while reading out of file order: build the timeline first."""


@dataclass
class _Census:
    """Every definition of the data section in file order (built once a redefinition is known).

    ``versions``: file channel id -> [(where it takes effect, channel)], the first version at
    (-1, -1); ids defined once are not listed.  ``inside``: chunk offset -> [(record offset,
    file channel id, channel)] for versions taking effect inside that chunk.
    """

    versions: dict[int, list[tuple[Where, Channel]]]
    keys: dict[int, list[Where]]
    inside: dict[int, list[tuple[int, int, Channel]]]
    channels: list[Channel]  # every version of every channel
    schemas: dict[int, Schema]  # every version of every schema, by internal id

    def at(self, cid: int, where: Where) -> Channel:
        """The version of ``cid`` (which has several) in force just before ``where``."""
        i = bisect.bisect_left(self.keys[cid], where) - 1
        return self.versions[cid][max(i, 0)][1]

    def map_at(self, chunk: int, base: dict[int, Channel]) -> dict[int, Channel]:
        """``base`` (first versions) with the versions in force at the start of the chunk at ``chunk``."""
        m = dict(base)
        for cid in self.versions:
            m[cid] = self.at(cid, (chunk, -1))
        return m


def _same_record(a: R.ChannelRecord, b: R.ChannelRecord) -> bool:
    """Whether two Channel records define the same channel (a repeat, allowed by the spec)."""
    return (
        a.schema_id == b.schema_id
        and a.topic == b.topic
        and a.message_encoding == b.message_encoding
        and a.metadata == b.metadata
    )


def _same_meaning(a: Channel, b: Channel) -> bool:
    """Whether two versions of a channel read alike (everything but the internal id)."""
    sa, sb = a.schema, b.schema
    return (
        a.topic == b.topic
        and a.message_encoding == b.message_encoding
        and dict(a.metadata) == dict(b.metadata)
        and (sa is None) == (sb is None)
        and (sa is None or sb is None or (sa.name, sa.encoding, bytes(sa.data)) == (sb.name, sb.encoding, bytes(sb.data)))
    )


def _walk_versions(
    buf: bytes | memoryview,
    chans: dict[int, Channel],
    changes: list[tuple[int, int, Channel]],
    out: list[Message],
    want: set[int] | None,
    start: int | None,
    end: int | None,
) -> None:
    """Record by record, each message with the channel in force at it (chunks that redefine
    an id): ``chans`` at the chunk's start, then each ``(record offset, file channel id,
    channel)`` of ``changes`` from its record on.  ``want`` holds internal channel ids."""
    chans = dict(chans)
    view = memoryview(buf)
    n = len(buf)
    head = RECORD_HEAD.unpack_from
    mhead = R.MESSAGE_HEAD.unpack_from
    lo = -1 if start is None else start
    hi = 1 << 64 if end is None else end
    pos = j = 0
    nc = len(changes)
    while pos < n:
        while j < nc and changes[j][0] <= pos:
            chans[changes[j][1]] = changes[j][2]
            j += 1
        if pos + 9 > n:
            raise _Bad(pos, f"record header needs 9 bytes, chunk has {n - pos} left")
        op, ln = head(buf, pos)
        e = pos + 9 + ln
        if e > n:
            raise _Bad(pos, f"record (opcode 0x{op:02x}) declares {ln} bytes, chunk has {n - pos - 9} left")
        if op == 5:
            data: bytes | memoryview
            if ln >= MESSAGE_HEAD_LEN:
                cid, seq, lt, pt = mhead(buf, pos + 9)
                data = view[pos + 31 : e]
            else:
                rec = R.parse_record(5, buf, pos + 9, e)
                assert isinstance(rec, R.MessageRecord)
                cid, seq, lt, pt, data = rec.channel_id, rec.sequence, rec.log_time, rec.publish_time, b""
            if lo <= lt < hi:
                ch = chans.get(cid)
                if ch is None:
                    raise _UnknownChannel(cid, pos)
                if want is None or ch.id in want:
                    out.append(Message(ch, lt, pt, seq, data))
        pos = e


# --- chunk walking: the hot loops ----------------------------------------------------------
def _walk_filtered(
    buf: bytes,
    channels: dict[int, Channel],
    out: list[Message],
    defs: Callable[[int, int, int], None],
    want: set[int] | None,
    start: int | None,
    end: int | None,
) -> None:
    """Record by record: messages on channels in ``want`` with ``start <= t < end`` (file order).

    The fallback for chunks the bulk path cannot take (short or damaged records).
    """
    view = memoryview(buf)
    n = len(buf)
    pos = 0
    unpack = RECORD_MESSAGE_HEAD.unpack_from
    append = out.append
    M = Message
    lo = -1 if start is None else start
    hi = 1 << 64 if end is None else end
    limit = n - RECORD_MESSAGE_HEAD_LEN
    while pos < n:
        if pos <= limit:
            op, ln, cid, seq, lt, pt = unpack(buf, pos)
        else:
            op, ln = _short_head(buf, pos, n)
        e = pos + 9 + ln
        if e > n:
            raise _Bad(pos, f"record (opcode 0x{op:02x}) declares {ln} bytes, chunk has {n - pos - 9} left")
        if op == 5 and ln >= 22:
            if lo <= lt < hi and (want is None or cid in want or cid not in channels):
                try:
                    ch = channels[cid]
                except KeyError:
                    raise _UnknownChannel(cid, pos) from None
                append(M(ch, lt, pt, seq, view[pos + 31 : e]))
        elif op == 3 or op == 4 or op == 5:
            defs(op, pos, e)
            if op == 5:
                _append_short_message(buf, pos, e, channels, out, want, start, end)
        pos = e


def _walk_defs(buf: bytes, defs: Callable[[int, int, int], None], pos: int = 0, n: int | None = None) -> None:
    """Only the Schema and Channel records of a chunk (or of ``buf[pos:n]``)."""
    if n is None:
        n = len(buf)
    head = RECORD_HEAD.unpack_from
    while pos < n:
        if pos + 9 > n:
            raise _Bad(pos, f"record header needs 9 bytes, chunk has {n - pos} left")
        op, ln = head(buf, pos)
        e = pos + 9 + ln
        if e > n:
            raise _Bad(pos, f"record (opcode 0x{op:02x}) declares {ln} bytes, chunk has {n - pos - 9} left")
        if op == 3 or op == 4:
            defs(op, pos, e)
        pos = e


def _walk_defs_quiet(buf: bytes, defs: Callable[[int, int, int], None]) -> None:
    """:func:`_walk_defs` up to any damage (reading the chunk reports it)."""
    try:
        _walk_defs(buf, defs)
    except _Bad:
        pass


def _count_chunk(buf: bytes, counts: dict[int, int], defs: Callable[[int, int, int], None]) -> tuple[int, int, int]:
    """Count messages per channel; registers definitions.  Returns (count, min, max) log time."""
    n = len(buf)
    pos = 0
    unpack = RECORD_MESSAGE_HEAD.unpack_from
    limit = n - RECORD_MESSAGE_HEAD_LEN
    total = 0
    lo = 1 << 64
    hi = -1
    while pos < n:
        if pos <= limit:
            op, ln, cid, _seq, lt, _pt = unpack(buf, pos)
        else:
            op, ln = _short_head(buf, pos, n)
            cid = lt = 0
            if op == 5:
                rec = R.parse_record(5, buf, pos + 9, min(n, pos + 9 + ln))
                assert isinstance(rec, R.MessageRecord)
                cid, lt = rec.channel_id, rec.log_time
        e = pos + 9 + ln
        if e > n:
            raise _Bad(pos, f"record (opcode 0x{op:02x}) declares {ln} bytes, chunk has {n - pos - 9} left")
        if op == 5:
            if ln < 22:
                rec = R.parse_record(5, buf, pos + 9, e)
                assert isinstance(rec, R.MessageRecord)
                cid, lt = rec.channel_id, rec.log_time
            counts[cid] = counts.get(cid, 0) + 1
            total += 1
            if lt < lo:
                lo = lt
            if lt > hi:
                hi = lt
        elif op == 3 or op == 4:
            defs(op, pos, e)
        pos = e
    return total, lo, hi


def _short_head(buf: bytes, pos: int, n: int) -> tuple[int, int]:
    if pos + 9 > n:
        raise _Bad(pos, f"record header needs 9 bytes, chunk has {n - pos} left")
    op, ln = RECORD_HEAD.unpack_from(buf, pos)
    return op, ln


def _append_short_message(
    buf: bytes,
    pos: int,
    e: int,
    channels: dict[int, Channel],
    out: list[Message],
    want: set[int] | None,
    start: int | None,
    end: int | None,
) -> None:
    """A message record shorter than its fixed head: missing fields are zero."""
    rec = R.parse_record(5, buf, pos + 9, e)
    assert isinstance(rec, R.MessageRecord)
    if want is not None and rec.channel_id not in want:
        return
    if (start is not None and rec.log_time < start) or (end is not None and rec.log_time >= end):
        return
    ch = channels.get(rec.channel_id)
    if ch is None:
        raise _UnknownChannel(rec.channel_id, pos)
    out.append(Message(ch, rec.log_time, rec.publish_time, rec.sequence, b""))


class _Partial(Exception):
    """A loader met damage: ``msgs`` are the intact messages before it, ``err`` the error."""

    def __init__(self, msgs: list[Message], err: PolybagError) -> None:
        self.msgs = msgs
        self.err = err


class _Bad(Exception):
    """Damage inside a chunk at ``pos`` (relative to the chunk's records)."""

    def __init__(self, pos: int, what: str) -> None:
        self.pos = pos
        self.what = what


# --- merging -------------------------------------------------------------------------------
Segment = tuple[int, int, Callable[[], list[Message]]]  # (start key, rank, loader)
# (claimed smallest key, claimed largest key, rank, loader): one run for _merge
Run = tuple[int, int, int, Callable[[], list[Message]]]


class _OutOfOrder(Exception):
    """A run held a message that sorts before one already yielded (its claims lied)."""

    def __init__(self, rank: int, key: int) -> None:
        self.rank = rank
        self.key = key


def _merge(
    runs: list[Run],
    key: Callable[[Message], int],
    replan: Callable[[set[int], int], list[Run]] | None = None,
    redefined: Callable[[set[int], bool], list[Run]] | None = None,
) -> Iterator[Message]:
    """Merge runs sorted by ``key``; ``runs`` come sorted by (claimed smallest key, rank).

    A run is loaded only when the smallest pending message is not smaller than its claimed
    smallest key, so non-overlapping chunks stream one at a time and ties keep the rank
    order.  The claims come from indexes and may lie: every loaded run is checked against
    them.  When one lies, ``replan`` (given the ranks loaded so far and the liar's) returns the runs still
    to load with true claims, and merging goes on with those; a run holding a message
    that sorts before one already yielded raises :class:`_OutOfOrder` (that output can no
    longer be put right).  When a load meets a redefined id (:class:`_Redefined`),
    ``redefined`` (given the ranks loaded so far and whether nothing was yielded yet) returns
    the runs to load instead; with nothing yielded the merge starts over.
    """
    heap: list[tuple[int, int, int, list[Message]]] = []
    push = heapq.heappush
    i = 0
    n = len(runs)
    done: set[int] = set()
    last_k = last_r = -(1 << 70)  # the last message yielded (key, rank)
    while True:
        while i < n and (not heap or runs[i][0] <= heap[0][0]):
            c0, c1, r, load = runs[i]
            i += 1
            try:
                msgs = load()
            except _Redefined:
                if redefined is None:
                    raise
                fresh = last_k == -(1 << 70)
                runs = redefined(done, fresh)
                if fresh:
                    heap.clear()
                    done.clear()
                i = 0
                n = len(runs)
                continue
            done.add(r)
            if not msgs:
                continue
            k0 = key(msgs[0])
            if k0 < last_k or (k0 == last_k and r < last_r):
                raise _OutOfOrder(r, k0)
            if replan is not None and (k0 < c0 or key(msgs[-1]) > c1):
                runs = replan(done, r)
                replan = None
                i = 0
                n = len(runs)
            push(heap, (k0, r, 0, msgs))
        if not heap:
            return
        if len(heap) == 1:
            _k, r, j, msgs = heap[0]
            if i >= n or key(msgs[-1]) < runs[i][0]:
                heap.clear()
                last_k = key(msgs[-1])
                last_r = r
                if j == 0:
                    yield from msgs
                else:
                    yield from msgs[j:]
                continue
        last_k, last_r, j, msgs = heap[0]
        yield msgs[j]
        j += 1
        if j < len(msgs):
            heapq.heapreplace(heap, (key(msgs[j]), last_r, j, msgs))
        else:
            heapq.heappop(heap)


# --- the reader ------------------------------------------------------------------------------
@dataclass
class _ScanResult:
    """What a linear scan of the top-level records of a mapped file found."""

    chunks: list[tuple[int, int, int, int]] = field(default_factory=list)  # (offset, length, start, end)
    chunk_ranks: list[int] = field(default_factory=list)
    loose: list[tuple[int, int, int, list[int]]] = field(default_factory=list)  # (rank, start, end, offsets)
    attachments: list[int] = field(default_factory=list)
    metadata: list[int] = field(default_factory=list)
    data_end: int | None = None
    footer: int | None = None
    error: PolybagError | None = None
    bytes_skipped: int = 0
    errors: list[str] = field(default_factory=list)
    statistics: R.Statistics | None = None


class McapReader(Reader):
    """Reads an MCAP file or stream.  Use :func:`open_mcap` (or ``polybag.open``)."""

    format = "mcap"

    def __init__(
        self,
        source: Source,
        path: str | None = None,
        *,
        validate_crcs: bool = True,
        recover: bool = False,
        max_chunk_bytes: int | None = None,
    ) -> None:
        super().__init__(source, path)
        self.validate_crcs = validate_crcs
        # what one chunk may decompress to (None: the process-wide cap, 512 MiB by default)
        self.max_chunk_bytes = compression.max_chunk_bytes(max_chunk_bytes)
        self.recover = recover
        self.recovery_report: dict[str, Any] | None = None
        self._header_errors: list[str] = []  # recover: a damaged Header record, reported with the rest
        self.header = R.Header()
        self.footer: R.Footer | None = None
        self.statistics: R.Statistics | None = None
        self.schemas: dict[int, Schema] = {}
        self._channels: dict[int, Channel] = {}
        self._live_wants: list[tuple[TopicSelector, set[int]]] = []
        self._channel_records: dict[int, R.ChannelRecord] = {}
        self.chunk_indexes: list[R.ChunkIndex] = []
        self._ci_array: np.ndarray | None = None
        self.attachment_indexes: list[R.AttachmentIndex] = []
        self.metadata_indexes: list[R.MetadataIndex] = []
        self.summary_offsets: list[R.SummaryOffset] = []
        self.has_summary = False
        self.summary_error: str | None = None
        self._summary_crc_error: ChecksumError | None = None
        self._summary: Summary | None = None
        self._scan_result: _ScanResult | None = None
        self._defs_scanned = 0  # chunks of the scan/index whose definitions were registered
        self._stream_used = False
        self._header_end = 0
        # chunk times from indexes and Chunk headers are claims: once one is caught lying
        # (or when recovering) every chunk's real range is found by reading it
        self._verify = recover
        self._index_checked = False
        self._true_ranges: dict[int, tuple[int, int] | None] = {}
        self._quiet = False  # finding real ranges: damage is reported by the real read
        self._muted = 0
        # redefined ids (see _Census): problems found, versions applied in file order
        # (streams, the census walk), and the timeline once one is known
        self.definition_problems: list[str] = []
        self._census: _Census | None = None
        self._need_census = False  # a redefinition (or a hint of one) was seen: build the census
        self._noting = 0  # > 0: a conflict only sets _need_census (summary, scan)
        self._census_walk = False
        self._changes: list[tuple[Where, int, Channel, Channel]] = []  # (where, file id, old, new)
        self._schema_changes: list[tuple[Where, int, Schema, Schema]] = []
        self._nversions: dict[tuple[int, int], int] = {}
        self._def_where: dict[tuple[int, int], Where | None] = {}  # (opcode, id) -> where in force
        self._seq_where: Where = (-1, -1)  # sequential reading: the last definition applied
        self._summary_records: list[R.SchemaRecord | R.ChannelRecord] = []
        self._first_records: dict[int, R.ChannelRecord] = {}  # of redefined channels
        # what one read loaded: (first, last offset, whether its definitions were all registered)
        self._loaded: list[tuple[int, int, bool]] = []
        if isinstance(source, MappedSource):
            self._open_mapped()
        else:
            self._open_stream()

    # --- opening -------------------------------------------------------------------------------
    def _err(self, cls: type[FormatError], what: str, offset: int | None) -> FormatError:
        return cls(what, self.path, offset)

    def _check_magic(self, head: bytes) -> None:
        if len(head) < 8:
            if MAGIC.startswith(head):
                raise self._err(TruncatedError, f"expected 8 bytes of MCAP magic, file has {len(head)}", 0)
            raise self._err(FormatError, f"not an MCAP file: starts with {head!r}", 0)
        if head[:5] != MAGIC[:5]:
            raise self._err(FormatError, f"not an MCAP file: starts with {head!r}", 0)
        if head != MAGIC:
            raise UnsupportedError(f"{self.path}: MCAP major version {chr(head[5])!r} is not supported (only '0')")

    def _open_mapped(self) -> None:
        src = self.source
        assert isinstance(src, MappedSource)
        self._check_magic(bytes(src.view[:8]))
        pos = 8
        if src.size < pos + 9:
            if self.recover:
                return
            raise self._err(TruncatedError, "expected a Header record after the magic", pos)
        op, ln = RECORD_HEAD.unpack_from(src.view, pos)
        if op != _OP_HEADER:
            if not self.recover:
                raise self._err(FormatError, f"expected a Header record (opcode 0x01), found opcode 0x{op:02x}", pos)
        elif ln > src.size - pos - 9:
            if not self.recover:
                raise self._err(TruncatedError, f"Header declares {ln} bytes, file has {src.size - pos - 9} left", pos)
        else:
            try:
                rec = R.parse_record(op, src.view, pos + 9, pos + 9 + ln, self.path, 0)
            except FormatError as e:
                if not self.recover:
                    raise
                self._header_errors.append(str(e))  # a damaged Header only loses profile/library
            else:
                assert isinstance(rec, R.Header)
                self.header = rec
            self._header_end = pos + 9 + ln
        if not self.recover:
            self._read_summary_or_scan()
        else:
            self._borrow_summary_definitions()

    def _borrow_summary_definitions(self) -> None:
        """Recovering: keep the summary's Schema/Channel copies (if they read), nothing else.

        A damaged data section may have lost a Channel record that the summary repeats.
        """
        saved = self.validate_crcs
        try:
            self._read_summary()
        except PolybagError:
            self.schemas.clear()
            self._channels.clear()
            self._channel_records.clear()
        finally:
            self.validate_crcs = saved
        self.has_summary = False
        self.chunk_indexes = []
        self._ci_array = None
        self.attachment_indexes = []
        self.metadata_indexes = []
        self.summary_offsets = []
        self.statistics = None

    def _read_summary_or_scan(self) -> None:
        """Read the summary; one that does not parse is ignored (the data is scanned instead)."""
        was = gc.isenabled()
        gc.disable()  # many small index objects: the cyclic collector would rescan them all
        try:
            self._read_summary()
        except FormatError as e:
            # messages are then found by a scan; a CRC mismatch is raised after them
            self.summary_error = str(e)
            if isinstance(e, ChecksumError):
                self._summary_crc_error = e
            self.has_summary = False
            self.schemas.clear()
            self._channels.clear()
            self._channel_records.clear()
            self.chunk_indexes = []
            self.attachment_indexes = []
            self.metadata_indexes = []
            self.summary_offsets = []
            self.statistics = None
        finally:
            if was:
                gc.enable()

    def _open_stream(self) -> None:
        src = self.source
        assert isinstance(src, StreamSource)
        self._check_magic(src.read(8))
        head = src.peek(9)
        if len(head) < 9:
            if self.recover:
                return
            raise self._err(TruncatedError, "expected a Header record after the magic", 8)
        op, ln = RECORD_HEAD.unpack_from(head, 0)
        if op != _OP_HEADER:
            if not self.recover:
                raise self._err(FormatError, f"expected a Header record (opcode 0x01), found opcode 0x{op:02x}", 8)
            return
        src.read(9)
        body = src.read_exact(ln, "Header record")
        rec = R.parse_record(op, body, 0, ln, self.path, 17)
        assert isinstance(rec, R.Header)
        self.header = rec
        self._stream_head = RECORD_HEAD.pack(op, ln) + body

    def _materialize(self) -> None:
        """Turn a stream into an in-memory mapped source (for summary, reverse, attachments)."""
        src = self.source
        if isinstance(src, MappedSource):
            return
        if self._stream_used:
            raise PolybagError(f"{self.path}: the stream was already read; open it again")
        self._stream_used = True
        self.source = src.spool(MAGIC + getattr(self, "_stream_head", b""))  # long: a temporary file
        self.source.path = self.path
        if not self.recover:
            self._read_summary_or_scan()

    def _read_summary(self) -> None:
        """Footer -> summary section; leaves ``has_summary`` False when there is none."""
        src = self.source
        assert isinstance(src, MappedSource)
        size = src.size
        foot = size - 8 - FOOTER_RECORD_LEN
        if foot < self._header_end or bytes(src.view[size - 8 :]) != MAGIC:
            return
        op, ln = RECORD_HEAD.unpack_from(src.view, foot)
        if op != _OP_FOOTER or ln != 20:
            return
        footer = R.Footer(*R.FOOTER_BODY.unpack_from(src.view, foot + 9))
        self.footer = footer
        if footer.summary_start == 0:
            return
        ss, sos = footer.summary_start, footer.summary_offset_start
        if not (self._header_end <= ss <= foot) or (sos and not (ss <= sos <= foot)):
            raise self._err(
                FormatError,
                f"footer points the summary at {ss} (offsets at {sos}), outside {self._header_end}..{foot}",
                foot,
            )
        if footer.summary_crc and self.validate_crcs:
            crc = zlib.crc32(src.view[ss : foot + 25])
            if crc != footer.summary_crc:
                raise self._err(
                    ChecksumError,
                    f"summary section CRC is {crc:#010x}, the Footer records {footer.summary_crc:#010x}",
                    ss,
                )
        end = sos if sos else foot
        view = src.view
        pos = ss
        cis: list[R.ChunkIndex] = []
        while pos < end:
            if pos + 9 > end:
                raise self._err(TruncatedError, "summary section ends inside a record header", pos)
            op, ln = RECORD_HEAD.unpack_from(view, pos)
            e = pos + 9 + ln
            if e > end:
                raise self._err(FormatError, f"summary record (opcode 0x{op:02x}) declares {ln} bytes, section has {end - pos - 9} left", pos)
            if op == _OP_SCHEMA or op == _OP_CHANNEL:
                self._define(view, op, pos, e, 0, summary=True)
            elif op == Opcode.CHUNK_INDEX:
                rec = _fast_chunk_index(view, pos + 9, e)
                if rec is None:  # short or padded: the general parser applies the rules
                    rec = R.parse_record(op, view, pos + 9, e, self.path, 0)
                    assert isinstance(rec, R.ChunkIndex)
                cis.append(rec)
            elif op == Opcode.ATTACHMENT_INDEX:
                a = R.parse_record(op, view, pos + 9, e, self.path, 0)
                assert isinstance(a, R.AttachmentIndex)
                self.attachment_indexes.append(a)
            elif op == Opcode.METADATA_INDEX:
                m = R.parse_record(op, view, pos + 9, e, self.path, 0)
                assert isinstance(m, R.MetadataIndex)
                self.metadata_indexes.append(m)
            elif op == Opcode.STATISTICS:
                s = R.parse_record(op, view, pos + 9, e, self.path, 0)
                assert isinstance(s, R.Statistics)
                self.statistics = s
            pos = e
        pos = sos if sos else foot
        while sos and pos < foot:
            if pos + 9 > foot:
                raise self._err(TruncatedError, "summary offset section ends inside a record header", pos)
            op, ln = RECORD_HEAD.unpack_from(view, pos)
            e = pos + 9 + ln
            if e > foot:
                raise self._err(FormatError, f"summary offset record declares {ln} bytes, section has {foot - pos - 9} left", pos)
            if op == Opcode.SUMMARY_OFFSET:
                so = R.parse_record(op, view, pos + 9, e, self.path, 0)
                assert isinstance(so, R.SummaryOffset)
                self.summary_offsets.append(so)
            pos = e
        for ci in cis:
            if ci.chunk_start_offset + ci.chunk_length > foot or ci.chunk_start_offset < self._header_end:
                raise self._err(
                    FormatError,
                    f"chunk index points at {ci.chunk_start_offset}+{ci.chunk_length}, outside the data section",
                    ci.chunk_start_offset,
                )
        self.chunk_indexes = cis
        arr = np.zeros(len(cis), CHUNK_INDEX_DTYPE)
        if cis:
            arr["start"] = [c.message_start_time for c in cis]
            arr["end"] = [c.message_end_time for c in cis]
            arr["offset"] = [c.chunk_start_offset for c in cis]
            arr["length"] = [c.chunk_length for c in cis]
            arr["mi_length"] = [c.message_index_length for c in cis]
            arr["compressed_size"] = [c.compressed_size for c in cis]
            arr["uncompressed_size"] = [c.uncompressed_size for c in cis]
        self._ci_array = arr
        self.has_summary = True
        st = self.statistics
        if st is not None and self._channel_records and (
            st.channel_count > len(self._channel_records) or (self.schemas and st.schema_count > len(self.schemas))
        ):
            # more Channel (Schema) records were written than the summary has ids: some id
            # was defined twice, or the summary is incomplete; the data section decides
            self._need_census = True

    # --- definitions ---------------------------------------------------------------------------
    def _define(
        self, buf: memoryview | bytes, op: int, pos: int, e: int, base: int, chunk: int | None = None, summary: bool = False
    ) -> None:
        """Register the Schema/Channel record at ``buf[pos:e]`` (file offset ``base + pos``, or
        record offset ``pos`` inside the Chunk at ``chunk``; ``summary``: a summary copy)."""
        rec = R.parse_record(op, buf, pos + 9, e, self.path, base)
        where: Where | None = None if summary else ((base + pos, -1) if chunk is None else (chunk, pos))
        if where is not None and (self._census_walk or isinstance(self.source, StreamSource)):
            if where <= self._seq_where:
                return  # reading in file order: this record was registered already
            self._seq_where = where
        if isinstance(rec, R.SchemaRecord):
            if rec.id == 0:  # invalid per spec; ignored
                return
            if summary:
                self._summary_records.append(rec)
            old = self.schemas.get(rec.id)
            if old is None:
                self.schemas[rec.id] = Schema(rec.id, rec.name, rec.encoding, rec.data)
                self._def_where[(3, rec.id)] = where
            elif (old.name, old.encoding, old.data) != (rec.name, rec.encoding, rec.data):
                self._conflict(rec, where)
        elif isinstance(rec, R.ChannelRecord):
            if summary:
                self._summary_records.append(rec)
            if rec.schema_id and rec.schema_id not in self.schemas and chunk is not None:
                self._resolve_schema(rec.schema_id)  # read out of file order: its schema comes earlier
            old_rec = self._channel_records.get(rec.id)
            if old_rec is not None:
                if not _same_record(old_rec, rec):
                    self._conflict(rec, where)
                return
            schema = None
            if rec.schema_id:
                schema = self.schemas.get(rec.schema_id)
                if schema is None:
                    if not self.recover:
                        raise self._err(
                            FormatError, f"channel {rec.id} ({rec.topic}) refers to schema {rec.schema_id}, not defined before it", base + pos
                        )
            self._channel_records[rec.id] = rec
            self._def_where[(4, rec.id)] = where
            ch = Channel(rec.id, rec.topic, rec.message_encoding, schema, rec.metadata)
            self._channels[rec.id] = ch
            for sel, live in self._live_wants:
                if topic_filter(sel, [ch]):
                    live.add(rec.id)

    def _conflict(self, rec: R.SchemaRecord | R.ChannelRecord, where: Where | None) -> None:
        """A definition that differs from the one in force for its id."""
        if self._census is not None:
            return  # the census has the whole timeline already
        kind = "Schema" if isinstance(rec, R.SchemaRecord) else "Channel"
        if where is None:  # the summary section disagrees with itself
            self.definition_problems.append(
                f"{self.path}: the summary section holds two different {kind} records for id {rec.id} "
                f"({self._describe(rec)}): it cannot describe the file, whose data section is read instead"
            )
            self._need_census = True
            return
        if self._census_walk or isinstance(self.source, StreamSource):
            self._apply(rec, where)
            return
        self._need_census = True
        if not self._noting:
            raise _Redefined

    def _describe(self, rec: R.SchemaRecord | R.ChannelRecord) -> str:
        """How the definition in force for ``rec``'s id differs from ``rec``."""
        if isinstance(rec, R.SchemaRecord):
            old = self.schemas[rec.id]
            diffs = [f"{k} {a!r} -> {b!r}" for k, a, b in (("name", old.name, rec.name), ("encoding", old.encoding, rec.encoding)) if a != b]
            if old.data != rec.data:
                diffs.append(f"data of {len(old.data)} -> {len(rec.data)} bytes, different")
            return ", ".join(diffs)
        o = self._channel_records[rec.id]
        pairs = (
            ("topic", o.topic, rec.topic),
            ("message_encoding", o.message_encoding, rec.message_encoding),
            ("schema id", o.schema_id, rec.schema_id),
            ("metadata", o.metadata, rec.metadata),
        )
        return ", ".join(f"{k} {a!r} -> {b!r}" for k, a, b in pairs if a != b)

    @staticmethod
    def _where_text(where: Where | None) -> str:
        if where is None:
            return "the summary section"
        if where[1] < 0:
            return f"offset {where[0]}"
        return f"offset {where[0]} (the Chunk there, record offset {where[1]})"

    def _apply(self, rec: R.SchemaRecord | R.ChannelRecord, where: Where) -> None:
        """Reading in file order met a redefinition: from ``where`` on, ``rec`` is in force."""
        kind = "Schema" if isinstance(rec, R.SchemaRecord) else "Channel"
        op = 3 if kind == "Schema" else 4
        self.definition_problems.append(
            f"{self.path}: {self._where_text(where)}: {kind} record redefines {kind.lower()} id {rec.id} "
            f"({self._describe(rec)}), defined at {self._where_text(self._def_where.get((op, rec.id)))}; "
            f"ids must be unique in an MCAP file: each message is read with the definition in force where it lies"
        )
        self._def_where[(op, rec.id)] = where
        if isinstance(rec, R.SchemaRecord):
            sid = rec.id
            k = self._nversions[(3, sid)] = self._nversions.get((3, sid), 0) + 1
            old_s = self.schemas[sid]
            new_s = Schema(sid + k * _VERSION_STEP, rec.name, rec.encoding, rec.data)
            self.schemas[sid] = new_s
            self._schema_changes.append((where, sid, old_s, new_s))
            for cid, crec in list(self._channel_records.items()):
                if crec.schema_id == sid:  # its channels read with the new schema from here on
                    self._version(cid, crec, where)
        else:
            self._first_records.setdefault(rec.id, self._channel_records[rec.id])
            self._channel_records[rec.id] = rec
            self._version(rec.id, rec, where)

    def _version(self, cid: int, rec: R.ChannelRecord, where: Where) -> None:
        """A new version of channel ``cid`` (a model channel of its own), in force from ``where``."""
        k = self._nversions[(4, cid)] = self._nversions.get((4, cid), 0) + 1
        schema = self.schemas.get(rec.schema_id) if rec.schema_id else None
        if rec.schema_id and schema is None and not self.recover:
            raise self._err(
                FormatError, f"channel {cid} ({rec.topic}) refers to schema {rec.schema_id}, not defined before it", where[0]
            )
        ch = Channel(cid + k * _VERSION_STEP, rec.topic, rec.message_encoding, schema, rec.metadata)
        self._changes.append((where, cid, self._channels[cid], ch))
        self._channels[cid] = ch
        for sel, live in self._live_wants:
            if topic_filter(sel, [ch]):
                live.add(ch.id)

    def _run_census(self) -> None:
        """Build the definition timeline (:class:`_Census`) from every definition of the data
        section in file order: top-level records and every chunk's (each chunk is
        decompressed once).  The summary's copies only fill in ids the data never defines."""
        if self._census is not None:
            return
        src = self.source
        assert isinstance(src, MappedSource)
        saved_schemas, saved_channels, saved_records = self.schemas, self._channels, self._channel_records
        self.schemas, self._channels, self._channel_records, self._def_where = {}, {}, {}, {}
        self._changes, self._schema_changes, self._nversions, self._first_records = [], [], {}, {}
        self.definition_problems = [p for p in self.definition_problems if "summary section holds" in p]
        self._seq_where = (-1, -1)
        self._census_walk = True
        view, size = src.view, src.size
        pos = self._header_end or 8
        try:
            while pos + 9 <= size:
                op, ln = RECORD_HEAD.unpack_from(view, pos)
                e = pos + 9 + ln
                if op == 0 or e > size or op == _OP_DATA_END or op == _OP_FOOTER:
                    break
                try:
                    if op == _OP_SCHEMA or op == _OP_CHANNEL:
                        self._define(view, op, pos, e, 0)
                    elif op == _OP_CHUNK:
                        buf = self._chunk_data(pos)
                        _walk_defs(buf, self._defs_for(buf, 0, pos))
                except (PolybagError, _Bad):
                    pass  # damage: reading the chunk reports it
                pos = e
        finally:
            self._census_walk = False
        for sid, s in saved_schemas.items():  # defined only in the summary
            self.schemas.setdefault(sid, s)
        for cid, ch in saved_channels.items():
            if cid not in self._channels and cid < _VERSION_STEP:
                self._channels[cid] = ch
                self._channel_records[cid] = saved_records[cid]
        versions: dict[int, list[tuple[Where, Channel]]] = {}
        inside: dict[int, list[tuple[int, int, Channel]]] = {}
        for where, cid, old, new in self._changes:
            versions.setdefault(cid, [((-1, -1), old)]).append((where, new))
            if where[1] >= 0:
                inside.setdefault(where[0], []).append((where[1], cid, new))
        schemas_all: dict[int, Schema] = {}
        for _w, sid, old_s, new_s in self._schema_changes:
            if sid not in schemas_all:
                schemas_all[sid] = self.schemas[sid] = old_s  # the first version keeps the file id
            schemas_all[new_s.id] = new_s
        for cid, lst in versions.items():
            self._channels[cid] = lst[0][1]
            self._channel_records[cid] = self._first_records.get(cid, self._channel_records[cid])
        for sid, s in self.schemas.items():
            schemas_all.setdefault(sid, s)
        channels_all = list(self._channels.values()) + [new for _w, _c, _o, new in self._changes]
        self._census = _Census(
            versions, {cid: [w for w, _ in lst] for cid, lst in versions.items()}, inside, channels_all, schemas_all
        )
        self._need_census = False
        self._summary = None
        for sel, live in self._live_wants:
            live.clear()
            live.update(topic_filter(sel, channels_all) or ())
        for rec in self._summary_records:  # the summary's copies against the data section
            if isinstance(rec, R.ChannelRecord):
                vs = [v for _w, v in versions.get(rec.id, ())] or [c for c in [self._channels.get(rec.id)] if c is not None]
                if vs and not any(
                    (v.topic, v.message_encoding, dict(v.metadata)) == (rec.topic, rec.message_encoding, rec.metadata) for v in vs
                ):
                    self.definition_problems.append(
                        f"{self.path}: the summary section's Channel record for id {rec.id} (topic {rec.topic!r}) "
                        f"matches no Channel record of that id in the data section"
                    )

    def _census_mid_read(self, returned: bool) -> None:
        """A read met a definition that changes a channel: build the census.  What it
        loaded before (and, if ``returned``, handed out) used the definitions known then; if
        the census gives any of it another channel, FormatError (read again)."""
        before = dict(self._channels)
        loaded = self._loaded[:-1]  # the last one is the load that met the definition
        self._run_census()
        cen = self._census
        assert cen is not None
        if not returned:
            return
        for a, b, seen in loaded:
            for cid, keys in cen.keys.items():
                old = before.get(cid)
                j = bisect.bisect_left(keys, (a, -1))
                changed = old is not None and not _same_meaning(cen.at(cid, (a, -1)), old)
                inner = j < len(keys) and keys[j] <= (b, 1 << 62)
                if a == b and (seen or not inner):
                    # a chunk whose definitions were all registered without a conflict read as
                    # the census says from its first one on: only messages before it can differ
                    changed = changed and self._message_before(a, cid, keys[j][1] if inner else 1 << 62)
                elif inner:
                    changed = True
                if changed:
                    raise self._err(
                        FormatError,
                        f"offset {a}: messages were returned with channel {cid} as the summary or an earlier "
                        f"record defined it, but the data section redefines it; read again (this reader now "
                        f"follows every definition)",
                        a,
                    )

    def _message_before(self, chunk: int, cid: int, end: int) -> bool:
        """Whether the chunk at ``chunk`` holds a message on ``cid`` before record offset ``end``."""
        try:
            buf = self._chunk_data(chunk)
        except PolybagError:
            return True
        pos = 0
        head = RECORD_HEAD.unpack_from
        while pos < end and pos + 11 <= len(buf):
            op, ln = head(buf, pos)
            if op == 5 and U16.unpack_from(buf, pos + 9)[0] == cid:
                return True
            pos += 9 + ln
        return False

    def _defs_ready(self) -> None:
        """Before reading a mapped file: a redefinition already seen (summary, top-level
        records) builds the census first."""
        if self._census is not None or not isinstance(self.source, MappedSource):
            return
        if not (self.has_summary and self.chunk_indexes):
            self._scan()  # what reading scans anyway: its top-level definitions
        if self._need_census:
            self._run_census()

    def _defs_for(self, buf: bytes | memoryview, base: int, chunk: int | None = None) -> Callable[[int, int, int], None]:
        def defs(op: int, pos: int, e: int) -> None:
            if op != _OP_MESSAGE:
                if not self.recover:
                    self._define(buf, op, pos, e, base, chunk)
                    return
                try:
                    self._define(buf, op, pos, e, base, chunk)
                except PolybagError as err:  # recovering: a damaged definition is skipped
                    self._note(str(err), e - pos)

        return defs

    def _walk_chunk_defs(self, off: int) -> None:
        """Register the definitions of the chunk at ``off`` (resolving a forward reference)."""
        try:
            buf = self._chunk_data(off)
            _walk_defs(buf, self._defs_for(buf, 0, off))
        except _Bad as b:
            if not self.recover:
                raise self._err(FormatError, f"inside Chunk at {off}: {b.what} (at record offset {b.pos})", off) from None
        except PolybagError:
            if not self.recover:
                raise

    def _resolve_schema(self, sid: int) -> None:
        """A channel refers to a schema not yet seen (a chunk read out of file order): scan
        chunks' definitions for it."""
        if isinstance(self.source, MappedSource) and not self._census_walk:
            chunks = self._chunk_list()
            while sid not in self.schemas and self._defs_scanned < len(chunks):
                off = chunks[self._defs_scanned][0]
                self._defs_scanned += 1
                self._walk_chunk_defs(off)

    def _resolve_channel(self, cid: int) -> Channel | None:
        """A message refers to a channel not yet seen: scan chunks' definitions for it."""
        if isinstance(self.source, MappedSource):
            chunks = self._chunk_list()
            while cid not in self._channel_records and self._defs_scanned < len(chunks):
                off = chunks[self._defs_scanned][0]
                self._defs_scanned += 1
                self._walk_chunk_defs(off)
        return self._channels.get(cid)

    def _chunk_list(self) -> list[tuple[int, int, int, int]]:
        if self.has_summary and self.chunk_indexes:
            return [(c.chunk_start_offset, c.chunk_length, c.message_start_time, c.message_end_time) for c in self.chunk_indexes]
        return self._scan().chunks

    # --- chunks ----------------------------------------------------------------------------------
    def _chunk_data(self, offset: int) -> bytes:
        """The decompressed records of the chunk record at ``offset``, CRC-checked."""
        src = self.source
        assert isinstance(src, MappedSource)
        view = src.view
        if offset + 9 > src.size:
            raise self._err(TruncatedError, "expected a Chunk record header", offset)
        op, ln = RECORD_HEAD.unpack_from(view, offset)
        if op != _OP_CHUNK:
            raise self._err(FormatError, f"expected a Chunk record (opcode 0x06), found opcode 0x{op:02x}", offset)
        if ln > src.size - offset - 9:
            raise self._err(TruncatedError, f"Chunk declares {ln} bytes, file has {src.size - offset - 9} left", offset)
        return self._decode_chunk(view, offset + 9, offset + 9 + ln, offset)

    def _decode_chunk(self, buf: memoryview | bytes, start: int, end: int, offset: int) -> bytes:
        if end - start < CHUNK_HEAD.size + 4:
            raise self._err(FormatError, f"Chunk record of {end - start} bytes is shorter than its fixed fields", offset)
        _s, _e, usize, ucrc = CHUNK_HEAD.unpack_from(buf, start)
        p = start + CHUNK_HEAD.size
        clen = U32.unpack_from(buf, p)[0]
        p += 4
        if p + clen + 8 > end:
            raise self._err(FormatError, f"Chunk compression name declares {clen} bytes, record has {end - p} left", offset)
        comp = bytes(buf[p : p + clen]).decode("utf-8", "replace")
        p += clen
        rlen = U64.unpack_from(buf, p)[0]
        p += 8
        if rlen > end - p:
            raise self._err(FormatError, f"Chunk records declare {rlen} bytes, record has {end - p} left", offset)
        data = buf[p : p + rlen]
        try:
            out = compression.decompress(comp, data, usize, path=self.path, offset=offset, max_bytes=self.max_chunk_bytes)
        except UnsupportedError as e:
            raise self._err(FormatError, f"Chunk uses unknown compression {comp!r}: {e}", offset) from None
        if ucrc and self.validate_crcs:
            crc = zlib.crc32(out)
            if crc != ucrc:
                raise self._err(ChecksumError, f"Chunk records CRC is {crc:#010x}, the Chunk records {ucrc:#010x}", offset)
        return out

    def _chunk_messages(
        self,
        buf: bytes | memoryview,
        offset: int,
        want: set[int] | None,
        start: int | None,
        end: int | None,
        positions: np.ndarray | None = None,
        sort: bool = False,
        gap_defs: bool = False,
        arrays: bool = False,
        expect_cid: np.ndarray | None = None,
    ) -> Any:
        """The wanted messages of one decompressed chunk: file order, or log-time order if ``sort``.

        ``positions`` are message offsets from the message indexes; with ``gap_defs`` the
        Schema/Channel records between those messages are registered too (streams).  With
        ``arrays`` the bulk path returns a :class:`_Batch` of payloads instead of messages
        (the record-by-record fallback still returns a list of messages).
        """
        defs = self._defs_for(buf, 0, offset)
        mark = len(self._changes)
        self._loaded.append((offset, offset, positions is None or gap_defs))
        offs: np.ndarray | None = None
        try:
            if positions is not None and gap_defs:
                try:
                    ok = _defs_between_messages(buf, positions.astype(np.int64), defs)
                except _Bad:
                    ok = False
                if not ok:
                    positions = None
            if positions is not None:
                offs = positions.astype(np.int64)
            if positions is None:
                rec_offs = _record_offsets(buf)
                all_offs = np.array(rec_offs, np.int64)
                ops = np.frombuffer(buf, np.uint8)[all_offs] if rec_offs else np.zeros(0, np.uint8)
                is_msg = ops == 5
                if not bool(is_msg.all()):
                    for p in all_offs[(ops == 3) | (ops == 4)].tolist():
                        defs(int(buf[p]), p, p + 9 + U64.unpack_from(buf, p + 1)[0])
                    offs = all_offs[is_msg]
                else:
                    offs = all_offs
        except _Bad as b:
            offs = None
            bad: _Bad | None = b
        else:
            bad = None
        chans = self._channels
        if self._census is not None or self._changes:  # a file that redefines ids
            got = self._versioned_chunk(buf, offset, want, start, end, sort, mark)
            if isinstance(got, list):
                return got
            chans, want = got
        while offs is not None:
            try:
                ecid = expect_cid if positions is not None else None
                if arrays:
                    rec, sel = _bulk_heads(buf, offs, chans, want, start, end, sort, ecid)
                    return _batch_from_heads(buf, rec, sel)
                return _bulk_messages(buf, offs, chans, want, start, end, sort, ecid)
            except _UnknownChannel as u:
                if positions is not None:
                    try:
                        _walk_defs(buf, defs)
                    except _Bad:
                        pass
                if not self._unknown_channel(u.cid, offset):
                    return []
                chans.setdefault(u.cid, self._channels[u.cid])
            except _NeedSlowPath:
                break
            except _Bad as b:
                if positions is not None:
                    break  # the message index does not fit the chunk: walk the records instead
                bad = b
                break
        if bad is None or self.recover:
            # record by record: reaches every message before damage (recover) or odd records
            while True:
                out: list[Message] = []
                try:
                    _walk_filtered(buf, chans, out, defs, want, start, end)
                    if sort:
                        out.sort(key=_LOG_TIME)
                    return out
                except _UnknownChannel as u:
                    if not self._unknown_channel(u.cid, offset):
                        return out
                    chans.setdefault(u.cid, self._channels[u.cid])
                except _Bad as b:
                    err = self._err(FormatError, f"inside Chunk at {offset}: {b.what} (at record offset {b.pos})", offset)
                    self._note(str(err), 0)
                    if sort:
                        out.sort(key=_LOG_TIME)
                    if not self.recover:
                        raise _Partial(out, err) from None
                    return out
        err = self._err(FormatError, f"inside Chunk at {offset}: {bad.what} (at record offset {bad.pos})", offset)
        raise err from None

    def _versioned_chunk(
        self, buf: bytes | memoryview, offset: int, want: set[int] | None, start: int | None, end: int | None, sort: bool, mark: int
    ) -> tuple[dict[int, Channel], set[int] | None] | list[Message]:
        """For a chunk of a file that redefines ids: the channels in force at its start and the
        wanted ids in the file's terms; or, when a definition inside it changes a channel, its
        messages, walked record by record (``mark``: where this chunk's changes begin in
        ``_changes`` when reading in file order)."""
        cen = self._census
        chans = self._channels
        inside: list[tuple[int, int, Channel]] | None = None
        if cen is not None:
            if cen.versions:
                chans = cen.map_at(offset, chans)
            inside = cen.inside.get(offset)
        elif len(self._changes) > mark:  # reading in file order: this chunk's definitions changed some
            new = self._changes[mark:]
            chans = dict(chans)
            for _w, cid, old, _n in reversed(new):
                chans[cid] = old
            inside = [(w[1], cid, ch) for w, cid, _o, ch in new]
        if not inside:
            if want is not None:
                want = {i & _FILE_ID for i in want if (c := chans.get(i & _FILE_ID)) is not None and c.id == i}
            return chans, want
        chans = dict(chans)
        while True:
            out: list[Message] = []
            try:
                _walk_versions(buf, chans, inside, out, want, start, end)
                break
            except _UnknownChannel as u:
                if not self._unknown_channel(u.cid, offset):
                    break
                chans.setdefault(u.cid, self._channels[u.cid])
            except _Bad as b:
                err = self._err(FormatError, f"inside Chunk at {offset}: {b.what} (at record offset {b.pos})", offset)
                self._note(str(err), 0)
                if sort:
                    out.sort(key=_LOG_TIME)
                if not self.recover:
                    raise _Partial(out, err) from None
                return out
        if sort:
            out.sort(key=_LOG_TIME)
        return out

    def _unknown_channel(self, cid: int, offset: int) -> bool:
        """Find a channel a message refers to; False (recover) or FormatError if there is none."""
        if cid in self._channels or self._resolve_channel(cid) is not None:
            return True
        err = self._err(FormatError, f"message on channel {cid}, which no Channel record defines", offset)
        if self.recover:
            self._note(str(err), 0)
            return False
        raise err

    def _index_parts(self, ci: R.ChunkIndex, want: set[int] | None) -> list[tuple[int, np.ndarray]] | None:
        """(channel id, Message Index entries) for the channels in ``want``; None to walk the chunk."""
        mio = ci.message_index_offsets
        if not mio:
            return None
        src = self.source
        assert isinstance(src, MappedSource)
        view = src.view
        parts = []
        for cid, off in mio.items():
            if want is not None and cid not in want:
                continue
            if off + 15 > src.size:
                return None
            op, ln = RECORD_HEAD.unpack_from(view, off)
            if op != _OP_MESSAGE_INDEX or ln > src.size - off - 9 or ln < 6:
                return None
            rlen = U32.unpack_from(view, off + 11)[0]
            if rlen % 16 or rlen > ln - 6:
                return None
            parts.append((cid, np.frombuffer(view, _MI_DTYPE, count=rlen // 16, offset=off + 15)))
        return parts

    @staticmethod
    def _index_positions(
        buf: bytes, parts: list[tuple[int, np.ndarray]], start: int | None, end: int | None, with_cids: bool
    ) -> tuple[np.ndarray, np.ndarray | None] | None:
        """Record offsets (ascending) from Message Index entries, and (``with_cids``) the
        channel id each entry names, for checking against the records (needed when only
        some channels are read: an entry pointing at another channel's record would hide
        a wanted one).  None to walk the chunk instead.

        With a time window the entries the index's times put outside it are checked
        against their records (one whose time lies could hide a wanted message; those
        inside are filtered again by their records' times), and any disagreement walks
        the chunk.
        """
        n = len(buf)
        sel: list[np.ndarray] = []
        cids: list[np.ndarray] = []
        for cid, arr in parts:
            pos = arr["offset"]
            if start is not None or end is not None:
                if not len(pos):
                    continue
                if int(pos.max()) + RECORD_MESSAGE_HEAD_LEN > n:
                    return None
                lts = arr["log_time"]
                mask = np.ones(len(pos), bool) if start is None else lts >= np.uint64(start)
                if end is not None:
                    mask &= lts < np.uint64(min(end, (1 << 64) - 1))
                if not bool(mask.all()):
                    out = ~mask
                    if not np.array_equal(_u64_at(buf, pos[out].astype(np.int64) + 15), lts[out]):
                        return None
                    pos = pos[mask]
            sel.append(pos)
            if with_cids:
                cids.append(np.full(len(pos), cid, np.uint16))
        if not sel:
            return np.zeros(0, np.int64), (np.zeros(0, np.uint16) if with_cids else None)
        pos = np.concatenate(sel) if len(sel) > 1 else sel[0]
        cid_arr = (np.concatenate(cids) if len(cids) > 1 else cids[0]) if with_cids else None
        if len(pos) > 1 and not bool(np.all(pos[1:] >= pos[:-1])):
            if cid_arr is None:
                pos = np.sort(pos)
            else:
                o = np.argsort(pos, kind="stable")
                pos = pos[o]
                cid_arr = cid_arr[o]
        if len(pos) > 1 and not bool(np.all(pos[1:] > pos[:-1])):
            return None  # a damaged index (two entries for one record): walk the chunk
        if len(pos) and int(pos[-1]) >= n:
            return None
        return pos, cid_arr

    # --- linear scan of a mapped file -------------------------------------------------------------
    def _note(self, what: str, skipped: int) -> None:
        sr = self._scan_result
        if self._quiet:
            self._muted += 1
        elif sr is not None:
            sr.errors.append(what)
            sr.bytes_skipped += skipped

    def _scan(self) -> _ScanResult:
        """One pass over the top-level records (chunks are not decompressed)."""
        if self._scan_result is not None:
            return self._scan_result
        self._noting += 1  # a redefinition found here only asks for the census
        try:
            return self._scan_records()
        finally:
            self._noting -= 1

    def _scan_records(self) -> _ScanResult:
        src = self.source
        assert isinstance(src, MappedSource)
        sr = self._scan_result = _ScanResult()
        view = src.view
        size = src.size
        head = RECORD_HEAD.unpack_from
        pos = self._header_end if self._header_end else 8
        if not self._header_end and self.recover:
            # no header: look for the first record
            pos = 8
        rank = 0
        loose: list[int] | None = None
        lo = hi = 0
        ended = False
        try:
            while True:
                if pos + 9 > size:
                    if pos < size or sr.footer is None:
                        raise self._err(
                            TruncatedError, f"expected a record header (9 bytes), file has {size - pos} left", pos
                        )
                    break
                op, ln = head(view, pos)
                e = pos + 9 + ln
                if ended and op != _OP_FOOTER and e <= size and op != 0:
                    pos = e
                    continue
                if e > size or op == 0:
                    if op == 0:
                        raise self._err(FormatError, "record opcode 0x00 is invalid", pos)
                    raise self._err(TruncatedError, f"record (opcode 0x{op:02x}) declares {ln} bytes, file has {size - pos - 9} left", pos)
                if op == _OP_MESSAGE:
                    if ln >= MESSAGE_HEAD_LEN:
                        lt = U64.unpack_from(view, pos + 15)[0]
                    else:
                        rec = R.parse_record(op, view, pos + 9, e, self.path, 0)
                        assert isinstance(rec, R.MessageRecord)
                        lt = rec.log_time
                    if loose is None:
                        loose = []
                        lo = hi = lt
                        sr.loose.append((rank, 0, 0, loose))
                        rank += 1
                    loose.append(pos)
                    lo = min(lo, lt)
                    hi = max(hi, lt)
                    sr.loose[-1] = (sr.loose[-1][0], lo, hi, loose)
                else:
                    if op != _OP_MESSAGE_INDEX:
                        loose = None
                    if op == _OP_CHUNK:
                        if ln < CHUNK_HEAD.size:
                            raise self._err(FormatError, f"Chunk record of {ln} bytes is shorter than its fixed fields", pos)
                        s, t = R.struct.unpack_from("<QQ", view, pos + 9)
                        sr.chunks.append((pos, e - pos, s, t))
                        sr.chunk_ranks.append(rank)
                        rank += 1
                    elif op == _OP_SCHEMA or op == _OP_CHANNEL:
                        self._define(view, op, pos, e, 0)
                    elif op == _OP_ATTACHMENT:
                        sr.attachments.append(pos)
                    elif op == _OP_METADATA:
                        sr.metadata.append(pos)
                    elif op == Opcode.STATISTICS:
                        st = R.parse_record(op, view, pos + 9, e, self.path, 0)
                        assert isinstance(st, R.Statistics)
                        sr.statistics = st
                    elif op == _OP_DATA_END:
                        if sr.data_end is None:
                            sr.data_end = pos
                            if self.validate_crcs and ln >= 4:
                                want_crc = U32.unpack_from(view, pos + 9)[0]
                                if want_crc:
                                    got = zlib.crc32(view[:pos])
                                    if got != want_crc:
                                        err = self._err(
                                            ChecksumError,
                                            f"data section CRC is {got:#010x}, the DataEnd record holds {want_crc:#010x}",
                                            pos,
                                        )
                                        if self.recover:
                                            sr.errors.append(str(err))
                                        else:
                                            sr.error = err
                        ended = True  # the summary section only repeats the data section
                    elif op == _OP_FOOTER:
                        sr.footer = pos
                        if e + 8 > size or bytes(view[e : e + 8]) != MAGIC:
                            raise self._err(TruncatedError, "expected the closing MCAP magic after the Footer", e)
                        pos = e + 8
                        if pos != size and not self.recover:
                            raise self._err(FormatError, f"{size - pos} bytes follow the closing magic", pos)
                        break
                pos = e
        except PolybagError as err:
            if self.recover:
                sr.errors.append(str(err))
                new = self._resync(pos + 1)
                if new is not None:
                    sr.bytes_skipped += new - pos
                    # continue scanning from the resync point
                    sub_start = new
                    self._scan_from(sr, sub_start, rank)
                else:
                    sr.bytes_skipped += size - pos
            elif sr.error is None:
                sr.error = err
        return sr

    def _scan_from(self, sr: _ScanResult, pos: int, rank: int) -> None:
        """Continue a recovering scan after damage (chunks, definitions and loose messages)."""
        src = self.source
        assert isinstance(src, MappedSource)
        view = src.view
        size = src.size
        while pos + 9 <= size:
            op, ln = RECORD_HEAD.unpack_from(view, pos)
            e = pos + 9 + ln
            if op == 0 or e > size or not self._plausible(pos):
                new = self._resync(pos + 1)
                sr.errors.append(str(self._err(FormatError, f"damaged record; skipped to {new if new is not None else size}", pos)))
                if new is None:
                    sr.bytes_skipped += size - pos
                    return
                sr.bytes_skipped += new - pos
                pos = new
                continue
            if op == _OP_CHUNK:
                s, t = R.struct.unpack_from("<QQ", view, pos + 9)
                sr.chunks.append((pos, e - pos, s, t))
                sr.chunk_ranks.append(rank)
                rank += 1
            elif op == _OP_MESSAGE and ln >= MESSAGE_HEAD_LEN:
                lt = U64.unpack_from(view, pos + 15)[0]
                sr.loose.append((rank, lt, lt, [pos]))
                rank += 1
            elif op == _OP_SCHEMA or op == _OP_CHANNEL:
                try:
                    self._define(view, op, pos, e, 0)
                except PolybagError as err:
                    sr.errors.append(str(err))
            elif op == _OP_ATTACHMENT:
                sr.attachments.append(pos)
            elif op == _OP_METADATA:
                sr.metadata.append(pos)
            elif op == _OP_FOOTER:
                return
            pos = e

    _KNOWN_TOP = frozenset({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})

    def _plausible(self, pos: int) -> bool:
        src = self.source
        assert isinstance(src, MappedSource)
        view = src.view
        size = src.size
        if pos + 9 > size:
            return False
        op, ln = RECORD_HEAD.unpack_from(view, pos)
        if op not in self._KNOWN_TOP or pos + 9 + ln > size:
            return False
        if op == _OP_CHUNK:
            if ln < CHUNK_HEAD.size + 12:
                return False
            s, t, usize, _crc = CHUNK_HEAD.unpack_from(view, pos + 9)
            clen = U32.unpack_from(view, pos + 9 + CHUNK_HEAD.size)[0]
            if clen > 16 or s > t:
                return False
            comp = bytes(view[pos + 9 + CHUNK_HEAD.size + 4 : pos + 9 + CHUNK_HEAD.size + 4 + clen])
            if comp not in (b"", b"zstd", b"lz4", b"none"):
                return False
            p = pos + 9 + CHUNK_HEAD.size + 4 + clen
            if p + 8 > pos + 9 + ln:
                return False
            rlen = U64.unpack_from(view, p)[0]
            return p + 8 + rlen <= pos + 9 + ln
        if op == _OP_MESSAGE:
            return ln >= MESSAGE_HEAD_LEN and _u16_at(view, pos + 9) in self._channel_records
        if op in (_OP_SCHEMA, _OP_CHANNEL, _OP_ATTACHMENT, _OP_METADATA, _OP_MESSAGE_INDEX):
            try:
                R.parse_record(op, view, pos + 9, pos + 9 + ln, self.path, 0)
            except PolybagError:
                return False
            return True
        return ln < (1 << 20)

    _RESYNC_OPS = (_OP_CHUNK, _OP_MESSAGE, _OP_CHANNEL, _OP_SCHEMA, _OP_ATTACHMENT, _OP_METADATA, _OP_DATA_END)
    _RESYNC_WINDOW = 1 << 22

    def _resync(self, pos: int) -> int | None:
        """The next offset at or after ``pos`` where a plausible record starts.

        Searches window by window for bytes that are record opcodes, so a damaged region
        costs one C-level scan, not one Python step per byte.
        """
        src = self.source
        assert isinstance(src, MappedSource)
        data = src.view
        size = src.size
        while pos < size - 9:
            wend = min(size, pos + self._RESYNC_WINDOW)
            window = bytes(data[pos:wend])
            starts = {w: window.find(bytes([w])) for w in self._RESYNC_OPS}
            while True:
                live = [(v, k) for k, v in starts.items() if v >= 0]
                if not live:
                    break
                rel, op = min(live)
                cand = pos + rel
                if cand >= size - 9:
                    return None
                if op != _OP_DATA_END and self._plausible(cand):
                    return cand
                starts[op] = window.find(bytes([op]), rel + 1)
            if wend >= size:
                return None
            pos = wend
        return None


    # --- trusting chunk times ------------------------------------------------------------------
    def _distrust(self, what: str) -> None:
        """Chunk times were caught lying: from now on every chunk's real range is used."""
        if self._verify:
            return
        self._verify = True
        warnings.warn(
            f"{self.path or 'MCAP data'}: {what}; the chunk times are not trusted, every chunk is read to find its real log times",
            McapIndexWarning,
            stacklevel=4,
        )

    def _check_index(self) -> None:
        """Compare every Chunk Index with its Chunk record's header (no decompression).

        Not needed when the summary's CRC was checked: it was then written as it is.
        """
        if self._index_checked:
            return
        self._index_checked = True
        if self.footer is not None and self.footer.summary_crc and self.validate_crcs:
            return
        arr = self._ci_array
        src = self.source
        assert arr is not None and isinstance(src, MappedSource)
        offs = arr["offset"].astype(np.int64)
        if len(np.unique(offs)) != len(offs):
            self._distrust("two Chunk Index records point at one chunk")
            return
        bad = arr["start"] > arr["end"]
        if bool(bad.any()):
            i = int(np.argmax(bad))
            self._distrust(f"the Chunk Index of the chunk at {int(offs[i])} claims log times {int(arr['start'][i])}..{int(arr['end'][i])}")
            return
        room = offs + 9 + 16 <= src.size
        offs = offs[room]
        if not len(offs):
            return
        a = np.frombuffer(src.view, np.uint8)
        ops = a[offs]
        heads = a[(offs + 9)[:, None] + _AR16].view("<u8")
        mism = (ops == _OP_CHUNK) & ((heads[:, 0] != arr["start"][room]) | (heads[:, 1] != arr["end"][room]))
        if bool(mism.any()):
            i = int(np.argmax(mism))
            s, e = int(arr["start"][room][i]), int(arr["end"][room][i])
            self._distrust(
                f"the Chunk Index of the chunk at {int(offs[i])} claims log times {s}..{e}, "
                f"the Chunk record {int(heads[i, 0])}..{int(heads[i, 1])}"
            )

    def _chunk_ranks(self) -> list[tuple[int, int]]:
        """(offset, rank in file order) of every chunk, from the chunk indexes or a scan."""
        if self.has_summary and self.chunk_indexes:
            offs = [ci.chunk_start_offset for ci in self.chunk_indexes]
            ranks = [0] * len(offs)
            for k, i in enumerate(sorted(range(len(offs)), key=offs.__getitem__)):
                ranks[i] = k
            return list(zip(offs, ranks))
        sr = self._scan()
        return [(c[0], r) for c, r in zip(sr.chunks, sr.chunk_ranks)]

    def _rank_offset(self, rank: int) -> int | None:
        for off, r in self._chunk_ranks():
            if r == rank:
                return off
        return None

    def _true_range(self, off: int) -> tuple[int, int] | None:
        """The smallest and largest log time really in the chunk at ``off`` (None: no messages).

        Read once per reader.  A chunk that cannot be read (or, recovering, has damage but
        no messages) gets the widest range, so it is read (and its damage reported) first.
        """
        if off in self._true_ranges:
            return self._true_ranges[off]
        load = self._scan_loader(off, None, None, None, False, arrays=True)
        quiet = self._quiet
        self._quiet = True
        muted = self._muted
        got: Any
        try:
            got = load()
        except _Partial as p:
            got = p.msgs
        except PolybagError:
            got = None
        finally:
            self._quiet = quiet
        rng: tuple[int, int] | None
        if got is None:
            rng = (0, (1 << 64) - 1)
        else:
            lts = got.lt if isinstance(got, _Batch) else np.fromiter((m.log_time for m in got), np.uint64, len(got))
            rng = (int(lts.min()), int(lts.max())) if len(lts) else None
            if rng is None and self._muted != muted:
                rng = (0, (1 << 64) - 1)
        self._true_ranges[off] = rng
        return rng

    def _verified_segments(
        self, want: set[int] | None, start: int | None, end: int | None, sort: bool = False, arrays: bool = False
    ) -> tuple[list[tuple[int, int, int, Callable[[], list[Message]]]], PolybagError | None]:
        """Like :meth:`_segments`, with every chunk's real log-time range (chunks are read
        once to find it; Message Indexes are not used)."""
        out: list[tuple[int, int, int, Callable[[], list[Message]]]] = []
        lo = -1 if start is None else start
        hi = 1 << 64 if end is None else end
        seen: set[int] = set()
        for off, rank in self._chunk_ranks():
            if off in seen:
                continue  # two indexes of one chunk: read it once
            seen.add(off)
            rng = self._true_range(off)
            if rng is None or rng[1] < lo or rng[0] >= hi:
                continue
            out.append((rng[0], rng[1], rank, self._scan_loader(off, want, start, end, sort, arrays)))
        err = None
        if not (self.has_summary and self.chunk_indexes):
            sr = self._scan()
            err = sr.error
            for rank, s, t, offs in sr.loose:
                if t < lo or s >= hi:
                    continue
                out.append((s, t, rank, self._loose_loader(offs, want, start, end, sort)))
        out.sort(key=lambda x: x[2])
        return out, err

    def _out_of_order(self, rank: int, t: int, returned: str) -> FormatError:
        self._verify = True
        off = self._rank_offset(rank)
        return self._err(
            FormatError,
            f"the chunk at {off} holds a message at log time {t}, but its chunk times claimed otherwise and "
            f"{returned}; read again (this reader now checks every chunk) or open with recover=True",
            off,
        )

    # --- segments --------------------------------------------------------------------------------
    def _segments(
        self,
        want: set[int] | None,
        start: int | None,
        end: int | None,
        sort: bool = False,
        arrays: bool = False,
        merge: bool = False,
    ) -> tuple[list[tuple[int, int, int, Callable[[], list[Message]]]], PolybagError | None]:
        """(start, end, rank, loader) for every chunk or run of loose messages that may match.

        Start and end are the claimed log-time range (unknown: 0 and 2**64 - 1).  With
        ``arrays`` chunk loaders may return a :class:`_Batch` instead of a list.  With
        ``merge`` (log-time order) the Message Index times of the wanted channels in the
        chunks to read are checked against their chunk's claims first.
        """
        if not self._verify and self.has_summary and self.chunk_indexes:
            self._check_index()
        if self._verify:
            return self._verified_segments(want, start, end, sort, arrays)
        out: list[tuple[int, int, int, Callable[[], list[Message]]]] = []
        lo = -1 if start is None else start
        hi = 1 << 64 if end is None else end
        # the ids in the file's terms (a redefined channel's versions share one)
        wfile = want if want is None or self._census is None else {i & _FILE_ID for i in want}
        if self.has_summary and self.chunk_indexes:
            arr = self._ci_array
            assert arr is not None
            sel = np.ones(len(arr), bool)
            if start is not None:
                sel &= arr["end"] >= np.uint64(start)
            if end is not None:
                sel &= arr["start"] < np.uint64(min(end, (1 << 64) - 1))
            order = np.argsort(arr["offset"], kind="stable")
            ranks = np.empty(len(arr), np.int64)
            ranks[order] = np.arange(len(arr))
            unknown = (arr["start"] == 0) & (arr["end"] == 0)  # no times: read it wherever
            if start is not None or end is not None:
                sel |= unknown
            for i in np.nonzero(sel)[0].tolist():
                ci = self.chunk_indexes[i]
                mio = ci.message_index_offsets
                if wfile is not None and mio and not (wfile & mio.keys()):
                    continue
                s, t = (0, _MAX_TIME) if unknown[i] else (ci.message_start_time, ci.message_end_time)
                if merge and not self._index_times_fit(ci, wfile, s, t):
                    return self._verified_segments(want, start, end, sort, arrays)
                out.append((s, t, int(ranks[i]), self._indexed_loader(ci, want, start, end, sort, arrays)))
            return out, None
        sr = self._scan()
        for (off, _ln, s, t), rank in zip(sr.chunks, sr.chunk_ranks):
            if s == 0 and t == 0:
                t = _MAX_TIME  # no times: read it wherever
            elif t < lo or s >= hi:
                continue
            out.append((s, t, rank, self._scan_loader(off, want, start, end, sort, arrays)))
        for rank, s, t, offs in sr.loose:
            if t < lo or s >= hi:
                continue
            out.append((s, t, rank, self._loose_loader(offs, want, start, end, sort)))
        out.sort(key=lambda x: x[2])
        return out, sr.error

    def _index_times_fit(self, ci: R.ChunkIndex, want: set[int] | None, s: int, t: int) -> bool:
        """Whether the chunk's Message Index times (wanted channels) lie in its claimed range."""
        parts = self._index_parts(ci, want)
        for _cid, arr in parts or ():
            if len(arr):
                lts = arr["log_time"]
                lo, hi = int(lts.min()), int(lts.max())
                if lo < s or hi > t:
                    self._distrust(
                        f"the chunk at {ci.chunk_start_offset} claims log times {s}..{t}, its Message Index lists {lo}..{hi}"
                    )
                    return False
        return True

    def _indexed_loader(
        self, ci: R.ChunkIndex, want: set[int] | None, start: int | None, end: int | None, sort: bool, arrays: bool = False
    ) -> Callable[[], list[Message]]:
        def load() -> list[Message]:
            buf = self._chunk_data(ci.chunk_start_offset)
            cen = self._census
            if cen is not None and cen.inside.get(ci.chunk_start_offset):
                parts = None  # the chunk redefines a channel: walked record by record
            else:
                parts = self._index_parts(ci, want if want is None or cen is None else {i & _FILE_ID for i in want})
            # every message listed: check the index against the chunk and find definitions
            complete = want is None and start is None and end is None
            positions = cids = None
            if parts is not None:
                # a chunk claimed inside the window: its records' times alone filter it
                inside = (start is None or ci.message_start_time >= start) and (end is None or ci.message_end_time < end)
                lo, hi = (None, None) if inside else (start, end)
                got = self._index_positions(buf, parts, lo, hi, want is not None)
                if got is not None:
                    positions, cids = got
                    if want is None and not complete and cen is None:
                        # a time window reads few chunks: find a redefinition in them (this
                        # costs a gather over all their messages, too much for topic reads)
                        self._index_defs(buf, ci)
            return self._chunk_messages(
                buf, ci.chunk_start_offset, want, start, end, positions, sort, gap_defs=complete, arrays=arrays, expect_cid=cids
            )  # type: ignore[no-any-return]

        return load

    def _index_defs(self, buf: bytes, ci: R.ChunkIndex) -> None:
        """Register the Schema/Channel records of a chunk read for some of its messages (so
        one that redefines an id is noticed): when its Message Indexes list every message,
        only a chunk whose message records do not fill it holds any."""
        parts = self._index_parts(ci, None)
        defs = self._defs_for(buf, 0, ci.chunk_start_offset)
        n = len(buf)
        if parts:
            pos = np.concatenate([p["offset"] for _c, p in parts]).astype(np.int64)
            if not len(pos):
                return _walk_defs_quiet(buf, defs)
            if int(pos.min()) >= 0 and int(pos.max()) + RECORD_MESSAGE_HEAD_LEN <= n:
                lens = _u64_at(buf, pos + 1)
                with np.errstate(over="ignore"):
                    filled = int(lens.sum(dtype=np.uint64)) + 9 * len(pos)
                if filled == n and bool((lens <= np.uint64(n)).all()):
                    return None  # messages only
                pos.sort()
                try:
                    if _defs_between_messages(buf, pos, defs):
                        return None
                except _Bad:
                    pass
        return _walk_defs_quiet(buf, defs)

    def _defs_upto(self, off: int) -> None:
        """Without a summary: register the definitions of every chunk before ``off`` in file
        order before reading the one there (reading out of file order, a redefinition in an
        earlier chunk is then found before a message it changes is returned).  Chunks read in
        file order cost nothing extra: each advances the frontier as it is read."""
        if self._census is not None or (self.has_summary and self.chunk_indexes):
            return
        chunks = self._scan().chunks
        while self._defs_scanned < len(chunks) and chunks[self._defs_scanned][0] < off:
            o = chunks[self._defs_scanned][0]
            self._defs_scanned += 1
            if o + 1 == off:
                continue  # the chunk just read
            try:
                buf = self._chunk_data(o)
                _walk_defs(buf, self._defs_for(buf, 0, o))
            except (PolybagError, _Bad):
                pass  # reading that chunk reports the damage

    def _scan_loader(
        self, off: int, want: set[int] | None, start: int | None, end: int | None, sort: bool, arrays: bool = False
    ) -> Callable[[], list[Message]]:
        def load() -> list[Message]:
            self._defs_upto(off)
            try:
                buf = self._chunk_data(off)
            except PolybagError as err:
                if not self.recover:
                    raise
                if isinstance(err, ChecksumError):
                    self._note(str(err), 0)
                    saved = self.validate_crcs
                    self.validate_crcs = False
                    try:
                        buf = self._chunk_data(off)
                    except PolybagError as err2:
                        self._note(str(err2), 0)
                        return []
                    finally:
                        self.validate_crcs = saved
                else:
                    self._note(str(err), 0)
                    return []
            got = self._chunk_messages(buf, off, want, start, end, None, sort, arrays=arrays)
            self._defs_upto(off + 1)  # its own definitions were registered reading it
            return got  # type: ignore[no-any-return]

        return load

    def _loose_loader(
        self, offs: list[int], want: set[int] | None, start: int | None, end: int | None, sort: bool
    ) -> Callable[[], list[Message]]:
        def load() -> list[Message]:
            src = self.source
            assert isinstance(src, MappedSource)
            view = src.view
            out: list[Message] = []
            unpack = R.MESSAGE_HEAD.unpack_from
            lo = -1 if start is None else start
            hi = 1 << 64 if end is None else end
            cen = self._census
            if offs:
                self._defs_upto(offs[0])
                self._loaded.append((offs[0], offs[-1], False))
            for pos in offs:
                ln = U64.unpack_from(view, pos + 1)[0]
                e = pos + 9 + ln
                if ln >= MESSAGE_HEAD_LEN:
                    cid, seq, lt, pt = unpack(view, pos + 9)
                    data: bytes | memoryview = view[pos + 31 : e]
                else:
                    rec = R.parse_record(5, view, pos + 9, e, self.path, 0)
                    assert isinstance(rec, R.MessageRecord)
                    cid, seq, lt, pt, data = rec.channel_id, rec.sequence, rec.log_time, rec.publish_time, b""
                if not (lo <= lt < hi):
                    continue
                if cen is not None and cid in cen.versions:
                    ch: Channel | None = cen.at(cid, (pos, -1))
                else:
                    ch = self._channels.get(cid) or self._resolve_channel(cid)
                if want is not None and ch is not None and ch.id not in want:
                    continue
                if ch is None:
                    err = self._err(FormatError, f"message on channel {cid}, which no Channel record defines", pos)
                    if self.recover:
                        self._note(str(err), e - pos)
                        continue
                    if sort:
                        out.sort(key=_LOG_TIME)
                    raise _Partial(out, err)
                out.append(Message(ch, lt, pt, seq, data))
            if sort:
                out.sort(key=_LOG_TIME)
            return out

        return load

    # --- public API --------------------------------------------------------------------------------
    def messages(
        self,
        topics: TopicSelector = None,
        start: int | None = None,
        end: int | None = None,
        reverse: bool = False,
        order: str = "log_time",
    ) -> Iterator[Message]:
        check_order(order)
        # bounds that exclude nothing are no bounds (times are u64)
        if start is not None and start <= 0:
            start = None
        if end is not None and end >= 1 << 64:
            end = None
        if end is not None and end <= 0:
            start, end = 1, 1  # an empty window
        if isinstance(self.source, StreamSource):
            # Only file order can be produced strictly forward: a later chunk may always
            # start earlier.  Log-time order (and reverse) reads the stream into memory
            # first (compressed; chunks are still decompressed one at a time).
            if reverse or order == "log_time" or self.recover:
                self._materialize()
            else:
                return self._stream_messages(topics, start, end, order)
        return self._mapped_messages(topics, start, end, reverse, order)

    def _want(self, topics: TopicSelector) -> set[int] | None:
        """Channel ids matching ``topics``; grows as later Channel records are found."""
        if topics is None:
            return None
        known = self._census.channels if self._census is not None else list(self._channels.values())
        live = topic_filter(topics, known) or set()
        self._live_wants.append((topics, live))
        return live

    def _want_checked(self, topics: TopicSelector) -> set[int] | None:
        """:meth:`_want`; a filter that matches none of the channels a summary names may be
        after a version of a redefined id that the summary (one record per id) leaves out:
        then every definition is read first (one pass over the chunks)."""
        want = self._want(topics)
        if want is not None and not want and self._census is None and self.has_summary and self.chunk_indexes:
            self._run_census()  # refreshes ``want`` in place
        return want

    def _drop_want(self, want: set[int] | None) -> None:
        self._live_wants = [w for w in self._live_wants if w[1] is not want]

    def _mapped_messages(
        self, topics: TopicSelector, start: int | None, end: int | None, reverse: bool, order: str
    ) -> Iterator[Message]:
        self._defs_ready()
        want = self._want_checked(topics)
        count = 0
        try:
            self._loaded = []
            try:
                segs, pending = self._segments(want, start, end, order == "log_time", merge=order == "log_time")
            except _Redefined:  # met while planning: nothing was returned yet
                self._run_census()
                segs, pending = self._segments(want, start, end, order == "log_time", merge=order == "log_time")
            late: list[PolybagError] = []

            def guard(load: Callable[[], list[Message]]) -> Callable[[], list[Message]]:
                def inner() -> list[Message]:
                    try:
                        return load()
                    except _Partial as p:
                        late.append(p.err)
                        return p.msgs

                return inner

            segs = [(a, b, c, guard(ld)) for a, b, c, ld in segs]
            if order == "file":
                # chunks are skipped by their claimed times only with a time window: check those
                check = (start is not None or end is not None) and not self._verify
                seq = sorted(segs, key=lambda x: x[2], reverse=reverse)
                done: set[int] = set()
                i = 0
                while i < len(seq):
                    s, t, r, load = seq[i]
                    i += 1
                    try:
                        msgs = load()
                    except _Redefined:
                        # a definition in this chunk changes a channel: read on with the census
                        self._census_mid_read(count > 0)
                        vs, _err = self._segments(want, start, end, False)
                        vs = [(a, b, c, guard(ld)) for a, b, c, ld in vs if count == 0 or c not in done]
                        if count:
                            for v in vs:
                                if (v[2] < r) != reverse and v[2] != r and v[3]():
                                    raise self._out_of_order(v[2], v[0], "messages() skipped it") from None
                            vs = [v for v in vs if (v[2] >= r) != reverse or v[2] == r]
                        else:
                            done.clear()
                        seq = sorted(vs, key=lambda x: x[2], reverse=reverse)
                        i = 0
                        continue
                    done.add(r)
                    if check and msgs:
                        lts = [m.log_time for m in msgs]
                        if min(lts) < s or max(lts) > t:
                            check = False
                            self._distrust(f"the chunk at {self._rank_offset(r)} holds log times outside {s}..{t}, which its chunk times claim")
                            vs, _err = self._verified_segments(want, start, end, False)
                            vs = [(a, b, c, guard(ld)) for a, b, c, ld in vs if c not in done]
                            for v in vs:
                                if (v[2] < r) != reverse and v[3]():
                                    raise self._out_of_order(v[2], v[0], "messages() skipped it")
                            seq = sorted((v for v in vs if (v[2] > r) != reverse), key=lambda x: x[2], reverse=reverse)
                            i = 0
                    if reverse:
                        msgs.reverse()
                    count += len(msgs)
                    yield from msgs
                    if late:
                        raise late[0]
            else:
                key: Callable[[Message], int]
                if reverse:
                    runs = sorted(((-t, -s, -r, _reversed_loader(ld)) for s, t, r, ld in segs), key=lambda x: (x[0], x[2]))
                    key = _NEG_LOG_TIME
                else:
                    runs = sorted(segs, key=lambda x: (x[0], x[2]))
                    key = _LOG_TIME

                def replan(done: set[int], rank: int) -> list[Run]:
                    r = -rank if reverse else rank
                    self._distrust(f"the chunk at {self._rank_offset(r)} holds log times outside what its chunk times claim")
                    vs, _err = self._verified_segments(want, start, end, True)
                    if reverse:
                        new = [(-t, -s, -r, _reversed_loader(guard(ld))) for s, t, r, ld in vs if -r not in done]
                    else:
                        new = [(s, t, r, guard(ld)) for s, t, r, ld in vs if r not in done]
                    return sorted(new, key=lambda x: (x[0], x[2]))

                def redefined(done: set[int], fresh: bool) -> list[Run]:
                    self._census_mid_read(not fresh)
                    vs, _err = self._segments(want, start, end, True, merge=True)
                    if reverse:
                        new = [(-t, -s, -r, _reversed_loader(guard(ld))) for s, t, r, ld in vs if fresh or -r not in done]
                    else:
                        new = [(s, t, r, guard(ld)) for s, t, r, ld in vs if fresh or r not in done]
                    return sorted(new, key=lambda x: (x[0], x[2]))

                it = _merge(runs, key, None if self._verify else replan, redefined)
                try:
                    if self.recover:
                        for m in it:
                            count += 1
                            yield m
                    else:
                        yield from it
                except _OutOfOrder as o:
                    r = -o.rank if reverse else o.rank
                    raise self._out_of_order(r, -o.key if reverse else o.key, "later messages were already returned") from None
                if late:
                    raise late[0]
        except _Redefined:  # met while re-planning for another reason: the census makes a new read right
            self._run_census()
            raise self._err(
                FormatError,
                "a Schema or Channel record redefines an id after messages that depend on it were returned; "
                "read again (this reader now follows every definition)",
                None,
            ) from None
        finally:
            self._drop_want(want)
            self._finish_report(count)
        if pending is None:
            pending = self._summary_crc_error
        if pending is not None and not self.recover:
            raise pending

    def topic_payloads(self, topic: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every payload of ``topic`` at once: ``(log_times, blob, starts, sizes)``.

        The same messages as ``messages(topics=[topic])`` in log-time order (ties in file
        order), without a Python object per message: only chunks holding the topic's
        channels are read (from the chunk and message indexes, or found by a scan), each is
        decompressed once and its message heads are parsed in bulk.  ``log_times`` (int64;
        uint64 if a time is 2**63 ns or more, which MCAP allows), ``starts`` and ``sizes``
        (int64) are in log-time order; ``blob`` (uint8) holds the
        payloads back to back (in file order).  Damage behaves as in :meth:`messages`:
        FormatError without ``recover``; with it the intact payloads and a recovery report.
        """
        if isinstance(self.source, StreamSource):
            self._materialize()
        self._defs_ready()
        want = self._want_checked([topic])
        count = 0
        try:
            segs, pending = self._segments(want, None, None, sort=True, arrays=True)
            # each chunk's payloads are copied into one blob as soon as it is decompressed
            # (its buffer is then freed); declared sizes bound the blob, which grows if they lie
            blob = np.empty(self._payload_bound(), np.uint8)
            used = 0
            lts: list[np.ndarray] = []
            starts_l: list[np.ndarray] = []
            sizes_l: list[np.ndarray] = []
            for _s, _t, _r, load in sorted(segs, key=lambda x: x[2]):
                try:
                    got: Any = load()
                except _Partial as p:
                    raise p.err from None
                b = got if isinstance(got, _Batch) else _batch_from_messages(got)
                if not len(b.lt):
                    continue
                size = int(b.sizes.sum())
                if used + size > len(blob):
                    grown = np.empty(max(2 * len(blob), used + size), np.uint8)
                    grown[:used] = blob[:used]
                    blob = grown
                _out, packed = _pack(b.buf, b.starts, b.sizes, blob[used : used + size])
                lts.append(b.lt)
                starts_l.append(packed + used)
                sizes_l.append(b.sizes)
                used += size
                del b, got
            blob = blob[:used]
            if lts:
                lt = np.concatenate(lts)
                starts = np.concatenate(starts_l)
                sizes = np.concatenate(sizes_l)
            else:
                lt, starts, sizes = np.zeros(0, np.uint64), np.zeros(0, np.int64), np.zeros(0, np.int64)
            if len(lt) > 1 and not bool(np.all(lt[1:] >= lt[:-1])):
                o = np.argsort(lt, kind="stable")
                lt, starts, sizes = lt[o], starts[o], sizes[o]
            # MCAP times are u64: int64 unless a time does not fit (then uint64, not wrapped)
            fits = not len(lt) or int(lt[-1]) <= _INT64_MAX
            result = (lt.astype(np.int64) if fits else lt, blob, starts, sizes)
            count = len(result[0])
        except _Redefined:  # nothing was returned yet: read again with the census
            self._run_census()
            self._drop_want(want)
            result = self.topic_payloads(topic)
            count = len(result[0])
            return result
        finally:
            self._drop_want(want)
            self._finish_report(count)
        if pending is None:
            pending = self._summary_crc_error
        if pending is not None and not self.recover:
            raise pending
        return result

    def _payload_bound(self) -> int:
        """Room for the payloads of a topic: the declared uncompressed chunk sizes (or the
        file size), at most four times the file size (a lying index cannot claim more)."""
        src = self.source
        assert isinstance(src, MappedSource)
        if self.has_summary and self.chunk_indexes:
            total = sum(c.uncompressed_size for c in self.chunk_indexes)
        else:
            total = 2 * src.size
        return max(0, min(total, 4 * src.size + (1 << 20)))

    def _finish_report(self, count: int) -> None:
        if self.recover:
            sr = self._scan_result or _ScanResult()
            self.recovery_report = {
                "messages": count,
                "bytes_skipped": sr.bytes_skipped,
                "errors": self._header_errors + list(sr.errors),
            }

    # --- streams -------------------------------------------------------------------------------------
    def _stream_records(self) -> Iterator[tuple[int, bytes, int]]:
        """(opcode, content, file offset) of each top-level record of a stream, after the Header.

        Checks the data section CRC at DataEnd and the closing magic after the Footer.
        """
        src = self.source
        assert isinstance(src, StreamSource)
        if self._stream_used:
            raise PolybagError(f"{self.path}: the stream was already read; open it again")
        self._stream_used = True
        crc = zlib.crc32(MAGIC + getattr(self, "_stream_head", b""))
        check = self.validate_crcs and not self.recover
        ended = False
        scrc = 0
        while True:
            pos = src.position
            head = src.read(9)
            if len(head) < 9:
                raise self._err(TruncatedError, f"expected a record header (9 bytes), stream has {len(head)} left", pos)
            op, ln = RECORD_HEAD.unpack_from(head, 0)
            if op == 0:
                raise self._err(FormatError, "record opcode 0x00 is invalid", pos)
            body = src.read_exact(ln, f"record (opcode 0x{op:02x})")
            if op == _OP_DATA_END and not ended:
                if check and ln >= 4:
                    want_crc = U32.unpack_from(body, 0)[0]
                    if want_crc and want_crc != crc:
                        raise self._err(
                            ChecksumError, f"data section CRC is {crc:#010x}, the DataEnd record holds {want_crc:#010x}", pos
                        )
                check = False
                ended = True
            elif check:
                crc = zlib.crc32(body, zlib.crc32(head, crc))
            elif ended and op != _OP_FOOTER:
                scrc = zlib.crc32(body, zlib.crc32(head, scrc))
            if op == _OP_FOOTER and ln >= 20 and self.validate_crcs and not self.recover:
                want_crc = U32.unpack_from(body, 16)[0]
                got = zlib.crc32(body[:16], zlib.crc32(head, scrc))
                if want_crc and got != want_crc:
                    raise self._err(ChecksumError, f"summary section CRC is {got:#010x}, the Footer records {want_crc:#010x}", pos)
            yield op, body, pos
            if op == _OP_FOOTER:
                tail = src.read(8)
                if tail != MAGIC:
                    raise self._err(TruncatedError, "expected the closing MCAP magic after the Footer", src.position - len(tail))
                extra = src.read(1)
                if extra:
                    raise self._err(FormatError, "bytes follow the closing magic", src.position - 1)
                return

    def _stream_messages(self, topics: TopicSelector, start: int | None, end: int | None, order: str) -> Iterator[Message]:
        want = self._want(topics)

        lo = -1 if start is None else start
        hi = 1 << 64 if end is None else end

        def segments() -> Iterator[Segment]:
            rank = 0
            ended = False
            pending: tuple[bytes, int] | None = None
            index_bodies: list[bytes] = []

            def flush() -> tuple[Segment, PolybagError | None]:
                nonlocal pending, rank
                assert pending is not None
                body, pos = pending
                pending = None
                buf = self._decode_chunk(body, 0, len(body), pos)
                positions = _positions_from_index_records(index_bodies, len(buf)) if index_bodies else None
                late: PolybagError | None = None
                try:
                    out = self._chunk_messages(buf, pos, want, start, end, positions, False, gap_defs=True)
                except _Partial as p:
                    out, late = p.msgs, p.err
                seg = (0, rank, _const(out))
                rank += 1
                return seg, late

            try:
                for op, body, pos in self._stream_records():
                    if pending is not None:
                        if op == _OP_MESSAGE_INDEX:
                            index_bodies.append(body)
                            continue
                        seg, late = flush()
                        yield seg
                        if late is not None:
                            raise late
                    if ended:
                        continue  # summary records: read (and CRC-checked), nothing new in them
                    if op == _OP_SCHEMA or op == _OP_CHANNEL:
                        self._define(body, op, -9, len(body), pos + 9)
                    elif op == _OP_CHUNK:
                        # decoded once the Message Index records after it have been seen
                        pending = (body, pos)
                        index_bodies = []
                    elif op == _OP_MESSAGE:
                        rec = R.parse_record(op, body, 0, len(body), self.path, pos + 9)
                        assert isinstance(rec, R.MessageRecord)
                        if not (lo <= rec.log_time < hi):
                            continue
                        ch = self._channels.get(rec.channel_id)
                        if ch is None:
                            raise self._err(
                                FormatError, f"message on channel {rec.channel_id}, which no earlier Channel record defines", pos
                            )
                        if want is not None and ch.id not in want:
                            continue
                        data = memoryview(body)[MESSAGE_HEAD_LEN:] if len(body) >= MESSAGE_HEAD_LEN else b""
                        yield rec.log_time, rank, _const([Message(ch, rec.log_time, rec.publish_time, rec.sequence, data)])
                        rank += 1
                    elif op == _OP_DATA_END:
                        ended = True
            except PolybagError:
                if pending is not None:  # a complete chunk right before the damage
                    index_bodies = []  # its indexes may be cut short: walk it
                    seg, _late = flush()
                    yield seg
                raise

        def inner() -> Iterator[Message]:
            try:
                for _s, _r, load in segments():
                    yield from load()
            finally:
                self._drop_want(want)

        return inner()

    # --- records (for the conformance runner and tools) ------------------------------------------
    def records(self, expand_chunks: bool = True) -> Iterator[R.Record]:
        """Every record from the Header to the Footer in file order.

        With ``expand_chunks`` a Chunk is replaced by the records inside it and Message
        Index records are dropped (the conformance suite's streamed view).
        """
        yield self.header
        if isinstance(self.source, StreamSource):
            it: Iterator[tuple[int, bytes | memoryview, int]] = self._stream_records()
        else:
            it = self._mapped_records()
        for op, body, pos in it:
            if op == _OP_CHUNK and expand_chunks:
                buf = self._decode_chunk(body, 0, len(body), pos)
                p = 0
                n = len(buf)
                while p < n:
                    if p + 9 > n:
                        raise self._err(FormatError, f"inside Chunk at {pos}: record header needs 9 bytes, {n - p} left", pos)
                    iop, iln = RECORD_HEAD.unpack_from(buf, p)
                    if p + 9 + iln > n:
                        raise self._err(FormatError, f"inside Chunk at {pos}: record declares {iln} bytes, {n - p - 9} left", pos)
                    yield R.parse_record(iop, buf, p + 9, p + 9 + iln, self.path, 0)
                    p += 9 + iln
                continue
            if op == _OP_MESSAGE_INDEX and expand_chunks:
                continue
            rec = R.parse_record(op, body, 0, len(body), self.path, pos + 9)
            if isinstance(rec, R.AttachmentRecord) and rec.crc and self.validate_crcs:
                got = zlib.crc32(memoryview(body)[: rec.crc_end])
                if got != rec.crc:
                    raise self._err(ChecksumError, f"Attachment {rec.name!r} CRC is {got:#010x}, the record holds {rec.crc:#010x}", pos)
            yield rec

    def _mapped_records(self) -> Iterator[tuple[int, memoryview, int]]:
        src = self.source
        assert isinstance(src, MappedSource)
        view = src.view
        size = src.size
        pos = self._header_end
        if not pos:
            raise self._err(TruncatedError, "no complete Header record", 8)
        checked = not self.validate_crcs
        while True:
            if pos + 9 > size:
                raise self._err(TruncatedError, f"expected a record header (9 bytes), file has {size - pos} left", pos)
            op, ln = RECORD_HEAD.unpack_from(view, pos)
            if op == 0:
                raise self._err(FormatError, "record opcode 0x00 is invalid", pos)
            e = pos + 9 + ln
            if e > size:
                raise self._err(TruncatedError, f"record (opcode 0x{op:02x}) declares {ln} bytes, file has {size - pos - 9} left", pos)
            if op == _OP_DATA_END and not checked:
                checked = True
                if ln >= 4:
                    want_crc = U32.unpack_from(view, pos + 9)[0]
                    got = zlib.crc32(view[:pos])
                    if want_crc and got != want_crc:
                        raise self._err(ChecksumError, f"data section CRC is {got:#010x}, the DataEnd record holds {want_crc:#010x}", pos)
            if op == _OP_FOOTER and self.validate_crcs and ln >= 20:
                ss, _sos, scrc = R.FOOTER_BODY.unpack_from(view, pos + 9)
                if scrc and ss:
                    got = zlib.crc32(view[ss : pos + 25]) if ss <= pos else -1
                    if got != scrc:
                        raise self._err(ChecksumError, f"summary section CRC is {got:#010x}, the Footer records {scrc:#010x}", pos)
            yield op, view[pos + 9 : e], pos
            if op == _OP_FOOTER:
                if e + 8 > size or bytes(view[e : e + 8]) != MAGIC:
                    raise self._err(TruncatedError, "expected the closing MCAP magic after the Footer", e)
                if e + 8 != size:
                    raise self._err(FormatError, f"{size - e - 8} bytes follow the closing magic", e + 8)
                return
            pos = e

    # --- attachments and metadata -------------------------------------------------------------
    def _record_at(self, offset: int, op_expected: int, what: str) -> tuple[R.Record, memoryview]:
        src = self.source
        assert isinstance(src, MappedSource)
        if offset + 9 > src.size:
            raise self._err(TruncatedError, f"expected a {what} record header", offset)
        op, ln = RECORD_HEAD.unpack_from(src.view, offset)
        if op != op_expected:
            raise self._err(FormatError, f"expected a {what} record (opcode 0x{op_expected:02x}), found opcode 0x{op:02x}", offset)
        if ln > src.size - offset - 9:
            raise self._err(TruncatedError, f"{what} declares {ln} bytes, file has {src.size - offset - 9} left", offset)
        body = src.view[offset + 9 : offset + 9 + ln]
        return R.parse_record(op, body, 0, ln, self.path, offset + 9), body

    def _attachment(self, offset: int) -> Attachment:
        rec, body = self._record_at(offset, _OP_ATTACHMENT, "Attachment")
        assert isinstance(rec, R.AttachmentRecord)
        if rec.crc and self.validate_crcs:
            got = zlib.crc32(body[: rec.crc_end])
            if got != rec.crc:
                raise self._err(ChecksumError, f"Attachment {rec.name!r} CRC is {got:#010x}, the record holds {rec.crc:#010x}", offset)
        return Attachment(rec.name, rec.media_type, rec.data, rec.log_time, rec.create_time)

    def attachments(self) -> Iterator[Attachment]:
        for off in self._record_offsets(Opcode.ATTACHMENT_INDEX, self.attachment_indexes, "attachments"):
            try:
                yield self._attachment(off)
            except PolybagError as err:
                if not self.recover:
                    raise
                self._note(str(err), 0)

    def metadata(self) -> Iterator[Metadata]:
        for off in self._record_offsets(Opcode.METADATA_INDEX, self.metadata_indexes, "metadata"):
            try:
                rec, _body = self._record_at(off, _OP_METADATA, "Metadata")
            except PolybagError as err:
                if not self.recover:
                    raise
                self._note(str(err), 0)
                continue
            assert isinstance(rec, R.MetadataRecord)
            yield Metadata(rec.name, rec.metadata)

    def _record_offsets(self, index_op: int, indexes: list[Any], scanned: str) -> list[int]:
        """Offsets of the attachment or metadata records: from the summary's index records
        when it has that group (or says there are none), from a scan otherwise."""
        self._materialize()
        if self.has_summary and (indexes or self._summary_has_group(index_op)):
            return [i.offset for i in indexes]
        if self.has_summary and self._summary_complete():
            return []
        return list(getattr(self._scan(), scanned))

    def _summary_has_group(self, op: int) -> bool:
        return any(s.group_opcode == op for s in self.summary_offsets)

    def _summary_complete(self) -> bool:
        """Whether the summary says how many attachments and metadata records there are."""
        st = self.statistics
        if st is None:
            return False
        return st.attachment_count == len(self.attachment_indexes) and st.metadata_count == len(self.metadata_indexes)

    # --- summary ---------------------------------------------------------------------------------
    @property
    def summary(self) -> Summary:
        if self._summary is None:
            self._materialize()
            if self._summary_crc_error is not None:
                raise self._summary_crc_error
            self._defs_ready()
            was = gc.isenabled()
            gc.disable()
            try:
                # a file that redefines ids: the summary's per-id counts cannot tell versions apart
                self._summary = self._summary_from_index() if self.has_summary and self._census is None else None
            finally:
                if was:
                    gc.enable()
            if self._summary is None:
                try:
                    self._summary = self._summary_from_scan()
                except _Redefined:
                    self._run_census()
                    self._summary = self._summary_from_scan()
        return self._summary

    @property
    def has_index(self) -> bool:
        """True when the file has a summary section (read at open)."""
        return self.has_summary

    def chunk_message_counts(self, channel_ids: set[int] | None = None) -> list[tuple[int, int, int]] | None:
        """Per chunk of the Chunk Indexes: ``(start, end, count of channel_ids)``.

        Counts come from the Message Index records the Chunk Index points at (array length
        / 16); only their 15-byte headers are read.  A chunk without Message Index offsets,
        or whose headers do not check out, gets an estimate instead: the channels' total
        count (from the summary) shared out by uncompressed size, at least 1.  ``None``
        without a summary or Chunk Indexes.
        """
        if not self.has_summary or not self.chunk_indexes:
            return None
        cis = self.chunk_indexes
        summary = self.summary
        view = getattr(self.source, "view", None)
        size = getattr(self.source, "size", 0)
        wanted_ids = set(summary.channels) if channel_ids is None else channel_ids
        total = sum(summary.message_counts.get(c, 0) for c in wanted_ids)
        all_unc = sum(max(ci.uncompressed_size, 1) for ci in cis) or 1
        out: list[tuple[int, int, int]] = []
        for ci in cis:
            offs = ci.message_index_offsets
            estimate = max(1, total * max(ci.uncompressed_size, 1) // all_unc)
            if not offs or view is None:
                out.append((ci.message_start_time, ci.message_end_time, estimate))
                continue
            n = 0
            exact = True
            for cid in {c & _FILE_ID for c in wanted_ids} & offs.keys():
                off = offs[cid]
                if (
                    off + 15 > size
                    or view[off] != _OP_MESSAGE_INDEX
                    or U16.unpack_from(view, off + 9)[0] != cid
                ):
                    exact = False
                    break
                n += U32.unpack_from(view, off + 11)[0] // 16
            if not exact:
                out.append((ci.message_start_time, ci.message_end_time, estimate))
            elif n:
                out.append((ci.message_start_time, ci.message_end_time, n))
        return out

    def _summary_base(self, indexed: bool) -> Summary:
        src = self.source
        assert isinstance(src, MappedSource)
        return Summary(
            format="mcap",
            profile=self.header.profile,
            library=self.header.library,
            version="0",
            file_size=src.size,
            indexed=indexed,
        )

    def _summary_from_index(self) -> Summary | None:
        st = self.statistics
        cis = self.chunk_indexes
        known = set(dict(self._channels))
        referenced: set[int] = set()
        for ci in cis:
            referenced.update(ci.message_index_offsets)
        if st is not None:
            referenced.update(st.channel_message_counts)
        if not referenced.issubset(known):
            return None  # the summary does not repeat the channels: scan instead
        if st is None and not cis:
            return None
        s = self._summary_base(True)
        s.schemas = dict(self.schemas)
        s.channels = dict(self._channels)
        counts_from_mi = st is None or (not st.channel_message_counts and st.message_count > 0)
        chunk_counts: list[int] = [0] * len(cis)
        counts_unknown = False
        if counts_from_mi:
            if st is None and cis and not any(ci.message_index_offsets for ci in cis):
                return None
            mi_counts = self._counts_from_message_indexes(cis)
            if mi_counts is None:
                # the message index headers do not check out: say so rather than guess
                counts_unknown = True
                s.message_counts = {}
            else:
                s.message_counts, chunk_counts = mi_counts
        else:
            assert st is not None
            s.message_counts = dict(st.channel_message_counts)
        if not counts_unknown:
            for cid in s.channels:
                s.message_counts.setdefault(cid, 0)
        if st is not None and st.message_count:
            s.start_time, s.end_time = st.message_start_time, st.message_end_time
        elif cis and (s.message_count or counts_unknown):
            s.start_time = min(c.message_start_time for c in cis)
            s.end_time = max(c.message_end_time for c in cis)
        s.chunks = [
            ChunkInfo(
                c.chunk_start_offset, c.chunk_length, c.message_start_time, c.message_end_time,
                compression.normalize(c.compression) if c.compression in ("", "none", "zstd", "lz4") else c.compression,
                c.compressed_size, c.uncompressed_size, chunk_counts[i],
            )
            for i, c in enumerate(cis)
        ]  # fmt: skip
        s.attachment_count = st.attachment_count if st is not None else len(self.attachment_indexes)
        s.metadata_count = st.metadata_count if st is not None else len(self.metadata_indexes)
        s.extras = self._extras()
        if counts_unknown:
            s.extras["message_counts"] = "unknown"
            s.extras["message_counts_problem"] = (
                "the summary has no statistics and the message index records it points at do not check out"
            )
        return s

    def _counts_from_message_indexes(self, cis: list[Any]) -> tuple[dict[int, int], list[int]] | None:
        """Per-channel and per-chunk counts from the Message Index record headers, validated.

        Only each record's 15-byte header is read (opcode, length, channel id, array byte
        length), at offsets the summary's chunk indexes give; every header must sit inside
        the chunk's declared message index area, carry opcode 0x07 and the channel id the
        chunk index names, and its array must fill the record exactly in 16-byte entries.
        ``None`` when anything fails: the caller reports the counts as unknown.
        """
        src = self.source
        assert isinstance(src, MappedSource)
        view = src.view
        counts: dict[int, int] = {}
        chunk_counts = [0] * len(cis)
        for i, ci in enumerate(cis):
            lo = ci.chunk_start_offset + ci.chunk_length
            hi = lo + ci.message_index_length
            if hi > src.size:
                return None
            for cid, off in ci.message_index_offsets.items():
                if off < lo or off + 15 > hi or view[off] != 0x07:
                    return None
                reclen = U64.unpack_from(view, off + 1)[0]
                if U16.unpack_from(view, off + 9)[0] != cid:
                    return None
                alen = U32.unpack_from(view, off + 11)[0]
                if alen % 16 or reclen < 6 + alen or off + 9 + reclen > hi:
                    return None
                counts[cid] = counts.get(cid, 0) + alen // 16
                chunk_counts[i] += alen // 16
        return counts, chunk_counts

    def _extras(self) -> dict[str, Any]:
        ex: dict[str, Any] = {}
        st = self.statistics
        if st is not None:
            ex["statistics"] = {
                "message_count": st.message_count,
                "schema_count": st.schema_count,
                "channel_count": st.channel_count,
                "attachment_count": st.attachment_count,
                "metadata_count": st.metadata_count,
                "chunk_count": st.chunk_count,
                "message_start_time": st.message_start_time,
                "message_end_time": st.message_end_time,
            }
        if self.summary_offsets:
            ex["summary_offsets"] = {R.OPCODE_NAMES.get(s.group_opcode, f"0x{s.group_opcode:02x}"): s.group_length for s in self.summary_offsets}
        if self.attachment_indexes:
            ex["attachments"] = [
                {"name": a.name, "media_type": a.media_type, "size": a.data_size, "log_time": a.log_time} for a in self.attachment_indexes
            ]
        if self.metadata_indexes:
            ex["metadata"] = [m.name for m in self.metadata_indexes]
        return ex

    def _summary_from_scan(self) -> Summary:
        sr = self._scan()
        s = self._summary_base(False)
        counts: dict[int, int] = {}
        lo = 1 << 64
        hi = -1
        chunks: list[ChunkInfo] = []
        src = self.source
        assert isinstance(src, MappedSource)
        for off, ln, _cs, _ce in sr.chunks:
            try:
                buf = self._chunk_data(off)
                if self._census is not None and self._census.versions:
                    n, clo, chi = self._count_versions(buf, off, counts)
                else:
                    n, clo, chi = _count_chunk(buf, counts, self._defs_for(buf, 0, off))
            except (PolybagError, _Bad) as err:
                if isinstance(err, _Bad):
                    err = self._err(FormatError, f"inside Chunk at {off}: {err.what}", off)
                if not self.recover:
                    raise err from None
                self._note(str(err), 0)
                continue
            if n:
                lo, hi = min(lo, clo), max(hi, chi)
            comp, csize, usize = self._chunk_header_info(off)
            chunks.append(ChunkInfo(off, ln, clo if n else 0, chi if n else 0, comp, csize, usize, n))
        self._defs_scanned = len(sr.chunks)
        view = src.view
        cen = self._census
        for _rank, t0, t1, offs in sr.loose:
            for p in offs:
                cid = R.U16.unpack_from(view, p + 9)[0] if U64.unpack_from(view, p + 1)[0] >= 2 else 0
                if cen is not None and cid in cen.versions:
                    cid = cen.at(cid, (p, -1)).id
                counts[cid] = counts.get(cid, 0) + 1
            lo, hi = min(lo, t0), max(hi, t1)
        if cen is not None:  # every version of a redefined id is a channel (schema) of its own
            s.schemas = dict(cen.schemas)
            s.channels = {c.id: c for c in cen.channels}
        else:
            s.schemas = dict(self.schemas)
            s.channels = dict(self._channels)
        s.message_counts = {cid: counts.get(cid, 0) for cid in s.channels}
        for cid, n in counts.items():
            s.message_counts.setdefault(cid, n)
        if hi >= 0:
            s.start_time, s.end_time = lo, hi
        s.chunks = chunks
        s.attachment_count = len(sr.attachments)
        s.metadata_count = len(sr.metadata)
        s.extras = self._extras()
        if sr.error is not None:
            s.extras["error"] = str(sr.error)
        if self.summary_error:
            s.extras["summary_error"] = self.summary_error
        if self.definition_problems:
            s.extras["redefinitions"] = list(self.definition_problems)
        return s

    def _count_versions(self, buf: bytes, off: int, counts: dict[int, int]) -> tuple[int, int, int]:
        """Like :func:`_count_chunk` for a file that redefines ids: counts by channel version."""
        cen = self._census
        assert cen is not None
        chans = cen.map_at(off, self._channels)
        inside = cen.inside.get(off) or []
        n = len(buf)
        head = RECORD_HEAD.unpack_from
        mhead = R.MESSAGE_HEAD.unpack_from
        pos = j = total = 0
        lo, hi = 1 << 64, -1
        while pos < n:
            while j < len(inside) and inside[j][0] <= pos:
                chans[inside[j][1]] = inside[j][2]
                j += 1
            if pos + 9 > n:
                raise _Bad(pos, f"record header needs 9 bytes, chunk has {n - pos} left")
            op, ln = head(buf, pos)
            e = pos + 9 + ln
            if e > n:
                raise _Bad(pos, f"record (opcode 0x{op:02x}) declares {ln} bytes, chunk has {n - pos - 9} left")
            if op == 5:
                if ln >= MESSAGE_HEAD_LEN:
                    cid, _seq, lt, _pt = mhead(buf, pos + 9)
                else:
                    rec = R.parse_record(5, buf, pos + 9, e)
                    assert isinstance(rec, R.MessageRecord)
                    cid, lt = rec.channel_id, rec.log_time
                ch = chans.get(cid)
                iid = cid if ch is None else ch.id
                counts[iid] = counts.get(iid, 0) + 1
                total += 1
                lo, hi = min(lo, lt), max(hi, lt)
            pos = e
        return total, lo, hi

    def _chunk_header_info(self, off: int) -> tuple[str, int, int]:
        src = self.source
        assert isinstance(src, MappedSource)
        view = src.view
        p = off + 9 + CHUNK_HEAD.size
        usize = CHUNK_HEAD.unpack_from(view, off + 9)[2]
        clen = U32.unpack_from(view, p)[0]
        comp = bytes(view[p + 4 : p + 4 + clen]).decode("utf-8", "replace")
        csize = U64.unpack_from(view, p + 4 + clen)[0]
        return (comp or "none"), csize, usize

    def info_extras(self) -> dict[str, Any]:
        s = self.summary
        ex = dict(s.extras)
        comp: dict[str, int] = {}
        for c in s.chunks:
            comp[c.compression] = comp.get(c.compression, 0) + 1
        ex["chunk_compression"] = comp
        ex["indexed"] = s.indexed
        return ex


_CI_MID = struct.Struct("<QI")
_CI_TAIL = struct.Struct("<QQ")


def _fast_chunk_index(view: memoryview, p: int, end: int) -> R.ChunkIndex | None:
    """A complete Chunk Index record without extra fields, parsed with three structs."""
    if end - p < 60:
        return None
    s, e, off, ln = R.CHUNK_INDEX_HEAD.unpack_from(view, p)
    mlen = U32.unpack_from(view, p + 32)[0]
    p += 36
    if mlen % 10 or p + mlen + 12 > end:
        return None
    mio = dict(R.U16U64.iter_unpack(view[p : p + mlen])) if mlen else {}
    p += mlen
    mil, clen = _CI_MID.unpack_from(view, p)
    p += 12
    if p + clen + 16 != end:
        return None
    try:
        comp = bytes(view[p : p + clen]).decode("utf-8")
    except UnicodeDecodeError:
        return None
    cs, us = _CI_TAIL.unpack_from(view, p + clen)
    return R.ChunkIndex(s, e, off, ln, mio, mil, comp, cs, us)


def _const(msgs: list[Message]) -> Callable[[], list[Message]]:
    return lambda: msgs


def _reversed_loader(load: Callable[[], list[Message]]) -> Callable[[], list[Message]]:
    def inner() -> list[Message]:
        msgs = load()
        msgs.reverse()
        return msgs

    return inner


def _u16_at(view: memoryview, pos: int) -> int:
    v: int = R.U16.unpack_from(view, pos)[0]
    return v


def open_mcap(
    source: Source,
    path: str | None = None,
    *,
    validate_crcs: bool = True,
    recover: bool = False,
    max_chunk_bytes: int | None = None,
    **_options: Any,
) -> McapReader:
    """The opener registered in :mod:`polybag.formats.sniff`."""
    return McapReader(source, path, validate_crcs=validate_crcs, recover=recover, max_chunk_bytes=max_chunk_bytes)
