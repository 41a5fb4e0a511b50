"""polybag.dask over real servers fetches each byte once: the driver reads only the files'
summaries (the frame's columns come from the schema), the partitions of a remote file read
disjoint sets of chunks (counted by a proxy in front of nginx and of SeaweedFS), and the
results equal a plain loop over ``polybag.open``.  Also: the frames' divisions and the
groupby the docs give, and the thread cap of in-process Dask workers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from counting_proxy import CountingProxy, serve_proxy
from seaweed import SeaweedS3, upload

import polybag

dd = pytest.importorskip("dask.dataframe")
pd = pytest.importorskip("pandas")

import polybag.dask as pbd  # noqa: E402

T0 = 1_700_000_000_000_000_000
STEP = 1_000_000  # 1 ms between /big messages
N = 80  # messages of 100 KB per file: 8 MB, 8 chunks of 1 MB
PER_PART = 27  # three partitions per file
#: what a partition's task fetches beside its chunks: the file's first 16 KiB and last
#: 64 KiB (the summary), read by every open of a remote file
OPEN_BYTES = 100_000


def _write(path: Path, t0: int) -> None:
    """``N`` 100 KB messages on /big from ``t0`` (1 ms apart), a small one on /small every
    tenth; 1 MB chunks, no compression."""
    with polybag.Writer(str(path), compression="none", chunk_size=1 << 20) as w:
        sch = w.add_schema("test_msgs/Blob", "ros1msg", b"uint8[] data\nstring name\n")
        big = w.add_channel("/big", "ros1", sch)
        small = w.add_channel("/small", "ros1", sch)
        body = bytearray(4 + 100_000 + 4 + 3)
        body[:4] = (100_000).to_bytes(4, "little")
        body[-7:] = (3).to_bytes(4, "little") + b"big"
        for i in range(N):
            body[4:12] = i.to_bytes(8, "little")
            w.write(big, bytes(body), log_time=t0 + i * STEP)
            if i % 10 == 0:
                small_body = (8).to_bytes(4, "little") + i.to_bytes(8, "little") + (1).to_bytes(4, "little") + b"s"
                w.write(small, small_body, log_time=t0 + i * STEP + 1)


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Per format two files one after the other in time, and a bag and an MCAP that overlap."""
    d = tmp_path_factory.mktemp("dask_economy")
    for fmt in ("bag", "mcap"):
        for i in range(2):
            _write(d / f"seq_{fmt}_{i}.{fmt}", T0 + i * 10 * N * STEP)
    _write(d / "ovl_0.bag", T0)
    _write(d / "ovl_1.mcap", T0 + STEP // 2)
    return d


@pytest.fixture(scope="module")
def web(logs: Path, nginx_root: Path, nginx_proxy: CountingProxy) -> tuple[str, CountingProxy]:
    """The logs served by nginx, behind the counting proxy: base URL and proxy."""
    (nginx_root / "economy").mkdir(exist_ok=True)
    for p in logs.iterdir():
        (nginx_root / "economy" / p.name).write_bytes(p.read_bytes())
    return f"{nginx_proxy.url}/economy", nginx_proxy


@pytest.fixture(scope="module")
def s3_proxy(seaweed: SeaweedS3, logs: Path) -> Iterator[CountingProxy]:
    """The counting proxy in front of SeaweedFS's S3 port (the logs uploaded under economy/)."""
    upload(seaweed, "logs", {f"economy/{p.name}": p for p in logs.iterdir()})
    port = int(seaweed.endpoint.rsplit(":", 1)[1])
    yield from serve_proxy(("127.0.0.1", port))


@pytest.fixture
def s3(seaweed: SeaweedS3, s3_proxy: CountingProxy, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, CountingProxy]]:
    """``s3://`` URLs reaching SeaweedFS through the proxy: fsspec's configuration, as a user
    of an S3-compatible store sets it for every task (tasks take no storage options)."""
    import fsspec.config
    import s3fs

    opts = seaweed.storage_options()
    opts["client_kwargs"] = dict(opts["client_kwargs"], endpoint_url=s3_proxy.url)
    monkeypatch.setitem(fsspec.config.conf, "s3", opts)
    s3fs.S3FileSystem.clear_instance_cache()
    yield "s3://logs/economy", s3_proxy
    s3fs.S3FileSystem.clear_instance_cache()


@pytest.fixture(params=["nginx", "seaweed"])
def server(request: pytest.FixtureRequest) -> tuple[str, CountingProxy]:
    base: tuple[str, CountingProxy] = request.getfixturevalue("web" if request.param == "nginx" else "s3")
    return base


