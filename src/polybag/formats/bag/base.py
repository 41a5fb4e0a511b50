"""What the bag readers share (the 2.0 reader and the older versions'): :class:`BagReader`.

* Damage bookkeeping: a reader notes each problem in ``scan_errors`` and keeps the first as
  ``scan_error``; a pass (:meth:`BagReader.damage_pass`) leaves a recovering reader's
  ``recovery_report`` when it ends (also when its consumer stops early) and raises
  ``scan_error`` once it has given every intact message.
* The summary's common part (:meth:`BagReader.bag_summary`).
* :func:`gc_paused`: Message objects hold no cycles, so building a batch of them with the
  cyclic GC paused halves the cost (the collector would scan them again and again).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from polybag.errors import FormatError
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
    scan_error: FormatError | None  # the first problem: raised when not recovering
    scan_errors: list[str]  # every problem found, as text
    bytes_skipped: int

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
                self.recovery_report = {
                    "messages": done.count,
                    "bytes_skipped": self.bytes_skipped,
                    "errors": list(self.scan_errors),
                }
        if self.scan_error is not None:
            raise self.scan_error


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
