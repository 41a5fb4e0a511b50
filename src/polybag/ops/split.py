"""``split``: one log into numbered parts, by size, by duration or at given times.

Messages are read in log-time order, so every part covers one time span.  Parts are named
``<stem>_<NNN><ext>`` (from 000) in ``output_dir`` (default: beside the input).  A part is
started when the first message that belongs to it arrives; no empty parts are written.
Parts keep the input's format unless ``format`` is given: a bag's parts are bags, a ULog's
ULogs, a rosbag2 bag's parts are bag directories ``<stem>_<NNN>`` (no extension) of its
storage.  A split is refused before anything is written when it would write more than
``max_parts`` parts (1,000 by default; by duration: the parts the log's span holds, at given
times: one more than the times, by size: the input's size on disk over ``size``), and stopped
with nothing left behind when it reaches more than that while writing.

* ``size``: a new part when adding the next message would take the current part's estimated
  size on disk past ``size`` (every part holds at least one message).  The estimate is
  conservative: payload bytes plus each format's record header and index entry per message,
  the definitions of every channel used (written twice: in the data and in the summary /
  index section), chunk records and indexes, and the file's fixed header/footer/summary.
* ``duration``: part k holds ``start + k*duration <= log_time < start + (k+1)*duration``.
* ``at``: the sorted times are boundaries; a boundary belongs to the part it starts.

A ULog input keeps its extras in every part (see :class:`UlogTimeline`):

* ULog parts are complete logs: the same info, multi-info, default parameters, flag bits
  and the formats and subscriptions of the topics they hold.  Each part's initial
  parameters are the parameters in force at its start: the log's initial parameters with
  every change that came before the part's first message applied.
* Parameter changes, dropouts and sync marks go to the part whose time range holds them:
  part k holds the timed records stamped (like pyulog does: the largest data timestamp
  before the record) from its first message's time up to the next part's first message's
  time, the first part everything before, the last part everything after.  So a change
  made in the gap between two parts is a change at the end of the earlier part *and* part
  of the later part's initial parameters; pyulog reads every change with its original
  timestamp.  Logged strings are messages: they go to the part holding their timestamp.
* The first part keeps the log's start timestamp; a later part starts at its first
  message's time.
* MCAP parts get the metadata records ``convert`` writes (``ulog_info``, ``ulog_params``
  with the parameters in force at the part's start, ``ulog_default_params_<bit>``); bag
  parts cannot hold them (a warning), nor can either hold parameter changes or dropouts.
"""

from __future__ import annotations

import bisect
import dataclasses
import os
import re
import shutil
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from polybag.bridges import ChannelMap, TimedTransform, Transform, target_ros
from polybag.errors import OutputExistsError, PolybagError, UsageError
from polybag.formats import registry
from polybag.io.output_files import refuse_replacing
from polybag.model import Channel, Message
from polybag.ops.copying import (
    RELEASE_EVERY,
    copy_attachments_and_metadata,
    intact,
    page_releaser,
    profile_for,
    report_recovered,
)
from polybag.ops.inputs import (
    check_apart,
    check_distinct,
    input_name,
    open_input,
    summary_count,
)
from polybag.ops.options import Input, WriteOptions, Writing
from polybag.ops.outputs import (
    abort_writer,
    ext_for,
    make_writer,
    replace_refusal,
    target_format,
)
from polybag.ops.results import OpResult, make_progress, report_dropped, report_undefined
from polybag.ops.ulog_extras import ulog_metadata_to
from polybag.selection import duration_ns, time_ns, warn_if_meant_relative
from polybag.writer import Writer

# Upper bounds of the bytes a writer adds around the payloads (bag, MCAP and ULog writers):
PART_OVERHEAD = 4096  # magic, file header, footer, summary offsets, statistics, index section heads
MESSAGE_OVERHEAD = 64  # record header + index entry per message (bag 42+12, MCAP 31+16, ULog 5)
CHUNK_OVERHEAD = 256  # chunk record header, chunk info / chunk index, compression framing
CHUNK_CHANNEL_OVERHEAD = 48  # per channel per chunk: message index record / index data head
CHANNEL_OVERHEAD = 256  # per channel definition copy: record header, field names, md5, ids
MAX_PARTS = 1000  # parts a split writes unless max_parts allows more

