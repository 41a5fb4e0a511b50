"""``filter``: copy the messages of some topics, in a time window, matching an expression.

Topics are chosen up front from the channels (``include``/``exclude`` regular expressions
matched against the whole topic name), and the reader is asked only for those topics and
that window, so an indexed input reads only the chunks that can hold them.

The expression is Python, like ``rosbag filter``: ``topic`` (str), ``m`` (the decoded
message, decoded only if the expression uses it) and ``t`` (the log time: an ``int`` of
nanoseconds that also has ``secs``, ``nsecs``, ``to_sec()`` and ``to_nsec()``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from polybag.errors import EmptySelectionError, PolybagError
from polybag.model import Channel, Message
from polybag.ops.copying import CopyJob, CopyResult, prepare_output
from polybag.ops.inputs import input_name, open_input
from polybag.ops.options import Input, PathLike, WriteOptions, Writing
from polybag.selection import TimeWindow

if TYPE_CHECKING:
    from typing_extensions import Unpack


class Time(int):
    """A log time in ns that also behaves like ``rospy.Time`` in filter expressions."""

    @property
    def secs(self) -> int:
        return int(self) // 1_000_000_000

    @property
    def nsecs(self) -> int:
        return int(self) % 1_000_000_000

    def to_sec(self) -> float:
        return int(self) / 1e9

    def to_nsec(self) -> int:
        return int(self)


@dataclass
class FilterResult(CopyResult):
    input: str = ""
    topics: list[str] = field(default_factory=list)
    start: int | None = None
    end: int | None = None
    read: int = 0
    #: the channels and topics the output has (those with a message written, with an
    #: expression or a time window)
    channels: int = 0
    topics_written: int = 0


def select_topics(
    channels: Sequence[Channel],
    include: Sequence[str] | str | None = None,
    exclude: Sequence[str] | str | None = None,
) -> list[str]:
    """Topic names kept by the include/exclude regular expressions (whole-name match)."""
    inc = [include] if isinstance(include, str) else list(include or [])
    exc = [exclude] if isinstance(exclude, str) else list(exclude or [])
    try:
        inc_rx = [re.compile(p) for p in inc]
        exc_rx = [re.compile(p) for p in exc]
    except re.error as e:
        raise PolybagError(f"bad topic regular expression: {e}") from None
    out = []
    for topic in dict.fromkeys(c.topic for c in channels):
        if inc_rx and not any(r.fullmatch(topic) for r in inc_rx):
            continue
        if any(r.fullmatch(topic) for r in exc_rx):
            continue
        out.append(topic)
    return out


def compile_expression(expression: str) -> tuple[Callable[[Message], bool], bool]:
    """``(predicate(message), uses_m)`` for a ``rosbag filter`` style expression."""
    try:
        code = compile(expression, "<filter expression>", "eval")
    except SyntaxError as e:
        raise PolybagError(f"bad filter expression {expression!r}: {e.msg}") from None
    uses_m = "m" in code.co_names or "msg" in code.co_names
    env: dict[str, Any] = {"__builtins__": __builtins__}

    def pred(msg: Message) -> bool:
        ns: dict[str, Any] = {"topic": msg.channel.topic, "t": Time(msg.log_time)}
        if uses_m:
            from polybag.codecs import codec_for

            decoded = codec_for(msg.channel).decode(msg.data, topic=msg.channel.topic)
            ns["m"] = ns["msg"] = decoded
        try:
            return bool(eval(code, env, ns))  # noqa: S307 - the user's own expression, as rosbag filter
        except PolybagError:
            raise
        except Exception as e:  # noqa: BLE001
            raise PolybagError(
                f"filter expression {expression!r} failed on {msg.channel.topic} at {msg.log_time}: "
                f"{type(e).__name__}: {e}"
            ) from None

    return pred, uses_m


def _predicate(
    expression: str | Callable[[str, Any, Time], bool] | None,
) -> Callable[[Message], bool] | None:
    """The message test of ``filter``'s ``expression`` (None: every message is kept)."""
    pred: Callable[[Message], bool] | None = None
    if isinstance(expression, str) and expression.strip():
        pred, _ = compile_expression(expression)
    elif callable(expression):
        fn = expression

        def pred(msg: Message) -> bool:
            from polybag.codecs import codec_for

            decoded = codec_for(msg.channel).decode(msg.data, topic=msg.channel.topic)
            return bool(fn(msg.channel.topic, decoded, Time(msg.log_time)))

    return pred


def filter(  # noqa: A001 - the command's name
    src: Input,
    dst: PathLike,
    *,
    include_topics: Sequence[str] | str | None = None,
    exclude_topics: Sequence[str] | str | None = None,
    start: int | str | None = None,
    end: int | str | None = None,
    expression: str | Callable[[str, Any, Time], bool] | None = None,
    **options: Unpack[WriteOptions],
) -> FilterResult:
    """Write the selected messages of ``src`` to ``dst`` (file order kept).

    ``start``/``end`` are ns ints or time texts as the CLI reads them (``"5"`` is 5 s,
    ``"+2.5"`` 2.5 s after the log's start, ``"2026-11-28T10:00:00Z"``; see
    :mod:`polybag.selection`); ``expression`` is a Python expression string or a callable
    ``(topic, m, t) -> bool``.  An existing ``dst`` only with ``overwrite``; never the input;
    nothing is left behind on failure.  Topic patterns that leave no topic are an
    :class:`~polybag.errors.EmptySelectionError` (no output is written).
    """
    w = Writing.of("filter", options)
    fmt = prepare_output(dst, w.format, [src], w.overwrite)
    result = FilterResult(input=input_name(src), output=str(dst))
    with open_input(src, tolerant=not w.strict) as reader:
        summary = reader.summary
        t0, t1 = TimeWindow.parse(start, end, summary.start_time)
        result.start, result.end = t0, t1
        channels = list(summary.channels.values())
        topics = select_topics(channels, include_topics, exclude_topics)
        if not topics and (include_topics or exclude_topics):  # said, not an empty output
            raise EmptySelectionError(include_topics or None, (c.topic for c in channels), excluding=exclude_topics)
        result.topics = topics
        kept_channels = [c for c in channels if c.topic in set(topics)]
        pred = _predicate(expression)
        with CopyJob(dst, fmt, result, [reader], kept_channels, w.compression, w.chunk_size, w.overwrite, storage=w.storage, strict=w.strict) as job:
            if pred is None and t0 is None and t1 is None:
                # topics only: every channel of them, also an empty one (as convert --topics);
                # with an expression or a time window only the channels a message is written
                # to are, as rosbag filter writes only connections with a message written
                job.add_channels(kept_channels)
            counts = summary.message_counts
            total = sum(counts.get(c.id, 0) for c in kept_channels)
            read = 0

            def selected() -> Any:
                nonlocal read
                for m in reader.messages(topics=topics, start=t0, end=t1, order="file"):
                    read += 1
                    if pred is None or pred(m):
                        yield m
                    else:
                        job.bar.update(1)

            messages = job.with_ulog_extras(reader, selected()) if topics else ()
            result.messages = job.copy(messages, total, f"filter {result.input}", w.progress)
            result.read = read
            result.channels = job.channels
            result.topics_written = len(job.topics_written)
            result.attachments, _, result.metadata, _ = job.copy_extras(reader)
    return result
