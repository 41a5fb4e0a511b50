"""The format-neutral model every reader produces and every writer consumes.

Bytes -> format reader -> model -> codec -> user, and back.  Nothing here knows about
any file format.  Times are integer nanoseconds.

The model is the bottom layer: it imports nothing of polybag but :mod:`polybag.errors`.
:meth:`Message.decode` needs a codec, so the model declares what a codec is
(:class:`Codec`) and holds the lookup that :mod:`polybag.codecs` installs when it is
imported (:func:`install_codec_lookup`); ``import polybag`` always imports the codecs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypedDict

from polybag.errors import UnsupportedError

if TYPE_CHECKING:
    import numpy as np


class Codec(Protocol):
    """What is inside a message: payload bytes to objects and dicts, and back
    (made per schema by :mod:`polybag.codecs`)."""

    def decode(self, data: bytes | memoryview, topic: str | None = None) -> Any: ...

    def to_dict(self, data: bytes | memoryview, topic: str | None = None) -> Any: ...

    def encode(self, obj: Any) -> bytes: ...


@dataclass(frozen=True, slots=True)
class Schema:
    """How to read a channel's messages.

    ``encoding`` is one of ``ros1msg``, ``ros2msg``, ``ros2idl``, ``ulog``, ``protobuf``,
    ``jsonschema`` (or anything else a file declares); ``data`` is the definition itself.
    """

    id: int
    name: str
    encoding: str
    data: bytes

    def __hash__(self) -> int:
        return hash((self.id, self.name, self.encoding))


@dataclass(frozen=True, slots=True)
class Channel:
    """A stream of messages: a bag connection, an MCAP channel, a ULog subscription."""

    id: int
    topic: str
    message_encoding: str
    schema: Schema | None
    metadata: Mapping[str, str] = field(default_factory=dict)

    def __hash__(self) -> int:
        return hash((self.id, self.topic, self.message_encoding))

    @property
    def type_name(self) -> str:
        """The message type name (``pkg/Type``), or ``""`` for schemaless channels."""
        if self.schema is not None and self.schema.name:
            return self.schema.name
        return str(self.metadata.get("type", ""))


def _no_codecs(channel: Channel) -> Codec:
    raise UnsupportedError(f"topic {channel.topic}: no codecs loaded (import polybag.codecs)")


# the codec of a channel: polybag.codecs.codec_for, installed by polybag.codecs on import
_codec_for: Callable[[Channel], Codec] = _no_codecs


def install_codec_lookup(lookup: Callable[[Channel], Codec]) -> None:
    """Make :meth:`Message.codec`, :meth:`Message.decode` and :meth:`Message.to_dict` use
    ``lookup`` (channel -> codec).  Called by :mod:`polybag.codecs` when it is imported."""
    global _codec_for
    _codec_for = lookup


class Message:
    """One message: raw bytes plus times.  Decoding is lazy (:meth:`decode`).

    A plain ``__slots__`` class rather than a frozen dataclass: readers create millions of
    these and a frozen dataclass's ``__init__`` costs three times as much.
    """

    __slots__ = ("channel", "log_time", "publish_time", "sequence", "data")

    channel: Channel
    log_time: int
    publish_time: int
    sequence: int
    data: bytes | memoryview

    def __init__(self, channel: Channel, log_time: int, publish_time: int, sequence: int, data: bytes | memoryview) -> None:
        self.channel = channel
        self.log_time = log_time
        self.publish_time = publish_time
        self.sequence = sequence
        self.data = data

    @property
    def topic(self) -> str:
        return self.channel.topic

    def codec(self) -> Codec:
        """The codec of this message's channel."""
        return _codec_for(self.channel)

    def decode(self) -> Any:
        """The message as an object with attribute access."""
        return _codec_for(self.channel).decode(self.data, topic=self.channel.topic)

    def to_dict(self) -> Any:
        """The message as plain nested dicts and lists."""
        return _codec_for(self.channel).to_dict(self.data, topic=self.channel.topic)

    def __repr__(self) -> str:
        return (
            f"Message(topic={self.channel.topic!r}, log_time={self.log_time}, "
            f"publish_time={self.publish_time}, sequence={self.sequence}, size={len(self.data)})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Message):
            return NotImplemented
        return (
            self.channel.topic == other.channel.topic
            and self.log_time == other.log_time
            and self.publish_time == other.publish_time
            and self.sequence == other.sequence
            and bytes(self.data) == bytes(other.data)
        )

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True, slots=True)
class Attachment:
    name: str
    media_type: str
    data: bytes
    log_time: int = 0
    create_time: int = 0


@dataclass(frozen=True, slots=True)
class Metadata:
    name: str
    metadata: Mapping[str, str]


@dataclass(slots=True)
class ChunkInfo:
    """Where a chunk lies and what it holds (MCAP chunk index, bag chunk info)."""

    offset: int
    length: int
    start_time: int
    end_time: int
    compression: str
    compressed_size: int
    uncompressed_size: int
    message_count: int = 0


@dataclass(slots=True)
class Summary:
    """What a file holds, cheaply: from its index or summary section when it has one.

    ``extras`` holds what only one format has (bag version, ULog info and params, MCAP
    profile details); ``indexed`` says whether the summary came from an index (True) or
    from a scan of the data (False).
    """

    format: str
    profile: str = ""
    library: str = ""
    version: str = ""
    schemas: dict[int, Schema] = field(default_factory=dict)
    channels: dict[int, Channel] = field(default_factory=dict)
    message_counts: dict[int, int] = field(default_factory=dict)
    start_time: int | None = None
    end_time: int | None = None
    chunks: list[ChunkInfo] = field(default_factory=list)
    attachment_count: int = 0
    metadata_count: int = 0
    file_size: int = 0
    indexed: bool = True
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def message_count(self) -> int:
        return sum(self.message_counts.values())

    @property
    def duration(self) -> int:
        if self.start_time is None or self.end_time is None:
            return 0
        return self.end_time - self.start_time

    @property
    def chunk_count(self) -> int:
        return len(self.chunks)

    def topics(self) -> dict[str, list[Channel]]:
        out: dict[str, list[Channel]] = {}
        for ch in self.channels.values():
            out.setdefault(ch.topic, []).append(ch)
        return out

    def topic_message_counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for cid, ch in self.channels.items():
            out[ch.topic] = out.get(ch.topic, 0) + self.message_counts.get(cid, 0)
        return out


class TopicPayloads(NamedTuple):
    """Every payload of one topic at once (``Reader.topic_payloads``), as numpy arrays in
    log-time order: ``blob`` a uint8 array holding the payloads, message ``i`` being
    ``blob[starts[i]:starts[i] + sizes[i]]``, logged at ``log_times[i]``."""

    log_times: np.ndarray
    blob: np.ndarray
    starts: np.ndarray
    sizes: np.ndarray


class RecoveryReport(TypedDict):
    """What a recovering read met (``Reader.recovery_report``, after the read)."""

    #: messages read
    messages: int
    #: bytes of damaged data skipped
    bytes_skipped: int
    #: one line per damaged place (file, offset, what was wrong)
    errors: list[str]
