"""``--jobs N`` / ``--scheduler ADDRESS`` of the commands that take many files (convert, export):
the options and the report of :mod:`polybag.ops.batch`."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from polybag.cli.text import print_json
from polybag.util.text import safe_line


def add_jobs(p: argparse.ArgumentParser, what: str) -> None:
    """More input files, ``--jobs N`` and ``--scheduler ADDRESS``."""
    p.add_argument("more", nargs="*", metavar="...", help=f"more files: {what}")
    p.add_argument(
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help="run the files in N local processes (default with several files: one per CPU)",
    )
    p.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="run the files on the Dask distributed cluster at ADDRESS (tcp://host:8786) instead",
    )


def report_batch(command: str, args: argparse.Namespace, res: Any) -> int:
    """Each file's outcome (``--json``: the whole :class:`~polybag.ops.batch.BatchResult`);
    exit 1 when a file failed or was damaged."""
    from polybag.ops.batch import name_once  # (each line names its input once)

    if getattr(args, "json", False):
        print_json(res.to_dict())
    for f in res.files:
        if f.error is not None:
            print(safe_line(f"polybag {command}: error: {name_once(f.input, f.error)}"), file=sys.stderr)
        elif not getattr(args, "json", False) and not getattr(args, "quiet", False):
            r = f.result or {}
            n = r.get("messages", r.get("tables"))
            n = len(n) if isinstance(n, list) else n
            extra = f" ({n} {'messages' if 'messages' in r else 'tables'})" if n is not None else ""
            print(safe_line(f"{f.input} -> {f.output}{extra}"))
        for w in (f.result or {}).get("warnings", []) or []:
            print(safe_line(f"polybag {command}: warning: {name_once(f.input, w)}"), file=sys.stderr)
    damaged = any((f.result or {}).get("damage") for f in res.files)  # (kept what read before it)
    done = [f for f in res.files if f.error is None]
    if done:  # (the summary line without a terminal)
        from polybag.cli._ops import summary

        counts = [(f.result or {}).get("messages") for f in done]
        total = sum(n for n in counts if isinstance(n, int)) if all(isinstance(n, int) for n in counts) else None
        summary(command, args, total, [f.output for f in done])
    return 1 if res.failed or damaged else 0
