"""What a ULog says about itself: the definitions section and the control messages.

The definitions section (after the file header, up to the first subscription or logged
string) holds the message formats (``F``), info (``I``, ``M``), parameters and their
defaults (``P``, ``Q``) and the flag bits (``B``); it is read message by message at open
(:meth:`LogDefinitions.read_section`).  The control messages found later in the data
section (parameter changes, dropouts, syncs, logged strings, unsubscriptions) go through the
same handler, :meth:`LogDefinitions.handle_control`.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from polybag.codecs.ulog import UlogType, compile_type, parse_format
from polybag.errors import UnsupportedError
from polybag.formats.ulog import records as rec
from polybag.formats.ulog.damage import DamageLog
from polybag.formats.ulog.facts import UlogData
from polybag.formats.ulog.scan import LETTER_TYPES, MAX_UNKNOWN_SIZE, MIN_BODY_TABLE, RESYNC_WINDOW, MappedLog

# (file offset, level, timestamp us, tag, text) of a logged string
LoggedEntry = tuple[int, int, int, "int | None", bytes]
# ("P" parameter change / "O" dropout / "S" sync, file offset, payload): the control
# messages whose time is the largest data timestamp before them (worked out later)
TimedEntry = tuple[str, int, Any]


class LogDefinitions:
    """The definitions section and the control messages of a log: what they set goes into
    ``ulog`` (a :class:`~polybag.formats.ulog.facts.UlogData`), the logged strings into
    ``logged`` and the control messages timed by the data into ``timed``; damage and
    warnings into ``damage``.  Also the compiled layout of each format (:meth:`type_of`)."""

    def __init__(self, log: MappedLog, ulog: UlogData, damage: DamageLog) -> None:
        self.log = log
        self.ulog = ulog
        self.damage = damage
        self.types: dict[str, UlogType | None] = {}
        self.type_errors: dict[str, str] = {}  # why a format did not compile
        self.logged: list[LoggedEntry] = []
        self.timed: list[TimedEntry] = []

    def read_section(self, pos: int) -> int:
        """Read the definitions section from ``pos`` (after the file header); returns where
        the data section starts: at the first subscription or logged string (or the end of
        the file)."""
        view, size = self.log.view, self.log.size
        first = True
        while pos + 3 <= size:
            n, t = rec.MSG_HEADER.unpack_from(view, pos)
            if t in (rec.ADD_LOGGED, rec.LOGGING, rec.LOGGING_TAGGED):
                return pos
            if pos + 3 + n > size:
                self.damage.damaged(
                    pos,
                    f"expected {n} bytes of message {chr(t) if 32 <= t < 127 else t!r}, file has "
                    f"{size - pos - 3} left",
                    size - pos,  # the cut-off tail is lost
                    truncated=True,
                )
                return size
            if t not in rec.KNOWN_TYPES or t == rec.DATA:
                pos = self._skip_definition(t, n, pos)
                first = False
                continue
            self._definition(t, view[pos + 3 : pos + 3 + n], pos, first)
            first = False
            pos += 3 + n
        if pos < size:
            self.damage.damaged(
                pos, f"expected a 3-byte message header, file has {size - pos} bytes left", size - pos, truncated=True
            )
            return size
        return pos

    def _skip_definition(self, t: int, n: int, pos: int) -> int:
        """Past a message of an unknown type ``t`` (or a data message) at ``pos`` in the
        definitions section: the next message, or the next plausible header when this is
        none."""
        if t == 0 or n == 0 or n > MAX_UNKNOWN_SIZE or not LETTER_TYPES[t]:
            # not a message header: look for the next one a byte further on
            nxt = self._resync_definitions(pos + 1)
            self.damage.damaged(pos, f"invalid message header (type {t}, size {n})", nxt - pos)
            return nxt
        self.damage.unknown_type(t, n, pos)
        return pos + 3 + n

    def _definition(self, t: int, body: memoryview, pos: int, first: bool) -> None:
        """One known message of the definitions section (``first``: the first message of
        the log); a body that cannot be parsed is damage, unknown incompat flags are
        refused."""
        try:
            if t == rec.FLAG_BITS:
                self._flag_bits(body, pos, first)
            else:
                self.handle_control(t, body, pos, defs=True)
        except UnsupportedError:
            raise
        except (ValueError, struct.error, IndexError, KeyError, UnicodeDecodeError) as e:
            self.damage.damaged(pos, f"bad {chr(t)} message: {e}")

    def _flag_bits(self, body: memoryview, pos: int, first: bool) -> None:
        """The flag bits message (``B``): compat and incompat flags, appended offsets."""
        u = self.ulog
        if not first:
            self.damage.note(f"offset {pos}: flag bits message is not the first message")
        fb = rec.FlagBits.unpack(body)
        if len(body) > rec.FLAG_BITS_SIZE:
            self.damage.note(f"offset {pos}: flag bits message has {len(body)} bytes (extra ignored)")
        u.compat_flags, u.incompat_flags, u.appended_offsets = (
            fb.compat_flags,
            fb.incompat_flags,
            fb.appended_offsets,
        )
        bad = fb.unknown_incompat()
        if bad:
            desc = ", ".join(f"incompat_flags[{i}] bits 0x{b:02x}" for i, b in bad)
            raise UnsupportedError(
                f"{self.damage.path or '<buffer>'}: offset {pos}: the log sets unknown incompatible "
                f"flag bits ({desc}); polybag cannot read it safely"
            )

    def _resync_definitions(self, pos: int) -> int:
        """Next plausible header in the definitions section (known type, size fits)."""
        size = self.log.size
        u8 = self.log.u8
        while pos + 3 <= size:
            end = min(size - 2, pos + RESYNC_WINDOW)
            q = np.arange(pos, end, dtype=np.int64)
            t = u8[q + 2]
            n = u8[q].astype(np.int64) | (u8[q + 1].astype(np.int64) << 8)
            mins = MIN_BODY_TABLE[t]
            ok = (mins >= 0) & (n >= mins) & (q + 3 + n <= size) & (t != rec.DATA)
            hit = np.flatnonzero(ok)
            if len(hit):
                return int(q[hit[0]])
            pos = end
        return size

    def handle_control(self, t: int, body: memoryview, pos: int, defs: bool = False) -> None:
        """One control message of type ``t`` at ``pos`` (``defs``: in the definitions section, where a
        parameter is an initial one, not a change)."""
        u = self.ulog
        if t == rec.FORMAT:
            fmt = parse_format(rec.parse_string(body))
            u.formats[fmt.name] = fmt
            self.types.clear()
        elif t == rec.INFO:
            iv = rec.parse_info_body(body)
            u.info[iv.key] = iv.value
            u.info_types[iv.key] = iv.type
        elif t == rec.INFO_MULTIPLE:
            continued = body[0]
            iv = rec.parse_info_body(body[1:])
            lst = u.info_multiple.get(iv.key)
            if lst is None:
                u.info_multiple[iv.key] = [[iv.value]]
                u.info_multiple_types[iv.key] = iv.type
            elif continued:
                lst[-1].append(iv.value)
            else:
                lst.append([iv.value])
        elif t == rec.PARAMETER:
            iv = rec.parse_info_body(body)
            if defs:
                u.params[iv.key] = iv.value
            else:
                self.timed.append(("P", pos, (iv.key, iv.value)))
        elif t == rec.PARAMETER_DEFAULT:
            types = body[0]
            iv = rec.parse_info_body(body[1:])
            bit = 0
            while types >> bit:
                if types >> bit & 1:
                    u.default_params.setdefault(bit, {})[iv.key] = iv.value
                bit += 1
        elif t == rec.DROPOUT:
            (duration,) = struct.unpack_from("<H", body, 0)
            self.timed.append(("O", pos, duration))
        elif t == rec.SYNC:
            u.sync_count += 1
            u.sync_offsets.append(pos)
            self.timed.append(("S", pos, None))
        elif t == rec.LOGGING:
            level, ts, text = rec.unpack_logging(body)
            self.logged.append((pos, level, ts, None, text))
        elif t == rec.LOGGING_TAGGED:
            level, tag, ts, text = rec.unpack_logging_tagged(body)
            self.logged.append((pos, level, ts, tag, text))
        elif t == rec.REMOVE_LOGGED:
            (msg_id,) = struct.unpack_from("<H", body, 0)
            u.unsubscriptions.append((pos, msg_id))
        elif t == rec.FLAG_BITS:
            self.damage.note(f"offset {pos}: flag bits message in the data section ignored")

    def type_of(self, name: str) -> UlogType | None:
        """The compiled layout of a format (None, with the reason kept, when it cannot be laid out)."""
        if name in self.types:
            return self.types[name]
        try:
            t: UlogType | None = compile_type(name, self.ulog.formats)
        except (ValueError, KeyError, RecursionError) as e:
            t = None
            self.type_errors[name] = str(e) if isinstance(e, ValueError) else f"format {name} is too deep"
        self.types[name] = t
        return t

    def data_sizes(self) -> np.ndarray:
        """Which values of the size field a data message of a defined format can have
        (``min_size + 2 .. size + 2``), as a table indexed by size."""
        sizes_ok = np.zeros(65536, dtype=bool)
        for name in list(self.ulog.formats):
            t = self.type_of(name)
            if t is not None and t.min_size + 2 <= 0xFFFF:
                sizes_ok[t.min_size + 2 : min(t.size + 2, 0xFFFF) + 1] = True
        return sizes_ok

    def control(self, tc: int, q: int, sz: int) -> None:
        """One control (not ``D``, not ``A``) message of type ``tc`` at ``q`` in the data
        section (``sz``: its size): unknown types are skipped, a body that cannot be parsed
        is damage."""
        if MIN_BODY_TABLE[tc] < 0:
            self.damage.unknown_type(tc, sz, q)
            return
        try:
            self.handle_control(tc, self.log.view[q + 3 : q + 3 + sz], q)
        except (ValueError, struct.error, IndexError, KeyError, UnicodeDecodeError) as e:
            self.damage.damaged(q, f"bad {chr(tc)} message: {e}")
