"""The fast scan of a ULog data section: where each message starts.

The data section has no index, so the reader walks the ``msg_size`` chain once at open,
but not message by message.  Every byte offset whose type byte is ``D`` and whose size
field fits a defined format is a *candidate*, found with numpy in cache-sized chunks by
parallel threads (:meth:`MessageScanner.cand_parts`); candidates that link to each other
(``offset + 3 + size`` is the next candidate) form runs, and the walk
(:meth:`MessageScanner.walk_words`) jumps over whole runs, stepping one by one only between
them.  The result is exactly the one-by-one walk; the runs only make it fast.

After damage, :meth:`MessageScanner.resync` finds where reading resumes: the next sync
message or the next offset where three valid message headers follow each other.

:class:`MappedLog` holds the mapped bytes of the log and the numpy views every part of the
reader reads them through.  The tables of plausible message headers
(:data:`MIN_BODY_TABLE`, :data:`LETTER_TYPES`) are used by the other parts of the reader
too.  The step sizes of the scan come from a callable the scanner is given (the reader
module holds them: :class:`ScanTuning`).
"""

from __future__ import annotations

import mmap
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from polybag.codecs.ulog import MAX_PAYLOAD
from polybag.formats.ulog import records as rec
from polybag.formats.ulog.subscriptions import SubscriptionTable
from polybag.io.source import Source

MIN_BODY = {
    rec.FORMAT: 1,
    rec.INFO: 2,
    rec.INFO_MULTIPLE: 3,
    rec.PARAMETER: 2,
    rec.PARAMETER_DEFAULT: 3,
    rec.ADD_LOGGED: 4,
    rec.REMOVE_LOGGED: 2,
    rec.DATA: 2,
    rec.LOGGING: 9,
    rec.LOGGING_TAGGED: 11,
    rec.SYNC: 0,
    rec.DROPOUT: 2,
    rec.FLAG_BITS: 0,
}
# per type byte: minimum body size, or -1 for "unknown type"
MIN_BODY_TABLE = np.full(256, -1, dtype=np.int64)
for _t, _m in MIN_BODY.items():
    MIN_BODY_TABLE[_t] = _m
LETTER_TYPES = np.zeros(256, dtype=bool)
LETTER_TYPES[ord("A") : ord("Z") + 1] = True
LETTER_TYPES[ord("a") : ord("z") + 1] = True
MAX_UNKNOWN_SIZE = 10000
RESYNC_WINDOW = 1 << 20
LOW16 = np.uint64(0xFFFF)
SHIFT24 = np.uint64(24)


class ScanTuning(NamedTuple):
    """The step sizes of the scan, read from the reader module at each use (see
    :func:`polybag.formats.ulog.reader.scan_tuning`)."""

    chunk: int  # bytes compared for the D type byte at once (cache-sized)
    lookahead: int  # a candidate is kept when its end is one of the next this many
    walk_limit: int  # messages handled at once (bounds the index arrays)
    workers: Callable[[int], int]  # threads for the candidate scan of n chunks
    capacity: Callable[[int], int]  # first guess of the candidates in n bytes


