"""``export --format parquet`` datasets read by DuckDB and polars: a bag, an MCAP (ROS 1 and
ROS 2 CDR), a rosbag2 directory and a ULog (written by polybag; real logs from the corpora
too), one input and two at once.  Row counts per topic equal the summary's message counts,
every value equals ``to_pandas(topic)``'s (nested lists too), the hive columns ``topic`` and
``file`` are there, and every file carries the schema metadata."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import polybag
from polybag import ops
from polybag.cli import main
from polybag.ops.export import table_name

duckdb = pytest.importorskip("duckdb")
pl = pytest.importorskip("polars")
pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("pandas")

CORPORA = Path(__file__).resolve().parents[2].parent / "shared" / "corpora"
EXAMPLE_BAG = CORPORA / "rosbag" / "foxglove-rosbag" / "example.bag"
SAMPLE_ULOG = CORPORA / "ulog" / "sample_log_small.ulg"

REC_DEF = (
    "Header header\nfloat64[] vals\nstring name\nint32[3] fixed\nuint8[] blob\n"
    "================================================================================\n"
    "MSG: std_msgs/Header\nuint32 seq\ntime stamp\nstring frame_id\n"
)
N_REC = 300
N_NUM = N_REC // 5  # (every 5th record)
T0 = 1_700_000_000_000_000_000


def _string(s: str) -> bytes:
    b = s.encode()
    return struct.pack("<I", len(b)) + b


def rec_payload(i: int) -> bytes:
    stamp = T0 + i * 10_000_000 - 5_000  # (not the log time)
    head = struct.pack("<III", i, stamp // 10**9, stamp % 10**9) + _string(f"frame{i % 3}")
    vals = [i * 0.5 + k for k in range(i % 4)]
    body = struct.pack("<I", len(vals)) + struct.pack(f"<{len(vals)}d", *vals)
    blob = bytes((i + k) % 256 for k in range(i % 5))
    return head + body + _string(f"n{i}é") + struct.pack("<3i", i, -i, 7) + struct.pack("<I", len(blob)) + blob


def write_bag(path: Path, chunk_size: int = 2000) -> Path:
    from polybag.formats.bag.writer import BagWriter

    with BagWriter(path, chunk_size=chunk_size) as w:  # type: ignore[arg-type]
        rec = w.add_channel("/rec", "ros1", w.add_schema("pkg/Rec", "ros1msg", REC_DEF))
        num = w.add_channel("/num/x", "ros1", w.add_schema("pkg/Num", "ros1msg", "int32 x\nfloat32 y\n"))
        for i in range(N_REC):
            w.write(rec, rec_payload(i), log_time=T0 + i * 10_000_000)
            if i % 5 == 2:
                w.write(num, struct.pack("<if", i, i / 4), log_time=T0 + i * 10_000_000 + 1)
    return path


def write_ulog(path: Path, n: int = 200) -> Path:
    from polybag.formats.ulog.writer import UlogWriter

    t0_us = 5_000_000
    with UlogWriter(path, start_timestamp=t0_us) as w:
        w.add_format("thing:uint64_t timestamp;float[3] v;int32_t k;")
        ch = w.add_subscription("thing", 0)
        for i in range(n):
            ts = t0_us + i * 1000
            w.write(ch, struct.pack("<Q3fi", ts, i, i * 0.5, -i, i - 50), log_time=ts * 1000)
    return path


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("logs")
    bag = write_bag(d / "rec.bag")
    out = {"bag": bag, "ulog": write_ulog(d / "thing.ulg")}
    ops.convert(bag, d / "ros1.mcap")
    ops.convert(bag, d / "ros2.mcap", profile="ros2")
    ops.convert(bag, d / "rb2", profile="ros2")
    out.update({"mcap-ros1": d / "ros1.mcap", "mcap-ros2": d / "ros2.mcap", "rosbag2": d / "rb2"})
    return out


def _plain(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return v.tobytes() if v.dtype == np.uint8 else [_plain(x) for x in v.tolist()]
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    return v


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (a != a and b != b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return bool(a == b)


def _table_counts(r: Any) -> dict[str, int]:
    """The summary's message count of every topic's table (a ULog: its instance's data)."""
    s = r.summary
    out: dict[str, int] = {}
    for ch in s.channels.values():
        name = table_name(ch.topic)
        out[name] = max(out.get(name, 0), 0) + int((s.message_counts or {}).get(ch.id, 0))
    return out


def check_dataset(src: Path, out: Path, file: str | None = None) -> None:
    """Every topic of ``src`` in the dataset ``out``: DuckDB's and polars' rows and values
    equal the reader's ``to_pandas``, with the hive columns and the schema metadata."""
    with polybag.open(str(src)) as r:
        counts = _table_counts(r)
        topics = sorted(r.summary.topics())
        frames = {t: r.to_pandas(t) for t in topics}
    assert sorted(p.name for p in out.iterdir()) == sorted(f"topic={table_name(t)}" for t in topics)
    for topic in topics:
        name = table_name(topic)
        glob = str(out / f"topic={name}" / "**" / "*.parquet")
        where = f" WHERE file = '{file}'" if file else ""
        rel = duckdb.sql(f"SELECT * FROM read_parquet('{glob}', hive_partitioning=true){where}")
        got = rel.df()
        lazy = pl.scan_parquet(glob, hive_partitioning=True)
        if file:
            lazy = lazy.filter(pl.col("file") == file)
        pdf = lazy.collect()
        assert len(got) == pdf.height == counts[name], (src, topic)
        assert set(got["topic"]) == set(pdf["topic"].to_list()) == {name}
        if file:
            assert "file" in got.columns and "file" in pdf.columns
        frame = frames[topic]
        want = {c: frame[c].tolist() for c in frame.columns}
        if frame.index.name == "log_time" and "log_time" in got.columns:
            want["log_time"] = frame.index.tolist()
        assert want, topic
        for col, values in want.items():
            assert col in got.columns, (src, topic, col, list(got.columns))
            a = [_plain(x) for x in got[col].tolist()]
            b = [_plain(x) for x in values]
            assert _same(a, b), (src, topic, col, a[:3], b[:3])
            c = [_plain(x) for x in pdf[col].to_list()]
            assert _same(c, b), (src, topic, col, "polars")
        part = out / f"topic={name}" / (f"file={file}" if file else "") / "part-0.parquet"
        md = pq.read_schema(part).metadata
        assert md[b"polybag.topic"] == topic.encode()
        assert md[b"polybag.source"] == src.name.encode()
        assert md[b"polybag.version"] == polybag.__version__.encode()
        assert md[b"polybag.type"] and md[b"polybag.schema_encoding"] and md[b"polybag.definition"]
        kv = duckdb.sql(f"SELECT key, value FROM parquet_kv_metadata('{part}')").fetchall()
        assert (b"polybag.topic", topic.encode()) in [(bytes(k), bytes(v)) for k, v in kv]


@pytest.mark.parametrize("kind", ["bag", "mcap-ros1", "mcap-ros2", "rosbag2", "ulog"])
def test_one_input_dataset(logs: dict[str, Path], kind: str, tmp_path: Path) -> None:
    src = logs[kind]
    out = tmp_path / "ds"
    assert main(["export", str(src), "--format", "parquet", "-o", str(out), "-q"]) == 0
    check_dataset(src, out)
    md = pq.read_schema(next((out / f"topic={'thing' if kind == 'ulog' else 'rec'}").rglob("*.parquet"))).metadata
    if kind in ("bag", "mcap-ros1"):
        assert len(md[b"polybag.md5"]) == 32  # the ROS 1 md5 of pkg/Rec
    if kind != "ulog":
        assert b"Header header" in md[b"polybag.definition"]
        assert md[b"polybag.type"] in (b"pkg/Rec", b"pkg/msg/Rec")


def test_nested_columns_typed(logs: dict[str, Path], tmp_path: Path) -> None:
    import pyarrow as pa  # type: ignore[import-untyped]

    out = tmp_path / "ds"
    ops.export(logs["mcap-ros2"], out, format="parquet", layout="dataset", topics=["/rec"])
    schema = pq.read_schema(out / "topic=rec" / "part-0.parquet")
    assert pa.types.is_list(schema.field("vals").type) and schema.field("vals").type.value_type == pa.float64()
    assert schema.field("name").type == pa.string()
    assert schema.field("header.frame_id").type == pa.string()
    assert schema.field("blob").type == pa.binary()
    assert schema.field("log_time").type == pa.int64()


def test_real_logs(tmp_path: Path) -> None:
    for src in (EXAMPLE_BAG, SAMPLE_ULOG):
        if not src.exists():
            pytest.skip(f"{src} not in the corpora")
    out = tmp_path / "bag"
    res = ops.export(EXAMPLE_BAG, out, format="parquet", layout="dataset")
    assert not res.failed
    check_dataset(EXAMPLE_BAG, out)
    out = tmp_path / "ulog"
    res = ops.export(SAMPLE_ULOG, out, format="parquet", layout="dataset", topics=["vehicle_attitude", "sensor_combined"])
    assert not res.failed
    for topic in ("vehicle_attitude", "sensor_combined"):
        with polybag.open(str(SAMPLE_ULOG)) as r:
            frame = r.to_pandas(topic)
        got = duckdb.sql(
            f"SELECT * FROM read_parquet('{out}/topic={topic}/*.parquet', hive_partitioning=true)"
        ).df()
        assert len(got) == len(frame) > 0
        for col in frame.columns:
            assert _same([_plain(x) for x in got[col].tolist()], [_plain(x) for x in frame[col].tolist()]), col


def test_two_inputs_partitioned_by_file(logs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "ds"
    a, b = logs["bag"], logs["mcap-ros1"]
    assert main(["export", str(a), str(b), "--format", "parquet", "--jobs", "1", "-o", str(out), "-q"]) == 0
    assert sorted(p.name for p in (out / "topic=rec").iterdir()) == ["file=rec", "file=ros1"]
    check_dataset(a, out, file="rec")
    check_dataset(b, out, file="ros1")
    both = duckdb.sql(
        f"SELECT file, count(*) FROM read_parquet('{out}/**/*.parquet', hive_partitioning=true, union_by_name=true) "
        "WHERE topic = 'rec' GROUP BY file ORDER BY file"
    ).fetchall()
    assert both == [("rec", N_REC), ("ros1", N_REC)]
    lazy = pl.scan_parquet(str(out / "topic=num.x" / "**" / "*.parquet"), hive_partitioning=True)
    per_file = dict(lazy.group_by("file").len().collect().iter_rows())
    assert per_file == {"rec": N_NUM, "ros1": N_NUM}


def test_two_kinds_at_once(logs: dict[str, Path], tmp_path: Path) -> None:
    # a ULog and a ROS 2 MCAP in one dataset: each topic directory reads as its own table
    from polybag.ops.batch import export_many

    out = tmp_path / "ds"
    res = export_many([str(logs["ulog"]), str(logs["mcap-ros2"])], str(out), jobs=1, format="parquet", layout="dataset")
    assert res.failed == 0, res.to_dict()
    assert sorted(p.name for p in out.iterdir()) == ["topic=num.x", "topic=rec", "topic=thing"]
    check_dataset(logs["ulog"], _only(out, {"thing"}, tmp_path / "u"), file="thing")


def _only(out: Path, names: set[str], into: Path) -> Path:
    """A view of ``out`` with only the topic directories ``names`` (symbolic links for reading)."""
    into.mkdir()
    for n in names:
        (into / f"topic={n}").symlink_to(out / f"topic={n}")
    return into
