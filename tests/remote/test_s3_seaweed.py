"""Logs on a real S3 server (SeaweedFS, started by the ``seaweed`` fixture: tests/remote/seaweed.py)
read and written through polybag's own remote layer: the library with storage options, and
the CLI with the environment a user of an S3-compatible store sets."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from seaweed import SeaweedS3, upload

import polybag
from polybag.io.remote_source import RemoteSource

pytest.importorskip("s3fs")

Row = tuple[str, int, bytes]


def _rows(r: polybag.Reader) -> list[Row]:
    return [(m.channel.topic, m.log_time, bytes(m.data)) for m in r.messages()]


def _local_rows(path: Path) -> list[Row]:
    with polybag.open(str(path)) as r:
        return _rows(r)


def _polybag(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "polybag", *args], capture_output=True, text=True, timeout=300, env=env, cwd=cwd
    )


@pytest.fixture(scope="module")
def rosbag2_dirs(seaweed: SeaweedS3, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two small rosbag2 directories (mcap and sqlite3 storage), uploaded under their names."""
    d = tmp_path_factory.mktemp("sw_rosbag2")
    for name, storage in (("run_mcap", "mcap"), ("run_sqlite", "sqlite3")):
        with polybag.Writer(str(d / name), format="rosbag2", storage=storage) as w:
            s = w.add_schema("std_msgs/msg/Float64", "ros2msg", b"float64 data\n")
            a = w.add_channel("/a", "cdr", s)
            b = w.add_channel("/b", "cdr", s)
            for i in range(600):
                w.write(a, b"\x00\x01\x00\x00" + struct.pack("<d", i * 0.5), log_time=10**18 + i * 1000)
                if i % 3 == 0:
                    w.write(b, b"\x00\x01\x00\x00" + struct.pack("<d", -i), log_time=10**18 + i * 1000 + 1)
        upload(seaweed, "logs", {f"{name}/{p.name}": p for p in (d / name).iterdir()})
    return d


@pytest.mark.parametrize(("name", "fmt", "count"), [("mid.mcap", "mcap", 165), ("mid.bag", "bag", 165), ("flight.ulg", "ulog", None)])
def test_seaweed_file_reads_like_the_local_file(
    seaweed: SeaweedS3, remote_dir: Path, name: str, fmt: str, count: int | None
) -> None:
    expect = _local_rows(remote_dir / name)
    assert expect
    with polybag.open(f"s3://logs/{name}", storage_options=seaweed.storage_options()) as r:
        assert isinstance(r.source, RemoteSource)
        assert r.format == fmt
        assert r.source.size == (remote_dir / name).stat().st_size
        if count is not None:
            assert r.summary.message_count == count
        assert _rows(r) == expect
        st = r.source.stats
    assert st is not None and st["requests"] >= 1
    assert st["bytes_fetched"] >= st["size"] * 0.99  # a full read fetches (about) the whole object


def test_seaweed_mcap_summary_fetches_little(seaweed: SeaweedS3, remote_dir: Path) -> None:
    size = (remote_dir / "mid.mcap").stat().st_size
    with polybag.open("s3://logs/mid.mcap", storage_options=seaweed.storage_options()) as r:
        assert r.summary.message_count == 165
        st = r.source.stats
    assert st is not None and st["bytes_fetched"] < 300_000 < size


@pytest.mark.parametrize("name", ["run_mcap", "run_sqlite"])
def test_seaweed_rosbag2_directory(seaweed: SeaweedS3, rosbag2_dirs: Path, name: str) -> None:
    expect = _local_rows(rosbag2_dirs / name)
    assert len(expect) == 800
    with polybag.open(f"s3://logs/{name}/", storage_options=seaweed.storage_options()) as r:
        assert r.format == "rosbag2"
        assert _rows(r) == expect


