"""Issue 27, "one CLI grammar".

* ``-f`` is ``--force`` in every command that has ``--force`` (as rosbag's ``reindex -f`` /
  ``compress -f``); the output format is ``--format``, short ``-F``.  The old ``-f FORMAT``
  is a usage error that says what to type.
* One topic grammar in every command that selects topics: ``--topics PATTERN...``
  (repeatable), ``--include-topic``/``-i PATTERN``, ``--exclude-topics PATTERN...``,
  ``--exclude-topic``/``-x PATTERN``; a PATTERN is a name or a regular expression matched
  against the whole name, a comma separates alternatives.  play keeps ``-i`` = rosbag's
  ``--immediate``; record keeps rosbag record's grammar and also takes ``--topics``.
* ``-q`` on every writing command; errors name the command line's flags, not the
  library's keywords.
* Help text has no Sphinx markup; the top-level help names every format.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import polybag
from polybag.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[2]
CORPORA = ROOT.parent / "shared" / "corpora"
BAG = CORPORA / "rosbag" / "foxglove-rosbag" / "example.bag"
ULOG = CORPORA / "ulog" / "sample_log_small.ulg"
DEMO = ROOT / "samples" / "demo.mcap"

needs_bag = pytest.mark.skipif(not BAG.exists(), reason="corpus example.bag missing")

#: commands that select topics with the shared grammar (-i/-x free in all of them)
TOPIC_COMMANDS = ("cat", "convert", "export", "filter", "merge")
#: commands that write, and a command line for each (``{bag}``: a copy of the bag, ``{d}``: the work dir)
WRITERS: dict[str, list[str]] = {
    "convert": ["convert", "{bag}", "{d}/o.mcap"],
    "filter": ["filter", "{bag}", "{d}/o.bag", "--topics", "/tf"],
    "merge": ["merge", "{d}/o.mcap", "{bag}"],
    "sort": ["sort", "{bag}", "{d}/o.bag"],
    "split": ["split", "{bag}", "--duration", "20", "-o", "{d}/parts"],
    "recover": ["recover", "{bag}", "{d}/o.bag"],
    "compress": ["compress", "--lz4", "{bag}"],
    "decompress": ["decompress", "{bag}"],
    "reindex": ["reindex", "{bag}"],
    "export": ["export", "{bag}", "--topics", "/tf", "-o", "{d}/tables"],
}


def run(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def subparsers() -> dict[str, argparse.ArgumentParser]:
    """Every command's parser (and each sub-command's, as ``ulog messages``)."""
    found: dict[str, argparse.ArgumentParser] = {}

    def walk(p: argparse.ArgumentParser, prefix: str) -> None:
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, child in a.choices.items():
                    found[f"{prefix}{name}"] = child
                    walk(child, f"{prefix}{name} ")

    walk(build_parser(), "")
    return found


def options(p: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {s: a for a in p._actions for s in a.option_strings}


def bag_topics(selected: set[str] | None = None) -> Counter[str]:
    """Messages per topic of the corpus bag by the reference reader (rosbags)."""
    from rosbags.rosbag1 import Reader

    with Reader(BAG) as ref:
        return Counter(c.topic for c, _, _ in ref.messages() if selected is None or c.topic in selected)


def mcap_topics(path: Path) -> Counter[str]:
    """Messages per topic of an MCAP file by the reference reader (mcap)."""
    from mcap.reader import make_reader

    with open(path, "rb") as f:
        return Counter(ch.topic for _, ch, _ in make_reader(f).iter_messages())


# -- -f is --force, --format is -F ---------------------------------------------------------


def test_dash_f_is_force_in_every_command_and_dash_capital_f_the_format() -> None:
    with_force = 0
    for name, p in subparsers().items():
        opts = options(p)
        if "--force" in opts:
            with_force += 1
            assert opts.get("-f") is opts["--force"], f"{name}: -f is not --force"
        if "-f" in opts:
            assert "--force" in opts and opts["-f"] is opts["--force"], f"{name}: -f means {opts['-f'].dest}"
        if "--format" in opts and "-F" in opts:
            assert opts["-F"] is opts["--format"], name
    assert with_force >= 12  # convert filter merge sort split recover compress decompress reindex export plot get
    for name in ("convert", "filter", "merge", "sort", "split", "recover", "export"):
        opts = options(subparsers()[name])
        assert opts["-F"] is opts["--format"], name


@needs_bag
def test_dash_f_replaces_an_existing_output_everywhere(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o.mcap"
    assert run(capsys, "convert", BAG, out, "--topics", "/tf")[0] == 0
    old = out.read_bytes()
    code, _, err = run(capsys, "convert", BAG, out)
    assert code == 2 and "--force" in err and out.read_bytes() == old
    code, _, err = run(capsys, "convert", BAG, out, "-f")
    assert code == 0, err
    assert mcap_topics(out) == bag_topics()
    bag = tmp_path / "in.bag"
    shutil.copyfile(BAG, bag)
    assert run(capsys, "compress", "--lz4", "-q", bag)[0] == 0
    # the backup exists now: refused without -f, replaced with it (rosbag's compress -f)
    code, _, err = run(capsys, "decompress", "-q", bag)
    assert code == 1 and "-f" in err
    code, _, err = run(capsys, "decompress", "-q", "-f", bag)
    assert code == 0, err
    with polybag.open(bag) as r:
        assert {c.compression for c in r.summary.chunks} == {"none"}


@needs_bag
@pytest.mark.parametrize(
    "argv",
    [
        ["convert", "{bag}", "{d}/o", "-f", "mcap"],
        ["split", "{bag}", "--duration", "20", "-f", "mcap", "-o", "{d}/p"],
        ["filter", "{bag}", "{d}/o", "-f", "bag"],
        ["merge", "{d}/o", "{bag}", "-f", "rosbag2"],
    ],
)
def test_old_dash_f_format_is_a_usage_error_that_says_what_to_type(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fmt = argv[argv.index("-f") + 1]
    code, out, err = run(capsys, *[a.format(bag=BAG, d=tmp_path) for a in argv])
    assert (code, out) == (2, "")
    assert f"polybag {argv[0]}: error: -f is --force now; pass --format {fmt}" in err
    assert "Traceback" not in err
    assert os.listdir(tmp_path) == []


@needs_bag
def test_dash_capital_f_names_the_output_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "noext"
    code, _, err = run(capsys, "convert", BAG, out, "-F", "mcap")
    assert code == 0, err
    assert out.read_bytes()[:8] == b"\x89MCAP0\r\n"
    assert mcap_topics(out) == bag_topics()


# -- one topic grammar ----------------------------------------------------------------------


def test_every_topic_command_has_the_same_flags() -> None:
    parsers = subparsers()
    for name in TOPIC_COMMANDS:
        opts = options(parsers[name])
        for flag in ("--topics", "--include-topic", "-i"):
            assert opts[flag].dest == "topics", (name, flag)
        for flag in ("--exclude-topics", "--exclude-topic", "-x"):
            assert opts[flag].dest == "exclude_topics", (name, flag)
        assert opts["--topics"].nargs == "+" and opts["--exclude-topics"].nargs == "+", name
    play = options(parsers["play"])
    assert play["--topics"].dest == play["--include-topic"].dest == "topics"
    assert play["--exclude-topics"].dest == play["--exclude-topic"].dest == "exclude_topics"
    assert play["-i"].dest == "immediate"  # rosbag play's -i
    record = options(parsers["record"])
    assert {"-a", "-e", "-x", "--topic", "--topics"} <= set(record)
    assert record["-x"].dest == "exclude"  # rosbag record's -x EXCLUDE_REGEX


#: spellings of "the /turtle1/... topics but /turtle1/pose, and /tf"
SELECTIONS = [
    ["--topics", "/turtle1/.*", "/tf", "--exclude-topics", "/turtle1/pose"],
    ["--topics", "/turtle1/.*", "--topics", "/tf", "-x", "/turtle1/pose"],
    ["-i", "/turtle1/.*", "--include-topic", "/tf", "--exclude-topic", "/turtle1/pose"],
    ["--topics", "/turtle1/.*,/tf", "--exclude-topics", "/turtle1/pose,/nothing"],
    ["--topics", "/turtle1/cmd_vel", "/turtle1/color_sensor", "/tf"],
]
WANTED = {"/turtle1/cmd_vel", "/turtle1/color_sensor", "/tf"}


@needs_bag
@pytest.mark.parametrize("selection", SELECTIONS, ids=lambda s: " ".join(s))
def test_one_topic_grammar_selects_the_same_topics_in_every_command(
    selection: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    want = bag_topics(WANTED)
    assert set(want) == WANTED
    # cat
    code, out, err = run(capsys, "cat", BAG, "--json", *selection)
    assert code == 0, err
    assert Counter(json.loads(line)["topic"] for line in out.splitlines()) == want
    # convert, filter, merge: the output read back by the reference reader
    for cmd, args in (
        ("convert", [BAG, tmp_path / "c.mcap"]),
        ("filter", [BAG, tmp_path / "f.mcap"]),
        ("merge", [tmp_path / "m.mcap", BAG]),
    ):
        out_path = Path(args[1] if cmd != "merge" else args[0])
        code, _, err = run(capsys, cmd, *args, "-q", *selection)
        assert code == 0, (cmd, err)
        assert mcap_topics(out_path) == want, cmd
    # export: one table per topic, as many rows as messages
    code, _, err = run(capsys, "export", BAG, "-o", tmp_path / "t", "--format", "jsonl", "-q", *selection)
    assert code == 0, err
    rows = {p.name: len(p.read_text().splitlines()) for p in (tmp_path / "t").iterdir()}
    assert sorted(rows.values()) == sorted(want.values())
    assert len(rows) == len(WANTED)


@needs_bag
@pytest.mark.parametrize(
    "argv",
    [
        ["cat", "--topics", "/tf", "{bag}", "--json"],
        ["cat", "--topics", "/tf", "/turtle1/pose", "{bag}", "--json"],
        ["filter", "--topics", "/tf", "{bag}", "{d}/o.mcap"],
        ["merge", "--topics", "/tf", "{d}/o.mcap", "{bag}"],
        ["convert", "--exclude-topics", "/tf", "/tf_static", "{bag}", "{d}/o.mcap"],
    ],
)
def test_files_after_a_topic_list_are_the_commands_files(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--topics A B FILE``: a topic list stops at the first log (as rosbag play's)."""
    code, out, err = run(capsys, *[a.format(bag=BAG, d=tmp_path) for a in argv])
    assert code == 0, err
    if argv[0] == "cat":
        chosen = {a for a in argv[2:] if a.startswith("/")}
        assert Counter(json.loads(line)["topic"] for line in out.splitlines()) == bag_topics(chosen)
    elif argv[0] == "convert":
        assert mcap_topics(tmp_path / "o.mcap") == bag_topics(set(bag_topics()) - {"/tf", "/tf_static"})
    else:
        assert mcap_topics(tmp_path / "o.mcap") == bag_topics({"/tf"})


