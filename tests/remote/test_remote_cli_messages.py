"""CLI messages about remote and batch inputs (issue 30), on the real servers (nginx, SeaweedFS):
each error or warning line names its input once; a remote rosbag2 directory reports what
fetching it cost (``info --stats`` / ``info --json``'s "fetched") as a remote file does."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from nginx import Nginx
from remote_helpers import write_big
from seaweed import SeaweedS3, upload

import polybag


def _polybag(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "polybag", *args], capture_output=True, text=True, timeout=300, env=env, cwd=cwd
    )


def _write_rosbag2(out: Path) -> None:
    with polybag.Writer(str(out), format="rosbag2", storage="mcap") as w:
        s = w.add_schema("std_msgs/msg/Float64", "ros2msg", b"float64 data\n")
        a = w.add_channel("/a", "cdr", s)
        for i in range(300):
            w.write(a, b"\x00\x01\x00\x00" + struct.pack("<d", i * 0.5), log_time=10**18 + i * 1000)


def _lines_naming_once(stderr: str, path: str, expect: int) -> None:
    lines = [ln for ln in stderr.splitlines() if path in ln]
    assert len(lines) == expect, stderr
    for ln in lines:
        assert ln.count(path) == 1, ln


def test_batch_convert_names_a_damaged_input_once(tmp_path: Path) -> None:
    write_big(tmp_path / "good.mcap", n=20)
    data = bytearray((tmp_path / "good.mcap").read_bytes())
    mid = len(data) // 2
    data[mid : mid + 64] = b"\xff" * 64  # inside the first chunk: its CRC fails
    (tmp_path / "bad.mcap").write_bytes(bytes(data))
    p = _polybag(tmp_path, "convert", "--jobs", "2", "bad.mcap", "good.mcap", "out")
    assert p.returncode == 1, p.stderr
    assert "warning: the input is damaged: bad.mcap: offset" in p.stderr
    _lines_naming_once(p.stderr, "bad.mcap", 1)
    p = _polybag(tmp_path, "convert", "--strict", "--jobs", "2", "bad.mcap", "missing.mcap", "good.mcap", "out2")
    assert p.returncode == 1, p.stderr
    assert "error: bad.mcap: offset" in p.stderr
    assert "error: missing.mcap: cannot open" in p.stderr
    _lines_naming_once(p.stderr, "bad.mcap", 1)
    _lines_naming_once(p.stderr, "missing.mcap", 1)
    assert (tmp_path / "out2" / "good.mcap").stat().st_size > 0


@pytest.mark.parametrize("jobs", [[], ["--jobs", "2"]])
def test_convert_of_a_missing_seaweed_object_names_it_once(
    seaweed: SeaweedS3, remote_dir: Path, tmp_path: Path, jobs: list[str]
) -> None:
    url = "s3://logs/no-such-object.mcap"
    args = ["convert", *jobs, url, str(remote_dir / "mid.mcap"), "out"] if jobs else ["convert", url, "o.mcap"]
    p = subprocess.run(
        [sys.executable, "-m", "polybag", *args], capture_output=True, text=True, timeout=300, env=seaweed.env(), cwd=tmp_path
    )
    assert p.returncode in (1, 3), p.stderr
    assert f"error: {url}: cannot open" in p.stderr
    _lines_naming_once(p.stderr, url, 1)


def _check_fetched(cwd: Path, url: str, env: dict[str, str] | None, local: Path) -> dict[str, int]:
    """info --json and --stats of the remote directory: 'fetched' is the sum over its files."""
    p = _polybag(cwd, "info", "--json", url, env=env)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["message_count"] == 300
    f = doc["fetched"]
    total = sum(x.stat().st_size for x in local.iterdir())  # metadata.yaml and the storage file
    assert f["size"] == total
    assert 0 < f["bytes_fetched"] <= f["size"]
    assert f["requests"] >= 2  # metadata.yaml, then the MCAP's ranges
    p = _polybag(cwd, "info", "--stats", url, env=env)
    assert p.returncode == 0, p.stderr
    stats = [ln for ln in p.stderr.splitlines() if "fetched" in ln]
    assert len(stats) == 1, p.stderr
    assert stats[0].startswith("polybag info: fetched ") and f"of {total} bytes in " in stats[0]
    return dict(f)


def test_nginx_rosbag2_directory_reports_fetched(nginx: Nginx, nginx_root: Path, tmp_path: Path) -> None:
    name = f"h9run-{os.getpid()}"
    if not (nginx_root / name).exists():
        _write_rosbag2(nginx_root / name)
    _check_fetched(tmp_path, f"{nginx.url}/{name}/", None, nginx_root / name)


def test_seaweed_rosbag2_directory_reports_fetched(seaweed: SeaweedS3, tmp_path: Path) -> None:
    d = tmp_path / "run"
    _write_rosbag2(d)
    key = f"h9/{tmp_path.name}"
    upload(seaweed, "logs", {f"{key}/{p.name}": p for p in d.iterdir()})
    _check_fetched(tmp_path, f"s3://logs/{key}/", seaweed.env(), d)
