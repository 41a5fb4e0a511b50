"""Run the code examples of the documentation pages (docs/**/*.md) and compare their output.

The rules (docs/about-these-docs.md tells authors the same):

1. Each page runs in its own fresh scratch directory holding a copy of ``samples/``; its
   blocks run in page order.  Environment: ``TZ=UTC``, ``LC_ALL=C.UTF-8``, ``COLUMNS=100``,
   ``TERM=dumb``, ``NO_COLOR=1``, ``PATH`` starting with the venv's ``bin``, ``HOME`` a
   scratch directory.
2. ```` ```console ```` blocks: ``$ `` lines are commands (a line ending in ``\\`` goes on),
   the lines up to the next ``$ `` line the expected output (stdout and stderr merged).
   Trailing whitespace and trailing blank lines are ignored; a line that is exactly ``...``
   matches any number of lines, ``...`` inside a line any text.  Every command must exit 0.
3. ```` ```python ```` blocks: one python process per page, blocks in order, shared globals.
   A ```` ```text ```` block right after a python block is its expected stdout.
4. ```` ```sh ```` / ```` ```bash ```` blocks: ``bash -euo pipefail``, must exit 0.
5. An HTML comment right before a block: ``<!-- example: needs s3 -->``,
   ``<!-- example: needs ros1 -->`` (both: ``needs s3 ros1``), ``<!-- example: skip REASON -->``.
6. Other languages never run.

``POLYBAG_DOCS_VENV=DIR``: the examples use ``DIR/bin`` first in ``PATH`` and
``DIR/bin/python`` for python blocks (the wheel test: polybag as installed).

Command line (from the checkout): ``.venv/bin/python -m tests.docs.run_examples docs/PAGE.md
[...]`` runs the pages and prints each mismatch as a diff (exit 1 if any).
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
DOCS = ROOT / "docs"
SAMPLES = ROOT / "samples"
DRIVER = HERE / "example_driver.py"

#: languages whose blocks run (rule 2-4)
RUN_LANGS = {"console": "console", "python": "python", "sh": "sh", "bash": "sh"}
#: languages that look runnable but do not run: an author using one hides an example (the
#: listing test refuses them)
SUSPECT_LANGS = {"shell", "shell-session", "py", "python3", "pycon", "ipython", "zsh", "fish", "sh-session", "bash-session"}
NEEDS = {"s3", "ros1"}
#: a safety net for a command that never ends (not a speed limit)
HANG_TIMEOUT = 300.0

_COMMENT = re.compile(r"^\s*<!--\s*example:\s*(.*?)\s*-->\s*$")
_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^`\s]*)(.*)$")


class ExampleError(Exception):
    """A page's examples are malformed (not a mismatch: the page itself is wrong)."""


class NotAvailable(Exception):
    """What a page needs cannot run on this machine (no ``rosmaster``)."""


@dataclass
class Block:
    """A fenced code block of a page that the runner looks at."""

    page: Path
    line: int  # 1-based line of the opening fence
    lang: str  # "console", "python", "sh" (bash is "sh") or another language as written
    code: str
    expected: str | None = None  # python: the text block right after it
    needs: frozenset[str] = frozenset()
    skip: str | None = None  # the reason, when skipped ("" when the comment gives none)
    directive: str | None = None  # the raw comment text

    @property
    def runs(self) -> bool:
        return self.lang in ("console", "python", "sh")

    @property
    def where(self) -> str:
        try:
            rel = self.page.resolve().relative_to(ROOT)
        except ValueError:
            rel = self.page
        return f"{rel}:{self.line}"

    def commands(self) -> list[tuple[str, list[str]]]:
        """A console block's commands and each one's expected output lines."""
        out: list[tuple[str, list[str]]] = []
        lines = self.code.split("\n")
        i = 0
        while i < len(lines):
            line = lines[i]
            if line.startswith("$ ") or line == "$":
                cmd = [line[2:]]
                while cmd[-1].endswith("\\") and i + 1 < len(lines):
                    i += 1
                    cmd.append(lines[i])
                out.append(("\n".join(cmd), []))
            elif out:
                out[-1][1].append(line)
            elif line.strip():
                raise ExampleError(f"{self.where}: console block text before the first `$ ` command: {line!r}")
            i += 1
        if not out:
            raise ExampleError(f"{self.where}: console block without a `$ ` command")
        return out


