"""``polybag completion bash|zsh|fish``: the shell completion script, from the parser.

Users source what it prints (``eval "$(polybag completion bash)"`` in ``~/.bashrc``,
``eval "$(polybag completion zsh)"`` in ``~/.zshrc`` after ``compinit``,
``polybag completion fish | source`` in ``~/.config/fish/config.fish``).  The script calls
``polybag`` back with ``_ARGCOMPLETE`` set, and :func:`autocomplete` answers with
argcomplete's protocol: command names, each command's options, their choices (formats,
compressions, ``--storage``...), file paths for inputs, and the topics of the input already
on the line after ``--topics``/``-i``/``-x`` (read in a bounded time, never written, every
error swallowed: a completion prints no traceback, whatever the file).  argcomplete is
imported only then, so a normal command line does not pay for it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from typing import Any

#: the shells ``polybag completion`` writes a script for
SHELLS = ("bash", "zsh", "fish")
#: the most time (s) reading an input's topics may take before the completion gives up on them
TOPICS_TIMEOUT = 2.0
#: the most one chunk may decompress to while reading an input's topics
TOPICS_MAX_CHUNK = 64 << 20
#: the most topics offered
MAX_TOPICS = 1000


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "completion",
        help="print the shell completion script (bash, zsh or fish) to source",
        description="Print the script that makes a shell complete polybag's commands, options, "
        "their choices, file names and an input's topics.  bash: eval \"$(polybag completion bash)\" "
        "in ~/.bashrc; zsh: eval \"$(polybag completion zsh)\" in ~/.zshrc (after compinit); fish: "
        "polybag completion fish | source in ~/.config/fish/config.fish.",
    )
    p.add_argument("shell", choices=SHELLS, help="the shell to complete in")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from argcomplete.shell_integration import shellcode

    sys.stdout.write(shellcode(["polybag"], shell=args.shell))
    sys.stdout.flush()
    return 0


# --- answering the shell ----------------------------------------------------------------------------
def autocomplete(parser: argparse.ArgumentParser) -> None:
    """Answer the shell's completion request (``_ARGCOMPLETE`` set) for ``parser`` (the full
    one: every command) and exit; returns only when argcomplete finds no request."""
    import argcomplete

    add_completers(parser)
    argcomplete.autocomplete(parser, always_complete_options=False)


def add_completers(parser: argparse.ArgumentParser) -> None:
    """Completers on the actions of ``parser`` and its subcommands whose values are a known
    set (output formats, compressions) or an input's topics."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in set(action.choices.values()):
                add_completers(child)
        elif action.choices is None and "completer" not in vars(action):
            if action.dest == "out_format":
                action.completer = _formats  # type: ignore[attr-defined]
            elif action.dest == "compression":
                action.completer = _compressions  # type: ignore[attr-defined]
            elif action.dest in ("topics", "exclude_topics"):
                action.completer = _topics  # type: ignore[attr-defined]


def _formats(**_: Any) -> list[str]:
    from polybag.formats import registry

    return list(registry.writable())


def _compressions(**_: Any) -> list[str]:
    from polybag.formats import registry

    out: list[str] = []
    for spec in registry.formats():
        out += [c for c in spec.compressions if c not in out]
    return out


def _topics(parsed_args: argparse.Namespace | None = None, **_: Any) -> list[str]:
    """The topics of the first input on the line (a local file or directory); nothing when
    there is none, it cannot be read, or reading it takes longer than :data:`TOPICS_TIMEOUT`."""
    path = _first_input(parsed_args)
    if path is None:
        return []
    import threading

    found: list[str] = []

    def read() -> None:
        try:
            found.extend(topics_of(path))
        except BaseException:  # noqa: BLE001, S110 - a completion never fails
            pass

    worker = threading.Thread(target=read, daemon=True)  # (a slow file: left behind, the process exits)
    worker.start()
    worker.join(TOPICS_TIMEOUT)
    return list(found) if not worker.is_alive() else []


def _first_input(parsed_args: argparse.Namespace | None) -> str | None:
    import os

    if parsed_args is None:
        return None
    from polybag.cli._ops import input_paths

    try:
        paths = input_paths(parsed_args)
    except Exception:  # noqa: BLE001 - (a partial line's namespace)
        return None
    for p in paths:
        if "://" not in p and os.path.exists(p):
            return p
    return None


def topics_of(path: str) -> list[str]:
    """The topic names of the log at ``path`` (at most :data:`MAX_TOPICS`), read with a
    small chunk bound and warnings silenced; opening only reads."""
    import warnings

    import polybag
    from polybag.io import compression

    previous = compression.set_max_chunk_bytes(TOPICS_MAX_CHUNK)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with polybag.open(path) as reader:
                names: Iterable[str] = (c.topic for c in reader.summary.channels.values())
                return sorted(set(names))[:MAX_TOPICS]
    finally:
        compression.set_max_chunk_bytes(previous)
