"""Damage and warning bookkeeping of the ULog reader.

Each piece of damage found while reading goes through :meth:`_Damage._damaged`: its bytes
are counted in ``recovery_report["bytes_skipped"]`` (the reader's
:class:`~polybag.formats.shared.recovery.Recovery` makes the report at the end of the scan), it is listed (the first
:data:`_MAX_REPORTS`) in ``reader.ulog.corruptions`` with a line of
``recovery_report["errors"]``, and the first one in the file is what
:meth:`~polybag.formats.ulog.reader.UlogReader.messages` raises without ``recover=True``.
Dropped data messages of one kind share one line of ``recovery_report["errors"]`` with
their count, and the data messages of a subscription without a usable format are counted
and reported once at its ``A`` message (both settled by :meth:`_Damage._report_damage` at
the end of the scan).  Other findings (an unknown message type, a flag bits message out
of place) are warnings: ``reader.ulog.warnings`` and a :class:`~polybag.errors.PolybagWarning`.

:class:`_Damage` is a part of :class:`~polybag.formats.ulog.reader.UlogReader` and works on
its state.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from polybag.errors import FormatError, PolybagWarning, TruncatedError
from polybag.formats.shared.recovery import Recovery
from polybag.formats.ulog.definitions import UlogData, _DeadSub

_MAX_REPORTS = 1000  # damage reports kept one by one


class _Damage:
    """Damage reports and warnings (a part of the ULog reader)."""

    ulog: UlogData
    recovery_report: dict[str, Any]
    _recovery: Recovery
    _dead_subs: list[_DeadSub]

    def _note(self, text: str) -> None:
        """A warning: kept in ``ulog.warnings`` and issued unless ``warn=False``."""
        self.ulog.warnings.append(text)
        if self._warn:
            warnings.warn(PolybagWarning(f"{self.path or '<buffer>'}: {text}"), stacklevel=4)

    def _unknown_type(self, t: int, n: int, pos: int) -> None:
        """Unknown message types are skipped (the spec asks parsers to); one warning each."""
        count = self.ulog.unknown_types.get(chr(t), 0)
        self.ulog.unknown_types[chr(t)] = count + 1
        if not count:
            self._note(f"offset {pos}: skipping unknown message type {chr(t)!r} ({n} bytes)")

    def _damaged(
        self, offset: int, message: str, skipped: int = 0, truncated: bool = False, grouped: bool = False
    ) -> None:
        """One piece of damage; ``grouped``: a dropped data message whose line in
        ``recovery_report["errors"]`` is its group's (see :meth:`_drop_group`)."""
        self._recovery.bytes_skipped += skipped
        if len(self.ulog.corruptions) < _MAX_REPORTS:
            self.ulog.corruptions.append({"offset": offset, "bytes_skipped": skipped, "error": message})
            if not grouped:
                self._errors.append((offset, message))
        else:
            self.ulog.unreported_damage += 1
        if self._damage is None or offset < self._damage[0]:
            self._damage = (offset, message, truncated)

    def _drop_group(self, key: tuple[int, int], offset: int, text: str, n: int, nbytes: int) -> None:
        """Count ``n`` dropped data messages of one kind (``key``: no room for the msg_id, no
        subscription for a msg_id, a wrong size for a subscription): the first is the
        group's line in ``recovery_report["errors"]``, which gets the total at the end."""
        g = self._drop_groups.get(key)
        if g is None:
            self._drop_groups[key] = [len(self._errors), text, n, nbytes]
            self._errors.append((offset, text))
        else:
            g[2] += n
            g[3] += nbytes

    def _count_dead(self, cand: np.ndarray, nbytes: np.ndarray) -> None:
        """Data messages of subscriptions without a usable format (``cand``: -2 - index)."""
        k = -2 - cand.astype(np.int64)
        counts = np.bincount(k)
        sums = np.bincount(k, weights=nbytes.astype(np.float64))
        for i in np.flatnonzero(counts).tolist():
            d = self._dead_subs[i]
            d.count += int(counts[i])
            d.nbytes += int(sums[i])

    def _report_damage(self) -> None:
        """The damage reports that need the whole scan: one per subscription without a
        usable format (with its data message count) and the totals of each group of
        dropped data messages; then ``recovery_report["errors"]`` in file order."""
        for d in self._dead_subs:
            s = d.sub
            self._damaged(
                d.offset,
                f"subscription {s.name!r} (msg_id {s.msg_id}, multi_id {s.multi_id}) has no usable format "
                f"({d.reason}): its {d.count} data message(s) ({d.nbytes} bytes) are skipped",
                d.nbytes,
            )
        for at, text, n, nbytes in self._drop_groups.values():
            if n > 1:
                self._errors[at] = (
                    self._errors[at][0],
                    f"{text}, and {n - 1} more data message(s) like it ({n} in all, {nbytes} bytes)",
                )
        self._errors.sort(key=lambda e: e[0])
        self._recovery.errors = [f"offset {o}: {m}" for o, m in self._errors]
        self.recovery_report = self._recovery.report(0)
        if self._dead_subs:
            self.ulog.corruptions.sort(key=lambda c: c["offset"])

    def _raise_damage(self) -> None:
        """Raise the first damage (a TruncatedError for a log cut short, else a FormatError)."""
        assert self._damage is not None
        off, msg, truncated = self._damage
        cls = TruncatedError if truncated else FormatError
        raise cls(
            msg + (" (open with recover=True to read past it)" if not truncated else ""), self.path, off
        )
