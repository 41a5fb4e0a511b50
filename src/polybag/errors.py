"""One exception family for everything polybag raises.

Every error a user can get from bad input is a :class:`PolybagError`.  Errors about a file's
bytes are :class:`FormatError` and carry the file name and the byte offset where the
problem was found, so a message reads like
``example.bag: offset 4117: expected record header length <= 1039 bytes, found 4294967295``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


class PolybagError(Exception):
    """Base of every polybag exception."""


class FormatError(PolybagError):
    """The bytes of a file do not follow its format."""

    def __init__(self, message: str, path: str | None = None, offset: int | None = None) -> None:
        self.message = message
        self.path = path
        self.offset = offset
        super().__init__(self._render())

    def _render(self) -> str:
        parts = []
        if self.path:
            parts.append(str(self.path))
        if self.offset is not None:
            parts.append(f"offset {self.offset}")
        parts.append(self.message)
        return ": ".join(parts)


class UnknownFormatError(FormatError):
    """The file's magic bytes match no format polybag knows."""


class TruncatedError(FormatError):
    """The file ends before a record it declares is complete."""


class ChecksumError(FormatError):
    """A stored CRC does not match the bytes it covers."""


class UsageError(PolybagError, ValueError):
    """A bad argument from the caller (an invalid topic regex, a time that is not a time)."""


class OutputExistsError(UsageError):
    """An output file exists and overwriting was not asked for (``overwrite=True``,
    ``--force``), or the output would be one of the inputs (never allowed)."""


class EmptySelectionError(PolybagError):
    """A topic selection (``--topics``, ``--include-topic``, a plot's ``TOPIC.FIELD``...) that
    matches no topic of the input: an operation says so (the CLI exits 1) rather than
    printing or writing nothing.  The message lists the topics there are (the first few).
    Reading (``reader.messages(topics=...)``) still just gives no message."""

    def __init__(self, selection: object, topics: Iterable[str], *, excluding: object = None, verb: str = "matches") -> None:
        self.selection = selection
        self.topics = sorted(set(topics))
        if selection is None:
            what = f"no topic is left when excluding {_shown(excluding)}"
        else:
            what = f"no topic {verb} {_shown(selection)}" + (f" when excluding {_shown(excluding)}" if excluding else "")
        super().__init__(f"{what} ({name_listing(self.topics)})")


def _shown(selection: object) -> str:
    """A selection as given: a string (a pattern) quoted, a list of names each quoted."""
    if isinstance(selection, str):
        return repr(selection)
    if isinstance(selection, Iterable):
        return ", ".join(repr(s) for s in selection)
    return repr(selection)


def name_listing(names: Sequence[str], what: str = "topics", where: str = "the input", most: int = 12, width: int = 300) -> str:
    """``topics here: /a, /b, ... and N more``: ``names`` cut to ``most`` names and about
    ``width`` characters (``the input has no topics`` when there are none)."""
    if not names:
        return f"{where} has no {what}"
    shown: list[str] = []
    for t in names[:most]:
        if shown and sum(len(s) + 2 for s in shown) + len(t) > width:
            break
        shown.append(t)
    rest = len(names) - len(shown)
    return f"{what} here: " + ", ".join(shown) + (f", ... and {rest} more" if rest else "")


class NoObjectError(PolybagError):
    """A URL names no object: the server says there is none, or gives no size (a listing)."""


class UnsupportedError(PolybagError):
    """Valid input that polybag cannot handle (an unknown compression, a future version...)."""


class DecodeError(PolybagError):
    """A message payload does not match its schema."""

    def __init__(
        self, message: str, *, topic: str | None = None, type_name: str | None = None, field: str | None = None, offset: int | None = None
    ) -> None:
        self.topic = topic
        self.type_name = type_name
        self.field = field
        self.offset = offset
        where = []
        if topic:
            where.append(f"topic {topic}")
        if type_name:
            where.append(f"type {type_name}")
        if field:
            where.append(f"field {field}")
        if offset is not None:
            where.append(f"payload offset {offset}")
        super().__init__(f"{', '.join(where)}: {message}" if where else message)


class WriteError(PolybagError):
    """A writer was used wrongly (unknown channel, closed writer, unsupported feature)."""


class PolybagWarning(UserWarning):
    """Something a reader noticed and worked around (an unknown ULog message type, a lying
    MCAP index); the CLI prints it as one ``polybag CMD: warning: ...`` line."""


__all__ = [
    "ChecksumError",
    "DecodeError",
    "EmptySelectionError",
    "FormatError",
    "NoObjectError",
    "OutputExistsError",
    "PolybagError",
    "PolybagWarning",
    "TruncatedError",
    "UnknownFormatError",
    "UnsupportedError",
    "UsageError",
    "WriteError",
]
