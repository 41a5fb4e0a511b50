"""ULog format features and damaged logs: truncation, byte damage, resync, flag bits."""

from __future__ import annotations

import struct
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polybag
from polybag.cli import render
from polybag.errors import FormatError, PolybagError, TruncatedError, UnsupportedError
from ulog_helpers import (
    INNER_FMT,
    NEST_FMT,
    POS_FMT,
    data,
    default,
    dropout,
    flags,
    fmt,
    header,
    info_str,
    log,
    msg,
    param,
    pos_payload,
    pyulog_columns,
    sub,
    sync,
    synthetic_log,
    tagged,
    write,
)

pyulog = pytest.importorskip("pyulog")

LOG, SPANS = synthetic_log(40)
DATA_START = SPANS[0][0]


def _open(b: bytes, **kw: object) -> polybag.Reader:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return polybag.open(b, warn=False, **kw)


def _msgs(r: polybag.Reader) -> list[tuple[str, int, bytes]]:
    return [(m.channel.topic, m.log_time, bytes(m.data)) for m in r.messages(order="file")]


def test_synthetic_matches_pyulog(tmp_path: Path) -> None:
    path = write(tmp_path, "s.ulg", LOG)
    u = pyulog.ULog(path)
    with polybag.open(path) as r:
        for d in u.data_list:
            cols = r.topic_columns(d.name, d.multi_id, padding=True)
            assert list(cols) == list(d.data)
            for k in d.data:
                assert np.array_equal(cols[k], d.data[k], equal_nan=True), k
        x = r.ulog
        assert x.info == u.msg_info_dict
        assert x.info["ver_sw_release"] == 0x010402FF
        assert x.version_info_str() == "v1.4.2"
        assert x.info_multiple == {"boot": [["part one ", "part two"], ["second"]]}
        assert x.info_multiple == u.msg_info_multiple_dict
        assert x.params == {"P_INT": 3, "P_FLT": 0.5}
        assert x.default_params == {0: {"P_INT": 2}, 1: {"P_INT": 2, "P_FLT": 0.25}} == u._default_parameters
        assert x.changed_params == u.changed_parameters and x.changed_params[0][1:] == ("P_INT", 4)
        assert [(d.timestamp, d.duration) for d in x.dropouts] == [
            (d.timestamp, d.duration) for d in u.dropouts
        ]
        assert [m.text for m in x.logged_messages] == ["hello", "tagged warn", "bye"]
        assert x.logged_messages[1].tag == 7
        assert x.sync_count == 4
        assert not x.corruptions
        # _padding is hidden in the flat columns by default and in decoded objects
        assert "items[0]._padding0[0]" not in r.topic_columns("nest")
        m = next(r.messages(topics=["nest"]))
        obj = m.decode()
        assert obj.tag == "ab0" and obj.items[1].a == -0.0 and obj.ok == 0
        assert not hasattr(obj.items[0], "_padding0")


def test_trailing_padding_present_or_missing() -> None:
    # the spec lets a logger leave out a trailing _padding field; both forms are read
    # (pyulog drops the messages that carry the padding)
    b, spans = synthetic_log(40, padded=True)
    r = _open(b)
    pos = r.topic_columns("pos", 0)
    assert len(pos["timestamp"]) == 40
    assert np.array_equal(pos["k"], np.arange(40) % 7)
    assert not r.ulog.corruptions
    sizes = {len(m.data) for m in r.messages(topics=["pos"])}
    assert sizes == {22, 24}


def test_strict_reader_clean_log() -> None:
    r = _open(LOG)
    got = _msgs(r)
    assert len(got) == sum(1 for s in SPANS if s[2] >= 0) + 3
    assert r.recovery_report["errors"] == []


def _expected_before(cut: int) -> int:
    """Messages (D and logged strings) wholly before ``cut``."""
    n = 0
    for start, end, kind in SPANS:
        if end <= cut:
            raw = LOG[start:end]
            if kind >= 0 or raw[2:3] in (b"L", b"C"):
                n += 1
    return n


