"""ULog corpus: polybag against pyulog and the expected outputs of pyulog's tools."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import polybag
from paths import CORPORA
from polybag.cli import main, render
from polybag.util.text import safe_text

ULOG = CORPORA / "ulog"
FILES = sorted(ULOG.glob("*.ulg"))
pyulog = pytest.importorskip("pyulog")


def test_corpus_present() -> None:
    assert len(FILES) >= 5


@pytest.fixture(scope="module", params=FILES, ids=lambda p: p.name)
def pair(request: pytest.FixtureRequest) -> tuple[Path, object, polybag.Reader]:
    path = request.param
    u = pyulog.ULog(str(path))
    r = polybag.open(path)
    yield path, u, r
    r.close()


def test_every_topic_matches_pyulog(pair) -> None:
    _, u, r = pair
    assert not u.file_corruption
    ours = {(s.name, s.multi_id) for s in r.ulog.subscriptions}
    for d in u.data_list:
        assert (d.name, d.multi_id) in ours
        cols = r.topic_columns(d.name, d.multi_id, padding=True)
        assert list(cols) == list(d.data), d.name
        for k, v in d.data.items():
            assert cols[k].dtype == v.dtype, (d.name, k)
            assert np.array_equal(cols[k], v, equal_nan=True), (d.name, k)
        shown = r.topic_columns(d.name, d.multi_id)
        assert list(shown) == [k for k in d.data if "_padding" not in k]
    with polybag.open(pair[0]) as r2:  # the one-pass full parse gives the same columns
        every = r2.all_topic_columns(padding=True)
        for d in u.data_list:
            got = every[(d.name, d.multi_id)]
            assert list(got) == list(d.data)
            for k, v in d.data.items():
                assert np.array_equal(got[k], v, equal_nan=True), (d.name, k)
    with_data = {(s.sub.name, s.sub.multi_id) for s in r._subs if s.count}
    assert with_data == {(d.name, d.multi_id) for d in u.data_list}
    assert not r.ulog.corruptions


def test_extras_match_pyulog(pair) -> None:
    _, u, r = pair
    x = r.ulog
    assert x.start_timestamp == u.start_timestamp
    assert x.last_timestamp == u.last_timestamp
    assert x.info == u.msg_info_dict
    assert x.info_multiple == u.msg_info_multiple_dict
    assert x.params == u.initial_parameters
    assert x.default_params == u._default_parameters
    for bit in (0, 1):
        assert x.get_default_parameters(bit) == u.get_default_parameters(bit)
    assert x.changed_params == u.changed_parameters
    assert [(m.timestamp, m.level, m.text) for m in x.logged_messages if m.tag is None] == [
        (m.timestamp, m.log_level, m.message) for m in u.logged_messages
    ]
    tagged = {k: [(m.timestamp, m.level, m.text) for m in v] for k, v in x.logged_messages_tagged.items()}
    assert tagged == {
        k: [(m.timestamp, m.log_level, m.message) for m in v] for k, v in u.logged_messages_tagged.items()
    }
    assert [(d.timestamp, d.duration) for d in x.dropouts] == [(d.timestamp, d.duration) for d in u.dropouts]
    assert x.compat_flags == u._compat_flags
    assert x.incompat_flags == u._incompat_flags
    assert x.appended_offsets == u._appended_offsets
    assert bool(x.has_default_parameters) == bool(u.has_default_parameters)


def test_model_mapping(pair) -> None:
    _, u, r = pair
    s = r.summary
    assert s.format == "ulog"
    counts = {}
    for cid, ch in s.channels.items():
        if ch.topic == "log_message":
            assert s.message_counts[cid] == len(r.ulog.logged_messages)
            continue
        assert ch.message_encoding == "ulog" and ch.schema is not None and ch.schema.encoding == "ulog"
        assert ch.schema.data.decode().splitlines()[0].startswith(ch.topic + ":")
        counts[(ch.topic, int(ch.metadata["multi_id"]))] = s.message_counts[cid]
    for d in u.data_list:
        assert counts[(d.name, d.multi_id)] == len(d.data["timestamp"])
    # messages: log_time = timestamp * 1000, sorted, every message once
    total = 0
    last = -1
    for m in r.messages():
        assert m.log_time >= last
        last = m.log_time
        total += 1
    assert total == s.message_count
    d = max(u.data_list, key=lambda d: len(d.data["timestamp"]))
    got = [
        m
        for m in r.messages(topics=[d.name], order="file")
        if m.channel.metadata["multi_id"] == str(d.multi_id)
    ]
    assert [m.log_time for m in got] == [int(t) * 1000 for t in d.data["timestamp"]]
    flat = got[0].codec().to_flat_dict(got[0].data)
    for k, v in flat.items():
        assert v == pytest.approx(d.data[k][0], nan_ok=True) or (isinstance(v, bytes)), k


def test_decode_nested(pair) -> None:
    path, u, r = pair
    if path.name != "sample_px4_events.ulg":
        pytest.skip("nested esc_status only in this file")
    m = next(r.messages(topics=["esc_status"]))
    obj = m.decode()
    d = u.get_dataset("esc_status")
    assert obj.timestamp == d.data["timestamp"][0]
    assert len(obj.esc) == 8
    assert obj.esc[1].esc_rpm == d.data["esc[1].esc_rpm"][0]
    assert not any(k.startswith("_padding") for k in m.to_dict())


def test_tables(pair) -> None:
    _, u, r = pair
    d = u.data_list[0]
    df = r.to_pandas(d.name, d.multi_id)
    assert len(df) == len(d.data["timestamp"])
    assert np.array_equal(df["timestamp"].to_numpy(), d.data["timestamp"])
    t = r.to_arrow(d.name, d.multi_id)
    assert t.num_rows == len(d.data["timestamp"])


def test_topic_selection_skips_others(pair) -> None:
    path, u, _ = pair
    d = u.data_list[-1]
    with polybag.open(path, topics=[d.name]) as r:
        assert {c.topic for c in r.summary.channels.values()} == {d.name}
        cols = r.topic_columns(d.name, d.multi_id)
        assert np.array_equal(cols["timestamp"], d.data["timestamp"])
        assert all(m.channel.topic == d.name for m in r.messages())
        other = u.data_list[0]  # not selected: still readable on request
        got = r.topic_columns(other.name, other.multi_id)
        assert np.array_equal(got["timestamp"], other.data["timestamp"])


def _expected(name: str) -> str | None:
    p = ULOG / name
    return p.read_text() if p.exists() else None


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_info_text(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    exp = _expected(path.name.replace(".ulg", "_info.txt").replace("_multiple_info", "_multiple_info"))
    with polybag.open(path) as r:
        text = render.info_text(r)
    if exp is None:
        # no expected file: compare with pyulog's own tool
        from pyulog.info import show_info

        show_info(pyulog.ULog(str(path)), True)
        exp = capsys.readouterr().out
    assert text.strip() == exp.strip()
    assert main(["ulog", "info", str(path)]) == 0
    assert capsys.readouterr().out.strip() == exp.strip()
    generic = Path(polybag.__file__).parent / "cli" / "info.py"
    if generic.exists():  # the generic command (another module): ulog_info -v's dump with -v
        assert main(["info", "-v", str(path)]) == 0
        assert capsys.readouterr().out.strip().startswith(exp.strip())
        assert main(["info", "--json", str(path)]) == 0
        assert '"subscriptions"' in capsys.readouterr().out


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_messages_command(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    exp = _expected(path.name.replace(".ulg", "_messages.txt"))
    assert exp is not None
    assert main(["ulog", "messages", str(path)]) == 0
    out = capsys.readouterr().out
    if path.name == "sample_logging_tagged_and_default_params.ulg":
        # pyulog decoded its one event with definitions downloaded from the internet;
        # polybag never downloads, and shows PX4's plain copy of the event instead
        exp_lines = [x for x in exp.strip().splitlines() if "opening log file" not in x]
        got = [x for x in out.strip().splitlines() if "[logger] [logger]" not in x]
        assert got == [safe_text(x) for x in exp_lines]
    else:
        # (pyulog prints the log's escape sequences raw, polybag as escapes: text from a file
        # never reaches the terminal raw)
        assert out.strip() == safe_text(exp.strip())


def test_px4_events_tuples() -> None:
    from polybag.cli.ulog import logged_lines

    with polybag.open(ULOG / "sample_px4_events.ulg") as r:
        lines = logged_lines(r)
    want = [
        (1710773350346000, "INFO", "logging: opening log file 2024-3-18/14_49_10.ulg"),
        (1710773365282000, "INFO", "Armed by internal command"),
        (1710773365282000, "INFO", "Using default takeoff altitude: 2.50 m"),
        (1710773367094000, "INFO", "Takeoff detected"),
        (1710773372482000, "INFO", "RTL: start return at 491 m (3 m above destination)"),
        (1710773372694000, "INFO", "RTL: land at destination"),
        (1710773378482000, "INFO", "Landing detected"),
        (1710773380486000, "INFO", "Disarmed by landing"),
    ]
    assert [x for x in lines if x in want] == want


def _pyulog_params(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> str:
    from pyulog import params

    monkeypatch.setattr(sys, "argv", ["ulog_params", *argv])
    params.main()
    return capsys.readouterr().out


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_params_command(
    path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    exp = _pyulog_params([str(path)], capsys, monkeypatch)
    assert main(["ulog", "params", str(path)]) == 0
    assert capsys.readouterr().out == exp
    exp = _pyulog_params(["-i", str(path)], capsys, monkeypatch)
    assert main(["ulog", "params", "--initial", str(path)]) == 0
    assert capsys.readouterr().out == exp
    with polybag.open(path) as r:
        has_defaults = r.ulog.has_default_parameters
    if has_defaults:
        for kind in ("system", "current_setup"):
            exp = _pyulog_params(["-d", kind, str(path)], capsys, monkeypatch)
            assert main(["ulog", "params", "--defaults", "--default-type", kind, str(path)]) == 0
            assert capsys.readouterr().out == exp
            assert exp.strip()


def test_info_json(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    path = ULOG / "sample.ulg"
    assert main(["ulog", "info", "--json", str(path)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ulog_version"] == 0
    assert len(data["dropouts"]) == 4
    subs = {(s["name"], s["multi_id"]): s for s in data["subscriptions"]}
    assert subs[("sensor_combined", 0)]["count"] == 17070
    assert subs[("sensor_combined", 0)]["message_size"] == 72


def test_log_channel_columns_fields_and_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from polybag.errors import PolybagError

    path = ULOG / "sample_logging_tagged_and_default_params.ulg"
    with polybag.open(path) as r:
        log = r.topic_columns("log_message")
        assert list(log) == ["timestamp", "log_level", "tag", "message"]
        assert list(log["message"]) == [m.text for m in r.ulog.logged_messages]
        assert list(log["tag"]) == [-1 if m.tag is None else m.tag for m in r.ulog.logged_messages]
        sel = r.topic_columns("sensor_combined", ["gyro_rad", "timestamp"])
        assert list(sel) == ["gyro_rad[0]", "gyro_rad[1]", "gyro_rad[2]", "timestamp"]
        with pytest.raises(KeyError):
            r.topic_columns("no_such_topic")
        with pytest.raises(PolybagError):
            r.topic_columns("sensor_combined", 7)
    if (Path(polybag.__file__).parent / "cli" / "export.py").exists():
        assert main(["export", str(path), "--format", "csv", "-o", str(tmp_path)]) == 0
        text = (tmp_path / "log_message.csv").read_text()
        assert "tagged message test" in text
        assert (tmp_path / "sensor_combined.csv").read_text().startswith("timestamp,")


@pytest.mark.parametrize("key", ["boot_console_output", "perf_top_preflight"])
def test_info_message_option_matches_pyulog(
    key: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from pyulog import info

    path = str(ULOG / "sample_log_small.ulg")
    for extra in ([], ["-n"]):
        monkeypatch.setattr(sys, "argv", ["ulog_info", "-m", key, *extra, path])
        info.main()
        exp = capsys.readouterr().out
        assert main(["ulog", "info", "-m", key, *extra, path]) == 0
        assert capsys.readouterr().out == safe_text(exp)  # (escape sequences escaped, as above)