@pytest.mark.parametrize("name", ["mid.mcap", "mid.bag", "flight.ulg"])
def test_seaweed_cli_info(seaweed: SeaweedS3, remote_dir: Path, tmp_path: Path, name: str) -> None:
    local = _polybag(seaweed.env(), tmp_path, "info", "--json", str(remote_dir / name))
    assert local.returncode == 0, local.stderr
    p = _polybag(seaweed.env(), tmp_path, "info", "--json", f"s3://logs/{name}")
    assert p.returncode == 0, p.stderr
    want, got = json.loads(local.stdout), json.loads(p.stdout)
    assert got["message_count"] == want["message_count"] > 0
    assert got["file_size"] == want["file_size"]
    assert got["fetched"]["size"] == got["file_size"]
    assert got["fetched"]["requests"] >= 1
    p = _polybag(seaweed.env(), tmp_path, "info", f"s3://logs/{name}")
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr


def test_seaweed_cli_info_of_a_rosbag2_directory(seaweed: SeaweedS3, rosbag2_dirs: Path, tmp_path: Path) -> None:
    p = _polybag(seaweed.env(), tmp_path, "info", "--json", "s3://logs/run_mcap/")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["message_count"] == 800


@pytest.mark.parametrize("src", ["mid.bag", "mid.mcap"])
def test_seaweed_cli_convert_to_s3_reads_back_equal(
    seaweed: SeaweedS3, remote_dir: Path, tmp_path: Path, src: str
) -> None:
    url = f"s3://logs/out/{tmp_path.name}-{Path(src).stem}.mcap"
    p = _polybag(seaweed.env(), tmp_path, "convert", str(remote_dir / src), url)
    assert p.returncode == 0, p.stderr
    assert url in p.stdout
    assert list(tmp_path.iterdir()) == []  # nothing written locally
    key = url.removeprefix("s3://logs/")
    head = seaweed.client().head_object(Bucket="logs", Key=key)
    assert head["ContentLength"] > 0
    body = seaweed.client().get_object(Bucket="logs", Key=key, Range="bytes=0-7")["Body"].read()
    assert body == b"\x89MCAP0\r\n"
    expect = sorted(_local_rows(remote_dir / src), key=lambda x: (x[1], x[0]))
    with polybag.open(url, storage_options=seaweed.storage_options()) as r:
        assert r.format == "mcap"
        assert sorted(_rows(r), key=lambda x: (x[1], x[0])) == expect


def test_seaweed_wrong_secret_is_a_polybag_error(seaweed: SeaweedS3, tmp_path: Path) -> None:
    """A wrong secret is a PolybagError naming the URL (the open's first request is a
    ranged GET, whose answer says why: the signature; tests/remote/test_remote_cli_habits.py
    checks the endpoint and credential source in it)."""
    with pytest.raises(polybag.PolybagError, match=r"s3://logs/mid.mcap: cannot open: PermissionError: (Forbidden|The request signature)"):
        polybag.open("s3://logs/mid.mcap", storage_options=seaweed.storage_options(secret="wrong"))
    p = _polybag(seaweed.env(secret="wrong"), tmp_path, "info", "s3://logs/mid.mcap")
    assert p.returncode == 3
    assert "polybag info: error: s3://logs/mid.mcap: cannot open: PermissionError: " in p.stderr
    assert "signature" in p.stderr or "Forbidden" in p.stderr
    assert "Traceback" not in p.stderr


def test_seaweed_missing_object_is_a_clear_error(seaweed: SeaweedS3) -> None:
    with pytest.raises(polybag.PolybagError, match="s3://logs/nope.mcap: cannot open"):
        polybag.open("s3://logs/nope.mcap", storage_options=seaweed.storage_options())


def test_seaweed_has_no_multi_range(seaweed: SeaweedS3) -> None:
    """SeaweedFS answers a multi-range GET with the whole object (200), as S3 does: why
    polybag sends S3 one range a request.  (Pins the server behaviour the tests rely on.)"""
    r: dict[str, Any] = seaweed.client().get_object(Bucket="logs", Key="mid.mcap", Range="bytes=0-9,20-29")
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert r["ContentLength"] == r["Body"].read().__len__() > 30
