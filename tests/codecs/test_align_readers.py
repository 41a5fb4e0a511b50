"""aligned_columns / aligned_pandas / aligned_arrow on logs of every format, each compared
with the pandas route a user would write: ``r.to_pandas(a)``, ``r.to_pandas(b)``,
``pd.merge_asof``."""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polybag
from align_helpers import N_IMU, cells_equal, pandas_route, write_log
from polybag.codecs import aligned
from polybag.codecs.aligned import aligned_arrow, aligned_columns, aligned_pandas
from polybag.codecs.cdr import codec_for_type as cdr_codec
from polybag.codecs.ros2 import definition_for as ros2_definition
from polybag.errors import PolybagWarning, UsageError

CORPORA = Path(__file__).resolve().parents[2].parent / "shared" / "corpora"
ULOG = CORPORA / "ulog" / "sample.ulg"
ULOG_SMALL = CORPORA / "ulog" / "sample_log_small.ulg"
BAG = CORPORA / "rosbag" / "embag" / "test.bag"

KINDS = {"bag": "a.bag", "mcap-ros2": "a.mcap", "mcap-ros1": "a1.mcap", "rosbag2": "a_dir"}


@pytest.fixture(params=list(KINDS))
def log(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    return write_log(tmp_path / KINDS[request.param], request.param)


def compare(ours: pd.DataFrame, theirs: pd.DataFrame) -> None:
    assert ours.index.name == theirs.index.name
    assert ours.index.tolist() == theirs.index.tolist()
    assert sorted(ours.columns) == sorted(theirs.columns)
    for c in theirs.columns:
        cells_equal(ours[c], theirs[c])


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"direction": "forward"},
        {"direction": "nearest", "tolerance": 30_000_000},
        {"direction": "backward", "allow_exact_matches": False, "tolerance": 60_000_000},
    ],
)
def test_two_topics_like_merge_asof(log: Path, options: dict[str, Any]) -> None:
    with polybag.open(log) as r:
        ours = aligned_pandas(r, ["/imu", "/gps"], **options)
        theirs = pandas_route(r, "/imu", "/gps", **options)
    compare(ours, theirs)
    assert ours["/gps.latitude"].notna().sum() > 0 and ours.index.name == "log_time"


def test_tolerance_text_and_nearest_alias(log: Path) -> None:
    with polybag.open(log) as r:
        ours = aligned_pandas(r, ["/imu", "/gps"], align="nearest", tolerance="30ms")
        theirs = pandas_route(r, "/imu", "/gps", direction="nearest", tolerance=30_000_000)
    compare(ours, theirs)


@pytest.mark.parametrize("batch", [1, 7, 50])
@pytest.mark.parametrize("direction", ["backward", "forward", "nearest"])
@pytest.mark.parametrize("topics", [("/gps", "/imu"), ("/imu", "/gps")])
def test_small_batches(log: Path, monkeypatch: pytest.MonkeyPatch, batch: int, direction: str, topics: tuple[str, str]) -> None:
    """The topics decoded and joined a few messages at a time (the one-pass join keeps only
    what later rows can match) give the same table."""
    monkeypatch.setattr(aligned, "_BATCH_MESSAGES", batch)
    with polybag.open(log) as r:
        ours = aligned_pandas(r, list(topics), direction=direction, allow_exact_matches=batch != 7)
        theirs = pandas_route(r, *topics, direction=direction, allow_exact_matches=batch != 7)
    compare(ours, theirs)


