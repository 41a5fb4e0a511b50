"""Helpers for the tests of polybag.ops (read everything, compare, brute-force models)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polybag

CORPORA = Path(__file__).resolve().parents[1].parent / "shared" / "corpora"
BAGS = sorted(p for p in (CORPORA / "rosbag").rglob("*.bag") if p.name not in ("empty-file.bag", "dummy.bag"))

Row = tuple[str, int, bytes]


def rows(path: Any, order: str = "file") -> list[Row]:
    """Every message as (topic, log_time, payload bytes)."""
    with polybag.open(path) as r:
        return [(m.channel.topic, m.log_time, bytes(m.data)) for m in r.messages(order=order)]


def full_rows(path: Any, order: str = "file") -> list[tuple[str, int, bytes, str, str]]:
    """(topic, log_time, payload, type, md5sum) for every message."""
    with polybag.open(path) as r:
        return [
            (
                m.channel.topic,
                m.log_time,
                bytes(m.data),
                m.channel.type_name,
                str(m.channel.metadata.get("md5sum", "")),
            )
            for m in r.messages(order=order)
        ]


def connections(path: Any) -> set[tuple[str, str, str, bytes, str, str]]:
    """(topic, type, md5sum, definition, callerid, latching) of every channel."""
    with polybag.open(path) as r:
        out = set()
        for c in r.summary.channels.values():
            md = c.metadata
            latching = str(md.get("latching", ""))
            latching = {"true": "1", "false": "0"}.get(latching.lower(), latching)
            out.add(
                (
                    c.topic,
                    c.type_name,
                    str(md.get("md5sum", "")),
                    bytes(c.schema.data) if c.schema is not None else b"",
                    str(md.get("callerid", "")),
                    latching,
                )
            )
        return out


def sorted_rows(rs: list[Row]) -> list[Row]:
    """Stable sort by log time (ties in the given order)."""
    return sorted(rs, key=lambda r: r[1])
