"""The index of a 2.0 bag as a value: :class:`BagIndex` (the bag header's fields, the
connections and the chunks, each a :class:`Chunk`), built by plain functions.

* :func:`read_bag_header`: ``index_pos``, the declared counts and where the data starts.
* :func:`load_index`: the connection records and chunk infos of the index section at
  ``index_pos``, checked against the bag header and each other (no chunk record is read:
  a chunk's header comes with its data, see :class:`~polybag.formats.bag.chunks.ChunkLoader`).
  An index that does not hold together raises; the reader then rebuilds the index by a scan
  (:func:`~polybag.formats.bag.scan.scan_bag`).
* :func:`channel_map`: the model channels of the connections.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from polybag.errors import FormatError, UnsupportedError
from polybag.io.source import MappedSource
from polybag.model import Channel, Schema

from .damage import Damage
from .records import (
    CHUNK_INFO_DTYPE,
    MAGIC_V20,
    OP_CHUNK_INFO,
    OP_CONNECTION,
    OP_FILE_HEADER,
    OP_NAMES,
    HeaderFields,
    op_of,
    parse_header,
    read_record_at,
)

EMPTY_I64 = np.zeros(0, np.int64)


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
    (:meth:`~polybag.formats.bag.chunks.ChunkLoader.header`), so that opening a bag reads no
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


@dataclass(frozen=True)
class BagHeader:
    """The bag header record's fields (``index_pos`` 0: unindexed, or a damaged header
    when recovering) and ``data_start``, where the records after it begin."""

    index_pos: int = 0
    conn_count: int = 0
    chunk_count: int = 0
    data_start: int = len(MAGIC_V20)


@dataclass
class BagIndex:
    """What a 2.0 bag holds, from its index section (``indexed``) or rebuilt by a scan:
    the connections by id and the chunks (in index order, or file order after a scan);
    ``problem``: why the index section was not used (None when it was, or when there is
    none to use and nothing to say)."""

    header: BagHeader
    conns: dict[int, Connection] = field(default_factory=dict)
    chunks: list[Chunk] = field(default_factory=list)
    indexed: bool = False
    problem: str | None = None


def connection_from_record(
    h: dict[str, bytes], view: memoryview | bytes, dstart: int, dlen: int, path: str | None, offset: int
) -> Connection:
    """The :class:`Connection` of a connection record (header ``h``, data at ``dstart``)."""
    f = HeaderFields(h, path, offset, "connection")
    cid = f.u32("conn")
    topic = f.str("topic")
    fields = parse_header(view, dstart, dlen, path, offset)
    return Connection(cid, topic, fields)


def read_bag_header(source: MappedSource, path: str | None, damage: Damage) -> BagHeader:
    """The bag header record's fields (a damaged one, when recovering: noted in ``damage``,
    and the data scanned from where it would end)."""
    pos = len(MAGIC_V20)
    try:
        h, _ds, _dl, nxt = read_record_at(source.view, pos, source.size, path)
        op = op_of(h, path, pos)
        if op != OP_FILE_HEADER:
            raise FormatError(f"expected the bag header record (op 3), found op {op}", path, pos)
        f = HeaderFields(h, path, pos, "bag header")
        enc = f.str("encryptor", "")
        if enc:
            raise UnsupportedError(
                f"{path or '<buffer>'}: encrypted bag (encryptor {enc!r}); polybag cannot decrypt chunks"
            )
        return BagHeader(
            f.u64("index_pos"),
            f.u32("conn_count") if f.has("conn_count") else 0,
            f.u32("chunk_count") if f.has("chunk_count") else 0,
            nxt,
        )
    except FormatError as e:
        if not damage.recover:
            raise
        # a rosbag header record is 4096 bytes; resume scanning after where it would end
        data_start = min(source.size, pos + 4096)
        damage.recovery.note(str(e), data_start - pos)
        return BagHeader(0, 0, 0, data_start)


def check_chunk_pos(header: BagHeader, ci: Chunk, path: str | None) -> None:
    """A chunk info's ``chunk_pos`` lies in the data section (checked without reading)."""
    if not header.data_start <= ci.pos < header.index_pos:
        raise FormatError(f"chunk info points at {ci.pos}, outside the data section", path, ci.pos)


