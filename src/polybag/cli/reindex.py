"""``polybag reindex FILE...``: rebuild the index of unindexed or cut bags.

Like ``rosbag reindex``: works in place and keeps the original as ``NAME.orig.bag``
(``NAME.bag.orig.active`` for a ``.bag.active`` file), or writes to ``--output-dir``.  Every
complete message is kept: intact chunks are copied byte for byte, the intact records of a
cut chunk (and of a chunk a killed recorder never finished) go into a rebuilt chunk.  An old
bag (1.2, 1.1, ROSLOG; indexed or not) is rewritten as an indexed 2.0 bag, as rosbag does
with 1.2 bags.  Exit status 1 when messages or bytes had to be dropped.  A rosbag2 bag
directory gets its metadata.yaml rebuilt from its storage files (``--force``: replacing one).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

from polybag.cli._ops import progress_of
from polybag.cli.compress import add_common, done, rewrite_file, run_each_summarized
from polybag.cli.text import Progress, cli_text, plain
from polybag.errors import UnsupportedError, UsageError
from polybag.formats import registry


def _reindexer(path: str) -> Callable[..., Any]:
    """The index rebuilder (:attr:`~polybag.formats.registry.FormatSpec.reindex`) of the
    directory format (a rosbag2 bag) for a directory, of the file format (a bag) for a file."""
    directory = os.path.isdir(path)
    for spec in registry.formats():
        reindex = spec.load_reindex() if (spec.open_path is not None) == directory else None
        if reindex is not None:
            return reindex
    raise UnsupportedError(f"{path}: polybag rebuilds no index of such a log")


def _one(path: str, args: argparse.Namespace) -> int:
    if os.path.isdir(path):
        return _one_rosbag2(path, args)
    reindex_bag = _reindexer(path)

    size = os.path.getsize(path) if os.path.exists(path) else 0
    mode = progress_of(args)
    with Progress(size, os.path.basename(path), enabled=mode) as prog:
        got = rewrite_file(
            path,
            lambda target: reindex_bag(path, target, progress=prog.update),
            output_dir=args.output_dir,
            backup=True,
            force=args.force,
            on_skip=lambda text: print(f"polybag reindex: error: {cli_text(str(text))}", file=sys.stderr),
        )
    if got is None:
        return 1
    out, rep = got
    done(args, out, rep["messages"])
    lost = bool(rep["errors"]) or rep["bytes_skipped"] > 0
    if not args.quiet:
        how = "indexed already" if rep["was_indexed"] else f"index rebuilt ({rep['index_problem']})"
        print(f"{path} -> {out}: {rep['messages']} messages in {rep['chunks']} chunks, {how}")
        for e in rep["errors"]:
            print(f"  damage: {cli_text(str(e))}")
    return 1 if lost else 0


def _one_rosbag2(path: str, args: argparse.Namespace) -> int:
    """A rosbag2 bag directory: its metadata.yaml rebuilt in place from the storage files
    (``ros2 bag reindex``); ``--force`` replaces an existing one."""
    if args.output_dir:
        raise UsageError(f"{path}: a rosbag2 bag is reindexed in place (its metadata.yaml); --output-dir is for bags")
    rep = _reindexer(path)(path, overwrite=args.force)
    done(args, path, rep["messages"])
    if not args.quiet:
        print(f"{path}: metadata.yaml rebuilt: {rep['messages']} messages on {rep['topics']} topics in {len(rep['files'])} file(s)")
    return 0


def _run(args: argparse.Namespace) -> int:
    return run_each_summarized(args, lambda path: _one(path, args))


def register(sub: Any) -> None:
    p = sub.add_parser("reindex", help="rebuild the index of unindexed/cut bags, old ones as 2.0 (keeps NAME.orig.bag)", description=plain(__doc__), formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common(p, "write reindexed bags here instead of in place", "an existing backup", None, no_backup=False)
    p.set_defaults(func=_run)