if TYPE_CHECKING:
    from typing_extensions import Unpack


class SizeBudget:
    """A conservative running estimate of one part's size on disk."""

    def __init__(self, fmt: str, chunk_size: int | None) -> None:
        planned = registry.get(fmt).split_chunk_size  # (None: the writer does not chunk)
        self.chunk = chunk_size or planned or 1 << 20
        self.chunked = planned is not None
        self.defs = 0
        self.channels: set[int] = set()
        self.raw = 0
        self.messages = 0
        self.big = 0
        self.base = 0  # definitions and records outside the messages (ULog info/parameters)

    def _definition(self, ch: Any) -> int:
        s = ch.schema
        meta = sum(len(k) + len(v) + 8 for k, v in ch.metadata.items())
        one = len(ch.topic) + meta + CHANNEL_OVERHEAD + (len(s.data) + len(s.name) if s is not None else 0)
        return 2 * one

    def cost(self, ch: Any, n: int) -> int:
        """The estimated part size after adding a message of ``n`` bytes on ``ch``."""
        defs = self.defs + (0 if id(ch) in self.channels else self._definition(ch))
        nch = len(self.channels) + (0 if id(ch) in self.channels else 1)
        raw = self.raw + n + MESSAGE_OVERHEAD
        total = PART_OVERHEAD + self.base + defs + raw
        if self.chunked:
            chunks = 1 + raw // self.chunk + self.big + (1 if n >= self.chunk else 0)
            total += chunks * (CHUNK_OVERHEAD + CHUNK_CHANNEL_OVERHEAD * nch)
        return total

    def add(self, ch: Any, n: int) -> None:
        if id(ch) not in self.channels:
            self.defs += self._definition(ch)
            self.channels.add(id(ch))
        self.raw += n + MESSAGE_OVERHEAD
        self.messages += 1
        if n >= self.chunk:
            self.big += 1


@dataclass
class Part:
    path: str
    messages: int = 0
    bytes: int = 0
    start_time: int | None = None
    end_time: int | None = None
    parameter_changes: int = 0  # ULog timed records written into the part
    dropouts: int = 0


@dataclass
class SplitResult(OpResult):
    input: str = ""
    parts: list[Part] = field(default_factory=list)
    dropped_messages: int = 0
    dropped_topics: dict[str, int] = field(default_factory=dict)
    metadata: int = 0
    #: the damage met in the input (what reads before it is split; a ULog: every intact message)
    damage: list[str] = field(default_factory=list)


_NEVER = 1 << 126
LOG_TOPIC = "log_message"  # the ULog reader's channel of logged strings


