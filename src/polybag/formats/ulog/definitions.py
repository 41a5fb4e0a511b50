"""What a ULog says about itself: the definitions section and the control messages.

The definitions section (after the file header, up to the first subscription or logged
string) holds the message formats (``F``), info (``I``, ``M``), parameters and their
defaults (``P``, ``Q``) and the flag bits (``B``); it is read message by message at open
(:meth:`_Definitions._read_definitions`).  The control messages found later in the data
section (parameter changes, dropouts, syncs, logged strings, unsubscriptions) go through the
same handler, :meth:`_Definitions._handle_control`.

Here too are :class:`UlogData` (``reader.ulog``: the ULog-only facts of a log, named like
pyulog's) and the records the reader keeps for a subscription (:class:`_Sub`, and
:class:`_DeadSub` for one whose format cannot be laid out).  :class:`_Definitions` is a part
of :class:`~polybag.formats.ulog.reader.UlogReader` and works on its state.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import numpy as np

from polybag.codecs.ulog import FormatDef, UlogType, compile_type, parse_format
from polybag.errors import UnsupportedError
from polybag.formats.ulog import records as rec
from polybag.formats.ulog.scan import _LETTER, _MAX_UNKNOWN, _MIN_TABLE, _RESYNC_WINDOW
from polybag.model import Channel


class UlogData:
    """The ULog-only facts of a log (``reader.ulog``), named like pyulog's where they exist.

    A plain class written out (compared and shown like the dataclass it was): a
    ``@dataclass`` of this size costs ~1 ms of import time in every process that reads a
    ULog log."""

    # (name, default factory) of the fields, in order; the facts that need every data
    # timestamp (the private ones) are worked out on first use and not shown
    _FIELDS: tuple[tuple[str, Callable[[], Any]], ...] = (
        ("version", int),
        ("start_timestamp", int),  # us
        ("compat_flags", lambda: [0] * 8),
        ("incompat_flags", lambda: [0] * 8),
        ("appended_offsets", list),
        ("formats", dict),
        ("info", dict),
        ("info_types", dict),
        ("info_multiple", dict),
        ("info_multiple_types", dict),
        ("params", dict),
        ("default_params", dict),
        ("logged_messages", list),
        ("subscriptions", list),
        ("unsubscriptions", list),  # (offset, msg_id)
        ("sync_count", int),
        ("sync_offsets", list),  # file offset of each sync (S) message
        ("corruptions", list),
        ("warnings", list),
        ("unreported_damage", int),  # damage beyond the first reports (counted only)
        ("unknown_types", dict),  # skipped (unknown) message types -> count
    )
    _PRIVATE = ("_last_timestamp", "_changed_params", "_dropouts", "_syncs")

    version: int
    start_timestamp: int
    compat_flags: list[int]
    incompat_flags: list[int]
    appended_offsets: list[int]
    formats: dict[str, FormatDef]
    info: dict[str, Any]
    info_types: dict[str, str]
    info_multiple: dict[str, list[list[Any]]]
    info_multiple_types: dict[str, str]
    params: dict[str, int | float]
    default_params: dict[int, dict[str, int | float]]
    logged_messages: list[rec.LoggedMessage]
    subscriptions: list[rec.Subscription]
    unsubscriptions: list[tuple[int, int]]
    sync_count: int
    sync_offsets: list[int]
    corruptions: list[dict[str, Any]]
    warnings: list[str]
    unreported_damage: int
    unknown_types: dict[str, int]
    _last_timestamp: int | None
    _changed_params: list[tuple[int, str, int | float]] | None
    _dropouts: list[rec.Dropout] | None
    _syncs: list[int] | None
    _resolve: Callable[[], None] | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        names = [n for n, _ in self._FIELDS] + [*self._PRIVATE, "_resolve"]
        if len(args) > len(names):
            raise TypeError(f"UlogData takes at most {len(names)} positional arguments")
        given = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names or k in given:
                raise TypeError(f"UlogData got an unexpected or repeated argument {k!r}")
            given[k] = v
        for n, make in self._FIELDS:
            setattr(self, n, given[n] if n in given else make())
        for n in (*self._PRIVATE, "_resolve"):
            setattr(self, n, given.get(n))

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n, _ in self._FIELDS)
        return f"UlogData({inner})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        names = [n for n, _ in self._FIELDS] + list(self._PRIVATE)
        return all(getattr(self, n) == getattr(other, n) for n in names)

    __hash__ = None  # type: ignore[assignment]

    def _need(self) -> None:
        """Work out the facts that need every data timestamp (once)."""
        if self._resolve is not None:
            self._resolve()

    @property
    def last_timestamp(self) -> int:
        """The largest data timestamp (us), or the start timestamp."""
        self._need()
        return self._last_timestamp if self._last_timestamp is not None else self.start_timestamp

    @property
    def changed_params(self) -> list[tuple[int, str, int | float]]:
        """(timestamp us, name, value) of parameters set in the data section."""
        self._need()
        return self._changed_params if self._changed_params is not None else []

    @property
    def dropouts(self) -> list[rec.Dropout]:
        """(timestamp us, duration ms) of every dropout mark."""
        self._need()
        return self._dropouts if self._dropouts is not None else []

    @property
    def syncs(self) -> list[int]:
        """Timestamp (us) of each sync message: the largest data timestamp before it (like
        dropouts), so a writer can put them back in the same places of the data."""
        self._need()
        return self._syncs if self._syncs is not None else []

    @property
    def has_default_parameters(self) -> bool:
        """Whether the log has default parameters (compat flag)."""
        return bool(self.compat_flags[0] & rec.COMPAT_DEFAULT_PARAMETERS)

    @property
    def has_data_appended(self) -> bool:
        """Whether data was appended to the log (incompat flag; see ``appended_offsets``)."""
        return bool(self.incompat_flags[0] & rec.INCOMPAT_DATA_APPENDED)

    @property
    def file_corruption(self) -> bool:
        """Whether any damage was found."""
        return bool(self.corruptions)

    @property
    def initial_parameters(self) -> dict[str, int | float]:
        """The parameters of the definitions section (pyulog's name)."""
        return self.params

    @property
    def logged_messages_untagged(self) -> list[rec.LoggedMessage]:
        """The logged strings without a tag."""
        return [m for m in self.logged_messages if m.tag is None]

    @property
    def logged_messages_tagged(self) -> dict[int, list[rec.LoggedMessage]]:
        """The tagged logged strings by tag."""
        out: dict[int, list[rec.LoggedMessage]] = {}
        for m in self.logged_messages:
            if m.tag is not None:
                out.setdefault(m.tag, []).append(m)
        return out

    def get_default_parameters(self, default_type: int) -> dict[str, int | float]:
        """The default parameters of one type bit (0: system, 1: current setup)."""
        return self.default_params.get(default_type, {})

    def version_info_str(self, key: str = "ver_sw_release") -> str | None:
        """The software release of an info key as ``v1.2.3 (beta)``, or None."""
        val = self.info.get(key)
        if not isinstance(val, int):
            return None
        major, minor, patch, typ = (val >> 24) & 0xFF, (val >> 16) & 0xFF, (val >> 8) & 0xFF, val & 0xFF
        if typ < 64:
            return None
        kind = " (alpha)" if typ < 128 else " (beta)" if typ < 192 else " (RC)" if typ < 255 else ""
        return f"v{major}.{minor}.{patch}{kind}"


class _DeadSub:
    """A subscription whose format cannot be compiled: its data messages are counted and
    skipped."""

    __slots__ = ("sub", "offset", "reason", "index", "count", "nbytes")

    def __init__(self, sub: rec.Subscription, offset: int, reason: str, index: int) -> None:
        self.sub = sub
        self.offset = offset  # of its A message
        self.reason = reason
        self.index = index  # position in the reader's list of them
        self.count = 0
        self.nbytes = 0


class _Sub:
    """A subscription as the reader tracks it."""

    __slots__ = ("sub", "type", "index", "channel", "selected", "positions", "count", "ts_us", "_records")

    def __init__(self, sub: rec.Subscription, type: UlogType | None, index: int) -> None:  # noqa: A002
        self.sub = sub
        self.type = type
        self.index = index  # position in the subscription list
        self.channel: Channel | None = None
        self.selected = True
        self.positions: np.ndarray | None = None  # file offsets of its D messages (header start)
        self.count = 0  # number of its D messages
        self.ts_us: np.ndarray | None = None  # timestamps in us (unwrapped)
        self._records: np.ndarray | None = None


class _Definitions:
    """The definitions section and the control messages (a part of the ULog reader)."""

    ulog: UlogData

    def _read_definitions(self, pos: int) -> int:
        """Read the definitions section from ``pos`` (after the file header); returns where
        the data section starts: at the first subscription or logged string (or the end of
        the file)."""
        view, size = self._view, self._size
        first = True
        while pos + 3 <= size:
            n, t = rec.MSG_HEADER.unpack_from(view, pos)
            if t in (rec.ADD_LOGGED, rec.LOGGING, rec.LOGGING_TAGGED):
                return pos
            if pos + 3 + n > size:
                self._damaged(
                    pos,
                    f"expected {n} bytes of message {chr(t) if 32 <= t < 127 else t!r}, file has "
                    f"{size - pos - 3} left",
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
            self._damaged(
                pos, f"expected a 3-byte message header, file has {size - pos} bytes left", truncated=True
            )
            return size
        return pos

    def _skip_definition(self, t: int, n: int, pos: int) -> int:
        """Past a message of an unknown type ``t`` (or a data message) at ``pos`` in the
        definitions section: the next message, or the next plausible header when this is
        none."""
        if t == 0 or n == 0 or n > _MAX_UNKNOWN or not _LETTER[t]:
            # not a message header: look for the next one a byte further on
            nxt = self._resync_definitions(pos + 1)
            self._damaged(pos, f"invalid message header (type {t}, size {n})", nxt - pos)
            return nxt
        self._unknown_type(t, n, pos)
        return pos + 3 + n

    def _definition(self, t: int, body: memoryview, pos: int, first: bool) -> None:
        """One known message of the definitions section (``first``: the first message of
        the log); a body that cannot be parsed is damage, unknown incompat flags are
        refused."""
        try:
            if t == rec.FLAG_BITS:
                self._flag_bits(body, pos, first)
            else:
                self._handle_control(t, body, pos, defs=True)
        except UnsupportedError:
            raise
        except (ValueError, struct.error, IndexError, KeyError, UnicodeDecodeError) as e:
            self._damaged(pos, f"bad {chr(t)} message: {e}")

    def _flag_bits(self, body: memoryview, pos: int, first: bool) -> None:
        """The flag bits message (``B``): compat and incompat flags, appended offsets."""
        u = self.ulog
        if not first:
            self._note(f"offset {pos}: flag bits message is not the first message")
        fb = rec.FlagBits.unpack(body)
        if len(body) > rec.FLAG_BITS_SIZE:
            self._note(f"offset {pos}: flag bits message has {len(body)} bytes (extra ignored)")
        u.compat_flags, u.incompat_flags, u.appended_offsets = (
            fb.compat_flags,
            fb.incompat_flags,
            fb.appended_offsets,
        )
        bad = fb.unknown_incompat()
        if bad:
            desc = ", ".join(f"incompat_flags[{i}] bits 0x{b:02x}" for i, b in bad)
            raise UnsupportedError(
                f"{self.path or '<buffer>'}: offset {pos}: the log sets unknown incompatible "
                f"flag bits ({desc}); polybag cannot read it safely"
            )

    def _resync_definitions(self, pos: int) -> int:
        """Next plausible header in the definitions section (known type, size fits)."""
        size = self._size
        u8 = self._u8
        while pos + 3 <= size:
            end = min(size - 2, pos + _RESYNC_WINDOW)
            q = np.arange(pos, end, dtype=np.int64)
            t = u8[q + 2]
            n = u8[q].astype(np.int64) | (u8[q + 1].astype(np.int64) << 8)
            mins = _MIN_TABLE[t]
            ok = (mins >= 0) & (n >= mins) & (q + 3 + n <= size) & (t != rec.DATA)
            hit = np.flatnonzero(ok)
            if len(hit):
                return int(q[hit[0]])
            pos = end
        return size

    def _handle_control(self, t: int, body: memoryview, pos: int, defs: bool = False) -> None:
        """One control message of type ``t`` at ``pos`` (``defs``: in the definitions section, where a
        parameter is an initial one, not a change)."""
        u = self.ulog
        if t == rec.FORMAT:
            fmt = parse_format(rec.parse_string(body))
            u.formats[fmt.name] = fmt
            self._types.clear()
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
                self._pending_ts.append(("P", pos, (iv.key, iv.value)))
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
            self._pending_ts.append(("O", pos, duration))
        elif t == rec.SYNC:
            u.sync_count += 1
            u.sync_offsets.append(pos)
            self._pending_ts.append(("S", pos, None))
        elif t == rec.LOGGING:
            level, ts, text = rec.unpack_logging(body)
            self._log_entries.append((pos, level, ts, None, text))
        elif t == rec.LOGGING_TAGGED:
            level, tag, ts, text = rec.unpack_logging_tagged(body)
            self._log_entries.append((pos, level, ts, tag, text))
        elif t == rec.REMOVE_LOGGED:
            (msg_id,) = struct.unpack_from("<H", body, 0)
            u.unsubscriptions.append((pos, msg_id))
        elif t == rec.FLAG_BITS:
            self._note(f"offset {pos}: flag bits message in the data section ignored")

    def _type(self, name: str) -> UlogType | None:
        """The compiled layout of a format (None, with the reason kept, when it cannot be laid out)."""
        if name in self._types:
            return self._types[name]
        try:
            t: UlogType | None = compile_type(name, self.ulog.formats)
        except (ValueError, KeyError, RecursionError) as e:
            t = None
            self._type_errors[name] = str(e) if isinstance(e, ValueError) else f"format {name} is too deep"
        self._types[name] = t
        return t
