"""``sort``: rewrite a log in log-time order, with fresh indexes (the writer's).

Ties keep file order.  The reader merges chunks by time, so memory stays bounded by the
chunks that overlap in time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from polybag.ops.copying import CopyJob, CopyResult, prepare_output
from polybag.ops.inputs import input_name, open_input, summary_count
from polybag.ops.options import Input, PathLike, WriteOptions, Writing

if TYPE_CHECKING:
    from typing_extensions import Unpack


@dataclass
class SortResult(CopyResult):
    input: str = ""
    was_sorted: bool = True


def sort(
    src: Input,
    dst: PathLike,
    **options: Unpack[WriteOptions],
) -> SortResult:
    """Write ``src``'s messages to ``dst`` in log-time order (an existing ``dst`` only with
    ``overwrite``; never the input; nothing is left behind on failure)."""
    w = Writing.of("sort", options)
    fmt = prepare_output(dst, w.format, [src], w.overwrite)
    result = SortResult(input=input_name(src), output=str(dst))
    with open_input(src, tolerant=not w.strict) as reader:
        summary = reader.summary
        channels = summary.channels.values()
        with CopyJob(dst, fmt, result, [reader], channels, w.compression, w.chunk_size, w.overwrite, storage=w.storage, strict=w.strict) as job:
            job.add_channels(channels)
            # was_sorted: chunks whose time ranges overlap out of order
            chunks = summary.chunks
            for a, b in zip(chunks, chunks[1:]):
                if b.start_time < a.end_time:
                    result.was_sorted = False
                    break
            messages = job.with_ulog_extras(reader, reader.messages(order="log_time"))
            result.messages = job.copy(messages, summary_count(reader), f"sort {result.input}", w.progress)
            result.attachments, _, result.metadata, _ = job.copy_extras(reader)
    return result
