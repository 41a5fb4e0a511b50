"""The index of a 2.0 bag: the bag header record, the index section (connection records and
chunk infos at ``index_pos``) and the index data records after each chunk.

:class:`IndexMixin` reads them and checks them against each other (no chunk record is read
at open: a chunk's header comes with its data, see
:meth:`~polybag.formats.bag.chunks.ChunksMixin._header`); an index that does not hold
together is not used (the reader scans the file instead).  A chunk's message entries come from its
index data records in bulk, or from its own records when those are damaged.
"""

from __future__ import annotations

import numpy as np

from polybag.errors import FormatError, UnsupportedError

from .chunks import ChunksMixin
from .records import (
    CHUNK_INFO_DTYPE,
    MAGIC_V20,
    OP_CHUNK_INFO,
    OP_CONNECTION,
    OP_FILE_HEADER,
    OP_INDEX_DATA,
    OP_NAMES,
    HeaderFields,
    index_data_count,
    op_of,
    read_record_at,
)
from .state import _EMPTY_I64, Chunk, Connection, _conn_from_record


class IndexMixin(ChunksMixin):
    """The bag header, the index section and each chunk's index data records."""

    def _read_bag_header(self) -> None:
        """``index_pos``, the declared counts and ``data_start`` from the bag header record
        (a damaged one, when recovering: noted, and the data scanned from where it would end)."""
        pos = len(MAGIC_V20)
        try:
            h, ds, dl, nxt = read_record_at(self.view, pos, self.size, self.path)
            op = op_of(h, self.path, pos)
            if op != OP_FILE_HEADER:
                raise FormatError(f"expected the bag header record (op 3), found op {op}", self.path, pos)
            f = HeaderFields(h, self.path, pos, "bag header")
            enc = f.str("encryptor", "")
            if enc:
                raise UnsupportedError(
                    f"{self.path or '<buffer>'}: encrypted bag (encryptor {enc!r}); polybag cannot decrypt chunks"
                )
            self.index_pos = f.u64("index_pos")
            self.header_conn_count = f.u32("conn_count") if f.has("conn_count") else 0
            self.header_chunk_count = f.u32("chunk_count") if f.has("chunk_count") else 0
            self.data_start = nxt
        except FormatError as e:
            if not self.recover:
                raise
            # a rosbag header record is 4096 bytes; resume scanning after where it would end
            self.data_start = min(self.size, pos + 4096)
            self._recovery.note(str(e), self.data_start - pos)
            self.index_pos = 0

    def _load_index(self) -> None:
        """``conns`` and ``chunks`` from the index section, checked (raises when it does not
        hold together)."""
        p = self.path
        if not self.data_start <= self.index_pos <= self.size:
            raise FormatError(f"index_pos {self.index_pos} lies outside the file", p, 13)
        pos = self.index_pos
        self.source.need(pos, self.size - pos)  # a remote file: the index section only
        view = self.view
        conns: dict[int, Connection] = {}
        infos: list[Chunk] = []
        while pos < self.size:
            h, ds, dl, nxt = read_record_at(view, pos, self.size, p)
            op = op_of(h, p, pos)
            if op == OP_CONNECTION:
                c = _conn_from_record(h, view, ds, dl, p, pos)
                conns[c.id] = c
            elif op == OP_CHUNK_INFO:
                infos.append(self._chunk_info(h, ds, dl, pos))
            else:
                raise FormatError(f"unexpected {OP_NAMES.get(op, f'op {op}')} record in the index section", p, pos)
            pos = nxt
        self._check_index(conns, infos)
        # each chunk's extent: up to the next chunk record (or the index section)
        ends = sorted({ci.pos for ci in infos} | {self.index_pos})
        nxt_of = dict(zip(ends, ends[1:]))
        for ci in infos:
            ci.next_pos = nxt_of[ci.pos]
        if self.recover:  # the whole file is here: check every chunk record now (index_problem)
            self._headers(infos)
        self.conns = conns
        self.chunks = infos

    def _chunk_info(self, h: dict[str, bytes], ds: int, dl: int, pos: int) -> Chunk:
        """The :class:`Chunk` a chunk info record (at ``pos``, data at ``ds``) describes."""
        p = self.path
        f = HeaderFields(h, p, pos, "chunk info")
        ver = f.u32("ver")
        if ver != 1:
            raise UnsupportedError(f"{p}: offset {pos}: chunk info version {ver} (known: 1)")
        count = f.u32("count")
        if dl != count * CHUNK_INFO_DTYPE.itemsize:
            raise FormatError(f"chunk info data has {dl} bytes, count {count} needs {count * 8}", p, pos)
        arr = np.frombuffer(self.view[ds : ds + dl], CHUNK_INFO_DTYPE)
        counts: dict[int, int] = {}
        for c_, n_ in zip(arr["conn"].tolist(), arr["count"].tolist()):
            counts[c_] = counts.get(c_, 0) + n_
        return Chunk(f.u64("chunk_pos"), 0, 0, "none", 0, f.time("start_time"), f.time("end_time"), counts, lazy=True)

    def _check_index(self, conns: dict[int, Connection], infos: list[Chunk]) -> None:
        """The index section against the bag header's counts and itself: every chunk info
        points into the data section and names known connections.  The chunk records are
        not read here (see :meth:`_header`): a chunk info pointing at something else than a
        chunk record is found when that chunk is first needed."""
        p = self.path
        if len(infos) != self.header_chunk_count:
            raise FormatError(
                f"bag header declares {self.header_chunk_count} chunks, index has {len(infos)} chunk info records",
                p,
                self.index_pos,
            )
        if len(conns) < self.header_conn_count:
            raise FormatError(
                f"bag header declares {self.header_conn_count} connections, index has {len(conns)}", p, self.index_pos
            )
        for ci in infos:
            self._check_chunk_pos(ci)
            for cid in ci.counts:
                if cid not in conns:
                    raise FormatError(f"chunk info names connection {cid}, which has no connection record", p, ci.pos)

    def _chunk_index(self, ci: Chunk, fallback: bool = True) -> None:
        """Read the index data records after a chunk into ``ci.times/conns/offsets``.

        When they are damaged, the chunk's own records are scanned instead (``fallback``)
        or the error is raised.
        """
        self._header(ci)
        p = self.path
        pos = ci.pos + ci.record_len
        parts: list[np.ndarray] = []
        conn_parts: list[np.ndarray] = []
        limit = self.index_pos
        if pos <= ci.next_pos:  # (an indexed bag) the next chunk record ends the index data
            limit = ci.next_pos
        src = self.source
        src.need(pos, min(12 * sum(ci.counts.values()) + 256 * len(ci.counts), limit - pos))  # the index data
        try:
            while pos < limit:
                src.need(pos, min(1024, limit - pos))
                h, ds, dl, nxt = read_record_at(self.view, pos, limit, p)
                src.need(ds, dl)
                if op_of(h, p, pos) != OP_INDEX_DATA:
                    break
                f = HeaderFields(h, p, pos, "index data")
                count = index_data_count(f, dl, 1, p, pos)
                # (sec, nsec, offset) u32 triples, kept as plain rows: concatenating and
                # splitting plain arrays is cheaper than structured field access
                conn = f.u32("conn")
                if conn not in ci.counts:
                    raise FormatError(
                        f"index data names connection {conn}, which the chunk info does not list for this chunk",
                        p,
                        pos,
                    )
                parts.append(np.frombuffer(self.view[ds : ds + dl], "<u4").reshape(count, 3))
                conn_parts.append(np.full(count, conn, np.uint32))
                pos = nxt
            total = sum(len(a) for a in parts)
            if total != sum(ci.counts.values()):
                raise FormatError(
                    f"index data after the chunk lists {total} messages, chunk info says {sum(ci.counts.values())}",
                    p,
                    ci.pos,
                )
        except FormatError:
            if not fallback:
                raise
            # index data damaged: fall back to the chunk's own records
            self._scan_chunk_records(ci)
            return
        if parts:
            arr = np.concatenate(parts) if len(parts) > 1 else parts[0]
            ci.times = arr[:, 0].astype(np.int64) * 1_000_000_000 + arr[:, 1]
            ci.offsets = arr[:, 2].astype(np.int64)
            ci.conns = np.concatenate(conn_parts) if len(conn_parts) > 1 else conn_parts[0]
        else:
            ci.times = ci.offsets = _EMPTY_I64
            ci.conns = np.zeros(0, np.uint32)
        ci.index_end = pos
