"""Times on the command line are seconds, as rosbag and ros2 bag users write them (issue 27):
``filter --start +5 --end +10`` keeps that 5 s window, ``split --duration 5`` writes parts
of 5 s, ``cat`` takes ISO 8601, ``play -s/-u`` take seconds and units, and a bad time is a
usage error (exit 2) that lists the forms.  Counted against the reference reader (rosbags)
on a real third-party bag (foxglove's example.bag: 8,647 messages over 21.7 s)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import polybag
from paths import CORPORA
from polybag.cli import build_parser, main
from polybag.selection import format_iso

BAG = CORPORA / "rosbag" / "foxglove-rosbag" / "example.bag"
S = 1_000_000_000

pytestmark = pytest.mark.skipif(not BAG.exists(), reason="shared corpus not present")


def _reference_times() -> list[int]:
    """Every message's log time in ns, read by rosbags (not polybag)."""
    from rosbags.rosbag1 import Reader

    with Reader(BAG) as r:
        return sorted(t for _c, t, _d in r.messages())


@pytest.fixture(scope="module")
def ref() -> list[int]:
    return _reference_times()


def _count(times: list[int], lo: int | None, hi: int | None) -> int:
    return sum(1 for t in times if (lo is None or t >= lo) and (hi is None or t < hi))


def _log_times(path: Path) -> list[int]:
    with polybag.open(path) as r:
        return sorted(m.log_time for m in r.messages())


def test_filter_plus_5_to_plus_10_keeps_that_five_second_window(tmp_path: Path, ref: list[int]) -> None:
    out = tmp_path / "w.bag"
    assert main(["filter", str(BAG), str(out), "--start", "+5", "--end", "+10", "-q"]) == 0
    t0 = ref[0]
    want = [t for t in ref if t0 + 5 * S <= t < t0 + 10 * S]
    assert len(want) > 1000  # the window is full of messages (it kept 0 when 5 meant 5 ns)
    assert _log_times(out) == want


@pytest.mark.parametrize(
    ("start", "end", "lo", "hi"),
    [
        ("+2.5", "+7500ms", 2_500_000_000, 7_500_000_000),
        ("+0.05m", "+0.1m", 3 * S, 6 * S),
        ("+1s", None, S, None),
    ],
)
def test_filter_windows_in_units(tmp_path: Path, ref: list[int], start: str, end: str | None, lo: int, hi: int | None) -> None:
    out = tmp_path / "w.mcap"
    argv = ["filter", str(BAG), str(out), "--start", start, *(["--end", end] if end else []), "-q"]
    assert main(argv) == 0
    t0 = ref[0]
    got = _log_times(out)
    assert got and len(got) == _count(ref, t0 + lo, None if hi is None else t0 + hi)


def test_filter_epoch_seconds_are_exact_to_the_nanosecond(tmp_path: Path, ref: list[int]) -> None:
    cut = ref[100]  # a message's own time: as epoch seconds with nine decimals it is kept, 1 ns later it is not
    text = f"{cut // S}.{cut % S:09d}"
    out1, out2 = tmp_path / "a.bag", tmp_path / "b.bag"
    assert main(["filter", str(BAG), str(out1), "--start", text, "-q"]) == 0
    assert main(["filter", str(BAG), str(out2), "--start", f"{cut + 1}ns", "-q"]) == 0
    assert len(_log_times(out1)) == _count(ref, cut, None)
    assert len(_log_times(out2)) == _count(ref, cut + 1, None) == len(_log_times(out1)) - ref.count(cut)


