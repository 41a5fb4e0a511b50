"""Damage bookkeeping of the readers that read past damage (``recover=True``).

A reader keeps one :class:`Recovery`: a line of text per problem it meets
(:meth:`Recovery.note`), the bytes it skipped to get past damage, and the first problem
(what a reader that does not recover raises once it has given the intact messages).  A pass
over the messages ends by making the reader's ``recovery_report`` with
:meth:`Recovery.report`, the same dict for every format::

    {"messages": <messages the pass gave>, "bytes_skipped": <int>, "errors": [<str>, ...]}

What only one format keeps (ULog's list of corruptions, MCAP's muted notes while it looks
for chunks' real time ranges) stays in that format's reader.
"""

from __future__ import annotations

from polybag.errors import PolybagError
from polybag.model import RecoveryReport


class Recovery:
    """What a reader met of damage: ``errors`` (one line each), ``bytes_skipped``, ``first``."""

    __slots__ = ("bytes_skipped", "errors", "first")

    def __init__(self) -> None:
        self.errors: list[str] = []  # one line per problem, in the order the report gives them
        self.bytes_skipped = 0  # bytes passed over to get past damage
        self.first: PolybagError | None = None  # the reader sets it: raised when not recovering

    def note(self, error: str, skipped: int = 0) -> None:
        """One problem (its text), and the bytes skipped to get past it."""
        self.errors.append(error)
        self.bytes_skipped += skipped

    def report(self, messages: int) -> RecoveryReport:
        """The ``recovery_report`` of a pass over the messages that gave ``messages``."""
        return {"messages": messages, "bytes_skipped": self.bytes_skipped, "errors": list(self.errors)}
