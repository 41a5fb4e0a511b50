"""Bulk parsing of a decompressed chunk with numpy: the fast path for message records.

The record offsets of a chunk (from its Message Index records, or one pass over the record
heads) select the fixed 31-byte heads of all its messages at once into a structured array;
filtering by channel and time and sorting by log time happen there, and Python runs once
per message only to create the :class:`~polybag.model.Message` (:func:`messages_from_heads`),
or not at all when only payloads are wanted (:class:`PayloadBatch`, gathered by
:mod:`polybag.formats.shared.payloads`, for ``topic_payloads``).  Anything unusual raises
``NeedRecordWalk`` (the record-by-record walk of :mod:`polybag.formats.mcap.walk_kernels`
takes over).  Also: the Schema/Channel records lying between the listed messages, message
offsets from Message Index record bodies, and the record offsets a chunk's Message Index
entries give (:func:`index_positions`).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from polybag.formats.mcap import records as R
from polybag.formats.mcap.records import RECORD_HEAD, RECORD_MESSAGE_HEAD_LEN, U32
from polybag.formats.mcap.vocabulary import ChunkDamage, NeedRecordWalk, UnknownChannelId
from polybag.formats.mcap.walk_kernels import walk_defs
from polybag.formats.shared.payloads import gather, packed
from polybag.model import Channel, Message

MESSAGE_INDEX_ENTRY_DTYPE = np.dtype(R.MESSAGE_INDEX_DTYPE)

# one message record head as a packed numpy record (31 bytes), for bulk parsing
MESSAGE_HEAD_DTYPE = np.dtype(
    [("op", "u1"), ("len", "<u8"), ("cid", "<u2"), ("seq", "<u4"), ("lt", "<u8"), ("pt", "<u8")]
)
_V31 = np.dtype(f"V{MESSAGE_HEAD_DTYPE.itemsize}")  # the same bytes, copied whole (faster than field by field)
_COPY_BELOW = 4096  # average payloads smaller than this are copied (cheaper than views)


def bulk_heads(
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

    Returns (heads as a ``MESSAGE_HEAD_DTYPE`` array, their record offsets), filtered by channel
    and time, in log-time order (stable) if ``sort``.  ``expect_cid`` are the channel ids
    a Message Index gave for ``offs``: a record on another channel means the index lies
    (:class:`NeedRecordWalk`: the chunk is walked instead).
    """
    n = len(buf)
    if not len(offs):
        return np.zeros(0, MESSAGE_HEAD_DTYPE), offs
    if int(offs.max()) + RECORD_MESSAGE_HEAD_LEN > n or int(offs.min()) < 0:
        raise NeedRecordWalk
    rec = at_every_byte(buf, _V31)[offs].view(MESSAGE_HEAD_DTYPE)  # one 31-byte copy per record
    ln = rec["len"]
    if not bool(np.all(rec["op"] == 5)) or not bool(np.all(ln >= 22)):
        raise NeedRecordWalk
    if expect_cid is not None and not np.array_equal(rec["cid"], expect_cid):
        raise NeedRecordWalk
    room = (n - 9 - offs).astype(np.uint64)
    over = ln > room
    if bool(over.any()):
        i = int(np.argmax(over))
        raise ChunkDamage(int(offs[i]), f"message declares {int(ln[i])} bytes, chunk has {int(room[i])} left")
    mask = _heads_mask(rec, channels, want, start, end)
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


def at_every_byte(buf: bytes | memoryview, dtype: np.dtype, skip: int = 0) -> np.ndarray:
    """A read-only view of ``buf`` with one ``dtype`` item starting at every byte offset
    ``skip + i`` (stride 1, items overlapping), so that ``view[offs]`` gathers the items at
    arbitrary offsets ``offs + skip`` in one fancy index.  ``len(buf) >= skip + dtype.itemsize``."""
    n = len(buf) - skip - dtype.itemsize + 1
    return np.ndarray((n,), dtype, buffer=buf, offset=skip, strides=(1,))


