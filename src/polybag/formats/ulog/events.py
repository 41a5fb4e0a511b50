"""PX4 events logged through the ``event`` topic, decoded with the definitions in the log.

PX4 stores its event definitions (libevents JSON, xz-compressed) in the multi-info message
``metadata_events`` (with ``metadata_events_sha256`` in info).  An event row has an ``id``
(component << 24 | sub id), ``arguments[N]`` bytes and ``log_levels`` (external level in
bits 4..7).  Only events of the ``default`` group are shown, like PX4's tools; logs without
embedded definitions give no decoded events (polybag never fetches anything from the
network).

The definitions and the logged events are data from the file: the decompressed JSON is
bounded (:data:`MAX_DEFINITIONS_BYTES`), definitions of an unexpected shape give no decoded
events, an event that cannot be shown is an unknown event, and a shown value's precision is
capped, so nothing here allocates what a file declares or raises.
"""

from __future__ import annotations

import json
import lzma
import re
import struct
from typing import Any

_ARG_TYPES = {
    "uint8_t": struct.Struct("<B"),
    "int8_t": struct.Struct("<b"),
    "uint16_t": struct.Struct("<H"),
    "int16_t": struct.Struct("<h"),
    "uint32_t": struct.Struct("<I"),
    "int32_t": struct.Struct("<i"),
    "uint64_t": struct.Struct("<Q"),
    "int64_t": struct.Struct("<q"),
    "float": struct.Struct("<f"),
}
EVENT_LEVELS = {
    0: "EMERGENCY",
    1: "ALERT",
    2: "CRITICAL",
    3: "ERROR",
    4: "WARNING",
    5: "NOTICE",
    6: "INFO",
    7: "DEBUG",
    8: "PROTOCOL",
    9: "DISABLED",
}
_TAG = re.compile(r'<([a-z]+)(?: ([a-z]+)="([^"]*)")?>', re.DOTALL)
_ARG = re.compile(r"^(\d+)(?::(?:\.(\d+))?)?(m|m_v|m/s|m\^2|C)?$")
MAX_DEFINITIONS_BYTES = 16 << 20  # PX4's are about 160 KB decompressed
_MAX_PRECISION = 17


def _decompress(raw: bytes, limit: int) -> bytes | None:
    """An xz stream's content, or None when it is damaged or over ``limit`` bytes (checked
    while decompressing: a small stream may declare gigabytes)."""
    d = lzma.LZMADecompressor()
    try:
        out = d.decompress(raw, max_length=limit)
    except lzma.LZMAError:
        return None
    return out if d.eof else None


