"""Damaged MCAP input: truncation, bit flips, lying lengths.

Whatever the damage, only polybag errors escape, nothing hangs, and every message whose
record (a chunk or a loose message) lies wholly before the damage is yielded.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polybag
from mcap_helpers import TOPICS, Pipe, Row, key, to_bytes
from polybag.errors import PolybagError
from polybag.formats.mcap import records as R
from polybag.formats.mcap.reader import McapReader
from polybag.io.source import MappedSource, StreamSource


def _rows(n: int, seed: int) -> list[Row]:
    rnd = random.Random(seed)
    return [(rnd.choice(TOPICS), 100 + i * 3 - rnd.randrange(20), i, i, rnd.randbytes(rnd.randrange(30))) for i in range(n)]


ROWS = _rows(120, 1)
FILES = {
    "zstd-chunks": to_bytes(ROWS, compression="zstd", chunk_size=300, attachments=[("a", "t", b"x" * 20, 1, 2)], metadata=[("m", {"k": "v"})]),
    "none-chunks": to_bytes(ROWS, compression="none", chunk_size=250),
    "lz4-no-summary": to_bytes(
        ROWS, compression="lz4", chunk_size=300, use_chunk_index=False, use_statistics=False,
        repeat_schemas=False, repeat_channels=False, use_summary_offsets=False,
    ),  # fmt: skip
    "unchunked": to_bytes(ROWS, use_chunking=False),
}


def _layout(data: bytes) -> tuple[list[tuple[int, int]], list[int]]:
    """Top-level records as (start, end), and for each message (file order) the end of its record."""
    recs = []
    msg_ends: list[int] = []
    pos = 8
    r = McapReader(MappedSource(None, data))
    while pos < len(data) - 8:
        op, ln = R.RECORD_HEAD.unpack_from(data, pos)
        end = pos + 9 + ln
        recs.append((pos, end))
        if op == R.Opcode.MESSAGE:
            msg_ends.append(end)
        elif op == R.Opcode.CHUNK:
            n = len(r.chunks.chunk_messages(r.ctx.chunk_data(pos), pos, None, None, None))
            msg_ends.extend([end] * n)
        pos = end
    assert len(msg_ends) == len(ROWS)
    return recs, msg_ends


LAYOUT = {name: _layout(data) for name, data in FILES.items()}


def _mapped(data: bytes) -> McapReader:
    return McapReader(MappedSource(None, data))


def _stream(data: bytes) -> McapReader:
    return McapReader(StreamSource(Pipe(data, 101)))  # type: ignore[arg-type]


OPENERS: dict[str, Callable[[bytes], McapReader]] = {"mapped": _mapped, "stream": _stream}


def _read(make: Callable[[bytes], McapReader], data: bytes, order: str = "file") -> tuple[list[Row], PolybagError | None]:
    got: list[Row] = []
    try:
        r = make(data)
        for m in r.messages(order=order):
            got.append(key(m))
    except PolybagError as e:  # anything else fails the test
        return got, e
    return got, None


def _complete_before(name: str, damage: int) -> int:
    return sum(1 for end in LAYOUT[name][1] if end <= damage)


@pytest.mark.parametrize("opener", list(OPENERS))
@pytest.mark.parametrize("name", list(FILES))
def test_truncated_at_every_record_boundary(name: str, opener: str) -> None:
    data = FILES[name]
    recs, _ = LAYOUT[name]
    cuts = sorted({0, 4, 8, *(s for s, _ in recs), *(s + 5 for s, _ in recs), *(e - 1 for _, e in recs), len(data) - 8, len(data) - 1})
    for cut in cuts:
        got, err = _read(OPENERS[opener], data[:cut])
        need = _complete_before(name, cut)
        assert got == [key_ for key_ in ROWS[: len(got)]], cut
        assert len(got) >= need, (cut, len(got), need)
        assert err is not None, cut
        assert err.offset is not None or cut < 8


@pytest.mark.parametrize("name", list(FILES))
def test_truncated_log_time_order_and_recover(name: str) -> None:
    data = FILES[name]
    recs, _ = LAYOUT[name]
    for s, e in recs:
        for cut in (s, (s + e) // 2):
            got, err = _read(_mapped, data[:cut], order="log_time")
            assert err is not None
            assert sorted(got) == sorted(r for r in got if r in ROWS)
            assert [g[1] for g in got] == sorted(g[1] for g in got)
            assert len(got) >= _complete_before(name, cut)
            # recover: no exception at all, the same messages
            try:
                r = polybag.open(data[:cut], recover=True)
            except PolybagError:
                assert cut < 25  # not even a header
                continue
            rec = [key(m) for m in r.messages(order="file")]
            assert len(rec) >= _complete_before(name, cut)
            assert r.recovery_report is not None and r.recovery_report["messages"] == len(rec)
            if cut < len(data):
                assert r.recovery_report["errors"]


_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(name=st.sampled_from(list(FILES)), frac=st.floats(0, 1), opener=st.sampled_from(list(OPENERS)))
def test_truncated_at_random_offsets(name: str, frac: float, opener: str) -> None:
    data = FILES[name]
    cut = int(frac * (len(data) - 1))
    got, err = _read(OPENERS[opener], data[:cut])
    assert err is not None
    assert got == ROWS[: len(got)]
    assert len(got) >= _complete_before(name, cut)


@_SETTINGS
@given(name=st.sampled_from(list(FILES)), frac=st.floats(0, 1), bit=st.integers(0, 7), opener=st.sampled_from(list(OPENERS)))
def test_bit_flips(name: str, frac: float, bit: int, opener: str) -> None:
    data = bytearray(FILES[name])
    pos = int(frac * (len(data) - 1))
    data[pos] ^= 1 << bit
    got, _err = _read(OPENERS[opener], bytes(data))
    need = _complete_before(name, pos)
    assert got[:need] == ROWS[:need]
    # the log-time path and the summary must not crash either
    _read(_mapped, bytes(data), order="log_time")
    try:
        polybag.open(bytes(data)).summary  # noqa: B018
    except PolybagError:
        pass


LIES = [0, 1, 21, 2**31, 2**63, 2**64 - 1]


@pytest.mark.parametrize("opener", list(OPENERS))
@pytest.mark.parametrize("name", list(FILES))
def test_lying_record_lengths(name: str, opener: str) -> None:
    recs, _ = LAYOUT[name]
    for s, e in recs:
        for lie in [*LIES, e - s - 9 + 1, e - s - 9 - 1]:
            if lie < 0:
                continue
            data = bytearray(FILES[name])
            data[s + 1 : s + 9] = R.U64.pack(lie)
            got, _err = _read(OPENERS[opener], bytes(data))
            need = _complete_before(name, s)
            assert got[:need] == ROWS[:need], (s, lie)


def test_lying_inner_lengths() -> None:
    # a lying string length, map length and chunk records length inside records
    data = FILES["none-chunks"]
    for s, e in LAYOUT["none-chunks"][0]:
        for off in range(s + 9, min(e, s + 40), 5):
            for lie in (2**32 - 1, 2**31):
                bad = bytearray(data)
                bad[off : off + 4] = R.U32.pack(lie)
                for make in OPENERS.values():
                    got, _err = _read(make, bytes(bad))
                    need = _complete_before("none-chunks", off)
                    assert got[:need] == ROWS[:need]


@pytest.mark.parametrize("name", list(FILES))
def test_recover_skips_damage_in_the_middle(name: str) -> None:
    recs, _ = LAYOUT[name]
    for i in (3, 5):
        s, _e = recs[i]
        for damage in (R.U64.pack(2**40), b"\xaa" * 20):
            data = bytearray(FILES[name])
            if len(damage) == 8:
                data[s + 1 : s + 9] = damage  # a lying record length
            else:
                data[s : s + 20] = damage  # garbage over a record head
            plain, err = _read(_mapped, bytes(data))
            assert err is not None or plain == ROWS  # damage in an unused index record is harmless
            r = polybag.open(bytes(data), recover=True)
            got = [key(m) for m in r.messages(order="file")]
            report = r.recovery_report
            assert report is not None and report["errors"] and report["bytes_skipped"] > 0
            assert report["messages"] == len(got)
            assert set(got) <= set(ROWS)
            # the records after the damage are found again: at most one record's messages are lost
            assert len(got) >= len(ROWS) - 20, (i, len(got))


@_SETTINGS
@given(
    soup=st.lists(
        st.tuples(st.integers(0, 255), st.binary(max_size=40), st.one_of(st.none(), st.integers(0, 2**64 - 1))),
        max_size=12,
    ),
    opener=st.sampled_from(list(OPENERS)),
    trailer=st.booleans(),
)
def test_record_soup(soup: list[tuple[int, bytes, int | None]], opener: str, trailer: bool) -> None:
    """Random records (any opcode, any content, sometimes a lying length): only polybag errors."""
    data = R.MAGIC + R.encode(R.Header("p", "l"))
    for op, body, lie in soup:
        data += R.RECORD_HEAD.pack(op, len(body) if lie is None else lie) + body
    if trailer:
        data += R.encode(R.Footer(0, 0, 0)) + R.MAGIC
    for order in ("file", "log_time"):
        _read(OPENERS[opener], data, order)
    for attr in ("summary", "attachments", "metadata"):
        try:
            r = OPENERS[opener](data)
            v = getattr(r, attr)
            if callable(v):
                list(v())
        except PolybagError:
            pass


def test_recover_from_a_stream() -> None:
    data = FILES["zstd-chunks"]
    cut = LAYOUT["zstd-chunks"][0][6][0] + 3
    r = McapReader(StreamSource(Pipe(data[:cut])), recover=True)  # type: ignore[arg-type]
    got = [key(m) for m in r.messages(order="file")]
    assert got == ROWS[: len(got)] and len(got) >= _complete_before("zstd-chunks", cut)
    assert r.recovery_report is not None and r.recovery_report["errors"]