def test_truncated_at_every_boundary_and_inside() -> None:
    cuts = sorted({s[0] for s in SPANS} | {s[0] + 1 for s in SPANS} | {s[0] + 4 for s in SPANS} | {len(LOG)})
    for cut in cuts:
        b = LOG[:cut]
        want = _expected_before(cut)
        r = _open(b)
        got = []
        boundary = cut == len(LOG) or any(s[0] == cut for s in SPANS)
        if boundary:
            got = _msgs(r)
        else:
            with pytest.raises(TruncatedError) as ei:
                for m in r.messages(order="file"):
                    got.append(m)
            assert ei.value.offset is not None and ei.value.offset < cut
        assert len(got) == want, cut
        rr = _open(b, recover=True)
        assert len(_msgs(rr)) == want
        # columns keep every complete message too
        n0 = sum(1 for s in SPANS if s[2] == 0 and s[1] <= cut)
        if n0:
            assert len(rr.topic_columns("pos", 0)["timestamp"]) == n0


def test_truncated_in_definitions_and_header() -> None:
    with pytest.raises(TruncatedError):
        _open(LOG[:10])
    with pytest.raises(FormatError):
        _open(b"ULog\x01\x12\x36" + LOG[7:])
    for cut in range(16, DATA_START, 7):
        r = _open(LOG[:cut])
        assert r.summary.message_count == 0
        assert list(r.messages()) == [] if cut == DATA_START else True


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, len(LOG) - 1), st.binary(min_size=1, max_size=12))
def test_random_damage(offset: int, junk: bytes) -> None:
    b = bytearray(LOG)
    b[offset : offset + len(junk)] = junk
    b = bytes(b)
    try:
        r = _open(b)
    except PolybagError:
        return  # header or flag bits damaged
    strict: list[object] = []
    try:
        for m in r.messages(order="file"):
            strict.append(m)
    except PolybagError:
        pass
    rr = _open(b, recover=True)
    got = _msgs(rr)
    rr.summary  # noqa: B018 - must not raise
    render.info_text(rr)
    # every message wholly before the damage is kept (if the definitions survived)
    if offset >= DATA_START:
        before = _expected_before(offset)
        assert len(strict) >= before
        assert len(got) >= before
        assert [x[2] for x in got[:before]] == [x[2] for x in _msgs(_open(LOG))[:before]]


CORPUS_FILES = sorted(
    (Path(__file__).resolve().parents[3].parent / "shared" / "corpora" / "ulog").glob("*.ulg")
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(CORPUS_FILES), st.integers(0, 2**32 - 1), st.integers(0, 3), st.booleans())
def test_random_damage_of_corpus_files(path: Path, seed: int, mode: int, recover: bool) -> None:
    """Cut, flipped bytes, overwritten ranges: only polybag errors, and every call works."""
    rng = np.random.default_rng(seed)
    b = bytearray(path.read_bytes())
    if mode == 0:
        b = b[: int(rng.integers(0, len(b)))]
    elif mode == 1:
        for _ in range(int(rng.integers(1, 20))):
            b[int(rng.integers(0, len(b)))] = int(rng.integers(0, 256))
    elif mode == 2:
        o, n = int(rng.integers(0, len(b))), int(rng.integers(1, 5000))
        b[o : o + n] = rng.integers(0, 256, n).astype(np.uint8).tobytes()
    else:  # the definitions section
        b[int(rng.integers(0, min(len(b), 20000)))] = int(rng.integers(0, 256))
    try:
        r = _open(bytes(b), recover=recover)
        r.summary  # noqa: B018
        render.info_text(r)
        r.info_extras()
        for s in r.ulog.subscriptions:
            try:
                r.topic_columns(s.name, s.multi_id)
            except KeyError:
                pass
        n = 0
        for m in r.messages():
            if n % 997 == 0:
                m.to_dict()
            n += 1
        if recover:
            assert n == r.recovery_report["messages"]
    except PolybagError:
        pass


