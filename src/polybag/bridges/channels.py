"""Channels carried into an output: the map from a source channel to the channel written,
through a chain of bridges (:mod:`polybag.bridges.registry`) when the output holds another
encoding, and which ROS an output's messages must be.

What an output holds is its writer's answer (:attr:`polybag.writer.Writer.holds`, the
format registry's ``holds``), never a format name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from polybag.bridges.protocol import BridgedChannel, Conversion, Transform, then
from polybag.bridges.registry import always_bridged, bridge, bridge_chain
from polybag.errors import PolybagError, UsageError
from polybag.model import Channel, Schema
from polybag.writer import Writer

#: the encodings of the two ROS: an output that holds neither takes every channel in the
#: one encoding it holds (a ULog output: ULog), whatever the profile
_ROS = frozenset({"ros1", "cdr"})
#: the ROS of ``--profile`` by message encoding
_PROFILES = {"ros1": "ros1", "cdr": "ros2"}


class Warnings(Protocol):
    """Where a channel map says what it dropped (an operation's result)."""

    def warn(self, text: str) -> None: ...


def _md5_for(schema: Schema) -> str | None:
    try:
        from polybag.codecs.ros1 import compute_md5
    except ImportError:
        return None
    try:
        return str(compute_md5(schema.name, bytes(schema.data).decode("utf-8", "replace")))
    except Exception:  # noqa: BLE001 - a definition the codec cannot parse: leave md5 unset
        return None


def _channel_key(
    topic: str, encoding: str, schema: Schema | None, metadata: Mapping[str, str]
) -> tuple[str, str, tuple[str, str, bytes] | None, tuple[tuple[str, str], ...]]:
    skey = None if schema is None else (schema.name, schema.encoding, bytes(schema.data))
    return (topic, encoding, skey, tuple(sorted(metadata.items())))


def _type_name(ch: Channel) -> str:
    return ch.schema.name if ch.schema is not None else str(ch.metadata.get("type", "?"))


class ChannelMap:
    """Source channel -> (target channel, payload transform), made once per channel.

    Every channel is carried into the message encoding its output holds, through a chain
    of bridges (:func:`~polybag.bridges.registry.bridge_chain`): ULog -> ROS 1 -> ROS 2,
    ROS 2 -> ROS 1 -> ULog.  ``target = "ros2"`` (a rosbag2 output, or the MCAP profile
    ``ros2``) wants CDR messages, ``target = "ros1"`` (a bag, the MCAP profile ``ros1``)
    ROS 1 ones, an output that holds no ROS (ULog) its own encoding; an output that holds
    anything (MCAP without a profile) takes every channel as it is, except those a bridge
    takes always (ULog channels, as ROS 1).  A channel that no chain carries, or whose type
    a bridge cannot map, is dropped with a warning naming it and the reason kept in
    :attr:`reasons` (its messages counted); :meth:`report` warns about messages that could
    not be converted.  Identical channels from several inputs share one target channel
    (merge).
    """

    #: which ROS the messages must be (:func:`target_ros`): ``ros1``, ``ros2`` or None
    target: str | None = None

    def __init__(self, writer: Writer, fmt: str, result: Warnings) -> None:
        self.writer = writer
        self.fmt = fmt  # the output's format, as messages name it
        self.holds = writer.holds
        self.result = result
        self._by_obj: dict[int, tuple[Channel, Channel | None, Transform | None]] = {}
        self._by_key: dict[tuple[object, ...], Channel] = {}  # by _channel_key or BridgedChannel.key
        self._schemas: dict[tuple[str, str, bytes], Schema] = {}
        self.dropped: dict[str, int] = {}
        self.types_by_topic: dict[str, set[tuple[str, str]]] = {}
        #: the conversions of the channels bridged message by message, by source topic
        self.mapped: dict[str, Conversion] = {}
        #: why a topic's messages were dropped (topic -> reason), for the result
        self.reasons: dict[str, str] = {}

    def get(self, ch: Channel) -> tuple[Channel | None, Transform | None]:
        got = self._by_obj.get(id(ch))
        if got is None or got[0] is not ch:
            out, tf = self._make(ch)
            got = self._by_obj[id(ch)] = (ch, out, tf)
        return got[1], got[2]

    def schema(self, name: str, encoding: str, data: bytes) -> Schema:
        key = (name, encoding, bytes(data))
        s = self._schemas.get(key)
        if s is None:
            s = self._schemas[key] = self.writer.add_schema(name, encoding, bytes(data))
        return s

    def _goal(self, enc: str) -> str | None:
        """The encoding a channel of ``enc`` must reach for this output (None: as it is)."""
        holds = self.holds
        if holds is not None and not holds & _ROS:
            return min(holds)
        if self.target == "ros2":
            return "cdr"
        if self.target == "ros1":
            return "ros1"
        if holds is None:
            return always_bridged(enc)
        return min(holds)

    def _drop(self, ch: Channel, reason: str) -> tuple[None, None]:
        self.result.warn(f"topic {ch.topic}: {reason}; dropped")
        self.reasons[ch.topic] = reason
        return None, None

    def _refuse(self, ch: Channel, topic: str, reason: str) -> tuple[None, None]:
        """``ch`` (of the source's ``topic``) cannot be written: warned, and the first reason
        for the topic kept."""
        self.result.warn(f"topic {ch.topic}: {reason}; dropped")
        self.reasons.setdefault(topic, reason)
        return None, None

    def _make(self, ch: Channel) -> tuple[Channel | None, Transform | None]:
        enc = ch.message_encoding
        goal = self._goal(enc)
        if goal is None or goal == enc:
            return self._written(ch, ch.topic)
        chain = bridge_chain(enc, goal)
        if chain is None:
            if self.holds is None:  # an output that holds anything: kept as it is
                return self._written(ch, ch.topic)
            held = ", ".join(sorted(self.holds))
            return self._drop(
                ch, f"no bridge carries {enc or 'schemaless'!r} messages into {self.fmt} files (they hold {held})"
            )
        cur, tf = ch, None
        for source, step in zip(chain, chain[1:]):
            spec = bridge(source, step)
            try:
                bridged = spec.load()(cur)
            except PolybagError as e:
                reason = spec.refusal.format(type=_type_name(cur), error=e)
                if step in _ROS:  # a type with no counterpart in that ROS: this reason
                    return self._drop(ch, reason)
                # into the output's own channels (ULog): refused as the output refuses
                return self._refuse(cur, ch.topic, reason)
            if bridged.conversion is not None:
                self.mapped[ch.topic] = bridged.conversion
            tf = then(tf, bridged.transform)
            if bridged.key is not None:
                return self._own_channel(cur, ch.topic, bridged, spec.refusal, tf)
            cur = bridged.as_channel(cur)
        out, last_tf = self._written(cur, ch.topic)
        if out is None:
            return None, None
        return out, then(tf, last_tf)

    def _own_channel(
        self, ch: Channel, topic: str, bridged: BridgedChannel, refusal: str, tf: Transform | None
    ) -> tuple[Channel | None, Transform | None]:
        """A bridged channel of the output format's own kind (a ULog subscription: see
        :attr:`BridgedChannel.key`), written as the writer takes it; refused with the
        bridge's reason when the writer cannot take it."""
        assert bridged.key is not None
        out = self._by_key.get(bridged.key)
        if out is None:
            try:
                if bridged.formats:
                    multi_id = int(bridged.metadata.get("multi_id", 0))
                    out = self.writer.add_ulog_subscription(bridged.topic, multi_id, bridged.formats)
                else:
                    s = bridged.schema
                    wschema = None if s is None else self.schema(s.name, s.encoding, s.data)
                    out = self.writer.add_channel(bridged.topic, bridged.encoding, wschema, bridged.metadata)
            except PolybagError as e:
                return self._refuse(ch, topic, refusal.format(type=_type_name(ch), error=e))
            self._by_key[bridged.key] = out
        return out, tf

    def _written(self, ch: Channel, topic: str) -> tuple[Channel | None, Transform | None]:
        """``ch`` written as it is (identical channels share one); when the output cannot
        hold its encoding, the reason is kept for the source's ``topic``."""
        enc = ch.message_encoding
        schema = ch.schema
        metadata = dict(ch.metadata)
        holds = self.holds
        if holds is not None and enc not in holds:
            return self._refuse(ch, topic, f"{self.fmt} files cannot hold {enc or 'schemaless'!r} messages")
        if enc == "ros1" and schema is not None:
            if "type" not in metadata and schema.name:
                metadata["type"] = schema.name
            if "md5sum" not in metadata and holds is not None and "ros1" in holds:  # (a bag's connections)
                md5 = _md5_for(schema)
                if md5:
                    metadata["md5sum"] = md5
        key = _channel_key(ch.topic, enc, schema, metadata)
        out = self._by_key.get(key)
        if out is None:
            wschema = None
            if schema is not None:
                wschema = self.schema(schema.name, schema.encoding, schema.data)
            out = self.writer.add_channel(ch.topic, enc, wschema, metadata)
            self._by_key[key] = out
            tname = schema.name if schema is not None else str(metadata.get("type", ""))
            self.types_by_topic.setdefault(ch.topic, set()).add((tname, str(metadata.get("md5sum", ""))))
        return out, None

    def conflicts(self) -> list[str]:
        """Topics written with more than one type or md5sum."""
        out = []
        for topic, types in sorted(self.types_by_topic.items()):
            names = {t for t, _ in types}
            md5s = {m for _, m in types if m}
            if len(names) > 1 or len(md5s) > 1:
                desc = ", ".join(f"{t or '?'} ({m or 'no md5'})" for t, m in sorted(types))
                out.append(f"topic {topic}: conflicting types: {desc}")
        return out

    def report(self) -> None:
        """One warning per topic with messages that could not be converted; one warning for
        every name of the translated types that ROS 2 tools refuse (a ULog's types: one per
        topic, so they are said once)."""
        problems = sorted({p for mp in self.mapped.values() for p in mp.name_problems})
        if problems:
            topics = sum(1 for mp in self.mapped.values() if mp.name_problems)
            shown = "; ".join(problems[:3]) + (f"; and {len(problems) - 3} more" if len(problems) > 3 else "")
            self.result.warn(
                f"names ROS 2 tools refuse are kept as they are (as rosbags-convert does), on {topics} topic(s): {shown}"
            )
        for topic, mp in sorted(self.mapped.items()):
            if mp.failures:
                reason = (
                    f"{mp.failures} messages could not be converted to {mp.schema_name} (last: {mp.last_error})"
                )
                self.result.warn(f"topic {topic}: {reason}; dropped")
                self.reasons.setdefault(topic, reason)


def check_profile(fmt: str, holds: frozenset[str] | None, profile: str | None) -> None:
    """Refuse a ``--profile`` that an output of ``fmt`` (whose files hold the message
    encodings ``holds``, None: any) cannot take: an output that holds anything (MCAP) takes
    ``ros1`` and ``ros2``; one that holds only ROS 1 messages (bags) takes ``ros1``, one
    that holds only ROS 2 (CDR) messages (rosbag2) ``ros2``; a ULog takes none."""
    if profile is None:
        return
    if profile not in ("ros1", "ros2"):
        raise UsageError(f"--profile {profile!r}: choose ros1 or ros2")
    if holds is None:
        return
    takes = sorted(_PROFILES[h] for h in holds if h in _PROFILES)
    if profile not in takes:
        only = f"takes only --profile {takes[0]}" if takes else "takes no --profile"
        raise UsageError(f"--profile {profile}: a {fmt} output {only} (leave --profile out, or pass --format mcap)")


def target_ros(holds: frozenset[str] | None, profile: str | None) -> str | None:
    """Which ROS the messages of an output whose files hold the encodings ``holds`` (and of
    the MCAP ``profile``) must be: ``ros1`` for one that holds only ROS 1 messages (bags),
    ``ros2`` for one that holds only CDR (rosbag2), the profile's for MCAP (``ros1`` /
    ``ros2``), else None (copied as they are)."""
    if holds is not None and "ros1" in holds and "cdr" not in holds:
        return "ros1"
    if holds is not None and "cdr" in holds and "ros1" not in holds:
        return "ros2"
    if profile in ("ros1", "ros2"):
        return profile
    return None
