"""ULog tables: to_pandas/to_arrow indexed by log time like other formats; multi_id as int or str."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import polybag
from paths import CORPORA
from polybag.formats.ulog.reader import TopicNotFoundError

pyulog = pytest.importorskip("pyulog")
FILES = sorted((CORPORA / "ulog").glob("*.ulg"))


@pytest.mark.parametrize("path", FILES[:3], ids=lambda p: p.name)
def test_to_pandas_indexed_by_log_time(path: Path) -> None:
    u = pyulog.ULog(str(path))
    with polybag.open(path) as r:
        for d in u.data_list[:5]:
            df = r.to_pandas(d.name, d.multi_id)
            assert df.index.name == "log_time"
            assert "log_time" not in df.columns
            ts = d.data["timestamp"].astype(np.int64)
            assert np.array_equal(df.index.to_numpy(), ts * 1000)
            assert np.array_equal(df["timestamp"].to_numpy(), d.data["timestamp"])
            t = r.to_arrow(d.name, d.multi_id)
            assert t.column_names[0] == "log_time"
            assert np.array_equal(t.column("log_time").to_numpy(), ts * 1000)
            # with a field selection the index is still the log time
            sel = r.to_pandas(d.name, d.multi_id, fields=["timestamp"])
            assert list(sel.columns) == ["timestamp"] and sel.index.name == "log_time"
        # the plain columns stay keyed exactly like pyulog's
        d = u.data_list[0]
        assert list(r.topic_columns(d.name, d.multi_id)) == list(d.data)


def test_log_messages_table_has_log_time() -> None:
    path = next(p for p in FILES if pyulog.ULog(str(p)).logged_messages)
    with polybag.open(path) as r:
        df = r.to_pandas("log_message")
        assert df.index.name == "log_time"
        assert np.array_equal(df.index.to_numpy(), df["timestamp"].to_numpy().astype(np.int64) * 1000)


def test_multi_id_int_or_str() -> None:
    path = next(p for p in FILES if any(d.multi_id > 0 for d in pyulog.ULog(str(p)).data_list))
    u = pyulog.ULog(str(path))
    d = next(d for d in u.data_list if d.multi_id > 0)
    with polybag.open(path) as r:
        ch = next(
            c
            for c in r.summary.channels.values()
            if c.topic == d.name and c.metadata["multi_id"] == str(d.multi_id)
        )
        assert isinstance(ch.metadata["multi_id"], str)
        by_int = r.topic_columns(d.name, d.multi_id)
        by_str = r.topic_columns(ch.topic, ch.metadata["multi_id"])
        by_kw = r.topic_columns(d.name, multi_id=str(d.multi_id))
        for k, v in d.data.items():
            assert np.array_equal(by_int[k], v, equal_nan=True)
            assert np.array_equal(by_str[k], v, equal_nan=True)
            assert np.array_equal(by_kw[k], v, equal_nan=True)
        assert np.array_equal(r.records(d.name, str(d.multi_id)), r.records(d.name, d.multi_id))
        assert len(r.to_pandas(d.name, str(d.multi_id))) == len(d.data["timestamp"])
        with pytest.raises(TopicNotFoundError):
            r.topic_columns(d.name, "x1")
        with pytest.raises(TopicNotFoundError):
            r.topic_columns(d.name, "999")
