"""MCAP files whose chunk times or Message Indexes lie about the messages in the chunks.

Files are written by our writer (CRCs off, so patched bytes stay valid), then the Chunk
Index times, the Chunk record header times or the Message Index entries are patched.  The
reference is a linear streamed read in file order (which trusts none of them), sorted and
filtered by brute force.
"""

from __future__ import annotations

import struct
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polybag
from mcap_helpers import TOPICS, Pipe, Row, key, to_bytes
from polybag.errors import FormatError
from polybag.formats.mcap.reader import McapIndexWarning, McapReader
from polybag.io.source import MappedSource

U64 = struct.Struct("<Q")
U32 = struct.Struct("<I")
U16 = struct.Struct("<H")


# --- layout of a written file ------------------------------------------------------------------
@dataclass
class ChunkAt:
    index_pos: int  # the Chunk Index record in the summary
    offset: int  # the Chunk record
    start: int
    end: int
    mi: dict[int, int]  # channel id -> Message Index record offset


def layout(data: bytes) -> list[ChunkAt]:
    """Every chunk with the position of its Chunk Index record (parsed from the raw bytes)."""
    foot = len(data) - 8 - 29
    assert data[foot] == 0x02
    ss, sos = U64.unpack_from(data, foot + 9)[0], U64.unpack_from(data, foot + 17)[0]
    end = sos or foot
    r = McapReader(MappedSource(None, data))
    by_off = {ci.chunk_start_offset: ci for ci in r.chunk_indexes}
    out = []
    pos = ss
    while pos < end:
        op, ln = data[pos], U64.unpack_from(data, pos + 1)[0]
        if op == 0x08:
            s, e, off = struct.unpack_from("<QQQ", data, pos + 9)
            out.append(ChunkAt(pos, off, s, e, dict(by_off[off].message_index_offsets)))
        pos += 9 + ln
    assert len(out) == len(r.chunk_indexes)
    return out


def set_index_times(buf: bytearray, c: ChunkAt, s: int, e: int) -> None:
    struct.pack_into("<QQ", buf, c.index_pos + 9, s, e)


def set_header_times(buf: bytearray, c: ChunkAt, s: int, e: int) -> None:
    struct.pack_into("<QQ", buf, c.offset + 9, s, e)


def mi_entries(buf: bytes | bytearray, off: int) -> list[int]:
    """Positions (in ``buf``) of the (log_time, offset) entries of the Message Index at ``off``."""
    n = U32.unpack_from(buf, off + 11)[0] // 16
    return [off + 15 + 16 * k for k in range(n)]


# --- the reference -------------------------------------------------------------------------------
def reference(data: bytes) -> list[Row]:
    """Every message in file order, from a streamed read (no index is used)."""
    with polybag.open(Pipe(data)) as r:
        return [key(m) for m in r.messages(order="file")]


def brute(rows: list[Row], topics: list[str] | None, start: int | None, end: int | None, order: str, reverse: bool) -> list[Row]:
    out = [
        r
        for r in rows
        if (topics is None or r[0] in topics) and (start is None or r[1] >= start) and (end is None or r[1] < end)
    ]
    if order == "log_time":
        out.sort(key=lambda r: r[1])  # stable: ties in file order
    if reverse:
        out.reverse()
    return out


Query = tuple[list[str] | None, int | None, int | None, str, bool]


