"""Runner for the MCAP conformance suite (foxglove/mcap ``tests/conformance``).

    python -m polybag.formats.mcap.conformance FILE streamed   # the suite's JSON on stdout
    python -m polybag.formats.mcap.conformance FILE indexed
    python -m polybag.formats.mcap.conformance write SPEC.json  # the file's bytes on stdout
"""

from __future__ import annotations

import dataclasses
import io
import json
import sys
from collections.abc import Sequence
from typing import Any

from polybag.formats.mcap import records as R
from polybag.formats.mcap.reader import McapReader
from polybag.formats.mcap.writer import McapWriter
from polybag.io.source import MappedSource, StreamSource

_TYPE_NAMES = {
    R.Header: "Header",
    R.Footer: "Footer",
    R.SchemaRecord: "Schema",
    R.ChannelRecord: "Channel",
    R.MessageRecord: "Message",
    R.AttachmentRecord: "Attachment",
    R.AttachmentIndex: "AttachmentIndex",
    R.MetadataRecord: "Metadata",
    R.MetadataIndex: "MetadataIndex",
    R.Statistics: "Statistics",
    R.ChunkIndex: "ChunkIndex",
    R.SummaryOffset: "SummaryOffset",
    R.DataEnd: "DataEnd",
}
_SKIP_FIELDS = {"crc", "crc_end", "uuid"}


def _value(v: Any) -> Any:
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, int):
        return str(v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return [str(b) for b in bytes(v)]
    if isinstance(v, dict):
        return {str(k): _value(x) for k, x in v.items()}
    return v


def record_json(rec: Any) -> dict[str, Any] | None:
    name = _TYPE_NAMES.get(type(rec))
    if name is None:
        return None
    fields = [
        [f.name, _value(getattr(rec, f.name))]
        for f in dataclasses.fields(rec)
        if f.name not in _SKIP_FIELDS
    ]
    fields.sort(key=lambda x: x[0])
    return {"type": name, "fields": fields}


def streamed(data_or_stream: bytes | io.BufferedIOBase, path: str | None = None) -> dict[str, Any]:
    if isinstance(data_or_stream, (bytes, bytearray)):
        source: MappedSource | StreamSource = StreamSource(io.BytesIO(data_or_stream), path)
    else:
        source = StreamSource(data_or_stream, path)  # type: ignore[arg-type]
    reader = McapReader(source, path)
    out = []
    for rec in reader.records():
        j = record_json(rec)
        if j is not None:
            out.append(j)
    return {"records": out}


def indexed(data: bytes, path: str | None = None) -> dict[str, Any]:
    reader = McapReader(MappedSource(path, data), path)
    summary = reader.summary
    schemas = [
        record_json(R.SchemaRecord(s.id, s.name, s.encoding, s.data)) for _, s in sorted(summary.schemas.items())
    ]
    channels = []
    for cid, ch in sorted(summary.channels.items()):
        rec = reader.defs.channel_records.get(cid)
        if rec is None:  # a later version of a redefined id: as the model has it
            sid = ch.schema.id if ch.schema is not None else 0
            rec = R.ChannelRecord(cid, sid, ch.topic, ch.message_encoding, dict(ch.metadata))
        channels.append(record_json(rec))
    messages = [
        record_json(R.MessageRecord(m.channel.id, m.sequence, m.log_time, m.publish_time, bytes(m.data)))
        for m in reader.messages()
    ]
    stats = [record_json(reader.statistics)] if reader.statistics is not None else []
    return {"schemas": schemas, "channels": channels, "messages": messages, "statistics": stats}


def _int(v: str) -> int:
    return int(v)


def write_spec(spec: dict[str, Any]) -> bytes:
    """The bytes the suite expects for a ``.json`` spec (the variant's features set the options)."""
    features = set(spec.get("meta", {}).get("variant", {}).get("features", []))
    header = next((r for r in spec["records"] if r["type"] == "Header"), None)
    hf = dict(header["fields"]) if header else {}
    buf = io.BytesIO()
    w = McapWriter(
        buf,
        compression="none",
        chunk_size=1 << 62,
        profile=hf.get("profile", ""),
        library=hf.get("library", ""),
        use_chunking="ch" in features,
        use_message_index="mx" in features,
        use_chunk_index="chx" in features,
        use_statistics="st" in features,
        repeat_schemas="rsh" in features,
        repeat_channels="rch" in features,
        use_summary_offsets="sum" in features,
        use_attachment_index="ax" in features,
        use_metadata_index="mdx" in features,
    )
    for r in spec["records"]:
        f = dict(r["fields"])
        t = r["type"]
        if t == "DataEnd":
            break  # what follows repeats the data section (summary), the writer makes it
        if t == "Schema":
            w.add_schema(f["name"], f["encoding"], bytes(int(b) for b in f["data"]), id=_int(f["id"]))
        elif t == "Channel":
            w.add_channel(f["topic"], f["message_encoding"], _int(f["schema_id"]), f["metadata"], id=_int(f["id"]))
        elif t == "Message":
            w.write(
                _int(f["channel_id"]),
                bytes(int(b) for b in f["data"]),
                _int(f["log_time"]),
                _int(f["publish_time"]),
                _int(f["sequence"]),
            )
        elif t == "Attachment":
            w.add_attachment(
                f["name"], f["media_type"], bytes(int(b) for b in f["data"]), _int(f["log_time"]), _int(f["create_time"])
            )
        elif t == "Metadata":
            w.add_metadata(f["name"], f["metadata"])
    w.close()
    return buf.getvalue()


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    if args[0] == "write":
        with open(args[1], encoding="utf-8") as f:
            spec = json.load(f)
        sys.stdout.buffer.write(write_spec(spec))
        sys.stdout.buffer.flush()
        return 0
    path, mode = args
    with open(path, "rb") as f:
        data = f.read()
    if mode == "streamed":
        out = streamed(data, path)
    elif mode == "indexed":
        out = indexed(data, path)
    else:
        print(f"unknown mode {mode!r} (streamed, indexed or write)", file=sys.stderr)
        return 2
    json.dump(out, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