def test_resync_on_sync_message_reports_skipped_bytes() -> None:
    # damage a header in the middle of the data section
    mid = [s for s in SPANS if s[2] == 0][20]
    b = bytearray(LOG)
    b[mid[0] + 2] = 0  # type 0: not a message
    b = bytes(b)
    r = _open(b)
    with pytest.raises(FormatError) as ei:
        list(r.messages(order="file"))
    assert ei.value.offset == mid[0]
    rr = _open(b, recover=True)
    got = _msgs(rr)
    assert rr.ulog.corruptions and rr.ulog.corruptions[0]["offset"] == mid[0]
    skipped = rr.recovery_report["bytes_skipped"]
    assert 0 < skipped < 200
    # only the damaged message is lost
    assert len(got) == len(_msgs(_open(LOG))) - 1


def test_resync_without_sync_messages() -> None:
    b0, spans = synthetic_log(30, with_sync=False)
    d = [s for s in spans if s[2] == 1][10]
    b = bytearray(b0)
    b[d[0] : d[0] + 2] = b"\xff\xff"  # a size that runs far past the real message
    rr = _open(bytes(b), recover=True)
    clean = _msgs(_open(b0))
    got = _msgs(rr)
    assert rr.recovery_report["bytes_skipped"] > 0
    assert len(got) == len(clean) - 1
    assert set(got) <= set(clean)


def test_unknown_incompat_bit_refused() -> None:
    b = header() + flags(incompat=0x02) + fmt(POS_FMT) + sub(0, 0, "pos") + data(0, pos_payload(1, 1))
    with pytest.raises(UnsupportedError, match="incompat"):
        _open(b)
    b = header() + flags(incompat_bytes=bytes([0, 0, 0, 4, 0, 0, 0, 0])) + fmt(POS_FMT)
    with pytest.raises(UnsupportedError, match=r"incompat_flags\[3\]"):
        _open(b)
    with pytest.raises(UnsupportedError):
        _open(b, recover=True)


def test_long_flag_bits_and_version0() -> None:
    body = fmt(POS_FMT) + sub(0, 0, "pos") + data(0, pos_payload(5, 1)) + data(0, pos_payload(6, 2))
    r = _open(header() + flags(compat=1, extra=b"\x01" * 24) + body)
    assert r.ulog.compat_flags[0] == 1
    assert len(r.topic_columns("pos")["timestamp"]) == 2
    r0 = _open(header(version=0) + body)
    assert r0.ulog.version == 0 and r0.ulog.compat_flags == [0] * 8
    assert list(r0.topic_columns("pos")["timestamp"]) == [5, 6]


def test_unknown_message_type_skipped_with_warning() -> None:
    b = (
        header()
        + flags()
        + fmt(POS_FMT)
        + msg("Z", b"future definition")
        + sub(0, 0, "pos")
        + data(0, pos_payload(5, 1))
        + msg("x", b"abc")
        + data(0, pos_payload(6, 2))
    )
    with pytest.warns(UserWarning, match="unknown message type"):
        r = polybag.open(b)
    assert list(r.topic_columns("pos")["timestamp"]) == [5, 6]
    assert not r.ulog.corruptions
    assert len(list(r.messages())) == 2
    assert r.ulog.unknown_types == {"Z": 1, "x": 1}
    many = header() + flags() + fmt(POS_FMT) + sub(0, 0, "pos") + msg("x", b"abc") * 500
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = polybag.open(many)
    assert len([w for w in caught if "unknown message type" in str(w.message)]) == 1
    assert r.ulog.unknown_types == {"x": 500}


def test_timestamp_types_and_wraparound(tmp_path: Path) -> None:
    defs = header() + flags()
    fmts = [
        "t8:uint8_t timestamp;float v;",
        "t16:uint16_t timestamp;float v;",
        "t32:float v;uint32_t timestamp;",
    ]
    b = defs + b"".join(fmt(f) for f in fmts)
    b += sub(0, 0, "t8") + sub(0, 1, "t16") + sub(0, 2, "t32")
    ts8 = [250, 252, 254, 0, 2, 4]  # ms, wraps once
    for i, t in enumerate(ts8):
        b += data(0, struct.pack("<Bf", t, i))
    ts16 = [65000, 65500, 100, 200]
    for i, t in enumerate(ts16):
        b += data(1, struct.pack("<Hf", t, i))
    for i in range(3):
        b += data(2, struct.pack("<fI", i, 7 + i))
    r = _open(b)
    t8 = [m.log_time for m in r.messages(topics=["t8"], order="file")]
    assert t8 == [(t + (256 if i >= 3 else 0)) * 1_000_000 for i, t in enumerate(ts8)]
    t16 = [m.log_time for m in r.messages(topics=["t16"], order="file")]
    assert t16 == [(t + (65536 if i >= 2 else 0)) * 1000 for i, t in enumerate(ts16)]
    assert [m.log_time for m in r.messages(topics=["t32"])] == [7000, 8000, 9000]
    # the raw columns stay as logged
    assert list(r.topic_columns("t8")["timestamp"]) == ts8
    assert r.topic_columns("t8", log_time=True)["log_time"][-1] == (256 + 4) * 1_000_000


