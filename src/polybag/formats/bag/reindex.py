"""Rebuild a 2.0 bag (reindex) and change chunk compression, chunk by chunk.

Both work on the chunk level: intact chunks are copied byte for byte (reindex) or
recompressed whole (compress), so record offsets inside chunks and therefore the index data
stay valid.  A chunk that is cut or damaged keeps its intact leading records; records
outside any chunk (an unterminated chunk of a killed recorder) become a new chunk.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any, BinaryIO

from polybag.errors import PolybagError, UnsupportedError
from polybag.io.compression import normalize
from polybag.io.source import MappedSource
from polybag.reader import Reader

from .index import Chunk
from .reader import open_bag
from .reader_v2 import BagV2Reader
from .writer import BagWriter


@contextmanager
def _writing(w: BagWriter) -> Iterator[BagWriter]:
    """``w`` closed when the block ends; on any failure aborted, leaving nothing behind."""
    try:
        yield w
        w.close()
    except BaseException:
        w.abort(discard=True)
        raise


def _copy_chunk(
    w: BagWriter,
    r: BagV2Reader,
    ci: Chunk,
    comp: str,
    buffer: Callable[[], bytes | memoryview],
    progress: Callable[[int], None] | None,
) -> tuple[int, bool]:
    """Write chunk ``ci`` of ``r`` in ``comp``: byte for byte when it is intact and already
    in ``comp``, else rebuilt from the intact records of its data (``buffer()``, the
    uncompressed chunk).  Returns (messages written, whether it was rebuilt); a chunk with
    no message is left out."""
    index = _index_of(ci)
    if not index:
        return 0, False
    rebuilt = ci.damaged or ci.compression != comp
    if not rebuilt:
        raw = r.view[ci.data_start : ci.data_start + ci.data_len]
        w.write_chunk(comp, raw, None, index, uncompressed_size=ci.size)
    else:
        buf = buffer()
        end = ci.valid_end if ci.valid_end >= 0 else len(buf)
        w.write_chunk(comp, None, buf[:end], index)
    if progress is not None:
        progress(ci.record_len or ci.data_len)
    return sum(len(v) for v in index.values()), rebuilt


def _given(buf: bytes | memoryview) -> bytes | memoryview:
    """``buf`` (a chunk's bytes already loaded, as :func:`_copy_chunk` asks for them)."""
    return buf


def _index_of(ci: Chunk) -> dict[int, list[tuple[int, int]]]:
    out: dict[int, list[tuple[int, int]]] = {}
    assert ci.times is not None and ci.conns is not None and ci.offsets is not None
    for t, c, o in zip(ci.times.tolist(), ci.conns.tolist(), ci.offsets.tolist()):
        out.setdefault(c, []).append((t, o))
    return out


def _open_any(path: str | bytes, *, recover: bool) -> Reader:
    src = MappedSource(None, path) if isinstance(path, bytes) else MappedSource.from_path(path)
    return open_bag(src, src.path, recover=recover)


def _open_v2(path: str | bytes, *, recover: bool) -> BagV2Reader:
    r = _open_any(path, recover=recover)
    if not isinstance(r, BagV2Reader):
        r.close()
        raise UnsupportedError(
            f"{r.path or '<buffer>'}: bag version {getattr(r, 'version', '?')}: only 2.0 bags can be "
            "recompressed in place; upgrade with `polybag convert OLD.bag NEW.bag` (or `polybag reindex`)"
        )
    return r


def _rewrite_old(
    r: Reader, dst: str | os.PathLike[str] | BinaryIO, progress: Callable[[int], None] | None
) -> dict[str, Any]:
    """An old (1.x) bag, indexed or not, cut or not: every complete message it holds,
    written as an indexed 2.0 bag (what ``rosbag reindex`` does with a 1.2 bag)."""
    n = 0
    with _writing(BagWriter(dst, compression="none")) as w:
        for m in r.messages(order="file"):
            w.write_message(m)
            n += 1
    if progress is not None:
        progress(r.source.size if isinstance(r.source, MappedSource) else 0)
    rep = r.recovery_report
    return {
        "messages": n,
        "chunks": w.chunk_count,
        "rebuilt_chunks": w.chunk_count,
        "errors": list(rep["errors"]) if rep is not None else [],
        "bytes_skipped": int(rep["bytes_skipped"]) if rep is not None else 0,
        "was_indexed": False,
        "index_problem": f"version {getattr(r, 'version', '?')} bag rewritten as 2.0",
    }


def _register(w: BagWriter, r: BagV2Reader) -> None:
    for cid in sorted(r.conns):
        c = r.conns[cid]
        w.add_connection(cid, c.topic, dict(c.fields), in_chunks=True)


def reindex_bag(
    src: str | bytes,
    dst: str | os.PathLike[str] | BinaryIO,
    *,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Write a fully indexed copy of the bag ``src`` (which may be cut or unindexed).

    A 2.0 bag keeps its chunks (intact ones copied byte for byte); an older bag (1.x) is
    rewritten as a 2.0 bag with every complete message, like ``rosbag reindex`` does.
    Returns ``{"messages", "chunks", "rebuilt_chunks", "errors", "bytes_skipped"}``.
    """
    r0 = _open_any(src, recover=True)
    if not isinstance(r0, BagV2Reader):
        try:
            return _rewrite_old(r0, dst, progress)
        finally:
            r0.close()
    r = r0
    try:
        chunks = sorted(r.chunks, key=lambda c: c.pos)
        comp0 = next((c.compression for c in chunks if not c.damaged), "none")
        n = rebuilt = 0
        with _writing(BagWriter(dst, compression=comp0)) as w:
            _register(w, r)
            for ci in chunks:  # each in its own compression, rebuilt when damaged
                k, new = _copy_chunk(w, r, ci, ci.compression, partial(r.loader.buffer, ci), progress)
                n += k
                rebuilt += new
        return {
            "messages": n,
            "chunks": len(chunks),
            "rebuilt_chunks": rebuilt,
            "errors": list(r.damage.recovery.errors),
            "bytes_skipped": r.damage.recovery.bytes_skipped,
            "was_indexed": bool(r.index_pos) and r.index_problem is None,
            "index_problem": r.index_problem,
        }
    finally:
        r.close()


def recompress_bag_file(src: str, dst: str, compression: str, progress: Callable[[int], None]) -> dict[str, Any]:
    """The bag's ``recompress`` entry in :mod:`polybag.formats.registry` (``polybag compress``):
    :func:`recompress_bag` with the registry's calling convention."""
    return recompress_bag(src, dst, compression, progress=progress)


def recompress_bag(
    src: str,
    dst: str | os.PathLike[str] | BinaryIO,
    compression: str,
    *,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Copy the 2.0 bag ``src`` with every chunk in ``compression`` (none/bz2/lz4)."""
    comp = normalize(compression)
    r = _open_v2(src, recover=False)
    try:
        r.load_headers()  # every chunk record checked first: an index that lies is not used
        if r.damage.recovery.first is not None:
            raise PolybagError(f"{src}: bag is damaged ({r.damage.recovery.first}); run `polybag reindex` first")
        n = 0
        with _writing(BagWriter(dst, compression=comp)) as w:
            _register(w, r)
            for ci in sorted(r.chunks, key=lambda c: c.pos):
                buf = r.loader.load(ci, r.conns)  # (its index and payload positions too)
                n += _copy_chunk(w, r, ci, comp, partial(_given, buf), progress)[0]
        return {"messages": n, "chunks": len(r.chunks), "compression": comp}
    finally:
        r.close()
