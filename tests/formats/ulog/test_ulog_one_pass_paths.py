"""The ULog reader's speed paths give what the general paths give, and what pyulog gives.

* One topic read right after open pulls that subscription's offsets out of the scan's chunks
  (a mask per chunk); a summary or a full read groups every subscription's offsets with one
  stable sort.  Both orders must give the same columns, counts and times.
* The summary, ``messages()`` and the time facts gather every subscription's timestamps in
  one ordered pass over the file (windows of ``GATHER_SPAN`` bytes); they must be the
  times read from the file one topic at a time.

(pyulog drops data messages that carry their trailing padding, which polybag reads as the
spec says: against pyulog, the rows it keeps are compared.)

The logs: multi-instance topics, a nested type, trailing padding left out of some data
messages, a format with ``_padding0`` twice, and the same logs cut inside a message.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import polybag
from polybag.codecs.ulog import BASE_TYPES
from polybag.formats.ulog import data as ulog_data
from ulog_helpers import (
    pyulog_columns,
    synthetic_log,
    trail_log,
    write,
)

pytest.importorskip("pyulog")


def _logs() -> dict[str, bytes]:
    synth, _ = synthetic_log(60, padded=True)
    trail = trail_log()
    odd = trail_log(odd=True)
    return {
        "synthetic": synth,
        "synthetic_cut": synth[: len(synth) - 9],  # ends inside a message
        "trail": trail,
        "trail_cut": trail[: len(trail) - 4],
        "odd": odd,  # (pyulog reads one row of each topic of this one)
        "odd_cut": odd[: len(odd) - 6],
    }


LOGS = _logs()


def _instances(path: str) -> list[tuple[str, int]]:
    with polybag.open(path, recover=True) as r:
        return sorted(
            {(ch.topic, int(ch.metadata["multi_id"])) for ch in r.summary.channels.values() if ch.topic != "log_message"}
        )


def _same_columns(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert list(a) == list(b)
    for k in a:
        assert a[k].dtype == b[k].dtype, k
        assert np.array_equal(a[k], b[k], equal_nan=a[k].dtype.kind == "f"), k


@pytest.mark.parametrize("name", sorted(LOGS))
def test_one_topic_first_reads_like_the_grouped_path_and_pyulog(tmp_path: Path, name: str) -> None:
    path = write(tmp_path, f"{name}.ulg", LOGS[name])
    theirs = pyulog_columns(path) if not name.startswith("odd") else {}
    instances = _instances(path)
    assert len(instances) >= 3
    for topic, mid in instances:
        with polybag.open(path, recover=True) as lazy:  # this topic's offsets only
            first = lazy.topic_columns(topic, mid, padding=True, log_time=True)
            assert lazy._data.grouping_pending  # the others are still in the scan's chunks
            lazy_summary = lazy.summary
            lazy_msgs = [(m.channel.id, m.log_time, m.sequence, bytes(m.data)) for m in lazy.messages()]
        with polybag.open(path, recover=True) as grouped:
            grouped_summary = grouped.summary  # every subscription grouped first
            assert not grouped._data.grouping_pending
            second = grouped.topic_columns(topic, mid, padding=True, log_time=True)
            grouped_msgs = [(m.channel.id, m.log_time, m.sequence, bytes(m.data)) for m in grouped.messages()]
        _same_columns(first, second)
        assert lazy_summary.message_counts == grouped_summary.message_counts
        assert (lazy_summary.start_time, lazy_summary.end_time) == (grouped_summary.start_time, grouped_summary.end_time)
        assert lazy_msgs == grouped_msgs
        if name.startswith("odd"):
            continue
        # pyulog drops the data messages that carry their trailing padding (polybag reads
        # them, as the spec says): the rows it keeps must be the same
        peer = theirs[(topic, mid)]
        kept = np.isin(first["timestamp"], peer["timestamp"])
        assert len(peer["timestamp"]) == int(kept.sum()) >= len(first["timestamp"]) // 2 > 0
        for k, v in peer.items():
            if "_padding" in k:
                continue
            assert np.array_equal(first[k][kept], v, equal_nan=v.dtype.kind == "f"), (topic, mid, k)


@pytest.mark.parametrize("span", [64, 1000, 16 << 20])
@pytest.mark.parametrize("name", sorted(LOGS))
def test_timestamps_in_one_pass_equal_one_topic_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, span: int
) -> None:
    monkeypatch.setattr(ulog_data, "GATHER_SPAN", span)  # several windows, or one
    path = write(tmp_path, f"{name}.ulg", LOGS[name])
    with polybag.open(path, recover=True) as each:
        each._data.group_all()
        alone = {}
        for s in each._subs:  # read from the file one topic at a time, not from the scan's words
            assert s.type is not None and s.positions is not None
            width = BASE_TYPES[s.type.timestamp_type][1]
            raw = each._data.gather_sparse(s.positions + 5 + s.type.timestamp_offset, np.dtype(f"<u{width}"))
            alone[s.index] = ulog_data.unwrap_timestamps(raw, width)
        each_facts = (each.ulog.last_timestamp, each.ulog.changed_params, each.ulog.dropouts, each.ulog.syncs)
    with polybag.open(path, recover=True) as one_pass:
        summary = one_pass.summary  # every topic's timestamps in one pass
        together = {s.index: s.ts_us for s in one_pass._subs}
        facts = (one_pass.ulog.last_timestamp, one_pass.ulog.changed_params, one_pass.ulog.dropouts, one_pass.ulog.syncs)
    assert alone.keys() == together.keys()
    for k, v in alone.items():
        w = together[k]
        assert w is not None and w.dtype == np.int64
        assert np.array_equal(v, w), k
    assert facts == each_facts
    lo = min(int(v.min()) for v in alone.values() if len(v))
    assert summary.start_time is not None and summary.start_time <= lo * 1000
