"""Reading a non-seekable stream strictly forward, in file order.

:class:`StreamReader` reads the top-level records as they come (checking the data section
CRC at DataEnd and the summary CRC at the Footer), applies each definition where it lies,
and decodes a chunk once the Message Index records after it have been seen (their
offsets select its messages).  Log-time order and reverse need the whole file: the
reader then spools the stream first (:meth:`StreamReader.spool`).
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Callable, Generator, Iterable, Iterator

from polybag.errors import ChecksumError, FormatError, PolybagError, TruncatedError
from polybag.formats.mcap import records as R
from polybag.formats.mcap.bulk_kernels import positions_from_index_records
from polybag.formats.mcap.chunks import ChunkReader
from polybag.formats.mcap.context import McapContext
from polybag.formats.mcap.definitions import McapDefinitions
from polybag.formats.mcap.records import MAGIC, MESSAGE_HEAD_LEN, RECORD_HEAD, U32
from polybag.formats.mcap.vocabulary import (
    OP_CHANNEL,
    OP_CHUNK,
    OP_DATA_END,
    OP_FOOTER,
    OP_MESSAGE,
    OP_MESSAGE_INDEX,
    OP_SCHEMA,
    PartialLoad,
)
from polybag.io.source import MappedSource, StreamSource
from polybag.model import Message
from polybag.reader import TopicSelector

# (log time or 0, rank, the messages in lists): a segment of the stream
_Batches = tuple[int, int, Callable[[], Iterable[list[Message]]]]


class _Flat(itertools.chain[Message]):
    """The messages of a generator of message lists, iterated in C (no Python frame resumed
    per message), with the generator's ``close``."""

    __slots__ = ("_lists",)

    _lists: Generator[list[Message], None, None]

    @classmethod
    def over(cls, lists: Generator[list[Message], None, None]) -> _Flat:
        flat = cls.from_iterable(lists)
        assert isinstance(flat, _Flat)  # ``from_iterable`` makes an instance of ``cls``
        flat._lists = lists
        return flat

    def close(self) -> None:
        """Stop reading: no further chunk is read (what is left of the list in hand, at most
        one batch of messages already made, may still be iterated); the stream is left
        where it is."""
        self._lists.close()


