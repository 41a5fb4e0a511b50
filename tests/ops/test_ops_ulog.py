"""ULog conversions: to MCAP/bag (decoded by the official ROS 1 decoders) and to ULog, against pyulog."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import polybag
from ops_helpers import CORPORA
from polybag import ops

pyulog = pytest.importorskip("pyulog")

ULOGS = [
    CORPORA / "ulog" / "sample_log_small.ulg",
    CORPORA / "ulog" / "sample_logging_tagged_and_default_params.ulg",
]


def _flatten(obj: object, prefix: str, out: dict[str, list]) -> None:
    """A decoded ROS message -> pyulog's flattened names (``a.b``, ``q[0]``)."""
    for name in obj.__slots__:  # type: ignore[attr-defined]
        value = getattr(obj, name)
        key = prefix + name
        if hasattr(value, "__slots__"):
            _flatten(value, key + ".", out)
        elif isinstance(value, (list, tuple, bytes, np.ndarray)):
            for i, v in enumerate(value):
                if hasattr(v, "__slots__"):
                    _flatten(v, f"{key}[{i}].", out)
                else:
                    out.setdefault(f"{key}[{i}]", []).append(v)
        else:
            out.setdefault(key, []).append(value)


def _pyulog_topics(path: Path) -> dict[str, dict[str, np.ndarray]]:
    u = pyulog.ULog(str(path))
    out = {}
    for d in u.data_list:
        topic = f"/{d.name}" if d.multi_id == 0 else f"/{d.name}_{d.multi_id}"
        # pyulog keeps the padding of nested types; the ROS 1 mapping drops all padding
        out[topic] = {k: v for k, v in d.data.items() if "_padding" not in k}
    return out


def _equal(a: np.ndarray, b: np.ndarray) -> bool:
    a = np.asarray(a)
    b = np.asarray(b)
    if a.dtype.kind == "f" or b.dtype.kind == "f":
        return bool(np.array_equal(a.astype(np.float64), b.astype(np.float64), equal_nan=True))
    return bool(np.array_equal(a.astype(np.int64), b.astype(np.int64)))


@pytest.mark.parametrize("ulog", ULOGS, ids=[p.name for p in ULOGS])
def test_ulog_to_mcap_decodes_to_pyulog_values(ulog: Path, tmp_path: Path) -> None:
    mcap_reader = pytest.importorskip("mcap.reader")
    ros1_decoder = pytest.importorskip("mcap_ros1.decoder")
    out = tmp_path / "u.mcap"
    res = ops.convert(ulog, out)
    assert res.profile == "ros1"
    expected = _pyulog_topics(ulog)
    got: dict[str, dict[str, list]] = {}
    with open(out, "rb") as f:
        reader = mcap_reader.make_reader(f, decoder_factories=[ros1_decoder.DecoderFactory()])
        for _schema, channel, message, decoded in reader.iter_decoded_messages(log_time_order=False):
            if channel.topic == "/log_message":
                continue
            _flatten(decoded, "", got.setdefault(channel.topic, {}))
            assert message.log_time == decoded.timestamp * 1000
    assert set(got) == set(expected)
    for topic, fields in expected.items():
        assert set(got[topic]) == set(fields), topic
        for name, values in fields.items():
            assert _equal(np.array(got[topic][name]), values), f"{topic}.{name}"


def test_ulog_logged_strings_and_metadata_in_mcap(tmp_path: Path) -> None:
    ulog = ULOGS[1]
    out = tmp_path / "u.mcap"
    ops.convert(ulog, out)
    u = pyulog.ULog(str(ulog))
    with polybag.open(out) as r:
        logs = [(m.decode().timestamp, m.decode().message) for m in r.messages(topics=["/log_message"])]
        metadata = {m.name: dict(m.metadata) for m in r.metadata()}
    want = sorted(
        [(m.timestamp, m.message) for m in u.logged_messages]
        + [(m.timestamp, m.message) for ms in u.logged_messages_tagged.values() for m in ms]
    )
    assert sorted(logs) == want and want
    assert metadata["ulog_info"]["sys_name"] == str(u.msg_info_dict["sys_name"])
    assert set(metadata["ulog_params"]) == set(u.initial_parameters)


def test_ulog_to_bag_read_by_rosbag_standalone(tmp_path: Path) -> None:
    rosbag = pytest.importorskip("rosbag")
    ulog = ULOGS[0]
    out = tmp_path / "u.bag"
    res = ops.convert(ulog, out)
    assert any("cannot hold" in w for w in res.warnings)  # info/params have no place in a bag
    expected = _pyulog_topics(ulog)
    got: dict[str, dict[str, list]] = {}
    with rosbag.Bag(str(out)) as b:
        for topic, msg, _t in b.read_messages():
            if topic != "/log_message":
                _flatten(msg, "", got.setdefault(topic, {}))
    assert set(got) == set(expected)
    for topic, fields in expected.items():
        for name, values in fields.items():
            assert _equal(np.array(got[topic][name]), values), f"{topic}.{name}"


@pytest.mark.parametrize("ulog", ULOGS, ids=[p.name for p in ULOGS])
def test_ulog_to_ulog_keeps_everything(ulog: Path, tmp_path: Path) -> None:
    out = tmp_path / "u.ulg"
    ops.convert(ulog, out)
    a = pyulog.ULog(str(ulog))
    b = pyulog.ULog(str(out))
    assert a.msg_info_dict == b.msg_info_dict
    assert len(b.message_formats) == len(a.message_formats)  # also formats no topic uses
    assert b._sync_seq_cnt == a._sync_seq_cnt  # sync messages kept
    assert a.initial_parameters == b.initial_parameters
    assert a.changed_parameters == b.changed_parameters
    assert [(m.timestamp, m.log_level, m.message) for m in a.logged_messages] == [
        (m.timestamp, m.log_level, m.message) for m in b.logged_messages
    ]
    assert sorted((d.name, d.multi_id) for d in a.data_list) == sorted(
        (d.name, d.multi_id) for d in b.data_list
    )
    bd = {(d.name, d.multi_id): d.data for d in b.data_list}
    for d in a.data_list:
        other = bd[(d.name, d.multi_id)]
        assert set(other) == set(d.data)
        for k, v in d.data.items():
            assert _equal(other[k], v), f"{d.name}.{k}"


def test_filter_ulog_to_ulog_against_pyulog(tmp_path: Path) -> None:
    src = ULOGS[0]
    out = tmp_path / "f.ulg"
    with polybag.open(src) as r:
        t0 = r.summary.start_time or 0
    lo, hi = t0 + 20 * 10**9, t0 + 22 * 10**9
    ops.filter(src, out, include_topics=["vehicle_.*"], start=lo, end=hi)
    a = pyulog.ULog(str(src))
    b = pyulog.ULog(str(out))
    want = {}
    for d in a.data_list:
        if not d.name.startswith("vehicle_"):
            continue
        ts = d.data["timestamp"].astype(np.int64) * 1000
        sel = (ts >= lo) & (ts < hi)
        if sel.any():
            want[(d.name, d.multi_id)] = {k: v[sel] for k, v in d.data.items()}
    got = {(d.name, d.multi_id): d.data for d in b.data_list}
    assert set(got) == set(want) and want
    for key, fields in want.items():
        for k, v in fields.items():
            assert _equal(got[key][k], v), f"{key}.{k}"
    assert a.msg_info_dict == b.msg_info_dict and a.initial_parameters == b.initial_parameters