def parse_page(page: Path) -> list[Block]:
    """The fenced blocks of a Markdown page, with their comments and expected outputs."""
    lines = page.read_text(encoding="utf-8").split("\n")
    blocks: list[Block] = []
    last_nonblank: str | None = None
    last_closed: Block | None = None  # the block whose fence closed at the last non-blank line
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _FENCE.match(line)
        if m is None:
            if line.strip():
                last_nonblank = line
                last_closed = None
            i += 1
            continue
        indent, fence, lang, rest = m.groups()
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines):
            close = lines[i].strip()
            if close.startswith(fence[0]) and len(close) >= len(fence) and set(close) == {fence[0]}:
                break
            body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i].lstrip())
            i += 1
        else:
            raise ExampleError(f"{page}:{start + 1}: unclosed code fence")
        lang = lang.strip().lower()
        block = Block(page, start + 1, RUN_LANGS.get(lang, lang), "\n".join(body))
        directive = _COMMENT.match(last_nonblank) if last_nonblank is not None else None
        if directive is not None:
            _apply_directive(block, directive.group(1))
        if block.lang == "text" and last_closed is not None and last_closed.lang == "python":
            last_closed.expected = block.code
            block.lang = "python-output"
        blocks.append(block)
        last_closed = block
        last_nonblank = line
        i += 1
    return blocks


def _apply_directive(block: Block, text: str) -> None:
    block.directive = text
    words = text.split()
    if not words:
        raise ExampleError(f"{block.where}: empty `<!-- example: -->` comment")
    if words[0] == "skip":
        block.skip = text[len("skip") :].strip()
    elif words[0] == "needs":
        unknown = set(words[1:]) - NEEDS
        if unknown or len(words) == 1:
            raise ExampleError(f"{block.where}: `needs` takes {sorted(NEEDS)}, not {text!r}")
        block.needs = frozenset(words[1:])
    else:
        raise ExampleError(f"{block.where}: unknown example comment {text!r} (needs ... / skip REASON)")


# -- comparison ---------------------------------------------------------------------------


def _clean(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _line_matches(want: str, got: str) -> bool:
    if "..." not in want:
        return want == got
    pattern = ".*".join(re.escape(part) for part in want.split("..."))
    return re.fullmatch(pattern, got, re.DOTALL) is not None


def output_matches(expected: str, actual: str) -> bool:
    """Whether ``actual`` is ``expected`` under the rules (``...`` lines and in-line ``...``)."""
    want, got = _clean(expected), _clean(actual)
    memo: dict[tuple[int, int], bool] = {}

    def match(i: int, j: int) -> bool:
        key = (i, j)
        if key not in memo:
            if i == len(want):
                memo[key] = j == len(got)
            elif want[i] == "...":
                memo[key] = match(i + 1, j) or (j < len(got) and match(i, j + 1))
            else:
                memo[key] = j < len(got) and _line_matches(want[i], got[j]) and match(i + 1, j + 1)
        return memo[key]

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 4 * (len(want) + len(got)) + 1000))
    return match(0, 0)


def diff(expected: str, actual: str) -> str:
    return "\n".join(
        difflib.unified_diff(_clean(expected), _clean(actual), "expected (the page)", "actual", lineterm="")
    )


# -- running ------------------------------------------------------------------------------


@dataclass
class Failure:
    where: str
    what: str  # the command or block
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what}\n{self.message}"


@dataclass
class PageResult:
    page: Path
    ran: list[Block] = field(default_factory=list)
    skipped: list[Block] = field(default_factory=list)
    commands: int = 0  # console commands run
    failures: list[Failure] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failures

    def report(self) -> str:
        head = f"{self.page}: {len(self.ran)} blocks run ({self.commands} console commands), {len(self.skipped)} skipped, {self.seconds:.1f} s"
        return "\n\n".join([head, *(str(f) for f in self.failures)])


