"""Issue 27: a topic selection that matches no topic is said, not silent.

Every command taking a topic selection (``cat``, ``filter``, ``merge``, ``export`` tables,
images and point clouds, ``plot``, ``play``) exits 1 with one error line listing the topics
the input has, and writes nothing (no output, no ``.active``, no empty directory).  A comma
inside one ``--topics`` argument separates alternatives (``/a,/b``).  The library's reading
(``reader.messages(topics=...)``) still just gives no message.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path

import pytest

import polybag
from polybag import ops
from polybag.cli import main
from polybag.cli._ops import TopicPattern
from polybag.errors import EmptySelectionError

ROOT = Path(__file__).resolve().parents[2]
CORPORA = ROOT.parent / "shared" / "corpora"
BAG = CORPORA / "rosbag" / "foxglove-rosbag" / "example.bag"
ULOG = CORPORA / "ulog" / "sample_log_small.ulg"
DEMO = ROOT / "samples" / "demo.mcap"
BAG_TOPICS = [
    "/rosout", "/tf", "/tf_static", "/turtle1/cmd_vel", "/turtle1/color_sensor", "/turtle1/pose",
    "/turtle2/cmd_vel", "/turtle2/color_sensor", "/turtle2/pose",
]

needs_bag = pytest.mark.skipif(not BAG.exists(), reason="corpus example.bag missing")


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def said(err: str, cmd: str, selection: str, topics: list[str]) -> str:
    """The one error line of an empty selection: names the selection and lists the topics."""
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    line = lines[0]
    assert line.startswith(f"polybag {cmd}: error: no topic "), line
    assert repr(selection) in line, line
    assert "topics here: " + ", ".join(topics) in line, line
    return line


def nothing_in(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


@needs_bag
def test_cat_no_topic_matches_exits_1_and_lists_topics(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "cat", "--topics", "/nosuch", BAG)
    assert code == 1
    assert out == ""
    said(err, "cat", "/nosuch", BAG_TOPICS)
    # several names, none there: same
    code, out, err = run(capsys, "cat", "--topics", "/a,/b", BAG)
    assert (code, out) == (1, "")
    said(err, "cat", "/a,/b", BAG_TOPICS)


def test_cat_no_topic_in_a_stream_and_an_mcap(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import sys

    code, out, err = run(capsys, "cat", "--topics", "/nosuch", DEMO)
    assert (code, out) == (1, "")
    said(err, "cat", "/nosuch", ["/chatter", "/imu/accel"])
    # a forward-only stream (stdin): said after the pass that found nothing
    stdin = io.TextIOWrapper(io.BufferedReader(io.BytesIO(DEMO.read_bytes())))
    monkeypatch.setattr(sys, "stdin", stdin)
    code, out, err = run(capsys, "cat", "--topics", "/nosuch", "-")
    assert (code, out) == (1, "")
    said(err, "cat", "/nosuch", ["/chatter", "/imu/accel"])


@needs_bag
def test_cat_matching_topics_but_no_message_in_the_window_is_not_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    with polybag.open(BAG) as r:
        end = r.summary.end_time
    code, out, err = run(capsys, "cat", "--topics", "/turtle1/pose", "--start", f"{end + 1}ns", BAG)
    assert (code, out, err) == (0, "", "")


@needs_bag
def test_cat_comma_list_matches_both_topics_as_the_reference_reader(capsys: pytest.CaptureFixture[str]) -> None:
    from rosbags.rosbag1 import Reader

    code, out, err = run(capsys, "cat", "--topics", "/turtle1/pose,/tf_static", BAG)
    assert code == 0, err
    got = Counter(line.split()[1] for line in out.splitlines())
    with Reader(BAG) as ref:
        want = Counter(c.topic for c, _, _ in ref.messages() if c.topic in ("/turtle1/pose", "/tf_static"))
    assert got == want
    assert set(got) == {"/turtle1/pose", "/tf_static"}
    # a comma inside braces is the regular expression's own
    code, out, _ = run(capsys, "cat", "--topics", "/turtle[1]{1,1}/pose", "-n", "2", BAG)
    assert code == 0 and [ln.split()[1] for ln in out.splitlines()] == ["/turtle1/pose"] * 2


def test_topic_pattern_alternatives() -> None:
    def hits(text: str, topics: list[str]) -> list[str]:
        rx = re.compile(TopicPattern(text))
        return [t for t in topics if rx.fullmatch(t)]

    topics = ["/a", "/b", "/ab", "/a,b", "/c"]
    assert hits("/a,/b", topics) == ["/a", "/b"]
    assert hits("/a,/b,", topics) == ["/a", "/b"]
    assert hits(r"/a\,b", topics) == ["/a,b"]
    assert hits("/a[,]b", topics) == ["/a,b"]
    assert hits("/a(,b)?", topics) == ["/a", "/a,b"]
    assert hits("/.{1,2}", topics) == ["/a", "/b", "/ab", "/c"]
    assert repr(TopicPattern("/a,/b")) == "'/a,/b'"  # messages quote what was typed


def test_help_documents_the_comma(capsys: pytest.CaptureFixture[str]) -> None:
    for cmd in ("cat", "export", "merge", "filter", "play"):
        with pytest.raises(SystemExit):
            main([cmd, "--help"])
        out = " ".join(capsys.readouterr().out.split())
        assert "comma" in out and "/a,/b" in out, cmd


@needs_bag
@pytest.mark.parametrize(
    ("flags", "selection"),
    [(["-i", "/nosuch"], "/nosuch"), (["-i", "/x,/y"], "/x,/y"), (["-x", ".*"], ".*"), (["-i", "/tf", "-x", "/tf"], "/tf")],
)
def test_filter_selecting_no_topic_exits_1_and_writes_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, flags: list[str], selection: str
) -> None:
    out = tmp_path / "out.bag"
    code, stdout, err = run(capsys, "filter", BAG, out, *flags)
    assert code == 1
    assert stdout == ""
    line = said(err, "filter", selection, BAG_TOPICS)
    if "-x" in flags:
        assert "when excluding" in line
    assert nothing_in(tmp_path) == []


@needs_bag
def test_filter_comma_list_keeps_both_topics(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "out.mcap"
    code, _, err = run(capsys, "filter", BAG, out, "-i", "/turtle1/pose,/tf_static")
    assert code == 0, err
    with polybag.open(BAG) as a, polybag.open(out) as b:
        want = Counter(m.channel.topic for m in a.messages(topics=["/turtle1/pose", "/tf_static"]))
        got = Counter(m.channel.topic for m in b.messages())
    assert got == want and set(got) == {"/turtle1/pose", "/tf_static"}


@needs_bag
def test_merge_selecting_no_topic_of_any_input(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "merged.mcap"
    code, stdout, err = run(capsys, "merge", out, BAG, DEMO, "--topics", "/a,/b")
    assert (code, stdout) == (1, "")
    said(err, "merge", "/a,/b", sorted(["/chatter", "/imu/accel", *BAG_TOPICS])[:12])
    assert nothing_in(tmp_path) == []
    # a topic one input has is enough
    code, _, err = run(capsys, "merge", out, BAG, DEMO, "--topics", "/chatter,/nosuch")
    assert code == 0, err
    with polybag.open(out) as r:
        got = Counter(m.channel.topic for m in r.messages())
    with polybag.open(DEMO) as r:
        assert got == Counter(m.channel.topic for m in r.messages(topics=["/chatter"])) and set(got) == {"/chatter"}


@needs_bag
@pytest.mark.parametrize("kind", ["-o", "--images", "--pointclouds"])
def test_export_selecting_no_topic(capsys: pytest.CaptureFixture[str], tmp_path: Path, kind: str) -> None:
    dest = tmp_path / "out"
    code, stdout, err = run(capsys, "export", BAG, "--topics", "/nosuch", kind, dest)
    assert (code, stdout) == (1, "")
    said(err, "export", "/nosuch", BAG_TOPICS)
    assert not dest.exists()
    assert nothing_in(tmp_path) == []


@needs_bag
def test_plot_of_no_topic(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "p.png"
    code, stdout, err = run(capsys, "plot", BAG, "/nosuch.x", "-o", out)
    assert (code, stdout) == (1, "")
    line = said(err, "plot", "/nosuch.x", BAG_TOPICS)
    assert "no topic prefixes" in line
    assert nothing_in(tmp_path) == []


@needs_bag
def test_play_of_no_topic_fails_before_any_graph(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # no master anywhere: were the selection not checked first, the command would fail otherwise
    monkeypatch.setenv("ROS_MASTER_URI", "http://127.0.0.1:9/")
    code, stdout, err = run(capsys, "play", BAG, "--topics", "/nosuch,/other", "-q")
    assert (code, stdout) == (1, "")
    line = said(err, "play", "/nosuch", BAG_TOPICS)
    assert "'/other'" in line


def test_long_topic_lists_are_cut(capsys: pytest.CaptureFixture[str]) -> None:
    if not ULOG.exists():
        pytest.skip("corpus ULog missing")
    with polybag.open(ULOG) as r:
        topics = sorted(r.summary.topics())
    assert len(topics) > 20
    code, out, err = run(capsys, "cat", "--topics", "nosuch", ULOG)
    assert (code, out) == (1, "")
    line = err.strip()
    assert "topics here: " + ", ".join(topics[:3]) in line
    m = re.search(r", \.\.\. and (\d+) more\)$", line)
    assert m is not None, line
    shown = line.split("topics here: ", 1)[1].split(", ...")[0].split(", ")
    assert shown == topics[: len(shown)] and int(m.group(1)) == len(topics) - len(shown)
    assert len(line) < 500


@needs_bag
def test_library_reading_stays_silent_and_ops_say_so(tmp_path: Path) -> None:
    with polybag.open(BAG) as r:
        assert list(r.messages(topics=["/nosuch"])) == []
        assert list(r.messages(topics="/nosuch")) == []
    out = tmp_path / "f.bag"
    with pytest.raises(EmptySelectionError, match=r"no topic matches '/nosuch' \(topics here: /rosout, /tf,"):
        ops.filter(BAG, out, include_topics="/nosuch")
    with pytest.raises(EmptySelectionError):
        ops.merge(out, [BAG], topics=["/nosuch"])
    with pytest.raises(EmptySelectionError):
        ops.export(BAG, tmp_path / "tables", topics="/nosuch")
    assert os.listdir(tmp_path) == []


@needs_bag
def test_export_of_many_files_says_it_for_each(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    dest = tmp_path / "out"
    code, _, err = run(capsys, "export", "--jobs", "1", BAG, DEMO, "--topics", "/nosuch,/x", "-o", dest)
    assert code == 1
    lines = err.strip().splitlines()
    assert len(lines) == 2 and all("no topic matches '/nosuch,/x' (topics here: " in ln for ln in lines), err
    assert "/turtle1/pose" in lines[0] and "/chatter, /imu/accel)" in lines[1]
    assert not dest.exists() or not any(dest.rglob("*"))
