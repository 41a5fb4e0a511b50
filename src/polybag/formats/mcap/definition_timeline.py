"""The timeline of Schema/Channel definitions of a file that redefines ids: which version
of each channel id is in force where (built by one pass over the data section, see
:mod:`polybag.formats.mcap.definitions`).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

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
