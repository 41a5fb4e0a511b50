"""``polybag sort IN OUT``: rewrite in log-time order with fresh indexes."""

from __future__ import annotations

import argparse

from polybag.cli._ops import add_log_to_log, emit, refuse_stdout, summary, write_options


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("sort", help="rewrite a log in log-time order with fresh indexes")
    add_log_to_log(p, run)


def run(args: argparse.Namespace) -> int:
    refuse_stdout("sort", args.output)
    from polybag.ops import sort

    r = sort(args.input, args.output, **write_options(args))
    emit("sort", args, r, [f"{r.output}: {r.messages} messages in log-time order"])
    summary("sort", args, r.messages, [r.output])
    return 1 if r.dropped_messages or r.damage else 0
