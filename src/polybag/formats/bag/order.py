"""Which chunks of a 2.0 bag a read loads, in what order, and the messages of each.

A read selects the chunks that can hold a wanted message (:meth:`OrderMixin._wanted`: the
connections and time range of the chunk info or the scan) and cuts them into groups:
in file order one chunk at a time; in log-time order one run per chunk, merged by
:func:`polybag.formats.shared.merge.merge_runs` by (time, file position) so that recorded bags, whose
chunks follow each other in time, stream one chunk at a time (bounded memory).  Each chunk
becomes one list of :class:`~polybag.model.Message` built in bulk: entries filtered and
sorted with numpy, payloads sliced from the chunk (small ones copied out as ``bytes``).
"""

from __future__ import annotations

import mmap
from collections.abc import Callable, Iterable, Iterator
from itertools import repeat
from typing import Any, NamedTuple

import numpy as np

from polybag.errors import FormatError
from polybag.formats.shared.merge import LOG_TIME, NEG_LOG_TIME, OutOfOrder, Run, merge_plan, merge_runs
from polybag.model import Channel, Message
from polybag.reader import TopicSelector, topic_filter

from .base import gc_paused
from .index import IndexMixin
from .state import Chunk

_COPY_BELOW = 4096  # mean payload size under which payloads are copied out as bytes


# Message objects are built without a Python-level ``__init__`` call: a C-level allocation
# and five slot stores (specialised by the interpreter) cost about a third less per message.
# Only while Message has exactly these slots; otherwise its constructor is used.
_SLOTS_KNOWN = getattr(Message, "__slots__", None) == ("channel", "log_time", "publish_time", "sequence", "data")


def _build(chl: Iterable[Channel], tl: list[int], al: list[int], bl: list[int], src: Any) -> list[Message]:
    """``Message(ch, t, t, 0, src[a:b])`` for each (ch, t, a, b) (``chl``: ``repeat(ch)`` when
    all are on one channel)."""
    if not _SLOTS_KNOWN:
        return [Message(ch, tt, tt, 0, src[a:b]) for ch, tt, a, b in zip(chl, tl, al, bl)]
    new = object.__new__
    cls = Message
    out = [new(cls) for _ in tl]
    for m, ch, tt, a, b in zip(out, chl, tl, al, bl):
        m.channel = ch
        m.log_time = tt
        m.publish_time = tt
        m.sequence = 0
        m.data = src[a:b]
    return out


class _Read(NamedTuple):
    """What one ``messages()`` read asks for: the connections (None: all), the time window
    [start, end), the direction and ``order`` (``log_time`` or ``file``)."""

    sel: set[int] | None
    start: int | None
    end: int | None
    reverse: bool
    order: str


