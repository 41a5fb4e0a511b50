"""Helpers shared by the command modules: time parsing, output, progress."""

from __future__ import annotations

import json
import sys
import time
from typing import Any, TextIO

from polybag.errors import UsageError


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
    if ns is None:
        return "-"
    return f"{ns // 1_000_000_000}.{ns % 1_000_000_000:09d}"


def format_duration(ns: int) -> str:
    s = ns / 1e9
    if s < 60:
        return f"{s:.3f}s"
    m, sec = divmod(s, 60)
    if m < 60:
        return f"{int(m)}:{sec:06.3f} ({s:.3f}s)"
    h, m = divmod(m, 60)
    return f"{int(h)}:{int(m):02d}:{sec:06.3f} ({s:.3f}s)"


def format_size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n} B"


def print_json(obj: Any, out: TextIO | None = None) -> None:
    json.dump(obj, out or sys.stdout, indent=2, default=_json_default)
    (out or sys.stdout).write("\n")


def _json_default(o: Any) -> Any:
    import base64

    if isinstance(o, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(o)).decode("ascii")
    tolist = getattr(o, "tolist", None)
    if tolist is not None:
        return tolist()
    if hasattr(o, "__dict__"):
        return vars(o)
    return str(o)


class Progress:
    """A one-line progress bar on stderr, shown only when stderr is a terminal."""

    def __init__(self, total: int, label: str = "", enabled: bool | None = None) -> None:
        self.total = max(total, 1)
        self.label = label
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.done = 0
        self._last = 0.0

    def update(self, n: int) -> None:
        self.done += n
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last < 0.1 and self.done < self.total:
            return
        self._last = now
        frac = min(1.0, self.done / self.total)
        bar = "#" * int(frac * 30)
        sys.stderr.write(f"\r{self.label} [{bar:<30}] {frac * 100:5.1f}%")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")
            sys.stderr.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
