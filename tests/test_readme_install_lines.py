"""The README's install lines work as written, on a copy of the checkout (its files as a clean
clone has them: no .venv, no build/, no dist/).

One venv for all of it (made by the "Two commands" first command, as a new user would):

- "Two commands", command 1, exactly as written (``bash -c``): exit 0, ``polybag info`` of the
  sample, the converted ``/tmp/polybag-demo.bag`` written, its ``info`` listing the same topics.
- "Install": the ``pip install -e '.[dask]'`` line (the extra importable afterwards), the
  ``pip wheel . --no-deps -w dist/`` line (the wheel it names, with the version of
  ``polybag._version``, is what is built), ``polybag --version`` (what the comment says).
  The ``pip install 'dist/...whl[all]'`` line ("elsewhere") is run by ``scripts/wheel_check.py``
  in a clean venv outside the checkout; here the file it names must be the wheel just built.
- "Documentation": the build line gives ``build/docs/index.html``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from paths import ROOT
from polybag._version import __version__

README = ROOT / "README.md"


def _section(title: str) -> str:
    text = README.read_text(encoding="utf-8")
    m = re.search(rf"^## {re.escape(title)}\s*$", text, re.M)
    assert m, f"README.md has no '## {title}' section"
    nxt = re.search(r"^## ", text[m.end():], re.M)
    return text[m.end(): m.end() + nxt.start()] if nxt else text[m.end():]


def _sh_blocks(section: str) -> list[str]:
    return [b for b in re.findall(r"^[ \t]*```sh[ \t]*\n(.*?)^[ \t]*```", section, re.M | re.S)]


def _lines(block: str) -> list[str]:
    return [ln.strip() for ln in block.splitlines() if ln.strip()]


def _checkout_files() -> list[str]:
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout")
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode()
    return [n for n in out.split("\0") if n and (ROOT / n).is_file()]


def _env() -> dict[str, str]:
    """A user's shell: no venv active, no PYTHONPATH (so nothing of this test run leaks in)."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    here = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p and p != here)
    return env


def _bash(cmd: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    p = subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, capture_output=True, text=True)
    assert p.returncode == 0, f"{cmd}\nexited {p.returncode}\n--- stdout\n{p.stdout[-3000:]}\n--- stderr\n{p.stderr[-3000:]}"
    return p


def _topics(info_output: str) -> dict[str, int]:
    return {t: int(n) for t, n in re.findall(r"(/[\w/~]+)\s+(\d+) msgs", info_output)}


def test_readme_names_the_wheel_of_this_version() -> None:
    names = re.findall(r"polybag-([0-9][^-\s'\"]*)-py3-none-any\.whl", _section("Install"))
    assert names, "the Install section names no wheel file"
    assert set(names) == {__version__}, f"README wheel versions {names}, polybag._version says {__version__}"
    assert f"polybag {__version__}" in _section("Install")


def _code(line: str) -> str:
    return " ".join(line.split("#", 1)[0].split())


def test_docs_install_page_skips_only_the_lines_run_here() -> None:
    """docs/install.md's ``example: skip`` blocks (lines that install polybag itself) are the
    README's Install lines, which the test below (and scripts/wheel_check.py) run."""
    page = ROOT / "docs" / "install.md"
    if not page.is_file():
        pytest.skip("no docs/install.md")
    skipped = re.findall(r"<!-- example: skip [^>]*-->\s*\n```(?:sh|bash|console)[ \t]*\n(.*?)^```",
                         page.read_text(encoding="utf-8"), re.M | re.S)
    readme = {_code(ln) for ln in _lines(_sh_blocks(_section("Install"))[0])}
    lines = [_code(ln) for block in skipped for ln in _lines(block) if _code(ln)]
    assert lines, "docs/install.md skips no install line?"
    assert [ln for ln in lines if ln not in readme] == []


