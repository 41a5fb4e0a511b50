"""``polybag export --align`` (issue 31): several topics on one time axis as one table, the
same as :func:`polybag.codecs.aligned.aligned_pandas` of the log, in csv and parquet (read
back by pandas, DuckDB and polars), written atomically and replaced only with --force."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import polybag
from align_helpers import write_log
from polybag import ops
from polybag.codecs.aligned import aligned_pandas
from polybag.errors import OutputExistsError, UsageError

KINDS = ["bag", "mcap-ros2", "rosbag2"]


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "polybag", "export", *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )


def _log(tmp_path: Path, kind: str) -> Path:
    name = {"bag": "log.bag", "mcap-ros2": "log.mcap", "rosbag2": "log_r2"}[kind]
    return write_log(tmp_path / name, kind)


def _missing(v: object) -> bool:
    return v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))


def _same(a: object, b: object) -> bool:
    if _missing(a) or _missing(b):
        return _missing(a) and _missing(b)
    if isinstance(a, float) or isinstance(b, float):
        return bool(a == pytest.approx(b))
    return bool(a == b)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_the_cli_table_is_the_library_frame(tmp_path: Path, kind: str, fmt: str) -> None:
    log = _log(tmp_path, kind)
    p = _cli(tmp_path, str(log), "--align", "asof", "--tolerance", "0.003", "--topics", "/imu", "/gps",
             "--fields", "/imu.angular_velocity.x,/gps.latitude,/gps.status.service", "-F", fmt, "-o", "out")
    assert p.returncode == 0, p.stderr
    assert "/imu + /gps -> out/aligned." in p.stdout and "rows" in p.stdout
    with polybag.open(str(log)) as r:
        want = aligned_pandas(r, ["/imu", "/gps"], ["/imu.angular_velocity.x", "/gps.latitude", "/gps.status.service"],
                              tolerance="3ms")
    path = tmp_path / "out" / f"aligned.{fmt}"
    got = pd.read_csv(path) if fmt == "csv" else pd.read_parquet(path)
    assert list(got.columns) == ["log_time", *want.columns]
    assert got["log_time"].tolist() == want.index.tolist()
    for c in want.columns:
        assert all(_same(a, b) for a, b in zip(want[c].tolist(), got[c].tolist())), c
    # some rows matched, some did not (the 3 ms tolerance)
    assert want["/gps.latitude"].notna().any() and want["/gps.latitude"].isna().any()


def test_parquet_reads_in_duckdb_and_polars_with_its_metadata(tmp_path: Path) -> None:
    duckdb = pytest.importorskip("duckdb")
    pl = pytest.importorskip("polars")
    import pyarrow.parquet as pq

    log = _log(tmp_path, "bag")
    res = ops.export_aligned(str(log), tmp_path / "o", topics=["/imu", "/gps"], format="parquet", align="nearest")
    path = Path(res.tables[0].path)
    with polybag.open(str(log)) as r:
        want = aligned_pandas(r, ["/imu", "/gps"], align="nearest")
    n = duckdb.sql(f"select count(*) from read_parquet('{path}')").fetchall()[0][0]
    assert n == len(want) == res.tables[0].rows
    lat = duckdb.sql(f'select "/gps.latitude" from read_parquet(\'{path}\') order by log_time').fetchnumpy()
    assert np.allclose(np.asarray(lat["/gps.latitude"], dtype=float), want["/gps.latitude"].to_numpy(dtype=float))
    frame = pl.read_parquet(path)
    assert frame.height == len(want) and frame.columns[0] == "log_time"
    assert frame["/gps.position_covariance[8]"].dtype == pl.Float64  # a fixed array: one column per item
    meta = pq.read_schema(path).metadata
    assert json.loads(meta[b"polybag.topics"]) == ["/imu", "/gps"]
    assert json.loads(meta[b"polybag.align"])["align"] == "nearest"


def test_resample_and_the_time_choice(tmp_path: Path) -> None:
    log = _log(tmp_path, "mcap-ros2")
    p = _cli(tmp_path, str(log), "--align", "resample:50ms", "--time", "header.stamp", "--topics", "/imu,/gps", "-o", "o")
    assert p.returncode == 0, p.stderr
    got = pd.read_csv(tmp_path / "o" / "aligned.csv")
    with polybag.open(str(log)) as r:
        want = aligned_pandas(r, ["/imu", "/gps"], align="resample:50ms", time="header.stamp")
    assert got.columns[0] == "header.stamp"
    assert got["header.stamp"].tolist() == want.index.tolist()
    assert np.allclose(got["/imu.linear_acceleration.z"], want["/imu.linear_acceleration.z"], equal_nan=True)


def test_replaced_only_with_force_and_errors_said(tmp_path: Path) -> None:
    log = _log(tmp_path, "bag")
    assert _cli(tmp_path, str(log), "--align", "asof", "--topics", "/imu", "/gps", "-o", "o").returncode == 0
    p = _cli(tmp_path, str(log), "--align", "asof", "--topics", "/imu", "/gps", "-o", "o")
    assert p.returncode != 0 and "output exists" in p.stderr and "Traceback" not in p.stderr
    assert _cli(tmp_path, str(log), "--align", "asof", "--topics", "/imu", "/gps", "-o", "o", "--force").returncode == 0
    (tmp_path / "o" / "aligned.csv").unlink()
    (tmp_path / "o" / "aligned.csv").symlink_to(tmp_path / "elsewhere.csv")
    (tmp_path / "elsewhere.csv").write_text("keep\n")
    p = _cli(tmp_path, str(log), "--align", "asof", "--topics", "/imu", "/gps", "-o", "o", "--force")
    assert p.returncode != 0 and "Traceback" not in p.stderr
    assert (tmp_path / "elsewhere.csv").read_text() == "keep\n"  # never written through the link
    for args, says in [
        (["--topics", "/imu"], "two or more topic names"),
        (["--topics", "/imu", "/nope"], "/nope"),
        (["--topics", "/imu", "/gps", "-F", "jsonl"], "csv or parquet"),
        (["--topics", "/imu", "/gps", "--tolerance", "soon"], "not a length of time"),
        (["--topics", "/imu", "/gps", "--start", "1"], "--start/--end"),
    ]:
        p = _cli(tmp_path, str(log), "--align", "asof", *args, "-o", "e")
        assert p.returncode == 2, (args, p.stderr)
        assert says in p.stderr and "Traceback" not in p.stderr, (args, p.stderr)
    with pytest.raises(UsageError, match="two or more"):
        ops.export_aligned(str(log), tmp_path / "x", topics=["/imu"])
    with pytest.raises(OutputExistsError):
        ops.export_aligned(str(log), tmp_path / "o", topics=["/imu", "/gps"])
