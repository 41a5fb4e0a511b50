"""ULog data-section scan: the multi-chunk candidate walk equals the one-by-one walk, and
selecting a topic up front gives exactly the full read's data (also with damage)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

import polybag
from polybag.cli import render
from polybag.formats.ulog import reader as ulog_reader
from polybag.formats.ulog.writer import UlogWriter

pyulog = pytest.importorskip("pyulog")

FORMATS = [
    # byte fields full of "D" (68) make many false candidates inside payloads
    "dense:uint64_t timestamp;uint8_t[40] b;uint8_t[3] _padding0;",
    "wide:uint64_t timestamp;float[20] f;uint16_t n;uint8_t[6] _padding0;",
    "small:uint64_t timestamp;uint8_t x;",
]


def _log(n: int, seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed)
    out = io.BytesIO()
    with UlogWriter(out, start_timestamp=1000) as w:
        for f in FORMATS:
            w.add_format(f)
        items = []
        for name, multi in (("dense", 0), ("wide", 0), ("wide", 1), ("small", 0)):
            ch = w.add_subscription(name, multi)
            ts = np.sort(rng.integers(2000, 10**9, n)).astype(np.uint64)
            cols: dict[str, np.ndarray] = {"timestamp": ts}
            if name == "dense":
                for i in range(40):
                    cols[f"b[{i}]"] = np.where(rng.random(n) < 0.3, 68, rng.integers(0, 256, n)).astype(
                        np.uint8
                    )
            elif name == "wide":
                for i in range(20):
                    cols[f"f[{i}]"] = rng.standard_normal(n).astype(np.float32)
                cols["n"] = np.full(n, 0x4444, np.uint16)
            else:
                cols["x"] = np.full(n, 68, np.uint8)
            items.append((ch, cols))
        w.write_columns_many(items)
        for i in range(50):  # other message types between data runs
            w.add_logged_string("INFO", f"line {i}", 2000 + i * 10**7)
    return out.getvalue()


def _reference_walk(b: bytes, pos: int, end: int) -> tuple[list[int], int]:
    out = []
    while pos + 3 <= end:
        nxt = pos + 3 + b[pos] + (b[pos + 1] << 8)
        if nxt > end:
            break
        out.append(pos)
        pos = nxt
    return out, pos


@pytest.fixture(scope="module")
def big() -> bytes:
    data = _log(16000)
    assert len(data) > 3 << 20  # several 1 MiB scan chunks
    return data


def test_walk_over_many_chunks_is_the_sequential_walk(big: bytes) -> None:
    r = polybag.open(big)
    ds = r._scanner.data_start
    for pos in (ds, ds + 1, ds + 777, (1 << 20) - 5, (1 << 20) + 3):
        got, stop = r._scanner.walk_fast(pos, len(big))
        want, wstop = _reference_walk(big, pos, len(big))
        assert got.tolist() == want
        assert stop == wstop
    # candidates are exactly the D messages the walk found plus payload bytes it skipped
    c, _nxt, _w, _ends = r._scanner.candidates()
    real = set(want) if (want := _reference_walk(big, ds, len(big))[0]) else set()
    d_msgs = {q for q in real if big[q + 2] == 0x44}
    assert len(d_msgs - set(c.tolist())) < len(d_msgs) // 4  # most data messages are in runs


@pytest.mark.parametrize("look", [1, 2, 6])
def test_lookahead_does_not_change_results(big: bytes, look: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ulog_reader, "_LINK_LOOKAHEAD", look)
    r = polybag.open(big)
    got, _ = r._scanner.walk_fast(r._scanner.data_start, len(big))
    want, _ = _reference_walk(big, r._scanner.data_start, len(big))
    assert got.tolist() == want


def test_selected_topic_equals_full_read_and_pyulog(big: bytes, tmp_path: Path) -> None:
    path = tmp_path / "big.ulg"
    path.write_bytes(big)
    u = pyulog.ULog(str(path), ["wide"])
    with polybag.open(path) as full, polybag.open(path, topics=["wide"]) as one:
        assert {c.topic for c in one.summary.channels.values()} == {"wide"}
        assert one.summary.message_counts == {
            k: v for k, v in full.summary.message_counts.items() if full.summary.channels[k].topic == "wide"
        }
        for d in u.data_list:
            a = one.topic_columns("wide", d.multi_id)
            b = full.topic_columns("wide", d.multi_id)
            for k, v in d.data.items():
                assert np.array_equal(a[k], v, equal_nan=True), k
                assert np.array_equal(b[k], v, equal_nan=True), k
        # counts of the topics not selected up front are made on first need, and equal
        subs = [(x["name"], x["multi_id"], x["count"]) for x in one.info_extras()["subscriptions"]]
        assert subs == [(x["name"], x["multi_id"], x["count"]) for x in full.info_extras()["subscriptions"]]
        assert {c for _, _, c in subs} != {0} and render.info_text(one) == render.info_text(full)
        # a topic not selected up front is still read on request, from the kept offsets
        assert np.array_equal(one.topic_columns("dense")["b[3]"], full.topic_columns("dense")["b[3]"])


def test_data_with_and_without_trailing_padding(tmp_path: Path) -> None:
    """Headers without trailing padding are checked as one value; with it, by range."""
    out = io.BytesIO()
    with UlogWriter(out, start_timestamp=1) as w:
        w.add_format("p:uint64_t timestamp;uint16_t v;uint8_t[6] _padding0;")
        ch = w.add_subscription("p")
        for i in range(300):
            body = (1000 + i).to_bytes(8, "little") + (i * 7).to_bytes(2, "little")
            if i % 3 == 0:
                body += b"\0" * 6  # this one carries its padding
            w.write(ch, body, (1000 + i) * 1000)
    data = out.getvalue()
    for topics in (None, ["p"]):
        r = polybag.open(data, topics=topics)
        cols = r.topic_columns("p")
        assert cols["v"].tolist() == [i * 7 for i in range(300)]
        assert not r.ulog.corruptions


def test_damage_in_a_later_chunk_selected_or_not(big: bytes) -> None:
    raw = bytearray(big)
    at = (2 << 20) + 12345
    raw[at : at + 4] = b"\xff\xff\x44\x00"
    damaged = bytes(raw)
    a = polybag.open(damaged, recover=True)
    b = polybag.open(damaged, recover=True, topics=["wide"])
    assert a.ulog.corruptions and b.ulog.corruptions
    assert [c["offset"] for c in a.ulog.corruptions] == [c["offset"] for c in b.ulog.corruptions]
    for mid in (0, 1):
        x = a.topic_columns("wide", mid)
        y = b.topic_columns("wide", mid)
        assert x.keys() == y.keys()
        for k in x:
            assert np.array_equal(x[k], y[k], equal_nan=True)


@pytest.mark.parametrize("workers", [1, 2, 3, 4])
@pytest.mark.parametrize("chunk", [1 << 14, 1 << 20])
def test_threaded_scan_equals_one_thread(
    big: bytes, workers: int, chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The candidate scan split over threads (parts of whole chunks) finds exactly the
    candidates one thread does, and the walk stays the sequential one."""
    monkeypatch.setattr(ulog_reader, "_SCAN_CHUNK", chunk)
    monkeypatch.setattr(ulog_reader, "_scan_workers", lambda n: 1)
    one = polybag.open(big)._scanner.candidates()
    if chunk < (1 << 20):  # output buffers far too small: they grow as the scan goes
        monkeypatch.setattr(ulog_reader, "_part_capacity", lambda n: 7)
    monkeypatch.setattr(ulog_reader, "_scan_workers", lambda n: max(1, min(workers, n)))
    r = polybag.open(big)
    many = r._scanner.candidates()
    for x, y in zip(one, many, strict=True):
        assert np.array_equal(x, y)
    got, stop = r._scanner.walk_fast(r._scanner.data_start, len(big))
    want, wstop = _reference_walk(big, r._scanner.data_start, len(big))
    assert got.tolist() == want and stop == wstop
    # with a damaged message header in the middle of a part: the same report and data
    raw = bytearray(big)
    q = next(x for x in want if x > (3 << 20) + 999)
    raw[q : q + 2] = b"\xff\xff"
    a = polybag.open(bytes(raw), recover=True)
    monkeypatch.setattr(ulog_reader, "_scan_workers", lambda n: 1)
    b = polybag.open(bytes(raw), recover=True)
    assert a.ulog.corruptions == b.ulog.corruptions and a.ulog.corruptions
    assert np.array_equal(a.topic_columns("wide", 1)["f[3]"], b.topic_columns("wide", 1)["f[3]"])


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs fork")
def test_threaded_scan_in_a_forked_child(big: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    """A child forked after the parent used the scanning threads makes its own (the
    parent's do not exist in the child: waiting on them would hang; the scan starts plain
    threads per open, joined before it returns)."""
    import multiprocessing as mp

    monkeypatch.setattr(ulog_reader, "_SCAN_CHUNK", 1 << 14)
    monkeypatch.setattr(ulog_reader, "_scan_workers", lambda n: 2)
    want = polybag.open(big).topic_columns("wide", 1)["f[2]"]  # the parent's threads ran
    ctx = mp.get_context("fork")
    q = ctx.Queue()

    def child() -> None:
        q.put(polybag.open(big).topic_columns("wide", 1)["f[2]"].tolist())

    proc = ctx.Process(target=child)
    proc.start()
    try:
        got = q.get(timeout=60)
        proc.join(timeout=60)
    finally:
        if proc.is_alive():
            proc.kill()
    assert proc.exitcode == 0
    assert got == want.tolist()


@pytest.mark.parametrize("chunk", [1 << 9, 1 << 12, 1 << 20])
@pytest.mark.parametrize("workers", [1, 3])
def test_each_part_has_its_run_ends_and_header_words(
    big: bytes, chunk: int, workers: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each part's run ends, found chunk by chunk (links inside a chunk and from one chunk
    to the next), are those of its candidates taken as a whole; its header words are the
    file's bytes; and a walk that stops inside a run (a segment end) is the sequential
    walk."""
    from polybag.formats.ulog.scan import run_ends

    monkeypatch.setattr(ulog_reader, "_SCAN_CHUNK", chunk)
    monkeypatch.setattr(ulog_reader, "_scan_workers", lambda n: max(1, min(workers, n)))
    r = polybag.open(big)
    _lo, parts = r._scanner.cand_parts()
    for c, w, ends in parts:
        nxt = c + 3 + (w & np.uint64(0xFFFF)).astype(np.int64)
        assert np.array_equal(ends, run_ends(c, nxt))
        assert [int.from_bytes(big[q : q + 8], "little") for q in c[:: max(1, len(c) // 500)].tolist()] == w[
            :: max(1, len(c) // 500)
        ].tolist()
    want, _ = _reference_walk(big, r._scanner.data_start, len(big))
    for end in (want[len(want) // 3] + 1, want[len(want) // 2] + 7, len(big) - 1):
        got, stop = r._scanner.walk_fast(r._scanner.data_start, end)
        ref, rstop = _reference_walk(big, r._scanner.data_start, end)
        assert got.tolist() == ref and stop == rstop
