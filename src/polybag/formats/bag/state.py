"""The 2.0 reader's shared ground: :class:`Connection`, :class:`Chunk` and :class:`BagV2State`,
the state every part of :class:`~polybag.formats.bag.reader_v2.BagV2Reader` shares (set up
in one place, so a newcomer sees every field the parts read and write).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from polybag.formats.shared.recovery import Recovery
from polybag.io.compression import max_chunk_bytes
from polybag.io.source import MappedSource
from polybag.model import Channel, Schema, Summary

from .base import BagReader
from .records import MAGIC_V20, HeaderFields, parse_header

_EMPTY_I64 = np.zeros(0, np.int64)


@dataclass
class Connection:
    """A bag connection record: its id, topic and the connection header fields."""

    id: int
    topic: str
    fields: dict[str, bytes]

    @property
    def type(self) -> str:
        """The message type (``type`` field), e.g. ``std_msgs/String``."""
        return self.fields.get("type", b"").decode("utf-8", "replace")

    @property
    def md5sum(self) -> str:
        """The message type's md5sum (``md5sum`` field)."""
        return self.fields.get("md5sum", b"").decode("ascii", "replace")

    @property
    def definition(self) -> bytes:
        """The message definition text (``message_definition`` field; empty if absent)."""
        return self.fields.get("message_definition", b"")


@dataclass
class Chunk:
    """One chunk (or a run of records outside any chunk) and what is known about it.

    A chunk of an indexed bag starts from its chunk info record alone (``lazy``): its chunk
    record's header fields (``data_start``, ``data_len``, ``compression``, ``size``,
    ``record_len``, ``index_end``) are read when something first needs them
    (:meth:`~polybag.formats.bag.index.IndexMixin._header`), so that opening a bag reads no
    chunk record; until then its extent in the file runs to ``next_pos``.
    """

    pos: int  # file offset of the chunk record (or of the first loose record)
    data_start: int  # file offset of the (compressed) chunk data (lazy: not read yet)
    data_len: int  # compressed length present in the file (lazy: not read yet)
    compression: str  # (lazy: not read yet)
    size: int  # declared uncompressed size (-1: unknown, cut chunk; lazy: not read yet)
    start: int = 0
    end: int = 0
    counts: dict[int, int] = field(default_factory=dict)
    record_len: int = 0
    # message entries (uncompressed coordinates); None until loaded
    times: np.ndarray | None = None
    conns: np.ndarray | None = None
    offsets: np.ndarray | None = None  # record offsets
    dstart: np.ndarray | None = None  # payload offsets (scan only)
    dlen: np.ndarray | None = None
    buffer: bytes | memoryview | None = None  # kept for loose / partially recovered chunks
    index_end: int = 0  # file offset after the chunk's index data records
    valid_end: int = -1  # end of the last intact record in the uncompressed data (-1: all)
    damaged: bool = False
    lazy: bool = False  # the chunk record's header is not read yet (see above)
    next_pos: int = 0  # where the next chunk (or the index section) starts: this one's extent


def _conn_from_record(
    h: dict[str, bytes], view: memoryview | bytes, dstart: int, dlen: int, path: str | None, offset: int
) -> Connection:
    """The :class:`Connection` of a connection record (header ``h``, data at ``dstart``)."""
    f = HeaderFields(h, path, offset, "connection")
    cid = f.u32("conn")
    topic = f.str("topic")
    fields = parse_header(view, dstart, dlen, path, offset)
    return Connection(cid, topic, fields)


class BagV2State(BagReader):
    """What every part of :class:`~polybag.formats.bag.reader_v2.BagV2Reader` reads and writes.

    The reader is built from one mixin per job (``index``: the bag header and the index;
    ``chunks``: one chunk's bytes and records; ``scan``: the record-by-record scan of a bag
    without a usable index; ``order``: which chunks a read loads, in what order, and their
    messages); they share the state set up here (:meth:`_init_state`, called by the reader's
    constructor), on one object, so moving a method between them changes nothing.
    """

    def _init_state(self, source: MappedSource, recover: bool, options: dict[str, Any]) -> None:
        """Every field the parts read and write, before anything is read (``options`` as
        :class:`~polybag.formats.bag.reader_v2.BagV2Reader` takes them)."""
        self.recover = recover
        # lz4 content checksums are skipped on the fast path; `polybag check` turns this on
        self.verify_checksums = bool(options.get("verify_checksums", False))
        # what one chunk may decompress to (a chunk declaring more is an error, not an allocation)
        self.max_chunk_bytes = max_chunk_bytes(options.get("max_chunk_bytes"))
        self.view = source.view
        self.size = source.size
        self.version = "2.0"
        self.recovery_report: dict[str, Any] | None = None
        # damage met; ``first``: raised (when not recovering) once the intact messages are given
        self._recovery = Recovery()
        self.conns: dict[int, Connection] = {}
        self.chunks: list[Chunk] = []
        self.indexed = False  # read through the index (never when recovering)
        self.index_problem: str | None = None  # why the index was not used
        self._scanned = False
        self._channels: dict[int, Channel] | None = None
        self._summary: Summary | None = None
        # from the bag header record
        self.index_pos = 0
        self.header_conn_count = 0
        self.header_chunk_count = 0
        self.data_start = len(MAGIC_V20)  # after the bag header record

    def channel_map(self) -> dict[int, Channel]:
        """The model channels of the connections (by connection id; built once, after the
        index or the scan): one schema per (type, definition), md5sum, type, callerid and
        latching in the metadata."""
        if self._channels is None:
            schemas: dict[tuple[str, bytes], Schema] = {}
            out: dict[int, Channel] = {}
            for cid in sorted(self.conns):
                c = self.conns[cid]
                key = (c.type, c.definition)
                s = schemas.get(key)
                if s is None:
                    s = schemas[key] = Schema(len(schemas) + 1, c.type, "ros1msg", bytes(c.definition))
                md: dict[str, str] = {"md5sum": c.md5sum, "type": c.type}
                for k in ("callerid", "latching"):
                    if k in c.fields:
                        md[k] = c.fields[k].decode("utf-8", "replace")
                out[cid] = Channel(cid, c.topic, "ros1", s, md)
            self._channels = out
        return self._channels
