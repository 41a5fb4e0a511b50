"""The ULog data section read in batches of walked messages.

:meth:`BatchDecoder.read_segment` walks a segment of the data section (see
:mod:`polybag.formats.ulog.scan`) a batch of up to ``walk_limit`` messages at a time.  Each
batch is checked and sorted in bulk: every data message is matched to the subscription in
force for its ``msg_id`` and its size checked against that subscription's format, control
messages are handled one by one in file order, and the data offsets are kept with their
subscription index.  The common batch (the subscriptions stay as they are, every message
is sound) takes :meth:`BatchDecoder.fast_batch`: one table lookup per data message checks
and assigns it (:func:`match_fast`).  Any other goes through the steps of
:meth:`BatchDecoder.process_batch`: the new subscriptions parsed, data matched (by ``msg_id``
tables, or by sorted keys when a ``msg_id`` is subscribed twice), bad data messages dropped
or the first damage found, control messages handled, data offsets stored.  After damage,
reading resumes where :meth:`~polybag.formats.ulog.scan.MessageScanner.resync` says.

The hot kernels are plain functions: :func:`split_batch`, :func:`msg_id_tables`,
:func:`match_fast` and :func:`count_unusable`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

import numpy as np

from polybag.codecs.ulog import MAX_PAYLOAD
from polybag.formats.ulog import records as rec
from polybag.formats.ulog.damage import MAX_REPORTS, DamageLog
from polybag.formats.ulog.definitions import LogDefinitions
from polybag.formats.ulog.scan import (
    LOW16,
    SHIFT24,
    MappedLog,
    MessageScanner,
    ScanTuning,
    unsound_headers,
)
from polybag.formats.ulog.subscriptions import SubscriptionEntry, SubscriptionTable, UnusableSubscription


class MsgIdTables:
    """The lookup tables by msg_id of the data check (see :func:`msg_id_tables`).  (A plain
    class, as :data:`FastMatch` is a plain tuple: a NamedTuple costs ~0.1 ms of import
    time, paid by every process that opens a ULog.)"""

    __slots__ = ("key", "sub_of", "head_m", "lo_m", "hi_m", "ranged", "head_s")

    def __init__(
        self,
        key: tuple[int, int, int],
        sub_of: np.ndarray,
        head_m: np.ndarray,
        lo_m: np.ndarray,
        hi_m: np.ndarray,
        ranged: bool,
        head_s: np.ndarray,
    ) -> None:
        self.key = key  # the SubscriptionTable.key() they were made for
        self.sub_of = sub_of  # subscription index (-2 - index: no usable format, -1: none)
        self.head_m = head_m  # expected header word (size without trailing padding, "D", msg_id)
        self.lo_m = lo_m  # size range, for types with trailing padding
        self.hi_m = hi_m
        self.ranged = ranged  # whether any range is used
        self.head_s = head_s  # the expected header with the subscription index + 1 in its high bits

    def rekeyed(self, key: tuple[int, int, int]) -> MsgIdTables:
        """The same tables for the subscriptions of ``key``."""
        return MsgIdTables(key, self.sub_of, self.head_m, self.lo_m, self.hi_m, self.ranged, self.head_s)


# What :func:`match_fast` finds in a batch: the type bytes, sizes and msg_ids (views into
# the header words), each message's subscription index (-1: a control message), the
# indexes of the control messages, and those of data messages of subscriptions without a
# usable format (None: none looked for).
FastMatch = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, "np.ndarray | None"]


class WalkedBatch:
    """One batch of walked messages on the general path of
    :meth:`BatchDecoder.process_batch`: what is known of its data messages (those before the
    first unsound control message) as the steps go."""

    __slots__ = ("p", "t", "k", "ctrl", "d_idx", "dpos", "dwords", "msg_id", "dsize", "new_subs", "new_dead", "entries", "cand", "ok", "tables")

    def __init__(
        self,
        p: np.ndarray,
        t: np.ndarray,
        k: int,
        ctrl: np.ndarray,
        d_idx: np.ndarray,
        dpos: np.ndarray,
        dwords: np.ndarray,
        msg_id: np.ndarray,
        dsize: np.ndarray | None,
    ) -> None:
        self.p = p  # offsets of the messages
        self.t = t  # their type bytes (a view into the header words)
        self.k = k  # index of the first unsound control message (len(p): none)
        self.ctrl = ctrl  # indexes of the control messages before k
        self.d_idx = d_idx  # indexes of the data messages before k
        self.dpos = dpos  # their offsets
        self.dwords = dwords  # their header words
        self.msg_id = msg_id  # their msg_id
        self.dsize = dsize  # their body sizes without the msg_id (see sizes())
        # subscriptions (A) of this batch, by message index
        self.new_subs: list[tuple[int, SubscriptionEntry]] = []
        # those whose format does not compile (their data is counted and skipped)
        self.new_dead: list[tuple[int, UnusableSubscription]] = []
        self.entries: list[SubscriptionEntry] = []  # every subscription, by index
        # per data message: subscription index, -1 for none, -2 - index of a UnusableSubscription
        self.cand: np.ndarray = np.zeros(0, np.int64)
        self.ok: np.ndarray = np.zeros(0, bool)  # valid for cand
        # the msg_id tables of _match_by_table with this batch's subscriptions (they serve
        # the next batches once the whole batch took effect)
        self.tables: MsgIdTables | None = None

    def sizes(self) -> np.ndarray:
        """Body sizes of the data messages without the msg_id (made on first need)."""
        if self.dsize is None:
            self.dsize = (self.dwords & np.uint64(0xFFFF)).astype(np.int32) - 2
        return self.dsize

    def reason(self, w: int) -> str:
        """Why data message ``w`` is bad."""
        dsize = self.sizes()
        if dsize[w] < 0:
            return f"data message of {int(dsize[w]) + 2} bytes cannot hold its msg_id"
        if self.cand[w] < 0:
            return f"data message for msg_id {int(self.msg_id[w])} that has no subscription"
        e = self.entries[int(self.cand[w])]
        assert e.type is not None
        return (
            f"data message for {e.sub.name} has {int(dsize[w])} bytes, expected "
            f"{e.type.min_size}..{e.type.size}"
        )


def split_batch(p: np.ndarray, words: np.ndarray) -> WalkedBatch:
    """The messages at ``p`` (``words``: their header words) sorted into control messages
    and data messages, up to the first unsound control message."""
    n_p = len(p)
    # size, type and msg_id are strided views into the header words (no copies)
    t = np.ndarray(buffer=words, dtype=np.uint8, shape=(n_p,), strides=(8,), offset=2)
    size_all = np.ndarray(buffer=words, dtype="<u2", shape=(n_p,), strides=(8,), offset=0)
    mid_all = np.ndarray(buffer=words, dtype="<u2", shape=(n_p,), strides=(8,), offset=3)
    is_d = t == rec.DATA
    other = np.flatnonzero(~is_d)
    tt = t[other]
    hits = np.flatnonzero(unsound_headers(tt, size_all[other]))
    k = int(other[hits[0]]) if len(hits) else n_p
    ctrl = other[other < k]
    if len(other) == 0:  # the common case: data messages only
        d_idx = np.arange(n_p)
        dpos = p
        dwords = words
        msg_id = mid_all
    else:
        dmask = is_d[:k]
        d_idx = np.flatnonzero(dmask)
        dpos = p[:k][dmask]
        dwords = words[:k][dmask]
        msg_id = (  # bytes 3-4 of each header word (a view, no copy)
            np.ndarray(buffer=dwords, dtype="<u2", shape=(len(dwords),), strides=(8,), offset=3)
            if len(dwords)
            else np.zeros(0, "<u2")
        )
    # body sizes without the msg_id: only needed where a size is checked one by one
    dsize = (dwords & np.uint64(0xFFFF)).astype(np.int32) - 2 if len(dwords) < 4096 else None
    # (a D too short to hold its msg_id reads other bytes and fails the size check)
    return WalkedBatch(p, t, k, ctrl, d_idx, dpos, dwords, msg_id, dsize)


def msg_id_tables(
    entries: list[tuple[int, SubscriptionEntry, int]],
    dead_entries: list[tuple[int, UnusableSubscription, int]],
    key: tuple[int, int, int],
) -> MsgIdTables:
    """The lookup tables by msg_id of the data check: ``(key, sub_of, head_m, lo_m, hi_m,
    ranged, head_s)``: subscription index (-2 - index: no usable format), expected header
    word, size range (for types with trailing padding), whether any range is used, and the
    expected header with the subscription index + 1 in its high bits (the fast path)."""
    sub_of = np.full(65536, -1, dtype=np.int32)
    head_m = np.zeros(65536, dtype=np.uint64)
    lo_m = np.full(65536, 1 << 30, dtype=np.int32)
    hi_m = np.full(65536, -1, dtype=np.int32)
    ranged = False
    for mid, entry, _ in entries:
        if entry.type is not None:
            sub_of[mid] = entry.index
            if entry.type.min_size + 2 <= 0xFFFF:
                head_m[mid] = (entry.type.min_size + 2) | (rec.DATA << 16) | (mid << 24)
            if entry.type.min_size < entry.type.size or entry.type.min_size + 2 > 0xFFFF:
                lo_m[mid], hi_m[mid] = entry.type.min_size, entry.type.size
                ranged = True
    for mid, dead, _ in dead_entries:  # any size: counted, then skipped
        sub_of[mid] = -2 - dead.index
        lo_m[mid], hi_m[mid] = 0, MAX_PAYLOAD
        ranged = True
    # expected header (low 40 bits) and subscription index + 1 (high bits) in
    # one word: the fast path checks and assigns a data message with one lookup
    live = np.maximum(sub_of, -1).astype(np.int64) + 1
    head_s = head_m | (live.astype(np.uint64) << np.uint64(40))
    return MsgIdTables(key, sub_of, head_m, lo_m, hi_m, ranged, head_s)


def match_fast(words: np.ndarray, tables: MsgIdTables, any_unusable: bool) -> FastMatch | None:
    """The fast path of a batch of header ``words`` (see
    :meth:`~polybag.formats.ulog.scan.MappedLog.words`): every data message checked and
    assigned its subscription with one lookup in ``tables``, or None when the batch needs
    the general path (a data message that does not fit, an unsound control message, a
    subscription).  ``any_unusable``: whether a msg_id in force has no usable format (its
    data messages are found to be counted)."""
    sub_of, lo_m, hi_m, ranged, head_s = tables.sub_of, tables.lo_m, tables.hi_m, tables.ranged, tables.head_s
    dead = None
    n_p = len(words)
    t = np.ndarray(buffer=words, dtype=np.uint8, shape=(n_p,), strides=(8,), offset=2)
    size = np.ndarray(buffer=words, dtype="<u2", shape=(n_p,), strides=(8,), offset=0)
    mid = np.ndarray(buffer=words, dtype="<u2", shape=(n_p,), strides=(8,), offset=3)
    idx = np.right_shift(words, SHIFT24)
    idx &= LOW16
    g = head_s[idx.view(np.int64)]
    del idx
    x = g ^ words
    x <<= np.uint64(24)
    bad = np.flatnonzero(x != 0)
    del x
    ctrl = bad
    if len(bad):
        isd = t[bad] == rec.DATA
        if isd.any():
            if not ranged:
                return None
            dbad = bad[isd]
            rm = mid[dbad]
            rs = size[dbad].astype(np.int64) - 2
            if not ((hi_m[rm] >= 0) & (rs >= lo_m[rm]) & (rs <= hi_m[rm])).all():
                return None
            ctrl = bad[~isd]
            if any_unusable:
                dead = dbad[sub_of[rm] <= -2]
        tt = t[ctrl]
        if unsound_headers(tt, size[ctrl]).any() or (tt == rec.ADD_LOGGED).any():
            return None
    cand = (g >> np.uint64(40)).astype(np.int32)
    del g
    cand -= 1
    cand[ctrl] = -1
    return t, size, mid, cand, ctrl, dead


def count_unusable(unusable: list[UnusableSubscription], cand: np.ndarray, nbytes: np.ndarray) -> None:
    """Count data messages of subscriptions without a usable format (``cand``: -2 - index
    into ``unusable``; ``nbytes``: their sizes) into those subscriptions."""
    k = -2 - cand.astype(np.int64)
    counts = np.bincount(k)
    sums = np.bincount(k, weights=nbytes.astype(np.float64))
    for i in np.flatnonzero(counts).tolist():
        d = unusable[i]
        d.count += int(counts[i])
        d.nbytes += int(sums[i])


class BatchDecoder:
    """The data section of a log read in batches of walked messages (see the module
    notes): subscriptions into ``subs``, control messages through ``definitions``, damage
    into ``damage``, and each batch's data offsets with their subscription index into
    ``pos_chunks`` and ``sub_chunks`` (-1: a control message's offset, kept by the fast
    path; those of dropped data are left out)."""

    def __init__(
        self,
        log: MappedLog,
        scanner: MessageScanner,
        definitions: LogDefinitions,
        damage: DamageLog,
        subs: SubscriptionTable,
        tuning: Callable[[], ScanTuning],
    ) -> None:
        self.log = log
        self.scanner = scanner
        self.definitions = definitions
        self.damage = damage
        self.path = damage.path
        self.subs = subs
        self.tuning = tuning
        # msg_id lookup tables of the data check, kept while the subscriptions stay the same
        self.tables: MsgIdTables | None = None
        self.pos_chunks: list[np.ndarray] = []
        self.sub_chunks: list[np.ndarray] = []
        self.pending_damage: list[tuple[int, str]] = []  # bad subscription messages of a batch
        self.bad_reason = "damaged message"  # why the last damage that needs a resync is bad

    def read_segment(self, start: int, end: int, last: bool) -> None:
        """Read the data section from ``start`` to ``end`` (``last``: the log ends there; else
        an appended part begins there) in batches, resuming after damage."""
        u8 = self.log.u8
        pos = start
        walk_limit = self.tuning().walk_limit
        # a small first batch: it usually holds the subscriptions (the general path), and
        # the batches after it take the fast path with the tables it made
        limit = min(walk_limit, 4096)
        while pos < end:
            p, words, stop = self.scanner.walk_words(pos, end, limit)
            more = len(p) >= limit and stop + 3 <= end and stop + 3 + int(self.log.u16[stop]) <= end
            bad = self.process_batch(p, end, words)
            if len(p):
                self.log.release(pos, int(p[-1]))
            if bad is not None:
                bad_pos = int(p[bad])
                nxt = self.scanner.resync(bad_pos, end, self.subs)
                self.damage.damaged(bad_pos, self.bad_reason, nxt - bad_pos)
                pos = nxt
                limit = 4096  # after damage, small steps first so that more damage stays cheap
                continue
            limit = min(limit * 8, walk_limit)
            if more:
                pos = stop
                continue
            if stop < end and stop + 3 <= end and not self.scanner.plausible_header(stop, self.subs):
                # not a cut-off message but a damaged header: skip to the next good one
                self.bad_reason = (
                    f"invalid message header (type {int(u8[stop + 2])}, size {int(self.log.u16[stop])})"
                )
                nxt = self.scanner.resync(stop, end, self.subs)
                self.damage.damaged(stop, self.bad_reason, nxt - stop)
                pos = nxt
                limit = 4096
                continue
            if stop < end:
                if last:
                    n = int(u8[stop]) | (int(u8[stop + 1]) << 8) if stop + 2 <= end else -1
                    what = f"{n} bytes of message" if n >= 0 else "a 3-byte message header"
                    self.damage.damaged(
                        stop,
                        f"log ends inside a message: expected {what}, file has {end - stop} bytes left",
                        end - stop,  # the cut-off tail is lost
                        truncated=True,
                    )
                # else: the partial message before an appended offset is discarded (spec)
            break

    def fast_batch(self, p: np.ndarray, words: np.ndarray) -> bool:
        """The common batch, handled in bulk (:func:`match_fast`): the subscriptions stay as
        they are (their lookup tables are made), every data message is valid for its
        subscription, and the other messages are sound control messages (no ``A``).
        Returns False, having changed nothing, for any other batch (the general path of
        :meth:`process_batch` then handles it).  Data offsets are stored with their
        subscription index, other messages' offsets with -1 (no copy of the offsets)."""
        tables = self.tables
        if tables is None or tables.key != self.subs.key() or self.pending_damage:
            return False
        found = match_fast(words, tables, bool(self.subs.unusable_by_msg_id))
        if found is None:
            return False
        t, size, mid, cand, ctrl, dead = found
        if dead is not None and len(dead):
            count_unusable(self.subs.unusable, tables.sub_of[mid[dead]], size[dead].astype(np.int64) + 3)
        u16 = self.log.u16
        for ci in ctrl.tolist():
            q = int(p[ci])
            self.definitions.control(int(t[ci]), q, int(u16[q]))
        self.pos_chunks.append(p)
        self.sub_chunks.append(cand)
        return True

    def process_batch(self, p: np.ndarray, end: int, words: np.ndarray | None = None) -> int | None:
        """Handle complete messages at offsets ``p`` (``words``: their header words, see
        :meth:`MappedLog.words`); index of the first damaged one, or None."""
        if len(p) == 0:
            return None
        words = np.ascontiguousarray(self.log.words(p) if words is None else words, dtype="<u8")
        if self.fast_batch(p, words):
            return None
        bt = split_batch(p, words)
        self._parse_subscriptions(bt)
        new_ids = [e.sub.msg_id for _, e in bt.new_subs] + [d.sub.msg_id for _, d in bt.new_dead]
        known_ids = set(self.subs.by_msg_id) | set(self.subs.unusable_by_msg_id)
        if len(set(new_ids)) == len(new_ids) and not (set(new_ids) & known_ids):
            self._match_by_table(bt)  # common case: each msg_id subscribed once
        else:
            self._match_by_keys(bt)
        b, dropped = self._drop_bad_data(bt)
        k = bt.k
        if b == k and k < len(p):
            self.bad_reason = f"invalid message header (type {int(bt.t[k])}, size {int(self.log.u16[p[k]])})"
        # Everything before b, in file order: control messages one by one, D in bulk.
        for q, msg in self.pending_damage:
            if q < (int(p[b]) if b < len(p) else end):
                self.damage.damaged(q, msg)
        self.pending_damage = []
        self._apply_controls(bt, b)
        self._store_data(bt, b, dropped)
        if bt.tables is not None and b == len(p) and len(self.subs.entries) == len(bt.entries):
            # every subscription of the batch took effect: its tables are those of the
            # subscriptions now in force (each msg_id once), for the next batch's fast path
            self.tables = bt.tables.rekeyed(self.subs.key())
        return b if b < len(p) else None

    def _parse_subscriptions(self, bt: WalkedBatch) -> None:
        """The subscriptions (A) of the batch, parsed up front (a D belongs to the latest A
        for its msg_id before it); those whose format does not compile are counted and
        skipped (cand -2 - index), one damage report for each at the end."""
        view = self.log.view
        u16 = self.log.u16
        new_subs, new_dead = bt.new_subs, bt.new_dead
        for i in bt.ctrl[bt.t[bt.ctrl] == rec.ADD_LOGGED].tolist():
            q = int(bt.p[i])
            sz = int(u16[q])
            try:
                sub = rec.Subscription.unpack(view[q + 3 : q + 3 + sz], q)
            except (ValueError, struct.error) as e:
                self.pending_damage.append((q, f"bad subscription message: {e}"))
                continue
            utype = self.definitions.type_of(sub.name)
            if utype is None:
                why = self.definitions.type_errors.get(sub.name, f"no format for type {sub.name!r}")
                new_dead.append((i, UnusableSubscription(sub, q, why, len(self.subs.unusable) + len(new_dead))))
                continue
            new_subs.append((i, SubscriptionEntry(sub, utype, len(self.subs.entries) + len(new_subs))))
        bt.entries = self.subs.entries + [e for _, e in new_subs]

    def _match_by_table(self, bt: WalkedBatch) -> None:
        """``cand`` and ``ok`` of the batch's data messages by lookup tables by msg_id
        (each msg_id subscribed once).  A data header without trailing padding (size, "D",
        msg_id: PX4 leaves the padding out) is one 40-bit value: a single table lookup and
        compare checks it; the others of types with trailing padding are checked against
        the range."""
        msg_id, dwords = bt.msg_id, bt.dwords
        new_subs, new_dead = bt.new_subs, bt.new_dead
        entries = [(mid, e, -1) for mid, e in self.subs.by_msg_id.items()]
        entries += [(e.sub.msg_id, e, i) for i, e in new_subs]
        dead_entries = [(mid, self.subs.unusable[k], -1) for mid, k in self.subs.unusable_by_msg_id.items()]
        dead_entries += [(d.sub.msg_id, d, i) for i, d in new_dead]
        key = self.subs.key()
        if new_subs or new_dead or self.tables is None or self.tables.key != key:
            tables = msg_id_tables(entries, dead_entries, key)
            if not new_subs and not new_dead:  # the same tables serve the next chunks
                self.tables = tables
            else:
                bt.tables = tables
        else:
            tables = self.tables
        sub_of, head_m, lo_m, hi_m, ranged = tables.sub_of, tables.head_m, tables.lo_m, tables.hi_m, tables.ranged
        cand = sub_of[msg_id]
        # the low 40 bits equal the expected header (in place: large temporaries are slow)
        head = head_m[msg_id]
        head ^= dwords
        head <<= np.uint64(24)
        ok = head == 0
        del head
        if ranged:
            rest = np.flatnonzero(~ok)
            rest = rest[hi_m[msg_id[rest]] >= 0]
            if len(rest):
                rs = (dwords[rest] & np.uint64(0xFFFF)).astype(np.int32) - 2
                rm = msg_id[rest]
                ok[rest] = (rs >= lo_m[rm]) & (rs <= hi_m[rm])
        if new_subs or new_dead:  # data before its subscription in this chunk has none yet
            a_at = np.full(65536, -1, dtype=np.int64)
            for mid, _entry, i in entries:
                a_at[mid] = i
            for mid, _dead, i in dead_entries:
                a_at[mid] = i
            early = a_at[msg_id] >= bt.d_idx
            cand = np.where(early, -1, cand)
            ok &= ~early
        bt.cand, bt.ok = cand, ok

    def _match_by_keys(self, bt: WalkedBatch) -> None:
        """``cand`` and ``ok`` of the batch's data messages by sorted (msg_id, position)
        keys: a msg_id subscribed more than once in the batch, or again."""
        new_subs, new_dead, d_idx = bt.new_subs, bt.new_dead, bt.d_idx
        nmax = len(bt.p) + 1
        mid64 = bt.msg_id.astype(np.int64)
        keys = [mid * nmax for mid in self.subs.by_msg_id] + [e.sub.msg_id * nmax + i + 1 for i, e in new_subs]
        subs_ = [e.index for e in self.subs.by_msg_id.values()] + [e.index for _, e in new_subs]
        keys += [mid * nmax for mid in self.subs.unusable_by_msg_id] + [d.sub.msg_id * nmax + i + 1 for i, d in new_dead]
        subs_ += [-2 - k for k in self.subs.unusable_by_msg_id.values()] + [-2 - d.index for _, d in new_dead]
        order = np.argsort(np.asarray(keys, dtype=np.int64), kind="stable")
        ekey = np.asarray(keys, dtype=np.int64)[order]
        esub = np.asarray(subs_, dtype=np.int64)[order]
        cand = np.full(len(d_idx), -1, dtype=np.int64)
        if len(ekey):
            loc = np.searchsorted(ekey, mid64 * nmax + d_idx + 1, side="left") - 1
            locc = np.maximum(loc, 0)
            found = (loc >= 0) & ((ekey[locc] // nmax) == mid64)
            cand = np.where(found, esub[locc], -1)
        live = np.maximum(cand, -1)
        all_entries = bt.entries
        lo = np.array([e.type.min_size if e.type else 1 << 30 for e in all_entries] + [1 << 30], np.int64)
        hi = np.array([e.type.size if e.type else -1 for e in all_entries] + [-1], np.int64)
        sizes = bt.sizes()
        bt.cand = cand
        bt.ok = ((cand >= 0) & (sizes >= lo[live]) & (sizes <= hi[live])) | ((cand <= -2) & (sizes >= 0))

    def _drop_bad_data(self, bt: WalkedBatch) -> tuple[int, np.ndarray]:
        """Where the batch's good part ends (``b``: the first damage) and the bad data
        messages before it, which are dropped.  A bad data message followed by a good
        message is dropped where it is (like pyulog); one followed by garbage means the size
        chain is lost: resynchronise."""
        d_idx, k, n_p = bt.d_idx, bt.k, len(bt.p)
        badd = np.flatnonzero(~bt.ok)
        b = k
        dropped = np.zeros(0, dtype=np.int64)
        if len(badd):
            good = np.ones(n_p + 1, dtype=bool)
            good[k:] = False
            good[d_idx[badd]] = False
            nxt_good = good[d_idx[badd] + 1] | (d_idx[badd] + 1 == n_p)
            cut = np.flatnonzero(~nxt_good)
            if len(cut) and int(d_idx[badd[cut[0]]]) < k:
                b = int(d_idx[badd[cut[0]]])
                self.bad_reason = bt.reason(int(badd[cut[0]]))
            dropped = badd[d_idx[badd] < b]
            self._report_dropped(bt, dropped)
        return b, dropped

    def _report_dropped(self, bt: WalkedBatch, dropped: np.ndarray) -> None:
        """The damage reports of the dropped data messages (indexes among the batch's data
        messages): one each (the first ``MAX_REPORTS``) and one line of
        ``recovery_report["errors"]`` per kind: no room for the msg_id (0), no subscription
        for a msg_id (1), a wrong size for a subscription (2)."""
        dpos, sizes = bt.dpos, bt.sizes
        for w in dropped[:MAX_REPORTS].tolist():
            q = int(dpos[w])
            self.damage.damaged(q, bt.reason(w) + " (dropped)", int(sizes()[w]) + 5, grouped=True)
        if len(dropped) > MAX_REPORTS:
            extra = dropped[MAX_REPORTS:]
            self.damage.unreported(len(extra), int((sizes()[extra] + 5).sum()))
        if not len(dropped):
            return
        ds = sizes()[dropped]
        dc = np.asarray(bt.cand)[dropped].astype(np.int64)
        kind = np.where(ds < 0, 0, np.where(dc < 0, 1, 2))
        what = np.where(kind == 1, bt.msg_id[dropped].astype(np.int64), np.where(kind == 2, dc, 0))
        gkey = kind * (1 << 20) + what
        uk, first, inv = np.unique(gkey, return_index=True, return_inverse=True)
        counts = np.bincount(inv)
        nbytes = np.bincount(inv, weights=(ds + 5).astype(np.float64))
        for j, w in enumerate(dropped[first].tolist()):
            self.damage.drop_group(
                (int(uk[j]) >> 20, int(uk[j]) & 0xFFFFF),
                int(dpos[w]),
                bt.reason(w) + " (dropped)",
                int(counts[j]),
                int(nbytes[j]),
            )

    def _apply_controls(self, bt: WalkedBatch, b: int) -> None:
        """The control messages of the batch before ``b``, one by one in file order."""
        t, p, u16 = bt.t, bt.p, self.log.u16
        new_by_i = dict(bt.new_subs)
        dead_by_i = dict(bt.new_dead)
        for ci in bt.ctrl[bt.ctrl < b].tolist():
            tc = int(t[ci])
            q = int(p[ci])
            sz = int(u16[q])
            if tc == rec.ADD_LOGGED:
                self._add_subscription(q, new_by_i.get(ci), dead_by_i.get(ci))
                continue
            self.definitions.control(tc, q, sz)

    def _add_subscription(self, q: int, entry: SubscriptionEntry | None, dead: UnusableSubscription | None) -> None:
        """The subscription (A) at ``q`` takes effect (``dead``: one without a usable
        format; neither: its message could not be parsed)."""
        mid = entry.sub.msg_id if entry is not None else dead.sub.msg_id if dead is not None else -1
        if mid >= 0 and (mid in self.subs.by_msg_id or mid in self.subs.unusable_by_msg_id):
            name = entry.sub.name if entry is not None else dead.sub.name if dead is not None else ""
            self.damage.note(f"offset {q}: msg_id {mid} subscribed again ({name})")
        if entry is not None:
            self.subs.entries.append(entry)
            self.definitions.ulog.subscriptions.append(entry.sub)
            self.subs.unusable_by_msg_id.pop(mid, None)
            self.subs.by_msg_id[mid] = entry
        elif dead is not None:
            self.subs.unusable.append(dead)
            self.subs.by_msg_id.pop(mid, None)
            self.subs.unusable_by_msg_id[mid] = dead.index

    def _store_data(self, bt: WalkedBatch, b: int, dropped: np.ndarray) -> None:
        """The offsets and subscription indexes of the batch's data messages before ``b``,
        without the ``dropped`` ones."""
        nd = int(np.searchsorted(bt.d_idx, b))
        if not nd:
            return
        dpos = bt.dpos
        cnd = bt.cand[:nd].astype(np.int32)  # a copy
        keep = None
        if len(dropped):
            keep = np.ones(nd, dtype=bool)
            keep[dropped] = False
        # a data message of a subscription without a usable format (-2 - index) is counted
        # and dropped; such candidates may exist although self.subs.unusable_by_msg_id is empty again (the
        # msg_id was subscribed again later in this batch)
        dead_at = cnd <= -2
        if dead_at.any():
            if keep is not None:
                dead_at &= keep
            dd = np.flatnonzero(dead_at)
            if len(dd):
                count_unusable(self.subs.unusable, cnd[dd], bt.sizes()[dd].astype(np.int64) + 5)
                cnd[dd] = -1  # kept like a control message's offset: dropped in _finish
        if keep is not None:
            self.pos_chunks.append(dpos[:nd][keep])
            self.sub_chunks.append(cnd[keep])
        else:
            self.pos_chunks.append(dpos[:nd])
            self.sub_chunks.append(cnd)
