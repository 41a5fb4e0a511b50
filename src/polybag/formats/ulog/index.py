"""The one pass over a ULog at open: :func:`read_index` reads the file header, the
definitions section and the data section (one segment per appended part, see
:func:`data_segments`) and returns what the reader needs afterwards as a
:class:`UlogIndex`: the subscriptions, the offsets of the data messages with their
subscription, the logged strings and timed control messages, and the damage found.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from polybag.errors import FormatError, TruncatedError
from polybag.formats.ulog import records as rec
from polybag.formats.ulog.batches import BatchDecoder
from polybag.formats.ulog.damage import DamageLog, FirstDamage
from polybag.formats.ulog.definitions import LogDefinitions, LoggedEntry, TimedEntry
from polybag.formats.ulog.facts import UlogData
from polybag.formats.ulog.scan import MappedLog, MessageScanner, ScanTuning
from polybag.formats.ulog.subscriptions import SubscriptionTable
from polybag.model import RecoveryReport


class UlogIndex:
    """What the pass at open found in a log (a plain class: a NamedTuple costs ~0.1 ms of
    import time, paid by every process that opens a ULog)."""

    __slots__ = (
        "data_start",
        "subscriptions",
        "positions",
        "subscription_indexes",
        "logged",
        "timed",
        "first_damage",
        "recovery_report",
        "scanner",
    )

    def __init__(
        self,
        data_start: int,
        subscriptions: SubscriptionTable,
        positions: list[np.ndarray],
        subscription_indexes: list[np.ndarray],
        logged: list[LoggedEntry],
        timed: list[TimedEntry],
        first_damage: FirstDamage | None,
        recovery_report: RecoveryReport,
        scanner: MessageScanner,
    ) -> None:
        self.data_start = data_start  # where the data section starts
        self.subscriptions = subscriptions
        self.positions = positions  # chunks of data message offsets (and of control messages)
        self.subscription_indexes = subscription_indexes  # their subscription index (-1: none)
        self.logged = logged  # the logged strings
        self.timed = timed  # parameter changes, dropouts and syncs, timed by the data later
        self.first_damage = first_damage  # what a read that does not recover raises
        self.recovery_report = recovery_report
        self.scanner = scanner  # the message boundaries of the data section


def data_segments(ulog: UlogData, pos: int, size: int, note: Callable[[str], None]) -> list[tuple[int, int, bool]]:
    """The parts of the data section from ``pos``: ``(start, end, last)``, split at the
    appended offsets of the flag bits (an offset outside the data section is noted and
    ignored)."""
    ends: list[int] = []
    if ulog.has_data_appended:
        prev = pos
        for off in ulog.appended_offsets:
            if off < prev or off > size:
                # e.g. a log cut before its appended part: the data itself is fine
                note(f"appended offset {off} is outside the data section ({prev}..{size}); ignored")
                continue
            ends.append(off)
            prev = off
    out = []
    start = pos
    for e in ends:
        out.append((start, e, False))
        start = e
    out.append((start, size, True))
    return out


def read_index(log: MappedLog, ulog: UlogData, damage: DamageLog, tuning: Callable[[], ScanTuning]) -> UlogIndex:
    """Read the log at open: file header, definitions section, data section (one segment
    per appended part); the facts go into ``ulog``, the damage into ``damage``."""
    view, size, path = log.view, log.size, damage.path
    if size < rec.HEADER.size:
        raise TruncatedError(f"expected a 16-byte ULog header, file has {size} bytes", path, 0)
    if bytes(view[:7]) != rec.MAGIC:
        raise FormatError(f"expected ULog magic {rec.MAGIC!r}, found {bytes(view[:7])!r}", path, 0)
    hdr = rec.FileHeader.unpack(view)
    ulog.version = hdr.version
    ulog.start_timestamp = hdr.timestamp
    if hdr.version > 1:
        damage.note(f"unknown ULog version {hdr.version}; reading it anyway")
    definitions = LogDefinitions(log, ulog, damage)
    pos = definitions.read_section(rec.HEADER.size)
    scanner = MessageScanner(log, pos, definitions.data_sizes, tuning)
    subs = SubscriptionTable()
    decoder = BatchDecoder(log, scanner, definitions, damage, subs, tuning)
    for seg_start, seg_end, last in data_segments(ulog, pos, size, damage.note):
        decoder.read_segment(seg_start, seg_end, last)
    scanner.forget_candidates()
    report = damage.settle(subs.unusable)
    return UlogIndex(
        pos,
        subs,
        decoder.pos_chunks,
        decoder.sub_chunks,
        definitions.logged,
        definitions.timed,
        damage.first,
        report,
        scanner,
    )
