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

``--format parquet`` writes a parquet dataset that DuckDB and polars read as one table per
topic (``--layout dataset``, the default for parquet): ``DIR/topic=<table>/part-0.parquet``,
and for several files ``DIR/topic=<table>/file=<name>/part-0.parquet``; ``--layout flat``
writes ``DIR/<table>.parquet`` (one input) or ``DIR/<name>/<table>.parquet`` (several) as csv
and jsonl do.  ``-o s3://bucket/prefix/`` writes the same under the URL prefix.  ``--time log_time|publish_time|header.stamp|timestamp`` picks the time column
(first, named by the choice).

``--images DIR`` / ``--video FILE`` / ``--pointclouds DIR`` write sensor data instead (one
file per frame or cloud, or one video): :mod:`polybag.ops.export_media`.
"""

from __future__ import annotations

import argparse
import sys

from polybag.cli._ops import (
    add_force,
    add_progress_options,
    add_topic_options,
    progress_of,
    quiet,
    refuse_stdout,
    summary,
    topic_selection,
)
from polybag.cli.batch import add_jobs, report_batch
from polybag.cli.text import TIME_HELP, format_size, print_json
from polybag.errors import UsageError
from polybag.ops.export import Table, plan_tables, table_name
from polybag.util.text import safe_line

__all__ = ["Table", "plan_tables", "register", "run", "table_name"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("export", help="write each topic as a csv, parquet or jsonl table")
    p.add_argument("input", metavar="FILE")
    add_topic_options(p, what="export only (default: all)")
    p.add_argument(
        "--format",
        "-F",
        choices=("csv", "parquet", "jsonl", "png", "jpg", "npy", "pcd", "ply"),
        default=None,
        help="tables: csv (default), parquet, jsonl; --images: png (default), jpg, npy; "
        "--pointclouds: pcd (default), ply, npy",
    )
    p.add_argument("-o", "--output", metavar="DIR", help="directory for the tables (created)")
    p.add_argument("--images", metavar="DIR", help="write each image (raw or compressed) as a file in DIR instead")
    p.add_argument("--video", metavar="FILE", help="encode one image topic as a video (.mp4, .mkv, .mov, .avi)")
    p.add_argument("--pointclouds", metavar="DIR", help="write each PointCloud2 as a file in DIR instead")
    p.add_argument("--every", type=int, default=1, metavar="N", help="--images/--video/--pointclouds: every N-th message of a topic")
    p.add_argument("--fps", type=float, default=None, help="--video: frames per second (default: the log's rate)")
    p.add_argument(
        "--layout",
        choices=("flat", "dataset"),
        default=None,
        help="parquet: dataset (default: DIR/topic=<table>/[file=<name>/]part-0.parquet, for DuckDB/polars) "
        "or flat (DIR/<table>.parquet); csv and jsonl are flat",
    )
    p.add_argument(
        "--time",
        choices=("log_time", "publish_time", "header.stamp", "timestamp"),
        default="log_time",
        help="the time column, first in each table: log_time (default), publish_time, header.stamp "
        "(types with a header) or timestamp (ULog)",
    )
    p.add_argument(
        "--align",
        default=None,
        metavar="HOW",
        help="write the --topics on one time axis as one table DIR/aligned.csv|parquet: asof (each row of "
        "the first topic takes the last value of the others, as pandas merge_asof), nearest, or "
        "resample:PERIOD (a row every PERIOD, e.g. resample:10ms; numbers interpolated linearly)",
    )
    p.add_argument(
        "--tolerance",
        default=None,
        metavar="T",
        help="--align asof/nearest: the longest time between a row and the value it takes "
        "(seconds, or with a unit: 0.05, 50ms); default: no limit",
    )
    p.add_argument(
        "--direction",
        choices=("backward", "forward", "nearest"),
        default="backward",
        help="--align asof: take the last value at or before the row (backward, default), the first "
        "at or after it (forward) or the closest (nearest)",
    )
    p.add_argument(
        "--interpolate",
        choices=("auto", "linear", "previous"),
        default="auto",
        help="--align resample: auto (numbers linear, others the previous value; default), linear or previous",
    )
    p.add_argument("--fields", default=None, help="comma-separated field names or prefixes (csv/parquet)")
    p.add_argument("--start", default=None, metavar="T", help=f"start time: {TIME_HELP}")
    p.add_argument("--end", default=None, metavar="T", help="end time, exclusive (same forms as --start)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_force(p, "existing tables")
    add_progress_options(p)
    add_jobs(p, "FILE... -o DIR: export many logs, each into DIR/<name>/")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    refuse_stdout("export", args.output)
    from polybag.ops.export import export

    chosen = {"images": args.images, "video": args.video, "pointclouds": args.pointclouds}
    media = [k for k, v in chosen.items() if v is not None]
    if (media or args.output is None) and (args.jobs is not None or args.scheduler or args.more):
        raise UsageError("several files (--jobs/--scheduler) export tables: give -o DIR")
    if args.align is not None:
        return run_aligned(args, media)
    if media or args.output is None:
        return run_media(args, media)
    if args.format is None:
        args.format = "csv"
    if args.format not in ("csv", "parquet", "jsonl"):
        raise UsageError(f"--format {args.format} is for --images or --pointclouds; tables are csv, parquet or jsonl")
    if args.layout is None:  # parquet: a dataset (local or under a URL prefix); csv and jsonl: flat
        args.layout = "dataset" if args.format == "parquet" else "flat"
    if args.layout == "dataset" and args.format != "parquet":
        raise UsageError(f"--layout dataset is for --format parquet; {args.format} tables are flat")
    fields = [f.strip() for f in args.fields.split(",") if f.strip()] if args.fields else None
    if args.jobs is not None or args.scheduler or args.more:
        from polybag.ops.batch import export_many

        res_many = export_many(
            [args.input, *args.more],
            args.output,
            jobs=args.jobs,
            scheduler=args.scheduler,
            format=args.format,
            topics=topic_selection(args),
            fields=fields,
            start=args.start,
            end=args.end,
            overwrite=args.force,
            layout=args.layout,
            time=args.time,
        )
        return report_batch("export", args, res_many)
    res = export(
        args.input,
        args.output,
        format=args.format,
        topics=topic_selection(args),
        fields=fields,
        start=args.start,
        end=args.end,
        progress=progress_of(args),
        overwrite=args.force,
        layout=args.layout,
        time=args.time,
    )
    if args.json:
        print_json(res.to_dict())
    for t in res.tables:
        plain = t.table.split("~", 1)[0]  # (a table renamed for a name taken by another topic: NAME~2)
        label = t.topic if plain == table_name(t.topic) else f"{t.topic} [{plain[len(table_name(t.topic)) + 1:]}]"
        if t.error is not None:
            print(safe_line(f"polybag export: error: {label}: {t.error}"), file=sys.stderr)
        elif not args.json and not quiet(args):
            print(safe_line(f"{label} -> {t.path} ({t.rows} rows, {format_size(t.bytes)})"))  # (topics from the file)
    for w in res.warnings:
        if not any(t.error is not None and w.endswith(t.error) for t in res.tables):
            print(safe_line(f"polybag export: warning: {w}"), file=sys.stderr)
    summary("export", args, sum(t.rows for t in res.tables if t.error is None), [args.output], what="rows")
    return 1 if res.failed or res.damaged else 0


def run_media(args: argparse.Namespace, media: list[str]) -> int:
    """``--images DIR``, ``--video FILE`` or ``--pointclouds DIR``: :mod:`polybag.ops.export_media`."""
    from polybag.ops import export_media as em

    if len(media) != 1 or args.output is not None:
        raise UsageError("give one of -o DIR (tables), --images DIR, --video FILE or --pointclouds DIR")
    kind = media[0]
    common = {
        "topics": topic_selection(args),
        "every": args.every,
        "start": args.start,
        "end": args.end,
        "progress": progress_of(args),
        "overwrite": args.force,
    }
    fmt_ok = {"images": em.IMAGE_FORMATS, "pointclouds": em.CLOUD_FORMATS, "video": ()}[kind]
    if args.format is not None and args.format not in fmt_ok:
        raise UsageError(f"--format {args.format} does not go with --{kind}" + (f" ({', '.join(fmt_ok)})" if fmt_ok else ""))
    if kind == "images":
        res = em.export_images(args.input, args.images, format=args.format or "png", **common)
    elif kind == "pointclouds":
        res = em.export_pointclouds(args.input, args.pointclouds, format=args.format or "pcd", **common)
    else:
        res = em.export_video(args.input, args.video, fps=args.fps, **common)
    if args.json:
        print_json(res.to_dict())
    elif not quiet(args):
        what = "frames" if kind == "video" else "files"
        print(safe_line(f"{', '.join(res.topics)} -> {res.output} ({res.files} {what}" + (f", {res.fps:g} fps)" if res.fps else ")")))
    for w in res.warnings:
        print(safe_line(f"polybag export: warning: {w}"), file=sys.stderr)
    summary("export", args, res.files, [res.output], what="frames" if kind == "video" else "files")
    return 1 if res.failed else 0


def run_aligned(args: argparse.Namespace, media: list[str]) -> int:
    """``export --align HOW --topics /a /b -o DIR``: one aligned table (:mod:`polybag.ops.export_aligned`)."""
    from polybag.ops.export_aligned import export_aligned

    if media or args.output is None or args.jobs is not None or args.scheduler or args.more:
        raise UsageError("--align writes one table of one log: give FILE, --topics and -o DIR (no --images/--video/--pointclouds, --jobs)")
    from polybag.cli._ops import split_commas

    topics = [t.strip() for pat in (args.topics or []) for t in split_commas(pat.given) if t.strip()]
    if len(topics) < 2 or args.exclude_topics:
        raise UsageError("--align needs two or more topic names in --topics (the first gives the rows), no --exclude-topics")
    if args.start is not None or args.end is not None:
        raise UsageError("--align aligns whole topics: --start/--end are not taken with it")
    fmt = args.format or "csv"
    res = export_aligned(
        args.input,
        args.output,
        topics=topics,
        format=fmt,
        fields=[f.strip() for f in args.fields.split(",") if f.strip()] if args.fields else None,
        align=args.align,
        direction=args.direction,
        tolerance=args.tolerance,
        time=args.time,
        interpolate=args.interpolate,
        overwrite=args.force,
    )
    if args.json:
        print_json(res.to_dict())
    elif not quiet(args):
        for t in res.tables:
            print(safe_line(f"{t.topic} -> {t.path} ({t.rows} rows, {format_size(t.bytes)})"))
    for w in res.warnings:
        print(f"polybag export: warning: {w}", file=sys.stderr)
    summary("export", args, sum(t.rows for t in res.tables), [t.path for t in res.tables], what="rows")
    return 0
