"""``polybag merge OUT IN...``: several logs into one, ordered by log time."""

from __future__ import annotations

import argparse

from polybag.cli._ops import add_json, add_output_options, emit


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "merge",
        help="merge logs (any formats) into one, ordered by log time",
        description="Merge IN... into OUT in log-time order; identical schemas and channels are "
        "written once, and a topic with different types or md5sums is reported as a conflict.",
    )
    p.add_argument("output", metavar="OUT")
    p.add_argument("inputs", nargs="+", metavar="IN")
    p.add_argument("--topics", metavar="REGEX", help="only topics matching REGEX (whole name)")
    add_output_options(p)
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from polybag.ops import merge

    r = merge(
        args.output,
        args.inputs,
        format=args.out_format,
        compression=args.compression,
        chunk_size=args.chunk_size,
        topics=args.topics,
        progress=None,
    )
    lines = [f"{r.output}: {r.messages} messages on {r.channels} channels from {len(r.inputs)} inputs"]
    lines += [f"  {name}: {n} messages" for name, n in zip(r.inputs, r.input_messages)]
    emit("merge", args, r, lines)
    return 1 if r.dropped_messages else 0
