"""Data on stdout, messages on stderr, for every command; no ANSI escape under ``NO_COLOR``.

- ``--json`` (every command that has it, found by walking the parser): stdout is JSON and
  nothing else (JSON lines for ``cat``), stderr has nothing but warnings;
- a writing command's summary line is on stderr, its data (if any) on stdout;
- an error is one line on stderr and nothing on stdout;
- ``NO_COLOR`` (https://no-color.org): on a terminal (a pty), the progress bar and the
  recorder's live table print no escape when it is set non-empty, and the table moves the
  cursor when it is not (both ways); without a terminal, no escape either."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from polybag.cli import main
from pty_helpers import PtyText

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_quiet_verbose_everywhere import COMMANDS, WORK  # noqa: E402

WARNING = re.compile(r"^polybag [\w-]+: warning: ")


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    root = tmp_path_factory.mktemp("sd")
    shutil.copytree(ROOT / "samples", root / "samples", ignore=shutil.ignore_patterns("*.py"))
    return root / "samples"


def _run(capfd, monkeypatch, where: Path, words: list[str]) -> tuple[int, str, str]:
    where.mkdir(parents=True, exist_ok=True)
    monkeypatch.chdir(where)
    capfd.readouterr()
    rc = main(words)
    out, err = capfd.readouterr()
    return rc, out, err


def _line(name: str, samples: Path) -> list[str]:
    return [*name.split(), *[w.replace("S/", f"{samples}/") for w in WORK[name]]]


JSON_COMMANDS = sorted(n for n in WORK if "--json" in {o for a in COMMANDS[n]._actions for o in a.option_strings})


def test_json_commands_are_found():
    assert {"convert", "info", "cat", "du", "list", "check", "ulog messages", "split", "export"} <= set(JSON_COMMANDS)


@pytest.mark.parametrize("name", JSON_COMMANDS)
def test_json_output_is_only_json_on_stdout(name, samples, tmp_path, capfd, monkeypatch):
    rc, out, err = _run(capfd, monkeypatch, tmp_path, [*_line(name, samples), "--json"])
    assert rc == 0, err
    assert all(WARNING.match(line) for line in err.splitlines()), err
    if name == "cat":
        docs = [json.loads(line) for line in out.splitlines()]
        assert len(docs) == 50 and docs[0]["topic"] == "/gps"
    else:
        json.loads(out)  # (the whole of stdout: one document)


WRITERS = ["compress", "convert", "decompress", "export", "filter", "merge", "recover", "reindex", "sort", "split"]


@pytest.mark.parametrize("name", WRITERS)
def test_summary_on_stderr_result_on_stdout(name, samples, tmp_path, capfd, monkeypatch):
    rc, out, err = _run(capfd, monkeypatch, tmp_path, _line(name, samples))
    assert rc == 0, err
    assert re.fullmatch(rf"polybag {name}: (\d+ \w+, )?[\d.]+ \w?B written to \S.* in [\d.]+ s\n", err), err
    assert "written to" not in out and out.strip()


MISSING: dict[str, list[str]] = {
    "cat": ["nosuch.bag"], "check": ["nosuch.bag"], "compress": ["nosuch.bag"], "convert": ["nosuch.bag", "o.mcap"],
    "decompress": ["nosuch.bag"], "du": ["nosuch.bag"], "export": ["nosuch.bag", "-o", "t"],
    "filter": ["nosuch.bag", "o.bag"], "get": ["attachment", "nosuch.mcap", "a", "-o", "a.bin"],
    "info": ["nosuch.bag"], "list": ["channels", "nosuch.mcap"], "merge": ["-o", "o.mcap", "nosuch.bag"],
    "plot": ["nosuch.bag", "/a.b", "--output", "p.png"], "recover": ["nosuch.bag", "o.bag"], "reindex": ["nosuch.bag"],
    "sort": ["nosuch.bag", "o.bag"], "split": ["nosuch.bag", "--duration", "1"], "ulog messages": ["nosuch.ulg"],
    "ulog params": ["nosuch.ulg"], "ulog info": ["nosuch.ulg"], "play": ["nosuch.bag"],
}


@pytest.mark.parametrize("name", sorted(MISSING))
def test_an_error_is_one_line_on_stderr_nothing_on_stdout(name, tmp_path, capfd, monkeypatch):
    rc, out, err = _run(capfd, monkeypatch, tmp_path, [*name.split(), *MISSING[name]])
    assert rc in (1, 3), (rc, err)
    assert out == ""
    assert len(err.splitlines()) == 1 and err.startswith(f"polybag {name.split()[0]}: error: ") and "nosuch" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # (nothing written)


def test_ulog_info_of_a_missing_message_is_an_error_on_stderr(samples, tmp_path, capfd, monkeypatch):
    rc, out, err = _run(capfd, monkeypatch, tmp_path, ["ulog", "info", "-m", "nosuch", f"{samples}/flight.ulg"])
    assert rc == 1 and out == ""
    assert err == f"polybag ulog: error: {samples}/flight.ulg: message nosuch not found\n"


def test_quiet_du_still_prints_its_table(samples, tmp_path, capfd, monkeypatch):
    rc, out, err = _run(capfd, monkeypatch, tmp_path, ["du", "-q", f"{samples}/robot.bag"])
    assert rc == 0 and err == "" and "/imu" in out


# --- NO_COLOR, on a terminal --------------------------------------------------------------------
def _on_a_pty(code: str, env: dict[str, str], cwd: Path) -> tuple[int, str, str]:
    """Run ``python -c code`` with stderr on a pty (stdout a pipe): (status, stdout, what the
    terminal got)."""
    import pty

    master, slave = pty.openpty()
    try:
        p = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=slave, env=env, cwd=cwd)
        os.close(slave)
        slave = -1
        reader = PtyText(master)
        out, _ = p.communicate(timeout=300)
        reader.thread.join(60)
        return p.returncode, out.decode(), reader.text()
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM", "COLUMNS", "LINES")}
    env.update(TERM="xterm-256color", COLUMNS="100", LINES="40", PYTHONPATH=str(ROOT / "tests"), **extra)
    return env


#: the recorder's live view as `polybag record` sets it up from the command line and the
#: environment (cli.record._view), over a fake recorder, drawn twice then finished
VIEW = """
    import argparse, sys
    from cli.test_record_stats_view import fake, add, WALL0
    from polybag.cli.record import _view
    rec = fake()
    add(rec, "/chatter", 3, 10, WALL0)
    v = _view(argparse.Namespace(json_stats=None, quiet=False, config=None), [rec])
    assert v.term is not None, "no table on a terminal"
    v.draw(v.figures()); v.draw(v.figures()); v.finish()
    print("plain" if v.table_every > 1 else "live")
