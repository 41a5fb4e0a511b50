"""Issue 32 (BUG-B): the operations' correctness and reports.

* ``convert --topics`` writes only the selected topics' channels (no empty channels of the
  others), in bag, MCAP and rosbag2 outputs; ``filter`` with an expression or a time window
  writes only the channels a message was written to (as ``rosbag filter``); ``filter`` by
  topics alone keeps the selected topics' channels.
* ``export --align`` ends with the summary line every export writes.
* ``filter``'s line says how many messages were *written* (of those read).
* ``plot`` of a field the topic does not have is the user's selection: exit 1 (as a topic
  that is not there), the fields there are listed.
* ``check --max-chunk`` reports each problem once.
* ``recover`` names the file in every damage line and counts the bytes a cut file lost.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import polybag
from polybag import ops
from polybag.cli import main
from polybag.errors import EmptySelectionError

ROOT = Path(__file__).resolve().parents[2]
ROBOT = ROOT / "samples" / "robot.bag"
FLIGHT = ROOT / "samples" / "flight.ulg"
TOPICS = ["/camera/image_raw", "/chatter", "/gps", "/imu", "/odom", "/scan"]


def run(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def channels(path: Path) -> dict[str, int]:
    """topic -> messages of every channel of ``path`` (empty channels too)."""
    with polybag.open(str(path)) as r:
        s = r.summary
        counts = s.message_counts or {}
        out: dict[str, int] = {}
        for c in s.channels.values():
            out[c.topic] = out.get(c.topic, 0) + int(counts.get(c.id, 0))
        return out


OUTPUTS = [("out.bag", None), ("out.mcap", None), ("out_ros2", "rosbag2")]


# --- 1. no empty channels of unselected topics ------------------------------------------
@pytest.mark.parametrize(("name", "fmt"), OUTPUTS)
def test_convert_topics_writes_only_the_selected_channels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, fmt: str | None
) -> None:
    dst = tmp_path / name
    code, out, _err = run(capsys, "convert", ROBOT, dst, "--topics", "/imu", *(["--format", fmt] if fmt else []))
    assert code == 0
    assert channels(dst) == {"/imu": 500}
    assert "500 messages on 1 channels" in out


def test_convert_without_topics_keeps_every_channel(tmp_path: Path) -> None:
    r = ops.convert(str(ROBOT), str(tmp_path / "all.mcap"))
    assert r.channels == len(TOPICS)
    assert sorted(channels(tmp_path / "all.mcap")) == TOPICS


@pytest.mark.parametrize(("name", "fmt"), OUTPUTS)
def test_filter_expression_writes_only_channels_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, fmt: str | None
) -> None:
    dst = tmp_path / name
    code, out, _err = run(
        capsys, "filter", ROBOT, dst, "topic == '/imu' and t.to_sec() < 1700000001", *(["--format", fmt] if fmt else [])
    )
    assert code == 0
    assert channels(dst) == {"/imu": 50}
    # 4. the line says what was written, of what was read
    assert f"{dst}: 50 of 730 messages written, on 1 topic" in out


@pytest.mark.parametrize(("name", "fmt"), OUTPUTS)
def test_filter_time_window_writes_only_channels_with_a_message(
    tmp_path: Path, name: str, fmt: str | None
) -> None:
    with polybag.open(str(ROBOT)) as r:
        first = {
            m.channel.topic: m.log_time for m in reversed(list(r.messages(order="log_time")))
        }  # each topic's first message time
    t0 = min(first.values())
    end = sorted(first.values())[1] + 1  # the window holds the first messages of two topics at most
    res = ops.filter(str(ROBOT), str(tmp_path / name), start=t0, end=end, format=fmt)
    got = channels(tmp_path / name)
    assert all(n > 0 for n in got.values()), got
    assert sum(got.values()) == res.messages
    assert res.topics_written == len(got) < len(TOPICS)


def test_filter_by_topics_keeps_the_selected_topics(tmp_path: Path) -> None:
    res = ops.filter(str(ROBOT), str(tmp_path / "two.mcap"), include_topics=["/imu", "/gps"])
    assert channels(tmp_path / "two.mcap") == {"/imu": 500, "/gps": 50}
    assert res.messages == res.read == 550 and res.topics_written == 2


def test_filter_expression_matching_nothing_writes_no_channel(tmp_path: Path) -> None:
    res = ops.filter(str(ROBOT), str(tmp_path / "none.bag"), expression="False")
    assert res.messages == 0 and res.read == 730
    assert channels(tmp_path / "none.bag") == {}


# --- 3. export --align's summary line ------------------------------------------------------
def test_export_align_ends_with_the_summary_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_dir = tmp_path / "tables"
    code, out, err = run(capsys, "export", ROBOT, "--align", "asof", "--topics", "/imu", "/odom", "-o", out_dir, "--no-progress")
    assert code == 0
    table = out_dir / "aligned.csv"
    assert f"-> {table} (500 rows" in out
    lines = [ln for ln in err.splitlines() if ln.startswith("polybag export: ")]
    assert len(lines) == 1, err
    assert re.fullmatch(rf"polybag export: 500 rows, \S+ \S*B written to {re.escape(str(table))} in \d+\.\d s", lines[0]), lines


def test_export_align_quiet_says_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "export", ROBOT, "--align", "asof", "--topics", "/imu", "/odom", "-o", tmp_path / "t", "-q")
    assert code == 0 and out == "" and err == ""


# --- 5. plot of a missing field ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("src", "spec", "topic", "field", "listed"),
    [
        (ROBOT, "/odom.speed", "/odom", "speed", "pose.pose.position.x"),
        (ROBOT, "/chatter.foo", "/chatter", "foo", "data"),
        (FLIGHT, "vehicle_attitude.foo", "vehicle_attitude", "foo", "rollspeed"),
    ],
)
def test_plot_missing_field_is_an_empty_selection(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], src: Path, spec: str, topic: str, field: str, listed: str
) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "x.png"
    code, _out, err = run(capsys, "plot", src, spec, "-o", png)
    assert code == 1  # as a topic that is not there (EmptySelectionError), not 3 (unreadable input)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"polybag plot: error: {topic}: no field {field!r}")
    assert "fields here: " in lines[0] and listed in lines[0]
    assert not png.exists() and not (tmp_path / "x.png.active").exists()
    with pytest.raises(EmptySelectionError, match="fields here: "):
        ops.plot(str(src), [spec], str(tmp_path / "y.png"))


def test_plot_missing_field_decoded_message_by_message(monkeypatch: pytest.MonkeyPatch) -> None:
    """A topic without whole-topic columns is decoded message by message: the same error."""
    import importlib

    plot_mod = importlib.import_module("polybag.ops.plot")

    monkeypatch.setattr(plot_mod, "_columns", lambda reader, topic: None)
    with polybag.open(str(ROBOT)) as r, pytest.raises(EmptySelectionError) as e:
        plot_mod.collect(r, ["/gps.status.nosuch"])
    assert str(e.value).startswith("/gps: no field 'status.nosuch'")
    assert "status.status" in str(e.value) and "status.service" in str(e.value)
    with polybag.open(str(ROBOT)) as r:
        got = plot_mod.collect(r, ["/gps.latitude"])
    assert got[0][1] == "latitude" and len(got[0][3]) == 50


# --- 6. check reports each problem once ----------------------------------------------------
def test_check_max_chunk_reports_each_chunk_once(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = run(capsys, "check", "--max-chunk", "16K", ROBOT)
    assert code == 1
    problems = [ln for ln in out.splitlines() if ln.startswith("  problem: ")]
    assert problems and len(problems) == len(set(problems)), out
    assert sum("offset 4109:" in p for p in problems) == 1
    assert f"{len(problems)} problem(s)" in out


# --- 7. recover: the file named, what was lost counted ----------------------------------
def _cut(src: Path, dst: Path, n: int) -> Path:
    dst.write_bytes(src.read_bytes()[:n])
    return dst


def test_recover_cut_bag_counts_the_lost_tail(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    n = 100_000
    with polybag.open(str(ROBOT)) as r:
        starts = sorted(ci.pos for ci in r.chunks)  # type: ignore[attr-defined]
    last_whole_end = max(p for p in starts if p < n)  # the cut chunk starts here
    cut = _cut(ROBOT, tmp_path / "cut.bag", n)
    res = ops.recover(str(cut), str(tmp_path / "rec.bag"))
    assert res.bytes_lost == n - last_whole_end > 0
    assert res.bytes_kept == last_whole_end
    assert res.lost_anything and res.verified
    code, out, err = run(capsys, "recover", cut, tmp_path / "rec2.bag")
    assert code == 1
    assert f"lost: unknown number of messages, {n - last_whole_end} bytes skipped" in out
    assert f"data lost: {n - last_whole_end} bytes skipped" in err
    assert "0 bytes skipped" not in out + err


def test_recover_cut_uncompressed_bag_counts_after_the_last_intact_record(tmp_path: Path) -> None:
    full = tmp_path / "plain.bag"
    ops.convert(str(ROBOT), str(full), compression="none")
    cut = _cut(full, tmp_path / "cut.bag", 150_000)
    res = ops.recover(str(cut), str(tmp_path / "rec.bag"))
    # the cut chunk's complete records are kept: only the partial record after them is lost
    assert 0 < res.bytes_lost < 10_000
    assert res.messages > 0 and res.verified


def test_recover_cut_ulog_names_the_file_and_counts_the_tail(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cut = _cut(FLIGHT, tmp_path / "cut.ulg", 40_100)
    res = ops.recover(str(cut), str(tmp_path / "rec.ulg"))
    assert res.errors and all(e.startswith(f"{cut}: ") for e in res.errors), res.errors
    m = re.search(r"offset (\d+): log ends inside a message", res.errors[0])
    assert m is not None
    assert res.bytes_lost == 40_100 - int(m.group(1)) > 0
    code, out, _err = run(capsys, "recover", cut, tmp_path / "rec2.mcap")
    assert code == 1
    damage = [ln for ln in out.splitlines() if ln.startswith("  damage: ")]
    assert damage and all(ln.startswith(f"  damage: {cut}: offset ") for ln in damage), out
    assert f"{res.bytes_lost} bytes skipped" in out


def test_merge_topics_writes_only_the_selected_channels(tmp_path: Path) -> None:
    res = ops.merge(str(tmp_path / "m.mcap"), [str(ROBOT), str(ROOT / "samples" / "demo.mcap")], topics=["/imu"])
    assert res.messages == 500
    assert channels(tmp_path / "m.mcap") == {"/imu": 500}