#: a fixture provider: given the need ("s3" or "ros1") and the page's scratch root, the
#: environment variables the blocks get (it keeps what it starts running until the page ends)
Provider = Callable[[str, Path], dict[str, str]]


def venv_dir() -> Path:
    """The venv under test: ``POLYBAG_DOCS_VENV``, else this interpreter's."""
    env = os.environ.get("POLYBAG_DOCS_VENV")
    return Path(env).resolve() if env else Path(sys.prefix)


def base_env(home: Path) -> dict[str, str]:
    """Rule 1's environment (the variables of the outer environment that would change what
    polybag does are dropped)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("POLYBAG", "AWS_", "FSSPEC_", "ROS_", "PYTHON", "VIRTUAL_ENV", "FORCE_COLOR", "CLICOLOR"))
        and k not in ("COLUMNS", "LINES", "LANG", "LANGUAGE", "CI_COLOR")
        and not k.startswith("LC_")
    }
    env.update(
        TZ="UTC",
        LC_ALL="C.UTF-8",
        COLUMNS="100",
        TERM="dumb",
        NO_COLOR="1",
        HOME=str(home),
        PATH=f"{venv_dir() / 'bin'}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
        VIRTUAL_ENV=str(venv_dir()),
        PYTHONDONTWRITEBYTECODE="1",
        MPLBACKEND="Agg",
    )
    return env


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _run_shell(args: list[str], cwd: Path, env: dict[str, str], out: Path) -> tuple[int, str, int]:
    """Run ``args`` in its own process group, stdout and stderr merged into ``out``; return
    the exit status, the output and the group (still alive when background jobs run)."""
    with open(out, "wb") as f:
        p = subprocess.Popen(args, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = p.wait(HANG_TIMEOUT)
        except subprocess.TimeoutExpired:
            _kill_group(p.pid)
            rc = p.wait()
            f.write(f"\n[runner: killed after {HANG_TIMEOUT:.0f} s]\n".encode())
    return rc, out.read_text(encoding="utf-8", errors="replace"), p.pid


_BOOT = "import sys; exec(compile(open(sys.argv[2], encoding='utf-8').read(), sys.argv[2], 'exec'))"


class _Python:
    """The page's python process (example_driver.py)."""

    def __init__(self, cwd: Path, env: dict[str, str], log: Path) -> None:
        python = venv_dir() / "bin" / "python"
        r, w = os.pipe()
        self._log = open(log, "wb")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            # -c, as a REPL: sys.path[0] is the scratch directory, not the driver's folder
            [str(python), "-c", _BOOT, str(w), str(DRIVER)],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            pass_fds=(w,),
            start_new_session=True,
            text=True,
        )
        os.close(w)
        self._results = os.fdopen(r, "r", encoding="utf-8")
        self.log = log

    def run(self, code: str, name: str) -> tuple[str, str | None]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"code": code, "name": name}) + "\n")
        self.proc.stdin.flush()
        line = self._results.readline()
        if not line:
            return "", f"the python process ended (exit {self.proc.wait()}):\n{self.log.read_text(errors='replace')[-3000:]}"
        result = json.loads(line)
        return result["stdout"], result["error"]

    def close(self) -> None:
        if self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            pass
        _kill_group(self.proc.pid)
        self._results.close()
        self._log.close()


