"""A 2.0 bag's chunk record headers are read lazily (issue 17): opening an indexed bag reads
the bag header and the index section only; a chunk's header is read with its data, and
``summary``/``info``/``check`` read all of them in one batch.

Covered: which ranges open asks the source for (a recording source; over the tests' HTTP
Range server without multi-range: the request counts of open, a 1% window and a full read;
the same over S3, on SeaweedFS: tests/remote/test_bag_lazy_headers_s3.py), summary and
``info`` equal to an eager read (every header read right after open, as open did before) and
to an independent parse of the chunk records on the corpus bags, and chunk infos that lie
(pointing at a non-chunk record, outside the data section, at a header cut by the index
section): the same errors as before, now raised when the chunk is first needed (after the
messages before it), the same summary (the index dropped, the file scanned), the same
recovery; hypothesis over random ``chunk_pos`` values.
"""

from __future__ import annotations

import io
import struct
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polybag
from paths import CORPORA
from polybag.errors import FormatError, PolybagError
from polybag.formats.bag.check import check_bag
from polybag.formats.bag.reader import open_bag
from polybag.formats.bag.reader_v2 import BagV2Reader
from polybag.formats.bag.writer import BagWriter
from polybag.io.source import MappedSource

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "remote"))
from remote_helpers import check_lazy_bag_counts, lazy_bag, lazy_bag_jobs, serve  # noqa: E402

ROOT = CORPORA / "rosbag"
DEF = b"string data\n"


class RecordingSource(MappedSource):
    """A local source that records every range a reader asks for (need, need_many, hint)."""

    def __init__(self, data: bytes) -> None:
        super().__init__(None, data)
        self.asked: list[tuple[str, int, int]] = []

    def need(self, offset: int, length: int) -> None:
        self.asked.append(("need", offset, length))

    def need_many(self, ranges: Iterable[tuple[int, int]]) -> None:
        self.asked.extend(("need_many", o, n) for o, n in ranges)

    def hint(self, ranges: Iterable[tuple[int, int]]) -> None:
        self.asked.extend(("hint", o, n) for o, n in ranges)


def make_bag(n: int = 60, chunk_size: int = 300, compression: str = "none") -> bytes:
    """An indexed bag of ``n`` messages on /a and /b, many small chunks."""
    buf = io.BytesIO()
    w = BagWriter(buf, compression=compression, chunk_size=chunk_size)
    s = w.add_schema("std_msgs/String", "ros1msg", DEF)
    a = w.add_channel("/a", "ros1", s)
    b = w.add_channel("/b", "ros1", s)
    for i in range(n):
        d = (6).to_bytes(4, "little") + b"msg%03d" % i
        w.write(a if i % 3 else b, d, 10**9 * 100 + i * 1000)
    w.close()
    return buf.getvalue()


def chunk_pos_fields(data: bytes, index_pos: int) -> list[int]:
    """Where each chunk info record's ``chunk_pos`` value lies (in index order)."""
    out = []
    i = data.find(b"chunk_pos=", index_pos)
    while i >= 0:
        out.append(i + 10)
        i = data.find(b"chunk_pos=", i + 1)
    return out


def with_chunk_pos(data: bytes, k: int, value: int) -> bytes:
    """``data`` with the ``k``-th chunk info's ``chunk_pos`` set to ``value``."""
    with polybag.open(data) as r:
        index_pos = r.index_pos  # type: ignore[attr-defined]
    at = chunk_pos_fields(data, index_pos)[k]
    out = bytearray(data)
    out[at : at + 8] = struct.pack("<Q", value)
    return bytes(out)


def chunk_positions(data: bytes) -> tuple[list[int], int, int]:
    """The chunk records' offsets (file order), ``data_start`` and ``index_pos``."""
    r = open_bag(MappedSource(None, data))
    assert isinstance(r, BagV2Reader)
    return sorted(ci.pos for ci in r.chunks), r.data_start, r.index_pos


def file_order(data: bytes, **kw: Any) -> tuple[list[tuple[str, int, bytes]], PolybagError | None]:
    """Messages in file order up to the first error, and that error."""
    out: list[tuple[str, int, bytes]] = []
    with polybag.open(data, **kw) as r:
        try:
            for m in r.messages(order="file"):
                out.append((m.topic, m.log_time, bytes(m.data)))
        except PolybagError as e:
            return out, e
    return out, None


def eager(data: bytes | str | Path, **kw: Any) -> BagV2Reader:
    """A reader with every chunk header read right after open (what open did before)."""
    r = polybag.open(data, **kw)
    assert isinstance(r, BagV2Reader)
    r.load_headers()
    return r


