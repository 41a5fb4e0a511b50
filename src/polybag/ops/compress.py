"""``compress`` / ``decompress``: rewrite a bag's or MCAP file's chunks with another compression
(a rosbag2 directory: its storage files or messages, into a new directory).

Like ``rosbag compress``: in place, the original is kept as ``NAME.orig.EXT`` (unless
``backup=False``) and the new file is written as ``NAME.EXT.active`` and renamed over the
original only when complete, so an interruption never loses a file.  With ``output_dir``
the result goes there and the input is untouched (no backup); an existing file there is
replaced only with ``force`` (which also replaces an existing backup), and never when it is
the input.  An existing ``NAME.EXT.active`` (a recording in progress?) is never touched::

    from polybag import ops
    ops.compress("run.bag", "lz4")
    ops.decompress("run.mcap", output_dir="plain/")
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from polybag.errors import OutputExistsError, PolybagError
from polybag.formats import registry
from polybag.io.output_files import refuse_existing, refuse_replacing
from polybag.ops.inputs import check_apart, check_distinct
from polybag.ops.outputs import abort_writer, make_folder, replace_refusal
from polybag.ops.results import OpResult, make_progress
from polybag.writer import writer_class_of

PathLike = str | os.PathLike[str]


@dataclass
class CompressResult(OpResult):
    input: str = ""
    output: str | None = None
    format: str = ""
    compression: str = ""
    backup: str | None = None
    skipped: bool = False


def backup_path(path: str) -> str:
    """rosbag's backup name: ``x.bag`` -> ``x.orig.bag``, ``x.bag.active`` -> ``x.bag.orig.active``."""
    base, ext = os.path.splitext(path)
    return f"{base}.orig{ext}"


def sniff_format(path: str) -> str:
    """The format of the regular file ``path`` from its magic bytes (the registry's list), or
    of a directory log from the registry's path probes."""
    from polybag.formats import registry
    from polybag.io.source import require_regular_file

    by_path = registry.probe_path(path)  # a directory format (a rosbag2 bag)
    if by_path is not None:
        return by_path.name
    require_regular_file(path)
    try:
        with open(path, "rb") as f:
            head = f.read(registry.SNIFF_BYTES)
    except OSError as e:
        raise PolybagError(f"{path}: cannot open: {e.strerror or e}") from e
    fmt = registry.sniff(head)
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
    on_skip: Callable[[str], None] | None = None,
) -> tuple[str, dict[str, Any]] | None:
    """Run ``produce(tmp_target)`` and put the result in place safely.

    In place: the original is hard-linked (or copied) to the backup first, then the new
    file (written by the atomic writer as ``<path>.active``) replaces it.  Returns
    ``(output path, report)`` or None when skipped because the backup exists (``on_skip``
    gets the reason; default: printed to stderr).
    """
    from polybag.io.source import require_regular_file

    require_regular_file(path)
    if output_dir:
        return _rewrite_into_dir(path, produce, output_dir, force)
    if os.path.lexists(path + ".active"):
        raise OutputExistsError(
            f"{path}: {path}.active exists (a recording or an interrupted run?); move it away first"
        )
    if backup and not _make_backup(path, force, on_skip):
        return None
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


