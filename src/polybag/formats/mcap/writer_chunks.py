"""The MCAP writer's output: the bytes written (with the running CRC and position), and the
chunks: closing the open chunk (its statistics), packing it (CRC and compression, in worker
threads when pipelined) and writing it with its Message Index records.

:class:`ChunkOutputMixin` is a part of :class:`~polybag.formats.mcap.writer.McapWriter`; the
writer's options it reads are set by the writer's constructor (listed below).
"""

from __future__ import annotations

import os
import struct
import sys
import threading
from array import array
from collections import deque
from concurrent.futures import Future
from typing import Any, BinaryIO

import zstandard

from polybag.formats.mcap import records as R
from polybag.formats.mcap.records import Opcode
from polybag.io import compression as _compression
from polybag.io.compression import crc32 as _crc32
from polybag.io.output_files import AtomicFile
from polybag.util import threads as _threads

_LITTLE = sys.byteorder == "little"
_KEEP_BUFFER = 64 << 20  # a chunk buffer up to this size is kept for the next chunk
# a Chunk record up to its compression name: opcode, length, start, end, size, crc, name length
_CHUNK_RECORD_HEAD = struct.Struct("<BQQQQII")


class ChunkOutputMixin:
    """The output file and the chunks of :class:`~polybag.formats.mcap.writer.McapWriter`."""

    # the writer's options and summary tables (set by McapWriter.__init__)
    compression: str
    compression_level: int | None
    chunk_size: int
    use_crcs: bool
    use_message_index: bool
    use_chunk_index: bool
    _comp_name: str
    _comp_name_raw: bytes
    statistics: R.Statistics
    _counts: dict[int, int]
    _chunk_indexes: list[R.ChunkIndex]

    def _init_output(self, path_or_stream: str | os.PathLike[str] | BinaryIO, overwrite: bool, use_chunking: bool) -> None:
        """Open the output (``NAME.active`` for a path) and set up the empty open chunk."""
        self._out = AtomicFile(path_or_stream, overwrite=overwrite)
        self._file = self._out.file
        # a file of ours goes to disk while it is written (the fsync on close waits less)
        self._writeback = _threads.Writeback(self._file if self._out.active_path is not None else None)
        self._pos = 0
        self._crc = 0

        # The open chunk.  Small messages are appended to a fresh bytearray per chunk
        # (self._fill == -1: the chunk is all of it), the fastest per message.  After a chunk
        # that held a large payload the buffer is kept for the next chunk and overwritten in
        # place (its records are self._chunk[:self._fill]): payloads are copied into it
        # exactly once and its pages stay mapped, which matters per byte, not per message.
        self._chunk = bytearray()
        self._fill = -1
        self._large = False
        self._chunk_index: dict[int, array[int]] = {}
        # Closed chunks are checksummed and compressed by worker threads while the next
        # ones fill (one per core but this thread's; when they are all busy this thread
        # packs the chunk itself rather than wait); this thread writes them in order, so
        # the bytes are exactly the one-thread writer's.  Every other write first writes
        # out what is in flight.  Kept buffers come back as spares once written.
        self._inflight: deque[tuple[Future[tuple[int, bytes | None]], bytearray, int, int, int, Any, bool]]
        self._inflight = deque()
        self._spares: list[bytearray] = []
        self._depth = _threads.helpers()  # chunks packed by worker threads at once
        self._pipeline = use_chunking and self._depth > 0
        self._local = threading.local()

    # --- output ----------------------------------------------------------------------------------
    def _drain(self, keep: int = 0) -> None:
        """Write out the chunks in flight, oldest first, until at most ``keep`` remain and
        the oldest is not packed yet (and raise a failed one's error)."""
        q = self._inflight
        while q and (len(q) > keep or q[0][0].done()):
            fut, buf, fill, start, end, index, kept = q.popleft()
            crc, packed = fut.result()
            self._emit_chunk(buf, fill, start, end, index, crc, packed)
            if kept:
                self._spares.append(buf)

    def _emit(self, b: bytes | bytearray | memoryview) -> None:
        self._file.write(b)
        if self.use_crcs:
            self._crc = _crc32(b, self._crc)
        self._pos += len(b)

    def _compress(self, raw: memoryview) -> bytes:
        """``raw`` compressed (zstd or lz4; thread-safe: one zstd context per thread)."""
        if self.compression == "zstd":
            c = getattr(self._local, "zstd", None)
            if c is None:
                # level 3 (zstd's default, as the reference writers use); one thread per
                # context: chunks are compressed in parallel instead
                lv = 3 if self.compression_level is None else self.compression_level
                c = self._local.zstd = zstandard.ZstdCompressor(level=lv)
            return c.compress(raw)
        return bytes(_compression.compress(self.compression, raw, self.compression_level))

    def _pack(self, buf: bytearray, fill: int) -> tuple[int, bytes | None]:
        """A chunk's CRC and compressed bytes (None: stored as it is); runs in a worker
        thread when pipelined."""
        with memoryview(buf) as whole, whole[:fill] as raw:
            crc = _crc32(raw) if self.use_crcs else 0
            return crc, (None if self.compression == "none" else self._compress(raw))

    # --- chunks ----------------------------------------------------------------------------------
    def _finish_chunk(self) -> None:
        fill = self._fill
        if fill < 0:
            fill = len(self._chunk)
        index = self._chunk_index
        if not fill and not index:
            return
        st = self.statistics
        n_msgs = 0
        start = end = 0
        for cid, idx in index.items():
            times = idx[0::2]
            n = len(times)
            lo, hi = min(times), max(times)
            if n_msgs == 0:
                start, end = lo, hi
            else:
                start, end = min(start, lo), max(end, hi)
            n_msgs += n
            self._counts[cid] = self._counts.get(cid, 0) + n
        if n_msgs:
            if st.message_count == 0:
                st.message_start_time, st.message_end_time = start, end
            else:
                st.message_start_time = min(st.message_start_time, start)
                st.message_end_time = max(st.message_end_time, end)
            st.message_count += n_msgs
        keep = self._large and len(self._chunk) <= max(4 * self.chunk_size, _KEEP_BUFFER)
        buf = self._chunk
        if self._pipeline:
            q = self._inflight
            if sum(1 for item in q if not item[0].done()) < self._depth:
                fut = _threads.pool().submit(self._pack, buf, fill)
            else:  # the workers are all busy: this thread packs the chunk rather than wait
                fut = _threads.finished(self._pack(buf, fill))
            q.append((fut, buf, fill, start, end, index, keep))
            self._drain(_threads.keep_in_flight(self._depth, sum(item[2] for item in q)))
        else:
            crc, packed = self._pack(buf, fill)
            self._emit_chunk(buf, fill, start, end, index, crc, packed)
            if keep:
                self._spares.append(buf)
        if keep:  # the next chunk overwrites a kept buffer (not after a huge message)
            self._chunk = self._spares.pop() if self._spares else bytearray()
            self._fill = 0
        else:
            self._chunk = bytearray()
            self._fill = -1
        self._large = False
        self._chunk_index = {}

    def _emit_chunk(self, buf: bytearray, fill: int, start: int, end: int, index: dict[int, array[int]], crc: int, packed: bytes | None) -> None:
        """Write one chunk record (the compressed bytes as they are, or the buffer itself:
        no concatenated copy) and its message indexes."""
        cname = self._comp_name_raw
        chunk_offset = self._pos
        with memoryview(buf) as whole, whole[:fill] as raw:
            body = raw if packed is None else packed
            packed_size = len(body)
            rec_len = 9 + 28 + 4 + len(cname) + 8 + packed_size
            self._emit(
                _CHUNK_RECORD_HEAD.pack(Opcode.CHUNK, rec_len - 9, start, end, fill, crc, len(cname))
                + cname
                + R.U64.pack(packed_size)
            )
            self._emit(body)
            del body
        mi_start = self._pos
        offsets: dict[int, int] = {}
        if self.use_message_index:
            for cid, idx in index.items():
                offsets[cid] = self._pos
                if not _LITTLE:
                    idx.byteswap()
                entries = idx.tobytes()
                self._emit(
                    R.RECORD_HEAD.pack(Opcode.MESSAGE_INDEX, 6 + len(entries)) + R.U16.pack(cid) + R.U32.pack(len(entries))
                )
                self._emit(entries)
        if self.use_chunk_index:
            self._chunk_indexes.append(
                R.ChunkIndex(
                    start, end, chunk_offset, rec_len, offsets, self._pos - mi_start,
                    self._comp_name, packed_size, fill,
                )  # fmt: skip
            )
        self.statistics.chunk_count += 1
        self._writeback.wrote(self._pos)
