"""Remote rosbag2 directories (polybag.formats.rosbag2.remote): over HTTP and S3 (moto)."""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from remote_helpers import RangeServer
from remote_helpers import serve as serve_dir

import polybag


def _layouts(tmp: Path) -> list[Path]:
    """The local layouts of remote bags left in the temporary folder ``tmp``."""
    return list(tmp.glob("polybag-rosbag2-*"))

N = 3000


def _write(out: Path, storage: str) -> Path:
    with polybag.Writer(str(out), format="rosbag2", storage=storage) as w:
        s = w.add_schema("std_msgs/msg/Float64", "ros2msg", b"float64 data\n")
        a = w.add_channel("/a", "cdr", s)
        b = w.add_channel("/b", "cdr", s)
        for i in range(N):
            w.write(a, b"\x00\x01\x00\x00" + struct.pack("<d", i * 0.5), log_time=10**18 + i * 1000)
            if i % 3 == 0:
                w.write(b, b"\x00\x01\x00\x00" + struct.pack("<d", -i), log_time=10**18 + i * 1000 + 1)
    return out


@pytest.fixture(scope="module")
def bags(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("rosbag2")
    _write(d / "run_mcap", "mcap")
    _write(d / "run_sqlite", "sqlite3")
    return d


@pytest.fixture(scope="module")
def server(bags: Path) -> Iterator[RangeServer]:
    yield from serve_dir(bags)


def _rows(r: polybag.Reader) -> list[tuple[str, int, bytes]]:
    return [(m.channel.topic, m.log_time, bytes(m.data)) for m in r.messages()]


@pytest.mark.parametrize("name", ["run_mcap", "run_sqlite"])
@pytest.mark.parametrize("tail", ["/", "/metadata.yaml"])
def test_remote_rosbag2_equals_local(
    server: RangeServer, bags: Path, name: str, tail: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with polybag.open(str(bags / name)) as local:
        expect = _rows(local)
        summary = local.summary
    with polybag.open(f"{server.url}/{name}{tail}") as r:
        assert r.format == "rosbag2"
        assert r.summary.message_count == summary.message_count == N + N // 3
        assert _rows(r) == expect
        assert r.path == f"{server.url}/{name}{tail}"
        tmp = r.local_layout  # type: ignore[attr-defined]
        assert os.path.isdir(tmp)
    assert not os.path.exists(tmp)  # the local layout goes with the reader
    assert not _layouts(tmp_path)


def test_mcap_storage_is_read_by_ranges(server: RangeServer, bags: Path) -> None:
    (mcap,) = [p for p in (bags / "run_mcap").iterdir() if p.suffix == ".mcap"]
    server.reset()
    with polybag.open(f"{server.url}/run_mcap/") as r:
        assert r.summary.message_count == N + N // 3
    # metadata.yaml, the 16-byte head, then the MCAP's head and summary: not the whole file
    assert (
        server.bytes_served < 2 * 16384 + 65536 + (bags / "run_mcap" / "metadata.yaml").stat().st_size + 200
    )
    assert server.bytes_served < mcap.stat().st_size


def test_sqlite_storage_is_fetched_whole(server: RangeServer, bags: Path) -> None:
    (db,) = [p for p in (bags / "run_sqlite").iterdir() if p.suffix == ".db3"]
    server.reset()
    with polybag.open(f"{server.url}/run_sqlite/") as r:
        assert r.summary.message_count == N + N // 3
    assert server.bytes_served >= db.stat().st_size


def test_missing_metadata_is_a_clear_error(server: RangeServer) -> None:
    with pytest.raises(polybag.PolybagError, match=r"nothere/metadata.yaml: cannot open: no such object"):
        polybag.open(f"{server.url}/nothere/")


def test_a_missing_storage_file_is_a_clear_error(
    server: RangeServer, bags: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    broken = bags / "broken"
    if not broken.exists():
        shutil.copytree(bags / "run_mcap", broken)
        for p in broken.iterdir():
            if p.suffix == ".mcap":
                p.unlink()
    with pytest.raises(polybag.PolybagError, match="cannot open: no such object"):
        polybag.open(f"{server.url}/broken/")
    assert not _layouts(tmp_path)  # nothing left of the layout


def test_a_storage_path_leaving_the_directory_is_refused(server: RangeServer, bags: Path) -> None:
    evil = bags / "evil"
    evil.mkdir(exist_ok=True)
    text = (bags / "run_mcap" / "metadata.yaml").read_text()
    (mcap,) = [p.name for p in (bags / "run_mcap").iterdir() if p.suffix == ".mcap"]
    (evil / "metadata.yaml").write_text(text.replace(mcap, "../run_mcap/" + mcap))
    with pytest.raises(polybag.FormatError, match="outside the bag directory|leaves the bag directory"):
        polybag.open(f"{server.url}/evil/")


def test_s3_rosbag2_directory(s3: dict[str, Any], bags: Path) -> None:
    import boto3

    ep = s3["client_kwargs"]["endpoint_url"]
    client = boto3.client(
        "s3",
        endpoint_url=ep,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )
    for name in ("run_mcap", "run_sqlite"):
        for p in (bags / name).iterdir():
            client.upload_file(str(p), "logs", f"{name}/{p.name}")
    for name in ("run_mcap", "run_sqlite"):
        with polybag.open(str(bags / name)) as local:
            expect = _rows(local)
        with polybag.open(f"s3://logs/{name}/", storage_options=s3) as r:
            assert _rows(r) == expect
