"""MCAP log times are u64: a time of 2**63 ns or more comes out as uint64, never wrapped to
a negative number and never an OverflowError (bulk path and per-message path)."""

from __future__ import annotations

import io

import numpy as np
import pytest

import polybag
from polybag.formats.mcap.writer import McapWriter

TIMES = [5, 2**63 - 1, 2**63, 2**64 - 1, 7]


def _mcap(encoding: str) -> bytes:
    out = io.BytesIO()
    with McapWriter(out) as w:
        if encoding == "ros1":
            ch = w.add_channel("/t", "ros1", w.add_schema("std_msgs/UInt8", "ros1msg", "uint8 data"))
            for i, t in enumerate(TIMES):
                w.write(ch, bytes([i]), t)
        else:
            ch = w.add_channel("/t", "json", w.add_schema("j", "jsonschema", "{}"))
            for i, t in enumerate(TIMES):
                w.write(ch, b'{"data": %d}' % i, t)
    return out.getvalue()


@pytest.mark.parametrize("encoding", ["ros1", "json"])  # bulk path / per-message path
def test_huge_times_are_kept(encoding: str) -> None:
    with polybag.open(_mcap(encoding)) as r:
        cols = r.topic_columns("/t")
        assert cols["log_time"].dtype == np.uint64
        assert cols["log_time"].tolist() == sorted(TIMES)
        assert cols["data"].tolist() == [0, 4, 1, 2, 3]
        assert [m.log_time for m in r.messages()] == sorted(TIMES)
        pd = pytest.importorskip("pandas")
        df = r.to_pandas("/t")
        assert isinstance(df, pd.DataFrame) and df.index.tolist() == sorted(TIMES)


def test_ordinary_times_stay_int64() -> None:
    out = io.BytesIO()
    with McapWriter(out) as w:
        ch = w.add_channel("/t", "ros1", w.add_schema("std_msgs/UInt8", "ros1msg", "uint8 data"))
        for i in range(5):
            w.write(ch, bytes([i]), 10**18 + i)
    with polybag.open(out.getvalue()) as r:
        assert r.topic_columns("/t")["log_time"].dtype == np.int64
