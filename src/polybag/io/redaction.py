"""What messages may say of a URL and of a server: a URL without its user info or query
values (:func:`redact`), text without the caller's secrets (:func:`scrub`,
:func:`secrets_of`), a server's text escaped and cut short (:func:`clean`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from urllib.parse import urlsplit, urlunsplit

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def redact(url: str) -> str:
    """``url`` fit for a message: no user info (``user:password@``), no query values
    (signatures of presigned URLs, tokens), no fragment."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return clean(url.split("?", 1)[0].split("@")[-1], 300)
    if not parts.scheme or not parts.netloc:
        return url
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rsplit("@", 1)[1]
    query = "&".join(q.split("=", 1)[0] + "=***" if q else q for q in parts.query.split("&")) if parts.query else ""
    if netloc == parts.netloc and query == parts.query and not parts.fragment:
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def clean(text: str, limit: int = 300) -> str:
    """Text from a server fit for a terminal: control characters escaped, cut to ``limit``."""
    out = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text[: limit * 2])
    return out if len(out) <= limit else out[:limit] + "..."


def scrub(text: str, secrets: Sequence[str]) -> str:
    """``text`` with every secret replaced by ``***`` (then :func:`clean`)."""
    for s in secrets:
        if s and len(s) >= 4:
            text = text.replace(s, "***")
    return clean(text)


def secrets_of(url: str) -> list[str]:
    """The parts of ``url`` that must not be printed: password, user info, query values."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return [url]
    out = []
    if parts.password:
        out.append(parts.password)
    if "@" in parts.netloc:
        out.append(parts.netloc.rsplit("@", 1)[0])
    for q in parts.query.split("&"):
        if "=" in q:
            out.append(q.split("=", 1)[1])
    return sorted(out, key=len, reverse=True)
