"""Many files: polybag.dask over URLs (nginx: the ``web`` fixture) on a 2-worker LocalCluster,
map_messages, and ``convert``/``export --jobs`` (a process pool, or the cluster through
--scheduler)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from remote_helpers import write_big

import polybag
from polybag.ops.batch import convert_many, stem

dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")
pd = pytest.importorskip("pandas")


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    with distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=False,
        protocol="tcp",
        host="127.0.0.1",
        dashboard_address=None,
    ) as c:
        with distributed.Client(c) as client:
            yield client


@pytest.fixture(scope="module")
def many(remote_dir: Path) -> list[Path]:
    """Three small indexed bags/MCAPs one after the other in time (1 KB payloads)."""
    out = []
    for i, ext in enumerate((".bag", ".mcap", ".bag")):
        p = remote_dir / f"many_{i}{ext}"  # about ten chunks each
        if not p.exists():
            write_big(p, n=300, payload=1000, chunk_size=32 << 10)
            # shift file i by i seconds so the files do not overlap in time
            if i:
                shifted = remote_dir / f"many_{i}.tmp{ext}"
                with (
                    polybag.open(str(p)) as r,
                    polybag.Writer(str(shifted), compression="none", chunk_size=32 << 10) as w,
                ):
                    chans: dict[int, Any] = {}
                    for m in r.messages():
                        c = m.channel
                        if c.id not in chans:
                            s = c.schema
                            sch = w.add_schema(s.name, s.encoding, s.data) if s is not None else None
                            chans[c.id] = w.add_channel(c.topic, c.message_encoding, sch)
                        w.write(chans[c.id], bytes(m.data), log_time=m.log_time + i * 1_000_000_000)
                shifted.replace(p)
        out.append(p)
    return out


def _local_frames(paths: list[Path], topic: str) -> pd.DataFrame:
    frames = []
    for p in paths:
        with polybag.open(str(p)) as r:
            frames.append(r.to_pandas(topic))
    return pd.concat(frames)


def test_read_topic_over_urls_equals_concatenated_to_pandas(
    cluster: Any, web: str, many: list[Path]
) -> None:
    import polybag.dask as pbd

    urls = [f"{web}/{p.name}" for p in many]
    df = pbd.read_topic(urls, "/small", partition_messages=10, file_column=False)
    assert df.known_divisions
    got = df.compute()
    expect = _local_frames(many, "/small")
    assert len(got) == 90
    pd.testing.assert_frame_equal(got, expect, check_index_type=False, check_names=False)


def test_partitions_follow_chunk_boundaries(cluster: Any, many: list[Path]) -> None:
    import polybag.dask as pbd

    parts = pbd.partitions([str(p) for p in many], ["/big"], partition_messages=50)
    # every cut is a chunk start: no chunk's time range straddles a partition boundary
    for p in many:
        with polybag.open(str(p)) as r:
            chunks = [(c.start_time, c.end_time) for c in r.summary.chunks]
        cuts = [q.start for q in parts if q.path == str(p) and q.start is not None]
        assert cuts
        for cut in cuts:
            assert not any(s < cut <= e for s, e in chunks), (cut, chunks)
    df = pbd.read_topic([str(p) for p in many], "/big", partition_messages=50, file_column=False)
    assert df.npartitions == len(parts) > len(many)
    assert len(df.compute()) == 900


def _payload_index(m: polybag.Message) -> int:
    return int.from_bytes(bytes(m.data[4:12]), "little")


def test_map_messages_over_urls(cluster: Any, web: str, many: list[Path]) -> None:
    import polybag.dask as pbd

    bag = pbd.map_messages(
        [f"{web}/{p.name}" for p in many], _payload_index, topics=["/big"], partition_messages=100
    )
    got = bag.compute()
    assert got == list(range(300)) * 3


def test_convert_many_in_a_process_pool(many: list[Path], tmp_path: Path) -> None:
    res = convert_many([str(p) for p in many[:2]], str(tmp_path / "out"), jobs=2)
    assert res.failed == 0
    assert [Path(f.output).name for f in res.files] == ["many_0.mcap", "many_1.mcap"]
    for f, p in zip(res.files, many):
        with polybag.open(f.output) as a, polybag.open(str(p)) as b:
            assert [(m.log_time, bytes(m.data)) for m in a.messages()] == [
                (m.log_time, bytes(m.data)) for m in b.messages()
            ]


def test_convert_many_refuses_same_names(many: list[Path], tmp_path: Path) -> None:
    with pytest.raises(polybag.PolybagError, match="same output"):
        convert_many([str(many[0]), str(many[0])], str(tmp_path))
    assert stem("s3://b/x/run_3.bag") == "run_3"


def test_cli_convert_jobs_on_the_cluster_and_one_bad_file(
    cluster: Any, many: list[Path], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.bag"
    bad.write_bytes(b"#ROSBAG V2.0\n" + bytes(100))
    addr = cluster.scheduler.address
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "polybag",
            "convert",
            "--scheduler",
            addr,
            "--json",
            str(many[0]),
            str(bad),
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 1
    d = json.loads(p.stdout)
    assert d["failed"] == 1 and d["scheduler"] == addr
    assert d["files"][0]["result"]["messages"] == 330
    assert "bad.bag" in p.stderr and "Traceback" not in p.stderr


def test_cli_export_jobs(many: list[Path], tmp_path: Path) -> None:
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "polybag",
            "export",
            "--jobs",
            "2",
            str(many[0]),
            str(many[1]),
            "--topics",
            "/small",
            "-o",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    for q in many[:2]:
        table = pd.read_csv(tmp_path / q.stem / "small.csv")
        assert len(table) == 30
