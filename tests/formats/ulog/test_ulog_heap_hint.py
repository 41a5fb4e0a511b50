"""The heap hint of the ULog reader (``_hint_heap``): done once per process, only for
logs of at least ``_HEAP_HINT_MIN`` bytes, and the data read the same with or without it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import polybag
from polybag.formats.ulog import reader as ulog_reader
from ulog_helpers import synthetic_log


def _columns(path: Path) -> dict[tuple[str, str], dict[str, np.ndarray]]:
    with polybag.open(path) as r:
        return {
            (ch.topic, ch.metadata.get("multi_id", "0")): r.topic_columns(ch.topic, ch.metadata.get("multi_id", "0"))
            for ch in r.channels().values()
        }


def test_hint_once_for_large_logs_and_same_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    raw, _ = synthetic_log(400)
    path = tmp_path / "t.ulg"
    path.write_bytes(raw)
    monkeypatch.setattr(ulog_reader, "_heap_hinted", False)
    small = _columns(path)  # below the size: no hint
    assert not ulog_reader._heap_hinted
    monkeypatch.setattr(ulog_reader, "_HEAP_HINT_MIN", 1)
    hinted = _columns(path)
    assert ulog_reader._heap_hinted
    monkeypatch.setattr(ulog_reader, "_HEAP_HINT", -1)  # a second hint would raise
    again = _columns(path)  # once per process
    for got in (hinted, again):
        assert got.keys() == small.keys()
        for k, cols in small.items():
            assert got[k].keys() == cols.keys()
            for name, v in cols.items():
                assert np.array_equal(got[k][name], v, equal_nan=v.dtype.kind == "f"), (k, name)
