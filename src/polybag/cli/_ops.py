"""Helpers shared by the operation commands (convert, filter, merge, split, recover, sort, du, plot)."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Iterable
from typing import Any

from polybag.cli.text import cli_text, print_json
from polybag.errors import PolybagError, UsageError

#: the command line's logger: its INFO lines (``-v``) and DEBUG lines (``-vv``) go to stderr
log = logging.getLogger("polybag")

#: the help of an option taking a :class:`TopicPattern`
TOPICS_HELP = "regular expression matched against whole topic names; a comma separates alternatives (/a,/b)"


class TopicPattern(str):
    """A topic option's argument (``--topics``, ``--include-topic``...): a regular expression
    matched against whole topic names, in which a comma outside brackets, braces and
    parentheses separates alternatives (``/a,/b`` is ``/a`` or ``/b``; ``\\,`` is a comma).
    The value is the regular expression; its ``repr`` the text as given (for messages)."""

    given: str
    shown: str | None = None

    def __new__(cls, text: str) -> TopicPattern:
        parts = split_commas(text)
        obj = super().__new__(cls, "|".join(f"(?:{p})" for p in parts) if len(parts) > 1 else parts[0])
        obj.given = text
        return obj

    def __repr__(self) -> str:
        return self.shown or repr(self.given)

    @classmethod
    def combine(cls, include: list[TopicPattern], exclude: list[TopicPattern]) -> TopicPattern:
        """One pattern selecting the topics any of ``include`` matches (every topic when
        empty) and none of ``exclude`` does (a negative lookahead on the whole name)."""
        if len(include) == 1 and not exclude:
            return include[0]
        inc = "|".join(f"(?:{p})" for p in include) if include else ".*"
        exc = "|".join(f"(?:{p})" for p in exclude)
        rx = f"(?!(?:{exc})\\Z)(?:{inc})" if exclude else inc
        obj = super().__new__(cls, rx)
        obj.given = " ".join(p.given for p in include)
        shown = " or ".join(repr(p) for p in include) if include else "any topic"
        if exclude:
            shown += " when excluding " + " or ".join(repr(p) for p in exclude)
        obj.shown = shown
        return obj


def split_commas(text: str) -> list[str]:
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


#: the options of :func:`add_topic_options` that take several values (``--topics A B``)
TOPIC_LIST_FLAGS = ("--topics", "--exclude-topics")


def add_topic_options(
    p: argparse.ArgumentParser, *, exclude: bool = True, short: bool = True, what: str = "select"
) -> None:
    """One topic grammar for every command that selects topics: ``--topics PATTERN...``
    (repeatable; ``--include-topic``/``-i`` PATTERN: one at a time) and, with ``exclude``,
    ``--exclude-topics PATTERN...`` (``--exclude-topic``/``-x`` PATTERN).  A PATTERN is a topic
    name or a regular expression matched against the whole name; a comma separates
    alternatives (``/a,/b``).  ``short``: also ``-i``/``-x`` (not where they mean something
    else).  :func:`topic_selection` gives the one pattern they make."""
    _add_pattern_options(
        p,
        "topics",
        "--include-topic",
        "-i" if short else None,
        f"{what} the topics matching any PATTERN: a topic name or a regular expression matched against "
        "the whole name; a comma separates alternatives (/a,/b); repeatable; none matching: exit 1",
    )
    if exclude:
        _add_pattern_options(
            p,
            "exclude_topics",
            "--exclude-topic",
            "-x" if short else None,
            "leave out the topics matching any PATTERN (same forms as --topics)",
        )


def _add_pattern_options(
    p: argparse.ArgumentParser, dest: str, one: str, one_short: str | None, help_many: str
) -> None:
    """``--DEST PATTERN...`` (help ``help_many``) and ``one`` PATTERN (also ``one_short``),
    one at a time: both add to ``dest``."""
    many = "--" + dest.replace("_", "-")
    p.add_argument(
        many,
        dest=dest,
        nargs="+",
        action="extend",
        type=TopicPattern,
        default=None,
        metavar="PATTERN",
        help=help_many,
    )
    p.add_argument(
        one,
        *((one_short,) if one_short is not None else ()),
        dest=dest,
        action="append",
        type=TopicPattern,
        metavar="PATTERN",
        help=f"one PATTERN, as {many} (repeatable)",
    )


def topic_selection(args: argparse.Namespace) -> TopicPattern | None:
    """The one pattern of :func:`add_topic_options`' arguments (None: every topic), for an
    operation's ``topics=`` (a selection matching nothing is an EmptySelectionError there)."""
    include = list(getattr(args, "topics", None) or [])
    exclude = list(getattr(args, "exclude_topics", None) or [])
    if not include and not exclude:
        return None
    return TopicPattern.combine(include, exclude)


