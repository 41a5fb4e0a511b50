"""Text from a peer (a DDS participant, a ROS 1 node, a server) made safe to print or log.

A peer decides the names, reasons and messages it sends: printed as they are, an escape
sequence in one retitles or clears the terminal, a line break forges a log line, and a
16 MB "reason" floods the screen.  :func:`peer_text` cuts such a string to
:data:`LIMIT` characters (saying how long it was) and writes every control, format or
line-separator character as an escape (``\\x1b``, ``\\u202e``), so what is printed is one
line of visible characters.  :func:`safe_line` does the escaping alone, for a whole line
built from pieces that were already cut; :func:`safe_text` for text of several lines.

The command line prints every text taken from a file (topic, type and attachment names,
metadata, callerids, a ULog's info and logged strings) through these: a file is as
untrusted as a peer.
"""

from __future__ import annotations

import unicodedata

#: characters of one peer-supplied string that are printed (the rest is counted)
LIMIT = 300

_ESCAPED_CATEGORIES = frozenset(("Cc", "Cf", "Cs", "Zl", "Zp"))


def _escape(ch: str) -> str:
    o = ord(ch)
    if o < 0x100:
        return f"\\x{o:02x}"
    if o < 0x10000:
        return f"\\u{o:04x}"
    return f"\\U{o:08x}"


def safe_line(text: str) -> str:
    """``text`` with every control, format (bidi overrides, zero-width), surrogate and line
    or paragraph separator character written as a backslash escape."""
    if text.isascii() and text.isprintable():
        return text
    return "".join(_escape(ch) if unicodedata.category(ch) in _ESCAPED_CATEGORIES else ch for ch in text)


def safe_text(text: str) -> str:
    """Text of several lines from a file (a report, a table, ``info``'s page) made safe to
    print: every line as :func:`safe_line` writes it, the line breaks (``\\n``) and tabs
    kept; so nothing but visible characters, tabs and line breaks reaches the terminal."""
    if text.isascii() and text.replace("\n", "").replace("\t", "").isprintable():
        return text
    return "\n".join("\t".join(safe_line(p) for p in line.split("\t")) for line in text.split("\n"))


def peer_text(value: object, limit: int = LIMIT) -> str:
    """A peer-supplied string (or bytes, or anything printable) as one safe line of at most
    ``limit`` characters before escaping; a longer one ends with ``...`` and its length."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value[: limit * 4 + 4])
        text = raw.decode("utf-8", "backslashreplace")
        total = len(value)
        unit = "bytes"
    else:
        text = value if isinstance(value, str) else str(value)
        total = len(text)
        unit = "characters"
    if total > limit or len(text) > limit:
        return safe_line(text[:limit]) + f"... ({total} {unit})"
    return safe_line(text)