def _loop(paths: list[Path], topic: str) -> Any:
    """The plain loop the frames must equal: each file's ``to_pandas``, merged by log time
    (ties in file order)."""
    frames = []
    for p in paths:
        with polybag.open(str(p)) as r:
            frames.append(r.to_pandas(topic))
    return pd.concat(frames).sort_index(kind="stable")


def _fetched(proxy: CountingProxy, names: list[str]) -> tuple[int, int]:
    """Requests and bytes the proxy counted for these files (nothing else fetched)."""
    per = proxy.per_path()
    mine = {p: c for p, c in per.items() if p.rsplit("/", 1)[-1] in names}
    assert set(per) == set(mine), per  # (S3: no listing, the URLs are given)
    return sum(r for r, _ in mine.values()), sum(b for _, b in mine.values())


@pytest.mark.parametrize("fmt", ["bag", "mcap"])
def test_partitions_fetch_each_byte_once_and_the_driver_only_summaries(
    logs: Path, server: tuple[str, CountingProxy], fmt: str
) -> None:
    base, proxy = server
    names = [f"seq_{fmt}_{i}.{fmt}" for i in range(2)]
    size = sum((logs / n).stat().st_size for n in names)
    proxy.reset()
    df = pbd.read_topic([f"{base}/{n}" for n in names], "/big", partition_messages=PER_PART, file_column=False)
    driver_requests, driver = _fetched(proxy, names)
    assert df.npartitions == 6 and df.known_divisions
    # the driver: each file's summary, no message data (a chunk is 1 MB)
    assert 0 < driver <= len(names) * 2 * OPEN_BYTES, driver
    proxy.reset()
    got = df.compute(scheduler="threads")
    requests, fetched = _fetched(proxy, names)
    # every chunk fetched once: the files' bytes, plus each task's summary read
    assert size * 0.95 <= fetched <= size + df.npartitions * OPEN_BYTES, (fetched, size)
    print(
        f"\n{base.split(':')[0]} {fmt}: {len(names)} files, {size} B, {df.npartitions} partitions: "
        f"driver {driver_requests} requests {driver} B ({driver / size:.2%}); "
        f"partitions {requests} requests {fetched} B ({fetched / size:.3f}x)"
    )
    expect = _loop([logs / n for n in names], "/big")
    assert len(got) == N * len(names)
    pd.testing.assert_frame_equal(got, expect, check_index_type=False, check_names=False)


def test_overlapping_files_share_windows_and_fetch_each_chunk_once(
    logs: Path, server: tuple[str, CountingProxy]
) -> None:
    base, proxy = server
    names = ["ovl_0.bag", "ovl_1.mcap"]
    size = sum((logs / n).stat().st_size for n in names)
    proxy.reset()
    df = pbd.read_topic([f"{base}/{n}" for n in names], "/big", partition_messages=2 * PER_PART, file_column=False)
    _r, driver = _fetched(proxy, names)
    assert df.known_divisions and df.npartitions == 3
    assert driver <= len(names) * 2 * OPEN_BYTES
    parts = pbd.partitions([f"{base}/{n}" for n in names], ["/big"], partition_messages=2 * PER_PART)
    opens = sum(len(p.files) for p in parts)
    assert opens == 6  # each window reads both files
    proxy.reset()
    got = df.compute(scheduler="threads")
    _r, fetched = _fetched(proxy, names)
    assert size * 0.95 <= fetched <= size + opens * OPEN_BYTES, (fetched, size)
    pd.testing.assert_frame_equal(
        got, _loop([logs / n for n in names], "/big"), check_index_type=False, check_names=False
    )


def test_read_messages_fetches_each_chunk_once(logs: Path, web: tuple[str, CountingProxy]) -> None:
    base, proxy = web
    names = ["seq_bag_0.bag", "seq_mcap_1.mcap"]
    size = sum((logs / n).stat().st_size for n in names)
    proxy.reset()
    bag = pbd.read_messages([f"{base}/{n}" for n in names], ["/big"], partition_messages=PER_PART, decode=False)
    _r, driver = _fetched(proxy, names)
    assert bag.npartitions == 6 and driver <= len(names) * 2 * OPEN_BYTES
    proxy.reset()
    got = bag.compute(scheduler="threads")
    _r, fetched = _fetched(proxy, names)
    assert size * 0.95 <= fetched <= size + bag.npartitions * OPEN_BYTES, (fetched, size)
    want = []
    for n in names:
        with polybag.open(str(logs / n)) as r:
            want += [(m.log_time, bytes(m.data)) for m in r.messages(topics=["/big"])]
    assert [(m["log_time"], m["data"]) for m in got] == want


