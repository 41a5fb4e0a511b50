"""Issue 27: long work with no terminal attached prints a final summary line.

Every writing command (convert, filter, merge, sort, split, recover, compress, decompress,
reindex, export) shows a progress bar on stderr when stderr is a terminal, otherwise one
summary line on stderr at the end (messages, bytes written, elapsed time, the output);
``--progress`` forces the bar, ``--no-progress`` the summary line; ``-q`` prints neither,
``--json`` keeps stdout JSON and stderr quiet.  Run as a user runs it: a subprocess whose
stderr is a pipe, or a pseudo-terminal.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from polybag.cli.text import format_size

ROOT = Path(__file__).resolve().parents[2]
CORPORA = ROOT.parent / "shared" / "corpora"
BAG = CORPORA / "rosbag" / "foxglove-rosbag" / "example.bag"

pytestmark = pytest.mark.skipif(not BAG.exists(), reason="corpus example.bag missing")

#: each writing command: its arguments (``{bag}``: a copy of the corpus bag, ``{d}``: the work
#: dir), what it writes (for the size), the topics it keeps (None: all)
WRITERS: dict[str, tuple[list[str], str, set[str] | None]] = {
    "convert": (["convert", "{bag}", "{d}/o.mcap"], "{d}/o.mcap", None),
    "filter": (["filter", "{bag}", "{d}/o.bag", "--topics", "/tf"], "{d}/o.bag", {"/tf"}),
    "merge": (["merge", "{d}/o.mcap", "{bag}", "-x", "/tf"], "{d}/o.mcap", "not /tf"),  # type: ignore[dict-item]
    "sort": (["sort", "{bag}", "{d}/o.bag"], "{d}/o.bag", None),
    "split": (["split", "{bag}", "--duration", "20", "-o", "{d}/parts"], "{d}/parts", None),
    "recover": (["recover", "{bag}", "{d}/o.bag"], "{d}/o.bag", None),
    "compress": (["compress", "--lz4", "{bag}"], "{bag}", None),
    "decompress": (["decompress", "{bag}"], "{bag}", None),
    "reindex": (["reindex", "{bag}"], "{bag}", None),
    "export": (["export", "{bag}", "--topics", "/tf", "-o", "{d}/tables"], "{d}/tables", {"/tf"}),
}
SUMMARY = re.compile(r"^polybag (\w+): (\d+) (messages|rows|files), (\S+ \w+) written to (.+) in (\d+\.\d) s$")
BAR = re.compile(r"\[[# ]{30}\] +\d+\.\d%")


def expected_count(keep: object) -> int:
    from rosbags.rosbag1 import Reader

    with Reader(BAG) as ref:
        topics = [c.topic for c, _, _ in ref.messages()]
    if keep is None:
        return len(topics)
    if keep == "not /tf":
        return sum(t != "/tf" for t in topics)
    assert isinstance(keep, set)
    return sum(t in keep for t in topics)


def size_of(path: Path) -> int:
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size


def polybag(*argv: str, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "polybag", *argv], capture_output=True, text=True, check=False, **kw  # type: ignore[call-overload]
    )


def setup(cmd: str, tmp_path: Path) -> tuple[list[str], Path, object]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    bag = tmp_path / "in.bag"
    shutil.copyfile(BAG, bag)
    d = tmp_path / "w"
    d.mkdir()
    argv, out, keep = WRITERS[cmd]
    return [a.format(bag=bag, d=d) for a in argv], Path(out.format(bag=bag, d=d)), keep


@pytest.mark.parametrize("mode", [[], ["--no-progress"]], ids=["no-terminal", "--no-progress"])
@pytest.mark.parametrize("cmd", sorted(WRITERS))
def test_without_a_terminal_one_summary_line_on_stderr(cmd: str, mode: list[str], tmp_path: Path) -> None:
    argv, out, keep = setup(cmd, tmp_path)
    p = polybag(*argv, *mode)
    assert p.returncode == 0, p.stderr
    lines = p.stderr.splitlines()
    assert len(lines) == 1, p.stderr
    m = SUMMARY.match(lines[0])
    assert m is not None, lines[0]
    assert m.group(1) == cmd
    assert int(m.group(2)) == expected_count(keep)  # as the reference reader counts them
    assert m.group(4) == format_size(size_of(out))
    where = m.group(5)
    if cmd == "split":
        parts = sorted(out.iterdir())
        assert len(parts) >= 2 and where == f"{len(parts)} outputs"
    else:
        assert Path(where).resolve() == out.resolve()
    assert not BAR.search(p.stderr)
    assert p.stdout.strip()  # the result lines stay on stdout


@pytest.mark.parametrize("cmd", sorted(WRITERS))
def test_progress_forces_the_bar_and_quiet_prints_nothing(cmd: str, tmp_path: Path) -> None:
    argv, out, _ = setup(cmd, tmp_path)
    p = polybag(*argv, "--progress")
    assert p.returncode == 0, p.stderr
    assert BAR.search(p.stderr), p.stderr
    assert not any(SUMMARY.match(line) for line in p.stderr.replace("\r", "\n").splitlines())
    # -q: neither bar nor summary (nor the result lines), even with --progress
    for extra in (["-q"], ["-q", "--progress"]):
        argv, out, _ = setup(cmd, tmp_path / "".join(extra).replace("-", "_"))
        p = polybag(*argv, *extra)
        assert (p.returncode, p.stdout, p.stderr) == (0, "", ""), extra
        assert out.exists()


@pytest.mark.parametrize("cmd", ["convert", "filter", "merge", "split", "export"])
def test_json_keeps_stdout_json_and_stderr_quiet(cmd: str, tmp_path: Path) -> None:
    argv, _, keep = setup(cmd, tmp_path)
    p = polybag(*argv, "--json")
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
    result = json.loads(p.stdout)
    if cmd != "export":
        assert result["messages"] == expected_count(keep)


def test_progress_and_no_progress_exclude_each_other(tmp_path: Path) -> None:
    argv, out, _ = setup("convert", tmp_path)
    p = polybag(*argv, "--progress", "--no-progress")
    assert p.returncode == 2 and "not allowed with argument" in p.stderr
    assert not out.exists()


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="no pseudo-terminals")
@pytest.mark.parametrize("extra", [[], ["--no-progress"]], ids=["terminal", "terminal --no-progress"])
def test_on_a_terminal_the_bar_replaces_the_summary(extra: list[str], tmp_path: Path) -> None:
    argv, out, _ = setup("convert", tmp_path)
    master, slave = os.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "polybag", *argv, *extra], stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:  # the terminal's other side closed: the command ended
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    stdout = proc.stdout.read() if proc.stdout else b""
    assert proc.wait() == 0
    err = b"".join(chunks).decode()
    lines = err.replace("\r", "\n").splitlines()
    summaries = [line for line in lines if SUMMARY.match(line)]
    if extra:
        assert not BAR.search(err) and len(summaries) == 1, err
    else:
        assert BAR.search(err) and "100.0%" in err and summaries == [], err
    assert b"8647 messages" in stdout


def test_many_files_end_with_one_summary_line(tmp_path: Path) -> None:
    argv, _, keep = setup("convert", tmp_path)
    bag = argv[1]
    p = polybag("convert", "--jobs", "1", bag, str(BAG), str(tmp_path / "outdir"))
    assert p.returncode == 0, p.stderr
    lines = p.stderr.splitlines()
    assert len(lines) == 1, p.stderr
    m = SUMMARY.match(lines[0])
    assert m is not None and m.group(5) == "2 outputs", lines[0]
    assert int(m.group(2)) == 2 * expected_count(keep)
    assert m.group(4) == format_size(size_of(tmp_path / "outdir"))
    assert len(p.stdout.splitlines()) == 2  # one result line per file on stdout
    p = polybag("convert", "--jobs", "1", bag, str(BAG), str(tmp_path / "quiet"), "-q")
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")
