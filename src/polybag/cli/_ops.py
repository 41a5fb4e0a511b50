"""Helpers shared by the operation commands (convert, filter, merge, split, recover, sort, du, plot)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable
from typing import Any

from polybag.cli._common import print_json
from polybag.errors import PolybagError, UsageError

#: the help of an option taking a :class:`TopicPattern`
TOPICS_HELP = "regular expression matched against whole topic names; a comma separates alternatives (/a,/b)"


class TopicPattern(str):
    """A topic option's argument (``--topics``, ``--include-topic``...): a regular expression
    matched against whole topic names, in which a comma outside brackets, braces and
    parentheses separates alternatives (``/a,/b`` is ``/a`` or ``/b``; ``\\,`` is a comma).
    The value is the regular expression; its ``repr`` the text as given (for messages)."""

    given: str

    def __new__(cls, text: str) -> TopicPattern:
        parts = _split_commas(text)
        obj = super().__new__(cls, "|".join(f"(?:{p})" for p in parts) if len(parts) > 1 else parts[0])
        obj.given = text
        return obj

    def __repr__(self) -> str:
        return repr(self.given)


def _split_commas(text: str) -> list[str]:
    """``text`` cut at its top-level commas (not escaped, not in ``[...]``, ``{...}``, ``(...)``);
    empty pieces dropped."""
    parts: list[str] = []
    cur: list[str] = []
    depth, in_class, escaped = 0, -1, False  # in_class: where the class's first member is (-1: none)
    for i, ch in enumerate(text):
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif in_class >= 0:
            if ch == "^" and i == in_class:
                in_class += 1
            elif ch == "]" and i > in_class:
                in_class = -1
        elif ch == "[":
            in_class = i + 1
        elif ch in "({":
            depth += 1
        elif ch in ")}":
            depth = max(0, depth - 1)
        elif ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    parts.append("".join(cur))
    return [p for p in parts if p] or [text]


def topic_names(values: Iterable[str]) -> list[str]:
    """Topic names given as arguments, each of which may be a comma-separated list (``/a,/b``)."""
    return [name for v in values for name in v.split(",") if name]


def add_output_options(p: argparse.ArgumentParser, chunk: bool = True) -> None:
    """``--format``, ``--compression``, ``--chunk-size`` and ``--force`` of a command that
    writes a log (the formats and compressions are the registry's)."""
    from polybag.formats import registry

    p.add_argument(
        "--format",
        "-f",
        dest="out_format",
        metavar="F",
        help=f"output format: {', '.join(registry.writable())} (default: from the extension)",
    )
    per_format = "; ".join(
        f"{s.name}: {', '.join(s.compressions)} (default {s.default_compression})"
        for s in registry.formats()
        if s.writer is not None and len(s.compressions) > 1
    )
    p.add_argument("--compression", metavar="C", help=f"chunk compression ({per_format})")
    p.add_argument("--storage", choices=("sqlite3", "mcap"), help="a rosbag2 output's storage (default sqlite3)")
    if chunk:
        p.add_argument(
            "--chunk-size", type=parse_size, metavar="N", help="chunk size in bytes (K/M/G suffixes)"
        )
    add_force(p)


def add_log_to_log(
    p: argparse.ArgumentParser, run: Callable[[argparse.Namespace], int], input_help: str | None = None,
    output_help: str | None = None,
) -> None:
    """``IN OUT``, the output options and ``--json`` of a command that writes one log from
    another (convert, recover, sort), run by ``run``."""
    p.add_argument("input", metavar="IN", help=input_help)
    p.add_argument("output", metavar="OUT", help=output_help)
    add_writer_tail(p, run)


def add_writer_tail(p: argparse.ArgumentParser, run: Callable[[argparse.Namespace], int]) -> None:
    """The output options and ``--json`` of a command that writes logs, run by ``run``."""
    add_output_options(p)
    add_json(p)
    p.set_defaults(func=run)


def write_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keywords of an operation that writes a log, from :func:`add_output_options`'
    arguments (a progress bar when stderr is a terminal)."""
    return {
        "format": args.out_format,
        "compression": args.compression,
        "chunk_size": args.chunk_size,
        "progress": None,
        "overwrite": args.force,
        "storage": getattr(args, "storage", None),
    }


def add_force(p: argparse.ArgumentParser, what: str = "the output") -> None:
    """``--force``: replace existing output; without it an existing output is refused (exit 2).
    An input is never overwritten, nor a ``NAME.active`` (a recording in progress?)."""
    p.add_argument(
        "--force",
        action="store_true",
        help=f"overwrite {what} if it exists (refused otherwise, exit 2; an input is never overwritten)",
    )


def add_json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def parse_size(text: str) -> int:
    t = text.strip().upper().removesuffix("B")
    mult = 1
    for suffix, m in (("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30), ("T", 1 << 40)):
        if t.endswith(suffix):
            t, mult = t[:-1], m
            break
    try:
        n = int(float(t) * mult)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r}") from None
    if n <= 0:
        raise argparse.ArgumentTypeError(f"size must be positive: {text!r}")
    return n


def run_each(command: str, paths: Iterable[str], one: Callable[[str], int]) -> int:
    """``one(path)`` for every path of a command that works file by file (compress,
    reindex): the worst exit status; an error stops only its own file, printed as
    ``polybag COMMAND: error: ...`` with status 2 for a usage error (an existing output,
    the input as output) and 3 for another."""
    worst = 0
    for path in paths:
        try:
            worst = max(worst, one(path))
        except UsageError as e:
            print(f"polybag {command}: error: {e}", file=sys.stderr)
            worst = max(worst, 2)
        except PolybagError as e:
            print(f"polybag {command}: error: {e}", file=sys.stderr)
            worst = max(worst, 3)
    return worst


def warn(command: str, result: Any) -> None:
    for w in getattr(result, "warnings", []):
        print(f"polybag {command}: warning: {w}", file=sys.stderr)


def emit(command: str, args: argparse.Namespace, result: Any, lines: list[str]) -> None:
    """``--json``: the result object; otherwise the human lines, warnings on stderr."""
    if getattr(args, "json", False):
        print_json(result.to_dict())
    else:
        for line in lines:
            print(line)
    warn(command, result)
