"""What a remote ULog and a remote rosbag2 bag fetch (issue 30), on nginx behind the counting
proxy and on SeaweedFS: requests and bytes per question, and the same messages as the local
copies.

- A ULog has no index and no summary (counts and times come only from walking every
  message), so its open fetches the whole object once, in large parts (the source's
  :data:`~polybag.io.block_map.PART`), and nothing after: every question is then local.
- A rosbag2 bag with ``sqlite3`` storage fetches ``metadata.yaml`` and each database whole
  (SQLite reads local files only), once, in large parts; nothing after.
- A rosbag2 bag with MCAP storage fetches ``metadata.yaml`` and each MCAP file's edges
  (its summary): a few requests, and a time window only the chunks it overlaps.
"""

from __future__ import annotations

import math
import struct
from pathlib import Path
from typing import Any

import pytest
from counting_proxy import CountingProxy
from seaweed import SeaweedS3, upload

import polybag
from polybag.formats.ulog.writer import UlogWriter
from polybag.io.block_map import PART

N = 400  # messages, round robin on four topics
PAYLOAD = 10_000
T0 = 1_700_000_000_000_000_000
STEP = 1_000_000
TOPICS = ("/t0", "/t1", "/t2", "/t3")
R2_CHUNK = 256 << 10
#: multipart boundaries and headers of a multi-range answer, counted by the proxy as body
SLACK = 4096

Row = tuple[str, int, bytes]


