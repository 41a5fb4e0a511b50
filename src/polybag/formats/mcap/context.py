"""What every part of the MCAP reader reads (:class:`McapContext`): the source, the reader's
options, the Header and Footer, the summary section's index or the scan's, the damage met,
and loading one chunk; and the guard that turns a loader's
:class:`~polybag.formats.mcap.vocabulary.PartialLoad` into intact messages plus a late error.
"""

from __future__ import annotations

from collections.abc import Callable

from polybag.errors import ChecksumError, FormatError, PolybagError
from polybag.formats.mcap import records as R
from polybag.formats.mcap.chunk_loader import decode_chunk, load_chunk
from polybag.formats.mcap.index import ScanIndex, SummaryIndex
from polybag.formats.mcap.scan import Define, scan_records
from polybag.formats.mcap.vocabulary import PartialLoad
from polybag.formats.shared.recovery import Recovery
from polybag.io import compression
from polybag.io.source import MappedSource, Source
from polybag.model import Message, Summary


def _no_definitions(view: memoryview, op: int, pos: int, e: int, base: int) -> None:
    """The scan's ``define`` until the reader hands over its definitions' (never called)."""


#: the most decompressed chunk bytes kept between ``record_problems`` and the read after it
KEPT_CHUNK_BYTES = 64 << 20


