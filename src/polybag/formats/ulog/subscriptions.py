"""The subscriptions (``A`` messages) of a ULog as the reader tracks them.

:class:`SubscriptionEntry` is a subscription with a usable format (its data messages are
read), :class:`UnusableSubscription` one whose format cannot be laid out (its data messages
are counted and skipped), and :class:`SubscriptionTable` the subscriptions in force while
the data section is read (which ``msg_id`` belongs to which).
"""

from __future__ import annotations

import numpy as np

from polybag.codecs.ulog import UlogType
from polybag.formats.ulog import records as rec
from polybag.model import Channel


class UnusableSubscription:
    """A subscription whose format cannot be compiled: its data messages are counted and
    skipped."""

    __slots__ = ("sub", "offset", "reason", "index", "count", "nbytes")

    def __init__(self, sub: rec.Subscription, offset: int, reason: str, index: int) -> None:
        self.sub = sub
        self.offset = offset  # of its A message
        self.reason = reason
        self.index = index  # position in the table's list of them
        self.count = 0
        self.nbytes = 0


class SubscriptionEntry:
    """A subscription as the reader tracks it: its compiled type, its channel, the offsets
    and timestamps of its data messages and (once gathered) its records."""

    __slots__ = ("sub", "type", "index", "channel", "selected", "positions", "count", "ts_us", "records")

    def __init__(self, sub: rec.Subscription, type: UlogType | None, index: int) -> None:  # noqa: A002
        self.sub = sub
        self.type = type
        self.index = index  # position in the subscription list
        self.channel: Channel | None = None
        self.selected = True
        self.positions: np.ndarray | None = None  # file offsets of its D messages (header start)
        self.count = 0  # number of its D messages
        self.ts_us: np.ndarray | None = None  # timestamps in us (unwrapped)
        self.records: np.ndarray | None = None  # its structured array, once gathered


class SubscriptionTable:
    """The subscriptions of a log: every usable one in order (``entries``), the one in force
    for each ``msg_id`` (``by_msg_id``), the unusable ones (``unusable``) and the index of
    the one in force for a ``msg_id`` among them (``unusable_by_msg_id``)."""

    __slots__ = ("entries", "by_msg_id", "unusable", "unusable_by_msg_id")

    def __init__(self) -> None:
        self.entries: list[SubscriptionEntry] = []
        self.by_msg_id: dict[int, SubscriptionEntry] = {}
        self.unusable: list[UnusableSubscription] = []
        self.unusable_by_msg_id: dict[int, int] = {}

    def key(self) -> tuple[int, int, int]:
        """Changes whenever a subscription is added (the msg_id tables are made again)."""
        return (len(self.entries), len(self.by_msg_id), len(self.unusable))
