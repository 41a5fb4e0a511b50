"""The reader interface every format implements, and what all readers share.

A format's reader subclasses :class:`Reader` and implements ``summary``, ``messages``,
``attachments`` and ``metadata``.  Decoding, columns and tables come from here, composed
from the codecs, so every format gets them the same way.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from polybag.codecs import codec_for
from polybag.errors import UsageError
from polybag.model import Attachment, Channel, Message, Metadata, Summary
from polybag.source import MappedSource, Source

if TYPE_CHECKING:
    import numpy as np


TopicSelector = str | Sequence[str] | None


class Reader(ABC):
    """Base of all format readers.  Use as a context manager."""

    format: str = ""

    def __init__(self, source: Source, path: str | None = None) -> None:
        self.source = source
        self.path = path if path is not None else source.path

    # --- what each format provides -------------------------------------------------
    @property
    @abstractmethod
    def summary(self) -> Summary:
        """Channels, counts, times: from the index or summary section when there is one."""

    @abstractmethod
    def messages(
        self,
        topics: TopicSelector = None,
        start: int | None = None,
        end: int | None = None,
        reverse: bool = False,
        order: str = "log_time",
    ) -> Iterator[Message]:
        """Messages on ``topics`` with ``start <= log_time < end``.

        ``order="log_time"`` sorts by log time (ties in file order), ``order="file"`` keeps
        the order of the file; ``reverse`` reverses either.
        """

    def attachments(self) -> Iterator[Attachment]:
        return iter(())

    def metadata(self) -> Iterator[Metadata]:
        return iter(())

    def info_extras(self) -> dict[str, Any]:
        """Format-specific facts for ``polybag info`` (JSON-ready)."""
        return {}

    # --- index (for planners such as polybag.dask) ------------------------------------------
    @property
    def has_index(self) -> bool:
        """Whether the file's own index (summary section, bag index) gives ``summary`` and
        :meth:`chunk_message_counts` without reading the data.  ``False`` (the default) when
        the reader cannot promise that: reading ``summary`` may then scan the whole file."""
        return False

    def chunk_message_counts(self, channel_ids: set[int] | None = None) -> list[tuple[int, int, int]] | None:
        """``(start_time, end_time, message count of those channels)`` per chunk, from the
        file's own index, without reading message data; ``None`` when the file has no usable
        chunk index.  ``channel_ids=None`` counts every channel.

        Chunks known to hold none of the channels are left out; the times are the index's
        inclusive log-time bounds of the whole chunk.  A count may be an estimate when the
        index gives no exact per-channel count (it is then at least 1).  This base version
        uses ``summary.chunks`` of an indexed summary, each chunk's count shared out by the
        channels' share of all messages (``[]`` when the summary knows no count for them);
        formats with per-channel counts per chunk override it.
        """
        s = self.summary
        if not s.indexed or not s.chunks:
            return None
        total = s.message_count or 1
        wanted = (
            s.message_count if channel_ids is None else sum(s.message_counts.get(c, 0) for c in channel_ids)
        )
        return [
            (c.start_time, c.end_time, max(1, c.message_count * wanted // total))
            for c in s.chunks
            if wanted and c.message_count
        ]

    # --- shared -------------------------------------------------------------------------
    @property
    def seekable(self) -> bool:
        return isinstance(self.source, MappedSource)

    def channels(self) -> dict[int, Channel]:
        return self.summary.channels

    def decoded_messages(
        self,
        topics: TopicSelector = None,
        start: int | None = None,
        end: int | None = None,
        reverse: bool = False,
        order: str = "log_time",
    ) -> Iterator[tuple[Message, Any]]:
        """``(message, decoded object)`` pairs, the codec chosen per channel."""
        for m in self.messages(topics=topics, start=start, end=end, reverse=reverse, order=order):
            yield m, codec_for(m.channel).decode(m.data, topic=m.channel.topic)

    def topic_columns(self, topic: str, fields: Sequence[str] | None = None) -> dict[str, np.ndarray]:
        """One numpy array per leaf field of ``topic``, plus ``log_time``."""
        from polybag.codecs.columns import topic_columns  # imported when used: it loads numpy

        return topic_columns(self, topic, fields)

    def to_arrow(self, topic: str, fields: Sequence[str] | None = None) -> Any:
        """The columns of ``topic`` as a ``pyarrow.Table``."""
        from polybag.codecs.columns import columns_to_arrow

        return columns_to_arrow(self.topic_columns(topic, fields))

    def to_pandas(self, topic: str, fields: Sequence[str] | None = None) -> Any:
        """The columns of ``topic`` as a ``pandas.DataFrame``."""
        from polybag.codecs.columns import columns_to_pandas

        return columns_to_pandas(self.topic_columns(topic, fields))

    def close(self) -> None:
        self.source.close()

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.path!r}>"


ORDERS = ("log_time", "file")


def check_order(order: str) -> None:
    """Reject an ``order=`` that no reader knows (a :class:`UsageError`)."""
    if order not in ORDERS:
        raise UsageError(f"order must be 'log_time' or 'file', not {order!r}")


def topic_filter(topics: TopicSelector, channels: Iterable[Channel]) -> set[int] | None:
    """Channel ids selected by ``topics`` (``None``: all).

    A string is a regular expression matched against the whole topic; a sequence is a set
    of exact topic names.
    """
    if topics is None:
        return None
    if isinstance(topics, str):
        try:
            rx = re.compile(topics)
        except re.error as e:
            raise UsageError(f"not a valid topic regular expression {topics!r}: {e}") from None
        return {c.id for c in channels if rx.fullmatch(c.topic)}
    wanted = set(topics)
    return {c.id for c in channels if c.topic in wanted}
