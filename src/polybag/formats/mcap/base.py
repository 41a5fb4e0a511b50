"""The MCAP reader's shared ground: opcodes, internal exceptions, the id-version scheme of
redefined Schema/Channel ids, and :class:`McapState`, the state every part of the reader
shares (set up in one place, so a newcomer sees every field the parts read and write).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

from polybag.errors import ChecksumError, FormatError, PolybagError, PolybagWarning
from polybag.formats.mcap import records as R
from polybag.formats.mcap.records import Opcode
from polybag.formats.shared.merge import LOG_TIME, NEG_LOG_TIME
from polybag.formats.shared.recovery import Recovery
from polybag.io import compression
from polybag.model import Channel, Message, Schema, Summary
from polybag.reader import Reader, TopicSelector

if TYPE_CHECKING:
    from polybag.formats.mcap.defs import _Census
    from polybag.formats.mcap.scan import _ScanResult

_LOG_TIME = LOG_TIME  # the merge keys, shared with every reader (polybag.formats.shared.merge)
_NEG_LOG_TIME = NEG_LOG_TIME
_MAX_TIME = (1 << 64) - 1
_INT64_MAX = (1 << 63) - 1
_OP_MESSAGE = int(Opcode.MESSAGE)
_OP_SCHEMA = int(Opcode.SCHEMA)
_OP_CHANNEL = int(Opcode.CHANNEL)
_OP_CHUNK = int(Opcode.CHUNK)
_OP_MESSAGE_INDEX = int(Opcode.MESSAGE_INDEX)
_OP_DATA_END = int(Opcode.DATA_END)
_OP_FOOTER = int(Opcode.FOOTER)
_OP_HEADER = int(Opcode.HEADER)
_OP_ATTACHMENT = int(Opcode.ATTACHMENT)
_OP_METADATA = int(Opcode.METADATA)


class McapIndexWarning(PolybagWarning):
    """An MCAP file's chunk times (Chunk Index or Chunk header) disagree with its messages."""


class _NeedSlowPath(Exception):
    """A chunk with unusual records (short messages): use the record-by-record walk."""


class _UnknownChannel(Exception):
    """A message on a channel id that no Channel record read so far defines."""

    def __init__(self, cid: int, pos: int) -> None:
        self.cid = cid
        self.pos = pos


class _Partial(Exception):
    """A loader met damage: ``msgs`` are the intact messages before it, ``err`` the error."""

    def __init__(self, msgs: list[Message], err: PolybagError) -> None:
        self.msgs = msgs
        self.err = err


class _Bad(Exception):
    """Damage inside a chunk at ``pos`` (relative to the chunk's records)."""

    def __init__(self, pos: int, what: str) -> None:
        self.pos = pos
        self.what = what


def _short_record(pos: int, n: int) -> NoReturn:
    """A record header cut by the end of the chunk at ``pos`` (raises :class:`_Bad`)."""
    raise _Bad(pos, f"record header needs 9 bytes, chunk has {n - pos} left")


def _long_record(pos: int, op: int, ln: int, n: int) -> _Bad:
    """The damage of a record at ``pos`` whose length runs past the chunk's end ``n``."""
    return _Bad(pos, f"record (opcode 0x{op:02x}) declares {ln} bytes, chunk has {n - pos - 9} left")


# --- redefined ids -------------------------------------------------------------------------
# The spec wants every Schema/Channel id defined once per file (repeats identical).  A file
# that redefines one anyway (a recorder restarted into the same file, a naive concatenation)
# is read as written: each message gets the channel in force where it lies, i.e. the last
# Channel record with its id before it in file order (bound to the last Schema record of
# its schema id before it).  Each later version of an id becomes a channel (or schema) of its
# own in the model: id ``file id + 65536 * k`` for the k-th redefinition; the first keeps the
# file id, so files without redefinitions read exactly as before.
_VERSION_STEP = 1 << 16
_FILE_ID = _VERSION_STEP - 1  # mask: internal id -> the id in the file

Where = tuple[int, int]  # (top-level record offset, offset inside its chunk or -1)


class _Redefined(Exception):
    """A definition changed an id while reading out of file order: build the timeline first."""


