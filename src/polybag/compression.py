"""One registry of chunk compressions, with bounded decompression.

Names: ``""``/``none`` (stored), ``zstd``, ``lz4`` (the LZ4 frame format, used both by MCAP
and by ROS 1 bags' ``roslz4``) and ``bz2``.  A declared uncompressed size is a bound, not a
trust: output is produced in pieces and decompression stops with a
:class:`~polybag.errors.FormatError` as soon as it would exceed the declared size, so a
lying header never causes a huge allocation.
"""

from __future__ import annotations

import bz2 as _bz2
import threading

import lz4.frame as _lz4f
import zstandard as _zstd

from polybag.errors import FormatError, UnsupportedError

_PIECE = 1 << 26  # grow output 64 MiB at a time for large declared sizes

_NONE_NAMES = ("", "none")
NAMES = ("none", "zstd", "lz4", "bz2")

_zstd_d = _zstd.ZstdDecompressor()  # the main thread's; other threads get their own (_zstd_dctx)
_local = threading.local()  # zstd contexts: one per thread (a context is not thread-safe)


def normalize(name: str | None) -> str:
    if name is None or name in _NONE_NAMES:
        return "none"
    n = name.lower()
    if n == "roslz4":
        return "lz4"
    if n not in NAMES:
        raise UnsupportedError(f"unknown compression {name!r} (known: {', '.join(NAMES)})")
    return n


def compress(name: str | None, data: bytes | bytearray | memoryview, level: int | None = None) -> bytes:
    n = normalize(name)
    if n == "none":
        return bytes(data)
    if n == "zstd":
        lv = 3 if level is None else level
        cs: dict[int, _zstd.ZstdCompressor] | None = getattr(_local, "zstd", None)
        if cs is None:
            cs = _local.zstd = {}
        c = cs.get(lv)
        if c is None:
            c = cs[lv] = _zstd.ZstdCompressor(level=lv)
        return c.compress(data)
    if n == "lz4":
        # one frame that both readers accept: rosbag's roslz4 (C++ and Python) refuses frames
        # without a content checksum and expects independent 4 MB blocks; MCAP readers take any
        return _lz4f.compress(
            data,
            compression_level=0 if level is None else level,
            block_size=_lz4f.BLOCKSIZE_MAX4MB,
            content_checksum=True,
            block_linked=False,
            store_size=False,
        )
    return _bz2.compress(data, 9 if level is None else level)


def decompress(
    name: str | None,
    data: bytes | memoryview,
    size: int | None,
    *,
    path: str | None = None,
    offset: int | None = None,
) -> bytes | memoryview:
    """Decompress ``data`` that declares ``size`` uncompressed bytes (``None``: unknown).

    With a known size the output must be exactly that long.  With an unknown size the
    output is bounded by ``1 << 32`` bytes.
    """
    n = normalize(name)
    if n == "none":
        if size is not None and len(data) != size:
            raise FormatError(
                f"uncompressed chunk holds {len(data)} bytes, header says {size}", path, offset
            )
        return data
    limit = size if size is not None else 1 << 32
    try:
        if n == "zstd":
            out = _zstd_bounded(data, limit)
        elif n == "lz4":
            out = _incremental(_lz4f.LZ4FrameDecompressor(), data, limit)
        else:
            out = _incremental(_bz2.BZ2Decompressor(), data, limit)
    except FormatError:
        raise
    except (RuntimeError, OSError, ValueError, EOFError, MemoryError, _zstd.ZstdError) as e:
        raise FormatError(f"{n} data does not decompress: {e}", path, offset) from e
    except _Overflow:
        raise FormatError(
            f"{n} data decompresses to more than the declared {limit} bytes", path, offset
        ) from None
    if size is not None and len(out) != size:
        raise FormatError(
            f"{n} data decompresses to {len(out)} bytes, header says {size}", path, offset
        )
    return out


class _Overflow(Exception):
    pass


def _zstd_dctx() -> _zstd.ZstdDecompressor:
    """This thread's decompression context (a context used by two threads at once corrupts
    both outputs: readers run in threads under dask's threaded scheduler)."""
    if threading.current_thread() is threading.main_thread():
        return _zstd_d
    d: _zstd.ZstdDecompressor | None = getattr(_local, "zstd_d", None)
    if d is None:
        d = _local.zstd_d = _zstd.ZstdDecompressor()
    return d


def _zstd_bounded(data: bytes | memoryview, limit: int) -> bytes:
    dctx = _zstd_dctx()
    if limit <= _PIECE:
        # max_output_size bounds the allocation; frames without a content size need it.
        out = dctx.decompress(data, max_output_size=max(limit, 1))
        if len(out) > limit:
            raise _Overflow
        return out
    reader = dctx.stream_reader(bytes(data), read_across_frames=True)
    parts: list[bytes] = []
    have = 0
    while True:
        piece = reader.read(_PIECE)
        if not piece:
            break
        have += len(piece)
        if have > limit:
            raise _Overflow
        parts.append(piece)
    return b"".join(parts)


def _incremental(dec: _lz4f.LZ4FrameDecompressor | _bz2.BZ2Decompressor, data: bytes | memoryview, limit: int) -> bytes:
    parts: list[bytes] = []
    have = 0
    buf: bytes | memoryview = data
    while True:
        piece = dec.decompress(buf, max_length=min(_PIECE, limit - have + 1))
        buf = b""
        have += len(piece)
        if have > limit:
            raise _Overflow
        parts.append(piece)
        if dec.eof:
            break
        if not piece and dec.needs_input:
            raise EOFError("compressed data ends early")
    return b"".join(parts)
