"""``-q/--quiet`` and ``-v/--verbose`` on every command, found by walking the parser (a new
command is covered at once: it must take both, and needs a sample command line below).

-q: nothing on stderr but ``polybag CMD: warning:``/``error:`` lines (data on stdout is still
data); -v: at least one more line on stderr than the default (what was read as which format,
what was written, the time), stdout unchanged (but for ``info -v``/``check -v``, which keep
their meaning: more detail on stdout); -vv: also the parsed arguments."""

from __future__ import annotations

import argparse
import re
import shutil
from pathlib import Path

import pytest

from polybag.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[2]

#: a command line per command doing real work on the samples (S: the samples' folder)
WORK: dict[str, list[str]] = {
    "cat": ["S/robot.bag", "--topics", "/gps"],
    "check": ["S/robot.bag"],
    "completion": ["bash"],
    "compress": ["S/robot.bag", "-o", "cmp"],
    "convert": ["S/robot.bag", "r.mcap"],
    "decompress": ["S/robot.bag", "-o", "dec"],
    "du": ["S/robot.bag"],
    "export": ["S/robot.bag", "--topics", "/gps", "-o", "exp"],
    "filter": ["S/robot.bag", "f.bag", "--topics", "/gps"],
    "get": ["attachment", "S/demo.mcap", "calibration.yaml", "-o", "att.yaml"],
    "info": ["S/flight.ulg"],
    "list": ["channels", "S/demo.mcap"],
    "merge": ["-o", "m.mcap", "S/robot.bag", "S/demo.mcap"],
    "plot": ["S/robot.bag", "/gps.latitude", "--output", "p.png"],
    "recover": ["S/robot.bag", "rec.bag"],
    "reindex": ["S/robot.bag", "-o", "ri"],
    "sort": ["S/robot_ros2", "s.mcap"],
    "split": ["S/robot.bag", "--duration", "5", "--output-dir", "sp"],
    "ulog messages": ["S/flight.ulg"],
    "ulog params": ["S/flight.ulg"],
    "ulog info": ["S/flight.ulg"],
}
#: commands that need a live ROS graph: checked at parse level here (their live tests run them)
LIVE: dict[str, list[str]] = {
    "record": ["-a", "-O", "x.bag"],
    "play": ["S/robot.bag"],
}
#: their -v keeps its meaning: more detail on stdout too
STDOUT_VERBOSE = {"info", "check"}
MESSAGE = re.compile(r"^polybag [\w-]+: (warning|error): ")


def _commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> dict[str, argparse.ArgumentParser]:
    """Every runnable (sub)command: ``"ulog messages"`` for a command's own subcommands."""
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                sub = _commands(child, (*prefix, name))
                found.update(sub or {" ".join((*prefix, name)): child})
    return found


COMMANDS = _commands(build_parser())


def test_every_command_has_a_sample_line_here():
    missing = sorted(set(COMMANDS) - set(WORK) - set(LIVE))
    assert missing == [], f"add a command line for {missing} to WORK (or LIVE)"
    assert {"convert", "info", "ulog messages", "record", "completion"} <= set(COMMANDS)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_takes_quiet_and_verbose(name):
    options = {o for a in COMMANDS[name]._actions for o in a.option_strings}
    assert {"-q", "--quiet", "-v", "--verbose"} <= options, name
    line = [*name.split(), *[w.replace("S/", "samples/") for w in {**WORK, **LIVE}.get(name, [])]]
    parser = build_parser(line[0])
    for flags in (["-q"], ["--quiet"], ["-v"], ["-vv"], ["--verbose"]):
        args = parser.parse_args([*line, *flags])
        assert args.quiet if flags[0].startswith(("-q", "--q")) else args.verbose >= 1


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    root = tmp_path_factory.mktemp("qv")
    shutil.copytree(ROOT / "samples", root / "samples", ignore=shutil.ignore_patterns("*.py"))
    return root / "samples"


def _run(capfd, monkeypatch, where: Path, samples: Path, name: str, flags: list[str]) -> tuple[int, str, str]:
    where.mkdir()
    monkeypatch.chdir(where)
    words = [*name.split(), *[w.replace("S/", f"{samples}/") for w in WORK[name]], *flags]
    capfd.readouterr()
    rc = main(words)
    out, err = capfd.readouterr()
    return rc, out, err


