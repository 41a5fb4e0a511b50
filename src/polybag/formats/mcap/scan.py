"""The linear scan of a mapped file's top-level records (no summary, or ``recover=True``).

:func:`scan_records` walks the data section once without decompressing chunks and fills a
:class:`~polybag.formats.mcap.index.ScanIndex`: where the chunks, loose messages,
attachments and metadata are, the data section CRC at DataEnd, and the first error; each
top-level Schema/Channel record is handed to the ``define`` callback of the reader.
Recovering, it skips damage by searching for the next plausible record
(:meth:`RecordScan._resync`) and goes on from there.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable

from polybag.errors import ChecksumError, FormatError, PolybagError, TruncatedError
from polybag.formats.mcap import records as R
from polybag.formats.mcap.index import ScanIndex
from polybag.formats.mcap.records import CHUNK_HEAD, MAGIC, MESSAGE_HEAD_LEN, RECORD_HEAD, U32, U64, Opcode
from polybag.formats.mcap.vocabulary import (
    OP_ATTACHMENT,
    OP_CHANNEL,
    OP_CHUNK,
    OP_DATA_END,
    OP_FOOTER,
    OP_MESSAGE,
    OP_MESSAGE_INDEX,
    OP_METADATA,
    OP_SCHEMA,
)
from polybag.formats.shared.recovery import Recovery
from polybag.io.source import MappedSource

# registers a top-level Schema/Channel record: (view, opcode, record start, record end, base offset)
Define = Callable[[memoryview, int, int, int, int], None]


class RecordScan:
    """One pass over the top-level records of a mapped file; resynchronising after damage.

    ``define`` registers a Schema/Channel record met on the way, ``known_channel`` says
    whether a channel id is defined so far (a plausible Message record after damage), and
    damage goes to ``recovery`` (recovering) or becomes its ``first`` error.
    """

    def __init__(
        self,
        source: MappedSource,
        path: str | None,
        *,
        validate_crcs: bool,
        recover: bool,
        recovery: Recovery,
        define: Define,
        known_channel: Callable[[int], bool],
    ) -> None:
        self.source = source
        self.path = path
        self.validate_crcs = validate_crcs
        self.recover = recover
        self._recovery = recovery
        self._define = define
        self._known_channel = known_channel

    def _err(self, cls: type[FormatError], what: str, offset: int | None) -> FormatError:
        """An error of class ``cls`` about this file at ``offset``."""
        return cls(what, self.path, offset)

    def run(self, sr: ScanIndex, start: int) -> None:
        """Scan from the record at ``start`` (after the Header) into ``sr``."""
        src = self.source
        src.need_all()  # a pass over every top-level record
        view = src.view
        size = src.size
        head = RECORD_HEAD.unpack_from
        pos = start
        rank = 0
        loose: list[int] | None = None
        lo = hi = 0
        ended = False
        try:
            while True:
                if pos + 9 > size:
                    if pos < size or sr.footer is None:
                        raise self._err(
                            TruncatedError, f"expected a record header (9 bytes), file has {size - pos} left", pos
                        )
                    break
                op, ln = head(view, pos)
                e = pos + 9 + ln
                if ended and op != OP_FOOTER and e <= size and op != 0:
                    pos = e
                    continue
                if e > size or op == 0:
                    if op == 0:
                        raise self._err(FormatError, "record opcode 0x00 is invalid", pos)
                    raise self._err(TruncatedError, f"record (opcode 0x{op:02x}) declares {ln} bytes, file has {size - pos - 9} left", pos)
                if op == OP_MESSAGE:
                    if ln >= MESSAGE_HEAD_LEN:
                        lt = U64.unpack_from(view, pos + 15)[0]
                    else:
                        rec = R.parse_as(R.MessageRecord, op, view, pos + 9, e, self.path, 0)
                        lt = rec.log_time
                    if loose is None:
                        loose = []
                        lo = hi = lt
                        sr.loose.append((rank, 0, 0, loose))
                        rank += 1
                    loose.append(pos)
                    lo = min(lo, lt)
                    hi = max(hi, lt)
                    sr.loose[-1] = (sr.loose[-1][0], lo, hi, loose)
                else:
                    if op != OP_MESSAGE_INDEX:
                        loose = None
                    if op == OP_DATA_END:
                        if sr.data_end is None:
                            self._check_data_end(sr, pos, ln)
                        ended = True  # the summary section only repeats the data section
                    elif op == OP_FOOTER:
                        sr.footer = pos
                        pos = self._after_footer(e)
                        break
                    elif op != OP_MESSAGE_INDEX:
                        rank = self._scan_record(sr, op, pos, e, ln, rank)
                pos = e
        except PolybagError as err:
            self._scan_failed(sr, err, pos, rank)

    def _scan_record(self, sr: ScanIndex, op: int, pos: int, e: int, ln: int, rank: int) -> int:
        """Note a top-level record other than a message, Message Index, DataEnd or Footer in
        ``sr`` (Chunks, definitions, attachments, metadata, statistics); returns the next rank."""
        src = self.source
        view = src.view
        if op == OP_CHUNK:
            if ln < CHUNK_HEAD.size:
                raise self._err(FormatError, f"Chunk record of {ln} bytes is shorter than its fixed fields", pos)
            s, t = struct.unpack_from("<QQ", view, pos + 9)
            sr.chunks.append((pos, e - pos, s, t))
            sr.chunk_ranks.append(rank)
            rank += 1
        elif op == OP_SCHEMA or op == OP_CHANNEL:
            self._define(view, op, pos, e, 0)
        elif op == OP_ATTACHMENT:
            sr.attachments.append(pos)
        elif op == OP_METADATA:
            sr.metadata.append(pos)
        elif op == Opcode.STATISTICS:
            st = R.parse_as(R.Statistics, op, view, pos + 9, e, self.path, 0)
            sr.statistics = st
        return rank

    def _check_data_end(self, sr: ScanIndex, pos: int, ln: int) -> None:
        """The first DataEnd record, at ``pos``: check the data section CRC it holds."""
        src = self.source
        view = src.view
        sr.data_end = pos
        if self.validate_crcs and ln >= 4:
            want_crc = U32.unpack_from(view, pos + 9)[0]
            if want_crc:
                got = zlib.crc32(view[:pos])
                if got != want_crc:
                    err = self._err(
                        ChecksumError,
                        f"data section CRC is {got:#010x}, the DataEnd record holds {want_crc:#010x}",
                        pos,
                    )
                    if self.recover:
                        self._recovery.note(str(err))
                    else:
                        self._recovery.first = err

    def _after_footer(self, e: int) -> int:
        """The offset after the closing magic that must follow the Footer ending at ``e``."""
        src = self.source
        view = src.view
        size = src.size
        if e + 8 > size or bytes(view[e : e + 8]) != MAGIC:
            raise self._err(TruncatedError, "expected the closing MCAP magic after the Footer", e)
        pos = e + 8
        if pos != size and not self.recover:
            raise self._err(FormatError, f"{size - pos} bytes follow the closing magic", pos)
        return pos

    def _scan_failed(self, sr: ScanIndex, err: PolybagError, pos: int, rank: int) -> None:
        """The scan met ``err`` at ``pos``: recovering, note it and go on after the damage;
        otherwise keep the first error (raised once the messages before it are read)."""
        src = self.source
        size = src.size
        if self.recover:
            new = self._resync(pos + 1)
            self._recovery.note(str(err), (size if new is None else new) - pos)
            if new is not None:
                self._scan_from(sr, new, rank)  # continue scanning from the resync point
        elif self._recovery.first is None:
            self._recovery.first = err

    def _scan_from(self, sr: ScanIndex, pos: int, rank: int) -> None:
        """Continue a recovering scan after damage (chunks, definitions and loose messages)."""
        src = self.source
        view = src.view
        size = src.size
        while pos + 9 <= size:
            op, ln = RECORD_HEAD.unpack_from(view, pos)
            e = pos + 9 + ln
            if op == 0 or e > size or not self._plausible(pos):
                new = self._resync(pos + 1)
                to = size if new is None else new
                self._recovery.note(str(self._err(FormatError, f"damaged record; skipped to {to}", pos)), to - pos)
                if new is None:
                    return
                pos = new
                continue
            if op == OP_CHUNK:
                s, t = struct.unpack_from("<QQ", view, pos + 9)
                sr.chunks.append((pos, e - pos, s, t))
                sr.chunk_ranks.append(rank)
                rank += 1
            elif op == OP_MESSAGE and ln >= MESSAGE_HEAD_LEN:
                lt = U64.unpack_from(view, pos + 15)[0]
                sr.loose.append((rank, lt, lt, [pos]))
                rank += 1
            elif op == OP_SCHEMA or op == OP_CHANNEL:
                try:
                    self._define(view, op, pos, e, 0)
                except PolybagError as err:
                    self._recovery.note(str(err))
            elif op == OP_ATTACHMENT:
                sr.attachments.append(pos)
            elif op == OP_METADATA:
                sr.metadata.append(pos)
            elif op == OP_FOOTER:
                return
            pos = e

    _KNOWN_TOP = frozenset({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})

    def _plausible(self, pos: int) -> bool:
        src = self.source
        view = src.view
        size = src.size
        if pos + 9 > size:
            return False
        op, ln = RECORD_HEAD.unpack_from(view, pos)
        if op not in self._KNOWN_TOP or pos + 9 + ln > size:
            return False
        if op == OP_CHUNK:
            if ln < CHUNK_HEAD.size + 12:
                return False
            s, t, usize, _crc = CHUNK_HEAD.unpack_from(view, pos + 9)
            clen = U32.unpack_from(view, pos + 9 + CHUNK_HEAD.size)[0]
            if clen > 16 or s > t:
                return False
            comp = bytes(view[pos + 9 + CHUNK_HEAD.size + 4 : pos + 9 + CHUNK_HEAD.size + 4 + clen])
            if comp not in (b"", b"zstd", b"lz4", b"none"):
                return False
            p = pos + 9 + CHUNK_HEAD.size + 4 + clen
            if p + 8 > pos + 9 + ln:
                return False
            rlen = U64.unpack_from(view, p)[0]
            return bool(p + 8 + rlen <= pos + 9 + ln)
        if op == OP_MESSAGE:
            return ln >= MESSAGE_HEAD_LEN and self._known_channel(_u16_at(view, pos + 9))
        if op in (OP_SCHEMA, OP_CHANNEL, OP_ATTACHMENT, OP_METADATA, OP_MESSAGE_INDEX):
            try:
                R.parse_record(op, view, pos + 9, pos + 9 + ln, self.path, 0)
            except PolybagError:
                return False
            return True
        return bool(ln < (1 << 20))

    _RESYNC_OPS = (OP_CHUNK, OP_MESSAGE, OP_CHANNEL, OP_SCHEMA, OP_ATTACHMENT, OP_METADATA, OP_DATA_END)
    _RESYNC_WINDOW = 1 << 22

    def _resync(self, pos: int) -> int | None:
        """The next offset at or after ``pos`` where a plausible record starts.

        Searches window by window for bytes that are record opcodes, so a damaged region
        costs one C-level scan, not one Python step per byte.
        """
        src = self.source
        data = src.view
        size = src.size
        while pos < size - 9:
            wend = min(size, pos + self._RESYNC_WINDOW)
            window = bytes(data[pos:wend])
            starts = {w: window.find(bytes([w])) for w in self._RESYNC_OPS}
            while True:
                live = [(v, k) for k, v in starts.items() if v >= 0]
                if not live:
                    break
                rel, op = min(live)
                cand = pos + rel
                if cand >= size - 9:
                    return None
                if op != OP_DATA_END and self._plausible(cand):
                    return cand
                starts[op] = window.find(bytes([op]), rel + 1)
            if wend >= size:
                return None
            pos = wend
        return None


def _u16_at(view: memoryview, pos: int) -> int:
    v: int = R.U16.unpack_from(view, pos)[0]
    return v


def scan_records(
    source: MappedSource,
    path: str | None,
    sr: ScanIndex,
    start: int,
    *,
    validate_crcs: bool,
    recover: bool,
    recovery: Recovery,
    define: Define,
    known_channel: Callable[[int], bool],
) -> ScanIndex:
    """Scan the top-level records of ``source`` from ``start`` into ``sr`` (see :class:`RecordScan`)."""
    RecordScan(
        source, path, validate_crcs=validate_crcs, recover=recover, recovery=recovery, define=define, known_channel=known_channel
    ).run(sr, start)
    return sr
