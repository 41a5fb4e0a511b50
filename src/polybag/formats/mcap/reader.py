"""MCAP reading: indexed (footer -> summary -> chunk and message indexes) and streamed.

One reader class serves both sources.  A :class:`~polybag.io.source.MappedSource` with a
usable summary is read through its indexes: only the chunks that can hold a wanted message
are read, each decompressed whole and walked with one precompiled struct per record.
Without a summary (or with ``recover=True``) the same chunks are found by a linear scan of
the top-level records, which gives the same answers.  A :class:`~polybag.io.source.StreamSource`
is read strictly forward in file order (``order="file"``); log-time order and reverse need
the whole file, so a stream is then read into memory first (chunks stay compressed until
used).

Messages are parsed in bulk: the record offsets of a chunk come from its Message Index
records (or one tight loop over record heads), the fixed heads of all its messages are
gathered into a numpy structured array, and filtering and sorting happen there; Python code
runs once per message only to create the :class:`~polybag.model.Message`.

Log-time order is a lazy merge of per-chunk sorted runs: chunks are loaded in order of
their start time, and a heap is used only while chunks overlap.

Trusting indexes.  Chunk times (in the Chunk Index and again in the Chunk record's header)
and Message Index entries are claims that a damaged or badly written file may get wrong.
``messages()`` in log-time order is always sorted (ties in file order) and holds exactly
the file's matching messages as far as these checks reach:

* Before anything is read, every Chunk Index is compared with its Chunk record's header
  (no decompression; skipped when the summary's CRC is checked: the summary is then as
  written, so a damaged index cannot pass), and for a log-time merge the Message Index times of the chunks to
  be read are compared with their chunk's claimed range.  Not for a remote file (a source
  that fetches what is read): its merge fetches a chunk only when it may hold the next
  message, each in one request, and walks it without its Message Indexes, so the first
  message costs one chunk; a lie is then found when the lying chunk is loaded.
* Every chunk that is read is checked against its claims: a message outside the claimed
  range is a lie.  Message Index entries are checked against the records they point at
  (log time with a time window, channel with a topic filter; when every message is read,
  that the listed records tile the chunk); an entry that disagrees, repeats or (in a
  full read) misses a record makes the chunk be walked record by record instead.
* On a lie, the reader warns (:class:`McapIndexWarning`) and from then on uses each
  chunk's real log-time range, found by reading every chunk once (without Message
  Indexes); the remaining merge goes on with those.  A lie found only after messages that
  it put out of order were returned (the chunk's index, header and Message Index all agree
  on wrong times) raises :class:`~polybag.errors.FormatError`; calling ``messages()``
  again on the same reader is then correct.
* Chunk times that pass these checks are trusted to *skip* chunks outside a start/end
  window, and a Chunk Index's channel list to skip chunks without a wanted topic; a chunk
  with no times (0, 0) is never skipped.  Message Indexes are trusted to list every
  message of the channels they name when only some channels are read.
* ``recover=True`` trusts no chunk time at all: every chunk's real range is found first
  (each chunk is decompressed twice); the summary is ignored as before.

Redefined ids.  A Schema/Channel id defined again with different content (the spec forbids
it) is read as written: each message gets the channel in force where it lies, and each later
version is a model channel of its own (see
:class:`~polybag.formats.mcap.definition_timeline.DefinitionTimeline`); ``definition_problems`` lists
them for ``check``.  Streams follow the definitions as they come.  A mapped file builds the
timeline of every definition (one pass over the chunks) as soon as one is known: from a
summary that holds two versions or counts more Channel records than ids, from the top-level
records a scan meets, from the chunks a read opens (every chunk without a summary, read in
file order of definitions; the chunks of a complete read or a time window with one), or for a
topic filter that matches none of the summary's channels.  A summary that names one version
per id is otherwise believed by topic-filtered reads and by the summary (which never
decompresses a chunk), as the mcap library's indexed reader does.

Where things are.  This module holds :class:`McapReader` (its parts tied together) and
:func:`open_mcap`.  Plain functions and
values it uses: ``summary_section`` (:func:`~polybag.formats.mcap.summary_section.load_summary`
-> :class:`~polybag.formats.mcap.index.SummaryIndex`), ``scan`` (the linear scan of top-level
records, resync after damage -> :class:`~polybag.formats.mcap.index.ScanIndex`),
``chunk_loader`` (read, decompress and CRC-check one chunk; its Message Index entries),
``definition_timeline`` (which version of a redefined id is in force where), and the hot
loops ``bulk_kernels`` (numpy), ``walk_kernels`` (record by record) and
:mod:`polybag.formats.shared.merge` (the log-time merge).  The reader owns its parts,
plain objects each given what it uses (none subclasses another): ``context``
(:class:`~polybag.formats.mcap.context.McapContext`: source, options, Header/Footer, the
index, damage met, loading a chunk), ``opening`` (magic, Header, summary section),
``definitions`` (Schema/Channel definitions, redefined ids), ``definition_finder`` (the
definitions of chunks not read yet), ``judging`` (stored definitions
that do not decode their messages), ``chunks`` (one chunk's messages), ``segments`` (which
chunks a read loads; trusting chunk times), ``file_reader`` (``messages()`` and
``topic_payloads()`` of a mapped file), ``stream`` (non-seekable streams),
``top_records`` (``records()``, attachments, metadata) and ``info`` (the reported
``summary``); ``vocabulary`` holds the opcodes and the exceptions the parts signal each other with.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from polybag.formats.mcap import records as R
from polybag.formats.mcap.chunks import ChunkReader
from polybag.formats.mcap.context import McapContext
from polybag.formats.mcap.definition_finder import DefinitionFinder
from polybag.formats.mcap.definitions import McapDefinitions
from polybag.formats.mcap.file_reader import FileReader
from polybag.formats.mcap.index import CHUNK_INDEX_DTYPE as CHUNK_INDEX_DTYPE  # re-exported
from polybag.formats.mcap.info import McapInfo
from polybag.formats.mcap.judging import DefinitionJudge
from polybag.formats.mcap.opening import open_mapped, open_stream, read_summary_or_scan
from polybag.formats.mcap.segments import SegmentPlanner
from polybag.formats.mcap.stream import StreamReader
from polybag.formats.mcap.top_records import TopLevelRecords
from polybag.formats.mcap.vocabulary import McapIndexWarning as McapIndexWarning  # re-exported
from polybag.io.source import MappedSource, Source, StreamSource
from polybag.model import Attachment, Message, Metadata, Schema, Summary, TopicPayloads
from polybag.reader import Reader, TopicSelector
from polybag.util.weak import weak_method


class McapReader(Reader):
    """Reads an MCAP file or stream.  Use :func:`open_mcap` (or ``polybag.open``).

    Its parts, each a plain object given what it uses: ``ctx`` (source, options, Header,
    Footer, the summary's or the scan's index, damage met), ``defs`` (Schema/Channel
    definitions), ``finder`` (the definitions of chunks not read yet), ``judge`` (stored definitions that do not decode), ``chunks`` (one
    chunk's messages), ``planner`` (which chunks a read loads), ``file`` (reading a mapped
    file), ``stream`` (a non-seekable source), ``toplevel`` (``records()``, attachments,
    metadata) and ``info`` (the summary).
    """

    format = "mcap"

    def __init__(self, source: Source, path: str | None = None, *, validate_crcs: bool = True, recover: bool = False, max_chunk_bytes: int | None = None) -> None:
        super().__init__(source, path)
        ctx = self.ctx = McapContext(source, self.path, validate_crcs, recover, max_chunk_bytes)
        defs = self.defs = McapDefinitions(ctx)
        self.definition_problems = defs.definition_problems  # (kept in place by ``defs``)
        ctx.define_scanned = weak_method(defs.define_scanned)
        ctx.known_channel = weak_method(defs.known_channel)
        finder = self.finder = DefinitionFinder(ctx, defs)
        defs.resolve_schema = weak_method(finder.resolve_schema)
        defs.walk_all = weak_method(finder.walk_all)
        # the parts' calls back up hold the reader weakly (no reference cycle: see util/weak.py)
        me = weakref.ref(self)
        self.chunks = ChunkReader(ctx, defs, finder)
        self.planner = SegmentPlanner(ctx, defs, finder, self.chunks)
        self.stream = StreamReader(ctx, defs, self.chunks)
        file = self.file = FileReader(ctx, defs, self.planner, _recovery_reporter(ctx, me))
        self.judge = DefinitionJudge(ctx, defs, functools.partial(_first_messages, file))
        self._materialize = _materializer(ctx, defs, self.stream, me)
        self.toplevel = TopLevelRecords(ctx, self.stream, self._materialize)
        self.info = McapInfo(ctx, defs, finder, self.judge, self._materialize)
        if isinstance(source, MappedSource):
            open_mapped(ctx, defs)
            self.judge.judge_at_open()
        else:
            self.stream.head = open_stream(ctx)

    # --- what the parts hold, as the reader shows it ----------------------------------------------
    @property
    def validate_crcs(self) -> bool:
        """Whether CRCs are checked (an option)."""
        return self.ctx.validate_crcs

    @property
    def recover(self) -> bool:
        """Whether damage is skipped (an option)."""
        return self.ctx.recover

    @property
    def max_chunk_bytes(self) -> int:
        """What one chunk may decompress to."""
        return self.ctx.max_chunk_bytes

    @property
    def header(self) -> R.Header:
        """The Header record (empty fields when it is missing or damaged, recovering)."""
        return self.ctx.header

    @property
    def footer(self) -> R.Footer | None:
        """The Footer record, once read (a mapped file with a summary section)."""
        return self.ctx.footer

    @property
    def has_summary(self) -> bool:
        """Whether a usable summary section was read."""
        return self.ctx.has_summary

    @property
    def summary_error(self) -> str | None:
        """Why the summary section was not used (it did not parse), if so."""
        return self.ctx.summary_error

    @property
    def schemas(self) -> dict[int, Schema]:
        """The Schema definitions in force, by id."""
        return self.defs.schemas

    @property
    def chunk_indexes(self) -> list[R.ChunkIndex]:
        """The summary's Chunk Indexes (empty without a usable summary)."""
        return self.ctx.index.chunk_indexes

    @property
    def attachment_indexes(self) -> list[R.AttachmentIndex]:
        """The summary's Attachment Indexes."""
        return self.ctx.index.attachment_indexes

    @property
    def metadata_indexes(self) -> list[R.MetadataIndex]:
        """The summary's Metadata Indexes."""
        return self.ctx.index.metadata_indexes

    @property
    def summary_offsets(self) -> list[R.SummaryOffset]:
        """The summary's Summary Offset records."""
        return self.ctx.index.summary_offsets

    @property
    def statistics(self) -> R.Statistics | None:
        """The summary's Statistics record, if any."""
        return self.ctx.index.statistics

    @property
    def summary(self) -> Summary:
        return self.info.summary

    @property
    def has_index(self) -> bool:
        """True when the file has a summary section (read at open)."""
        return self.ctx.has_summary

    def chunk_message_counts(self, channel_ids: set[int] | None = None) -> list[tuple[int, int, int]] | None:
        return self.info.chunk_message_counts(channel_ids)

    def info_extras(self) -> dict[str, Any]:
        return self.info.info_extras()

    def records(self, expand_chunks: bool = True) -> Iterator[R.Record]:
        """Every record from the Header to the Footer in file order (see
        :meth:`~polybag.formats.mcap.top_records.TopLevelRecords.records`)."""
        return self.toplevel.records(expand_chunks)

    def record_problems(self) -> list[str]:
        return self.toplevel.record_problems()

    def attachments(self) -> Iterator[Attachment]:
        return self.toplevel.attachments()

    def metadata(self) -> Iterator[Metadata]:
        return self.toplevel.metadata()

    def close(self) -> None:
        self.ctx.kept.clear()
        super().close()

    # --- reading -------------------------------------------------------------------------------
    def materialize(self) -> None:
        """Turn a stream into an in-memory mapped source (for summary, reverse, attachments)."""
        self._materialize()

    # --- public API --------------------------------------------------------------------------------
    def _messages(self, topics: TopicSelector, start: int | None, end: int | None, reverse: bool, order: str) -> Iterator[Message]:
        """:meth:`~polybag.reader.Reader.messages` of an MCAP file or stream; a CDR channel
        whose stored definition does not decode its messages carries the known one that
        does (:meth:`~polybag.formats.mcap.judging.DefinitionJudge.judge`)."""
        it = self._read_messages(topics, start, end, reverse, order)
        return self.judge.judging(it) if self.judge.needs_judging() else it

    def _read_messages(self, topics: TopicSelector, start: int | None, end: int | None, reverse: bool, order: str) -> Iterator[Message]:
        if isinstance(self.ctx.source, StreamSource):
            # Only file order can be produced strictly forward: a later chunk may always
            # start earlier.  Log-time order (and reverse) reads the stream into memory
            # first (compressed; chunks are still decompressed one at a time).
            if reverse or order == "log_time" or self.ctx.recover:
                self.materialize()
            else:
                return self.stream.messages(topics, start, end, order)
        return self.file.messages(topics, start, end, reverse, order)

    def topic_payloads(self, topic: str) -> TopicPayloads:
        """Every payload of ``topic`` at once (a stream is read into memory first; see
        :meth:`~polybag.formats.mcap.file_reader.FileReader.topic_payloads`)."""
        if isinstance(self.ctx.source, StreamSource):
            self.materialize()
        return self.file.topic_payloads(topic)


