"""Which chunks of a 2.0 bag a read loads, in what order, and their messages in batches.

A read selects the chunks that can hold a wanted message (:func:`wanted`: the connections
and time range of the chunk info or the scan) and cuts them into groups: in file order one
chunk at a time (:func:`file_order_batches`); in log-time order one run per chunk, merged
by :func:`polybag.formats.shared.merge.merge_runs` by (time, file position), so that
recorded bags, whose chunks follow each other in time, stream one chunk at a time (bounded
memory; :func:`log_time_batches`).  Each chunk becomes one list of messages
(:func:`~polybag.formats.bag.messages.chunk_messages`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from polybag.errors import FormatError
from polybag.formats.shared.merge import LOG_TIME, NEG_LOG_TIME, OutOfOrder, Run, merge_plan, merge_runs
from polybag.model import Channel, Message

from .chunks import ChunkLoader
from .index import BagIndex, Chunk
from .messages import ReadRequest, chunk_messages, gc_paused


def wanted(ci: Chunk, sel: set[int] | None, start: int | None, end: int | None) -> bool:
    """Whether ``ci`` can hold a message of the connections ``sel`` in [start, end)."""
    if sel is not None and not any(c in sel for c in ci.counts):
        return False
    if start is not None and ci.end < start:
        return False
    return not (end is not None and ci.start >= end)


def chunks_to_read(chunks: list[Chunk], sel: set[int] | None, start: int | None, end: int | None) -> list[Chunk]:
    """The chunks (of ``chunks``, in their order) that can hold a wanted message."""
    return [ci for ci in chunks if wanted(ci, sel, start, end)]


def first_chunks(chunks: list[Chunk], order: str, reverse: bool) -> list[Chunk]:
    """The chunks (of ``chunks``) a read's first batch can come from, in file order: the
    first (last) chunk in file order; in log-time order those whose chunk info's times reach
    back (forward) to the earliest end (latest start) of any."""
    if not chunks:
        return []
    if order == "file":
        return [max(chunks, key=lambda c: c.pos) if reverse else min(chunks, key=lambda c: c.pos)]
    if reverse:
        bound = max(c.start for c in chunks)
        return sorted((c for c in chunks if c.end >= bound), key=lambda c: c.pos)
    bound = min(c.end for c in chunks)
    return sorted((c for c in chunks if c.start <= bound), key=lambda c: c.pos)


def load_messages(
    loader: ChunkLoader, index: BagIndex, ci: Chunk, want: ReadRequest, chans: dict[int, Channel]
) -> list[Message]:
    """The selected messages of chunk ``ci`` (loaded now, with the connections ``index``
    has then), in order."""
    with gc_paused():  # a chunk's Message objects (see messages.gc_paused)
        buf = loader.load(ci, index.conns)
        return chunk_messages(ci, buf, want, chans, getattr(loader.source, "_buffer", None))


def file_order_batches(
    loader: ChunkLoader, index: BagIndex, chunks: list[Chunk], want: ReadRequest, chans: dict[int, Channel]
) -> Iterator[list[Message]]:
    """The messages of ``chunks`` in file order (backwards with ``want.reverse``), one list
    per chunk."""
    for ci in sorted(chunks, key=lambda c: c.pos, reverse=want.reverse):
        yield load_messages(loader, index, ci, want, chans)


def span(loader: ChunkLoader, index: BagIndex, ci: Chunk, claims: bool = False) -> tuple[int, int]:
    """The first and last log time of ``ci``'s entries (its index data, read if not yet;
    the chunk info's claim when it has none, or when the chunk record it points at is not
    one: that FormatError is raised when the merge reaches the chunk, after the messages
    before it).  ``claims``: the chunk info's claim while the index data is not read yet
    (a remote bag: reading every chunk's index data to plan costs a request per chunk)."""
    if ci.times is None and claims:
        return ci.start, ci.end
    if ci.times is None:
        try:
            loader.read_index_data(ci, index.conns)
        except FormatError:
            if not ci.lazy:
                raise
            return ci.start, ci.end
    if ci.times is not None and len(ci.times):
        return int(ci.times.min()), int(ci.times.max())
    return ci.start, ci.end


def log_time_batches(
    loader: ChunkLoader, index: BagIndex, chunks: list[Chunk], want: ReadRequest, chans: dict[int, Channel]
) -> Iterator[list[Message]]:
    """The messages of ``chunks`` in log-time order (ties in file order; backwards with
    ``want.reverse``): one list per chunk, or per stretch of overlapping chunks merged.

    A remote bag (``loader.remote``) is planned from the chunk infos' times, so that a chunk
    is fetched (its record and index data, in one range) only when the merge reaches it; a
    chunk whose entries turn out to lie outside its chunk info's times makes the rest be
    planned again from the index data of every chunk not loaded yet (as a local read is
    planned from the start)."""
    reverse = want.reverse
    claims = loader.remote
    ascending = want._replace(reverse=False)  # runs load ascending; the merge reverses
    # each chunk's span from its index data's own times (read without decompressing; the
    # same entries its messages get their times from), not the chunk info's claim, which
    # may lie: the merge is then exact, as topic_payloads' sort is
    ranked = sorted(chunks, key=lambda c: c.pos)

    def loader_of(ci: Chunk) -> Callable[[], list[Message]]:
        return lambda: load_messages(loader, index, ci, ascending, chans)

    segs = [(*span(loader, index, ci, claims), r, loader_of(ci)) for r, ci in enumerate(ranked)]

    def replan(loaded: set[int], rank: int) -> list[Run]:
        """A chunk's messages lie outside its span after all (a scan found other times
        than its index data): plan the chunks not loaded yet again."""
        return merge_plan(
            [
                (*span(loader, index, ci), r, loader_of(ci))
                for r, ci in enumerate(ranked)
                if (-r if reverse else r) not in loaded
            ],
            reverse,
        )

    try:
        yield from merge_runs(merge_plan(segs, reverse), NEG_LOG_TIME if reverse else LOG_TIME, replan)
    except OutOfOrder as o:
        ci = ranked[-o.rank if reverse else o.rank]
        raise FormatError(
            f"the chunk at {ci.pos} holds messages its chunk info's times ({ci.start}..{ci.end}) put "
            "elsewhere, after later messages were already returned; read again in file order or reindex",
            loader.path,
            ci.pos,
        ) from None
