"""Times as people write and read them: parsing time arguments and windows, printing nanoseconds.

The bottom layer for the CLI and the ops alike (it imports nothing of polybag above
:mod:`polybag.errors`).  Times are integer nanoseconds.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from polybag.errors import UsageError

__all__ = ["TimeWindow", "duration_ns", "format_duration", "format_ns", "parse_time", "time_ns"]

#: the log's start time for relative (``+``) times: the time, or a call that gives it
#: (called only when a relative time needs it, so a stream is not read for nothing)
Base = int | None | Callable[[], int | None]


def parse_time(text: str, base: int | None = None) -> int:
    """A time argument in ns: an integer is nanoseconds, ``1.5`` or ``2s`` seconds.

    A leading ``+`` makes it relative to ``base`` (the log's start).
    """
    t = text.strip()
    rel = t.startswith("+")
    if rel:
        t = t[1:]
    try:
        if t.endswith("s"):
            ns = round(float(t[:-1]) * 1e9)
        elif "." in t or "e" in t.lower():
            ns = round(float(t) * 1e9)
        else:
            ns = int(t)
    except ValueError:
        raise UsageError(f"not a time: {text!r} (nanoseconds, or seconds with '.' or 's')") from None
    if rel:
        if base is None:
            raise UsageError(f"relative time {text!r} needs a log start time")
        ns += base
    return ns


def time_ns(value: int | str, base: Base = None) -> int:
    """A time argument in ns: an ``int`` as it is, anything else (``"+2.5"``, ``"12s"``) as
    :func:`parse_time` reads its text, relative to ``base``."""
    if isinstance(value, int):
        return value
    text = str(value)
    if callable(base):
        base = base() if text.strip().startswith("+") else None
    return parse_time(text, base)


def duration_ns(value: int | str) -> int:
    """A length of time in ns: an ``int`` as it is, a text as :func:`parse_time` reads it
    (a leading ``+`` is allowed and ignored)."""
    if isinstance(value, int):
        return value
    return parse_time(str(value).lstrip("+"))


@dataclass(frozen=True)
class TimeWindow:
    """A log-time window ``start <= t < end`` in ns; ``None`` leaves that side open."""

    start: int | None = None
    end: int | None = None

    @classmethod
    def parse(cls, start: int | str | None, end: int | str | None, base: Base = None) -> TimeWindow:
        """The window of two time arguments (see :func:`time_ns`; ``None`` stays open)."""
        return cls(
            None if start is None else time_ns(start, base),
            None if end is None else time_ns(end, base),
        )

    @classmethod
    def of_ns(cls, start: int | None, end: int | None) -> TimeWindow:
        """The window of two integer ns (numpy integers too); a UsageError names a side
        given as anything else (a float, a text, a bool)."""
        for name, v in (("start", start), ("end", end)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, numbers.Integral)):
                raise UsageError(f"{name} must be integer nanoseconds, not {type(v).__name__}")
        return cls(None if start is None else int(start), None if end is None else int(end))

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


def format_ns(ns: int | None) -> str:
    """``ns`` as seconds with nine decimals (``"12.000000500"``); ``"-"`` for ``None``."""
    if ns is None:
        return "-"
    return f"{ns // 1_000_000_000}.{ns % 1_000_000_000:09d}"


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
