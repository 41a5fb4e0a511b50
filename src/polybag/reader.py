"""The reader interface every format implements, and what all readers share.

A format's reader subclasses :class:`Reader` and implements ``summary``, ``_messages`` (the
part of :meth:`Reader.messages` that is its own), ``attachments`` and ``metadata``.
Decoding, columns and tables come from here, composed from the codecs, so every format
gets them the same way.

:class:`ReaderProtocol` names every member the operations, the command line, ``polybag.dask``
and the columns use.  A capability only some formats have is a member every reader has,
with a defined "not here" answer in :class:`Reader`:

=========================  ====================================================  ===========
member                     what it is                                            not here
=========================  ====================================================  ===========
``recovery_report``        damage met by a recovering read (after it)            ``None``
``definition_problems``    definitions given twice with different content        ``()``
``record_problems()``      spec violations a lenient read accepts (for check)    ``[]``
``ulog``                   a ULog's info, parameters, logged strings, damage     ``None``
``ulogs``                  the same as zero or one item, to iterate              ``()``
``topic_payloads(topic)``  a topic's payloads in bulk, for columns               ``None``
``native_profile``         the MCAP profile every channel of the file has        ``None``
``info_style``             the layout ``polybag info`` gives the format          ``None``
``source_size``            bytes of the file behind the reader                   ``0``
``release_pages()``        drop the mapped file's pages from memory              no-op
=========================  ====================================================  ===========

So callers ask the member, never ``getattr`` or ``reader.format == ...``; code that carries
a ULog's data through (an operation, the command line) iterates ``reader.ulogs`` rather than
testing ``reader.ulog is None``, a test for the format by another name.
A reader gives data only: ``info_style`` names a layout people know the format by
(``rosbag``, ``ulog``) and :mod:`polybag.cli.render` draws it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from polybag.codecs import codec_for
from polybag.io.source import MappedSource, Source
from polybag.model import (
    Attachment,
    Channel,
    Message,
    Metadata,
    RecoveryReport,
    Summary,
    TopicPayloads,
)
from polybag.selection import ORDERS, MessageOrder, TimeWindow, TopicSelector, check_order, topic_filter
from polybag.util.closing import Closing

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd  # type: ignore[import-untyped]  # no stubs installed (pandas-stubs is not a dependency)
    import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information

__all__ = [
    "ORDERS",
    "RAW_FIELDS",
    "InfoStyle",
    "MessageOrder",
    "Reader",
    "ReaderProtocol",
    "RecoveryReport",
    "TopicPayloads",
    "TopicSelector",
    "UlogExtras",
    "check_order",
    "time_bounds",
    "topic_filter",
]
#: the layouts ``polybag info`` draws besides its generic one (:attr:`Reader.info_style`)
InfoStyle = Literal["rosbag", "rosbag2", "ulog"]
#: a Message as a ``(channel, log_time, data)`` tuple (:meth:`Reader.raw_messages`)
RAW_FIELDS = attrgetter("channel", "log_time", "data")


class UlogExtras(Protocol):
    """What a PX4 ULog reader's ``ulog`` gives besides its messages (pyulog's ``ULog``
    attributes): the header, info and parameters, logged strings, subscriptions, and the
    damage met (:class:`polybag.formats.ulog.facts.UlogData` is the one implementation)."""

    @property
    def version(self) -> int: ...
    @property
    def start_timestamp(self) -> int: ...
    @property
    def compat_flags(self) -> list[int]: ...
    @property
    def incompat_flags(self) -> list[int]: ...
    @property
    def appended_offsets(self) -> list[int]: ...
    @property
    def formats(self) -> dict[str, Any]: ...
    @property
    def info(self) -> dict[str, Any]: ...
    @property
    def info_types(self) -> dict[str, str]: ...
    @property
    def info_multiple(self) -> dict[str, list[list[Any]]]: ...
    @property
    def info_multiple_types(self) -> dict[str, str]: ...
    @property
    def params(self) -> dict[str, int | float]: ...
    @property
    def default_params(self) -> dict[int, dict[str, int | float]]: ...
    @property
    def logged_messages(self) -> list[Any]: ...
    @property
    def subscriptions(self) -> list[Any]: ...
    @property
    def unsubscriptions(self) -> list[tuple[int, int]]: ...
    @property
    def sync_count(self) -> int: ...
    @property
    def sync_offsets(self) -> list[int]: ...
    @property
    def corruptions(self) -> list[dict[str, Any]]: ...
    @property
    def warnings(self) -> list[str]: ...
    @property
    def unreported_damage(self) -> int: ...
    @property
    def unknown_types(self) -> dict[str, int]: ...
    @property
    def last_timestamp(self) -> int: ...
    @property
    def changed_params(self) -> list[tuple[int, str, int | float]]: ...
    @property
    def dropouts(self) -> list[Any]: ...
    @property
    def syncs(self) -> list[int]: ...
    @property
    def has_default_parameters(self) -> bool: ...
    @property
    def has_data_appended(self) -> bool: ...
    @property
    def file_corruption(self) -> bool: ...
    @property
    def initial_parameters(self) -> dict[str, int | float]: ...
    @property
    def logged_messages_untagged(self) -> list[Any]: ...
    @property
    def logged_messages_tagged(self) -> dict[int, list[Any]]: ...
    def get_default_parameters(self, default_type: int) -> dict[str, int | float]: ...
    def version_info_str(self, key: str = "ver_sw_release") -> str | None: ...


class Reader(Closing, ABC):
    """Base of all format readers.  Use as a context manager.

    Implements :class:`ReaderProtocol`: the optional capabilities have their "not here"
    answer here, and a format that has one overrides (or assigns) the member.
    """

    #: the format's registry name (``mcap``, ``bag``, ``ulog``)
    format: str = ""
    #: the MCAP profile every channel of this format has (``ros1`` for bags and ULogs, whose
    #: channels are, or become, ROS 1); None when it depends on the file
    native_profile: str | None = None
    #: what a recovering read met (``{"messages", "bytes_skipped", "errors"}``), set by the
    #: formats that recover; None: no report (not recovering, or nothing to report yet)
    recovery_report: RecoveryReport | None = None
    #: definitions (schemas, channels) given twice with different content (MCAP); read as
    #: written, but worth a ``check`` problem each
    definition_problems: Sequence[str] = ()
    #: a PX4 ULog's own data (info, parameters, logged strings, dropouts, corruptions: a
    #: :class:`UlogExtras`); None for every other format
    ulog: UlogExtras | None = None
    #: the layout ``polybag info`` gives this format instead of its generic one (``rosbag``:
    #: ``rosbag info`` and ``rosbag info --yaml``; ``ulog``: pyulog's ``ulog_info``), drawn
    #: by :mod:`polybag.cli.render` from ``info_extras()`` (and ``ulog``); None: generic
    info_style: InfoStyle | None = None

    def __init__(self, source: Source, path: str | None = None) -> None:
        self.source = source
        self.path = path if path is not None else source.path

    # --- what each format provides -------------------------------------------------
    @property
    @abstractmethod
    def summary(self) -> Summary:
        """Channels, counts, times: from the index or summary section when there is one."""

    def messages(self, topics: TopicSelector = None, start: int | str | None = None, end: int | str | None = None, reverse: bool = False, order: MessageOrder = "log_time") -> Iterator[Message]:
        """Messages on ``topics`` with ``start <= log_time < end``.

        ``order="log_time"`` sorts by log time (ties in file order), ``order="file"`` keeps
        the order of the file; ``reverse`` reverses either.  ``topics``: a regular
        expression matched against the whole topic, or a sequence of exact topic names.

        ``start``/``end`` are integer ns, or texts as the CLI reads times (``"+5"`` 5 s
        after this log's start, ``"1700000000.5"`` epoch seconds, ``"2026-11-28T10:00:00Z"``;
        :mod:`polybag.selection`).

        The part every format shares is done here, once: ``order`` is checked and the
        window normalised (:func:`time_bounds`); the format's :meth:`_messages` does the rest.
        """
        check_order(order)
        start, end = self._window(start, end)
        return self._messages(topics, start, end, reverse, order)

    def _window(self, start: int | str | None, end: int | str | None) -> tuple[int | None, int | None]:
        """:func:`time_bounds` of a window given in ns or as time texts (``+T`` from this
        log's start)."""
        if not isinstance(start, str) and not isinstance(end, str):
            return time_bounds(start, end)
        w = TimeWindow.parse(start, end, lambda: self.summary.start_time)
        return time_bounds(w.start, w.end)

    def _messages(self, topics: TopicSelector, start: int | None, end: int | None, reverse: bool, order: MessageOrder) -> Iterator[Message]:
        """The format's part of :meth:`messages` (a reader implements this one, or overrides
        :meth:`messages` whole): ``order`` is ``"log_time"`` or ``"file"``; ``start`` and
        ``end`` are ``None`` or bounds that exclude something (an empty window is ``1, 1``).
        ``topics`` comes as given: the format selects its channels with :func:`topic_filter`
        when it knows them (a stream learns them as it reads)."""
        raise NotImplementedError(f"{type(self).__name__} implements neither messages() nor _messages()")

    def raw_messages(
        self, topics: TopicSelector = None, start: int | str | None = None, end: int | str | None = None, reverse: bool = False, order: MessageOrder = "log_time"
    ) -> Iterator[tuple[Channel, int, bytes | memoryview]]:
        """:meth:`messages` as plain ``(channel, log_time, data)`` tuples (the shape of
        rosbags' ``Reader.messages()``), same selection, order and errors.  For a loop that
        wants the bytes and times only: a format that can skip building a
        :class:`~polybag.model.Message` per message does (:meth:`_raw_messages`)."""
        check_order(order)
        start, end = self._window(start, end)
        return self._raw_messages(topics, start, end, reverse, order)

    def _raw_messages(
        self, topics: TopicSelector, start: int | None, end: int | None, reverse: bool, order: MessageOrder
    ) -> Iterator[tuple[Channel, int, bytes | memoryview]]:
        """The format's part of :meth:`raw_messages`; here, each message's fields taken in C
        (a reader that overrides :meth:`messages` whole is served too)."""
        return map(RAW_FIELDS, self.messages(topics, start, end, reverse, order))

    def attachments(self) -> Iterator[Attachment]:
        """The files stored in the log (MCAP attachments, also in rosbag2's MCAP storage);
        none for formats without them."""
        return iter(())

    def metadata(self) -> Iterator[Metadata]:
        """The named metadata records of the log (MCAP, also in rosbag2's MCAP storage);
        none for formats without them."""
        return iter(())

    def info_extras(self) -> dict[str, Any]:
        """Format-specific facts for ``polybag info`` (JSON-ready)."""
        return {}

    # --- optional capabilities ("not here" answers) -------------------------------------
    @property
    def ulogs(self) -> tuple[UlogExtras, ...]:
        """The reader's PX4 ULog data as zero or one item: ``(reader.ulog,)`` for a ULog
        (whose reader answers this), ``()`` for every other format.  What an operation
        iterates to carry a ULog's info, parameters, timed records and damage through
        without asking which format it reads."""
        return ()

    def topic_payloads(self, topic: str) -> TopicPayloads | None:
        """``(log_times, blob, starts, sizes)`` (a :class:`~polybag.model.TopicPayloads`) of every message on ``topic`` at once (numpy
        arrays, log-time order; ``blob`` a uint8 array, ``starts``/``sizes`` the payloads in
        it), for columns without iterating messages.  None: not offered by this format
        (:func:`polybag.codecs.columns.topic_columns` then iterates ``messages``)."""
        return None

    def record_problems(self) -> list[str]:
        """What the format's specification forbids but a lenient read accepts (MCAP: records
        shorter than their spec table, no Data End record), each naming the file and offset;
        one pass over the whole file, for ``check``.  ``[]``: nothing to add to the read."""
        return []

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

    @property
    def source_size(self) -> int:
        """Bytes of the file behind the reader when known (a mapped file); 0 for a pipe."""
        return self.source.size if isinstance(self.source, MappedSource) else 0

    @property
    def fetch_stats(self) -> dict[str, Any] | None:
        """What reading a remote log has cost so far (requests, bytes fetched, size, URL; see
        :class:`polybag.io.remote_source.RemoteSource`); None for a local file or a stream."""
        source = getattr(self, "source", None)  # (a reader made without Reader.__init__ has none)
        return None if source is None else source.stats

    def release_pages(self) -> None:
        """Drop the mapped file's pages from this process's resident set (see
        :meth:`polybag.io.source.MappedSource.release_pages`); nothing for a stream.  Long
        passes call it now and then so that their memory stays bounded."""
        if isinstance(self.source, MappedSource):
            self.source.release_pages()

    def channels(self) -> dict[int, Channel]:
        """The log's channels (topics) by id, from :attr:`summary`."""
        return self.summary.channels

    def decoded_messages(self, topics: TopicSelector = None, start: int | None = None, end: int | None = None, reverse: bool = False, order: MessageOrder = "log_time") -> Iterator[tuple[Message, Any]]:
        """``(message, decoded object)`` pairs, the codec chosen per channel (plain tuples: a
        named tuple costs a second allocation per message, about 7% of the loop)."""
        lookup = codec_for
        for m in self.messages(topics=topics, start=start, end=end, reverse=reverse, order=order):
            ch = m.channel
            yield m, lookup(ch).decode(m.data, topic=ch.topic)

    def topic_columns(
        self, topic: str, fields: Sequence[str] | None = None, *, time: str = "log_time", keep_times: bool = False, arrays: str = "columns"
    ) -> dict[str, np.ndarray]:
        """One numpy array per leaf field of ``topic``, the chosen time first: ``time`` is
        ``"log_time"`` (default), ``"publish_time"``, ``"header.stamp"`` or ``"timestamp"``
        (int64 ns; rows stay in log-time order, so another time may go backwards);
        ``keep_times=True`` keeps the other times as columns after it (else with
        ``header.stamp`` there is no ``log_time``); ``arrays="lists"`` gives fixed arrays as
        one 2-D column each (see :func:`polybag.codecs.columns.topic_columns`)."""
        from polybag.codecs.columns import topic_columns  # imported when used: it loads numpy

        return topic_columns(self, topic, fields, time=time, keep_times=keep_times, arrays=arrays)

    def to_arrow(
        self,
        topic: str | Sequence[str | tuple[str, int | str]],
        fields: Sequence[str] | None = None,
        *,
        time: str = "log_time",
        keep_times: bool = False,
        datetimes: bool = False,
        arrays: str = "columns",
        **align: Any,
    ) -> pa.Table:
        """The columns of ``topic`` (:meth:`topic_columns`) as a ``pyarrow.Table``: sequences
        as typed ``list`` columns (of ``struct`` for messages), ``uint8[]`` as ``binary``;
        ``datetimes=True`` adds ``<time>_utc`` (``timestamp[ns, UTC]``) after the time.

        Several topics (a list) are one table on one time axis: the first topic's rows, the
        others joined on as ``pandas.merge_asof`` does, columns ``<topic>.<field>``
        (``align="asof"`` (default), ``"nearest"`` or ``"resample:10ms"``, with ``direction``,
        ``tolerance``, ``allow_exact_matches``, ``interpolate``: see
        :func:`polybag.codecs.aligned.aligned_columns`)."""
        from polybag.codecs.aligned import aligned_arrow

        topics = _aligned_topics(topic, align, keep_times, arrays)
        if topics is not None:
            return aligned_arrow(self, topics, fields, time=time, datetimes=datetimes, **align)
        from polybag.codecs.columns import topic_arrow

        assert isinstance(topic, str)
        return topic_arrow(self, topic, fields, time=time, keep_times=keep_times, datetimes=datetimes, arrays=arrays)

    def to_pandas(
        self,
        topic: str | Sequence[str | tuple[str, int | str]],
        fields: Sequence[str] | None = None,
        *,
        time: str = "log_time",
        keep_times: bool = False,
        datetimes: bool = False,
        arrays: str = "columns",
        **align: Any,
    ) -> pd.DataFrame:
        """The columns of ``topic`` (:meth:`topic_columns`) as a ``pandas.DataFrame`` indexed by
        the chosen time (int64 ns; ``datetimes=True``: ``datetime64[ns, UTC]``, the integers
        kept as the column ``<time>_ns``).

        Several topics (a list: ``r.to_pandas(["/imu", "/gps"], align="asof",
        tolerance="20ms")``) are one frame on one time axis, as :meth:`to_arrow` says."""
        from polybag.codecs.aligned import aligned_pandas

        topics = _aligned_topics(topic, align, keep_times, arrays)
        if topics is not None:
            return aligned_pandas(self, topics, fields, time=time, datetimes=datetimes, **align)
        from polybag.codecs.columns import topic_pandas

        assert isinstance(topic, str)
        return topic_pandas(self, topic, fields, time=time, keep_times=keep_times, datetimes=datetimes, arrays=arrays)

    def images(self, topic: TopicSelector, start: int | None = None, end: int | None = None, copy: bool = False) -> Iterator[tuple[int, np.ndarray]]:
        """``(log_time, pixels)`` of every ``sensor_msgs/Image`` or ``CompressedImage`` on
        ``topic``, in log-time order (see :func:`polybag.sensors.images`)."""
        from polybag.sensors.read import images  # imported when used: it loads numpy

        return images(self, topic, start, end, copy)

    def pointclouds(self, topic: TopicSelector, start: int | None = None, end: int | None = None, skip_nans: bool = False) -> Iterator[tuple[int, np.ndarray]]:
        """``(log_time, points)`` of every ``sensor_msgs/PointCloud2`` on ``topic`` as
        structured arrays, in log-time order (see :func:`polybag.sensors.pointclouds`)."""
        from polybag.sensors.read import pointclouds

        return pointclouds(self, topic, start, end, skip_nans=skip_nans)

    def close(self) -> None:
        self.source.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.path!r}>"


