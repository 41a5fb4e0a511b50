"""A remote ROS 1 bag fetched as little as the question needs (issue 30), on nginx behind the
counting proxy (requests and bytes as the server sent them) and on SeaweedFS (S3, one range
a request; the reader's ``fetch_stats``): ``info`` from the CLI, the first message, a 1% time
window and one topic of four, each giving the local file's answer.

The bag (polybag's writer, once per session): 4 topics in turns of about 10 chunks each, so a
topic lies in about a quarter of the ~200 chunks; lz4 chunks.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from counting_proxy import CountingProxy
from seaweed import SeaweedS3, upload

import polybag
from polybag.errors import FormatError

N = 8000
PAYLOAD = 5000
T0 = 1_750_000_000_000_000_000
STEP = 1_000_000  # 1 ms
TURN = 400  # messages of one topic in a row
TOPICS = ("/t0", "/t1", "/t2", "/t3")
NAME = "econ.bag"

Row = tuple[str, int, bytes]


def _write(path: Path) -> None:
    w = polybag.Writer(str(path), format="bag", compression="lz4", chunk_size=200_000)
    sch = w.add_schema("test_msgs/Blob", "ros1msg", b"uint8[] data\n")
    chans = [w.add_channel(t, "ros1", sch) for t in TOPICS]
    head = PAYLOAD.to_bytes(4, "little")
    for i in range(N):  # random payloads: lz4 cannot shrink them
        body = head + i.to_bytes(8, "little") + os.urandom(PAYLOAD - 8)
        w.write(chans[(i // TURN) % 4], body, log_time=T0 + i * STEP)
    w.close()


@pytest.fixture(scope="session")
def econ_bag(nginx_root: Path) -> Path:
    path = nginx_root / NAME
    if not path.exists():
        _write(path)
    return path


@pytest.fixture(scope="session")
def layout(econ_bag: Path) -> dict[str, Any]:
    """The local bag's chunks: (pos, bytes up to the next chunk or the index, connections)."""
    with polybag.open(str(econ_bag)) as r:
        chunks = r.chunks  # type: ignore[attr-defined]
        index_pos = r.index_pos  # type: ignore[attr-defined]
        topics = {cid: ch.topic for cid, ch in r.summary.channels.items()}
        ends = [c.pos for c in chunks[1:]] + [index_pos]
        out = [(c.pos, e - c.pos, {topics[k] for k in c.counts}) for c, e in zip(chunks, ends)]
    size = econ_bag.stat().st_size
    assert 100 <= len(out) <= 300, len(out)
    return {"chunks": out, "size": size, "index": size - index_pos, "largest": max(n for _, n, _ in out)}


@pytest.fixture
def proxy(nginx_proxy: CountingProxy) -> CountingProxy:
    nginx_proxy.reset()
    return nginx_proxy


@pytest.fixture(scope="module")
def s3_bag(seaweed: SeaweedS3, econ_bag: Path) -> SeaweedS3:
    upload(seaweed, "logs", {NAME: econ_bag})
    return seaweed


def _rows(msgs: Any, n: int | None = None) -> list[Row]:
    out = []
    for m in msgs:
        out.append((m.channel.topic, m.log_time, bytes(m.data)))
        if n is not None and len(out) == n:
            break
    return out


# at open: the first 16 KiB and last 64 KiB (the bag header, the index section)
EDGES = (16 << 10) + (64 << 10)

