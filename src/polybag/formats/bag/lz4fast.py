"""Fast decoding of the LZ4 frames in bag chunks (roslz4).

python-lz4's frame decoder spends milliseconds per chunk on the 1 MiB / 4 MiB blocks that
rosbag writes (buffer handling, and the content checksum).  A roslz4 frame has independent
blocks, so each block can go straight to ``lz4.block.decompress`` with the remaining
declared size as its bound.  Checksums are not verified here (``polybag check`` verifies
them through the strict decoder); frames with linked blocks or anything unexpected fall
back to :func:`polybag.compression.decompress`.
"""

from __future__ import annotations

import struct

import lz4.block

from polybag.compression import decompress as strict_decompress
from polybag.errors import FormatError

_MAGIC = 0x184D2204
_u32 = struct.Struct("<I").unpack_from


class _Fallback(Exception):
    pass


def decompress_lz4(data: bytes | memoryview, size: int, *, path: str | None = None, offset: int | None = None) -> bytes:
    """The ``size`` bytes an LZ4 frame (or frames) decompress to."""
    try:
        return _fast(memoryview(data), size, path, offset)
    except _Fallback:
        out = strict_decompress("lz4", data, size, path=path, offset=offset)
        return bytes(out)


def _fast(mv: memoryview, size: int, path: str | None, offset: int | None) -> bytes:
    parts: list[bytes] = []
    have = 0
    pos = 0
    n = len(mv)
    while pos < n:
        if n - pos < 7 or _u32(mv, pos)[0] != _MAGIC:
            raise _Fallback
        flg = mv[pos + 4]
        bd = mv[pos + 5]
        if (flg >> 6) != 1 or not (flg & 0x20):  # version 01, independent blocks only
            raise _Fallback
        block_max = 1 << (8 + 2 * ((bd >> 4) & 7))
        if not 4 <= (bd >> 4) & 7 <= 7:
            raise _Fallback
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
            room = size - have
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
            parts.append(piece)
            have += len(piece)
            pos += bs + block_ck
        if flg & 0x04:
            pos += 4
        if pos > n:
            raise FormatError("lz4 frame ends inside its checksum", path, offset)
    if have != size:
        raise FormatError(f"lz4 data decompresses to {have} bytes, header says {size}", path, offset)
    return parts[0] if len(parts) == 1 else b"".join(parts)
