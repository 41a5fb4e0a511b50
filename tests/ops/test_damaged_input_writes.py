"""Damaged inputs in the commands that write (issue 27): a ULog cut by power loss, a
corrupt format, a data message of no subscription; a ROS 1 bag or MCAP file cut short.

Every writing command (convert, filter, sort, split, merge) keeps what reads before the
damage (a ULog: every intact message, at least what pyulog reads), names the damage (file
and offset) in a warning and exits 1; ``--strict`` refuses (exit 3) and leaves no output.
"""

from __future__ import annotations

import struct
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polybag
from polybag.cli import main

CORPORA = Path(__file__).resolve().parents[2].parent / "shared" / "corpora"
ULOG = CORPORA / "ulog"
SAMPLE = ULOG / "sample.ulg"
SMALL = ULOG / "sample_log_small.ulg"

pytestmark = pytest.mark.skipif(not SMALL.is_file(), reason="the ULog corpus is not here")


# --- damaged logs made here -------------------------------------------------------------------------
def _walk(data: bytes) -> list[tuple[int, str, int]]:
    """(offset, type, payload size) of every whole message of a ULog."""
    pos, out = 16, []
    while pos + 3 <= len(data):
        size, t = struct.unpack_from("<HB", data, pos)
        if pos + 3 + size > len(data):
            break
        out.append((pos, chr(t), size))
        pos += 3 + size
    return out


def _cut(tmp: Path, src: Path, fraction: float) -> Path:
    data = src.read_bytes()
    p = tmp / f"cut_{int(fraction * 100)}_{src.name}"
    p.write_bytes(data[: int(len(data) * fraction)])
    return p


def _bad_format(tmp: Path) -> Path:
    """sample_log_small.ulg with a field type of airspeed's format misspelt."""
    data = SMALL.read_bytes()
    off, size = next((o, s) for o, t, s in _walk(data) if t == "F" and data[o + 3 : o + 3 + s].startswith(b"airspeed:"))
    body = data[off + 3 : off + 3 + size].replace(b"float ", b"flxat ", 1)
    p = tmp / "bad_format.ulg"
    p.write_bytes(data[: off + 3] + body + data[off + 3 + size :])
    return p


def _bad_msg_id(tmp: Path) -> Path:
    """sample_log_small.ulg with a data message of msg_id 60000 (no subscription) in the middle."""
    data = SMALL.read_bytes()
    at = [o for o, t, _ in _walk(data) if t == "D"][5000]
    extra = struct.pack("<HBH", 10, ord("D"), 60000) + struct.pack("<Q", 123456789)
    p = tmp / "bad_msg_id.ulg"
    p.write_bytes(data[:at] + extra + data[at:])
    return p


def _pyulog_counts(path: Path) -> dict[tuple[str, int], int]:
    import pyulog

    u = pyulog.ULog(str(path))
    return {(d.name, d.multi_id): len(d.data["timestamp"]) for d in u.data_list}


def _ulog_counts(path: Path) -> dict[tuple[str, int], int]:
    """Data messages per (name, multi_id) of a ULog, as polybag reads it (recovering)."""
    with polybag.open(str(path), recover=True) as r:
        c: Counter[tuple[str, int]] = Counter()
        for m in r.messages(order="file"):
            if m.channel.topic != "log_message":
                c[(m.channel.topic, int(m.channel.metadata.get("multi_id", 0)))] += 1
        return dict(c)


def _topic_times(path: Path | str) -> dict[str, list[int]]:
    with polybag.open(str(path)) as r:
        out: dict[str, list[int]] = {}
        for m in r.messages(order="file"):
            out.setdefault(m.channel.topic.lstrip("/"), []).append(m.log_time)
        return out


