"""``polybag export FILE --topics REGEX --format csv|parquet|jsonl -o DIR``: one table per topic.

csv and parquet hold one column per leaf field (``topic_columns``: ``header.stamp`` in ns,
``pose.position.x``, ``covariance[0]``); variable-length fields are JSON text in csv and list
columns in parquet.  jsonl writes one decoded message per line (nested, as ``to_dict``).

A topic whose channels cannot share one table gets one table per channel group, named
``topic_<n>``: ULog multi-instance topics one per ``multi_id`` (``sensor_accel_0``,
``sensor_accel_1``), other formats one per channel id when the channels of a topic have
different types (channels of one type, e.g. several publishers in a bag, share a table).
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
from polybag.model import Channel


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


class Table:
    """One output table: a topic, or one group of its channels (``suffix`` names it)."""

    def __init__(self, topic: str, channels: list[Channel], suffix: str | None = None, multi_id: int | None = None) -> None:
        self.topic = topic
        self.channels = channels
        self.suffix = suffix
        self.multi_id = multi_id

    @property
    def name(self) -> str:
        base = table_name(self.topic)
        return base if self.suffix is None else f"{base}_{self.suffix}"


def _codec_key(ch: Channel) -> Any:
    s = ch.schema
    return (ch.message_encoding, s.encoding if s else "", s.name if s else "", bytes(s.data) if s else b"")


def plan_tables(topic: str, channels: list[Channel]) -> list[Table]:
    """The tables of one topic: one, or one per ULog instance / per channel of another type."""
    mids = {c.metadata.get("multi_id") for c in channels}
    if len(channels) > 1 and None not in mids and len(mids) > 1:
        out = []
        for mid in sorted(mids, key=lambda m: (len(str(m)), str(m))):
            group = [c for c in channels if c.metadata.get("multi_id") == mid]
            try:
                num: int | None = int(str(mid))
            except ValueError:
                num = None
            out.append(Table(topic, group, str(mid), num))
        return out
    if len({_codec_key(c) for c in channels}) > 1:
        return [Table(topic, [c], str(c.id)) for c in sorted(channels, key=lambda c: c.id)]
    mid = next(iter(mids)) if len(mids) == 1 else None
    try:
        num = int(str(mid)) if mid is not None else None
    except ValueError:
        num = None
    return [Table(topic, channels, None, num)]


def table_columns(r: Any, t: Table, fields: list[str] | None, with_time: bool) -> dict[str, np.ndarray]:
    """Columns of one table (``log_time`` included when ``with_time`` or when there is one)."""
    if t.multi_id is not None and getattr(r, "format", "") == "ulog":
        cols = r.topic_columns(t.topic, t.multi_id, fields, log_time=with_time)
        return dict(cols)
    if t.suffix is None:
        return dict(r.topic_columns(t.topic, fields))
    # one channel of a topic whose channels have different types
    from polybag.codecs import codec_for
    from polybag.codecs.columns import payload_columns

    ids = {c.id for c in t.channels}
    times: list[int] = []
    datas: list[Any] = []
    for m in r.messages(topics=[t.topic]):
        if m.channel.id in ids:
            times.append(m.log_time)
            datas.append(m.data)
    cols = payload_columns(codec_for(t.channels[0]), datas, fields, topic=t.topic)
    return {"log_time": np.array(times, dtype=np.int64), **cols}


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
        by_topic: dict[str, list[Channel]] = {}
        for ch in summary.channels.values():
            by_topic.setdefault(ch.topic, []).append(ch)
        timed = start is not None or end is not None
        for topic in topics:
            for table in plan_tables(topic, by_topic.get(topic, [])):
                path = out / f"{table.name}.{args.format}"
                label = topic if table.suffix is None else f"{topic} [{table.suffix}]"
                try:
                    if args.format == "jsonl":
                        ids = {c.id for c in table.channels}
                        rows = 0
                        with path.open("w", encoding="utf-8") as fh:
                            for m in r.messages(topics=[topic], start=start, end=end):
                                if m.channel.id not in ids:
                                    continue
                                rec = {"log_time": m.log_time, "publish_time": m.publish_time, "message": m.to_dict()}
                                fh.write(json.dumps(rec, default=_json_default, ensure_ascii=False) + "\n")
                                rows += 1
                    else:
                        cols = table_columns(r, table, fields, timed)
                        if timed:
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
                    print(f"polybag export: {label}: {e}", file=sys.stderr)
                    path.unlink(missing_ok=True)
                    continue
                print(f"{label} -> {path} ({rows} rows, {format_size(path.stat().st_size)})")
    return 1 if failed else 0
