"""Schema and Channel definitions: registering them, and files that redefine an id.

:class:`DefinitionsMixin` registers each Schema/Channel record a read meets (summary
copies, top-level records, records inside chunks), resolves forward references (a channel
whose schema, or a message whose channel, lies in a chunk not read yet), and handles ids
that the file defines again with different content: reading in file order applies each
new version where it lies; reading out of file order builds :class:`DefinitionTimeline`, the timeline
of every definition, with one pass over the chunks.

It also judges stored CDR definitions that may not describe their messages (a placeholder
``uint8 level`` for ``rcl_interfaces/msg/Log``): a channel whose ``ros2msg``/``ros2idl``
definition differs from the known type of its name is tried on one of its messages
(:func:`polybag.codecs.cdr.decoding_definition`, shared with rosbag2 bags); when it fails
and the known one decodes, the channel carries the known full definition from then on
(messages, summary, conversions), said once per topic.  A local file with a summary section
is judged at open (one message per such channel), a summary built from the data when it is
built, anything else (a remote file, a stream) on the first message a read returns.
"""

from __future__ import annotations

import bisect
import dataclasses
import warnings
from collections.abc import Callable, Iterator

import numpy as np

from polybag.errors import FormatError, PolybagError, PolybagWarning
from polybag.formats.mcap import records as R
from polybag.formats.mcap.bulk_kernels import defs_between_messages, u64_at
from polybag.formats.mcap.chunk_loader import message_index_parts
from polybag.formats.mcap.definition_timeline import DefinitionTimeline
from polybag.formats.mcap.reader_state import McapState
from polybag.formats.mcap.records import RECORD_HEAD, RECORD_MESSAGE_HEAD_LEN, U16
from polybag.formats.mcap.vocabulary import (
    OP_CHANNEL,
    OP_CHUNK,
    OP_DATA_END,
    OP_FOOTER,
    OP_MESSAGE,
    OP_SCHEMA,
    VERSION_STEP,
    ChunkDamage,
    RedefinedId,
    Where,
)
from polybag.formats.mcap.walk_kernels import walk_defs, walk_defs_quiet
from polybag.io.source import MappedSource, StreamSource
from polybag.model import Channel, Message, Schema, Summary
from polybag.reader import TopicSelector, topic_filter


def _same_record(a: R.ChannelRecord, b: R.ChannelRecord) -> bool:
    """Whether two Channel records define the same channel (a repeat, allowed by the spec)."""
    return (
        a.schema_id == b.schema_id
        and a.topic == b.topic
        and a.message_encoding == b.message_encoding
        and a.metadata == b.metadata
    )


def _same_meaning(a: Channel, b: Channel) -> bool:
    """Whether two versions of a channel read alike (everything but the internal id)."""
    sa, sb = a.schema, b.schema
    return (
        a.topic == b.topic
        and a.message_encoding == b.message_encoding
        and dict(a.metadata) == dict(b.metadata)
        and (sa is None) == (sb is None)
        and (sa is None or sb is None or (sa.name, sa.encoding, bytes(sa.data)) == (sb.name, sb.encoding, bytes(sb.data)))
    )


