"""Record-by-record walks over a decompressed chunk: the hot loops.

The fallbacks of the bulk path (:mod:`polybag.formats.mcap.bulk_kernels`) for chunks with short,
unusual or damaged records, the walk of a chunk that redefines a channel id part-way
(each message with the channel in force where it lies), the walk that registers only the
Schema/Channel records, and the per-channel count used by a summary built from a scan.
Each is one tight ``while`` loop with one precompiled struct per record; damage inside
the chunk raises :class:`~polybag.formats.mcap.vocabulary.ChunkDamage` with its offset.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from polybag.formats.mcap import records as R
from polybag.formats.mcap.records import (
    MESSAGE_HEAD_LEN,
    RECORD_HEAD,
    RECORD_MESSAGE_HEAD,
    RECORD_MESSAGE_HEAD_LEN,
    U16,
)
from polybag.formats.mcap.vocabulary import ChunkDamage, UnknownChannelId, long_record, short_record_head
from polybag.model import Channel, Message


def record_offsets(buf: bytes | memoryview) -> list[int]:
    """Offsets of every record in a decompressed chunk; ChunkDamage if the records do not tile it."""
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
        raise ChunkDamage(pos, f"record header needs 9 bytes, chunk has {n - pos} left") from None
    if pos != n:
        last = offs[-1]
        raise ChunkDamage(last, f"record declares {pos - last - 9} bytes, chunk has {n - last - 9} left")
    return offs


def walk_versions(
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
        op, ln = head(buf, pos) if pos + 9 <= n else short_record_head(pos, n)
        e = pos + 9 + ln
        if e > n:
            raise long_record(pos, op, ln, n)
        if op == 5:
            data: bytes | memoryview
            if ln >= MESSAGE_HEAD_LEN:
                cid, seq, lt, pt = mhead(buf, pos + 9)
                data = view[pos + 31 : e]
            else:
                rec = R.parse_as(R.MessageRecord, 5, buf, pos + 9, e)
                cid, seq, lt, pt, data = rec.channel_id, rec.sequence, rec.log_time, rec.publish_time, b""
            if lo <= lt < hi:
                ch = chans.get(cid)
                if ch is None:
                    raise UnknownChannelId(cid, pos)
                if want is None or ch.id in want:
                    out.append(Message(ch, lt, pt, seq, data))
        pos = e


def walk_filtered(
    buf: bytes | memoryview,
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
            raise ChunkDamage(pos, f"record (opcode 0x{op:02x}) declares {ln} bytes, chunk has {n - pos - 9} left")
        if op == 5 and ln >= 22:
            if lo <= lt < hi and (want is None or cid in want or cid not in channels):
                try:
                    ch = channels[cid]
                except KeyError:
                    raise UnknownChannelId(cid, pos) from None
                append(M(ch, lt, pt, seq, view[pos + 31 : e]))
        elif op == 3 or op == 4 or op == 5:
            defs(op, pos, e)
            if op == 5:
                _append_short_message(buf, pos, e, channels, out, want, start, end)
        pos = e


def walk_defs(buf: bytes | memoryview, defs: Callable[[int, int, int], None], pos: int = 0, n: int | None = None) -> None:
    """Only the Schema and Channel records of a chunk (or of ``buf[pos:n]``)."""
    if n is None:
        n = len(buf)
    head = RECORD_HEAD.unpack_from
    while pos < n:
        op, ln = head(buf, pos) if pos + 9 <= n else short_record_head(pos, n)
        e = pos + 9 + ln
        if e > n:
            raise long_record(pos, op, ln, n)
        if op == 3 or op == 4:
            defs(op, pos, e)
        pos = e


def message_before(buf: bytes | memoryview, cid: int, end: int) -> bool:
    """Whether the chunk records ``buf`` hold a message on channel ``cid`` before record offset ``end``."""
    pos = 0
    head = RECORD_HEAD.unpack_from
    while pos < end and pos + 11 <= len(buf):
        op, ln = head(buf, pos)
        if op == 5 and U16.unpack_from(buf, pos + 9)[0] == cid:
            return True
        pos += 9 + ln
    return False


def walk_defs_quiet(buf: bytes | memoryview, defs: Callable[[int, int, int], None]) -> None:
    """:func:`walk_defs` up to any damage (reading the chunk reports it)."""
    try:
        walk_defs(buf, defs)
    except ChunkDamage:
        pass


def count_chunk(buf: bytes | memoryview, counts: dict[int, int], defs: Callable[[int, int, int], None]) -> tuple[int, int, int]:
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
                rec = R.parse_as(R.MessageRecord, 5, buf, pos + 9, min(n, pos + 9 + ln))
                cid, lt = rec.channel_id, rec.log_time
        e = pos + 9 + ln
        if e > n:
            raise ChunkDamage(pos, f"record (opcode 0x{op:02x}) declares {ln} bytes, chunk has {n - pos - 9} left")
        if op == 5:
            if ln < 22:
                rec = R.parse_as(R.MessageRecord, 5, buf, pos + 9, e)
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


def count_chunk_versions(
    buf: bytes | memoryview, chans: dict[int, Channel], inside: list[tuple[int, int, Channel]], counts: dict[int, int]
) -> tuple[int, int, int]:
    """Like :func:`count_chunk` for a file that redefines ids: counts by channel version
    (``chans``: the versions in force at the chunk's start, changed at the record offsets
    of ``inside``; ``chans`` is updated)."""
    n = len(buf)
    head = RECORD_HEAD.unpack_from
    mhead = R.MESSAGE_HEAD.unpack_from
    pos = j = total = 0
    lo, hi = 1 << 64, -1
    while pos < n:
        while j < len(inside) and inside[j][0] <= pos:
            chans[inside[j][1]] = inside[j][2]
            j += 1
        op, ln = head(buf, pos) if pos + 9 <= n else short_record_head(pos, n)
        e = pos + 9 + ln
        if e > n:
            raise long_record(pos, op, ln, n)
        if op == 5:
            if ln >= MESSAGE_HEAD_LEN:
                cid, _seq, lt, _pt = mhead(buf, pos + 9)
            else:
                rec = R.parse_as(R.MessageRecord, 5, buf, pos + 9, e)
                cid, lt = rec.channel_id, rec.log_time
            ch = chans.get(cid)
            iid = cid if ch is None else ch.id
            counts[iid] = counts.get(iid, 0) + 1
            total += 1
            lo, hi = min(lo, lt), max(hi, lt)
        pos = e
    return total, lo, hi


def _short_head(buf: bytes | memoryview, pos: int, n: int) -> tuple[int, int]:
    op, ln = RECORD_HEAD.unpack_from(buf, pos) if pos + 9 <= n else short_record_head(pos, n)
    return op, ln


def _append_short_message(
    buf: bytes | memoryview,
    pos: int,
    e: int,
    channels: dict[int, Channel],
    out: list[Message],
    want: set[int] | None,
    start: int | None,
    end: int | None,
) -> None:
    """A message record shorter than its fixed head: missing fields are zero."""
    rec = R.parse_as(R.MessageRecord, 5, buf, pos + 9, e)
    if want is not None and rec.channel_id not in want:
        return
    if (start is not None and rec.log_time < start) or (end is not None and rec.log_time >= end):
        return
    ch = channels.get(rec.channel_id)
    if ch is None:
        raise UnknownChannelId(rec.channel_id, pos)
    out.append(Message(ch, rec.log_time, rec.publish_time, rec.sequence, b""))
