"""Helpers shared by the command modules: output, sizes; time parsing and progress.

Time parsing and formatting live in :mod:`polybag.selection` and the progress bar in
:mod:`polybag.util.progress` (the ops use them too, and must not import the CLI); they are
re-exported here under their old names.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any, TextIO

from polybag.selection import (
    DURATION_HELP,
    TIME_HELP,
    format_duration,
    format_ns,
    parse_time,
)
from polybag.util.progress import Progress

__all__ = [
    "DURATION_HELP",
    "TIME_HELP",
    "Progress",
    "cli_text",
    "format_duration",
    "format_ns",
    "format_size",
    "parse_time",
    "plain",
    "print_json",
]


def format_size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n} B"


def print_json(obj: Any, out: TextIO | None = None) -> None:
    json.dump(obj, out or sys.stdout, indent=2, default=json_default)
    (out or sys.stdout).write("\n")


def json_default(o: Any, slots: bool = False) -> Any:
    """JSON for what :mod:`json` cannot write: bytes as base64, arrays as lists, objects as
    their fields (with ``slots``, ``__slots__`` classes too), anything else as ``str``."""
    import base64

    if isinstance(o, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(o)).decode("ascii")
    tolist = getattr(o, "tolist", None)
    if tolist is not None:
        return tolist()
    if slots and hasattr(o, "__slots__"):
        try:
            return {k: getattr(o, k) for k in (getattr(o, "__slots__", None) or vars(o))}
        except (AttributeError, TypeError):
            pass
    if hasattr(o, "__dict__"):
        return vars(o)
    return str(o)


#: the library's keyword names as the command line's flags (a message of an operation that
#: names a keyword is printed with the flag)
_FLAGS = {
    "format": "--format",
    "storage": "--storage",
    "compression": "--compression",
    "profile": "--profile",
    "chunk_size": "--chunk-size",
    "max_parts": "--max-parts",
    "output_dir": "--output-dir",
    "prefix": "--prefix",
    "topics": "--topics",
    "types": "--types",
}
_KEYWORD = re.compile(r"\b(" + "|".join(_FLAGS) + r")=([\w.\-/]*)")


def cli_text(text: str) -> str:
    """A library message as the command line says it: ``--force`` for ``overwrite=True``,
    ``--format mcap`` for ``format=mcap``, no "in Python ..." aside; one line of visible
    characters (a control character in a file's name, an escape sequence or a line break,
    is written as an escape: :func:`polybag.util.text.safe_line`)."""
    from polybag.util.text import safe_line

    text = safe_line(text)
    text = re.sub(r";? in Python overwrite=True", "", text)
    text = re.sub(r"\boverwrite=True\b", "--force", text)
    text = re.sub(r"\bstrict=True\b", "--strict", text)

    def flag(m: re.Match[str]) -> str:
        return _FLAGS[m.group(1)] + (f" {m.group(2)}" if m.group(2) else "")

    return _KEYWORD.sub(flag, text)


_ROLE = re.compile(r":(?:func|class|mod|meth|attr|data|exc|obj|ref):`(~?)([^`]*)`")


def plain(doc: str | None) -> str:
    """A docstring as help text: Sphinx roles (``:func:`~a.b` `` -> ``b``) and double
    backquotes dropped."""
    if not doc:
        return ""
    text = _ROLE.sub(lambda m: m.group(2).rsplit(".", 1)[-1] if m.group(1) else m.group(2), doc)
    return text.replace("``", "")
