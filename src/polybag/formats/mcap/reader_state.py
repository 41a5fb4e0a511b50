"""The state every part of the MCAP reader shares (:class:`McapState`, set up in one place,
so a newcomer sees every field the parts read and write), and the guard that turns a
loader's :class:`~polybag.formats.mcap.vocabulary.PartialLoad` into intact messages plus a
late error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import numpy as np

from polybag.errors import ChecksumError, FormatError, PolybagError
from polybag.formats.mcap import records as R
from polybag.formats.mcap.chunk_loader import decode_chunk, load_chunk
from polybag.formats.mcap.definition_timeline import DefinitionTimeline
from polybag.formats.mcap.index import ScanIndex, SummaryIndex
from polybag.formats.mcap.scan import scan_records
from polybag.formats.mcap.vocabulary import PartialLoad, Where
from polybag.formats.shared.recovery import Recovery
from polybag.io import compression
from polybag.io.source import MappedSource
from polybag.model import Channel, Message, RecoveryReport, Schema, Summary
from polybag.reader import Reader, TopicSelector


class McapState(Reader):
    """What every part of :class:`~polybag.formats.mcap.reader.McapReader` reads and writes.

    The reader's parts (definitions, chunks, read planning, streams, top-level records, the
    reported summary) are layered classes over this one, each using only those below it;
    they share the state set up here (:meth:`_init_state`, called by the reader's
    constructor).  The state also runs the scan and loads chunks (both plain functions,
    :func:`~polybag.formats.mcap.scan.scan_records` and :mod:`~polybag.formats.mcap.chunk_loader`),
    and notes damage.
    """

    def _init_state(self, validate_crcs: bool, recover: bool, max_chunk_bytes: int | None) -> None:
        """Every field the parts read and write, before anything is read (the reader's
        options as :class:`~polybag.formats.mcap.reader.McapReader` takes them)."""
        self.validate_crcs = validate_crcs
        # what one chunk may decompress to (None: the process-wide cap, 512 MiB by default)
        self.max_chunk_bytes = compression.max_chunk_bytes(max_chunk_bytes)
        self.recover = recover
        self.recovery_report: RecoveryReport | None = None
        # damage met (a damaged Header record first); ``first``: the scan's first error
        self._recovery = Recovery()
        self.header = R.Header()
        self.footer: R.Footer | None = None
        self.schemas: dict[int, Schema] = {}
        self._channels: dict[int, Channel] = {}
        self._live_wants: list[tuple[TopicSelector, set[int]]] = []
        self._channel_records: dict[int, R.ChannelRecord] = {}
        # the summary section's indexes and statistics (empty: none, or not used)
        self._index = SummaryIndex()
        self.has_summary = False
        self.summary_error: str | None = None
        self._summary_crc_error: ChecksumError | None = None
        self._summary: Summary | None = None
        self._scan_result: ScanIndex | None = None
        self._defs_scanned = 0  # chunks of the scan/index whose definitions were registered
        self._stream_used = False
        self._header_end = 0
        # chunk times from indexes and Chunk headers are claims: once one is caught lying
        # (or when recovering) every chunk's real range is found by reading it
        self._verify = recover
        self._index_checked = False
        self._true_ranges: dict[int, tuple[int, int] | None] = {}
        self._quiet = False  # finding real ranges: damage is reported by the real read
        self._muted = 0
        # redefined ids (see DefinitionTimeline): problems found, versions applied in file order
        # (streams, the timeline walk), and the timeline once one is known
        self.definition_problems: list[str] = []
        self._timeline: DefinitionTimeline | None = None
        self._need_timeline = False  # a redefinition (or a hint of one) was seen: build the timeline
        self._noting = 0  # > 0: a conflict only sets _need_timeline (summary, scan)
        self._timeline_walk = False
        self._changes: list[tuple[Where, int, Channel, Channel]] = []  # (where, file id, old, new)
        self._schema_changes: list[tuple[Where, int, Schema, Schema]] = []
        self._nversions: dict[tuple[int, int], int] = {}
        self._def_where: dict[tuple[int, int], Where | None] = {}  # (opcode, id) -> where in force
        self._seq_where: Where = (-1, -1)  # sequential reading: the last definition applied
        self._summary_records: list[R.SchemaRecord | R.ChannelRecord] = []
        self._first_records: dict[int, R.ChannelRecord] = {}  # of redefined channels
        # what one read loaded: (first, last offset, whether its definitions were all registered)
        self._loaded: list[tuple[int, int, bool]] = []
        # channel id -> the channel with the known definition that decodes its messages
        # (its own CDR definition does not), or None: its own stands (see ``defs``)
        self._judged: dict[int, Channel | None] = {}
        self._warned_topics: set[str] = set()

    # --- the summary section's index, as the reader shows it -----------------------------------
    @property
    def chunk_indexes(self) -> list[R.ChunkIndex]:
        """The summary's Chunk Indexes (empty without a usable summary)."""
        return self._index.chunk_indexes

    @property
    def attachment_indexes(self) -> list[R.AttachmentIndex]:
        """The summary's Attachment Indexes."""
        return self._index.attachment_indexes

    @property
    def metadata_indexes(self) -> list[R.MetadataIndex]:
        """The summary's Metadata Indexes."""
        return self._index.metadata_indexes

    @property
    def summary_offsets(self) -> list[R.SummaryOffset]:
        """The summary's Summary Offset records."""
        return self._index.summary_offsets

    @property
    def statistics(self) -> R.Statistics | None:
        """The summary's Statistics record, if any."""
        return self._index.statistics

    @property
    def _ci_array(self) -> np.ndarray | None:
        """The Chunk Indexes' numbers as one array (for vectorised planning)."""
        return self._index.chunk_index_array

    if TYPE_CHECKING:
        # the calls made upward: registering a definition the scan meets
        # (:class:`~polybag.formats.mcap.definitions.DefinitionsMixin`), and spooling a stream
        # and reading a topic's messages to judge its definition (:class:`~polybag.formats.mcap.reader.McapReader`)
        def _define(
            self, buf: memoryview | bytes, op: int, pos: int, e: int, base: int, chunk: int | None = None, summary: bool = False
        ) -> None: ...

        def _materialize(self) -> None: ...

        def _mapped_messages(
            self, topics: TopicSelector, start: int | None, end: int | None, reverse: bool, order: str
        ) -> Iterator[Message]: ...

    def _err(self, cls: type[FormatError], what: str, offset: int | None) -> FormatError:
        """An error of class ``cls`` about this file at ``offset``."""
        return cls(what, self.path, offset)

    def _note(self, what: str, skipped: int) -> None:
        """Damage met while reading (muted while looking for chunks' real time ranges: the
        real read reports it)."""
        if self._quiet:
            self._muted += 1
        else:
            self._recovery.note(what, skipped)

    def _finish_report(self, count: int) -> None:
        """Recovering: the ``recovery_report`` of a read that returned ``count`` messages."""
        if self.recover:
            self.recovery_report = self._recovery.report(count)

    def _mapped(self) -> MappedSource:
        """The source of a mapped file (a stream is spooled into one before this is asked)."""
        src = self.source
        assert isinstance(src, MappedSource)
        return src

    def _chunk_list(self) -> list[tuple[int, int, int, int]]:
        """(offset, length, claimed start, claimed end) of every chunk: from the summary's Chunk
        Indexes, or found by the scan."""
        if self.has_summary and self.chunk_indexes:
            return [(c.chunk_start_offset, c.chunk_length, c.message_start_time, c.message_end_time) for c in self.chunk_indexes]
        return self._scan().chunks

    def _chunk_data(self, offset: int) -> bytes | memoryview:
        """The decompressed records of the chunk record at ``offset``, CRC-checked."""
        src = self.source
        assert isinstance(src, MappedSource)
        return load_chunk(src, offset, self.path, self.validate_crcs, self.max_chunk_bytes)

    def _decode_chunk(self, buf: memoryview | bytes, start: int, end: int, offset: int) -> bytes | memoryview:
        """The decompressed records of the Chunk record content ``buf[start:end]`` at ``offset``."""
        return decode_chunk(buf, start, end, offset, self.path, self.validate_crcs, self.max_chunk_bytes)

    def _scan(self) -> ScanIndex:
        """One pass over the top-level records (chunks are not decompressed), once per reader
        (:func:`~polybag.formats.mcap.scan.scan_records`)."""
        if self._scan_result is not None:
            return self._scan_result
        self._noting += 1  # a redefinition found here only asks for the timeline
        try:
            src = self.source
            assert isinstance(src, MappedSource)
            sr = self._scan_result = ScanIndex()
            return scan_records(
                src,
                self.path,
                sr,
                self._header_end if self._header_end else 8,  # no header (recover): from the magic on
                validate_crcs=self.validate_crcs,
                recover=self.recover,
                recovery=self._recovery,
                define=self._define,
                known_channel=lambda cid: cid in self._channel_records,
            )
        finally:
            self._noting -= 1


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
