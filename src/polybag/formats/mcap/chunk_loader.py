"""Loading a chunk: read its Chunk record, decompress its records (bounded by the reader's
``max_chunk_bytes``) and check their CRC (errors carry the Chunk record's offset); and read
the Message Index entries that follow it, without decompressing anything.
"""

from __future__ import annotations

import numpy as np

from polybag.errors import ChecksumError, FormatError, TruncatedError, UnsupportedError
from polybag.formats.mcap import records as R
from polybag.formats.mcap.bulk_kernels import MESSAGE_INDEX_ENTRY_DTYPE
from polybag.formats.mcap.records import CHUNK_HEAD, RECORD_HEAD, U32, U64
from polybag.formats.mcap.vocabulary import OP_CHUNK, OP_MESSAGE_INDEX
from polybag.io import compression
from polybag.io.source import MappedSource


def load_chunk(src: MappedSource, offset: int, path: str | None, validate_crcs: bool, max_bytes: int, held: int = 0) -> bytes | memoryview:
    """The decompressed records of the Chunk record at ``offset`` of ``src``, CRC-checked when
    ``validate_crcs`` (asking a remote source for exactly its bytes; ``held``: bytes from
    ``offset`` on already asked for, not asked again)."""
    view = src.view
    if offset + 9 > src.size:
        raise TruncatedError("expected a Chunk record header", path, offset)
    if held < 9:
        src.need(offset, 9)
    op, ln = RECORD_HEAD.unpack_from(view, offset)
    if op != OP_CHUNK:
        raise FormatError(f"expected a Chunk record (opcode 0x06), found opcode 0x{op:02x}", path, offset)
    if ln > src.size - offset - 9:
        raise TruncatedError(f"Chunk declares {ln} bytes, file has {src.size - offset - 9} left", path, offset)
    if held < 9 + ln:
        src.need(offset, 9 + ln)
    return decode_chunk(view, offset + 9, offset + 9 + ln, offset, path, validate_crcs, max_bytes)


def decode_chunk(buf: memoryview | bytes, start: int, end: int, offset: int, path: str | None, validate_crcs: bool, max_bytes: int) -> bytes | memoryview:
    """The decompressed records of the Chunk record whose content is ``buf[start:end]`` (at file
    ``offset``), at most ``max_bytes`` of them, CRC-checked when ``validate_crcs``."""
    if end - start < CHUNK_HEAD.size + 4:
        raise FormatError(f"Chunk record of {end - start} bytes is shorter than its fixed fields", path, offset)
    _s, _e, usize, ucrc = CHUNK_HEAD.unpack_from(buf, start)
    p = start + CHUNK_HEAD.size
    clen = U32.unpack_from(buf, p)[0]
    p += 4
    if p + clen + 8 > end:
        raise FormatError(f"Chunk compression name declares {clen} bytes, record has {end - p} left", path, offset)
    comp = bytes(buf[p : p + clen]).decode("utf-8", "replace")
    p += clen
    rlen = U64.unpack_from(buf, p)[0]
    p += 8
    if rlen > end - p:
        raise FormatError(f"Chunk records declare {rlen} bytes, record has {end - p} left", path, offset)
    data = buf[p : p + rlen]
    try:
        out = compression.decompress(comp, data, usize, path=path, offset=offset, max_bytes=max_bytes)
    except UnsupportedError as e:
        raise FormatError(f"Chunk uses unknown compression {comp!r}: {e}", path, offset) from None
    if ucrc and validate_crcs:
        crc = compression.crc32(out)
        if crc != ucrc:
            raise ChecksumError(f"Chunk records CRC is {crc:#010x}, the Chunk records {ucrc:#010x}", path, offset)
    return out


def chunk_header_info(src: MappedSource, off: int) -> tuple[str, int, int]:
    """(compression, compressed size, uncompressed size) from the header of the Chunk record at ``off``."""
    src.need(off, 4096)
    view = src.view
    p = off + 9 + CHUNK_HEAD.size
    usize = CHUNK_HEAD.unpack_from(view, off + 9)[2]
    clen = U32.unpack_from(view, p)[0]
    comp = bytes(view[p + 4 : p + 4 + clen]).decode("utf-8", "replace")
    csize = U64.unpack_from(view, p + 4 + clen)[0]
    return (comp or "none"), csize, usize


def message_index_parts(src: MappedSource, ci: R.ChunkIndex, want: set[int] | None) -> list[tuple[int, np.ndarray]] | None:
    """(channel id, Message Index entries) of the chunk that ``ci`` indexes, for the channels
    in ``want``; None to walk the chunk (no Message Indexes, or one that does not read)."""
    mio = ci.message_index_offsets
    if not mio:
        return None
    src.need(ci.chunk_start_offset + ci.chunk_length, ci.message_index_length)
    view = src.view
    parts = []
    for cid, off in mio.items():
        if want is not None and cid not in want:
            continue
        if off + 15 > src.size:
            return None
        op, ln = RECORD_HEAD.unpack_from(view, off)
        if op != OP_MESSAGE_INDEX or ln > src.size - off - 9 or ln < 6:
            return None
        rlen = U32.unpack_from(view, off + 11)[0]
        if rlen % 16 or rlen > ln - 6:
            return None
        parts.append((cid, np.frombuffer(view, MESSAGE_INDEX_ENTRY_DTYPE, count=rlen // 16, offset=off + 15)))
    return parts
