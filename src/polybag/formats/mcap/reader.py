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
  be read are compared with their chunk's claimed range.
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

Where things are.  This module holds :class:`McapReader` (opening, reading the summary
section, ``messages()``, ``topic_payloads()``) and :func:`open_mcap`.  Plain functions and
values it uses: ``summary_section`` (:func:`~polybag.formats.mcap.summary_section.load_summary`
-> :class:`~polybag.formats.mcap.index.SummaryIndex`), ``scan`` (the linear scan of top-level
records, resync after damage -> :class:`~polybag.formats.mcap.index.ScanIndex`),
``chunk_loader`` (read, decompress and CRC-check one chunk; its Message Index entries),
``definition_timeline`` (which version of a redefined id is in force where), and the hot
loops ``bulk_kernels`` (numpy), ``walk_kernels`` (record by record) and
:mod:`polybag.formats.shared.merge` (the log-time merge).  The reader's own parts are
layered classes, each using only those below it, over the state of
:class:`~polybag.formats.mcap.reader_state.McapState`: ``definitions`` (Schema/Channel
definitions, redefined ids), ``chunks`` (one chunk's messages), ``plan`` (which chunks a read
loads; trusting chunk times), ``stream`` (non-seekable streams), ``top_records``
(``records()``, attachments, metadata) and ``info`` (the reported ``summary``);
``vocabulary`` holds the opcodes and the exceptions the parts signal each other with.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from itertools import chain
from typing import Any, NamedTuple

import numpy as np

from polybag.errors import ChecksumError, FormatError, PolybagError, TruncatedError, UnsupportedError
from polybag.formats.mcap import records as R
from polybag.formats.mcap.bulk_kernels import PayloadBatch, batch_from_messages
from polybag.formats.mcap.index import CHUNK_INDEX_DTYPE as CHUNK_INDEX_DTYPE  # re-exported
from polybag.formats.mcap.index import SummaryIndex
from polybag.formats.mcap.info import InfoMixin
from polybag.formats.mcap.plan import PlanMixin
from polybag.formats.mcap.reader_state import partial_load_guard
from polybag.formats.mcap.records import MAGIC, RECORD_HEAD
from polybag.formats.mcap.summary_section import load_summary, read_footer
from polybag.formats.mcap.top_records import RecordsMixin
from polybag.formats.mcap.vocabulary import INT64_MAX, OP_HEADER, PartialLoad, RedefinedId
from polybag.formats.mcap.vocabulary import McapIndexWarning as McapIndexWarning  # re-exported
from polybag.formats.shared.merge import LOG_TIME, NEG_LOG_TIME, OutOfOrder, Run, merge_plan, merge_runs
from polybag.formats.shared.payloads import Arena
from polybag.io.source import MappedSource, Source, StreamSource
from polybag.model import Message, TopicPayloads
from polybag.reader import TopicSelector


class _Read(NamedTuple):
    """What one ``messages()`` read of a mapped file asks for, handed to its re-planning
    steps (``guard``: wraps each segment's loader, see :func:`~polybag.formats.mcap.reader_state.partial_load_guard`)."""

    want: set[int] | None
    start: int | None
    end: int | None
    reverse: bool
    guard: Callable[[Callable[[], list[Message]]], Callable[[], list[Message]]]


