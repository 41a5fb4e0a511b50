"""One registry of chunk compressions, with bounded decompression.

Names: ``""``/``none`` (stored), ``zstd``, ``lz4`` (the LZ4 frame format, used both by MCAP
and by ROS 1 bags' ``roslz4``) and ``bz2``.

Memory never depends on what a file declares:

* one cap bounds what any single chunk may expand to (:data:`DEFAULT_MAX_CHUNK_BYTES`,
  512 MiB; ``polybag.open(..., max_chunk_bytes=N)``, ``polybag --max-chunk SIZE``, or
  :func:`set_max_chunk_bytes` for the whole process).  A chunk that declares more is a
  :class:`ChunkLimitError` before anything is decompressed; a chunk that declares no size
  stops at the cap.
* a declared size under the cap is a bound, not a trust: output is produced in pieces and
  decompression stops with a :class:`~polybag.errors.FormatError` as soon as it would exceed
  the declared size.  A zstd frame that states its own content size is checked against the
  declared size first (python-zstandard would allocate what the frame states), so a chunk
  that declares 1,000 bytes but holds a 2 GiB frame allocates nothing.
* a large output grows in place (one buffer, no list of pieces joined at the end), so a
  chunk costs its size plus one piece.
"""

from __future__ import annotations

import importlib
import operator
import threading
import zlib
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from polybag.errors import FormatError, UnsupportedError, UsageError


class _Lazy:
    """A module imported on first use: zstandard and lz4 cost ~7 ms to import, which a
    process that reads a ULog log (or an uncompressed file) need not pay."""

    __slots__ = ("_name", "_mod")

    def __init__(self, name: str) -> None:
        self._name = name
        self._mod: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        mod = self._mod
        if mod is None:
            mod = self._mod = importlib.import_module(self._name)
        return getattr(mod, attr)


if TYPE_CHECKING:
    import bz2 as _bz2

    import lz4.frame as _lz4f  # type: ignore[import-untyped]  # lz4 ships no type hints
    import zstandard as _zstd
else:
    _bz2 = _Lazy("bz2")
    _lz4f = _Lazy("lz4.frame")
    _zstd = _Lazy("zstandard")


def _crc32_impl() -> Callable[..., int]:
    """ISA-L's CRC-32 (``isal``: carry-less multiply, ~4x zlib's on a large buffer) when
    it is installed, else zlib's: the same function, values and signature."""
    try:
        from isal.isal_zlib import crc32 as fast
    except ImportError:  # pragma: no cover - isal is a dependency; a platform without its wheel
        return zlib.crc32
    return fast


# ``crc32(data, value=0)``: zlib's CRC-32 of ``data`` (any buffer) continuing ``value``,
# computed by the fastest implementation installed (the MCAP writer's and reader's CRCs:
# about a sixth of a large zstd convert's CPU with zlib's).  Made on first use (module
# ``__getattr__``): importing ISA-L costs ~1 ms that a ULog or bag read never needs.
if TYPE_CHECKING:
    crc32: Callable[..., int]


def __getattr__(name: str) -> Any:
    """``crc32`` on first use (see above)."""
    if name == "crc32":
        fn = globals()["crc32"] = _crc32_impl()
        return fn
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_PIECE = 1 << 22  # output is produced 4 MiB at a time (the transient beyond the chunk itself)

DEFAULT_MAX_CHUNK_BYTES = 512 << 20
LIMIT_HINT = "raise it with --max-chunk / max_chunk_bytes="
_max_chunk = DEFAULT_MAX_CHUNK_BYTES  # the process-wide default (the CLI's --max-chunk)

_NONE_NAMES = ("", "none")
NAMES = ("none", "zstd", "lz4", "bz2")

_zstd_d: _zstd.ZstdDecompressor | None = None  # the main thread's; other threads get their own (_zstd_dctx)
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
        frame: bytes = _lz4f.compress(
            data,
            compression_level=0 if level is None else level,
            block_size=_lz4f.BLOCKSIZE_MAX4MB,
            content_checksum=True,
            block_linked=False,
            store_size=False,
        )
        return frame
    return _bz2.compress(data, 9 if level is None else level)


