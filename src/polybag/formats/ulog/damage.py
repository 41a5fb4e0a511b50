"""Damage and warning bookkeeping of the ULog reader.

Each piece of damage found while reading goes through :meth:`DamageLog.damaged`: its bytes
are counted in ``recovery_report["bytes_skipped"]`` (a
:class:`~polybag.formats.shared.recovery.Recovery` makes the report at the end of the scan),
it is listed (the first :data:`MAX_REPORTS`) in ``reader.ulog.corruptions`` with a line of
``recovery_report["errors"]``, and the first one in the file (:class:`FirstDamage`) is what
:meth:`~polybag.formats.ulog.reader.UlogReader.messages` raises without ``recover=True``.
Dropped data messages of one kind share one line of ``recovery_report["errors"]`` with
their count, and the data messages of a subscription without a usable format are counted
and reported once at its ``A`` message (both settled by :meth:`DamageLog.settle` at the end
of the scan).  Other findings (an unknown message type, a flag bits message out of place)
are warnings: ``reader.ulog.warnings`` and a :class:`~polybag.errors.PolybagWarning`.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

from polybag.errors import FormatError, PolybagWarning, TruncatedError
from polybag.formats.shared.recovery import Recovery
from polybag.formats.ulog.facts import UlogData
from polybag.formats.ulog.subscriptions import UnusableSubscription
from polybag.model import RecoveryReport

MAX_REPORTS = 1000  # damage reports kept one by one


class FirstDamage:
    """The first damage in a log: what a reader that does not recover raises."""

    __slots__ = ("offset", "message", "truncated")

    def __init__(self, offset: int, message: str, truncated: bool) -> None:
        self.offset = offset
        self.message = message
        self.truncated = truncated  # the log is cut short (a TruncatedError), else damaged (a FormatError)

    def error(self, path: str | None) -> FormatError:
        """The error raised for it (a TruncatedError for a log cut short, else a FormatError)."""
        if self.truncated:
            return TruncatedError(self.message, path, self.offset)
        return FormatError(self.message + " (open with recover=True to read past it)", path, self.offset)


class DropGroup:
    """Dropped data messages of one kind: their line in the errors, its first text, the
    count and the bytes."""

    __slots__ = ("at", "text", "count", "nbytes")

    def __init__(self, at: int, text: str, count: int, nbytes: int) -> None:
        self.at = at  # index of the group's line in DamageLog.errors
        self.text = text
        self.count = count
        self.nbytes = nbytes


class DamageLog:
    """The damage and warnings of one read of a log, kept in ``ulog`` (corruptions,
    warnings, unknown types) and in the lines of the recovery report."""

    def __init__(self, ulog: UlogData, path: str | None, warn: bool) -> None:
        self.ulog = ulog
        self.path = path
        self.warn = warn
        self.recovery = Recovery()  # its errors: made from ``errors`` by settle()
        # (offset, text) of each damage line of recovery_report["errors"] (sorted at the end)
        self.errors: list[tuple[int, str]] = []
        # dropped data messages of one kind by key (see drop_group)
        self.drop_groups: dict[tuple[int, int], DropGroup] = {}
        self.first: FirstDamage | None = None

    def note(self, text: str) -> None:
        """A warning: kept in ``ulog.warnings`` and issued unless ``warn=False``."""
        self.ulog.warnings.append(text)
        if self.warn:
            warnings.warn(PolybagWarning(f"{self.path or '<buffer>'}: {text}"), stacklevel=4)

    def unknown_type(self, t: int, n: int, pos: int) -> None:
        """Unknown message types are skipped (the spec asks parsers to); one warning each."""
        count = self.ulog.unknown_types.get(chr(t), 0)
        self.ulog.unknown_types[chr(t)] = count + 1
        if not count:
            self.note(f"offset {pos}: skipping unknown message type {chr(t)!r} ({n} bytes)")

    def damaged(
        self, offset: int, message: str, skipped: int = 0, truncated: bool = False, grouped: bool = False
    ) -> None:
        """One piece of damage; ``grouped``: a dropped data message whose line in
        ``recovery_report["errors"]`` is its group's (see :meth:`drop_group`)."""
        self.recovery.bytes_skipped += skipped
        if len(self.ulog.corruptions) < MAX_REPORTS:
            self.ulog.corruptions.append({"offset": offset, "bytes_skipped": skipped, "error": message})
            if not grouped:
                self.errors.append((offset, message))
        else:
            self.ulog.unreported_damage += 1
        if self.first is None or offset < self.first.offset:
            self.first = FirstDamage(offset, message, truncated)

    def unreported(self, count: int, nbytes: int) -> None:
        """Damage beyond the first :data:`MAX_REPORTS` reports: counted only."""
        self.recovery.bytes_skipped += nbytes
        self.ulog.unreported_damage += count

    def drop_group(self, key: tuple[int, int], offset: int, text: str, n: int, nbytes: int) -> None:
        """Count ``n`` dropped data messages of one kind (``key``: no room for the msg_id, no
        subscription for a msg_id, a wrong size for a subscription): the first is the
        group's line in ``recovery_report["errors"]``, which gets the total at the end."""
        g = self.drop_groups.get(key)
        if g is None:
            self.drop_groups[key] = DropGroup(len(self.errors), text, n, nbytes)
            self.errors.append((offset, text))
        else:
            g.count += n
            g.nbytes += nbytes

    def settle(self, unusable: Sequence[UnusableSubscription]) -> RecoveryReport:
        """The damage reports that need the whole scan: one per subscription without a
        usable format (with its data message count) and the totals of each group of
        dropped data messages; then ``recovery_report["errors"]`` in file order.  Returns
        the recovery report."""
        for d in unusable:
            s = d.sub
            self.damaged(
                d.offset,
                f"subscription {s.name!r} (msg_id {s.msg_id}, multi_id {s.multi_id}) has no usable format "
                f"({d.reason}): its {d.count} data message(s) ({d.nbytes} bytes) are skipped",
                d.nbytes,
            )
        for g in self.drop_groups.values():
            if g.count > 1:
                self.errors[g.at] = (
                    self.errors[g.at][0],
                    f"{g.text}, and {g.count - 1} more data message(s) like it ({g.count} in all, {g.nbytes} bytes)",
                )
        self.errors.sort(key=lambda e: e[0])
        self.recovery.errors = [f"offset {o}: {m}" for o, m in self.errors]
        if unusable:
            self.ulog.corruptions.sort(key=lambda c: c["offset"])
        return self.recovery.report(0)
