"""The bag writer's per-message fast path: the time range is checked by the header's
``struct.pack`` (seconds must fit a u32), not before it.  A refused message is a
:class:`WriteError` with the same message as before, leaves nothing in the chunk, and the
messages around it are written (read back by rosbags, the peer)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rosbags.rosbag1 import Reader as PeerReader

import polybag
from polybag.errors import WriteError

MAX_NS = 0xFFFFFFFF * 1_000_000_000 + 999_999_999


def _writer(path: Path) -> tuple[polybag.Writer, polybag.Channel]:
    w = polybag.Writer(str(path), format="bag", compression="lz4", overwrite=True)
    ch = w.add_channel("/x", "ros1", w.add_schema("std_msgs/UInt8", "ros1msg", "uint8 data\n"))
    return w, ch


def _peer_read(path: Path) -> list[tuple[int, bytes]]:
    with PeerReader(path) as r:
        return [(t, bytes(raw)) for _c, t, raw in r.messages()]


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        (-1, "cannot be negative"),
        (MAX_NS + 1, "32-bit seconds"),
        (1 << 70, "32-bit seconds"),
        (1.5e9, "cannot write a message"),
    ],
)
def test_refused_time_leaves_nothing(tmp_path: Path, bad: object, words: str) -> None:
    p = tmp_path / "a.bag"
    w, ch = _writer(p)
    w.write(ch, b"\x01", 10)  # the connection is hot: the next write takes the fast path
    with pytest.raises(WriteError, match=words):
        w.write(ch, b"\x02", bad)  # type: ignore[arg-type]
    w.write(ch, b"\x03", MAX_NS)  # the last time a bag can hold
    w.close()
    assert _peer_read(p) == [(10, b"\x01"), (MAX_NS, b"\x03")]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(-(10**12), MAX_NS + 10**12), min_size=1, max_size=60))
def test_any_times_written_or_refused(tmp_path_factory: pytest.TempPathFactory, times: list[int]) -> None:
    p = tmp_path_factory.mktemp("b") / "h.bag"
    w, ch = _writer(p)
    kept = []
    for i, t in enumerate(times):
        data = bytes([i % 256])
        if 0 <= t <= MAX_NS:
            w.write(ch, data, t)
            kept.append((t, data))
        else:
            with pytest.raises(WriteError):
                w.write(ch, data, t)
    w.close()
    assert _peer_read(p) == sorted(kept, key=lambda e: e[0])
    with polybag.open(str(p)) as r:
        assert sorted((m.log_time, bytes(m.data)) for m in r.messages()) == sorted(kept)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 0xFFFFFFFF), st.integers(0, 999_999_999)), min_size=32, max_size=300))
def test_index_entries_from_records_equal_the_simple_path(times: list[tuple[int, int]]) -> None:
    """The numpy path of the index entries (times gathered from the records, offsets in an
    ``array``) gives the bytes of the one-entry-at-a-time path, out-of-order and equal
    times included."""
    import struct
    from array import array

    from polybag.formats.bag.writer import _ENTRY, _TIME_AT, _entries

    buf = bytearray(len(times) * 60 + 64)
    offs = [i * 60 for i in range(len(times))]
    for o, (s, ns) in zip(offs, times):
        struct.pack_into("<II", buf, o + _TIME_AT, s, ns)
    ents = sorted(zip([s * 1_000_000_000 + ns for s, ns in times], offs), key=lambda e: e[0])
    want = b"".join(_ENTRY.pack(t // 1_000_000_000, t % 1_000_000_000, o) for t, o in ents)
    assert _entries(None, array("q", offs), buf) == (want, ents[0][0], ents[-1][0])
    assert _entries(None, offs, buf) == (want, ents[0][0], ents[-1][0])