class McapState(Reader):
    """What every part of :class:`~polybag.formats.mcap.reader.McapReader` reads and writes.

    The reader is built from one mixin per job (summary section, scan, definitions, chunks,
    read planning, streams, top-level records, the reported summary); they share the state
    set up here (:meth:`_init_state`, called by the reader's constructor), on one object,
    so moving a method between them changes nothing.
    """

    def _init_state(self, validate_crcs: bool, recover: bool, max_chunk_bytes: int | None) -> None:
        """Every field the parts read and write, before anything is read (the reader's
        options as :class:`~polybag.formats.mcap.reader.McapReader` takes them)."""
        self.validate_crcs = validate_crcs
        # what one chunk may decompress to (None: the process-wide cap, 512 MiB by default)
        self.max_chunk_bytes = compression.max_chunk_bytes(max_chunk_bytes)
        self.recover = recover
        self.recovery_report: dict[str, Any] | None = None
        # damage met (a damaged Header record first); ``first``: the scan's first error
        self._recovery = Recovery()
        self.header = R.Header()
        self.footer: R.Footer | None = None
        self.statistics: R.Statistics | None = None
        self.schemas: dict[int, Schema] = {}
        self._channels: dict[int, Channel] = {}
        self._live_wants: list[tuple[TopicSelector, set[int]]] = []
        self._channel_records: dict[int, R.ChannelRecord] = {}
        self.chunk_indexes: list[R.ChunkIndex] = []
        self._ci_array: np.ndarray | None = None
        self.attachment_indexes: list[R.AttachmentIndex] = []
        self.metadata_indexes: list[R.MetadataIndex] = []
        self.summary_offsets: list[R.SummaryOffset] = []
        self.has_summary = False
        self.summary_error: str | None = None
        self._summary_crc_error: ChecksumError | None = None
        self._summary: Summary | None = None
        self._scan_result: _ScanResult | None = None
        self._defs_scanned = 0  # chunks of the scan/index whose definitions were registered
        self._stream_used = False
        self._header_end = 0
        # chunk times from indexes and Chunk headers are claims: once one is caught lying
        # (or when recovering) every chunk's real range is found by reading it
        self._verify = recover
        self._index_checked = False
        self._true_ranges: dict[int, tuple[int, int] | None] = {}
        self._quiet = False  # finding real ranges: damage is reported by the real read
        self._muted = 0
        # redefined ids (see _Census): problems found, versions applied in file order
        # (streams, the census walk), and the timeline once one is known
        self.definition_problems: list[str] = []
        self._census: _Census | None = None
        self._need_census = False  # a redefinition (or a hint of one) was seen: build the census
        self._noting = 0  # > 0: a conflict only sets _need_census (summary, scan)
        self._census_walk = False
        self._changes: list[tuple[Where, int, Channel, Channel]] = []  # (where, file id, old, new)
        self._schema_changes: list[tuple[Where, int, Schema, Schema]] = []
        self._nversions: dict[tuple[int, int], int] = {}
        self._def_where: dict[tuple[int, int], Where | None] = {}  # (opcode, id) -> where in force
        self._seq_where: Where = (-1, -1)  # sequential reading: the last definition applied
        self._summary_records: list[R.SchemaRecord | R.ChannelRecord] = []
        self._first_records: dict[int, R.ChannelRecord] = {}  # of redefined channels
        # what one read loaded: (first, last offset, whether its definitions were all registered)
        self._loaded: list[tuple[int, int, bool]] = []
        # channel id -> the channel with the known definition that decodes its messages
        # (its own CDR definition does not), or None: its own stands (see ``defs``)
        self._judged: dict[int, Channel | None] = {}
        self._warned_topics: set[str] = set()

    def _err(self, cls: type[FormatError], what: str, offset: int | None) -> FormatError:
        """An error of class ``cls`` about this file at ``offset``."""
        return cls(what, self.path, offset)


def _guard(late: list[PolybagError]) -> Callable[[Callable[[], list[Message]]], Callable[[], list[Message]]]:
    """A wrapper for loaders: a load that meets damage (:class:`_Partial`) returns the intact
    messages before it and puts the error on ``late`` (raised once they were returned)."""

    def guard(load: Callable[[], list[Message]]) -> Callable[[], list[Message]]:
        def inner() -> list[Message]:
            try:
                return load()
            except _Partial as p:
                late.append(p.err)
                return p.msgs

        return inner

    return guard
