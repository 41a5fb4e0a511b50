"""polybag.dask.read_topics: one aligned partition per file, each equal to pandas'
merge_asof of the file's two topics, with the file column read_topic has."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import polybag
import polybag.dask as pbd
from align_helpers import cells_equal, pandas_route, write_log
from polybag.codecs.aligned import aligned_pandas
from polybag.errors import UsageError

pytest.importorskip("dask.dataframe")


def _files(tmp_path: Path) -> list[str]:
    """An MCAP file and a rosbag2 directory of the same types (a Dask frame has one set of columns)."""
    return [str(write_log(tmp_path / "one.mcap", "mcap-ros2")), str(write_log(tmp_path / "two_dir", "rosbag2"))]


def test_one_partition_per_file_like_merge_asof(tmp_path: Path) -> None:
    files = _files(tmp_path)
    df = pbd.read_topics(files, ["/imu", "/gps"], direction="nearest", tolerance="30ms")
    assert df.npartitions == 2
    got = df.compute(scheduler="sync")
    assert str(got["file"].dtype) == "category" and list(got["file"].cat.categories) == files
    for path in files:
        part = got[got["file"] == path].drop(columns="file")
        with polybag.open(path) as r:
            want = pandas_route(r, "/imu", "/gps", direction="nearest", tolerance=30_000_000)
        assert part.index.tolist() == want.index.tolist() and part.index.name == "log_time"
        assert sorted(part.columns) == sorted(want.columns)
        for c in want.columns:
            cells_equal(part[c], want[c])
    # the meta the driver learnt is what the partitions hold
    assert list(df.columns) == list(got.columns)
    assert [str(t) for t in df.dtypes] == [str(t) for t in got.dtypes]


def test_resample_and_no_file_column(tmp_path: Path) -> None:
    files = _files(tmp_path)
    df = pbd.read_topics(files, ["/imu", "/gps"], ["/imu.angular_velocity.x", "/gps.latitude"], align="resample:20ms", file_column=False)
    got = df.compute(scheduler="sync")
    assert "file" not in got.columns
    parts = []
    for path in files:
        with polybag.open(path) as r:
            parts.append(aligned_pandas(r, ["/imu", "/gps"], ["/imu.angular_velocity.x", "/gps.latitude"], align="resample:20ms"))
    want = pd.concat(parts)
    assert got.index.tolist() == want.index.tolist()
    assert np.allclose(got["/gps.latitude"].to_numpy(), want["/gps.latitude"].to_numpy(), equal_nan=True)


def test_bad_options_fail_in_the_driver(tmp_path: Path) -> None:
    files = _files(tmp_path)
    with pytest.raises(UsageError, match="resample:<period>"):
        pbd.read_topics(files, ["/imu", "/gps"], align="sideways")
    with pytest.raises(UsageError, match="no topic '/nope'"):
        pbd.read_topics(files, ["/imu", "/nope"])
