"""What a remote source fetches before a reader asks (:class:`ReadAhead`): the chunks a read
plan selected, in order and ahead of the reader by a window doubling from :data:`MIN_AHEAD`
up to :data:`HINT_AHEAD` as the reader goes through them (``hint``: a read that stops after
a few messages fetched little beyond them), else,
when reads run front to back, what follows them (a window doubling from :data:`MIN_AHEAD` up
to :data:`MAX_AHEAD`)."""

from __future__ import annotations

from collections.abc import Callable

from polybag.io.block_map import BLOCK, COALESCE, BlockMap

#: read-ahead window of a sequential pass: from 1 MiB, doubling up to this
MAX_AHEAD = 64 << 10 << 10
#: the least read-ahead of a sequential run
MIN_AHEAD = 4 << 20
#: how far ahead of the reader hinted ranges (:meth:`ReadAhead.hint`) are fetched, at most
#: (from MIN_AHEAD, twice what the reader has gone through since the hint)
HINT_AHEAD = 64 << 20


class ReadAhead:
    """The read-ahead of one source: it claims blocks of ``blocks`` and hands the byte ranges
    to ``start`` (which fetches them in the background)."""

    def __init__(self, blocks: BlockMap, start: Callable[[list[tuple[int, int]]], None]) -> None:
        self._map = blocks
        self._start = start
        self.end = -1  # where the last need ended (sequential detection; -1: none)
        self._run_start = 0  # where the current sequential run began
        self._ahead_to = 0  # read-ahead of the current run was scheduled up to here
        self._hints: list[tuple[int, int]] = []  # block spans a reader said it will read, in order
        self._hinted: list[tuple[int, int]] = []  # the same, as given
        self._hint_at = 0  # the first hinted span not yet scheduled
        self._hint_to = 0  # hinted blocks were scheduled up to this one
        self._hint_pos = 0  # the furthest block the reader's needs began at, since the hint
        self._hint_from = 0  # the first hinted block (the window grows with the reader's way from it)

    def hint(self, spans: list[tuple[int, int]]) -> None:
        """The block spans a read is about to go through, in order (replacing the last);
        fetched from the first on."""
        with self._map.cv:
            self._hints = spans
            self._hinted = list(spans)  # as given (``_hints`` is consumed as they are fetched)
            self._hint_at = 0
            self._hint_to = 0
            self._hint_pos = 0
            self._hint_from = spans[0][0] if spans else 0
        if spans:
            self.pump(spans[0][0] * BLOCK)

    def hinting(self) -> bool:
        """Whether hinted spans remain to be fetched, or the reader has not yet gone past
        the last of them (then the sequential read-ahead is off: it would fetch what the
        plan skips)."""
        return self._hint_at < len(self._hints) or bool(self._hinted and self._hint_pos < self._hinted[-1][1] - 1)

    def inside_hints(self, spans: list[tuple[int, int]]) -> bool:
        """Whether every block span lies within the hinted spans (fetched, on the way or to
        come)."""
        with self._map.cv:
            hints = self._hinted
        k = 0
        for b0, b1 in spans:  # both sorted
            while k < len(hints) and hints[k][1] < b1:
                k += 1
            if k == len(hints) or hints[k][0] > b0:
                return False
        return True

    def pump(self, pos: int, upto: int = 0) -> None:
        """Start fetching the hinted blocks from ``pos`` up to a window beyond it (MIN_AHEAD,
        doubling with the reader's way since the hint up to HINT_AHEAD; or up to ``upto``,
        when that is further)."""
        todo: list[tuple[int, int]] = []
        first = pos // BLOCK
        with self._map.cv:
            self._hint_pos = max(self._hint_pos, first)
            gone = (self._hint_pos - self._hint_from) * BLOCK
            ahead = min(HINT_AHEAD, max(MIN_AHEAD, 2 * gone))
            limit = max((pos + ahead + BLOCK - 1) // BLOCK, (upto + BLOCK - 1) // BLOCK)
            half = ahead // 2 // BLOCK
            if self._hint_to > max(first + half, limit - half):
                return  # enough is on the way: top up in large requests, not a little per need
            self._hint_to = limit
            while self._hint_at < len(self._hints):
                b0, b1 = self._hints[self._hint_at]
                if b1 <= first:  # passed (or skipped) by the reader
                    self._hint_at += 1
                    continue
                if b0 >= limit:
                    break
                cut = min(b1, limit)
                todo += self._map.claim(max(b0, first), cut)
                if cut < b1:
                    self._hints[self._hint_at] = (cut, b1)
                    break
                self._hint_at += 1
        self._start(todo)

    def after_need(self, lo: int, hi: int) -> None:
        """Background fetch of what follows ``[lo, hi)`` when reads run front to back.

        A run is a sequence of needs each starting within 64 KiB of where the one before
        ended; the read-ahead is twice as long as the run so far (at least MIN_AHEAD, at most
        MAX_AHEAD), so a short read (a time window) fetches little beyond what it reads; it
        is topped up when half of it is used, in requests of up to PART bytes."""
        sequential = self.end >= 0 and self.end - COALESCE <= lo <= self.end + COALESCE
        self.end = hi
        if not sequential:
            self._run_start = lo
            self._ahead_to = hi
            return
        size = self._map.size
        if hi >= size:
            return
        window = min(MAX_AHEAD, max(MIN_AHEAD, 2 * (hi - self._run_start)))
        if self._ahead_to - hi > window // 2:
            return  # enough is on the way: top up in large requests, not a little per need
        start = max(hi, self._ahead_to)
        end = min(size, hi + window)
        with self._map.cv:
            todo = self._map.claim(start // BLOCK, (end + BLOCK - 1) // BLOCK)
        self._ahead_to = end
        self._start(todo)
