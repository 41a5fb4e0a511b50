"""Reading every topic of a ULog log the way a script does (``channels()``, then
``topic_columns`` of each) gives exactly what the grouped path and pyulog give.

The speed paths checked here (issue 13's all-topics row):

* ``channels()`` comes from the open, without the summary (no timestamp is read);
* the first topic asked for pulls its offsets out of the scan's chunks by a mask, the
  second groups every subscription's offsets with one stable sort, in whatever order the
  topics are asked for;
* the scan releases the mapped pages as it goes (unless topics are selected up front): the
  same values as when they stay mapped;
* the candidate scan runs in plain threads; an error in one of them is raised in the
  caller.

The logs: multi-instance topics, a nested type, trailing padding left out of some data
messages, a format with ``_padding0`` twice, a log cut inside a message, a damaged one, and
one with appended data.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polybag
from polybag.formats.ulog import reader as ulog_reader
from polybag.formats.ulog import scan as ulog_scan
from ulog_helpers import (
    POS_FMT,
    TRAIL_FMT,
    data,
    flags,
    fmt,
    header,
    log,
    pos_payload,
    pyulog_columns,
    sub,
    synthetic_log,
    trail_log,
    write,
)

pytest.importorskip("pyulog")


def _appended_log() -> bytes:
    base = header() + flags(incompat=1, offsets=(0,)) + fmt(POS_FMT) + sub(0, 0, "pos") + sub(1, 1, "pos")
    part1 = b"".join(data(i % 2, pos_payload(10 + i, i)) for i in range(9))
    partial = data(0, pos_payload(99, 99))[:9]  # cut off by the crash
    off = len(base) + len(part1) + len(partial)
    appended = b"".join(data(i % 2, pos_payload(30 + i, i)) for i in range(5)) + log(ord("6"), 40, "after")
    b = bytearray(base + part1 + partial + appended)
    b[16 + 3 + 16 : 16 + 3 + 24] = struct.pack("<Q", off)  # appended_offsets[0]
    return bytes(b)


def _damaged(raw: bytes, spans: list[tuple[int, int, int]]) -> bytes:
    """``raw`` with an impossible size in the header of a data message two thirds in."""
    b = bytearray(raw)
    q = next(start for start, _end, kind in spans if kind >= 0 and start > len(b) * 2 // 3)
    b[q : q + 2] = b"\xff\xff"
    return bytes(b)


def _logs() -> dict[str, bytes]:
    synth, spans = synthetic_log(60, padded=True)
    trail = trail_log(120)
    return {
        "synthetic": synth,
        "synthetic_cut": synth[: len(synth) - 9],
        "synthetic_damaged": _damaged(synth, spans),
        "trail": trail,
        "trail_cut": trail[: len(trail) - 4],
        "appended": _appended_log(),
    }


LOGS = _logs()


def _grouped(path: str) -> tuple[dict[tuple[str, int], dict[str, np.ndarray]], dict[int, object]]:
    """Every topic's columns after the summary grouped every subscription first."""
    with polybag.open(path, recover=True) as r:
        chans = r.summary.channels
        assert not r._data.grouping_pending
        cols = {
            (ch.topic, int(ch.metadata.get("multi_id", "0"))): r.topic_columns(
                ch.topic, ch.metadata.get("multi_id", "0"), padding=True, log_time=True
            )
            for ch in chans.values()
        }
        return cols, dict(chans)


def _same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert list(a) == list(b)
    for k in a:
        assert a[k].dtype == b[k].dtype, k
        assert np.array_equal(a[k], b[k], equal_nan=a[k].dtype.kind == "f"), k


def _read_in_order(path: str, order: list[int]) -> tuple[dict[tuple[str, int], dict[str, np.ndarray]], dict]:
    with polybag.open(path, recover=True) as r:
        chans = r.channels()
        assert r._summary is None  # listing the channels made no summary
        lst = list(chans.values())
        got = {}
        for i in order:
            ch = lst[i % len(lst)]
            got[(ch.topic, int(ch.metadata.get("multi_id", "0")))] = r.topic_columns(
                ch.topic, ch.metadata.get("multi_id", "0"), padding=True, log_time=True
            )
        return got, dict(chans)