def test_partitions_smaller_than_a_chunk_never_split_it(logs: Path, web: tuple[str, CountingProxy]) -> None:
    """Asked for fewer messages per partition than a chunk holds, the partitions are whole
    chunks: no chunk is fetched (and decoded) by two tasks."""
    base, proxy = web
    name = "seq_mcap_1.mcap"
    size = (logs / name).stat().st_size
    with polybag.open(str(logs / name)) as r:
        chunks = sorted((c.start_time, c.end_time) for c in r.summary.chunks)
        per_chunk = r.summary.topic_message_counts()["/big"] / len(chunks)
    assert len(chunks) >= 7 and per_chunk >= 3 * 3
    local = pbd.partitions(str(logs / name), ["/big"], partition_messages=3)
    assert [p.start for p in local[1:]] == [s for s, _e in chunks[1:]]  # a cut at every chunk start, no other
    # remote: also parts of at least about 1 MiB (each task reads the summary too)
    parts = pbd.partitions(f"{base}/{name}", ["/big"], partition_messages=3)
    assert len(parts) >= 5 and {p.start for p in parts[1:]} <= {s for s, _e in chunks}
    assert pbd._windows("f", "mcap", [(0, 99, 100), (100, 199, 100)], None, None, 30)[0].end == 100
    # (a run of overlapping chunks holding more than a partition: cut in time, as before)
    assert len(pbd._windows("f", "mcap", [(0, 99, 100), (50, 149, 10)], None, None, 30)) == 4
    proxy.reset()
    df = pbd.read_topic(f"{base}/{name}", "/big", partition_messages=3, file_column=False)
    got = df.compute(scheduler="threads")
    assert size * 0.95 <= proxy.bytes <= size + (1 + len(parts)) * OPEN_BYTES, (proxy.bytes, size)
    pd.testing.assert_frame_equal(got, _loop([logs / name], "/big"), check_index_type=False, check_names=False)


def test_meta_comes_from_the_schema(logs: Path, web: tuple[str, CountingProxy]) -> None:
    """The frame's columns and dtypes (strings too) are those a real message gives, built
    without fetching one: the driver fetches no more for a decoded frame than for raw bytes."""
    base, proxy = web
    url = f"{base}/seq_bag_0.bag"
    proxy.reset()
    raw = pbd.read_topic(url, "/big", decode=False)
    raw_bytes = proxy.bytes
    proxy.reset()
    df = pbd.read_topic(url, "/big")
    assert proxy.bytes == raw_bytes < 2 * OPEN_BYTES
    assert len(raw.columns) == 4
    with polybag.open(str(logs / "seq_bag_0.bag")) as r:
        real = r.to_pandas("/small")
    small = pbd.read_topic(str(logs / "seq_bag_0.bag"), "/small")
    assert list(small.columns) == [*real.columns, "file"]
    assert [str(t) for t in small.dtypes.iloc[:-1]] == [str(t) for t in real.dtypes]
    assert str(small.dtypes["name"]) == str(real.dtypes["name"]) != "object"  # a string column
    assert str(df.dtypes["name"]) == str(real.dtypes["name"])


def _dir_size(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) if p.is_dir() else p.stat().st_size


@pytest.fixture(scope="module")
def others(web: tuple[str, CountingProxy], nginx_root: Path) -> Path:
    """A ULog and two rosbag2 directories (SQLite and MCAP storage) beside the logs nginx serves."""
    import struct

    from ulog_helpers import synthetic_log

    d = nginx_root / "economy"
    (d / "flight.ulg").write_bytes(synthetic_log()[0])
    for name, storage in (("r2_sqlite", "sqlite3"), ("r2_mcap", "mcap")):
        opts = {"chunk_size": 20_000} if storage == "mcap" else {}  # (about 9 chunks)
        with polybag.Writer(str(d / name), format="rosbag2", storage=storage, **opts) as w:
            ch = w.add_channel("/a", "cdr", w.add_schema("std_msgs/msg/Float64", "ros2msg", b"float64 data\n"))
            for i in range(4000):
                w.write(ch, b"\x00\x01\x00\x00" + struct.pack("<d", i * 0.5), log_time=T0 + i * 1000)
    return d