class UlogTimeline:
    """The timed records of ULog inputs (parameter changes, dropouts, sync marks) in time
    order, handed to a ULog writer between the data messages.

    Records are stamped in microseconds like pyulog stamps them: the largest data timestamp
    before the record.  :meth:`flush` with ``before_us`` writes every record stamped before
    it, so when the data go to the writer in time order and the caller flushes before each
    message (``log_time >= next_ns``), every record lands after all data up to its stamp and
    before the first later one; pyulog then reads it back with the same stamp.
    ``params`` follows the parameter values as the changes are handed out.
    """

    def __init__(self, events: list[tuple[int, int, str, Any, Any]], params: dict[str, Any]) -> None:
        self.events = sorted(events, key=lambda e: (e[0], e[1]))
        self.pos = 0
        self.params = dict(params)
        self.next_ns = _NEVER
        self._advance()

    @classmethod
    def of(cls, ulogs: Sequence[Any], *, syncs: bool = False) -> UlogTimeline:
        """The records of ``ulogs`` (ties keep the order of the inputs, then file order)."""
        events: list[tuple[int, int, str, Any, Any]] = []
        for u in ulogs:
            for ts, name, value in u.changed_params:
                events.append((int(ts), len(events), "P", name, value))
            for d in u.dropouts:
                events.append((int(d.timestamp), len(events), "O", int(d.duration), None))
            if syncs:
                for ts in u.syncs:
                    events.append((int(ts), len(events), "S", None, None))
        return cls(events, ulogs[0].params if ulogs else {})

    def _advance(self) -> None:
        self.next_ns = (self.events[self.pos][0] + 1) * 1000 if self.pos < len(self.events) else _NEVER

    def flush(self, writer: Any, before_us: int | None, part: Any = None) -> int:
        """Write the records stamped before ``before_us`` (``None``: all left) to ``writer``
        (a ULog writer, or ``None``: only ``params`` follow); returns their encoded size."""
        size = 0
        events = self.events
        while self.pos < len(events) and (before_us is None or events[self.pos][0] < before_us):
            _, _, kind, a, b = events[self.pos]
            self.pos += 1
            if kind == "P":
                self.params[a] = b
                size += 24 + len(a)
                if part is not None:
                    part.parameter_changes += 1
                if writer is not None:
                    writer.change_param(a, b)
            elif kind == "O":
                size += 5
                if part is not None:
                    part.dropouts += 1
                if writer is not None:
                    writer.add_dropout(a)
            else:
                size += 3
                if writer is not None:
                    writer.add_sync()
        self._advance()
        return size


def _value_size(v: Any) -> int:
    return len(v.encode("utf-8", "replace")) if isinstance(v, str) else len(v) if isinstance(v, bytes) else 8


def ulog_definitions_size(u: Any, params: dict[str, Any]) -> int:
    """An upper bound of the bytes a ULog's info, multi-info and parameters take."""
    n = 0
    for k, v in u.info.items():
        n += 16 + len(k) + len(u.info_types.get(k, "")) + _value_size(v)
    for k, sets in u.info_multiple.items():
        for vs in sets:
            n += sum(17 + len(k) + len(u.info_multiple_types.get(k, "")) + _value_size(v) for v in vs)
    n += sum(32 + len(k) for k in params)
    n += sum(33 + len(k) for d in u.default_params.values() for k in d)
    return n


def ulog_part_extras(
    writer: Any, fmt: str, u: Any, params: dict[str, Any], result: Any, start_us: int | None
) -> int:
    """Give a fresh part the ULog's definitions (``params``: those in force at its start);
    returns their estimated size on disk."""
    if registry.get(fmt).keeps_ulog_extras:
        writer.copy_extras(u, changed_params=False, dropouts=False, formats=False, syncs=False)
        for k, v in params.items():
            writer.add_param(k, v)
        if start_us is not None:
            writer.start_timestamp = start_us
        return ulog_definitions_size(u, params)
    return ulog_metadata_to(
        writer, fmt, u.info, params, u.default_params, bool(u.changed_params or u.dropouts), result
    )


def existing_parts(out_dir: str, base_name: str, ext: str) -> list[str]:
    """The files in ``out_dir`` named like parts ``<base_name>_<NNN><ext>`` (or their
    ``.active``), sorted."""
    rx = re.compile(re.escape(base_name) + r"_\d{3,}" + re.escape(ext) + r"(\.active)?")
    if "://" in out_dir:  # a URL prefix (parts are uploaded): its objects
        from polybag.io.upload import join, list_names, output_url

        if output_url(out_dir) is not None:
            return sorted(join(out_dir, n) for n in list_names(out_dir) if rx.fullmatch(n))
    try:
        names = os.listdir(out_dir)
    except OSError:  # no such directory yet: nothing to overwrite
        return []
    return sorted(os.path.join(out_dir, n) for n in names if rx.fullmatch(n))