def _rewrite_into_dir(
    path: str, produce: Callable[[str], dict[str, Any]], output_dir: str, force: bool
) -> tuple[str, dict[str, Any]]:
    """``rewrite_file``/``rewrite_dir`` with ``output_dir``: ``produce`` the file (or bag directory) of the same name there
    (never the input, never over a ``.active``, over an existing file only with ``force``).
    A URL ``output_dir``: written locally, then uploaded (:mod:`polybag.io.upload`)."""
    from polybag.io.upload import local_output, output_url, staged

    name = os.path.basename(path)
    if name.endswith(".active"):
        name = name[: -len(".active")]
    if output_url(output_dir) is not None:
        url = output_dir.rstrip("/") + "/" + name
        directory = os.path.isdir(path)  # a bag directory: its writer says the upload order
        files = writer_class_of(path) if directory else None
        with staged(url, directory=directory, overwrite=force, files=files) as local:
            report = produce(local)
        return url, report
    output_dir = local_output(output_dir)
    make_folder(output_dir)
    out = os.path.join(output_dir, name)
    if os.path.abspath(out) == os.path.abspath(path):
        raise OutputExistsError(f"{path}: --output-dir would overwrite the input")
    check_distinct(path, out)  # the same file through a symlinked directory or a hard link
    check_apart(path, out)  # nor inside (or around) an input bag directory
    if os.path.lexists(out + ".active"):
        raise OutputExistsError(
            f"{out}.active exists (a recording in progress, or an interrupted write?); not overwritten"
        )
    if not force:
        refuse_existing(out)
    else:  # only a log file, or exactly a bag directory, is replaced
        refuse_replacing(out, replace_refusal(out))
    return out, produce(out)


def rewrite_dir(
    path: str,
    produce: Callable[[str], dict[str, Any]],
    *,
    output_dir: str | None,
    backup: bool,
    force: bool,
    on_skip: Callable[[str], None] | None = None,
) -> tuple[str, dict[str, Any]] | None:
    """:func:`rewrite_file` for a directory log (a rosbag2 bag): ``produce(target)`` writes
    the new directory ``target`` (through ``target.active/``, renamed when complete).

    With ``output_dir``: ``output_dir/NAME``.  In place: the new bag is written as
    ``NAME.new`` first; then the input becomes the backup ``NAME.orig`` (removed after
    the swap with ``backup=False``) and ``NAME.new`` becomes ``NAME``: an interruption at
    any point leaves the input (or its backup) and nothing half-written under its name.
    """
    path = os.path.normpath(path)
    if output_dir:
        return _rewrite_into_dir(path, produce, output_dir, force)
    new, old = path + ".new", (backup_path(path) if backup else path + ".old")
    for p in (path + ".active", new, new + ".active") + (() if backup else (old,)):
        if os.path.lexists(p):
            raise OutputExistsError(f"{path}: {p} exists (an interrupted run?); move it away first")
    if backup and os.path.lexists(old):
        if not force:
            _skip(f"{path}: backup {old} exists, skipping (use -f to overwrite it)", on_skip)
            return None
        refuse_replacing(old, replace_refusal(old))  # -f: only a backup that is exactly a bag
    report = produce(new)
    if backup and os.path.lexists(old):
        refuse_replacing(old, replace_refusal(old))  # (still exactly a bag)
        shutil.rmtree(old)  # -f: the old backup goes only once the new bag is complete
    os.rename(path, old)
    os.rename(new, path)
    if not backup:
        shutil.rmtree(old, ignore_errors=True)
    return path, report


def _tree_size(path: str) -> int:
    """Bytes of the files directly in ``path`` (a bag directory's storage files)."""
    total = 0
    try:
        for entry in os.scandir(path):
            if entry.is_file(follow_symlinks=False):
                total += entry.stat(follow_symlinks=False).st_size
    except OSError:
        pass
    return total


def _skip(text: str, on_skip: Callable[[str], None] | None) -> None:
    """Tell why a file is skipped: to ``on_skip``, or by default on stderr."""
    if on_skip is None:
        print(text, file=sys.stderr)
    else:
        on_skip(text)


def _make_backup(path: str, force: bool, on_skip: Callable[[str], None] | None) -> bool:
    """Hard-link (or copy) ``path`` to its backup; False (the reason given to ``on_skip``,
    default: printed to stderr) when the backup exists and not ``force``."""
    bk = backup_path(path)
    if os.path.lexists(bk):
        if not force:
            _skip(f"{path}: backup {bk} exists, skipping (use -f to overwrite it)", on_skip)
            return False
        refuse_replacing(bk, replace_refusal(bk))  # -f: only a backup that is a log file
        os.unlink(bk)
    try:
        os.link(path, bk)
    except OSError:
        shutil.copy2(path, bk)
    return True


