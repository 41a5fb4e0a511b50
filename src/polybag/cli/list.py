"""``polybag list channels|schemas|attachments|metadata FILE [--json]``."""

from __future__ import annotations

import argparse
from typing import Any

from polybag.cli.info import open_input, table_lines
from polybag.cli.text import format_ns, format_size, print_json


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("list", help="list channels, schemas, attachments or metadata")
    p.add_argument("what", choices=["channels", "schemas", "attachments", "metadata"])
    p.add_argument("file", help="log file, or - for stdin")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    with open_input(args.file) as reader:
        rows: list[dict[str, Any]]
        if args.what == "channels":
            s = reader.summary
            rows = [
                {
                    "id": cid,
                    "topic": ch.topic,
                    "message_encoding": ch.message_encoding,
                    "schema_id": ch.schema.id if ch.schema is not None else 0,
                    "type": ch.type_name,
                    "message_count": s.message_counts.get(cid, 0),
                    "metadata": dict(ch.metadata),
                }
                for cid, ch in sorted(s.channels.items())
            ]
            header = ["id", "topic", "type", "encoding", "messages"]
            table = [[str(r["id"]), r["topic"], r["type"] or "-", r["message_encoding"], str(r["message_count"])] for r in rows]
        elif args.what == "schemas":
            s = reader.summary
            rows = [
                {"id": sid, "name": sc.name, "encoding": sc.encoding, "size": len(sc.data)}
                for sid, sc in sorted(s.schemas.items())
            ]
            header = ["id", "name", "encoding", "size"]
            table = [[str(r["id"]), r["name"], r["encoding"] or "-", format_size(r["size"])] for r in rows]
        elif args.what == "attachments":
            rows = [
                {
                    "name": a.name,
                    "media_type": a.media_type,
                    "size": len(a.data),
                    "log_time": a.log_time,
                    "create_time": a.create_time,
                }
                for a in reader.attachments()
            ]
            header = ["name", "media type", "size", "log time", "create time"]
            table = [
                [r["name"], r["media_type"] or "-", format_size(r["size"]), format_ns(r["log_time"]), format_ns(r["create_time"])]
                for r in rows
            ]
        else:
            rows = [{"name": m.name, "metadata": dict(m.metadata)} for m in reader.metadata()]
            header = ["name", "entries"]
            table = [[r["name"], ", ".join(f"{k}={v}" for k, v in r["metadata"].items())] for r in rows]
        if args.json:
            print_json(rows)
        else:
            for line in table_lines([header, *table]):
                print(line.rstrip())
    return 0
