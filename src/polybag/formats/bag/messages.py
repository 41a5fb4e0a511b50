"""The hot kernels of a 2.0 bag read: one chunk's selected entries to a list of
:class:`~polybag.model.Message` built in bulk (entries filtered and sorted with numpy,
payloads sliced from the chunk, small ones copied out as ``bytes``).

* :func:`select_entries`: a chunk's entries of the wanted connections in a time window.
* :func:`chunk_messages`: one chunk's selected messages, in the order a read asks for.
* :func:`build_messages`: ``Message`` objects without a Python-level ``__init__`` call.
* :func:`gc_paused`: Message objects hold no cycles, so building a batch of them with the
  cyclic GC paused halves the cost (the collector would scan them again and again).
"""

from __future__ import annotations

import gc
import mmap
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from itertools import repeat
from typing import Any, NamedTuple

import numpy as np

from polybag.model import Channel, Message
from polybag.selection import MessageOrder

from .index import Chunk

COPY_BELOW = 4096  # mean payload size under which payloads are copied out as bytes


class ReadRequest(NamedTuple):
    """What one ``messages()`` read asks for: the connections (None: all), the time window
    [start, end), the direction and ``order`` (``log_time`` or ``file``)."""

    sel: set[int] | None
    start: int | None
    end: int | None
    reverse: bool
    order: MessageOrder


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic GC off for the block (back on after it, if it was on)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


# Message objects are built without a Python-level ``__init__`` call: a C-level allocation
# and five slot stores (specialised by the interpreter) cost about a third less per message.
# Only while Message has exactly these slots; otherwise its constructor is used.
_SLOTS_KNOWN = getattr(Message, "__slots__", None) == ("channel", "log_time", "publish_time", "sequence", "data")


def build_messages(chl: Iterable[Channel], tl: list[int], al: list[int], bl: list[int], src: Any) -> list[Message]:
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


def select_entries(
    ci: Chunk, sel: set[int] | None, start: int | None, end: int | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The entries of ``ci``'s wanted messages (loaded), in its entry order: times,
    connections, record offsets, payload offsets and lengths."""
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
    return t, c, o, ds, dl


def chunk_messages(ci: Chunk, buf: bytes | memoryview, want: ReadRequest, chans: dict[int, Channel], whole: Any) -> list[Message]:
    """The selected messages of one loaded chunk (bytes ``buf``), in order (ties in log
    time in file order); ``whole``: the mapped file's buffer, small payloads of an
    uncompressed chunk are copied from."""
    get = chans.__getitem__
    t, c, o, ds, dl = select_entries(ci, want.sel, want.start, want.end)
    if want.order == "file":
        idx = None if len(o) < 2 or bool((o[1:] >= o[:-1]).all()) else np.argsort(o, kind="stable")
    else:
        in_order = len(o) < 2 or bool(((t[1:] > t[:-1]) | ((t[1:] == t[:-1]) & (o[1:] >= o[:-1]))).all())
        idx = None if in_order else np.lexsort((o, t))
    if want.reverse:
        idx = np.arange(len(t) - 1, -1, -1) if idx is None else idx[::-1]
    if idx is not None:
        t, c, ds, dl = t[idx], c[idx], ds[idx], dl[idx]
    mv, base = payload_source(ci, buf, dl, whole)
    tl = t.tolist()
    al = (ds + base).tolist()
    bl = (ds + dl + base).tolist()
    if len(c) and int(c.min()) == int(c.max()):
        return build_messages(repeat(get(int(c[0]))), tl, al, bl, mv)
    # channel objects picked in bulk: sorted ids -> positions -> object array
    ids = np.array(sorted(chans), np.int64)
    objs = np.empty(len(ids), object)
    objs[:] = [chans[i] for i in ids.tolist()]
    pos = np.searchsorted(ids, c.astype(np.int64))
    chl = objs[np.minimum(pos, len(ids) - 1)].tolist()
    return build_messages(chl, tl, al, bl, mv)


def payload_source(ci: Chunk, buf: bytes | memoryview, dl: np.ndarray, whole: Any) -> tuple[Any, int]:
    """What to slice payloads from, and the offset to add.

    Small payloads are copied out as ``bytes`` (a bytes slice costs a fifth of a
    memoryview slice and is not tracked by the cyclic GC); large ones stay zero-copy
    ``memoryview`` slices of the chunk or the mapped file (``whole``).
    """
    if len(dl) and int(dl.sum()) < COPY_BELOW * len(dl):
        if isinstance(buf, bytes):
            return buf, 0
        if ci.buffer is None and ci.compression == "none" and isinstance(whole, (bytes, mmap.mmap)):
            return whole, ci.data_start
    return (buf if isinstance(buf, memoryview) else memoryview(buf)), 0
