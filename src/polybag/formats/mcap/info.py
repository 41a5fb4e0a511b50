"""The :class:`~polybag.model.Summary` an MCAP reader reports, and facts for ``info``.

:class:`InfoMixin` builds the summary from the summary section when it describes the file
(counts from Statistics or from the Message Index record headers), or by reading every
chunk once (counting messages per channel version) when it does not; and the per-chunk
message counts that planners such as :mod:`polybag.dask` use.
"""

from __future__ import annotations

import gc
from typing import Any

from polybag.errors import FormatError, PolybagError
from polybag.formats.mcap import records as R
from polybag.formats.mcap.definitions import DefinitionsMixin
from polybag.formats.mcap.records import CHUNK_HEAD, MESSAGE_HEAD_LEN, RECORD_HEAD, U16, U32, U64
from polybag.formats.mcap.vocabulary import (
    FILE_ID_MASK,
    OP_MESSAGE_INDEX,
    ChunkDamage,
    RedefinedId,
    long_record,
    short_record_head,
)
from polybag.formats.mcap.walk_kernels import count_chunk
from polybag.io import compression
from polybag.io.source import MappedSource
from polybag.model import ChunkInfo, Summary


class InfoMixin(DefinitionsMixin):
    """``summary``, ``has_index``, ``chunk_message_counts`` and ``info_extras``."""

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
                self._summary = self._summary_from_index() if self.has_summary and self._timeline is None else None
            finally:
                if was:
                    gc.enable()
            if self._summary is None:
                try:
                    self._summary = self._summary_from_scan()
                except RedefinedId:
                    self._build_timeline()
                    self._summary = self._summary_from_scan()
            self._judge_summary(self._summary)  # definitions that decode, where the file's do not
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
                if self._timeline is not None and self._timeline.versions:
                    n, clo, chi = self._count_versions(buf, off, counts)
                else:
                    n, clo, chi = count_chunk(buf, counts, self._defs_for(buf, 0, off))
            except (PolybagError, ChunkDamage) as err:
                if isinstance(err, ChunkDamage):
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
        cen = self._timeline
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
        if self._recovery.first is not None:  # the scan's
            s.extras["error"] = str(self._recovery.first)
        if self.summary_error:
            s.extras["summary_error"] = self.summary_error
        if self.definition_problems:
            s.extras["redefinitions"] = list(self.definition_problems)
        return s

    def _count_versions(self, buf: bytes | memoryview, off: int, counts: dict[int, int]) -> tuple[int, int, int]:
        """Like :func:`count_chunk` for a file that redefines ids: counts by channel version."""
        cen = self._timeline
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

    def _chunk_header_info(self, off: int) -> tuple[str, int, int]:
        src = self.source
        assert isinstance(src, MappedSource)
        src.need(off, 4096)
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