# --- open reads no chunk record -------------------------------------------------------------


def test_open_asks_for_no_chunk_record():
    data = make_bag()
    src = RecordingSource(data)
    r = open_bag(src)
    assert isinstance(r, BagV2Reader) and r.indexed and len(r.chunks) > 10
    assert all(ci.lazy for ci in r.chunks)
    # only the index section was asked for: nothing in the data section
    assert src.asked and all(o >= r.index_pos for _k, o, _n in src.asked), src.asked
    assert r.has_index and r.chunk_message_counts() is not None
    assert set(ch.topic for ch in r.channels().values()) == {"/a", "/b"}
    assert all(ci.lazy for ci in r.chunks)  # channels, counts: still no chunk record
    src.asked.clear()
    # a window reads the chunks it needs, each header with its data, up to the next chunk
    lo = 10**9 * 100 + 30 * 1000
    got = [m.log_time for m in r.messages(start=lo, end=lo + 3000)]
    assert got == [lo, lo + 1000, lo + 2000]
    loaded = [ci for ci in r.chunks if not ci.lazy]
    assert 1 <= len(loaded) <= 3
    asked_at = {o for k, o, _n in src.asked if k in ("hint", "need")}
    assert {ci.pos for ci in loaded} <= asked_at
    for ci in loaded:
        assert ("hint", ci.pos, ci.next_pos - ci.pos) in src.asked
    r.close()


def test_summary_reads_every_header_in_one_batch():
    data = make_bag()
    src = RecordingSource(data)
    r = open_bag(src)
    assert isinstance(r, BagV2Reader)
    src.asked.clear()
    s = r.summary
    assert not any(ci.lazy for ci in r.chunks)
    batch = [(o, n) for k, o, n in src.asked if k == "need_many"]
    assert sorted(o for o, _n in batch) == sorted(ci.pos for ci in r.chunks)
    assert s.indexed and s.message_count == 60 and len(s.chunks) == len(r.chunks)
    r.close()


@pytest.mark.parametrize("compression", ["none", "bz2", "lz4"])
def test_generated_bag_same_as_eager(compression):
    data = make_bag(compression=compression)
    with polybag.open(data) as lazy, eager(data) as ref:
        assert [(m.topic, m.log_time, bytes(m.data)) for m in lazy.messages()] == [
            (m.topic, m.log_time, bytes(m.data)) for m in ref.messages()
        ]
        assert lazy.info_extras() == ref.info_extras()
        assert lazy.summary == ref.summary
    with polybag.open(data) as lazy, eager(data) as ref:  # summary first, then payloads
        assert lazy.info_extras() == ref.info_extras()
        a, b = lazy.topic_payloads("/a"), ref.topic_payloads("/a")
        assert all((x == y).all() for x, y in zip(a, b))


def _v2_indexed_corpus() -> list[str]:
    out = []
    for p in sorted(ROOT.glob("*/*.bag")):
        if p.stat().st_size and p.read_bytes()[:13] == b"#ROSBAG V2.0\n":
            out.append(str(p.relative_to(ROOT)))
    return out


def _parse_chunk_header(data: bytes, pos: int) -> tuple[str, int, int, int, int]:
    """compression, size, data offset, data length, record length of the chunk record at
    ``pos`` (an independent parse)."""
    (hl,) = struct.unpack_from("<I", data, pos)
    h = data[pos + 4 : pos + 4 + hl]
    f: dict[str, bytes] = {}
    p = 0
    while p < len(h):
        (n,) = struct.unpack_from("<I", h, p)
        k, _, v = h[p + 4 : p + 4 + n].partition(b"=")
        f[k.decode()] = v
        p += 4 + n
    assert f["op"] == b"\x05"
    ds = pos + 4 + hl + 4
    (dl,) = struct.unpack_from("<I", data, ds - 4)
    return f["compression"].decode(), struct.unpack("<I", f["size"])[0], ds, dl, ds + dl - pos


@pytest.mark.skipif(not ROOT.exists(), reason="no shared corpora")
@pytest.mark.parametrize("name", _v2_indexed_corpus())
def test_corpus_bags(name):
    path = ROOT / name
    data = path.read_bytes()
    src = RecordingSource(data)
    r = open_bag(src, str(path))
    assert isinstance(r, BagV2Reader)
    if not r.indexed:
        r.close()
        pytest.skip(f"unindexed: {r.index_problem}")
    assert all(o >= r.index_pos for _k, o, _n in src.asked)
    with eager(path) as ref:
        assert r.info_extras() == ref.info_extras()
        assert r.summary == ref.summary
        assert [(m.topic, m.log_time, bytes(m.data)) for m in r.messages()] == [
            (m.topic, m.log_time, bytes(m.data)) for m in ref.messages()
        ]
    for ci, info in zip(r.chunks, r.summary.chunks):
        comp, size, ds, dl, rl = _parse_chunk_header(data, ci.pos)
        assert (info.offset, info.compressed_size, info.uncompressed_size, info.length) == (ci.pos, dl, size, rl)
        assert (ci.data_start, ci.compression) == (ds, {"": "none"}.get(comp, comp))
    r.close()