def test_header_stamp_times_sorted_first(log: Path) -> None:
    with polybag.open(log) as r:
        ours = aligned_columns(r, ["/imu", "/gps"], ["/imu.angular_velocity.x", "/gps.latitude"], time="header.stamp")
        a = r.topic_columns("/imu", ["angular_velocity.x"], time="header.stamp")
        b = r.topic_columns("/gps", ["latitude"], time="header.stamp")
    assert list(ours) == ["header.stamp", "/imu.angular_velocity.x", "/gps.header.stamp", "/gps.latitude"]
    left = pd.DataFrame({"t": a["header.stamp"], "x": a["angular_velocity.x"]}).sort_values("t", kind="stable")
    right = pd.DataFrame({"t": b["header.stamp"], "lat": b["latitude"]}).sort_values("t", kind="stable")
    assert not np.all(np.diff(a["header.stamp"]) >= 0)  # the stamps did go backwards
    want = pd.merge_asof(left, right, on="t")
    assert ours["header.stamp"].tolist() == want["t"].tolist()
    assert ours["/imu.angular_velocity.x"].tolist() == want["x"].tolist()
    cells_equal(pd.Series(ours["/gps.latitude"].filled(np.nan)), want["lat"])


def test_arrow_has_nulls_where_pandas_has_nan(log: Path) -> None:
    with polybag.open(log) as r:
        table = aligned_arrow(r, ["/imu", "/gps"], {"/gps": ["status", "latitude"], "/imu": ["angular_velocity.x"]})
        df = aligned_pandas(r, ["/imu", "/gps"], {"/gps": ["status", "latitude"], "/imu": ["angular_velocity.x"]})
    assert table.column_names[0] == "log_time" and table.num_rows == len(df)
    assert table.column("/gps.latitude").null_count == int(df["/gps.latitude"].isna().sum()) > 0
    assert str(table.schema.field("/gps.status.status").type) == "int8"
    assert str(df["/gps.status.status"].dtype) == "Int8" and str(df["/gps.log_time"].dtype) == "Int64"


