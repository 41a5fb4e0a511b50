"""One chunk of a 2.0 bag: its header, its uncompressed bytes and the records in them.

* :func:`parse_chunk_records`: the walk over an uncompressed chunk's records (one fixed
  struct for the message header rosbag writes, the general record parser otherwise).
* :func:`partial_decompress`: as much of a cut or damaged compressed chunk as decompresses.
* :func:`payload_positions`: payload offsets and lengths from record offsets, in bulk.
* :class:`ChunkLoader`: a chunk's header (read when first needed), its bytes (decompressed
  within the reader's cap), its entries from the index data records after it (or from a
  walk over its records when those are damaged), its payload positions.
"""

from __future__ import annotations

import struct

import numpy as np

from polybag.errors import FormatError, PolybagError
from polybag.io.compression import OutputBuffer, decompress, max_chunk_bytes, normalize
from polybag.io.source import MappedSource

from .damage import Damage
from .index import EMPTY_I64, BagHeader, Chunk, Connection, check_chunk_pos, connection_from_record
from .records import (
    OP_CHUNK,
    OP_CONNECTION,
    OP_INDEX_DATA,
    OP_MSG_DATA,
    OP_NAMES,
    U32,
    HeaderFields,
    index_data_count,
    op_of,
    read_record_at,
)

_u32 = U32.unpack_from

# <hl=38><4>op=\x02 <9>conn=XXXX <13>time=SSSSNNNN <data_len>, viewed as fixed fields:
# hl u32 | 8 bytes | 9 bytes | conn u32 | 9 bytes | sec u32 | nsec u32 | data_len u32
_FAST_MSG = struct.Struct("<I8s9sI9sIII")
_OP2_F = b"\x04\x00\x00\x00op=\x02"
_CONN_F = b"\x09\x00\x00\x00conn="
_TIME_F = b"\x0d\x00\x00\x00time="
# C++ order <9>conn=XXXX<4>op=\x02: the first 8 bytes, then 9 bytes = conn tail + op field
_CONN_F9 = b"\x09\x00\x00\x00conn"
_OP2_INT = int.from_bytes(b"op=\x02", "little")


def parse_chunk_records(
    buf: bytes | memoryview,
    base: int,
    path: str | None,
    conns: dict[int, Connection],
    *,
    errors: list[str] | None = None,
    limit: int | None = None,
) -> tuple[list[int], list[int], list[int], list[int], list[int], FormatError | None, int]:
    """Walk the records inside an uncompressed chunk.

    Returns lists (times, conns, record offsets, payload offsets, payload lengths), the
    first error (records after it are not read) and the end of the last intact record.  Connection records found are added to
    ``conns``.
    """
    times: list[int] = []
    cids: list[int] = []
    offs: list[int] = []
    dst: list[int] = []
    dls: list[int] = []
    n = len(buf) if limit is None else limit
    pos = 0
    err: FormatError | None = None
    fast = _FAST_MSG.unpack_from
    while pos < n:
        # fast path: the 38-byte message header rosbag writes (fields conn/op/time in
        # C++ order or op/conn/time in Python's), no dict needed
        if pos + 46 <= n:
            hl, f0, f1, cv, f2, tv_s, tv_ns, dl = fast(buf, pos)
            if hl == 38 and f2 == _TIME_F and (
                (f0 == _OP2_F and f1 == _CONN_F)
                or (f0 == _CONN_F9 and cv == _OP2_INT and f1[0] == 0x3D and f1[5:] == b"\x04\x00\x00\x00")
            ):
                if f0 == _CONN_F9:  # C++ order: the conn value sits at offset 13
                    cv = _u32(buf, pos + 13)[0]
                ds = pos + 46
                if dl <= n - ds:
                    times.append(tv_s * 1_000_000_000 + tv_ns)
                    cids.append(cv)
                    offs.append(pos)
                    dst.append(ds)
                    dls.append(dl)
                    pos = ds + dl
                    continue
        try:
            h, ds, dl, nxt = read_record_at(buf, pos, n, path, base)
            op = op_of(h, path, base + pos)
            if op == OP_MSG_DATA:
                c = h.get("conn")
                t = h.get("time")
                if c is None or len(c) != 4 or t is None or len(t) != 8:
                    raise FormatError("message data record lacks a 4-byte conn or 8-byte time", path, base + pos)
                s, ns = _u32(t, 0)[0], _u32(t, 4)[0]
                times.append(s * 1_000_000_000 + ns)
                cids.append(_u32(c)[0])
                offs.append(pos)
                dst.append(ds)
                dls.append(dl)
            elif op == OP_CONNECTION:
                conn = connection_from_record(h, buf, ds, dl, path, base + pos)
                conns.setdefault(conn.id, conn)
            # other ops inside a chunk are ignored
            pos = nxt
        except FormatError as e:
            err = e
            if errors is not None:
                errors.append(str(e))
            break
    return times, cids, offs, dst, dls, err, pos