def _damaged_logs(tmp: Path) -> list[Path]:
    logs = [_cut(tmp, SMALL, 0.45), _cut(tmp, SMALL, 0.9), _bad_format(tmp), _bad_msg_id(tmp)]
    if SAMPLE.is_file():
        logs.append(_cut(tmp, SAMPLE, 0.6))
    return logs


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# --- ULog: every writing command keeps what pyulog reads --------------------------------------------
def test_convert_keeps_at_least_what_pyulog_reads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for log in _damaged_logs(tmp_path):
        ref = _pyulog_counts(log)
        assert sum(ref.values()) > 0
        # ULog -> ULog: pyulog reads polybag's output, topic by topic
        out = tmp_path / f"{log.stem}.out.ulg"
        code, _, err = _run(capsys, "convert", str(log), str(out))
        assert code == 1, err
        assert f"{log.name}: offset " in err and "damaged" in err
        got = _pyulog_counts(out)
        assert all(got.get(k, 0) >= n for k, n in ref.items()), (log.name, ref, got)
        # ULog -> MCAP and bag: the messages per topic are polybag's recovering read's
        want = _ulog_counts(log)
        assert all(want.get(k, 0) >= n for k, n in ref.items())
        for ext in (".mcap", ".bag"):
            o = tmp_path / f"{log.stem}.out{ext}"
            code, _, err = _run(capsys, "convert", str(log), str(o))
            assert code == 1 and "offset" in err
            times = _topic_times(o)
            assert sum(len(v) for t, v in times.items() if t != "log_message") == sum(want.values())


@pytest.mark.parametrize("command", ["filter", "sort", "merge", "split"])
def test_every_writing_command_keeps_the_intact_messages(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    log = _cut(tmp_path, SMALL, 0.6)
    ref = _pyulog_counts(log)
    out = tmp_path / "out"
    out.mkdir()
    dst = out / "o.ulg"
    argv = {
        "filter": ["filter", str(log), str(dst)],
        "sort": ["sort", str(log), str(dst)],
        "merge": ["merge", str(dst), str(log)],
        "split": ["split", str(log), "--size", "100K", "--output-dir", str(out)],
    }[command]
    code, _, err = _run(capsys, *argv)
    assert code == 1, err
    assert f"{log.name}: offset " in err
    got: Counter[tuple[str, int]] = Counter()
    for part in sorted(out.glob("*.ulg")):
        got.update(_pyulog_counts(part))
    assert all(got.get(k, 0) >= n for k, n in ref.items()), (ref, got)
    assert sum(got.values()) >= sum(ref.values())


@pytest.mark.parametrize("command", ["convert", "filter", "sort", "merge", "split"])
def test_strict_refuses_a_damaged_input_and_leaves_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    log = _cut(tmp_path, SMALL, 0.6)
    out = tmp_path / "out"
    out.mkdir()
    dst = out / "o.mcap"
    argv = {
        "convert": ["convert", "--strict", str(log), str(dst)],
        "filter": ["filter", "--strict", str(log), str(dst)],
        "sort": ["sort", "--strict", str(log), str(dst)],
        "merge": ["merge", "--strict", str(dst), str(log)],
        "split": ["split", "--strict", str(log), "--size", "100K", "--output-dir", str(out), "--format", "mcap"],
    }[command]
    code, _, err = _run(capsys, *argv)
    assert code == 3
    assert f"{log.name}: offset " in err and "error" in err
    assert list(out.iterdir()) == []
    # and the same command without --strict writes the intact messages
    code, _, _ = _run(capsys, *[a for a in argv if a != "--strict"])
    assert code == 1 and list(out.iterdir())


@pytest.mark.parametrize("make", [_bad_msg_id, _bad_format])
def test_export_keeps_every_intact_row(tmp_path: Path, capsys: pytest.CaptureFixture[str], make: Any) -> None:
    log = make(tmp_path)
    ref = _pyulog_counts(log)
    out = tmp_path / "tables"
    code, _, err = _run(capsys, "export", str(log), "-o", str(out), "--format", "csv")
    assert code == 1
    assert f"{log.name}: offset " in err
    rows = sum(len(f.read_text().splitlines()) - 1 for f in out.glob("*.csv") if f.stem != "log_message")
    assert rows >= sum(ref.values())


def test_batch_convert_exits_1_for_a_damaged_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _cut(tmp_path, SMALL, 0.5)
    out = tmp_path / "outdir"
    code, _, err = _run(capsys, "convert", "--jobs", "1", str(log), str(SMALL), str(out), "--format", "mcap")
    assert code == 1
    assert f"{log.name}: offset " in err
    assert (out / f"{log.stem}.mcap").is_file() and (out / "sample_log_small.mcap").is_file()


def test_strict_passes_an_intact_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "convert", "--strict", str(SMALL), str(tmp_path / "o.mcap"))
    assert code == 0 and "damaged" not in err
    assert sum(len(v) for v in _topic_times(tmp_path / "o.mcap").values()) == sum(
        len(v) for v in _topic_times(SMALL).values()
    )