@pytest.mark.parametrize("name", sorted(LOGS))
def test_channels_then_every_topic_equals_the_grouped_path_and_pyulog(tmp_path: Path, name: str) -> None:
    path = write(tmp_path, f"{name}.ulg", LOGS[name])
    want, want_chans = _grouped(path)
    with polybag.open(path, recover=True) as r:
        chans = r.channels()
        assert r._summary is None
        assert chans == want_chans
        got = {}
        for i, ch in enumerate(chans.values()):
            key = (ch.topic, int(ch.metadata.get("multi_id", "0")))
            got[key] = r.topic_columns(ch.topic, ch.metadata.get("multi_id", "0"), padding=True, log_time=True)
            if i == 0 and ch.topic != "log_message":
                assert r._data.grouping_pending  # the first topic: a mask, the others wait
        assert not r._data.grouping_pending or len(chans) < 3
        assert r.summary.channels == chans  # the summary made afterwards: the same channels
        assert bool(r.ulog.corruptions) == (name in ("synthetic_damaged", "synthetic_cut", "trail_cut"))
    assert got.keys() == want.keys()
    for k in want:
        _same(got[k], want[k])
    if name in ("synthetic_damaged", "appended"):
        return  # pyulog stops at the damage / forgets the appended part's subscriptions
    theirs = pyulog_columns(path)
    for key, peer in theirs.items():
        mine = got[key]
        kept = np.isin(mine["timestamp"], peer["timestamp"])  # pyulog drops padded messages
        assert int(kept.sum()) == len(peer["timestamp"]) > 0
        for k, v in peer.items():
            if "_padding" not in k:
                assert np.array_equal(mine[k][kept], v, equal_nan=v.dtype.kind == "f"), (key, k)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(sorted(LOGS)), order=st.lists(st.integers(0, 50), min_size=1, max_size=12))
def test_topics_in_any_order_equal_the_grouped_path(tmp_path: Path, name: str, order: list[int]) -> None:
    path = write(tmp_path, f"{name}.ulg", LOGS[name])
    want, _ = _grouped(path)
    got, _ = _read_in_order(path, order)
    for k, v in got.items():
        _same(v, want[k])


@pytest.mark.parametrize("name", sorted(LOGS))
def test_kept_or_released_pages_give_the_same_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    path = write(tmp_path, f"{name}.ulg", LOGS[name])
    monkeypatch.setattr(ulog_reader, "_SCAN_CHUNK", 1 << 9)  # many chunks: many releases
    released, _ = _read_in_order(path, list(range(50)))
    monkeypatch.setattr(ulog_scan.MappedLog, "release", lambda self, start, end: None)
    kept, _ = _read_in_order(path, list(range(50)))
    assert kept.keys() == released.keys()
    for k in kept:
        _same(kept[k], released[k])


