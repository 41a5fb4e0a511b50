"""What ``rosbag info`` reports, from the index (no chunk data when the bag is indexed)."""

from __future__ import annotations

import datetime as _dt
from typing import Any, Protocol

import numpy as np

from polybag.model import Summary


class _BagLike(Protocol):
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


def bag_info(reader: _BagLike, *, frequencies: bool = True) -> dict[str, Any]:
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


def _stamp(ns: int | None) -> str:
    if ns is None:
        return "-"
    d = _dt.datetime.fromtimestamp(ns / 1e9, _dt.timezone.utc)
    return f"{d.strftime('%b %d %Y %H:%M:%S')}.{(ns // 10_000_000) % 100:02d} ({ns / 1e9:.6f})"


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1024 or unit == "TB":
            return f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def info_text(info: dict[str, Any]) -> str:
    """The dict from :func:`bag_info` laid out like ``rosbag info``."""
    rows: list[tuple[str, str]] = [
        ("path", str(info["path"])),
        ("version", info["version"]),
        ("duration", f"{info['duration']:.3f}s"),
        ("start", _stamp(info["start_ns"])),
        ("end", _stamp(info["end_ns"])),
        ("size", _size(info["size"])),
        ("messages", str(info["messages"])),
    ]
    comp = info["compression"]
    n_chunks = info["chunk_count"]
    lines = []
    for name, c in sorted(comp.items(), key=lambda kv: -kv[1]["chunks"]):
        if name == "none":
            lines.append(f"none [{c['chunks']}/{n_chunks} chunks]")
        else:
            pct = 100.0 * c["compressed"] / c["uncompressed"] if c["uncompressed"] else 0.0
            lines.append(f"{name} [{c['chunks']}/{n_chunks} chunks; {pct:.2f}%]")
    if not lines:
        lines = ["none [0/0 chunks]"]
    compressed = any(n != "none" for n in comp)
    w = 14 if compressed else 13  # rosbag widens the label column for "uncompressed:"
    out = [f"{k + ':':<{w}}{v}" for k, v in rows]
    out.append(f"{'compression:':<{w}}{lines[0]}")
    out.extend(" " * w + x for x in lines[1:])
    if compressed:
        out.append(f"{'uncompressed:':<{w}}{_size(info['uncompressed'])}")
        out.append(
            f"{'compressed:':<{w}}{_size(info['compressed'])} ({100.0 * (info['compression_ratio'] or 0):.2f}%)"
        )
    if not info["indexed"]:
        out.append(f"{'index:':<{w}}none usable ({info.get('index_problem', 'scanned')}); read by scanning")
    types = info["types"]
    tw = max((len(t["type"]) for t in types), default=0)
    for i, t in enumerate(types):
        out.append(f"{'types:' if i == 0 else '':<{w}}{t['type']:<{tw}} [{t['md5']}]")
    topics = info["topics"]
    pw = max((len(t["topic"]) for t in topics), default=0)
    cw = max((len(str(t["messages"])) for t in topics), default=0)
    for i, t in enumerate(topics):
        freq = t.get("frequency")
        fs = f" @ {freq:.4g} Hz" if freq else ""
        conns = f" ({t['connections']} connections)" if t["connections"] > 1 else ""
        unit = "msg " if t["messages"] == 1 else "msgs"
        out.append(
            f"{'topics:' if i == 0 else '':<{w}}{t['topic']:<{pw}}  {t['messages']:>{cw}} {unit}{fs:<14} : "
            f"{t['type']}{conns}"
        )
    for e in info.get("errors", []):
        out.append(f"{'error:':<{w}}{e}")
    return "\n".join(out)


def info_yaml(info: dict[str, Any]) -> str:
    """``rosbag info --yaml`` style output."""

    def q(v: Any) -> str:
        if v is None:
            return "null"
        if isinstance(v, str):
            return v if v and all(ch.isalnum() or ch in "/_.-" for ch in v) else '"' + v.replace('"', '\\"') + '"'
        return str(v)

    out = [
        f"path: {q(info['path'])}",
        f"version: {info['version']}",
        f"duration: {info['duration']:.6f}",
        f"start: {info['start'] if info['start'] is not None else 0.0:.6f}",
        f"end: {info['end'] if info['end'] is not None else 0.0:.6f}",
        f"size: {info['size']}",
        f"messages: {info['messages']}",
        f"indexed: {str(info['indexed']).lower()}",
        f"compression: {q(max(info['compression'], key=lambda k: info['compression'][k]['chunks']) if info['compression'] else 'none')}",
    ]
    if any(n != "none" for n in info["compression"]):
        # rosbag adds the byte totals of the chunk data when any chunk is compressed
        out += [f"uncompressed: {int(info['uncompressed'])}", f"compressed: {int(info['compressed'])}"]
    out.append("types:")
    for t in info["types"]:
        out += [f"    - type: {q(t['type'])}", f"      md5: {q(t['md5'])}"]
    out.append("topics:")
    for t in info["topics"]:
        out += [f"    - topic: {q(t['topic'])}", f"      type: {q(t['type'])}", f"      messages: {t['messages']}"]
        if t.get("frequency"):
            out.append(f"      frequency: {t['frequency']:.4f}")
        if t["connections"] > 1:
            out.append(f"      connections: {t['connections']}")
    return "\n".join(out) + "\n"


class BagInfoMixin:
    """``info_extras``/``info_text``/``info_yaml`` for every bag reader version, and the
    :class:`~polybag.reader.ReaderProtocol` members every bag answers the same way."""

    #: every bag channel is ROS 1 (an MCAP written from a bag gets the ``ros1`` profile)
    native_profile = "ros1"

    def info_extras(self) -> dict[str, Any]:
        return bag_info(self)  # type: ignore[arg-type]

    def info_text(self) -> str:
        return info_text(self.info_extras())

    def info_yaml(self) -> str:
        return info_yaml(self.info_extras())
