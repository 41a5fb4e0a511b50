"""Reading chunks for the Schema/Channel definitions they hold, for
:class:`~polybag.formats.mcap.definitions.McapDefinitions`: the schema a channel refers to or
the channel a message refers to when the chunk defining it was not read yet (chunks read out
of file order), the definitions of every chunk before one read out of order (no summary),
those of a chunk read for some of its messages, and every definition in file order (the
walk that builds the definition timeline).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from polybag.errors import FormatError, PolybagError
from polybag.formats.mcap import records as R
from polybag.formats.mcap.bulk_kernels import defs_between_messages, u64_at
from polybag.formats.mcap.chunk_loader import message_index_parts
from polybag.formats.mcap.context import McapContext
from polybag.formats.mcap.definitions import McapDefinitions
from polybag.formats.mcap.records import RECORD_HEAD, RECORD_MESSAGE_HEAD_LEN
from polybag.formats.mcap.vocabulary import (
    OP_CHANNEL,
    OP_CHUNK,
    OP_DATA_END,
    OP_FOOTER,
    OP_MESSAGE,
    OP_SCHEMA,
    ChunkDamage,
)
from polybag.formats.mcap.walk_kernels import walk_defs, walk_defs_quiet
from polybag.io.source import MappedSource
from polybag.model import Channel


class DefinitionFinder:
    """Registers in ``defs`` the definitions of chunks a read has not reached (``scanned``:
    how many chunks of the summary's or the scan's list, from the first, had theirs
    registered that way)."""

    def __init__(self, ctx: McapContext, defs: McapDefinitions) -> None:
        self.ctx = ctx
        self.defs = defs
        self.scanned = 0

    def walk_all(self, src: MappedSource) -> None:
        """The timeline walk: register every definition of the data section in file order
        (top-level records, and each chunk's, decompressed once); damage is skipped."""
        src.need_all()  # every definition of the data section
        view, size = src.view, src.size
        pos = self.ctx.header_end or 8
        while pos + 9 <= size:
            op, ln = RECORD_HEAD.unpack_from(view, pos)
            e = pos + 9 + ln
            if op == 0 or e > size or op == OP_DATA_END or op == OP_FOOTER:
                break
            try:
                if op == OP_SCHEMA or op == OP_CHANNEL:
                    self.defs.define(view, op, pos, e, 0)
                elif op == OP_CHUNK:
                    buf = self.ctx.chunk_data(pos)
                    walk_defs(buf, self.defs_for(buf, 0, pos))
            except (PolybagError, ChunkDamage):
                pass  # damage: reading the chunk reports it
            pos = e

    def defs_for(self, buf: bytes | memoryview, base: int, chunk: int | None = None) -> Callable[[int, int, int], None]:
        def defs(op: int, pos: int, e: int) -> None:
            if op != OP_MESSAGE:
                if not self.ctx.recover:
                    self.defs.define(buf, op, pos, e, base, chunk)
                    return
                try:
                    self.defs.define(buf, op, pos, e, base, chunk)
                except PolybagError as err:  # recovering: a damaged definition is skipped
                    self.ctx.note(str(err), e - pos)

        return defs

    def _walk_chunk(self, off: int) -> None:
        """Register the definitions of the chunk at ``off`` (resolving a forward reference)."""
        try:
            buf = self.ctx.chunk_data(off)
            walk_defs(buf, self.defs_for(buf, 0, off))
        except ChunkDamage as b:
            if not self.ctx.recover:
                raise self.ctx.err(FormatError, f"inside Chunk at {off}: {b.what} (at record offset {b.pos})", off) from None
        except PolybagError:
            if not self.ctx.recover:
                raise

    def resolve_schema(self, sid: int) -> None:
        """A channel refers to a schema not yet seen (a chunk read out of file order): scan
        chunks' definitions for it."""
        if isinstance(self.ctx.source, MappedSource) and not self.defs.timeline_walk:
            chunks = self.ctx.chunk_list()
            while sid not in self.defs.schemas and self.scanned < len(chunks):
                off = chunks[self.scanned][0]
                self.scanned += 1
                self._walk_chunk(off)

    def resolve_channel(self, cid: int) -> Channel | None:
        """A message refers to a channel not yet seen: scan chunks' definitions for it."""
        if isinstance(self.ctx.source, MappedSource):
            chunks = self.ctx.chunk_list()
            while cid not in self.defs.channel_records and self.scanned < len(chunks):
                off = chunks[self.scanned][0]
                self.scanned += 1
                self._walk_chunk(off)
        return self.defs.channels.get(cid)

    def index_defs(self, buf: bytes | memoryview, ci: R.ChunkIndex) -> None:
        """Register the Schema/Channel records of a chunk read for some of its messages (so
        one that redefines an id is noticed): when its Message Indexes list every message,
        only a chunk whose message records do not fill it holds any."""
        parts = message_index_parts(self.ctx.mapped(), ci, None)
        defs = self.defs_for(buf, 0, ci.chunk_start_offset)
        n = len(buf)
        if parts:
            pos = np.concatenate([p["offset"] for _c, p in parts]).astype(np.int64)
            if not len(pos):
                return walk_defs_quiet(buf, defs)
            if int(pos.min()) >= 0 and int(pos.max()) + RECORD_MESSAGE_HEAD_LEN <= n:
                lens = u64_at(buf, pos + 1)
                with np.errstate(over="ignore"):
                    filled = int(lens.sum(dtype=np.uint64)) + 9 * len(pos)
                if filled == n and bool((lens <= np.uint64(n)).all()):
                    return None  # messages only
                pos.sort()
                try:
                    if defs_between_messages(buf, pos, defs):
                        return None
                except ChunkDamage:
                    pass
        return walk_defs_quiet(buf, defs)

    def defs_upto(self, off: int) -> None:
        """Without a summary: register the definitions of every chunk before ``off`` in file
        order before reading the one there (reading out of file order, a redefinition in an
        earlier chunk is then found before a message it changes is returned).  Chunks read in
        file order cost nothing extra: each advances the frontier as it is read."""
        if self.defs.timeline is not None or (self.ctx.has_summary and self.ctx.index.chunk_indexes):
            return
        chunks = self.ctx.scan().chunks
        while self.scanned < len(chunks) and chunks[self.scanned][0] < off:
            o = chunks[self.scanned][0]
            self.scanned += 1
            if o + 1 == off:
                continue  # the chunk just read
            try:
                buf = self.ctx.chunk_data(o)
                walk_defs(buf, self.defs_for(buf, 0, o))
            except (PolybagError, ChunkDamage):
                pass  # reading that chunk reports the damage