@pytest.mark.parametrize("name", ["flight.ulg", "r2_sqlite/", "r2_mcap/"])
def test_logs_read_whole_or_by_ranges_are_fetched_once(
    others: Path, web: tuple[str, CountingProxy], name: str
) -> None:
    """A ULog (no index) and a rosbag2 SQLite file are fetched whole by whoever opens them:
    one partition per file, and the driver fetches the ULog it needs for the columns once; a
    rosbag2 directory with MCAP storage is read by ranges like an MCAP file."""
    base, proxy = web
    local = others / name.rstrip("/")
    with polybag.open(str(local)) as r:
        topic = next(c.topic for c in r.summary.channels.values())
        expect = r.to_pandas(topic)
    size = _dir_size(local)
    proxy.reset()
    df = pbd.read_topic(f"{base}/{name}", topic, partition_messages=500, file_column=False)
    driver = proxy.bytes
    proxy.reset()
    got = df.compute(scheduler="threads")
    fetched = proxy.bytes
    print(f"\nnginx {name}: {size} B, {df.npartitions} partitions: driver {driver} B, partitions {fetched / size:.3f}x")
    # 4000 messages: 8 partitions of 500, but a file fetched whole by each task that opens it
    # (a ULog, SQLite) is read by one, and a remote file is not cut into parts of less than
    # about 1 MiB (the MCAP file: 9 chunks, 200 KB)
    assert df.npartitions == 1
    if name == "r2_mcap/":
        assert driver <= 2 * OPEN_BYTES  # metadata.yaml and the MCAP file's summary
    else:
        assert size <= driver < size + 10_000  # fetched whole, once (the ULog for the columns)
    assert 0.5 * size <= fetched <= size + df.npartitions * OPEN_BYTES
    pd.testing.assert_frame_equal(got, expect, check_index_type=False, check_names=False)


# --- divisions and the groupby the docs give ---------------------------------------------------
def _shuffles(collection: Any) -> list[str]:
    graph = dict(collection.optimize().__dask_graph__())
    names = {str(k[0] if isinstance(k, tuple) else k) for k in graph}
    return sorted(n for n in names if "shuffle" in n)


def test_divisions_are_time_per_partition_and_the_documented_groupby_does_not_shuffle(logs: Path) -> None:
    paths = [logs / f"seq_{fmt}_{i}.{fmt}" for fmt in ("bag", "mcap") for i in range(2)]
    df = pbd.read_topic(paths, "/big", fields=["name"], partition_messages=5)
    assert df.npartitions > 15  # Dask's own groupby default splits its output (a shuffle) past 15
    assert df.known_divisions
    parts = pbd.partitions(paths, ["/big"], partition_messages=5)
    assert list(df.divisions) == [p.lo for p in parts] + [parts[-1].hi]
    # a window of log time reads only the partitions it overlaps
    t1 = parts[3].lo
    assert df.loc[:t1 - 1].npartitions == 3
    # what the docstring says: with few groups, split_out=1 (a tree reduction, no shuffle)
    assert _shuffles(df.groupby("file").name.count()) != []
    counted = df.groupby("file").name.count(split_out=1)
    assert _shuffles(counted) == []
    got = counted.compute(scheduler="sync")
    assert {Path(k).name: v for k, v in got.items()} == {p.name: N for p in paths}
    # per-index (time) groups: each partition on its own, as the divisions allow
    per_ms = df.groupby("log_time").name.apply(len, meta=("name", "i8"))
    assert _shuffles(per_ms) == []
    assert int(per_ms.sum().compute(scheduler="sync")) == N * len(paths)


# --- the thread cap of in-process workers ---------------------------------------------------------
def _cap(src: str, dst: str, options: dict[str, Any]) -> dict[str, Any]:
    from polybag.util import threads

    return {"cap": threads.MAX_WORKERS}


def test_in_process_dask_workers_leave_the_callers_thread_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    distributed = pytest.importorskip("distributed")
    import os

    from polybag.ops import batch
    from polybag.util import threads

    monkeypatch.setattr(threads, "MAX_WORKERS", 1000)
    env = {v: os.environ.get(v) for v in batch._THREAD_ENV}
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, protocol="tcp", host="127.0.0.1", dashboard_address=None
    ) as c:
        res = batch.run_many(_cap, [("a", "x"), ("b", "y")], {}, scheduler=c.scheduler.address)
    assert res.failed == 0
    # the tasks ran in this process: no cap put on it (a worker process of its own gets one)
    assert [f.result for f in res.files] == [{"cap": 1000}] * 2
    assert threads.MAX_WORKERS == 1000
    assert {v: os.environ.get(v) for v in batch._THREAD_ENV} == env