def _check_parts(src: Input, out_dir: str, base_name: str, ext: str, overwrite: bool) -> list[str]:
    """Before any work: existing part names are refused unless ``overwrite`` (an input, a
    part inside an input directory or a ``.active`` always); returns the existing parts.
    With ``overwrite``, each part replaced must be something polybag could have written
    (:func:`replace_refusal`, checked as the part starts; older parts not replaced stay)."""
    found = existing_parts(out_dir, base_name, ext)
    if "://" not in out_dir:
        check_apart(src, os.path.join(out_dir, f"{base_name}_000{ext}"))
    for p in found:
        check_distinct(src, p)
        if "://" not in p:
            check_apart(src, p)
        if p.endswith(".active"):
            raise OutputExistsError(
                f"{p} exists (a recording in progress, or an interrupted write?); not overwritten: "
                "move it away, or rebuild it with `polybag reindex`/`polybag recover`"
            )
    if found and not overwrite:
        more = f" and {len(found) - 3} more" if len(found) > 3 else ""
        raise OutputExistsError(
            f"{found[0]}: output exists ({', '.join(found[:3])}{more}); not overwritten "
            "(--force replaces them; in Python overwrite=True; or choose another --output-dir or --prefix)"
        )
    return found


def split(
    src: Input,
    *,
    size: int | None = None,
    duration: int | str | None = None,
    at: Sequence[int | str] | None = None,
    output_dir: str | os.PathLike[str] | None = None,
    prefix: str | None = None,
    max_parts: int = MAX_PARTS,
    **options: Unpack[WriteOptions],
) -> SplitResult:
    """Split ``src`` into parts; exactly one of ``size``, ``duration``, ``at``.

    ``duration`` and the ``at`` times are ns ints or texts as the CLI reads them
    (``"5"`` is 5 s, ``"500ms"``, ``"+5"`` 5 s after the log's start; see
    :mod:`polybag.selection`).

    The parts keep the input's format (a rosbag2 bag's parts are bag directories
    ``<stem>_<NNN>`` of its storage, a ULog's parts ULogs) unless ``format`` says otherwise.
    A split that would write more than ``max_parts`` parts (1,000 by default) is a
    :class:`~polybag.errors.UsageError` before any part is written.

    Files already named like the parts (``<stem>_<NNN><ext>`` in ``output_dir``) are an
    :class:`~polybag.errors.OutputExistsError` before anything is read, unless ``overwrite``
    (a part is never the input).  On any failure (a full disk, an interrupt) the parts
    written so far are removed: a split is complete or not there.
    """
    w = Writing.of("split", options)
    modes = [x is not None for x in (size, duration, at)]
    if sum(modes) != 1:
        raise PolybagError("split needs exactly one of size, duration or at")
    if size is not None and size <= 0:
        raise PolybagError("split size must be positive")
    if max_parts < 1:
        raise UsageError(f"--max-parts {max_parts}: give a positive number of parts")
    name = input_name(src)
    where, stem, ext = _input_place(name)
    out_dir = os.fspath(output_dir) if output_dir is not None else where
    if out_dir.startswith(("file://", "FILE://")):
        from polybag.io.upload import local_output

        out_dir = local_output(out_dir)
    result = SplitResult(input=name)
    base_name = prefix if prefix is not None else stem
    with open_input(src, tolerant=not w.strict) as reader:
        fmt, out_ext = _part_format(w.format, reader.format, ext)
        if w.storage is None and fmt == reader.format:
            kept = str(reader.info_extras().get("storage", ""))  # a bag's storage, kept too
            if kept in registry.get(fmt).storages:
                w = dataclasses.replace(w, storage=kept)
        stale = _check_parts(src, out_dir, base_name, out_ext, w.overwrite)
        summary = reader.summary
        start = summary.start_time
        dur, points = _boundaries(duration, at, start)
        _check_part_count(src, summary, size, dur, points, max_parts)
        channels = list(summary.channels.values())
        parts = _Parts.of(src, reader, channels, result, out_dir, base_name, out_ext, fmt, w)
        parts.max_parts = max_parts
        bar = make_progress(summary_count(reader), f"split {name}", w.progress)
        release = page_releaser(reader)
        try:
            with bar:
                messages = reader.messages(order="log_time")
                parts.write(messages if w.strict else intact(messages, result), size, dur, points, start, bar, release)
            if not w.strict:
                report_recovered([reader], result)
            parts.finish()
        except BaseException:
            parts.abort()
            raise
    _warn_stale(result, stale)
    report_dropped(result, result.dropped_topics, fmt)
    return result


