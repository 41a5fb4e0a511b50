"""A remote MCAP's first message, a 1% time window and one topic fetch only what they need
(issue 30), on nginx behind the counting proxy (requests and bytes per path) and on SeaweedFS
(polybag's own count, ``fetch_stats``); every answer equals the local file's.

Two files, written once per session by polybag's writer (uncompressed chunks, so bytes are
file bytes):

- ``inter.mcap``: 4 topics at equal rates interleaved in ~250 chunks of 800 KB (~200 MB);
  chunks follow each other in time;
- ``pertopic.mcap``: the same 4 topics, each chunk holding one topic's 200 rounds, so four
  chunks (four "writers") overlap in time; ~250 chunks of 400 KB (~100 MB).
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Any

import pytest
from counting_proxy import CountingProxy
from seaweed import SeaweedS3, upload

import polybag
from polybag.formats.mcap.reader import McapIndexWarning

TOPICS = ["/imu", "/cam", "/lidar", "/gps"]
T0 = 1_700_000_000 * 10**9
STEP = 1_000_000  # one round of the four topics per millisecond
PAYLOAD = 2000
INTER_ROUNDS = 25_000  # 100,000 messages of ~2 KB: ~200 MB
PERTOPIC_ROUNDS = 12_500  # ~100 MB
BLOCK = 200  # rounds per chunk in pertopic.mcap
EDGES = (16 << 10) + (64 << 10)  # what every remote open fetches (head and tail)
Row = tuple[str, int, bytes]


def _body(k: int, i: int) -> bytes:
    return PAYLOAD.to_bytes(4, "little") + bytes([k]) * 8 + i.to_bytes(8, "little") + bytes(PAYLOAD - 16)


def _write_inter(path: Path) -> None:
    with polybag.Writer(str(path), format="mcap", compression="none", chunk_size=800_000) as w:
        sch = w.add_schema("test_msgs/Blob", "ros1msg", b"uint8[] data\n")
        chans = [w.add_channel(t, "ros1", sch) for t in TOPICS]
        for i in range(INTER_ROUNDS):
            for k, ch in enumerate(chans):
                w.write(ch, _body(k, i), log_time=T0 + i * STEP + k)


def _write_pertopic(path: Path) -> None:
    with polybag.Writer(str(path), format="mcap", compression="none", chunk_size=1 << 30) as w:
        sch = w.add_schema("test_msgs/Blob", "ros1msg", b"uint8[] data\n")
        chans = [w.add_channel(t, "ros1", sch) for t in TOPICS]
        for b in range(0, PERTOPIC_ROUNDS, BLOCK):
            for k, ch in enumerate(chans):
                for i in range(b, min(b + BLOCK, PERTOPIC_ROUNDS)):
                    w.write(ch, _body(k, i), log_time=T0 + i * STEP + k)
                w.flush()  # one chunk per topic and block: four chunks overlap in time


@pytest.fixture(scope="module")
def files(nginx_root: Path) -> Path:
    """The two MCAPs, in the folder nginx serves (under ``economy/``)."""
    d = nginx_root / "economy"
    if not (d / "pertopic.mcap").exists():
        d.mkdir(exist_ok=True)
        _write_inter(d / "inter.mcap")
        _write_pertopic(d / "pertopic.mcap")
    return d


@pytest.fixture(scope="module")
def s3_files(seaweed: SeaweedS3, files: Path) -> SeaweedS3:
    upload(seaweed, "logs", {f"economy/{n}": files / n for n in ("inter.mcap", "pertopic.mcap")})
    return seaweed


class Remote:
    """One server: open a file, and what the last opens cost (requests, bytes)."""

    def __init__(self, kind: str, files: Path, proxy: CountingProxy | None, s3: SeaweedS3 | None) -> None:
        self.kind = kind
        self.files = files
        self.proxy = proxy
        self.s3 = s3
        self.stats: dict[str, Any] = {}

    def open(self, name: str) -> polybag.Reader:
        if self.proxy is not None:
            self.proxy.reset()
            return polybag.open(f"{self.proxy.url}/economy/{name}")
        assert self.s3 is not None
        return polybag.open(f"s3://logs/economy/{name}", storage_options=self.s3.storage_options())

    def cost(self, r: polybag.Reader, name: str) -> tuple[int, int]:
        """(requests, bytes) of the reads since ``open`` (call after closing ``r``)."""
        st = r.fetch_stats
        assert st is not None
        if self.proxy is None:
            return st["requests"], st["bytes_fetched"]
        counts = self.proxy.per_path()
        assert set(counts) == {f"/economy/{name}"}, counts
        req, nbytes = counts[f"/economy/{name}"]
        # the proxy sees what polybag counts, plus the HEAD asking the size and part headers
        assert st["bytes_fetched"] <= nbytes and st["requests"] <= req <= st["requests"] + 1
        return req - 1, nbytes  # (the HEAD is not a range request)


@pytest.fixture(params=["nginx", "seaweed"])
def remote(request: pytest.FixtureRequest, files: Path) -> Iterator[Remote]:
    if request.param == "nginx":
        yield Remote("nginx", files, request.getfixturevalue("nginx_proxy"), None)
    else:
        yield Remote("seaweed", files, None, request.getfixturevalue("s3_files"))


def _rows(it: Any) -> list[Row]:
    return [(m.channel.topic, m.log_time, bytes(m.data)) for m in it]


def _local(files: Path, name: str, n: int | None = None, **kw: Any) -> list[Row]:
    with polybag.open(str(files / name)) as r:
        return _rows(islice(r.messages(**kw), n))


def _chunks(files: Path, name: str) -> list[Any]:
    with polybag.open(str(files / name)) as r:
        return list(r.chunk_indexes)  # type: ignore[attr-defined]


def _summary_bytes(files: Path, name: str) -> int:
    with polybag.open(str(files / name)) as r:
        foot = r.footer  # type: ignore[attr-defined]
        return (files / name).stat().st_size - foot.summary_start


def _window(frac_at: float, frac: float = 0.01, rounds: int = INTER_ROUNDS) -> tuple[int, int]:
    span = rounds * STEP
    start = T0 + int(span * frac_at)
    return start, start + int(span * frac)


def _cost_of(remote: Remote, name: str, n: int | None = None, **kw: Any) -> tuple[list[Row], int, int]:
    with remote.open(name) as r:
        got = _rows(islice(r.messages(**kw), n))
    req, nbytes = remote.cost(r, name)
    return got, req, nbytes


@pytest.mark.parametrize("topics", [None, ["/imu"], ["/gps"]])
def test_first_message_costs_a_few_requests_and_one_chunk(remote: Remote, files: Path, topics: list[str] | None) -> None:
    size = (files / "inter.mcap").stat().st_size
    cis = _chunks(files, "inter.mcap")
    assert 200 <= len(cis) <= 300 and size > 190_000_000
    biggest = max(ci.chunk_length + ci.message_index_length for ci in cis)
    got, req, nbytes = _cost_of(remote, "inter.mcap", 1, topics=topics)
    assert got == _local(files, "inter.mcap", 1, topics=topics)
    assert req <= 4, (remote.kind, req, nbytes)
    assert nbytes <= 2 * biggest, (remote.kind, req, nbytes, biggest)


def test_first_messages_then_more_stay_in_order(remote: Remote, files: Path) -> None:
    # a few thousand messages (about 6.4 MB of the file): the chunks they need and a
    # read-ahead that starts at 4 MiB and doubles with the way read (at most 64 MiB, 33% of
    # this file, when it started there)
    n = 4 * 2 * 400
    got, _req, nbytes = _cost_of(remote, "inter.mcap", n)
    assert got == _local(files, "inter.mcap", n)
    size = (files / "inter.mcap").stat().st_size
    assert nbytes < 0.15 * size, (remote.kind, nbytes, size)


@pytest.mark.parametrize("at", [0.0, 0.5, 0.995])
def test_one_percent_window_fetches_under_two_percent(remote: Remote, files: Path, at: float) -> None:
    size = (files / "inter.mcap").stat().st_size
    start, end = _window(min(at, 0.99))
    got, req, nbytes = _cost_of(remote, "inter.mcap", start=start, end=end)
    want = _local(files, "inter.mcap", start=start, end=end)
    assert got == want and len(want) >= 0.009 * 4 * INTER_ROUNDS
    assert nbytes <= 0.02 * size, (remote.kind, req, nbytes, size)


def test_one_topic_fetches_its_share_and_the_summary(remote: Remote, files: Path) -> None:
    name = "pertopic.mcap"
    size = (files / name).stat().st_size
    cis = _chunks(files, name)
    got, req, nbytes = _cost_of(remote, name, topics=["/lidar"])
    want = _local(files, name, topics=["/lidar"])
    assert got == want and len(want) == PERTOPIC_ROUNDS
    mine = [ci for ci in cis if len(ci.message_index_offsets) == 1 and 3 in ci.message_index_offsets]
    assert len(mine) == len(cis) // 4
    share = sum(ci.chunk_length + ci.message_index_length for ci in mine)
    # its chunks (each maybe with its Message Index), the summary, the file's edges, and
    # at most one 2 KiB block of slack at either end of each chunk
    bound = share + _summary_bytes(files, name) + EDGES + len(mine) * 4096
    assert nbytes <= bound, (remote.kind, req, nbytes, bound, size)
    assert nbytes <= 0.27 * size


def _overlapping(cis: list[Any], start: int, end: int) -> int:
    return sum(ci.chunk_length + ci.message_index_length for ci in cis if ci.message_end_time >= start and ci.message_start_time < end)


def test_overlapping_chunks_stay_correct_and_bounded(remote: Remote, files: Path) -> None:
    name = "pertopic.mcap"
    cis = _chunks(files, name)
    biggest = max(ci.chunk_length + ci.message_index_length for ci in cis)
    # the first message: one of the four chunks that overlap at the start
    got, req, nbytes = _cost_of(remote, name, 1)
    assert got == _local(files, name, 1)
    assert req <= 4 and nbytes <= 2 * biggest, (remote.kind, req, nbytes)
    # a window in the middle: the chunks overlapping it, no more
    start, end = _window(0.5, rounds=PERTOPIC_ROUNDS)
    got, req, nbytes = _cost_of(remote, name, start=start, end=end)
    assert got == _local(files, name, start=start, end=end)
    bound = _overlapping(cis, start, end) + _summary_bytes(files, name) + EDGES + 8 * 4096
    assert nbytes <= bound, (remote.kind, req, nbytes, bound)
    # in reverse too
    got, req, nbytes = _cost_of(remote, name, 50, start=start, end=end, reverse=True)
    assert got == _local(files, name, 50, start=start, end=end, reverse=True)
    assert nbytes <= bound, (remote.kind, req, nbytes, bound)


def test_full_log_time_read_of_overlapping_chunks_equals_the_local_file(remote: Remote, files: Path) -> None:
    name = "pertopic.mcap"
    size = (files / name).stat().st_size
    got, _req, nbytes = _cost_of(remote, name)
    assert got == _local(files, name)
    # every chunk once (Message Indexes are not needed), and the summary
    assert sum(ci.chunk_length for ci in _chunks(files, name)) <= nbytes <= 1.02 * size


def _lying_file(path: Path) -> list[Row]:
    """Chunks of 10 messages at 0..9, 10..19, ...; the second chunk's Chunk Index and Chunk
    header claim times after the third's (its Message Index keeps the truth), the summary
    CRC made right again.  Returns every message in log-time order."""
    import struct
    import zlib

    with polybag.Writer(str(path), format="mcap", compression="none", chunk_size=1 << 30) as w:
        sch = w.add_schema("test_msgs/Blob", "ros1msg", b"uint8[] data\n")
        ch = w.add_channel("/a", "ros1", sch)
        for t in range(40):
            w.write(ch, (4).to_bytes(4, "little") + t.to_bytes(4, "little"), log_time=1000 + t)
            if t % 10 == 9:
                w.flush()
    buf = bytearray(path.read_bytes())
    with polybag.open(str(path)) as r:
        want = _rows(r.messages())
        ci = r.chunk_indexes[1]  # type: ignore[attr-defined]
        summary_start = r.footer.summary_start  # type: ignore[attr-defined]
    old = struct.pack("<QQQ", ci.message_start_time, ci.message_end_time, ci.chunk_start_offset)
    at = bytes(buf).index(old, summary_start)
    struct.pack_into("<QQ", buf, at, 1025, 1029)
    struct.pack_into("<QQ", buf, ci.chunk_start_offset + 9, 1025, 1029)
    foot = len(buf) - 8 - 29
    struct.pack_into("<I", buf, foot + 25, zlib.crc32(bytes(buf[summary_start : foot + 25])))
    path.write_bytes(bytes(buf))
    return want


def test_a_remote_chunk_lying_about_its_times_is_found_when_loaded(files: Path, nginx_proxy: CountingProxy) -> None:
    # A remote merge does not fetch every Message Index first (a local one does, and finds the
    # lie before returning anything): the lie shows when the chunk is loaded, after later
    # messages were returned, so the read raises; the next read checks every chunk and is right.
    want = _lying_file(files / "lying.mcap")
    with polybag.open(str(files / "lying.mcap")) as local, pytest.warns(McapIndexWarning):
        assert _rows(local.messages()) == want
    with polybag.open(f"{nginx_proxy.url}/economy/lying.mcap") as r:
        got: list[Row] = []
        with pytest.raises(polybag.FormatError, match="read again"):
            for m in r.messages():
                got.append((m.channel.topic, m.log_time, bytes(m.data)))
        assert got and got == sorted(got, key=lambda x: x[1]) and len(got) < len(want)
        assert _rows(r.messages()) == want
        assert _rows(r.messages(reverse=True)) == want[::-1]