def _heads_mask(
    rec: np.ndarray, channels: dict[int, Channel], want: set[int] | None, start: int | None, end: int | None
) -> np.ndarray | None:
    """Which of the message heads ``rec`` are wanted (channel and time); None: all of them."""
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
                raise UnknownChannelId(c, 0)
        if len(want) == 1:
            m3 = rec["cid"] == np.uint16(next(iter(want)))
        else:
            m3 = np.isin(rec["cid"], np.fromiter(want, np.uint16, len(want)))
        mask = m3 if mask is None else mask & m3
    return mask


def messages_from_heads(
    buf: bytes | memoryview, rec: np.ndarray, offs: np.ndarray, channels: dict[int, Channel]
) -> list[Message]:
    """The messages of the record heads (and offsets) :func:`bulk_heads` selected."""
    if not len(offs):
        return []
    lens = rec["len"].astype(np.int64)
    starts = (offs + RECORD_MESSAGE_HEAD_LEN).tolist()
    ends = (offs + 9 + lens).tolist()
    chans = channel_of_each(rec["cid"], channels)
    src = buf if isinstance(buf, memoryview) or int(lens.sum()) < _COPY_BELOW * len(lens) else memoryview(buf)
    was = gc.isenabled()
    gc.disable()
    try:
        lts = rec["lt"].tolist()
        # writers often publish at the log time: then the same int objects serve both
        pts = lts if np.array_equal(rec["pt"], rec["lt"]) else rec["pt"].tolist()
        M = Message
        return [M(c, lt, pt, sq, src[a:b]) for c, lt, pt, sq, a, b in zip(chans, lts, pts, rec["seq"].tolist(), starts, ends)]
    finally:
        if was:
            gc.enable()


_BATCH = 512  # messages a stream builds at a time: under the collector's first threshold (700)


def message_batches(
    buf: bytes | memoryview, rec: np.ndarray, offs: np.ndarray, channels: dict[int, Channel]
) -> Iterator[list[Message]]:
    """:func:`messages_from_heads` in lists of :data:`_BATCH` messages, each built when the
    one before it has been taken (a stream in file order).

    The fields are read (and the channels looked up, raising :class:`UnknownChannelId`) at
    once; the messages are made batch by batch, so that a reader that drops each message
    before taking the next keeps few of them alive: the cyclic collector then rarely runs
    and finds little to traverse (a whole chunk of messages alive at once is traversed
    by every collection that runs while it is, ~10% of the iteration)."""
    k = len(offs)
    if not k:
        return iter(())
    lens = rec["len"].astype(np.int64)
    starts = (offs + RECORD_MESSAGE_HEAD_LEN).tolist()
    ends = (offs + 9 + lens).tolist()
    chans = channel_of_each(rec["cid"], channels)
    src = buf if isinstance(buf, memoryview) or int(lens.sum()) < _COPY_BELOW * k else memoryview(buf)
    lts = rec["lt"].tolist()
    pts = lts if np.array_equal(rec["pt"], rec["lt"]) else rec["pt"].tolist()
    seqs = rec["seq"].tolist()

    def batches() -> Iterator[list[Message]]:
        M = Message
        for i in range(0, k, _BATCH):
            j = i + _BATCH
            yield [
                M(c, lt, pt, sq, src[a:b])
                for c, lt, pt, sq, a, b in zip(chans[i:j], lts[i:j], pts[i:j], seqs[i:j], starts[i:j], ends[i:j])
            ]

    return batches()


def channel_of_each(cids: np.ndarray, channels: dict[int, Channel]) -> list[Channel]:
    """The channel of each id of ``cids`` (uint16): a lookup table indexed in C when the
    ids are fewer than the messages, else one dict lookup per message; :class:`UnknownChannelId` for an id
    ``channels`` lacks."""
    top = int(cids.max())
    if top < len(cids):  # the table costs less than a lookup per message
        table = np.empty(top + 1, object)
        known = np.zeros(top + 1, bool)
        get = channels.get
        for cid in range(top + 1):
            ch = get(cid)
            if ch is not None:
                table[cid] = ch
                known[cid] = True
        ok = known[cids]
        if not bool(ok.all()):
            raise UnknownChannelId(int(cids[int(np.argmin(ok))]), 0)
        chans: list[Channel] = table[cids].tolist()
        return chans
    try:
        return list(map(channels.__getitem__, cids.tolist()))
    except KeyError as e:
        raise UnknownChannelId(e.args[0], 0) from None


