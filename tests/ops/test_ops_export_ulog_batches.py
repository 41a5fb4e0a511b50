"""ULog export in batches (issue 6): every instance's table equals pyulog's values, and
any batch size gives the same tables as one batch holding the whole instance."""

from __future__ import annotations

import importlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polybag
from polybag import ops
from polybag.codecs.ulog import payload_records, type_for_schema

export_mod = importlib.import_module("polybag.ops.export")  # the module (ops.export is the function)

pyulog = pytest.importorskip("pyulog")
pq = pytest.importorskip("pyarrow.parquet")

ULOGS = [
    "sample.ulg",
    "sample_log_small.ulg",
    "sample_px4_events.ulg",
    "sample_logging_tagged_and_default_params.ulg",
    "sample_appended_multiple.ulg",
]
WHOLE = {"batch_bytes": 1 << 62, "batch_messages": 1 << 62}


def _tables(d: Path, fmt: str) -> dict[str, Any]:
    if fmt == "csv":
        return {p.name: p.read_bytes() for p in sorted(d.iterdir())}
    # JSON text: NaN cells compare equal (they are not == in lists)
    return {
        p.name: (str(t.schema), json.dumps(t.to_pydict(), default=str))
        for p in sorted(d.iterdir())
        for t in [pq.read_table(str(p))]
    }


def _instances(path: Path) -> dict[str, tuple[str, int]]:
    """Table name -> (topic, multi_id), as the export names ULog tables."""
    with polybag.open(str(path)) as r:
        mids: dict[str, set[int]] = {}
        for c in r.summary.channels.values():
            if "multi_id" in c.metadata:
                mids.setdefault(c.topic, set()).add(int(c.metadata["multi_id"]))
    out = {}
    for topic, ms in mids.items():
        for m in ms:
            name = export_mod.table_name(topic) + (f"_{m}" if len(ms) > 1 else "")
            out[name] = (topic, m)
    return out


@pytest.mark.parametrize("name", ULOGS)
def test_every_instance_equals_pyulog(name: str, corpora: Path, tmp_path: Path) -> None:
    path = corpora / "ulog" / name
    log = pyulog.ULog(str(path))
    res = ops.export(path, tmp_path, format="parquet", batch_messages=7)
    assert res.failed == 0
    inst = _instances(path)
    subs = Counter((d.name, d.multi_id) for d in log.data_list)
    checked = 0
    for table, (topic, mid) in inst.items():
        t = pq.read_table(str(tmp_path / f"{table}.parquet")).to_pydict()
        refs = [d for d in log.data_list if (d.name, d.multi_id) == (topic, mid)]
        if not refs:  # subscribed, nothing logged: pyulog leaves it out, the table is empty
            assert all(len(v) == 0 for v in t.values()), table
            continue
        # the same instance subscribed twice: the table is the first subscription with data
        ref = next(d for d in refs if len(d.data["timestamp"])) if subs[(topic, mid)] > 1 else refs[0]
        want = {k: v for k, v in ref.data.items() if "_padding" not in k}
        assert list(t) == list(want), table
        for col, vals in want.items():
            got = np.array(t[col], dtype=vals.dtype)
            np.testing.assert_array_equal(got, vals, err_msg=f"{table}.{col}")
        checked += 1
    assert checked == len({(d.name, d.multi_id) for d in log.data_list})


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
@pytest.mark.parametrize(
    "kw",
    [{}, {"start": "+1s", "end": "+4s"}, {"fields": ["x", "timestamp"]}],
    ids=["all", "window", "fields"],
)
def test_tiny_batches_equal_one_batch(fmt: str, kw: dict[str, Any], corpora: Path, tmp_path: Path) -> None:
    path = corpora / "ulog" / "sample_log_small.ulg"
    topics = ["sensor_accel", "vehicle_local_position"] if "fields" in kw else None
    whole = ops.export(path, tmp_path / "whole", format=fmt, topics=topics, **kw, **WHOLE)
    tiny = ops.export(path, tmp_path / "tiny", format=fmt, topics=topics, batch_messages=3, **kw)
    small = ops.export(path, tmp_path / "small", format=fmt, topics=topics, batch_bytes=100, **kw)
    assert whole.failed == 0 and whole.messages > 0
    assert [(t.table, t.rows) for t in tiny.tables] == [(t.table, t.rows) for t in whole.tables]
    assert [(t.table, t.rows) for t in small.tables] == [(t.table, t.rows) for t in whole.tables]
    ref = _tables(tmp_path / "whole", fmt)
    assert _tables(tmp_path / "tiny", fmt) == ref
    assert _tables(tmp_path / "small", fmt) == ref