def unsound_headers(types: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Which headers of non-``D`` messages are structurally impossible: a known type
    shorter than its fixed part, or an unknown type that is no letter or has a size of 0
    or over the bound for skipped messages."""
    nn = sizes.astype(np.int64)
    mins = MIN_BODY_TABLE[types]
    unsound: np.ndarray = np.where(mins < 0, (nn == 0) | (nn > MAX_UNKNOWN_SIZE) | ~LETTER_TYPES[types], nn < mins)
    return unsound


def message_ends(c: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Where the messages at ``c`` end, from their header words ``w`` (:meth:`MappedLog.words`):
    ``position + 3 + size``."""
    ends: np.ndarray = c + 3 + np.bitwise_and(w, LOW16).view(np.int64)
    return ends


def run_ends(c: np.ndarray, nxt: np.ndarray) -> np.ndarray:
    """Index of the last candidate of each run (where a candidate's end is not the next
    candidate's start)."""
    m = len(c)
    link = np.zeros(m, dtype=bool)
    if m > 1:
        np.equal(nxt[:-1], c[1:], out=link[:-1])
    return np.flatnonzero(~link)


def payload_hits(
    u8: np.ndarray, size: int, h2: np.ndarray, nx2: np.ndarray, brk: np.ndarray, look: int
) -> np.ndarray | None:
    """Which of the candidates ``h2`` (ends ``nx2``; ``brk``: where one's end is not the
    next one's start) are inside a real message: a real message holding a D byte (with a
    plausible size) in its payload has its end at one of the next few candidates
    (``look``); those in between are noise.  A break followed by another type of message
    is a real one.  Returns a mask of the candidates to keep, or None when all are kept
    (the common case)."""
    m = len(h2)
    brk = brk[u8[np.minimum(nx2[brk] + 2, size - 1)] == rec.DATA]
    keep = None
    for k in range(2, look + 1):
        brk = brk[brk + k < m]
        if not len(brk):
            break
        hit = nx2[brk] == h2[brk + k]
        at = brk[hit]
        if len(at):
            if keep is None:
                keep = np.ones(m, dtype=bool)
            for j in range(1, k):
                keep[at + j] = False
        brk = brk[~hit]
    return keep



# (offsets, header words, index of the last candidate of each run) of one part of the scan
CandidatePart = tuple[np.ndarray, np.ndarray, np.ndarray]


class MappedLog:
    """The mapped bytes of a log and the numpy views the reader reads them through:
    ``u8`` (bytes), ``u16`` (the little-endian uint16 at every offset) and, made on first
    use, the uint64 at every offset (:meth:`words`).  ``release_pages``: whether
    :meth:`release` gives mapped pages back to the OS (not when topics are selected up
    front: their data is read again right after the scan)."""

    def __init__(self, source: Source, view: Any, size: int, release_pages: bool) -> None:
        self.source = source
        self.view = view
        self.size = size
        self.release_pages = release_pages
        self.u8: np.ndarray = np.frombuffer(view, dtype=np.uint8) if size else np.zeros(0, np.uint8)
        self.u16: np.ndarray = (
            np.ndarray(buffer=view, dtype="<u2", shape=(size - 1,), strides=(1,))
            if size > 1
            else np.zeros(0, np.uint16)
        )
        self.u64: np.ndarray | None = None

    def word_view(self) -> np.ndarray:
        """The little-endian uint64 at every offset (a view; needs a log of 8 bytes or more)."""
        if self.u64 is None:
            self.u64 = np.ndarray(buffer=self.view, dtype="<u8", shape=(self.size - 7,), strides=(1,))
        return self.u64

    def words(self, q: np.ndarray) -> np.ndarray:
        """The 8 bytes at each (ascending) offset of ``q`` as a little-endian uint64 (zero past the end):
        a message's size (bits 0-15), type (16-23) and, for ``D``, msg_id (24-39) in one
        gather."""
        size = self.size
        if len(q) == 0 or size < 8:
            out = np.zeros(len(q), "<u8")
            for j, x in enumerate(q.tolist()):
                chunk = bytes(self.view[x : x + 8])
                out[j] = int.from_bytes(chunk, "little")
            return out
        u64 = self.u64 if self.u64 is not None else self.word_view()
        if int(q[-1]) <= size - 8:  # offsets ascend: the last is the largest
            words: np.ndarray = u64[q]
            return words
        qc = np.minimum(q, size - 8)
        w: np.ndarray = u64[qc]
        tail = np.flatnonzero(q != qc)
        w[tail] >>= ((q[tail] - qc[tail]) * 8).astype(np.uint64)
        return w

    def release(self, start: int, end: int) -> None:
        """Tell the OS this process is done with the mapped pages in ``[start, end)`` for now
        (they stay in the page cache), so a full parse's resident memory stays near the
        size of what it builds instead of that plus the whole file.  Not done when topics are
        selected up front: their data is read again right after the scan, and faulting the
        pages back in would cost more than keeping them.  (Keeping a 30 MB log's pages
        mapped saves a full read in a fresh process 2-4 ms, and raises its peak resident
        memory from 1.3x to 2.3x the file: not done.)"""
        mm = getattr(self.source, "_buffer", None)
        if not isinstance(mm, mmap.mmap) or not self.release_pages:
            return
        page = mmap.PAGESIZE
        a = (start // page) * page
        b = min(end, self.size)
        if b <= a:
            return
        try:
            mm.madvise(mmap.MADV_DONTNEED, a, b - a)
        except (AttributeError, OSError, ValueError):
            pass


class MessageScanner:
    """Message boundaries of the data section from ``data_start`` on: the candidate scan,
    the walk of the size chain, and where reading resumes after damage.  ``data_sizes``
    gives the table of the size fields a data message can have (it changes with the
    formats), ``tuning`` the step sizes."""

    def __init__(
        self,
        log: MappedLog,
        data_start: int,
        data_sizes: Callable[[], np.ndarray],
        tuning: Callable[[], ScanTuning],
    ) -> None:
        self.log = log
        self.data_start = data_start
        self.data_sizes = data_sizes
        self.tuning = tuning
        self._cands: tuple[list[int], list[CandidatePart]] | None = None

    def forget_candidates(self) -> None:
        """Drop the candidates (the scan is done; they are found again if asked for)."""
        self._cands = None

    def cand_parts(self) -> tuple[list[int], list[CandidatePart]]:
        """Likely ``D`` message starts in the data section, to jump over runs of them.

        Every position whose type byte is ``D`` and whose size field fits one of the
        defined formats (``min_size + 2 .. size + 2``: PX4 leaves trailing padding out) is a
        candidate; a ``D`` byte inside a payload rarely passes that size check.  The
        candidates are split into runs where each one's end is exactly the next one's
        start.  The walk uses a run only after landing on its first position, so the
        result is exactly the sequential walk whatever the candidates are (a missing or
        spurious one only costs a step of the walk); the candidates only make it fast.
        Returns the first offset each part of the data section covers and, per part,
        (positions, header words (see :meth:`MappedLog.words`), index of the last candidate
        of each run in ascending order); a candidate's end is ``position + 3 + (word &
        0xFFFF)`` (not stored: the walk needs it once per run).  The parts are scanned by
        parallel threads.  The file is compared for the type byte in cache-sized chunks
        into one reused buffer, and each candidate's header is read once, as one word,
        while its chunk is in the cache."""
        if self._cands is not None:
            return self._cands
        start, size = self.data_start, self.log.size
        sizes_ok = self.data_sizes()
        if size >= 8:  # made once here, before the threads share it
            self.log.word_view()
        bounds, found = self.scan_parts(start, size - 4, sizes_ok)
        self.log.release(start, size)
        # The parts stay apart (no copy into one array): runs end at part boundaries.
        self._cands = (bounds[:-1], found)
        return self._cands

    def scan_parts(self, start: int, stop: int, sizes_ok: np.ndarray) -> tuple[list[int], list[CandidatePart]]:
        """The candidates of ``[start, stop)`` cut into parts of whole chunks, each scanned by
        :meth:`scan_part` in its own thread; with the bounds of the parts (and ``stop``
        last)."""
        tune = self.tuning()
        chunk = tune.chunk
        nchunks = max(0, -(-(stop - start) // chunk))
        workers = tune.workers(nchunks)
        # contiguous parts of whole chunks, one per thread (numpy releases the GIL)
        bounds = [start + chunk * (nchunks * k // workers) for k in range(workers)] + [stop]
        # The output buffers are made here, in the main thread: memory a worker thread
        # allocates stays in its own malloc arena after it is freed, which would raise the
        # peak of a full parse by about a third of the file.
        jobs = [
            (
                a,
                b,
                sizes_ok,
                np.empty(tune.capacity(b - a), np.int64),
                np.empty(tune.capacity(b - a), "<u8"),
                chunk,
                tune.lookahead,
            )
            for a, b in zip(bounds[:-1], bounds[1:])
        ]
        if workers > 1:
            # the first part here, the others in plain threads (the shared pool's
            # concurrent.futures costs a fresh process ~10 ms of imports): no thread waits idle
            results: list[Any] = [None] * len(jobs)

            def run(k: int) -> None:
                try:
                    results[k] = self.scan_part(*jobs[k])
                except BaseException as e:  # re-raised in the calling thread
                    results[k] = e

            threads = [threading.Thread(target=run, args=(k,), daemon=True) for k in range(1, len(jobs))]
            for th in threads:
                th.start()
            try:
                run(0)
            finally:
                for th in threads:
                    th.join()
            for res in results:
                if isinstance(res, BaseException):
                    raise res
            return bounds, results
        return bounds, [self.scan_part(*jobs[0])]

    def candidates(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The candidates of :meth:`cand_parts` as one set of arrays (for tests and tools:
        the walk uses the parts)."""
        _lo, parts = self.cand_parts()
        c = np.concatenate([x[0] for x in parts]) if parts else np.zeros(0, np.int64)
        w = np.concatenate([x[1] for x in parts]) if parts else np.zeros(0, "<u8")
        nxt = message_ends(c, w)
        return c, nxt, w, run_ends(c, nxt)

    def scan_part(
        self,
        a0: int,
        a1: int,
        sizes_ok: np.ndarray,
        cbuf: np.ndarray,
        wbuf: np.ndarray,
        chunk: int,
        look: int,
    ) -> CandidatePart:
        """The candidates of the ``chunk``-sized pieces of ``[a0, a1)`` (one part of
        :meth:`cand_parts`): positions and header words written into ``cbuf`` and ``wbuf``
        (grown if too small), and the index of the last candidate of each run; runs in a
        worker thread.  ``look``: see :func:`payload_hits`."""
        log = self.log
        u8 = log.u8
        size = log.size
        buf = np.empty(chunk, dtype=bool)
        n = 0
        ends: list[np.ndarray] = []  # per chunk, the run ends found in it (part indexes)
        last_end = -1  # the end of the part's last candidate so far
        for a in range(a0, a1, chunk):
            if (a - a0) % (chunk * 4) == 0 and a > a0:
                # the pages of the last four chunks, done with for now (also after a dense one)
                log.release(a - chunk * 4, a - 8)
            seg = u8[a + 2 : min(a + 2 + chunk, a1 + 2, size - 2)]
            hits = np.flatnonzero(np.equal(seg, rec.DATA, out=buf[: len(seg)]))
            if len(hits) > len(seg) // 8:  # denser is not a log; walk it one by one
                continue
            hits += a
            # each candidate's header read once, and the run links found, while the
            # chunk is in the cache (sizes as a contiguous intp array: indexing and adding
            # with a strided uint16 view is several times slower)
            w = log.words(hits)
            n64 = np.bitwise_and(w, LOW16).view(np.int64)
            oki = np.flatnonzero(sizes_ok[n64])
            h2 = hits[oki]
            nx2 = n64[oki]
            nx2 += h2
            nx2 += 3
            w2 = w[oki]
            del hits, w, n64, oki
            k = len(h2)
            if not k:
                continue
            brk = np.flatnonzero(nx2[:-1] != h2[1:])  # where a run ends inside the chunk
            if len(brk):
                keep = payload_hits(u8, size, h2, nx2, brk, look)
                if keep is not None:  # rare: noise inside a payload dropped
                    h2, nx2, w2 = h2[keep], nx2[keep], w2[keep]
                    k = len(h2)
                    brk = np.flatnonzero(nx2[:-1] != h2[1:])
            if n + k > len(cbuf):
                cap = max(2 * len(cbuf), n + k)
                cbuf = np.concatenate([cbuf[:n], np.empty(cap - n, cbuf.dtype)])
                wbuf = np.concatenate([wbuf[:n], np.empty(cap - n, wbuf.dtype)])
            cbuf[n : n + k] = h2
            wbuf[n : n + k] = w2
            if n and last_end != int(h2[0]):  # the run before this chunk ends there
                ends.append(np.array([n - 1], np.int64))
            if len(brk):
                brk += n
                ends.append(brk)
            last_end = int(nx2[-1])
            n += k
        if n:
            ends.append(np.array([n - 1], np.int64))
        part_run_ends = np.concatenate(ends) if ends else np.zeros(0, np.int64)
        return cbuf[:n], wbuf[:n], part_run_ends

    def walk_fast(self, pos: int, end: int, limit: int | None = None) -> tuple[np.ndarray, int]:
        """Offsets of the complete messages from ``pos`` (exactly what a one-by-one walk of
        the size chain finds) and where it stopped: ``end``, the start of a message that
        does not fit before ``end``, or (after about ``limit`` messages) the next message."""
        p, _w, stop = self.walk_words(pos, end, limit)
        return p, stop

    def walk_words(self, pos: int, end: int, limit: int | None = None) -> tuple[np.ndarray, np.ndarray, int]:
        """:meth:`walk_fast` with each message's header word (see :meth:`MappedLog.words`)."""
        if limit is None:
            limit = self.tuning().walk_limit
        part_lo, parts = self.cand_parts()
        log = self.log
        view = log.view
        pieces: list[np.ndarray] = []
        wpieces: list[np.ndarray] = []
        singles: list[int] = []  # offsets walked one by one (a list: no array/bisect imports)
        k_part = -1
        c = cw = ends = np.zeros(0, np.int64)

        def flush() -> None:
            nonlocal singles
            sp = np.array(singles, dtype=np.int64)
            pieces.append(sp)
            wpieces.append(log.words(sp))
            singles = []

        count = 0
        while pos + 3 <= end:
            if count >= limit:
                break
            k = len(part_lo) - 1  # the last part starting at or before pos (a few parts)
            while k >= 0 and part_lo[k] > pos:
                k -= 1
            if k != k_part:
                k_part = k
                c, cw, ends = parts[k] if k >= 0 else (np.zeros(0, np.int64),) * 3
            i = int(c.searchsorted(pos))
            if i < len(c) and c[i] == pos:
                r = int(ends[ends.searchsorted(i)])
                r = min(r, i + limit)
                nxt = int(c[r]) + 3 + (int(cw[r]) & 0xFFFF)  # where the run's last one ends
                if nxt > end:  # the run crosses the segment end: keep what fits
                    run_nxt = message_ends(c[i : r + 1], cw[i : r + 1])
                    r = i + int(np.searchsorted(run_nxt, end, side="right")) - 1
                    if r < i:
                        break
                    nxt = int(run_nxt[r - i])
                count += r + 1 - i
                if singles:
                    flush()
                pieces.append(c[i : r + 1])
                wpieces.append(cw[i : r + 1])
                pos = nxt
                continue
            nx = pos + 3 + (view[pos] | (view[pos + 1] << 8))
            if nx > end:
                break
            singles.append(pos)
            count += 1
            pos = nx
        if singles:
            flush()
        if not pieces:
            return np.zeros(0, np.int64), np.zeros(0, "<u8"), pos
        if len(pieces) == 1:
            return pieces[0], wpieces[0], pos
        return np.concatenate(pieces), np.concatenate(wpieces), pos

    def plausible_header(self, q: int, subs: SubscriptionTable) -> bool:
        """Whether the header at ``q`` could start a real message (used to tell a log cut
        inside a message from a damaged size field)."""
        log = self.log
        t = int(log.u8[q + 2])
        n = int(log.u16[q])
        if MIN_BODY_TABLE[t] < 0:
            return bool(LETTER_TYPES[t]) and 0 < n <= MAX_UNKNOWN_SIZE
        if n < MIN_BODY_TABLE[t]:
            return False
        if t == rec.DATA:
            if q + 5 > log.size:
                return True
            mid = int(log.u16[q + 3])
            if mid in subs.unusable_by_msg_id:
                return True
            entry = subs.by_msg_id.get(mid)
            return (
                entry is not None
                and entry.type is not None
                and entry.type.min_size <= n - 2 <= entry.type.size
            )
        return True

    def resync(self, bad: int, end: int, subs: SubscriptionTable) -> int:
        """Where reading resumes after damage at ``bad``: the next sync message or the next
        position where three consecutive valid message headers start."""
        u8 = self.log.u8
        lo = np.full(65536, 1 << 30, dtype=np.int64)
        hi = np.full(65536, -1, dtype=np.int64)
        for mid, entry in subs.by_msg_id.items():
            if entry.type is not None:
                lo[mid] = entry.type.min_size + 2
                hi[mid] = entry.type.size + 2
        for mid in subs.unusable_by_msg_id:
            lo[mid], hi[mid] = 2, MAX_PAYLOAD + 2
        pos = bad + 1
        view = self.log.view
        window = 4096  # grows: damage is usually short
        while pos < end:
            wend = min(end, pos + window)
            window = min(window * 16, RESYNC_WINDOW)
            # sync magic: resume at the S message header (or right after the magic)
            m = bytes(view[pos : min(end, wend + 7)]).find(rec.SYNC_MAGIC)
            sync_at = -1
            if m >= 0:
                ms = pos + m
                if ms - 3 >= pos and u8[ms - 1] == rec.SYNC and u8[ms - 3] == 8 and u8[ms - 2] == 0:
                    sync_at = ms - 3
                else:
                    sync_at = ms + 8
            lim = sync_at if sync_at >= 0 else wend
            if lim > pos:
                q = np.arange(pos, lim, dtype=np.int64)
                ok, nxt = self.valid_headers(q, end, lo, hi)
                ok2, nxt2 = self.valid_headers(nxt, end, lo, hi)
                ok3, _ = self.valid_headers(nxt2, end, lo, hi)
                chain = ok & (ok2 | (nxt == end)) & (ok3 | (nxt2 == end) | (nxt == end))
                hit = np.flatnonzero(chain)
                if len(hit):
                    return int(q[hit[0]])
            if sync_at >= 0:
                return sync_at
            pos = wend
        return end

    def valid_headers(
        self, q: np.ndarray, end: int, lo: np.ndarray, hi: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Whether a valid message header starts at each offset of ``q`` (a known type, not flag bits, whose
        size fits before ``end``; for ``D``, a size in ``lo..hi`` of its msg_id), and where
        each valid one ends (``end + 1`` for the others)."""
        u8 = self.log.u8
        size = self.log.size
        inb = q + 3 <= end
        qc = np.where(inb, q, 0)
        qc = np.minimum(qc, max(size - 3, 0))
        t = u8[qc + 2]
        n = u8[qc].astype(np.int64) | (u8[qc + 1].astype(np.int64) << 8)
        nxt = q + 3 + n
        mins = MIN_BODY_TABLE[t]
        ok = inb & (mins >= 0) & (n >= mins) & (nxt <= end) & (t != rec.FLAG_BITS)
        isd = t == rec.DATA
        q5 = np.minimum(qc + 4, max(size - 1, 0))
        mid = u8[np.minimum(qc + 3, max(size - 1, 0))].astype(np.int64) | (u8[q5].astype(np.int64) << 8)
        dok = (n >= lo[mid]) & (n <= hi[mid])
        ok &= ~isd | dok
        return ok, np.where(ok, nxt, end + 1)
