"""``#ROSBAG V2.0`` reader: indexed (bulk numpy over index data and chunk info) or scanned.

An indexed bag is read from its index section (connection records and chunk infos at
``index_pos``) and the index data records that follow each chunk: a chunk is decompressed
only when a selected message lies in it, and message positions come from the index, so
record headers are never parsed on the fast path.  A bag without a usable index
(``index_pos`` 0, a ``.bag.active`` file, an index that is cut or lies) is scanned chunk by
chunk instead; nothing is refused.  A chunk left unterminated by a killed recorder (chunk
header with sizes 0, its records following in the file) is read too.

Where things are.  :class:`BagV2Reader` (this module: opening, ``messages()``,
``topic_payloads()``, the summary) owns a few parts, each in its own module:

* ``index``: the index value, :class:`~polybag.formats.bag.index.BagIndex` (the bag
  header's fields, the connections, the chunks), loaded from the index section by plain
  functions;
* ``scan``: :func:`~polybag.formats.bag.scan.scan_bag`, the same index rebuilt by reading
  every record (a bag without a usable index, or read with ``recover``);
* ``chunks``: the :class:`~polybag.formats.bag.chunks.ChunkLoader` (one chunk's header,
  bytes, entries and payload positions, within the reader's limits) and the record walk
  :func:`~polybag.formats.bag.chunks.parse_chunk_records`;
* ``plan``: which chunks a read loads and in what order (a log-time merge of runs);
* ``messages``: the hot kernels (a chunk's messages built in bulk);
* ``damage``: the :class:`~polybag.formats.bag.damage.Damage` bookkeeping.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain
from typing import Any

import numpy as np

from polybag.errors import PolybagError
from polybag.io.compression import max_chunk_bytes
from polybag.io.source import MappedSource
from polybag.model import Channel, ChunkInfo, Message, Summary, TopicPayloads
from polybag.reader import MessageOrder, Reader, TopicSelector, topic_filter

from .chunks import ChunkLoader
from .damage import Damage
from .index import BagIndex, Chunk, Connection, channel_map, load_index, read_bag_header
from .info import bag_info, bag_summary
from .messages import ReadRequest, select_entries
from .plan import chunks_to_read, file_order_batches, first_chunks, log_time_batches, wanted
from .scan import scan_bag


class BagV2Reader(Reader):
    """Reads a ``#ROSBAG V2.0`` bag.  Use :func:`~polybag.formats.bag.reader.open_bag` (or
    ``polybag.open``).

    ``recover``: read past damage (never trusting the index); ``verify_checksums``: check
    lz4 content checksums (skipped on the fast path; ``polybag check`` turns this on);
    ``max_chunk_bytes``: what one chunk may decompress to (a chunk declaring more is an
    error, not an allocation).
    """

    format = "bag"
    version = "2.0"
    #: every bag channel is ROS 1 (an MCAP written from a bag gets the ``ros1`` profile)
    native_profile = "ros1"
    #: ``polybag info`` lays a bag out as ``rosbag info`` (``rosbag info --yaml``) does
    info_style = "rosbag"

    def __init__(self, source: MappedSource, path: str | None, *, recover: bool = False, **options: Any) -> None:
        super().__init__(source, path)
        self.source: MappedSource = source
        self.view = source.view
        self.size = source.size
        self.recover = recover
        self.damage = Damage(recover)
        self._channels: dict[int, Channel] | None = None
        self._summary: Summary | None = None
        if recover:
            source.need_all()  # recovery reads every record
        header = read_bag_header(source, self.path, self.damage)
        self.loader = ChunkLoader(
            source,
            self.path,
            header,
            self.damage,
            max_bytes=max_chunk_bytes(options.get("max_chunk_bytes")),
            verify_checksums=bool(options.get("verify_checksums", False)),
        )
        self.index = BagIndex(header)
        if not header.index_pos:
            self.index.problem = "bag header index_pos is 0 (unindexed bag)"
        else:
            try:
                conns, chunks = load_index(source, self.path, header)
                if recover:  # the whole file is here: check every chunk record now (index problem)
                    self.loader.headers(chunks)
                if not recover:
                    self.index = BagIndex(header, conns, chunks, indexed=True)
            except PolybagError as e:
                self.index.problem = str(e)
        if not self.index.indexed:
            self._rebuild_index()

    def _rebuild_index(self, problem: str | None = None) -> None:
        """The index rebuilt in place from a scan of every record (``problem``, or the one
        already noted: why the index section was not used).  A read under way goes on with
        the connections the scan finds."""
        index = self.index
        if problem is not None:
            index.problem = problem
        index.indexed = False
        index.conns = {}
        index.chunks = []
        self._channels = None
        self._summary = None
        index.chunks = scan_bag(self.loader, index.conns)

    # the parts of the index other modules read (check, reindex)
    @property
    def chunks(self) -> list[Chunk]:
        """The chunks (:class:`~polybag.formats.bag.index.Chunk`), of the index or the scan."""
        return self.index.chunks

    @property
    def conns(self) -> dict[int, Connection]:
        """The connections (:class:`~polybag.formats.bag.index.Connection`) by id."""
        return self.index.conns

    @property
    def indexed(self) -> bool:
        """Read through the index section (never when recovering)."""
        return self.index.indexed

    @property
    def index_problem(self) -> str | None:
        """Why the index section was not used."""
        return self.index.problem

    @property
    def index_pos(self) -> int:
        """The bag header's ``index_pos`` (0: unindexed)."""
        return self.loader.header.index_pos

    @property
    def data_start(self) -> int:
        """Where the records after the bag header record begin."""
        return self.loader.header.data_start

    def info_extras(self) -> dict[str, Any]:
        # a remote file: every chunk header (the summary's compression and sizes) and the
        # index data (the frequencies' times) in one batch
        if self.index.indexed:
            self.loader.fetch_index_data(self.index.chunks)
        return bag_info(self)

    def channel_map(self) -> dict[int, Channel]:
        """The model channels of the connections (by connection id; built once, after the
        index or the scan)."""
        if self._channels is None:
            self._channels = channel_map(self.index.conns)
        return self._channels

    @property
    def summary(self) -> Summary:
        """Connections, counts, times and chunks from the index (or the scan); ``extras``
        holds the bag header's fields, why the index was not used and the problems met."""
        if self._summary is None:
            self.load_headers()  # compression and sizes of every chunk
            chans = self.channel_map()
            chunks = self.index.chunks
            counts: dict[int, int] = {cid: 0 for cid in chans}
            for ci in chunks:
                for cid, n in ci.counts.items():
                    if cid in counts:
                        counts[cid] += n
            nonempty = [ci for ci in chunks if sum(ci.counts.values())]
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
                for ci in chunks
            ]
            header = self.loader.header
            extras: dict[str, Any] = {
                "bag_version": self.version,
                "index_pos": header.index_pos,
                "header_conn_count": header.conn_count,
                "header_chunk_count": header.chunk_count,
            }
            if self.index.problem and not self.index.indexed:
                extras["index_problem"] = self.index.problem
            if self.damage.recovery.errors:
                extras["errors"] = list(self.damage.recovery.errors)
            self._summary = bag_summary(
                self.version,
                self.size,
                dict(chans),
                message_counts=counts,
                start_time=min(ci.start for ci in nonempty) if nonempty else None,
                end_time=max(ci.end for ci in nonempty) if nonempty else None,
                chunks=infos,
                indexed=self.index.indexed,
                extras=extras,
            )
        return self._summary

    def load_headers(self) -> None:
        """Read every chunk record's header now, in one batch (opening an indexed bag reads
        none: a read fetches a chunk's header with its data).  When one is not an intact
        chunk record header, the index is not used, as when that is found at open: the
        problem becomes ``index_problem`` and the file is scanned (a read already under way
        goes on, and raises that FormatError at that chunk)."""
        if not self.index.indexed:
            return
        try:
            self.loader.headers(self.index.chunks)
        except PolybagError as e:
            self._rebuild_index(str(e))

    def channels(self) -> dict[int, Channel]:
        """The channels (from the connection records: no chunk record is read)."""
        return self.channel_map()

    @property
    def has_index(self) -> bool:
        """True when the bag's index (connections and chunk infos) was read at open."""
        return self.index.indexed

    def chunk_message_counts(self, channel_ids: set[int] | None = None) -> list[tuple[int, int, int]] | None:
        """``(start, end, count of channel_ids)`` per chunk, from the chunk info records'
        per-connection counts; ``None`` for an unindexed bag or one without chunks."""
        if not self.index.indexed or not self.index.chunks:
            return None
        out: list[tuple[int, int, int]] = []
        for c in self.index.chunks:
            n = sum(v for k, v in c.counts.items() if channel_ids is None or k in channel_ids)
            if n:
                out.append((int(c.start), int(c.end), int(n)))
        return out

    def _messages(self, topics: TopicSelector, start: int | None, end: int | None, reverse: bool, order: MessageOrder) -> Iterator[Message]:
        # the batches (one list per chunk group) are flattened by itertools.chain in C: the
        # per-message cost is a list step, not a generator resumption
        return chain.from_iterable(self._batches(topics, start, end, reverse, order))

    def _batches(
        self, topics: TopicSelector, start: int | None, end: int | None, reverse: bool, order: MessageOrder
    ) -> Iterator[list[Message]]:
        """The messages of a read, one list per chunk (or per stretch of overlapping
        chunks, merged), in one damage pass."""
        chans = self.channel_map()
        sel = topic_filter(topics, chans.values())
        index = self.index
        chunks = chunks_to_read(index.chunks, sel, start, end)
        # a remote file: the chunks (and the index data after each) fetched ahead, in order
        # (a chunk whose header is not read yet: up to the next chunk, header and data
        # together); at first only those the first batch can come from, the rest once the
        # caller asks for more than that batch (the first message costs a chunk, not 64 MiB)
        loader = self.loader
        source = self.source
        source.hint((ci.pos, loader.extent(ci)) for ci in first_chunks(chunks, order, reverse))
        batches = file_order_batches if order == "file" else log_time_batches
        hinted = False
        with self.damage.reading(self) as done:
            for batch in batches(loader, index, chunks, ReadRequest(sel, start, end, reverse, order), chans):
                done.count += len(batch)
                yield batch
                if not hinted:
                    hinted = True
                    source.hint((ci.pos, loader.extent(ci)) for ci in sorted(chunks, key=lambda c: c.pos))

    def topic_payloads(self, topic: str) -> TopicPayloads:
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
        from polybag.formats.shared.payloads import Arena, in_file_order

        chans = self.channel_map()
        sel = topic_filter([topic], chans.values())
        loader = self.loader
        chunks = sorted((ci for ci in self.index.chunks if wanted(ci, sel, None, None)), key=lambda c: c.pos)
        # a remote file: the chunks fetched ahead, in order; their headers (declared sizes)
        # come out of that stream
        self.source.hint((ci.pos, loader.extent(ci)) for ci in chunks)
        loader.headers(chunks)
        # declared sizes bound the blob; a lying header cannot make it outgrow the file much
        bound = sum(max(ci.size, 0) for ci in chunks)
        arena = Arena(min(bound, 4 * self.size + (1 << 20)))
        with self.damage.reading(self) as done:
            for ci in chunks:
                buf = loader.load(ci, self.index.conns)
                t, _c, _o, ds, dl = select_entries(ci, sel, None, None)
                t, ds, dl = in_file_order(t, ds, dl)
                arena.add(np.frombuffer(buf, np.uint8), t, ds, dl)
                done.count += len(t)
            result = arena.result()
        return result

    def message_times(self, cids: set[int] | None = None) -> dict[int, np.ndarray]:
        """Log times per connection from the index data records (no chunk data when indexed)."""
        out: dict[int, list[np.ndarray]] = {}
        if self.index.indexed:  # a remote file: all of it in one batch
            self.loader.fetch_index_data(self.index.chunks)
        for ci in self.index.chunks:
            if ci.times is None:
                try:
                    self.loader.read_index_data(ci, self.index.conns)
                except PolybagError:
                    continue
            assert ci.times is not None and ci.conns is not None
            for cid in ci.counts:
                if cids is None or cid in cids:
                    out.setdefault(cid, []).append(ci.times[ci.conns == cid])
        return {k: np.sort(np.concatenate(v)) for k, v in out.items()}


__all__ = ["BagV2Reader"]
