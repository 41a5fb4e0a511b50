"""What an HTTP answer says: a header's value (:func:`header`), the version of the object
it is about (:class:`ObjectVersion`: the ``ETag``, ``Last-Modified`` and
``x-goog-generation`` of the first answer, sent back as conditions and compared with every
later one), and the framing of a ``multipart/byteranges`` answer (:func:`part_head`)."""

from __future__ import annotations

import http.client
import re
from collections.abc import Callable

from polybag.io.redaction import clean

#: a Content-Range value: ``bytes first-last/size`` (``*``: the size is not said)
CONTENT_RANGE = re.compile(r"bytes[ \t]+([0-9]{1,30})-([0-9]{1,30})/([0-9]{1,30}|\*)[ \t]*$", re.I | re.A)
#: a size (longer: not a size, and int() would balk)
DIGITS = re.compile(r"[0-9]{1,30}", re.A)
#: the boundary of a multipart Content-Type
BOUNDARY = re.compile(r'boundary="?([^";]{1,70})"?', re.I)
#: most header lines of one multipart part
MAX_PART_HEADERS = 32


def header(resp: http.client.HTTPResponse, name: str) -> str | None:
    """A header's value; several of the same name are one value joined by commas (a server
    that repeats Content-Length with different values gives a value that is not a number)."""
    values = resp.msg.get_all(name)
    if not values:
        return None
    return ", ".join(str(v).strip() for v in values)


class ObjectVersion:
    """The validators of the object as first seen: later answers must carry the same."""

    def __init__(self) -> None:
        self.etag: str | None = None
        self.last_modified: str | None = None
        self.generation: str | None = None

    def known(self) -> bool:
        """Whether the first answer carried any validator."""
        return bool(self.etag or self.last_modified or self.generation)

    def conditions(self) -> dict[str, str]:
        """Headers that make the server refuse (412) an object that is not the one opened."""
        out = {}
        if self.etag and not self.etag.startswith("W/"):
            out["If-Match"] = self.etag
        elif self.last_modified and not self.etag:
            out["If-Unmodified-Since"] = self.last_modified
        if self.generation:
            out["x-goog-if-generation-match"] = self.generation
        return out

    def take(self, resp: http.client.HTTPResponse) -> None:
        """Keep the validators of ``resp`` (the first answer)."""
        self.etag = header(resp, "ETag")
        self.last_modified = header(resp, "Last-Modified")
        self.generation = header(resp, "x-goog-generation")

    def change(self, resp: http.client.HTTPResponse) -> str | None:
        """How ``resp`` is about another version of the object than the one opened; None when
        it is not."""
        for name, had in (("ETag", self.etag), ("Last-Modified", self.last_modified), ("x-goog-generation", self.generation)):
            now = header(resp, name)
            if had is not None and now is not None and now != had:
                return f"{name} was {clean(had, 80)}, now {clean(now, 80)}"
        return None


class MalformedAnswer(Exception):
    """A multipart answer whose framing is wrong; the text says how (without the URL)."""


def part_head(line: Callable[[int], bytes], delim: bytes) -> str | None:
    """Read a multipart answer up to the end of its next part's headers (``line(limit)``
    reads one line); returns the part's Content-Range value (``""`` without one), or None at
    the closing delimiter."""
    while True:
        text = line(1024).strip()
        if not text:
            continue
        if text == delim + b"--":
            return None
        if text != delim:
            raise MalformedAnswer(f"a malformed multipart answer ({text[:60]!r})")
        crange = ""
        for _ in range(MAX_PART_HEADERS + 1):
            h = line(1024)
            if not h.strip():
                break
            name, _, value = h.decode("latin-1").partition(":")
            if name.strip().lower() == "content-range":
                crange = value.strip()
        else:
            raise MalformedAnswer(f"a multipart part with more than {MAX_PART_HEADERS} header lines")
        return crange
