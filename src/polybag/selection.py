"""What a read selects: topics, the order of messages, and times as people write and read
them (time arguments and windows, nanoseconds printed).

The bottom layer for the readers, the sensors, the CLI and the ops alike (it imports nothing
of polybag above :mod:`polybag.errors`).  Times are integer nanoseconds.

A read's topics are a :data:`TopicSelector`: a regular expression matched against the whole
topic, a sequence of exact topic names, or None for every topic (:func:`topic_filter`,
:func:`selected_channels`).  Its order is a :data:`MessageOrder` (:func:`check_order`).

The one grammar of a time argument (every time option of the CLI, and every text the
library takes for a time):

* a number is **seconds**: ``5``, ``1.5``, ``.25``, ``1e3``; decimals are read exactly
  (``1700000000.123456789`` is 1700000000123456789 ns), beyond the ninth decimal rounded
  to the nanosecond;
* a unit after the number: ``ns``, ``us`` (``µs``), ``ms``, ``s`` (``sec``), ``m``
  (``min``), ``h``, ``d``: ``500ms``, ``2m``, ``1.5h``; nanoseconds only with ``ns``;
* a point in time is epoch seconds (``1764324000.5``) or ISO 8601 (``2026-11-28T10:00:00Z``,
  ``2026-11-28 10:00:00.123456789+02:00``, ``2026-11-28``): UTC unless it has an offset,
  as polybag prints times in UTC; fractions of a second to the nanosecond;
* ``+T`` is ``T`` after the log's start (``+5``, ``+500ms``, ``+2m``).

Negative times, and times beyond the int64 nanoseconds (year 2262), are refused with a
:class:`~polybag.errors.UsageError` that lists the forms.  A length of time (``split
--duration``, ``play -u``) takes the same numbers and units (a ``+`` is allowed and
ignored), not a point in time.  In the library an ``int`` is nanoseconds as it is.
"""

from __future__ import annotations

import datetime as _dt
import numbers
import re
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from typing import Any, Literal, Protocol, TypeVar

from polybag.errors import PolybagWarning, UsageError

__all__ = [
    "DURATION_FORMS",
    "DURATION_HELP",
    "MAX_NS",
    "ORDERS",
    "TIME_FORMS",
    "TIME_HELP",
    "MessageOrder",
    "TimeWindow",
    "TopicChannel",
    "TopicSelector",
    "check_order",
    "duration_ns",
    "duration_seconds",
    "format_duration",
    "format_iso",
    "format_ns",
    "parse_duration",
    "parse_time",
    "selected_channels",
    "time_ns",
    "topic_filter",
    "warn_if_meant_relative",
]

#: the topics a read selects: a regular expression matched against the whole topic, a
#: sequence of exact topic names, or None (every topic)
TopicSelector = str | Sequence[str] | None

#: the order of a read's messages: by log time (ties in file order), or as in the file
MessageOrder = Literal["log_time", "file"]
ORDERS: tuple[MessageOrder, ...] = ("log_time", "file")


class TopicChannel(Protocol):
    """A channel as topic selection sees it (:class:`polybag.model.Channel` is one)."""

    @property
    def id(self) -> int: ...

    @property
    def topic(self) -> str: ...


ChannelT = TypeVar("ChannelT", bound=TopicChannel)


def check_order(order: str) -> None:
    """Reject an ``order=`` that no reader knows (a :class:`UsageError`)."""
    if order not in ORDERS:
        raise UsageError(f"order must be 'log_time' or 'file', not {order!r}")


def _topic_matcher(topics: str | Sequence[str]) -> Callable[[str], object]:
    """Whether a topic is selected: a regular expression matched against the whole topic (a
    :class:`UsageError` when it is none), or membership in a set of exact names."""
    if isinstance(topics, str):
        try:
            return re.compile(topics).fullmatch
        except re.error as e:
            raise UsageError(f"not a valid topic regular expression {topics!r}: {e}") from None
    return set(topics).__contains__


def topic_filter(topics: TopicSelector, channels: Iterable[TopicChannel]) -> set[int] | None:
    """Channel ids selected by ``topics`` (``None``: all).

    A string is a regular expression matched against the whole topic; a sequence is a set
    of exact topic names.
    """
    if topics is None:
        return None
    selected = _topic_matcher(topics)
    return {c.id for c in channels if selected(c.topic)}


