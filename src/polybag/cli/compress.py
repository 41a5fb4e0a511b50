"""``polybag compress [--bz2|--lz4] FILE...``: recompress bags (and MCAP files) in place.

Like ``rosbag compress``: the original is kept as ``NAME.orig.EXT`` (unless
``--no-backup``), the new file is written as ``NAME.EXT.active`` and renamed over the
original only when complete, so an interruption never loses a file.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Callable
from typing import Any

from polybag.cli._common import Progress
from polybag.errors import PolybagError

EXIT_OK, EXIT_PROBLEM = 0, 1


def backup_path(path: str) -> str:
    """rosbag's backup name: ``x.bag`` -> ``x.orig.bag``, ``x.bag.active`` -> ``x.bag.orig.active``."""
    base, ext = os.path.splitext(path)
    return f"{base}.orig{ext}"


def sniff_format(path: str) -> str:
    from polybag.formats.sniff import SNIFF_BYTES, sniff

    try:
        with open(path, "rb") as f:
            head = f.read(SNIFF_BYTES)
    except OSError as e:
        raise PolybagError(f"{path}: cannot open: {e.strerror or e}") from e
    fmt = sniff(head)
    if fmt is None:
        from polybag.errors import UnknownFormatError

        raise UnknownFormatError("not a bag or MCAP file", path, 0)
    return fmt


def rewrite_file(
    path: str,
    produce: Callable[[str], dict[str, Any]],
    *,
    output_dir: str | None,
    backup: bool,
    force: bool,
) -> tuple[str, dict[str, Any]] | None:
    """Run ``produce(tmp_target)`` and put the result in place safely.

    In place: the original is hard-linked (or copied) to the backup first, then the new
    file (written by the atomic writer as ``<path>.active``) replaces it.  Returns
    ``(output path, report)`` or None when skipped because the backup exists.
    """
    if output_dir:
        os.makedirs(output_dir, exist_ok=True)
        name = os.path.basename(path)
        if name.endswith(".active"):
            name = name[: -len(".active")]
        out = os.path.join(output_dir, name)
        if os.path.abspath(out) == os.path.abspath(path):
            raise PolybagError(f"{path}: --output-dir would overwrite the input")
        return out, produce(out)
    if os.path.exists(path + ".active"):
        raise PolybagError(f"{path}: {path}.active exists (a recording or an interrupted run?); move it away first")
    if backup:
        bk = backup_path(path)
        if os.path.exists(bk):
            if not force:
                print(f"{path}: backup {bk} exists, skipping (use -f to overwrite it)", file=sys.stderr)
                return None
            os.unlink(bk)
        try:
            os.link(path, bk)
        except OSError:
            shutil.copy2(path, bk)
    # The writer writes <path>.active and renames it over <path> on success.
    try:
        report = produce(path)
    except BaseException:
        if backup:  # the original is untouched; drop the link we just made
            try:
                os.unlink(backup_path(path))
            except OSError:
                pass
        raise
    return path, report


def _compress_one(path: str, comp: str, args: argparse.Namespace) -> int:
    fmt = sniff_format(path)
    size = os.path.getsize(path)
    with Progress(size, os.path.basename(path), enabled=None if not args.quiet else False) as prog:
        if fmt == "bag":
            from polybag.formats.bag.records import MAGIC_V20
            from polybag.formats.bag.reindex import recompress_bag

            with open(path, "rb") as f:
                if f.read(len(MAGIC_V20)) != MAGIC_V20:
                    raise PolybagError(f"{path}: only 2.0 bags can be recompressed; use `polybag convert` first")
            if comp not in ("none", "bz2", "lz4"):
                raise PolybagError(f"{path}: bag chunks can be none, bz2 or lz4, not {comp}")

            def produce(target: str) -> dict[str, Any]:
                return recompress_bag(path, target, comp, progress=prog.update)
        elif fmt == "mcap":
            mcomp = {"bz2": "zstd"}.get(comp, comp)

            def produce(target: str) -> dict[str, Any]:
                return recompress_mcap(path, target, mcomp, prog.update)
        else:
            raise PolybagError(f"{path}: {fmt} files have no chunk compression to change")
        got = rewrite_file(path, produce, output_dir=args.output_dir, backup=not args.no_backup, force=args.force)
    if got is None:
        return EXIT_PROBLEM
    out, report = got
    if not args.quiet:
        print(f"{path} -> {out}: {report.get('messages', 0)} messages, {report.get('compression', comp)}")
    return EXIT_OK


def recompress_mcap(src: str, dst: str, comp: str, progress: Callable[[int], None]) -> dict[str, Any]:
    import polybag

    n = 0
    with polybag.open(src) as r:
        w = polybag.Writer(dst, format="mcap", compression=comp)
        try:
            for m in r.messages(order="file"):
                w.write_message(m)
                n += 1
            for a in r.attachments():
                w.write_attachment(a)
            for md in r.metadata():
                w.write_metadata(md)
        except BaseException:
            # the writer's unfinished NAME.active is ours (rewrite_file refuses to start
            # when one exists): drop it, the input is untouched
            active = dst + ".active"
            if os.path.exists(active):
                os.unlink(active)
            raise
        w.close()
    progress(os.path.getsize(src))
    return {"messages": n, "compression": comp}


def run_many(args: argparse.Namespace, comp: str) -> int:
    worst = EXIT_OK
    for path in args.files:
        try:
            worst = max(worst, _compress_one(path, comp, args))
        except PolybagError as e:
            print(f"polybag {args.command}: error: {e}", file=sys.stderr)
            worst = max(worst, 3)
    return worst


def add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--output-dir", metavar="DIR", help="write here instead of in place (no backup)")
    p.add_argument("-f", "--force", action="store_true", help="overwrite an existing .orig backup")
    p.add_argument("--no-backup", action="store_true", help="do not keep NAME.orig.EXT")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress or summary")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "compress",
        help="compress bag chunks (bz2/lz4) or MCAP chunks (zstd/lz4), keeping a .orig backup",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    g = p.add_mutually_exclusive_group()
    g.add_argument("-j", "--bz2", dest="comp", action="store_const", const="bz2", help="bz2 (bag default)")
    g.add_argument("--lz4", dest="comp", action="store_const", const="lz4", help="lz4")
    g.add_argument("--zstd", dest="comp", action="store_const", const="zstd", help="zstd (MCAP only; MCAP default)")
    add_common(p)
    p.set_defaults(func=_run, comp=None)


def _run(args: argparse.Namespace) -> int:
    comp = args.comp
    if comp is None:
        comp = "bz2"  # bags; MCAP maps bz2 -> zstd
    return run_many(args, comp)