def test_an_error_in_a_scanning_thread_is_raised_in_the_caller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synth, _ = synthetic_log(400)
    path = write(tmp_path, "t.ulg", synth)
    monkeypatch.setattr(ulog_reader, "_SCAN_CHUNK", 1 << 10)
    monkeypatch.setattr(ulog_reader, "_scan_workers", lambda n: 2)
    real = ulog_scan.MessageScanner.scan_part
    calls: list[int] = []

    def failing(self: ulog_scan.MessageScanner, a0: int, *args: object) -> object:
        calls.append(a0)
        if len(calls) > 1 or a0 > 1000:  # the second part (the thread's)
            raise MemoryError("scan part")
        return real(self, a0, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(ulog_scan.MessageScanner, "scan_part", failing)
    with pytest.raises(MemoryError, match="scan part"):
        polybag.open(path)
    assert len(calls) == 2


@pytest.mark.parametrize("nsubs", [3, 128, 129, 300])
def test_grouping_of_many_subscriptions_with_control_messages_between(tmp_path: Path, nsubs: int) -> None:
    """The grouping sorts one-byte keys up to 128 subscriptions and wider ones above; the
    control messages' offsets among the data (logged strings here) are never a topic's."""
    names = ["pos" if i < 200 else "qos" for i in range(nsubs)]  # (a multi_id is one byte)
    out = [header(), flags(), fmt(POS_FMT), fmt(POS_FMT.replace("pos:", "qos:"))]
    out += [sub(i % 200, i, names[i]) for i in range(nsubs)]
    want: dict[int, list[int]] = {i: [] for i in range(nsubs)}
    for k in range(nsubs * 4 + 7):
        i = (k * 7) % nsubs
        ts = 5_000 + k
        want[i].append(ts)
        out.append(data(i, pos_payload(ts, k)))
        if k % 5 == 0:
            out.append(log(ord("6"), ts, f"text {k}"))
    path = write(tmp_path, f"many{nsubs}.ulg", b"".join(out))
    with polybag.open(path) as r:
        chans = [ch for ch in r.channels().values() if ch.topic != "log_message"]
        assert len(chans) == nsubs
        got = {int(ch.metadata["msg_id"]): r.topic_columns(ch.topic, ch.metadata["multi_id"]) for ch in chans}
        assert not r._data.grouping_pending
    assert {i: c["timestamp"].tolist() for i, c in got.items()} == want
    theirs = pyulog_columns(path)
    for i, c in got.items():
        _same({k: v for k, v in c.items() if "_padding" not in k}, dict(theirs[(names[i], i % 200)]))


def _late_subs_log() -> bytes:
    """Subscriptions added among the data (each batch may bring new ones), one of them for a
    format that cannot be laid out, and a msg_id subscribed again."""
    out = [header(), flags(), fmt(POS_FMT), fmt(TRAIL_FMT), fmt("bad:nosuch x;")]
    out.append(sub(0, 0, "pos"))
    for k in range(400):
        if k == 50:
            out.append(sub(1, 1, "pos"))
        if k == 120:
            out.append(sub(0, 2, "trail"))
            out.append(sub(0, 3, "bad"))
        if k == 300:
            out.append(sub(2, 1, "pos"))  # msg_id 1 again
        out.append(data(0, pos_payload(1000 + k, k)))
        if k >= 50:
            out.append(data(1, pos_payload(5000 + k, k)))
        if k >= 120:
            out.append(data(2, struct.pack("<QB3sfH", 9000 + k, k % 256, b"\xaa" * 3, k * 0.5, k)))
            out.append(data(3, b"\x01" * 9))
    return b"".join(out)


@pytest.mark.parametrize("limit", [7, 64, 1 << 16])
@pytest.mark.parametrize("name", [*sorted(LOGS), "late_subs"])
def test_fast_batches_equal_the_general_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, limit: int
) -> None:
    """Batches checked by the msg_id tables (kept from the batch that brought the
    subscriptions) read exactly what the general path of every batch reads."""
    raw = _late_subs_log() if name == "late_subs" else LOGS[name]
    path = write(tmp_path, f"{name}.ulg", raw)
    monkeypatch.setattr(ulog_reader, "_WALK_LIMIT", limit)

    def read() -> tuple[object, ...]:
        with polybag.open(path, recover=True, warn=False) as r:
            cols = {
                (ch.topic, ch.metadata.get("multi_id")): r.topic_columns(ch.topic, ch.metadata.get("multi_id", "0"))
                for ch in r.channels().values()
            }
            return cols, r.summary.message_counts, r.ulog.corruptions, r.recovery_report["errors"]

    fast = read()
    from polybag.formats.ulog import batches

    monkeypatch.setattr(batches.BatchDecoder, "fast_batch", lambda self, p, words: False)
    general = read()
    assert fast[1:] == general[1:]
    assert fast[0].keys() == general[0].keys()  # type: ignore[attr-defined]
    for k in fast[0]:  # type: ignore[attr-defined]
        _same(fast[0][k], general[0][k])  # type: ignore[index]
    if name == "late_subs":
        assert fast[2]  # the topic without a usable format is reported


def test_one_pass_records_over_many_windows_equal_each_topic_gathered_alone(tmp_path: Path) -> None:
    """``all_records`` fills each topic's structured array through a plain bytes view, a
    4 MiB window of the file at a time: over a 10 MB log (three windows and more, a nested
    type, two instances) every record is byte for byte the one a topic's own
    gather finds, and the columns equal pyulog's."""
    content, _spans = synthetic_log(n=180_000)
    assert len(content) > 3 * (4 << 20)
    p = write(tmp_path, "big.ulg", content)
    with polybag.open(p) as r:
        every = r.all_records()
        cols = r.all_topic_columns(padding=True)
    with polybag.open(p) as r2:
        for key, arr in every.items():
            alone = r2.records(*key)
            assert arr.dtype == alone.dtype and len(arr) > 0
            assert arr.tobytes() == alone.tobytes(), key
    ref = pyulog_columns(p)
    assert set(cols) == set(ref)
    for key, d in ref.items():
        for k, v in d.items():
            assert np.array_equal(cols[key][k], v), (key, k)
