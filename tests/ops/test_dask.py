"""polybag.dask: partitions from the files' indexes, results equal to the readers and peers."""

from __future__ import annotations

import os
import pickle
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polybag

dask = pytest.importorskip("dask")
dd = pytest.importorskip("dask.dataframe")

import cloudpickle  # noqa: E402  (comes with dask)

import polybag.dask as pbd  # noqa: E402
from polybag.errors import PolybagError, UnsupportedError, UsageError  # noqa: E402

A_DEF = b"int32 x\nfloat64 y\nstring s\n"
B_DEF = b"uint16 k\n"
A = struct.Struct("<id")


def a_payload(x: int, y: float, s: str) -> bytes:
    b = s.encode()
    return A.pack(x, y) + struct.pack("<I", len(b)) + b


def rows_out_of_order(n: int, seed: int, base: int = 10_000_000_000) -> list[tuple[str, int, bytes]]:
    """Messages written out of time order (chunks overlap in time), with many equal times."""
    rng = np.random.default_rng(seed)
    out: list[tuple[str, int, bytes]] = []
    for i in range(n):
        # a slow upward drift plus jitter as large as many chunks: chunk ranges overlap
        t = base + (i // 3) * 1000 + int(rng.integers(0, 40)) * 20_000
        if i % 4 == 3:
            out.append(("/b", t, struct.pack("<H", i % 65536)))
        else:
            out.append(("/a", t, a_payload(i, i * 0.5, f"m{i % 7}")))
    return out


def write_mcap(
    path: Path, rows: list[tuple[str, int, bytes]], chunk_size: int = 1500, **opts: object
) -> None:
    from polybag.formats.mcap.writer import McapWriter

    with McapWriter(path, chunk_size=chunk_size, compression="lz4", **opts) as w:  # type: ignore[arg-type]
        sa = w.add_schema("pkg/A", "ros1msg", A_DEF)
        sb = w.add_schema("pkg/B", "ros1msg", B_DEF)
        chans = {"/a": w.add_channel("/a", "ros1", sa), "/b": w.add_channel("/b", "ros1", sb)}
        for i, (topic, t, data) in enumerate(rows):
            w.write(chans[topic], data, log_time=t, publish_time=t + 1, sequence=i)


def write_bag(path: Path, rows: list[tuple[str, int, bytes]], chunk_size: int = 1500, **opts: object) -> None:
    from polybag.formats.bag.writer import BagWriter

    with BagWriter(path, chunk_size=chunk_size, **opts) as w:  # type: ignore[arg-type]
        sa = w.add_schema("pkg/A", "ros1msg", A_DEF)
        sb = w.add_schema("pkg/B", "ros1msg", B_DEF)
        chans = {"/a": w.add_channel("/a", "ros1", sa), "/b": w.add_channel("/b", "ros1", sb)}
        for topic, t, data in rows:
            w.write(chans[topic], data, log_time=t)


def write_ulog(path: Path, n: int, t0_us: int) -> None:
    from polybag.formats.ulog.writer import UlogWriter

    with UlogWriter(path, start_timestamp=t0_us) as w:
        w.add_format("thing:uint64_t timestamp;float x;int32_t k;")
        ch = w.add_subscription("thing", 0)
        for i in range(n):
            w.write(
                ch,
                struct.pack("<Qfi", t0_us + i * 1000, i * 0.25, i - 50),
                log_time=(t0_us + i * 1000) * 1000,
            )


def no_open_files(root: Path) -> None:
    """Nothing under ``root`` is open or mapped by this process any more."""
    maps = Path("/proc/self/maps").read_text()
    assert str(root) not in maps
    fds = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            fds.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            pass
    assert not [f for f in fds if f.startswith(str(root))]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("dask")
    rows = rows_out_of_order(3000, 1)
    out = {"mcap": d / "ooo.mcap", "bag": d / "ooo.bag"}
    write_mcap(out["mcap"], rows)
    write_bag(out["bag"], rows)
    return out


def reader_frame(path: Path, topic: str) -> object:
    with polybag.open(path) as r:
        return r.to_pandas(topic)


def sync(x: object) -> object:
    return x.compute(scheduler="sync")  # type: ignore[attr-defined]


# --- partitions ---------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["mcap", "bag"])
def test_windows_tile_time_and_follow_chunks(files: dict[str, Path], fmt: str) -> None:
    path = files[fmt]
    with polybag.open(path) as r:
        n_chunks = r.summary.chunk_count
        n_a = r.summary.topic_message_counts()["/a"]
    assert n_chunks > 20
    parts = pbd.partitions(path, ["/a"], partition_messages=300)
    assert len(parts) > 3
    # open ends, and each window starts where the previous one ended
    assert parts[0].start is None and parts[-1].end is None
    for a, b in zip(parts, parts[1:]):
        assert a.end == b.start and a.end is not None
    # the estimates are the per-chunk per-channel counts from the index: they sum exactly
    assert sum(p.estimate for p in parts) == n_a
    # and the partitions are balanced although every chunk overlaps dozens of others
    sizes = pbd.read_topic(path, "/a", partition_messages=300).map_partitions(len).compute(scheduler="sync")
    assert len(sizes) == len(parts) and sizes.sum() == n_a
    assert 150 <= sizes.min() and sizes.max() <= 450
    assert all(abs(int(n) - p.estimate) <= 60 for n, p in zip(sizes, parts))


def test_cuts_fall_on_chunk_starts_when_chunks_do_not_overlap(tmp_path: Path) -> None:
    rows = [("/a", 10**9 + i * 1000, a_payload(i, 0.0, "")) for i in range(2000)]
    path = tmp_path / "ordered.mcap"
    write_mcap(path, rows, chunk_size=1000)
    with polybag.open(path) as r:
        chunk_starts = {c.start_time for c in r.summary.chunks}
    parts = pbd.partitions(path, ["/a"], partition_messages=200)
    assert len(parts) == 10
    # no chunk is split between two partitions (none is read twice)
    assert all(p.start in chunk_starts for p in parts[1:])
    assert sum(p.estimate for p in parts) == 2000


@pytest.mark.parametrize("fmt", ["mcap", "bag"])
def test_read_topic_equals_reader_with_overlapping_chunks(files: dict[str, Path], fmt: str) -> None:
    path = files[fmt]
    df = pbd.read_topic(path, "/a", partition_messages=250, file_column=False)
    assert df.npartitions > 3
    assert df.known_divisions
    got = sync(df)
    want = reader_frame(path, "/a")
    assert len(got) == len(want) == 2250
    # same rows in the same order (log time, ties in file order): nothing lost or duplicated
    assert list(got.columns) == list(want.columns) == ["x", "y", "s"]
    assert np.array_equal(got.index.to_numpy(), want.index.to_numpy())
    assert np.array_equal(got["x"].to_numpy(), want["x"].to_numpy())
    assert np.array_equal(got["y"].to_numpy(), want["y"].to_numpy())
    assert list(got["s"]) == list(want["s"])
    # the very same frame: values, dtypes (strings as pandas makes them), index
    assert got.equals(want) and got.dtypes.equals(want.dtypes)
    assert sorted(got["x"]) == [i for i in range(3000) if i % 4 != 3]
    # each partition holds exactly its division's range
    divs = df.divisions
    for i in range(df.npartitions):
        p = df.get_partition(i).compute(scheduler="sync")
        if len(p):
            assert divs[i] <= p.index.min()
            assert p.index.max() < divs[i + 1] or (i == df.npartitions - 1 and p.index.max() == divs[-1])
    no_open_files(path.parent)


def test_mcap_equals_the_mcap_library(files: dict[str, Path]) -> None:
    from mcap.reader import make_reader

    path = files["mcap"]
    with open(path, "rb") as f:
        peer = [(m.log_time, bytes(m.data)) for _s, _c, m in make_reader(f).iter_messages(topics=["/a"])]
    raw = sync(pbd.read_topic(path, "/a", decode=False, partition_messages=200))
    assert sorted(zip(raw.index.tolist(), raw["data"].tolist())) == sorted(peer)
    dec = sync(pbd.read_topic(path, "/a", partition_messages=200, fields=["x"]))
    assert sorted(zip(dec.index.tolist(), dec["x"].tolist())) == sorted(
        (t, A.unpack_from(d)[0]) for t, d in peer
    )
    assert set(dec["file"].astype(str)) == {str(path)}


def test_bag_equals_rosbags(files: dict[str, Path]) -> None:
    from rosbags.rosbag1 import Reader

    path = files["bag"]
    with Reader(path) as r:
        conns = [c for c in r.connections if c.topic == "/b"]
        peer = sorted((t, struct.unpack("<H", raw)[0]) for _c, t, raw in r.messages(connections=conns))
    assert len(pbd.partitions(path, ["/b"], partition_messages=100)) > 3
    got = sync(pbd.read_topic(path, "/b", partition_messages=100))
    assert sorted(zip(got.index.tolist(), got["k"].tolist())) == peer
    assert len(peer) == 750


@pytest.mark.parametrize("fmt", ["mcap", "bag"])
def test_start_end_windows(files: dict[str, Path], fmt: str) -> None:
    path = files[fmt]
    want = reader_frame(path, "/a")
    t = want.index.to_numpy()
    start, end = int(t[400]), int(t[1700])
    df = pbd.read_topic(path, "/a", start=start, end=end, partition_messages=200, file_column=False)
    got = sync(df)
    exp = want[(t >= start) & (t < end)]
    assert df.npartitions > 1
    assert len(got) == len(exp) > 1000
    assert np.array_equal(got.index.to_numpy(), exp.index.to_numpy())
    assert np.array_equal(got["x"].to_numpy(), exp["x"].to_numpy())
    assert df.divisions[0] >= start and df.divisions[-1] < end
    # a window before every message is empty, not an error
    assert len(sync(pbd.read_topic(path, "/a", end=int(t[0])))) == 0


def test_glob_of_time_ordered_files_has_known_divisions(tmp_path: Path) -> None:
    # three recordings one after another, given in scrambled order
    for k, name in [(2, "c"), (0, "a"), (1, "b")]:
        write_mcap(tmp_path / f"{name}.mcap", rows_out_of_order(600, k, base=10**12 + k * 10**10))
    df = pbd.read_topic(str(tmp_path / "*.mcap"), "/a", partition_messages=100)
    assert df.known_divisions and df.npartitions > 6
    got = sync(df)
    assert got.index.is_monotonic_increasing
    assert len(got) == 3 * 450
    assert list(dict.fromkeys(got["file"].astype(str))) == [str(tmp_path / f"{x}.mcap") for x in "abc"]
    # the same through the threaded scheduler
    again = df.compute(scheduler="threads")
    assert np.array_equal(again.index.to_numpy(), got.index.to_numpy())
    no_open_files(tmp_path)


def test_overlapping_files_share_global_windows(tmp_path: Path) -> None:
    # two recordings of the same time span (two robots): windows over both files' chunks
    write_mcap(tmp_path / "a.mcap", rows_out_of_order(900, 0, base=10**12))
    write_mcap(tmp_path / "d.mcap", rows_out_of_order(900, 9, base=10**12 + 7))
    paths = [tmp_path / "a.mcap", tmp_path / "d.mcap"]
    parts = pbd.partitions(paths, ["/a"], partition_messages=150)
    assert len(parts) > 4 and all(len(p.files) == 2 for p in parts[1:-1])
    assert sum(p.estimate for p in parts) == 2 * 675
    df = pbd.read_topic(paths, "/a", partition_messages=150)
    assert df.known_divisions and df.npartitions == len(parts)
    got = df.compute(scheduler="threads")
    assert got.index.is_monotonic_increasing
    fa, fd = reader_frame(paths[0], "/a"), reader_frame(paths[1], "/a")
    assert len(got) == 2 * 675
    for p, f in ((paths[0], fa), (paths[1], fd)):
        mine = got[got["file"] == str(p)]
        # each file's rows: exactly the reader's, in the reader's order
        assert np.array_equal(mine.index.to_numpy(), f.index.to_numpy())
        assert np.array_equal(mine["x"].to_numpy(), f["x"].to_numpy())
    msgs = pbd.read_messages(paths, ["/a"], partition_messages=150).compute(scheduler="sync")
    assert [m["log_time"] for m in msgs] == got.index.tolist()
    assert [m["data"]["x"] for m in msgs] == got["x"].tolist()
    # a file without an index among them: per-file partitions, divisions unknown, same rows
    write_mcap(tmp_path / "n.mcap", rows_out_of_order(300, 4, base=10**12), use_chunk_index=False)
    df3 = pbd.read_topic([*paths, tmp_path / "n.mcap"], "/a", partition_messages=150)
    assert not df3.known_divisions
    got3 = df3.compute(scheduler="threads")
    assert sorted(got3.index) == sorted(
        [*fa.index, *fd.index, *reader_frame(tmp_path / "n.mcap", "/a").index]
    )
    no_open_files(tmp_path)


def test_unindexed_files_are_one_partition(tmp_path: Path) -> None:
    rows = rows_out_of_order(900, 3)
    write_mcap(
        tmp_path / "nosum.mcap", rows, use_chunk_index=False, use_statistics=False, use_summary_offsets=False
    )
    write_mcap(tmp_path / "indexed.mcap", rows)
    parts = pbd.partitions(tmp_path / "nosum.mcap", ["/a"], partition_messages=50)
    assert len(parts) == 1 and parts[0].estimate == -1
    assert len(pbd.partitions(tmp_path / "indexed.mcap", ["/a"], partition_messages=50)) > 5
    got = sync(pbd.read_topic(tmp_path / "nosum.mcap", "/a", partition_messages=50, file_column=False))
    want = reader_frame(tmp_path / "indexed.mcap", "/a")
    assert np.array_equal(got.index.to_numpy(), want.index.to_numpy())
    assert np.array_equal(got["x"].to_numpy(), want["x"].to_numpy())


def test_mcap_without_message_indexes(tmp_path: Path) -> None:
    # chunk indexes but no message index records: counts estimated from chunk sizes
    path = tmp_path / "nomi.mcap"
    write_mcap(path, rows_out_of_order(3000, 1), use_message_index=False)
    parts = pbd.partitions(path, ["/a"], partition_messages=250)
    assert len(parts) > 4 and all(p.estimate > 0 for p in parts)
    got = pbd.read_topic(path, "/a", partition_messages=250, file_column=False).compute(scheduler="threads")
    want = reader_frame(path, "/a")
    assert np.array_equal(got.index.to_numpy(), want.index.to_numpy())
    assert np.array_equal(got["x"].to_numpy(), want["x"].to_numpy())


def test_bag_without_index(tmp_path: Path, files: dict[str, Path]) -> None:
    # cut the index off: the reader scans, dask makes one partition
    data = files["bag"].read_bytes()
    with polybag.open(files["bag"]) as r:
        index_pos = r.summary.extras["index_pos"]
    cut = tmp_path / "cut.bag"
    cut.write_bytes(data[:index_pos])
    with polybag.open(cut) as r:
        assert not r.summary.indexed
    df = pbd.read_topic(cut, "/a", partition_messages=100, file_column=False)
    assert df.npartitions == 1
    got = sync(df)
    want = reader_frame(files["bag"], "/a")
    assert np.array_equal(got["x"].to_numpy(), want["x"].to_numpy())


def test_ulog_one_partition_per_file_equals_pyulog(tmp_path: Path) -> None:
    import pyulog

    write_ulog(tmp_path / "a.ulg", 500, 1_000_000)
    write_ulog(tmp_path / "b.ulg", 300, 9_000_000)
    df = pbd.read_topic(str(tmp_path / "*.ulg"), "thing", partition_messages=10)
    assert df.npartitions == 2
    got = df.compute(scheduler="threads")
    assert len(got) == 800
    for name in ("a", "b"):
        part = got[got["file"] == str(tmp_path / f"{name}.ulg")]
        d = pyulog.ULog(str(tmp_path / f"{name}.ulg"), ["thing"]).get_dataset("thing").data
        for k in ("timestamp", "x", "k"):
            assert np.array_equal(part[k].to_numpy(), d[k]), k
        assert np.array_equal(part.index.to_numpy(), d["timestamp"].astype(np.int64) * 1000)
    # a file without the topic adds no rows; a missing field is an error, not an empty frame
    from polybag.formats.ulog.writer import UlogWriter

    with UlogWriter(tmp_path / "c.ulg", start_timestamp=1) as w:
        w.add_format("other:uint64_t timestamp;int32_t k;")
        ch = w.add_subscription("other", 0)
        w.write(ch, struct.pack("<Qi", 5, 1), log_time=5000)
    assert len(pbd.read_topic(str(tmp_path / "*.ulg"), "thing").compute(scheduler="sync")) == 800
    with pytest.raises(PolybagError, match="nope"):
        pbd.read_topic(tmp_path / "a.ulg", "thing", fields=["nope"]).compute(scheduler="sync")
    assert len(pbd.read_topic(tmp_path / "a.ulg", "thing", multi_id=3).compute(scheduler="sync")) == 0
    # a window on ULog
    w = sync(pbd.read_topic(tmp_path / "a.ulg", "thing", start=1_100_000_000, end=1_200_000_000))
    assert w["timestamp"].tolist() == list(range(1_100_000, 1_200_000, 1000))


@settings(max_examples=100, deadline=None)
@given(
    chunks=st.lists(
        st.tuples(st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1), st.integers(0, 10_000)), max_size=40
    )
    | st.lists(st.tuples(st.integers(0, 100), st.integers(0, 100), st.integers(0, 50)), max_size=40),
    per_part=st.integers(1, 5000),
)
def test_windows_tile_for_any_index(chunks: list[tuple[int, int, int]], per_part: int) -> None:
    # any index (even one saying end < start, or u64 times): windows tile the time axis
    parts = pbd._windows("f", "mcap", chunks, None, None, per_part)
    if not any(n for _s, _e, n in chunks):
        assert parts == []
        return
    assert parts[0].start is None and parts[-1].end is None
    for a, b in zip(parts, parts[1:]):
        assert a.end == b.start and a.end is not None and a.lo <= a.hi < b.lo
    assert sum(p.estimate for p in parts) == sum(n for _s, _e, n in chunks)
    assert all(p.estimate >= 0 for p in parts)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    times=st.lists(st.integers(0, 2000), min_size=0, max_size=300),
    chunk_size=st.integers(60, 3000),
    per_part=st.integers(1, 200),
    fmt=st.sampled_from(["mcap", "bag"]),
    window=st.tuples(st.none() | st.integers(0, 2000), st.none() | st.integers(0, 2000)),
)
def test_partitions_never_lose_or_duplicate(
    tmp_path_factory: pytest.TempPathFactory,
    times: list[int],
    chunk_size: int,
    per_part: int,
    fmt: str,
    window: tuple[int | None, int | None],
) -> None:
    # arbitrary write orders (chunks overlap, equal times across chunk boundaries)
    d = tmp_path_factory.mktemp("prop")
    rows = [
        ("/a" if i % 3 else "/b", 10**9 + t * 1000, a_payload(i, 0.0, "") if i % 3 else b"\x01\x00")
        for i, t in enumerate(times)
    ]
    path = d / f"p.{fmt}"
    (write_mcap if fmt == "mcap" else write_bag)(path, rows, chunk_size=chunk_size)
    start, end = (None if w is None else 10**9 + w * 1000 for w in window)
    want = [
        (t, i)
        for i, (tp, t, _d) in enumerate(rows)
        if tp == "/a" and (start is None or t >= start) and (end is None or t < end)
    ]
    df = pbd.read_topic(path, "/a", start=start, end=end, partition_messages=per_part, file_column=False)
    got = df.compute(scheduler="sync")
    # log-time order, ties in write order: exactly the reader's order
    assert list(zip(got.index.tolist(), got["x"].tolist())) == sorted(want)
    if df.known_divisions and len(got):
        assert df.divisions[0] <= got.index[0] and got.index[-1] <= df.divisions[-1]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    files_times=st.lists(st.lists(st.integers(0, 3000), min_size=1, max_size=150), min_size=2, max_size=3),
    chunk_size=st.integers(60, 2000),
    per_part=st.integers(1, 100),
)
def test_many_files_never_lose_or_duplicate(
    tmp_path_factory: pytest.TempPathFactory, files_times: list[list[int]], chunk_size: int, per_part: int
) -> None:
    d = tmp_path_factory.mktemp("propm")
    paths = []
    want = []
    for k, times in enumerate(files_times):
        rows = [("/a", 10**9 + t * 1000, a_payload(i, 0.0, "")) for i, t in enumerate(times)]
        paths.append(d / f"f{k}.mcap")
        write_mcap(paths[-1], rows, chunk_size=chunk_size)
        want += [(10**9 + t * 1000, k, i) for i, t in enumerate(times)]
    df = pbd.read_topic(paths, "/a", partition_messages=per_part)
    got = df.compute(scheduler="sync")
    codes = got["file"].cat.codes.tolist()
    rows_got = list(zip(got.index.tolist(), codes, got["x"].tolist()))
    assert df.known_divisions
    # time order; ties by file, then by the file's own order
    assert rows_got == sorted(want)


