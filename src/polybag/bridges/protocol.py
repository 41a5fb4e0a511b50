"""The bridge protocol: what a bridge gives for a channel, and the payload transforms.

A bridge (:class:`Bridge`) maps a source channel to a channel of its target encoding
(:class:`BridgedChannel`: topic, encoding, schema, metadata) plus the payload transform that
carries each message across (:class:`Transform`; a :class:`TimedTransform` also takes the
message's log time).  Bridges are registered by (source encoding, target encoding) in
:mod:`polybag.bridges.registry` and chained there (ULog -> ROS 1 -> ROS 2).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from polybag.model import Channel, Schema

Payload = bytes | memoryview


class Transform(Protocol):
    """A message's payload as the output holds it (None: it cannot be converted, the message
    is dropped): ``tf(data)``.  A transform that needs the message's log time too is a
    :class:`TimedTransform`, called ``tf(data, log_time)`` (:func:`needs_log_time`)."""

    def __call__(self, data: Payload, /) -> Payload | None: ...


class TimedTransform:
    """A transform that also needs the message's log time: ``tf(data, log_time)``."""

    #: what it needs besides the payload: the message's log time
    needs_log_time = True

    def __init__(self, fn: Callable[[Payload, int], Payload | None]) -> None:
        self.fn = fn

    def __call__(self, data: Payload, log_time: int = 0) -> Payload | None:
        return self.fn(data, log_time)


def needs_log_time(tf: Transform) -> bool:
    """Whether ``tf`` is called ``tf(data, log_time)`` (a :class:`TimedTransform`)."""
    return isinstance(tf, TimedTransform)


def then(first: Transform | None, second: Transform | None) -> Transform | None:
    """The payload transform ``second(first(data))`` (either may be None: no change); timed
    when ``second`` is (``first`` never is: only the last bridge of a chain needs the time)."""
    if first is None:
        return second
    if second is None:
        return first
    if isinstance(second, TimedTransform):
        timed = second

        def both_timed(data: Payload, log_time: int) -> Payload | None:
            d = first(data)
            return None if d is None else timed(d, log_time)

        return TimedTransform(both_timed)
    untimed = second

    def both(data: Payload) -> Payload | None:
        d = first(data)
        return None if d is None else untimed(d)

    return both


class Conversion(Protocol):
    """What a bridge that decodes and re-encodes each message tells of those it could not
    carry (:class:`polybag.bridges.ros1_ros2.Mapped`)."""

    schema_name: str
    failures: int
    last_error: str
    name_problems: list[str]


@dataclass(frozen=True)
class BridgedChannel:
    """A source channel as a bridge carries it: the channel in the target encoding and the
    payload transform (None: the payload is the same bytes)."""

    topic: str
    encoding: str
    schema: Schema | None
    metadata: dict[str, str]
    transform: Transform | None = None
    #: the per-message conversion, when messages can fail to convert (counted for a warning)
    conversion: Conversion | None = None
    #: set by a bridge into a format's own channels (ULog subscriptions): bridged channels with
    #: the same key share one written channel, written as they are (never bridged further)
    key: tuple[str | int, ...] | None = None
    #: the ULog formats of a ULog subscription (``name:type field;...``, nested first), which
    #: the writer takes with :meth:`~polybag.writer.Writer.add_ulog_subscription`
    formats: tuple[str, ...] = field(default=())

    def as_channel(self, source: Channel) -> Channel:
        """This channel as a :class:`~polybag.model.Channel` with ``source``'s id (the input
        of the next bridge of a chain)."""
        return Channel(source.id, self.topic, self.encoding, self.schema, self.metadata)


class Bridge(Protocol):
    """A bridge: ``bridge(channel)`` maps a channel of its source encoding to its target
    encoding; a :class:`~polybag.errors.PolybagError` when it cannot (the type has no
    counterpart there), which drops the channel with a warning naming the reason."""

    def __call__(self, channel: Channel, /) -> BridgedChannel: ...
