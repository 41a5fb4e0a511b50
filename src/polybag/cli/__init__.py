"""The ``polybag`` command.

Each command is one small module in this package that defines ``register(subparsers)``;
``register`` adds a subparser and sets ``func`` to a callable ``(args) -> int``.  Modules
are found automatically, so adding a command touches no shared file; a module is named as its
command, and a command line imports only that module (:func:`build_parser`).

Exit codes: 0 success; 1 the operation found a problem or lost data (``check``,
``recover``, ``info`` of a damaged file, messages a target cannot hold, a topic selection
that matches no topic: the message lists the topics there are); 2 usage error, or
an output that exists (commands that write refuse to replace a file unless ``--force``, and
never replace an input); 3 the input could not be read or the output not written (a polybag
error, a full disk; the message names the file); 130 interrupted.  Every error is one line
``polybag CMD: error: ...``, never a traceback (``POLYBAG_DEBUG=1`` shows the traceback of
an unexpected one).

One grammar: ``-f``/``--force`` replaces an existing output wherever a command writes
(``--format``, short ``-F``, names an output format; the old ``-f FORMAT`` is a usage error
saying so); every command that selects topics takes ``--topics PATTERN...`` (also
``--include-topic``/``-i``), ``--exclude-topics PATTERN...`` (``--exclude-topic``/``-x``),
a PATTERN being a topic name or a regular expression on the whole name, a comma separating
alternatives; every writing command shows a progress bar on a terminal, else one summary line
on stderr (``--progress``/``--no-progress`` force either).  Errors name the command line's
flags, not the library's keywords.

Every command takes ``-q/--quiet`` (nothing on stderr but warnings and errors; data on stdout
is still data) and ``-v/--verbose`` (on stderr: each input and the format its first bytes say,
each output written, the time taken; ``-vv`` also the parsed arguments), through the
``polybag`` logger.  Data (cat lines, info text, ``--json`` documents, a log written to ``-``)
goes to stdout; progress, summaries, warnings and errors to stderr.  No ANSI escape is printed
when ``NO_COLOR`` is set (non-empty) or the stream is no terminal.  ``polybag completion
bash|zsh|fish`` prints the shell completion script (:mod:`polybag.cli.completion`).

Every command takes ``--max-chunk SIZE`` (``512M``, ``1G``, ``1048576``...): what any single
chunk of an input may decompress to (default 512 MiB).  It is set process-wide for the
duration of the command, so readers opened anywhere in it honour it.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import pkgutil
import signal
import sys
import time
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

from polybag import __version__
from polybag.cli.text import cli_text
from polybag.errors import EmptySelectionError, OutputExistsError, PolybagError, PolybagWarning, UsageError
from polybag.io import compression

EXIT_OK = 0
EXIT_PROBLEM = 1
EXIT_USAGE = 2
EXIT_INPUT = 3
EXIT_INTERRUPTED = 130


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser.  ``command``: the command the line names (see
    :func:`_command_word`); when a module of this package registers it, only that module is
    imported and only its subparser built, so a command imports what it uses and not every
    other command's dependencies (``polybag record`` starts without numpy, the formats'
    readers, the operations: issue 28).  Without it (the top-level help, an unknown
    command) every command is registered."""
    names = sorted(i.name for i in pkgutil.iter_modules(__path__) if not i.name.startswith("_"))
    if command is not None and command in names:
        parser = _parser([command])
        if _command_parser(parser, command) is not parser:
            return parser
    return _parser(names)