def test_appended_data_matches_pyulog(tmp_path: Path) -> None:
    base = header() + flags(incompat=1, offsets=(0,)) + fmt(POS_FMT) + sub(0, 0, "pos")
    part1 = b"".join(data(0, pos_payload(10 + i, i)) for i in range(5))
    partial = data(0, pos_payload(99, 99))[:9]  # cut off by the crash
    off = len(base) + len(part1) + len(partial)
    appended = b"".join(data(0, pos_payload(20 + i, i)) for i in range(3)) + log(ord("6"), 30, "after")
    b = bytearray(base + part1 + partial + appended)
    # patch appended_offsets[0]
    b[16 + 3 + 16 : 16 + 3 + 24] = struct.pack("<Q", off)
    path = write(tmp_path, "app.ulg", bytes(b))
    r = polybag.open(path)
    assert r.ulog.appended_offsets == [off]
    ts = list(r.topic_columns("pos")["timestamp"])
    assert ts == [10, 11, 12, 13, 14, 20, 21, 22]
    # pyulog forgets the subscriptions at the first appended offset and drops the appended
    # data messages; the spec says appended data is part of the data section
    assert ts[:5] == list(pyulog_columns(path)[("pos", 0)]["timestamp"])
    assert [m.text for m in r.ulog.logged_messages] == ["after"]
    assert not r.ulog.corruptions
    assert len(list(r.messages())) == 9  # no error: the partial message is expected


def test_nested_defined_after_use_and_char_strings() -> None:
    b = header() + flags() + fmt(NEST_FMT) + fmt(INNER_FMT) + sub(0, 0, "nest")
    from ulog_helpers import nest_payload

    b += data(0, nest_payload(5, 3))
    r = _open(b)
    cols = r.topic_columns("nest")
    assert list(cols) == [
        "timestamp",
        "items[0].a",
        "items[0].b",
        "items[1].a",
        "items[1].b",
        "tag[0]",
        "tag[1]",
        "tag[2]",
        "tag[3]",
        "ok",
    ]
    assert m_dict(r)["tag"] == "ab3"
    sch = r.summary.channels[0].schema
    assert sch.data.decode().splitlines() == [NEST_FMT, INNER_FMT]


def m_dict(r: polybag.Reader) -> dict:
    return next(r.messages()).to_dict()


def test_info_defaults_in_data_section() -> None:
    b = (
        header()
        + flags(compat=1)
        + fmt(POS_FMT)
        + sub(0, 0, "pos")
        + data(0, pos_payload(2_000_000, 1))
        + info_str("late", "yes")
        + default("X", 1.5, 1)
        + dropout(7)
        + sync()
        + data(0, pos_payload(2_000_010, 2))
    )
    r = _open(b)
    assert r.ulog.info["late"] == "yes"
    assert r.ulog.default_params == {0: {"X": 1.5}}
    assert [(d.timestamp, d.duration) for d in r.ulog.dropouts] == [(2_000_000, 7)]
    assert r.ulog.last_timestamp == 2_000_010


def test_stream_source() -> None:
    import io

    class Pipe(io.RawIOBase):
        def __init__(self, b: bytes) -> None:
            self.b = io.BytesIO(b)

        def readable(self) -> bool:
            return True

        def readinto(self, buf) -> int:  # type: ignore[no-untyped-def]
            chunk = self.b.read(len(buf))
            buf[: len(chunk)] = chunk
            return len(chunk)

    r = polybag.open(io.BufferedReader(Pipe(LOG)))
    assert len(_msgs(r)) == len(_msgs(_open(LOG)))


