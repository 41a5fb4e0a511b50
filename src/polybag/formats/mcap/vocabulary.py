"""What the parts of the MCAP reader say to each other: opcodes as plain ints (compared in
the hot loops), the largest times, the id-version scheme of redefined Schema/Channel ids,
where a record lies (:data:`Where`), and the exceptions one part raises for another
(:class:`ChunkDamage` inside a chunk, :class:`NeedRecordWalk` for the slow path,
:class:`UnknownChannelId`, :class:`PartialLoad`, :class:`RedefinedId`), plus the public
:class:`McapIndexWarning`.  Imports nothing of the reader, so every part can import it.
"""

from __future__ import annotations

from typing import NoReturn

from polybag.errors import PolybagError, PolybagWarning
from polybag.formats.mcap.records import Opcode
from polybag.model import Message

MAX_TIME = (1 << 64) - 1
INT64_MAX = (1 << 63) - 1
OP_MESSAGE = int(Opcode.MESSAGE)
OP_SCHEMA = int(Opcode.SCHEMA)
OP_CHANNEL = int(Opcode.CHANNEL)
OP_CHUNK = int(Opcode.CHUNK)
OP_MESSAGE_INDEX = int(Opcode.MESSAGE_INDEX)
OP_DATA_END = int(Opcode.DATA_END)
OP_FOOTER = int(Opcode.FOOTER)
OP_HEADER = int(Opcode.HEADER)
OP_ATTACHMENT = int(Opcode.ATTACHMENT)
OP_METADATA = int(Opcode.METADATA)


class McapIndexWarning(PolybagWarning):
    """An MCAP file's chunk times (Chunk Index or Chunk header) disagree with its messages."""


class NeedRecordWalk(Exception):
    """A chunk with unusual records (short messages): use the record-by-record walk."""


class UnknownChannelId(Exception):
    """A message on a channel id that no Channel record read so far defines."""

    def __init__(self, cid: int, pos: int) -> None:
        self.cid = cid
        self.pos = pos


class PartialLoad(Exception):
    """A loader met damage: ``msgs`` are the intact messages before it, ``err`` the error."""

    def __init__(self, msgs: list[Message], err: PolybagError) -> None:
        self.msgs = msgs
        self.err = err


class ChunkDamage(Exception):
    """Damage inside a chunk at ``pos`` (relative to the chunk's records)."""

    def __init__(self, pos: int, what: str) -> None:
        self.pos = pos
        self.what = what


def short_record_head(pos: int, n: int) -> NoReturn:
    """A record header cut by the end of the chunk at ``pos`` (raises :class:`ChunkDamage`)."""
    raise ChunkDamage(pos, f"record header needs 9 bytes, chunk has {n - pos} left")


def long_record(pos: int, op: int, ln: int, n: int) -> ChunkDamage:
    """The damage of a record at ``pos`` whose length runs past the chunk's end ``n``."""
    return ChunkDamage(pos, f"record (opcode 0x{op:02x}) declares {ln} bytes, chunk has {n - pos - 9} left")


# --- redefined ids -------------------------------------------------------------------------
# The spec wants every Schema/Channel id defined once per file (repeats identical).  A file
# that redefines one anyway (a recorder restarted into the same file, a naive concatenation)
# is read as written: each message gets the channel in force where it lies, i.e. the last
# Channel record with its id before it in file order (bound to the last Schema record of
# its schema id before it).  Each later version of an id becomes a channel (or schema) of its
# own in the model: id ``file id + 65536 * k`` for the k-th redefinition; the first keeps the
# file id, so files without redefinitions read exactly as before.
VERSION_STEP = 1 << 16
FILE_ID_MASK = VERSION_STEP - 1  # mask: internal id -> the id in the file

Where = tuple[int, int]  # (top-level record offset, offset inside its chunk or -1)


class RedefinedId(Exception):
    """A definition changed an id while reading out of file order: build the timeline first."""


