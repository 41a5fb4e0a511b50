"""Issue 32 (BUG-B): a command writing to S3 reports the bytes it uploaded, not ``0 B``
(the summary line ``polybag convert: N messages, SIZE written to s3://...``), for a file
output and for a rosbag2 directory output (the SeaweedFS server of ``seaweed``)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from seaweed import SeaweedS3

from polybag.cli.text import format_size

s3fs = pytest.importorskip("s3fs")

ROBOT = Path(__file__).resolve().parents[2] / "samples" / "robot.bag"


def _polybag(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "polybag", *args], capture_output=True, text=True, timeout=300, env=env, cwd=cwd
    )


@pytest.fixture
def fs(seaweed: SeaweedS3) -> Any:
    s3fs.S3FileSystem.clear_instance_cache()
    f = s3fs.S3FileSystem(**seaweed.storage_options())
    yield f
    f.invalidate_cache()


def _said(stderr: str, command: str, url: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.startswith(f"polybag {command}: ") and "written to" in ln]
    assert len(lines) == 1, stderr
    m = re.fullmatch(rf"polybag {command}: \d+ messages, (.+) written to {re.escape(url)} in \d+\.\d s", lines[0])
    assert m is not None, lines[0]
    return m.group(1)


@pytest.mark.parametrize("name", ["run1.mcap", "run1.bag"])
def test_convert_to_s3_reports_the_bytes_uploaded(
    seaweed: SeaweedS3, fs: Any, tmp_path: Path, name: str
) -> None:
    url = f"s3://logs/issue32/{name}"
    p = _polybag(seaweed.env(), tmp_path, "convert", str(ROBOT), url, "--no-progress")
    assert p.returncode == 0, p.stderr
    size = int(fs.size(url))
    assert size > 0
    assert _said(p.stderr, "convert", url) == format_size(size)


def test_rosbag2_directory_to_s3_reports_its_files(seaweed: SeaweedS3, fs: Any, tmp_path: Path) -> None:
    url = "s3://logs/issue32/run_ros2"
    p = _polybag(seaweed.env(), tmp_path, "convert", str(ROBOT), url, "--format", "rosbag2", "--no-progress")
    assert p.returncode == 0, p.stderr
    total = sum(int(fs.size(f)) for f in fs.find(url))
    assert total > 0
    assert _said(p.stderr, "convert", url) == format_size(total)


def test_uploaded_bytes_unknown_url_is_none() -> None:
    from polybag.io.upload import uploaded_bytes

    assert uploaded_bytes("s3://logs/issue32/never-written.mcap") is None
