"""A rosbag2 directory named by a URL without its trailing slash (``http://host/run``,
``s3://bucket/run``): the object is not there (404, a redirect to a listing, a prefix), so
polybag probes ``URL/metadata.yaml`` (one request) and says the one clear thing to do, on a
real nginx and a real S3 server (SeaweedFS); with the slash the directory opens."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from counting_proxy import CountingProxy
from seaweed import SeaweedS3, upload

import polybag
from polybag.errors import PolybagError

HINT = "URL names a rosbag2 directory: end it with /"


def _write_rosbag2(out: Path) -> None:
    with polybag.Writer(str(out), format="rosbag2", storage="mcap") as w:
        s = w.add_schema("std_msgs/msg/Float64", "ros2msg", b"float64 data\n")
        a = w.add_channel("/a", "cdr", s)
        for i in range(50):
            w.write(a, b"\x00\x01\x00\x00" + struct.pack("<d", i * 0.5), log_time=10**18 + i * 1000)


@pytest.fixture(scope="module")
def nginx_run(nginx_root: Path, nginx: object) -> str:
    """A rosbag2 directory and a plain directory under nginx's root; the server's base URL."""
    if not (nginx_root / "dirurl_run").exists():
        _write_rosbag2(nginx_root / "dirurl_run")
        (nginx_root / "dirurl_plain").mkdir()
        (nginx_root / "dirurl_plain" / "x.txt").write_text("x")
    return str(nginx.url)  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def seaweed_run(seaweed: SeaweedS3, tmp_path_factory: pytest.TempPathFactory) -> SeaweedS3:
    d = tmp_path_factory.mktemp("dirurl")
    _write_rosbag2(d / "run")
    (d / "other.txt").write_text("not a bag")
    files = {f"dirurl_run/{p.name}": p for p in (d / "run").iterdir()}
    files["dirurl_plain/other.txt"] = d / "other.txt"
    upload(seaweed, "dirurls", files)
    return seaweed


def test_http_directory_without_slash_says_end_it_with_slash(nginx_run: str) -> None:
    with pytest.raises(PolybagError, match=HINT):
        polybag.open(f"{nginx_run}/dirurl_run")
    with polybag.open(f"{nginx_run}/dirurl_run/") as r:
        assert sum(1 for _ in r.messages()) == 50


def test_http_probe_is_one_request_for_metadata(nginx_run: str, nginx_proxy: CountingProxy) -> None:
    """The hint costs one request, for ``URL/metadata.yaml`` (none when the object is there)."""
    for name, probes in (("dirurl_run", 1), ("dirurl_nope", 1)):
        nginx_proxy.reset()
        with pytest.raises(PolybagError):
            polybag.open(f"{nginx_proxy.url}/{name}")
        paths = nginx_proxy.per_path()
        assert paths.get(f"/{name}/metadata.yaml", (0, 0))[0] == probes, paths
        assert sum(n for p, (n, _) in paths.items() if p.endswith("metadata.yaml")) == probes, paths


def test_http_directory_without_metadata_keeps_its_own_error(nginx_run: str) -> None:
    for name in ("dirurl_plain", "dirurl_nope"):
        with pytest.raises(PolybagError) as e:
            polybag.open(f"{nginx_run}/{name}")
        assert "rosbag2 directory" not in str(e.value)


def test_s3_directory_without_slash_says_end_it_with_slash(seaweed_run: SeaweedS3) -> None:
    so = seaweed_run.storage_options()
    with pytest.raises(PolybagError, match=HINT):
        polybag.open("s3://dirurls/dirurl_run", storage_options=so)
    with polybag.open("s3://dirurls/dirurl_run/", storage_options=so) as r:
        assert sum(1 for _ in r.messages()) == 50


def test_s3_prefix_without_metadata_keeps_its_own_error(seaweed_run: SeaweedS3) -> None:
    so = seaweed_run.storage_options()
    for name in ("dirurl_plain", "dirurl_nope"):
        with pytest.raises(PolybagError) as e:
            polybag.open(f"s3://dirurls/{name}", storage_options=so)
        assert "rosbag2 directory" not in str(e.value)
