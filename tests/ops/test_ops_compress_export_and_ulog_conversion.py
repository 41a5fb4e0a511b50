"""Gaps found in the operations audit: bounded split part size, library compress/decompress,
streaming export (same tables as the whole-topic export), convert to ULog."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np
import pytest

from ops_helpers import CORPORA, rows
from polybag import ops

EXAMPLE = CORPORA / "rosbag" / "foxglove-rosbag" / "example.bag"


# --- split --size bounds the part size on disk ---------------------------------------------
@pytest.mark.parametrize(
    ("ext", "compression", "size"),
    [(".bag", None, 200_000), (".mcap", "none", 200_000), (".mcap", "zstd", 120_000), (".bag", "none", 50_000)],
)
def test_split_size_bounds_parts_on_disk(tmp_path: Path, ext: str, compression: str | None, size: int) -> None:
    res = ops.split(EXAMPLE, size=size, output_dir=tmp_path, format=ext[1:], compression=compression)
    assert len(res.parts) > 2
    for p in res.parts:
        on_disk = os.path.getsize(p.path)
        assert on_disk <= size or p.messages == 1, (p.path, on_disk, p.messages)
    flat = [r for p in res.parts for r in rows(p.path)]
    assert sorted(flat) == sorted(rows(EXAMPLE))
    # uncompressed parts are not needlessly small: on average at least a third of the budget
    if compression == "none" or (ext == ".bag" and compression is None):
        assert sum(os.path.getsize(p.path) for p in res.parts) / len(res.parts) > size / 3


# --- ops.compress / ops.decompress ----------------------------------------------------------
@pytest.mark.parametrize(("ext", "comp", "want"), [(".bag", "lz4", "lz4"), (".bag", "bz2", "bz2"), (".mcap", "lz4", "lz4")])
def test_ops_compress_then_decompress(tmp_path: Path, ext: str, comp: str, want: str) -> None:
    import polybag

    src = tmp_path / f"in{ext}"
    if ext == ".bag":
        src.write_bytes(EXAMPLE.read_bytes())
    else:
        ops.convert(EXAMPLE, src)
    before = rows(src)
    res = ops.compress(src, comp)
    assert not res.skipped and res.output == str(src) and res.compression == want
    assert res.messages == len(before)
    assert Path(res.backup or "").exists() and Path(res.backup or "").read_bytes() != src.read_bytes()
    with polybag.open(src) as r:
        comps = {c.compression for c in r.summary.chunks}
    assert comps == {want}
    assert rows(src) == before
    # a second in-place run finds the backup and skips (with a warning), unless forced
    again = ops.compress(src, comp)
    assert again.skipped and again.warnings and again.output is None
    out = ops.decompress(src, output_dir=tmp_path / "plain")
    assert out.output == str(tmp_path / "plain" / src.name) and out.backup is None
    with polybag.open(out.output) as r:
        assert {c.compression for c in r.summary.chunks} <= {"none", ""}
    assert rows(out.output) == before


def test_ops_compress_rejects_ulog(tmp_path: Path) -> None:
    from polybag.errors import PolybagError

    ulg = next((CORPORA / "ulog").rglob("*.ulg"))
    with pytest.raises(PolybagError, match="no chunk compression"):
        ops.compress(ulg, output_dir=tmp_path)


# --- export: streamed in blocks, same tables as the whole-topic columns ----------------------
def _reference_csv(cols: dict) -> list[list[str]]:
    """What the whole-topic export wrote: header + cells (``ops.export.cell``) as csv text."""
    import csv
    import io

    from polybag.ops.export import cell

    buf = io.StringIO()
    w = csv.writer(buf)
    names = list(cols)
    w.writerow(names)
    n = len(cols["log_time"])
    for i in range(n):
        w.writerow([cols[k][i].item() if cols[k].dtype != object and cols[k].ndim == 1 else cell(cols[k][i]) for k in names])
    return list(csv.reader(io.StringIO(buf.getvalue())))


def _read_csv_rows(path: Path) -> list[list[str]]:
    import csv

    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.reader(fh))


def _bytes_bag(path: Path, n: int = 40) -> None:
    """A bag with a ``uint8[]`` field, a string and a variable float array."""
    import struct

    import polybag

    d = b"uint32 seq\nuint8[] data\nstring name\nfloat64[] vals\n"
    with polybag.Writer(str(path), compression="none") as w:
        s = w.add_schema("test_msgs/Blob", "ros1msg", d)
        c = w.add_channel("/blob", "ros1", s, {"callerid": "/t"})
        for i in range(n):
            data = bytes((i * 7 + k) % 256 for k in range(i % 13))
            name = f"n{i}".encode()
            vals = [i + 0.5 * k for k in range(i % 4)]
            payload = (
                struct.pack("<I", i)
                + struct.pack("<I", len(data)) + data
                + struct.pack("<I", len(name)) + name
                + struct.pack("<I", len(vals)) + struct.pack(f"<{len(vals)}d", *vals)
            )
            w.write(c, payload, 1_000_000_000 + i * 1000, 1_000_000_000 + i * 1000, i)


@pytest.mark.parametrize("batch", [(1 << 30, 1 << 30), (3000, 1 << 30), (1 << 30, 7)], ids=["whole", "bytes", "count"])
def test_export_csv_streamed_equals_whole_topic(tmp_path: Path, batch: tuple[int, int]) -> None:
    import polybag

    src = tmp_path / "b.bag"
    _bytes_bag(src)
    for f in (EXAMPLE, src):
        out = tmp_path / f"out_{f.stem}"
        res = ops.export(f, out, batch_bytes=batch[0], batch_messages=batch[1])
        assert res.failed == 0 and res.tables
        with polybag.open(f) as r:
            for t in res.tables:
                want = _reference_csv(dict(r.topic_columns(t.topic)))
                got = _read_csv_rows(Path(t.path))
                assert got == want, t.topic
                assert t.rows == len(want) - 1
        assert res.messages == sum(t.rows for t in res.tables)


def test_export_parquet_streamed_bytes_are_binary(tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    import polybag

    src = tmp_path / "b.bag"
    _bytes_bag(src, 60)
    res = ops.export(src, tmp_path / "pq", format="parquet", batch_messages=9)
    assert res.failed == 0
    table = pq.read_table(res.tables[0].path)
    assert table.schema.field("data").type == pa.binary()
    with polybag.open(src) as r:
        cols = r.topic_columns("/blob")
    assert table.column("data").to_pylist() == [bytes(x) for x in cols["data"]]
    assert table.column("log_time").to_pylist() == cols["log_time"].tolist()
    assert table.column("name").to_pylist() == list(cols["name"])
    assert table.column("vals").to_pylist() == [list(v) for v in cols["vals"]]
    # example.bag through parquet, small batches: every value equals the whole-topic columns
    res = ops.export(EXAMPLE, tmp_path / "ex", format="parquet", batch_bytes=5000)
    with polybag.open(EXAMPLE) as r:
        for t in res.tables:
            got = pq.read_table(t.path)
            want = r.topic_columns(t.topic)
            assert got.num_rows == len(want["log_time"]) == t.rows
            for k, v in want.items():
                vals = got.column(k).to_pylist()
                ref = [x.tolist() if isinstance(x, np.ndarray) else x for x in v.tolist()]
                assert vals == ref, (t.topic, k)


def test_export_time_window_and_fields(tmp_path: Path) -> None:
    import polybag

    with polybag.open(EXAMPLE) as r:
        full = r.topic_columns("/turtle1/pose", ["x"])
    t = full["log_time"]
    lo, hi = int(t[10]), int(t[50])
    res = ops.export(EXAMPLE, tmp_path, topics="/turtle1/pose", fields=["x"], start=lo, end=hi, batch_messages=4)
    rows_ = _read_csv_rows(Path(res.tables[0].path))
    assert rows_[0] == ["log_time", "x"]
    keep = (t >= lo) & (t < hi)
    assert [int(x[0]) for x in rows_[1:]] == t[keep].tolist()
    assert [float(x[1]) for x in rows_[1:]] == full["x"][keep].tolist()
    bad = ops.export(EXAMPLE, tmp_path / "bad", topics="/turtle1/pose", fields=["nope"])
    assert bad.failed == 1 and "no field" in bad.warnings[0] and not list((tmp_path / "bad").iterdir())


def test_export_and_plot_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from polybag.cli import main

    assert main(["export", str(EXAMPLE), "--topics", "/turtle1/.*", "-o", str(tmp_path / "e"), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["failed"] == 0 and {t["topic"] for t in d["tables"]} == {"/turtle1/cmd_vel", "/turtle1/color_sensor", "/turtle1/pose"}
    assert all(Path(t["path"]).stat().st_size == t["bytes"] for t in d["tables"])
    pytest.importorskip("matplotlib")
    assert main(["plot", str(EXAMPLE), "/turtle1/pose.x", "-o", str(tmp_path / "p.png"), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["series"][0]["points"] > 0 and (tmp_path / "p.png").exists()


# --- convert to ULog: ulog_msgs channels back to ULog formats, fixed ROS 1 types ---------------
@pytest.mark.parametrize("name", ["sample_log_small.ulg", "sample_px4_events.ulg"])
@pytest.mark.parametrize("via", [".mcap", ".bag"])
def test_ulog_to_ros1_and_back_keeps_pyulog_values(tmp_path: Path, name: str, via: str) -> None:
    pyulog = pytest.importorskip("pyulog")
    src = CORPORA / "ulog" / name
    mid = tmp_path / f"m{via}"
    ops.convert(src, mid)
    res = ops.convert(mid, tmp_path / "back.ulg")
    assert res.dropped_messages == 0 and res.messages > 0
    a = pyulog.ULog(str(src))
    b = pyulog.ULog(str(tmp_path / "back.ulg"))
    want = {(d.name, d.multi_id): d for d in a.data_list}
    got = {(d.name, d.multi_id): d for d in b.data_list}
    assert set(got) == set(want)
    for key, d in want.items():
        e = got[key]
        for col, ref in d.data.items():
            if "_padding" in col:
                continue
            assert col in e.data, (key, col)
            assert np.array_equal(np.asarray(ref), np.asarray(e.data[col]), equal_nan=True), (key, col)
    if via == ".mcap":  # MCAP metadata carries info and parameters back (bags cannot hold them)
        assert b.initial_parameters == a.initial_parameters
        assert b.msg_info_dict == a.msg_info_dict
    assert [(m.timestamp, m.log_level, m.message) for m in b.logged_messages] == [
        (m.timestamp, m.log_level, m.message) for m in a.logged_messages
    ]


def test_ros1_fixed_type_to_ulog(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pyulog = pytest.importorskip("pyulog")
    import polybag
    from polybag.cli import main

    demo = Path(__file__).resolve().parents[2] / "samples" / "demo.mcap"
    want: dict[str, list] = {}
    with polybag.open(demo) as r:
        for m, obj in r.decoded_messages():
            if m.channel.schema is not None and m.channel.schema.name == "geometry_msgs/Vector3":
                want.setdefault(m.channel.topic, []).append((m.log_time // 1000, obj.x, obj.y, obj.z))
        strings = [c.topic for c in r.summary.channels.values() if c.schema is not None and c.schema.name == "std_msgs/String"]
    assert want and strings
    out = tmp_path / "d.ulg"
    # a string topic cannot be held: reported, skipped, non-zero exit
    assert main(["convert", str(demo), str(out)]) == 1
    err = capsys.readouterr().err
    assert strings[0] in err and "string" in err
    log = pyulog.ULog(str(out))
    from polybag.bridges.ros1_ulog import topic_format_name

    for topic, rows_ in want.items():
        d = log.get_dataset(topic_format_name(topic))
        assert d.data["timestamp"].tolist() == [r[0] for r in rows_]
        for i, axis in enumerate("xyz", start=1):
            assert d.data[axis].tolist() == [r[i] for r in rows_]
    # and polybag reads it back the same
    with polybag.open(out) as r:
        assert r.summary.message_count == sum(len(v) for v in want.values())


def test_ros1_definitions_ulog_cannot_hold() -> None:
    from polybag.bridges.ros1_ulog import ros1_channel_to_ulog
    from polybag.errors import UnsupportedError
    from polybag.model import Channel, Schema

    def ch(name: str, text: str) -> Channel:
        return Channel(1, "/t", "ros1", Schema(1, name, "ros1msg", text.encode()), {})

    with pytest.raises(UnsupportedError, match="variable-length"):
        ros1_channel_to_ulog(ch("a/B", "float64[] v\n"))
    with pytest.raises(UnsupportedError, match="string"):
        ros1_channel_to_ulog(ch("a/B", "Header header\n" + "=" * 80 + "\nMSG: std_msgs/Header\nuint32 seq\ntime stamp\nstring frame_id\n"))
    mp = ros1_channel_to_ulog(ch("a/B", "# c\nint32 K=3\ntime t\nC[2] c\n" + "=" * 80 + "\nMSG: a/C\nuint8 u\nduration d\n"))
    assert mp.formats[-1] == "t:uint64_t timestamp;ros_time t;a__C[2] c;"
    assert "a__C:uint8_t u;ros_duration d;" in mp.formats
    data = struct.pack("<II", 5, 6) + (b"\x01" + struct.pack("<ii", -1, 2)) * 2
    assert mp.transform is not None and mp.transform(data, 7_000_123) == struct.pack("<Q", 7000) + data
    assert mp.transform(data[:-1], 0) is None
