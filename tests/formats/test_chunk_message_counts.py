"""Reader.chunk_message_counts / has_index: per-chunk counts from the files' own indexes.

Every format is checked against the messages it returns: a chunk's count of some channels
equals the number of those messages inside the chunk's time range (chunks written in time
order do not overlap), and the counts add up to all of them.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polybag
from polybag.formats.bag.chunks import ChunkLoader
from polybag.formats.mcap.context import McapContext
from polybag.formats.mcap.info import McapInfo
from polybag.io.source import MappedSource
from polybag.model import ChunkInfo, Message, Summary
from polybag.reader import Reader, topic_filter

TOPICS = ("/a", "/b", "/c")
DEF = b"uint32 k\n"


def rows_for(counts: tuple[int, ...], base: int = 5_000_000_000) -> list[tuple[str, int]]:
    """Messages of TOPICS interleaved, at strictly increasing times."""
    out: list[tuple[str, int]] = []
    left = list(counts)
    i = 0
    while any(left):
        k = i % len(TOPICS)
        if left[k]:
            left[k] -= 1
            out.append((TOPICS[k], base + len(out) * 1000))
        i += 1
    return out


def write(path: Path, rows: list[tuple[str, int]], chunk_size: int = 400, **opts: Any) -> Path:
    if path.suffix == ".mcap":
        from polybag.formats.mcap.writer import McapWriter

        w: Any = McapWriter(path, chunk_size=chunk_size, compression="lz4", **opts)
    else:
        from polybag.formats.bag.writer import BagWriter

        w = BagWriter(path, chunk_size=chunk_size, compression="lz4", **opts)
    with w:
        sch = w.add_schema("pkg/K", "ros1msg", DEF)
        chans = {t: w.add_channel(t, "ros1", sch) for t in TOPICS}
        for i, (t, lt) in enumerate(rows):
            w.write(chans[t], struct.pack("<I", i), log_time=lt)
    return path


def messages_of(r: Reader, ids: set[int] | None) -> list[Message]:
    return [m for m in r.messages(order="file") if ids is None or m.channel.id in ids]


def check_exact(r: Reader, ids: set[int] | None) -> list[tuple[int, int, int]]:
    """The counts of ``ids`` per chunk equal the messages read in each chunk's range."""
    got = r.chunk_message_counts(ids)
    assert got is not None
    msgs = messages_of(r, ids)
    assert sum(n for _s, _e, n in got) == len(msgs)
    for s, e, n in got:
        assert n > 0 and s <= e
        assert n == sum(1 for m in msgs if s <= m.log_time <= e), (s, e, n)
    # chunks left out hold none of them: every message lies in a listed chunk
    assert all(any(s <= m.log_time <= e for s, e, _n in got) for m in msgs)
    return got


def selections(r: Reader) -> list[set[int] | None]:
    chans = r.summary.channels.values()
    return [None, set(), topic_filter(["/a"], chans), topic_filter(["/b", "/c"], chans), {9999}]


@pytest.mark.parametrize("suffix", [".mcap", ".bag"])
def test_indexed_counts_equal_the_messages(tmp_path: Path, suffix: str) -> None:
    path = write(tmp_path / f"f{suffix}", rows_for((300, 120, 7)))
    with polybag.open(path) as r:
        assert r.has_index
        assert r.summary.chunk_count > 5
        for ids in selections(r):
            check_exact(r, ids)
        assert r.chunk_message_counts(set()) == []
        assert r.chunk_message_counts({9999}) == []
        # every channel: one entry per non-empty chunk, at the summary's chunk times
        every = r.chunk_message_counts(None)
        assert every is not None
        assert [(s, e) for s, e, _n in every] == [(c.start_time, c.end_time) for c in r.summary.chunks]
        # /c (7 messages) lives in a few chunks only: the others are left out
        c_only = r.chunk_message_counts(topic_filter(["/c"], r.summary.channels.values()))
        assert c_only is not None and 0 < len(c_only) < len(every)