def run_page(page: Path, scratch: Path, provider: Provider | None = None) -> PageResult:
    """Run every example of ``page`` in ``scratch`` (made fresh: ``work/`` with a copy of the
    samples, ``home/``); ``provider`` sets up what ``needs`` asks (else those blocks fail)."""
    t0 = time.monotonic()
    result = PageResult(page)
    blocks = [b for b in parse_page(page) if b.runs]
    work, home = scratch / "work", scratch / "home"
    work.mkdir(parents=True)
    home.mkdir()
    shutil.copytree(SAMPLES, work / "samples", ignore=shutil.ignore_patterns("__pycache__", "make_samples.py"))
    env = base_env(home)
    python: _Python | None = None
    # what any block needs runs from the page's start (the python process keeps the
    # environment it started with)
    for need in sorted(set().union(*(b.needs for b in blocks if b.skip is None))):
        if provider is None:
            result.failures.append(Failure(str(page), f"needs {need}", "no provider for this need"))
            return result
        env.update(provider(need, scratch))
    try:
        for n, block in enumerate(blocks):
            if block.skip is not None:
                result.skipped.append(block)
                continue
            result.ran.append(block)
            if block.lang == "console":
                pgids = []
                try:
                    for cmd, want in block.commands():
                        result.commands += 1
                        rc, got, pgid = _run_shell(["bash", "-c", cmd], work, env, scratch / f"out{n}.txt")
                        pgids.append(pgid)
                        expected = "\n".join(want)
                        problems = []
                        if not output_matches(expected, got):
                            problems.append(diff(expected, got))
                        if rc != 0:
                            problems.append(f"exit status {rc} (every command must exit 0)")
                            if not problems[0].startswith("---"):
                                problems.append("output:\n" + got)
                        if problems:
                            result.failures.append(Failure(block.where, f"$ {cmd}", "\n".join(problems)))
                            return result
                finally:
                    for pgid in pgids:
                        _kill_group(pgid)
            elif block.lang == "sh":
                script = scratch / f"block{n}.sh"
                script.write_text(block.code + "\n", encoding="utf-8")
                rc, got, pgid = _run_shell(["bash", "-euo", "pipefail", str(script)], work, env, scratch / f"out{n}.txt")
                _kill_group(pgid)
                if rc != 0:
                    result.failures.append(Failure(block.where, "sh block", f"exit status {rc}; output:\n{got}"))
                    return result
            else:
                if python is None:
                    python = _Python(work, env, scratch / "python.log")
                got, error = python.run(block.code, f"<{block.where}>")
                if error is not None:
                    result.failures.append(Failure(block.where, "python block", f"{got}{error}"))
                    return result
                if block.expected is not None and not output_matches(block.expected, got):
                    result.failures.append(Failure(block.where, "python block", diff(block.expected, got)))
                    return result
    finally:
        if python is not None:
            python.close()
        result.seconds = time.monotonic() - t0
    return result


# -- the fixtures: SeaweedFS S3 and a ROS 1 master ----------------------------------------

S3_BUCKET = "robot-logs"


def _test_helpers() -> None:
    for d in (ROOT / "tests", ROOT / "tests" / "remote"):
        if str(d) not in sys.path:
            sys.path.append(str(d))


