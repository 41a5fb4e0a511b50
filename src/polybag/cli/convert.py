"""``polybag convert IN OUT``: any readable log into any writable format."""

from __future__ import annotations

import argparse

from polybag.cli._ops import (
    add_log_to_log,
    add_topic_options,
    emit,
    quiet,
    summary,
    topic_selection,
    warn,
    write_options,
)
from polybag.cli.batch import add_jobs, report_batch


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "convert",
        help="convert a log to another format (bag, MCAP, rosbag2, ULog; ROS 1 <-> ROS 2)",
        description="Copy every message of IN into OUT (format from OUT's extension or --format). "
        "bag -> MCAP uses the ros1 profile (--profile ros2: ROS 1 messages become ROS 2 CDR messages); "
        "ROS 2 (CDR) messages written to a bag become ROS 1 messages, ROS 1 messages written to rosbag2 "
        "ROS 2 ones; ULog becomes ROS 1 messages ulog_msgs/<name> (and through them ROS 2 ones for "
        "rosbag2 or --profile ros2). A message is dropped only when no chain of these bridges reaches "
        "the output, with the reason per topic.",
    )
    p.add_argument(
        "--profile",
        choices=("ros1", "ros2"),
        help="the ROS of the output: ros2 converts ROS 1 (and ULog) messages to ROS 2 (CDR), "
        "ros1 converts ROS 2 messages to ROS 1; an MCAP takes either, a bag only ros1, rosbag2 only ros2 "
        "(default: the input's for MCAP, the format's own otherwise)",
    )
    add_topic_options(p, what="convert only")
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

        paths: list[str] = [args.input, args.output, *args.more]
        inputs, outdir = paths[:-1], paths[-1]
        opts = write_options(args)
        del opts["progress"]
        sel = topic_selection(args)
        if sel is not None:
            opts["topics"] = str(sel)
        res = convert_many(inputs, outdir, format=opts.pop("format") or "mcap", jobs=args.jobs, scheduler=args.scheduler, profile=args.profile, **opts)
        return report_batch("convert", args, res)

    src = sys.stdin.buffer if args.input == "-" else args.input
    dst = sys.stdout.buffer if args.output == "-" else args.output
    r = convert(src, dst, profile=args.profile, topics=topic_selection(args), **write_options(args))
    lines = [
        f"{r.input} ({r.input_format}) -> {r.output} ({r.output_format}"
        + (f", profile {r.profile}" if r.profile else "")
        + f"): {r.messages} messages on {r.channels} channels"
        + (f", {r.attachments} attachments" if r.attachments else "")
        + (f", {r.metadata} metadata" if r.metadata else "")
    ]
    if args.output == "-":  # stdout carries the log: the summary goes to stderr
        for line in lines if not quiet(args) else []:
            print(line, file=sys.stderr)
        warn("convert", r)
        return 1 if r.dropped_messages or r.damage else 0
    emit("convert", args, r, lines)
    summary("convert", args, r.messages, [r.output])
    return 1 if r.dropped_messages or r.damage else 0