def unswallow(argv: list[str]) -> list[str]:
    """``argv`` with the files that a list option swallowed (``cat --topics /a FILE``: FILE
    would be taken as a second pattern) moved before that option: from the first value that
    names a log (:func:`_names_input`) to the end of the option's values."""
    out = list(argv)
    i = 0
    while i < len(out):
        if out[i] == "--":
            break
        if out[i] in TOPIC_LIST_FLAGS:
            j = i + 1
            while j < len(out) and not (out[j].startswith("-") and out[j] != "-"):
                j += 1
            values = out[i + 1 : j]
            k = next((n for n, v in enumerate(values) if _names_input(v)), None)
            if k is not None and k > 0:  # (at least one value stays the option's)
                moved = values[k:]
                out[i:j] = moved + [out[i]] + values[:k]
                i += len(moved)
        i += 1
    return out


def old_format_flag(argv: list[str]) -> str | None:
    """The error for ``-f FORMAT`` (``-f`` was ``--format`` in some commands and is
    ``--force`` in all now): ``-f`` followed by a format's name that names no file."""
    import os

    from polybag.formats import registry

    names = {a.lower() for s in registry.formats() for a in (s.name, *s.aliases)}
    names |= {"csv", "parquet", "jsonl"}
    for i, word in enumerate(argv[:-1]):
        if word == "--":
            break
        value = argv[i + 1]
        if word == "-f" and value.lower() in names and not os.path.exists(value):
            return f"-f is --force now; pass --format {value} (or -F {value})"
    return None


def _names_input(value: str) -> bool:
    """Whether a command-line word names a log (an input, or an output to be) rather than a
    topic pattern: ``-``, a URL, an existing file or log directory, a log file's extension."""
    import os

    from polybag.formats import registry

    if value == "-" or "://" in value or value.lower().endswith(registry.file_extensions()):
        return True
    if os.path.isfile(value):
        return True
    if os.path.isdir(value):
        try:
            names = os.listdir(value)
        except OSError:
            return False
        return any(n == "metadata.yaml" or n.endswith((".db3", ".mcap")) for n in names)
    return False