@contextmanager
def s3_server(root: Path) -> Iterator[dict[str, str]]:
    """A SeaweedFS S3 server (tests/remote/seaweed.py) with bucket ``robot-logs`` holding the
    samples under ``samples/``; yields the environment that points polybag and fsspec at it."""
    _test_helpers()
    from seaweed import REGION, start, upload

    with start(root) as srv:
        files = {
            f"samples/{p.relative_to(SAMPLES).as_posix()}": p
            for p in sorted(SAMPLES.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts and p.name != "make_samples.py"
        }
        upload(srv, S3_BUCKET, files)
        yield {
            "AWS_ACCESS_KEY_ID": srv.key,
            "AWS_SECRET_ACCESS_KEY": srv.secret,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_ENDPOINT_URL": srv.endpoint,
            "FSSPEC_S3_ENDPOINT_URL": srv.endpoint,
        }


@contextmanager
def ros1_master(root: Path) -> Iterator[dict[str, str]]:
    """Debian's ``rosmaster`` on a free port (tests/ros1_graph.py); yields the environment."""
    _test_helpers()
    from ros1_graph import Graph

    if shutil.which("rosmaster") is None:
        raise NotAvailable("no `rosmaster` (Debian's python3-rosmaster, see scripts/test.sh)")
    root.mkdir(parents=True, exist_ok=True)
    g = Graph(root)
    try:
        yield {k: g.env[k] for k in ("ROS_MASTER_URI", "ROS_HOSTNAME", "ROS_IP", "ROS_HOME", "ROS_LOG_DIR")}
    finally:
        g.close()


class Fixtures:
    """Starts what pages need, lazily: one S3 server for the whole run (its data is only
    read), one ROS 1 master per page (closed by ``page_done``)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._session = ExitStack()
        self._page = ExitStack()
        self._s3: dict[str, str] | None = None

    def __call__(self, need: str, scratch: Path) -> dict[str, str]:
        if need == "s3":
            if self._s3 is None:
                self._s3 = self._session.enter_context(s3_server(self.root / "seaweed"))
            return dict(self._s3)
        if need == "ros1":
            return self._page.enter_context(ros1_master(scratch / "ros"))
        raise ExampleError(f"unknown need {need!r}")

    def page_done(self) -> None:
        self._page.close()
        self._page = ExitStack()

    def close(self) -> None:
        self.page_done()
        self._session.close()


@dataclass
class Inventory:
    """The examples of some pages: what runs, what is skipped (and why), what is wrong."""

    pages: int = 0
    blocks: list[Block] = field(default_factory=list)  # every console/python/sh block
    problems: list[str] = field(default_factory=list)

    @property
    def skipped(self) -> list[Block]:
        return [b for b in self.blocks if b.skip is not None]

    @property
    def run(self) -> list[Block]:
        return [b for b in self.blocks if b.skip is None]

    def summary(self) -> str:
        by = {lang: sum(b.lang == lang for b in self.run) for lang in ("console", "python", "sh")}
        commands = sum(len(b.commands()) for b in self.run if b.lang == "console")
        return (
            f"docs examples: {len(self.run)} run on {self.pages} pages ({by['console']} console blocks with "
            f"{commands} commands, {by['python']} python, {by['sh']} sh), {len(self.skipped)} skipped"
        )


def inventory(pages: list[Path]) -> Inventory:
    """Every example of ``pages``; problems: a skip without a reason, a language that looks
    runnable but never runs (``shell``, ``py``, ``pycon``...), a comment on a block that does
    not run, a console block without commands, a page that does not parse."""
    inv = Inventory(pages=len(pages))
    for page in pages:
        try:
            blocks = parse_page(page)
        except ExampleError as e:
            inv.problems.append(str(e))
            continue
        for b in blocks:
            if b.runs:
                inv.blocks.append(b)
                if b.skip == "":
                    inv.problems.append(f"{b.where}: `<!-- example: skip -->` needs a reason")
                if b.lang == "console":
                    try:
                        b.commands()
                    except ExampleError as e:
                        inv.problems.append(str(e))
            elif b.lang in SUSPECT_LANGS:
                inv.problems.append(f"{b.where}: a `{b.lang}` block never runs: use console, python, sh or bash")
            elif b.directive is not None:
                inv.problems.append(f"{b.where}: an example comment on a `{b.lang}` block, which never runs")
    return inv


def unavailable(reason: str) -> None:
    """In a test: skip with ``reason``, or fail in CI (``CI`` set), where everything must run."""
    import pytest

    if os.environ.get("CI"):
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def all_pages() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    pages = [Path(a) for a in args] if args else all_pages()
    failed = 0
    total_blocks = total_commands = 0
    with tempfile.TemporaryDirectory(prefix="polybag-docs-") as tmp:
        fixtures = Fixtures(Path(tmp))
        try:
            for i, page in enumerate(pages):
                try:
                    result = run_page(page, Path(tmp) / f"page{i}", fixtures)
                except (ExampleError, NotAvailable) as e:
                    print(f"{page}: {e}")
                    failed += 1
                    continue
                except BaseException as e:  # pytest.skip of the S3 fixture when weed is missing
                    if type(e).__name__ not in ("Skipped", "Failed"):
                        raise
                    print(f"{page}: {e}")
                    failed += 1
                    continue
                finally:
                    fixtures.page_done()
                total_blocks += len(result.ran)
                total_commands += result.commands
                print(("ok   " if result.ok else "FAIL ") + result.report() + "\n")
                failed += not result.ok
        finally:
            fixtures.close()
    print(f"{len(pages)} pages, {total_blocks} blocks run ({total_commands} console commands), {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
