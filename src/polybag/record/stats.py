"""Watching a recording: the live figures of each recorder, as a table on a terminal and as
JSON lines (``polybag record``, ``--json-stats SEC``).

:class:`StatsSampler` reads one recorder's counters (its per-topic
:class:`~polybag.record.items.TopicStats`, the open file's size and part, the free disk) and
keeps a short history of them, so that rates are measured over the last
:data:`RATE_WINDOW` seconds.  It never takes the recorder's lock: the counters are ints
read whole, the dict of topics is copied (again if a topic was added meanwhile).

:func:`table_lines` renders the figures of every recorder (one block each) as text lines;
:func:`json_figures` gives them as one JSON-able mapping.  :class:`StatsView` runs in its own
thread: it redraws the table in place on a terminal about 4 times a second (ANSI cursor
moves; plain blocks every :data:`PLAIN_EVERY` seconds when ``TERM=dumb`` or ``NO_COLOR`` is
set), writes a JSON line every SEC seconds, and at :meth:`StatsView.finish` clears the table
and writes a last JSON line (``"final": true``) whose counts are the final report's.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from polybag.util.text import peer_text, safe_line

#: rates (messages/s, bytes/s) are measured over about this many seconds
RATE_WINDOW = 2.0
#: the table's refresh period on a terminal (s)
TABLE_EVERY = 0.25
#: the period of plain blocks (TERM=dumb, NO_COLOR) (s)
PLAIN_EVERY = 5.0
#: --json-stats SEC bounds (s)
MIN_JSON_EVERY = 0.1
MAX_JSON_EVERY = 86400.0

#: topic names in the table are cut to this many characters (and escaped)
MAX_NAME = 60
#: one topic's counters: (type, received, written, dropped, received bytes, last receive ns)
Counts = tuple[str, int, int, int, int, int]


def check_json_every(sec: float | None) -> float | None:
    """``--json-stats SEC`` checked: None (off) or SEC seconds, 0.1 <= SEC <= 86400."""
    from polybag.errors import UsageError

    if sec is None:
        return None
    if not (isinstance(sec, (int, float)) and math.isfinite(sec) and MIN_JSON_EVERY <= sec <= MAX_JSON_EVERY):
        raise UsageError(
            f"--json-stats {sec}: the period must be a number of seconds from {MIN_JSON_EVERY:g} to {MAX_JSON_EVERY:g}"
        )
    return float(sec)


def read_counts(rec: Any) -> dict[str, Counts]:
    """The counters of recorder ``rec`` (topic -> :data:`Counts`): its locked copy
    (``rec.counts()``), or for anything else with a ``stats`` dict, a plain copy."""
    counts = getattr(rec, "counts", None)
    if callable(counts):
        return dict(counts())
    return {topic: s.counts() for topic, s in list(rec.stats.items())}


class StatsSampler:
    """The live figures of one recorder (``rec``: a :class:`~polybag.record.recorder.Recorder`
    or anything with its ``stats``, ``options``, ``output``, ``queued_bytes`` and
    ``stop_reason``).  ``clock()`` (monotonic s), ``wall()`` (ns since the epoch) and
    ``disk_free(directory)`` can be replaced (tests)."""

    def __init__(
        self,
        rec: Any,
        index: int | None = None,
        *,
        window: float = RATE_WINDOW,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], int] = time.time_ns,
        disk_free: Callable[[str], int] | None = None,
    ) -> None:
        self.rec = rec
        self.index = index
        self.window = window
        self._clock = clock
        self._wall = wall
        self._disk_free = disk_free or (lambda d: shutil.disk_usage(d).free)
        #: (clock, {topic: (received, bytes)}) samples, oldest first
        self._history: deque[tuple[float, dict[str, tuple[int, int]]]] = deque()
        self._lock = threading.Lock()

    def _rates(self, now: float, counts: dict[str, Counts]) -> dict[str, tuple[float | None, float | None]]:
        """Per topic (messages/s, bytes/s) since the oldest sample of the window (None: no
        sample yet); ``counts`` kept as a sample."""
        hist = self._history
        # keep one sample at least `window` old (the start of the measure), drop older ones
        while len(hist) > 1 and now - hist[1][0] >= self.window:
            hist.popleft()
        rates: dict[str, tuple[float | None, float | None]] = {}
        if hist and now > hist[0][0]:
            t0, old = hist[0]
            dt = now - t0
            for topic, c in counts.items():
                n0, b0 = old.get(topic, (0, 0))
                rates[topic] = ((c[1] - n0) / dt, (c[4] - b0) / dt)
        hist.append((now, {t: (c[1], c[4]) for t, c in counts.items()}))
        return rates

    def sample(self) -> dict[str, Any]:
        """The figures now (JSON-able): ``time`` (s since the epoch), ``recorder`` (its index
        in a group), ``file``, ``split`` (the part number, 1 first, with ``--split``),
        ``size`` (bytes of the open file as ``--size`` counts them), ``buffered`` (bytes
        queued, or in the snapshot ring), ``free`` (bytes free on its disk), ``time_left`` (s
        until ``--duration`` stops it), ``split_in`` (s until ``--split --duration`` starts
        the next part), ``stop_reason``, ``topics`` (per topic: type, received, written,
        dropped, bytes, rate, bandwidth, last_seen s ago) and ``totals``."""
        rec = self.rec
        with self._lock:
            now = self._clock()
            wall = self._wall()
            counts = read_counts(rec)
            rates = self._rates(now, counts)
        o = rec.options
        out = rec.output
        topics: dict[str, dict[str, Any]] = {}
        for topic in sorted(counts):
            typ, received, written, dropped, nbytes, last = counts[topic]
            rate, bw = rates.get(topic, (None, None))
            topics[topic] = {
                "type": typ,
                "received": received,
                "written": written,
                "dropped": dropped,
                "bytes": nbytes,
                "rate": None if rate is None else round(rate, 3),
                "bandwidth": None if bw is None else round(bw, 1),
                "last_seen": round(max(0, wall - last) / 1e9, 3) if last else None,
            }
        totals: dict[str, Any] = {
            k: sum(t[k] for t in topics.values()) for k in ("received", "written", "dropped", "bytes")
        }
        known = [t for t in topics.values() if t["rate"] is not None]
        totals["rate"] = round(sum(t["rate"] for t in known), 3) if known else None
        totals["bandwidth"] = round(sum(t["bandwidth"] for t in known), 1) if known else None
        current = out.current_file
        fig: dict[str, Any] = {"time": round(wall / 1e9, 3)}
        if self.index is not None:
            fig["recorder"] = self.index
        dur = o.max_duration_ns
        start = out.start
        left = None
        if dur:
            left = dur / 1e9 if start is None else max(0.0, (start + dur - wall) / 1e9)
        fig.update(
            {
                "file": current,
                "split": out.split_index + 1 if o.split else None,
                "max_splits": o.max_splits or None,
                "size": out.size if current is not None else 0,
                "buffered": rec.queued_bytes,
                "free": self._free(current or o.file_name(0)),
                "time_left": None if left is None or o.split else round(left, 3),
                "split_in": round(left, 3) if left is not None and o.split else None,
                "stop_reason": rec.stop_reason,
                "topics": topics,
                "totals": totals,
            }
        )
        return fig

    def _free(self, name: str) -> int | None:
        try:
            return int(self._disk_free(os.path.dirname(os.path.abspath(name))))
        except (OSError, ValueError):
            return None


# --- text ---------------------------------------------------------------------------------------------
def human_bytes(n: float | None) -> str:
    """``n`` bytes as ``12.3 MB`` (powers of 1000, as --size's MB are shown), ``-`` for None."""
    if n is None:
        return "-"
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"  # pragma: no cover


def _seconds(s: float | None) -> str:
    if s is None:
        return "-"
    if s < 100:
        return f"{s:.1f} s"
    if s < 3600:
        return f"{int(s) // 60}m{int(s) % 60:02d}s"
    return f"{int(s) // 3600}h{int(s) % 3600 // 60:02d}m"


def _rate(r: float | None) -> str:
    return "-" if r is None else f"{r:.1f} Hz"


def head_line(fig: dict[str, Any]) -> str:
    """The totals of one recorder in a line: file, part, size, buffered, free disk, time left."""
    parts: list[str] = []
    if fig.get("recorder") is not None:
        parts.append(f"recorder {fig['recorder']}:")
    parts.append(safe_line(fig["file"]) if fig["file"] else "(no file open)")
    if fig["split"] is not None:
        keep = f" (keeping {fig['max_splits']})" if fig["max_splits"] else ""
        parts.append(f"part {fig['split']}{keep}")
    parts.append(f"size {human_bytes(fig['size'])}")
    if fig["buffered"]:
        parts.append(f"buffered {human_bytes(fig['buffered'])}")
    parts.append(f"free {human_bytes(fig['free'])}")
    if fig["time_left"] is not None:
        parts.append(f"time left {_seconds(fig['time_left'])}")
    if fig["split_in"] is not None:
        parts.append(f"next part in {_seconds(fig['split_in'])}")
    if fig["stop_reason"]:
        parts.append(f"stopped: {safe_line(fig['stop_reason'])}")
    return "  ".join(parts)


def recorder_lines(fig: dict[str, Any], max_topics: int | None = None) -> list[str]:
    """One recorder's block: its head line, a header, a line per topic (at most
    ``max_topics``, then how many more) and the totals."""
    topics = fig["topics"]
    names = list(topics)
    shown = names if max_topics is None or len(names) <= max_topics else names[: max(0, max_topics - 1)]
    label = {t: peer_text(t, MAX_NAME) for t in shown}  # (names come from peers)
    width = max([5] + [len(t) for t in label.values()])
    lines = [
        head_line(fig),
        f"{'topic':<{width}}  {'msgs':>9}  {'rate':>10}  {'bandwidth':>11}  {'drops':>7}  {'last seen':>9}",
    ]

    def row(name: str, t: dict[str, Any], last: str) -> str:
        bw = "-" if t["bandwidth"] is None else human_bytes(t["bandwidth"]) + "/s"
        return f"{name:<{width}}  {t['received']:>9}  {_rate(t['rate']):>10}  {bw:>11}  {t['dropped']:>7}  {last:>9}"

    for name in shown:
        t = topics[name]
        lines.append(row(label[name], t, _seconds(t["last_seen"])))
    if len(shown) < len(names):
        lines.append(f"... {len(names) - len(shown)} more topics")
    lines.append(row("total", fig["totals"], ""))
    return lines


def table_lines(figs: Sequence[dict[str, Any]], columns: int = 0, rows: int = 0) -> list[str]:
    """The table of every recorder's figures (a block each), cut to ``columns`` characters
    a line and about ``rows`` lines in all (topics left out first; 0: no limit)."""
    max_topics = None
    if rows:
        per = max(1, (rows - 4 * len(figs)) // max(1, len(figs)))
        max_topics = per
    lines: list[str] = []
    for fig in figs:
        lines.extend(recorder_lines(fig, max_topics))
    if rows and len(lines) > rows:
        lines = lines[: max(1, rows - 1)] + [f"... ({len(figs)} recorders)"]
    if columns:
        lines = [ln[: columns - 1] if len(ln) >= columns else ln for ln in lines]
    return lines


def json_line(fig: dict[str, Any]) -> str:
    """One JSON line (no newline) of a recorder's figures."""
    return json.dumps(fig, separators=(",", ":"), sort_keys=False)


# --- the view ---------------------------------------------------------------------------------------
def plain_terminal(env: dict[str, str] | None = None) -> bool:
    """Whether the terminal takes no cursor moves (``TERM=dumb``) or ``NO_COLOR`` is set to a
    non-empty value (https://no-color.org): the table is then printed as plain blocks, less
    often, without any ANSI escape."""
    from polybag.util.progress import no_color

    e = os.environ if env is None else env
    return e.get("TERM", "") == "dumb" or no_color(dict(e))


def _terminal_size(term: TextIO) -> os.terminal_size:
    """The size of ``term``'s terminal ($COLUMNS/$LINES first, as :func:`shutil.get_terminal_size`)."""
    env = shutil.get_terminal_size((0, 0))
    if env.columns and env.lines and "COLUMNS" in os.environ and "LINES" in os.environ:
        return env
    try:
        return os.get_terminal_size(term.fileno())
    except (OSError, ValueError, AttributeError):
        return shutil.get_terminal_size((100, 40))


class _Guard:
    """``sys.stderr`` while the table is shown: a line written by anyone first erases the
    table (it is drawn again at the next refresh), so that log lines never mix with it."""

    def __init__(self, view: StatsView, real: TextIO) -> None:
        self._view = view
        self._real = real

    def write(self, s: str) -> int:
        v = self._view
        with v._lock:
            v._erase()
            n = self._real.write(s)
            if s:
                v._line_start = s.endswith("\n")
            return n

    def flush(self) -> None:
        self._real.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class StatsView:
    """The live view of ``recorders`` (a group's, indexed when ``indexed``): the table on
    ``term`` (a terminal's stream, or None: no table), JSON lines every ``json_every``
    seconds to ``out`` (None: none).  :meth:`start` runs it in a thread (``sys.stderr``
    replaced by a guard while the table is shown); :meth:`finish` stops it, clears the
    table and writes the last JSON line."""

    def __init__(
        self,
        recorders: Sequence[Any],
        *,
        indexed: bool = False,
        term: TextIO | None = None,
        plain: bool = False,
        json_every: float | None = None,
        out: TextIO | None = None,
        table_every: float | None = None,
    ) -> None:
        self.samplers = [StatsSampler(r, i if indexed else None) for i, r in enumerate(recorders)]
        self.term = term
        self.plain = plain
        self.json_every = json_every
        self.out = out if out is not None else (sys.stdout if json_every else None)
        self.table_every = table_every if table_every is not None else (PLAIN_EVERY if plain else TABLE_EVERY)
        self._lock = threading.RLock()
        self._drawn = 0  # lines of the table on the terminal now
        self._line_start = True
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._saved_stderr: Any = None
        #: why the view's thread ended early (None: it did not)
        self.error: str | None = None

    @property
    def active(self) -> bool:
        return self.term is not None or self.out is not None

    def start(self) -> StatsView:
        if not self.active:
            return self
        if self.term is not None and not self.plain and sys.stderr is self.term:
            self._saved_stderr = sys.stderr
            sys.stderr = _Guard(self, self.term)
        self._thread = threading.Thread(target=self._run, name="polybag-record-stats", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            self._loop()
        except Exception as e:  # noqa: BLE001 - the view ends; the recording goes on
            self.error = f"{type(e).__name__}: {e}"

    def _loop(self) -> None:
        now = time.monotonic()
        next_table = now + (self.table_every if self.plain else 0.0)
        next_json = now + (self.json_every or 0.0)
        while not self._stop.is_set():
            now = time.monotonic()
            figs: list[dict[str, Any]] | None = None
            if self.term is not None and now >= next_table:
                figs = self.figures()
                self.draw(figs)
                next_table = now + self.table_every
            if self.out is not None and self.json_every and now >= next_json:
                self.write_json(figs if figs is not None else self.figures())
                next_json = now + self.json_every
            due = [t for t, on in ((next_table, self.term is not None), (next_json, self.out is not None)) if on]
            self._stop.wait(max(0.01, min(due) - time.monotonic()) if due else 1.0)

    def figures(self) -> list[dict[str, Any]]:
        return [s.sample() for s in self.samplers]

    def draw(self, figs: list[dict[str, Any]]) -> None:
        """Show the table (in place, or as a plain block)."""
        term = self.term
        if term is None:
            return
        size = _terminal_size(term)
        if self.plain:
            lines = table_lines(figs)
            text = "\n".join(lines) + "\n\n"
        else:
            lines = table_lines(figs, size.columns, max(3, size.lines - 2))
            text = "".join(ln + "\x1b[K\n" for ln in lines)
        with self._lock:
            try:
                if self.plain:
                    term.write(text)
                else:
                    if not self._line_start:
                        term.write("\n")
                        self._line_start = True
                    up = f"\x1b[{self._drawn}A" if self._drawn else ""
                    term.write("\r" + up + text + "\x1b[J")
                    self._drawn = len(lines)
                term.flush()
            except (OSError, ValueError):
                self.term = None

    def _erase(self) -> None:
        """Clear the table from the terminal (with the lock held)."""
        if self._drawn and self.term is not None:
            try:
                self.term.write(f"\r\x1b[{self._drawn}A\x1b[J")
            except (OSError, ValueError):
                self.term = None
            self._drawn = 0

    def write_json(self, figs: list[dict[str, Any]], final: bool = False) -> None:
        out = self.out
        if out is None:
            return
        text = "".join(json_line(dict(fig, final=True) if final else fig) + "\n" for fig in figs)
        with self._lock:
            try:
                if self._drawn and out.isatty():  # (stdout on the table's terminal)
                    self._erase()
                out.write(text)
                out.flush()
            except (OSError, ValueError):  # (a closed pipe: no more lines, the recording goes on)
                self.out = None

    def finish(self) -> None:
        """Stop the thread, clear the table, write the last JSON line (after the recorders closed)."""
        if self._thread is None:  # (never started)
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with self._lock:
            if self._saved_stderr is not None:
                sys.stderr = self._saved_stderr
                self._saved_stderr = None
            if not self.plain:
                self._erase()
                if self.term is not None:
                    try:
                        self.term.flush()
                    except (OSError, ValueError):
                        pass
        if self.out is not None and self.json_every and self.error is None:
            try:
                self.write_json(self.figures(), final=True)
            except Exception as e:  # noqa: BLE001 - the final report still comes
                self.error = f"{type(e).__name__}: {e}"