class KeptChunks:
    """Decompressed chunks kept for a read that follows, by offset, at most ``limit`` bytes
    of them at once; each is handed over once (:meth:`take`)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._bufs: dict[int, bytes | memoryview] = {}
        self._size = 0

    def put(self, offset: int, buf: bytes | memoryview) -> None:
        """Keep ``buf``, the records of the chunk at ``offset``, if there is room."""
        if offset not in self._bufs and self._size + len(buf) <= self.limit:
            self._bufs[offset] = buf
            self._size += len(buf)

    def take(self, offset: int) -> bytes | memoryview | None:
        """The records kept for the chunk at ``offset`` (no longer kept), or None."""
        buf = self._bufs.pop(offset, None)
        if buf is not None:
            self._size -= len(buf)
        return buf

    def clear(self) -> None:
        """Let go of every chunk kept."""
        self._bufs.clear()
        self._size = 0


class McapContext:
    """The source, options and indexes that every part of
    :class:`~polybag.formats.mcap.reader.McapReader` reads, set up before anything is read.

    ``define_scanned`` and ``known_channel`` are what the scan (:meth:`scan`) hands a
    Schema/Channel record it meets to, and asks whether a channel id is defined so far: the
    reader sets them to its definitions' (:class:`~polybag.formats.mcap.definitions.McapDefinitions`).
    ``summary``: the reported summary once built (by :class:`~polybag.formats.mcap.info.McapInfo`;
    forgotten when the definition timeline is built).
    """

    def __init__(self, source: Source, path: str | None, validate_crcs: bool, recover: bool, max_chunk_bytes: int | None) -> None:
        self.source = source
        self.path = path
        self.validate_crcs = validate_crcs
        # what one chunk may decompress to (None: the process-wide cap, 512 MiB by default)
        self.max_chunk_bytes = compression.max_chunk_bytes(max_chunk_bytes)
        self.recover = recover
        # damage met (a damaged Header record first); ``first``: the scan's first error
        self.recovery = Recovery()
        self.header = R.Header()
        self.header_end = 0
        self.footer: R.Footer | None = None
        # the summary section's indexes and statistics (empty: none, or not used)
        self.index = SummaryIndex()
        self.has_summary = False
        self.summary_error: str | None = None
        self.summary_crc_error: ChecksumError | None = None
        self.scan_index: ScanIndex | None = None
        self.summary: Summary | None = None
        self.quiet = False  # finding real ranges: damage is reported by the real read
        self.muted = 0
        self.define_scanned: Define = _no_definitions
        # chunks decompressed ahead of a read (``record_problems``), handed over once: at most
        # KEPT_CHUNK_BYTES (or one chunk's cap if lower), so a check holds little more than a read
        self.kept = KeptChunks(min(self.max_chunk_bytes, KEPT_CHUNK_BYTES))
        self.known_channel: Callable[[int], bool] = lambda cid: False

    def err(self, cls: type[FormatError], what: str, offset: int | None) -> FormatError:
        """An error of class ``cls`` about this file at ``offset``."""
        return cls(what, self.path, offset)

    def note(self, what: str, skipped: int) -> None:
        """Damage met while reading (muted while looking for chunks' real time ranges: the
        real read reports it)."""
        if self.quiet:
            self.muted += 1
        else:
            self.recovery.note(what, skipped)

    def mapped(self) -> MappedSource:
        """The source of a mapped file (a stream is spooled into one before this is asked)."""
        src = self.source
        assert isinstance(src, MappedSource)
        return src

    def chunk_list(self) -> list[tuple[int, int, int, int]]:
        """(offset, length, claimed start, claimed end) of every chunk: from the summary's Chunk
        Indexes, or found by the scan."""
        if self.has_summary and self.index.chunk_indexes:
            return [(c.chunk_start_offset, c.chunk_length, c.message_start_time, c.message_end_time) for c in self.index.chunk_indexes]
        return self.scan().chunks

    @property
    def fetches(self) -> bool:
        """Whether the source fetches what is read (a remote object: every byte costs a
        request's share), so a read asks for no byte it does not use (no Message Index, no
        check of chunks it does not load)."""
        src = self.source
        return isinstance(src, MappedSource) and src.stats is not None

    def chunk_data(self, offset: int, length: int = 0) -> bytes | memoryview:
        """The decompressed records of the chunk record at ``offset``, CRC-checked (one kept by
        :meth:`keep_decoded` is handed over instead, once).  ``length``: the record's length
        as an index claims it, asked of a remote source in one request (not a head, then the
        rest); the record's own length still decides what is read."""
        kept = self.kept.take(offset)
        if kept is not None:
            return kept
        src = self.source
        assert isinstance(src, MappedSource)
        held = 0
        if 0 < length and 0 <= offset < src.size:
            held = min(length, src.size - offset)
            src.need(offset, held)
        return load_chunk(src, offset, self.path, self.validate_crcs, self.max_chunk_bytes, held)

    def decode_chunk(self, buf: memoryview | bytes, start: int, end: int, offset: int) -> bytes | memoryview:
        """The decompressed records of the Chunk record content ``buf[start:end]`` at ``offset``."""
        return decode_chunk(buf, start, end, offset, self.path, self.validate_crcs, self.max_chunk_bytes)

    def keep_decoded(self, offset: int, buf: bytes | memoryview) -> None:
        """Keep the decompressed records ``buf`` of the chunk at ``offset`` (checked as
        :meth:`chunk_data` checks them) for the read that follows, so that it does not
        decompress the chunk again; at most ``max_chunk_bytes`` are kept at once.  A chunk
        that was not compressed (a view of the source) is not kept: reading it costs nothing."""
        if isinstance(buf, memoryview) and buf.obj is self.mapped().view.obj:
            return  # stored uncompressed: a view of the source
        self.kept.put(offset, buf)

    def scan(self) -> ScanIndex:
        """One pass over the top-level records (chunks are not decompressed), once per reader
        (:func:`~polybag.formats.mcap.scan.scan_records`)."""
        if self.scan_index is not None:
            return self.scan_index
        src = self.source
        assert isinstance(src, MappedSource)
        sr = self.scan_index = ScanIndex()
        return scan_records(
            src,
            self.path,
            sr,
            self.header_end if self.header_end else 8,  # no header (recover): from the magic on
            validate_crcs=self.validate_crcs,
            recover=self.recover,
            recovery=self.recovery,
            define=self.define_scanned,
            known_channel=self.known_channel,
        )


def partial_load_guard(late: list[PolybagError]) -> Callable[[Callable[[], list[Message]]], Callable[[], list[Message]]]:
    """A wrapper for loaders: a load that meets damage (:class:`PartialLoad`) returns the intact
    messages before it and puts the error on ``late`` (raised once they were returned)."""

    def guard(load: Callable[[], list[Message]]) -> Callable[[], list[Message]]:
        def inner() -> list[Message]:
            try:
                return load()
            except PartialLoad as p:
                late.append(p.err)
                return p.msgs

        return inner

    return guard
