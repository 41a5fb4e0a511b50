"""Copying messages into a new log: the skeleton the copying operations (convert, filter,
sort, merge, recover) share -- check the output, make the writer, map the channels, copy
the messages with a progress bar, the attachments and metadata, report what the output
cannot hold, and leave nothing behind on failure.  Each operation gives its own message
stream and fills its own result.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from polybag.bridges import ChannelMap, TimedTransform, target_ros
from polybag.bridges.protocol import Payload
from polybag.bridges.registry import always_bridged
from polybag.errors import FormatError, UnsupportedError
from polybag.formats import registry
from polybag.model import Attachment, Channel, Message, Metadata
from polybag.ops.inputs import until_damage
from polybag.ops.options import Input, Output
from polybag.ops.outputs import abort_writer, check_output, make_writer, target_format
from polybag.ops.results import OpResult, make_progress, report_dropped, report_undefined
from polybag.ops.ulog_extras import ulog_extras
from polybag.reader import Reader
from polybag.writer import Writer

RELEASE_EVERY = 64 << 20  # payload bytes between releases of the input's mapped pages


def page_releaser(*readers: Reader) -> Callable[[], None] | None:
    """A call that drops the mapped pages of ``readers`` (:meth:`Reader.release_pages`), or
    None when none of them reads a mapped file (a stream)."""
    mapped = [r for r in readers if r.seekable]
    if not mapped:
        return None
    if len(mapped) == 1:
        return mapped[0].release_pages

    def release() -> None:
        for r in mapped:
            r.release_pages()

    return release


def copy_messages(
    messages: Iterable[Message],
    cmap: ChannelMap,
    progress: Any | None = None,
    on_message: Callable[[Message], None] | None = None,
    readers: Sequence[Reader] = (),
) -> tuple[int, int]:
    """Write ``messages`` through ``cmap``; returns (written, dropped).

    With ``readers`` (those the messages come from), the inputs' mapped pages are released
    every 64 MB of payload so resident memory stays bounded on huge files.
    """
    write = cmap.writer.write
    get = cmap.get
    release = page_releaser(*readers)
    budget = RELEASE_EVERY
    # (channel, target channel, transform, whether it takes the log time too) by id(channel);
    # the channel is kept so ids stay unique
    cache: dict[int, tuple[Channel, Channel | None, Callable[..., Payload | None] | None, bool]] = {}
    dropped = 0
    n = 0  # messages written
    last = 0  # n at the last housekeeping (progress, page release), done every 64 messages
    for m in messages:
        ch = m.channel
        ent = cache.get(id(ch))
        if ent is None or ent[0] is not ch:
            out, tf = get(ch)
            ent = cache[id(ch)] = (ch, out, tf, isinstance(tf, TimedTransform))
        out, tf = ent[1], ent[2]
        if out is None:
            dropped += 1
            cmap.dropped[ch.topic] = cmap.dropped.get(ch.topic, 0) + 1
            continue
        data = m.data
        if tf is not None:
            conv = tf(data, m.log_time) if ent[3] else tf(data)
            if conv is None:
                dropped += 1
                cmap.dropped[ch.topic] = cmap.dropped.get(ch.topic, 0) + 1
                continue
            data = conv
        write(out, data, m.log_time, m.publish_time, m.sequence)
        if on_message is not None:
            on_message(m)
        n += 1
        if not n & 63:
            if progress is not None:
                progress.update(n - last)
            if release is not None:
                budget -= len(data) * (n - last)  # an estimate from every 64th message
                if budget < 0:
                    release()
                    budget = RELEASE_EVERY
            last = n
    if progress is not None and n > last:
        progress.update(n - last)
    return n, dropped


def copy_attachments_and_metadata(
    reader: Reader, writer: Writer, fmt: str, result: OpResult
) -> tuple[int, int, int, int]:
    """Copy attachments and metadata; returns (attachments kept, dropped, metadata kept, dropped)."""
    kept_a = drop_a = kept_m = drop_m = 0
    atts: Iterator[Attachment] = reader.attachments()
    for a in atts:
        try:
            writer.write_attachment(a)
            kept_a += 1
        except (UnsupportedError, NotImplementedError):
            drop_a += 1
    metas: Iterator[Metadata] = reader.metadata()
    for md in metas:
        if writer.add_format_extras(md.name, md.metadata):  # a ULog's info/params back home
            kept_m += 1
            continue
        try:
            writer.write_metadata(md)
            kept_m += 1
        except (UnsupportedError, NotImplementedError):
            drop_m += 1
    if drop_a:
        result.warn(f"{fmt} files cannot hold attachments: {drop_a} attachment(s) not copied")
    if drop_m:
        result.warn(f"{fmt} files cannot hold metadata: {drop_m} metadata record(s) not copied")
    return kept_a, drop_a, kept_m, drop_m


def profile_for(channels: Iterable[Channel], *readers: Reader) -> str | None:
    """``ros1`` when every channel is (or becomes) ROS 1, ``ros2`` for all-CDR, else None.

    Readers of a format whose channels always have one profile (``native_profile``: bags
    and ULogs give ROS 1 channels) give it even when empty.
    """
    natives = {r.native_profile for r in readers}
    if len(natives) == 1 and None not in natives:
        return natives.pop()
    # each channel as it is written where anything is held (ULog channels become ROS 1 ones)
    encs = {always_bridged(e) or e for e in {c.message_encoding for c in channels}}
    if encs == {"ros1"}:
        return "ros1"
    if encs == {"cdr"}:
        return "ros2"
    return None


@dataclass
class CopyResult(OpResult):
    """What an operation that copies messages into a new log did: its output, and what the
    output could not hold (messages per topic), attachments and metadata records copied."""

    output: str = ""
    dropped_messages: int = 0
    dropped_topics: dict[str, int] = field(default_factory=dict)
    attachments: int = 0
    metadata: int = 0
    #: the damage met in the inputs (the messages before it, or every intact one, are written)
    damage: list[str] = field(default_factory=list)


def prepare_output(dst: Output, format: str | None, inputs: Sequence[Input], overwrite: bool) -> str:  # noqa: A002
    """Before any work starts: the output's format (:func:`target_format`), once the output
    is known to be writable (:func:`check_output`)."""
    fmt = target_format(dst, format)
    # what --force may replace is judged by the format written, never by the name: a text
    # file named a.csv is no log, whatever --format the log written there has
    check_output(dst, inputs, overwrite, fmt)
    return fmt


class CopyJob:
    """One output log written from open readers: the writer, its :class:`ChannelMap`, and
    the steps the copying operations (convert, filter, sort, merge, recover) share.

    ``with CopyJob(dst, fmt, result, readers, channels, compression, chunk_size,
    overwrite) as job:`` (the writer options as the operation got them): when the block
    ends the writer is closed and the messages not written are reported on the result
    (:func:`report_dropped`); on any failure (a full disk, an interrupt) the writer is
    aborted and no output is left behind.  ``profile`` is the MCAP profile; ``None`` for
    an MCAP output means the one ``channels`` call for (:func:`profile_for`).

    ``strict``: how damage in an input is met: False keeps what was read before it (a
    recovering read, ``polybag.open(..., tolerant=True)``: every intact message),
    names it in a warning and in ``result.damage`` (the command exits 1); True refuses (the
    reader's error, no output); None (the default) leaves it to the operation (``recover``).
    """

    def __init__(
        self,
        dst: Output,
        fmt: str,
        result: CopyResult,
        readers: Sequence[Reader],
        channels: Iterable[Channel] = (),
        compression: str | None = None,
        chunk_size: int | None = None,
        overwrite: bool = False,
        *,
        profile: str | None = None,
        channel_map: type[ChannelMap] = ChannelMap,
        storage: str | None = None,
        strict: bool | None = None,
    ) -> None:
        if profile is None and registry.get(fmt).profiles:  # an output with a profile (MCAP)
            profile = profile_for(channels, *readers)
        self.dst = dst
        self.fmt = fmt
        self.result = result
        self.readers = list(readers)
        self.profile = profile
        self.writer = make_writer(dst, fmt, compression, chunk_size, profile, overwrite=overwrite, storage=storage)
        self.cmap = channel_map(self.writer, fmt, result)
        if isinstance(self.cmap, ChannelMap):  # ROS 1 <-> ROS 2 where the output holds only one
            self.cmap.target = target_ros(self.writer.holds, profile)
        self.bar: Any = None  # the progress bar of :meth:`copy`, while it runs
        self.strict = strict

    def __enter__(self) -> CopyJob:
        return self

    def __exit__(self, exc_type: Any, *exc: object) -> None:
        if exc_type is not None:
            abort_writer(self.writer, self.dst)
            return
        try:
            self.writer.close()
        except BaseException:
            abort_writer(self.writer, self.dst)
            raise
        if isinstance(self.cmap, ChannelMap):
            self.cmap.report()
        report_undefined(self.writer, self.result)
        report_dropped(self.result, self.result.dropped_topics, self.fmt)

    @property
    def channels(self) -> int:
        """The channels written so far (identical source channels share one)."""
        return len(self.cmap._by_key)

    @property
    def topics_written(self) -> list[str]:
        """The topics of the channels written so far, each once, in their order."""
        return list(dict.fromkeys(c.topic for c in self.cmap._by_key.values()))

    def add_channels(self, channels: Iterable[Channel]) -> None:
        """Write the channels up front, in this order, so that empty channels survive too."""
        for ch in channels:
            self.cmap.get(ch)

    def with_ulog_extras(self, reader: Reader, messages: Iterable[Message]) -> Iterable[Message]:
        """``messages``; a ULog input keeps its info and parameters (written when the first
        message is asked for, see :func:`polybag.ops.ulog_extras.ulog_extras`)."""
        if not reader.ulogs:
            return messages
        return ulog_extras(reader, self.writer, self.fmt, self.result, messages)

    def copy(
        self,
        messages: Iterable[Message],
        total: int,
        label: str,
        progress: bool | None,
        on_message: Callable[[Message], None] | None = None,
    ) -> int:
        """Write ``messages`` (see :func:`copy_messages`) with a progress bar of ``total``
        messages (``self.bar`` while it runs); the messages not written are counted on the
        result.  Returns the messages written."""
        self.bar = make_progress(total, label, progress)
        if self.strict is False:
            messages = intact(messages, self.result)
        with self.bar:
            written, dropped = copy_messages(messages, self.cmap, self.bar, on_message, self.readers)
        if self.strict is False:
            report_recovered(self.readers, self.result)
        self.result.dropped_messages = dropped
        self.result.dropped_topics = dict(self.cmap.dropped)
        return written

    def copy_extras(self, reader: Reader) -> tuple[int, int, int, int]:
        """:func:`copy_attachments_and_metadata` of ``reader`` into the output."""
        return copy_attachments_and_metadata(reader, self.writer, self.fmt, self.result)


def intact(messages: Iterable[Message], result: Any) -> Iterator[Message]:
    """``messages`` up to the damage an input's reader raises (a :class:`FormatError`: a log
    cut short, a damaged chunk): the damage is named on ``result`` (a warning and
    ``result.damage``) and the stream ends there, so what was read before it is kept."""

    def damaged(e: FormatError, n: int) -> None:
        result.damage.append(str(e))
        result.warn(
            f"the input is damaged: {e}; the {n} message(s) read before the damage are written "
            "(--strict refuses a damaged input; `polybag recover` reads past the damage)"
        )

    return until_damage(messages, damaged)


def report_recovered(readers: Sequence[Reader], result: Any) -> None:
    """The damage the recovering reads of ``polybag.open(..., tolerant=True)``
    met (a ULog cut short, a corrupt format, a data message of no subscription), named on
    ``result`` (a warning each and ``result.damage``); every intact message was written."""
    for r in readers:
        report = r.recovery_report
        errors = list(report.get("errors") or ()) if report else []
        if not errors:
            continue
        name = r.path or "the input"
        for e in errors[:10]:
            result.damage.append(f"{name}: {e}")
        more = f" (and {len(errors) - 1} more place(s))" if len(errors) > 1 else ""
        result.warn(
            f"the input is damaged: {name}: {errors[0]}{more}; every intact message is written "
            "(--strict refuses a damaged input)"
        )
