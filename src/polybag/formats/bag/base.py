"""What the bag readers share (the 2.0 reader and the older versions'): :class:`BagReader`.

* Damage bookkeeping: a reader keeps one :class:`~polybag.formats.shared.recovery.Recovery` (``_recovery``):
  it notes each problem there, with the bytes it skipped, and keeps the first as
  ``_recovery.first`` when it does not recover; a pass (:meth:`BagReader.damage_pass`)
  leaves a recovering reader's ``recovery_report`` when it ends (also when its consumer
  stops early) and raises the first problem once it has given every intact message.
  ``scan_errors``, ``scan_error`` and ``bytes_skipped`` read the same bookkeeping.
* The summary's common part (:meth:`BagReader.bag_summary`).
* :func:`gc_paused`: Message objects hold no cycles, so building a batch of them with the
  cyclic GC paused halves the cost (the collector would scan them again and again).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from polybag.errors import PolybagError
from polybag.formats.shared.recovery import Recovery
from polybag.model import Channel, Summary
from polybag.reader import Reader

from .info import BagInfoMixin


class PassCount:
    """The messages a pass has given so far (``count``)."""

    count = 0


class BagReader(BagInfoMixin, Reader):
    """The base of the bag readers."""

    format = "bag"
    version: str
    size: int
    recover: bool
    recovery_report: dict[str, Any] | None
    _recovery: Recovery  # damage met; ``first``: raised when not recovering

    @property
    def scan_errors(self) -> list[str]:
        """Every problem found so far, as text."""
        return self._recovery.errors

    @property
    def scan_error(self) -> PolybagError | None:
        """The first problem, raised after the intact messages when not recovering."""
        return self._recovery.first

    @property
    def bytes_skipped(self) -> int:
        """Bytes passed over to get past damage."""
        return self._recovery.bytes_skipped

    def bag_summary(self, channels: dict[int, Channel], **fields: Any) -> Summary:
        """The bag's :class:`Summary` of ``channels`` (with their schemas), the rest from ``fields``."""
        schemas = {ch.schema.id: ch.schema for ch in channels.values() if ch.schema is not None}
        return Summary(
            format="bag",
            profile="ros1",
            version=self.version,
            schemas=schemas,
            channels=channels,
            file_size=self.size,
            **fields,
        )

    @contextmanager
    def damage_pass(self) -> Iterator[PassCount]:
        """One pass over the messages: ``with self.damage_pass() as done:`` and count what it
        gives in ``done.count``."""
        done = PassCount()
        try:
            yield done
        finally:
            if self.recover:
                self.recovery_report = self._recovery.report(done.count)
        if self._recovery.first is not None:
            raise self._recovery.first


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic GC off for the block (back on after it, if it was on)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