def test_split_duration_5_writes_parts_of_five_seconds(tmp_path: Path, ref: list[int], capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "parts"
    assert main(["split", str(BAG), "--duration", "5", "-o", str(d), "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    parts = sorted(d.iterdir())
    t0, t_end = ref[0], ref[-1]
    k = (t_end - t0) // (5 * S) + 1  # 21.7 s: 5 parts (not 8,645 parts of 5 ns)
    assert len(parts) == len(r["parts"]) == k == 5
    for i, p in enumerate(parts):
        times = _log_times(p)
        lo, hi = t0 + i * 5 * S, t0 + (i + 1) * 5 * S
        assert times and lo <= times[0] and times[-1] < hi
        assert len(times) == _count(ref, lo, hi)


def test_split_at_relative_and_iso_times(tmp_path: Path, ref: list[int]) -> None:
    t0 = ref[0]
    iso = format_iso(t0 + 12 * S)
    d = tmp_path / "parts"
    assert main(["split", str(BAG), "--at", "+4.5", iso, "-o", str(d), "-q"]) == 0
    counts = [len(_log_times(p)) for p in sorted(d.iterdir())]
    cuts = [t0 + 4_500_000_000, t0 + 12 * S]
    assert counts == [_count(ref, None, cuts[0]), _count(ref, cuts[0], cuts[1]), _count(ref, cuts[1], None)]


def test_cat_takes_iso_8601_start_and_end(ref: list[int], capsys: pytest.CaptureFixture[str]) -> None:
    t0 = ref[0]
    lo, hi = t0 + 2 * S, t0 + 3_250_000_000
    assert format_iso(lo).endswith("Z")
    assert main(["cat", str(BAG), "--json", "--start", format_iso(lo), "--end", format_iso(hi)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows and len(rows) == _count(ref, lo, hi)
    assert all(lo <= row["log_time"] < hi for row in rows)
    # the same instant with an offset, and as epoch seconds, selects the same messages
    off = format_iso(lo).replace("Z", "")
    shifted = f"{off[:11]}{int(off[11:13]) + 2:02d}{off[13:]}+02:00" if int(off[11:13]) < 22 else None
    if shifted:
        assert main(["cat", str(BAG), "--json", "--start", shifted, "--end", format_iso(hi)]) == 0
        assert len(capsys.readouterr().out.splitlines()) == len(rows)
    assert main(["cat", str(BAG), "--json", "--start", f"{lo // S}.{lo % S:09d}", "--end", f"{hi}ns"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == len(rows)


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["cat", str(BAG), "--start", "5parsecs"], "'5parsecs'"),
        (["cat", str(BAG), "--end", "yesterday"], "'yesterday'"),
        (["filter", str(BAG), "OUT", "--start", "1:30"], "'1:30'"),
        (["filter", str(BAG), "OUT", "--end", "-5"], "negative"),
        (["split", str(BAG), "--duration", "soon", "-o", "OUT"], "'soon'"),
        (["split", str(BAG), "--at", "2026-13-01", "-o", "OUT"], "month"),
        (["export", str(BAG), "--start", "x", "-o", "OUT"], "'x'"),
    ],
)
def test_a_bad_time_is_a_usage_error_listing_the_forms(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], said: str) -> None:
    argv = [str(tmp_path / "out") if a == "OUT" else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err
    if "--duration" in argv:  # a length of time: the number and unit forms
        assert "500ms" in err and "2m" in err and "ns, us, ms, s" in err
    elif "month" not in said:  # a point in time: every form
        assert all(f in err for f in ("500ms", "2m", "+5", "epoch seconds", "ISO 8601")), err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["filter", str(BAG), "OUT", "--start", "1e20"],  # 1e20 s: past int64 ns, refused not wrapped
        ["filter", str(BAG), "OUT", "--start", f"{1 << 63}ns"],
        ["filter", str(BAG), "OUT", "--start", "+10", "--end", "+5"],  # an end before the start
        ["split", str(BAG), "--duration", "0", "-o", "OUT"],
        ["split", str(BAG), "--duration", "1e12", "-o", "OUT"],
    ],
)
def test_out_of_range_times_are_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    argv = [str(tmp_path / "out") if a == "OUT" else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "error:" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_help_of_every_time_option_says_seconds(capsys: pytest.CaptureFixture[str]) -> None:
    for cmd in ("cat", "filter", "export", "split", "play", "record"):
        with pytest.raises(SystemExit):
            main([cmd, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert "seconds (or 500ms, 2m" in text, cmd
        assert "ns, seconds with" not in text and "(ns;" not in text and "(ns," not in text, cmd


@pytest.mark.parametrize(
    ("flags", "start", "duration"),
    [
        (["-s", "5", "-u", "500ms"], 5.0, 0.5),
        (["-s", "+2.5s", "-u", "0.01m"], 2.5, 0.6),
        (["--start", "1500ms", "--duration", "1"], 1.5, 1.0),
    ],
)
def test_play_start_and_duration_are_seconds_with_units(ref: list[int], flags: list[str], start: float, duration: float) -> None:
    """``play -s/-u`` as rosbag's (seconds from the start), played to a callback sink
    (no live graph): the messages played are those of that window (-u is inclusive, as rosbag's)."""
    from polybag.cli.play import _play_options
    from polybag.play import CallbackSink, Player

    args = build_parser().parse_args(["play", str(BAG), *flags, "-d", "0", "-i", "-q"])
    opts = _play_options(args, {})
    opts.validate()  # (as play's run does before it connects)
    assert (opts.start, opts.duration, opts.delay) == (start, duration, 0.0)
    seen: list[int] = []
    with Player([str(BAG)], opts, CallbackSink(lambda m: seen.append(m.log_time))) as p:
        p.run()
    lo = ref[0] + round(start * S)
    hi = lo + round(duration * S)
    assert seen and len(seen) == _count(ref, lo, hi + 1)
    assert lo <= min(seen) and max(seen) <= hi


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["-s", "5parsecs"], "--start: not a length of time: '5parsecs'"),
        (["-u", "-1"], "--duration: length of time '-1' is negative"),
        (["-d", "2025-11-28T10:00:00Z"], "--delay: '2025-11-28T10:00:00Z' is a point in time"),
        (["--skip-empty", "inf"], "--skip-empty: not a length of time: 'inf'"),
        (["--rate-control-max-delay", "1e300"], "--rate-control-max-delay: length of time '1e300' is too large"),
    ],
)
def test_play_refuses_a_bad_time_before_connecting(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], flags: list[str], said: str
) -> None:
    monkeypatch.setenv("ROS_MASTER_URI", "http://127.0.0.1:9")  # nothing there: a connection would fail otherwise
    assert main(["play", str(BAG), *flags, "-q"]) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err
    assert "500ms" in err or "at most 9223372036.854775807 s" in err


def test_record_duration_and_snapshot_window_take_the_same_units() -> None:
    from polybag.record.options import parse_duration

    assert parse_duration("30") == 30.0 and parse_duration("1.5m") == 90.0 and parse_duration("500ms") == 0.5
    assert parse_duration("2h") == 7200.0
    from polybag.cli.record import options_from_args
    from polybag.errors import UsageError
    from polybag.record.options import RecordOptions

    args = build_parser().parse_args(["record", "/a", "--snapshot-window", "1500ms", "--duration", "2m"])
    opts = options_from_args(args)
    assert opts.snapshot_window == 1.5 and opts.window_ns == 1_500_000_000
    assert opts.max_duration_ns == 120 * S
    with pytest.raises(UsageError, match="--snapshot-window: not a length of time: 'soon'"):
        RecordOptions(snapshot=True, snapshot_window="soon")
    with pytest.raises(UsageError, match="--duration"):
        parse_duration("-5")


def test_library_strings_follow_the_cli_grammar_and_ints_stay_ns(tmp_path: Path, ref: list[int]) -> None:
    from polybag import ops

    t0 = ref[0]
    a = ops.filter(BAG, tmp_path / "a.bag", start="+5", end="+10")
    b = ops.filter(BAG, tmp_path / "b.bag", start=t0 + 5 * S, end=t0 + 10 * S)
    assert a.start == b.start == t0 + 5 * S and a.end == b.end == t0 + 10 * S
    assert _log_times(tmp_path / "a.bag") == _log_times(tmp_path / "b.bag") != []


def test_dask_windows_take_absolute_time_texts(ref: list[int]) -> None:
    pytest.importorskip("dask")
    import polybag.dask as pdask
    from polybag.errors import UsageError

    t0 = ref[0]
    lo, hi = t0 + 5 * S, t0 + 10 * S
    bag = pdask.read_messages(str(BAG), start=format_iso(lo), end=f"{hi}ns", decode=False)
    assert len(bag.compute()) == _count(ref, lo, hi) > 0
    assert pdask.partitions(str(BAG), start=format_iso(lo), end=f"{hi}ns") == pdask.partitions(str(BAG), start=lo, end=hi)
    with pytest.raises(UsageError, match="relative"):  # several files have no one start
        pdask.partitions(str(BAG), start="+5")


def test_a_small_absolute_time_on_a_recent_log_warns_that_plus_was_meant(
    tmp_path: Path, ref: list[int], capsys: pytest.CaptureFixture[str]
) -> None:
    """``--start 5`` is epoch seconds (1970): on a 2014 log the user likely meant ``+5``;
    the window is kept as given, and the warning says how to write the other."""
    out = tmp_path / "w.bag"
    assert main(["filter", str(BAG), str(out), "--start", "5", "-q"]) == 0
    err = capsys.readouterr().err
    assert "warning: start '5' is 1970-01-01T00:00:05Z" in err and "'+5'" in err
    assert len(_log_times(out)) == len(ref)  # every message is after 1970
    assert main(["filter", str(BAG), str(tmp_path / "x.bag"), "--start", "+5", "-q"]) == 0
    assert "warning" not in capsys.readouterr().err


def test_reader_messages_take_time_texts(ref: list[int]) -> None:
    from polybag.errors import UsageError

    t0 = ref[0]
    want = _count(ref, t0 + 5 * S, t0 + 10 * S)
    with polybag.open(BAG) as r:
        assert sum(1 for _ in r.messages(start="+5", end="+10")) == want
        assert sum(1 for _ in r.raw_messages(start=format_iso(t0 + 5 * S), end=f"{t0 + 10 * S}ns")) == want
        assert sum(1 for _ in r.messages(start=t0 + 5 * S, end=t0 + 10 * S)) == want  # ints stay ns
        with pytest.raises(UsageError, match="500ms"):
            next(r.messages(start="soon"))