def add_output_options(p: argparse.ArgumentParser, chunk: bool = True, strict: bool = True) -> None:
    """``--format``, ``--compression``, ``--chunk-size``, ``--force`` and (``strict``)
    ``--strict`` of a command that writes a log (the formats and compressions are the
    registry's)."""
    from polybag.formats import registry

    p.add_argument(
        "--format",
        "-F",
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
    if strict:
        p.add_argument(
            "--strict",
            action="store_true",
            help="refuse a damaged input (exit 3, no output); by default what reads before the damage "
            "is written (a ULog: every intact message), the damage named, exit 1",
        )
    add_force(p)


def add_log_to_log(
    p: argparse.ArgumentParser, run: Callable[[argparse.Namespace], int], input_help: str | None = None,
    output_help: str | None = None, strict: bool = True,
) -> None:
    """``IN OUT``, the output options and ``--json`` of a command that writes one log from
    another (convert, recover, sort), run by ``run``."""
    p.add_argument("input", metavar="IN", help=input_help)
    p.add_argument("output", metavar="OUT", help=output_help)
    add_writer_tail(p, run, strict=strict)


def add_writer_tail(p: argparse.ArgumentParser, run: Callable[[argparse.Namespace], int], strict: bool = True) -> None:
    """The output options (``strict``: with ``--strict``), ``--json``, ``-q`` and
    ``--progress``/``--no-progress`` of a command that writes logs, run by ``run``."""
    add_output_options(p, strict=strict)
    add_json(p)
    add_progress_options(p)
    p.set_defaults(func=run)


def add_progress_options(p: argparse.ArgumentParser, quiet: bool = True) -> None:
    """``--progress``/``--no-progress`` and (``quiet``) ``-q/--quiet`` of a command that
    writes: a progress bar on stderr when it is a terminal, otherwise one summary line at
    the end (:func:`summary`); ``-q``: neither, nor the result lines."""
    g = p.add_mutually_exclusive_group()
    g.add_argument(
        "--progress",
        dest="progress",
        action="store_const",
        const=True,
        default=None,
        help="show a progress bar on stderr even when it is not a terminal",
    )
    g.add_argument(
        "--no-progress",
        dest="progress",
        action="store_const",
        const=False,
        help="no progress bar: one summary line on stderr at the end (the default without a terminal)",
    )
    if quiet:
        p.add_argument("-q", "--quiet", action="store_true", help="print nothing but warnings and errors (no progress, no summary)")


def progress_of(args: argparse.Namespace) -> bool | None:
    """An operation's ``progress=`` from ``-q``/``--progress``/``--no-progress`` (None: a
    bar only when stderr is a terminal)."""
    if getattr(args, "quiet", False):
        return False
    return getattr(args, "progress", None)


def _bar_shown(args: argparse.Namespace) -> bool:
    mode = progress_of(args)
    return bool(sys.stderr.isatty()) if mode is None else mode


def summary(
    command: str, args: argparse.Namespace, messages: int | None, outputs: Iterable[Any], what: str = "messages"
) -> None:
    """The one line on stderr that ends a writing command when no progress bar was shown
    (no terminal, or ``--no-progress``): messages, bytes written, elapsed time, the output.
    Nothing with ``-q`` or ``--json``."""
    import os
    import time

    outputs = list(outputs)
    log_outputs(outputs)
    if getattr(args, "quiet", False) or getattr(args, "json", False) or _bar_shown(args):
        return
    from polybag.cli.text import format_size

    paths = [os.fspath(o) for o in outputs if isinstance(o, (str, os.PathLike)) and os.fspath(o) not in ("", "-")]
    size = sum(_size_of(p) for p in paths)
    started = getattr(args, "started", None)
    elapsed = f" in {time.monotonic() - started:.1f} s" if started is not None else ""
    where = paths[0] if len(paths) == 1 else f"{len(paths)} outputs" if paths else "stdout"
    count = f"{messages} {what}, " if messages is not None else ""
    print(f"polybag {command}: {count}{format_size(size)} written to {where}{elapsed}", file=sys.stderr)


def log_outputs(outputs: Iterable[Any]) -> None:
    """``-v``: each output written, with its size."""
    if not log.isEnabledFor(logging.INFO):
        return
    import os

    from polybag.cli.text import format_size

    paths = [os.fspath(o) for o in outputs if isinstance(o, (str, os.PathLike)) and os.fspath(o) not in ("", "-")]
    for p in paths:
        log.info("wrote %s (%s)", p, format_size(_size_of(p)))


def input_paths(args: argparse.Namespace) -> list[str]:
    """The inputs a command line names (as :mod:`polybag.cli._inputs` finds them; ``-``
    and outputs left out)."""
    ns = vars(args)
    command, more = ns.get("command"), ns.get("more")
    found: list[Any] = []
    if isinstance(more, list) and isinstance(ns.get("input"), str):
        found = [ns["input"], *more]
        if command == "convert" and isinstance(ns.get("output"), str):
            found = [ns["input"], ns["output"], *more][:-1]
    elif command == "merge" and isinstance(ns.get("paths"), list):
        found = ns["paths"][(0 if ns.get("output") is not None else 1) :]
    else:
        for name in ("files", "bags"):
            if isinstance(ns.get(name), list):
                found += ns[name]
        for name in ("input", "file"):
            if isinstance(ns.get(name), str):
                found.append(ns[name])
    return [str(f) for f in found if isinstance(f, str) and f != "-"]


def log_inputs(args: argparse.Namespace) -> None:
    """``-v``: each input, the format its first bytes (or its directory) say and its size.
    Never fails: an input that cannot be read is left to the command's own error."""
    import os

    from polybag.cli.text import format_size
    from polybag.io.urls import is_url

    for path in input_paths(args):
        if is_url(path):
            from polybag.io.redaction import redact

            log.info("reading %s", redact(path))
            continue
        try:
            what = _format_label(path)
            size = _size_of(path)
            kind = "directory" if os.path.isdir(path) else "file"
        except Exception:  # noqa: BLE001 - (-v never fails a command: its own error names the input)
            continue
        log.info("reading %s: %s (%s %s)", path, what, kind, format_size(size))


def _format_label(path: str) -> str:
    """``bag``, ``MCAP``, ``ULog``, ``rosbag2 (sqlite3)``... as the registry's probe of a
    directory or its sniff of a file's first bytes says (``unknown format``: none does; a
    format known only by the extension is said so).  The version is the reader's to say
    (``polybag info``): the command line never parses a format's bytes."""
    import os

    from polybag.formats import registry

    if os.path.isdir(path):
        spec = registry.probe_path(path)
        if spec is None:
            return "unknown format"
        kinds = sorted({"mcap" if f.endswith(".mcap") else "sqlite3" for f in os.listdir(path) if f.endswith((".mcap", ".db3"))})
        return f"{spec.description or spec.name} ({', '.join(kinds)})" if kinds else spec.description or spec.name
    with open(path, "rb") as f:
        head = f.read(registry.SNIFF_BYTES)
    name = registry.sniff(head)
    if name is None:
        guess = registry.lookup(registry.by_extension(path, headless=True) or "")
        return f"{guess.description or guess.name}? (no magic bytes; by the extension)" if guess and head else "unknown format"
    spec = registry.get(name)
    return spec.description or spec.name


def _size_of(path: str) -> int:
    """Bytes of a file, or of the files under a directory (a rosbag2 bag, a folder of tables);
    of a URL output, the bytes its upload put (under a URL prefix: the uploads beneath it)."""
    import os

    if "://" in path:
        from polybag.io.upload import local_output, uploaded_bytes

        local = local_output(path)
        if isinstance(local, str) and "://" in local:
            return uploaded_bytes(path) or 0
        path = os.fspath(local)
    try:
        if os.path.isdir(path):
            return sum(
                os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files
            )
        return os.path.getsize(path)
    except OSError:
        return 0


def quiet(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "quiet", False))


