"""A one-line progress bar on stderr, for the ops and the CLI alike.

The bottom layer: it imports nothing of polybag.
"""

from __future__ import annotations

import sys
import time

__all__ = ["Progress", "no_color"]


def no_color(env: dict[str, str] | None = None) -> bool:
    """Whether ``NO_COLOR`` (https://no-color.org) is set to a non-empty value: no ANSI
    escape (colour, cursor moves) then, even on a terminal."""
    import os

    return bool((os.environ if env is None else env).get("NO_COLOR"))


class Progress:
    """A one-line progress bar on stderr, shown only when stderr is a terminal.  It is
    drawn with a carriage return only: no ANSI escape, so ``NO_COLOR`` needs no other form."""

    def __init__(self, total: int, label: str = "", enabled: bool | None = None) -> None:
        self.total = max(total, 1)
        self.label = label
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.done = 0
        self._last = 0.0

    def update(self, n: int) -> None:
        """Count ``n`` more units done; redraw at most ten times a second (and at the end)."""
        self.done += n
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last < 0.1 and self.done < self.total:
            return
        self._last = now
        self._draw()

    def _draw(self) -> None:
        frac = min(1.0, self.done / self.total)
        bar = "#" * int(frac * 30)
        sys.stderr.write(f"\r{self.label} [{bar:<30}] {frac * 100:5.1f}%")
        sys.stderr.flush()

    def close(self) -> None:
        """End the bar's line (when it is shown), showing where it ended (a selection of
        topics may end it short of 100%)."""
        if self.enabled:
            self._draw()
            sys.stderr.write("\n")
            sys.stderr.flush()
            self.enabled = False  # (closed: a second close writes nothing)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
