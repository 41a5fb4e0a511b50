"""The examples runner itself (tests/docs/run_examples.py), on small fake pages: mismatches
fail with a diff, the ``...`` rules, exit codes, python blocks sharing globals, skips."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest
from run_examples import inventory, output_matches, parse_page, run_page, venv_dir

FENCE = "```"


def page(tmp_path: Path, text: str, name: str = "page.md") -> Path:
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(textwrap.dedent(text).replace("'''", FENCE))
    return p


def run(tmp_path: Path, text: str):  # noqa: ANN201 - a PageResult
    return run_page(page(tmp_path, text), tmp_path / "scratch")


def test_console_mismatch_fails_with_a_diff(tmp_path: Path) -> None:
    result = run(
        tmp_path,
        """\
        # Page
        '''console
        $ echo one; echo two
        one
        three
        '''
        """,
    )
    assert not result.ok
    report = result.report()
    assert "page.md:2" in report and "$ echo one; echo two" in report
    assert "--- expected (the page)" in report and "-three" in report and "+two" in report


def test_console_matching_output_passes_and_merges_stderr(tmp_path: Path) -> None:
    result = run(
        tmp_path,
        """\
        # Page
        '''console
        $ echo out; echo err >&2; echo out2
        out
        err
        out2
        $ printf 'a  \\n\\n\\n'
        a
        '''
        """,
    )
    assert result.ok, result.report()
    assert result.commands == 2 and len(result.ran) == 1


def test_nonzero_exit_fails_even_when_the_output_matches(tmp_path: Path) -> None:
    result = run(
        tmp_path,
        """\
        # Page
        '''console
        $ echo shown; exit 3
        shown
        '''
        """,
    )
    assert not result.ok
    assert "exit status 3" in result.report()
    ok = run(
        tmp_path / "b",
        """\
        # Page
        '''console
        $ sh -c 'exit 3'; echo "exit $?"
        exit 3
        '''
        """,
    )
    assert ok.ok, ok.report()


@pytest.mark.parametrize(
    "expected, actual",
    [
        ("a\n...\nd", "a\nb\nc\nd"),  # a `...` line: several lines
        ("a\n...\nd", "a\nd"),  # ... or none
        ("...", ""),
        ("took ... s", "took 0.25 s"),  # `...` inside a line: any text
        ("size ... (...)", "size 12 kB (3 chunks)"),
        ("x   \ny\n\n\n", "x\ny"),  # trailing whitespace and blank lines
        ("a\n...\n...\nb", "a\nb"),
    ],
)
def test_ellipsis_matches(expected: str, actual: str) -> None:
    assert output_matches(expected, actual)


@pytest.mark.parametrize(
    "expected, actual",
    [
        ("a\n...\nd", "a\nb\nc"),  # the line after `...` must come
        ("took ... s", "took 0.25 ms!"),
        ("a", "a\nb"),  # nothing extra at the end
        ("a\nb", "b\na"),
        ("  a", "a"),  # leading whitespace counts
        ("a\n\nb", "a\nb"),  # blank lines inside count
    ],
)
def test_ellipsis_does_not_match_everything(expected: str, actual: str) -> None:
    assert not output_matches(expected, actual)


def test_python_blocks_share_globals_and_text_blocks_are_their_output(tmp_path: Path) -> None:
    text = """\
        # Page
        '''python
        x = 20
        '''

        '''python
        print("x is", x + 1)
        '''

        '''text
        x is 21
        '''

        '''python
        print("wrong")
        '''
        '''text
        right
        '''
        """
    result = run(tmp_path, text)
    assert not result.ok
    assert len(result.ran) == 3
    assert "-right" in result.report() and "+wrong" in result.report()


def test_python_exception_fails_with_the_traceback(tmp_path: Path) -> None:
    result = run(
        tmp_path,
        """\
        # Page
        '''python
        value = {}["missing"]
        '''
        """,
    )
    assert not result.ok
    assert "KeyError: 'missing'" in result.report() and 'value = {}["missing"]' in result.report()


def test_blocks_run_in_order_in_one_scratch_dir_with_the_samples(tmp_path: Path) -> None:
    result = run(
        tmp_path,
        """\
        # Page
        '''sh
        test -f samples/robot.bag
        echo from-sh > made.txt
        '''

        '''python
        with open("made.txt") as f:
            print(f.read().strip())
        open("py.txt", "w").write("from-python\\n")
        '''

        '''text
        from-sh
        '''

        '''console
        $ cat py.txt
        from-python
        $ echo $TZ $LC_ALL $COLUMNS $TERM $NO_COLOR; test "$HOME" != "$PWD"
        UTC C.UTF-8 100 dumb 1
        '''
        """,
    )
    assert result.ok, result.report()
    assert len(result.ran) == 3


def test_the_venv_under_test_comes_first(tmp_path: Path) -> None:
    result = run(
        tmp_path,
        f"""\
        # Page
        '''console
        $ command -v python polybag
        {venv_dir() / "bin" / "python"}
        {venv_dir() / "bin" / "polybag"}
        '''

        '''python
        import sys
        print(sys.prefix)
        '''

        '''text
        {venv_dir()}
        '''
        """,
    )
    assert result.ok, result.report()


def test_sh_block_failure_and_background_jobs_are_stopped(tmp_path: Path) -> None:
    result = run(
        tmp_path,
        """\
        # Page
        '''bash
        sleep 1000 &
        echo $! > bg.pid
        '''

        '''sh
        false
        echo not reached
        '''
        """,
    )
    assert not result.ok
    assert "exit status 1" in result.report() and "not reached" not in result.report()
    pid = int((tmp_path / "scratch" / "work" / "bg.pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_skips_and_the_listing(tmp_path: Path) -> None:
    p = page(
        tmp_path,
        """\
        # Page
        <!-- example: skip installs polybag itself -->
        '''console
        $ pip install polybag-that-does-not-exist
        '''

        <!-- example: skip -->
        '''sh
        false
        '''

        '''shell
        $ polybag info x
        '''

        '''yaml
        a: 1
        '''
        """,
    )
    result = run_page(p, tmp_path / "scratch")
    assert result.ok and not result.ran and len(result.skipped) == 2
    inv = inventory([p])
    assert len(inv.blocks) == 2 and len(inv.skipped) == 2
    assert any("needs a reason" in problem for problem in inv.problems)
    assert any("`shell` block never runs" in problem for problem in inv.problems)
    assert "0 run on 1 pages" in inv.summary() and "2 skipped" in inv.summary()


def test_parse_console_continuation_and_needs(tmp_path: Path) -> None:
    p = page(
        tmp_path,
        """\
        # Page
        <!-- example: needs s3 ros1 -->
        '''console
        $ echo a \\
            b
        a b
        '''
        """,
    )
    (block,) = parse_page(p)
    assert block.needs == {"s3", "ros1"}
    assert block.commands() == [("echo a \\\n    b", ["a b"])]
    result = run_page(p, tmp_path / "scratch")  # no provider: the page fails, saying why
    assert not result.ok and "no provider" in result.report()


def test_polybag_docs_venv_chooses_the_interpreter_under_test(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The wheel test's switch: ``POLYBAG_DOCS_VENV=DIR`` puts DIR/bin first in PATH and runs
    the python blocks with DIR/bin/python."""
    fake = tmp_path / "venv"
    (fake / "bin").mkdir(parents=True)
    (fake / "bin" / "polybag").write_text("#!/bin/sh\necho installed polybag \"$@\"\n")
    (fake / "bin" / "polybag").chmod(0o755)
    (fake / "bin" / "python").symlink_to(sys.executable)
    monkeypatch.setenv("POLYBAG_DOCS_VENV", str(fake))
    result = run(
        tmp_path,
        f"""\
        # Page
        '''console
        $ polybag --version
        installed polybag --version
        '''

        '''python
        import sys
        print(sys.executable)
        '''

        '''text
        {fake / "bin" / "python"}
        '''
        """,
    )
    assert result.ok, result.report()
