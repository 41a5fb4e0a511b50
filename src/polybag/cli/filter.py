"""``polybag filter IN OUT``: topics, a time window and a Python expression, like rosbag filter."""

from __future__ import annotations

import argparse

from polybag.cli._ops import add_topic_options, add_writer_tail, emit, refuse_stdout, summary, write_options
from polybag.cli.text import TIME_HELP


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("filter", help="copy selected messages (topics, time window, Python expression)", description="Copy the messages of IN that match into OUT. EXPRESSION is Python on topic, m (the decoded message) and t (log time in ns, also t.to_sec()), e.g. \"topic == '/odom' and m.pose.pose.position.x > 1\".")
    p.add_argument("input", metavar="IN")
    p.add_argument("output", metavar="OUT")
    p.add_argument("expression", nargs="?", default=None, metavar="EXPRESSION")
    add_topic_options(p, what="keep")
    p.add_argument("--start", "-s", metavar="T", help=f"start time, inclusive: {TIME_HELP}")
    p.add_argument("--end", "-e", metavar="T", help="end time, exclusive (same forms as --start)")
    add_writer_tail(p, run)


def run(args: argparse.Namespace) -> int:
    refuse_stdout("filter", args.output)
    from polybag.ops import filter as filter_op

    r = filter_op(
        args.input,
        args.output,
        include_topics=args.topics or None,
        exclude_topics=args.exclude_topics or None,
        start=args.start,
        end=args.end,
        expression=args.expression,
        **write_options(args),
    )
    emit(
        "filter", args, r, [f"{r.output}: {r.messages} of {r.read} messages written, on {r.topics_written} topic{'' if r.topics_written == 1 else 's'}"]
    )
    summary("filter", args, r.messages, [r.output])
    return 1 if r.dropped_messages or r.damage else 0
