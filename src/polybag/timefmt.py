"""Times as people write and read them: parsing time arguments, printing nanoseconds.

The bottom layer for the CLI and the ops alike (it imports nothing of polybag above
:mod:`polybag.errors`).  Times are integer nanoseconds.
"""

from __future__ import annotations

from polybag.errors import UsageError

__all__ = ["format_duration", "format_ns", "parse_time"]


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