def test_resample(log: Path) -> None:
    with polybag.open(log) as r:
        ours = aligned_pandas(r, ["/imu", "/gps"], ["/imu.angular_velocity.x", "/gps.latitude", "/gps.status.status"], align="resample:12ms")
        imu = r.to_pandas("/imu")
        gps = r.to_pandas("/gps")
    first = min(imu.index.min(), gps.index.min())
    last = max(imu.index.max(), gps.index.max())
    grid = np.arange(-(-first // 12_000_000) * 12_000_000, last + 1, 12_000_000)
    assert ours.index.tolist() == grid.tolist()
    # numbers linear (np.interp inside each topic's span), other kinds: the previous value
    for name, frame, col in (("/imu.angular_velocity.x", imu, "angular_velocity.x"), ("/gps.latitude", gps, "latitude")):
        t = frame.index.to_numpy()
        inside = (grid >= t[0]) & (grid <= t[-1])
        got = ours[name].to_numpy()
        assert np.array_equal(~np.isnan(got), inside)
        assert np.allclose(got[inside], np.interp(grid[inside], t, frame[col].to_numpy()))
    t = gps.index.to_numpy()
    prev = np.searchsorted(t, grid, side="right") - 1
    inside = (grid >= t[0]) & (grid <= t[-1])
    status = ours["/gps.status.status"]
    assert str(status.dtype) == "float64"  # interpolated linearly: ints become float64
    with polybag.open(log) as r:
        prev_df = aligned_pandas(r, ["/imu", "/gps"], ["/gps.status.status"], align="resample:12ms", interpolate={"/gps.status.status": "previous"})
    s = prev_df["/gps.status.status"]
    assert str(s.dtype) == "Int8" and s.isna().to_numpy().tolist() == (~inside).tolist()
    assert s[inside].tolist() == gps["status.status"].to_numpy()[prev[inside]].tolist()


def test_real_bag() -> None:
    with polybag.open(BAG) as r:
        ours = aligned_pandas(r, ["/base_pose_ground_truth", "/base_scan"], direction="nearest")
        theirs = pandas_route(r, "/base_pose_ground_truth", "/base_scan", direction="nearest")
    compare(ours, theirs)
    assert ours["/base_scan.ranges"].notna().all()


def test_ulog_two_topics_and_an_instance() -> None:
    with polybag.open(ULOG) as r:
        ours = aligned_pandas(r, ["vehicle_attitude", "vehicle_local_position"], tolerance="50ms")
        theirs = pandas_route(r, "vehicle_attitude", "vehicle_local_position", tolerance=50_000_000)
        compare(ours, theirs)
        assert 0 < ours["vehicle_local_position.x"].notna().sum() < len(ours)
        # ULog's own timestamp (microseconds): a tolerance with a unit means the same time
        ts = aligned_columns(r, ["vehicle_attitude", "vehicle_local_position"], ["vehicle_local_position.x"], time="timestamp", tolerance="50ms")
        assert np.array_equal(np.ma.getmaskarray(ts["vehicle_local_position.x"]), ours["vehicle_local_position.x"].isna().to_numpy())
        assert list(ts)[0] == "timestamp" and ts["timestamp"].dtype.kind in "iu"
    # another instance of a topic: ("name", multi_id), named "name:multi_id"
    with polybag.open(ULOG_SMALL) as r:
        inst = aligned_columns(r, ["vehicle_imu", ("vehicle_imu", 2)])
        d2 = r.topic_columns("vehicle_imu", 2, time="log_time")
        left = pd.DataFrame({"log_time": inst["log_time"]})
        right = pd.DataFrame({k if k == "log_time" else f"vehicle_imu:2.{k}": v for k, v in d2.items()})
        right["vehicle_imu:2.log_time"] = right["log_time"]
        want = pd.merge_asof(left, right, on="log_time")
        names = [k for k in inst if k.startswith("vehicle_imu:2.")]
        assert sorted(names) == sorted(c for c in want.columns if c.startswith("vehicle_imu:2."))
        for k in names:
            cells_equal(pd.Series(np.ma.filled(inst[k].astype(np.float64), np.nan)), want[k].astype(np.float64))
        assert np.ma.count(inst["vehicle_imu:2.log_time"]) > 0


def test_errors(tmp_path: Path) -> None:
    log = write_log(tmp_path / "e.mcap", "mcap-ros2")
    with polybag.open(log) as r:
        with pytest.raises(UsageError, match=r"no topic '/nope'; topics: /gps, /imu"):
            aligned_columns(r, ["/imu", "/nope"])
        with pytest.raises(UsageError, match="2 topics or more"):
            aligned_columns(r, ["/imu"])
        with pytest.raises(UsageError, match="resample:<period>"):
            aligned_columns(r, ["/imu", "/gps"], align="join")
        with pytest.raises(UsageError, match="backward, forward, nearest"):
            aligned_columns(r, ["/imu", "/gps"], direction="up")
        with pytest.raises(UsageError, match="length of time"):
            aligned_columns(r, ["/imu", "/gps"], tolerance="soon")
        with pytest.raises(UsageError, match="given twice"):
            aligned_columns(r, ["/imu", "/imu"])
        with pytest.raises(UsageError, match="time must be one of"):
            aligned_columns(r, ["/imu", "/gps"], time="wall")
        with pytest.raises(UsageError, match="interpolate names no column /gps.nope"):
            aligned_columns(r, ["/imu", "/gps"], align="resample:10ms", interpolate={"/gps.nope": "linear"})


def test_empty_topics(tmp_path: Path) -> None:
    log = write_log(tmp_path / "e.mcap", "mcap-ros2", empty_gps=True)
    with polybag.open(log) as r:
        with pytest.warns(PolybagWarning, match="topic /gps has no messages"):
            df = aligned_pandas(r, ["/imu", "/gps"], {"/gps": ["latitude", "status"]})
        assert len(df) == N_IMU and df["/gps.latitude"].isna().all() and df["/gps.status.status"].isna().all()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PolybagWarning)
            empty = aligned_pandas(r, ["/gps", "/imu"], {"/imu": ["angular_velocity.x"]})
        assert len(empty) == 0 and "/imu.angular_velocity.x" in empty.columns


_F64 = cdr_codec("std_msgs/msg/Float64", ros2_definition("std_msgs/msg/Float64"))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    a=st.lists(st.integers(0, 40), max_size=30),
    b=st.lists(st.integers(0, 40), max_size=30),
    batch=st.integers(1, 6),
    direction=st.sampled_from(["backward", "forward", "nearest"]),
    exact=st.booleans(),
    tol=st.one_of(st.none(), st.integers(0, 8)),
)
def test_random_log_times_in_one_pass(a: list[int], b: list[int], batch: int, direction: str, exact: bool, tol: int | None) -> None:
    """Random log times (duplicates, equal times across topics) joined in one pass with tiny
    batches: the same table as merge_asof of the two topics' frames."""
    rows = sorted([(t, "/a", i) for i, t in enumerate(a)] + [(t, "/b", i) for i, t in enumerate(b)], key=lambda x: x[0])
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "r.mcap"
        with polybag.Writer(path, profile="ros2", chunk_size=64) as w:
            sch = w.add_schema("std_msgs/msg/Float64", "ros2msg", ros2_definition("std_msgs/msg/Float64").encode())
            ch = {"/a": w.add_channel("/a", "cdr", sch), "/b": w.add_channel("/b", "cdr", sch)}
            for t, topic, i in rows:
                w.write(ch[topic], _F64.encode({"data": float(i)}), t)
        old = aligned._BATCH_MESSAGES
        aligned._BATCH_MESSAGES = batch
        try:
            with polybag.open(path) as r, warnings.catch_warnings():
                warnings.simplefilter("ignore", PolybagWarning)
                cols = aligned_columns(r, ["/a", "/b"], direction=direction, allow_exact_matches=exact, tolerance=tol)
        finally:
            aligned._BATCH_MESSAGES = old
    left = pd.DataFrame({"t": np.array(sorted(a), np.int64)})
    order = sorted(range(len(b)), key=lambda i: b[i])
    right = pd.DataFrame({"t": np.array([b[i] for i in order], np.int64), "v": np.array(order, np.float64)})
    want = pd.merge_asof(left, right, on="t", direction=direction, allow_exact_matches=exact, tolerance=tol)
    assert cols["log_time"].tolist() == want["t"].tolist()
    cells_equal(pd.Series(np.ma.filled(cols["/b.data"], np.nan)), want["v"])


