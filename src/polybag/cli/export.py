"""``polybag export FILE --topics REGEX --format csv|parquet|jsonl -o DIR``: one table per topic.

The logic is :func:`polybag.ops.export` (streamed in blocks, memory bounded by a few batches).
csv and parquet hold one column per leaf field (``header.stamp`` in ns,
``pose.position.x``, ``covariance[0]``); variable-length fields are JSON text in csv and list
columns in parquet, bytes fields base64 in csv and binary in parquet.  jsonl writes one
decoded message per line (nested, as ``to_dict``).

A topic whose channels cannot share one table gets one table per channel group, named
``topic_<n>``: ULog multi-instance topics one per ``multi_id`` (``sensor_accel_0``,
``sensor_accel_1``), other formats one per channel id when the channels of a topic have
different types (channels of one type, e.g. several publishers in a bag, share a table).
"""

from __future__ import annotations

import argparse
import sys

from polybag.cli._common import format_size, print_json
from polybag.cli._ops import add_force
from polybag.errors import PolybagError
from polybag.ops.export import Table, plan_tables, table_name

__all__ = ["Table", "plan_tables", "register", "run", "table_name"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="write each topic as a csv, parquet or jsonl table")
    p.add_argument("input", metavar="FILE")
    p.add_argument("--topics", default=None, help="regular expression matched against whole topic names (default: all)")
    p.add_argument("--format", choices=("csv", "parquet", "jsonl"), default="csv")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="directory for the tables (created)")
    p.add_argument("--fields", default=None, help="comma-separated field names or prefixes (csv/parquet)")
    p.add_argument("--start", default=None, help="start time (ns, or seconds with '.'/'s'; +T from the log start)")
    p.add_argument("--end", default=None, help="end time, exclusive")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_force(p, "existing tables")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from polybag.ops.export import export

    fields = [f.strip() for f in args.fields.split(",") if f.strip()] if args.fields else None
    try:
        res = export(
            args.input,
            args.output,
            format=args.format,
            topics=args.topics,
            fields=fields,
            start=args.start,
            end=args.end,
            progress=None,
            overwrite=args.force,
        )
    except PolybagError as e:
        if str(e).startswith("no topic matches"):
            print(f"polybag export: error: {e}", file=sys.stderr)
            return 1
        raise
    if args.json:
        print_json(res.to_dict())
    for t in res.tables:
        label = t.topic if t.table == table_name(t.topic) else f"{t.topic} [{t.table[len(table_name(t.topic)) + 1:]}]"
        if t.error is not None:
            print(f"polybag export: error: {label}: {t.error}", file=sys.stderr)
        elif not args.json:
            print(f"{label} -> {t.path} ({t.rows} rows, {format_size(t.bytes)})")
    for w in res.warnings:
        if not any(t.error is not None and w.endswith(t.error) for t in res.tables):
            print(f"polybag export: warning: {w}", file=sys.stderr)
    return 1 if res.failed or res.damaged else 0
