"""``du``: where a log's bytes go, per topic and per schema (message type).

Payload bytes are summed over every message (one streamed pass, payloads never copied);
the share of the file each topic takes is its payload share of the file size, which is
exact for uncompressed files and proportional for compressed ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from polybag.ops.inputs import input_name, open_input, summary_count
from polybag.ops.options import Input
from polybag.ops.results import OpResult, make_progress


@dataclass
class Usage:
    name: str
    messages: int = 0
    bytes: int = 0
    share: float = 0.0


@dataclass
class DuResult(OpResult):
    input: str = ""
    format: str = ""
    file_size: int = 0
    payload_bytes: int = 0
    topics: list[Usage] = field(default_factory=list)
    schemas: list[Usage] = field(default_factory=list)


def du(src: Input, *, progress: bool | None = False) -> DuResult:
    """Bytes per topic and per schema, largest first."""
    result = DuResult(input=input_name(src))
    with open_input(src) as reader:
        result.format = reader.format
        summary = reader.summary
        result.file_size = int(summary.file_size or reader.source_size)
        per_ch: dict[int, list[Any]] = {}
        bar = make_progress(summary_count(reader), f"du {result.input}", progress)
        with bar:
            pending = 0
            for m in reader.messages(order="file"):
                ch = m.channel
                ent = per_ch.get(id(ch))
                if ent is None:
                    ent = per_ch[id(ch)] = [ch, 0, 0]
                ent[1] += 1
                ent[2] += len(m.data)
                pending += 1
                if pending == 4096:
                    bar.update(pending)
                    pending = 0
            bar.update(pending)
        topics: dict[str, Usage] = {}
        schemas: dict[str, Usage] = {}
        for ch, n, b in per_ch.values():
            for table, key in ((topics, ch.topic), (schemas, ch.type_name or "(schemaless)")):
                u = table.get(key)
                if u is None:
                    u = table[key] = Usage(key)
                u.messages += n
                u.bytes += b
        # channels without messages still appear
        for ch in summary.channels.values():
            topics.setdefault(ch.topic, Usage(ch.topic))
            schemas.setdefault(ch.type_name or "(schemaless)", Usage(ch.type_name or "(schemaless)"))
        total = sum(u.bytes for u in topics.values())
        result.payload_bytes = total
        result.messages = sum(u.messages for u in topics.values())
        for table in (topics, schemas):
            for u in table.values():
                u.share = (u.bytes / total) if total else 0.0
        result.topics = sorted(topics.values(), key=lambda u: (-u.bytes, u.name))
        result.schemas = sorted(schemas.values(), key=lambda u: (-u.bytes, u.name))
    return result