class StreamReader:
    """``messages(order="file")`` from a stream, and its top-level records; a stream is read
    once (``used``), or spooled into a mapped source (:meth:`spool`).  ``head``: the Header
    record read at open (magic excluded)."""

    def __init__(self, ctx: McapContext, defs: McapDefinitions, chunks: ChunkReader) -> None:
        self.ctx = ctx
        self.defs = defs
        self.chunks = chunks
        self.used = False
        self.head = b""

    def spool(self) -> MappedSource:
        """The whole stream read into a mapped source (in memory; long: a temporary file)."""
        if self.used:
            raise PolybagError(f"{self.ctx.path}: the stream was already read; open it again")
        self.used = True
        src = self.ctx.source
        assert isinstance(src, StreamSource)
        spooled = src.spool(MAGIC + self.head)
        spooled.path = self.ctx.path
        return spooled

    def records(self) -> Iterator[tuple[int, bytes, int]]:
        """(opcode, content, file offset) of each top-level record of a stream, after the Header.

        Checks the data section CRC at DataEnd and the closing magic after the Footer.
        """
        src = self.ctx.source
        assert isinstance(src, StreamSource)
        if self.used:
            raise PolybagError(f"{self.ctx.path}: the stream was already read; open it again")
        self.used = True
        crc = zlib.crc32(MAGIC + self.head)
        check = self.ctx.validate_crcs and not self.ctx.recover
        ended = False
        scrc = 0
        while True:
            pos = src.position
            head = src.read(9)
            if len(head) < 9:
                raise self.ctx.err(TruncatedError, f"expected a record header (9 bytes), stream has {len(head)} left", pos)
            op, ln = RECORD_HEAD.unpack_from(head, 0)
            if op == 0:
                raise self.ctx.err(FormatError, "record opcode 0x00 is invalid", pos)
            body = src.read_exact(ln, f"record (opcode 0x{op:02x})")
            if op == OP_DATA_END and not ended:
                if check and ln >= 4:
                    want_crc = U32.unpack_from(body, 0)[0]
                    if want_crc and want_crc != crc:
                        raise self.ctx.err(
                            ChecksumError, f"data section CRC is {crc:#010x}, the DataEnd record holds {want_crc:#010x}", pos
                        )
                check = False
                ended = True
            elif check:
                crc = zlib.crc32(body, zlib.crc32(head, crc))
            elif ended and op != OP_FOOTER:
                scrc = zlib.crc32(body, zlib.crc32(head, scrc))
            if op == OP_FOOTER and ln >= 20 and self.ctx.validate_crcs and not self.ctx.recover:
                want_crc = U32.unpack_from(body, 16)[0]
                got = zlib.crc32(body[:16], zlib.crc32(head, scrc))
                if want_crc and got != want_crc:
                    raise self.ctx.err(ChecksumError, f"summary section CRC is {got:#010x}, the Footer records {want_crc:#010x}", pos)
            yield op, body, pos
            if op == OP_FOOTER:
                tail = src.read(8)
                if tail != MAGIC:
                    raise self.ctx.err(TruncatedError, "expected the closing MCAP magic after the Footer", src.position - len(tail))
                extra = src.read(1)
                if extra:
                    raise self.ctx.err(FormatError, "bytes follow the closing magic", src.position - 1)
                return

    def messages(self, topics: TopicSelector, start: int | None, end: int | None, order: str) -> Iterator[Message]:
        want = self.defs.want(topics)

        def lists() -> Generator[list[Message], None, None]:
            try:
                for _s, _r, load in self.segments(want, start, end):
                    yield from load()
            finally:
                self.defs.drop_want(want)

        return _Flat.over(lists())

    def segments(self, want: set[int] | None, start: int | None, end: int | None) -> Iterator[_Batches]:
        """The stream's wanted messages in file order: (0 or log time, rank, the messages in
        lists) per chunk (decoded once the Message Index records after it have been seen)
        and per loose message."""
        lo = -1 if start is None else start
        hi = 1 << 64 if end is None else end
        rank = 0
        ended = False
        pending: tuple[bytes, int] | None = None
        index_bodies: list[bytes] = []
        try:
            for op, body, pos in self.records():
                if pending is not None:
                    if op == OP_MESSAGE_INDEX:
                        index_bodies.append(body)
                        continue
                    chunk, pending = pending, None
                    seg, late = self.chunk(chunk, index_bodies, rank, want, start, end)
                    rank += 1
                    yield seg
                    if late is not None:
                        raise late
                if ended:
                    continue  # summary records: read (and CRC-checked), nothing new in them
                if op == OP_SCHEMA or op == OP_CHANNEL:
                    self.defs.define(body, op, -9, len(body), pos + 9)
                elif op == OP_CHUNK:
                    # decoded once the Message Index records after it have been seen
                    pending = (body, pos)
                    index_bodies = []
                elif op == OP_MESSAGE:
                    rec = R.parse_as(R.MessageRecord, op, body, 0, len(body), self.ctx.path, pos + 9)
                    if not (lo <= rec.log_time < hi):
                        continue
                    ch = self.defs.channels.get(rec.channel_id)
                    if ch is None:
                        raise self.ctx.err(
                            FormatError, f"message on channel {rec.channel_id}, which no earlier Channel record defines", pos
                        )
                    if want is not None and ch.id not in want:
                        continue
                    data = memoryview(body)[MESSAGE_HEAD_LEN:] if len(body) >= MESSAGE_HEAD_LEN else b""
                    one = [[Message(ch, rec.log_time, rec.publish_time, rec.sequence, data)]]

                    def loose(one: list[list[Message]] = one) -> list[list[Message]]:
                        return one

                    yield rec.log_time, rank, loose
                    rank += 1
                elif op == OP_DATA_END:
                    ended = True
        except PolybagError:
            if pending is not None:  # a complete chunk right before the damage
                chunk, pending = pending, None
                # its indexes may be cut short: walk it
                seg, _late = self.chunk(chunk, [], rank, want, start, end)
                yield seg
            raise

    def chunk(
        self,
        chunk: tuple[bytes, int],
        index_bodies: list[bytes],
        rank: int,
        want: set[int] | None,
        start: int | None,
        end: int | None,
    ) -> tuple[_Batches, PolybagError | None]:
        """The segment of a chunk read from the stream (``chunk``: its record body and offset;
        ``index_bodies``: the Message Index records that followed it), and the damage met
        after the messages it holds, if any."""
        body, pos = chunk
        buf = self.ctx.decode_chunk(body, 0, len(body), pos)
        positions = positions_from_index_records(index_bodies, len(buf)) if index_bodies else None
        late: PolybagError | None = None
        try:
            out = self.chunks.chunk_messages(buf, pos, want, start, end, positions, False, gap_defs=True, batches=True)
        except PartialLoad as p:
            out, late = p.msgs, p.err
        got: Iterable[list[Message]] = [out] if isinstance(out, list) else out
        return (0, rank, lambda: got), late
