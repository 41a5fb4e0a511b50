"""The wheel as users get it (scripts/test.sh runs this after ruff and mypy, before pytest).

Steps, one summary line each; on a failure the step is named and the exit status is 1:

1. ``build``: ``python -m build --sdist --wheel`` of a copy of the checkout's files (tracked and
   untracked-but-not-ignored, so no stale ``build/`` or ``*.egg-info`` leaks in), with
   ``--no-isolation`` when this interpreter already satisfies ``[build-system] requires``;
   no setuptools deprecation warning allowed.
2. ``twine``: ``twine check --strict`` of both files.
3. ``wheel``: its contents are exactly ``src/polybag`` (every module, ``py.typed``, every bundled
   ``.msg``) plus its ``dist-info``: no tests, no samples; the metadata has the version of
   ``polybag/_version.py``, ``License-Expression: Apache-2.0``, the ``all`` extra, and the
   ``polybag`` console script.
4. ``sdist``: it holds what a rebuild needs: a wheel built FROM the sdist has the same files, byte
   for byte; no samples in it.
5. ``venv``: a clean venv in a temporary directory outside the checkout (no system site-packages),
   ``pip install 'WHEEL[all]'``, ``pip check``.
6. ``readme``: the polybag commands of README.md's first "Two commands" block, run with the new
   venv's ``bin/`` in place of ``.venv/bin/``, in a temporary directory holding a copy of
   ``samples/`` and no source; ``/tmp/...`` outputs are written into that directory instead.  Each
   exits 0; ``convert`` writes its output (with the target format's magic) and the last ``info``
   lists the same topics and message counts as the first.
7. ``import``: ``import polybag`` there is the installed one (``site-packages``), and
   ``polybag --version`` says the version.
8. ``docs``: every documentation example against the installed wheel:
   ``POLYBAG_DOCS_VENV=<venv> python -m pytest tests/docs/test_docs_examples.py``.

Temporary directories are removed at the end (``--keep`` keeps them and prints where).
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10
    from pip._vendor import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "polybag"
LICENSE = "Apache-2.0"
DOCS_TEST = "tests/docs/test_docs_examples.py"
# the first bytes of each output format polybag writes (for the README's convert)
MAGIC = {".bag": b"#ROSBAG V2.0\n", ".mcap": b"\x89MCAP0\r\n", ".ulg": b"ULog\x01\x12\x35"}


class StepFailed(Exception):
    pass


def say(msg: str) -> None:
    print(f"wheel_check: {msg}", flush=True)


def run(
    argv: Sequence[str | os.PathLike[str]],
    *,
    cwd: Path,
    env: dict[str, str] | None = None,
    what: str = "",
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` (stdout and stderr merged); a non-zero exit raises StepFailed with the output's tail."""
    p = subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    if p.returncode != 0:
        tail = "\n".join(p.stdout.splitlines()[-40:])
        raise StepFailed(f"{what or shlex.join(str(a) for a in argv)} exited {p.returncode}:\n{tail}")
    return p


def source_version() -> str:
    text = (ROOT / "src" / PACKAGE / "_version.py").read_text(encoding="utf-8")
    m = re.search(r'^__version__\s*=\s*"([^"]+)"', text, re.M)
    if not m:
        raise StepFailed("no __version__ in src/polybag/_version.py")
    return m.group(1)


def checkout_files() -> list[str]:
    """The files a clean clone would have, plus new files not yet committed (never ignored ones)."""
    if (ROOT / ".git").exists() and shutil.which("git"):
        p = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT, capture_output=True, check=True,
        )
        names = [n for n in p.stdout.decode().split("\0") if n]
        return [n for n in names if (ROOT / n).is_file()]  # (a tracked file deleted in the work tree)
    skip = {".git", ".venv", "build", "dist", "__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache", ".hypothesis"}
    out = []
    for dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames[:] = [d for d in dirnames if d not in skip and not d.endswith(".egg-info")]
        out += [os.path.relpath(os.path.join(dirpath, f), ROOT) for f in filenames]
    return out