def partial_decompress(
    name: str, data: bytes | memoryview, limit: int, max_bytes: int | None = None
) -> bytes | memoryview:
    """As much of a cut or damaged compressed stream as decompresses: at most ``limit``
    bytes, and never more than the cap ``max_bytes`` (None: the process-wide one, see
    :func:`~polybag.io.compression.max_chunk_bytes`)."""
    import bz2

    limit = min(limit, max_chunk_bytes(max_bytes))
    n = normalize(name)
    if n == "none":
        return bytes(data[:limit])
    if n == "lz4":
        from .lz4fast import partial_lz4

        return partial_lz4(data, limit)
    if n != "bz2":
        # zstd is not a bag compression: decompress strictly (bounded), salvage nothing on error
        try:
            return decompress(n, data, None, max_bytes=limit)
        except PolybagError:
            return b""
    dec = bz2.BZ2Decompressor()
    sink = OutputBuffer()
    step = 1 << 16
    mv = memoryview(data)
    try:
        for i in range(0, len(mv), step):
            chunk: bytes | memoryview = mv[i : i + step]
            while sink.size < limit and not dec.eof:
                # max_length bounds each call's output; what the step holds beyond it stays
                # buffered in the decompressor and comes out on the next call
                piece = dec.decompress(chunk, max_length=min(1 << 22, limit - sink.size))
                chunk = b""
                sink.add(piece)
                if not piece or dec.needs_input:
                    break
            if sink.size >= limit or dec.eof:
                break
    except (OSError, RuntimeError, ValueError, EOFError):
        pass
    return sink.view()


def payload_positions(ci: Chunk, buf: bytes | memoryview, path: str | None) -> None:
    """``ci``'s payload offsets and lengths (``dstart``, ``dlen``) from its record offsets,
    in bulk, bounds-checked against the chunk's bytes ``buf``."""
    assert ci.offsets is not None
    n = len(buf)
    o = ci.offsets
    if not len(o):
        ci.dstart = ci.dlen = EMPTY_I64
        return
    arr = np.frombuffer(buf, np.uint8)
    bad = o + 8 > n
    if bad.any():
        i = int(np.argmax(bad))
        raise FormatError(f"index data points at offset {int(o[i])} of a {n}-byte chunk", path, ci.pos)

    # a little-endian u32 starting at every byte of the chunk (a read-only view, no
    # copy): one fancy index decodes the header fields at many offsets at once (half
    # the time of gathering 4-byte rows and viewing them as u32)
    every = np.ndarray((max(n - 3, 0),), "<u4", arr, 0, (1,))

    def u32_at(idx: np.ndarray) -> np.ndarray:
        at: np.ndarray = every[idx]
        return at.astype(np.int64)

    hl = u32_at(o)
    lpos = o + 4 + hl
    bad = lpos + 4 > n
    if bad.any():
        i = int(np.argmax(bad))
        raise FormatError(f"message record header at chunk offset {int(o[i])} runs past the chunk end", path, ci.pos)
    dl = u32_at(lpos)
    ds = lpos + 4
    bad = ds + dl > n
    if bad.any():
        i = int(np.argmax(bad))
        raise FormatError(f"message record data at chunk offset {int(o[i])} runs past the chunk end", path, ci.pos)
    ci.dstart = ds
    ci.dlen = dl


