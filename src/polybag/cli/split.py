"""``polybag split IN --size N | --duration D | --at T...``: numbered parts."""

from __future__ import annotations

import argparse

from polybag.cli._common import format_ns, format_size
from polybag.cli._ops import add_writer_tail, emit, parse_size, write_options


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("split", help="split a log into numbered parts by size, duration or at given times", description="Parts are named STEM_000.EXT, STEM_001.EXT, ... (in --output-dir, default beside IN).")
    p.add_argument("input", metavar="IN")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--size", type=parse_size, metavar="N", help="payload bytes per part (K/M/G suffixes)")
    g.add_argument("--duration", metavar="D", help="time per part (ns, or seconds with '.' or 's')")
    g.add_argument("--at", nargs="+", metavar="T", help="split at these times ('+' = from log start)")
    p.add_argument("--output-dir", "-o", metavar="DIR")
    p.add_argument("--prefix", metavar="STEM", help="part name stem (default: the input's)")
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
        **write_options(args),
    )
    lines = [f"{r.input}: {r.messages} messages in {len(r.parts)} parts"]
    for part in r.parts:
        lines.append(
            f"  {part.path}: {part.messages} messages, {format_size(part.bytes)}, "
            f"{format_ns(part.start_time)} .. {format_ns(part.end_time)}"
        )
    emit("split", args, r, lines)
    return 1 if r.dropped_messages else 0
