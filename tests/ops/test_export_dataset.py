"""``export`` parquet datasets: the layout, hostile topic names, planted links and foreign
files under ``--force``, row groups by chunk, and ``time=``."""

from __future__ import annotations

import importlib
import os
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polybag
from polybag import ops
from polybag.cli import main
from polybag.errors import EmptySelectionError, OutputExistsError, UsageError

pq = pytest.importorskip("pyarrow.parquet")
duckdb = pytest.importorskip("duckdb")

T0 = 1_600_000_000_000_000_000


def write_mcap(path: Path, topics: dict[str, int], chunk_size: int = 4000, step: int = 1000) -> Path:
    """Each topic ``n`` messages ``int32 x`` (x = its index), in time order."""
    from polybag.formats.mcap.writer import McapWriter

    with McapWriter(path, chunk_size=chunk_size) as w:  # type: ignore[arg-type]
        s = w.add_schema("pkg/I", "ros1msg", b"int32 x\n")
        chans = {t: w.add_channel(t, "ros1", s) for t in topics}
        rows = sorted((i * step + k, t, i) for k, (t, n) in enumerate(topics.items()) for i in range(n))
        for seq, (t, topic, i) in enumerate(rows):
            w.write(chans[topic], struct.pack("<i", i), log_time=T0 + t, publish_time=T0 + t + 7, sequence=seq)
    return path


def write_bag(path: Path, n: int, chunk_size: int) -> Path:
    """``/h``: a stamped type whose ``header.stamp`` differs from the log time."""
    from polybag.formats.bag.writer import BagWriter

    definition = (
        "Header header\nint32 x\n"
        "================================================================================\n"
        "MSG: std_msgs/Header\nuint32 seq\ntime stamp\nstring frame_id\n"
    )
    with BagWriter(path, chunk_size=chunk_size) as w:  # type: ignore[arg-type]
        ch = w.add_channel("/h", "ros1", w.add_schema("pkg/H", "ros1msg", definition))
        for i in range(n):
            stamp = T0 + i * 1_000_000 - 333
            data = struct.pack("<IIII", i, stamp // 10**9, stamp % 10**9, 0) + struct.pack("<i", i)
            w.write(ch, data, log_time=T0 + i * 1_000_000)
    return path


def parts(out: Path) -> list[Path]:
    return sorted(p for p in out.rglob("*") if p.is_file())


HOSTILE = {"..": 3, "/a/../../b": 4, "/A": 5, "/a": 6, "/x=y/z w%2F": 2, "/\u00e9t\u00e9": 1, "/": 2, "/.": 3}


def test_hostile_topic_names_stay_inside(tmp_path: Path) -> None:
    src = write_mcap(tmp_path / "in.mcap", HOSTILE)
    out = tmp_path / "d" / "ds"
    res = ops.export(src, out, format="parquet", layout="dataset")
    assert not res.failed and len(res.tables) == len(HOSTILE)
    root = out.resolve()
    seen = {}
    for tr in res.tables:
        p = Path(tr.path)
        assert p.resolve().parent.parent == root, tr.path
        assert p.parent.name.startswith("topic=") and p.name == "part-0.parquet"
        assert "/" not in p.parent.name[6:] and "=" not in p.parent.name[6:]
        md = pq.read_schema(p).metadata
        seen[md[b"polybag.topic"].decode()] = p
        n = duckdb.sql(f"SELECT count(*) FROM read_parquet('{p.parent}/*.parquet', hive_partitioning=true)").fetchall()
        assert n == [(HOSTILE[md[b"polybag.topic"].decode()],)]
    assert set(seen) == set(HOSTILE)
    # case clashes: one directory each, ignoring case
    names = [p.name.casefold() for p in out.iterdir()]
    assert len(names) == len(set(names)) == len(HOSTILE)
    assert sorted(os.listdir(tmp_path / "d")) == ["ds"]  # nothing outside the dataset


_TOPIC = st.text(alphabet="aA/._ -=%\u00e9", min_size=1, max_size=6)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_TOPIC, min_size=1, max_size=5, unique=True))
def test_any_topic_names_make_distinct_partitions(tmp_path_factory: pytest.TempPathFactory, topics: list[str]) -> None:
    d = tmp_path_factory.mktemp("h")
    src = write_mcap(d / "in.mcap", {t: 1 + k for k, t in enumerate(topics)})
    with polybag.open(str(src)) as r:
        want = {t: 1 + k for k, t in enumerate(topics) if t in r.summary.topics()}
    res = ops.export(src, d / "ds", format="parquet", layout="dataset")
    got = {}
    for tr in res.tables:
        p = Path(tr.path)
        assert p.resolve().parent.parent == (d / "ds").resolve()
        got[pq.read_schema(p).metadata[b"polybag.topic"].decode()] = pq.read_metadata(p).num_rows
    assert got == want  # every topic once, with its own rows (a brute-force count)
    assert len({p.casefold() for p in os.listdir(d / "ds")}) == len(want)