@pytest.mark.parametrize("name", sorted(WORK))
def test_quiet_and_verbose_on_the_samples(name, samples, tmp_path, capfd, monkeypatch):
    rc, out, err = _run(capfd, monkeypatch, tmp_path / "default", samples, name, [])
    assert rc == 0, err
    qrc, qout, qerr = _run(capfd, monkeypatch, tmp_path / "quiet", samples, name, ["-q"])
    assert qrc == 0, qerr
    assert all(MESSAGE.match(line) for line in qerr.splitlines()), qerr
    if name in ("cat", "du", "list", "get", "info", "completion", "ulog messages", "ulog params", "ulog info"):
        assert qout == out  # (data on stdout is still data)
    vrc, vout, verr = _run(capfd, monkeypatch, tmp_path / "verbose", samples, name, ["-v"])
    assert vrc == 0, verr
    assert len(verr.splitlines()) > len(err.splitlines()), (err, verr)
    assert re.search(rf"^polybag {name.split()[0]}: done in [\d.]+ s \(exit 0\)$", verr, re.M), verr
    if "S/" in " ".join(WORK[name]) and name != "merge":
        assert re.search(rf"^polybag {name.split()[0]}: reading .*: \S.* \((file|directory) ", verr, re.M), verr
    if name not in STDOUT_VERBOSE:
        assert _no_times(vout) == _no_times(out)
    vvrc, _, vverr = _run(capfd, monkeypatch, tmp_path / "debug", samples, name, ["-vv"])
    assert vvrc == 0 and re.search(rf"^polybag {name.split()[0]}: arguments: \{{", vverr, re.M), vverr


def _no_times(text: str) -> str:
    return re.sub(r"\d+(\.\d+)? s\b", "T s", text)


def test_verbose_names_the_format_and_the_output(samples, tmp_path, capfd, monkeypatch):
    rc, _, err = _run(capfd, monkeypatch, tmp_path / "v", samples, "convert", ["-v"])
    assert rc == 0
    assert f"polybag convert: reading {samples}/robot.bag: bag (file " in err
    assert "polybag convert: wrote r.mcap (" in err
    rc, _, err = _run(capfd, monkeypatch, tmp_path / "v2", samples, "sort", ["-v"])
    assert rc == 0 and f"reading {samples}/robot_ros2: rosbag2 (sqlite3) (directory " in err


def test_verbose_on_a_missing_input_is_still_one_error_line(samples, tmp_path, capfd, monkeypatch):
    (tmp_path / "w").mkdir()
    monkeypatch.chdir(tmp_path / "w")
    capfd.readouterr()
    assert main(["info", "-q", "nosuch.bag"]) == 3
    out, err = capfd.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and err.startswith("polybag info: error: nosuch.bag")
    assert main(["convert", "-v", "nosuch.bag", "x.mcap"]) == 3
    out, err = capfd.readouterr()
    errors = [line for line in err.splitlines() if MESSAGE.match(line)]
    assert out == "" and len(errors) == 1 and "Traceback" not in err
    assert not (tmp_path / "w" / "x.mcap").exists()


@pytest.mark.live
@pytest.mark.skipif(not shutil.which("rosmaster"), reason="Debian ROS 1 (rosmaster) not installed")
def test_play_quiet_and_verbose_on_a_live_master(samples, tmp_path):
    import subprocess
    import sys

    from ros1_graph import Graph

    g = Graph(tmp_path)
    try:
        def play(*flags: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([sys.executable, "-m", "polybag", "play", *flags, "-i", "-d", "0", str(samples / "robot.bag")],
                                  env=g.env, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)

        default, quiet, verbose = play(), play("-q"), play("-v")
    finally:
        g.close()
    for res in (default, quiet, verbose):
        assert res.returncode == 0 and res.stdout == "", res.stderr  # (messages on stderr, no data)
    assert "Done: 730 messages on 6 topics" in default.stderr
    assert quiet.stderr == ""
    assert len(verbose.stderr.splitlines()) > len(default.stderr.splitlines())
    assert f"polybag play: reading {samples}/robot.bag: bag (file " in verbose.stderr


def test_verbose_on_hostile_inputs_names_them_escaped_and_fails_once(tmp_path, capfd, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "garbage.bag").write_bytes(b"\x00\x01" * 50)
    evil = "evil\x1b[31m\n.mcap"
    (tmp_path / evil).write_bytes(b"\x89MCAP0\r\n" + b"\xff" * 40)
    (tmp_path / "empty_dir.bag").mkdir()
    for name, label in (("garbage.bag", "bag? (no magic bytes; by the extension) (file 100 B)"),
                        (evil, "MCAP (file 48 B)"), ("empty_dir.bag", "unknown format (directory 0 B)")):
        capfd.readouterr()
        assert main(["info", "-v", name]) == 3
        out, err = capfd.readouterr()
        assert out == "" and "\x1b" not in err and "Traceback" not in err
        lines = err.splitlines()
        assert lines[0].startswith("polybag info: reading ") and lines[0].endswith(label), lines
        assert sum(1 for line in lines if MESSAGE.match(line)) == 1, lines
        assert lines[-1].startswith("polybag info: done in ") and lines[-1].endswith("(exit 3)")


def test_debug_arguments_never_show_a_urls_secrets(tmp_path, capfd, monkeypatch):
    monkeypatch.chdir(tmp_path)
    url = "https://user:s3cret@127.0.0.1:9/x.bag?X-Amz-Signature=t0ken"
    capfd.readouterr()
    assert main(["info", "-vv", url, "other.bag"]) == 3
    out, err = capfd.readouterr()
    assert "s3cret" not in err and "t0ken" not in err and "s3cret" not in out
    assert re.search(r"^polybag info: arguments: \{.*'files': \['https://\*\*\*@127\.0\.0\.1:9/x\.bag", err, re.M), err
