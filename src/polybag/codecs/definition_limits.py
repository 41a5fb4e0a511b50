"""Message definition limits: what one definition may hold before it is refused, and the error
of a definition that cannot be parsed, resolved or afforded (:class:`MsgDefError`).

Parsing (:mod:`polybag.codecs.msg_parser`, :mod:`polybag.codecs.ros2`) counts types and fields
with a :class:`DefinitionCount`; :meth:`polybag.codecs.type_set.TypeSet.check` holds a type's
depth and expansion to :class:`DefinitionLimits`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from polybag.errors import DecodeError

#: message types nested deeper than this are refused (real types nest about 10 levels); every
#: recursive walk over a type (decoders, columns, ``to_dict`` of objects) stays well inside
#: Python's recursion limit at this depth
MAX_DEPTH = 100
#: fields of a type fully expanded (nested messages and fixed-size arrays of messages counted
#: element by element, primitive arrays and sequences as one): a type over this is refused, so a few lines of
#: definition cannot unfold into billions of fields (``A a; A b`` repeated level after level)
MAX_FIELDS = 1 << 18
#: largest fixed array length accepted
MAX_ARRAY = (1 << 31) - 1
#: bytes of one definition's text (every section or IDL module together); real ones are a few
#: KB, the largest bundled-with-comments ones (MoveIt's) about 100 KB
MAX_TEXT_BYTES = 4 << 20
#: message types (``MSG:`` sections, IDL structs) in one definition; real ones hold 1-50
MAX_TYPES = 10_000
#: fields written in one definition, all its types together (what the decoders are generated
#: from: compiling costs time and memory in proportion to it); real ones hold a few hundred
MAX_DEFINED_FIELDS = 1 << 14
#: characters of one field or type name (real ones: a few dozen)
MAX_NAME = 256


class MsgDefError(DecodeError):
    """A message definition that cannot be parsed or resolved."""


@dataclass(frozen=True, slots=True)
class DefinitionLimits:
    """What one message definition may hold before it is refused (a :class:`MsgDefError` naming
    the limit and the type), so that parsing and compiling it costs time and memory in
    proportion to these numbers, never to what the input declares.

    ``text_bytes``: its text; ``types``: message types (sections, IDL structs); ``fields``:
    fields written in all its types together (compiling costs about this much); ``name_chars``:
    one field or type name; ``depth``: nesting levels; ``expanded_fields``: fields of a type
    fully expanded (nested messages and fixed arrays of messages counted field by field).

    :data:`DEFAULT_LIMITS` applies to definitions from files; a caller with less trusted
    definitions (a live peer's) passes lower ones, e.g.
    ``DEFAULT_LIMITS.lower(fields=2000)``, to :func:`~polybag.codecs.msg_parser.parse_full`,
    :func:`polybag.codecs.ros2.ros2_typeset`, :func:`polybag.codecs.ros2.check_definition` or
    :func:`polybag.codecs.cdr.codec_for_type`.
    """

    text_bytes: int = MAX_TEXT_BYTES
    types: int = MAX_TYPES
    fields: int = MAX_DEFINED_FIELDS
    name_chars: int = MAX_NAME
    depth: int = MAX_DEPTH
    expanded_fields: int = MAX_FIELDS

    def lower(self, **limits: int) -> DefinitionLimits:
        """These limits with some replaced (``lower(fields=2000, depth=16)``)."""
        return replace(self, **limits)

    def refuse(self, what: str, limit: str, type_name: str | None) -> MsgDefError:
        """The error of a definition over limit ``limit`` (an attribute name)."""
        return MsgDefError(
            f"{what} (over the limit DefinitionLimits.{limit} = {getattr(self, limit)})",
            type_name=short_name(type_name) if type_name else None,
        )

    def check_text(self, text: str | bytes | bytearray | memoryview, type_name: str | None) -> None:
        """Refuse a definition text over :attr:`text_bytes` (before anything is parsed)."""
        n = len(text) if not isinstance(text, str) or text.isascii() else len(text.encode("utf-8", "replace"))
        if n > self.text_bytes:
            raise self.refuse(f"the definition text is {n} bytes", "text_bytes", type_name)


#: the limits of definitions read from files (replace it to change them process-wide)
DEFAULT_LIMITS = DefinitionLimits()


def short_name(name: str, keep: int = 120) -> str:
    """A name from the input cut for an error message."""
    return name if len(name) <= keep else f"{name[:keep]}... ({len(name)} characters)"


class DefinitionCount:
    """Types and fields of one definition counted while it is parsed, refused past its limits."""

    __slots__ = ("limits", "name", "types", "fields")

    def __init__(self, limits: DefinitionLimits, name: str) -> None:
        self.limits = limits
        self.name = name
        self.types = 0
        self.fields = 0

    def add_type(self, type_name: str) -> None:
        self.types += 1
        if self.types > self.limits.types:
            raise self.limits.refuse(f"the definition holds more than {self.limits.types} message types", "types", self.name)
        self.check_name(type_name, "type name")

    def add_field(self, field_name: str) -> None:
        self.fields += 1
        if self.fields > self.limits.fields:
            raise self.limits.refuse(
                f"the definition holds more than {self.limits.fields} fields, all its types together", "fields", self.name
            )
        self.check_name(field_name, "field name")

    def check_name(self, name: str, what: str) -> None:
        if len(name) > self.limits.name_chars:
            raise self.limits.refuse(f"{what} {short_name(name, 40)!r} is {len(name)} characters", "name_chars", self.name)