# --- chunk infos that lie ------------------------------------------------------------------


def _lie_to_index_data(data: bytes, k: int) -> tuple[bytes, int]:
    """The ``k``-th chunk (file order) pointed at its own index data record instead."""
    r = open_bag(MappedSource(None, data))
    assert isinstance(r, BagV2Reader)
    order = sorted(range(len(r.chunks)), key=lambda i: r.chunks[i].pos)
    ci = r.chunks[order[k]]
    r.loader.header_of(ci)
    return with_chunk_pos(data, order[k], ci.index_end), ci.index_end


@pytest.mark.parametrize("order", ["file", "log_time"])
def test_chunk_info_pointing_at_index_data(order):
    data = make_bag()
    bad, at = _lie_to_index_data(data, 5)
    all_msgs, err = file_order(data)
    assert err is None
    with polybag.open(bad) as r:
        assert isinstance(r, BagV2Reader) and r.indexed  # found at open no more
        got: list[tuple[str, int, bytes]] = []
        with pytest.raises(FormatError) as ei:
            for m in r.messages(order=order):
                got.append((m.topic, m.log_time, bytes(m.data)))
        assert "not a chunk" in str(ei.value) and str(at) in str(ei.value)
        # every message of the chunks before it, then the error
        assert got == all_msgs[: len(got)] and len(got) >= 5  # (5 chunks of 1 or more messages)
        # the summary: as when found at open before: the index dropped, the file scanned
        s = r.summary
        assert not s.indexed and "not a chunk" in s.extras["index_problem"]
        assert s.message_count == len(all_msgs)
        assert [(m.topic, m.log_time, bytes(m.data)) for m in r.messages(order="file")] == all_msgs
    with eager(bad) as ref, polybag.open(bad) as r2:
        assert r2.info_extras() == ref.info_extras()
        assert not ref.indexed and "not a chunk" in str(ref.index_problem)
    # recovery never trusts the index: every message, index_problem as before
    got_r, err_r = file_order(bad, recover=True)
    assert err_r is None and got_r == all_msgs
    with polybag.open(bad, recover=True) as rr:
        assert "not a chunk" in str(rr.index_problem)  # type: ignore[attr-defined]


def test_chunk_info_outside_the_data_section_found_at_open():
    data = make_bag()
    _pos, _ds, index_pos = chunk_positions(data)
    all_msgs, _ = file_order(data)
    for value in (3, index_pos + 10, len(data) + 100):
        bad = with_chunk_pos(data, 2, value)
        with polybag.open(bad) as r:
            assert isinstance(r, BagV2Reader)
            assert not r.indexed and "outside the data section" in str(r.index_problem)
            assert str(value) in str(r.index_problem)
            assert [(m.topic, m.log_time, bytes(m.data)) for m in r.messages(order="file")] == all_msgs


def test_chunk_header_cut_by_the_index_section():
    data = make_bag()
    _pos, _ds, index_pos = chunk_positions(data)
    bad = with_chunk_pos(data, -1, index_pos - 2)  # the last chunk, its header cut
    all_msgs, _ = file_order(data)
    got, err = file_order(bad)
    assert isinstance(err, FormatError) and str(index_pos - 2) in str(err)
    assert got == all_msgs[: len(got)]
    with polybag.open(bad) as r:
        s = r.summary
        assert not s.indexed and s.message_count == len(all_msgs)