def selected_channels(topics: TopicSelector, channels: Iterable[ChannelT]) -> list[ChannelT]:
    """The ``channels`` that ``topics`` selects, in their order (all when ``topics`` is None;
    the same selection as :func:`topic_filter`)."""
    if topics is None:
        return list(channels)
    selected = _topic_matcher(topics)
    return [c for c in channels if selected(c.topic)]

#: the log's start time for relative (``+``) times: the time, or a call that gives it
#: (called only when a relative time needs it, so a stream is not read for nothing)
Base = int | None | Callable[[], int | None]

#: the largest time or length in ns (int64: 2262-04-11T23:47:16.854775807Z)
MAX_NS = (1 << 63) - 1

#: the help text of every option that takes a point in time (one wording everywhere)
TIME_HELP = (
    "seconds (or 500ms, 2m, ...; +T from the log start; epoch or ISO 8601, UTC unless an offset is given)"
)
#: the help text of every option that takes a length of time
DURATION_HELP = "seconds (or 500ms, 2m, 1h, ...; nanoseconds only with ns)"
#: the forms an error about a bad time lists
TIME_FORMS = (
    "seconds (5, 1.5), a number with a unit (500ms, 2m, 1h; ns, us, ms, s, m, h, d), "
    "+T from the log start (+5, +500ms), epoch seconds or ISO 8601 (2026-11-28T10:00:00Z)"
)
DURATION_FORMS = "seconds (5, 1.5) or a number with a unit (500ms, 2m, 1h; ns, us, ms, s, m, h, d)"

_UNITS: dict[str, int] = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,  # micro sign
    "\u03bcs": 1_000,  # Greek mu
    "ms": 1_000_000,
    "": 1_000_000_000,
    "s": 1_000_000_000,
    "sec": 1_000_000_000,
    "m": 60_000_000_000,
    "min": 60_000_000_000,
    "h": 3_600_000_000_000,
    "d": 86_400_000_000_000,
}
_AMOUNT = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(?:[eE]([+-]?\d{1,4}))?[ \t]*([a-z\u00b5\u03bc]*)", re.ASCII)
_ISO = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})"
    r"(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?)?"
    r"[ \t]*(?:([Zz])|([+-])(\d{2}):?(\d{2})?)?",
    re.ASCII,
)
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


def _amount_ns(text: str) -> int | None:
    """A number with an optional unit in ns (exact, rounded to the ns); ``None`` if ``text``
    is not one.  Values beyond :data:`MAX_NS` come back as ``MAX_NS + 1``."""
    m = _AMOUNT.fullmatch(text)
    if m is None or m.group(3) not in _UNITS:
        return None
    try:
        value = Decimal(m.group(1)).scaleb(int(m.group(2) or 0)) * _UNITS[m.group(3)]
    except InvalidOperation:  # pragma: no cover - the pattern admits only numbers
        return None
    if value > MAX_NS:  # compared before making an int: 1e9999 costs nothing
        return MAX_NS + 1
    return int(value.quantize(Decimal(1), rounding=ROUND_HALF_EVEN))


def _iso_ns(text: str) -> int | None:
    """An ISO 8601 date/time in ns since the epoch (UTC unless an offset is given); ``None``
    if ``text`` does not look like one.  A date that does not exist is a UsageError."""
    m = _ISO.fullmatch(text)
    if m is None:
        return None
    year, month, day, hour, minute, second, frac, zulu, sign, oh, om = m.groups()
    try:
        d = _dt.datetime(
            int(year), int(month), int(day), int(hour or 0), int(minute or 0), int(second or 0),
            tzinfo=_dt.timezone.utc,
        )  # fmt: skip
    except ValueError as e:
        raise UsageError(f"not a time: {text!r} ({e})") from None
    seconds = (d - _EPOCH) // _dt.timedelta(seconds=1)
    ns = seconds * 1_000_000_000
    if frac:
        ns += int(Decimal("0." + frac).scaleb(9).quantize(Decimal(1), rounding=ROUND_HALF_EVEN))
    if sign:
        if int(oh) > 23 or int(om or 0) > 59:
            raise UsageError(f"not a time: {text!r} (UTC offset out of range)")
        offset = (int(oh) * 3600 + int(om or 0) * 60) * 1_000_000_000
        ns -= offset if sign == "+" else -offset
    del zulu  # Z and no offset both mean UTC
    return ns


def _bad(text: str, forms: str = TIME_FORMS) -> UsageError:
    return UsageError(f"not a time: {text!r}; use {forms}")


