"""``polybag recover IN OUT``: a valid, indexed file from a damaged MCAP, bag or ULog."""

from __future__ import annotations

import argparse

from polybag.cli._ops import add_log_to_log, emit, refuse_stdout, summary, write_options
from polybag.cli.text import format_size


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("recover", help="rebuild a valid indexed log from a damaged or cut one (exit 1 if anything was lost)", description="Keep every intact message of IN, write OUT with fresh indexes, read OUT back to verify it, and report what was kept and lost. Exit status 1 when anything was lost.")
    add_log_to_log(p, run, strict=False)  # (it reads past damage: --strict has no meaning)


def run(args: argparse.Namespace) -> int:
    refuse_stdout("recover", args.output)
    from polybag.ops import recover

    r = recover(args.input, args.output, **write_options(args))
    lines = [
        f"{r.output}: kept {r.messages} messages"
        + (f" of {r.messages_expected}" if r.messages_expected is not None else "")
        + f" ({format_size(r.bytes_kept)} of {format_size(r.bytes_total)} read)",
        f"lost: {r.messages_lost if r.messages_lost is not None else 'unknown number of'} messages, "
        f"{r.bytes_lost} bytes skipped",
    ]
    lines += [f"  damage: {e}" for e in r.errors]
    lines.append("verified: output re-read, every written message present" if r.verified else "NOT verified")
    emit("recover", args, r, lines)
    summary("recover", args, r.messages, [r.output])
    return 1 if r.lost_anything else 0