def _parser(modules: list[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="polybag",
        description="Robot logs without ROS: ROS 1 bags, ROS 2 bags (rosbag2 directories, sqlite3 or "
        "MCAP storage), MCAP files and PX4 ULog flight logs: inspect, print, convert, filter, merge, "
        "split, repair, export, record and play them.",
    )
    parser.add_argument("--version", action="version", version=f"polybag {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in modules:
        mod = importlib.import_module(f"{__name__}.{name}")
        register = getattr(mod, "register", None)
        if register is not None:
            register(sub)
    _add_max_chunk(parser)
    _add_types(parser)
    _add_quiet_verbose(parser)
    return parser


#: the top-level options that take a value (skipped when looking for the command's name)
_VALUE_OPTIONS = ("--max-chunk", "--types")


def _command_word(words: Sequence[str]) -> str | None:
    """The command a command line names: its first word that is no option nor a top-level
    option's value (None: none before ``--``, or the top-level help asked for before it)."""
    skip = False
    for w in words:
        if skip:
            skip = False
        elif w in ("--", "-h", "--help"):
            return None
        elif w.startswith("-"):  # (argparse also takes an unambiguous prefix: --max 1G)
            skip = w.startswith("--") and "=" not in w and any(o.startswith(w) for o in _VALUE_OPTIONS)
        else:
            return w
    return None


def _size(text: str) -> int:
    try:
        return compression.parse_size(text)
    except UsageError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _add_everywhere(parser: argparse.ArgumentParser, flag: str, **options: Any) -> None:
    """``flag`` on ``parser`` and every (sub)command under it (default SUPPRESS: a level
    that does not give it leaves the value another level gave)."""
    if not any(flag in a.option_strings for a in parser._actions):
        parser.add_argument(flag, default=argparse.SUPPRESS, **options)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in set(action.choices.values()):
                _add_everywhere(child, flag, **options)


def _add_max_chunk(parser: argparse.ArgumentParser) -> None:
    """``--max-chunk SIZE`` everywhere: the most one chunk may decompress to."""
    _add_everywhere(parser, "--max-chunk", dest="max_chunk", metavar="SIZE", type=_size, help="the most any single chunk may decompress to, e.g. 512M, 1G (default 512M)")


def _add_types(parser: argparse.ArgumentParser) -> None:
    """``--types DIR`` (repeatable) everywhere: a workspace's ROS 2 ``.msg``/``.idl`` files
    (``pkg/msg/Name.msg``) for files that carry no definitions.  The top level keeps its own
    list (a command's namespace replaces the top level's values), joined when the command runs."""
    helptext = "add the ROS 2 .msg/.idl files under DIR (pkg/msg/Name.msg) to the known types"
    if not any("--types" in a.option_strings for a in parser._actions):
        parser.add_argument("--types", dest="types_top", metavar="DIR", action="append", default=argparse.SUPPRESS, help=helptext)
    _add_everywhere(parser, "--types", dest="types", metavar="DIR", action="append", help=helptext)


def _add_quiet_verbose(parser: argparse.ArgumentParser) -> None:
    """``-q/--quiet`` and ``-v/--verbose`` on every command (and every subcommand of one)
    that does not define them itself (those that do keep their meaning: ``check -v`` and
    ``info -v`` print more on stdout too).  ``-q``: nothing on stderr but warnings and
    errors; ``-v``: what was read as which format, what was written, timings, on stderr
    (``-vv``: also debugging detail), through the ``polybag`` logger (:func:`_logging`)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in set(action.choices.values()):
                flags = {o for a in child._actions for o in a.option_strings}
                if "--quiet" not in flags:
                    child.add_argument(
                        *(("-q",) if "-q" not in flags else ()), "--quiet", action="store_true",
                        default=argparse.SUPPRESS, help="print nothing on stderr but warnings and errors",
                    )
                if "--verbose" not in flags:
                    child.add_argument(
                        *(("-v",) if "-v" not in flags else ()), "--verbose", action="count",
                        default=argparse.SUPPRESS,
                        help="say more on stderr: inputs and their formats, outputs, timings (-vv: more)",
                    )
                _add_quiet_verbose(child)


class _StderrHandler(logging.Handler):
    """The ``polybag`` logger's lines on stderr (the one of the moment: a test's, or the
    recorder's table guard), as ``polybag CMD: text`` (``warning:``/``error:`` before a
    warning's or an error's text), control characters escaped."""

    def __init__(self, command: str) -> None:
        super().__init__()
        self.command = command

    def emit(self, record: logging.LogRecord) -> None:
        try:
            kind = "error: " if record.levelno >= logging.ERROR else "warning: " if record.levelno >= logging.WARNING else ""
            text = cli_text(record.getMessage())
            print(f"polybag {self.command}: {kind}{text}", file=sys.stderr, flush=True)
        except Exception:  # noqa: BLE001 - (logging never raises: a closed stderr...)
            self.handleError(record)


@contextlib.contextmanager
def _logging(args: argparse.Namespace) -> Iterator[None]:
    """The ``polybag`` logger for one command: WARNING (also with ``-q``), INFO with ``-v``,
    DEBUG with ``-vv``; its lines on stderr (:class:`_StderrHandler`).  Restored after."""
    log = logging.getLogger("polybag")
    count = getattr(args, "verbose", 0)
    verbose = 0 if getattr(args, "quiet", False) else int(count or 0)
    handler = _StderrHandler(str(args.command))
    handler.setLevel(logging.DEBUG)
    before = log.level
    log.setLevel(logging.DEBUG if verbose >= 2 else logging.INFO if verbose == 1 else logging.WARNING)
    log.addHandler(handler)
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.setLevel(before)


def main(argv: Sequence[str] | None = None) -> int:
    _short_blas_spin()  # (before the commands' modules import numpy)
    from polybag.cli._ops import old_format_flag, unswallow

    if "_ARGCOMPLETE" in os.environ:  # the shell asks for completions (polybag completion SHELL)
        from polybag.cli.completion import autocomplete

        autocomplete(build_parser())  # (exits when it answered)
    words = [*(sys.argv[1:] if argv is None else argv)]  # (`list` here is the list command's module)
    parser = build_parser(_command_word(words))
    old = old_format_flag(words)
    if old is not None:  # (-f FORMAT of earlier versions: -f is --force now)
        command = next((w for w in words if not w.startswith("-")), "")
        _command_parser(parser, command).print_usage(sys.stderr)
        print(f"polybag {command}: error: {old}", file=sys.stderr)
        return EXIT_USAGE
    args, unknown = parser.parse_known_args(unswallow(words))
    if unknown:  # (the command's own usage and name, as rosbag's and every subcommand's error says)
        _chosen_parser(parser, args).error(f"unrecognized arguments: {' '.join(unknown)}")
    args.started = time.monotonic()
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return EXIT_USAGE
    max_chunk = getattr(args, "max_chunk", None)
    previous = compression.set_max_chunk_bytes(max_chunk) if max_chunk is not None else None
    try:
        with warnings.catch_warnings(), _logging(args):
            _show_polybag_warnings(str(args.command))
            status = _run(parser, args, func)
            logging.getLogger("polybag").info("done in %.2f s (exit %d)", time.monotonic() - args.started, status)
            return status
    finally:
        if previous is not None:
            compression.set_max_chunk_bytes(previous)


def _short_blas_spin() -> None:
    """``OPENBLAS_THREAD_TIMEOUT=12`` for this process, unless the user set a value or numpy
    is already imported (OpenBLAS reads it once, when numpy loads it).

    numpy's OpenBLAS starts a thread per core when numpy is imported, and each spins about
    2**28 cycles (~0.1 s of CPU, on a core a second thread could have used) waiting for work
    before it sleeps; polybag never calls BLAS.  A short spin (2**12 cycles) removes that
    from a fresh command (``polybag convert`` of a bag: ~0.1 s of its ~1.5 s of CPU; bench
    README, issue 13); BLAS results are unchanged.  The command's worker processes
    (``--jobs``) inherit it.  The command sets it, not ``import polybag``: a library sets
    no environment variable in its user's process (issue 29)."""
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "12")