class McapReader(RecordsMixin, InfoMixin, PlanMixin):
    """Reads an MCAP file or stream.  Use :func:`open_mcap` (or ``polybag.open``)."""

    format = "mcap"

    def __init__(self, source: Source, path: str | None = None, *, validate_crcs: bool = True, recover: bool = False, max_chunk_bytes: int | None = None) -> None:
        super().__init__(source, path)
        self._init_state(validate_crcs, recover, max_chunk_bytes)
        if isinstance(source, MappedSource):
            self._open_mapped()
            self._judge_at_open()
        else:
            self._open_stream()

    # --- opening -------------------------------------------------------------------------------
    def _check_magic(self, head: bytes) -> None:
        if len(head) < 8:
            if MAGIC.startswith(head):
                raise self._err(TruncatedError, f"expected 8 bytes of MCAP magic, file has {len(head)}", 0)
            raise self._err(FormatError, f"not an MCAP file: starts with {head!r}", 0)
        if head[:5] != MAGIC[:5]:
            raise self._err(FormatError, f"not an MCAP file: starts with {head!r}", 0)
        if head != MAGIC:
            raise UnsupportedError(f"{self.path}: MCAP major version {chr(head[5])!r} is not supported (only '0')")

    def _open_mapped(self) -> None:
        src = self.source
        assert isinstance(src, MappedSource)
        self._check_magic(bytes(src.view[:8]))
        pos = 8
        if src.size < pos + 9:
            if self.recover:
                return
            raise self._err(TruncatedError, "expected a Header record after the magic", pos)
        op, ln = RECORD_HEAD.unpack_from(src.view, pos)
        if op != OP_HEADER:
            if not self.recover:
                raise self._err(FormatError, f"expected a Header record (opcode 0x01), found opcode 0x{op:02x}", pos)
        elif ln > src.size - pos - 9:
            if not self.recover:
                raise self._err(TruncatedError, f"Header declares {ln} bytes, file has {src.size - pos - 9} left", pos)
        else:
            src.need(pos, 9 + ln)
            try:
                rec = R.parse_record(op, src.view, pos + 9, pos + 9 + ln, self.path, 0)
            except FormatError as e:
                if not self.recover:
                    raise
                self._recovery.note(str(e))  # a damaged Header only loses profile/library
            else:
                assert isinstance(rec, R.Header)
                self.header = rec
            self._header_end = pos + 9 + ln
        if not self.recover:
            self._read_summary_or_scan()
        else:
            src.need_all()  # recovery reads the whole file
            self._borrow_summary_definitions()

    def _open_stream(self) -> None:
        src = self.source
        assert isinstance(src, StreamSource)
        self._check_magic(src.read(8))
        head = src.peek(9)
        if len(head) < 9:
            if self.recover:
                return
            raise self._err(TruncatedError, "expected a Header record after the magic", 8)
        op, ln = RECORD_HEAD.unpack_from(head, 0)
        if op != OP_HEADER:
            if not self.recover:
                raise self._err(FormatError, f"expected a Header record (opcode 0x01), found opcode 0x{op:02x}", 8)
            return
        src.read(9)
        body = src.read_exact(ln, "Header record")
        rec = R.parse_as(R.Header, op, body, 0, ln, self.path, 17)
        self.header = rec
        self._stream_head = RECORD_HEAD.pack(op, ln) + body

    # --- the summary section ------------------------------------------------------------------
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
            self._forget_summary()
        finally:
            if was:
                gc.enable()

    def _borrow_summary_definitions(self) -> None:
        """Recovering: keep the summary's Schema/Channel copies (if they read), nothing else.

        A damaged data section may have lost a Channel record that the summary repeats.
        """
        try:
            self._read_summary()
        except PolybagError:
            self._forget_summary()
        self.has_summary = False
        self._index = SummaryIndex()

    def _forget_summary(self) -> None:
        """A summary section that did not parse: none of it is used, not even its definitions."""
        self.has_summary = False
        self.schemas.clear()
        self._channels.clear()
        self._channel_records.clear()
        self._index = SummaryIndex()

    def _read_summary(self) -> None:
        """Footer -> summary section (:func:`~polybag.formats.mcap.summary_section.load_summary`);
        leaves ``has_summary`` False when there is none."""
        src = self.source
        assert isinstance(src, MappedSource)
        footer = self.footer = read_footer(src, self._header_end)
        if footer is None or footer.summary_start == 0:
            return

        def define_copy(view: memoryview, op: int, pos: int, e: int) -> None:
            self._define(view, op, pos, e, 0, summary=True)

        index = load_summary(src, self.path, footer, self._header_end, self.validate_crcs, define_copy)
        self._index = index
        self.has_summary = True
        st = self.statistics
        if st is not None and self._channel_records and (
            st.channel_count > len(self._channel_records) or (self.schemas and st.schema_count > len(self.schemas))
        ):
            # more Channel (Schema) records were written than the summary has ids: some id
            # was defined twice, or the summary is incomplete; the data section decides
            self._need_timeline = True

    def _materialize(self) -> None:
        """Turn a stream into an in-memory mapped source (for summary, reverse, attachments)."""
        src = self.source
        if isinstance(src, MappedSource):
            return
        if self._stream_used:
            raise PolybagError(f"{self.path}: the stream was already read; open it again")
        self._stream_used = True
        assert isinstance(src, StreamSource)
        spooled = src.spool(MAGIC + getattr(self, "_stream_head", b""))  # long: a temporary file
        spooled.path = self.path
        self.source = spooled
        if not self.recover:
            self._read_summary_or_scan()

    # --- public API --------------------------------------------------------------------------------
    def _messages(self, topics: TopicSelector, start: int | None, end: int | None, reverse: bool, order: str) -> Iterator[Message]:
        """:meth:`~polybag.reader.Reader.messages` of an MCAP file or stream; a CDR channel
        whose stored definition does not decode its messages carries the known one that
        does (:meth:`~polybag.formats.mcap.definitions.DefinitionsMixin._judge`)."""
        it = self._read_messages(topics, start, end, reverse, order)
        return self._judging(it) if self._needs_judging() else it

    def _read_messages(self, topics: TopicSelector, start: int | None, end: int | None, reverse: bool, order: str) -> Iterator[Message]:
        if isinstance(self.source, StreamSource):
            # Only file order can be produced strictly forward: a later chunk may always
            # start earlier.  Log-time order (and reverse) reads the stream into memory
            # first (compressed; chunks are still decompressed one at a time).
            if reverse or order == "log_time" or self.recover:
                self._materialize()
            else:
                return self._stream_messages(topics, start, end, order)
        return self._mapped_messages(topics, start, end, reverse, order)

    def _mapped_messages(self, topics: TopicSelector, start: int | None, end: int | None, reverse: bool, order: str) -> Iterator[Message]:
        self._defs_ready()
        want = self._want_checked(topics)
        count = 0
        try:
            self._loaded = []
            try:
                segs, pending = self._segments(want, start, end, order == "log_time", merge=order == "log_time")
            except RedefinedId:  # met while planning: nothing was returned yet
                self._build_timeline()
                segs, pending = self._segments(want, start, end, order == "log_time", merge=order == "log_time")
            late: list[PolybagError] = []
            guard = partial_load_guard(late)
            segs = [(a, b, c, guard(ld)) for a, b, c, ld in segs]
            rd = _Read(want, start, end, reverse, guard)
            if order == "file":
                # chunks are skipped by their claimed times only with a time window: check those
                check = (start is not None or end is not None) and not self._verify
                seq = sorted(segs, key=lambda x: x[2], reverse=reverse)
                done: set[int] = set()
                i = 0
                while i < len(seq):
                    s, t, r, load = seq[i]
                    i += 1
                    try:
                        msgs = load()
                    except RedefinedId:
                        # a definition in this chunk changes a channel: read on with the timeline
                        seq = self._file_order_redefined(rd, done, count, r)
                        i = 0
                        continue
                    done.add(r)
                    if check and msgs:
                        lts = [m.log_time for m in msgs]
                        if min(lts) < s or max(lts) > t:
                            check = False
                            self._distrust(f"the chunk at {self._rank_offset(r)} holds log times outside {s}..{t}, which its chunk times claim")
                            seq = self._file_order_verified(rd, done, r)
                            i = 0
                    if reverse:
                        msgs.reverse()
                    count += len(msgs)
                    yield from msgs
                    if late:
                        raise late[0]
            else:
                it = chain.from_iterable(self._merged(segs, rd))
                try:
                    if self.recover:
                        for m in it:
                            count += 1
                            yield m
                    else:
                        yield from it
                except OutOfOrder as o:
                    r = -o.rank if reverse else o.rank
                    raise self._out_of_order(r, -o.key if reverse else o.key, "later messages were already returned") from None
                if late:
                    raise late[0]
        except RedefinedId:  # met while re-planning for another reason: the timeline makes a new read right
            raise self._redefined_after_return() from None
        finally:
            self._drop_want(want)
            self._finish_report(count)
        self._raise_pending(pending)

    def _redefined_after_return(self) -> FormatError:
        """A read met a definition that changes messages it already returned: build the
        timeline (a new read is then right) and say so."""
        self._build_timeline()
        return self._err(
            FormatError,
            "a Schema or Channel record redefines an id after messages that depend on it were returned; "
            "read again (this reader now follows every definition)",
            None,
        )

    def _raise_pending(self, pending: PolybagError | None) -> None:
        """After a read (unless recovering): the error its planning met, or the summary's CRC mismatch."""
        if pending is None:
            pending = self._summary_crc_error
        if pending is not None and not self.recover:
            raise pending

    def _file_order_redefined(self, rd: _Read, done: set[int], count: int, r: int) -> list[Run]:
        """A read in file order met, in the chunk of rank ``r``, a definition that changes a
        channel: build the timeline and return the segments still to read (all of them if
        nothing was returned yet; FormatError if one already passed held a message)."""
        reverse = rd.reverse
        self._timeline_mid_read(count > 0)
        vs, _err = self._segments(rd.want, rd.start, rd.end, False)
        vs = [(a, b, c, rd.guard(ld)) for a, b, c, ld in vs if count == 0 or c not in done]
        if count:
            for v in vs:
                if (v[2] < r) != reverse and v[2] != r and v[3]():
                    raise self._out_of_order(v[2], v[0], "messages() skipped it") from None
            vs = [v for v in vs if (v[2] >= r) != reverse or v[2] == r]
        else:
            done.clear()
        return sorted(vs, key=lambda x: x[2], reverse=reverse)

    def _file_order_verified(self, rd: _Read, done: set[int], r: int) -> list[Run]:
        """A read in file order with a time window found the chunk of rank ``r`` lying about
        its times: the segments after it, from every chunk's real range (FormatError if one
        already passed by its claimed times holds a wanted message)."""
        reverse = rd.reverse
        vs, _err = self._verified_segments(rd.want, rd.start, rd.end, False)
        vs = [(a, b, c, rd.guard(ld)) for a, b, c, ld in vs if c not in done]
        for v in vs:
            if (v[2] < r) != reverse and v[3]():
                raise self._out_of_order(v[2], v[0], "messages() skipped it")
        return sorted((v for v in vs if (v[2] > r) != reverse), key=lambda x: x[2], reverse=reverse)

    def _merged(self, segs: list[Run], rd: _Read) -> Iterator[list[Message]]:
        """The log-time merge of ``segs`` (reversed: by descending time), re-planned from the
        chunks' real ranges when a chunk's claimed times lie, and with the timeline when a
        definition met on the way changes a channel."""
        want, start, end, reverse, guard = rd
        key = NEG_LOG_TIME if reverse else LOG_TIME

        def runs_left(vs: list[Run], done: set[int] | tuple[()]) -> list[Run]:
            """The merge's runs of the new segments ``vs`` not in ``done`` (ranks as the merge keys them)."""
            return merge_plan([v for v in vs if (-v[2] if reverse else v[2]) not in done], reverse, guard)

        def replan(done: set[int], rank: int) -> list[Run]:
            r = -rank if reverse else rank
            self._distrust(f"the chunk at {self._rank_offset(r)} holds log times outside what its chunk times claim")
            vs, _err = self._verified_segments(want, start, end, True)
            return runs_left(vs, done)

        def redefined(done: set[int], fresh: bool) -> list[Run]:
            self._timeline_mid_read(not fresh)
            vs, _err = self._segments(want, start, end, True, merge=True)
            return runs_left(vs, () if fresh else done)

        return merge_runs(merge_plan(segs, reverse), key, None if self._verify else replan, redefined, (RedefinedId,))

    def topic_payloads(self, topic: str) -> TopicPayloads:
        """Every payload of ``topic`` at once: ``(log_times, blob, starts, sizes)``.

        The same messages as ``messages(topics=[topic])`` in log-time order (ties in file
        order), without a Python object per message: only chunks holding the topic's
        channels are read (from the chunk and message indexes, or found by a scan), each is
        decompressed once and its message heads are parsed in bulk.  ``log_times`` (int64;
        uint64 if a time is 2**63 ns or more, which MCAP allows), ``starts`` and ``sizes``
        (int64) are in log-time order; ``blob`` (uint8) holds the
        payloads back to back (in file order).  Damage behaves as in :meth:`messages`:
        FormatError without ``recover``; with it the intact payloads and a recovery report.
        """
        if isinstance(self.source, StreamSource):
            self._materialize()
        self._defs_ready()
        want = self._want_checked([topic])
        count = 0
        try:
            segs, pending = self._segments(want, None, None, sort=True, arrays=True)
            result = self._gather_payloads(segs)
            count = len(result[0])
        except RedefinedId:  # nothing was returned yet: read again with the timeline
            self._build_timeline()
            self._drop_want(want)
            result = self.topic_payloads(topic)
            count = len(result[0])
            return result
        finally:
            self._drop_want(want)
            self._finish_report(count)
        self._raise_pending(pending)
        return result

    def _gather_payloads(self, segs: list[tuple[int, int, int, Callable[[], list[Message]]]]) -> TopicPayloads:
        """Load ``segs`` in file order and gather their payloads (see :meth:`topic_payloads`)."""
        # each chunk's payloads are copied into one blob as soon as it is decompressed
        # (its buffer is then freed); declared sizes bound the blob, which grows if they lie
        arena = Arena(self._payload_bound(), np.uint64)
        for _s, _t, _r, load in sorted(segs, key=lambda x: x[2]):
            try:
                got: Any = load()
            except PartialLoad as p:
                raise p.err from None
            b = got if isinstance(got, PayloadBatch) else batch_from_messages(got)
            arena.add(b.buf, b.lt, b.starts, b.sizes)
            del b, got
        lt, blob, starts, sizes = arena.result()
        # MCAP times are u64: int64 unless a time does not fit (then uint64, not wrapped)
        fits = not len(lt) or int(lt[-1]) <= INT64_MAX
        return TopicPayloads(lt.astype(np.int64) if fits else lt, blob, starts, sizes)

    def _payload_bound(self) -> int:
        """Room for the payloads of a topic: the declared uncompressed chunk sizes (or the
        file size), at most four times the file size (a lying index cannot claim more)."""
        src = self.source
        assert isinstance(src, MappedSource)
        if self.has_summary and self.chunk_indexes:
            total = sum(c.uncompressed_size for c in self.chunk_indexes)
        else:
            total = 2 * src.size
        return max(0, min(total, 4 * src.size + (1 << 20)))


_READER_OPTIONS = ("validate_crcs", "recover", "max_chunk_bytes")  # what McapReader takes


def open_mcap(source: Source, path: str | None = None, **options: Any) -> McapReader:
    """The opener registered in :mod:`polybag.formats.registry`: an :class:`McapReader` with
    the options it takes (``validate_crcs``, ``recover``, ``max_chunk_bytes``); options of
    the other formats are ignored."""
    return McapReader(source, path, **{k: v for k, v in options.items() if k in _READER_OPTIONS})