# --- corpora ------------------------------------------------------------------------------------
def test_corpus_bag_and_mcap(corpora: Path) -> None:
    bag = corpora / "rosbag" / "ros_comm" / "rosbag_storage_test.bag"
    got = sync(pbd.read_topic(bag, "numbers", file_column=False))
    want = reader_frame(bag, "numbers")
    assert got["data"].tolist() == want["data"].tolist() == list(range(10))
    mc = corpora / "mcap-samples" / "lichtblick" / "example.mcap"
    from mcap.reader import make_reader

    with open(mc, "rb") as f:
        peer = [m.log_time for _s, _c, m in make_reader(f).iter_messages(topics=["mouse"])]
    got = sync(pbd.read_topic(mc, "mouse", partition_messages=20))
    assert got.index.tolist() == sorted(peer) and len(peer) == 111
    want = reader_frame(mc, "mouse")
    for c in want.columns:
        assert got[c].tolist() == want[c].tolist()


CORPUS_FILES = [
    "rosbag/cruise-rosbag.js/example-unsorted-chunks.bag",
    "rosbag/embag/test.bag",
    "rosbag/embag/test_2.bag",
    "rosbag/foxglove-rosbag/example-lz4.bag",
    "mcap-samples/lichtblick/example.mcap",
]


def _same(a: list[object], b: list[object]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            if not np.array_equal(np.asarray(x), np.asarray(y)):
                return False
        elif repr(x) != repr(y):
            return False
    return True


@pytest.mark.parametrize("name", CORPUS_FILES)
def test_corpus_every_topic_equals_reader(corpora: Path, name: str) -> None:
    path = corpora / name
    with polybag.open(path) as r:
        counts = {t: n for t, n in r.summary.topic_message_counts().items() if n}
    assert counts
    for topic, n in counts.items():
        want = reader_frame(path, topic)
        df = pbd.read_topic(path, topic, partition_messages=max(1, n // 3), file_column=False)
        got = df.compute(scheduler="sync")
        assert np.array_equal(got.index.to_numpy(), want.index.to_numpy()), topic
        assert list(got.columns) == list(want.columns)
        for c in want.columns:
            assert _same(got[c].tolist(), want[c].tolist()), (topic, c)


def test_corpus_ulog(corpora: Path) -> None:
    import pyulog

    p = corpora / "ulog" / "sample.ulg"
    got = sync(pbd.read_topic(p, "vehicle_attitude", fields=["rollspeed", "q"]))
    d = pyulog.ULog(str(p), ["vehicle_attitude"]).get_dataset("vehicle_attitude").data
    assert len(got) == len(d["timestamp"]) == 6461
    assert np.allclose(got["rollspeed"].to_numpy(), d["rollspeed"])
    assert np.allclose(got["q[3]"].to_numpy(), d["q[3]"])


def test_file_summaries(corpora: Path, files: dict[str, Path]) -> None:
    paths = [
        files["mcap"],
        files["bag"],
        corpora / "ulog" / "sample.ulg",
        corpora / "ulog" / "sample.ulg.missing",
    ]
    s = pbd.file_summaries(paths).compute(scheduler="threads").set_index("path")
    assert s.loc[str(files["mcap"]), "format"] == "mcap"
    assert s.loc[str(files["bag"]), "message_count"] == 3000
    assert s.loc[str(files["bag"]), "chunk_count"] > 20
    with polybag.open(files["mcap"]) as r:
        assert s.loc[str(files["mcap"]), "start_time"] == r.summary.start_time
        assert s.loc[str(files["mcap"]), "end_time"] == r.summary.end_time
    assert s.loc[str(corpora / "ulog" / "sample.ulg"), "format"] == "ulog"
    assert "cannot open" in s.loc[str(corpora / "ulog" / "sample.ulg.missing"), "error"]
    with pytest.raises(PolybagError):
        pbd.file_summaries(paths, errors="raise").compute(scheduler="sync")


# --- messages bag -------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["mcap", "bag"])
def test_read_messages_equals_reader(files: dict[str, Path], fmt: str) -> None:
    path = files[fmt]
    b = pbd.read_messages(path, partition_messages=400)
    assert b.npartitions > 3
    got = b.compute(scheduler="sync")
    with polybag.open(path) as r:
        want = [(m.channel.topic, m.log_time, m.to_dict()) for m in r.messages()]
    assert len(got) == len(want) == 3000
    assert [(g["topic"], g["log_time"], g["data"]) for g in got] == want
    some = pbd.read_messages(path, ["/b"], start=want[100][1], partition_messages=100).compute(
        scheduler="threads"
    )
    assert [g["data"]["k"] for g in some] == [w[2]["k"] for w in want[100:] if w[0] == "/b"]
    no_open_files(path.parent)


def test_read_messages_ulog_and_raw(tmp_path: Path, files: dict[str, Path]) -> None:
    write_ulog(tmp_path / "a.ulg", 200, 1_000_000)
    write_ulog(tmp_path / "b.ulg", 100, 5_000_000)
    b = pbd.read_messages(str(tmp_path / "*.ulg"), ["thing"], partition_messages=10)
    assert b.npartitions == 2
    got = b.compute(scheduler="threads")
    assert len(got) == 300
    assert [g["data"]["k"] for g in got[:3]] == [-50, -49, -48]
    assert {g["file"] for g in got} == {str(tmp_path / "a.ulg"), str(tmp_path / "b.ulg")}
    raw = pbd.read_messages(files["mcap"], "/(a|b)", decode=False, partition_messages=500).compute(
        scheduler="sync"
    )
    with polybag.open(files["mcap"]) as r:
        assert [(g["log_time"], g["data"]) for g in raw] == [
            (m.log_time, bytes(m.data)) for m in r.messages()
        ]


# --- pickling and schedulers -------------------------------------------------------------------
def test_graph_pickles_and_runs_in_processes(files: dict[str, Path]) -> None:
    df = pbd.read_topic(files["mcap"], "/a", partition_messages=500)
    want = sync(df)
    back = cloudpickle.loads(cloudpickle.dumps(df))
    assert np.array_equal(sync(back)["x"].to_numpy(), want["x"].to_numpy())
    # partitions are plain data (path + window)
    parts = pbd.partitions(files["mcap"], ["/a"], partition_messages=500)
    assert pickle.loads(pickle.dumps(parts)) == parts
    b = pbd.read_messages(files["bag"], ["/b"], partition_messages=300)
    assert len(cloudpickle.loads(cloudpickle.dumps(b)).compute(scheduler="sync")) == 750
    got = df["x"].sum().compute(scheduler="processes", num_workers=2)
    assert got == want["x"].sum()


@pytest.mark.parametrize("compression", ["zstd", "lz4"])
def test_threads_decompress_in_parallel(tmp_path: Path, compression: str) -> None:
    # several tasks decompressing chunks at the same time must not share a codec context
    rows = [(tp, t, d + bytes(300) if tp == "/b" else d) for tp, t, d in rows_out_of_order(4000, 5)]
    path = tmp_path / f"{compression}.mcap"
    from polybag.formats.mcap.writer import McapWriter

    with McapWriter(path, chunk_size=64 << 10, compression=compression) as w:
        sa = w.add_schema("pkg/A", "ros1msg", A_DEF)
        sb = w.add_schema("pkg/B", "ros1msg", B_DEF)
        chans = {"/a": w.add_channel("/a", "ros1", sa), "/b": w.add_channel("/b", "ros1", sb)}
        for topic, t, data in rows:
            w.write(chans[topic], data, log_time=t)
    want = reader_frame(path, "/a")
    df = pbd.read_topic([path] * 4, "/a", partition_messages=300, file_column=False)
    assert df.npartitions > 4
    for _ in range(3 if compression == "zstd" else 1):
        got = df.compute(scheduler="threads", num_workers=4)
        assert len(got) == 4 * len(want)
        assert sorted(got["x"]) == sorted(list(want["x"]) * 4)


def test_distributed_scheduler(files: dict[str, Path]) -> None:
    distributed = pytest.importorskip("distributed")
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=2, dashboard_address=None) as c:
        n = c.compute(pbd.read_topic(files["bag"], "/a", partition_messages=500)["x"].count()).result()
    assert n == 2250


def test_column_projection_and_len(files: dict[str, Path]) -> None:
    df = pbd.read_topic(files["mcap"], "/a", partition_messages=300)
    assert len(df) == 2250
    s = df["y"].compute(scheduler="sync")
    assert s.tolist() == reader_frame(files["mcap"], "/a")["y"].tolist()


def test_json_topic_and_projection(tmp_path: Path) -> None:
    import json

    from polybag.formats.mcap.writer import McapWriter

    path = tmp_path / "j.mcap"
    with McapWriter(path, chunk_size=200) as w:
        ch = w.add_channel("/j", "json", w.add_schema("J", "jsonschema", b"{}"))
        for i in range(300):
            msg = {"a": i, "b": {"c": i * 2}} if i % 5 != 1 else {"a": i, "b": {"c": i * 2}, "extra": "e"}
            w.write(ch, json.dumps(msg).encode(), log_time=1000 + i)
    df = pbd.read_topic(path, "/j", partition_messages=40)
    assert df.npartitions > 4
    want = reader_frame(path, "/j")
    assert df["a"].compute(scheduler="sync").tolist() == want["a"].tolist() == list(range(300))
    got = df.compute(scheduler="sync")
    assert got["b.c"].tolist() == want["b.c"].tolist()
    # schemaless: the columns are those of the topic's first message (documented)
    assert "extra" in want.columns and list(got.columns) == ["a", "b.c", "file"]


def test_projection_decodes_only_what_is_asked(files: dict[str, Path]) -> None:
    df = pbd.read_topic(files["bag"], "/a", partition_messages=500)
    part = pbd.partitions(files["bag"], ["/a"], partition_messages=500)[1]
    meta = df._meta
    one = pbd._topic_partition(part, "/a", None, True, 0, True, meta, True, columns=["y"])
    assert list(one.columns) == ["y"] and len(one) > 400
    full = pbd._topic_partition(part, "/a", None, True, 0, True, meta, True)
    assert one["y"].tolist() == full["y"].tolist()
    assert list(full.columns) == ["x", "y", "s", "file"]


# --- errors -------------------------------------------------------------------------------------
def test_file_field_needs_file_column_off(tmp_path: Path) -> None:
    from polybag.formats.mcap.writer import McapWriter

    with McapWriter(tmp_path / "f.mcap", chunk_size=100) as w:
        ch = w.add_channel("/f", "ros1", w.add_schema("pkg/F", "ros1msg", b"int32 file\n"))
        for i in range(50):
            w.write(ch, struct.pack("<i", i), log_time=1000 + i)
    with pytest.raises(UsageError, match="file_column=False"):
        pbd.read_topic(tmp_path / "f.mcap", "/f")
    got = sync(pbd.read_topic(tmp_path / "f.mcap", "/f", file_column=False, partition_messages=10))
    assert got["file"].tolist() == list(range(50))


def test_errors(tmp_path: Path, files: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(PolybagError, match="no topic"):
        pbd.read_topic(files["mcap"], "/nope")
    with pytest.raises(UsageError, match="no files match"):
        pbd.read_topic(str(tmp_path / "*.mcap"), "/a")
    with pytest.raises(UsageError):
        pbd.read_topic(files["mcap"], "/a", partition_messages=0)
    with pytest.raises(UsageError):
        pbd.read_topic(files["mcap"], "/a", start=1.5)  # type: ignore[arg-type]
    import builtins

    real = builtins.__import__

    def no_dask(name: str, *a: object, **k: object) -> object:
        if name == "dask" or name.startswith("dask."):
            raise ImportError("No module named 'dask'")
        return real(name, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", no_dask)
    with pytest.raises(UnsupportedError, match=r"pip install polybag\[dask\]"):
        pbd.read_topic(files["mcap"], "/a")
    with pytest.raises(UnsupportedError, match=r"pip install polybag\[dask\]"):
        pbd.read_messages(files["mcap"])
