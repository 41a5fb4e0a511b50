"""What a target string is: a URL (``scheme://...``) or a local path, and the local path of a
``file://`` URL.  Small on purpose: ``polybag.open`` and ``polybag.Writer`` ask this of
every target, and importing it loads no transport."""

from __future__ import annotations

import re
from typing import NamedTuple
from urllib.parse import unquote, urlparse, urlsplit

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")
_GLOB = re.compile(r"[*?\[]")


def is_url(target: object) -> bool:
    """True for a string that names a URL (``scheme://...``), False for a local path."""
    return isinstance(target, str) and bool(_URL.match(target))


def has_glob(url: str) -> bool:
    """Whether ``url`` is a pattern: ``*``, ``?`` or ``[`` in it (over ``http(s)://``, in
    its path: ``?`` starts the query there)."""
    if url.lower().startswith(("http://", "https://")):
        try:
            return bool(_GLOB.search(urlsplit(url).path))
        except ValueError:
            return False
    return bool(_GLOB.search(url))


def file_url_path(url: str) -> str | None:
    """The local path of a ``file://`` URL; None for any other URL."""
    if not url.lower().startswith("file://"):
        return None
    return unquote(urlparse(url).path)


class UrlTarget(NamedTuple):
    """An output named by a URL: the URL, and for a ``file://`` URL its local path."""

    url: str
    local: str | None


def url_target(target: object) -> UrlTarget | None:
    """``target`` as a URL (a ``file://`` one with its local path), or None for a local path
    or a stream."""
    if not (isinstance(target, str) and "://" in target and is_url(target)):
        return None
    return UrlTarget(target, file_url_path(target))
