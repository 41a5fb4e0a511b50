"""Fast decoding of the LZ4 frames in bag chunks (roslz4).

python-lz4's frame decoder spends milliseconds per chunk on the 1 MiB / 4 MiB blocks that
rosbag writes (buffer handling, and the content checksum).  A roslz4 frame has independent
blocks, so each block can go straight to ``lz4.block.decompress`` with the remaining
declared size as its bound.  Checksums are not verified here (``polybag check`` verifies
them through the strict decoder); frames with linked blocks or anything unexpected fall
back to :func:`polybag.io.compression.decompress`.

Memory: a declared size over the cap (``max_chunk_bytes``) is refused before anything is
decoded, no block may decode past the declared size, and the output grows in one buffer
(:class:`~polybag.io.compression.OutputBuffer`), so a chunk costs its size plus one block.
"""

from __future__ import annotations

import struct

import lz4.block  # type: ignore[import-untyped]  # lz4 ships no type information

from polybag.errors import FormatError
from polybag.io.compression import OutputBuffer, check_declared, max_chunk_bytes
from polybag.io.compression import decompress as strict_decompress

_MAGIC = 0x184D2204
_u32 = struct.Struct("<I").unpack_from


class _NotTheFastLayout(Exception):
    """The data is not lz4 frames of independent blocks the fast decoder reads: the strict
    decoder decides."""


def decompress_lz4(
    data: bytes | memoryview,
    size: int,
    *,
    path: str | None = None,
    offset: int | None = None,
    max_bytes: int | None = None,
) -> bytes | memoryview:
    """The ``size`` bytes an LZ4 frame (or frames) decompress to (``bytes``, or a read-only
    ``memoryview`` when they took more than one block).

    ``max_bytes`` is the cap (None: the process-wide one, see
    :func:`polybag.io.compression.max_chunk_bytes`)."""
    cap = max_chunk_bytes(max_bytes)
    check_declared(size, cap, path, offset)
    try:
        return _fast(memoryview(data), size, path, offset)
    except _NotTheFastLayout:
        return strict_decompress("lz4", data, size, path=path, offset=offset, max_bytes=cap)


def _fast(mv: memoryview, size: int, path: str | None, offset: int | None) -> bytes | memoryview:
    sink = OutputBuffer()
    pos = 0
    n = len(mv)
    while pos < n:
        if n - pos < 7 or _u32(mv, pos)[0] != _MAGIC:
            raise _NotTheFastLayout
        flg = mv[pos + 4]
        bd = mv[pos + 5]
        if (flg >> 6) != 1 or not (flg & 0x20):  # version 01, independent blocks only
            raise _NotTheFastLayout
        block_max = 1 << (8 + 2 * ((bd >> 4) & 7))
        if not 4 <= (bd >> 4) & 7 <= 7:
            raise _NotTheFastLayout
        pos += 6
        if flg & 0x08:
            pos += 8
        if flg & 0x01:
            pos += 4
        pos += 1  # header checksum
        block_ck = 4 if flg & 0x10 else 0
        while True:
            if pos + 4 > n:
                raise FormatError("lz4 frame ends before its end mark", path, offset)
            (bs,) = _u32(mv, pos)
            pos += 4
            if bs == 0:
                break
            raw = bs & 0x80000000
            bs &= 0x7FFFFFFF
            if bs > n - pos or bs > block_max:
                raise FormatError(f"lz4 block of {bs} bytes runs past the data", path, offset)
            room = size - sink.size
            if raw:
                if bs > room:
                    raise FormatError(f"lz4 data decompresses to more than the declared {size} bytes", path, offset)
                piece = bytes(mv[pos : pos + bs])
            else:
                if room <= 0:
                    raise FormatError(f"lz4 data decompresses to more than the declared {size} bytes", path, offset)
                try:
                    piece = lz4.block.decompress(mv[pos : pos + bs], uncompressed_size=min(block_max, room))
                except lz4.block.LZ4BlockError as e:
                    raise FormatError(f"lz4 block does not decompress: {e}", path, offset) from None
            sink.add(piece)
            pos += bs + block_ck
        if flg & 0x04:
            pos += 4
        if pos > n:
            raise FormatError("lz4 frame ends inside its checksum", path, offset)
    if sink.size != size:
        raise FormatError(f"lz4 data decompresses to {sink.size} bytes, header says {size}", path, offset)
    return sink.view()


def _partial_block(src: memoryview, limit: int) -> bytes:
    """Decode an LZ4 block that may be cut short: every byte its complete sequences give
    (and the literals present of a cut one).  Pure Python; used only to salvage the last,
    cut chunk of a damaged bag."""
    out = bytearray()
    i = 0
    n = len(src)
    while i < n and len(out) < limit:
        token = src[i]
        i += 1
        lit = token >> 4
        if lit == 15:
            while i < n:
                b = src[i]
                i += 1
                lit += b
                if b != 255:
                    break
        take = min(lit, n - i)
        out += src[i : i + take]
        i += take
        if take < lit or i + 2 > n:
            break
        off = src[i] | (src[i + 1] << 8)
        i += 2
        mlen = token & 15
        if mlen == 15:
            complete = False
            while i < n:
                b = src[i]
                i += 1
                mlen += b
                if b != 255:
                    complete = True
                    break
            if not complete:
                break
        mlen = min(mlen + 4, limit - len(out))  # never more than the bound, even if damaged
        if off == 0 or off > len(out):
            break  # damaged: a match before the start
        start = len(out) - off
        if off >= mlen:
            out += out[start : start + mlen]
        else:
            pat = bytes(out[start:])
            out += (pat * (mlen // off + 1))[:mlen]
    return bytes(out[:limit])


def partial_lz4(data: bytes | memoryview, limit: int) -> bytes | memoryview:
    """As much as a cut or damaged LZ4 frame decompresses to (at most ``limit`` bytes; the
    caller bounds ``limit`` by the cap)."""
    mv = memoryview(data)
    n = len(mv)
    sink = OutputBuffer()
    pos = 0
    while pos + 7 <= n and sink.size < limit:
        if _u32(mv, pos)[0] != _MAGIC:
            break
        flg, bd = mv[pos + 4], mv[pos + 5]
        linked = not (flg & 0x20)
        block_max = 1 << (8 + 2 * ((bd >> 4) & 7))
        pos += 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0) + 1
        block_ck = 4 if flg & 0x10 else 0
        ended = False
        while pos + 4 <= n and sink.size < limit:
            (bs,) = _u32(mv, pos)
            pos += 4
            if bs == 0:
                ended = True
                break
            raw = bs & 0x80000000
            bs &= 0x7FFFFFFF
            body = mv[pos : pos + min(bs, n - pos)]
            room = limit - sink.size
            if raw:
                piece = bytes(body[:room])
            elif len(body) == bs and not linked:
                try:
                    piece = lz4.block.decompress(body, uncompressed_size=min(block_max, room))
                except lz4.block.LZ4BlockError:
                    piece = _partial_block(body, min(block_max, room))
            elif linked and sink.size:
                return sink.view()  # linked blocks need the previous window
            else:
                piece = _partial_block(body, min(block_max, room))
            sink.add(piece[:room])
            if len(body) < bs:
                return sink.view()
            pos += bs + block_ck
        if not ended:
            break
        pos += 4 if flg & 0x04 else 0
    return sink.view()
