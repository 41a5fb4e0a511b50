"""The record-by-record scan of a 2.0 bag without a usable index (or read with ``recover``).

:func:`scan_bag` (a :class:`RecordScan`) walks the data section from the bag header on: each chunk record is
decompressed and walked (what is intact of a cut, unterminated or damaged one is kept),
connection records are collected, and message records outside any chunk (an uncompressed
chunk a killed recorder left with sizes 0: its records follow in the file) are gathered
into pseudo-chunks.  Damage is noted in the reader's :class:`~polybag.formats.bag.damage.Damage`;
without ``recover`` the scan stops at the first damage (the messages before it are still
given, then the error raised), with it the scan resynchronises at the next plausible chunk
record.  The last record of a killed recording, cut by its last write, is noted but is not
an error.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from polybag.errors import FormatError, TruncatedError, UnsupportedError
from polybag.io.compression import ChunkLimitError, normalize

from .chunks import ChunkLoader, parse_chunk_records, partial_decompress, set_entries
from .index import Chunk, Connection, connection_from_record
from .records import (
    OP_CHUNK,
    OP_CONNECTION,
    OP_INDEX_DATA,
    OP_MSG_DATA,
    OP_NAMES,
    U32,
    HeaderFields,
    op_of,
    parse_header,
)

_u32 = U32.unpack_from


def _no_data_length(op: int, left: int, path: str | None, dpos: int) -> TruncatedError:
    """The error for a record (of op ``op``) cut before its data length (``left`` bytes left)."""
    if op == OP_CHUNK:
        return TruncatedError("chunk record cut before its data length", path, dpos)
    return TruncatedError(f"expected a 4-byte record data length, {left} bytes left", path, dpos)


def _data_cut(op: int, dl: int, left: int, path: str | None, dpos: int) -> TruncatedError:
    """The error for a record (not a chunk) whose ``dl`` bytes of data run past the end."""
    return TruncatedError(
        f"{OP_NAMES.get(op, f'op {op}')} record data of {dl} bytes runs past the end ({left} bytes left)",
        path,
        dpos,
    )


class LooseRecords:
    """Message records met outside any chunk (written by a killed recorder after an
    unterminated uncompressed chunk's header), gathered until the run ends: ``chunk`` (None
    between runs) and per record its time, connection, record and payload offset (relative
    to the run's first record) and payload length."""

    __slots__ = ("chunk", "lists")

    def __init__(self) -> None:
        self.chunk: Chunk | None = None
        self.lists: tuple[list[int], list[int], list[int], list[int], list[int]] = ([], [], [], [], [])


def scan_bag(loader: ChunkLoader, conns: dict[int, Connection]) -> list[Chunk]:
    """The chunks (and loose records) of the bag ``loader`` reads, found by reading every
    record from the bag header on; the connection records met are added to ``conns``."""
    return RecordScan(loader, conns).run()


class RecordScan:
    """Finds the chunks, connections and loose messages of a bag by reading every record
    (one scan: :meth:`run`)."""

    def __init__(self, loader: ChunkLoader, conns: dict[int, Connection]) -> None:
        self.loader = loader
        self.source = loader.source
        self.view = loader.view
        self.size = loader.source.size
        self.path = loader.path
        self.data_start = loader.header.data_start
        self.index_pos = loader.header.index_pos
        self.damage = loader.damage
        self.conns = conns

    def run(self) -> list[Chunk]:
        """Read the file record by record (no index): chunks, loose records, damage."""
        self.source.need_all()  # a remote file: the scan reads every record
        view, size, p = self.view, self.size, self.path
        pos = self.data_start
        chunks: list[Chunk] = []
        loose = LooseRecords()
        lt, lc, lo, ld, ll = loose.lists
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
                    raise _no_data_length(op, size - dpos, p, dpos)
                (dl,) = _u32(view, dpos)
                ds = dpos + 4
                if op == OP_CHUNK:
                    self._close_loose(loose, chunks)
                    nxt = self._scan_chunk(h, pos, dpos, ds, dl, chunks)
                    if nxt is None:
                        break
                    pos = nxt
                    continue
                if dl > size - ds:
                    raise _data_cut(op, dl, size - ds, p, dpos)
                if op == OP_CONNECTION:
                    conn = connection_from_record(h, view, ds, dl, p, pos)
                    self.conns.setdefault(conn.id, conn)
                elif op == OP_MSG_DATA:
                    hf = HeaderFields(h, p, pos, "message data")
                    t_ = hf.time("time")
                    c_ = hf.u32("conn")
                    if loose.chunk is None:
                        loose.chunk = Chunk(pos, pos, 0, "none", 0)
                    first = loose.chunk.data_start
                    lt.append(t_)
                    lc.append(c_)
                    lo.append(pos - first)
                    ld.append(ds - first)
                    ll.append(dl)
                else:
                    self._close_loose(loose, chunks)
                pos = ds + dl
            except FormatError as e:
                if isinstance(e, ChunkLimitError) and not self.damage.recover:
                    raise
                self._close_loose(loose, chunks)
                nxt = self._past_damage(e, pos, op)
                if nxt is None:
                    break
                pos = nxt
        self._close_loose(loose, chunks)
        return self._scan_done(chunks)

    def _close_loose(self, loose: LooseRecords, chunks: list[Chunk]) -> None:
        """End a run of loose message records: one pseudo-chunk (its bytes are the file's)."""
        ci = loose.chunk
        if ci is None:
            return
        lt, lc, lo, ld, ll = loose.lists
        ci.data_len = ld[-1] + ll[-1] if ld else 0
        ci.size = ci.data_len
        ci.buffer = self.view[ci.data_start : ci.data_start + ci.data_len]
        ci.damaged = True  # not a real chunk: reindex rebuilds it
        set_entries(ci, list(lt), list(lc), list(lo), list(ld), list(ll))
        chunks.append(ci)
        loose.chunk = None
        for lst in (lt, lc, lo, ld, ll):
            lst.clear()

    def _scan_chunk(
        self, h: dict[str, bytes], pos: int, dpos: int, ds: int, dl: int, chunks: list[Chunk]
    ) -> int | None:
        """A chunk record the scan met (header ``h`` at ``pos``, data length at ``dpos``, data
        at ``ds``): what it holds (what is intact of it) goes to ``chunks``.  Returns where the
        scan goes on, None to stop."""
        size, p = self.size, self.path
        f = HeaderFields(h, p, pos, "chunk")
        try:
            comp = normalize(f.str("compression", "none"))
        except UnsupportedError as e:
            raise FormatError(f"chunk compression: {e}", p, pos) from None
        usize = f.u32("size")
        ci = Chunk(pos, ds, min(dl, size - ds), comp, usize)
        ci.record_len = ds + dl - pos
        if dl == 0 and usize == 0 and ds < size:
            return self._unterminated_chunk(ci, chunks)
        if dl > size - ds:
            err = TruncatedError(f"chunk data of {dl} bytes runs past the end ({size - ds} bytes left)", p, dpos)
            self._recover_chunk(ci, cut=True, reason=str(err))
            chunks.append(ci)
            # what is lost: the file after the chunk's last intact record (an uncompressed
            # chunk's records are read up to the cut), else after the last complete record
            vend = ci.valid_end
            intact = ds + vend if comp == "none" and vend > 0 else pos
            self._note_error(err, size - intact)
            return None
        try:
            buf = self.loader.decompress(comp, self.view[ds : ds + dl], usize, pos)
        except FormatError as e:
            if isinstance(e, ChunkLimitError) and not self.damage.recover:
                raise  # not damage: the reader's limit, which the user can raise
            self._recover_chunk(ci, cut=False, reason=str(e))
            if ci.times is not None and len(ci.times):
                chunks.append(ci)
            return ds + dl if self._note_error(e, dl) else None
        t, c, o, d, dl_, err2, vend = parse_chunk_records(buf, ds, p, self.conns)
        set_entries(ci, t, c, o, d, dl_)
        ci.valid_end = vend
        chunks.append(ci)
        if err2 is not None:
            ci.damaged = True
            if not self._note_error(err2, 0):
                return None
        return ds + dl

    def _unterminated_chunk(self, ci: Chunk, chunks: list[Chunk]) -> int:
        """A chunk of a killed recorder (sizes never rewritten, 0): not an error for reading
        (it is how a recording looks), but noted.  Returns where the scan goes on."""
        self.damage.recovery.note(
            f"{self.path}: offset {ci.pos}: unterminated {ci.compression} chunk (recording in progress or killed); "
            "its complete records are read"
        )
        if ci.compression == "none":
            return ci.data_start  # its records follow as if outside a chunk
        ci.data_len = self.size - ci.data_start
        self._recover_chunk(ci, cut=True, reason="unterminated chunk (sizes 0)")
        chunks.append(ci)
        return self.size

    def _past_damage(self, e: FormatError, pos: int, op: int | None) -> int | None:
        """Damage ``e`` in the record at ``pos`` (of op ``op``, None when unknown): noted;
        where the scan goes on (the next plausible chunk record), None to stop."""
        if isinstance(e, TruncatedError) and not self.index_pos and op in (None, OP_CHUNK, OP_INDEX_DATA, OP_CONNECTION):
            # the last record of a killed recording, cut by its last write: a chunk
            # header without data, index data or a connection record (recorders put
            # messages only in chunks), so no message is lost; noted, not an error
            self.damage.recovery.note(f"{e}; the recording ends inside this record (no message lost)", self.size - pos)
            return None
        if not self._note_error(e, 0):
            return None
        nxt = self._resync(pos + 1)
        self.damage.recovery.bytes_skipped += nxt - pos
        return nxt

    def _scan_done(self, chunks: list[Chunk]) -> list[Chunk]:
        """The scan's chunks, finished (counts, times, unknown connections): those holding
        messages."""
        if self.index_pos > self.size and self.damage.recovery.first is None:
            # the header says the index starts past the end: the file was cut (messages
            # found so far are still yielded first)
            self._note_error(
                TruncatedError(
                    f"file ends before the index the bag header puts at offset {self.index_pos}", self.path, self.size
                ),
                0,
            )
        # drop messages whose connection never appeared (recover) / complain (strict)
        for ci in chunks:
            self._finish_chunk(ci)
        return [c for c in chunks if c.times is not None and len(c.times)]

    def _note_error(self, e: FormatError, skipped: int) -> bool:
        """Record a scan error; True when scanning should go on (recover mode)."""
        return self.damage.note_error(e, skipped)

    def _recover_chunk(self, ci: Chunk, *, cut: bool, reason: str) -> None:
        """Intact records of a cut or undecompressable chunk."""
        raw = self.view[ci.data_start : ci.data_start + ci.data_len]
        cap = self.loader.max_chunk_bytes
        limit = min(ci.size if ci.size > 0 else 1 << 31, cap)
        if ci.compression == "none":
            buf: bytes | memoryview = raw
        else:
            buf = partial_decompress(
                ci.compression, raw, min(limit, max(len(raw) * 255, 1 << 20)), cap
            )
        t, c, o, d, dl, _err, vend = parse_chunk_records(buf, ci.data_start, self.path, self.conns)
        ci.buffer = buf
        ci.valid_end = vend
        ci.damaged = True
        set_entries(ci, t, c, o, d, dl)

    def _finish_chunk(self, ci: Chunk) -> None:
        """``ci``'s counts and time range; messages of connections never defined are dropped
        (noted; the first is the error when not recovering)."""
        if ci.times is None or ci.conns is None:
            return
        if len(ci.times):
            known = np.isin(ci.conns, np.array(sorted(self.conns), np.uint32))
            if not known.all():
                bad = int(ci.conns[~known][0])
                msg = f"{int((~known).sum())} messages of connection {bad}, which has no connection record"
                self.damage.recovery.note(f"{self.path}: offset {ci.pos}: {msg}")
                if not self.damage.recover and self.damage.recovery.first is None:
                    self.damage.recovery.first = FormatError(msg, self.path, ci.pos)
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
