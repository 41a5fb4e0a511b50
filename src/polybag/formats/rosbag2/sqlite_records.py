"""SQLite's record format read in numpy: varints, record headers and big-endian integers of
many cells at once (and one at a time, for a spilled cell), for the rosbag2 ``messages`` table
read straight from the file's pages (:mod:`polybag.formats.rosbag2.pages`).

Every index is bounds-checked before it is used; what does not add up is a :class:`GiveUp`
(the caller reads through SQLite instead).
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

# serial type -> bytes of an integer column (8 and 9: the constants 0 and 1)
INT_SIZE = {1: 1, 2: 2, 3: 3, 4: 4, 5: 6, 6: 8, 8: 0, 9: 0}


class GiveUp(Exception):
    """The file is not what the fast path reads; the caller reads through SQLite."""


def varints(buf: np.ndarray, pos: np.ndarray, limit: np.ndarray | int | None = None) -> tuple[np.ndarray, np.ndarray | int]:
    """The SQLite varints at ``pos``: values (int64; a 9-byte varint's 64 bits as they
    are) and lengths (an int when every one has the same); each must end before ``limit``
    (its page's end) when one is given (else the caller checks where they ended)."""
    n = len(pos)
    if n == 0:
        return np.zeros(0, np.int64), 1
    top = int(pos.max())
    if top >= len(buf):
        raise GiveUp("varint past the end of the file")
    b = buf[pos]
    if int(b.max()) < 0x80:  # the common case: every one a single byte
        if limit is not None and bool(np.any(pos + 1 > limit)):
            raise GiveUp("varint crosses the end of its page")
        return b.astype(np.int64), 1
    if top + 9 > len(buf):
        raise GiveUp("varint at the very end of the file")  # never in a page SQLite wrote
    short = short_varints(buf, pos)
    if short is not None:
        val, ln = short
        if limit is not None and bool(np.any(pos + ln > limit)):
            raise GiveUp("varint crosses the end of its page")
        return val, ln
    w = sliding_window_view(buf, 9)[pos]  # nine bytes from each: one copy per row
    stop = w[:, :8] < 0x80
    ln = np.where(stop.any(axis=1), stop.argmax(axis=1) + 1, 9)
    val = np.zeros(n, np.uint64)
    for k in range(min(int(ln.max()), 8)):
        val = np.where(ln > k, (val << np.uint64(7)) | (w[:, k] & 0x7F).astype(np.uint64), val)
    nine = ln == 9
    if nine.any():
        val = np.where(nine, (val << np.uint64(8)) | w[:, 8].astype(np.uint64), val)
    if limit is not None and bool(np.any(pos + ln > limit)):
        raise GiveUp("varint crosses the end of its page")
    return val.view(np.int64), ln


def short_varints(buf: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`varints` when every one is 1-4 bytes long (row ids below 2**28: every rosbag2
    table), from one 32-bit word per varint; None when one is longer.  The word's bytes in
    file order are ``b0 b1 b2 b3``; the varint ends at the first byte whose top bit is clear
    (the lowest such bit of the word read little-endian), and its value is the low seven bits
    of its bytes, ``b0`` first (the word byte-swapped, shifted to end at the last byte, its
    7-bit groups packed together).  The caller checked that ``pos + 9`` is inside ``buf``."""
    w = np.ndarray(buffer=buf, dtype="<u4", shape=(len(buf) - 3,), strides=(1,))[pos]
    stop = ~w & np.uint32(0x80808080)
    if not bool(np.all(stop)):
        return None
    low = stop & (np.uint32(0) - stop)  # the first byte that ends the varint: 0x80 << 8k
    ln = (low > 0x80).astype(np.int64)
    ln += low > 0x8000
    ln += low > 0x800000
    y = w.byteswap()
    y >>= ((4 - (ln + 1)) * 8).astype(np.uint32)
    ln += 1
    val = y & np.uint32(0x7F)
    val |= (y >> np.uint32(1)) & np.uint32(0x3F80)
    val |= (y >> np.uint32(2)) & np.uint32(0x1FC000)
    val |= (y >> np.uint32(3)) & np.uint32(0xFE00000)
    return val.astype(np.int64), ln


def short_header(buf: np.ndarray, s: np.ndarray) -> np.ndarray | None:
    """The first eight bytes of each record at ``s`` as a ``(n, 8)`` uint8 matrix (one 64-bit
    word gathered per record) when the header's size and four serial types are one-byte
    varints each (every row whose payload is under 58 bytes); None when one is longer (or
    the words would reach past the file)."""
    if len(s) == 0 or int(s.max()) + 8 > len(buf):
        return None
    w: np.ndarray = np.ndarray(buffer=buf, dtype="<u8", shape=(len(buf) - 7,), strides=(1,))[s]
    if bool(np.any(w & np.uint64(0x8080808080))):
        return None
    return w.view(np.uint8).reshape(len(s), 8)


def be_ints(buf: np.ndarray, pos: np.ndarray, types: np.ndarray) -> np.ndarray:
    """Signed big-endian integers of SQLite serial ``types`` (1-6, 8, 9) at ``pos`` (each
    ``size`` bytes gathered as one row of a sliding-window view: a copy per row, no index
    per byte)."""
    if len(types) and int(types.min()) == int(types.max()) and INT_SIZE[int(types[0])] in (1, 2, 4, 8):
        size = INT_SIZE[int(types[0])]  # the common case: one width for every row
        rows: np.ndarray = np.ndarray(buffer=buf, dtype=f">i{size}", shape=(len(buf) - size + 1,), strides=(1,))[pos]
        return rows.astype(np.int64)
    out = np.zeros(len(pos), np.int64)
    for t, size in INT_SIZE.items():
        m = types == t
        if not m.any():
            continue
        if size == 0:
            out[m] = t - 8
            continue
        raw = sliding_window_view(buf, size)[pos[m]]
        if size in (1, 2, 4, 8):
            out[m] = raw.view(f">i{size}").ravel()
            continue
        v = np.zeros(len(raw), np.int64)  # 3 and 6 bytes: assembled, then sign-extended
        for k in range(size):
            v = (v << 8) | raw[:, k]
        top = 1 << (8 * size - 1)
        out[m] = np.where(v >= top, v - (top << 1), v)
    return out


INT_TYPE = np.zeros(256, bool)  # serial types (one-byte varints) of an integer column
INT_TYPE[list(INT_SIZE)] = True
_WIDTH = np.zeros(256, np.int64)
for _t, _n in INT_SIZE.items():
    _WIDTH[_t] = _n


def widths(t: np.ndarray) -> np.ndarray | int:
    """Bytes of the integers of serial types ``t`` (all integer types): an int when every
    row has the same type."""
    if len(t) and int(t.min()) == int(t.max()):
        return int(_WIDTH[int(t[0])])
    each: np.ndarray = _WIDTH[t]
    return each


def all_int_types(t: np.ndarray) -> bool:
    """Whether every serial type is an integer's (1-6, 8 or 9)."""
    return bool(np.all(((t >= 1) & (t <= 6)) | (t == 8) | (t == 9)))


def varint(data: bytes, at: int) -> tuple[int, int]:
    """One varint of ``data`` at ``at``: (value as unsigned, position after it)."""
    v = 0
    for i in range(9):
        if at >= len(data):
            raise GiveUp("varint past the end of a payload")
        b = data[at]
        at += 1
        if i == 8:
            return (v << 8) | b, at
        v = (v << 7) | (b & 0x7F)
        if b < 0x80:
            return v, at
    raise AssertionError("unreachable")  # pragma: no cover


def be_int(data: bytes, at: int, t: int) -> int:
    size = INT_SIZE[t]
    if size == 0:
        return t - 8
    return int.from_bytes(data[at : at + size], "big", signed=True)