def test_check_and_reindex_of_a_lying_index(tmp_path):
    data = make_bag()
    bad, _at = _lie_to_index_data(data, 3)
    p = tmp_path / "lying.bag"
    p.write_bytes(bad)
    res = check_bag(str(p))
    assert res["messages"] == 60
    assert any("index is unusable" in x and "not a chunk" in x for x in res["problems"]), res
    from polybag.formats.bag.reindex import reindex_bag

    out = tmp_path / "fixed.bag"
    rep = reindex_bag(str(p), str(out))
    assert rep["messages"] == 60 and rep["was_indexed"] is False and "not a chunk" in rep["index_problem"]
    with polybag.open(str(out)) as r:
        assert r.summary.indexed and r.summary.message_count == 60
    assert check_bag(str(out))["problems"] == []


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(k=st.integers(0, 100), value=st.integers(0, 1 << 16), order=st.sampled_from(["file", "log_time"]))
def test_random_chunk_pos(k, value, order):
    """Any chunk_pos: only polybag errors; the lazy reader's messages are the eager reader's
    (or, when the index lies about a record, a prefix of them in file order before the
    error); its summary after the read is the eager one."""
    data = _BAG
    n_chunks = len(_SPANS)
    bad = with_chunk_pos(data, k % n_chunks, value % (len(data) + 64))
    lo, hi = _SPANS[k % n_chunks]
    others = [m for m in _ALL if not lo <= m[1] <= hi]  # the messages of the other chunks
    with eager(bad) as ref:
        want = [(m.topic, m.log_time, bytes(m.data)) for m in ref.messages(order=order)] if ref.indexed else None
        ref_info = ref.info_extras()
    with polybag.open(bad) as r:
        got: list[tuple[str, int, bytes]] = []
        err = None
        try:
            for m in r.messages(order=order):
                got.append((m.topic, m.log_time, bytes(m.data)))
        except PolybagError as e:
            err = e
        if want is not None:
            assert err is None and got == want
        elif err is not None:
            assert isinstance(err, FormatError)
            if order == "file":  # those of the chunks before the one that lies
                assert got == others[: len(got)]
        assert r.info_extras() == ref_info


_BAG = make_bag()
_ALL = file_order(_BAG)[0]
with polybag.open(_BAG) as _r:
    _SPANS = [(ci.start, ci.end) for ci in _r.chunks]  # type: ignore[attr-defined]  (in index order)


# --- over HTTP (one range a request): requests of open, a 1% window, a full read -------------
# (over S3: tests/remote/test_bag_lazy_headers_s3.py, on the `seaweed` fixture)


@pytest.fixture(scope="module")
def big_bag(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, int]:
    return lazy_bag(tmp_path_factory.mktemp("lazy") / "big.bag")


def test_http_one_range_per_request(big_bag):
    p, n_chunks, size = big_bag
    gen = serve(p.parent, multirange=False)
    srv = next(gen)
    try:
        check_lazy_bag_counts(lazy_bag_jobs(f"{srv.url}/{p.name}", {}), n_chunks, size)
    finally:
        gen.close()


def test_columns_read_no_other_chunk_header():
    """``topic_columns`` and a Dask partition's window take the channels from the index (no
    summary): only the chunks they read have their header read."""
    from polybag.dask._read import _columns_window

    data = make_bag()
    r = open_bag(RecordingSource(data))
    assert isinstance(r, BagV2Reader)
    lo = 10**9 * 100 + 30 * 1000
    cols = _columns_window(r, "/a", None, lo, lo + 3000)
    assert cols["log_time"].tolist() == [lo + 1000, lo + 2000]
    assert 1 <= sum(not ci.lazy for ci in r.chunks) <= 3 and r._summary is None
    cols = r.topic_columns("/b")
    assert len(cols["log_time"]) == 20 and r._summary is None
    r.close()


def test_recompress_of_a_lying_index(tmp_path):
    """``compress`` checks every chunk record first, as open did: the lying index is not
    used, the scanned chunks are recompressed."""
    from polybag.formats.bag.reindex import recompress_bag

    bad, _at = _lie_to_index_data(make_bag(), 4)
    p = tmp_path / "lying.bag"
    p.write_bytes(bad)
    out = tmp_path / "lz4.bag"
    assert recompress_bag(str(p), str(out), "lz4")["messages"] == 60
    assert file_order(out.read_bytes()) == (_ALL, None)


def test_dask_planning_a_remote_bag_reads_no_chunk_header(big_bag):
    """Partitions of a remote bag come from its index (channels and chunk counts): planning
    asks for the head, the tail and the index section, never one range per chunk."""
    from polybag.dask._plan import partitions

    p, n_chunks, _size = big_bag
    want = partitions([str(p)], topics=["/big"], partition_messages=100)
    gen = serve(p.parent, multirange=False)
    srv = next(gen)
    try:
        srv.reset()
        got = partitions([f"{srv.url}/{p.name}"], topics=["/big"], partition_messages=100)
        requests = srv.requests
    finally:
        gen.close()
    assert [(q.start, q.end, q.lo, q.hi, q.estimate) for q in got] == [(q.start, q.end, q.lo, q.hi, q.estimate) for q in want]
    assert len(got) > 3
    assert requests <= 6 < n_chunks