@pytest.mark.parametrize("suffix", [".mcap", ".bag"])
def test_counts_read_no_message_data(tmp_path: Path, suffix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path / f"f{suffix}", rows_for((200, 50, 0)))
    with polybag.open(path) as r:
        ids = topic_filter(["/a"], r.summary.channels.values())
        want = r.chunk_message_counts(ids)

    def boom(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("chunk data was read")

    monkeypatch.setattr(McapContext, "chunk_data", boom)
    monkeypatch.setattr(McapInfo, "_summary_from_scan", boom)
    monkeypatch.setattr(ChunkLoader, "load", boom)
    monkeypatch.setattr(ChunkLoader, "read_index_data", boom)
    from polybag.formats.bag import chunks as bag_chunks  # where the reader calls it

    monkeypatch.setattr(bag_chunks, "decompress", boom)
    with polybag.open(path) as r:
        assert r.chunk_message_counts(ids) == want and want


def test_mcap_overlapping_chunks(tmp_path: Path) -> None:
    # written out of time order: chunk ranges overlap, the counts still add up per channel
    rows = rows_for((150, 150, 150))
    rows = rows[::2] + rows[1::2]
    path = write(tmp_path / "f.mcap", rows)
    with polybag.open(path) as r:
        for ids in selections(r):
            got = r.chunk_message_counts(ids)
            assert got is not None
            msgs = messages_of(r, ids)
            assert sum(n for *_t, n in got) == len(msgs)
            assert all(any(s <= m.log_time <= e for s, e, _n in got) for m in msgs)


def test_mcap_without_summary_or_chunk_index(tmp_path: Path) -> None:
    rows = rows_for((100, 100, 0))
    # no summary section at all: no index
    data = write(tmp_path / "f.mcap", rows).read_bytes()
    with polybag.open(tmp_path / "f.mcap") as r:
        footer = r.footer
        assert footer is not None and footer.summary_start
    # the data section as written, then a Footer that points at no summary
    nosum = data[: footer.summary_start] + struct.pack("<BQQQI", 0x02, 20, 0, 0, 0) + data[:8]
    with polybag.open(nosum) as r:
        assert not r.has_index
        assert r.chunk_message_counts(None) is None
        assert r.chunk_message_counts({0}) is None
        assert len(messages_of(r, None)) == 200  # the messages are all there
    # a summary without chunk indexes, and an unchunked file: no chunk index either
    for name, opts in (("noci.mcap", {"use_chunk_index": False}), ("flat.mcap", {"use_chunking": False})):
        with polybag.open(write(tmp_path / name, rows, **opts)) as r:
            assert r.has_index
            assert r.chunk_message_counts(None) is None


def test_mcap_without_message_indexes_estimates(tmp_path: Path) -> None:
    path = write(tmp_path / "f.mcap", rows_for((400, 100, 0)), use_message_index=False)
    with polybag.open(path) as r:
        ids = topic_filter(["/a"], r.summary.channels.values())
        got = r.chunk_message_counts(ids)
        k = r.summary.chunk_count
        assert got is not None and len(got) == k > 3
        # estimates: the topic's total shared out by chunk size, each at least 1
        assert all(n >= 1 for *_t, n in got)
        assert 400 - k <= sum(n for *_t, n in got) <= 400 + k


def test_mcap_damaged_message_index_header_falls_back_to_estimate(tmp_path: Path) -> None:
    path = write(tmp_path / "f.mcap", rows_for((200, 0, 0)))
    with polybag.open(path) as r:
        ci = r.chunk_indexes[1]
        exact = r.chunk_message_counts(None)
        off = next(iter(ci.message_index_offsets.values()))
    data = bytearray(path.read_bytes())
    data[off] = 0x55  # not a Message Index opcode any more
    with polybag.open(bytes(data), validate_crcs=False) as r:
        got = r.chunk_message_counts(None)
    assert got is not None and exact is not None and len(got) == len(exact)
    assert got[0] == exact[0] and got[2:] == exact[2:]
    assert got[1][:2] == exact[1][:2] and got[1][2] >= 1


def test_unindexed_bag(tmp_path: Path) -> None:
    path = write(tmp_path / "f.bag", rows_for((50, 50, 50)))
    with polybag.open(path) as r:
        index_pos = r.summary.extras["index_pos"]
        assert r.has_index and r.chunk_message_counts(None)
    cut = tmp_path / "cut.bag"
    cut.write_bytes(path.read_bytes()[:index_pos])
    with polybag.open(cut) as r:
        assert not r.has_index
        assert r.chunk_message_counts(None) is None
        assert r.chunk_message_counts({0}) is None
        assert len(messages_of(r, None)) == 150


def test_empty_indexed_files(tmp_path: Path) -> None:
    with polybag.open(write(tmp_path / "e.bag", [])) as r:
        assert r.has_index
        assert r.chunk_message_counts(None) is None  # no chunks: no chunk index to plan with
    with polybag.open(write(tmp_path / "e.mcap", [])) as r:
        assert r.has_index
        got = r.chunk_message_counts(None)
        # chunks without Message Indexes (here: empty ones) get the estimate of at least 1
        assert got is not None and len(got) == r.summary.chunk_count
        assert all(n == 1 for *_t, n in got)


def test_ulog_has_no_index(corpora: Path) -> None:
    for name in ("sample.ulg", "sample_log_small.ulg"):
        with polybag.open(corpora / "ulog" / name, warn=False) as r:
            assert not r.has_index
            assert r.chunk_message_counts(None) is None
            assert r.chunk_message_counts(set(r.summary.channels)) is None
            assert any(True for _ in r.messages())


def test_old_bags_use_the_default() -> None:
    from bag_helpers import build_v11, build_v12

    for data in (build_v12(with_index=True), build_v12(with_index=False), build_v11(b"#ROSRECORD V1.1\n")):
        with polybag.open(data, format="bag") as r:
            assert not r.has_index
            assert r.chunk_message_counts(None) is None
            assert len(messages_of(r, None)) == 4


def test_corpus_bags_and_mcaps(corpora: Path) -> None:
    # real files from other writers: wherever the index gives counts, they equal the messages
    checked = 0
    paths = sorted((corpora / "rosbag").rglob("*.bag"))[:12] + sorted((corpora / "mcap-samples").rglob("*.mcap"))
    for p in paths:
        try:
            r = polybag.open(p)
        except polybag.errors.PolybagError:
            continue
        with r:
            got = r.chunk_message_counts(None)
            if got is None:
                continue
            try:
                msgs = messages_of(r, None)
            except polybag.errors.PolybagError:
                continue
            assert sum(n for *_t, n in got) == len(msgs), p
            assert all(any(s <= m.log_time <= e for s, e, _n in got) for m in msgs), p
            checked += 1
    assert checked >= 3


class _SummaryOnly(Reader):
    """A reader that has only a summary: exercises the base implementation."""

    format = "fake"

    def __init__(self, summary: Summary) -> None:
        super().__init__(MappedSource(None, b""), "fake")
        self._s = summary

    @property
    def summary(self) -> Summary:
        return self._s

    def messages(self, *_a: Any, **_k: Any) -> Any:
        return iter(())


def _chunk(start: int, end: int, n: int) -> ChunkInfo:
    return ChunkInfo(0, 0, start, end, "none", 0, 0, n)


def test_base_default_shares_chunk_counts_out() -> None:
    chunks = [_chunk(0, 9, 20), _chunk(10, 19, 20), _chunk(20, 29, 0), _chunk(30, 39, 1)]
    s = Summary("fake", message_counts={1: 30, 2: 11}, chunks=chunks, indexed=True)
    r = _SummaryOnly(s)
    assert not r.has_index
    assert r.chunk_message_counts(None) == [(0, 9, 20), (10, 19, 20), (30, 39, 1)]
    assert r.chunk_message_counts({1}) == [(0, 9, 14), (10, 19, 14), (30, 39, 1)]
    assert r.chunk_message_counts({2}) == [(0, 9, 5), (10, 19, 5), (30, 39, 1)]
    assert r.chunk_message_counts(set()) == []
    assert r.chunk_message_counts({7}) == []
    # per-channel counts unknown: nothing to share out
    assert _SummaryOnly(Summary("fake", chunks=chunks, indexed=True)).chunk_message_counts({1}) == []
    # not from an index, or no chunks: no usable index
    assert _SummaryOnly(Summary("fake", message_counts={1: 3}, chunks=chunks, indexed=False)).chunk_message_counts() is None
    assert _SummaryOnly(Summary("fake", message_counts={1: 3}, indexed=True)).chunk_message_counts() is None


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    suffix=st.sampled_from([".mcap", ".bag"]),
    counts=st.tuples(st.integers(0, 120), st.integers(0, 60), st.integers(0, 5)),
    chunk_size=st.integers(20, 2000),
    pick=st.sets(st.sampled_from(TOPICS)),
)
def test_counts_property(
    tmp_path_factory: pytest.TempPathFactory, suffix: str, counts: tuple[int, int, int], chunk_size: int, pick: set[str]
) -> None:
    path = write(tmp_path_factory.mktemp("cc") / f"f{suffix}", rows_for(counts), chunk_size=chunk_size)
    with polybag.open(path) as r:
        if not sum(counts):
            return  # an empty file: see test_empty_indexed_files
        check_exact(r, None)
        check_exact(r, topic_filter(sorted(pick), r.summary.channels.values()))
