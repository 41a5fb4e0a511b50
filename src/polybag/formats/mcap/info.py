"""The :class:`~polybag.model.Summary` an MCAP reader reports, and facts for ``info``.

:class:`McapInfo` builds the summary from the summary section when it describes the file
(counts from Statistics or from the Message Index record headers), or by reading every
chunk once (counting messages per channel version) when it does not; and the per-chunk
message counts that planners such as :mod:`polybag.dask` use.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

from polybag.errors import FormatError, PolybagError
from polybag.formats.mcap import records as R
from polybag.formats.mcap.chunk_loader import chunk_header_info
from polybag.formats.mcap.context import McapContext
from polybag.formats.mcap.definition_finder import DefinitionFinder
from polybag.formats.mcap.definitions import McapDefinitions
from polybag.formats.mcap.judging import DefinitionJudge
from polybag.formats.mcap.records import U16, U32, U64
from polybag.formats.mcap.vocabulary import (
    FILE_ID_MASK,
    OP_MESSAGE_INDEX,
    ChunkDamage,
    RedefinedId,
)
from polybag.formats.mcap.walk_kernels import count_chunk, count_chunk_versions
from polybag.io import compression
from polybag.io.source import MappedSource
from polybag.model import ChunkInfo, Summary


class McapInfo:
    """``summary``, ``chunk_message_counts`` and ``info_extras`` (the summary is kept in
    ``ctx.summary`` once built); ``materialize`` spools a stream into a mapped source first."""

    def __init__(
        self, ctx: McapContext, defs: McapDefinitions, finder: DefinitionFinder, judge: DefinitionJudge, materialize: Callable[[], None]
    ) -> None:
        self.ctx = ctx
        self.defs = defs
        self.finder = finder
        self.judge = judge
        self.materialize = materialize

    @property
    def summary(self) -> Summary:
        """The reported summary, built on first use (see the module's docstring)."""
        summary = self.ctx.summary
        if summary is not None:
            return summary
        self.materialize()
        if self.ctx.summary_crc_error is not None:
            raise self.ctx.summary_crc_error
        self.defs.ready()
        was = gc.isenabled()
        gc.disable()
        try:
            # a file that redefines ids: the summary's per-id counts cannot tell versions apart
            summary = self._summary_from_index() if self.ctx.has_summary and self.defs.timeline is None else None
        finally:
            if was:
                gc.enable()
        if summary is None:
            try:
                summary = self._summary_from_scan()
            except RedefinedId:
                self.defs.build_timeline()
                summary = self._summary_from_scan()
        self.ctx.summary = summary
        self.judge.judge_summary(summary)  # definitions that decode, where the file's do not
        return summary

    def chunk_message_counts(self, channel_ids: set[int] | None = None) -> list[tuple[int, int, int]] | None:
        """Per chunk of the Chunk Indexes: ``(start, end, count of channel_ids)``.

        Counts come from the Message Index records the Chunk Index points at (array length
        / 16); only their 15-byte headers are read.  A chunk without Message Index offsets,
        or whose headers do not check out, gets an estimate instead: the channels' total
        count (from the summary) shared out by uncompressed size, at least 1.  ``None``
        without a summary or Chunk Indexes.
        """
        if not self.ctx.has_summary or not self.ctx.index.chunk_indexes:
            return None
        cis = self.ctx.index.chunk_indexes
        summary = self.summary
        view = getattr(self.ctx.source, "view", None)
        size = getattr(self.ctx.source, "size", 0)
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
            for cid in {c & FILE_ID_MASK for c in wanted_ids} & offs.keys():
                off = offs[cid]
                if (
                    off + 15 > size
                    or view[off] != OP_MESSAGE_INDEX
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
        src = self.ctx.source
        assert isinstance(src, MappedSource)
        return Summary(
            format="mcap",
            profile=self.ctx.header.profile,
            library=self.ctx.header.library,
            version="0",
            file_size=src.size,
            indexed=indexed,
        )

    def _summary_from_index(self) -> Summary | None:
        st = self.ctx.index.statistics
        cis = self.ctx.index.chunk_indexes
        known = set(dict(self.defs.channels))
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
        s.schemas = dict(self.defs.schemas)
        s.channels = dict(self.defs.channels)
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
        s.attachment_count = st.attachment_count if st is not None else len(self.ctx.index.attachment_indexes)
        s.metadata_count = st.metadata_count if st is not None else len(self.ctx.index.metadata_indexes)
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
        src = self.ctx.source
        assert isinstance(src, MappedSource)
        src.need_many((ci.chunk_start_offset + ci.chunk_length, ci.message_index_length) for ci in cis)
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
        st = self.ctx.index.statistics
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
        if self.ctx.index.summary_offsets:
            ex["summary_offsets"] = {R.OPCODE_NAMES.get(s.group_opcode, f"0x{s.group_opcode:02x}"): s.group_length for s in self.ctx.index.summary_offsets}
        if self.ctx.index.attachment_indexes:
            ex["attachments"] = [
                {"name": a.name, "media_type": a.media_type, "size": a.data_size, "log_time": a.log_time} for a in self.ctx.index.attachment_indexes
            ]
        if self.ctx.index.metadata_indexes:
            ex["metadata"] = [m.name for m in self.ctx.index.metadata_indexes]
        return ex

    def _summary_from_scan(self) -> Summary:
        sr = self.ctx.scan()
        s = self._summary_base(False)
        counts: dict[int, int] = {}
        lo = 1 << 64
        hi = -1
        chunks: list[ChunkInfo] = []
        src = self.ctx.source
        assert isinstance(src, MappedSource)
        for off, ln, _cs, _ce in sr.chunks:
            try:
                buf = self.ctx.chunk_data(off)
                tl = self.defs.timeline
                if tl is not None and tl.versions:
                    n, clo, chi = count_chunk_versions(buf, tl.map_at(off, self.defs.channels), tl.inside.get(off) or [], counts)
                else:
                    n, clo, chi = count_chunk(buf, counts, self.finder.defs_for(buf, 0, off))
            except (PolybagError, ChunkDamage) as err:
                if isinstance(err, ChunkDamage):
                    err = self.ctx.err(FormatError, f"inside Chunk at {off}: {err.what}", off)
                if not self.ctx.recover:
                    raise err from None
                self.ctx.note(str(err), 0)
                continue
            if n:
                lo, hi = min(lo, clo), max(hi, chi)
            comp, csize, usize = chunk_header_info(src, off)
            chunks.append(ChunkInfo(off, ln, clo if n else 0, chi if n else 0, comp, csize, usize, n))
        self.finder.scanned = len(sr.chunks)
        view = src.view
        cen = self.defs.timeline
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
            s.schemas = dict(self.defs.schemas)
            s.channels = dict(self.defs.channels)
        s.message_counts = {cid: counts.get(cid, 0) for cid in s.channels}
        for cid, n in counts.items():
            s.message_counts.setdefault(cid, n)
        if hi >= 0:
            s.start_time, s.end_time = lo, hi
        s.chunks = chunks
        s.attachment_count = len(sr.attachments)
        s.metadata_count = len(sr.metadata)
        s.extras = self._extras()
        if self.ctx.recovery.first is not None:  # the scan's
            s.extras["error"] = str(self.ctx.recovery.first)
        if self.ctx.summary_error:
            s.extras["summary_error"] = self.ctx.summary_error
        if self.defs.definition_problems:
            s.extras["redefinitions"] = list(self.defs.definition_problems)
        return s

    def info_extras(self) -> dict[str, Any]:
        s = self.summary
        ex = dict(s.extras)
        comp: dict[str, int] = {}
        for c in s.chunks:
            comp[c.compression] = comp.get(c.compression, 0) + 1
        ex["chunk_compression"] = comp
        ex["indexed"] = s.indexed
        return ex
