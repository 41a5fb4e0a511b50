"""``polybag merge OUT IN...`` (or ``merge IN... -o OUT``): several logs into one, by log time."""

from __future__ import annotations

import argparse

from polybag.cli._ops import (
    add_topic_options,
    add_writer_tail,
    emit,
    refuse_stdout,
    summary,
    topic_selection,
    write_options,
)
from polybag.errors import OutputExistsError, UsageError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("merge", help="merge logs (any formats) into one, ordered by log time", description="Merge IN... into OUT in log-time order; identical schemas and channels are written once, and a topic with different types or md5sums is reported as a conflict.")
    p.add_argument("paths", nargs="+", metavar="PATH", help="OUT IN..., or IN... with -o OUT")
    p.add_argument("-o", "--output", metavar="OUT", help="the merged log (then every PATH is an input)")
    add_topic_options(p, what="merge only")
    add_writer_tail(p, run)


def run(args: argparse.Namespace) -> int:
    from polybag.ops import merge

    if args.output is not None:
        output, inputs = args.output, list(args.paths)
    else:
        output, inputs = args.paths[0], list(args.paths[1:])
    if not inputs:
        raise UsageError("no input (OUT IN... or IN... -o OUT)")
    refuse_stdout("merge", output)
    try:
        r = merge(
            output,
            inputs,
            topics=topic_selection(args),
            **write_options(args),
        )
    except OutputExistsError as e:
        if args.output is not None:
            raise
        raise OutputExistsError(f"{e}; note: the first PATH is the output (merge OUT IN..., or IN... -o OUT)") from None
    lines = [f"{r.output}: {r.messages} messages on {r.channels} channels from {len(r.inputs)} inputs"]
    lines += [f"  {name}: {n} messages" for name, n in zip(r.inputs, r.input_messages)]
    emit("merge", args, r, lines)
    summary("merge", args, r.messages, [r.output])
    return 1 if r.dropped_messages or r.damage else 0
