"""What the recorder's parts share: a queued message, a snapshot job, per-topic counts,
the size overheads that keep ``--size`` honest, and two file helpers."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

# Bytes a message adds besides its payload (bag: record header, length, index entry; MCAP:
# message record and its index entry): enough to keep --size honest for small messages.
_BAG_MSG_OVERHEAD = 4 + 38 + 4 + 12
_MCAP_MSG_OVERHEAD = 31 + 16
_BAG_HEADER = 13 + 4096


@dataclass
class TopicStats:
    """Per-topic counts.  ``dropped`` is the sum of the reasons."""

    type: str = ""
    received: int = 0
    written: int = 0
    dropped_buffer: int = 0  # the queue (or the snapshot ring) was full
    dropped_limit: int = 0  # over -l/--limit
    dropped_stopped: int = 0  # arrived after the recording stopped, or left unwritten at the end
    dropped_window: int = 0  # snapshot: older than --snapshot-window
    dropped_type: int = 0  # refused: not the type the topic was first recorded with

    @property
    def dropped(self) -> int:
        return (
            self.dropped_buffer
            + self.dropped_limit
            + self.dropped_stopped
            + self.dropped_window
            + self.dropped_type
        )

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["dropped"] = self.dropped
        return d


class _Item:
    __slots__ = ("topic", "key", "data", "time")

    def __init__(self, topic: str, key: tuple[str, str, str, str, bool], data: bytes, t: int) -> None:
        self.topic = topic
        self.key = key  # (type, md5sum, definition, callerid, latching)
        self.data = data
        self.time = t


class _Snapshot:
    """One trigger: the ring's messages (in receive order), when, where to, and the caller's future."""

    __slots__ = ("items", "time", "path", "future")

    def __init__(self, items: list[_Item], t: float, path: str | None, future: Future[Path]) -> None:
        self.items = items
        self.time = t
        self.path = path
        self.future = future


def _free_bytes(path: str) -> int:
    return shutil.disk_usage(path).free


def _remove_if_unwritten(report: dict[str, Any], files: Iterable[str]) -> None:
    """After a failed start: delete ``files`` when ``report`` (a :meth:`Recorder.report`)
    counts no message written, so that no empty bag is left behind (a file that cannot be
    deleted is left)."""
    if report["totals"]["written"]:
        return
    for f in files:
        try:
            os.remove(f)
        except OSError:
            pass
