"""Columns, fixed-layout paths: ROS 1 types that are fixed-size but for their strings.

When every payload has the same layout (:func:`fixed_layout`, :func:`fixed_from_payloads`)
the rows are one structured record per message and the fields typed strided views of them
(or copies made block by block while the rows are in cache); when only the string lengths
vary (:func:`string_layout`) each segment of every row is gathered per block at offsets
computed from the string lengths as vectors.  Anything else returns None and is left to the
general walk (:mod:`polybag.codecs.columns_walk`).  The limits (:class:`Limits`) come from
the tunables of :mod:`polybag.codecs.columns`, read when its entry points are called.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np

from polybag.codecs.columns_layout import Columns, Layout, layout_of

LITTLE_ENDIAN = sys.byteorder == "little"  # views of little-endian fields are native only here
_FEW_LENGTHS = 16  # at most this many string lengths per block: decoded per length, as vectors


class Limits(NamedTuple):
    """Block sizes of the fixed-layout paths (see the tunables in :mod:`polybag.codecs.columns`)."""

    chunk_bytes: int  # payload bytes read per block of rows
    block_bytes: int  # most bytes of one output block
    gather_bytes: int  # rows gathered per block when the layout varies


def numpy_owns(a: np.ndarray) -> bool:
    """Whether numpy owns ``a``'s memory (a gathered blob), so views of it may be handed out:
    never a mapped file or ``bytes`` (a view would pin it, or outlive a closed file)."""
    base = a
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    return isinstance(base, np.ndarray) and base.flags.writeable


def _texts(raw: np.ndarray) -> np.ndarray | str:
    """The strings of the ``(m, k)`` uint8 rows ``raw`` (k > 0): one str when all are equal,
    else an object array, each distinct value decoded once."""
    if bool((raw == raw[0]).all()):
        text: str = raw[0].tobytes().decode("utf-8", "replace")
        return text
    k = raw.shape[1]
    uniq, inverse = np.unique(np.ascontiguousarray(raw).view(f"V{k}")[:, 0], return_inverse=True)
    texts = np.empty(len(uniq), dtype=object)
    texts[:] = [u.tobytes().decode("utf-8", "replace") for u in uniq]
    return texts[inverse.reshape(-1)]


def fixed_layout(
    codec: Any, blob: np.ndarray, starts: np.ndarray, sizes: np.ndarray, want: Callable[[str], bool], lim: Limits
) -> dict[str, np.ndarray] | None:
    """Columns of ROS 1 payloads that all share one layout, as typed strided views; or None.

    The layout comes from the definition and the first payload's string lengths; it holds for
    every payload when they are equal-sized, back to back in ``blob``, and every string length
    equals the first payload's (checked as one vector per string field).  The rows are then a
    numpy structured array (one record per message).  When numpy owns ``blob`` (the gathered
    payloads of ``topic_payloads``) and the wanted fields are at least half of each row, the
    fields are returned as typed strided views of it (no copy; see :class:`Columns`);
    otherwise they are copied out block by block so the rows are read from memory once.
    Anything else (mixed string lengths: see :func:`string_layout`; sequences, damage) is
    left to the caller.
    """
    n = len(starts)
    if n == 0 or not _fixed_codec(codec):
        return None
    size = int(sizes[0])
    if size == 0 or not bool((sizes == size).all()) or int(starts[0]) != 0 or len(blob) < n * size:
        return None
    if n > 1 and not back_to_back(starts, size):
        return None
    mat = blob[: n * size].reshape(n, size)
    per = max(1, lim.chunk_bytes // size)
    views = mat if LITTLE_ENDIAN and numpy_owns(blob) else None
    blocks = ((a, mat[a : a + per]) for a in range(0, n, per))
    return _fixed_blocks(codec, n, size, mat[0].tobytes(), blocks, want, lim.block_bytes, views)


def back_to_back(starts: np.ndarray, size: int) -> bool:
    """``starts == arange(0, n * size, size)``, checked in pieces (no n-sized temporaries)."""
    step = 1 << 14
    for a in range(0, len(starts), step):
        part = starts[a : a + step]
        if not np.array_equal(part, np.arange(a * size, (a + len(part)) * size, size, dtype=np.int64)):
            return False
    return True


def _fixed_codec(codec: Any) -> bool:
    return not hasattr(codec, "_compilers") and hasattr(codec, "compiler")


def fixed_from_payloads(
    codec: Any,
    datas: Sequence[bytes | memoryview],
    sizes: np.ndarray,
    want: Callable[[str], bool],
    lim: Limits,
) -> dict[str, np.ndarray] | None:
    """:func:`fixed_layout` over a list of equal-sized payloads, joined a block at a time.

    Joining the whole list first would fault in a fresh buffer the size of all payloads on
    every call; a block (a few MB) is joined, its columns copied out, and freed, so the
    allocator hands the same memory to the next block.
    """
    n = len(datas)
    if n == 0 or not _fixed_codec(codec):
        return None
    size = int(sizes[0])
    if size == 0 or not bool((sizes == size).all()):
        return None
    per = max(1, lim.chunk_bytes // size)

    def blocks() -> Iterator[tuple[int, np.ndarray]]:
        for a in range(0, n, per):
            yield a, np.frombuffer(b"".join(datas[a : a + per]), np.uint8).reshape(-1, size)

    return _fixed_blocks(codec, n, size, bytes(datas[0]), blocks(), want, lim.block_bytes)


def _fixed_blocks(
    codec: Any,
    n: int,
    size: int,
    first: bytes,
    blocks: Iterable[tuple[int, np.ndarray]],
    want: Callable[[str], bool],
    block_bytes: int,
    views: np.ndarray | None = None,
) -> dict[str, np.ndarray] | None:
    """Fill the columns of ``n`` rows of ``size`` bytes from ``(first row, rows)`` blocks; or None.

    The outputs are allocated once (see :class:`Columns`), filled exactly once; each block's
    typed strided views are copied into them while the block is in cache.  Time columns are
    computed in place, strings checked and decoded per block (their length must equal the
    first row's).  ``views``: all ``n`` rows as one ``(n, size)`` array numpy owns; the
    fields may then be views of it (when the wanted ones are at least half of each row).
    """
    lay = layout_of(codec)
    if lay is None:
        return None
    found = _segment_starts(lay, first, size)
    if found is None:
        return None
    seg_at, lens = found
    if views is not None and 2 * Columns.view_bytes(lay, want) < size:
        views = None  # a few narrow fields: copies, not views pinning every row
    cols = Columns(lay, n, want, seg_at, views, block_bytes)  # one segment: the whole row
    strings = [(off, lens[k], col) for k, (_s, off, col) in enumerate(cols.strings)]
    for a, rows in blocks:
        m = len(rows)
        b = a + m
        for off, count, _col in strings:
            if not bool((np.ndarray((m,), "<u4", rows, off, (size,)) == count).all()):
                return None  # strings of other lengths: the layout differs between messages
        cols.fill(a, (rows,))
        for off, count, col in strings:
            if col is None:
                continue
            if count == 0:
                col[a:b] = ""
            else:
                col[a:b] = _texts(np.ndarray((m, count), np.uint8, rows, off + 4, (size, 1)))
    return cols.out


def _segment_starts(lay: Layout, first: bytes, size: int) -> tuple[list[int], list[int]] | None:
    """Where each segment starts in every row and the string lengths, from the first row of
    ``size`` bytes; or None when its strings do not fit ``size`` exactly."""
    seg_at = [0]
    lens: list[int] = []
    for j in range(len(lay.segs) - 1):
        p = seg_at[j] + lay.segs[j]
        if p > size:
            return None
        k = int.from_bytes(first[p - 4 : p], "little")
        lens.append(k)
        seg_at.append(p + k)
    if seg_at[-1] + lay.segs[-1] != size:
        return None
    return seg_at, lens


def rows_at(blob: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    """``blob[p:p+width]`` for every p in ``pos`` as one C-contiguous ``(len(pos), width)``
    uint8 array (the caller checked the bounds)."""
    if width == 0:
        return np.zeros((len(pos), 0), np.uint8)
    # every ``width`` bytes of the blob as one element of a void dtype: one copy per row in C
    win = np.ndarray((len(blob) - width + 1,), f"V{width}", blob, 0, (1,))
    rows: np.ndarray = win[pos]
    return rows.view(np.uint8).reshape(-1, width)


def string_layout(
    codec: Any, blob: np.ndarray, starts: np.ndarray, sizes: np.ndarray, want: Callable[[str], bool], lim: Limits
) -> dict[str, np.ndarray] | None:
    """Columns of a type fixed-size but for strings of any lengths (mixed ``frame_id``s); or None.

    Per block of rows: segment by segment, the segment's bytes of every row are gathered into
    one ``(rows, width)`` array (a copy per row, in C) and its string lengths read as a
    vector, which gives where the next segment starts in every row; the fixed-size fields are
    then copied out as for :func:`fixed_layout`.  Strings are decoded per distinct length as
    ``(rows, length)`` arrays, each distinct value once.  Payloads may be anywhere in ``blob``
    and of any sizes.  A payload that is not exactly its fields (too short, bytes left over,
    a string running past its end) gives None: the general walk reports it.
    """
    n = len(starts)
    if n == 0 or not _fixed_codec(codec):
        return None
    lay = layout_of(codec)
    if lay is None or len(lay.segs) == 1:
        return None  # no strings: equal sizes took the fixed path, others are damaged
    ends = starts + sizes
    if int(starts.min()) < 0 or int(ends.max()) > len(blob):
        return None
    cols = Columns(lay, n, want, block_bytes=lim.block_bytes)
    total = int(sizes.sum())
    per = max(1, int(n * min(lim.chunk_bytes, lim.gather_bytes) // max(total, 1)))
    for a in range(0, n, per):
        b = min(n, a + per)
        found = _gather_segments(blob, lay, starts[a:b], ends[a:b])
        if found is None:
            return None
        mats, texts = found
        cols.fill(a, mats)
        for (_seg, _off, col), (p, k) in zip(cols.strings, texts, strict=True):
            if col is not None:
                decode_strings(blob, p, k, col[a:b])
    return cols.out


def _gather_segments(
    blob: np.ndarray, lay: Layout, pos: np.ndarray, end: np.ndarray
) -> tuple[list[np.ndarray], list[tuple[np.ndarray, np.ndarray]]] | None:
    """The rows ``pos``..``end`` of one block, segment by segment: each segment's
    ``(rows, width)`` bytes, and ``(position of the bytes, length)`` per string; or None when a
    payload is not exactly its fields."""
    m = len(pos)
    nseg = len(lay.segs)
    mats: list[np.ndarray] = []
    texts: list[tuple[np.ndarray, np.ndarray]] = []  # (position of the bytes, length) per string
    for j, w in enumerate(lay.segs):
        if bool((pos + w > end).any()):
            return None
        mats.append(rows_at(blob, pos, w))
        pos = pos + w
        if j < nseg - 1:
            k = np.ndarray((m,), "<u4", mats[j], w - 4, (w,)).astype(np.int64)
            texts.append((pos, k))
            pos = pos + k
    if not bool((pos == end).all()):
        return None
    return mats, texts


def decode_strings(blob: np.ndarray, pos: np.ndarray, lens: np.ndarray, col: np.ndarray) -> None:
    """``col[i] = blob[pos[i]:pos[i] + lens[i]]`` decoded (UTF-8, invalid bytes as U+FFFD as rosbag does)."""
    if not len(lens):
        return
    k0 = int(lens[0])
    if bool((lens == k0).all()):
        col[:] = _texts(rows_at(blob, pos, k0)) if k0 else ""
        return
    ks = np.unique(lens)
    if len(ks) <= _FEW_LENGTHS:
        for k in ks.tolist():
            sel = np.flatnonzero(lens == k)
            col[sel] = _texts(rows_at(blob, pos[sel], k)) if k else ""
        return
    cache: dict[bytes, str] = {}
    mv = memoryview(blob)  # type: ignore[arg-type]  # numpy declares the buffer protocol (__buffer__) for Python 3.12+ only
    for i, (p, k) in enumerate(zip(pos.tolist(), lens.tolist(), strict=True)):
        raw = bytes(mv[p : p + k])
        s = cache.get(raw)
        if s is None:
            s = cache[raw] = raw.decode("utf-8", "replace")
        col[i] = s