def refuse_stdout(command: str, output: Any) -> None:
    """A usage error for ``-`` as the output of a command that writes files only (it would
    otherwise be a file or folder named ``-``, while the summary said stdout)."""
    if output == "-":
        raise UsageError(
            "'-' (stdout) is no output of this command: name a file or folder"
            + (" (polybag convert IN - --format F [--topics ...] writes a log to stdout)" if command != "export" else "")
        )


def write_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keywords of an operation that writes a log, from :func:`add_output_options`'
    arguments (a progress bar when stderr is a terminal, or as :func:`progress_of` says)."""
    return {
        "format": args.out_format,
        "compression": args.compression,
        "chunk_size": args.chunk_size,
        "progress": progress_of(args),
        "overwrite": args.force,
        "storage": getattr(args, "storage", None),
        "strict": bool(getattr(args, "strict", False)),
    }


def add_force(p: argparse.ArgumentParser, what: str = "the output") -> None:
    """``--force``: replace existing output; without it an existing output is refused (exit 2).
    An input is never overwritten, nor a ``NAME.active`` (a recording in progress?)."""
    p.add_argument(
        "-f",
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
            print(f"polybag {command}: error: {cli_text(str(e))}", file=sys.stderr)
            worst = max(worst, 2)
        except PolybagError as e:
            print(f"polybag {command}: error: {cli_text(str(e))}", file=sys.stderr)
            worst = max(worst, 3)
    return worst


def warn(command: str, result: Any) -> None:
    for w in getattr(result, "warnings", []):
        print(f"polybag {command}: warning: {cli_text(str(w))}", file=sys.stderr)


def emit(command: str, args: argparse.Namespace, result: Any, lines: list[str], data: bool = False) -> None:
    """``--json``: the result object; otherwise the human lines (none with ``-q``, unless
    they are the command's ``data``: ``du``'s table), warnings on stderr."""
    if getattr(args, "json", False):
        print_json(result.to_dict())
    elif data or not quiet(args):
        from polybag.util.text import safe_text

        for line in lines:
            print(safe_text(line))  # (topics, types, paths from the files)
    warn(command, result)
