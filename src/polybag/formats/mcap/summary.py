"""Reading and validating the summary section: the Footer, the summary's Schema/Channel
copies, Chunk/Attachment/Metadata Indexes, Statistics and Summary Offsets.

:class:`SummarySectionMixin` reads it at open (CRC-checked when the Footer records one);
a summary section that does not parse is set aside and the data section is scanned
instead.  Recovering, only its Schema/Channel copies are kept.
"""

from __future__ import annotations

import gc
import struct
import zlib
from collections.abc import Iterator

import numpy as np

from polybag.errors import ChecksumError, FormatError, PolybagError, TruncatedError
from polybag.formats.mcap import records as R
from polybag.formats.mcap.base import _OP_CHANNEL, _OP_FOOTER, _OP_SCHEMA, McapState
from polybag.formats.mcap.records import FOOTER_RECORD_LEN, MAGIC, RECORD_HEAD, U32, Opcode
from polybag.io.source import MappedSource

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


class SummarySectionMixin(McapState):
    """The summary section, read at open."""

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

    def _read_summary(self) -> None:
        """Footer -> summary section; leaves ``has_summary`` False when there is none."""
        src = self.source
        assert isinstance(src, MappedSource)
        footer = self._read_footer()
        if footer is None or footer.summary_start == 0:
            return
        foot = src.size - 8 - FOOTER_RECORD_LEN
        ss, sos = footer.summary_start, footer.summary_offset_start
        if not (self._header_end <= ss <= foot) or (sos and not (ss <= sos <= foot)):
            raise self._err(
                FormatError,
                f"footer points the summary at {ss} (offsets at {sos}), outside {self._header_end}..{foot}",
                foot,
            )
        src.need(ss, src.size - ss)  # a remote file: the summary section only
        if footer.summary_crc and self.validate_crcs:
            crc = zlib.crc32(src.view[ss : foot + 25])
            if crc != footer.summary_crc:
                raise self._err(
                    ChecksumError,
                    f"summary section CRC is {crc:#010x}, the Footer records {footer.summary_crc:#010x}",
                    ss,
                )
        cis = self._read_summary_section(ss, sos if sos else foot)
        if sos:
            self._summary_offset_records(sos, foot)
        for ci in cis:
            if ci.chunk_start_offset + ci.chunk_length > foot or ci.chunk_start_offset < self._header_end:
                raise self._err(
                    FormatError,
                    f"chunk index points at {ci.chunk_start_offset}+{ci.chunk_length}, outside the data section",
                    ci.chunk_start_offset,
                )
        self.chunk_indexes = cis
        self._ci_array = _chunk_index_array(cis)
        self.has_summary = True
        st = self.statistics
        if st is not None and self._channel_records and (
            st.channel_count > len(self._channel_records) or (self.schemas and st.schema_count > len(self.schemas))
        ):
            # more Channel (Schema) records were written than the summary has ids: some id
            # was defined twice, or the summary is incomplete; the data section decides
            self._need_census = True

    def _read_footer(self) -> R.Footer | None:
        """The Footer record before the closing magic (kept in ``footer``); None if there is none."""
        src = self.source
        assert isinstance(src, MappedSource)
        size = src.size
        foot = size - 8 - FOOTER_RECORD_LEN
        if foot < self._header_end or bytes(src.view[size - 8 :]) != MAGIC:
            return None
        op, ln = RECORD_HEAD.unpack_from(src.view, foot)
        if op != _OP_FOOTER or ln != 20:
            return None
        footer = R.Footer(*R.FOOTER_BODY.unpack_from(src.view, foot + 9))
        self.footer = footer
        return footer

    def _read_summary_section(self, pos: int, end: int) -> list[R.ChunkIndex]:
        """Read the summary section's records in ``[pos, end)``: definitions are registered,
        indexes and statistics kept; returns the Chunk Indexes."""
        src = self.source
        assert isinstance(src, MappedSource)
        view = src.view
        cis: list[R.ChunkIndex] = []
        for op, at, e in self._section_records(view, pos, end, "summary", "summary record (opcode 0x{op:02x})"):
            if op == _OP_SCHEMA or op == _OP_CHANNEL:
                self._define(view, op, at, e, 0, summary=True)
            elif op == Opcode.CHUNK_INDEX:
                rec = _fast_chunk_index(view, at + 9, e)
                if rec is None:  # short or padded: the general parser applies the rules
                    rec = R.parse_as(R.ChunkIndex, op, view, at + 9, e, self.path, 0)
                cis.append(rec)
            elif op == Opcode.ATTACHMENT_INDEX:
                a = R.parse_as(R.AttachmentIndex, op, view, at + 9, e, self.path, 0)
                self.attachment_indexes.append(a)
            elif op == Opcode.METADATA_INDEX:
                m = R.parse_as(R.MetadataIndex, op, view, at + 9, e, self.path, 0)
                self.metadata_indexes.append(m)
            elif op == Opcode.STATISTICS:
                s = R.parse_as(R.Statistics, op, view, at + 9, e, self.path, 0)
                self.statistics = s
        return cis

    def _summary_offset_records(self, pos: int, foot: int) -> None:
        """Read the Summary Offset records in ``[pos, foot)`` into ``summary_offsets``."""
        src = self.source
        assert isinstance(src, MappedSource)
        view = src.view
        for op, at, e in self._section_records(view, pos, foot, "summary offset", "summary offset record"):
            if op == Opcode.SUMMARY_OFFSET:
                so = R.parse_as(R.SummaryOffset, op, view, at + 9, e, self.path, 0)
                self.summary_offsets.append(so)

    def _section_records(
        self, view: memoryview, pos: int, end: int, section: str, record: str
    ) -> Iterator[tuple[int, int, int]]:
        """``(opcode, start, end)`` of each record in ``[pos, end)`` of a summary ``section``; a
        record running past ``end`` is an error naming it by ``record`` (``{op}``: its opcode)."""
        while pos < end:
            if pos + 9 > end:
                raise self._err(TruncatedError, f"{section} section ends inside a record header", pos)
            op, ln = RECORD_HEAD.unpack_from(view, pos)
            e = pos + 9 + ln
            if e > end:
                raise self._err(FormatError, f"{record.format(op=op)} declares {ln} bytes, section has {end - pos - 9} left", pos)
            yield op, pos, e
            pos = e


def _chunk_index_array(cis: list[R.ChunkIndex]) -> np.ndarray:
    """The Chunk Indexes' numbers as one ``CHUNK_INDEX_DTYPE`` array (for vectorised planning)."""
    arr = np.zeros(len(cis), CHUNK_INDEX_DTYPE)
    if cis:
        arr["start"] = [c.message_start_time for c in cis]
        arr["end"] = [c.message_end_time for c in cis]
        arr["offset"] = [c.chunk_start_offset for c in cis]
        arr["length"] = [c.chunk_length for c in cis]
        arr["mi_length"] = [c.message_index_length for c in cis]
        arr["compressed_size"] = [c.compressed_size for c in cis]
        arr["uncompressed_size"] = [c.uncompressed_size for c in cis]
    return arr


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
