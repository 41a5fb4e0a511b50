"""The reference part of the documentation site is complete (issue 32): every command the
parser registers has a page ``docs/commands/<command>.md`` whose options come from the
parser itself (the sphinx-argparse directive with ``:path: <command>``) and a line in the
commands' index; every exit code of the CLI is in the table of ``docs/errors.md``; every
class ``polybag.errors`` exports is named there.  A new command, exit code or error class
without its documentation fails here."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

import polybag.cli as cli
from polybag import errors

DOCS = Path(__file__).resolve().parent.parent / "docs"
COMMANDS = DOCS / "commands"

#: a sphinx-argparse directive inside a MyST ``{eval-rst}`` fence
_DIRECTIVE = re.compile(r"^```\{eval-rst\}\n(?P<body>.*?)^```$", re.M | re.S)


def _commands() -> list[str]:
    """Every command ``polybag`` registers (its top-level subparsers)."""
    parser = cli.build_parser()
    names: set[str] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            names.update(action.choices)
    return sorted(names)


def _blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced block of a page."""
    return [(m.group(1), m.group(2)) for m in re.finditer(r"^```(\S*)\n(.*?)^```$", text, re.M | re.S)]


def _argparse_directives(text: str) -> list[dict[str, str]]:
    """The options of every ``.. argparse::`` directive of a page's eval-rst fences."""
    found = []
    for m in _DIRECTIVE.finditer(text):
        body = m.group("body")
        if ".. argparse::" not in body:
            continue
        options = dict(re.findall(r"^\s+:(\w+):\s*(.*?)\s*$", body, re.M))
        found.append(options)
    return found


def test_the_parser_registers_the_commands_we_know() -> None:
    names = _commands()
    assert len(names) >= 20, names
    for expected in ("info", "cat", "convert", "record", "play", "ulog"):
        assert expected in names


@pytest.mark.parametrize("command", _commands())
def test_every_command_has_a_page_with_its_options(command: str) -> None:
    page = COMMANDS / f"{command}.md"
    assert page.is_file(), f"no page docs/commands/{command}.md for `polybag {command}`"
    text = page.read_text(encoding="utf-8")
    assert text.startswith(f"# {command}\n"), f"{page}: the page starts with its one `# {command}` title"
    for section in ("## Examples", "## Exit codes", "## Options"):
        assert re.search(rf"^{section}$", text, re.M), f"{page}: no `{section}` section"
    directives = _argparse_directives(text)
    assert {
        "module": "polybag.cli",
        "func": "build_parser",
        "prog": "polybag",
        "path": command,
    } in directives, f"{page}: no `.. argparse::` directive with :path: {command} (found {directives})"
    # examples: a block that runs (console, sh, bash) and runs the command itself
    runs = re.compile(rf"(?:^\$ |^|[;&|(] *)polybag (?:-\S+ (?:\S+ )?)*{re.escape(command)}\b", re.M)
    assert any(runs.search(body) for lang, body in _blocks(text) if lang in ("console", "sh", "bash")), (
        f"{page}: no example running `polybag {command}`"
    )


def test_every_command_is_in_the_index() -> None:
    index = (COMMANDS / "index.md").read_text(encoding="utf-8")
    for command in _commands():
        assert f"[`{command}`]({command}.md)" in index, f"docs/commands/index.md has no line for {command}"


def test_every_command_page_is_a_command() -> None:
    """No page for a command that no longer exists."""
    pages = {p.stem for p in COMMANDS.glob("*.md")} - {"index"}
    assert pages <= set(_commands()), sorted(pages - set(_commands()))


def _exit_codes() -> dict[str, int]:
    codes = {name: value for name, value in vars(cli).items() if name.startswith("EXIT_") and isinstance(value, int)}
    assert len(codes) >= 5, codes
    return codes


def test_every_exit_code_is_in_the_table() -> None:
    text = (DOCS / "errors.md").read_text(encoding="utf-8")
    rows = {int(m.group(1)) for m in re.finditer(r"^\|\s*(\d+)\s*\|", text, re.M)}
    for name, value in _exit_codes().items():
        assert value in rows, f"docs/errors.md: no table row for exit code {value} ({name})"
        assert re.search(rf'^### {value}\b', text, re.M), f"docs/errors.md: no section with an example of exit {value}"
    assert rows <= set(_exit_codes().values()), f"docs/errors.md documents codes the CLI does not have: {rows}"


def test_every_error_class_is_named() -> None:
    text = (DOCS / "errors.md").read_text(encoding="utf-8")
    assert errors.__all__
    for name in errors.__all__:
        assert isinstance(getattr(errors, name), type)
        assert re.search(rf"^\| `{name}` \|", text, re.M), f"docs/errors.md: no table row for polybag.errors.{name}"
