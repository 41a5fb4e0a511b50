"""Which bytes of a remote object are here: one state per 2 KiB block (missing, in flight,
present) and the condition a reader waits on (:class:`BlockMap`).  A fetch claims the missing
blocks of what it will read (:meth:`BlockMap.claim`: runs of them, split at :data:`PART`) and
settles them when it ends (present, or missing again for a retry)."""

from __future__ import annotations

import threading
from collections.abc import Iterable

import numpy as np

#: bookkeeping granularity: what a small request is rounded to (one state byte per block)
BLOCK = 2048
#: ranges closer than this are fetched in one request
COALESCE = 64 << 10
#: the longest single request; longer runs are split and fetched concurrently
PART = 8 << 20

_MISSING, _INFLIGHT, _PRESENT = 0, 1, 2


class BlockMap:
    """The block states of an object of ``size`` bytes; ``cv`` guards them (and what its
    owner counts beside them) and is notified whenever a fetch settles."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.state = np.zeros((size + BLOCK - 1) // BLOCK, np.uint8)
        self.cv = threading.Condition()

    def __len__(self) -> int:
        """The number of blocks."""
        return len(self.state)

    def spans(self, ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
        """Block spans ``[b0, b1)`` of the ``(offset, length)`` ``ranges``, sorted, neighbours
        (under COALESCE) merged."""
        out: list[tuple[int, int]] = []
        gap = COALESCE // BLOCK
        for off, ln in sorted((max(0, o), o + n) for o, n in ranges if n > 0):
            end = min(self.size, ln)
            if off >= end:
                continue
            b0, b1 = off // BLOCK, (end + BLOCK - 1) // BLOCK
            if out and b0 <= out[-1][1] + gap:
                out[-1] = (out[-1][0], max(out[-1][1], b1))
            else:
                out.append((b0, b1))
        return out

    def present(self, spans: list[tuple[int, int]]) -> bool:
        """Whether every block of ``spans`` is here (caller holds ``cv``)."""
        return all(bool((self.state[b0:b1] == _PRESENT).all()) for b0, b1 in spans)

    def held(self, spans: list[tuple[int, int]]) -> bool:
        """Whether every block of ``spans`` is here."""
        with self.cv:
            return self.present(spans)

    def claim(self, b0: int, b1: int) -> list[tuple[int, int]]:
        """Mark the missing blocks of ``[b0, b1)`` in flight (caller holds ``cv``); returns
        the byte ranges to fetch: runs of them, split at PART.  Runs are not joined across
        blocks others have in flight (a fetch settles exactly the blocks of its range)."""
        seg = self.state[b0:b1]
        miss = seg == _MISSING
        if not miss.any():
            return []
        edges = np.flatnonzero(np.diff(np.concatenate(([0], miss.view(np.int8), [0]))))
        seg[miss] = _INFLIGHT
        runs: list[list[int]] = []
        gap = COALESCE // BLOCK
        for i in range(0, len(edges), 2):
            s, e = b0 + int(edges[i]), b0 + int(edges[i + 1])
            if runs and s - runs[-1][1] <= gap and bool((self.state[runs[-1][1] : s] == _PRESENT).all()):
                self.state[runs[-1][1] : s] = _INFLIGHT  # re-reading a few present blocks beats a request
                runs[-1][1] = e
            else:
                runs.append([s, e])
        out: list[tuple[int, int]] = []
        step = PART // BLOCK
        for s, e in runs:
            for p in range(s, e, step):
                out.append((p * BLOCK, min(self.size, min(e, p + step) * BLOCK)))
        return out

    def settle(self, start: int, end: int, ok: bool) -> None:
        """Blocks of a finished fetch: present, or (failed) missing again for a retry."""
        b0, b1 = start // BLOCK, (end + BLOCK - 1) // BLOCK
        with self.cv:
            seg = self.state[b0:b1]
            if ok:
                seg[seg == _INFLIGHT] = _PRESENT
            else:
                seg[seg == _INFLIGHT] = _MISSING
            self.cv.notify_all()
