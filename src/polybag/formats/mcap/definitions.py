"""Schema and Channel definitions: registering them, and files that redefine an id.

:class:`McapDefinitions` registers each Schema/Channel record a read meets (summary
copies, top-level records, records inside chunks; forward references, a channel whose
schema or a message whose channel lies in a chunk not read yet, are found by
:class:`~polybag.formats.mcap.definition_finder.DefinitionFinder`), and handles ids
that the file defines again with different content: reading in file order applies each
new version where it lies; reading out of file order builds :class:`DefinitionTimeline`, the timeline
of every definition, with one pass over the chunks.  Judging stored CDR definitions that
may not describe their messages is :mod:`polybag.formats.mcap.judging`'s.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

from polybag.errors import FormatError, PolybagError
from polybag.formats.mcap import records as R
from polybag.formats.mcap.context import McapContext
from polybag.formats.mcap.definition_timeline import DefinitionTimeline, VersionLog
from polybag.formats.mcap.vocabulary import (
    VERSION_STEP,
    RedefinedId,
    Where,
)
from polybag.formats.mcap.walk_kernels import message_before
from polybag.io.source import MappedSource, StreamSource
from polybag.model import Channel, Schema
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


def _no_schema(sid: int) -> None:
    """``resolve_schema`` until the reader hands over its finder's."""


def _no_walk(src: MappedSource) -> None:
    """``walk_all`` until the reader hands over its finder's."""


