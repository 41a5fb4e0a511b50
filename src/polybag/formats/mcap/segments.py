"""Planning a read of a mapped file: which chunks to load, in what order, and whether
to trust their claimed times.

:class:`SegmentPlanner` lists the segments a read needs (each chunk or stretch of loose messages
that may hold a wanted message, with its claimed log-time range, its rank in file order and
a loader): :func:`~polybag.formats.mcap.read_plan.plan_read` lists them from the chunk
indexes or a scan, and a loader is attached to each.  Chunk times are claims: the Chunk Indexes are
compared with the Chunk headers first, and once a claim is caught lying
(:class:`~polybag.formats.mcap.vocabulary.McapIndexWarning`) every chunk's real range is found by
reading it, and the segments are planned again from those.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from polybag.errors import ChecksumError, FormatError, PolybagError
from polybag.formats.mcap import records as R
from polybag.formats.mcap.bulk_kernels import PayloadBatch, index_positions
from polybag.formats.mcap.chunk_loader import message_index_parts
from polybag.formats.mcap.chunks import ChunkReader
from polybag.formats.mcap.context import McapContext
from polybag.formats.mcap.definition_finder import DefinitionFinder
from polybag.formats.mcap.definitions import McapDefinitions
from polybag.formats.mcap.read_plan import PlannedRun, plan_read
from polybag.formats.mcap.records import MESSAGE_HEAD_LEN, U64
from polybag.formats.mcap.vocabulary import FILE_ID_MASK, OP_CHUNK, McapIndexWarning, PartialLoad
from polybag.formats.shared.merge import LOG_TIME
from polybag.io.source import MappedSource
from polybag.model import Channel, Message

_AR16 = np.arange(16, dtype=np.int64)  # the 16 bytes of a Chunk record's start and end times


class SegmentPlanner:
    """The segments of a read, their loaders, and trusting chunk times (``verify``: chunk
    times were caught lying, or recovering: every chunk's real range is used, found once per
    chunk into ``true_ranges``)."""

    def __init__(self, ctx: McapContext, defs: McapDefinitions, finder: DefinitionFinder, chunks: ChunkReader) -> None:
        self.ctx = ctx
        self.defs = defs
        self.finder = finder
        self.chunks = chunks
        # chunk times from indexes and Chunk headers are claims: once one is caught lying
        # (or when recovering) every chunk's real range is found by reading it
        self.verify = ctx.recover
        self._index_checked = False
        self.true_ranges: dict[int, tuple[int, int] | None] = {}

    def distrust(self, what: str) -> None:
        """Chunk times were caught lying: from now on every chunk's real range is used."""
        if self.verify:
            return
        self.verify = True
        warnings.warn(
            f"{self.ctx.path or 'MCAP data'}: {what}; the chunk times are not trusted, every chunk is read to find its real log times",
            McapIndexWarning,
            stacklevel=4,
        )

    def _check_index(self) -> None:
        """Compare every Chunk Index with its Chunk record's header (no decompression).

        Not needed when the summary's CRC was checked: it was then written as it is.
        """
        if self._index_checked:
            return
        self._index_checked = True
        if self.ctx.footer is not None and self.ctx.footer.summary_crc and self.ctx.validate_crcs:
            return
        arr = self.ctx.index.chunk_index_array
        src = self.ctx.source
        assert arr is not None and isinstance(src, MappedSource)
        offs = arr["offset"].astype(np.int64)
        if len(np.unique(offs)) != len(offs):
            self.distrust("two Chunk Index records point at one chunk")
            return
        bad = arr["start"] > arr["end"]
        if bool(bad.any()):
            i = int(np.argmax(bad))
            self.distrust(f"the Chunk Index of the chunk at {int(offs[i])} claims log times {int(arr['start'][i])}..{int(arr['end'][i])}")
            return
        room = offs + 9 + 16 <= src.size
        offs = offs[room]
        if not len(offs):
            return
        src.need_many((int(o), 25) for o in offs)
        a = np.frombuffer(src.view, np.uint8)
        ops = a[offs]
        heads = a[(offs + 9)[:, None] + _AR16].view("<u8")
        mism = (ops == OP_CHUNK) & ((heads[:, 0] != arr["start"][room]) | (heads[:, 1] != arr["end"][room]))
        if bool(mism.any()):
            i = int(np.argmax(mism))
            s, e = int(arr["start"][room][i]), int(arr["end"][room][i])
            self.distrust(
                f"the Chunk Index of the chunk at {int(offs[i])} claims log times {s}..{e}, "
                f"the Chunk record {int(heads[i, 0])}..{int(heads[i, 1])}"
            )

    def _chunk_ranks(self) -> list[tuple[int, int]]:
        """(offset, rank in file order) of every chunk, from the chunk indexes or a scan."""
        if self.ctx.has_summary and self.ctx.index.chunk_indexes:
            offs = [ci.chunk_start_offset for ci in self.ctx.index.chunk_indexes]
            ranks = [0] * len(offs)
            for k, i in enumerate(sorted(range(len(offs)), key=offs.__getitem__)):
                ranks[i] = k
            return list(zip(offs, ranks))
        sr = self.ctx.scan()
        return [(c[0], r) for c, r in zip(sr.chunks, sr.chunk_ranks)]

    def rank_offset(self, rank: int) -> int | None:
        for off, r in self._chunk_ranks():
            if r == rank:
                return off
        return None

    def _true_range(self, off: int) -> tuple[int, int] | None:
        """The smallest and largest log time really in the chunk at ``off`` (None: no messages).

        Read once per reader.  A chunk that cannot be read (or, recovering, has damage but
        no messages) gets the widest range, so it is read (and its damage reported) first.
        """
        if off in self.true_ranges:
            return self.true_ranges[off]
        load = self._scan_loader(off, None, None, None, False, arrays=True)
        quiet = self.ctx.quiet
        self.ctx.quiet = True
        muted = self.ctx.muted
        got: Any
        try:
            got = load()
        except PartialLoad as p:
            got = p.msgs
        except PolybagError:
            got = None
        finally:
            self.ctx.quiet = quiet
        rng: tuple[int, int] | None
        if got is None:
            rng = (0, (1 << 64) - 1)
        else:
            lts = got.lt if isinstance(got, PayloadBatch) else np.fromiter((m.log_time for m in got), np.uint64, len(got))
            rng = (int(lts.min()), int(lts.max())) if len(lts) else None
            if rng is None and self.ctx.muted != muted:
                rng = (0, (1 << 64) - 1)
        self.true_ranges[off] = rng
        return rng

    def verified_segments(
        self, want: set[int] | None, start: int | None, end: int | None, sort: bool = False, arrays: bool = False
    ) -> tuple[list[tuple[int, int, int, Callable[[], list[Message]]]], PolybagError | None]:
        """Like :meth:`segments`, with every chunk's real log-time range (chunks are read
        once to find it; Message Indexes are not used)."""
        out: list[tuple[int, int, int, Callable[[], list[Message]]]] = []
        lo = -1 if start is None else start
        hi = 1 << 64 if end is None else end
        seen: set[int] = set()
        for off, rank in self._chunk_ranks():
            if off in seen:
                continue  # two indexes of one chunk: read it once
            seen.add(off)
            rng = self._true_range(off)
            if rng is None or rng[1] < lo or rng[0] >= hi:
                continue
            out.append((rng[0], rng[1], rank, self._scan_loader(off, want, start, end, sort, arrays)))
        err = None
        if not (self.ctx.has_summary and self.ctx.index.chunk_indexes):
            sr = self.ctx.scan()
            err = self.ctx.recovery.first
            for rank, s, t, offs in sr.loose:
                if t < lo or s >= hi:
                    continue
                out.append((s, t, rank, self._loose_loader(offs, want, start, end, sort)))
        out.sort(key=lambda x: x[2])
        return out, err

    def out_of_order(self, rank: int, t: int, returned: str) -> FormatError:
        self.verify = True
        off = self.rank_offset(rank)
        return self.ctx.err(
            FormatError,
            f"the chunk at {off} holds a message at log time {t}, but its chunk times claimed otherwise and "
            f"{returned}; read again (this reader now checks every chunk) or open with recover=True",
            off,
        )

    # --- segments --------------------------------------------------------------------------------
    def segments(
        self,
        want: set[int] | None,
        start: int | None,
        end: int | None,
        sort: bool = False,
        arrays: bool = False,
        merge: bool = False,
        reverse: bool = False,
    ) -> tuple[list[tuple[int, int, int, Callable[[], list[Message]]]], PolybagError | None]:
        """(start, end, rank, loader) for every chunk or run of loose messages that may match.

        Start and end are the claimed log-time range (unknown: 0 and 2**64 - 1).  With
        ``arrays`` chunk loaders may return a :class:`PayloadBatch` instead of a list.  With
        ``merge`` (log-time order; ``reverse``: descending) the Message Index times of the
        wanted channels in the chunks to read are checked against their chunk's claims
        first, unless the source fetches what is read (see :meth:`_fetched_segments`).
        """
        if not self.verify and self.ctx.has_summary and self.ctx.index.chunk_indexes:
            self._check_index()
        if self.verify:
            return self.verified_segments(want, start, end, sort, arrays)
        # the ids in the file's terms (a redefined channel's versions share one)
        wfile = want if want is None or self.defs.timeline is None else {i & FILE_ID_MASK for i in want}
        out: list[tuple[int, int, int, Callable[[], list[Message]]]] = []
        if self.ctx.has_summary and self.ctx.index.chunk_indexes:
            plan = plan_read(self.ctx.index, wfile, (start, end))
            cis = self.ctx.index.chunk_indexes
            if self.ctx.fetches:
                hints = "none" if reverse else "lazy" if merge else "now"
                return self._fetched_segments(plan.runs, want, start, end, sort, arrays, hints), None
            # a local file: every Message Index of the chunks to merge is checked first (it
            # costs no fetch), so a lie they show is found before anything is returned
            picked = [(run, cis[run.chunk]) for run in plan.runs if run.chunk is not None]
            for run, ci in picked:
                if merge and not self._index_times_fit(ci, wfile, run.start, run.end):
                    return self.verified_segments(want, start, end, sort, arrays)
                out.append((run.start, run.end, run.rank, self._indexed_loader(ci, want, start, end, sort, arrays)))
            return out, None
        for run in plan_read(self.ctx.scan(), None, (start, end)).runs:
            if run.loose is None:
                out.append((run.start, run.end, run.rank, self._scan_loader(run.offset, want, start, end, sort, arrays)))
            else:
                out.append((run.start, run.end, run.rank, self._loose_loader(run.loose, want, start, end, sort)))
        return out, self.ctx.recovery.first

    def _fetched_segments(
        self, runs: list[PlannedRun], want: set[int] | None, start: int | None, end: int | None, sort: bool, arrays: bool, hints: str
    ) -> list[tuple[int, int, int, Callable[[], list[Message]]]]:
        """The segments of a remote file (one whose source fetches what is read): each chunk
        is fetched in one request when its loader runs and walked record by record (its
        Message Indexes are neither fetched nor needed: the chunk's records give the same
        offsets, times and channels), and nothing is read before the first load.

        A log-time merge (``hints="lazy"``) loads only the chunks that may hold the next message
        (:func:`~polybag.formats.shared.merge.merge_runs`), so the first message of a file
        costs one chunk; the chunks still to load are hinted (fetched ahead in the
        background) from the second load on, so a full read still streams.  Chunk times are
        then checked only against the chunks loaded (a lie the Message Indexes of unloaded
        chunks would have shown is found when that chunk is loaded: re-planned, or a
        FormatError if later messages were already returned).  Forward reads in file order
        hint their chunks at once (``"now"``); reversed reads hint nothing (``"none"``: the
        fetching ahead runs forward)."""
        cis = self.ctx.index.chunk_indexes
        spans = sorted((cis[r.chunk].chunk_start_offset, cis[r.chunk].chunk_length) for r in runs if r.chunk is not None)
        src = self.ctx.source
        loaded: set[int] = set()

        def hinting(off: int, load: Callable[[], list[Message]]) -> Callable[[], list[Message]]:
            def inner() -> list[Message]:
                loaded.add(off)
                if len(loaded) == 2:  # a read past its first chunk: fetch the rest ahead
                    src.hint([s for s in spans if s[0] not in loaded or s[0] == off])
                return load()

            return inner

        lazy = hints == "lazy"
        if hints == "now":
            src.hint(spans)
        out: list[tuple[int, int, int, Callable[[], list[Message]]]] = []
        for run in runs:
            if run.chunk is None:
                continue
            ci = cis[run.chunk]
            load = self._indexed_loader(ci, want, start, end, sort, arrays, walk=True)
            out.append((run.start, run.end, run.rank, hinting(ci.chunk_start_offset, load) if lazy else load))
        return out

    def _index_times_fit(self, ci: R.ChunkIndex, want: set[int] | None, s: int, t: int) -> bool:
        """Whether the chunk's Message Index times (wanted channels) lie in its claimed range."""
        parts = message_index_parts(self.ctx.mapped(), ci, want)
        for _cid, arr in parts or ():
            if len(arr):
                lts = arr["log_time"]
                lo, hi = int(lts.min()), int(lts.max())
                if lo < s or hi > t:
                    self.distrust(
                        f"the chunk at {ci.chunk_start_offset} claims log times {s}..{t}, its Message Index lists {lo}..{hi}"
                    )
                    return False
        return True

    def _indexed_loader(
        self, ci: R.ChunkIndex, want: set[int] | None, start: int | None, end: int | None, sort: bool, arrays: bool = False,
        walk: bool = False,
    ) -> Callable[[], list[Message]]:
        """The loader of the chunk ``ci`` indexes: its Message Indexes give the offsets of the
        wanted messages, unless ``walk`` (the chunk is fetched in one request, and its
        records are walked)."""

        def load() -> list[Message]:
            off = ci.chunk_start_offset
            buf = self.ctx.chunk_data(off, ci.chunk_length) if walk else self.ctx.chunk_data(off)
            cen = self.defs.timeline
            if walk:
                parts = None
            elif cen is not None and cen.inside.get(ci.chunk_start_offset):
                parts = None  # the chunk redefines a channel: walked record by record
            else:
                parts = message_index_parts(self.ctx.mapped(), ci, want if want is None or cen is None else {i & FILE_ID_MASK for i in want})
            # every message listed: check the index against the chunk and find definitions
            complete = want is None and start is None and end is None
            positions = cids = None
            if parts is not None:
                # a chunk claimed inside the window: its records' times alone filter it
                inside = (start is None or ci.message_start_time >= start) and (end is None or ci.message_end_time < end)
                lo, hi = (None, None) if inside else (start, end)
                got = index_positions(buf, parts, lo, hi, want is not None)
                if got is not None:
                    positions, cids = got
                    if want is None and not complete and cen is None:
                        # a time window reads few chunks: find a redefinition in them (this
                        # costs a gather over all their messages, too much for topic reads)
                        self.finder.index_defs(buf, ci)
            msgs: list[Message] = self.chunks.chunk_messages(
                buf, ci.chunk_start_offset, want, start, end, positions, sort, gap_defs=complete, arrays=arrays, expect_cid=cids
            )  # (a PayloadBatch with ``arrays``)
            return msgs

        return load

    def _scan_loader(
        self, off: int, want: set[int] | None, start: int | None, end: int | None, sort: bool, arrays: bool = False
    ) -> Callable[[], list[Message]]:
        def load() -> list[Message]:
            self.finder.defs_upto(off)
            try:
                buf = self.ctx.chunk_data(off)
            except PolybagError as err:
                if not self.ctx.recover:
                    raise
                if isinstance(err, ChecksumError):
                    self.ctx.note(str(err), 0)
                    saved = self.ctx.validate_crcs
                    self.ctx.validate_crcs = False
                    try:
                        buf = self.ctx.chunk_data(off)
                    except PolybagError as err2:
                        self.ctx.note(str(err2), 0)
                        return []
                    finally:
                        self.ctx.validate_crcs = saved
                else:
                    self.ctx.note(str(err), 0)
                    return []
            got: list[Message] = self.chunks.chunk_messages(buf, off, want, start, end, None, sort, arrays=arrays)
            self.finder.defs_upto(off + 1)  # its own definitions were registered reading it
            return got  # (a PayloadBatch with ``arrays``)

        return load

    def _loose_loader(
        self, offs: list[int], want: set[int] | None, start: int | None, end: int | None, sort: bool
    ) -> Callable[[], list[Message]]:
        def load() -> list[Message]:
            src = self.ctx.source
            assert isinstance(src, MappedSource)
            view = src.view
            out: list[Message] = []
            unpack = R.MESSAGE_HEAD.unpack_from
            lo = -1 if start is None else start
            hi = 1 << 64 if end is None else end
            cen = self.defs.timeline
            if offs:
                self.finder.defs_upto(offs[0])
                self.defs.loaded.append((offs[0], offs[-1], False))
            for pos in offs:
                ln = U64.unpack_from(view, pos + 1)[0]
                e = pos + 9 + ln
                if ln >= MESSAGE_HEAD_LEN:
                    cid, seq, lt, pt = unpack(view, pos + 9)
                    data: bytes | memoryview = view[pos + 31 : e]
                else:
                    rec = R.parse_as(R.MessageRecord, 5, view, pos + 9, e, self.ctx.path, 0)
                    cid, seq, lt, pt, data = rec.channel_id, rec.sequence, rec.log_time, rec.publish_time, b""
                if not (lo <= lt < hi):
                    continue
                if cen is not None and cid in cen.versions:
                    ch: Channel | None = cen.at(cid, (pos, -1))
                else:
                    ch = self.defs.channels.get(cid) or self.finder.resolve_channel(cid)
                if want is not None and ch is not None and ch.id not in want:
                    continue
                if ch is None:
                    err = self.ctx.err(FormatError, f"message on channel {cid}, which no Channel record defines", pos)
                    if self.ctx.recover:
                        self.ctx.note(str(err), e - pos)
                        continue
                    if sort:
                        out.sort(key=LOG_TIME)
                    raise PartialLoad(out, err)
                out.append(Message(ch, lt, pt, seq, data))
            if sort:
                out.sort(key=LOG_TIME)
            return out

        return load
