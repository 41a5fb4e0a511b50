"""Remote reads from a real web server: nginx (Debian package, generated config, Range and
multi-range as nginx does them) on 127.0.0.1, behind a counting proxy."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from counting_proxy import CountingProxy
from remote_helpers import write_big

import polybag

ROS2_N = 600


def _write_rosbag2(out: Path) -> None:
    with polybag.Writer(str(out), format="rosbag2", storage="mcap") as w:
        s = w.add_schema("std_msgs/msg/Float64", "ros2msg", b"float64 data\n")
        a = w.add_channel("/a", "cdr", s)
        b = w.add_channel("/b", "cdr", s)
        for i in range(ROS2_N):
            w.write(a, b"\x00\x01\x00\x00" + struct.pack("<d", i * 0.5), log_time=10**18 + i * 1000)
            if i % 3 == 0:
                w.write(b, b"\x00\x01\x00\x00" + struct.pack("<d", -i), log_time=10**18 + i * 1000 + 1)


@pytest.fixture(scope="module")
def served(nginx_root: Path) -> Path:
    """The logs nginx serves: a 6 MB indexed MCAP with a summary, a bag, a ULog, a rosbag2 directory."""
    if not (nginx_root / "six.mcap").exists():
        write_big(nginx_root / "six.mcap", n=60)
        write_big(nginx_root / "small.bag", n=30)
        from ulog_helpers import synthetic_log

        (nginx_root / "flight.ulg").write_bytes(synthetic_log()[0])
        _write_rosbag2(nginx_root / "run")
    return nginx_root


@pytest.fixture
def proxy(nginx_proxy: CountingProxy) -> CountingProxy:
    nginx_proxy.reset()
    return nginx_proxy


def _rows(r: polybag.Reader) -> list[tuple[str, int, bytes]]:
    return [(m.channel.topic, m.log_time, bytes(m.data)) for m in r.messages()]


def _size(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) if p.is_dir() else p.stat().st_size


@pytest.mark.parametrize("name", ["six.mcap", "small.bag", "flight.ulg", "run/"])
def test_nginx_reads_equal_local_reads_fetching_each_byte_once(
    served: Path, proxy: CountingProxy, name: str
) -> None:
    with polybag.open(str(served / name.rstrip("/"))) as local:
        expect = _rows(local)
        fmt = local.format
    assert expect
    with polybag.open(f"{proxy.url}/{name}") as r:
        assert r.format == fmt
        got = _rows(r)
    assert got == expect
    counts = proxy.per_path()
    assert counts, "nothing went through the proxy"
    assert all(p.startswith(f"/{name}") for p in counts), counts
    size = _size(served / name.rstrip("/"))
    assert 0 < proxy.bytes <= 1.05 * size, (proxy.bytes, size, counts)
    if name == "run/":
        assert "/run/metadata.yaml" in counts


def test_nginx_answers_multi_range_requests(served: Path, nginx_proxy: CountingProxy) -> None:
    """The server under test does multipart/byteranges (the tests rely on it)."""
    import urllib.request

    req = urllib.request.Request(f"{nginx_proxy.url}/six.mcap", headers={"Range": "bytes=0-7,100-107"})
    with urllib.request.urlopen(req) as resp:
        assert resp.status == 206
        assert resp.headers.get_content_type() == "multipart/byteranges"
        body = resp.read()
    assert (served / "six.mcap").read_bytes()[:8] in body


def test_cli_info_of_an_indexed_mcap_fetches_under_5_percent(served: Path, proxy: CountingProxy) -> None:
    path = served / "six.mcap"
    size = path.stat().st_size
    assert size >= 5_000_000
    with polybag.open(str(path)) as local:
        assert local.summary.message_count == 60 + 6
        assert local.summary.chunk_count >= 5
    p = subprocess.run(
        [sys.executable, "-m", "polybag", "info", "--json", f"{proxy.url}/six.mcap"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["message_count"] == 66
    assert d["file_size"] == size
    assert proxy.per_path().keys() == {"/six.mcap"}
    assert 0 < proxy.bytes < 0.05 * size, (proxy.bytes, size)
    # counted on both ends (the proxy also sees multipart/byteranges part headers)
    assert 0 < d["fetched"]["bytes_fetched"] <= proxy.bytes < d["fetched"]["bytes_fetched"] + 4096
    # the proxy also sees the HEAD asking the size, which the stats do not count
    assert d["fetched"]["requests"] <= proxy.requests <= d["fetched"]["requests"] + 1 <= 3


def test_library_summary_of_an_indexed_mcap_fetches_under_5_percent(
    served: Path, proxy: CountingProxy
) -> None:
    size = (served / "six.mcap").stat().st_size
    with polybag.open(f"{proxy.url}/six.mcap") as r:
        assert r.summary.message_count == 66
    assert 0 < proxy.bytes < 0.05 * size, (proxy.bytes, size)
