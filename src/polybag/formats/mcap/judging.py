"""Judging stored CDR definitions that may not describe their messages.

A placeholder ``uint8 level`` for ``rcl_interfaces/msg/Log``: a channel whose
``ros2msg``/``ros2idl`` definition differs from the known type of its name is tried on one of
its messages (:func:`polybag.codecs.cdr.decoding_definition`, shared with rosbag2 bags); when
it fails and the known one decodes, the channel carries the known full definition from then
on (messages, summary, conversions), said once per topic.  A local file with a summary
section is judged at open (one message per such channel), a summary built from the data when
it is built, anything else (a remote file, a stream) on the first message a read returns.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Iterator

from polybag.errors import PolybagError, PolybagWarning
from polybag.formats.mcap.context import McapContext
from polybag.formats.mcap.definitions import McapDefinitions
from polybag.io.source import MappedSource
from polybag.model import Channel, Message, Schema, Summary

# reads a topic's messages in file order (to find a channel's first message)
ReadTopic = Callable[[list[str]], Iterator[Message]]


class DefinitionJudge:
    """Which channels carry a known definition instead of the file's (``judged``: channel id
    -> the replacement, or None when the file's stands); ``read_topic`` reads a topic's
    messages in file order, to judge a channel on its first one."""

    def __init__(self, ctx: McapContext, defs: McapDefinitions, read_topic: ReadTopic) -> None:
        self.ctx = ctx
        self.defs = defs
        self._read_topic = read_topic
        # channel id -> the channel with the known definition that decodes its messages
        # (its own CDR definition does not), or None: its own stands
        self.judged: dict[int, Channel | None] = {}
        self._warned_topics: set[str] = set()

    def _suspect(self, ch: Channel) -> bool:
        """Whether ``ch`` is a CDR channel whose stored definition describes another structure
        than the known type of its name (:func:`polybag.codecs.cdr.differs_from_known`: no
        reading, its messages may not decode with it)."""
        s = ch.schema
        if ch.message_encoding != "cdr" or s is None:
            return False
        from polybag.codecs.cdr import differs_from_known

        return differs_from_known(s.name, s.encoding, s.data)

    def judge(self, ch: Channel, sample: bytes | memoryview) -> Channel | None:
        """Decide, once per channel and from one of its messages (``sample``), whether the
        file's definition of ``ch`` stands: when it does not decode ``sample`` and the known
        one of that name (``--types``, then bundled) does, the channel with the known full
        definition (warned once per topic), which messages, the summary and conversions
        then carry; None otherwise."""
        rep: Channel | None = None
        s = ch.schema
        if s is not None and self._suspect(ch):
            from polybag.codecs.cdr import decoding_definition

            got = decoding_definition(s.name, s.encoding, s.data, sample)
            if got is not None:
                enc, text, why = got
                rep = dataclasses.replace(ch, schema=Schema(s.id, s.name, enc, text))
                if ch.topic not in self._warned_topics:
                    self._warned_topics.add(ch.topic)
                    warnings.warn(
                        PolybagWarning(
                            f"{self.ctx.path}: topic {ch.topic}: the file's definition of {s.name} does not decode its "
                            f"messages ({why}); polybag's own definition of {s.name} does and is used"
                        ),
                        stacklevel=2,
                    )
        self.judged[ch.id] = rep
        if rep is not None and self.ctx.summary is not None:
            self.judged_into(self.ctx.summary)
        return rep

    def judged_into(self, summary: Summary) -> None:
        """``summary`` with the channels (and schemas) :meth:`judge` replaced."""
        for cid, rep in self.judged.items():
            if rep is not None and cid in summary.channels:
                summary.channels[cid] = rep
                if rep.schema is not None and rep.schema.id in summary.schemas:
                    summary.schemas[rep.schema.id] = rep.schema

    def judge_at_open(self) -> None:
        """A local mapped file whose summary section names channels with a suspect
        definition: each is judged on its first message now (one chunk read per such
        channel; none at all for a file without one), so that the summary (and a
        conversion's channels, written before any message) carry the definition that
        decodes.  A remote file is judged on the first message a read returns (no range
        request beyond what a read makes), a stream likewise."""
        src = self.ctx.source
        if self.ctx.recover or not isinstance(src, MappedSource) or src.stats is not None:
            return
        self._judge_channels(list(self.defs.channels.values()))

    def judge_summary(self, summary: Summary) -> None:
        """The summary just built: a summary found by reading the data (no usable summary
        section, recovering, a spooled stream) or of a local file judges its suspect channels
        now (their chunks were read, or are local: one message each); then it carries every
        replacement."""
        src = self.ctx.source
        if isinstance(src, MappedSource) and (not summary.indexed or src.stats is None):
            self._judge_channels(list(summary.channels.values()))
        self.judged_into(summary)

    def _judge_channels(self, channels: list[Channel]) -> None:
        """Judge each suspect channel of ``channels`` not judged yet on its first message
        (one read per such channel, dropped once the message is found)."""
        for ch in channels:
            if ch.id in self.judged or not self._suspect(ch):
                continue
            try:
                it = self._read_topic([ch.topic])
                first = next((m for m in it if m.channel.id == ch.id), None)
                del it
            except PolybagError:
                continue  # damage: the read that meets it says so; judged on a later read
            if first is not None and ch.id not in self.judged:
                self.judge(ch, first.data)

    def judging(self, it: Iterator[Message]) -> Iterator[Message]:
        """``it`` with each channel judged on its first message (:meth:`judge`) and the
        messages of a replaced channel carrying the replacement."""
        judged = self.judged
        last: Channel | None = None
        rep: Channel | None = None
        for m in it:
            ch = m.channel
            if ch is not last:
                last = ch
                rep = judged[ch.id] if ch.id in judged else self.judge(ch, m.data)
            if rep is not None:
                m.channel = rep
            yield m

    def needs_judging(self) -> bool:
        """Whether a read must pass its messages through :meth:`judging`: a channel may be
        unknown yet (a stream, a file without a summary section whose summary was not built
        from its data yet) or is suspect or replaced."""
        if not isinstance(self.ctx.source, MappedSource):
            return True
        if self.ctx.has_summary and self.defs.timeline is None:
            known = list(self.defs.channels.values())
        elif self.ctx.summary is not None and not self.ctx.summary.indexed:
            known = list(self.ctx.summary.channels.values())  # found by reading the data: every channel
        else:
            return True
        for ch in known:
            if ch.id not in self.judged and not self._suspect(ch):
                self.judged[ch.id] = None
            if self.judged.get(ch.id, ch) is not None:
                return True
        return False