#: the options of an aligned table (:func:`polybag.codecs.aligned.aligned_columns`)
ALIGN_OPTIONS = frozenset({"align", "direction", "tolerance", "allow_exact_matches", "interpolate"})


def _aligned_topics(topic: Any, align: dict[str, Any], keep_times: bool, arrays: str) -> list[Any] | None:
    """The topics of an aligned table (``to_pandas``/``to_arrow`` given a list), or None for
    one topic; an option that does not go with the call is a :class:`UsageError`."""
    from polybag.codecs.aligned import is_topic_list
    from polybag.errors import UsageError

    unknown = set(align) - ALIGN_OPTIONS
    if unknown:
        raise TypeError(f"unknown options: {', '.join(sorted(unknown))}")
    if not is_topic_list(topic):
        if align:
            raise UsageError(f"{', '.join(sorted(align))}: for several topics (a list), not one topic {topic!r}")
        return None
    if keep_times or arrays != "columns":
        raise UsageError("keep_times and arrays are for one topic's table, not an aligned one")
    return list(topic)


@runtime_checkable
class ReaderProtocol(Protocol):
    """Every member the operations, the command line, ``polybag.dask`` and the columns use
    from a reader.  :class:`Reader` implements it; the optional capabilities answer "not
    here" (``None``, empty, ``0``) as :class:`Reader` documents.

    ``isinstance(r, ReaderProtocol)`` checks that each member exists (on Python before
    3.12 that reads the properties, ``summary`` included).
    """

    format: str
    path: str | None
    source: Source
    native_profile: str | None
    recovery_report: RecoveryReport | None
    definition_problems: Sequence[str]
    ulog: UlogExtras | None
    info_style: InfoStyle | None

    @property
    def summary(self) -> Summary: ...

    @property
    def ulogs(self) -> tuple[UlogExtras, ...]: ...

    def messages(self, topics: TopicSelector = None, start: int | str | None = None, end: int | str | None = None, reverse: bool = False, order: MessageOrder = "log_time") -> Iterator[Message]: ...

    def raw_messages(
        self, topics: TopicSelector = None, start: int | str | None = None, end: int | str | None = None, reverse: bool = False, order: MessageOrder = "log_time"
    ) -> Iterator[tuple[Channel, int, bytes | memoryview]]: ...

    def attachments(self) -> Iterator[Attachment]: ...

    def metadata(self) -> Iterator[Metadata]: ...

    def info_extras(self) -> dict[str, Any]: ...

    def topic_payloads(self, topic: str) -> TopicPayloads | None: ...

    def record_problems(self) -> list[str]: ...

    @property
    def has_index(self) -> bool: ...

    def chunk_message_counts(self, channel_ids: set[int] | None = None) -> list[tuple[int, int, int]] | None: ...

    @property
    def seekable(self) -> bool: ...

    @property
    def source_size(self) -> int: ...

    @property
    def fetch_stats(self) -> dict[str, Any] | None: ...

    def release_pages(self) -> None: ...

    def channels(self) -> dict[int, Channel]: ...

    def decoded_messages(self, topics: TopicSelector = None, start: int | None = None, end: int | None = None, reverse: bool = False, order: MessageOrder = "log_time") -> Iterator[tuple[Message, Any]]: ...

    def topic_columns(
        self, topic: str, fields: Sequence[str] | None = None, *, time: str = "log_time", keep_times: bool = False, arrays: str = "columns"
    ) -> dict[str, np.ndarray]: ...

    def to_arrow(
        self,
        topic: str | Sequence[str | tuple[str, int | str]],
        fields: Sequence[str] | None = None,
        *,
        time: str = "log_time",
        keep_times: bool = False,
        datetimes: bool = False,
        arrays: str = "columns",
        **align: Any,
    ) -> pa.Table: ...

    def to_pandas(
        self,
        topic: str | Sequence[str | tuple[str, int | str]],
        fields: Sequence[str] | None = None,
        *,
        time: str = "log_time",
        keep_times: bool = False,
        datetimes: bool = False,
        arrays: str = "columns",
        **align: Any,
    ) -> pd.DataFrame: ...

    def images(
        self, topic: TopicSelector, start: int | None = None, end: int | None = None, copy: bool = False
    ) -> Iterator[tuple[int, np.ndarray]]: ...

    def pointclouds(
        self, topic: TopicSelector, start: int | None = None, end: int | None = None, skip_nans: bool = False
    ) -> Iterator[tuple[int, np.ndarray]]: ...

    def close(self) -> None: ...

    def __enter__(self) -> Any: ...

    def __exit__(self, *exc: object) -> None: ...


def time_bounds(start: int | None, end: int | None) -> tuple[int | None, int | None]:
    """``start``/``end`` of a read with the bounds that exclude nothing (times are u64) made
    ``None``, and a window that holds nothing made ``1, 1``."""
    if start is not None and start <= 0:
        start = None
    if end is not None and end >= 1 << 64:
        end = None
    if end is not None and end <= 0:
        start, end = 1, 1  # an empty window
    return start, end
