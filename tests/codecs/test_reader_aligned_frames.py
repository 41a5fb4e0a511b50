"""``r.to_pandas([...])`` / ``r.to_arrow([...])`` (issue 31): a list of topics is one table on
one time axis, the same as :func:`polybag.codecs.aligned.aligned_pandas` (which
``test_align_readers.py`` compares with pandas' own ``merge_asof``), for a bag, an MCAP, a
rosbag2 directory and a real ULog; the time as datetimes on request; the options that only
go with one topic, or only with several, are usage errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import polybag
from align_helpers import write_log
from polybag.codecs.aligned import aligned_arrow, aligned_pandas
from polybag.errors import UsageError

CORPORA = Path(__file__).resolve().parents[2].parent / "shared" / "corpora"
ULOG = CORPORA / "ulog" / "sample.ulg"


@pytest.fixture(params=["bag", "mcap-ros2", "rosbag2"])
def log(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    name = {"bag": "a.bag", "mcap-ros2": "a.mcap", "rosbag2": "a_dir"}[request.param]
    return write_log(tmp_path / name, request.param)


def test_a_list_of_topics_is_the_aligned_frame(log: Path) -> None:
    with polybag.open(str(log)) as r:
        got = r.to_pandas(["/imu", "/gps"], align="asof", tolerance="3ms", direction="nearest")
        want = aligned_pandas(r, ["/imu", "/gps"], align="asof", tolerance="3ms", direction="nearest")
        pd.testing.assert_frame_equal(got, want)
        assert got.index.name == "log_time" and "/gps.latitude" in got.columns
        assert got["/gps.latitude"].notna().any() and got["/gps.latitude"].isna().any()
        table = r.to_arrow(["/imu", "/gps"], tolerance="3ms", direction="nearest")
        assert table.equals(aligned_arrow(r, ["/imu", "/gps"], tolerance="3ms", direction="nearest"))
        assert table.num_rows == len(got) and table.column_names[0] == "log_time"
        # one topic, as before
        one = r.to_pandas("/imu")
        assert len(one) == len(got) and "angular_velocity.x" in one.columns


def test_datetimes_of_an_aligned_frame(log: Path) -> None:
    with polybag.open(str(log)) as r:
        plain = r.to_pandas(["/imu", "/gps"])
        dt = r.to_pandas(["/imu", "/gps"], datetimes=True)
        assert str(dt.index.dtype) == "datetime64[ns, UTC]" and dt.index.name == "log_time"
        assert dt["log_time_ns"].tolist() == plain.index.tolist()
        assert (dt.index.asi8 == plain.index.to_numpy()).all()
        t = r.to_arrow(["/imu", "/gps"], datetimes=True)
        assert t.column_names[:2] == ["log_time", "log_time_utc"]
        assert t.schema.field("log_time_utc").type == pa.timestamp("ns", tz="UTC")
        assert t.column("log_time_utc").cast(pa.int64()).to_pylist() == plain.index.tolist()


def test_options_that_do_not_go_together_are_said(log: Path) -> None:
    with polybag.open(str(log)) as r:
        with pytest.raises(UsageError, match="for several topics"):
            r.to_pandas("/imu", align="asof")
        with pytest.raises(UsageError, match="keep_times and arrays are for one topic"):
            r.to_pandas(["/imu", "/gps"], keep_times=True)
        with pytest.raises(UsageError, match="2 topics or more"):
            r.to_arrow(["/imu"])
        with pytest.raises(TypeError, match="unknown options: tolerence"):
            r.to_pandas(["/imu", "/gps"], tolerence="1ms")


def test_a_real_ulog_two_topics(tmp_path: Path) -> None:
    if not ULOG.is_file():
        pytest.skip(f"{ULOG} not in the corpora")
    with polybag.open(str(ULOG)) as r:
        got = r.to_pandas(["vehicle_attitude", "vehicle_local_position"], tolerance="50ms")
        want = aligned_pandas(r, ["vehicle_attitude", "vehicle_local_position"], tolerance="50ms")
        pd.testing.assert_frame_equal(got, want)
        att = r.to_pandas("vehicle_attitude")  # the single-topic call with its multi_id default
        assert len(got) == len(att)
        assert np.array_equal(got.index.to_numpy(), att.index.to_numpy())
        dt = r.to_pandas(["vehicle_attitude", "vehicle_local_position"], time="timestamp", datetimes=True)
        assert dt.index.name == "timestamp" and "timestamp_us" in dt.columns
        assert str(dt.index.dtype) == "datetime64[ns, UTC]"
        assert (dt.index.asi8 // 1000 == dt["timestamp_us"].to_numpy()).all()
        t = r.to_arrow([("vehicle_attitude", 0), "vehicle_local_position"])
        assert t.num_rows == len(got)