def copy_checkout(dest: Path) -> None:
    for name in checkout_files():
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)


def backend_in_this_env(srcdir: Path) -> bool:
    """True when this interpreter satisfies ``[build-system] requires`` (then no isolated build env)."""
    from importlib.metadata import PackageNotFoundError, version

    from packaging.requirements import Requirement

    with open(srcdir / "pyproject.toml", "rb") as f:
        requires = tomllib.load(f).get("build-system", {}).get("requires", [])
    for text in requires:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate():
            continue
        try:
            have = version(req.name)
        except PackageNotFoundError:
            return False
        if not req.specifier.contains(have, prereleases=True):
            return False
    return True


def build(srcdir: Path, outdir: Path, kinds: Sequence[str]) -> str:
    argv = [sys.executable, "-m", "build", *kinds, "--outdir", str(outdir)]
    isolation = "isolated"
    if backend_in_this_env(srcdir):
        argv.append("--no-isolation")
        isolation = "no isolation"
    argv.append(str(srcdir))
    p = run(argv, cwd=srcdir, what="python -m build " + " ".join(kinds))
    bad = [ln for ln in p.stdout.splitlines() if "DeprecationWarning" in ln]
    if bad:
        raise StepFailed("the build warns:\n" + "\n".join(bad[:20]))
    return isolation


def one(paths: list[Path], what: str) -> Path:
    if len(paths) != 1:
        raise StepFailed(f"expected one {what}, found {[p.name for p in paths]}")
    return paths[0]