def _reference_walk(b: bytes, pos: int, end: int) -> tuple[list[int], int]:
    out = []
    while pos + 3 <= end:
        nxt = pos + 3 + b[pos] + (b[pos + 1] << 8)
        if nxt > end:
            break
        out.append(pos)
        pos = nxt
    return out, pos


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.integers(0, 10**9), st.binary(min_size=1, max_size=6)), max_size=4),
    st.integers(0, 10**9),
)
def test_fast_walk_is_the_sequential_walk(damage: list[tuple[int, bytes]], start_seed: int) -> None:
    """The run-skipping walk finds exactly the offsets a one-by-one walk finds, from any
    start, on intact and damaged data."""
    from paths import CORPORA

    raw = bytearray((CORPORA / "ulog" / "sample_log_small.ulg").read_bytes())
    for off, junk in damage:
        o = 2000 + off % (len(raw) - 2100)
        raw[o : o + len(junk)] = junk
    b = bytes(raw)
    try:
        r = _open(b, recover=True)
    except PolybagError:
        return
    ds = r._scanner.data_start
    for pos in (ds, ds + start_seed % 5000, ds + start_seed % (len(b) - ds)):
        got, stop = r._scanner.walk_fast(pos, len(b))
        want, wstop = _reference_walk(b, pos, len(b))
        assert got.tolist() == want
        assert stop == wstop


def test_small_walk_chunks_give_the_same_result(monkeypatch: pytest.MonkeyPatch) -> None:
    from paths import CORPORA
    from polybag.formats.ulog import reader as ulog_reader

    path = CORPORA / "ulog" / "sample_logging_tagged_and_default_params.ulg"
    with polybag.open(path) as r:
        want = {(s.name, s.multi_id): r.topic_columns(s.name, s.multi_id) for s in r.ulog.subscriptions}
        want_extras = (r.ulog.changed_params, r.ulog.logged_messages, r.ulog.dropouts)
    monkeypatch.setattr(ulog_reader, "_WALK_LIMIT", 97)
    with polybag.open(path) as r:
        assert not r.ulog.corruptions
        assert (r.ulog.changed_params, r.ulog.logged_messages, r.ulog.dropouts) == want_extras
        for (name, mid), cols in want.items():
            got = r.topic_columns(name, mid)
            for k in cols:
                assert np.array_equal(got[k], cols[k], equal_nan=True)


def test_degenerate_inputs_do_not_blow_up() -> None:
    base = header() + flags() + fmt(POS_FMT) + sub(0, 0, "pos")
    # every byte a 'D': no candidate index, walked one by one, all damage
    r = _open(base + b"D" * 20000, recover=True)
    assert r.recovery_report["bytes_skipped"] > 0
    assert list(r.messages()) == []
    # tiny valid messages (sync with no payload) in bulk
    r = _open(base + b"\x00\x00S" * 5000 + data(0, pos_payload(5, 1)))
    assert r.ulog.sync_count == 5000
    assert len(list(r.messages())) == 1


def test_data_without_subscription_dropped_in_place(tmp_path: Path) -> None:
    base = header() + flags() + fmt(POS_FMT) + sub(0, 0, "pos")
    body = b"".join(data(0, pos_payload(10 + i, i)) + data(9, b"\x01" * 7) for i in range(3000))
    path = write(tmp_path, "orphans.ulg", base + body)
    r = _open(path, recover=True)
    ts = r.topic_columns("pos")["timestamp"]
    assert list(ts) == list(range(10, 3010))
    assert list(ts) == list(pyulog_columns(path)[("pos", 0)]["timestamp"])
    assert r.recovery_report["bytes_skipped"] == 3000 * 12
    assert len(r.ulog.corruptions) + r.ulog.unreported_damage == 3000
    strict = _open(path)
    with pytest.raises(FormatError, match="no subscription"):
        list(strict.messages(order="file"))