def test_python_api_names_the_damage(tmp_path: Path) -> None:
    from polybag import ops
    from polybag.errors import TruncatedError

    log = _cut(tmp_path, SMALL, 0.5)
    r = ops.convert(log, tmp_path / "o.mcap")
    assert r.damage and "offset" in r.damage[0] and r.messages > 0
    with pytest.raises(TruncatedError):
        ops.convert(log, tmp_path / "p.mcap", strict=True)
    assert not (tmp_path / "p.mcap").exists()


def test_info_shows_a_cut_log_and_names_the_damage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _cut(tmp_path, SMALL, 0.5)
    code, out, err = _run(capsys, "info", str(log))
    assert code == 1
    assert "ulog" in out.lower() and out.strip()
    assert "offset" in err and "damaged" in err


# --- ROS 1 bags and MCAP files cut short behave the same ----------------------------------------------
@pytest.mark.parametrize("ext", [".mcap", ".bag"])
def test_a_cut_bag_or_mcap_keeps_the_messages_before_the_damage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], ext: str
) -> None:
    whole = tmp_path / f"whole{ext}"
    assert main(["convert", str(SMALL), str(whole), "--chunk-size", "64K"]) == 0
    capsys.readouterr()
    data = whole.read_bytes()
    cut = tmp_path / f"cut{ext}"
    cut.write_bytes(data[: len(data) // 2])
    out = tmp_path / "o.mcap"
    code, _, err = _run(capsys, "convert", str(cut), str(out))
    assert code == 1, err
    assert f"{cut.name}: offset " in err or f"{cut}: offset " in err
    got = _topic_times(out)
    full = _topic_times(whole)
    assert sum(len(v) for v in got.values()) > 0
    for topic, times in got.items():  # a prefix of each topic's messages
        assert full[topic][: len(times)] == times
    code, _, err = _run(capsys, "convert", "--strict", str(cut), str(tmp_path / "s.mcap"))
    assert code == 3 and not (tmp_path / "s.mcap").exists()


# --- hypothesis: any cut of a ULog converts, keeping a prefix -----------------------------------------
_SMALL_BYTES = SMALL.read_bytes() if SMALL.is_file() else b""
_FULL: dict[str, Any] = {}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(min_value=17, max_value=max(17, len(_SMALL_BYTES) - 1)))
def test_any_cut_converts_keeping_a_prefix(tmp_path_factory: pytest.TempPathFactory, cut_at: int) -> None:
    from polybag import ops

    if not _FULL:  # the whole log converted: the same topic names as a cut one's
        whole = tmp_path_factory.mktemp("whole") / "whole.mcap"
        ops.convert(SMALL, whole)
        _FULL.update(_topic_times(whole))
    d = tmp_path_factory.mktemp("cut")
    log = d / "cut.ulg"
    log.write_bytes(_SMALL_BYTES[:cut_at])
    out = d / "o.mcap"
    try:
        r = ops.convert(log, out)
    except polybag.PolybagError as e:  # a header cut off: refused with a polybag error, no output
        assert cut_at < 1000, e
        assert not out.exists()
        return
    got = _topic_times(out)
    for topic, times in got.items():
        assert _FULL[topic][: len(times)] == times
    boundaries = {o for o, _, _ in _walk(_SMALL_BYTES)} | {len(_SMALL_BYTES)}
    if cut_at not in boundaries:  # cut inside a message: the damage is named
        assert r.damage and "offset" in r.damage[0]