@dataclass
class PayloadBatch:
    """The wanted payloads of one segment (for :meth:`McapReader.topic_payloads`).

    ``lt``, ``starts`` and ``sizes`` are in log-time order (stable); the payloads lie in
    ``buf`` (the decompressed chunk) at ``starts``.
    """

    lt: np.ndarray  # uint64
    buf: np.ndarray  # uint8
    starts: np.ndarray  # int64
    sizes: np.ndarray  # int64


def pack_payloads(a: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The payloads ``a[starts[i]:starts[i] + sizes[i]]`` back to back: (blob, new starts),
    as :func:`polybag.formats.shared.payloads.gather` packs them."""
    out = np.empty(int(sizes.sum()) if len(starts) else 0, np.uint8)
    return out, gather(a, starts, sizes, out)


def batch_from_heads(buf: bytes | memoryview, rec: np.ndarray, offs: np.ndarray) -> PayloadBatch:
    """A batch from the record heads (and offsets) :func:`bulk_heads` selected."""
    starts = offs + RECORD_MESSAGE_HEAD_LEN
    sizes = rec["len"].astype(np.int64) - (RECORD_MESSAGE_HEAD_LEN - 9)
    return PayloadBatch(rec["lt"].astype(np.uint64), np.frombuffer(buf, np.uint8), starts, sizes)


def batch_from_messages(msgs: list[Message]) -> PayloadBatch:
    """A batch from messages the record-by-record walk produced (unusual or damaged chunks)."""
    buf, starts, sizes = packed([m.data for m in msgs])
    return PayloadBatch(np.fromiter((m.log_time for m in msgs), np.uint64, len(msgs)), buf, starts, sizes)


_U64 = np.dtype("<u8")


def defs_between_messages(buf: bytes | memoryview, offs: np.ndarray, defs: Callable[[int, int, int], None]) -> bool:
    """Register the Schema/Channel records lying between the message records at ``offs``.

    False when the offsets do not tile the chunk consistently (then walk it whole).
    """
    n = len(buf)
    if not len(offs):
        walk_defs(buf, defs)
        return True
    if int(offs[0]) < 0 or int(offs[-1]) + 9 > n:
        return False
    lens = at_every_byte(buf, _U64, 1)[offs]
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


def u64_at(buf: bytes | memoryview, pos: np.ndarray) -> np.ndarray:
    """The little-endian u64 at each (int64) byte offset ``pos`` of ``buf`` (``pos + 16 <= len(buf)``
    rounded down to whole words must hold): two aligned words shifted together."""
    words = np.frombuffer(buf, "<u8", count=len(buf) // 8)
    q = pos >> 3
    r = (pos & 7).astype(np.uint64) * np.uint64(8)
    lo = words[q]
    hi = words[np.minimum(q + 1, len(words) - 1)]
    with np.errstate(over="ignore"):
        out: np.ndarray = np.where(r == 0, lo, (lo >> r) | (hi << (np.uint64(64) - r)))
    return out


def positions_from_index_records(bodies: list[bytes], n: int) -> np.ndarray | None:
    """Message offsets (sorted) from Message Index record bodies that followed a chunk."""
    parts = []
    for body in bodies:
        if len(body) < 6:
            return None
        rlen = U32.unpack_from(body, 2)[0]
        if rlen % 16 or 6 + rlen > len(body):
            return None
        parts.append(np.frombuffer(body, MESSAGE_INDEX_ENTRY_DTYPE, count=rlen // 16, offset=6)["offset"])
    if not parts:
        return None
    pos = np.sort(np.concatenate(parts)) if len(parts) > 1 else np.sort(parts[0])
    if len(pos) and (int(pos[-1]) >= n or (len(pos) > 1 and not bool(np.all(pos[1:] > pos[:-1])))):
        return None
    return pos.astype(np.int64)


def index_positions(
    buf: bytes | memoryview, parts: list[tuple[int, np.ndarray]], start: int | None, end: int | None, with_cids: bool
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
                if not np.array_equal(u64_at(buf, pos[out].astype(np.int64) + 15), lts[out]):
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
