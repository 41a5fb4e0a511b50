"""``McapReader.topic_payloads``: the same messages as ``messages(topics=[t])``, in bulk.

Checked against ``messages()`` on written files (chunked, unchunked, indexed or not, out of
order, ties), on every MCAP file of the corpora, and on damaged files (truncated, bit
flips): the same error without ``recover``, the same payloads and report with it.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polybag
from mcap_helpers import TOPICS, Pipe, Row, to_bytes
from polybag.codecs import codec_for
from polybag.codecs.columns import payload_columns
from polybag.errors import FormatError, PolybagError
from polybag.formats.mcap.bulk_kernels import pack_payloads
from polybag.formats.mcap.context import McapContext
from polybag.formats.mcap.reader import McapReader
from polybag.io.source import MappedSource, StreamSource

Pairs = list[tuple[int, bytes]]


def _rows(n: int, seed: int, size: int = 30) -> list[Row]:
    rnd = random.Random(seed)
    return [
        (rnd.choice(TOPICS), 100 + i * 3 - rnd.randrange(20), i, i, rnd.randbytes(rnd.randrange(size)))
        for i in range(n)
    ]


ROWS = _rows(150, 7)
FIXED = [("/b/c", 1000 - (i % 7), i, i, i.to_bytes(4, "little")) for i in range(200)]  # equal sizes, ties
FILES = {
    "zstd-chunks": to_bytes(ROWS, compression="zstd", chunk_size=300),
    "none-chunks": to_bytes(ROWS, compression="none", chunk_size=250),
    "lz4-one-chunk": to_bytes(ROWS, compression="lz4", chunk_size=1 << 20),
    "no-summary": to_bytes(
        ROWS, compression="lz4", chunk_size=300, use_chunk_index=False, use_statistics=False,
        repeat_schemas=False, repeat_channels=False, use_summary_offsets=False,
    ),  # fmt: skip
    "no-message-index": to_bytes(ROWS, compression="zstd", chunk_size=400, use_message_index=False),
    "unchunked": to_bytes(ROWS, use_chunking=False),
    "fixed": to_bytes(FIXED, compression="zstd", chunk_size=500),
    "fixed-one-chunk": to_bytes(FIXED, compression="none", chunk_size=1 << 20),
}


def _mapped(data: bytes, **kw: Any) -> McapReader:
    return McapReader(MappedSource(None, data), **kw)


def _stream(data: bytes, **kw: Any) -> McapReader:
    return McapReader(StreamSource(Pipe(data, 97)), **kw)  # type: ignore[arg-type]


OPENERS: dict[str, Callable[..., McapReader]] = {"mapped": _mapped, "stream": _stream}


def via_messages(r: Any, topic: str) -> Pairs:
    return [(m.log_time, bytes(m.data)) for m in r.messages(topics=[topic])]


def via_file_order(r: Any, topic: str) -> Pairs:
    """The contract's log-time order: file order, stably sorted by log time.

    (On damaged files whose chunk headers lie about their start times the lazy merge of
    ``messages()`` can differ from it; it always holds the same messages.)
    """
    return sorted(((m.log_time, bytes(m.data)) for m in r.messages(topics=[topic], order="file")), key=lambda p: p[0])


def via_payloads(r: Any, topic: str) -> Pairs:
    lt, blob, starts, sizes = r.topic_payloads(topic)
    # int64 times, or uint64 when one is 2**63 ns or more (MCAP times are u64: never wrapped)
    assert lt.dtype == (np.uint64 if len(lt) and int(lt.max()) >= 1 << 63 else np.int64)
    assert starts.dtype == np.int64 and sizes.dtype == np.int64
    assert blob.dtype == np.uint8 and len(lt) == len(starts) == len(sizes)
    b = blob.tobytes()
    assert all(0 <= s and s + z <= len(b) for s, z in zip(starts.tolist(), sizes.tolist()))
    return [(t, b[s : s + z]) for t, s, z in zip(lt.tolist(), starts.tolist(), sizes.tolist())]


def _outcome(fn: Callable[..., Pairs], *args: Any) -> tuple[Pairs | None, type | None]:
    try:
        return fn(*args), None
    except PolybagError as e:  # anything else fails the test
        return None, type(e)


@pytest.mark.parametrize("opener", list(OPENERS))
@pytest.mark.parametrize("name", list(FILES))
def test_same_as_messages(name: str, opener: str) -> None:
    data = FILES[name]
    make = OPENERS[opener]
    rows = FIXED if name.startswith("fixed") else ROWS
    for topic in [*TOPICS, "/nothing"]:
        want = [(r[1], r[4]) for r in sorted((r for r in rows if r[0] == topic), key=lambda r: r[1])]
        assert via_payloads(make(data), topic) == want
        assert via_messages(make(data), topic) == want


def test_only_the_topics_chunks_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [("/a", i, i, i, b"a" * 10) for i in range(100)] + [("/d", 100 + i, i, i, b"d" * 10) for i in range(100)]
    data = to_bytes(rows, compression="zstd", chunk_size=200)
    r = _mapped(data)
    assert len(r.chunk_indexes) > 4
    seen: list[int] = []
    orig = McapContext.chunk_data

    def spy(self: McapContext, offset: int) -> bytes:
        seen.append(offset)
        return orig(self, offset)

    monkeypatch.setattr(McapContext, "chunk_data", spy)
    got = via_payloads(r, "/a")
    assert got == [(i, b"a" * 10) for i in range(100)]
    holding = [c.chunk_start_offset for c in r.chunk_indexes if 1 in c.message_index_offsets or 0 in c.message_index_offsets]
    a_chunks = {c.chunk_start_offset for c in r.chunk_indexes if c.message_start_time < 100}
    assert set(seen) == a_chunks and len(seen) == len(a_chunks) < len(r.chunk_indexes)
    assert holding  # the chunk indexes list the channels


def test_pack_strided_masked_and_permuted() -> None:
    a = np.arange(200, dtype=np.uint8)
    for starts, sizes in [
        ([0, 10, 20, 30], [4, 4, 4, 4]),  # strided
        ([5, 9, 40], [3, 0, 7]),  # masked
        ([50, 3, 20], [5, 5, 5]),  # out of order
        ([7], [0]),
        ([], []),
    ]:
        s = np.array(starts, np.int64)
        z = np.array(sizes, np.int64)
        blob, new = pack_payloads(a, s, z)
        assert blob.tobytes() == b"".join(a[x : x + y].tobytes() for x, y in sorted(zip(starts, sizes)))
        for x, y, n in zip(starts, sizes, new.tolist()):
            assert blob[n : n + y].tobytes() == a[x : x + y].tobytes()


def _open_then(fn: Callable[[Any, str], Pairs], path: Path, topic: str) -> Pairs:
    return fn(polybag.open(str(path)), topic)


def test_corpora_files(corpora: Path) -> None:
    files = sorted(corpora.glob("mcap-*/**/*.mcap"))
    assert len(files) > 20
    checked = 0
    for f in files:
        try:
            r = polybag.open(str(f))
            topics = sorted({c.topic for c in r.summary.channels.values()})
        except PolybagError:
            continue
        for t in topics:
            got, err = _outcome(_open_then, via_payloads, f, t)
            want, err2 = _outcome(_open_then, via_messages, f, t)
            assert (got, err) == (want, err2), (f, t)
            checked += 1
    assert checked > 20


def _compare_damaged(data: bytes, recover: bool = False) -> None:
    for topic in TOPICS:
        try:
            a = _mapped(data, recover=recover)
            b = _mapped(data, recover=recover)
            c = _mapped(data, recover=recover)
        except PolybagError:
            continue
        got, err = _outcome(via_payloads, a, topic)
        want, err2 = _outcome(via_file_order, b, topic)
        merged, err3 = _outcome(via_messages, c, topic)
        assert err == err2
        # the log-time merge may meet other damage first (a chunk whose claimed times lie,
        # before the data section's CRC at the end): it fails too, with a FormatError of its own
        assert (err3 is None) == (err is None)
        assert err3 is None or issubclass(err3, FormatError)
        if err is None:
            assert got == want
            assert merged is not None and sorted(merged) == sorted(want)
        if recover:
            assert err is None
            assert a.recovery_report is not None and b.recovery_report is not None
            assert a.recovery_report["messages"] == b.recovery_report["messages"] == len(got or [])
            assert a.recovery_report["errors"] == b.recovery_report["errors"]


@pytest.mark.parametrize("name", ["zstd-chunks", "no-summary", "unchunked", "fixed"])
def test_truncated_like_messages(name: str) -> None:
    data = FILES[name]
    cuts = sorted(set(range(0, len(data), max(1, len(data) // 60))) | {len(data) - 1, len(data) - 9})
    for cut in cuts:
        _compare_damaged(data[:cut])
        _compare_damaged(data[:cut], recover=True)


_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(name=st.sampled_from(list(FILES)), frac=st.floats(0, 1), bit=st.integers(0, 7), recover=st.booleans())
def test_bit_flips_like_messages(name: str, frac: float, bit: int, recover: bool) -> None:
    data = bytearray(FILES[name])
    pos = min(len(data) - 1, int(frac * len(data)))
    data[pos] ^= 1 << bit
    _compare_damaged(bytes(data), recover=recover)


def test_columns_from_payloads_match_messages() -> None:
    # /b/c is ros1 "int32 x": the columns fast path (topic_payloads) against payload_columns
    data = FILES["fixed"]
    r = _mapped(data)
    cols = r.topic_columns("/b/c")
    msgs = list(_mapped(data).messages(topics=["/b/c"]))
    codec = codec_for(msgs[0].channel)
    ref = payload_columns(codec, [m.data for m in msgs])
    assert cols["log_time"].tolist() == [m.log_time for m in msgs]
    assert cols["x"].tolist() == ref["x"].tolist() == [int.from_bytes(m.data, "little", signed=True) for m in msgs]


def test_topic_columns_of_mcap_use_payloads_not_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    data = FILES["fixed"]
    want = _mapped(data).topic_columns("/b/c")

    def no_messages(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("topic_columns went through messages()")

    monkeypatch.setattr(McapReader, "messages", no_messages)
    got = _mapped(data).topic_columns("/b/c")
    assert got.keys() == want.keys() == {"log_time", "x"}
    assert all(np.array_equal(got[k], want[k]) for k in got)
    assert len(got["x"]) == len(FIXED)


@pytest.mark.parametrize("summary", [True, False])
def test_payloads_larger_than_the_first_guess(summary: bool) -> None:
    # zeros compress ~100x: more payload bytes than the first room guessed from the file size
    rows = [("/d", i, i, i, bytes(2000 + i % 3)) for i in range(400)]
    opts: dict[str, Any] = {} if summary else {"use_chunk_index": False, "use_statistics": False, "use_summary_offsets": False}
    data = to_bytes(rows, compression="zstd", chunk_size=100_000, **opts)
    assert len(data) * 4 < sum(len(r[4]) for r in rows)
    got = via_payloads(_mapped(data), "/d")
    assert got == [(r[1], r[4]) for r in rows]


# --- columns: the fixed-layout path equals the general walk ---------------------------------
CUSTOM = (
    "bool b\nint8 i8\nuint8[3] u3\nchar c\nbyte y\nint16 i16\nuint32 u32\nint64 i64\nuint64 u64\nfloat32 f\n"
    "time t\nduration d\nstring s\nfloat64[70] big\nstring[2] names\ngeometry_msgs/Point[2] pts\n"
    "Header header\n"
    "================================================================================\n"
    "MSG: geometry_msgs/Point\nfloat64 x\nfloat64 y\nfloat64 z\n"
    "================================================================================\n"
    "MSG: std_msgs/Header\nuint32 seq\ntime stamp\nstring frame_id\n"
)


def _value(codec: Any, t: Any, rnd: random.Random, strings: list[str]) -> Any:
    from polybag.codecs.definition_model import PRIMITIVE_FORMATS

    def one(base: str) -> Any:
        if base in PRIMITIVE_FORMATS:
            if base == "bool":
                return rnd.random() < 0.5
            if base.startswith("float"):
                return float(np.float32(rnd.uniform(-1e3, 1e3))) if base == "float32" else rnd.uniform(-1e9, 1e9)
            bits = int(base.lstrip("uint")) if base.startswith("u") else int(base.lstrip("int"))
            lo, hi = (0, (1 << bits) - 1) if base.startswith("u") else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
            return rnd.randint(lo, hi)
        if base == "time":
            return {"sec": rnd.randint(0, (1 << 32) - 1), "nsec": rnd.randint(0, 999_999_999)}
        if base == "duration":
            return {"sec": rnd.randint(-(1 << 31), (1 << 31) - 1), "nsec": rnd.randint(-(1 << 31), (1 << 31) - 1)}
        if base == "string":
            return rnd.choice(strings)
        return {f.name: _value(codec, f.type, rnd, strings) for f in codec.compiler.msgdef(base).fields}

    if t.array is None:
        return one(t.base)
    if t.base == "uint8":
        return bytes(rnd.randrange(256) for _ in range(t.array))
    return [one(t.base) for _ in range(t.array)]


def _payloads(codec: Any, n: int, strings: list[str], seed: int) -> list[bytes]:
    rnd = random.Random(seed)
    fields = codec.compiler.msgdef(codec.type_name).fields
    return [codec.encode({f.name: _value(codec, f.type, rnd, strings) for f in fields}) for _ in range(n)]


def _same_columns(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert list(a) == list(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        assert a[k].tolist() == b[k].tolist(), k


@pytest.mark.parametrize(
    ("type_name", "text"),
    [("sensor_msgs/Imu", None), ("sensor_msgs/NavSatFix", None), ("geometry_msgs/PoseStamped", None), ("test/Custom", CUSTOM)],
)
@pytest.mark.parametrize("strings", [["imu_link"], ["abc", "xyz"], [""], ["abc", "de"]])
def test_fixed_layout_path_equals_the_walk(type_name: str, text: str | None, strings: list[str]) -> None:
    import polybag.codecs.columns as C
    from polybag.codecs.ros1 import codec_for_type, definition_for

    codec = codec_for_type(type_name, text if text is not None else definition_for(type_name))
    datas = _payloads(codec, 300, strings, 5)
    sizes = np.array([len(d) for d in datas], np.int64)
    starts = np.zeros(len(datas), np.int64)
    np.cumsum(sizes[:-1], out=starts[1:])
    blob = np.frombuffer(b"".join(datas), np.uint8)
    walk = C.Walker(codec, blob, starts, sizes, C._wanted(None), "/t").run()
    fixed = C._fixed_layout(codec, blob, starts, sizes, C._wanted(None))
    if len({len(s) for s in strings}) > 1:
        assert fixed is None  # strings of different lengths: the walk handles them
    else:
        assert fixed is not None
        _same_columns(fixed, walk)
    # and through the public entry points, with a field selection too
    _same_columns(payload_columns(codec, datas), walk)
    sel = ["header", "orientation_covariance"] if type_name == "sensor_msgs/Imu" else ["header.stamp"]
    if type_name == "test/Custom":
        sel = ["t", "big", "pts", "u3", "names"]
    part = payload_columns(codec, datas, sel)
    assert part and all(k in walk for k in part)
    _same_columns(part, {k: walk[k] for k in part})


def test_fixed_layout_declines_damage() -> None:
    import polybag.codecs.columns as C
    from polybag.codecs.ros1 import codec_for_type, definition_for
    from polybag.errors import DecodeError

    codec = codec_for_type("sensor_msgs/Imu", definition_for("sensor_msgs/Imu"))
    datas = _payloads(codec, 10, ["imu"], 2)
    short = [d[:-8] for d in datas]  # every payload 8 bytes short
    blob = np.frombuffer(b"".join(short), np.uint8)
    sizes = np.array([len(d) for d in short], np.int64)
    starts = np.arange(len(short), dtype=np.int64) * int(sizes[0])
    assert C._fixed_layout(codec, blob, starts, sizes, C._wanted(None)) is None
    with pytest.raises(DecodeError):
        payload_columns(codec, short)
    long = [d + b"\0" for d in datas]
    with pytest.raises(DecodeError):
        payload_columns(codec, long)


# --- ROS 1 message classes (built without a Python __init__ by the decoders) --------------
def test_message_classes_construct_and_copy() -> None:
    import copy

    from polybag.codecs.ros1 import codec_for_type, definition_for

    codec = codec_for_type("sensor_msgs/Imu", definition_for("sensor_msgs/Imu"))
    Imu = codec.message_class
    o = Imu()
    assert o.header.frame_id == "" and o.header.stamp.sec == 0 and o.orientation.w == 0.0
    assert len(o.orientation_covariance) == 9
    o.header.frame_id = "imu"
    o.orientation.w = 1.0
    data = codec.encode(o)
    back = codec.decode(data)
    assert back == o and type(back) is Imu and back.header.stamp.to_nsec() == 0
    Header = type(o.header)
    h = Header(7, frame_id="x")
    assert (h.seq, h.frame_id, h.stamp.sec) == (7, "x", 0)
    with pytest.raises(TypeError):
        Header(1, 2, 3, 4)
    assert copy.deepcopy(back) == back and copy.copy(back) == back

    class Mine(Header):  # type: ignore[misc, valid-type]
        __slots__ = ("extra",)

        def __init__(self, extra: int) -> None:
            self.extra = extra
            self.seq = 1

    m = Mine(5)
    assert (m.extra, m.seq) == (5, 1)
