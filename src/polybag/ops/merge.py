"""``merge``: several logs (any formats) into one, ordered by log time.

Each input is read in log-time order and the streams are merged with :func:`heapq.merge`
(ties keep the order of the inputs), so memory is a few chunks per input.  Schemas and
channels that are identical across inputs are written once; a topic that arrives with
different types or md5sums is written as separate channels and reported as a conflict.

ULog inputs keep their extras:

* Info, multi-info, parameters and default parameters: the first ULog input's, completed
  with the keys only later inputs have (first wins).  A later input's different values are
  reported as warnings (``param_conflicts`` lists the parameter names).
* Parameter changes and dropouts of every ULog input are written in time order between
  the data (stamped like pyulog stamps them: the largest data timestamp before them), and
  the logged strings (tagged or not) of every input are merged by their timestamps.
* A ULog output starts at the earliest start timestamp of the ULog inputs.  Subscriptions
  with the same name, instance and format in several inputs become one subscription; a
  topic whose format differs from an earlier input's cannot be held (dropped, warned).
* An MCAP output gets the ``ulog_info``/``ulog_params``/``ulog_default_params_<bit>``
  metadata records ``convert`` writes, made from the merged values; a bag output cannot
  hold them (a warning), and neither can hold parameter changes and dropouts.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from polybag.bridges import ChannelMap
from polybag.errors import WriteError
from polybag.formats import registry
from polybag.model import Channel, Message
from polybag.ops.copying import CopyJob, CopyResult, prepare_output
from polybag.ops.inputs import input_name, open_input, require_topics, summary_count
from polybag.ops.options import Input, PathLike
from polybag.ops.split import UlogTimeline
from polybag.ops.ulog_extras import ulog_metadata_to
from polybag.selection import selected_channels
from polybag.writer import Writer


@dataclass
class MergeResult(CopyResult):
    inputs: list[str] = field(default_factory=list)
    input_messages: list[int] = field(default_factory=list)
    channels: int = 0
    conflicts: list[str] = field(default_factory=list)
    parameter_changes: int = 0
    dropouts: int = 0
    param_conflicts: list[str] = field(default_factory=list)


class _MergeChannels(ChannelMap):
    """ROS 1 <-> ROS 2 as convert does (:class:`ChannelMap`); for a ULog output, subscriptions of several inputs with the same name, instance and
    format share one subscription (``msg_id`` is only a file's own numbering); a format
    that differs from one already written cannot be held: the topic is dropped, warned."""

    def _make(self, ch: Channel) -> tuple[Channel | None, Any]:
        if registry.get(self.fmt).keeps_ulog_extras and ch.message_encoding == "ulog" and "msg_id" in ch.metadata:
            md = {k: v for k, v in ch.metadata.items() if k != "msg_id"}
            ch = Channel(ch.id, ch.topic, ch.message_encoding, ch.schema, md)
        try:
            return super()._make(ch)
        except WriteError as e:
            self.result.warn(f"topic {ch.topic}: {e}; its messages from this input are dropped")
            return None, None


def _differs(a: Any, b: Any) -> bool:
    return type(a) is not type(b) or a != b


def _list(names: Sequence[str], most: int = 10) -> str:
    more = f", ... ({len(names) - most} more)" if len(names) > most else ""
    return ", ".join(names[:most]) + more


class UlogDefinitions:
    """The merged definitions of several ULogs: first wins, later differences reported."""

    def __init__(self, ulogs: Sequence[tuple[str, Any]], result: MergeResult) -> None:
        self.info: dict[str, Any] = {}
        self.info_types: dict[str, str] = {}
        self.info_multiple: dict[str, list[list[Any]]] = {}
        self.info_multiple_types: dict[str, str] = {}
        self.params: dict[str, Any] = {}
        self.default_params: dict[int, dict[str, Any]] = {}
        self.compat_flags = [0] * 8
        self.start_timestamp = min(int(u.start_timestamp) for _, u in ulogs)
        first = ulogs[0][0]
        for i, (name, u) in enumerate(ulogs):
            for j, v in enumerate(u.compat_flags[:8]):
                self.compat_flags[j] |= v
            info_diff = [k for k, v in u.info.items() if k in self.info and _differs(self.info[k], v)]
            for k, v in u.info.items():
                if k not in self.info:
                    self.info[k] = v
                    if k in u.info_types:
                        self.info_types[k] = u.info_types[k]
            multi_diff = [
                k
                for k, v in u.info_multiple.items()
                if k in self.info_multiple and self.info_multiple[k] != v
            ]
            for k, v in u.info_multiple.items():
                if k not in self.info_multiple:
                    self.info_multiple[k] = v
                    if k in u.info_multiple_types:
                        self.info_multiple_types[k] = u.info_multiple_types[k]
            param_diff = [k for k, v in u.params.items() if k in self.params and _differs(self.params[k], v)]
            for k, v in u.params.items():
                self.params.setdefault(k, v)
            default_diff = []
            for bit, d in sorted(u.default_params.items()):
                have = self.default_params.setdefault(bit, {})
                default_diff += [k for k, v in d.items() if k in have and _differs(have[k], v)]
                for k, v in d.items():
                    have.setdefault(k, v)
            if not i:
                continue
            for what, diff in (
                ("info", info_diff),
                ("multi-info", multi_diff),
                ("parameter(s)", param_diff),
                ("default parameter(s)", default_diff),
            ):
                if diff:
                    result.warn(
                        f"{name}: ULog {what} differ from the earlier inputs' ({len(diff)}: {_list(diff)}); "
                        f"the first values ({first} first) are kept"
                    )
            result.param_conflicts += [k for k in param_diff if k not in result.param_conflicts]

    def write_ulog(self, writer: Any) -> None:
        writer.start_timestamp = self.start_timestamp
        writer.copy_definitions(self)

    def restore(self, writer: Any) -> None:
        """Undo what the metadata of a non-ULog input overwrote (the ULog inputs win)."""
        for k, v in self.info.items():
            writer.add_info(k, v, self.info_types.get(k))
        for k, v in self.params.items():
            writer.add_param(k, v)


def _with_timeline(
    messages: Iterable[Message], timeline: UlogTimeline, writer: Writer | None
) -> Iterator[Message]:
    """``messages`` with the timeline's records written before the first later message
    (the writer has written the previous message when the next one is asked for)."""
    nxt = timeline.next_ns
    for m in messages:
        if m.log_time >= nxt:
            timeline.flush(writer, m.log_time // 1000)
            nxt = timeline.next_ns
        yield m
    timeline.flush(writer, None)


def merge(
    dst: PathLike,
    inputs: Sequence[Input],
    *,
    format: str | None = None,  # noqa: A002
    compression: str | None = None,
    chunk_size: int | None = None,
    topics: str | Sequence[str] | None = None,
    progress: bool | None = False,
    overwrite: bool = False,
    storage: str | None = None,
    strict: bool = False,
) -> MergeResult:
    """Merge ``inputs`` into ``dst`` in log-time order (an existing ``dst`` only with
    ``overwrite``; never one of the inputs; nothing is left behind on failure).  A damaged
    input keeps what reads before the damage (``result.damage``); ``strict`` refuses it."""
    if not inputs:
        from polybag.errors import PolybagError

        raise PolybagError("merge needs at least one input")
    fmt = prepare_output(dst, format, inputs, overwrite)
    result = MergeResult(output=str(dst), inputs=[input_name(s) for s in inputs])
    with ExitStack() as stack:
        readers = [stack.enter_context(open_input(s, tolerant=not strict)) for s in inputs]
        all_channels = [c for r in readers for c in r.summary.channels.values()]
        require_topics(topics, all_channels)  # (a selection no input has: EmptySelectionError)
        # only the selected topics' channels: the others would be written empty
        all_channels = selected_channels(topics, all_channels)
        job = CopyJob(
            dst, fmt, result, readers, all_channels, compression, chunk_size, overwrite, channel_map=_MergeChannels, storage=storage, strict=strict
        )
        with job:
            ulogs = [(result.inputs[i], u) for i, r in enumerate(readers) for u in r.ulogs]
            defs = UlogDefinitions(ulogs, result) if ulogs else None
            timeline = UlogTimeline.of([u for _, u in ulogs]) if ulogs else None
            if defs is not None:
                _definitions_to(job.writer, fmt, defs, [u for _, u in ulogs], result)
            job.add_channels(all_channels)
            counts = [0] * len(readers)

            def counted(i: int):  # type: ignore[no-untyped-def]
                for m in readers[i].messages(topics=topics, order="log_time"):
                    counts[i] += 1
                    yield m

            streams = [counted(i) for i in range(len(readers))]
            merged: Iterable[Message] = heapq.merge(*streams, key=attrgetter("log_time"))
            if timeline is not None:
                merged = _with_timeline(merged, timeline, job.writer if registry.get(fmt).keeps_ulog_extras else None)
            total = sum(summary_count(r) for r in readers)
            result.messages = job.copy(merged, total, f"merge -> {dst}", progress)
            result.input_messages = counts
            _finish(job, readers, fmt, defs, timeline, result)
    return result


def _finish(
    job: CopyJob,
    readers: Sequence[Any],
    fmt: str,
    defs: UlogDefinitions | None,
    timeline: UlogTimeline | None,
    result: MergeResult,
) -> None:
    """After the messages: every input's attachments and metadata, the ULog definitions
    restored, the counts of timed records, channels and conflicts into ``result``."""
    for r in readers:
        a, _, md, _ = job.copy_extras(r)
        result.attachments += a
        result.metadata += md
    if defs is not None and registry.get(fmt).keeps_ulog_extras:
        defs.restore(job.writer)
    if timeline is not None:
        kinds = [e[2] for e in timeline.events]
        result.parameter_changes = kinds.count("P")
        result.dropouts = kinds.count("O")
    result.channels = job.channels
    result.conflicts = job.cmap.conflicts()
    for c in result.conflicts:
        result.warn(c)


def _definitions_to(
    writer: Writer, fmt: str, defs: UlogDefinitions, ulogs: Sequence[Any], result: MergeResult
) -> None:
    if registry.get(fmt).keeps_ulog_extras:
        defs.write_ulog(writer)
        return
    changes = any(u.changed_params or u.dropouts for u in ulogs)
    ulog_metadata_to(writer, fmt, defs.info, defs.params, defs.default_params, changes, result)
