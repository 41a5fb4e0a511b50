"""Reading and validating the summary section: the Footer, the summary's Schema/Channel
copies, Chunk/Attachment/Metadata Indexes, Statistics and Summary Offsets.

:func:`read_footer` finds the Footer, :func:`load_summary` reads the section it points at
(CRC-checked when the Footer records one) into a
:class:`~polybag.formats.mcap.index.SummaryIndex`, handing the summary's Schema/Channel
copies to the reader's ``define``.  The reader sets aside a summary section that does not
parse and scans the data section instead; recovering, it keeps only the definitions.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterator

from polybag.errors import ChecksumError, FormatError, TruncatedError
from polybag.formats.mcap import records as R
from polybag.formats.mcap.index import SummaryIndex, chunk_index_array
from polybag.formats.mcap.records import FOOTER_RECORD_LEN, MAGIC, RECORD_HEAD, U32, Opcode
from polybag.formats.mcap.vocabulary import OP_CHANNEL, OP_FOOTER, OP_SCHEMA
from polybag.io.source import MappedSource

# registers a summary copy of a Schema/Channel record: (view, opcode, record start, record end)
DefineCopy = Callable[[memoryview, int, int, int], None]


def read_footer(src: MappedSource, header_end: int) -> R.Footer | None:
    """The Footer record before the closing magic; None if there is none."""
    size = src.size
    foot = size - 8 - FOOTER_RECORD_LEN
    if foot < header_end or bytes(src.view[size - 8 :]) != MAGIC:
        return None
    op, ln = RECORD_HEAD.unpack_from(src.view, foot)
    if op != OP_FOOTER or ln != 20:
        return None
    return R.Footer(*R.FOOTER_BODY.unpack_from(src.view, foot + 9))


def load_summary(
    src: MappedSource, path: str | None, footer: R.Footer, header_end: int, validate_crcs: bool, define: DefineCopy
) -> SummaryIndex:
    """The summary section that ``footer`` points at (``footer.summary_start`` is not 0):
    definitions go to ``define``, indexes and statistics into the result.  Raises
    :class:`~polybag.errors.FormatError` (a :class:`~polybag.errors.ChecksumError` for a CRC
    mismatch) when it does not parse or points outside the data section."""
    foot = src.size - 8 - FOOTER_RECORD_LEN
    ss, sos = footer.summary_start, footer.summary_offset_start
    if not (header_end <= ss <= foot) or (sos and not (ss <= sos <= foot)):
        raise FormatError(f"footer points the summary at {ss} (offsets at {sos}), outside {header_end}..{foot}", path, foot)
    src.need(ss, src.size - ss)  # a remote file: the summary section only
    if footer.summary_crc and validate_crcs:
        crc = zlib.crc32(src.view[ss : foot + 25])
        if crc != footer.summary_crc:
            raise ChecksumError(f"summary section CRC is {crc:#010x}, the Footer records {footer.summary_crc:#010x}", path, ss)
    index = SummaryIndex()
    cis = _read_summary_section(src.view, path, ss, sos if sos else foot, index, define)
    if sos:
        _summary_offset_records(src.view, path, sos, foot, index)
    for ci in cis:
        if ci.chunk_start_offset + ci.chunk_length > foot or ci.chunk_start_offset < header_end:
            raise FormatError(
                f"chunk index points at {ci.chunk_start_offset}+{ci.chunk_length}, outside the data section",
                path,
                ci.chunk_start_offset,
            )
    index.chunk_indexes = cis
    index.chunk_index_array = chunk_index_array(cis)
    return index


def _read_summary_section(
    view: memoryview, path: str | None, pos: int, end: int, index: SummaryIndex, define: DefineCopy
) -> list[R.ChunkIndex]:
    """Read the summary section's records in ``[pos, end)``: definitions are registered,
    indexes and statistics kept in ``index``; returns the Chunk Indexes."""
    cis: list[R.ChunkIndex] = []
    for op, at, e in _section_records(view, path, pos, end, "summary", "summary record (opcode 0x{op:02x})"):
        if op == OP_SCHEMA or op == OP_CHANNEL:
            define(view, op, at, e)
        elif op == Opcode.CHUNK_INDEX:
            rec = _fast_chunk_index(view, at + 9, e)
            if rec is None:  # short or padded: the general parser applies the rules
                rec = R.parse_as(R.ChunkIndex, op, view, at + 9, e, path, 0)
            cis.append(rec)
        elif op == Opcode.ATTACHMENT_INDEX:
            a = R.parse_as(R.AttachmentIndex, op, view, at + 9, e, path, 0)
            index.attachment_indexes.append(a)
        elif op == Opcode.METADATA_INDEX:
            m = R.parse_as(R.MetadataIndex, op, view, at + 9, e, path, 0)
            index.metadata_indexes.append(m)
        elif op == Opcode.STATISTICS:
            index.statistics = R.parse_as(R.Statistics, op, view, at + 9, e, path, 0)
    return cis


def _summary_offset_records(view: memoryview, path: str | None, pos: int, foot: int, index: SummaryIndex) -> None:
    """Read the Summary Offset records in ``[pos, foot)`` into ``index.summary_offsets``."""
    for op, at, e in _section_records(view, path, pos, foot, "summary offset", "summary offset record"):
        if op == Opcode.SUMMARY_OFFSET:
            index.summary_offsets.append(R.parse_as(R.SummaryOffset, op, view, at + 9, e, path, 0))


def _section_records(view: memoryview, path: str | None, pos: int, end: int, section: str, record: str) -> Iterator[tuple[int, int, int]]:
    """``(opcode, start, end)`` of each record in ``[pos, end)`` of a summary ``section``; a
    record running past ``end`` is an error naming it by ``record`` (``{op}``: its opcode)."""
    while pos < end:
        if pos + 9 > end:
            raise TruncatedError(f"{section} section ends inside a record header", path, pos)
        op, ln = RECORD_HEAD.unpack_from(view, pos)
        e = pos + 9 + ln
        if e > end:
            raise FormatError(f"{record.format(op=op)} declares {ln} bytes, section has {end - pos - 9} left", path, pos)
        yield op, pos, e
        pos = e


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