@pytest.mark.slow
def test_readme_install_lines_work_as_written(tmp_path: Path) -> None:
    work = tmp_path / "polybag"
    for name in _checkout_files():
        if name.split("/", 1)[0] in (".venv", "build", "dist"):
            continue
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, work / name)
    env = _env()

    # "Two commands", command 1, exactly as written
    blocks = _sh_blocks(_section("Two commands"))
    assert blocks, "no sh block under Two commands"
    first = " ".join(ln.rstrip("\\").strip() for ln in _lines(blocks[0]))
    assert first.startswith("python3 -m venv .venv && .venv/bin/pip install")
    p = _bash(first, work, env)
    assert (work / ".venv" / "bin" / "polybag").is_file()
    infos = re.split(r"(?m)^path:", p.stdout)
    infos = [i for i in infos if i.strip()]
    assert len(infos) == 2, p.stdout
    assert "format:       mcap" in infos[0] and "samples/demo.mcap" in infos[0]
    assert "/tmp/polybag-demo.bag" in infos[1] and "version:     2.0" in infos[1]
    assert _topics(infos[0]) == _topics(infos[1]) == {"/chatter": 100, "/imu/accel": 200}
    assert "300 messages" in p.stderr and "written to /tmp/polybag-demo.bag" in p.stderr
    assert Path("/tmp/polybag-demo.bag").read_bytes().startswith(b"#ROSBAG V2.0\n")

    # "Install": each line that runs in the checkout, as written, in the same venv
    install = _lines(_sh_blocks(_section("Install"))[0])
    editable = next(ln for ln in install if "pip install -e" in ln)
    _bash(editable, work, env)
    _bash(".venv/bin/python -c 'import dask.dataframe, polybag.dask'", work, env)
    wheel_line = next(ln for ln in install if "pip wheel" in ln)
    assert wheel_line.startswith(".venv/bin/pip wheel . --no-deps -w dist/")
    _bash(wheel_line, work, env)
    built = sorted(p.name for p in (work / "dist").glob("*.whl"))
    assert built == [f"polybag-{__version__}-py3-none-any.whl"]
    elsewhere = next(ln for ln in install if ln.startswith("pip install "))
    named = re.search(r"'(dist/[^'\[]+)\[all\]'", elsewhere)
    assert named and (work / named.group(1)).is_file(), elsewhere
    version_line = next(ln for ln in install if ln.startswith("polybag --version"))
    venv_env = dict(env, PATH=f"{work / '.venv' / 'bin'}{os.pathsep}{env['PATH']}")
    out = _bash(version_line, work, venv_env).stdout.strip()
    assert out == f"polybag {__version__}"
    assert version_line.split("#", 1)[1].strip() == out

    # "Documentation": the build line, as written
    docs = _lines(_sh_blocks(_section("Documentation"))[0])
    assert len(docs) == 1 and "sphinx-build -W -b html docs build/docs" in docs[0]
    _bash(docs[0], work, env)
    assert (work / "build" / "docs" / "index.html").is_file()


def test_wheel_check_finds_the_readme_polybag_commands(tmp_path: Path) -> None:
    """scripts/wheel_check.py runs the polybag commands of "Two commands" against the installed
    wheel: it must find each of them, with the venv's bin/ and a scratch dir for /tmp outputs."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("wheel_check", ROOT / "scripts" / "wheel_check.py")
    assert spec and spec.loader
    wc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(wc)
    first = wc.readme_first_command()
    argvs = wc.polybag_invocations(first, tmp_path / "venv" / "bin", tmp_path / "run")
    assert len(argvs) == first.count(".venv/bin/polybag ")
    assert [a[1] for a in argvs] == ["info", "convert", "info"]
    assert all(a[0] == str(tmp_path / "venv" / "bin" / "polybag") for a in argvs)
    assert argvs[1][-1] == str(tmp_path / "run" / "polybag-demo.bag") == argvs[2][-1]
    assert wc.info_topics("  (1)  /chatter    100 msgs  10.05 Hz") == {"/chatter": 100}