class McapDefinitions:
    """Registering Schema/Channel records; the timeline of redefined ids (:class:`DefinitionTimeline`).

    ``schemas`` and ``channels`` are the definitions in force (by file id); ``timeline``
    once a redefinition made one necessary (``need_timeline``); ``loaded``: what the read in
    progress loaded, (first, last offset, whether its definitions were all registered).
    """

    def __init__(self, ctx: McapContext) -> None:
        self.ctx = ctx
        self.schemas: dict[int, Schema] = {}
        self.channels: dict[int, Channel] = {}
        self.channel_records: dict[int, R.ChannelRecord] = {}
        self.live_wants: list[tuple[TopicSelector, set[int]]] = []
        # redefined ids (see DefinitionTimeline): problems found, versions applied in file order
        # (streams, the timeline walk), and the timeline once one is known
        self.definition_problems: list[str] = []
        self.timeline: DefinitionTimeline | None = None
        self.need_timeline = False  # a redefinition (or a hint of one) was seen: build the timeline
        self._noting = 0  # > 0: a conflict only sets need_timeline (summary, scan)
        self.timeline_walk = False  # building the timeline: every definition in file order
        self.versions = VersionLog()
        self._summary_records: list[R.SchemaRecord | R.ChannelRecord] = []
        self.loaded: list[tuple[int, int, bool]] = []
        # reading chunks for their definitions (:class:`~polybag.formats.mcap.definition_finder.DefinitionFinder`'s,
        # handed over by the reader): a schema a channel refers to, every definition (the timeline walk)
        self.resolve_schema: Callable[[int], None] = _no_schema
        self.walk_all: Callable[[MappedSource], None] = _no_walk

    def define_scanned(self, buf: memoryview, op: int, pos: int, e: int, base: int) -> None:
        """:meth:`define` for the scan of the top-level records: a redefinition found there only
        asks for the timeline."""
        self._noting += 1
        try:
            self.define(buf, op, pos, e, base)
        finally:
            self._noting -= 1

    def known_channel(self, cid: int) -> bool:
        """Whether channel ``cid`` is defined so far."""
        return cid in self.channel_records

    def define(
        self, buf: memoryview | bytes, op: int, pos: int, e: int, base: int, chunk: int | None = None, summary: bool = False
    ) -> None:
        """Register the Schema/Channel record at ``buf[pos:e]`` (file offset ``base + pos``, or
        record offset ``pos`` inside the Chunk at ``chunk``; ``summary``: a summary copy)."""
        rec = R.parse_record(op, buf, pos + 9, e, self.ctx.path, base)
        where: Where | None = None if summary else ((base + pos, -1) if chunk is None else (chunk, pos))
        if where is not None and (self.timeline_walk or isinstance(self.ctx.source, StreamSource)):
            if where <= self.versions.last_applied:
                return  # reading in file order: this record was registered already
            self.versions.last_applied = where
        if isinstance(rec, R.SchemaRecord):
            if rec.id == 0:  # invalid per spec; ignored
                return
            if summary:
                self._summary_records.append(rec)
            old = self.schemas.get(rec.id)
            if old is None:
                self.schemas[rec.id] = Schema(rec.id, rec.name, rec.encoding, rec.data)
                self.versions.where_defined[(3, rec.id)] = where
            elif (old.name, old.encoding, old.data) != (rec.name, rec.encoding, rec.data):
                self._conflict(rec, where)
        elif isinstance(rec, R.ChannelRecord):
            if summary:
                self._summary_records.append(rec)
            if rec.schema_id and rec.schema_id not in self.schemas and chunk is not None:
                self.resolve_schema(rec.schema_id)  # read out of file order: its schema comes earlier
            old_rec = self.channel_records.get(rec.id)
            if old_rec is not None:
                if not _same_record(old_rec, rec):
                    self._conflict(rec, where)
                return
            schema = None
            if rec.schema_id:
                schema = self.schemas.get(rec.schema_id)
                if schema is None:
                    if not self.ctx.recover:
                        raise self.ctx.err(
                            FormatError, f"channel {rec.id} ({rec.topic}) refers to schema {rec.schema_id}, not defined before it", base + pos
                        )
            self.channel_records[rec.id] = rec
            self.versions.where_defined[(4, rec.id)] = where
            ch = Channel(rec.id, rec.topic, rec.message_encoding, schema, rec.metadata)
            self.channels[rec.id] = ch
            for sel, live in self.live_wants:
                if topic_filter(sel, [ch]):
                    live.add(rec.id)

    def _conflict(self, rec: R.SchemaRecord | R.ChannelRecord, where: Where | None) -> None:
        """A definition that differs from the one in force for its id."""
        if self.timeline is not None:
            return  # the timeline is complete already
        kind = "Schema" if isinstance(rec, R.SchemaRecord) else "Channel"
        if where is None:  # the summary section disagrees with itself
            self.definition_problems.append(
                f"{self.ctx.path}: the summary section holds two different {kind} records for id {rec.id} "
                f"({self._describe(rec)}): it cannot describe the file, whose data section is read instead"
            )
            self.need_timeline = True
            return
        if self.timeline_walk or isinstance(self.ctx.source, StreamSource):
            self._apply(rec, where)
            return
        self.need_timeline = True
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
        o = self.channel_records[rec.id]
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
            f"{self.ctx.path}: {self._where_text(where)}: {kind} record redefines {kind.lower()} id {rec.id} "
            f"({self._describe(rec)}), defined at {self._where_text(self.versions.where_defined.get((op, rec.id)))}; "
            f"ids must be unique in an MCAP file: each message is read with the definition in force where it lies"
        )
        self.versions.where_defined[(op, rec.id)] = where
        if isinstance(rec, R.SchemaRecord):
            sid = rec.id
            k = self.versions.next_version(3, sid)
            old_s = self.schemas[sid]
            new_s = Schema(sid + k * VERSION_STEP, rec.name, rec.encoding, rec.data)
            self.schemas[sid] = new_s
            self.versions.schema_changes.append((where, sid, old_s, new_s))
            for cid, crec in list(self.channel_records.items()):
                if crec.schema_id == sid:  # its channels read with the new schema from here on
                    self._version(cid, crec, where)
        else:
            self.versions.first_records.setdefault(rec.id, self.channel_records[rec.id])
            self.channel_records[rec.id] = rec
            self._version(rec.id, rec, where)

    def _version(self, cid: int, rec: R.ChannelRecord, where: Where) -> None:
        """A new version of channel ``cid`` (a model channel of its own), in force from ``where``."""
        k = self.versions.next_version(4, cid)
        schema = self.schemas.get(rec.schema_id) if rec.schema_id else None
        if rec.schema_id and schema is None and not self.ctx.recover:
            raise self.ctx.err(
                FormatError, f"channel {cid} ({rec.topic}) refers to schema {rec.schema_id}, not defined before it", where[0]
            )
        ch = Channel(cid + k * VERSION_STEP, rec.topic, rec.message_encoding, schema, rec.metadata)
        self.versions.changes.append((where, cid, self.channels[cid], ch))
        self.channels[cid] = ch
        for sel, live in self.live_wants:
            if topic_filter(sel, [ch]):
                live.add(ch.id)

    def want(self, topics: TopicSelector) -> set[int] | None:
        """Channel ids matching ``topics``; grows as later Channel records are found."""
        if topics is None:
            return None
        known = self.timeline.channels if self.timeline is not None else list(self.channels.values())
        live = topic_filter(topics, known) or set()
        self.live_wants.append((topics, live))
        return live

    def want_checked(self, topics: TopicSelector) -> set[int] | None:
        """:meth:`want`; a filter that matches none of the channels a summary names may be
        after a version of a redefined id that the summary (one record per id) leaves out:
        then every definition is read first (one pass over the chunks)."""
        want = self.want(topics)
        if want is not None and not want and self.timeline is None and self.ctx.has_summary and self.ctx.index.chunk_indexes:
            self.build_timeline()  # refreshes ``want`` in place
        return want

    def drop_want(self, want: set[int] | None) -> None:
        """The read that used ``want`` is over: it no longer grows."""
        self.live_wants = [w for w in self.live_wants if w[1] is not want]

    def build_timeline(self) -> None:
        """Build the definition timeline (:class:`DefinitionTimeline`) from every definition of the data
        section in file order: top-level records and every chunk's (each chunk is
        decompressed once).  The summary's copies only fill in ids the data never defines."""
        if self.timeline is not None:
            return
        src = self.ctx.source
        assert isinstance(src, MappedSource)
        saved_schemas, saved_channels, saved_records = self.schemas, self.channels, self.channel_records
        self.schemas, self.channels, self.channel_records = {}, {}, {}
        self.versions = VersionLog()
        self.definition_problems[:] = [p for p in self.definition_problems if "summary section holds" in p]
        self.timeline_walk = True
        try:
            self.walk_all(src)
        finally:
            self.timeline_walk = False  # building the timeline: every definition in file order
        for sid, s in saved_schemas.items():  # defined only in the summary
            self.schemas.setdefault(sid, s)
        for cid, ch in saved_channels.items():
            if cid not in self.channels and cid < VERSION_STEP:
                self.channels[cid] = ch
                self.channel_records[cid] = saved_records[cid]
        cen = self.timeline = self.versions.timeline(self.schemas, self.channels, self.channel_records)
        self.need_timeline = False
        self.ctx.summary = None
        for sel, live in self.live_wants:
            live.clear()
            live.update(topic_filter(sel, cen.channels) or ())
        self._check_summary_copies(cen.versions)

    def _check_summary_copies(self, versions: dict[int, list[tuple[Where, Channel]]]) -> None:
        """Report each of the summary's Channel copies that matches no Channel record of its
        id in the data section."""
        for rec in self._summary_records:  # the summary's copies against the data section
            if isinstance(rec, R.ChannelRecord):
                vs = [v for _w, v in versions.get(rec.id, ())] or [c for c in [self.channels.get(rec.id)] if c is not None]
                if vs and not any(
                    (v.topic, v.message_encoding, dict(v.metadata)) == (rec.topic, rec.message_encoding, rec.metadata) for v in vs
                ):
                    self.definition_problems.append(
                        f"{self.ctx.path}: the summary section's Channel record for id {rec.id} (topic {rec.topic!r}) "
                        f"matches no Channel record of that id in the data section"
                    )

    def timeline_mid_read(self, returned: bool) -> None:
        """A read met a definition that changes a channel: build the timeline.  What it
        loaded before (and, if ``returned``, handed out) used the definitions known then; if
        the timeline gives any of it another channel, FormatError (read again)."""
        before = dict(self.channels)
        loaded = self.loaded[:-1]  # the last one is the load that met the definition
        self.build_timeline()
        cen = self.timeline
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
                    raise self.ctx.err(
                        FormatError,
                        f"offset {a}: messages were returned with channel {cid} as the summary or an earlier "
                        f"record defined it, but the data section redefines it; read again (this reader now "
                        f"follows every definition)",
                        a,
                    )

    def _message_before(self, chunk: int, cid: int, end: int) -> bool:
        """Whether the chunk at ``chunk`` holds a message on ``cid`` before record offset ``end``."""
        try:
            buf = self.ctx.chunk_data(chunk)
        except PolybagError:
            return True
        return message_before(buf, cid, end)

    def ready(self) -> None:
        """Before reading a mapped file: a redefinition already seen (summary, top-level
        records) builds the timeline first."""
        if self.timeline is not None or not isinstance(self.ctx.source, MappedSource):
            return
        if not (self.ctx.has_summary and self.ctx.index.chunk_indexes):
            self.ctx.scan()  # what reading scans anyway: its top-level definitions
        if self.need_timeline:
            self.build_timeline()