# --- the cap on what one chunk may expand to -------------------------------------------------
class ChunkLimitError(FormatError):
    """A chunk would expand to more than the cap (``max_chunk_bytes`` / ``--max-chunk``).

    Not damage: the file may be fine and the cap too low for it, so the message says how to
    raise it."""


_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str) -> int:
    """Bytes from ``1048576``, ``64K``, ``512M``, ``1G``, ``1.5G`` (also ``512MB``/``512MiB``;
    units are powers of 1024).  :class:`~polybag.errors.UsageError` if it is not a positive size."""
    t = str(text).strip().lower().replace("_", "")
    num = t.rstrip("kmgtib")
    unit = t[len(num) :]
    if unit.endswith("ib"):
        unit = unit[:-2]
    elif unit.endswith("b"):
        unit = unit[:-1]
    mult = _SIZE_UNITS.get(unit)
    try:
        value = float(num) if "." in num else int(num)
    except ValueError:
        value = None
    if mult is None or value is None or not num or value <= 0 or value * mult > 1 << 62:
        raise UsageError(f"expected a size such as 1048576, 64K, 512M or 1G, got {text!r}")
    return max(1, int(value * mult))


def _checked(value: object) -> int:
    if isinstance(value, str):
        return parse_size(value)
    try:
        n = operator.index(value)  # type: ignore[arg-type]  # ints and numpy integers, not floats
    except TypeError:
        n = 0
    if isinstance(value, bool) or n <= 0:
        raise UsageError(f"max_chunk_bytes must be a positive number of bytes, not {value!r}")
    return n


def max_chunk_bytes(value: int | str | None = None) -> int:
    """``value`` checked (a positive int, or a size such as ``"1G"``), or the process-wide cap
    when it is None."""
    return _max_chunk if value is None else _checked(value)


def set_max_chunk_bytes(value: int | str | None) -> int:
    """Set the process-wide cap (None: back to :data:`DEFAULT_MAX_CHUNK_BYTES`); returns the
    previous one.  Readers take the cap in force when they are opened."""
    global _max_chunk
    prev = _max_chunk
    _max_chunk = DEFAULT_MAX_CHUNK_BYTES if value is None else _checked(value)
    return prev


def check_declared(size: int | None, limit: int, path: str | None = None, offset: int | None = None) -> None:
    """:class:`ChunkLimitError` if a chunk declares more than ``limit`` uncompressed bytes."""
    if size is not None and size > limit:
        raise ChunkLimitError(
            f"chunk declares {size} uncompressed bytes, over the {limit}-byte limit ({LIMIT_HINT})",
            path,
            offset,
        )


# --- decompression ---------------------------------------------------------------------------
def decompress(
    name: str | None,
    data: bytes | memoryview,
    size: int | None,
    *,
    path: str | None = None,
    offset: int | None = None,
    max_bytes: int | None = None,
) -> bytes | memoryview:
    """Decompress ``data`` that declares ``size`` uncompressed bytes (``None``: unknown).

    ``max_bytes`` is the cap (None: the process-wide one): a declared size over it is a
    :class:`ChunkLimitError` before anything is decompressed, and with an unknown size the
    output stops at it.  With a known size the output must be exactly that long.  Large
    outputs (more than one piece) are a read-only ``memoryview`` of the buffer they grew
    in, others ``bytes``.
    """
    n = normalize(name)
    if n == "none":
        if size is not None and len(data) != size:
            raise FormatError(f"uncompressed chunk holds {len(data)} bytes, header says {size}", path, offset)
        return data
    cap = max_chunk_bytes(max_bytes)
    check_declared(size, cap, path, offset)
    limit = cap if size is None else size
    try:
        if n == "zstd":
            out = _zstd_bounded(data, size, limit)
        elif n == "lz4":
            out = _incremental(_lz4f.LZ4FrameDecompressor(), data, limit)
        else:
            out = _incremental(_bz2.BZ2Decompressor(), data, limit)
    except FormatError:
        raise
    except (RuntimeError, OSError, ValueError, EOFError, MemoryError, _zstd.ZstdError) as e:
        raise FormatError(f"{n} data does not decompress: {e}", path, offset) from e
    except _Overflow as e:
        stated = f" (its frame states {e.stated} bytes)" if e.stated is not None else ""
        if size is None:
            raise ChunkLimitError(
                f"{n} data decompresses to more than the {limit}-byte limit{stated} ({LIMIT_HINT})",
                path,
                offset,
            ) from None
        raise FormatError(
            f"{n} data decompresses to more than the declared {size} bytes{stated}", path, offset
        ) from None
    if size is not None and len(out) != size:
        raise FormatError(f"{n} data decompresses to {len(out)} bytes, header says {size}", path, offset)
    if isinstance(out, bytearray):
        return memoryview(out).toreadonly()  # readers take bytes or a (mapped) memoryview
    return out


