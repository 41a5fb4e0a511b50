"""Playback timing: how late messages go out, in bounded memory.

:class:`LatenessHistogram` keeps a log-linear histogram of lateness values (ns): 32 buckets
per power of two (every value is kept within 3.2 %, values under 64 ns exactly), so its size
never depends on how many messages were played (at most a few thousand buckets, whatever the
values).  The :class:`polybag.play.Player` fills one with the lateness of every timed
publish (the time ``sink.publish`` was called minus the time the message was due).

:func:`received_lateness` turns what a subscriber saw (receive time per log time) into
lateness against the playback schedule, for benchmarks and live tests: a subscriber cannot
know when playback started, so the schedule is anchored on the message that arrived least
late (its lateness is 0 and every other one is measured from it).  A constant transport delay
therefore does not count; jitter, drift and late wakeups do.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from polybag.errors import UsageError

_SUB_BITS = 5  # 32 buckets per power of two
_SUB = 1 << _SUB_BITS
_EXACT = 2 * _SUB  # values below this have a bucket each


def _bucket(v: int) -> int:
    if v < _EXACT:
        return v
    shift = v.bit_length() - (_SUB_BITS + 1)
    return shift * _SUB + (v >> shift)


def _bucket_value(idx: int) -> int:
    """The middle of bucket ``idx`` (the value itself for the exact buckets)."""
    if idx < _EXACT:
        return idx
    shift = idx // _SUB - 1
    low = (idx - shift * _SUB) << shift
    return low + ((1 << shift) - 1) // 2


@dataclass(frozen=True)
class LatenessStats:
    """A summary of lateness values, in ns: count, median, 99th percentile, maximum, mean."""

    count: int = 0
    median_ns: int = 0
    p99_ns: int = 0
    max_ns: int = 0
    mean_ns: float = 0.0

    def as_dict(self) -> dict[str, float | int]:
        """The summary in milliseconds (for ``--json`` and reports)."""
        return {
            "count": self.count,
            "median_ms": self.median_ns / 1e6,
            "p99_ms": self.p99_ns / 1e6,
            "max_ms": self.max_ns / 1e6,
            "mean_ms": self.mean_ns / 1e6,
        }

    def __str__(self) -> str:
        if not self.count:
            return "no timed messages"
        return (
            f"lateness median {self.median_ns / 1e6:.3f} ms, p99 {self.p99_ns / 1e6:.3f} ms, "
            f"max {self.max_ns / 1e6:.3f} ms over {self.count} messages"
        )


class LatenessHistogram:
    """Lateness values (ns) in a bounded log-linear histogram; negative values count as 0."""

    __slots__ = ("_counts", "count", "max_ns", "total_ns")

    def __init__(self) -> None:
        self._counts: dict[int, int] = {}
        self.count = 0
        self.max_ns = 0
        self.total_ns = 0

    def add(self, late_ns: int) -> None:
        """Count one message that went out ``late_ns`` after it was due."""
        v = late_ns if late_ns > 0 else 0
        idx = _bucket(v)
        counts = self._counts
        counts[idx] = counts.get(idx, 0) + 1
        self.count += 1
        self.total_ns += v
        if v > self.max_ns:
            self.max_ns = v

    def quantile(self, q: float) -> int:
        """The value below which a fraction ``q`` (0..1) of the counted values lie (ns)."""
        if self.count == 0:
            return 0
        if q >= 1.0:
            return self.max_ns
        rank = max(1, min(self.count, -(-int(q * self.count * 1_000_000) // 1_000_000)))
        seen = 0
        for idx in sorted(self._counts):
            seen += self._counts[idx]
            if seen >= rank:
                return min(_bucket_value(idx), self.max_ns)
        return self.max_ns

    @property
    def buckets(self) -> int:
        """How many buckets are in use (bounded whatever was added)."""
        return len(self._counts)

    def stats(self) -> LatenessStats:
        """Count, median, p99, max and mean of everything added."""
        if self.count == 0:
            return LatenessStats()
        return LatenessStats(
            self.count, self.quantile(0.5), self.quantile(0.99), self.max_ns, self.total_ns / self.count
        )


def summarize(values: Iterable[int]) -> LatenessStats:
    """Exact count, median, p99 (nearest rank), max and mean of ``values`` (ns)."""
    vals = sorted(max(0, int(v)) for v in values)
    n = len(vals)
    if n == 0:
        return LatenessStats()
    median = vals[(n - 1) // 2] if n % 2 else (vals[n // 2 - 1] + vals[n // 2]) // 2
    p99 = vals[max(0, -(-99 * n // 100) - 1)]
    return LatenessStats(n, median, p99, vals[-1], sum(vals) / n)


def received_lateness(log_times: Sequence[int], received: Sequence[int], rate: float = 1.0) -> list[int]:
    """Lateness (ns) of each message logged at ``log_times[i]`` and received at ``received[i]``
    (any monotonic clock), against a schedule anchored on the least late message.

    The schedule is ``anchor + (log_time - first log time) / rate``; ``anchor`` is chosen so
    that the smallest lateness is 0.
    """
    if len(log_times) != len(received):
        raise UsageError(f"{len(log_times)} log times but {len(received)} receive times")
    if not log_times:
        return []
    if not rate > 0:
        raise UsageError(f"rate must be positive, got {rate}")
    t0 = log_times[0]
    offsets = [r - (t - t0) / rate for t, r in zip(log_times, received)]
    anchor = min(offsets)
    return [round(o - anchor) for o in offsets]