class OrderMixin(IndexMixin):
    """The chunks a read loads, their grouping and order, and each group's messages."""

    @staticmethod
    def _wanted(ci: Chunk, sel: set[int] | None, start: int | None, end: int | None) -> bool:
        """Whether ``ci`` can hold a message of the connections ``sel`` in [start, end)."""
        if sel is not None and not any(c in sel for c in ci.counts):
            return False
        if start is not None and ci.end < start:
            return False
        return not (end is not None and ci.start >= end)

    def _batches(
        self, topics: TopicSelector, start: int | None, end: int | None, reverse: bool, order: str
    ) -> Iterator[list[Message]]:
        """The messages of a read, one list per chunk (or per stretch of overlapping
        chunks, merged by :func:`polybag.formats.shared.merge.merge_runs`), in one damage pass."""
        chans = self.channel_map()
        sel = topic_filter(topics, chans.values())
        chunks = [ci for ci in self.chunks if self._wanted(ci, sel, start, end)]
        # a remote file: the chunks (and the index data after each) fetched ahead, in order
        # (a chunk whose header is not read yet: up to the next chunk, header and data together)
        self.source.hint((ci.pos, self._extent(ci)) for ci in sorted(chunks, key=lambda c: c.pos))
        with self.damage_pass() as done:
            if order == "file":
                want = _Read(sel, start, end, reverse, order)
                for ci in sorted(chunks, key=lambda c: c.pos, reverse=reverse):
                    with gc_paused():  # a chunk's Message objects (see base.gc_paused)
                        batch = self._group_messages(ci, want, chans)
                    done.count += len(batch)
                    yield batch
                return
            want = _Read(sel, start, end, False, order)  # runs load ascending; the merge reverses
            # each chunk's span from its index data's own times (read without decompressing;
            # the same entries its messages get their times from), not the chunk info's
            # claim, which may lie: the merge is then exact, as topic_payloads' sort is
            ranked = sorted(chunks, key=lambda c: c.pos)
            segs = [(*self._span(ci), r, self._chunk_loader(ci, want, chans)) for r, ci in enumerate(ranked)]

            def replan(loaded: set[int], rank: int) -> list[Run]:
                """A chunk's messages lie outside its span after all (a scan found other
                times than its index data): plan the chunks not loaded yet again."""
                return merge_plan([(*self._span(ci), r, self._chunk_loader(ci, want, chans)) for r, ci in enumerate(ranked) if (-r if reverse else r) not in loaded], reverse)

            try:
                for batch in merge_runs(merge_plan(segs, reverse), NEG_LOG_TIME if reverse else LOG_TIME, replan):
                    done.count += len(batch)
                    yield batch
            except OutOfOrder as o:
                ci = ranked[-o.rank if reverse else o.rank]
                raise FormatError(
                    f"the chunk at {ci.pos} holds messages its chunk info's times ({ci.start}..{ci.end}) put "
                    "elsewhere, after later messages were already returned; read again in file order or reindex",
                    self.path,
                    ci.pos,
                ) from None

    def _span(self, ci: Chunk) -> tuple[int, int]:
        """The first and last log time of ``ci``'s entries (its index data, read if not yet;
        the chunk info's claim when it has none, or when the chunk record it points at is
        not one: that FormatError is raised when the merge reaches the chunk, after the
        messages before it)."""
        if ci.times is None:
            try:
                self._chunk_index(ci)
            except FormatError:
                if not ci.lazy:
                    raise
                return ci.start, ci.end
        if ci.times is not None and len(ci.times):
            return int(ci.times.min()), int(ci.times.max())
        return ci.start, ci.end

    def _chunk_loader(self, ci: Chunk, want: _Read, chans: dict[int, Channel]) -> Callable[[], list[Message]]:
        """The loader of ``ci``'s selected messages (for the log-time merge)."""

        def load() -> list[Message]:
            with gc_paused():  # a chunk's Message objects (see base.gc_paused)
                return self._group_messages(ci, want, chans)

        return load

    def _load(self, ci: Chunk) -> bytes | memoryview:
        """Entries of ``ci`` (index data, or a record scan) and its uncompressed bytes."""
        # a remote file: the chunk record (header too, when not read yet) and the index data
        # after it in one request
        self.source.need(ci.pos, self._extent(ci))
        if ci.times is None:
            self._chunk_index(ci)
        buf = self._chunk_buffer(ci)
        if ci.dstart is None:
            self._payloads(ci, buf)
        return buf

    def _selected(
        self, ci: Chunk, sel: set[int] | None, start: int | None, end: int | None
    ) -> tuple[bytes | memoryview, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``ci``'s bytes and the entries of its wanted messages, in its entry order: times,
        connections, record offsets, payload offsets and lengths."""
        buf = self._load(ci)
        assert ci.times is not None and ci.conns is not None and ci.offsets is not None
        assert ci.dstart is not None and ci.dlen is not None
        t, c, o, ds, dl = ci.times, ci.conns, ci.offsets, ci.dstart, ci.dlen
        mask = None
        if sel is not None and not all(k in sel for k in ci.counts):
            mask = np.isin(c, np.fromiter(sel, np.uint32, len(sel)))
        if start is not None:
            m2 = t >= start
            mask = m2 if mask is None else mask & m2
        if end is not None:
            m2 = t < end
            mask = m2 if mask is None else mask & m2
        if mask is not None:
            t, c, o, ds, dl = t[mask], c[mask], o[mask], ds[mask], dl[mask]
        return buf, t, c, o, ds, dl

    def _group_messages(self, ci: Chunk, want: _Read, chans: dict[int, Channel]) -> list[Message]:
        """The selected messages of one chunk, in order (ties in log time in file order)."""
        get = chans.__getitem__
        buf, t, c, o, ds, dl = self._selected(ci, want.sel, want.start, want.end)
        if want.order == "file":
            idx = None if len(o) < 2 or bool((o[1:] >= o[:-1]).all()) else np.argsort(o, kind="stable")
        else:
            in_order = len(o) < 2 or bool(((t[1:] > t[:-1]) | ((t[1:] == t[:-1]) & (o[1:] >= o[:-1]))).all())
            idx = None if in_order else np.lexsort((o, t))
        if want.reverse:
            idx = np.arange(len(t) - 1, -1, -1) if idx is None else idx[::-1]
        if idx is not None:
            t, c, ds, dl = t[idx], c[idx], ds[idx], dl[idx]
        mv, base = self._slicer(ci, buf, dl)
        tl = t.tolist()
        al = (ds + base).tolist()
        bl = (ds + dl + base).tolist()
        if len(c) and int(c.min()) == int(c.max()):
            return _build(repeat(get(int(c[0]))), tl, al, bl, mv)
        # channel objects picked in bulk: sorted ids -> positions -> object array
        ids = np.array(sorted(chans), np.int64)
        objs = np.empty(len(ids), object)
        objs[:] = [chans[i] for i in ids.tolist()]
        pos = np.searchsorted(ids, c.astype(np.int64))
        chl = objs[np.minimum(pos, len(ids) - 1)].tolist()
        return _build(chl, tl, al, bl, mv)

    def _slicer(self, ci: Chunk, buf: bytes | memoryview, dl: np.ndarray) -> tuple[Any, int]:
        """What to slice payloads from, and the offset to add.

        Small payloads are copied out as ``bytes`` (a bytes slice costs a fifth of a
        memoryview slice and is not tracked by the cyclic GC); large ones stay zero-copy
        ``memoryview`` slices of the chunk or the mapped file.
        """
        if len(dl) and int(dl.sum()) < _COPY_BELOW * len(dl):
            if isinstance(buf, bytes):
                return buf, 0
            whole = getattr(self.source, "_buffer", None)
            if ci.buffer is None and ci.compression == "none" and isinstance(whole, (bytes, mmap.mmap)):
                return whole, ci.data_start
        return (buf if isinstance(buf, memoryview) else memoryview(buf)), 0