class _Overflow(Exception):
    def __init__(self, stated: int | None = None) -> None:
        self.stated = stated


class OutputBuffer:
    """Output that grows in place: the first piece as it is, then one bytearray that later
    pieces extend (a large bytearray grows by ``realloc``, which moves pages instead of
    copying them), so a chunk costs its size plus one piece, never twice its size."""

    __slots__ = ("first", "grown", "size")

    def __init__(self) -> None:
        self.first: bytes | None = None
        self.grown: bytearray | None = None
        self.size = 0

    def add(self, piece: bytes) -> None:
        if not piece:
            return
        self.size += len(piece)
        if self.grown is not None:
            self.grown += piece
        elif self.first is None:
            self.first = piece
        else:
            self.grown = bytearray(self.first)
            self.first = None
            self.grown += piece

    def result(self) -> bytes | bytearray:
        if self.grown is not None:
            return self.grown
        return self.first if self.first is not None else b""

    def view(self) -> bytes | memoryview:
        """The output as ``bytes`` (one piece) or a read-only view of the grown buffer."""
        out = self.result()
        return memoryview(out).toreadonly() if isinstance(out, bytearray) else out


def _zstd_dctx() -> _zstd.ZstdDecompressor:
    """This thread's decompression context (a context used by two threads at once corrupts
    both outputs: readers run in threads under dask's threaded scheduler)."""
    if threading.current_thread() is threading.main_thread():
        global _zstd_d
        if _zstd_d is None:
            _zstd_d = _zstd.ZstdDecompressor()
        return _zstd_d
    d: _zstd.ZstdDecompressor | None = getattr(_local, "zstd_d", None)
    if d is None:
        d = _local.zstd_d = _zstd.ZstdDecompressor()
    return d


def _zstd_bounded(data: bytes | memoryview, size: int | None, limit: int) -> bytes | bytearray:
    dctx = _zstd_dctx()
    try:
        stated = _zstd.frame_content_size(data)  # -1: the frame does not say; 0 also for skippable frames
    except _zstd.ZstdError:
        stated = -1  # not a frame header: the streaming decoder below says what is wrong
    if stated > limit:
        # python-zstandard allocates what a frame states: never let it
        raise _Overflow(stated)
    if stated > 0 and (size is None or stated == size):
        # a single frame that states its size (zstd checks the frame really has it): one
        # allocation of exactly that size.  Extra frames after it: the streaming path below.
        try:
            out: bytes = dctx.decompress(data, allow_extra_data=False)
            return out
        except _zstd.ZstdError:
            pass
    reader = dctx.stream_reader(data, read_across_frames=True)
    sink = OutputBuffer()
    while True:
        piece = reader.read(min(_PIECE, limit - sink.size + 1))
        if not piece:
            break
        sink.add(piece)
        if sink.size > limit:
            raise _Overflow
    return sink.result()


def _incremental(
    dec: _lz4f.LZ4FrameDecompressor | _bz2.BZ2Decompressor, data: bytes | memoryview, limit: int
) -> bytes | bytearray:
    sink = OutputBuffer()
    buf: bytes | memoryview = data
    while True:
        piece = dec.decompress(buf, max_length=min(_PIECE, limit - sink.size + 1))
        buf = b""
        sink.add(piece)
        if sink.size > limit:
            raise _Overflow
        if dec.eof:
            break
        if not piece and dec.needs_input:
            raise EOFError("compressed data ends early")
    return sink.result()
