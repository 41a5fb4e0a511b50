"""What ``rosbag info`` reports, from the index (no chunk data when the bag is indexed):
:func:`bag_info`, the ``info_extras`` of every bag reader; and :func:`bag_summary`, the
common part of every bag reader's summary.

The data only: its ``rosbag info`` layout is :mod:`polybag.cli.render`'s.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from polybag.model import Channel, Summary


class BagLike(Protocol):
    """What :func:`bag_info` reads of a bag reader."""

    path: str | None
    version: str

    @property
    def summary(self) -> Summary: ...

    def message_times(self, cids: set[int] | None = None) -> dict[int, np.ndarray]: ...


def _frequency(times: np.ndarray) -> float | None:
    """Median-period frequency in Hz, as ``rosbag info --freq`` computes it."""
    if len(times) < 2:
        return None
    d = np.diff(np.sort(times))
    med = float(np.median(d))
    if med <= 0:
        return None
    return 1e9 / med


def bag_info(reader: BagLike, *, frequencies: bool = True) -> dict[str, Any]:
    """The facts ``rosbag info`` shows (JSON-ready): times, size, chunks by compression,
    types with their md5sums, and per topic its messages, connections and (with
    ``frequencies``) median frequency."""
    s = reader.summary
    comp: dict[str, dict[str, int]] = {}
    for ci in s.chunks:
        c = comp.setdefault(ci.compression, {"chunks": 0, "compressed": 0, "uncompressed": 0})
        c["chunks"] += 1
        c["compressed"] += ci.compressed_size
        c["uncompressed"] += ci.uncompressed_size
    total_c = sum(c["compressed"] for c in comp.values())
    total_u = sum(c["uncompressed"] for c in comp.values())
    types: dict[str, str] = {}
    topics: dict[str, dict[str, Any]] = {}
    times = reader.message_times() if frequencies else {}
    for cid, ch in sorted(s.channels.items(), key=lambda kv: (kv[1].topic, kv[0])):
        t = ch.type_name
        types.setdefault(t, str(ch.metadata.get("md5sum", "")))
        e = topics.setdefault(ch.topic, {"topic": ch.topic, "type": t, "messages": 0, "connections": 0, "_t": []})
        e["messages"] += s.message_counts.get(cid, 0)
        e["connections"] += 1
        if cid in times:
            e["_t"].append(times[cid])
    out_topics = []
    for e in topics.values():
        parts = e.pop("_t")
        if frequencies:
            e["frequency"] = _frequency(np.concatenate(parts)) if parts else None
        out_topics.append(e)
    return {
        "path": reader.path,
        "version": reader.version,
        "duration": s.duration / 1e9,
        "start": None if s.start_time is None else s.start_time / 1e9,
        "end": None if s.end_time is None else s.end_time / 1e9,
        "start_ns": s.start_time,
        "end_ns": s.end_time,
        "size": s.file_size,
        "messages": s.message_count,
        "indexed": s.indexed,
        "chunk_count": len(s.chunks),
        "compression": comp,
        "compression_ratio": (total_c / total_u) if total_u else None,
        "compressed": total_c,
        "uncompressed": total_u,
        "types": [{"type": k, "md5": v} for k, v in sorted(types.items())],
        "topics": out_topics,
        **({"errors": s.extras["errors"]} if s.extras.get("errors") else {}),
        **({"index_problem": s.extras["index_problem"]} if s.extras.get("index_problem") else {}),
    }


def bag_summary(version: str, file_size: int, channels: dict[int, Channel], **fields: Any) -> Summary:
    """The :class:`Summary` of a bag of ``version`` of ``channels`` (with their schemas),
    the rest from ``fields``; every bag reader's summary is this."""
    schemas = {ch.schema.id: ch.schema for ch in channels.values() if ch.schema is not None}
    return Summary(
        format="bag",
        profile="ros1",
        version=version,
        schemas=schemas,
        channels=channels,
        file_size=file_size,
        **fields,
    )
