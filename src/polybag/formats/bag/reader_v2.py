"""``#ROSBAG V2.0`` reader: indexed (bulk numpy over index data and chunk info) or scanned.

An indexed bag is read from its index section (connection records and chunk infos at
``index_pos``) and the index data records that follow each chunk: a chunk is decompressed
only when a selected message lies in it, and message positions come from the index, so
record headers are never parsed on the fast path.  A bag without a usable index
(``index_pos`` 0, a ``.bag.active`` file, an index that is cut or lies) is scanned chunk by
chunk instead; nothing is refused.  A chunk left unterminated by a killed recorder (chunk
header with sizes 0, its records following in the file) is read too.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import chain, repeat
from typing import Any

import numpy as np

from polybag.compression import ChunkLimitError, OutputBuffer, decompress, max_chunk_bytes, normalize
from polybag.errors import FormatError, PolybagError, TruncatedError, UnsupportedError
from polybag.model import Channel, ChunkInfo, Message, Schema, Summary
from polybag.reader import TopicSelector, topic_filter
from polybag.source import MappedSource

from .base import BagReader, gc_paused
from .records import (
    CHUNK_INFO_DTYPE,
    MAGIC_V20,
    OP_CHUNK,
    OP_CHUNK_INFO,
    OP_CONNECTION,
    OP_FILE_HEADER,
    OP_INDEX_DATA,
    OP_MSG_DATA,
    OP_NAMES,
    U32,
    HeaderFields,
    index_data_count,
    op_of,
    parse_header,
    read_record_at,
)

_u32 = U32.unpack_from
_EMPTY_I64 = np.zeros(0, np.int64)
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


@dataclass
class Connection:
    """A bag connection record: its id, topic and the connection header fields."""

    id: int
    topic: str
    fields: dict[str, bytes]

    @property
    def type(self) -> str:
        return self.fields.get("type", b"").decode("utf-8", "replace")

    @property
    def md5sum(self) -> str:
        return self.fields.get("md5sum", b"").decode("ascii", "replace")

    @property
    def definition(self) -> bytes:
        return self.fields.get("message_definition", b"")


@dataclass
class Chunk:
    """One chunk (or a run of records outside any chunk) and what is known about it."""

    pos: int  # file offset of the chunk record (or of the first loose record)
    data_start: int  # file offset of the (compressed) chunk data
    data_len: int  # compressed length present in the file
    compression: str
    size: int  # declared uncompressed size (-1: unknown, cut chunk)
    start: int = 0
    end: int = 0
    counts: dict[int, int] = field(default_factory=dict)
    record_len: int = 0
    # message entries (uncompressed coordinates); None until loaded
    times: np.ndarray | None = None
    conns: np.ndarray | None = None
    offsets: np.ndarray | None = None  # record offsets
    dstart: np.ndarray | None = None  # payload offsets (scan only)
    dlen: np.ndarray | None = None
    buffer: bytes | memoryview | None = None  # kept for loose / partially recovered chunks
    index_end: int = 0  # file offset after the chunk's index data records
    valid_end: int = -1  # end of the last intact record in the uncompressed data (-1: all)
    damaged: bool = False


def _conn_from_record(
    h: dict[str, bytes], view: memoryview | bytes, dstart: int, dlen: int, path: str | None, offset: int
) -> Connection:
    f = HeaderFields(h, path, offset, "connection")
    cid = f.u32("conn")
    topic = f.str("topic")
    fields = parse_header(view, dstart, dlen, path, offset)
    return Connection(cid, topic, fields)


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
                conn = _conn_from_record(h, buf, ds, dl, path, base + pos)
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
    :func:`~polybag.compression.max_chunk_bytes`)."""
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


