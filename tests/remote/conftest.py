"""Fixtures of the remote tests: the generated logs (once per session) and real servers on
127.0.0.1, one of each per session (so one per xdist worker): nginx for HTTP (``nginx``,
``web``; ``nginx_proxy``/``counted`` count requests and bytes) and SeaweedFS for S3
(``seaweed``).  The Python Range server of remote_helpers stays for what a real server does
not do (bodies cut short, objects changing size mid-read: tests/remote/test_http_transport.py)
and as the GCS emulator (tests/remote/test_gcs_xml.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from counting_proxy import CountingProxy, serve_proxy
from nginx import Nginx, serve_nginx
from remote_helpers import REMOTE, write_big
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


@pytest.fixture(scope="session")
def web(nginx: Nginx, nginx_root: Path, remote_dir: Path) -> str:
    """``remote_dir`` served by ``nginx``: the folder's URL, ``{nginx.url}/remote_dir`` (a
    link in ``nginx_root``: files the tests add to ``remote_dir`` later are served too)."""
    link = nginx_root / REMOTE
    if not link.is_symlink():
        link.symlink_to(remote_dir, target_is_directory=True)
    return f"{nginx.url}/{REMOTE}"


@pytest.fixture
def counted(nginx_proxy: CountingProxy, web: str) -> CountingProxy:
    """``nginx_proxy`` with its counts reset: ``remote_dir``'s files are at
    ``{counted.url}/remote_dir/NAME``."""
    nginx_proxy.reset()
    return nginx_proxy
