"""``time=`` of topic_columns / to_pandas / to_arrow: the chosen time first, named by the
choice, compared with a brute-force loop over ``r.messages()`` and the codec's decode, in a
bag, a ROS 2 and a ROS 1 MCAP, a rosbag2 sqlite3 directory and a ULog (synthetic and real)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polybag
from polybag.codecs.cdr import codec_for_type as cdr_codec
from polybag.codecs.columns import TIME_CHOICES, topic_columns
from polybag.codecs.ros1 import codec_for_type as ros1_codec
from polybag.codecs.ros1 import definition_for as ros1_definition
from polybag.codecs.ros2.definitions import definition_for as ros2_definition
from polybag.errors import UsageError
from ulog_helpers import synthetic_log, write

CORPORA = Path(__file__).resolve().parents[2].parent / "shared" / "corpora"
PS1, PS2 = "geometry_msgs/PointStamped", "geometry_msgs/msg/PointStamped"
FORMATS = ["bag", "mcap-ros2", "mcap-ros1", "rosbag2"]
CHOICES = ["log_time", "publish_time", "header.stamp"]


def _stamps(n: int, seed: int) -> tuple[list[int], list[int], list[tuple[int, int]]]:
    """Log times (increasing), publish times (before them, not monotonic) and header stamps
    (sec, nsec) that go backwards now and then."""
    rng = np.random.default_rng(seed)
    log = (1_700_000_000 * 10**9 + np.cumsum(rng.integers(1, 10**7, n))).tolist()
    pub = [t - int(d) for t, d in zip(log, rng.integers(0, 5 * 10**7, n))]
    stamps = [(int(s), int(ns)) for s, ns in zip(rng.integers(1_600_000_000, 1_600_000_100, n), rng.integers(0, 10**9, n))]
    return log, pub, stamps


def write_log(tmp_path: Path, fmt: str, n: int = 60, seed: int = 1) -> Path:
    """``fmt``'s log with /ps (PointStamped, header stamps going backwards), /plain (a type
    without header) and /px4 (a type with an integer ``timestamp``), distinct publish times."""
    log, pub, stamps = _stamps(n, seed)
    ros2 = fmt in ("mcap-ros2", "rosbag2")
    path = tmp_path / {"bag": "t.bag", "mcap-ros2": "t2.mcap", "mcap-ros1": "t1.mcap", "rosbag2": "rb2"}[fmt]
    opts: dict[str, Any] = {"mcap-ros2": {"profile": "ros2"}, "mcap-ros1": {"profile": "ros1"}, "rosbag2": {"format": "rosbag2", "storage": "sqlite3"}}.get(fmt, {})
    if ros2:
        ps, enc, senc = cdr_codec(PS2, ros2_definition(PS2)), "cdr", "ros2msg"
        plain = cdr_codec("t/msg/Plain", "float64 v\n")
        px4 = cdr_codec("t/msg/Px4", "uint64 timestamp\nfloat32 v\n")
        names = (PS2, "t/msg/Plain", "t/msg/Px4")
        defs = (ros2_definition(PS2), "float64 v\n", "uint64 timestamp\nfloat32 v\n")
    else:
        ps, enc, senc = ros1_codec(PS1, ros1_definition(PS1)), "ros1", "ros1msg"
        plain = ros1_codec("t/Plain", "float64 v\n")
        px4 = ros1_codec("t/Px4", "uint64 timestamp\nfloat32 v\n")
        names = (PS1, "t/Plain", "t/Px4")
        defs = (ros1_definition(PS1), "float64 v\n", "uint64 timestamp\nfloat32 v\n")
    nsec = "nanosec" if ros2 else "nsec"
    with polybag.Writer(path, **opts) as w:
        chans = [w.add_channel(t, enc, w.add_schema(nm, senc, d.encode())) for t, nm, d in zip(("/ps", "/plain", "/px4"), names, defs)]
        for i in range(n):
            s, ns = stamps[i]
            data = ps.encode({"header": {"stamp": {"sec": s, nsec: ns}, "frame_id": "f" * (i % 3)}, "point": {"x": i, "y": -i}})
            w.write(chans[0], data, log[i], publish_time=pub[i])
            w.write(chans[1], plain.encode({"v": i * 0.5}), log[i] + 1, publish_time=pub[i] + 1)
            w.write(chans[2], px4.encode({"timestamp": (n - i) * 1000 + 7, "v": i}), log[i] + 2, publish_time=pub[i] + 2)
    return path


def _stamp_ns(d: dict[str, Any]) -> int:
    st_ = d["header"]["stamp"]
    return int(st_["sec"]) * 10**9 + int(st_.get("nsec", st_.get("nanosec", 0)))


def brute(r: Any, topic: str, time: str, keep_times: bool) -> dict[str, list[Any]]:
    """The expected time columns, message by message."""
    msgs = list(r.messages(topics=[topic]))
    dicts = [m.channel and polybag.codecs.codec_for(m.channel).to_dict(m.data) for m in msgs]
    values = {
        "log_time": [m.log_time for m in msgs],
        "publish_time": [m.publish_time for m in msgs],
        "header.stamp": [_stamp_ns(d) for d in dicts] if time == "header.stamp" else None,
        "timestamp": [int(d["timestamp"]) for d in dicts] if time == "timestamp" else None,
    }
    out = {time: values[time]}
    if keep_times:
        for other in ("log_time", "publish_time"):
            if other != time:
                out[other] = values[other]
    return out


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_choice_matches_a_loop_over_messages(tmp_path: Path, fmt: str) -> None:
    path = write_log(tmp_path, fmt)
    with polybag.open(path) as r:
        for topic, choices in (("/ps", CHOICES), ("/plain", CHOICES[:2]), ("/px4", [*CHOICES[:2], "timestamp"])):
            plain_cols = r.topic_columns(topic)
            for time in choices:
                for keep in (False, True):
                    cols = r.topic_columns(topic, time=time, keep_times=keep)
                    want = brute(r, topic, time, keep)
                    assert list(cols)[: len(want)] == list(want), (topic, time, keep)
                    for k, v in want.items():
                        assert cols[k].dtype in (np.int64, np.uint64), (k, cols[k].dtype)
                        assert cols[k].tolist() == v, (fmt, topic, time, k)
                    # the other columns: every field as the default read gives them, the chosen
                    # time not repeated, no other time unless asked
                    rest = {k: v for k, v in cols.items() if k not in want}
                    expect_rest = {k: v for k, v in plain_cols.items() if k != "log_time" and k != time}
                    assert list(rest) == list(expect_rest)
                    for k in rest:
                        assert rest[k].tolist() == expect_rest[k].tolist()
                    assert ("log_time" in cols) == (time == "log_time" or keep)
                    # the module function is the same
                    again = topic_columns(r, topic, time=time, keep_times=keep)
                    assert list(again) == list(cols) and all(np.array_equal(again[k], cols[k]) for k in cols)
        # the header stamps of /ps go backwards: the rows stay in log-time order
        cols = r.topic_columns("/ps", time="header.stamp", keep_times=True)
        assert np.all(np.diff(cols["log_time"]) > 0) and np.any(np.diff(cols["header.stamp"]) < 0)
        # publish times are the stored ones where the format keeps them, else the log time
        if fmt == "bag":
            assert cols["publish_time"].tolist() == cols["log_time"].tolist()
        elif fmt.startswith("mcap"):
            assert cols["publish_time"].tolist() != cols["log_time"].tolist()


@pytest.mark.parametrize("fmt", FORMATS)
def test_fields_with_a_chosen_time(tmp_path: Path, fmt: str) -> None:
    path = write_log(tmp_path, fmt, n=12)
    with polybag.open(path) as r:
        cols = r.topic_columns("/ps", ["point.x"], time="header.stamp")
        assert list(cols) == ["header.stamp", "point.x"]
        assert cols["header.stamp"].tolist() == brute(r, "/ps", "header.stamp", False)["header.stamp"]
        cols = r.topic_columns("/ps", ["header"], time="header.stamp", keep_times=True)
        others = [c for c in r.topic_columns("/ps") if c.startswith("header.") and c != "header.stamp"]
        assert list(cols) == ["header.stamp", "log_time", "publish_time", *others] and "header.frame_id" in others
        cols = r.topic_columns("/px4", ["v"], time="timestamp")
        assert list(cols) == ["timestamp", "v"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_usage_errors(tmp_path: Path, fmt: str) -> None:
    path = write_log(tmp_path, fmt, n=3)
    with polybag.open(path) as r:
        with pytest.raises(UsageError, match=r"topic /plain \(type t/(msg/)?Plain\).*its times: log_time, publish_time; its fields: v"):
            r.topic_columns("/plain", time="header.stamp")
        with pytest.raises(UsageError, match="/ps.*no an? integer field 'timestamp'|/ps.*integer field 'timestamp'"):
            r.to_pandas("/ps", time="timestamp")
        for bad in ("logtime", "header", "receive_time", ""):
            with pytest.raises(UsageError, match="log_time, publish_time, header.stamp, timestamp"):
                r.topic_columns("/ps", time=bad)
            with pytest.raises(UsageError, match="choose one of"):
                r.to_arrow("/ps", time=bad)
        with pytest.raises(UsageError, match="arrays='nested'.*columns, lists"):
            r.topic_columns("/ps", arrays="nested")


@pytest.mark.parametrize("fmt", FORMATS)
def test_pandas_and_arrow_index_and_datetimes(tmp_path: Path, fmt: str) -> None:
    pd = pytest.importorskip("pandas")
    pa = pytest.importorskip("pyarrow")
    path = write_log(tmp_path, fmt, n=20)
    with polybag.open(path) as r:
        for time in CHOICES:
            want = np.array(brute(r, "/ps", time, False)[time], dtype=np.int64)
            df = r.to_pandas("/ps", time=time)
            assert df.index.name == time and df.index.dtype == np.int64 and np.array_equal(df.index.to_numpy(), want)
            assert time not in df.columns and "log_time" not in df.columns
            dt = r.to_pandas("/ps", time=time, datetimes=True)
            assert isinstance(dt.index, pd.DatetimeIndex) and str(dt.index.dtype) == "datetime64[ns, UTC]"
            assert dt.index.name == time and np.array_equal(dt[f"{time}_ns"].to_numpy(), want)
            assert np.array_equal(dt.index.asi8, want)
            assert dt.index[0] == pd.Timestamp(int(want[0]), unit="ns", tz="UTC")
            t = r.to_arrow("/ps", time=time)
            assert t.column_names[0] == time and f"{time}_utc" not in t.column_names
            t = r.to_arrow("/ps", time=time, datetimes=True)
            assert t.column_names[:2] == [time, f"{time}_utc"]
            assert t.schema.field(f"{time}_utc").type == pa.timestamp("ns", tz="UTC")
            assert np.array_equal(t.column(f"{time}_utc").cast(pa.int64()).to_numpy(), want)
        keep = r.to_pandas("/ps", time="header.stamp", keep_times=True)
        assert list(keep.columns[:2]) == ["log_time", "publish_time"]


def test_defaults_unchanged(tmp_path: Path) -> None:
    """No ``time=``: exactly the columns of before (log_time first, then the fields)."""
    path = write_log(tmp_path, "bag", n=5)
    with polybag.open(path) as r:
        cols = r.topic_columns("/ps")
        assert list(cols) == ["log_time", "header.seq", "header.stamp", "header.frame_id", "point.x", "point.y", "point.z"]
        df = r.to_pandas("/ps")
        assert df.index.name == "log_time" and "header.stamp" in df.columns


# --- ULog ---------------------------------------------------------------------------------------
def _ulog_brute(r: Any, name: str, mid: int) -> tuple[list[int], list[int], list[int]]:
    """(log, publish, timestamp) of one instance, message by message with the codec."""
    lt, pt, ts = [], [], []
    for m in r.messages(topics=[name]):
        if m.channel.metadata.get("multi_id", "0") != str(mid):
            continue
        lt.append(m.log_time)
        pt.append(m.publish_time)
        ts.append(int(polybag.codecs.codec_for(m.channel).to_dict(m.data)["timestamp"]))
    return lt, pt, ts


def _ulog_check(r: Any, name: str, mid: int) -> None:
    lt, pt, ts = _ulog_brute(r, name, mid)
    base = r.topic_columns(name, mid)
    for time, want in (("log_time", lt), ("publish_time", pt), ("timestamp", ts)):
        for keep in (False, True):
            cols = r.topic_columns(name, mid, time=time, keep_times=keep)
            assert list(cols)[0] == time and cols[time].tolist() == want
            if keep and time != "log_time":
                assert list(cols)[1] == "log_time" and cols["log_time"].tolist() == lt
            else:
                assert ("log_time" in cols) == (time == "log_time")
            assert "publish_time" not in cols or time == "publish_time"  # no distinct publish time
            fields = [k for k in cols if k not in (time, "log_time")]
            assert fields == [k for k in base if k != time]
    assert r.topic_columns(name, mid, time="timestamp")["timestamp"].dtype == base["timestamp"].dtype
    pd = pytest.importorskip("pandas")
    df = r.to_pandas(name, mid, time="timestamp", datetimes=True)
    assert df.index.name == "timestamp" and str(df.index.dtype) == "datetime64[ns, UTC]"
    assert np.array_equal(df.index.asi8, np.array(ts, dtype=np.int64) * 1000)
    assert df["timestamp_us"].tolist() == ts
    assert r.to_pandas(name, mid).index.tolist() == lt
    t = r.to_arrow(name, mid, time="timestamp", datetimes=True)
    assert t.column_names[:2] == ["timestamp", "timestamp_utc"]
    assert t.column("timestamp_utc").to_pylist()[0] == pd.Timestamp(ts[0] * 1000, unit="ns", tz="UTC")
    with pytest.raises(UsageError, match=rf"topic {name} .*no std_msgs/Header.*log_time, publish_time, timestamp"):
        r.topic_columns(name, mid, time="header.stamp")
    with pytest.raises(UsageError, match="choose one of"):
        r.to_pandas(name, mid, time="stamp")


def test_ulog_synthetic(tmp_path: Path) -> None:
    content, _ = synthetic_log(n=40)
    path = write(tmp_path, "s.ulg", content)
    with polybag.open(path) as r:
        for name, mid in (("pos", 0), ("pos", 1), ("nest", 0)):
            _ulog_check(r, name, mid)
        # fixed arrays as one column each: pos.xyz, nest.items (messages: dicts), nest.tag
        base = r.topic_columns("nest", 0)
        lists = r.topic_columns("nest", 0, time="log_time", arrays="lists")
        assert list(lists) == ["log_time", "timestamp", "items", "tag", "ok"]
        assert lists["tag"].tolist() == np.stack([base[f"tag[{i}]"] for i in range(4)], axis=1).tolist()
        assert [[float(d["a"]), int(d["b"])] for d in lists["items"][:, 1]] == [[float(a), int(b)] for a, b in zip(base["items[1].a"], base["items[1].b"])]
        assert r.topic_columns("pos", 0, arrays="lists")["xyz"].shape == (len(r.topic_columns("pos", 0)["timestamp"]), 3)
        t = r.to_arrow("nest", 0, arrays="lists")
        assert str(t.schema.field("items").type) == "fixed_size_list<item: struct<a: float, b: uint8>>[2]"
        # the default topic_columns keeps pyulog's keys alone
        assert list(r.topic_columns("pos", 0))[0] == "timestamp" and "log_time" not in r.topic_columns("pos", 0)
        # the generic module function reads a ULog the same way
        cols = topic_columns(r, "nest", time="timestamp", keep_times=True)
        want = r.topic_columns("nest", 0, time="timestamp", keep_times=True)
        assert cols["timestamp"].tolist() == want["timestamp"].tolist()
        assert cols["log_time"].tolist() == want["log_time"].tolist()


@pytest.mark.skipif(not (CORPORA / "ulog" / "sample.ulg").exists(), reason="no corpus ULog")
def test_ulog_corpus() -> None:
    with polybag.open(CORPORA / "ulog" / "sample.ulg") as r:
        seen = sorted({(c.topic, int(c.metadata.get("multi_id", "0"))) for c in r.summary.channels.values()})
        counts = r.summary.message_counts or {}
        busy = [k for k in seen if any(counts.get(c.id) for c in r.summary.channels.values() if (c.topic, int(c.metadata.get("multi_id", "0"))) == k)]
        for name, mid in busy[:4]:
            _ulog_check(r, name, mid)


@pytest.mark.skipif(not (CORPORA / "rosbag" / "embag" / "test.bag").exists(), reason="no corpus bag")
def test_bag_corpus() -> None:
    with polybag.open(CORPORA / "rosbag" / "embag" / "test.bag") as r:
        for topic in ("/base_pose_ground_truth", "/base_scan"):
            for time in CHOICES:
                cols = r.topic_columns(topic, time=time, keep_times=True)
                want = brute(r, topic, time, True)
                assert list(cols)[: len(want)] == list(want)
                for k, v in want.items():
                    assert cols[k].tolist() == v
    with polybag.open(CORPORA / "rosbag" / "foxglove-rosbag" / "example.bag") as r:
        with pytest.raises(UsageError, match=r"topic /tf \(type tf/tfMessage\).*its fields: transforms"):
            r.topic_columns("/tf", time="header.stamp")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    fmt=st.sampled_from(FORMATS),
    n=st.integers(0, 30),
    seed=st.integers(0, 2**16),
    time=st.sampled_from(CHOICES),
    keep=st.booleans(),
)
def test_hypothesis_any_log(tmp_path_factory: pytest.TempPathFactory, fmt: str, n: int, seed: int, time: str, keep: bool) -> None:
    path = write_log(tmp_path_factory.mktemp("h"), fmt, n=n, seed=seed)
    with polybag.open(path) as r:
        cols = r.topic_columns("/ps", time=time, keep_times=keep)
        want = brute(r, "/ps", time, keep)
        assert list(cols)[: len(want)] == list(want)
        for k, v in want.items():
            assert cols[k].tolist() == v
        assert len(cols[time]) == n


def test_choices_are_the_documented_ones() -> None:
    assert TIME_CHOICES == ("log_time", "publish_time", "header.stamp", "timestamp")


@pytest.mark.parametrize("fmt", ["bag", "mcap-ros2", "rosbag2", "ulog"])
def test_dask_read_topic_time(tmp_path: Path, fmt: str) -> None:
    """polybag.dask.read_topic(time=, keep_times=) is the reader's to_pandas, partition by partition."""
    pytest.importorskip("dask.dataframe")
    import polybag.dask as pbd

    if fmt == "ulog":
        content, _ = synthetic_log(n=40)
        path, topic, choices, extra = Path(write(tmp_path, "d.ulg", content)), "pos", ["log_time", "publish_time", "timestamp"], {"multi_id": 1}
    else:
        path, topic, choices, extra = write_log(tmp_path, fmt, n=50), "/ps", CHOICES, {}
    with polybag.open(path) as r:
        for time in choices:
            for keep in (False, True):
                want = r.to_pandas(topic, *([extra["multi_id"]] if extra else []), time=time, keep_times=keep)
                for pm in (7, 10_000):
                    ddf = pbd.read_topic(str(path), topic, time=time, keep_times=keep, partition_messages=pm, file_column=False, **extra)
                    got = ddf.compute()
                    assert got.index.name == time and list(got.columns) == list(want.columns), (time, keep, pm)
                    assert got.index.tolist() == want.index.tolist()
                    for c in want.columns:
                        assert got[c].tolist() == want[c].tolist(), (time, c)
                    if time != "log_time":
                        assert not ddf.known_divisions
                # a window of the log time
                lt = r.to_pandas(topic, *([extra["multi_id"]] if extra else []), keep_times=True).index.to_numpy()
                lo, hi = int(lt[5]), int(lt[20])
                got = pbd.read_topic(str(path), topic, time=time, keep_times=keep, start=lo, end=hi, file_column=False, **extra).compute()
                assert got.index.tolist() == want.index.tolist()[5:20]
                assert list(got.columns) == list(want.columns)
    with pytest.raises(UsageError, match="choose one of"):
        pbd.read_topic(str(path), topic, time="nope")