QUESTIONS = {
    "first": lambda r: _rows(r.messages(), 1),
    "window": lambda r: _rows(r.messages(start=T0 + N // 2 * STEP, end=T0 + (N // 2 + N // 100) * STEP)),
    "topic": lambda r: _rows(r.messages(topics=["/t2"])),
}


def _local(path: Path, question: str) -> list[Row]:
    with polybag.open(str(path)) as r:
        return QUESTIONS[question](r)  # type: ignore[no-any-return]


def _check(question: str, got: list[Row], want: list[Row], reqs: int, nbytes: int, lay: dict[str, Any]) -> None:
    assert got == want and want
    size = lay["size"]
    print(f"{question}: {reqs} requests, {nbytes} bytes, {100 * nbytes / size:.2f}% of {size}")
    if question == "first":
        assert reqs <= 4
        assert nbytes <= EDGES + lay["index"] + 2 * lay["largest"], (nbytes, lay["largest"])
    elif question == "window":
        assert len(want) == N // 100
        assert nbytes <= 0.02 * size
    else:
        share = sum(n for _, n, t in lay["chunks"] if "/t2" in t)
        assert share < 0.35 * size
        assert nbytes <= share + EDGES + lay["index"] + 4 * lay["largest"], (nbytes, share)


@pytest.mark.parametrize("question", list(QUESTIONS))
def test_nginx_bag_fetches_what_the_question_needs(
    econ_bag: Path, layout: dict[str, Any], proxy: CountingProxy, question: str
) -> None:
    want = _local(econ_bag, question)
    with polybag.open(f"{proxy.url}/{NAME}") as r:
        got = QUESTIONS[question](r)
        stats = r.fetch_stats
    assert stats is not None
    # the proxy also counts the HEAD asking the size (which polybag's count may leave out)
    _check(question, got, want, proxy.requests - 1, proxy.bytes, layout)
    assert stats["bytes_fetched"] <= proxy.bytes


@pytest.mark.parametrize("question", list(QUESTIONS))
def test_s3_bag_fetches_what_the_question_needs(
    econ_bag: Path, layout: dict[str, Any], s3_bag: SeaweedS3, question: str
) -> None:
    want = _local(econ_bag, question)
    with polybag.open(f"s3://logs/{NAME}", storage_options=s3_bag.storage_options()) as r:
        got = QUESTIONS[question](r)
        stats = r.fetch_stats
    assert stats is not None
    _check(question, got, want, stats["requests"], stats["bytes_fetched"], layout)


def _info(url: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    p = subprocess.run(
        [sys.executable, "-m", "polybag", "info", "--json", url], capture_output=True, text=True, timeout=300, env=env
    )
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)  # type: ignore[no-any-return]


def _same_info(got: dict[str, Any], want: dict[str, Any]) -> None:
    fetched = got.pop("fetched")
    for d in (got, want):
        d.pop("path")
        d["extras"].pop("path")
    assert got == want
    assert fetched["size"] == want["file_size"]


def test_nginx_cli_info_of_a_bag_in_3_requests(econ_bag: Path, layout: dict[str, Any], proxy: CountingProxy) -> None:
    want = _info(str(econ_bag))
    got = _info(f"{proxy.url}/{NAME}")
    fetched = got["fetched"]
    _same_info(got, want)
    # the frequencies of rosbag info need every message's time: the index data records
    assert all(t["frequency"] for t in want["extras"]["topics"])
    reqs, nbytes = proxy.requests, proxy.bytes
    print(f"info over nginx: {reqs} requests (a HEAD among them), {nbytes} bytes of {layout['size']}")
    assert reqs <= 4  # the HEAD and 3 GETs
    assert fetched["requests"] <= 4
    assert nbytes < 0.02 * layout["size"]


def test_s3_cli_info_of_a_bag(econ_bag: Path, layout: dict[str, Any], s3_bag: SeaweedS3) -> None:
    want = _info(str(econ_bag))
    got = _info(f"s3://logs/{NAME}", s3_bag.env())
    fetched = got["fetched"]
    _same_info(got, want)
    n = len(layout["chunks"])
    print(f"info over S3: {fetched['requests']} requests, {fetched['bytes_fetched']} bytes of {layout['size']}")
    # one range a request: a chunk's header and the index data before it share one
    assert fetched["requests"] <= n + 3
    assert fetched["bytes_fetched"] < 0.02 * layout["size"]


# --- chunk infos whose times lie: the plan of a remote read comes from them -------------------


def _lying_bag(path: Path, k: int, shift: int) -> list[Row]:
    """A 30-chunk bag whose ``k``-th chunk info claims times ``shift`` ns later than its
    messages' (start and end); its messages in log-time order (the local reader's answer)."""
    w = polybag.Writer(str(path), format="bag", compression="none", chunk_size=2000)
    sch = w.add_schema("test_msgs/Blob", "ros1msg", b"uint8[] data\n")
    chans = [w.add_channel(t, "ros1", sch) for t in TOPICS[:2]]
    for i in range(300):
        w.write(chans[i % 2], (8).to_bytes(4, "little") + i.to_bytes(8, "little") + bytes(180), log_time=T0 + i * STEP)
    w.close()
    data = bytearray(path.read_bytes())
    with polybag.open(str(path)) as r:
        index_pos = r.index_pos  # type: ignore[attr-defined]
        assert len(r.chunks) >= 20  # type: ignore[attr-defined]
    at = [i + 11 for i in range(index_pos, len(data)) if data.startswith(b"start_time=", i)][k]
    for field in (at, at + 8 + 4 + len(b"end_time=")):  # start_time, then end_time
        sec, nsec = struct.unpack_from("<II", data, field)
        t = sec * 10**9 + nsec + shift
        struct.pack_into("<II", data, field, t // 10**9, t % 10**9)
    path.write_bytes(bytes(data))
    with polybag.open(str(path)) as r:
        return _rows(r.messages())


def test_nginx_bag_whose_chunk_info_times_lie_a_little(nginx_root: Path, proxy: CountingProxy) -> None:
    """Claims a little later than the truth: the chunk is loaded before messages it precedes
    were handed out, its entries show the lie and the rest is planned from the index data."""
    want = _lying_bag(nginx_root / "lie_little.bag", 10, STEP // 2)
    with polybag.open(f"{proxy.url}/lie_little.bag") as r:
        assert _rows(r.messages()) == want


def test_nginx_bag_whose_chunk_info_times_lie_a_lot(nginx_root: Path, proxy: CountingProxy) -> None:
    """Claims later than the next chunk's messages: those are handed out first, so the liar
    cannot be put in order any more: the messages before it, then a FormatError naming its
    offset (the local reader, which plans from every chunk's index data, reads it all)."""
    want = _lying_bag(nginx_root / "lie_lot.bag", 10, 40 * STEP)
    got: list[Row] = []
    with polybag.open(f"{proxy.url}/lie_lot.bag") as r:
        with pytest.raises(FormatError, match=r"chunk info's times .* read again in file order or reindex") as ei:
            for m in r.messages():
                got.append((m.channel.topic, m.log_time, bytes(m.data)))
        assert ei.value.offset == r.chunks[10].pos  # type: ignore[attr-defined]
        assert _rows(r.messages(order="file")) == sorted(want, key=lambda x: x[1])
    # in order, each once, without the liar's messages
    assert got == sorted(set(got), key=lambda x: x[1]) and set(got) <= set(want) and len(got) > 100


@pytest.mark.parametrize("flags", [[], ["--reverse"], ["--file-order"]])
def test_nginx_cli_cat_of_the_first_message(
    econ_bag: Path, layout: dict[str, Any], proxy: CountingProxy, flags: list[str]
) -> None:
    """``polybag cat -n 1 URL`` (newest first, file order too): a chunk, a few requests."""

    def cat(target: str) -> str:
        p = subprocess.run(
            [sys.executable, "-m", "polybag", "cat", "-n", "1", "--json", *flags, "--", target],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert p.returncode == 0, p.stderr
        return p.stdout

    want = cat(str(econ_bag))
    assert want.count("\n") == 1
    proxy.reset()
    assert cat(f"{proxy.url}/{NAME}") == want
    reqs, nbytes = proxy.requests, proxy.bytes
    print(f"cat -n 1 {flags}: {reqs} requests (a HEAD among them), {nbytes} bytes")
    assert reqs <= 5  # the HEAD and 4 GETs
    assert nbytes <= EDGES + layout["index"] + 2 * layout["largest"]