def test_planted_directory_link_is_refused(tmp_path: Path) -> None:
    src = write_mcap(tmp_path / "in.mcap", {"/a": 3})
    out, elsewhere = tmp_path / "ds", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (out / "topic=a").symlink_to(elsewhere)
    for force in (False, True):
        with pytest.raises(OutputExistsError, match="symbolic link"):
            ops.export(src, out, format="parquet", layout="dataset", overwrite=force)
    assert os.listdir(elsewhere) == []
    assert (out / "topic=a").is_symlink()


def test_planted_file_link_is_refused_with_force(tmp_path: Path) -> None:
    src = write_mcap(tmp_path / "in.mcap", {"/a": 3})
    out = tmp_path / "ds"
    ops.export(src, out, format="parquet", layout="dataset")
    victim = tmp_path / "victim.parquet"
    victim.write_bytes(b"PAR1 not mine")
    part = out / "topic=a" / "part-0.parquet"
    part.unlink()
    part.symlink_to(victim)
    with pytest.raises(OutputExistsError):
        ops.export(src, out, format="parquet", layout="dataset", overwrite=True)
    assert victim.read_bytes() == b"PAR1 not mine" and part.is_symlink()


@pytest.mark.parametrize("where", ["topic=a/notes.txt", "readme.txt", "topic=a/part-1.parquet"])
def test_force_refuses_a_dataset_holding_foreign_files(tmp_path: Path, where: str) -> None:
    src = write_mcap(tmp_path / "in.mcap", {"/a": 3, "/b": 2})
    out = tmp_path / "ds"
    ops.export(src, out, format="parquet", layout="dataset")
    before = {p: p.read_bytes() for p in parts(out)}
    (out / where).write_text("mine")
    with pytest.raises(OutputExistsError, match="not replaced even with --force"):
        ops.export(src, out, format="parquet", layout="dataset", overwrite=True)
    assert {p: p.read_bytes() for p in parts(out) if p.name != Path(where).name} == before
    (out / where).unlink()
    # without foreign files, --force replaces exactly the parts (and without it, nothing)
    with pytest.raises(OutputExistsError, match="output exists"):
        ops.export(src, out, format="parquet", layout="dataset")
    res = ops.export(src, out, format="parquet", layout="dataset", overwrite=True, topics=["/a"])
    assert [t.rows for t in res.tables] == [3]
    assert sorted(str(p.relative_to(out)) for p in parts(out)) == ["topic=a/part-0.parquet", "topic=b/part-0.parquet"]


def test_layouts_do_not_mix(tmp_path: Path) -> None:
    src = write_mcap(tmp_path / "in.mcap", {"/a": 3})
    out = tmp_path / "ds"
    ops.export(src, out, format="parquet", layout="dataset")
    with pytest.raises(OutputExistsError, match="another layout"):
        ops.export(src, out, format="parquet", layout="dataset", file_partition="in", overwrite=True)
    assert parts(out) == [out / "topic=a" / "part-0.parquet"]


def test_failed_export_leaves_no_directories(tmp_path: Path) -> None:
    src = write_mcap(tmp_path / "in.mcap", {"/a": 3, "/b": 3})
    out = tmp_path / "ds"
    out.mkdir()
    (out / "topic=b").mkdir()
    (out / "topic=b" / "part-0.parquet.active").write_bytes(b"")  # an interrupted export
    with pytest.raises(OutputExistsError, match="interrupted"):
        ops.export(src, out, format="parquet", layout="dataset")
    assert sorted(os.listdir(out)) == ["topic=b"]