class EventDefinitions:
    """Lookup of event id -> (definition, namespace, group) and enums by qualified name."""

    def __init__(self, data: dict[str, Any], profile: str = "dev") -> None:
        self.profile = profile
        self.events: dict[int, tuple[dict[str, Any], str, str]] = {}
        self.enums: dict[str, dict[str, Any]] = {}
        for comp_id, comp in (data.get("components") or {}).items():
            ns = comp.get("namespace", "")
            for name, enum in (comp.get("enums") or {}).items():
                self.enums[f"{ns}::{name}"] = enum
            for group, grp in (comp.get("event_groups") or {}).items():
                for sub_id, ev in (grp.get("events") or {}).items():
                    self.events[(int(comp_id) << 24) | int(sub_id)] = (ev, ns, group)

    @classmethod
    def from_ulog(cls, ulog: Any) -> EventDefinitions | None:
        chunks = ulog.info_multiple.get("metadata_events")
        if not chunks or "metadata_events_sha256" not in ulog.info:
            return None
        try:
            raw = b"".join(bytes(c) if isinstance(c, (bytes, bytearray)) else str(c).encode() for c in chunks[0])
            text = _decompress(raw, MAX_DEFINITIONS_BYTES)
            if text is None:
                return None
            data = json.loads(text)
            if not isinstance(data, dict) or not isinstance(data.get("version", 0), int) or data.get("version", 0) < 1:
                return None
            return cls(data)
        except (ValueError, TypeError, AttributeError, KeyError, IndexError, RecursionError):
            return None  # JSON of another shape than libevents': no decoded events

    # --- one event --------------------------------------------------------------------
    def message(self, event_id: int, args: bytes) -> tuple[str, str] | None:
        """(group, message text) of an event, or None when the id is unknown (or its
        definition cannot be used)."""
        try:
            return self._message(event_id, args)
        except (ValueError, TypeError, AttributeError, KeyError, IndexError, OverflowError, RecursionError):
            return None

    def _message(self, event_id: int, args: bytes) -> tuple[str, str] | None:
        found = self.events.get(event_id)
        if found is None:
            return None
        ev, ns, group = found
        values: list[tuple[Any, dict[str, Any] | None]] = []
        off = 0
        for arg in ev.get("arguments", []):
            typ = arg.get("type", "")
            enum = None
            if typ not in _ARG_TYPES:
                enum = self.enums.get(typ if "::" in typ else f"{ns}::{typ}")
                typ = enum.get("type", "uint8_t") if enum else "uint8_t"
            st = _ARG_TYPES.get(typ, _ARG_TYPES["uint8_t"])
            if off + st.size > len(args):
                values.append((0, enum))
            else:
                values.append((st.unpack_from(args, off)[0], enum))
            off += st.size
        return group, self._format(ev.get("message", ""), values)

    @staticmethod
    def _display(value: Any, enum: dict[str, Any] | None) -> Any:
        if enum is None:
            return value
        entries = enum.get("entries", {})
        if enum.get("is_bitfield"):
            size = _ARG_TYPES.get(enum.get("type", "uint8_t"), _ARG_TYPES["uint8_t"]).size
            parts = []
            for i in range(size * 8):
                bit = 1 << i
                if value & bit:
                    e = entries.get(str(bit))
                    parts.append(e["description"] if e else f"(unknown: {value})")
            return enum.get("separator", "|").join(parts)
        e = entries.get(str(value))
        return e["description"] if e else f"(unknown: {value})"

    def _format(self, msg: str, values: list[tuple[Any, dict[str, Any] | None]]) -> str:
        out: list[str] = []
        i = 0
        n = len(msg)
        while i < n:
            c = msg[i]
            if c == "\\" and i + 1 < n:
                out.append(msg[i + 1])
                i += 2
                continue
            if c == "<":
                m = _TAG.match(msg, i)
                end = msg.find(f"</{m.group(1)}>", m.end()) if m else -1
                if m is None or end < 0:
                    out.append(c)
                    i += 1
                    continue
                tag, attr_val = m.group(1), m.group(3)
                content = msg[m.end() : end]
                if tag == "profile":
                    prof = attr_val or ""
                    keep = self.profile != prof[1:] if prof.startswith("!") else self.profile == prof
                    if keep:
                        out.append(self._format(content, values))
                elif tag in ("a", "param"):
                    out.append(content)
                i = end + len(tag) + 3
                continue
            if c == "{":
                close = msg.find("}", i)
                m2 = _ARG.match(msg[i + 1 : close]) if close > 0 else None
                if m2 is None or len(m2.group(1)) > 9 or not 0 < int(m2.group(1)) <= len(values):
                    out.append(c)
                    i += 1
                    continue
                value, enum = values[int(m2.group(1)) - 1]
                shown = self._display(value, enum)
                prec = m2.group(2)
                digits = None if prec is None else min(int(prec), _MAX_PRECISION) if len(prec) <= 3 else _MAX_PRECISION
                text = f"{shown:.{digits}f}" if digits is not None and enum is None else f"{shown}"
                unit = m2.group(3)
                if unit:
                    text += " " + ("m" if unit == "m_v" else unit)
                out.append(text)
                i = close + 1
                continue
            out.append(c)
            i += 1
        return "".join(out).strip()


def logged_events(reader: Any) -> list[tuple[int, str, str]] | None:
    """(timestamp us, level name, text) of the log's events; None without definitions."""
    ulog = reader.ulog
    defs = EventDefinitions.from_ulog(ulog)
    if defs is None:
        return None
    try:
        cols = reader.topic_columns("event")
    except KeyError:
        return []
    ids = cols.get("id")
    if ids is None or "timestamp" not in cols:
        return []
    arg_names = []
    i = 0
    while f"arguments[{i}]" in cols:
        arg_names.append(f"arguments[{i}]")
        i += 1
    out: list[tuple[int, str, str]] = []
    levels = cols.get("log_levels")
    for row in range(len(ids)):
        level = (int(levels[row]) >> 4) & 0xF if levels is not None else 6
        if level >= 8:
            continue
        args = bytes(int(cols[a][row]) & 0xFF for a in arg_names)
        got = defs.message(int(ids[row]), args)
        t = int(cols["timestamp"][row])
        if got is None:
            out.append((t, EVENT_LEVELS.get(level, "UNKNOWN"), f"[Unknown event with ID {int(ids[row])}]"))
        elif got[0] == "default":
            out.append((t, EVENT_LEVELS.get(level, "UNKNOWN"), got[1]))
    return out