def _write(d: Path) -> dict[str, Path]:
    d.mkdir(parents=True, exist_ok=True)
    body = bytes(PAYLOAD)
    w = UlogWriter(str(d / "flight.ulg"))
    for i in range(4):
        w.add_format(f"t{i}:uint64_t timestamp;uint8_t[{PAYLOAD}] data;")
    subs = [w.add_subscription(f"t{i}") for i in range(4)]
    for i in range(N):
        t = T0 + i * STEP
        w.write(subs[i % 4], struct.pack("<Q", t // 1000) + body[:-8] + i.to_bytes(8, "little"), log_time=t)
    w.close()
    for name, storage in (("r2_sqlite", "sqlite3"), ("r2_mcap", "mcap")):
        opts: dict[str, Any] = {"chunk_size": R2_CHUNK} if storage == "mcap" else {}
        w2 = polybag.Writer(str(d / name), format="rosbag2", storage=storage, **opts)
        s = w2.add_schema("polybag_test/msg/Blob", "ros2msg", b"uint8[] data\n")
        chans = [w2.add_channel(t, "cdr", s) for t in TOPICS]
        head = b"\x00\x01\x00\x00" + PAYLOAD.to_bytes(4, "little")
        for i in range(N):
            w2.write(chans[i % 4], head + body[:-8] + i.to_bytes(8, "little"), log_time=T0 + i * STEP)
        w2.close()
    return {"ulog": d / "flight.ulg", "r2_sqlite": d / "r2_sqlite", "r2_mcap": d / "r2_mcap"}


@pytest.fixture(scope="module")
def logs(nginx_root: Path) -> dict[str, Path]:
    return _write(nginx_root / "h6_economy")


@pytest.fixture(scope="module")
def s3_logs(seaweed: SeaweedS3, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = _write(tmp_path_factory.mktemp("h6_economy"))
    files: dict[str, Path] = {"h6_economy/flight.ulg": d["ulog"]}
    for name in ("r2_sqlite", "r2_mcap"):
        files.update({f"h6_economy/{name}/{f.name}": f for f in d[name].iterdir()})
    upload(seaweed, "logs", files)
    return d


def _size(p: Path) -> int:
    return sum(f.stat().st_size for f in p.iterdir()) if p.is_dir() else p.stat().st_size


def _rows(r: polybag.Reader, **kw: Any) -> list[Row]:
    return [(m.channel.topic, m.log_time, bytes(m.data)) for m in r.messages(**kw)]


def _window() -> tuple[int, int]:
    a = T0 + (N // 2) * STEP
    return a, a + max(1, N // 100) * STEP


def _answers(r: polybag.Reader) -> dict[str, Any]:
    """Every question's answer: the summary's count, the first message, a 1% window, one topic."""
    a, b = _window()
    first = next(iter(r.messages()))
    topic = "/t1" if r.format != "ulog" else "t1"
    return {
        "count": r.summary.message_count,
        "first": (first.channel.topic, first.log_time, bytes(first.data)),
        "window": _rows(r, start=a, end=b),
        "topic": _rows(r, topics=[topic]),
    }


def _local(p: Path) -> dict[str, Any]:
    with polybag.open(str(p)) as r:
        out = _answers(r)
    assert out["count"] == N and len(out["window"]) == N // 100 and len(out["topic"]) == N // 4
    return out


def _url(proxy: CountingProxy, p: Path) -> str:
    return f"{proxy.url}/h6_economy/{p.name}" + ("/" if p.is_dir() else "")


@pytest.mark.parametrize("name", ["ulog", "r2_sqlite"])
def test_http_whole_file_formats_fetch_once_then_nothing(
    nginx_proxy: CountingProxy, logs: dict[str, Path], name: str
) -> None:
    p = logs[name]
    want = _local(p)
    size = _size(p)
    data_size = max((f.stat().st_size for f in p.iterdir()), default=0) if p.is_dir() else size
    nginx_proxy.reset()
    with polybag.open(_url(nginx_proxy, p)) as r:
        assert r.summary.message_count == N
        opened = nginx_proxy.per_path()
        own = dict(r.fetch_stats or {})
        nginx_proxy.reset()
        got = _answers(r)
        assert nginx_proxy.requests == 0  # every question answered from what the open fetched
    assert got == want
    requests = sum(n for n, _ in opened.values())
    fetched = sum(b for _, b in opened.values())
    # each byte once (plus a multi-range answer's boundaries), in parts of PART bytes: a
    # HEAD, then the edges and the parts (metadata.yaml: a HEAD and a GET)
    assert size <= fetched <= size + SLACK
    assert own["requests"] == requests and own["bytes_fetched"] == size  # polybag's own count agrees
    assert requests <= 2 + math.ceil(data_size / PART) + (2 if p.is_dir() else 0)


def test_http_rosbag2_mcap_fetches_the_summary_then_the_window(
    nginx_proxy: CountingProxy, logs: dict[str, Path]
) -> None:
    p = logs["r2_mcap"]
    want = _local(p)
    size = _size(p)
    assert size > 10 * R2_CHUNK
    url = _url(nginx_proxy, p)
    nginx_proxy.reset()
    with polybag.open(url) as r:
        assert r.summary.message_count == N
        # metadata.yaml (HEAD, GET) and the MCAP file's edges (HEAD, one multi-range GET);
        # the local stand-in of the MCAP file costs no request
        assert nginx_proxy.requests <= 4
        assert nginx_proxy.bytes <= 100_000
        assert (r.fetch_stats or {})["requests"] == nginx_proxy.requests
    a, b = _window()
    nginx_proxy.reset()
    with polybag.open(url) as r:
        assert _rows(r, start=a, end=b) == want["window"]
    assert nginx_proxy.bytes <= 100_000 + 2 * R2_CHUNK + SLACK  # the summary, at most two chunks
    with polybag.open(url) as r:
        nginx_proxy.reset()
        first = next(iter(r.messages()))
        assert (first.channel.topic, first.log_time, bytes(first.data)) == want["first"]
        # about one chunk (its messages go out as read: no batch of 512 read ahead first)
        assert nginx_proxy.requests <= 2
        assert nginx_proxy.bytes <= 2 * R2_CHUNK + SLACK
    with polybag.open(url) as r:
        assert _answers(r) == want


@pytest.mark.parametrize("name", ["ulog", "r2_sqlite"])
def test_seaweed_whole_file_formats_fetch_once_then_nothing(
    seaweed: SeaweedS3, s3_logs: dict[str, Path], name: str
) -> None:
    p = s3_logs[name]
    want = _local(p)
    size = _size(p)
    data_size = max((f.stat().st_size for f in p.iterdir()), default=0) if p.is_dir() else size
    url = f"s3://logs/h6_economy/{p.name}" + ("/" if p.is_dir() else "")
    with polybag.open(url, storage_options=seaweed.storage_options()) as r:
        assert r.summary.message_count == N
        opened = dict(r.fetch_stats or {})
        got = _answers(r)
        after = dict(r.fetch_stats or {})
    assert got == want
    assert opened["size"] == size
    assert opened["bytes_fetched"] == size  # each byte once
    # the object's size; its head and tail (no multi-range on S3); the parts
    assert opened["requests"] <= 3 + math.ceil(data_size / PART)
    assert after == opened  # nothing fetched after the open


def test_seaweed_rosbag2_mcap_fetches_the_summary_then_the_window(
    seaweed: SeaweedS3, s3_logs: dict[str, Path]
) -> None:
    p = s3_logs["r2_mcap"]
    want = _local(p)
    url = "s3://logs/h6_economy/r2_mcap/"
    opts = seaweed.storage_options()
    with polybag.open(url, storage_options=opts) as r:
        assert r.summary.message_count == N
        st = r.fetch_stats or {}
        assert st["size"] == _size(p)
        # metadata.yaml (one ranged GET); the MCAP file's tail with its size (one ranged GET,
        # no HEAD), then its head: issue 30's "info in at most 3 requests"
        assert st["requests"] <= 3
        assert st["bytes_fetched"] <= 100_000
    with polybag.open(url, storage_options=opts) as r:
        first = next(iter(r.messages()))
        assert (first.channel.topic, first.log_time, bytes(first.data)) == want["first"]
        st = r.fetch_stats or {}
        assert st["requests"] <= 4  # and one for the first chunk
        assert st["bytes_fetched"] <= 100_000 + 2 * R2_CHUNK
    a, b = _window()
    with polybag.open(url, storage_options=opts) as r:
        assert _rows(r, start=a, end=b) == want["window"]
        assert (r.fetch_stats or {})["bytes_fetched"] <= 100_000 + 2 * R2_CHUNK
    with polybag.open(url, storage_options=opts) as r:
        assert _answers(r) == want