def wheel_files(whl: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(whl) as z:
        return {i.filename: z.read(i) for i in z.infolist() if not i.is_dir()}


def metadata_fields(text: str) -> list[tuple[str, str]]:
    head = text.split("\n\n", 1)[0]
    out = []
    for line in head.splitlines():
        if ":" in line and not line.startswith((" ", "\t")):
            k, v = line.split(":", 1)
            out.append((k.strip(), v.strip()))
    return out


def check_wheel(whl: Path, srcdir: Path, version: str) -> str:
    files = wheel_files(whl)
    distinfo = f"{PACKAGE}-{version}.dist-info"
    want_name = f"{PACKAGE}-{version}-py3-none-any.whl"
    if whl.name != want_name:
        raise StepFailed(f"wheel is named {whl.name}, expected {want_name}")
    tops = {n.split("/", 1)[0] for n in files}
    if tops != {PACKAGE, distinfo}:
        raise StepFailed(f"top-level entries {sorted(tops)}, expected only {PACKAGE}/ and {distinfo}/")
    for n in files:
        parts = n.split("/")
        if any(p in ("tests", "samples", "__pycache__") for p in parts) or n.endswith((".pyc", ".active")):
            raise StepFailed(f"the wheel holds {n}")
    pkg_src = srcdir / "src" / PACKAGE
    want = {
        f"{PACKAGE}/{p.relative_to(pkg_src).as_posix()}"
        for p in pkg_src.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }
    have = {n for n in files if n.startswith(PACKAGE + "/")}
    if want != have:
        missing, extra = sorted(want - have), sorted(have - want)
        raise StepFailed(f"wheel vs src/{PACKAGE}: missing {missing[:20]} extra {extra[:20]}")
    for n in want:
        if files[n] != (pkg_src / n.split("/", 1)[1]).read_bytes():
            raise StepFailed(f"{n} in the wheel differs from the source")
    if f"{PACKAGE}/py.typed" not in files:
        raise StepFailed("no py.typed")
    msgs = [n for n in files if n.endswith(".msg")]
    if not any("/codecs/ros1/msgs/" in n for n in msgs) or not any("/codecs/ros2/msgs/" in n for n in msgs):
        raise StepFailed("the bundled ROS 1 / ROS 2 .msg files are missing")
    meta = metadata_fields(files[f"{distinfo}/METADATA"].decode())
    fields: dict[str, list[str]] = {}
    for k, v in meta:
        fields.setdefault(k, []).append(v)
    checks = {
        "Name": [PACKAGE],
        "Version": [version],
        "License-Expression": [LICENSE],
    }
    for key, expected in checks.items():
        if fields.get(key) != expected:
            raise StepFailed(f"METADATA {key}: {fields.get(key)}, expected {expected}")
    if "License" in fields:
        raise StepFailed(f"METADATA has a legacy License field: {fields['License']}")
    extras = set(fields.get("Provides-Extra", []))
    if "all" not in extras:
        raise StepFailed(f"no 'all' extra (extras: {sorted(extras)})")
    eps = files[f"{distinfo}/entry_points.txt"].decode()
    if not re.search(r"^\[console_scripts\]\s*$[^\[]*^polybag\s*=\s*polybag\.cli:main\s*$", eps, re.M):
        raise StepFailed(f"no console script polybag = polybag.cli:main in entry_points.txt:\n{eps}")
    return (
        f"{len(have)} files in {PACKAGE}/ (= src/{PACKAGE}), {len(msgs)} .msg, py.typed, "
        f"License-Expression {LICENSE}, extras {len(extras)}, console script polybag"
    )


def check_sdist(sdist: Path, whl: Path, work: Path, version: str) -> str:
    root = f"{PACKAGE}-{version}"
    if sdist.name != f"{root}.tar.gz":
        raise StepFailed(f"sdist is named {sdist.name}, expected {root}.tar.gz")
    with tarfile.open(sdist) as t:
        names = t.getnames()
        for n in names:
            if n != root and not n.startswith(root + "/"):
                raise StepFailed(f"sdist member outside {root}/: {n}")
            if "/samples/" in n + "/" or n.endswith((".mcap", ".bag", ".ulg", ".db3")):
                raise StepFailed(f"the sdist holds {n}")
        for need in ("PKG-INFO", "pyproject.toml", "README.md", f"src/{PACKAGE}/__init__.py"):
            if f"{root}/{need}" not in names:
                raise StepFailed(f"the sdist has no {need}")
        t.extractall(work, filter="data")
    out = work / "dist"
    isolation = build(work / root, out, ["--wheel"])
    again = one(sorted(out.glob("*.whl")), "wheel built from the sdist")
    a, b = wheel_files(whl), wheel_files(again)
    if sorted(a) != sorted(b):
        raise StepFailed(
            f"the wheel built from the sdist differs: missing {sorted(set(a) - set(b))[:20]}, "
            f"extra {sorted(set(b) - set(a))[:20]}"
        )
    differ = sorted(n for n in a if a[n] != b[n])
    if differ:
        raise StepFailed(f"the wheel built from the sdist differs in {differ[:20]}")
    return f"{len(names)} members; a wheel rebuilt from it ({isolation}) has the same {len(a)} files, byte for byte"


def clean_env(venv: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")}
    env["VIRTUAL_ENV"] = str(venv)
    env["PATH"] = os.pathsep.join([str(venv / "bin"), *[p for p in env.get("PATH", "").split(os.pathsep) if p]])
    return env


def make_venv(venv: Path, whl: Path) -> str:
    run([sys.executable, "-m", "venv", str(venv)], cwd=venv.parent, what="python -m venv")
    cfg = (venv / "pyvenv.cfg").read_text()
    if re.search(r"include-system-site-packages\s*=\s*true", cfg):
        raise StepFailed("the venv sees the system site-packages")
    env = clean_env(venv)
    run([venv / "bin" / "python", "-m", "pip", "install", "-q", f"{whl}[all]"], cwd=venv.parent, env=env,
        what=f"pip install '{whl.name}[all]'")
    run([venv / "bin" / "python", "-m", "pip", "check"], cwd=venv.parent, env=env, what="pip check")
    return f"pip install '{whl.name}[all]' into a clean venv, pip check ok"


def readme_first_command() -> str:
    """The first ```sh block after the "Two commands" heading of README.md."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(r"^#+\s*Two commands\s*$", text, re.M)
    if not m:
        raise StepFailed('README.md has no "Two commands" heading')
    block = re.search(r"^[ \t]*```sh[ \t]*\n(.*?)^[ \t]*```", text[m.end():], re.M | re.S)
    if not block:
        raise StepFailed('no ```sh block after "Two commands" in README.md')
    return " ".join(ln.strip().rstrip("\\") for ln in block.group(1).splitlines() if ln.strip())


def polybag_invocations(command: str, bindir: Path, rundir: Path) -> list[list[str]]:
    """The polybag commands of a ``a && b && c`` line, ``.venv/bin/`` -> ``bindir``, ``/tmp/X`` -> ``rundir/X``."""
    out = []
    for part in command.split("&&"):
        argv = shlex.split(part)
        if not argv or Path(argv[0]).name != "polybag":
            continue
        if argv[0] not in ("polybag", ".venv/bin/polybag"):
            raise StepFailed(f"unexpected polybag path in the README: {argv[0]}")
        argv[0] = str(bindir / "polybag")
        argv[1:] = [str(rundir / a[len("/tmp/"):]) if a.startswith("/tmp/") else a for a in argv[1:]]
        out.append(argv)
    if not out:
        raise StepFailed(f"no polybag command in the README's first command: {command}")
    return out


TOPIC_LINE = re.compile(r"(/[\w/~]+)\s+(\d+) msgs")


def info_topics(output: str) -> dict[str, int]:
    return {t: int(n) for t, n in TOPIC_LINE.findall(output)}


def run_readme(venv: Path, rundir: Path) -> str:
    argvs = polybag_invocations(readme_first_command(), venv / "bin", rundir)
    env = clean_env(venv)
    infos: list[dict[str, int]] = []
    converted: list[Path] = []
    for argv in argvs:
        shown = "polybag " + shlex.join(argv[1:])
        p = run(argv, cwd=rundir, env=env, what=shown)
        cmd = argv[1] if len(argv) > 1 else ""
        if cmd == "info":
            topics = info_topics(p.stdout)
            if not topics:
                raise StepFailed(f"{shown} lists no topic:\n{p.stdout}")
            infos.append(topics)
        elif cmd == "convert":
            outpath = Path(argv[-1])
            if not outpath.is_absolute():
                outpath = rundir / outpath
            if not outpath.is_file():
                raise StepFailed(f"{shown} wrote no {outpath}")
            magic = MAGIC.get(outpath.suffix)
            if magic is not None and outpath.read_bytes()[: len(magic)] != magic:
                raise StepFailed(f"{outpath.name} does not start with {magic!r}")
            if "written to" not in p.stdout:
                raise StepFailed(f"{shown} printed no summary line:\n{p.stdout}")
            converted.append(outpath)
    if len(infos) >= 2 and infos[0] != infos[-1]:
        raise StepFailed(f"the converted file's topics {infos[-1]} differ from the input's {infos[0]}")
    total = sum(infos[0].values()) if infos else 0
    return (
        f"{len(argvs)} polybag commands ok ({', '.join(a[1] for a in argvs)}); "
        f"{len(converted)} file(s) written; {total} messages on {len(infos[0]) if infos else 0} topics kept"
    )


def check_import(venv: Path, rundir: Path, version: str) -> str:
    env = clean_env(venv)
    py = venv / "bin" / "python"
    run([py, "-c", "import polybag, sys; assert 'site-packages' in polybag.__file__, polybag.__file__"],
        cwd=rundir, env=env, what="import polybag from site-packages")
    p = run([py, "-c", "import polybag; print(polybag.__file__)"], cwd=rundir, env=env)
    where = Path(p.stdout.strip())
    if where.is_relative_to(ROOT):
        raise StepFailed(f"polybag imported from the checkout: {where}")
    v = run([venv / "bin" / "polybag", "--version"], cwd=rundir, env=env).stdout.strip()
    if v != f"polybag {version}":
        raise StepFailed(f"polybag --version says {v!r}, expected 'polybag {version}'")
    return f"polybag from {where.parent.parent.name}/, --version {version}"


def run_docs(venv: Path) -> str:
    if not (ROOT / DOCS_TEST).is_file():
        return f"SKIPPED: no {DOCS_TEST} in this checkout"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["POLYBAG_DOCS_VENV"] = str(venv)
    p = run([sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider", DOCS_TEST],
            cwd=ROOT, env=env, what=f"POLYBAG_DOCS_VENV=<venv> pytest {DOCS_TEST}")
    last = [ln for ln in p.stdout.splitlines() if ln.strip()]
    summary = next((ln for ln in reversed(last) if re.search(r"\d+ passed", ln)), last[-1] if last else "")
    if "passed" not in summary:
        raise StepFailed(f"pytest {DOCS_TEST} ran nothing:\n{p.stdout[-2000:]}")
    count = next((ln.strip() for ln in last if ln.startswith("docs examples:")), "")
    return "; ".join(x for x in (count, summary.strip("= ")) if x)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory and print its path")
    ap.add_argument("--no-docs", action="store_true", help="skip step 8 (the docs' examples)")
    args = ap.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="polybag-wheel-check-")).resolve()
    if tmp.is_relative_to(ROOT):
        raise SystemExit(f"wheel_check: the temporary directory {tmp} is inside the checkout; set TMPDIR")
    version = source_version()
    t_all = time.monotonic()
    step = "setup"
    try:
        srcdir, dist, venv, rundir = tmp / "src", tmp / "dist", tmp / "venv", tmp / "run"
        shutil.copytree(ROOT / "samples", rundir / "samples", ignore=shutil.ignore_patterns("*.py", "__pycache__"))
        copy_checkout(srcdir)

        def do(name: str, fn: Callable[..., str], *a: object) -> None:
            nonlocal step
            step = name
            t0 = time.monotonic()
            result = fn(*a)
            say(f"{name}: ok ({result}; {time.monotonic() - t0:.1f} s)" if not str(result).startswith("SKIPPED")
                else f"{name}: {result}")

        def do_build() -> str:
            isolation = build(srcdir, dist, ["--sdist", "--wheel"])
            whl = one(sorted(dist.glob("*.whl")), "wheel")
            sd = one(sorted(dist.glob("*.tar.gz")), "sdist")
            return f"{whl.name} {whl.stat().st_size // 1024} KB, {sd.name} {sd.stat().st_size // 1024} KB, {isolation}"

        do("build", do_build)
        whl = one(sorted(dist.glob("*.whl")), "wheel")
        sdist = one(sorted(dist.glob("*.tar.gz")), "sdist")

        def do_twine() -> str:
            run([sys.executable, "-m", "twine", "check", "--strict", whl, sdist], cwd=tmp, what="twine check --strict")
            return "twine check --strict passed for both"

        do("twine", do_twine)
        do("wheel", check_wheel, whl, srcdir, version)
        (tmp / "sdist").mkdir()
        do("sdist", check_sdist, sdist, whl, tmp / "sdist", version)
        do("venv", make_venv, venv, whl)
        do("readme", run_readme, venv, rundir)
        do("import", check_import, venv, rundir, version)
        if args.no_docs:
            say("docs: SKIPPED (--no-docs)")
        else:
            do("docs", run_docs, venv)
    except StepFailed as e:
        say(f"FAILED at step {step}: {e}")
        return 1
    finally:
        if args.keep:
            say(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    say(f"all steps passed in {time.monotonic() - t_all:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
