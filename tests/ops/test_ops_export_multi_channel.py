"""``polybag export`` of topics with several channels: every channel's data reaches a table.

ULog multi-instance topics give one table per ``multi_id`` (``sensor_accel_0.csv``,
``sensor_accel_1.csv``) whose values equal pyulog's; MCAP topics whose channels have
different types give one table per channel; channels of one type share a table.
"""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import polybag
from mcap_helpers import Row
from polybag.cli import main
from polybag.cli.export import table_name
from polybag.formats.mcap.writer import McapWriter

pyulog = pytest.importorskip("pyulog")

ULOGS = ["sample_log_small.ulg", "sample_px4_events.ulg", "sample_logging_tagged_and_default_params.ulg"]


def _read_csv(path: Path) -> dict[str, list[str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    head, body = rows[0], rows[1:]
    return {h: [r[i] for r in body] for i, h in enumerate(head)}


def _expected_tables(log: pyulog.ULog, path: Path) -> dict[str, dict[str, np.ndarray]]:
    """Table name -> pyulog's columns, for topics with one instance per (name, multi_id).

    A topic subscribed with several multi_ids (even if one logged nothing: pyulog then
    leaves it out) gets one table per instance.
    """
    per = Counter(d.name for d in log.data_list)
    keys = Counter((d.name, d.multi_id) for d in log.data_list)
    mids: dict[str, set[int]] = {}
    with polybag.open(str(path)) as r:
        for c in r.summary.channels.values():
            if "multi_id" in c.metadata:
                mids.setdefault(c.topic, set()).add(int(c.metadata["multi_id"]))
    for d in log.data_list:
        assert d.multi_id in mids[d.name]
    out = {}
    for d in log.data_list:
        if keys[(d.name, d.multi_id)] > 1:
            continue  # the same instance subscribed twice: not a table comparison
        name = table_name(d.name) + (f"_{d.multi_id}" if len(mids[d.name]) > 1 else "")
        out[name] = {k: v for k, v in d.data.items() if "_padding" not in k}
        assert per[d.name] >= 1
    return out


@pytest.mark.parametrize("name", ULOGS)
def test_ulog_every_instance_is_exported_like_pyulog(name: str, corpora: Path, tmp_path: Path) -> None:
    path = corpora / "ulog" / name
    log = pyulog.ULog(str(path))
    want = _expected_tables(log, path)
    multi = [n for n in want if n.endswith("_1")]
    assert multi, "the file must have multi-instance topics"
    assert main(["export", str(path), "-o", str(tmp_path)]) == 0
    files = {p.stem for p in tmp_path.glob("*.csv")}
    for table in multi:
        assert table in files and table[:-2] + "_0" in files
        assert table[:-2] not in files  # no merged table hiding an instance
    for table, cols in want.items():
        assert table in files, table
        got = _read_csv(tmp_path / f"{table}.csv")
        for col, ref in cols.items():
            assert col in got, (table, col)
            vals = got[col]
            assert len(vals) == len(ref), (table, col)
            if ref.dtype.kind == "f":
                arr = np.array([float(v) for v in vals], dtype=ref.dtype)
            else:
                arr = np.array([int(v) if v not in ("True", "False") else v == "True" for v in vals]).astype(ref.dtype)
            np.testing.assert_array_equal(arr, ref, err_msg=f"{table}.{col}")


def test_ulog_multi_instance_parquet(corpora: Path, tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    path = corpora / "ulog" / "sample_log_small.ulg"
    log = pyulog.ULog(str(path))
    inst = {d.multi_id: d for d in log.data_list if d.name == "sensor_accel"}
    assert len(inst) > 1
    assert main(["export", str(path), "--topics", "sensor_accel", "--format", "parquet", "--layout", "flat", "-o", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"sensor_accel_{m}.parquet" for m in sorted(inst)]
    for mid, d in inst.items():
        t = pq.read_table(str(tmp_path / f"sensor_accel_{mid}.parquet"))
        assert t.column("timestamp").to_pylist() == d.data["timestamp"].tolist()
        assert t.column("x").to_pylist() == d.data["x"].tolist()


def test_ulog_jsonl_splits_instances(corpora: Path, tmp_path: Path) -> None:
    path = corpora / "ulog" / "sample_log_small.ulg"
    log = pyulog.ULog(str(path))
    counts = {d.multi_id: len(d.data["timestamp"]) for d in log.data_list if d.name == "sensor_gyro"}
    assert len(counts) > 1
    assert main(["export", str(path), "--topics", "sensor_gyro", "--format", "jsonl", "-o", str(tmp_path)]) == 0
    for mid, n in counts.items():
        lines = (tmp_path / f"sensor_gyro_{mid}.jsonl").read_text().splitlines()
        assert len(lines) == n


def _mcap_with_mixed_types(path: Path) -> list[Row]:
    w = McapWriter(str(path))
    a = w.add_schema("pkg/A", "ros1msg", b"int32 x\n")
    b = w.add_schema("pkg/B", "ros1msg", b"float64 y\nuint8 z\n")
    ca1 = w.add_channel("/mixed", "ros1", a)
    cb = w.add_channel("/mixed", "ros1", b)
    ca2 = w.add_channel("/same", "ros1", a)
    ca3 = w.add_channel("/same", "ros1", a)
    rows: list[Row] = []
    for i in range(20):
        w.write(ca1, int(i).to_bytes(4, "little", signed=True), log_time=10 * i)
        w.write(cb, np.float64(i / 2).tobytes() + bytes([i]), log_time=10 * i + 1)
        w.write(ca2 if i % 2 else ca3, int(-i).to_bytes(4, "little", signed=True), log_time=10 * i + 2)
    w.close()
    return rows


def test_mcap_topic_with_channels_of_different_types(tmp_path: Path) -> None:
    f = tmp_path / "mixed.mcap"
    _mcap_with_mixed_types(f)
    out = tmp_path / "out"
    assert main(["export", str(f), "-o", str(out)]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == ["mixed_1.csv", "mixed_2.csv", "same.csv"]
    a = _read_csv(out / "mixed_1.csv")
    b = _read_csv(out / "mixed_2.csv")
    same = _read_csv(out / "same.csv")
    assert [int(v) for v in a["x"]] == list(range(20))
    assert [int(v) for v in a["log_time"]] == [10 * i for i in range(20)]
    assert [float(v) for v in b["y"]] == [i / 2 for i in range(20)]
    assert [int(v) for v in b["z"]] == list(range(20))
    assert [int(v) for v in same["x"]] == [-i for i in range(20)]