def queries(lo: int, hi: int) -> list[Query]:
    mid = (lo + hi) // 2
    return [
        (None, None, None, "log_time", False),
        (None, None, None, "log_time", True),
        ([TOPICS[1]], None, None, "log_time", False),
        ([TOPICS[0], TOPICS[2]], None, None, "log_time", True),
        (None, mid - (hi - lo) // 5, mid + (hi - lo) // 5, "log_time", False),
        (None, mid, None, "log_time", True),
        ([TOPICS[2]], lo + 1, mid, "log_time", False),
        (None, None, mid, "file", False),
        (None, mid - (hi - lo) // 4, mid + 3, "file", True),
        (None, None, None, "file", False),
    ]


def read(data: bytes, q: Query, **options: Any) -> list[Row]:
    topics, start, end, order, reverse = q
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", McapIndexWarning)
        with polybag.open(data, **options) as r:
            return [key(m) for m in r.messages(topics=topics, start=start, end=end, order=order, reverse=reverse)]


def check_all(data: bytes, ref: list[Row], **options: Any) -> None:
    lts = [r[1] for r in ref]
    for q in queries(min(lts), max(lts) + 1):
        want = brute(ref, *q)
        got = read(data, q, **options)
        assert len(got) == len(want), q
        assert got == want, q


# --- files ---------------------------------------------------------------------------------------
def rows_from(times: list[int]) -> list[Row]:
    return [(TOPICS[i % 3], t, t + 1, i, bytes([i % 251]) * (1 + i % 7)) for i, t in enumerate(times)]


def make(times: list[int], chunk_size: int = 300, compression: str | None = "zstd") -> bytes:
    return to_bytes(rows_from(times), compression=compression, chunk_size=chunk_size, use_crcs=False)


def shuffled_times(n: int, seed: int) -> list[int]:
    """Log times mostly rising with jitter (chunks overlap), some ties."""
    import random

    rnd = random.Random(seed)
    return [max(0, 10 * i + rnd.randint(-60, 60)) // 3 * 3 for i in range(n)]


@pytest.fixture
def honest() -> bytes:
    return make(shuffled_times(300, 1))


# --- chunk index lies (the Chunk record keeps the truth) ------------------------------------------
Lie = Callable[[bytearray, list[ChunkAt]], None]


def _shift(d: int) -> Lie:
    def lie(buf: bytearray, cs: list[ChunkAt]) -> None:
        for c in cs[::2]:
            set_index_times(buf, c, max(0, c.start + d), max(0, c.end + d))

    return lie


def _swap(buf: bytearray, cs: list[ChunkAt]) -> None:
    a, b = cs[0], cs[-1]
    set_index_times(buf, a, b.start, b.end)
    set_index_times(buf, b, a.start, a.end)


def _narrow(buf: bytearray, cs: list[ChunkAt]) -> None:
    for c in cs:
        mid = (c.start + c.end) // 2
        set_index_times(buf, c, mid, mid)


def _inverted(buf: bytearray, cs: list[ChunkAt]) -> None:
    c = cs[len(cs) // 2]
    set_index_times(buf, c, c.end + 5, c.start)


LIES: dict[str, Lie] = {
    "shift_up": _shift(400),
    "shift_down": _shift(-400),
    "swap": _swap,
    "narrow": _narrow,
    "inverted": _inverted,
}


@pytest.mark.parametrize("name", sorted(LIES))
def test_chunk_index_lies(honest: bytes, name: str) -> None:
    ref = reference(honest)
    cs = layout(honest)
    assert len(cs) > 5
    buf = bytearray(honest)
    LIES[name](buf, cs)
    data = bytes(buf)
    assert data != honest
    check_all(data, ref)
    check_all(data, ref, recover=True)
    with polybag.open(data) as r, pytest.warns(McapIndexWarning, match="not trusted"):
        assert len(list(r.messages())) == len(ref)


def test_honest_file_reads_without_warning(honest: bytes) -> None:
    ref = reference(honest)
    with warnings.catch_warnings():
        warnings.simplefilter("error", McapIndexWarning)
        check_all(honest, ref)
        with polybag.open(honest) as r:
            assert not r.planner.verify  # the fast path: chunk times trusted
            assert r.planner.true_ranges == {}


def test_honest_mcap_library_file_without_warning() -> None:
    import io

    from mcap.writer import Writer as LibWriter

    f = io.BytesIO()
    w = LibWriter(f, chunk_size=200)
    w.start()
    sid = w.register_schema("s", "jsonschema", b"{}")
    cids = [w.register_channel(t, "json", sid) for t in TOPICS]
    times = shuffled_times(200, 7)
    for i, t in enumerate(times):
        w.add_message(cids[i % 3], log_time=t, publish_time=t, data=b"x" * (i % 5), sequence=i)
    w.finish()
    data = f.getvalue()
    ref = reference(data)
    with warnings.catch_warnings():
        warnings.simplefilter("error", McapIndexWarning)
        check_all(data, ref)


# --- consistent lies: the Chunk Index and the Chunk header agree, the messages do not ----------------
def outcome(data: bytes, q: Query, **options: Any) -> tuple[list[Row], FormatError | None]:
    topics, start, end, order, reverse = q
    got: list[Row] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", McapIndexWarning)
        with polybag.open(data, **options) as r:
            try:
                for m in r.messages(topics=topics, start=start, end=end, order=order, reverse=reverse):
                    got.append(key(m))
            except FormatError as e:
                # caught too late to put right: the same reader now reads correctly
                again = [key(m) for m in r.messages(topics=topics, start=start, end=end, order=order, reverse=reverse)]
                return again, e
    return got, None


def check_consistent_lie(data: bytes, ref: list[Row]) -> None:
    lts = [r[1] for r in ref]
    for q in queries(min(lts), max(lts) + 1):
        want = brute(ref, *q)
        got, _err = outcome(data, q)
        topics, start, end, order, _rev = q
        if start is None and end is None:
            # every chunk is read: a lie is always found, at worst after returning some messages
            assert got == want, q
        else:
            # chunks outside the window are skipped on their (agreeing) claims: what is
            # returned is still in order, with no message twice and none made up
            it = iter(want)
            assert all(any(g == w for w in it) for g in got), q
        assert read(data, q, recover=True) == want, q  # recovering trusts no chunk time


@pytest.mark.parametrize("name", sorted(LIES))
def test_chunk_index_and_header_lie_together(honest: bytes, name: str) -> None:
    ref = reference(honest)
    cs = layout(honest)
    buf = bytearray(honest)
    LIES[name](buf, cs)
    for c in cs:  # the Chunk records repeat the lies
        set_header_times(buf, c, *struct.unpack_from("<QQ", buf, c.index_pos + 9))
    check_consistent_lie(bytes(buf), ref)


def test_lie_found_late_raises_then_reads_right() -> None:
    # chunk 0 holds times 1000.., chunk 1 holds 0..: both claim the other's range
    times = [1000 + i for i in range(30)] + list(range(30))
    data = make(times, chunk_size=200)
    ref = reference(data)
    cs = layout(data)
    buf = bytearray(data)
    first = [c for c in cs if c.start >= 1000]
    later = [c for c in cs if c.start < 1000]
    assert first and later
    for c in later:  # the early chunks claim to come after every late one
        set_index_times(buf, c, 5000, 6000)
        set_header_times(buf, c, 5000, 6000)
    honest_mi = bytes(buf)
    for c in later:  # ... and so do their Message Indexes: nothing tells before reading
        for off in c.mi.values():
            for p in mi_entries(buf, off):
                U64.pack_into(buf, p, 5500)
    bad = bytes(buf)
    with polybag.open(honest_mi) as r, pytest.warns(McapIndexWarning, match="Message Index lists"):
        # the Message Indexes disagree with the chunk times: found before anything is returned
        assert [key(m) for m in r.messages()] == brute(ref, None, None, None, "log_time", False)
    with polybag.open(bad) as r:
        got: list[Row] = []
        with pytest.raises(FormatError, match="read again"):
            for m in r.messages():
                got.append(key(m))
        assert got and got == sorted(got, key=lambda x: x[1])
        assert [key(m) for m in r.messages()] == brute(ref, None, None, None, "log_time", False)
        assert [key(m) for m in r.messages(reverse=True)] == brute(ref, None, None, None, "log_time", True)


def test_lie_found_in_time_switches_without_error() -> None:
    # a chunk claims a later start than it holds, but its first message is still not
    # earlier than what was returned: the merge goes on with checked ranges
    times = list(range(0, 300, 3))
    data = make(times, chunk_size=200)
    ref = reference(data)
    cs = layout(data)
    buf = bytearray(data)
    c = cs[2]
    set_index_times(buf, c, c.start, c.end - 2)  # its last message lies beyond the claim
    set_header_times(buf, c, c.start, c.end - 2)
    bad = bytes(buf)
    with polybag.open(bad) as r, pytest.warns(McapIndexWarning):
        assert [key(m) for m in r.messages()] == brute(ref, None, None, None, "log_time", False)
        assert r.planner.verify


# --- Message Index lies --------------------------------------------------------------------------
def _mi_times(buf: bytearray, cs: list[ChunkAt], seed: int) -> None:
    import random

    rnd = random.Random(seed)
    for c in cs:
        for off in c.mi.values():
            for p in mi_entries(buf, off):
                U64.pack_into(buf, p, rnd.randint(0, 4000))


def _mi_offsets_between_channels(buf: bytearray, cs: list[ChunkAt], seed: int) -> None:
    # entries of one chunk trade offsets across channels: every record still listed once
    import random

    rnd = random.Random(seed)
    for c in cs:
        ps = [p for off in c.mi.values() for p in mi_entries(buf, off)]
        offs = [U64.unpack_from(buf, p + 8)[0] for p in ps]
        rnd.shuffle(offs)
        for p, o in zip(ps, offs):
            U64.pack_into(buf, p + 8, o)


def _mi_offsets_inside_records(buf: bytearray, cs: list[ChunkAt], seed: int) -> None:
    import random

    rnd = random.Random(seed)
    for c in cs:
        for off in c.mi.values():
            for p in mi_entries(buf, off):
                if rnd.random() < 0.3:
                    U64.pack_into(buf, p + 8, U64.unpack_from(buf, p + 8)[0] + rnd.randint(1, 20))


MI_LIES = {
    "times": _mi_times,
    "offsets_between_channels": _mi_offsets_between_channels,
    "offsets_inside_records": _mi_offsets_inside_records,
}


@pytest.mark.parametrize("name", sorted(MI_LIES))
def test_message_index_lies(honest: bytes, name: str) -> None:
    ref = reference(honest)
    cs = layout(honest)
    buf = bytearray(honest)
    MI_LIES[name](buf, cs, 3)
    check_all(bytes(buf), ref)


# --- random lies ---------------------------------------------------------------------------------
@st.composite
def lying_files(draw: st.DrawFn) -> tuple[bytes, list[Row], bool]:
    n = draw(st.integers(20, 120))
    times = draw(st.lists(st.integers(0, 2000), min_size=n, max_size=n))
    data = make(times, chunk_size=draw(st.sampled_from([150, 300, 700])), compression=draw(st.sampled_from(["zstd", None])))
    ref = reference(data)
    cs = layout(data)
    buf = bytearray(data)
    both = draw(st.booleans())
    for c in cs:
        if draw(st.booleans()):
            s = draw(st.integers(0, 2200))
            e = draw(st.one_of(st.just(s), st.integers(0, 2200)))
            set_index_times(buf, c, s, e)
            if both:
                set_header_times(buf, c, s, e)
    if draw(st.booleans()):
        MI_LIES[draw(st.sampled_from(sorted(MI_LIES)))](buf, cs, draw(st.integers(0, 99)))
    return bytes(buf), ref, both


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(lying_files())
def test_random_lies(case: tuple[bytes, list[Row], bool]) -> None:
    data, ref, both = case
    if both:
        check_consistent_lie(data, ref)
    else:
        check_all(data, ref)
    check_all(data, ref, recover=True)


def test_topic_payloads_with_lying_index(honest: bytes) -> None:
    ref = reference(honest)
    cs = layout(honest)
    buf = bytearray(honest)
    _swap(buf, cs)
    _mi_offsets_between_channels(buf, cs, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", McapIndexWarning)
        with polybag.open(bytes(buf)) as r:
            lt, blob, starts, sizes = r.topic_payloads(TOPICS[1])
    want = brute(ref, [TOPICS[1]], None, None, "log_time", False)
    assert [int(t) for t in lt] == [w[1] for w in want]
    assert [bytes(blob[s : s + z]) for s, z in zip(starts, sizes)] == [w[4] for w in want]


def test_file_order_window_switches_when_a_read_chunk_lies() -> None:
    times = list(range(300))
    data = make(times, chunk_size=200)
    ref = reference(data)
    cs = layout(data)
    assert len(cs) > 4
    buf = bytearray(data)
    c = cs[1]
    set_index_times(buf, c, c.start, c.start)  # too narrow, in both places
    set_header_times(buf, c, c.start, c.start)
    q: Query = (None, c.start, cs[3].end + 1, "file", False)
    with polybag.open(bytes(buf)) as r, pytest.warns(McapIndexWarning, match="outside"):
        assert [key(m) for m in r.messages(topics=q[0], start=q[1], end=q[2], order="file")] == brute(ref, *q)
        assert r.planner.verify


def test_file_order_window_raises_for_a_chunk_skipped_by_lies() -> None:
    times = [100 + i for i in range(20)] + list(range(40))
    data = make(times, chunk_size=200)
    ref = reference(data)
    cs = layout(data)
    buf = bytearray(data)
    for c in cs:
        if c.start >= 100:  # the first chunks claim to lie far outside the window
            set_index_times(buf, c, 5000, 5000)
            set_header_times(buf, c, 5000, 5000)
        else:  # the later ones claim less than they hold
            set_index_times(buf, c, c.start, c.start)
            set_header_times(buf, c, c.start, c.start)
    with polybag.open(bytes(buf)) as r:
        with pytest.warns(McapIndexWarning), pytest.raises(FormatError, match="skipped it"):
            list(r.messages(start=0, end=200, order="file"))
        got = [key(m) for m in r.messages(start=0, end=200, order="file")]
    assert got == brute(ref, None, 0, 200, "file", False)


def with_summary_crc(buf: bytearray) -> bytes:
    """The summary CRC recomputed, as a writer that wrote the lies itself would."""
    import zlib

    foot = len(buf) - 8 - 29
    ss = U64.unpack_from(buf, foot + 9)[0]
    U32.pack_into(buf, foot + 25, zlib.crc32(bytes(buf[ss : foot + 25])))
    return bytes(buf)


@pytest.mark.parametrize("name", sorted(LIES))
def test_chunk_index_lies_under_a_valid_summary_crc(honest: bytes, name: str) -> None:
    # a writer that got its chunk index wrong: the summary CRC holds, the Chunk records
    # keep the truth and so do the Message Indexes
    ref = reference(honest)
    buf = bytearray(honest)
    LIES[name](buf, layout(honest))
    data = with_summary_crc(buf)
    with polybag.open(data) as r:
        assert r.has_summary and r.footer is not None and r.footer.summary_crc
    check_consistent_lie(data, ref)
    # log-time merges compare the Message Index times with the claims before reading
    with polybag.open(data) as r, pytest.warns(McapIndexWarning, match="Message Index lists"):
        assert [key(m) for m in r.messages()] == brute(ref, None, None, None, "log_time", False)


def test_recover_reports_a_broken_chunk_found_while_finding_ranges(honest: bytes) -> None:
    # recovering reads every chunk once to find its real range: damage seen there is
    # still reported by the real read
    cs = layout(honest)
    c = cs[2]
    buf = bytearray(honest)
    for p in range(c.offset + 60, c.offset + 90):
        buf[p] ^= 0x5A
    data = bytes(buf)
    ref = reference(honest)
    with polybag.open(data, recover=True) as r:
        got = [key(m) for m in r.messages()]
        report = r.recovery_report
    assert report is not None and report["messages"] == len(got)
    assert any(str(c.offset) in e for e in report["errors"]), report
    assert len(got) < len(ref) and got == sorted(got, key=lambda x: x[1])
    assert set(got) <= set(ref)
