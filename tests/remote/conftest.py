"""Fixtures of the remote tests: the generated logs (once per session), an HTTP server
honouring Range requests and moto's S3 server, both on 127.0.0.1."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from counting_proxy import CountingProxy, serve_proxy
from nginx import Nginx, serve_nginx
from remote_helpers import RangeServer, serve, write_big
from seaweed import SeaweedS3, start, upload

import polybag


@pytest.fixture(scope="session")
def remote_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The generated logs: 200 MB indexed MCAP and bag, small ones, an unindexed bag, a ULog."""
    d = tmp_path_factory.mktemp("remote")
    write_big(d / "big.mcap")
    write_big(d / "big.bag")
    write_big(d / "mid.mcap", n=150)
    write_big(d / "mid.bag", n=150)
    # an unindexed bag: the index section cut off and index_pos zeroed in the header
    data = bytearray((d / "mid.bag").read_bytes())
    with polybag.open(str(d / "mid.bag")) as r:
        index_pos = r.index_pos  # type: ignore[attr-defined]
    head = bytes(data[13 : 13 + 4096])
    i = head.index(b"index_pos=") + 10
    data[13 + i : 13 + i + 8] = bytes(8)
    (d / "unindexed.bag").write_bytes(bytes(data[:index_pos]))
    from ulog_helpers import synthetic_log

    (d / "flight.ulg").write_bytes(synthetic_log()[0])
    return d


@pytest.fixture(scope="session")
def http(remote_dir: Path) -> Iterator[RangeServer]:
    yield from serve(remote_dir)


@pytest.fixture(scope="session")
def s3(remote_dir: Path) -> Iterator[dict[str, Any]]:
    """moto's S3 server with bucket ``logs`` holding the mid-size files; s3fs options."""
    pytest.importorskip("s3fs")
    from moto.server import ThreadedMotoServer

    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    opts = {
        "key": "testing",
        "secret": "testing",
        "client_kwargs": {"endpoint_url": f"http://{host}:{port}", "region_name": "us-east-1"},
    }
    import boto3
    import s3fs

    client = boto3.client(
        "s3",
        endpoint_url=f"http://{host}:{port}",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )
    client.create_bucket(Bucket="logs")
    for name in ("mid.mcap", "mid.bag", "flight.ulg"):
        client.upload_file(str(remote_dir / name), "logs", name)
    s3fs.S3FileSystem.clear_instance_cache()
    try:
        yield opts
    finally:
        server.stop()


@pytest.fixture(scope="session")
def nginx_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder nginx serves (tests put their files there); empty at first."""
    return tmp_path_factory.mktemp("nginx_root")


@pytest.fixture(scope="session")
def nginx(nginx_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nginx]:
    """nginx (Debian package) on 127.0.0.1 serving ``nginx_root``; skips when missing, except in CI."""
    yield from serve_nginx(nginx_root, tmp_path_factory.mktemp("nginx_prefix"))


@pytest.fixture(scope="session")
def nginx_proxy(nginx: Nginx) -> Iterator[CountingProxy]:
    """A counting proxy in front of ``nginx``: requests and body bytes per path."""
    yield from serve_proxy(("127.0.0.1", nginx.port))


@pytest.fixture(scope="session")
def seaweed(remote_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedS3]:
    """A real S3 server (SeaweedFS, tests/remote/seaweed.py) on 127.0.0.1, one per xdist
    worker, with bucket ``logs`` holding the mid-size MCAP and bag and the ULog."""
    pytest.importorskip("s3fs")
    with start(tmp_path_factory.mktemp("seaweed")) as srv:
        upload(srv, "logs", {n: remote_dir / n for n in ("mid.mcap", "mid.bag", "flight.ulg")})
        import s3fs

        s3fs.S3FileSystem.clear_instance_cache()
        yield srv