def _show_polybag_warnings(command: str) -> None:
    """Print each :class:`PolybagWarning` as one ``polybag CMD: warning: ...`` line (not the
    ``warnings`` module's ``path:line: UserWarning: ...`` form); others as usual."""
    base = warnings.showwarning

    def show(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
        if isinstance(category, type) and issubclass(category, PolybagWarning):
            print(f"polybag {command}: warning: {cli_text(str(message))}", file=file or sys.stderr)
        else:
            base(message, category, filename, lineno, file, line)

    warnings.showwarning = show


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace, func: Any) -> int:
    _no_sigxfsz()
    log = logging.getLogger("polybag")
    if log.isEnabledFor(logging.DEBUG):
        from polybag.io.redaction import redact

        def shown(v: Any) -> Any:  # (a URL's user info and query values are never printed)
            if isinstance(v, Sequence) and not isinstance(v, (str, bytes)):  # (`list` here: the command)
                return [shown(x) for x in v]
            return redact(v) if isinstance(v, str) and "://" in v else v

        log.debug("arguments: %s", {k: shown(v) for k, v in vars(args).items() if k not in ("func", "started")})
    try:
        for folder in [*(getattr(args, "types_top", None) or ()), *(getattr(args, "types", None) or ())]:
            from polybag.codecs import add_types

            add_types(folder)
        from polybag.cli._inputs import expand_inputs

        expand_inputs(args)  # glob URLs among the inputs (s3://logs/*.bag), as polybag.dask expands them
        if log.isEnabledFor(logging.INFO):
            from polybag.cli._ops import log_inputs

            log_inputs(args)
        return int(func(args) or 0)
    except UsageError as e:
        if not isinstance(e, OutputExistsError):  # (an existing output is no syntax problem)
            _command_parser(parser, args.command).print_usage(sys.stderr)
        print(f"polybag {args.command}: error: {cli_text(str(e))}", file=sys.stderr)
        return EXIT_USAGE
    except EmptySelectionError as e:  # nothing printed or written: said, not silent
        print(f"polybag {args.command}: error: {cli_text(str(e))}", file=sys.stderr)
        return EXIT_PROBLEM
    except PolybagError as e:
        print(f"polybag {args.command}: error: {cli_text(str(e))}", file=sys.stderr)
        return EXIT_INPUT
    except KeyboardInterrupt:
        print(f"polybag {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # `polybag cat ... | head`: stop quietly
        try:
            sys.stdout = None
        finally:
            return EXIT_OK  # noqa: B012
    except OSError as e:
        # a file that cannot be opened, read or written: one line, no traceback
        print(f"polybag {args.command}: error: {_os_error_text(e)}", file=sys.stderr)
        return EXIT_INPUT
    except Exception as e:  # noqa: BLE001 - a bug or an unforeseen input: still one line
        if os.environ.get("POLYBAG_DEBUG"):
            import traceback

            traceback.print_exc()
        text = str(e).splitlines()[0] if str(e) else ""
        print(
            f"polybag {args.command}: error: unexpected {type(e).__name__}"
            + (f": {text}" if text else "")
            + " (please report it; POLYBAG_DEBUG=1 shows where)",
            file=sys.stderr,
        )
        return EXIT_INPUT


def _no_sigxfsz() -> None:
    """Past ``ulimit -f`` a write fails with EFBIG (an error naming the output, whose
    unfinished ``.active`` is removed) instead of SIGXFSZ killing the process."""
    sig = getattr(signal, "SIGXFSZ", None)
    if sig is None:
        return
    try:
        signal.signal(sig, signal.SIG_IGN)
    except (ValueError, OSError):  # not the main thread
        pass


def _chosen_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The innermost (sub)command parser the parsed ``args`` chose (``polybag ulog info``'s
    for ``ulog info``), else the top-level one."""
    while True:
        sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        name = getattr(args, sub.dest, None) if sub is not None and sub.dest != argparse.SUPPRESS else None
        child = sub.choices.get(name) if sub is not None and isinstance(name, str) else None
        if child is None:
            return parser
        parser = child


def _command_parser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    """The subcommand's own parser (for its usage line), else the top-level one."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found: argparse.ArgumentParser = action.choices.get(command, parser)  # choices: Any
            return found
    return parser


def _os_error_text(e: OSError) -> str:
    what = e.strerror or str(e) or type(e).__name__
    names = [str(n) for n in (e.filename, e.filename2) if n is not None]
    from polybag.util.text import safe_line  # (a name may come from a file: a listed input)

    return safe_line(f"{' -> '.join(names)}: {what}" if names else what)


if __name__ == "__main__":
    sys.exit(main())
