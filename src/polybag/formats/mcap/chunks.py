"""One chunk: load, decompress and CRC-check it, and read its wanted messages.

:class:`ChunkReader` turns a Chunk record into its messages: the bulk path when the record
offsets are known (from the Message Index records, checked against the records they point
at, or from one pass over the record heads), the record-by-record walk for unusual or
damaged chunks, the channel versions in force for a file that redefines ids, and the
Message Index entries themselves (read without decompressing anything).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from polybag.errors import FormatError
from polybag.formats.mcap.bulk_kernels import (
    batch_from_heads,
    bulk_heads,
    defs_between_messages,
    message_batches,
    messages_from_heads,
)
from polybag.formats.mcap.context import McapContext
from polybag.formats.mcap.definition_finder import DefinitionFinder
from polybag.formats.mcap.definitions import McapDefinitions
from polybag.formats.mcap.records import U64
from polybag.formats.mcap.vocabulary import (
    FILE_ID_MASK,
    ChunkDamage,
    NeedRecordWalk,
    PartialLoad,
    UnknownChannelId,
)
from polybag.formats.mcap.walk_kernels import record_offsets, walk_defs, walk_filtered, walk_versions
from polybag.formats.shared.merge import LOG_TIME
from polybag.model import Channel, Message


class ChunkReader:
    """Reading a loaded chunk's messages (bulk or record by record), registering the
    definitions it holds in ``defs`` (a channel defined in a chunk not read yet: ``finder``)."""

    def __init__(self, ctx: McapContext, defs: McapDefinitions, finder: DefinitionFinder) -> None:
        self.ctx = ctx
        self.defs = defs
        self.finder = finder

    def chunk_messages(
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
        ``arrays`` the bulk path returns a :class:`PayloadBatch` of payloads instead of messages
        (the record-by-record fallback still returns a list of messages).  With ``batches``
        it returns an iterator of message lists instead (:func:`message_batches`; the
        fallback: one list).
        """
        defs = self.finder.defs_for(buf, 0, offset)
        mark = len(self.defs.versions.changes)
        self.defs.loaded.append((offset, offset, positions is None or gap_defs))
        offs, positions, bad = self._message_offsets(buf, positions, gap_defs, defs)
        chans = self.defs.channels
        if self.defs.timeline is not None or self.defs.versions.changes:  # a file that redefines ids
            got = self._versioned_chunk(buf, offset, want, start, end, sort, mark)
            if isinstance(got, list):
                return got
            chans, want = got
        while offs is not None:
            try:
                ecid = expect_cid if positions is not None else None
                rec, sel = bulk_heads(buf, offs, chans, want, start, end, sort, ecid)
                if arrays:
                    return batch_from_heads(buf, rec, sel)
                if batches:
                    return message_batches(buf, rec, sel, chans)
                return messages_from_heads(buf, rec, sel, chans)
            except UnknownChannelId as u:
                if positions is not None:
                    try:
                        walk_defs(buf, defs)
                    except ChunkDamage:
                        pass
                if not self._unknown_channel(u.cid, offset):
                    return []
                chans.setdefault(u.cid, self.defs.channels[u.cid])
            except NeedRecordWalk:
                break
            except ChunkDamage as b:
                if positions is not None:
                    break  # the message index does not fit the chunk: walk the records instead
                bad = b
                break
        if bad is None or self.ctx.recover:
            # record by record: reaches every message before damage (recover) or odd records
            return self._walk_chunk(buf, offset, chans, defs, want, start, end, sort)
        err = self.ctx.err(FormatError, f"inside Chunk at {offset}: {bad.what} (at record offset {bad.pos})", offset)
        raise err from None

    def _message_offsets(
        self, buf: bytes | memoryview, positions: np.ndarray | None, gap_defs: bool, defs: Callable[[int, int, int], None]
    ) -> tuple[np.ndarray | None, np.ndarray | None, ChunkDamage | None]:
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
                    ok = defs_between_messages(buf, positions.astype(np.int64), defs)
                except ChunkDamage:
                    ok = False
                if not ok:
                    positions = None
            if positions is not None:
                offs = positions.astype(np.int64)
            if positions is None:
                rec_offs = record_offsets(buf)
                all_offs = np.array(rec_offs, np.int64)
                ops = np.frombuffer(buf, np.uint8)[all_offs] if rec_offs else np.zeros(0, np.uint8)
                is_msg = ops == 5
                if not bool(is_msg.all()):
                    for p in all_offs[(ops == 3) | (ops == 4)].tolist():
                        defs(int(buf[p]), p, p + 9 + U64.unpack_from(buf, p + 1)[0])
                    offs = all_offs[is_msg]
                else:
                    offs = all_offs
        except ChunkDamage as b:
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
        messages before it with ``recover``, else :class:`PartialLoad`)."""
        while True:
            out: list[Message] = []
            try:
                walk_filtered(buf, chans, out, defs, want, start, end)
                if sort:
                    out.sort(key=LOG_TIME)
                return out
            except UnknownChannelId as u:
                if not self._unknown_channel(u.cid, offset):
                    return out
                chans.setdefault(u.cid, self.defs.channels[u.cid])
            except ChunkDamage as b:
                return self._walk_damaged(out, b, offset, sort)

    def _versioned_chunk(
        self, buf: bytes | memoryview, offset: int, want: set[int] | None, start: int | None, end: int | None, sort: bool, mark: int
    ) -> tuple[dict[int, Channel], set[int] | None] | list[Message]:
        """For a chunk of a file that redefines ids: the channels in force at its start and the
        wanted ids in the file's terms; or, when a definition inside it changes a channel, its
        messages, walked record by record (``mark``: where this chunk's changes begin in
        ``defs.versions.changes`` when reading in file order)."""
        cen = self.defs.timeline
        chans = self.defs.channels
        inside: list[tuple[int, int, Channel]] | None = None
        if cen is not None:
            if cen.versions:
                chans = cen.map_at(offset, chans)
            inside = cen.inside.get(offset)
        elif len(self.defs.versions.changes) > mark:  # reading in file order: this chunk's definitions changed some
            new = self.defs.versions.changes[mark:]
            chans = dict(chans)
            for _w, cid, old, _n in reversed(new):
                chans[cid] = old
            inside = [(w[1], cid, ch) for w, cid, _o, ch in new]
        if not inside:
            if want is not None:
                want = {i & FILE_ID_MASK for i in want if (c := chans.get(i & FILE_ID_MASK)) is not None and c.id == i}
            return chans, want
        chans = dict(chans)
        while True:
            out: list[Message] = []
            try:
                walk_versions(buf, chans, inside, out, want, start, end)
                break
            except UnknownChannelId as u:
                if not self._unknown_channel(u.cid, offset):
                    break
                chans.setdefault(u.cid, self.defs.channels[u.cid])
            except ChunkDamage as b:
                return self._walk_damaged(out, b, offset, sort)
        if sort:
            out.sort(key=LOG_TIME)
        return out

    def _walk_damaged(self, out: list[Message], b: ChunkDamage, offset: int, sort: bool) -> list[Message]:
        """Damage ``b`` met walking the chunk at ``offset`` record by record: noted; the
        messages before it (``out``, sorted if ``sort``) are returned with ``recover``, else
        raised in :class:`PartialLoad`."""
        err = self.ctx.err(FormatError, f"inside Chunk at {offset}: {b.what} (at record offset {b.pos})", offset)
        self.ctx.note(str(err), 0)
        if sort:
            out.sort(key=LOG_TIME)
        if not self.ctx.recover:
            raise PartialLoad(out, err) from None
        return out

    def _unknown_channel(self, cid: int, offset: int) -> bool:
        """Find a channel a message refers to; False (recover) or FormatError if there is none."""
        if cid in self.defs.channels or self.finder.resolve_channel(cid) is not None:
            return True
        err = self.ctx.err(FormatError, f"message on channel {cid}, which no Channel record defines", offset)
        if self.ctx.recover:
            self.ctx.note(str(err), 0)
            return False
        raise err
