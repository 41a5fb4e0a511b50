"""The timeline of Schema/Channel definitions of a file that redefines ids: which version
of each channel id is in force where (built by one pass over the data section, see
:mod:`polybag.formats.mcap.definitions`).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from polybag.formats.mcap import records as R
from polybag.formats.mcap.vocabulary import Where
from polybag.model import Channel, Schema


@dataclass
class DefinitionTimeline:
    """Every definition of the data section in file order (built once a redefinition is known).

    ``versions``: file channel id -> [(where it takes effect, channel)], the first version at
    (-1, -1); ids defined once are not listed.  ``inside``: chunk offset -> [(record offset,
    file channel id, channel)] for versions taking effect inside that chunk.
    """

    versions: dict[int, list[tuple[Where, Channel]]]
    keys: dict[int, list[Where]]
    inside: dict[int, list[tuple[int, int, Channel]]]
    channels: list[Channel]  # every version of every channel
    schemas: dict[int, Schema]  # every version of every schema, by internal id

    def at(self, cid: int, where: Where) -> Channel:
        """The version of ``cid`` (which has several) in force just before ``where``."""
        i = bisect.bisect_left(self.keys[cid], where) - 1
        return self.versions[cid][max(i, 0)][1]

    def map_at(self, chunk: int, base: dict[int, Channel]) -> dict[int, Channel]:
        """``base`` (first versions) with the versions in force at the start of the chunk at ``chunk``."""
        m = dict(base)
        for cid in self.versions:
            m[cid] = self.at(cid, (chunk, -1))
        return m


@dataclass
class VersionLog:
    """The versions of redefined ids applied in file order (reading a stream, or the walk that
    builds the timeline): ``changes`` (where, file channel id, old, new) and ``schema_changes``
    alike, how many versions each (opcode, id) has had, where the definition in force for each
    (opcode, id) was met (None: the summary section), the last definition applied reading in
    file order, and the first Channel record of each redefined channel."""

    changes: list[tuple[Where, int, Channel, Channel]] = field(default_factory=list)
    schema_changes: list[tuple[Where, int, Schema, Schema]] = field(default_factory=list)
    counts: dict[tuple[int, int], int] = field(default_factory=dict)
    where_defined: dict[tuple[int, int], Where | None] = field(default_factory=dict)
    last_applied: Where = (-1, -1)
    first_records: dict[int, R.ChannelRecord] = field(default_factory=dict)

    def next_version(self, op: int, id: int) -> int:
        """The number of the next version of (opcode ``op``, ``id``): 1 for the first redefinition."""
        k = self.counts[(op, id)] = self.counts.get((op, id), 0) + 1
        return k

    def timeline(self, schemas: dict[int, Schema], channels: dict[int, Channel], channel_records: dict[int, R.ChannelRecord]) -> DefinitionTimeline:
        """The timeline from the versions the timeline walk applied; the first version of each
        redefined id is put back in force under the file's id (in ``schemas``, ``channels`` and
        ``channel_records``, the definitions in force by file id)."""
        versions: dict[int, list[tuple[Where, Channel]]] = {}
        inside: dict[int, list[tuple[int, int, Channel]]] = {}
        for where, cid, old, new in self.changes:
            versions.setdefault(cid, [((-1, -1), old)]).append((where, new))
            if where[1] >= 0:
                inside.setdefault(where[0], []).append((where[1], cid, new))
        schemas_all: dict[int, Schema] = {}
        for _w, sid, old_s, new_s in self.schema_changes:
            if sid not in schemas_all:
                schemas_all[sid] = schemas[sid] = old_s  # the first version keeps the file id
            schemas_all[new_s.id] = new_s
        for cid, lst in versions.items():
            channels[cid] = lst[0][1]
            channel_records[cid] = self.first_records.get(cid, channel_records[cid])
        for sid, s in schemas.items():
            schemas_all.setdefault(sid, s)
        channels_all = list(channels.values()) + [new for _w, _c, _o, new in self.changes]
        return DefinitionTimeline(
            versions, {cid: [w for w, _ in lst] for cid, lst in versions.items()}, inside, channels_all, schemas_all
        )