@needs_bag
@pytest.mark.parametrize("cmd", TOPIC_COMMANDS)
@pytest.mark.parametrize(
    "selection", [["--topics", "/nosuch", "/other"], ["-x", ".*"], ["-i", "/tf", "-x", "/t.*"]], ids=" ".join
)
def test_a_selection_of_no_topic_exits_1_in_every_command(
    cmd: str, selection: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = {
        "cat": [BAG],
        "convert": [BAG, tmp_path / "o.mcap"],
        "export": [BAG, "-o", tmp_path / "t"],
        "filter": [BAG, tmp_path / "o.mcap"],
        "merge": [tmp_path / "o.mcap", BAG],
    }[cmd]
    code, out, err = run(capsys, cmd, *args, *selection)
    assert (code, out) == (1, "")
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"polybag {cmd}: error: no topic"), err
    # what was asked (each pattern; the exclusion as such), what there is
    assert all(repr(a) in lines[0] for a in selection if not a.startswith("-")), lines[0]
    assert ("when excluding" in lines[0]) == ("-x" in selection), lines[0]
    assert "topics here: /rosout, /tf" in lines[0]
    assert os.listdir(tmp_path) == []  # nothing written


@needs_bag
def test_play_takes_the_grammar_and_says_an_empty_selection_before_any_graph(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ROS_MASTER_URI", "http://127.0.0.1:9/")  # no master: the selection is checked first
    code, out, err = run(capsys, "play", BAG, "--topics", "/turtle1/.*", "--exclude-topics", "/turtle1/.*", "-q")
    assert (code, out) == (1, "")
    assert "polybag play: error: no topic matches '/turtle1/.*' when excluding '/turtle1/.*'" in err
    code, out, err = run(capsys, "play", "--topics", "/nosuch", BAG, "-q")  # (the file after the list)
    assert code == 1 and "'/nosuch'" in err


def test_record_also_takes_topics() -> None:
    from polybag.cli.record import options_from_args

    args = build_parser().parse_args(["record", "/a", "--topics", "/b", "/c", "--topic", "/d", "--topics", "/e"])
    assert sorted(options_from_args(args).topics) == ["/a", "/b", "/c", "/d", "/e"]
    args = build_parser().parse_args(["record", "-e", "/cam/.*", "-x", "/cam/raw"])
    opts = options_from_args(args)
    assert (opts.topics, opts.regex, opts.exclude) == (["/cam/.*"], True, "/cam/raw")


# -- -q, and errors in the command line's words --------------------------------------------


@needs_bag
@pytest.mark.parametrize("cmd", sorted(WRITERS))
def test_quiet_prints_nothing_on_success(cmd: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bag = tmp_path / "in.bag"
    shutil.copyfile(BAG, bag)
    argv = [a.format(bag=bag, d=tmp_path) for a in WRITERS[cmd]]
    code, out, err = run(capsys, *argv, "-q")
    assert (code, out, err) == (0, "", "")
    assert len(os.listdir(tmp_path)) > 1  # it did write


@needs_bag
def test_errors_name_the_flags_not_the_library_keywords(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    keyword = re.compile(r"\b(format|overwrite|storage|compression|output_dir|max_parts)=")
    code, _, err = run(capsys, "convert", BAG, tmp_path / "o.xyz")
    assert code == 3 and "pass --format" in err and not keyword.search(err), err
    (tmp_path / "o.mcap").write_bytes(b"x")
    for argv in (
        ["convert", BAG, tmp_path / "o.mcap"],
        ["split", BAG, "--duration", "20", "-o", tmp_path / "p", "-F", "mcap"],
        ["export", BAG, "--topics", "/tf", "-o", tmp_path / "t"],
    ):
        if argv[0] != "convert":
            assert run(capsys, *argv, "-q")[0] == 0
        code, _, err = run(capsys, *argv)
        assert code == 2 and "--force" in err, err
        assert not keyword.search(err) and "in Python" not in err, err
    code, _, err = run(capsys, "convert", BAG, "-")
    assert code != 0 and "--format" in err and not keyword.search(err), err


# -- help text ----------------------------------------------------------------------------

MARKUP = re.compile(r"``|:(func|class|mod|meth|attr|data|exc|obj|ref):`")


def test_no_help_text_shows_sphinx_markup(capsys: pytest.CaptureFixture[str]) -> None:
    parsers = subparsers()
    assert {"compress", "decompress", "check", "reindex", "ulog messages"} <= set(parsers)
    for name in parsers:
        with pytest.raises(SystemExit) as e:
            main([*name.split(), "--help"])
        assert e.value.code == 0
        text = capsys.readouterr().out
        assert f"usage: polybag {name}" in text
        assert not MARKUP.search(text), f"polybag {name} --help: {MARKUP.search(text)}"


def test_top_level_help_names_every_kind_of_log() -> None:
    p = subprocess.run([sys.executable, "-m", "polybag", "--help"], capture_output=True, text=True, check=False)
    if p.returncode != 0 and "No module named polybag.__main__" in p.stderr:
        p = subprocess.run([str(Path(sys.executable).parent / "polybag"), "--help"], capture_output=True, text=True, check=False)
    assert p.returncode == 0, p.stderr
    text = " ".join(p.stdout.split())
    for name in ("ROS 1", "ROS 2", "rosbag2", "MCAP", "ULog"):
        assert name in text, name
    assert not MARKUP.search(text)
    for cmd in ("info", "record", "play"):  # their one-line summaries name ROS 2 too
        line = re.search(rf"\n    {cmd} +(.*?)\n    \w", p.stdout, re.S)
        assert line is not None and "ROS 2" in " ".join(line.group(1).split()), cmd
