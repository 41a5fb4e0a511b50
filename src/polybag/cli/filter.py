"""``polybag filter IN OUT``: topics, a time window and a Python expression, like rosbag filter."""

from __future__ import annotations

import argparse

from polybag.cli._ops import TopicPattern, add_writer_tail, emit, write_options


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("filter", help="copy selected messages (topics, time window, Python expression)", description="Copy the messages of IN that match into OUT. EXPRESSION is Python on topic, m (the decoded message) and t (log time in ns, also t.to_sec()), e.g. \"topic == '/odom' and m.pose.pose.position.x > 1\".")
    p.add_argument("input", metavar="IN")
    p.add_argument("output", metavar="OUT")
    p.add_argument("expression", nargs="?", default=None, metavar="EXPRESSION")
    for flag, short, verb in (("--include-topic", "-i", "keep"), ("--exclude-topic", "-x", "drop")):
        p.add_argument(flag, short, action="append", type=TopicPattern, default=[], metavar="REGEX", help=f"{verb} topics matching REGEX (whole name; a comma separates alternatives, /a,/b; repeatable)")
    p.add_argument("--start", "-s", metavar="T", help="start time, inclusive (ns; seconds with '.' or 's'; '+' = from log start)")
    p.add_argument("--end", "-e", metavar="T", help="end time, exclusive")
    add_writer_tail(p, run)


def run(args: argparse.Namespace) -> int:
    from polybag.ops import filter as filter_op

    r = filter_op(
        args.input,
        args.output,
        include_topics=args.include_topic or None,
        exclude_topics=args.exclude_topic or None,
        start=args.start,
        end=args.end,
        expression=args.expression,
        **write_options(args),
    )
    emit(
        "filter", args, r, [f"{r.output}: {r.messages} of {r.read} messages read, on {len(r.topics)} topics"]
    )
    return 1 if r.dropped_messages else 0