def test_batches_are_bounded_and_whole_topic_reads_unused(
    corpora: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from polybag.formats.ulog.reader import UlogReader

    def forbidden(*a: Any, **k: Any) -> Any:
        raise AssertionError("whole-instance read")

    monkeypatch.setattr(UlogReader, "topic_columns", forbidden)
    monkeypatch.setattr(UlogReader, "records", forbidden)
    sizes: list[int] = []
    real = export_mod._CsvSink.write

    def spy(self: Any, cols: dict[str, np.ndarray], n: int) -> None:
        sizes.append(n)
        assert all(len(v) == n for v in cols.values())
        real(self, cols, n)

    monkeypatch.setattr(export_mod._CsvSink, "write", spy)
    path = corpora / "ulog" / "sample_log_small.ulg"
    res = ops.export(path, tmp_path, topics=["sensor_accel", "sensor_combined"], batch_messages=5)
    assert res.failed == 0 and max(sizes) == 5 and sum(sizes) == res.messages > 20


def test_missing_field_fails_the_table(corpora: Path, tmp_path: Path) -> None:
    path = corpora / "ulog" / "sample_log_small.ulg"
    res = ops.export(path, tmp_path, topics=["sensor_combined"], fields=["nope"])
    assert res.failed == 1 and "no field 'nope'" in res.warnings[0]
    assert not (tmp_path / "sensor_combined.csv").exists()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pad=st.lists(st.integers(0, 255), min_size=0, max_size=40), n=st.integers(0, 12))
def test_payload_records_rows(pad: list[int], n: int, corpora: Path) -> None:
    """One row per payload whatever their lengths: cut to the record, zero-filled if short."""
    with polybag.open(str(corpora / "ulog" / "sample_log_small.ulg")) as r:
        ch = next(c for c in r.summary.channels.values() if c.topic == "sensor_combined")
        assert ch.schema is not None
        utype = type_for_schema(ch.schema)
        real = [bytes(m.data) for _, m in zip(range(n), r.messages(topics=["sensor_combined"], order="file"))]
    size = utype.dtype.itemsize
    odd = [p + bytes(pad) for p in real] + [bytes(pad[: size - 1])]
    arr = payload_records(utype, odd)
    assert len(arr) == len(odd)
    if real:
        same = payload_records(utype, real)
        assert arr[: len(real)].tobytes() == same.tobytes()
    assert arr[-1:].tobytes() == bytes(pad[: size - 1]).ljust(size, b"\0")


def test_truncated_log_keeps_intact_rows(corpora: Path, tmp_path: Path) -> None:
    """A truncated ULog: instance tables hold every row before the damage (a prefix of the
    whole file's table); the damage is reported once (issue 27: the ULog is read recovering,
    every intact message exported)."""
    src = corpora / "ulog" / "sample_log_small.ulg"
    cut = tmp_path / "cut.ulg"
    cut.write_bytes(src.read_bytes()[:600_000])
    full = ops.export(src, tmp_path / "full", batch_messages=50)
    part = ops.export(cut, tmp_path / "part", batch_messages=50)
    # every table keeps its rows before the damage (log_message too); the damage is reported
    assert full.failed == 0 and full.damaged == 0 and part.failed == 0 and part.damaged >= 1
    damage = [w for w in part.warnings if "the input is damaged" in w]
    assert len(damage) == 1 and "offset" in damage[0] and "every intact message" in damage[0]
    assert 0 < part.messages < full.messages
    lines = (tmp_path / "part" / "sensor_combined.csv").read_text().splitlines()
    whole = (tmp_path / "full" / "sensor_combined.csv").read_text().splitlines()
    assert 1 < len(lines) < len(whole) and whole[: len(lines)] == lines