class DefinitionsMixin(McapState):
    """Registering Schema/Channel records; the timeline of redefined ids (:class:`DefinitionTimeline`)."""

    def _define(
        self, buf: memoryview | bytes, op: int, pos: int, e: int, base: int, chunk: int | None = None, summary: bool = False
    ) -> None:
        """Register the Schema/Channel record at ``buf[pos:e]`` (file offset ``base + pos``, or
        record offset ``pos`` inside the Chunk at ``chunk``; ``summary``: a summary copy)."""
        rec = R.parse_record(op, buf, pos + 9, e, self.path, base)
        where: Where | None = None if summary else ((base + pos, -1) if chunk is None else (chunk, pos))
        if where is not None and (self._timeline_walk or isinstance(self.source, StreamSource)):
            if where <= self._seq_where:
                return  # reading in file order: this record was registered already
            self._seq_where = where
        if isinstance(rec, R.SchemaRecord):
            if rec.id == 0:  # invalid per spec; ignored
                return
            if summary:
                self._summary_records.append(rec)
            old = self.schemas.get(rec.id)
            if old is None:
                self.schemas[rec.id] = Schema(rec.id, rec.name, rec.encoding, rec.data)
                self._def_where[(3, rec.id)] = where
            elif (old.name, old.encoding, old.data) != (rec.name, rec.encoding, rec.data):
                self._conflict(rec, where)
        elif isinstance(rec, R.ChannelRecord):
            if summary:
                self._summary_records.append(rec)
            if rec.schema_id and rec.schema_id not in self.schemas and chunk is not None:
                self._resolve_schema(rec.schema_id)  # read out of file order: its schema comes earlier
            old_rec = self._channel_records.get(rec.id)
            if old_rec is not None:
                if not _same_record(old_rec, rec):
                    self._conflict(rec, where)
                return
            schema = None
            if rec.schema_id:
                schema = self.schemas.get(rec.schema_id)
                if schema is None:
                    if not self.recover:
                        raise self._err(
                            FormatError, f"channel {rec.id} ({rec.topic}) refers to schema {rec.schema_id}, not defined before it", base + pos
                        )
            self._channel_records[rec.id] = rec
            self._def_where[(4, rec.id)] = where
            ch = Channel(rec.id, rec.topic, rec.message_encoding, schema, rec.metadata)
            self._channels[rec.id] = ch
            for sel, live in self._live_wants:
                if topic_filter(sel, [ch]):
                    live.add(rec.id)

    def _conflict(self, rec: R.SchemaRecord | R.ChannelRecord, where: Where | None) -> None:
        """A definition that differs from the one in force for its id."""
        if self._timeline is not None:
            return  # the timeline is complete already
        kind = "Schema" if isinstance(rec, R.SchemaRecord) else "Channel"
        if where is None:  # the summary section disagrees with itself
            self.definition_problems.append(
                f"{self.path}: the summary section holds two different {kind} records for id {rec.id} "
                f"({self._describe(rec)}): it cannot describe the file, whose data section is read instead"
            )
            self._need_timeline = True
            return
        if self._timeline_walk or isinstance(self.source, StreamSource):
            self._apply(rec, where)
            return
        self._need_timeline = True
        if not self._noting:
            raise RedefinedId

    def _describe(self, rec: R.SchemaRecord | R.ChannelRecord) -> str:
        """How the definition in force for ``rec``'s id differs from ``rec``."""
        if isinstance(rec, R.SchemaRecord):
            old = self.schemas[rec.id]
            diffs = [f"{k} {a!r} -> {b!r}" for k, a, b in (("name", old.name, rec.name), ("encoding", old.encoding, rec.encoding)) if a != b]
            if old.data != rec.data:
                diffs.append(f"data of {len(old.data)} -> {len(rec.data)} bytes, different")
            return ", ".join(diffs)
        o = self._channel_records[rec.id]
        pairs = (
            ("topic", o.topic, rec.topic),
            ("message_encoding", o.message_encoding, rec.message_encoding),
            ("schema id", o.schema_id, rec.schema_id),
            ("metadata", o.metadata, rec.metadata),
        )
        return ", ".join(f"{k} {a!r} -> {b!r}" for k, a, b in pairs if a != b)

    @staticmethod
    def _where_text(where: Where | None) -> str:
        if where is None:
            return "the summary section"
        if where[1] < 0:
            return f"offset {where[0]}"
        return f"offset {where[0]} (the Chunk there, record offset {where[1]})"

    def _apply(self, rec: R.SchemaRecord | R.ChannelRecord, where: Where) -> None:
        """Reading in file order met a redefinition: from ``where`` on, ``rec`` is in force."""
        kind = "Schema" if isinstance(rec, R.SchemaRecord) else "Channel"
        op = 3 if kind == "Schema" else 4
        self.definition_problems.append(
            f"{self.path}: {self._where_text(where)}: {kind} record redefines {kind.lower()} id {rec.id} "
            f"({self._describe(rec)}), defined at {self._where_text(self._def_where.get((op, rec.id)))}; "
            f"ids must be unique in an MCAP file: each message is read with the definition in force where it lies"
        )
        self._def_where[(op, rec.id)] = where
        if isinstance(rec, R.SchemaRecord):
            sid = rec.id
            k = self._nversions[(3, sid)] = self._nversions.get((3, sid), 0) + 1
            old_s = self.schemas[sid]
            new_s = Schema(sid + k * VERSION_STEP, rec.name, rec.encoding, rec.data)
            self.schemas[sid] = new_s
            self._schema_changes.append((where, sid, old_s, new_s))
            for cid, crec in list(self._channel_records.items()):
                if crec.schema_id == sid:  # its channels read with the new schema from here on
                    self._version(cid, crec, where)
        else:
            self._first_records.setdefault(rec.id, self._channel_records[rec.id])
            self._channel_records[rec.id] = rec
            self._version(rec.id, rec, where)

    def _version(self, cid: int, rec: R.ChannelRecord, where: Where) -> None:
        """A new version of channel ``cid`` (a model channel of its own), in force from ``where``."""
        k = self._nversions[(4, cid)] = self._nversions.get((4, cid), 0) + 1
        schema = self.schemas.get(rec.schema_id) if rec.schema_id else None
        if rec.schema_id and schema is None and not self.recover:
            raise self._err(
                FormatError, f"channel {cid} ({rec.topic}) refers to schema {rec.schema_id}, not defined before it", where[0]
            )
        ch = Channel(cid + k * VERSION_STEP, rec.topic, rec.message_encoding, schema, rec.metadata)
        self._changes.append((where, cid, self._channels[cid], ch))
        self._channels[cid] = ch
        for sel, live in self._live_wants:
            if topic_filter(sel, [ch]):
                live.add(ch.id)

    def _want(self, topics: TopicSelector) -> set[int] | None:
        """Channel ids matching ``topics``; grows as later Channel records are found."""
        if topics is None:
            return None
        known = self._timeline.channels if self._timeline is not None else list(self._channels.values())
        live = topic_filter(topics, known) or set()
        self._live_wants.append((topics, live))
        return live

    def _want_checked(self, topics: TopicSelector) -> set[int] | None:
        """:meth:`_want`; a filter that matches none of the channels a summary names may be
        after a version of a redefined id that the summary (one record per id) leaves out:
        then every definition is read first (one pass over the chunks)."""
        want = self._want(topics)
        if want is not None and not want and self._timeline is None and self.has_summary and self.chunk_indexes:
            self._build_timeline()  # refreshes ``want`` in place
        return want

    def _drop_want(self, want: set[int] | None) -> None:
        """The read that used ``want`` is over: it no longer grows."""
        self._live_wants = [w for w in self._live_wants if w[1] is not want]

    def _build_timeline(self) -> None:
        """Build the definition timeline (:class:`DefinitionTimeline`) from every definition of the data
        section in file order: top-level records and every chunk's (each chunk is
        decompressed once).  The summary's copies only fill in ids the data never defines."""
        if self._timeline is not None:
            return
        src = self.source
        assert isinstance(src, MappedSource)
        saved_schemas, saved_channels, saved_records = self.schemas, self._channels, self._channel_records
        self.schemas, self._channels, self._channel_records, self._def_where = {}, {}, {}, {}
        self._changes, self._schema_changes, self._nversions, self._first_records = [], [], {}, {}
        self.definition_problems = [p for p in self.definition_problems if "summary section holds" in p]
        self._seq_where = (-1, -1)
        self._timeline_walk = True
        try:
            self._walk_all_definitions(src)
        finally:
            self._timeline_walk = False
        for sid, s in saved_schemas.items():  # defined only in the summary
            self.schemas.setdefault(sid, s)
        for cid, ch in saved_channels.items():
            if cid not in self._channels and cid < VERSION_STEP:
                self._channels[cid] = ch
                self._channel_records[cid] = saved_records[cid]
        cen = self._timeline = self._timeline_from_changes()
        self._need_timeline = False
        self._summary = None
        for sel, live in self._live_wants:
            live.clear()
            live.update(topic_filter(sel, cen.channels) or ())
        self._check_summary_copies(cen.versions)

    def _walk_all_definitions(self, src: MappedSource) -> None:
        """The timeline walk: register every definition of the data section in file order
        (top-level records, and each chunk's, decompressed once); damage is skipped."""
        src.need_all()  # every definition of the data section
        view, size = src.view, src.size
        pos = self._header_end or 8
        while pos + 9 <= size:
            op, ln = RECORD_HEAD.unpack_from(view, pos)
            e = pos + 9 + ln
            if op == 0 or e > size or op == OP_DATA_END or op == OP_FOOTER:
                break
            try:
                if op == OP_SCHEMA or op == OP_CHANNEL:
                    self._define(view, op, pos, e, 0)
                elif op == OP_CHUNK:
                    buf = self._chunk_data(pos)
                    walk_defs(buf, self._defs_for(buf, 0, pos))
            except (PolybagError, ChunkDamage):
                pass  # damage: reading the chunk reports it
            pos = e

    def _timeline_from_changes(self) -> DefinitionTimeline:
        """The timeline from the versions the timeline walk applied; the first version of each
        redefined id is put back in force under the file's id."""
        versions: dict[int, list[tuple[Where, Channel]]] = {}
        inside: dict[int, list[tuple[int, int, Channel]]] = {}
        for where, cid, old, new in self._changes:
            versions.setdefault(cid, [((-1, -1), old)]).append((where, new))
            if where[1] >= 0:
                inside.setdefault(where[0], []).append((where[1], cid, new))
        schemas_all: dict[int, Schema] = {}
        for _w, sid, old_s, new_s in self._schema_changes:
            if sid not in schemas_all:
                schemas_all[sid] = self.schemas[sid] = old_s  # the first version keeps the file id
            schemas_all[new_s.id] = new_s
        for cid, lst in versions.items():
            self._channels[cid] = lst[0][1]
            self._channel_records[cid] = self._first_records.get(cid, self._channel_records[cid])
        for sid, s in self.schemas.items():
            schemas_all.setdefault(sid, s)
        channels_all = list(self._channels.values()) + [new for _w, _c, _o, new in self._changes]
        return DefinitionTimeline(
            versions, {cid: [w for w, _ in lst] for cid, lst in versions.items()}, inside, channels_all, schemas_all
        )

    def _check_summary_copies(self, versions: dict[int, list[tuple[Where, Channel]]]) -> None:
        """Report each of the summary's Channel copies that matches no Channel record of its
        id in the data section."""
        for rec in self._summary_records:  # the summary's copies against the data section
            if isinstance(rec, R.ChannelRecord):
                vs = [v for _w, v in versions.get(rec.id, ())] or [c for c in [self._channels.get(rec.id)] if c is not None]
                if vs and not any(
                    (v.topic, v.message_encoding, dict(v.metadata)) == (rec.topic, rec.message_encoding, rec.metadata) for v in vs
                ):
                    self.definition_problems.append(
                        f"{self.path}: the summary section's Channel record for id {rec.id} (topic {rec.topic!r}) "
                        f"matches no Channel record of that id in the data section"
                    )

    def _timeline_mid_read(self, returned: bool) -> None:
        """A read met a definition that changes a channel: build the timeline.  What it
        loaded before (and, if ``returned``, handed out) used the definitions known then; if
        the timeline gives any of it another channel, FormatError (read again)."""
        before = dict(self._channels)
        loaded = self._loaded[:-1]  # the last one is the load that met the definition
        self._build_timeline()
        cen = self._timeline
        assert cen is not None
        if not returned:
            return
        for a, b, seen in loaded:
            for cid, keys in cen.keys.items():
                old = before.get(cid)
                j = bisect.bisect_left(keys, (a, -1))
                changed = old is not None and not _same_meaning(cen.at(cid, (a, -1)), old)
                inner = j < len(keys) and keys[j] <= (b, 1 << 62)
                if a == b and (seen or not inner):
                    # a chunk whose definitions were all registered without a conflict read as
                    # the timeline says from its first one on: only messages before it can differ
                    changed = changed and self._message_before(a, cid, keys[j][1] if inner else 1 << 62)
                elif inner:
                    changed = True
                if changed:
                    raise self._err(
                        FormatError,
                        f"offset {a}: messages were returned with channel {cid} as the summary or an earlier "
                        f"record defined it, but the data section redefines it; read again (this reader now "
                        f"follows every definition)",
                        a,
                    )

    def _message_before(self, chunk: int, cid: int, end: int) -> bool:
        """Whether the chunk at ``chunk`` holds a message on ``cid`` before record offset ``end``."""
        try:
            buf = self._chunk_data(chunk)
        except PolybagError:
            return True
        pos = 0
        head = RECORD_HEAD.unpack_from
        while pos < end and pos + 11 <= len(buf):
            op, ln = head(buf, pos)
            if op == 5 and U16.unpack_from(buf, pos + 9)[0] == cid:
                return True
            pos += 9 + ln
        return False

    def _defs_ready(self) -> None:
        """Before reading a mapped file: a redefinition already seen (summary, top-level
        records) builds the timeline first."""
        if self._timeline is not None or not isinstance(self.source, MappedSource):
            return
        if not (self.has_summary and self.chunk_indexes):
            self._scan()  # what reading scans anyway: its top-level definitions
        if self._need_timeline:
            self._build_timeline()

    def _defs_for(self, buf: bytes | memoryview, base: int, chunk: int | None = None) -> Callable[[int, int, int], None]:
        def defs(op: int, pos: int, e: int) -> None:
            if op != OP_MESSAGE:
                if not self.recover:
                    self._define(buf, op, pos, e, base, chunk)
                    return
                try:
                    self._define(buf, op, pos, e, base, chunk)
                except PolybagError as err:  # recovering: a damaged definition is skipped
                    self._note(str(err), e - pos)

        return defs

    def _walk_chunk_defs(self, off: int) -> None:
        """Register the definitions of the chunk at ``off`` (resolving a forward reference)."""
        try:
            buf = self._chunk_data(off)
            walk_defs(buf, self._defs_for(buf, 0, off))
        except ChunkDamage as b:
            if not self.recover:
                raise self._err(FormatError, f"inside Chunk at {off}: {b.what} (at record offset {b.pos})", off) from None
        except PolybagError:
            if not self.recover:
                raise

    def _resolve_schema(self, sid: int) -> None:
        """A channel refers to a schema not yet seen (a chunk read out of file order): scan
        chunks' definitions for it."""
        if isinstance(self.source, MappedSource) and not self._timeline_walk:
            chunks = self._chunk_list()
            while sid not in self.schemas and self._defs_scanned < len(chunks):
                off = chunks[self._defs_scanned][0]
                self._defs_scanned += 1
                self._walk_chunk_defs(off)

    def _resolve_channel(self, cid: int) -> Channel | None:
        """A message refers to a channel not yet seen: scan chunks' definitions for it."""
        if isinstance(self.source, MappedSource):
            chunks = self._chunk_list()
            while cid not in self._channel_records and self._defs_scanned < len(chunks):
                off = chunks[self._defs_scanned][0]
                self._defs_scanned += 1
                self._walk_chunk_defs(off)
        return self._channels.get(cid)

    def _index_defs(self, buf: bytes | memoryview, ci: R.ChunkIndex) -> None:
        """Register the Schema/Channel records of a chunk read for some of its messages (so
        one that redefines an id is noticed): when its Message Indexes list every message,
        only a chunk whose message records do not fill it holds any."""
        parts = message_index_parts(self._mapped(), ci, None)
        defs = self._defs_for(buf, 0, ci.chunk_start_offset)
        n = len(buf)
        if parts:
            pos = np.concatenate([p["offset"] for _c, p in parts]).astype(np.int64)
            if not len(pos):
                return walk_defs_quiet(buf, defs)
            if int(pos.min()) >= 0 and int(pos.max()) + RECORD_MESSAGE_HEAD_LEN <= n:
                lens = u64_at(buf, pos + 1)
                with np.errstate(over="ignore"):
                    filled = int(lens.sum(dtype=np.uint64)) + 9 * len(pos)
                if filled == n and bool((lens <= np.uint64(n)).all()):
                    return None  # messages only
                pos.sort()
                try:
                    if defs_between_messages(buf, pos, defs):
                        return None
                except ChunkDamage:
                    pass
        return walk_defs_quiet(buf, defs)

    def _defs_upto(self, off: int) -> None:
        """Without a summary: register the definitions of every chunk before ``off`` in file
        order before reading the one there (reading out of file order, a redefinition in an
        earlier chunk is then found before a message it changes is returned).  Chunks read in
        file order cost nothing extra: each advances the frontier as it is read."""
        if self._timeline is not None or (self.has_summary and self.chunk_indexes):
            return
        chunks = self._scan().chunks
        while self._defs_scanned < len(chunks) and chunks[self._defs_scanned][0] < off:
            o = chunks[self._defs_scanned][0]
            self._defs_scanned += 1
            if o + 1 == off:
                continue  # the chunk just read
            try:
                buf = self._chunk_data(o)
                walk_defs(buf, self._defs_for(buf, 0, o))
            except (PolybagError, ChunkDamage):
                pass  # reading that chunk reports the damage

    # --- stored definitions that do not decode their messages ------------------------------------
    def _suspect(self, ch: Channel) -> bool:
        """Whether ``ch`` is a CDR channel whose stored definition describes another structure
        than the known type of its name (:func:`polybag.codecs.cdr.differs_from_known`: no
        reading, its messages may not decode with it)."""
        s = ch.schema
        if ch.message_encoding != "cdr" or s is None:
            return False
        from polybag.codecs.cdr import differs_from_known

        return differs_from_known(s.name, s.encoding, s.data)

    def _judge(self, ch: Channel, sample: bytes | memoryview) -> Channel | None:
        """Decide, once per channel and from one of its messages (``sample``), whether the
        file's definition of ``ch`` stands: when it does not decode ``sample`` and the known
        one of that name (``--types``, then bundled) does, the channel with the known full
        definition (warned once per topic), which messages, the summary and conversions
        then carry; None otherwise."""
        rep: Channel | None = None
        s = ch.schema
        if s is not None and self._suspect(ch):
            from polybag.codecs.cdr import decoding_definition

            got = decoding_definition(s.name, s.encoding, s.data, sample)
            if got is not None:
                enc, text, why = got
                rep = dataclasses.replace(ch, schema=Schema(s.id, s.name, enc, text))
                if ch.topic not in self._warned_topics:
                    self._warned_topics.add(ch.topic)
                    warnings.warn(
                        PolybagWarning(
                            f"{self.path}: topic {ch.topic}: the file's definition of {s.name} does not decode its "
                            f"messages ({why}); polybag's own definition of {s.name} does and is used"
                        ),
                        stacklevel=2,
                    )
        self._judged[ch.id] = rep
        if rep is not None and self._summary is not None:
            self._judged_into(self._summary)
        return rep

    def _judged_into(self, summary: Summary) -> None:
        """``summary`` with the channels (and schemas) :meth:`_judge` replaced."""
        for cid, rep in self._judged.items():
            if rep is not None and cid in summary.channels:
                summary.channels[cid] = rep
                if rep.schema is not None and rep.schema.id in summary.schemas:
                    summary.schemas[rep.schema.id] = rep.schema

    def _judge_at_open(self) -> None:
        """A local mapped file whose summary section names channels with a suspect
        definition: each is judged on its first message now (one chunk read per such
        channel; none at all for a file without one), so that the summary (and a
        conversion's channels, written before any message) carry the definition that
        decodes.  A remote file is judged on the first message a read returns (no range
        request beyond what a read makes), a stream likewise."""
        src = self.source
        if self.recover or not isinstance(src, MappedSource) or src.stats is not None:
            return
        self._judge_channels(list(self._channels.values()))

    def _judge_summary(self, summary: Summary) -> None:
        """The summary just built: a summary found by reading the data (no usable summary
        section, recovering, a spooled stream) or of a local file judges its suspect channels
        now (their chunks were read, or are local: one message each); then it carries every
        replacement."""
        src = self.source
        if isinstance(src, MappedSource) and (not summary.indexed or src.stats is None):
            self._judge_channels(list(summary.channels.values()))
        self._judged_into(summary)

    def _judge_channels(self, channels: list[Channel]) -> None:
        """Judge each suspect channel of ``channels`` not judged yet on its first message
        (one read per such channel, dropped once the message is found)."""
        for ch in channels:
            if ch.id in self._judged or not self._suspect(ch):
                continue
            try:
                it = self._mapped_messages([ch.topic], None, None, False, "file")
                first = next((m for m in it if m.channel.id == ch.id), None)
                del it
            except PolybagError:
                continue  # damage: the read that meets it says so; judged on a later read
            if first is not None and ch.id not in self._judged:
                self._judge(ch, first.data)

    def _judging(self, it: Iterator[Message]) -> Iterator[Message]:
        """``it`` with each channel judged on its first message (:meth:`_judge`) and the
        messages of a replaced channel carrying the replacement."""
        judged = self._judged
        last: Channel | None = None
        rep: Channel | None = None
        for m in it:
            ch = m.channel
            if ch is not last:
                last = ch
                rep = judged[ch.id] if ch.id in judged else self._judge(ch, m.data)
            if rep is not None:
                m.channel = rep
            yield m

    def _needs_judging(self) -> bool:
        """Whether a read must pass its messages through :meth:`_judging`: a channel may be
        unknown yet (a stream, a file without a summary section whose summary was not built
        from its data yet) or is suspect or replaced."""
        if not isinstance(self.source, MappedSource):
            return True
        if self.has_summary and self._timeline is None:
            known = list(self._channels.values())
        elif self._summary is not None and not self._summary.indexed:
            known = list(self._summary.channels.values())  # found by reading the data: every channel
        else:
            return True
        for ch in known:
            if ch.id not in self._judged and not self._suspect(ch):
                self._judged[ch.id] = None
            if self._judged.get(ch.id, ch) is not None:
                return True
        return False