def test_publish_time_that_goes_backwards(tmp_path: Path) -> None:
    """time="publish_time": the left read whole and sorted stably, the right in batches."""
    path = tmp_path / "p.mcap"
    with polybag.Writer(path, profile="ros2") as w:
        sch = w.add_schema("std_msgs/msg/Float64", "ros2msg", ros2_definition("std_msgs/msg/Float64").encode())
        ch = {"/a": w.add_channel("/a", "cdr", sch), "/b": w.add_channel("/b", "cdr", sch)}
        for i in range(60):
            topic = "/a" if i % 3 else "/b"
            w.write(ch[topic], _F64.encode({"data": float(i)}), 1000 + i * 10, publish_time=1000 + i * 10 - (25 if i % 7 == 2 else 0))
    with polybag.open(path) as r:
        ours = aligned_columns(r, ["/a", "/b"], direction="nearest", time="publish_time")
        a = r.topic_columns("/a", time="publish_time")
        b = r.topic_columns("/b", time="publish_time")
    assert not np.all(np.diff(a["publish_time"]) >= 0)
    left = pd.DataFrame({"t": a["publish_time"], "x": a["data"]}).sort_values("t", kind="stable")
    right = pd.DataFrame({"t": b["publish_time"], "y": b["data"]}).sort_values("t", kind="stable")
    want = pd.merge_asof(left, right, on="t", direction="nearest")
    assert list(ours)[:3] == ["publish_time", "/a.data", "/b.publish_time"]
    assert ours["publish_time"].tolist() == want["t"].tolist() and ours["/a.data"].tolist() == want["x"].tolist()
    cells_equal(pd.Series(np.ma.filled(ours["/b.data"], np.nan)), want["y"])
