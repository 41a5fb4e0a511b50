"""``polybag split IN --size N | --duration D | --at T...``: numbered parts."""

from __future__ import annotations

import argparse

from polybag.cli._ops import add_writer_tail, emit, parse_size, summary, write_options
from polybag.cli.text import DURATION_HELP, TIME_HELP, format_ns, format_size


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("split", help="split a log into numbered parts by size, duration or at given times", description="Parts are named STEM_000.EXT, STEM_001.EXT, ... (in --output-dir, default beside IN). "
        "They keep IN's format unless --format says otherwise: a bag's parts are bags, an MCAP's MCAPs, "
        "a ULog's ULogs, a rosbag2 bag's parts are bag directories STEM_000, ... of its storage.")
    p.add_argument("input", metavar="IN")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--size", type=parse_size, metavar="N", help="the most a part may take on disk (K/M/G suffixes), by a conservative estimate: parts come out smaller, each holds at least one message")
    g.add_argument("--duration", metavar="D", help=f"time per part: {DURATION_HELP}")
    g.add_argument("--at", nargs="+", metavar="T", help=f"split at these times: {TIME_HELP}")
    p.add_argument("--output-dir", "-o", metavar="DIR")
    p.add_argument("--prefix", metavar="STEM", help="part name stem (default: the input's)")
    p.add_argument(
        "--max-parts",
        type=int,
        default=1000,
        metavar="N",
        help="refuse (before writing anything) a split into more than N parts (default: 1000)",
    )
    add_writer_tail(p, run)


def run(args: argparse.Namespace) -> int:
    from polybag.ops import split

    r = split(
        args.input,
        size=args.size,
        duration=args.duration,
        at=args.at,
        output_dir=args.output_dir,
        prefix=args.prefix,
        max_parts=args.max_parts,
        **write_options(args),
    )
    lines = [f"{r.input}: {r.messages} messages in {len(r.parts)} parts"]
    for part in r.parts:
        lines.append(
            f"  {part.path}: {part.messages} messages, {format_size(part.bytes)}, "
            f"{format_ns(part.start_time)} .. {format_ns(part.end_time)}"
        )
    emit("split", args, r, lines)
    summary("split", args, r.messages, [part.path for part in r.parts])
    return 1 if r.dropped_messages or r.damage else 0
