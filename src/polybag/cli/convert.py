"""``polybag convert IN OUT``: any readable log into any writable format."""

from __future__ import annotations

import argparse

from polybag.cli._ops import add_log_to_log, emit, warn, write_options
from polybag.cli.batch import add_jobs, report_batch


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "convert",
        help="convert a log to another format (bag <-> MCAP, ULog -> MCAP/bag/ULog, ROS 1 <-> ROS 2)",
        description="Copy every message of IN into OUT (format from OUT's extension or --format). "
        "bag -> MCAP uses the ros1 profile (--profile ros2: ROS 1 messages become ROS 2 CDR messages); "
        "ROS 2 (CDR) messages written to a bag become ROS 1 messages; "
        "ULog becomes ROS 1 messages ulog_msgs/<name>.",
    )
    p.add_argument(
        "--profile",
        choices=("ros1", "ros2"),
        help="MCAP profile of the output: ros2 converts ROS 1 messages to ROS 2 (CDR), "
        "ros1 converts ROS 2 messages to ROS 1 (default: the input's)",
    )
    add_log_to_log(
        p,
        run,
        input_help="input log, or URL ('-' for stdin: MCAP streams, others are read whole)",
        output_help="output log ('-' for stdout, with --format); with --jobs: the last of IN... OUTDIR",
    )
    add_jobs(p, "IN... OUTDIR: convert many logs into OUTDIR/<name><ext of --format, default mcap>")


def run(args: argparse.Namespace) -> int:
    import sys

    from polybag.ops import convert

    if args.jobs is not None or args.scheduler or args.more:
        from polybag.ops.batch import convert_many

        *inputs, outdir = [args.input, args.output, *args.more]
        opts = write_options(args)
        del opts["progress"]
        res = convert_many(inputs, outdir, format=opts.pop("format") or "mcap", jobs=args.jobs, scheduler=args.scheduler, profile=args.profile, **opts)
        return report_batch("convert", args, res)

    src = sys.stdin.buffer if args.input == "-" else args.input
    dst = sys.stdout.buffer if args.output == "-" else args.output
    r = convert(src, dst, profile=args.profile, **write_options(args))
    lines = [
        f"{r.input} ({r.input_format}) -> {r.output} ({r.output_format}"
        + (f", profile {r.profile}" if r.profile else "")
        + f"): {r.messages} messages on {r.channels} channels"
        + (f", {r.attachments} attachments" if r.attachments else "")
        + (f", {r.metadata} metadata" if r.metadata else "")
    ]
    if args.output == "-":  # stdout carries the log: the summary goes to stderr
        for line in lines:
            print(line, file=sys.stderr)
        warn("convert", r)
        return 1 if r.dropped_messages else 0
    emit("convert", args, r, lines)
    return 1 if r.dropped_messages else 0