class BagV2Reader(BagReader):

    def __init__(self, source: MappedSource, path: str | None, *, recover: bool = False, **options: Any) -> None:
        super().__init__(source, path)
        self.recover = recover
        # lz4 content checksums are skipped on the fast path; `polybag check` turns this on
        self.verify_checksums = bool(options.get("verify_checksums", False))
        # what one chunk may decompress to (a chunk declaring more is an error, not an allocation)
        self.max_chunk_bytes = max_chunk_bytes(options.get("max_chunk_bytes"))
        self.view = source.view
        self.size = source.size
        self.version = "2.0"
        self.recovery_report: dict[str, Any] | None = None
        self.conns: dict[int, Connection] = {}
        self.chunks: list[Chunk] = []
        self.indexed = False
        self.index_problem: str | None = None
        self.scan_error: FormatError | None = None
        self.scan_errors: list[str] = []
        self.bytes_skipped = 0
        self._scanned = False
        self._channels: dict[int, Channel] | None = None
        self._summary: Summary | None = None
        self.index_pos = 0
        self.header_conn_count = 0
        self.header_chunk_count = 0
        self.data_start = len(MAGIC_V20)
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

    # --- bag header and index ---------------------------------------------------------------
    def _read_bag_header(self) -> None:
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
            self.scan_errors.append(str(e))
            # a rosbag header record is 4096 bytes; resume scanning after where it would end
            self.data_start = min(self.size, pos + 4096)
            self.bytes_skipped += self.data_start - pos
            self.index_pos = 0

    def _load_index(self) -> None:
        p = self.path
        if not self.data_start <= self.index_pos <= self.size:
            raise FormatError(f"index_pos {self.index_pos} lies outside the file", p, 13)
        pos = self.index_pos
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
                f = HeaderFields(h, p, pos, "chunk info")
                ver = f.u32("ver")
                if ver != 1:
                    raise UnsupportedError(f"{p}: offset {pos}: chunk info version {ver} (known: 1)")
                count = f.u32("count")
                if dl != count * CHUNK_INFO_DTYPE.itemsize:
                    raise FormatError(f"chunk info data has {dl} bytes, count {count} needs {count * 8}", p, pos)
                arr = np.frombuffer(view[ds : ds + dl], CHUNK_INFO_DTYPE)
                counts: dict[int, int] = {}
                for c_, n_ in zip(arr["conn"].tolist(), arr["count"].tolist()):
                    counts[c_] = counts.get(c_, 0) + n_
                infos.append(
                    Chunk(f.u64("chunk_pos"), 0, 0, "none", 0, f.time("start_time"), f.time("end_time"), counts)
                )
            else:
                raise FormatError(f"unexpected {OP_NAMES.get(op, f'op {op}')} record in the index section", p, pos)
            pos = nxt
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
            self._read_chunk_header(ci)
            for cid in ci.counts:
                if cid not in conns:
                    raise FormatError(f"chunk info names connection {cid}, which has no connection record", p, ci.pos)
        self.conns = conns
        self.chunks = infos

    def _read_chunk_header(self, ci: Chunk) -> None:
        p = self.path
        if not self.data_start <= ci.pos < self.index_pos:
            raise FormatError(f"chunk info points at {ci.pos}, outside the data section", p, ci.pos)
        h, ds, dl, nxt = read_record_at(self.view, ci.pos, self.index_pos, p)
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

    def _chunk_index(self, ci: Chunk, fallback: bool = True) -> None:
        """Read the index data records after a chunk into ``ci.times/conns/offsets``.

        When they are damaged, the chunk's own records are scanned instead (``fallback``)
        or the error is raised.
        """
        p = self.path
        pos = ci.pos + ci.record_len
        parts: list[np.ndarray] = []
        conn_parts: list[np.ndarray] = []
        limit = self.index_pos
        try:
            while pos < limit:
                h, ds, dl, nxt = read_record_at(self.view, pos, limit, p)
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

    def _scan_chunk_records(self, ci: Chunk) -> None:
        buf = self._chunk_buffer(ci)
        t, c, o, d, dl, err, _end = parse_chunk_records(buf, ci.data_start, self.path, self.conns)
        if err is not None:
            raise err
        unknown = [cid for cid in c if cid not in self.conns]
        if unknown:
            msg = f"{len(unknown)} messages of connection {unknown[0]}, which has no connection record"
            if not self.recover:
                raise FormatError(msg, self.path, ci.pos)
            self.scan_errors.append(f"{self.path}: offset {ci.pos}: {msg}")
            keep = [i for i, cid in enumerate(c) if cid in self.conns]
            t, c, o, d, dl = ([a[i] for i in keep] for a in (t, c, o, d, dl))
        self._set_entries(ci, t, c, o, d, dl)

    @staticmethod
    def _set_entries(ci: Chunk, t: list[int], c: list[int], o: list[int], d: list[int], dl: list[int]) -> None:
        ci.times = np.array(t, np.int64)
        ci.conns = np.array(c, np.uint32)
        ci.offsets = np.array(o, np.int64)
        ci.dstart = np.array(d, np.int64)
        ci.dlen = np.array(dl, np.int64)

    def _chunk_buffer(self, ci: Chunk) -> bytes | memoryview:
        if ci.buffer is not None:
            return ci.buffer
        raw = self.view[ci.data_start : ci.data_start + ci.data_len]
        return self._decompress(ci.compression, raw, ci.size, ci.pos)

    def _decompress(self, comp: str, raw: memoryview, size: int, pos: int) -> bytes | memoryview:
        """A chunk's data: lz4 through the block-level decoder unless checksums are verified."""
        if comp == "lz4" and not self.verify_checksums:
            from .lz4fast import decompress_lz4

            return decompress_lz4(raw, size, path=self.path, offset=pos, max_bytes=self.max_chunk_bytes)
        return decompress(comp, raw, size, path=self.path, offset=pos, max_bytes=self.max_chunk_bytes)

    # --- scanning ------------------------------------------------------------------------------
    def _scan(self) -> None:
        """Read the file record by record (no index): chunks, loose records, damage."""
        self._scanned = True
        view, size, p = self.view, self.size, self.path
        pos = self.data_start
        chunks: list[Chunk] = []
        loose: Chunk | None = None
        lt: list[int] = []
        lc: list[int] = []
        lo: list[int] = []
        ld: list[int] = []
        ll: list[int] = []

        def close_loose() -> None:
            nonlocal loose
            if loose is not None:
                loose.data_len = ld[-1] + ll[-1] if ld else 0
                loose.size = loose.data_len
                loose.buffer = view[loose.data_start : loose.data_start + loose.data_len]
                loose.damaged = True  # not a real chunk: reindex rebuilds it
                self._set_entries(loose, list(lt), list(lc), list(lo), list(ld), list(ll))
                chunks.append(loose)
                loose = None
                lt.clear(), lc.clear(), lo.clear(), ld.clear(), ll.clear()

        while pos < size:
            op: int | None = None
            try:
                if pos + 4 > size:
                    raise TruncatedError(f"expected a 4-byte record header length, {size - pos} bytes left", p, pos)
                (hl,) = _u32(view, pos)
                if hl > size - pos - 4:
                    raise TruncatedError(
                        f"record header length {hl} runs past the end ({size - pos - 4} bytes left)", p, pos
                    )
                h = parse_header(view, pos + 4, hl, p, pos + 4)
                op = op_of(h, p, pos)
                dpos = pos + 4 + hl
                if dpos + 4 > size:
                    if op == OP_CHUNK:
                        raise TruncatedError("chunk record cut before its data length", p, dpos)
                    raise TruncatedError(f"expected a 4-byte record data length, {size - dpos} bytes left", p, dpos)
                (dl,) = _u32(view, dpos)
                ds = dpos + 4
                cut = dl > size - ds
                if op == OP_CHUNK:
                    close_loose()
                    f = HeaderFields(h, p, pos, "chunk")
                    try:
                        comp = normalize(f.str("compression", "none"))
                    except UnsupportedError as e:
                        raise FormatError(f"chunk compression: {e}", p, pos) from None
                    usize = f.u32("size")
                    ci = Chunk(pos, ds, min(dl, size - ds), comp, usize)
                    ci.record_len = ds + dl - pos
                    if dl == 0 and usize == 0 and ds < size:
                        # unterminated chunk of a killed recorder: sizes never rewritten.
                        # Not an error for reading (it is how a recording looks), but noted.
                        self.scan_errors.append(
                            f"{p}: offset {pos}: unterminated {comp} chunk (recording in progress or killed); "
                            "its complete records are read"
                        )
                        if comp == "none":
                            pos = ds  # its records follow as if outside a chunk
                            continue
                        ci.data_len = size - ds
                        self._recover_chunk(ci, cut=True, reason="unterminated chunk (sizes 0)")
                        chunks.append(ci)
                        pos = size
                        continue
                    if cut:
                        err = TruncatedError(
                            f"chunk data of {dl} bytes runs past the end ({size - ds} bytes left)", p, dpos
                        )
                        self._recover_chunk(ci, cut=True, reason=str(err))
                        chunks.append(ci)
                        self._note_error(err, 0)
                        break
                    try:
                        buf = self._decompress(comp, view[ds : ds + dl], usize, pos)
                    except FormatError as e:
                        if isinstance(e, ChunkLimitError) and not self.recover:
                            raise  # not damage: the reader's limit, which the user can raise
                        self._recover_chunk(ci, cut=False, reason=str(e))
                        if ci.times is not None and len(ci.times):
                            chunks.append(ci)
                        if not self._note_error(e, dl):
                            break
                        pos = ds + dl
                        continue
                    t, c, o, d, dl_, err2, vend = parse_chunk_records(buf, ds, p, self.conns)
                    self._set_entries(ci, t, c, o, d, dl_)
                    ci.valid_end = vend
                    chunks.append(ci)
                    if err2 is not None:
                        ci.damaged = True
                        if not self._note_error(err2, 0):
                            break
                    pos = ds + dl
                    continue
                if cut:
                    raise TruncatedError(
                        f"{OP_NAMES.get(op, f'op {op}')} record data of {dl} bytes runs past the end "
                        f"({size - ds} bytes left)",
                        p,
                        dpos,
                    )
                if op == OP_CONNECTION:
                    conn = _conn_from_record(h, view, ds, dl, p, pos)
                    self.conns.setdefault(conn.id, conn)
                elif op == OP_MSG_DATA:
                    hf = HeaderFields(h, p, pos, "message data")
                    t_ = hf.time("time")
                    c_ = hf.u32("conn")
                    if loose is None:
                        loose = Chunk(pos, pos, 0, "none", 0)
                    lt.append(t_)
                    lc.append(c_)
                    lo.append(pos - loose.data_start)
                    ld.append(ds - loose.data_start)
                    ll.append(dl)
                else:
                    close_loose()
                pos = ds + dl
            except FormatError as e:
                if isinstance(e, ChunkLimitError) and not self.recover:
                    raise
                close_loose()
                if (
                    isinstance(e, TruncatedError)
                    and not self.index_pos
                    and op in (None, OP_CHUNK, OP_INDEX_DATA, OP_CONNECTION)
                ):
                    # the last record of a killed recording, cut by its last write: a chunk
                    # header without data, index data or a connection record (recorders put
                    # messages only in chunks), so no message is lost; noted, not an error
                    self.scan_errors.append(f"{e}; the recording ends inside this record (no message lost)")
                    self.bytes_skipped += size - pos
                    break
                if not self._note_error(e, 0):
                    break
                nxt = self._resync(pos + 1)
                self.bytes_skipped += nxt - pos
                pos = nxt
        close_loose()
        if self.index_pos > size and self.scan_error is None:
            # the header says the index starts past the end: the file was cut (messages
            # found so far are still yielded first)
            self._note_error(
                TruncatedError(f"file ends before the index the bag header puts at offset {self.index_pos}", p, size),
                0,
            )
        # drop messages whose connection never appeared (recover) / complain (strict)
        for ci in chunks:
            self._finish_chunk(ci)
        self.chunks = [c for c in chunks if c.times is not None and len(c.times)]

    def _note_error(self, e: FormatError, skipped: int) -> bool:
        """Record a scan error; True when scanning should go on (recover mode)."""
        self.scan_errors.append(str(e))
        self.bytes_skipped += max(0, skipped)
        if self.recover:
            return True
        if self.scan_error is None:
            self.scan_error = e
        return False

    def _recover_chunk(self, ci: Chunk, *, cut: bool, reason: str) -> None:
        """Intact records of a cut or undecompressable chunk."""
        raw = self.view[ci.data_start : ci.data_start + ci.data_len]
        limit = min(ci.size if ci.size > 0 else 1 << 31, self.max_chunk_bytes)
        if ci.compression == "none":
            buf: bytes | memoryview = raw
        else:
            buf = partial_decompress(
                ci.compression, raw, min(limit, max(len(raw) * 255, 1 << 20)), self.max_chunk_bytes
            )
        t, c, o, d, dl, _err, vend = parse_chunk_records(buf, ci.data_start, self.path, self.conns)
        ci.buffer = buf
        ci.valid_end = vend
        ci.damaged = True
        self._set_entries(ci, t, c, o, d, dl)

    def _finish_chunk(self, ci: Chunk) -> None:
        if ci.times is None or ci.conns is None:
            return
        if len(ci.times):
            known = np.isin(ci.conns, np.array(sorted(self.conns), np.uint32))
            if not known.all():
                bad = int(ci.conns[~known][0])
                msg = f"{int((~known).sum())} messages of connection {bad}, which has no connection record"
                self.scan_errors.append(f"{self.path}: offset {ci.pos}: {msg}")
                if not self.recover and self.scan_error is None:
                    self.scan_error = FormatError(msg, self.path, ci.pos)
                for name in ("times", "conns", "offsets", "dstart", "dlen"):
                    arr = getattr(ci, name)
                    if arr is not None:
                        setattr(ci, name, arr[known])
        ci.counts = {}
        if len(ci.times):
            u, n = np.unique(ci.conns, return_counts=True)
            ci.counts = dict(zip(u.tolist(), n.tolist()))
            ci.start = int(ci.times.min())
            ci.end = int(ci.times.max())

    def _resync(self, pos: int) -> int:
        """The next offset where a chunk record plausibly starts (or EOF)."""
        view, size = self.view, self.size
        needle = b"\x04\x00\x00\x00op=\x05"
        buf = self.source._buffer
        hay: Any = buf if isinstance(buf, (bytes, bytearray)) or hasattr(buf, "find") else bytes(view)
        while True:
            i = hay.find(needle, pos)
            if i < 0:
                return size
            for s in range(i, max(self.data_start + 4, pos + 4, i - 96) - 1, -1):
                (hl,) = _u32(view, s - 4)
                if s + hl < i + 8 or s + hl > size:
                    continue
                try:
                    h = parse_header(view, s, hl, self.path, s)
                except FormatError:
                    continue
                if h.get("op") == b"\x05" and "size" in h:
                    return s - 4
            pos = i + 1

    # --- model ----------------------------------------------------------------------------------
    def channel_map(self) -> dict[int, Channel]:
        if self._channels is None:
            schemas: dict[tuple[str, bytes], Schema] = {}
            out: dict[int, Channel] = {}
            for cid in sorted(self.conns):
                c = self.conns[cid]
                key = (c.type, c.definition)
                s = schemas.get(key)
                if s is None:
                    s = schemas[key] = Schema(len(schemas) + 1, c.type, "ros1msg", bytes(c.definition))
                md: dict[str, str] = {"md5sum": c.md5sum, "type": c.type}
                for k in ("callerid", "latching"):
                    if k in c.fields:
                        md[k] = c.fields[k].decode("utf-8", "replace")
                out[cid] = Channel(cid, c.topic, "ros1", s, md)
            self._channels = out
        return self._channels

    @property
    def summary(self) -> Summary:
        if self._summary is None:
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
            if self.scan_errors:
                extras["errors"] = list(self.scan_errors)
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

    # --- messages -------------------------------------------------------------------------------
    def _load(self, ci: Chunk) -> bytes | memoryview:
        """Entries of ``ci`` (index data, or a record scan) and its uncompressed bytes."""
        if ci.times is None:
            self._chunk_index(ci)
        buf = self._chunk_buffer(ci)
        if ci.dstart is None:
            self._payloads(ci, buf)
        return buf

    def _payloads(self, ci: Chunk, buf: bytes | memoryview) -> None:
        """Payload offsets/lengths from record offsets, in bulk, bounds-checked."""
        assert ci.offsets is not None
        n = len(buf)
        o = ci.offsets
        if not len(o):
            ci.dstart = ci.dlen = _EMPTY_I64
            return
        arr = np.frombuffer(buf, np.uint8)
        bad = o + 8 > n
        if bad.any():
            i = int(np.argmax(bad))
            raise FormatError(
                f"index data points at offset {int(o[i])} of a {n}-byte chunk", self.path, ci.pos
            )

        # every 4-byte window of the chunk as a row (a view, no copy); gathering rows and
        # reading them as little-endian u32 decodes the header fields at many offsets at once
        rows = np.lib.stride_tricks.as_strided(arr, shape=(max(n - 3, 0), 4), strides=(1, 1), writeable=False)

        def u32_at(idx: np.ndarray) -> np.ndarray:
            return rows[idx].view("<u4").reshape(-1).astype(np.int64)

        hl = u32_at(o)
        lpos = o + 4 + hl
        bad = lpos + 4 > n
        if bad.any():
            i = int(np.argmax(bad))
            raise FormatError(
                f"message record header at chunk offset {int(o[i])} runs past the chunk end", self.path, ci.pos
            )
        dl = u32_at(lpos)
        ds = lpos + 4
        bad = ds + dl > n
        if bad.any():
            i = int(np.argmax(bad))
            raise FormatError(
                f"message record data at chunk offset {int(o[i])} runs past the chunk end", self.path, ci.pos
            )
        ci.dstart = ds
        ci.dlen = dl

    def _messages(
        self, topics: TopicSelector, start: int | None, end: int | None, reverse: bool, order: str
    ) -> Iterator[Message]:
        # the batches (one list per chunk group) are flattened by itertools.chain in C: the
        # per-message cost is a list step, not a generator resumption
        return chain.from_iterable(self._batches(topics, start, end, reverse, order))

    def _batches(
        self, topics: TopicSelector, start: int | None, end: int | None, reverse: bool, order: str
    ) -> Iterator[list[Message]]:
        chans = self.channel_map()
        sel = topic_filter(topics, chans.values())
        chunks = [ci for ci in self.chunks if self._wanted(ci, sel, start, end)]
        with self.damage_pass() as done:
            if order == "file":
                groups = [[ci] for ci in sorted(chunks, key=lambda c: c.pos)]
            else:
                groups = self._groups(chunks)
            if reverse:
                groups.reverse()
            for g in groups:
                with gc_paused():  # a chunk's Message objects (see base.gc_paused)
                    batch = self._group_messages(g, sel, start, end, reverse, order, chans)
                done.count += len(batch)
                yield batch

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

    @staticmethod
    def _wanted(ci: Chunk, sel: set[int] | None, start: int | None, end: int | None) -> bool:
        if sel is not None and not any(c in sel for c in ci.counts):
            return False
        if start is not None and ci.end < start:
            return False
        return not (end is not None and ci.start >= end)

    @staticmethod
    def _groups(chunks: list[Chunk]) -> list[list[Chunk]]:
        """Runs of chunks that must be merged: they overlap in time.  A chunk that only
        touches the run's end time and lies after all of it in the file follows it (ties
        keep file order), so recorded bags whose chunks share boundary times stay one
        chunk per group (bounded memory)."""
        groups: list[list[Chunk]] = []
        cur_end = 0
        cur_pos = 0
        for ci in sorted(chunks, key=lambda c: (c.start, c.pos)):
            if groups and (ci.start < cur_end or (ci.start == cur_end and ci.pos < cur_pos)):
                groups[-1].append(ci)
                cur_end = max(cur_end, ci.end)
                cur_pos = max(cur_pos, ci.pos)
            else:
                groups.append([ci])
                cur_end = ci.end
                cur_pos = ci.pos
        return groups

    def _selected(
        self, ci: Chunk, sel: set[int] | None, start: int | None, end: int | None
    ) -> tuple[bytes | memoryview, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
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

    def _group_messages(
        self,
        group: list[Chunk],
        sel: set[int] | None,
        start: int | None,
        end: int | None,
        reverse: bool,
        order: str,
        chans: dict[int, Channel],
    ) -> list[Message]:
        """The selected messages of one chunk (or of overlapping chunks, merged), in order."""
        get = chans.__getitem__
        if len(group) == 1:
            buf, t, c, o, ds, dl = self._selected(group[0], sel, start, end)
            if order == "file":
                idx = None if len(o) < 2 or bool((o[1:] >= o[:-1]).all()) else np.argsort(o, kind="stable")
            else:
                in_order = len(o) < 2 or bool(((t[1:] > t[:-1]) | ((t[1:] == t[:-1]) & (o[1:] >= o[:-1]))).all())
                idx = None if in_order else np.lexsort((o, t))
            if reverse:
                idx = np.arange(len(t) - 1, -1, -1) if idx is None else idx[::-1]
            if idx is not None:
                t, c, ds, dl = t[idx], c[idx], ds[idx], dl[idx]
            mv, base = self._slicer(group[0], buf, dl)
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
        # overlapping chunks: merge by (time, file position)
        parts = []
        bufs = []
        for k, ci in enumerate(sorted(group, key=lambda c: c.pos)):
            buf, t, c, o, ds, dl = self._selected(ci, sel, start, end)
            src, base = self._slicer(ci, buf, dl)
            bufs.append(src)
            parts.append((buf, t, c, o, ds + base, dl, k))
        t = np.concatenate([p[1] for p in parts])
        c = np.concatenate([p[2] for p in parts])
        o = np.concatenate([p[3] for p in parts])
        ds = np.concatenate([p[4] for p in parts])
        dl = np.concatenate([p[5] for p in parts])
        kk = np.concatenate([np.full(len(p[1]), p[6], np.int64) for p in parts])
        idx = np.lexsort((o, kk, t))
        if reverse:
            idx = idx[::-1]
        return [
            Message(get(cc), tt, tt, 0, bufs[k][a : a + n])
            for tt, cc, a, n, k in zip(
                t[idx].tolist(), c[idx].tolist(), ds[idx].tolist(), dl[idx].tolist(), kk[idx].tolist()
            )
        ]

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

    # --- info -----------------------------------------------------------------------------------
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