def _input_place(name: str) -> tuple[str, str, str]:
    """``(the folder beside the input, its stem, its extension)``; a directory (a rosbag2
    bag, or its ``metadata.yaml``) has no extension."""
    path = name.rstrip("/\\") or name
    if os.path.basename(path) == "metadata.yaml":
        path = os.path.dirname(path) or "."
    if "://" not in path and os.path.isdir(path):
        return os.path.dirname(os.path.abspath(path)), os.path.basename(os.path.abspath(path)), ""
    stem, ext = os.path.splitext(os.path.basename(path))
    return os.path.dirname(path) or ".", stem, ext


def _part_format(format: str | None, input_format: str, ext: str) -> tuple[str, str]:  # noqa: A002
    """``(the parts' format, their extension)``: ``format``, else the input's format when it
    can be written (else MCAP).  A directory format's parts have no extension; a file
    format keeps the input's extension when it names that format (``.ulog`` stays)."""
    if format:
        fmt = registry.writer_spec(format).name
    else:
        try:
            fmt = registry.writer_spec(input_format).name
        except PolybagError:
            fmt = "mcap"
    spec = registry.get(fmt)
    if spec.open_path is not None and not spec.extensions:
        return fmt, ""
    if ext:
        try:
            if target_format("x" + ext, None) == fmt:
                return fmt, ext
        except PolybagError:
            pass
    return fmt, ext_for(fmt)


def _check_part_count(
    src: Input, summary: Any, size: int | None, dur: int | None, points: list[int], max_parts: int
) -> None:
    """Refuse, before any part is written, a split that would write more than ``max_parts``
    parts: by duration, the parts the log's time span holds; at given times, one more than
    the times; by size, the input's size on disk over ``size``."""
    start, end = summary.start_time, summary.end_time
    count = 0
    if dur is not None and start is not None and end is not None:
        count = (end - start) // dur + 1
    elif points:
        count = len(set(points)) + 1
    elif size is not None:
        count = _input_bytes(src) // size + 1
    if count > max_parts:
        raise UsageError(
            f"split would write {count:,} parts, more than {max_parts:,}; "
            f"pass --max-parts {count} to allow them (or a larger --size/--duration)"
        )


def _input_bytes(src: Input) -> int:
    """The input's size on disk (a directory's files added up; 0 when not a local path)."""
    if not isinstance(src, (str, os.PathLike)) or "://" in os.fspath(src):
        return 0
    path = os.fspath(src)
    try:
        if os.path.isdir(path):
            return sum(e.stat().st_size for e in os.scandir(path) if e.is_file())
        return os.path.getsize(path)
    except OSError:
        return 0


def _boundaries(
    duration: int | str | None, at: Sequence[int | str] | None, start: int | None
) -> tuple[int | None, list[int]]:
    """``(duration in ns or None, the sorted ``at`` times in ns)``; ``start``: the log's
    start, for times relative to it."""
    dur = None
    points: list[int] = []
    if duration is not None:
        dur = duration_ns(duration)
        if dur <= 0:
            raise UsageError(f"split duration {duration!r} must be positive")
    if at is not None:
        points = sorted(time_ns(t, start) for t in at)
        for t in at:  # "--at 5" on a log of this century: "+5" was likely meant
            warn_if_meant_relative("at", t, time_ns(t, start), start)
    return dur, points


def _warn_stale(result: SplitResult, stale: list[str]) -> None:
    """Warn of the parts that were there before the split and were not replaced by it."""
    written = {p.path for p in result.parts}
    old = [p for p in stale if p not in written]
    if old:
        more = f" and {len(old) - 3} more" if len(old) > 3 else ""
        result.warn(f"older parts not from this split are still there: {', '.join(old[:3])}{more}")


