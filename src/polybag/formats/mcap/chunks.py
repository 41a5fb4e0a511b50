"""One chunk: load, decompress and CRC-check it, and read its wanted messages.

:class:`ChunksMixin` turns a Chunk record into its messages: the bulk path when the record
offsets are known (from the Message Index records, checked against the records they point
at, or from one pass over the record heads), the record-by-record walk for unusual or
damaged chunks, the channel versions in force for a file that redefines ids, and the
Message Index entries themselves (read without decompressing anything).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from polybag.errors import ChecksumError, FormatError, TruncatedError, UnsupportedError
from polybag.formats.mcap import records as R
from polybag.formats.mcap.base import (
    _FILE_ID,
    _LOG_TIME,
    _OP_CHUNK,
    _OP_MESSAGE_INDEX,
    McapState,
    _Bad,
    _NeedSlowPath,
    _Partial,
    _UnknownChannel,
)
from polybag.formats.mcap.bulk import (
    _MI_DTYPE,
    _batch_from_heads,
    _bulk_heads,
    _defs_between_messages,
    _message_batches,
    _messages_from_heads,
    _u64_at,
)
from polybag.formats.mcap.records import CHUNK_HEAD, RECORD_HEAD, RECORD_MESSAGE_HEAD_LEN, U32, U64
from polybag.formats.mcap.walk import _record_offsets, _walk_defs, _walk_filtered, _walk_versions
from polybag.io import compression
from polybag.io.source import MappedSource
from polybag.model import Channel, Message


class ChunksMixin(McapState):
    """Loading chunks and reading their messages (bulk or record by record)."""

    def _chunk_list(self) -> list[tuple[int, int, int, int]]:
        if self.has_summary and self.chunk_indexes:
            return [(c.chunk_start_offset, c.chunk_length, c.message_start_time, c.message_end_time) for c in self.chunk_indexes]
        return self._scan().chunks

    def _chunk_data(self, offset: int) -> bytes:
        """The decompressed records of the chunk record at ``offset``, CRC-checked."""
        src = self.source
        assert isinstance(src, MappedSource)
        view = src.view
        if offset + 9 > src.size:
            raise self._err(TruncatedError, "expected a Chunk record header", offset)
        src.need(offset, 9)
        op, ln = RECORD_HEAD.unpack_from(view, offset)
        if op != _OP_CHUNK:
            raise self._err(FormatError, f"expected a Chunk record (opcode 0x06), found opcode 0x{op:02x}", offset)
        if ln > src.size - offset - 9:
            raise self._err(TruncatedError, f"Chunk declares {ln} bytes, file has {src.size - offset - 9} left", offset)
        src.need(offset, 9 + ln)
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
            crc = compression.crc32(out)
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
        batches: bool = False,
    ) -> Any:
        """The wanted messages of one decompressed chunk: file order, or log-time order if ``sort``.

        ``positions`` are message offsets from the message indexes; with ``gap_defs`` the
        Schema/Channel records between those messages are registered too (streams).  With
        ``arrays`` the bulk path returns a :class:`_Batch` of payloads instead of messages
        (the record-by-record fallback still returns a list of messages).  With ``batches``
        it returns an iterator of message lists instead (:func:`_message_batches`; the
        fallback: one list).
        """
        defs = self._defs_for(buf, 0, offset)
        mark = len(self._changes)
        self._loaded.append((offset, offset, positions is None or gap_defs))
        offs, positions, bad = self._message_offsets(buf, positions, gap_defs, defs)
        chans = self._channels
        if self._census is not None or self._changes:  # a file that redefines ids
            got = self._versioned_chunk(buf, offset, want, start, end, sort, mark)
            if isinstance(got, list):
                return got
            chans, want = got
        while offs is not None:
            try:
                ecid = expect_cid if positions is not None else None
                rec, sel = _bulk_heads(buf, offs, chans, want, start, end, sort, ecid)
                if arrays:
                    return _batch_from_heads(buf, rec, sel)
                if batches:
                    return _message_batches(buf, rec, sel, chans)
                return _messages_from_heads(buf, rec, sel, chans)
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
            return self._walk_chunk(buf, offset, chans, defs, want, start, end, sort)
        err = self._err(FormatError, f"inside Chunk at {offset}: {bad.what} (at record offset {bad.pos})", offset)
        raise err from None

    def _message_offsets(
        self, buf: bytes | memoryview, positions: np.ndarray | None, gap_defs: bool, defs: Callable[[int, int, int], None]
    ) -> tuple[np.ndarray | None, np.ndarray | None, _Bad | None]:
        """(message record offsets, ``positions`` if still usable, damage) of a chunk.

        The offsets are ``positions`` (from the Message Indexes; with ``gap_defs`` the
        Schema/Channel records between them are registered, and positions that do not tile
        the chunk are dropped), or found by one pass over the record heads, registering the
        definitions met.  Damage met on that pass is returned, with no offsets.
        """
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
            return None, positions, b
        return offs, positions, None

    def _walk_chunk(
        self,
        buf: bytes | memoryview,
        offset: int,
        chans: dict[int, Channel],
        defs: Callable[[int, int, int], None],
        want: set[int] | None,
        start: int | None,
        end: int | None,
        sort: bool,
    ) -> list[Message]:
        """A chunk's wanted messages record by record (unusual records, or damage: the
        messages before it with ``recover``, else :class:`_Partial`)."""
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
                return self._walk_damaged(out, b, offset, sort)

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
                return self._walk_damaged(out, b, offset, sort)
        if sort:
            out.sort(key=_LOG_TIME)
        return out

    def _walk_damaged(self, out: list[Message], b: _Bad, offset: int, sort: bool) -> list[Message]:
        """Damage ``b`` met walking the chunk at ``offset`` record by record: noted; the
        messages before it (``out``, sorted if ``sort``) are returned with ``recover``, else
        raised in :class:`_Partial`."""
        err = self._err(FormatError, f"inside Chunk at {offset}: {b.what} (at record offset {b.pos})", offset)
        self._note(str(err), 0)
        if sort:
            out.sort(key=_LOG_TIME)
        if not self.recover:
            raise _Partial(out, err) from None
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
        src.need(ci.chunk_start_offset + ci.chunk_length, ci.message_index_length)
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