def _checked(ns: int, text: str) -> int:
    if ns < 0:
        raise UsageError(f"time {text!r} is before 1970 (times are not negative)")
    if ns > MAX_NS:
        raise UsageError(f"time {text!r} is too large (at most {format_ns(MAX_NS)} s, in the year 2262)")
    return ns


def parse_time(text: str, base: int | None = None) -> int:
    """A time argument in ns (see the module docstring): ``"5"`` and ``"5s"`` are 5 s,
    ``"1500ms"`` 1.5 s, ``"1700000000123456789ns"`` that many ns, ``"2026-11-28T10:00:00Z"``
    that instant.  A leading ``+`` makes it relative to ``base`` (the log's start)."""
    t = str(text).strip()
    if len(t) > 100:
        raise _bad(t[:100] + "...")
    rel = t.startswith("+")
    if rel:
        ns = _amount_ns(t[1:].lstrip())
        if ns is None:
            raise _bad(str(text))
        if base is None:
            raise UsageError(f"relative time {text!r} needs a log start time")
        return _checked(base + ns, str(text))
    ns = _amount_ns(t)
    if ns is None:
        ns = _iso_ns(t)
    if ns is None:
        if t.startswith("-"):
            raise UsageError(f"time {text!r} is negative; use {TIME_FORMS}")
        raise _bad(str(text))
    return _checked(ns, str(text))


def parse_duration(text: str) -> int:
    """A length of time in ns: a number of seconds or a number with a unit (``"5"``,
    ``"1.5"``, ``"500ms"``, ``"2m"``); a leading ``+`` is allowed and ignored."""
    t = str(text).strip()
    if len(t) > 100:
        raise _bad(t[:100] + "...", DURATION_FORMS)
    ns = _amount_ns(t[1:].lstrip() if t.startswith("+") else t)
    if ns is None:
        if t.startswith("-"):
            raise UsageError(f"length of time {text!r} is negative; use {DURATION_FORMS}")
        if _ISO.fullmatch(t):
            raise UsageError(f"{text!r} is a point in time, not a length of time; use {DURATION_FORMS}")
        raise UsageError(f"not a length of time: {text!r}; use {DURATION_FORMS}")
    if ns > MAX_NS:
        raise UsageError(
            f"length of time {text!r} is too large (at most {format_ns(MAX_NS)} s, about 292 years)"
        )
    return ns


