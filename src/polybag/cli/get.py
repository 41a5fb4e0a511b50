"""``polybag get attachment FILE NAME -o OUT``: extract an attachment (``-o -``: stdout)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from polybag.cli._ops import add_force
from polybag.cli.info import open_input


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("get", help="extract a record (an attachment) from a log")
    p.add_argument("what", choices=["attachment"])
    p.add_argument("file", help="log file, or - for stdin")
    p.add_argument("name", help="attachment name")
    p.add_argument("-o", "--output", required=True, help="output file, or - for stdout")
    p.add_argument("--index", type=int, default=0, help="which of several attachments with this name (0 = first)")
    add_force(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from polybag.io.output_files import write_created
    from polybag.ops.outputs import check_output, placed

    if args.output != "-":
        check_output(args.output, [] if args.file == "-" else [args.file], args.force, any_file=True)
    with open_input(args.file) as reader:
        found = [a for a in reader.attachments() if a.name == args.name]
        if len(found) <= args.index:
            have = len(found)
            print(
                f"polybag get: error: {args.file}: no attachment named {args.name!r}"
                + (f" with index {args.index} ({have} found)" if have else ""),
                file=sys.stderr,
            )
            return 1
        data = found[args.index].data
        if args.output == "-":
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        else:
            with placed(args.output, args.force) as tmp:
                write_created(tmp, data)
    return 0
