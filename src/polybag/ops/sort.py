"""``sort``: rewrite a log in log-time order, with fresh indexes (the writer's).

Ties keep file order.  The reader merges chunks by time, so memory stays bounded by the
chunks that overlap in time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from polybag.ops._common import (
    ChannelMap,
    Input,
    OpResult,
    PathLike,
    abort_writer,
    check_output,
    copy_attachments_and_metadata,
    copy_messages,
    input_name,
    make_progress,
    make_writer,
    opened,
    profile_for,
    report_dropped,
    summary_count,
    target_format,
)
from polybag.ops.filter import _with_ulog_extras


@dataclass
class SortResult(OpResult):
    input: str = ""
    output: str = ""
    was_sorted: bool = True
    dropped_messages: int = 0
    dropped_topics: dict[str, int] = field(default_factory=dict)
    attachments: int = 0
    metadata: int = 0


def sort(
    src: Input,
    dst: PathLike,
    *,
    format: str | None = None,  # noqa: A002
    compression: str | None = None,
    chunk_size: int | None = None,
    progress: bool | None = False,
    overwrite: bool = False,
) -> SortResult:
    """Write ``src``'s messages to ``dst`` in log-time order (an existing ``dst`` only with
    ``overwrite``; never the input; nothing is left behind on failure)."""
    fmt = target_format(dst, format)
    check_output(dst, [src], overwrite)
    result = SortResult(input=input_name(src), output=str(dst))
    with opened(src) as reader:
        summary = reader.summary
        profile = profile_for(summary.channels.values(), reader) if fmt == "mcap" else None
        writer = make_writer(dst, fmt, compression, chunk_size, profile, overwrite=overwrite)
        try:
            cmap = ChannelMap(writer, fmt, result)
            for ch in summary.channels.values():
                cmap.get(ch)
            # was_sorted: chunks whose time ranges overlap out of order
            chunks = summary.chunks
            for a, b in zip(chunks, chunks[1:]):
                if b.start_time < a.end_time:
                    result.was_sorted = False
                    break
            bar = make_progress(summary_count(reader), f"sort {result.input}", progress)
            with bar:
                written, dropped = copy_messages(
                    _with_ulog_extras(reader, writer, fmt, result, reader.messages(order="log_time")),
                    cmap,
                    bar,
                    readers=[reader],
                )
            result.messages = written
            result.dropped_messages = dropped
            result.dropped_topics = dict(cmap.dropped)
            result.attachments, _, result.metadata, _ = copy_attachments_and_metadata(
                reader, writer, fmt, result
            )
            writer.close()
        except BaseException:
            abort_writer(writer, dst)
            raise
    report_dropped(result, result.dropped_topics, fmt)
    return result
