"""Helpers shared by the MCAP tests (not a test module)."""

from __future__ import annotations

import io
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from polybag.formats.mcap.writer import McapWriter

Row = tuple[str, int, int, int, bytes]  # topic, log_time, publish_time, sequence, data


class Pipe(io.RawIOBase):
    """A byte buffer seen as a non-seekable pipe."""

    def __init__(self, data: bytes, chunk: int = 1 << 16) -> None:
        self._f = io.BytesIO(data)
        self._chunk = chunk

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def readinto(self, b: Any) -> int:
        data = self._f.read(min(len(b), self._chunk))
        b[: len(data)] = data
        return len(data)


TOPICS = ["/a", "/b/c", "/d"]

# (name, encoding, data) of each schema, and (topic, index into the schemas or None,
# message_encoding, metadata) of each channel: the default is the three channels above
SchemaSpec = tuple[str, str, bytes]
ChannelSpec = tuple[str, "int | None", str, dict[str, str]]
DEFAULT_SCHEMAS: list[SchemaSpec] = [("pkg/A", "jsonschema", b'{"type": "object"}'), ("pkg/B", "ros1msg", b"int32 x\n")]
DEFAULT_CHANNELS: list[ChannelSpec] = [("/a", 0, "json", {"k": "v"}), ("/b/c", 1, "ros1", {}), ("/d", None, "raw", {})]


def write_file(
    target: str | Path | io.BytesIO,
    rows: Iterable[Row],
    attachments: Iterable[tuple[str, str, bytes, int, int]] = (),
    metadata: Iterable[tuple[str, dict[str, str]]] = (),
    schemas: list[SchemaSpec] | None = None,
    channels: list[ChannelSpec] | None = None,
    **options: Any,
) -> None:
    w = McapWriter(target, **options)
    sch = [w.add_schema(*s) for s in (DEFAULT_SCHEMAS if schemas is None else schemas)]
    chans = {
        topic: w.add_channel(topic, enc, None if si is None else sch[si], md)
        for topic, si, enc, md in (DEFAULT_CHANNELS if channels is None else channels)
    }
    for topic, lt, pt, seq, data in rows:
        w.write(chans[topic], data, log_time=lt, publish_time=pt, sequence=seq)
    for a in attachments:
        w.add_attachment(*a)
    for name, md in metadata:
        w.add_metadata(name, md)
    w.close()


def to_bytes(rows: Iterable[Row], **options: Any) -> bytes:
    buf = io.BytesIO()
    write_file(buf, rows, **options)
    return buf.getvalue()


def key(m: Any) -> Row:
    return (m.channel.topic, m.log_time, m.publish_time, m.sequence, bytes(m.data))


def expected(
    rows: list[Row],
    topics: set[str] | None = None,
    start: int | None = None,
    end: int | None = None,
    order: str = "log_time",
    reverse: bool = False,
) -> list[Row]:
    out = [
        r
        for r in rows
        if (topics is None or r[0] in topics)
        and (start is None or r[1] >= start)
        and (end is None or r[1] < end)
    ]
    if order == "log_time":
        out = sorted(out, key=lambda r: r[1])  # stable: ties keep file order
    if reverse:
        out.reverse()
    return out