@dataclass
class _Parts:
    """The parts of one split as they are written: a part is opened when its first message
    arrives and closed (renamed into place) when the next one starts; on a failure every
    part written so far is removed."""

    src: Input
    reader: Any
    result: SplitResult
    out_dir: str
    base_name: str
    out_ext: str
    fmt: str
    w: Writing
    profile: Any
    ulog: Any
    timeline: UlogTimeline | None
    data_channel: Any  # a channel of data (not logged strings), to start a ULog data section
    writer: Writer | None = None
    cmap: ChannelMap | None = None
    part: Part | None = None
    #: (channel, target channel, transform, or the one that takes the log time too) by id(channel)
    cache: dict[int, tuple[Channel, Channel | None, Transform | None, TimedTransform | None]] = field(default_factory=dict)
    budget: SizeBudget = field(init=False)
    finished: list[str] = field(default_factory=list)  # the parts closed (renamed into place) so far
    undefined: set[str] = field(default_factory=set)  # the types named as written without a definition
    max_parts: int = 1 << 62

    def __post_init__(self) -> None:
        self.budget = SizeBudget(self.fmt, self.w.chunk_size)

    @classmethod
    def of(
        cls,
        src: Input,
        reader: Any,
        channels: list[Any],
        result: SplitResult,
        out_dir: str,
        base_name: str,
        out_ext: str,
        fmt: str,
        w: Writing,
    ) -> _Parts:
        """The parts of ``reader``'s split (its ``channels``' profile, its ULog's timed records)."""
        profile = profile_for(channels, reader) if registry.get(fmt).profiles else None
        ulogs = reader.ulogs
        ulog = ulogs[0] if ulogs else None
        timeline = UlogTimeline.of(ulogs, syncs=True) if ulogs else None
        data_channel = next((c for c in channels if c.topic != LOG_TOPIC), None)
        return cls(src, reader, result, out_dir, base_name, out_ext, fmt, w, profile, ulog, timeline, data_channel)

    def open(self, first_ns: int) -> None:
        """Start the next part, whose first message is at ``first_ns``."""
        w, fmt, result = self.w, self.fmt, self.result
        self.budget = SizeBudget(fmt, w.chunk_size)
        idx = len(result.parts)
        if idx >= self.max_parts:  # the estimate before the split was short: nothing is kept
            raise UsageError(
                f"split would write more than {self.max_parts:,} parts; pass a larger --max-parts "
                "to allow them (or a larger --size/--duration)"
            )
        path = os.path.join(self.out_dir, f"{self.base_name}_{idx:03d}{self.out_ext}")
        check_distinct(self.src, path)
        if "://" not in path:
            check_apart(self.src, path)
            if w.overwrite:  # a part that appeared since the check: only what polybag writes
                refuse_replacing(path, replace_refusal(path, fmt))
        self.writer = writer = make_writer(
            path, fmt, w.compression, w.chunk_size, self.profile, overwrite=w.overwrite, storage=w.storage
        )
        self.cmap = ChannelMap(writer, fmt, result)
        self.cmap.target = target_ros(writer.holds, self.profile)  # ROS 1 <-> ROS 2 where the output holds only one
        self.cache = {}
        self.part = Part(path=path)
        result.parts.append(self.part)
        if idx == 0:
            copy_attachments_and_metadata(self.reader, writer, fmt, result)
        if self.timeline is not None:  # (a ULog input: its timed records and definitions)
            start_us = None if idx == 0 else first_ns // 1000
            self.budget.base += ulog_part_extras(writer, fmt, self.ulog, self.timeline.params, result, start_us)

    def close(self) -> None:
        """Close the current part, if one is open."""
        if self.writer is not None:
            self.writer.close()
            report_undefined(self.writer, self.result, self.undefined)
            self.writer = None
            if self.cmap is not None:
                self.cmap.report()
            assert self.part is not None
            self.finished.append(self.part.path)

    def finish(self) -> None:
        """After the last message: the timed records left go to the last part; close it."""
        if self.timeline is not None and self.part is not None:
            keeps = registry.get(self.fmt).keeps_ulog_extras
            self.timeline.flush(self.writer if keeps else None, None, self.part)
        self.close()

    def abort(self) -> None:
        """Drop the part being written and remove those closed: a split is complete or not there."""
        if self.writer is not None:
            abort_writer(self.writer)
        for path in self.finished:
            if "://" in path:  # an uploaded part
                from polybag.io.upload import remove

                remove(path)
                continue
            try:
                if os.path.isdir(path) and not os.path.islink(path):  # a bag directory
                    shutil.rmtree(path)
                else:
                    os.remove(path)
            except OSError:
                pass

    def write(
        self,
        messages: Iterable[Message],
        size: int | None,
        dur: int | None,
        points: list[int],
        start: int | None,
        bar: Any,
        release: Callable[[], None] | None,
    ) -> None:
        """Every message into its part (a new part by ``size``, ``dur`` or ``points``).

        The per-message loop is deliberately inline (issue 15's hot-loop exception): the
        part's state is held in locals, taken from ``self`` again only when a part starts.
        """
        result, timeline = self.result, self.timeline
        ulog_writer = registry.get(self.fmt).keeps_ulog_extras
        next_ns = timeline.next_ns if timeline is not None else _NEVER
        data_channel = self.data_channel
        writer, cmap, part, cache, budget_est = self.writer, self.cmap, self.part, self.cache, self.budget
        key: Any = None
        first_time: int | None = None
        keep: list[Any] = []  # channels seen, so their id() stays unique
        budget = RELEASE_EVERY
        m: Message
        for m in messages:
            t = m.log_time
            if first_time is None:
                first_time = t if start is None else min(start, t)
            n = len(m.data)
            if size is not None:
                new = part is None or (part.messages > 0 and budget_est.cost(m.channel, n) > size)
            else:
                k = (t - first_time) // dur if dur is not None else bisect.bisect_right(points, t)
                new = part is None or k != key
                key = k
            if new:
                if part is not None and t >= next_ns and timeline is not None:
                    # records before this message belong to the part that ends
                    timeline.flush(writer if ulog_writer else None, t // 1000, part)
                    next_ns = timeline.next_ns
                self.close()
                self.open(t)
                writer, cmap, part, cache, budget_est = self.writer, self.cmap, self.part, self.cache, self.budget
            assert cmap is not None and part is not None and writer is not None
            ent = cache.get(id(m.channel))
            if ent is None or ent[0] is not m.channel:
                out, tf = cmap.get(m.channel)
                timed = tf if isinstance(tf, TimedTransform) else None  # (it takes the log time too)
                ent = cache[id(m.channel)] = (m.channel, out, None if timed is not None else tf, timed)
            if ent[1] is None:
                result.dropped_messages += 1
                result.dropped_topics[m.channel.topic] = result.dropped_topics.get(m.channel.topic, 0) + 1
                continue
            if t >= next_ns and timeline is not None:
                if ulog_writer and not part.messages and m.channel.topic == LOG_TOPIC and data_channel:
                    # pyulog takes records before the first subscription or logged
                    # string for definitions: start the data section first
                    cmap.get(data_channel)
                budget_est.base += timeline.flush(writer if ulog_writer else None, t // 1000, part)
                next_ns = timeline.next_ns
            plain, timed = ent[2], ent[3]
            data = timed(m.data, t) if timed is not None else plain(m.data) if plain is not None else m.data
            if data is None:
                result.dropped_messages += 1
                result.dropped_topics[m.channel.topic] = result.dropped_topics.get(m.channel.topic, 0) + 1
                continue
            writer.write(ent[1], data, t, m.publish_time, m.sequence)
            part.messages += 1
            if size is not None:
                if id(m.channel) not in budget_est.channels:
                    keep.append(m.channel)
                budget_est.add(m.channel, n)
            part.bytes += n
            if part.start_time is None:
                part.start_time = t
            part.end_time = t
            result.messages += 1
            bar.update(1)
            if release is not None:
                budget -= n
                if budget < 0:
                    release()
                    budget = RELEASE_EVERY
