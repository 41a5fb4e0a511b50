"""``#ROSBAG V2.0`` reader: indexed (bulk numpy over index data and chunk info) or scanned.

An indexed bag is read from its index section (connection records and chunk infos at
``index_pos``) and the index data records that follow each chunk: a chunk is decompressed
only when a selected message lies in it, and message positions come from the index, so
record headers are never parsed on the fast path.  A bag without a usable index
(``index_pos`` 0, a ``.bag.active`` file, an index that is cut or lies) is scanned chunk by
chunk instead; nothing is refused.  A chunk left unterminated by a killed recorder (chunk
header with sizes 0, its records following in the file) is read too.

Where things are.  This module holds :class:`BagV2Reader` (opening, ``messages()``,
``topic_payloads()``, the summary).  The reader is built from one mixin per job, sharing
the state of :class:`~polybag.formats.bag.state.BagV2State` (``state``, with
:class:`Connection` and :class:`Chunk`): ``index`` (the bag header, the index section and
each chunk's index data), ``chunks`` (one chunk's bytes, its records, its payload
positions; :func:`parse_chunk_records`, :func:`partial_decompress`), ``scan`` (the
record-by-record scan of a bag without a usable index, damage) and ``order`` (which chunks
a read loads, grouped and ordered, and their messages).  Damage is bookkept by
:class:`~polybag.formats.bag.base.BagReader` (``base``).
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain
from typing import Any

import numpy as np

from polybag.errors import PolybagError
from polybag.io.compression import decompress as decompress  # re-exported (tests patch it here)
from polybag.io.source import MappedSource
from polybag.model import Channel, ChunkInfo, Message, Summary
from polybag.reader import TopicSelector, topic_filter

from .chunks import parse_chunk_records as parse_chunk_records  # re-exported
from .chunks import partial_decompress as partial_decompress  # re-exported
from .order import OrderMixin
from .scan import ScanMixin
from .state import Chunk as Chunk  # re-exported
from .state import Connection as Connection  # re-exported


class BagV2Reader(OrderMixin, ScanMixin):
    """Reads a ``#ROSBAG V2.0`` bag.  Use :func:`~polybag.formats.bag.reader.open_bag` (or
    ``polybag.open``)."""

    def __init__(self, source: MappedSource, path: str | None, *, recover: bool = False, **options: Any) -> None:
        super().__init__(source, path)
        self._init_state(source, recover, options)
        if recover:
            source.need_all()  # recovery reads every record
        self._read_bag_header()
        if not recover and self.index_pos:
            try:
                self._load_index()
                self.indexed = True
            except PolybagError as e:
                self.index_problem = str(e)
                self.conns = {}
                self.chunks = []
        elif not self.index_pos:
            self.index_problem = "bag header index_pos is 0 (unindexed bag)"
        else:  # recover: never trust the index, but say whether it was usable
            try:
                self._load_index()
            except PolybagError as e:
                self.index_problem = str(e)
            self.conns = {}
            self.chunks = []
        if not self.indexed:
            self._scan()

    @property
    def summary(self) -> Summary:
        """Connections, counts, times and chunks from the index (or the scan); ``extras``
        holds the bag header's fields, why the index was not used and the problems met."""
        if self._summary is None:
            self.load_headers()  # compression and sizes of every chunk
            chans = self.channel_map()
            counts: dict[int, int] = {cid: 0 for cid in chans}
            for ci in self.chunks:
                for cid, n in ci.counts.items():
                    if cid in counts:
                        counts[cid] += n
            nonempty = [ci for ci in self.chunks if sum(ci.counts.values())]
            infos = [
                ChunkInfo(
                    ci.pos,
                    ci.record_len,
                    ci.start,
                    ci.end,
                    ci.compression,
                    ci.data_len,
                    ci.size if ci.size >= 0 else 0,
                    sum(ci.counts.values()),
                )
                for ci in self.chunks
            ]
            extras: dict[str, Any] = {
                "bag_version": self.version,
                "index_pos": self.index_pos,
                "header_conn_count": self.header_conn_count,
                "header_chunk_count": self.header_chunk_count,
            }
            if self.index_problem and not self.indexed:
                extras["index_problem"] = self.index_problem
            if self._recovery.errors:
                extras["errors"] = list(self._recovery.errors)
            self._summary = self.bag_summary(
                dict(chans),
                message_counts=counts,
                start_time=min(ci.start for ci in nonempty) if nonempty else None,
                end_time=max(ci.end for ci in nonempty) if nonempty else None,
                chunks=infos,
                indexed=self.indexed,
                extras=extras,
            )
        return self._summary

    def load_headers(self) -> None:
        """Read every chunk record's header now, in one batch (opening an indexed bag reads
        none: a read fetches a chunk's header with its data).  When one is not an intact
        chunk record header, the index is not used, as when that is found at open: the
        problem becomes ``index_problem`` and the file is scanned (a read already under way
        goes on, and raises that FormatError at that chunk)."""
        if not self.indexed:
            return
        try:
            self._headers(self.chunks)
        except PolybagError as e:
            self.index_problem = str(e)
            self.indexed = False
            self.conns = {}
            self.chunks = []
            self._channels = None
            self._summary = None
            self._scan()

    def channels(self) -> dict[int, Channel]:
        """The channels (from the connection records: no chunk record is read)."""
        return self.channel_map()

    @property
    def has_index(self) -> bool:
        """True when the bag's index (connections and chunk infos) was read at open."""
        return self.indexed

    def chunk_message_counts(self, channel_ids: set[int] | None = None) -> list[tuple[int, int, int]] | None:
        """``(start, end, count of channel_ids)`` per chunk, from the chunk info records'
        per-connection counts; ``None`` for an unindexed bag or one without chunks."""
        if not self.indexed or not self.chunks:
            return None
        out: list[tuple[int, int, int]] = []
        for c in self.chunks:
            n = sum(v for k, v in c.counts.items() if channel_ids is None or k in channel_ids)
            if n:
                out.append((int(c.start), int(c.end), int(n)))
        return out

    def _messages(self, topics: TopicSelector, start: int | None, end: int | None, reverse: bool, order: str) -> Iterator[Message]:
        # the batches (one list per chunk group) are flattened by itertools.chain in C: the
        # per-message cost is a list step, not a generator resumption
        return chain.from_iterable(self._batches(topics, start, end, reverse, order))

    def topic_payloads(self, topic: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every payload of ``topic`` at once: ``(log_times, blob, starts, sizes)``.

        The same messages as ``messages(topics=[topic])`` in log-time order (ties in file
        order), without a Python object per message: only chunks whose chunk info (or scan)
        lists one of the topic's connections are read, each is decompressed once, payload
        positions come from the index data in bulk and the payloads are gathered with numpy.
        ``log_times``, ``starts`` and ``sizes`` are int64 in log-time order; ``blob`` (uint8)
        holds the payloads back to back in file order.  Damage behaves as in
        :meth:`messages`: a FormatError without ``recover``; with it the intact payloads and
        a recovery report.
        """
        from .payloads import Arena, in_file_order

        chans = self.channel_map()
        sel = topic_filter([topic], chans.values())
        chunks = sorted((ci for ci in self.chunks if self._wanted(ci, sel, None, None)), key=lambda c: c.pos)
        # a remote file: the chunks fetched ahead, in order; their headers (declared sizes)
        # come out of that stream
        self.source.hint((ci.pos, self._extent(ci)) for ci in chunks)
        self._headers(chunks)
        # declared sizes bound the blob; a lying header cannot make it outgrow the file much
        bound = sum(max(ci.size, 0) for ci in chunks)
        arena = Arena(min(bound, 4 * self.size + (1 << 20)))
        with self.damage_pass() as done:
            for ci in chunks:
                buf, t, _c, _o, ds, dl = self._selected(ci, sel, None, None)
                t, ds, dl = in_file_order(t, ds, dl)
                arena.add(np.frombuffer(buf, np.uint8), t, ds, dl)
                done.count += len(t)
            result = arena.result()
        return result

    def message_times(self, cids: set[int] | None = None) -> dict[int, np.ndarray]:
        """Log times per connection from the index data records (no chunk data when indexed)."""
        out: dict[int, list[np.ndarray]] = {}
        for ci in self.chunks:
            if ci.times is None:
                try:
                    self._chunk_index(ci)
                except PolybagError:
                    continue
            assert ci.times is not None and ci.conns is not None
            for cid in ci.counts:
                if cids is None or cid in cids:
                    out.setdefault(cid, []).append(ci.times[ci.conns == cid])
        return {k: np.sort(np.concatenate(v)) for k, v in out.items()}


__all__ = ["BagV2Reader", "Chunk", "Connection", "parse_chunk_records", "partial_decompress"]
