"""``polybag compress [--bz2|--lz4|--zstd] FILE...``: recompress bags (and MCAP files, rosbag2 directories) in place.

The logic is :func:`polybag.ops.compress`.  Like ``rosbag compress``: the original is kept as ``NAME.orig.EXT`` (unless
``--no-backup``), the new file is written as ``NAME.EXT.active`` and renamed over the
original only when complete, so an interruption never loses a file.  An existing backup
(the file is skipped, exit 1) or an existing file in ``--output-dir`` (exit 2) is replaced
only with ``-f``.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from polybag.cli._ops import add_progress_options, progress_of, run_each, summary
from polybag.cli.text import cli_text, plain
from polybag.errors import UsageError
from polybag.formats import registry
from polybag.ops.compress import backup_path, recompress_mcap, rewrite_file, sniff_format

__all__ = ["add_common", "backup_path", "recompress_mcap", "register", "rewrite_file", "run_many", "sniff_format"]

EXIT_OK, EXIT_PROBLEM = 0, 1


def _no_bz2(spec: registry.FormatSpec) -> str:
    """``MCAP chunks can be none, zstd or lz4, not bz2 (use --zstd or --lz4)``."""
    comps = list(spec.compressions)
    can = ", ".join(comps[:-1]) + " or " + comps[-1] if len(comps) > 1 else comps[0]
    use = " or ".join(f"--{c}" for c in comps if c != "none")
    return f"{spec.description or spec.name} chunks can be {can}, not bz2 (use {use})"


def _compress_one(path: str, comp: str, args: argparse.Namespace) -> int:
    from polybag.ops.compress import compress

    if comp == "bz2" and getattr(args, "comp", None) == "bz2":
        spec = registry.get(sniff_format(path))
        if "bz2" in dict(spec.compression_aliases):
            # asked for explicitly: MCAP has no bz2 chunks, and silently writing zstd would hide that
            raise UsageError(f"{path}: {_no_bz2(spec)}")
    if os.path.isdir(path) and getattr(args, "comp", None) is None and comp == "bz2":
        comp = "zstd"  # a rosbag2 directory: its only compression
    res = compress(
        path,
        comp,
        output_dir=args.output_dir,
        backup=not args.no_backup,
        force=args.force,
        progress=progress_of(args),
        compression_mode=getattr(args, "mode", None),
    )
    for w in res.warnings:
        kind = "error" if res.skipped else "warning"
        print(f"polybag {args.command}: {kind}: {cli_text(str(w))}", file=sys.stderr)
    if res.skipped or res.output is None:  # (a file not skipped has its output)
        return EXIT_PROBLEM
    if not args.quiet:
        print(f"{path} -> {res.output}: {res.messages} messages, {res.compression or comp}")
    done(args, res.output, res.messages)
    return EXIT_OK


def done(args: argparse.Namespace, output: str, messages: int) -> None:
    """Count a file rewritten, for the summary line at the end."""
    if not hasattr(args, "written"):
        args.written = []
    args.written.append((output, messages))


def run_each_summarized(args: argparse.Namespace, one: Any) -> int:
    """:func:`run_each` over ``args.files``, then the summary line of the files written."""
    worst = run_each(args.command, args.files, one)
    written = getattr(args, "written", [])
    if written:
        summary(args.command, args, sum(n for _, n in written), [o for o, _ in written])
    return worst


def run_many(args: argparse.Namespace, comp: str) -> int:
    return run_each_summarized(args, lambda path: _compress_one(path, comp, args))


def add_common(
    p: argparse.ArgumentParser,
    output_help: str = "write here instead of in place (no backup)",
    backup: str = "an existing .orig backup",
    quiet_help: str | None = "no progress or summary",
    no_backup: bool = True,
) -> None:
    """``FILE...``, ``--output-dir``, ``--force`` (and ``--no-backup``, ``-q``) of a command
    that rewrites files in place (compress, decompress, reindex)."""
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("-o", "--output-dir", metavar="DIR", help=output_help)
    p.add_argument(
        "-f",
        "--force",
        action="store_true",
        help=f"overwrite {backup}, or an existing file in --output-dir (never an input)",
    )
    if no_backup:
        p.add_argument("--no-backup", action="store_true", help="do not keep NAME.orig.EXT")
    p.add_argument("-q", "--quiet", action="store_true", help=quiet_help)
    add_progress_options(p, quiet=False)


def register(sub: Any) -> None:
    p = sub.add_parser("compress", help="compress bag chunks (bz2/lz4) or MCAP chunks (zstd/lz4), keeping a .orig backup", description=plain(__doc__), formatter_class=argparse.RawDescriptionHelpFormatter)
    g = p.add_mutually_exclusive_group()
    g.add_argument("-j", "--bz2", dest="comp", action="store_const", const="bz2", help="bz2 (bag default)")
    g.add_argument("--lz4", dest="comp", action="store_const", const="lz4", help="lz4")
    g.add_argument("--zstd", dest="comp", action="store_const", const="zstd", help="zstd (MCAP and rosbag2 default)")
    p.add_argument(
        "--mode",
        choices=("file", "message"),
        help="rosbag2 directories: compress each storage file whole (file, the default) or each message",
    )
    add_common(p)
    p.set_defaults(func=_run, comp=None)


def _run(args: argparse.Namespace) -> int:
    comp = args.comp
    if comp is None:
        comp = "bz2"  # bags; MCAP maps bz2 -> zstd
    return run_many(args, comp)
