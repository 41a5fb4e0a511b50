"""Top-level records one by one: ``records()`` (the conformance runner's view),
attachments and metadata.

:class:`TopLevelRecords` walks the records of a mapped file or a stream in file order
(checking the data and summary section CRCs), and reads Attachment and Metadata records
at the offsets the summary's indexes give (or a scan found).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator
from typing import Any

from polybag.errors import ChecksumError, FormatError, PolybagError, TruncatedError
from polybag.formats.mcap import records as R
from polybag.formats.mcap.context import McapContext
from polybag.formats.mcap.records import MAGIC, RECORD_HEAD, U32, Opcode
from polybag.formats.mcap.stream import StreamReader
from polybag.formats.mcap.vocabulary import (
    OP_ATTACHMENT,
    OP_CHUNK,
    OP_DATA_END,
    OP_FOOTER,
    OP_MESSAGE,
    OP_MESSAGE_INDEX,
    OP_METADATA,
)
from polybag.io.source import MappedSource, StreamSource
from polybag.model import Attachment, Metadata


class TopLevelRecords:
    """``records()``, ``attachments()``, ``metadata()`` and ``record_problems()``;
    ``materialize`` spools a stream into a mapped source first (for what needs the whole file)."""

    def __init__(self, ctx: McapContext, stream: StreamReader, materialize: Callable[[], None]) -> None:
        self.ctx = ctx
        self.stream = stream
        self.materialize = materialize

    def records(self, expand_chunks: bool = True) -> Iterator[R.Record]:
        """Every record from the Header to the Footer in file order.

        With ``expand_chunks`` a Chunk is replaced by the records inside it and Message
        Index records are dropped (the conformance suite's streamed view).
        """
        yield self.ctx.header
        if isinstance(self.ctx.source, StreamSource):
            it: Iterator[tuple[int, bytes | memoryview, int]] = self.stream.records()
        else:
            it = self._mapped_records()
        for op, body, pos in it:
            if op == OP_CHUNK and expand_chunks:
                buf = self.ctx.decode_chunk(body, 0, len(body), pos)
                p = 0
                n = len(buf)
                while p < n:
                    if p + 9 > n:
                        raise self.ctx.err(FormatError, f"inside Chunk at {pos}: record header needs 9 bytes, {n - p} left", pos)
                    iop, iln = RECORD_HEAD.unpack_from(buf, p)
                    if p + 9 + iln > n:
                        raise self.ctx.err(FormatError, f"inside Chunk at {pos}: record declares {iln} bytes, {n - p - 9} left", pos)
                    yield R.parse_record(iop, buf, p + 9, p + 9 + iln, self.ctx.path, 0)
                    p += 9 + iln
                continue
            if op == OP_MESSAGE_INDEX and expand_chunks:
                continue
            rec = R.parse_record(op, body, 0, len(body), self.ctx.path, pos + 9)
            if isinstance(rec, R.AttachmentRecord) and rec.crc and self.ctx.validate_crcs:
                got = zlib.crc32(memoryview(body)[: rec.crc_end])
                if got != rec.crc:
                    raise self.ctx.err(ChecksumError, f"Attachment {rec.name!r} CRC is {got:#010x}, the record holds {rec.crc:#010x}", pos)
            yield rec

    def _mapped_records(self) -> Iterator[tuple[int, memoryview, int]]:
        src = self.ctx.source
        assert isinstance(src, MappedSource)
        src.need_all()  # every record in file order
        view = src.view
        size = src.size
        pos = self.ctx.header_end
        if not pos:
            raise self.ctx.err(TruncatedError, "no complete Header record", 8)
        checked = not self.ctx.validate_crcs
        while True:
            if pos + 9 > size:
                raise self.ctx.err(TruncatedError, f"expected a record header (9 bytes), file has {size - pos} left", pos)
            op, ln = RECORD_HEAD.unpack_from(view, pos)
            if op == 0:
                raise self.ctx.err(FormatError, "record opcode 0x00 is invalid", pos)
            e = pos + 9 + ln
            if e > size:
                raise self.ctx.err(TruncatedError, f"record (opcode 0x{op:02x}) declares {ln} bytes, file has {size - pos - 9} left", pos)
            if op == OP_DATA_END and not checked:
                checked = True
                if ln >= 4:
                    want_crc = U32.unpack_from(view, pos + 9)[0]
                    got = zlib.crc32(view[:pos])
                    if want_crc and got != want_crc:
                        raise self.ctx.err(ChecksumError, f"data section CRC is {got:#010x}, the DataEnd record holds {want_crc:#010x}", pos)
            if op == OP_FOOTER and self.ctx.validate_crcs and ln >= 20:
                ss, _sos, scrc = R.FOOTER_BODY.unpack_from(view, pos + 9)
                if scrc and ss:
                    got = zlib.crc32(view[ss : pos + 25]) if ss <= pos else -1
                    if got != scrc:
                        raise self.ctx.err(ChecksumError, f"summary section CRC is {got:#010x}, the Footer records {scrc:#010x}", pos)
            yield op, view[pos + 9 : e], pos
            if op == OP_FOOTER:
                if e + 8 > size or bytes(view[e : e + 8]) != MAGIC:
                    raise self.ctx.err(TruncatedError, "expected the closing MCAP magic after the Footer", e)
                if e + 8 != size:
                    raise self.ctx.err(FormatError, f"{size - e - 8} bytes follow the closing magic", e + 8)
                return
            pos = e

    # --- what check reports beyond reading ----------------------------------------------------
    def record_problems(self) -> list[str]:
        """Records shorter than their spec table (top-level and inside chunks) and a data
        section without its Data End record, each naming its offset.  Reading takes both (a
        missing field is its zero value, as the spec asks of readers), but the spec's tables
        forbid them and the mcap library refuses a short record.  One pass over the whole
        file; damage that stops the pass is the read's to report."""
        if isinstance(self.ctx.source, StreamSource):
            if self.stream.used:
                return []
            self.materialize()
        src = self.ctx.source
        assert isinstance(src, MappedSource)
        if not self.ctx.header_end:
            return []
        src.need_all()
        view, size = src.view, src.size
        problems: list[str] = []
        why = R.shortfall(Opcode.HEADER, view, 17, self.ctx.header_end)
        if why:
            problems.append(str(self.ctx.err(FormatError, why, 8)))
        pos = self.ctx.header_end
        data_end: int | None = None
        footer: int | None = None
        while pos + 9 <= size:
            op, ln = RECORD_HEAD.unpack_from(view, pos)
            e = pos + 9 + ln
            if op == 0 or e > size:
                break
            why = R.shortfall(op, view, pos + 9, e)
            if why:
                problems.append(str(self.ctx.err(FormatError, why, pos)))
            elif op == OP_CHUNK:
                problems.extend(self._chunk_record_problems(view, pos, e))
            if op == OP_DATA_END and data_end is None:
                data_end = pos
            elif op == OP_FOOTER:
                footer = pos
                break
            pos = e
        if footer is not None and data_end is None:
            start = R.U64.unpack_from(view, footer + 9)[0] if footer + 17 <= size else 0
            where = start if 0 < start < footer else footer
            problems.append(str(self.ctx.err(FormatError, "no Data End record ends the data section (the spec requires one)", where)))
        return problems

    def _chunk_record_problems(self, view: memoryview, pos: int, e: int) -> list[str]:
        """The records shorter than their spec table inside the Chunk record at ``pos``."""
        try:
            buf = self.ctx.decode_chunk(view, pos + 9, e, pos)
        except PolybagError:
            return []  # the read reports a chunk it cannot open
        self.ctx.keep_decoded(pos, buf)  # the read that follows (``check``) decompresses it once
        out = []
        p, n = 0, len(buf)
        while p + 9 <= n:
            iop, iln = RECORD_HEAD.unpack_from(buf, p)
            q = p + 9 + iln
            if q > n:
                break
            if iop != OP_MESSAGE or iln < R.MESSAGE_HEAD_LEN:
                why = R.shortfall(iop, buf, p + 9, q)
                if why:
                    out.append(str(self.ctx.err(FormatError, f"inside the Chunk, at {p} of its records: {why}", pos)))
            p = q
        return out

    # --- attachments and metadata -------------------------------------------------------------
    def _record_at(self, offset: int, op_expected: int, what: str) -> tuple[R.Record, memoryview]:
        src = self.ctx.source
        assert isinstance(src, MappedSource)
        if offset + 9 > src.size:
            raise self.ctx.err(TruncatedError, f"expected a {what} record header", offset)
        src.need(offset, 9)
        op, ln = RECORD_HEAD.unpack_from(src.view, offset)
        if op != op_expected:
            raise self.ctx.err(FormatError, f"expected a {what} record (opcode 0x{op_expected:02x}), found opcode 0x{op:02x}", offset)
        if ln > src.size - offset - 9:
            raise self.ctx.err(TruncatedError, f"{what} declares {ln} bytes, file has {src.size - offset - 9} left", offset)
        src.need(offset + 9, ln)
        body = src.view[offset + 9 : offset + 9 + ln]
        return R.parse_record(op, body, 0, ln, self.ctx.path, offset + 9), body

    def _attachment(self, offset: int) -> Attachment:
        rec, body = self._record_at(offset, OP_ATTACHMENT, "Attachment")
        assert isinstance(rec, R.AttachmentRecord)
        if rec.crc and self.ctx.validate_crcs:
            got = zlib.crc32(body[: rec.crc_end])
            if got != rec.crc:
                raise self.ctx.err(ChecksumError, f"Attachment {rec.name!r} CRC is {got:#010x}, the record holds {rec.crc:#010x}", offset)
        return Attachment(rec.name, rec.media_type, rec.data, rec.log_time, rec.create_time)

    def attachments(self) -> Iterator[Attachment]:
        for off in self._toplevel_offsets(Opcode.ATTACHMENT_INDEX, self.ctx.index.attachment_indexes, "attachments"):
            try:
                yield self._attachment(off)
            except PolybagError as err:
                if not self.ctx.recover:
                    raise
                self.ctx.note(str(err), 0)

    def metadata(self) -> Iterator[Metadata]:
        for off in self._toplevel_offsets(Opcode.METADATA_INDEX, self.ctx.index.metadata_indexes, "metadata"):
            try:
                rec, _body = self._record_at(off, OP_METADATA, "Metadata")
            except PolybagError as err:
                if not self.ctx.recover:
                    raise
                self.ctx.note(str(err), 0)
                continue
            assert isinstance(rec, R.MetadataRecord)
            yield Metadata(rec.name, rec.metadata)

    def _toplevel_offsets(self, index_op: int, indexes: list[Any], scanned: str) -> list[int]:
        """Offsets of the attachment or metadata records: from the summary's index records
        when it has that group (or says there are none), from a scan otherwise."""
        self.materialize()
        if self.ctx.has_summary and (indexes or self._summary_has_group(index_op)):
            return [i.offset for i in indexes]
        if self.ctx.has_summary and self._summary_complete():
            return []
        return list(getattr(self.ctx.scan(), scanned))

    def _summary_has_group(self, op: int) -> bool:
        return any(s.group_opcode == op for s in self.ctx.index.summary_offsets)

    def _summary_complete(self) -> bool:
        """Whether the summary says how many attachments and metadata records there are."""
        st = self.ctx.index.statistics
        if st is None:
            return False
        return st.attachment_count == len(self.ctx.index.attachment_indexes) and st.metadata_count == len(self.ctx.index.metadata_indexes)
