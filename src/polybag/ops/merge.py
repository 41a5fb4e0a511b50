"""``merge``: several logs (any formats) into one, ordered by log time.

Each input is read in log-time order and the streams are merged with :func:`heapq.merge`
(ties keep the order of the inputs), so memory is a few chunks per input.  Schemas and
channels that are identical across inputs are written once; a topic that arrives with
different types or md5sums is written as separate channels and reported as a conflict.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from operator import attrgetter

from polybag.ops._common import (
    ChannelMap,
    Input,
    OpResult,
    PathLike,
    abort_writer,
    check_distinct,
    copy_attachments_and_metadata,
    copy_messages,
    input_name,
    make_progress,
    make_writer,
    opened,
    profile_for,
    summary_count,
    target_format,
)
from polybag.reader import Reader


@dataclass
class MergeResult(OpResult):
    output: str = ""
    inputs: list[str] = field(default_factory=list)
    input_messages: list[int] = field(default_factory=list)
    channels: int = 0
    conflicts: list[str] = field(default_factory=list)
    dropped_messages: int = 0
    attachments: int = 0
    metadata: int = 0


class _AllSources:
    """Releases the mapped pages of every input (see ``copy_messages``)."""

    def __init__(self, readers: Sequence[Reader]) -> None:
        self.readers = readers

    def release_pages(self) -> None:
        for r in self.readers:
            fn = getattr(r.source, "release_pages", None)
            if callable(fn):
                fn()


def merge(
    dst: PathLike,
    inputs: Sequence[Input],
    *,
    format: str | None = None,  # noqa: A002
    compression: str | None = None,
    chunk_size: int | None = None,
    topics: str | Sequence[str] | None = None,
    progress: bool | None = False,
) -> MergeResult:
    """Merge ``inputs`` into ``dst`` in log-time order."""
    if not inputs:
        from polybag.errors import PolybagError

        raise PolybagError("merge needs at least one input")
    fmt = target_format(dst, format)
    for src in inputs:
        check_distinct(src, dst)
    result = MergeResult(output=str(dst), inputs=[input_name(s) for s in inputs])
    with ExitStack() as stack:
        readers = [stack.enter_context(opened(s)) for s in inputs]
        all_channels = [c for r in readers for c in r.summary.channels.values()]
        profile = profile_for(all_channels, *readers) if fmt == "mcap" else None
        writer = make_writer(dst, fmt, compression, chunk_size, profile)
        try:
            cmap = ChannelMap(writer, fmt, result)
            for c in all_channels:
                cmap.get(c)
            counts = [0] * len(readers)

            def counted(i: int):  # type: ignore[no-untyped-def]
                for m in readers[i].messages(topics=topics, order="log_time"):
                    counts[i] += 1
                    yield m

            streams = [counted(i) for i in range(len(readers))]
            total = sum(summary_count(r) for r in readers)
            bar = make_progress(total, f"merge -> {dst}", progress)
            with bar:
                written, dropped = copy_messages(
                    heapq.merge(*streams, key=attrgetter("log_time")), cmap, bar, source=_AllSources(readers)
                )
            result.messages = written
            result.dropped_messages = dropped
            result.input_messages = counts
            for r in readers:
                a, _, md, _ = copy_attachments_and_metadata(r, writer, fmt, result)
                result.attachments += a
                result.metadata += md
            result.channels = len(cmap._by_key)
            result.conflicts = cmap.conflicts()
            for c in result.conflicts:
                result.warn(c)
        except BaseException:
            abort_writer(writer, dst)
            raise
        writer.close()
    return result