def _integral(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _not_a_time(value: Any) -> UsageError:
    return UsageError(
        f"a time is integer nanoseconds or a text such as '1.5' or '+2s', not {type(value).__name__} {value!r}"
    )


def time_ns(value: int | str, base: Base = None) -> int:
    """A time argument in ns: an ``int`` is nanoseconds as it is; a text (``"+2.5"``,
    ``"12"``, ``"500ms"``, ``"2026-11-28T10:00:00Z"``) as :func:`parse_time` reads it,
    relative to ``base``.  Anything else (a float, a bool) is a UsageError."""
    if _integral(value):
        return int(value)
    if not isinstance(value, str):
        raise _not_a_time(value)
    if callable(base):
        base = base() if value.strip().startswith("+") else None
    return parse_time(value, base)


def duration_ns(value: int | str) -> int:
    """A length of time in ns: an ``int`` is nanoseconds as it is, a text as
    :func:`parse_duration` reads it (``"5"`` is 5 s)."""
    if _integral(value):
        return int(value)
    if not isinstance(value, str):
        raise _not_a_time(value)
    return parse_duration(value)


def duration_seconds(value: str | float | int) -> float:
    """A length of time in seconds (for options that hold seconds, as rosbag's ``play -s``):
    a number is seconds as it is, a text as :func:`parse_duration` reads it (``"500ms"`` is
    0.5).  For argparse's ``type=``."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return parse_duration(str(value)) / 1e9


@dataclass(frozen=True)
class TimeWindow:
    """A log-time window ``start <= t < end`` in ns; ``None`` leaves that side open."""

    start: int | None = None
    end: int | None = None

    @classmethod
    def parse(cls, start: int | str | None, end: int | str | None, base: Base = None) -> TimeWindow:
        """The window of two time arguments (see :func:`time_ns`; ``None`` stays open).  An
        end before the start is a UsageError."""
        if callable(base):
            get = base
            cache: list[int | None] = []

            def once() -> int | None:  # the start is asked for once, whichever side needs it
                if not cache:
                    cache.append(get())
                return cache[0]

            base = once
        w = cls(
            None if start is None else time_ns(start, base),
            None if end is None else time_ns(end, base),
        )
        if w.start is not None and w.end is not None and w.end < w.start:
            raise UsageError(f"the end {end!r} is before the start {start!r}")
        for name, given, ns in (("start", start, w.start), ("end", end, w.end)):
            warn_if_meant_relative(name, given, ns, base)
        return w

    @classmethod
    def of_ns(cls, start: int | str | None, end: int | str | None) -> TimeWindow:
        """The window of two integer ns (numpy integers too) or absolute time texts (epoch
        seconds, ISO 8601: there is no one log start to be relative to); a UsageError
        names a side given as anything else (a float, a bool, ``"+5"``)."""
        out: list[int | None] = []
        for name, v in (("start", start), ("end", end)):
            if v is None or _integral(v):
                out.append(None if v is None else int(v))
            elif isinstance(v, str):
                if v.strip().startswith("+"):
                    raise UsageError(
                        f"{name} {v!r}: a time relative to the start needs one log; give an absolute time"
                    )
                out.append(parse_time(v))
            else:
                raise UsageError(f"{name} must be integer nanoseconds or a time text, not {type(v).__name__}")
        return cls(out[0], out[1])

    def __iter__(self) -> Iterator[int | None]:
        """``start, end = window``."""
        return iter((self.start, self.end))

    def contains(self, t: Any) -> Any:
        """Whether ``start <= t < end``; with a numpy array of times, one answer per time."""
        after = True if self.start is None else t >= self.start
        return after & (True if self.end is None else t < self.end)

    def overlaps(self, first: Any, last: Any) -> Any:
        """Whether the inclusive range ``first..last`` (a chunk's times) reaches into the
        window; with numpy arrays of ranges, one answer per range."""
        after = True if self.start is None else last >= self.start
        return after & (True if self.end is None else first < self.end)

    def clamp(self, first: int, last: int) -> tuple[int, int]:
        """The inclusive range ``first..last`` cut to the window."""
        if self.start is not None:
            first = max(first, self.start)
        if self.end is not None:
            last = min(last, self.end - 1)
        return first, last


#: times before this (2001-09-09) in a log that starts after it: a bare number meant as ``+T``
_RECENT = 10**18


def warn_if_meant_relative(name: str, given: object, ns: int | None, base: Base) -> None:
    """A :class:`PolybagWarning` when a number given as an absolute time (``--start 5``: epoch
    seconds) lies decades before a log that starts in this century: ``+5`` was likely meant.
    (A ULog's times count from boot, so there a small number is right and nothing is said.)"""
    if not isinstance(given, str) or ns is None or ns >= _RECENT or _AMOUNT.fullmatch(given.strip()) is None:
        return
    start = base() if callable(base) else base
    if start is None or start < _RECENT:
        return

    def iso(t: int) -> str:
        return format_iso(t).replace(".000000000Z", "Z")

    text = given.strip()
    warnings.warn(
        PolybagWarning(
            f"{name} {given!r} is {iso(ns)} (a number is epoch seconds), before the log starts "
            f"({iso(start)}); {text} after the log's start is '+{text}'"
        ),
        stacklevel=3,
    )


def format_ns(ns: int | None) -> str:
    """``ns`` as seconds with nine decimals (``"12.000000500"``); ``"-"`` for ``None``.
    :func:`parse_time` reads it back to the same ns."""
    if ns is None:
        return "-"
    return f"{ns // 1_000_000_000}.{ns % 1_000_000_000:09d}"


def format_iso(ns: int) -> str:
    """``ns`` as ISO 8601 in UTC with nine decimals (``"2026-11-28T10:00:00.000000500Z"``);
    :func:`parse_time` reads it back to the same ns."""
    s, frac = divmod(ns, 1_000_000_000)
    d = _EPOCH + _dt.timedelta(seconds=s)
    return f"{d.strftime('%Y-%m-%dT%H:%M:%S')}.{frac:09d}Z"


def format_duration(ns: int) -> str:
    """A duration for people: ``"1.500s"``, ``"2:03.000 (123.000s)"``, ``"1:00:00.000 (3600.000s)"``."""
    s = ns / 1e9
    if s < 60:
        return f"{s:.3f}s"
    m, sec = divmod(s, 60)
    if m < 60:
        return f"{int(m)}:{sec:06.3f} ({s:.3f}s)"
    h, m = divmod(m, 60)
    return f"{int(h)}:{int(m):02d}:{sec:06.3f} ({s:.3f}s)"
