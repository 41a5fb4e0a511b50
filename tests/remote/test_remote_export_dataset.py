"""``polybag export -F parquet -o s3://...`` (issue 31): the Parquet dataset written under a URL
prefix as it is in a local directory (``topic=<table>/[file=<input>/]part-0.parquet``), on a
real S3 server (SeaweedFS); existing part files are replaced only with --force."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from seaweed import SeaweedS3

from align_helpers import write_log

pytest.importorskip("s3fs")


def _polybag(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "polybag", *args], capture_output=True, text=True, timeout=300, env=env, cwd=cwd)


def test_a_dataset_under_a_url_prefix(seaweed: SeaweedS3, tmp_path: Path) -> None:
    import s3fs

    write_log(tmp_path / "a.bag", "bag")
    write_log(tmp_path / "b.bag", "bag")
    env = seaweed.env()
    p = _polybag(env, tmp_path, "export", "a.bag", "-F", "parquet", "-o", "s3://logs/ds1/")
    assert p.returncode == 0, p.stderr
    assert "s3://logs/ds1/topic=imu/part-0.parquet" in p.stdout
    fs = s3fs.S3FileSystem(**seaweed.storage_options())
    assert sorted(fs.find("logs/ds1")) == ["logs/ds1/topic=gps/part-0.parquet", "logs/ds1/topic=imu/part-0.parquet"]
    with fs.open("logs/ds1/topic=imu/part-0.parquet", "rb") as f:
        t = pq.read_table(f)
    assert t.num_rows == 120 and t.column_names[0] == "log_time"
    assert t.schema.metadata[b"polybag.topic"] == b"/imu"
    # again: the part files exist, refused without --force, replaced with it
    p = _polybag(env, tmp_path, "export", "a.bag", "-F", "parquet", "-o", "s3://logs/ds1/")
    assert p.returncode != 0 and "output exists" in p.stderr and "Traceback" not in p.stderr
    assert _polybag(env, tmp_path, "export", "a.bag", "-F", "parquet", "-o", "s3://logs/ds1/", "--force").returncode == 0
    # two inputs: one partition per file, side by side
    p = _polybag(env, tmp_path, "export", "a.bag", "b.bag", "-F", "parquet", "-o", "s3://logs/ds2/")
    assert p.returncode == 0, p.stderr
    assert sorted(fs.find("logs/ds2")) == [
        f"logs/ds2/topic={t}/file={f}/part-0.parquet" for t in ("gps", "imu") for f in ("a", "b")
    ]