def recompress_copy(src: str, dst: str, comp: str, progress: Callable[[int], None]) -> dict[str, Any]:
    """Copy every message, attachment and metadata record of ``src`` into ``dst`` (same
    format) with ``comp`` chunks: ``compress`` for formats without a rewrite of their own."""
    import polybag

    n = 0
    with polybag.open(src) as r:
        w = polybag.Writer(dst, format=r.format, compression=comp)
        try:
            for m in r.messages(order="file"):
                w.write_message(m)
                n += 1
            for a in r.attachments():
                w.write_attachment(a)
            for md in r.metadata():
                w.write_metadata(md)
            w.close()
        except BaseException:
            # the writer's unfinished NAME.active is ours (rewrite_file refuses to start
            # when one exists): drop it, the input is untouched
            abort_writer(w)
            raise
    progress(os.path.getsize(src))
    return {"messages": n, "compression": comp}


def compress(
    path: PathLike,
    compression: str | None = None,
    *,
    output_dir: PathLike | None = None,
    backup: bool = True,
    force: bool = False,
    progress: bool | None = False,
    compression_mode: str | None = None,
) -> CompressResult:
    """Rewrite ``path`` with ``compression`` chunks (bags: none/bz2/lz4, default bz2;
    MCAP: none/zstd/lz4, default zstd, bz2 meaning zstd).  A rosbag2 directory becomes a new
    directory (see :func:`rewrite_dir`) with ``zstd`` (the default) or ``none`` and
    ``compression_mode`` ``file`` (default) or ``message``."""
    p = os.fspath(path)
    directory = os.path.isdir(p)
    comp = (compression or ("zstd" if directory else "bz2")).lower()
    fmt = sniff_format(p)
    result = CompressResult(input=p, format=fmt)
    if compression_mode is not None and not directory:
        raise PolybagError(f"{p}: a compression mode (file/message) is for rosbag2 directories")
    size = _tree_size(p) if directory else os.path.getsize(p)
    spec = registry.get(fmt)
    if spec.writer is None or len(spec.compressions) < 2:
        raise PolybagError(f"{p}: {fmt} files have no chunk compression to change")
    try:
        chosen = spec.chunk_compression(comp)
    except PolybagError as e:
        raise PolybagError(f"{p}: {e}") from None
    # the format's own rewrite (a bag keeps every record as it is), else a copy of the
    # messages through the format's writer
    rewrite = spec.load_recompress() or recompress_copy
    with make_progress(size, os.path.basename(p), progress) as prog:

        extra: dict[str, Any] = {}
        if directory:  # the new directory's writer: the mode, and replacing an output only with force
            extra = {"compression_mode": compression_mode, "overwrite": force}

        def produce(target: str) -> dict[str, Any]:
            report: dict[str, Any] = rewrite(p, target, chosen, prog.update, **extra)
            return report

        out_dir = os.fspath(output_dir) if output_dir is not None else None
        place = rewrite_dir if directory else rewrite_file
        got = place(p, produce, output_dir=out_dir, backup=backup, force=force, on_skip=result.warn)
    if got is None:
        result.skipped = True
        return result
    out, report = got
    result.output = out
    result.messages = int(report.get("messages", 0))
    result.compression = str(report.get("compression", comp))
    if out_dir is None and backup:
        result.backup = backup_path(p)
    return result


def decompress(path: PathLike, *, output_dir: PathLike | None = None, backup: bool = True, force: bool = False, progress: bool | None = False) -> CompressResult:
    """Rewrite ``path`` with uncompressed chunks (see :func:`compress`; a rosbag2 directory
    with uncompressed storage files and messages)."""
    return compress(path, "none", output_dir=output_dir, backup=backup, force=force, progress=progress)


recompress_mcap = recompress_copy  # the name this had when only MCAP used it
