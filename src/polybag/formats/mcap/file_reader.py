"""Reading a mapped file (mcap's ``SeekingReader``): ``messages()`` and ``topic_payloads()``
through the segments the planner lists, in file order or as a log-time merge, re-planned
when a chunk's claimed times lie (every chunk's real range) or a definition met on the way
changes a channel (the definition timeline).  See :mod:`polybag.formats.mcap.reader` for
what is trusted and checked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import chain
from typing import Any, NamedTuple

import numpy as np

from polybag.errors import FormatError, PolybagError
from polybag.formats.mcap.bulk_kernels import PayloadBatch, batch_from_messages
from polybag.formats.mcap.context import McapContext, partial_load_guard
from polybag.formats.mcap.definitions import McapDefinitions
from polybag.formats.mcap.segments import SegmentPlanner
from polybag.formats.mcap.vocabulary import INT64_MAX, PartialLoad, RedefinedId
from polybag.formats.shared.merge import LOG_TIME, NEG_LOG_TIME, OutOfOrder, Run, merge_plan, merge_runs
from polybag.formats.shared.payloads import Arena
from polybag.io.source import MappedSource
from polybag.model import Message, TopicPayloads
from polybag.reader import TopicSelector


class _Read(NamedTuple):
    """What one ``messages()`` read of a mapped file asks for, handed to its re-planning
    steps (``guard``: wraps each segment's loader, see :func:`~polybag.formats.mcap.context.partial_load_guard`)."""

    want: set[int] | None
    start: int | None
    end: int | None
    reverse: bool
    guard: Callable[[Callable[[], list[Message]]], Callable[[], list[Message]]]


class FileReader:
    """``messages()`` and ``topic_payloads()`` of a mapped file; ``report`` is told how many
    messages each read returned (the reader's recovery report, recovering)."""

    def __init__(self, ctx: McapContext, defs: McapDefinitions, planner: SegmentPlanner, report: Callable[[int], None]) -> None:
        self.ctx = ctx
        self.defs = defs
        self.planner = planner
        self._report = report

    def messages(self, topics: TopicSelector, start: int | None, end: int | None, reverse: bool, order: str) -> Iterator[Message]:
        """The messages of a mapped file (see :meth:`polybag.reader.Reader.messages`)."""
        self.defs.ready()
        want = self.defs.want_checked(topics)
        count = 0
        try:
            self.defs.loaded = []
            try:
                segs, pending = self.planner.segments(want, start, end, order == "log_time", merge=order == "log_time", reverse=reverse)
            except RedefinedId:  # met while planning: nothing was returned yet
                self.defs.build_timeline()
                segs, pending = self.planner.segments(want, start, end, order == "log_time", merge=order == "log_time", reverse=reverse)
            late: list[PolybagError] = []
            guard = partial_load_guard(late)
            segs = [(a, b, c, guard(ld)) for a, b, c, ld in segs]
            rd = _Read(want, start, end, reverse, guard)
            if order == "file":
                # chunks are skipped by their claimed times only with a time window: check those
                check = (start is not None or end is not None) and not self.planner.verify
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
                            self.planner.distrust(f"the chunk at {self.planner.rank_offset(r)} holds log times outside {s}..{t}, which its chunk times claim")
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
                    if self.ctx.recover:
                        for m in it:
                            count += 1
                            yield m
                    else:
                        yield from it
                except OutOfOrder as o:
                    r = -o.rank if reverse else o.rank
                    raise self.planner.out_of_order(r, -o.key if reverse else o.key, "later messages were already returned") from None
                if late:
                    raise late[0]
        except RedefinedId:  # met while re-planning for another reason: the timeline makes a new read right
            raise self._redefined_after_return() from None
        finally:
            self.defs.drop_want(want)
            self._report(count)
        self._raise_pending(pending)

    def _redefined_after_return(self) -> FormatError:
        """A read met a definition that changes messages it already returned: build the
        timeline (a new read is then right) and say so."""
        self.defs.build_timeline()
        return self.ctx.err(
            FormatError,
            "a Schema or Channel record redefines an id after messages that depend on it were returned; "
            "read again (this reader now follows every definition)",
            None,
        )

    def _raise_pending(self, pending: PolybagError | None) -> None:
        """After a read (unless recovering): the error its planning met, or the summary's CRC mismatch."""
        if pending is None:
            pending = self.ctx.summary_crc_error
        if pending is not None and not self.ctx.recover:
            raise pending

    def _file_order_redefined(self, rd: _Read, done: set[int], count: int, r: int) -> list[Run]:
        """A read in file order met, in the chunk of rank ``r``, a definition that changes a
        channel: build the timeline and return the segments still to read (all of them if
        nothing was returned yet; FormatError if one already passed held a message)."""
        reverse = rd.reverse
        self.defs.timeline_mid_read(count > 0)
        vs, _err = self.planner.segments(rd.want, rd.start, rd.end, False, reverse=reverse)
        vs = [(a, b, c, rd.guard(ld)) for a, b, c, ld in vs if count == 0 or c not in done]
        if count:
            for v in vs:
                if (v[2] < r) != reverse and v[2] != r and v[3]():
                    raise self.planner.out_of_order(v[2], v[0], "messages() skipped it") from None
            vs = [v for v in vs if (v[2] >= r) != reverse or v[2] == r]
        else:
            done.clear()
        return sorted(vs, key=lambda x: x[2], reverse=reverse)

    def _file_order_verified(self, rd: _Read, done: set[int], r: int) -> list[Run]:
        """A read in file order with a time window found the chunk of rank ``r`` lying about
        its times: the segments after it, from every chunk's real range (FormatError if one
        already passed by its claimed times holds a wanted message)."""
        reverse = rd.reverse
        vs, _err = self.planner.verified_segments(rd.want, rd.start, rd.end, False)
        vs = [(a, b, c, rd.guard(ld)) for a, b, c, ld in vs if c not in done]
        for v in vs:
            if (v[2] < r) != reverse and v[3]():
                raise self.planner.out_of_order(v[2], v[0], "messages() skipped it")
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
            self.planner.distrust(f"the chunk at {self.planner.rank_offset(r)} holds log times outside what its chunk times claim")
            vs, _err = self.planner.verified_segments(want, start, end, True)
            return runs_left(vs, done)

        def redefined(done: set[int], fresh: bool) -> list[Run]:
            self.defs.timeline_mid_read(not fresh)
            vs, _err = self.planner.segments(want, start, end, True, merge=True, reverse=reverse)
            return runs_left(vs, () if fresh else done)

        return merge_runs(merge_plan(segs, reverse), key, None if self.planner.verify else replan, redefined, (RedefinedId,))

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
        self.defs.ready()
        want = self.defs.want_checked([topic])
        count = 0
        try:
            segs, pending = self.planner.segments(want, None, None, sort=True, arrays=True)
            result = self._gather_payloads(segs)
            count = len(result[0])
        except RedefinedId:  # nothing was returned yet: read again with the timeline
            self.defs.build_timeline()
            self.defs.drop_want(want)
            result = self.topic_payloads(topic)
            count = len(result[0])
            return result
        finally:
            self.defs.drop_want(want)
            self._report(count)
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
        src = self.ctx.source
        assert isinstance(src, MappedSource)
        if self.ctx.has_summary and self.ctx.index.chunk_indexes:
            total = sum(c.uncompressed_size for c in self.ctx.index.chunk_indexes)
        else:
            total = 2 * src.size
        return max(0, min(total, 4 * src.size + (1 << 20)))
