"""What the surface targets share: a case's invariants over the files around it.

A target that writes or reads folders snapshots a sentinel tree outside its case (and the
case's inputs) before a case and compares after it; any difference, or anything left in the
case's private ``TMPDIR``, is an :class:`InvariantBroken`, which the harness counts as an
escape like any exception that is not a ``PolybagError``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from pathlib import Path
from typing import Any


class InvariantBroken(AssertionError):
    """A surface invariant of issue 26 was broken (always an escape)."""


def snapshot(root: str | os.PathLike[str]) -> dict[str, tuple[Any, ...]]:
    """Every entry under ``root`` (symbolic links not followed) by relative path: a link's
    target, a file's content hash and mode, a folder's or special file's kind and mode."""
    out: dict[str, tuple[Any, ...]] = {}
    if not os.path.lexists(root):
        return out
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            rel = os.path.relpath(p, root)
            mode = st.st_mode & 0o7777
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p))
            elif stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    out[rel] = ("file", hashlib.blake2b(f.read(), digest_size=12).hexdigest(), mode)
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", mode)
            else:
                out[rel] = ("special", stat.S_IFMT(st.st_mode), mode)
    return out


def changed(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """The relative paths whose entry differs between two snapshots (sorted)."""
    return [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def describe(a: dict[str, Any], b: dict[str, Any]) -> str:
    """The differences between two snapshots, for a report (cut short)."""
    return ", ".join(f"{k}: {a.get(k)} -> {b.get(k)}" for k in changed(a, b))[:500]


def empty(d: str | os.PathLike[str]) -> None:
    """Remove everything inside the folder ``d`` (links themselves, never what they name)."""
    for n in os.listdir(d):
        p = Path(d) / n
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