def test_row_groups_follow_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ex = importlib.import_module("polybag.ops.export")

    src = write_mcap(tmp_path / "in.mcap", {"/a": 400, "/b": 100}, chunk_size=600)
    with polybag.open(str(src)) as r:
        ids = {c.id for c in r.summary.channels.values() if c.topic == "/a"}
        chunks = r.chunk_message_counts(ids)
    assert chunks is not None and len(chunks) > 10
    # every chunk that holds /a: one row group of its rows (the minimum lowered to one row)
    monkeypatch.setattr(ex, "GROUP_MIN_ROWS", 1)
    ops.export(src, tmp_path / "one", format="parquet", layout="dataset", topics=["/a"])
    meta = pq.read_metadata(tmp_path / "one" / "topic=a" / "part-0.parquet")
    assert meta.num_row_groups == len(chunks)
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [c[2] for c in chunks]
    # at least GROUP_MIN_ROWS rows before a chunk's end closes a group; batch_messages caps
    monkeypatch.setattr(ex, "GROUP_MIN_ROWS", 50)
    ops.export(src, tmp_path / "two", format="parquet", layout="dataset", topics=["/a"], batch_messages=70)
    meta = pq.read_metadata(tmp_path / "two" / "topic=a" / "part-0.parquet")
    sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    assert sum(sizes) == 400 and max(sizes) <= 70 and min(sizes[:-1]) >= 50
    assert meta.num_row_groups <= len(chunks)
    # the default: groups bounded by batch_messages
    monkeypatch.undo()
    ops.export(src, tmp_path / "three", format="parquet", layout="dataset", topics=["/a"], batch_messages=128)
    meta = pq.read_metadata(tmp_path / "three" / "topic=a" / "part-0.parquet")
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [128, 128, 128, 16]


def test_row_groups_of_a_bag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ex = importlib.import_module("polybag.ops.export")

    src = write_bag(tmp_path / "h.bag", 300, chunk_size=1500)
    with polybag.open(str(src)) as r:
        chunks = r.chunk_message_counts()
    assert chunks is not None and len(chunks) > 3
    monkeypatch.setattr(ex, "GROUP_MIN_ROWS", 1)
    ops.export(src, tmp_path / "ds", format="parquet", layout="dataset")
    meta = pq.read_metadata(tmp_path / "ds" / "topic=h" / "part-0.parquet")
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [c[2] for c in chunks]


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_time_choices(tmp_path: Path, fmt: str) -> None:
    src = write_mcap(tmp_path / "in.mcap", {"/a": 5})
    bag = write_bag(tmp_path / "h.bag", 6, chunk_size=1 << 20)
    layout = "dataset" if fmt == "parquet" else "flat"

    def read(res: ops.ExportResult) -> dict[str, list[object]]:
        path = res.tables[0].path
        if fmt == "parquet":
            t = pq.read_table(path)
            assert t.schema.metadata[b"polybag.time"] in (b"publish_time", b"header.stamp", b"log_time")
            return dict(t.to_pydict())
        import csv

        with open(path, newline="") as fh:
            rows = list(csv.DictReader(fh))
        return {k: [int(r[k]) if k.endswith(("time", "stamp")) else r[k] for r in rows] for k in rows[0]}

    cols = read(ops.export(src, tmp_path / "p", format=fmt, layout=layout, time="publish_time"))
    assert list(cols) == ["publish_time", "x"]
    assert cols["publish_time"] == [T0 + i * 1000 + 7 for i in range(5)]
    cols = read(ops.export(bag, tmp_path / "h", format=fmt, layout=layout, time="header.stamp"))
    assert list(cols)[0] == "header.stamp" and "log_time" not in cols
    assert cols["header.stamp"] == [T0 + i * 1_000_000 - 333 for i in range(6)]
    cols = read(ops.export(bag, tmp_path / "h2", format=fmt, layout=layout, time="header.stamp", fields=["x"]))
    assert list(cols) == ["header.stamp", "x"]
    res = ops.export(src, tmp_path / "n", format=fmt, layout=layout, time="header.stamp")
    assert list(read(res)) == ["log_time", "x"]
    assert any("no header.stamp" in w for w in res.warnings)


def test_ulog_timestamp_first(tmp_path: Path) -> None:
    from polybag.formats.ulog.writer import UlogWriter

    path = tmp_path / "t.ulg"
    with UlogWriter(path, start_timestamp=1000) as w:
        w.add_format("thing:float x;uint64_t timestamp;")
        ch = w.add_subscription("thing", 0)
        for i in range(4):
            w.write(ch, struct.pack("<fQ", i, 1000 + i * 10), log_time=(1000 + i * 10) * 1000)
    t = pq.read_table(ops.export(path, tmp_path / "a", format="parquet", time="timestamp").tables[0].path)
    assert t.column_names[0] == "timestamp" and t.column("timestamp").to_pylist() == [1000, 1010, 1020, 1030]
    t = pq.read_table(ops.export(path, tmp_path / "b", format="parquet", time="publish_time").tables[0].path)
    assert t.column_names[0] == "publish_time" and "log_time" not in t.column_names