def test_times_past_2262_are_no_datetimes(tmp_path: Path) -> None:
    """MCAP allows u64 log times: kept as uint64, and a datetime of one is a UsageError."""
    pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    path = tmp_path / "big.mcap"
    c = cdr_codec("t/msg/Plain", "float64 v\n")
    with polybag.Writer(path, profile="ros2") as w:
        ch = w.add_channel("/p", "cdr", w.add_schema("t/msg/Plain", "ros2msg", b"float64 v\n"))
        w.write(ch, c.encode({"v": 1.0}), 5, publish_time=(1 << 63) + 5)
        w.write(ch, c.encode({"v": 2.0}), 6, publish_time=7)
    with polybag.open(path) as r:
        cols = r.topic_columns("/p", time="publish_time", keep_times=True)
        assert cols["publish_time"].dtype == np.uint64 and cols["publish_time"].tolist() == [(1 << 63) + 5, 7]
        assert cols["log_time"].tolist() == [5, 6]
        assert r.to_pandas("/p", time="publish_time").index.tolist() == [(1 << 63) + 5, 7]
        for call in (r.to_pandas, r.to_arrow):
            with pytest.raises(UsageError, match="2262"):
                call("/p", time="publish_time", datetimes=True)
        assert r.to_pandas("/p", datetimes=True).index.asi8.tolist() == [5, 6]