def load_index(source: MappedSource, path: str | None, header: BagHeader) -> tuple[dict[int, Connection], list[Chunk]]:
    """The connections and chunks of the index section, checked (raises a FormatError when
    it does not hold together); each chunk's extent runs to the next chunk record (or the
    index section)."""
    p = path
    size = source.size
    if not header.data_start <= header.index_pos <= size:
        raise FormatError(f"index_pos {header.index_pos} lies outside the file", p, 13)
    pos = header.index_pos
    source.need(pos, size - pos)  # a remote file: the index section only
    view = source.view
    conns: dict[int, Connection] = {}
    infos: list[Chunk] = []
    while pos < size:
        h, ds, dl, nxt = read_record_at(view, pos, size, p)
        op = op_of(h, p, pos)
        if op == OP_CONNECTION:
            c = connection_from_record(h, view, ds, dl, p, pos)
            conns[c.id] = c
        elif op == OP_CHUNK_INFO:
            infos.append(_chunk_from_info(view, h, ds, dl, pos, p))
        else:
            raise FormatError(f"unexpected {OP_NAMES.get(op, f'op {op}')} record in the index section", p, pos)
        pos = nxt
    _check_index(header, conns, infos, p)
    ends = sorted({ci.pos for ci in infos} | {header.index_pos})
    nxt_of = dict(zip(ends, ends[1:]))
    for ci in infos:
        ci.next_pos = nxt_of[ci.pos]
    return conns, infos


def _chunk_from_info(view: memoryview, h: dict[str, bytes], ds: int, dl: int, pos: int, p: str | None) -> Chunk:
    """The :class:`Chunk` a chunk info record (at ``pos``, data at ``ds``) describes."""
    f = HeaderFields(h, p, pos, "chunk info")
    ver = f.u32("ver")
    if ver != 1:
        raise UnsupportedError(f"{p}: offset {pos}: chunk info version {ver} (known: 1)")
    count = f.u32("count")
    if dl != count * CHUNK_INFO_DTYPE.itemsize:
        raise FormatError(f"chunk info data has {dl} bytes, count {count} needs {count * 8}", p, pos)
    arr = np.frombuffer(view[ds : ds + dl], CHUNK_INFO_DTYPE)
    counts: dict[int, int] = {}
    for c_, n_ in zip(arr["conn"].tolist(), arr["count"].tolist()):
        counts[c_] = counts.get(c_, 0) + n_
    return Chunk(f.u64("chunk_pos"), 0, 0, "none", 0, f.time("start_time"), f.time("end_time"), counts, lazy=True)


def _check_index(header: BagHeader, conns: dict[int, Connection], infos: list[Chunk], p: str | None) -> None:
    """The index section against the bag header's counts and itself: every chunk info
    points into the data section and names known connections.  The chunk records are not
    read here: a chunk info pointing at something else than a chunk record is found when
    that chunk is first needed."""
    if len(infos) != header.chunk_count:
        raise FormatError(
            f"bag header declares {header.chunk_count} chunks, index has {len(infos)} chunk info records",
            p,
            header.index_pos,
        )
    if len(conns) < header.conn_count:
        raise FormatError(
            f"bag header declares {header.conn_count} connections, index has {len(conns)}", p, header.index_pos
        )
    for ci in infos:
        check_chunk_pos(header, ci, p)
        for cid in ci.counts:
            if cid not in conns:
                raise FormatError(f"chunk info names connection {cid}, which has no connection record", p, ci.pos)


def channel_map(conns: dict[int, Connection]) -> dict[int, Channel]:
    """The model channels of the connections (by connection id): one schema per (type,
    definition), md5sum, type, callerid and latching in the metadata."""
    schemas: dict[tuple[str, bytes], Schema] = {}
    out: dict[int, Channel] = {}
    for cid in sorted(conns):
        c = conns[cid]
        key = (c.type, c.definition)
        s = schemas.get(key)
        if s is None:
            s = schemas[key] = Schema(len(schemas) + 1, c.type, "ros1msg", bytes(c.definition))
        md: dict[str, str] = {"md5sum": c.md5sum, "type": c.type}
        for k in ("callerid", "latching"):
            if k in c.fields:
                md[k] = c.fields[k].decode("utf-8", "replace")
        out[cid] = Channel(cid, c.topic, "ros1", s, md)
    return out
