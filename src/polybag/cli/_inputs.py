"""Glob URLs among a command line's inputs (``polybag info 's3://logs/many/*.bag'``): each is
replaced by the objects it matches before the command runs, with the expansion of
``polybag.dask`` (:func:`polybag.io.remote.expand_urls`: sorted, objects only, bounded, no
match an error, no glob over HTTP).  Local patterns are the shell's (a quoted local pattern
names a file, as before).  Outputs are never expanded.

Which arguments are inputs, per command: ``files``/``bags`` (info, check, compress, play...),
``merge``'s ``paths`` (all of them with ``-o``, else all but the first, the output), the
batch commands' ``input`` with ``more`` (``convert IN... OUTDIR``: every path but the last;
``export FILE... -o DIR``), and the single ``input``/``file`` of the other commands, where a
pattern must match one object."""

from __future__ import annotations

import argparse
from typing import Any

from polybag.errors import UsageError
from polybag.io.urls import has_glob, is_url


def _pattern(value: Any) -> bool:
    return isinstance(value, str) and is_url(value) and has_glob(value)


def _expand(values: list[Any]) -> list[Any]:
    if not any(_pattern(v) for v in values):
        return values
    from polybag.io.remote import expand_urls

    return expand_urls(values)


def expand_inputs(args: argparse.Namespace) -> None:
    """Replace the glob URLs among ``args``' inputs by what they match (in place)."""
    ns = vars(args)  # (the commands' arguments differ: looked up in the namespace's dict)
    command = ns.get("command")
    more = ns.get("more")
    if isinstance(more, list) and isinstance(ns.get("input"), str):
        if command == "convert" and isinstance(ns.get("output"), str):
            heads = [args.input, args.output, *more][:-1]  # IN... OUTDIR (IN OUT without more)
            ins = _expand(heads)
            if ins is not heads:  # (a glob was expanded: IN... OUTDIR, or IN OUT for one match)
                full = [*ins, [args.output, *more][-1]]
                args.input, args.output, args.more = full[0], full[1], full[2:]
            return
        ins = _expand([args.input, *more])
        args.input, args.more = ins[0], ins[1:]
        return
    if command == "merge" and isinstance(ns.get("paths"), list):
        keep = 0 if ns.get("output") is not None else 1
        args.paths = [*args.paths[:keep], *_expand(args.paths[keep:])]
        return
    for name in ("files", "bags"):
        values = ns.get(name)
        if isinstance(values, list):
            setattr(args, name, _expand(values))
    for name in ("input", "file"):
        value = ns.get(name)
        if _pattern(value):
            hits = _expand([value])
            if len(hits) != 1:
                from polybag.io.redaction import redact

                shown = ", ".join(hits[:3]) + (", ..." if len(hits) > 3 else "")
                raise UsageError(
                    f"{command} reads one log, and {redact(str(value))} matches {len(hits)} objects ({shown}): name one"
                )
            setattr(args, name, hits[0])
