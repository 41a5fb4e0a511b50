"""Damage bookkeeping every bag reader composes (the 2.0 reader and the older versions'):
:class:`Damage`.

A reader keeps one :class:`Damage`: its :class:`~polybag.formats.shared.recovery.Recovery`
notes each problem, with the bytes skipped, and keeps the first as ``recovery.first`` when
the reader does not recover; a pass over the messages (:meth:`Damage.reading`) leaves a
recovering reader's ``recovery_report`` when it ends (also when its consumer stops early)
and raises the first problem once it has given every intact message.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from polybag.errors import FormatError
from polybag.formats.shared.recovery import Recovery
from polybag.reader import Reader


class PassCount:
    """The messages a pass has given so far (``count``)."""

    count = 0


class Damage:
    """What a bag reader met of damage, and whether it recovers (reads past it)."""

    __slots__ = ("recover", "recovery")

    def __init__(self, recover: bool) -> None:
        self.recover = recover
        self.recovery = Recovery()  # damage met; ``first``: raised when not recovering

    def note_error(self, e: FormatError, skipped: int) -> bool:
        """Record a problem met while reading records; True when reading should go on
        (recovering)."""
        rec = self.recovery
        rec.note(str(e), max(0, skipped))
        if self.recover:
            return True
        if rec.first is None:
            rec.first = e
        return False

    def fail(self, e: FormatError) -> None:
        """Note ``e``; it is the error raised after the intact messages when not recovering."""
        self.recovery.note(str(e))
        if not self.recover:
            self.recovery.first = e

    @contextmanager
    def reading(self, reader: Reader) -> Iterator[PassCount]:
        """One pass of ``reader`` over the messages: ``with damage.reading(reader) as done:``
        and count what it gives in ``done.count``."""
        done = PassCount()
        try:
            yield done
        finally:
            if self.recover:
                reader.recovery_report = self.recovery.report(done.count)
        if self.recovery.first is not None:
            raise self.recovery.first