def test_cli_defaults_and_usage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = write_mcap(tmp_path / "in.mcap", {"/a": 3})
    assert main(["export", str(src), "--format", "parquet", "-o", str(tmp_path / "ds")]) == 0
    assert parts(tmp_path / "ds") == [tmp_path / "ds" / "topic=a" / "part-0.parquet"]
    assert main(["export", str(src), "--format", "parquet", "--layout", "flat", "-o", str(tmp_path / "f")]) == 0
    assert parts(tmp_path / "f") == [tmp_path / "f" / "a.parquet"]
    assert main(["export", str(src), "-o", str(tmp_path / "c")]) == 0
    assert parts(tmp_path / "c") == [tmp_path / "c" / "a.csv"]
    capsys.readouterr()
    assert main(["export", str(src), "--layout", "dataset", "-o", str(tmp_path / "x")]) == 2
    assert "--layout dataset is for --format parquet" in capsys.readouterr().err
    assert main(["export", str(src), "--format", "jsonl", "--time", "publish_time", "-o", str(tmp_path / "j")]) == 2
    assert "jsonl" in capsys.readouterr().err
    with pytest.raises(UsageError, match="time must be one of"):
        ops.export(src, tmp_path / "y", format="parquet", time="wall")
    with pytest.raises(UsageError, match="file partition"):
        ops.export(src, tmp_path / "y", format="parquet", layout="dataset", file_partition="../x")
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists() and not (tmp_path / "j").exists()


def test_many_inputs_with_clashing_names_refused(tmp_path: Path) -> None:
    from polybag.ops.batch import export_many

    a = write_mcap(tmp_path / "Run.mcap", {"/a": 1})
    (tmp_path / "x").mkdir()
    b = write_mcap(tmp_path / "x" / "run.bag.mcap", {"/a": 1})
    c = write_mcap(tmp_path / "run.mcap", {"/a": 1})
    with pytest.raises(UsageError, match="same partition"):
        export_many([str(a), str(c)], str(tmp_path / "ds"), jobs=1, format="parquet", layout="dataset")
    res = export_many([str(a), str(b)], str(tmp_path / "ds"), jobs=1, format="parquet", layout="dataset")
    assert res.failed == 0
    assert sorted(os.listdir(tmp_path / "ds" / "topic=a")) == ["file=Run", "file=run.bag"]


def test_empty_selection_is_said(tmp_path: Path) -> None:
    src = write_mcap(tmp_path / "in.mcap", {"/a": 3})
    with pytest.raises(EmptySelectionError):
        ops.export(src, tmp_path / "ds", format="parquet", layout="dataset", topics=["/nope"])
    assert not (tmp_path / "ds").exists()


def test_sequences_empty_in_the_first_row_groups_keep_their_types(tmp_path: Path) -> None:
    import pyarrow as pa  # type: ignore[import-untyped]

    from polybag.formats.bag.writer import BagWriter

    definition = (
        "float64[] vals\nstring[] names\nPt[] pts\nuint8[] blob\n"
        "================================================================================\n"
        "MSG: pkg/Pt\nfloat64 x\nstring s\n"
    )

    def payload(k: int) -> bytes:
        out = struct.pack("<I", k) + struct.pack(f"<{k}d", *([1.5] * k))
        out += struct.pack("<I", k) + b"".join(struct.pack("<I", 1) + b"a" for _ in range(k))
        out += struct.pack("<I", k) + b"".join(struct.pack("<dI", 2.5, 1) + b"b" for _ in range(k))
        return out + struct.pack("<I", k) + b"\x07" * k

    src = tmp_path / "e.bag"
    with BagWriter(src, chunk_size=4000) as w:  # type: ignore[arg-type]
        ch = w.add_channel("/v", "ros1", w.add_schema("pkg/V", "ros1msg", definition))
        for i in range(3000):
            w.write(ch, payload(0 if i < 2000 else 2), log_time=T0 + i * 1000)
    res = ops.export(src, tmp_path / "ds", format="parquet", layout="dataset")
    assert not res.failed, res.warnings
    path = tmp_path / "ds" / "topic=v" / "part-0.parquet"
    assert pq.read_metadata(path).num_row_groups > 1
    schema = pq.read_schema(path)
    assert schema.field("vals").type == pa.list_(pa.float64())
    assert schema.field("names").type == pa.list_(pa.string())
    assert pa.types.is_list(schema.field("pts").type) and pa.types.is_struct(schema.field("pts").type.value_type)
    assert schema.field("blob").type == pa.binary()
    rows = pq.read_table(path).to_pylist()
    assert rows[0]["vals"] == [] and rows[-1]["vals"] == [1.5, 1.5]
    assert rows[-1]["names"] == ["a", "a"] and rows[-1]["blob"] == b"\x07\x07"
    assert [p["x"] for p in rows[-1]["pts"]] == [2.5, 2.5]
