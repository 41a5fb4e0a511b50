"""The fast scan of a ULog data section: where each message starts.

The data section has no index, so the reader walks the ``msg_size`` chain once at open,
but not message by message.  Every byte offset whose type byte is ``D`` and whose size
field fits a defined format is a *candidate*, found with numpy in cache-sized chunks by
parallel threads (:meth:`_Scan._cand_parts`); candidates that link to each other
(``offset + 3 + size`` is the next candidate) form runs, and the walk
(:meth:`_Scan._walk_words`) jumps over whole runs, stepping one by one only between them.
The result is exactly the one-by-one walk; the runs only make it fast.

After damage, :meth:`_Scan._resync` finds where reading resumes: the next sync message or
the next offset where three valid message headers follow each other.

The tables of plausible message headers (:data:`_MIN_TABLE`, :data:`_LETTER`) are used by
the other parts of the reader too.  :class:`_Scan` is a part of
:class:`~polybag.formats.ulog.reader.UlogReader` and works on its state; the step sizes come
from :meth:`_Scan._tuning` (the reader module holds them).
"""

from __future__ import annotations

import mmap
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from polybag.codecs.ulog import MAX_PAYLOAD
from polybag.formats.ulog import records as rec

_MIN_BODY = {
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
_MIN_TABLE = np.full(256, -1, dtype=np.int64)
for _t, _m in _MIN_BODY.items():
    _MIN_TABLE[_t] = _m
_LETTER = np.zeros(256, dtype=bool)
_LETTER[ord("A") : ord("Z") + 1] = True
_LETTER[ord("a") : ord("z") + 1] = True
_MAX_UNKNOWN = 10000
_RESYNC_WINDOW = 1 << 20
_LOW16 = np.uint64(0xFFFF)
_SHIFT24 = np.uint64(24)


class ScanTuning(NamedTuple):
    """The step sizes of the scan, read from the reader module at each use (see
    :meth:`polybag.formats.ulog.reader.UlogReader._tuning`)."""

    chunk: int  # bytes compared for the D type byte at once (cache-sized)
    lookahead: int  # a candidate is kept when its end is one of the next this many
    walk_limit: int  # messages handled at once (bounds the index arrays)
    workers: Callable[[int], int]  # threads for the candidate scan of n chunks
    capacity: Callable[[int], int]  # first guess of the candidates in n bytes


def _unsound(types: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Which headers of non-``D`` messages are structurally impossible: a known type
    shorter than its fixed part, or an unknown type that is no letter or has a size of 0
    or over the bound for skipped messages."""
    nn = sizes.astype(np.int64)
    mins = _MIN_TABLE[types]
    return np.where(mins < 0, (nn == 0) | (nn > _MAX_UNKNOWN) | ~_LETTER[types], nn < mins)


def _ends(c: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Where the messages at ``c`` end, from their header words ``w`` (:meth:`_Scan._words`):
    ``position + 3 + size``."""
    return c + 3 + np.bitwise_and(w, _LOW16).view(np.int64)


def _run_ends(c: np.ndarray, nxt: np.ndarray) -> np.ndarray:
    """Index of the last candidate of each run (where a candidate's end is not the next
    candidate's start)."""
    m = len(c)
    link = np.zeros(m, dtype=bool)
    if m > 1:
        np.equal(nxt[:-1], c[1:], out=link[:-1])
    return np.flatnonzero(~link)


def _payload_hits(
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


class _Scan:
    """Message boundaries of the data section (a part of the ULog reader)."""

    _cands: tuple[list[int], list[tuple[np.ndarray, ...]]] | None
    _u64: np.ndarray | None

    def _tuning(self) -> ScanTuning:
        """The step sizes of the scan (the reader gives them)."""
        raise NotImplementedError

    def _words(self, q: np.ndarray) -> np.ndarray:
        """The 8 bytes at each (ascending) offset of ``q`` as a little-endian uint64 (zero past the end):
        a message's size (bits 0-15), type (16-23) and, for ``D``, msg_id (24-39) in one
        gather."""
        size = self._size
        if len(q) == 0 or size < 8:
            out = np.zeros(len(q), "<u8")
            for j, x in enumerate(q.tolist()):
                chunk = bytes(self._view[x : x + 8])
                out[j] = int.from_bytes(chunk, "little")
            return out
        if self._u64 is None:
            self._u64 = np.ndarray(buffer=self._view, dtype="<u8", shape=(size - 7,), strides=(1,))
        if int(q[-1]) <= size - 8:  # offsets ascend: the last is the largest
            return self._u64[q]
        qc = np.minimum(q, size - 8)
        w = self._u64[qc]
        tail = np.flatnonzero(q != qc)
        w[tail] >>= ((q[tail] - qc[tail]) * 8).astype(np.uint64)
        return w

    def _cand_parts(self) -> tuple[list[int], list[tuple[np.ndarray, np.ndarray, np.ndarray]]]:
        """Likely ``D`` message starts in the data section, to jump over runs of them.

        Every position whose type byte is ``D`` and whose size field fits one of the
        defined formats (``min_size + 2 .. size + 2``: PX4 leaves trailing padding out) is a
        candidate; a ``D`` byte inside a payload rarely passes that size check.  The
        candidates are split into runs where each one's end is exactly the next one's
        start.  The walk uses a run only after landing on its first position, so the
        result is exactly the sequential walk whatever the candidates are (a missing or
        spurious one only costs a step of the walk); the candidates only make it fast.
        Returns the first offset each part of the data section covers and, per part,
        (positions, header words (see :meth:`_words`), index of the last candidate of each
        run in ascending order); a candidate's end is ``position + 3 + (word & 0xFFFF)``
        (not stored: the walk needs it once per run).  The parts are scanned by parallel
        threads.  The file
        is compared for the type byte in cache-sized chunks into one reused buffer, and
        each candidate's header is read once, as one word, while its chunk is in the
        cache."""
        if self._cands is not None:
            return self._cands
        start, size = self._data_start, self._size
        sizes_ok = self._data_sizes()
        if self._u64 is None and size >= 8:  # made once here, before the threads share it
            self._u64 = np.ndarray(buffer=self._view, dtype="<u8", shape=(size - 7,), strides=(1,))
        bounds, found = self._scan_parts(start, size - 4, sizes_ok)
        self._release(start, size)
        # The parts stay apart (no copy into one array): runs end at part boundaries.
        self._cands = (bounds[:-1], found)
        return self._cands

    def _data_sizes(self) -> np.ndarray:
        """Which values of the size field a data message of a defined format can have
        (``min_size + 2 .. size + 2``), as a table indexed by size."""
        sizes_ok = np.zeros(65536, dtype=bool)
        for name in list(self.ulog.formats):
            t = self._type(name)
            if t is not None and t.min_size + 2 <= 0xFFFF:
                sizes_ok[t.min_size + 2 : min(t.size + 2, 0xFFFF) + 1] = True
        return sizes_ok

    def _scan_parts(
        self, start: int, stop: int, sizes_ok: np.ndarray
    ) -> tuple[list[int], list[tuple[np.ndarray, np.ndarray, np.ndarray]]]:
        """The candidates of ``[start, stop)`` cut into parts of whole chunks, each scanned by
        :meth:`_scan_part` in its own thread; with the bounds of the parts (and ``stop``
        last)."""
        tune = self._tuning()
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
                    results[k] = self._scan_part(*jobs[k])
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
        return bounds, [self._scan_part(*jobs[0])]

    def _candidates(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The candidates of :meth:`_cand_parts` as one set of arrays (for tests and tools:
        the walk uses the parts)."""
        _lo, parts = self._cand_parts()
        c = np.concatenate([x[0] for x in parts]) if parts else np.zeros(0, np.int64)
        w = np.concatenate([x[1] for x in parts]) if parts else np.zeros(0, "<u8")
        nxt = _ends(c, w)
        return c, nxt, w, _run_ends(c, nxt)

    def _scan_part(
        self,
        a0: int,
        a1: int,
        sizes_ok: np.ndarray,
        cbuf: np.ndarray,
        wbuf: np.ndarray,
        chunk: int,
        look: int,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The candidates of the ``chunk``-sized pieces of ``[a0, a1)`` (one part of
        :meth:`_cand_parts`): positions and header words written into ``cbuf`` and ``wbuf``
        (grown if too small), and the index of the last candidate of each run; runs in a
        worker thread.  ``look``: see :func:`_payload_hits`."""
        u8 = self._u8
        size = self._size
        buf = np.empty(chunk, dtype=bool)
        n = 0
        ends: list[np.ndarray] = []  # per chunk, the run ends found in it (part indexes)
        last_end = -1  # the end of the part's last candidate so far
        for a in range(a0, a1, chunk):
            if (a - a0) % (chunk * 4) == 0 and a > a0:
                # the pages of the last four chunks, done with for now (also after a dense one)
                self._release(a - chunk * 4, a - 8)
            seg = u8[a + 2 : min(a + 2 + chunk, a1 + 2, size - 2)]
            hits = np.flatnonzero(np.equal(seg, rec.DATA, out=buf[: len(seg)]))
            if len(hits) > len(seg) // 8:  # denser is not a log; walk it one by one
                continue
            hits += a
            # each candidate's header read once, and the run links found, while the
            # chunk is in the cache (sizes as a contiguous intp array: indexing and adding
            # with a strided uint16 view is several times slower)
            w = self._words(hits)
            n64 = np.bitwise_and(w, _LOW16).view(np.int64)
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
                keep = _payload_hits(u8, size, h2, nx2, brk, look)
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
        run_ends = np.concatenate(ends) if ends else np.zeros(0, np.int64)
        return cbuf[:n], wbuf[:n], run_ends

    def _walk_fast(self, pos: int, end: int, limit: int | None = None) -> tuple[np.ndarray, int]:
        """Offsets of the complete messages from ``pos`` (exactly what a one-by-one walk of
        the size chain finds) and where it stopped: ``end``, the start of a message that
        does not fit before ``end``, or (after about ``limit`` messages) the next message."""
        p, _w, stop = self._walk_words(pos, end, limit)
        return p, stop

    def _walk_words(self, pos: int, end: int, limit: int | None = None) -> tuple[np.ndarray, np.ndarray, int]:
        """:meth:`_walk_fast` with each message's header word (see :meth:`_words`)."""
        if limit is None:
            limit = self._tuning().walk_limit
        part_lo, parts = self._cand_parts()
        view = self._view
        pieces: list[np.ndarray] = []
        wpieces: list[np.ndarray] = []
        singles: list[int] = []  # offsets walked one by one (a list: no array/bisect imports)
        k_part = -1
        c = cw = ends = np.zeros(0, np.int64)

        def flush() -> None:
            nonlocal singles
            sp = np.array(singles, dtype=np.int64)
            pieces.append(sp)
            wpieces.append(self._words(sp))
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
                    run_nxt = _ends(c[i : r + 1], cw[i : r + 1])
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

    def _plausible_header(self, q: int) -> bool:
        """Whether the header at ``q`` could start a real message (used to tell a log cut
        inside a message from a damaged size field)."""
        t = int(self._u8[q + 2])
        n = int(self._u16[q])
        if _MIN_TABLE[t] < 0:
            return bool(_LETTER[t]) and 0 < n <= _MAX_UNKNOWN
        if n < _MIN_TABLE[t]:
            return False
        if t == rec.DATA:
            if q + 5 > self._size:
                return True
            mid = int(self._u16[q + 3])
            if mid in self._dead:
                return True
            entry = self._by_msg_id.get(mid)
            return (
                entry is not None
                and entry.type is not None
                and entry.type.min_size <= n - 2 <= entry.type.size
            )
        return True

    def _resync(self, bad: int, end: int) -> tuple[int, str]:
        """Where reading resumes after damage at ``bad``: the next sync message or the next
        position where three consecutive valid message headers start."""
        why = getattr(self, "_bad_reason", "damaged message")
        u8 = self._u8
        lo = np.full(65536, 1 << 30, dtype=np.int64)
        hi = np.full(65536, -1, dtype=np.int64)
        for mid, entry in self._by_msg_id.items():
            if entry.type is not None:
                lo[mid] = entry.type.min_size + 2
                hi[mid] = entry.type.size + 2
        for mid in self._dead:
            lo[mid], hi[mid] = 2, MAX_PAYLOAD + 2
        pos = bad + 1
        view = self._view
        window = 4096  # grows: damage is usually short
        while pos < end:
            wend = min(end, pos + window)
            window = min(window * 16, _RESYNC_WINDOW)
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
                ok, nxt = self._valid_headers(q, end, lo, hi)
                ok2, nxt2 = self._valid_headers(nxt, end, lo, hi)
                ok3, _ = self._valid_headers(nxt2, end, lo, hi)
                chain = ok & (ok2 | (nxt == end)) & (ok3 | (nxt2 == end) | (nxt == end))
                hit = np.flatnonzero(chain)
                if len(hit):
                    return int(q[hit[0]]), why
            if sync_at >= 0:
                return sync_at, why
            pos = wend
        return end, why

    def _valid_headers(
        self, q: np.ndarray, end: int, lo: np.ndarray, hi: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Whether a valid message header starts at each offset of ``q`` (a known type, not flag bits, whose
        size fits before ``end``; for ``D``, a size in ``lo..hi`` of its msg_id), and where
        each valid one ends (``end + 1`` for the others)."""
        u8 = self._u8
        size = self._size
        inb = q + 3 <= end
        qc = np.where(inb, q, 0)
        qc = np.minimum(qc, max(size - 3, 0))
        t = u8[qc + 2]
        n = u8[qc].astype(np.int64) | (u8[qc + 1].astype(np.int64) << 8)
        nxt = q + 3 + n
        mins = _MIN_TABLE[t]
        ok = inb & (mins >= 0) & (n >= mins) & (nxt <= end) & (t != rec.FLAG_BITS)
        isd = t == rec.DATA
        q5 = np.minimum(qc + 4, max(size - 1, 0))
        mid = u8[np.minimum(qc + 3, max(size - 1, 0))].astype(np.int64) | (u8[q5].astype(np.int64) << 8)
        dok = (n >= lo[mid]) & (n <= hi[mid])
        ok &= ~isd | dok
        return ok, np.where(ok, nxt, end + 1)

    def _release(self, start: int, end: int) -> None:
        """Tell the OS this process is done with the mapped pages in ``[start, end)`` for now
        (they stay in the page cache), so a full parse's resident memory stays near the
        size of what it builds instead of that plus the whole file.  Not done when topics are
        selected up front: their data is read again right after the scan, and faulting the
        pages back in would cost more than keeping them.  (Keeping a 30 MB log's pages
        mapped saves a full read in a fresh process 2-4 ms, and raises its peak resident
        memory from 1.3x to 2.3x the file: not done.)"""
        mm = getattr(self.source, "_buffer", None)
        if not isinstance(mm, mmap.mmap) or self._topics is not None:
            return
        page = mmap.PAGESIZE
        a = (start // page) * page
        b = min(end, self._size)
        if b <= a:
            return
        try:
            mm.madvise(mmap.MADV_DONTNEED, a, b - a)
        except (AttributeError, OSError, ValueError):
            pass
