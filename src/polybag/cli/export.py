"""``polybag export FILE --topics REGEX --format csv|parquet|jsonl -o DIR``: one table per topic.

csv and parquet hold one column per leaf field (``topic_columns``: ``header.stamp`` in ns,
``pose.position.x``, ``covariance[0]``); variable-length fields are JSON text in csv and list
columns in parquet.  jsonl writes one decoded message per line (nested, as ``to_dict``).
"""

from __future__ import annotations

import argparse
import base64
import csv
import json
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np

from polybag.cli._common import format_size, parse_time
from polybag.errors import PolybagError, UnsupportedError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="write each topic as a csv, parquet or jsonl table")
    p.add_argument("input", metavar="FILE")
    p.add_argument("--topics", default=None, help="regular expression matched against whole topic names (default: all)")
    p.add_argument("--format", choices=("csv", "parquet", "jsonl"), default="csv")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="directory for the tables (created)")
    p.add_argument("--fields", default=None, help="comma-separated field names or prefixes (csv/parquet)")
    p.add_argument("--start", default=None, help="start time (ns, or seconds with '.'/'s'; +T from the log start)")
    p.add_argument("--end", default=None, help="end time, exclusive")
    p.set_defaults(func=run)


def table_name(topic: str) -> str:
    name = topic.strip("/").replace("/", ".")
    name = re.sub(r"[^A-Za-z0-9._-]", "_", name)
    return name or "root"


def _cell(v: Any) -> Any:
    if isinstance(v, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(v)).decode("ascii")
    if isinstance(v, np.ndarray):
        return json.dumps(v.tolist())
    if isinstance(v, (list, tuple, dict)):
        return json.dumps(v, default=_json_default)
    if isinstance(v, np.generic):
        return v.item()
    return v


def _json_default(o: Any) -> Any:
    if isinstance(o, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(o)).decode("ascii")
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.generic):
        return o.item()
    to_dict = getattr(o, "to_dict", None)
    if to_dict is not None:
        return to_dict()
    return str(o)


def write_csv(cols: dict[str, np.ndarray], path: Path) -> int:
    names = list(cols)
    n = len(cols["log_time"]) if "log_time" in cols else (len(next(iter(cols.values()))) if cols else 0)
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(names)
        plain = [c.dtype != object and c.ndim == 1 for c in (cols[k] for k in names)]
        lists = [cols[k].tolist() if p else cols[k] for k, p in zip(names, plain)]
        for i in range(n):
            w.writerow([col[i] if p else _cell(col[i]) for col, p in zip(lists, plain)])
    return n


def write_parquet(cols: dict[str, np.ndarray], path: Path) -> int:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise UnsupportedError("parquet export needs pyarrow: pip install 'polybag[arrow]'") from None
    from polybag.codecs.columns import columns_to_arrow

    fixed = {k: (np.array([base64.b64encode(bytes(x)).decode() for x in v], dtype=object) if _all_bytes(v) else v) for k, v in cols.items()}
    table = columns_to_arrow(fixed)
    pq.write_table(table, str(path))
    return int(table.num_rows)


def _all_bytes(v: np.ndarray) -> bool:
    return v.dtype == object and len(v) > 0 and all(isinstance(x, (bytes, bytearray)) for x in v[:1])


def run(args: argparse.Namespace) -> int:
    import polybag

    out = Path(args.output)
    fields = [f.strip() for f in args.fields.split(",") if f.strip()] if args.fields else None
    with polybag.open(args.input) as r:
        summary = r.summary
        start = parse_time(args.start, summary.start_time) if args.start else None
        end = parse_time(args.end, summary.start_time) if args.end else None
        topics = sorted(summary.topics())
        if args.topics:
            rx = re.compile(args.topics)
            topics = [t for t in topics if rx.fullmatch(t)]
        if not topics:
            print(f"polybag export: no topic matches {args.topics!r}", file=sys.stderr)
            return 1
        out.mkdir(parents=True, exist_ok=True)
        failed = 0
        for topic in topics:
            path = out / f"{table_name(topic)}.{args.format}"
            try:
                if args.format == "jsonl":
                    rows = 0
                    with path.open("w", encoding="utf-8") as fh:
                        for m in r.messages(topics=[topic], start=start, end=end):
                            rec = {"log_time": m.log_time, "publish_time": m.publish_time, "message": m.to_dict()}
                            fh.write(json.dumps(rec, default=_json_default, ensure_ascii=False) + "\n")
                            rows += 1
                else:
                    cols = r.topic_columns(topic, fields)
                    if start is not None or end is not None:
                        t = cols["log_time"]
                        mask = np.ones(len(t), dtype=bool)
                        if start is not None:
                            mask &= t >= start
                        if end is not None:
                            mask &= t < end
                        cols = {k: v[mask] for k, v in cols.items()}
                    rows = write_csv(cols, path) if args.format == "csv" else write_parquet(cols, path)
            except PolybagError as e:
                failed += 1
                print(f"polybag export: {topic}: {e}", file=sys.stderr)
                path.unlink(missing_ok=True)
                continue
            print(f"{topic} -> {path} ({rows} rows, {format_size(path.stat().st_size)})")
    return 1 if failed else 0