_READER_OPTIONS = ("validate_crcs", "recover", "max_chunk_bytes")  # what McapReader takes


def _first_messages(file: FileReader, topics: list[str]) -> Iterator[Message]:
    """A topic's messages in file order (to judge a channel on its first one)."""
    return file.messages(topics, None, None, False, "file")


def _recovery_reporter(ctx: McapContext, reader: weakref.ref[McapReader]) -> Callable[[int], None]:
    """Recovering: what sets the reader's ``recovery_report`` after a read that returned
    ``count`` messages (the reader held weakly: a read's iterator may outlive it)."""

    def finish(count: int) -> None:
        if ctx.recover:
            report = ctx.recovery.report(count)
            r = reader()
            if r is not None:
                r.recovery_report = report

    return finish


def _materializer(ctx: McapContext, defs: McapDefinitions, stream: StreamReader, reader: weakref.ref[McapReader]) -> Callable[[], None]:
    """What turns a stream into an in-memory mapped source (for summary, reverse,
    attachments), the reader's ``source`` too while it lives."""

    def materialize() -> None:
        if isinstance(ctx.source, MappedSource):
            return
        ctx.source = stream.spool()
        r = reader()
        if r is not None:
            r.source = ctx.source
        if not ctx.recover:
            read_summary_or_scan(ctx, defs)

    return materialize


def open_mcap(source: Source, path: str | None = None, **options: Any) -> McapReader:
    """The opener registered in :mod:`polybag.formats.registry`: an :class:`McapReader` with
    the options it takes (``validate_crcs``, ``recover``, ``max_chunk_bytes``); options of
    the other formats are ignored."""
    return McapReader(source, path, **{k: v for k, v in options.items() if k in _READER_OPTIONS})