def set_entries(ci: Chunk, t: list[int], c: list[int], o: list[int], d: list[int], dl: list[int]) -> None:
    """``ci``'s entries (times, connections, record and payload offsets, payload lengths)."""
    ci.times = np.array(t, np.int64)
    ci.conns = np.array(c, np.uint32)
    ci.offsets = np.array(o, np.int64)
    ci.dstart = np.array(d, np.int64)
    ci.dlen = np.array(dl, np.int64)


class ChunkLoader:
    """Loads the chunks of one 2.0 bag: from ``source`` (``path`` for errors), within the
    bag header's bounds (``header``), decompressing at most ``max_chunk_bytes`` per chunk
    (lz4 content checksums checked only with ``verify_checksums``), and noting damage in
    ``damage``."""

    def __init__(
        self, source: MappedSource, path: str | None, header: BagHeader, damage: Damage, *, max_bytes: int, verify_checksums: bool
    ) -> None:
        self.source = source
        self.view = source.view
        self.path = path
        self.header = header
        self.damage = damage
        self.max_chunk_bytes = max_bytes
        self.verify_checksums = verify_checksums
        #: bytes cost requests (a remote source): plans read as few chunks as they can
        self.remote = source.stats is not None

    def header_of(self, ci: Chunk) -> None:
        """Fill in ``ci``'s header fields (compression, sizes, where its data lies) from its
        chunk record, if not done yet.  A chunk info pointing at anything but an intact
        chunk record header raises a FormatError naming the offset (each time it is asked)."""
        if ci.lazy:
            self._read_chunk_header(ci)
            ci.lazy = False

    def headers(self, chunks: list[Chunk]) -> None:
        """:meth:`header_of` every chunk in ``chunks``, their headers fetched in one batch
        (a remote file: one multi-range request, or concurrent ones)."""
        todo = [ci for ci in chunks if ci.lazy]
        if todo:
            self.source.need_many((ci.pos, 128) for ci in todo)
            for ci in todo:
                self.header_of(ci)

    def fetch_index_data(self, chunks: list[Chunk]) -> None:
        """Fetch, in one batch, the chunk record headers and the index data records of
        ``chunks`` whose entries are not read yet (a remote file: one multi-range request,
        or concurrent ones; a chunk's index data and the next chunk's header are neighbours,
        so they share a range).  A chunk's index data lies at the end of its extent: one
        record per connection of its chunk info, 55 bytes of header and 12 per message as
        rosbag writes them; where a bag's records are longer, reading them fetches the rest."""
        ranges: list[tuple[int, int]] = []
        for ci in chunks:
            if ci.times is not None:
                continue
            if ci.lazy:
                ranges.append((ci.pos, 128))
            if ci.next_pos > ci.pos:
                n = sum(55 + 12 * max(c, 0) for c in ci.counts.values())
                n = min(n, ci.next_pos - ci.pos)
                ranges.append((ci.next_pos - n, n))
        if ranges:
            self.source.need_many(ranges)

    def extent(self, ci: Chunk) -> int:
        """How many bytes from ``ci.pos`` hold the chunk record and its index data records
        (what a read of the chunk fetches): up to the next chunk (or the index section) for
        a chunk of the index, whether its header is read or not; else the record and room
        for the index data the chunk info announces."""
        if ci.next_pos > ci.pos:
            return ci.next_pos - ci.pos
        return ci.record_len + 12 * sum(ci.counts.values()) + 256 * len(ci.counts)

    def _read_chunk_header(self, ci: Chunk) -> None:
        """Compression, sizes and data position of the chunk record a chunk info points at."""
        p = self.path
        index_pos = self.header.index_pos
        check_chunk_pos(self.header, ci, p)
        self.source.need(ci.pos, 128)
        if ci.pos + 4 <= index_pos:  # a remote file: the whole header, however long
            self.source.need(ci.pos, 8 + int.from_bytes(self.view[ci.pos : ci.pos + 4], "little"))
        h, ds, dl, nxt = read_record_at(self.view, ci.pos, index_pos, p)
        op = op_of(h, p, ci.pos)
        if op != OP_CHUNK:
            raise FormatError(f"chunk info points at a {OP_NAMES.get(op, f'op {op}')} record, not a chunk", p, ci.pos)
        f = HeaderFields(h, p, ci.pos, "chunk")
        ci.compression = normalize(f.str("compression", "none"))
        ci.size = f.u32("size")
        ci.data_start = ds
        ci.data_len = dl
        ci.record_len = nxt - ci.pos
        ci.index_end = nxt

    def read_index_data(self, ci: Chunk, conns: dict[int, Connection], fallback: bool = True) -> None:
        """Read the index data records after a chunk into ``ci.times/conns/offsets``.

        When they are damaged, the chunk's own records are walked instead (``fallback``;
        connection records met there are added to ``conns``) or the error is raised.
        """
        self.header_of(ci)
        p = self.path
        pos = ci.pos + ci.record_len
        parts: list[np.ndarray] = []
        conn_parts: list[np.ndarray] = []
        limit = self.header.index_pos
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
            self.entries_from_records(ci, conns)
            return
        if parts:
            arr = np.concatenate(parts) if len(parts) > 1 else parts[0]
            ci.times = arr[:, 0].astype(np.int64) * 1_000_000_000 + arr[:, 1]
            ci.offsets = arr[:, 2].astype(np.int64)
            ci.conns = np.concatenate(conn_parts) if len(conn_parts) > 1 else conn_parts[0]
        else:
            ci.times = ci.offsets = EMPTY_I64
            ci.conns = np.zeros(0, np.uint32)
        ci.index_end = pos

    def entries_from_records(self, ci: Chunk, conns: dict[int, Connection]) -> None:
        """Entries of ``ci`` from a walk over its records (its index data is damaged)."""
        buf = self.buffer(ci)
        t, c, o, d, dl, err, _end = parse_chunk_records(buf, ci.data_start, self.path, conns)
        if err is not None:
            raise err
        unknown = [cid for cid in c if cid not in conns]
        if unknown:
            msg = f"{len(unknown)} messages of connection {unknown[0]}, which has no connection record"
            if not self.damage.recover:
                raise FormatError(msg, self.path, ci.pos)
            self.damage.recovery.note(f"{self.path}: offset {ci.pos}: {msg}")
            keep = [i for i, cid in enumerate(c) if cid in conns]
            t, c, o, d, dl = ([a[i] for i in keep] for a in (t, c, o, d, dl))
        set_entries(ci, t, c, o, d, dl)

    def buffer(self, ci: Chunk) -> bytes | memoryview:
        """``ci``'s uncompressed bytes (what was recovered of it, for a damaged one)."""
        if ci.buffer is not None:
            return ci.buffer
        self.header_of(ci)
        self.source.need(ci.data_start, ci.data_len)
        raw = self.view[ci.data_start : ci.data_start + ci.data_len]
        return self.decompress(ci.compression, raw, ci.size, ci.pos)

    def decompress(self, comp: str, raw: memoryview, size: int, pos: int) -> bytes | memoryview:
        """A chunk's data: lz4 through the block-level decoder unless checksums are verified."""
        if comp == "lz4" and not self.verify_checksums:
            from .lz4fast import decompress_lz4

            return decompress_lz4(raw, size, path=self.path, offset=pos, max_bytes=self.max_chunk_bytes)
        return decompress(comp, raw, size, path=self.path, offset=pos, max_bytes=self.max_chunk_bytes)

    def load(self, ci: Chunk, conns: dict[int, Connection]) -> bytes | memoryview:
        """Entries of ``ci`` (index data, or a record walk) and its uncompressed bytes."""
        # a remote file: the chunk record (header too, when not read yet) and the index data
        # after it in one request
        self.source.need(ci.pos, self.extent(ci))
        if ci.times is None:
            self.read_index_data(ci, conns)
        buf = self.buffer(ci)
        if ci.dstart is None:
            payload_positions(ci, buf, self.path)
        return buf