def test_appended_offset_past_the_end_is_ignored() -> None:
    b = header() + flags(incompat=1, offsets=(10**9,)) + fmt(POS_FMT) + sub(0, 0, "pos")
    b += data(0, pos_payload(5, 1)) + data(0, pos_payload(6, 2))
    r = _open(b)
    assert len(list(r.messages())) == 2  # strict: no error
    assert any("appended offset" in w for w in r.ulog.warnings)


def test_msg_id_subscribed_again_later() -> None:
    from ulog_helpers import nest_payload

    b = header() + flags() + fmt(POS_FMT) + fmt(NEST_FMT) + fmt(INNER_FMT) + sub(0, 0, "pos")
    b += data(0, pos_payload(5, 1)) + data(0, pos_payload(6, 2))
    b += sub(0, 0, "nest")  # against the spec, the id is used again: later data is "nest"
    b += data(0, nest_payload(7, 3))
    with pytest.warns(UserWarning, match="subscribed again"):
        r = polybag.open(b)
    assert list(r.topic_columns("pos")["timestamp"]) == [5, 6]
    assert list(r.topic_columns("nest")["timestamp"]) == [7]
    assert not r.ulog.corruptions


@pytest.mark.parametrize("tail", [b"\x00\x00D", b"\x01\x00D\x00", b"\x00\x00D" + data(0, pos_payload(6, 2))])
def test_data_message_too_short_for_its_msg_id(tail: bytes) -> None:
    b = header() + flags() + fmt(POS_FMT) + sub(0, 0, "pos") + data(0, pos_payload(5, 1)) + tail
    r = _open(b, recover=True)
    got = list(r.messages())
    assert got[0].log_time == 5000
    assert "cannot hold its msg_id" in r.recovery_report["errors"][0]
    assert len(got) == (2 if len(tail) > 4 else 1)


_PIECES = [
    sub(0, 0, "pos"),
    sub(1, 1, "pos"),
    sub(0, 2, "nest"),
    sub(0, 3, "nope"),
    sub(0, 0, "nest"),
    fmt(POS_FMT),
    fmt(NEST_FMT),
    fmt(INNER_FMT),
    fmt("bad"),
    fmt("x:"),
    fmt("y:int32_t[99999] a;"),
    fmt("w:uint64_t timestamp;w2 a;"),
    fmt("w2:w b;"),
    fmt("dup:uint64_t timestamp;float a;float a;"),
    info_str("a", "b"),
    param("p", 1),
    param("p", 2.5),
    default("p", 1, 3),
    dropout(5),
    sync(),
    log(54, 2**64 - 1, "x"),
    tagged(52, 1, 5, "t"),
    msg("D", b""),
    msg("D", b"\x00"),
    msg("Z", b"zz"),
    msg("B", bytes(40)),
    msg("A", b"\x00"),
    msg("L", b"\x01"),
    msg("M", b"\x00\x05abc"),
    data(0, pos_payload(7, 1)),
    data(1, pos_payload(8, 2, padded=True)),
    data(2, pos_payload(9, 3)),
    data(0, pos_payload(10, 4)),
    b"\x00",
    b"\xff\xff",
    b"DDD",
]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from([0, 1, 2]),
    st.booleans(),
    st.lists(st.sampled_from(_PIECES), max_size=40),
    st.integers(0, 10**6),
    st.booleans(),
)
def test_random_message_streams(
    version: int, with_flags: bool, pieces: list[bytes], cut: int, rev: bool
) -> None:
    """Random sequences of valid, odd and broken messages: only polybag errors."""
    b = header(version=version) + (flags(compat=1) if with_flags else b"") + fmt(POS_FMT) + fmt(NEST_FMT)
    b += fmt(INNER_FMT) + b"".join(pieces)
    b = b[: max(16, len(b) - cut % (len(b) + 1))]
    for recover in (False, True):
        try:
            r = _open(b, recover=recover)
            r.summary  # noqa: B018
            render.info_text(r)
            for s in r.ulog.subscriptions:
                r.topic_columns(s.name, s.multi_id, log_time=True)
            r.all_topic_columns()
            for m in r.messages(reverse=rev):
                try:
                    m.to_dict()
                except PolybagError:
                    pass
        except PolybagError:
            pass