"""


@pytest.mark.parametrize("no_color", ["1", "", None])
def test_record_view_no_color_on_a_terminal(no_color, tmp_path):
    env = _env() if no_color is None else _env(NO_COLOR=no_color)
    rc, out, term = _on_a_pty(VIEW, env, tmp_path)
    assert rc == 0, term
    assert "/chatter" in term
    if no_color:  # set, non-empty: plain blocks, no escape at all
        assert out.strip() == "plain" and "\x1b" not in term
    else:  # unset or empty (no-color.org: empty means not set): drawn in place
        assert out.strip() == "live" and re.search(r"\x1b\[\d+A", term)


CONVERT = """
    import sys
    from polybag.cli import main
    sys.exit(main(["convert", "--progress", "samples/robot.bag", "out.mcap"]))
"""


@pytest.mark.parametrize("no_color", ["1", None])
def test_progress_bar_prints_no_escape(no_color, tmp_path):
    shutil.copytree(ROOT / "samples", tmp_path / "samples", ignore=shutil.ignore_patterns("*.py"))
    env = _env() if no_color is None else _env(NO_COLOR=no_color)
    rc, out, term = _on_a_pty(CONVERT, env, tmp_path)
    assert rc == 0, term
    assert "%" in term and "[" in term  # (the bar was drawn on the terminal)
    assert "\x1b" not in term and "\x1b" not in out
    assert "730 messages" in out


@pytest.mark.parametrize("name", sorted(WORK))
def test_no_escape_without_a_terminal(name, samples, tmp_path, capfd, monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    rc, out, err = _run(capfd, monkeypatch, tmp_path, [*_line(name, samples), "-v"])
    assert rc == 0, err
    assert "\x1b" not in out and "\x1b" not in err


@pytest.mark.parametrize(
    "words",
    [
        ["filter", "S/robot.bag", "-", "--topics", "/gps"],
        ["sort", "S/robot.bag", "-"],
        ["recover", "S/robot.bag", "-"],
        ["merge", "-o", "-", "S/robot.bag"],
        ["export", "S/robot.bag", "-o", "-"],
    ],
)
def test_dash_is_no_output_where_only_files_are_written(words, samples, tmp_path, capfd, monkeypatch):
    """(it was a file or folder named ``-``, while the summary said "written to stdout")"""
    rc, out, err = _run(capfd, monkeypatch, tmp_path, [w.replace("S/", f"{samples}/") for w in words])
    assert rc == 2 and out == ""
    assert f"polybag {words[0]}: error: '-' (stdout) is no output of this command: name a file or folder" in err
    assert list(tmp_path.iterdir()) == []


def test_convert_to_stdout_keeps_messages_on_stderr(samples, tmp_path, capfdbinary, monkeypatch):
    monkeypatch.chdir(tmp_path)
    capfdbinary.readouterr()
    assert main(["convert", "-v", f"{samples}/robot.bag", "-", "--format", "mcap"]) == 0
    out, err = capfdbinary.readouterr()
    assert out.startswith(b"\x89MCAP0\r\n") and out.endswith(b"\x89MCAP0\r\n")
    text = err.decode()
    assert re.search(r"robot\.bag \(bag\) -> \S+ \(mcap, profile ros1\): 730 messages on 6 channels$", text, re.M), text
    assert "polybag convert: done in" in text
