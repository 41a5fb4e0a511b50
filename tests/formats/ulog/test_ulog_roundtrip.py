"""ULog writer: read -> write -> read again with polybag and pyulog; columns; codecs."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polybag
from paths import CORPORA
from polybag.codecs.ulog import codec_for_schema, compile_type, parse_format
from polybag.errors import WriteError
from polybag.formats.ulog.writer import UlogWriter

pyulog = pytest.importorskip("pyulog")
FILES = sorted((CORPORA / "ulog").glob("*.ulg"))


def _same_pyulog(a, b) -> None:  # type: ignore[no-untyped-def]
    da = {(d.name, d.multi_id): d.data for d in a.data_list}
    db = {(d.name, d.multi_id): d.data for d in b.data_list}
    assert da.keys() == db.keys()
    for k, x in da.items():
        y = db[k]
        assert list(x) == list(y), k
        for f in x:
            assert x[f].dtype == y[f].dtype
            assert np.array_equal(x[f], y[f], equal_nan=True), (k, f)
    assert a.msg_info_dict == b.msg_info_dict
    assert a.msg_info_multiple_dict == b.msg_info_multiple_dict
    assert a.initial_parameters == b.initial_parameters
    assert a._default_parameters == b._default_parameters
    assert a.changed_parameters == b.changed_parameters
    assert a.logged_messages == b.logged_messages
    assert a.logged_messages_tagged == b.logged_messages_tagged
    assert a.dropouts == b.dropouts
    assert a.start_timestamp == b.start_timestamp
    assert a.last_timestamp == b.last_timestamp


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_corpus_round_trip(path: Path, tmp_path: Path) -> None:
    out = tmp_path / "copy.ulg"
    with polybag.open(path) as r, polybag.Writer(out) as w:
        assert isinstance(w, UlogWriter)
        w.copy_extras(r.ulog)
        for m in r.messages(order="file"):
            w.write_message(m)
    assert not (tmp_path / "copy.ulg.active").exists()
    orig = pyulog.ULog(str(path))
    again = pyulog.ULog(str(out))
    assert not again.file_corruption
    _same_pyulog(orig, again)
    with polybag.open(path) as a, polybag.open(out) as b:
        assert b.ulog.version == 1
        assert not b.ulog.corruptions
        assert b.ulog.info == a.ulog.info and b.ulog.params == a.ulog.params
        assert b.ulog.logged_messages == a.ulog.logged_messages
        for s in a.ulog.subscriptions:
            ca = a.topic_columns(s.name, s.multi_id, padding=True)
            try:
                cb = b.topic_columns(s.name, s.multi_id, padding=True)
            except KeyError:
                assert len(ca["timestamp"]) == 0  # subscriptions without data are not copied
                continue
            assert list(ca) == list(cb)
            for k in ca:
                assert np.array_equal(ca[k], cb[k], equal_nan=True)


def test_write_from_columns_read_by_pyulog(tmp_path: Path) -> None:
    out = tmp_path / "cols.ulg"
    n = 1000
    t = np.arange(n, dtype=np.uint64) * 4000 + 10_000
    with UlogWriter(out, start_timestamp=5000) as w:
        w.add_format("vec:float x;float y;")
        w.add_format(
            "thing:uint64_t timestamp;vec[2] v;int32_t[3] k;char[5] name;bool on;uint8_t[3] _padding0;"
        )
        w.add_info("sys_name", "PX4")
        w.add_info("ver_sw_release", 0x01020304, "uint32_t")
        w.add_info_multiple("boot", ["a", "b"])
        w.add_param("P", 3)
        w.add_param("Q", 0.25)
        w.add_default_param("P", 1, 1)
        w.add_default_param("P", 1, 2)
        ch = w.add_subscription("thing", 0)
        ch1 = w.add_subscription("thing", 1)
        cols = {
            "timestamp": t,
            "v[0].x": np.linspace(0, 1, n, dtype=np.float32),
            "v[1].y": np.full(n, np.nan, dtype=np.float32),
            "k[2]": np.arange(n, dtype=np.int32) - 500,
            "name[0]": np.full(n, ord("h"), dtype=np.int8),
            "on": (np.arange(n) % 2).astype(np.int8),
        }
        w.change_param("P", 4, 2_000_000)  # timed: goes between the rows
        w.add_dropout(12, 3_000_000)
        assert w.write_columns_many([(ch, cols), (ch1, {"timestamp": t + 1})]) == 2 * n
        w.add_logged_string("WARNING", "careful", 20_000)
        w.add_logged_string(ord("6"), "tagged", 30_000, tag=3)
    u = pyulog.ULog(str(out))
    assert not u.file_corruption
    d = u.get_dataset("thing")
    for k, v in cols.items():
        assert np.array_equal(d.data[k], v, equal_nan=True), k
    assert np.array_equal(u.get_dataset("thing", 1).data["timestamp"], t + 1)
    assert u.msg_info_dict == {"sys_name": "PX4", "ver_sw_release": 0x01020304}
    assert u.msg_info_multiple_dict == {"boot": [["a", "b"]]}
    assert u.initial_parameters == {"P": 3, "Q": 0.25}
    assert u._default_parameters == {0: {"P": 1}, 1: {"P": 1}}
    assert [(m.log_level, m.message) for m in u.logged_messages] == [(ord("4"), "careful")]
    assert [m.message for m in u.logged_messages_tagged[3]] == ["tagged"]
    assert u.changed_parameters == [(int(t[t < 2_000_000][-1] + 1), "P", 4)]
    assert [(x.timestamp, x.duration) for x in u.dropouts] == [(int(t[t < 3_000_000][-1] + 1), 12)]
    with polybag.open(out) as r:
        got = r.topic_columns("thing")
        for k, v in cols.items():
            assert np.array_equal(got[k], v, equal_nan=True)
        assert r.ulog.compat_flags[0] & 1
        # the data section is interleaved by time, as a logger writes it
        topics = [m.channel.metadata["multi_id"] for m in r.messages(topics=["thing"], order="file")][:4]
        assert topics == ["0", "1", "0", "1"]


def test_writer_errors(tmp_path: Path) -> None:
    w = UlogWriter(io.BytesIO())
    with pytest.raises(WriteError):
        w.add_subscription("missing")
    w.add_format("a:uint64_t timestamp;float x;")
    with pytest.raises(WriteError):
        w.add_format("a:uint64_t timestamp;double x;")
    ch = w.add_subscription("a")
    with pytest.raises(WriteError):
        w.write(ch, b"\0" * 3, 0)
    w.close()
    with pytest.raises(WriteError):
        w.write(ch, b"\0" * 12, 0)


def test_stream_target() -> None:
    buf = io.BytesIO()
    with UlogWriter(buf) as w:
        w.add_format("a:uint64_t timestamp;float x;")
        ch = w.add_subscription("a")
        w.write(ch, np.array([(7, 1.5)], dtype=[("t", "<u8"), ("x", "<f4")]).tobytes(), 7000)
    with polybag.open(buf.getvalue()) as r:
        assert r.topic_columns("a")["x"][0] == 1.5
        assert r.summary.start_time == 7000


# --- random formats ---------------------------------------------------------------------
BASE = [
    "int8_t",
    "uint8_t",
    "int16_t",
    "uint16_t",
    "int32_t",
    "uint32_t",
    "int64_t",
    "uint64_t",
    "float",
    "double",
    "bool",
    "char",
]


@st.composite
def formats(draw: st.DrawFn) -> tuple[list[str], str]:
    """A message type with a nested type (defined after it), arrays and padding."""
    inner_fields = draw(st.lists(st.tuples(st.sampled_from(BASE), st.integers(0, 3)), min_size=1, max_size=4))
    inner = "inner:" + "".join(
        f"{t}[{n}] f{i};" if n else f"{t} f{i};" for i, (t, n) in enumerate(inner_fields)
    )
    fields = draw(st.lists(st.tuples(st.sampled_from(BASE + ["inner"]), st.integers(0, 3)), max_size=5))
    ts_type = draw(st.sampled_from(["uint64_t", "uint64_t", "uint32_t", "uint16_t", "uint8_t"]))
    parts = [f"{ts_type} timestamp;"] + [
        f"{t}[{n}] g{i};" if n else f"{t} g{i};" for i, (t, n) in enumerate(fields)
    ]
    if draw(st.booleans()):
        parts.insert(1, "uint8_t[2] _padding0;")
    if draw(st.booleans()):
        parts.append("uint8_t[3] _padding1;")
    return ["top:" + "".join(parts), inner], ts_type


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(formats(), st.integers(1, 30), st.integers(0, 2**32 - 1))
def test_random_formats_round_trip(fm: tuple[list[str], str], n: int, seed: int) -> None:
    texts, ts_type = fm
    fdefs = {f.name: f for f in map(parse_format, texts)}
    utype = compile_type("top", fdefs)
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, size=(n, utype.min_size), dtype=np.uint8)
    arr = raw.view(utype.dtype).reshape(-1).copy()
    width = {"uint64_t": 8, "uint32_t": 4, "uint16_t": 2, "uint8_t": 1}[ts_type]
    arr["timestamp"] = np.sort(rng.integers(0, 1 << (8 * width - 1), n)).astype(arr["timestamp"].dtype)
    cols = {k: arr[k] for k in utype.column_names()}
    buf = io.BytesIO()
    with UlogWriter(buf) as w:
        for t in texts:
            w.add_format(t)
        ch = w.write_columns("top", cols)
        assert ch == n
    data = buf.getvalue()
    with polybag.open(data) as r:
        got = r.topic_columns("top")
        assert list(got) == list(cols)
        for k in cols:
            assert np.array_equal(got[k], cols[k], equal_nan=True), k
        msgs = list(r.messages(order="file"))
        assert len(msgs) == n
        codec = msgs[0].codec()
        # encode(decode(x)) keeps every number (char[] decode to text, bool to True/False)
        lossy = {f.name for f in utype.flat if f.type in ("char", "bool")}
        for m in msgs[:3]:
            again = codec.encode(codec.to_dict(m.data))
            flat = codec.to_flat_dict(again)
            for k, v in codec.to_flat_dict(m.data).items():
                if k not in lossy:
                    assert (flat[k] == v) or (v != v and flat[k] != flat[k]), k
        assert codec_for_schema(msgs[0].channel.schema).type.min_size == utype.min_size
    if ts_type == "uint64_t":
        import tempfile

        with tempfile.NamedTemporaryFile(suffix=".ulg") as f:
            f.write(data)
            f.flush()
            u = pyulog.ULog(f.name)
        d = u.get_dataset("top")
        for k in cols:
            assert np.array_equal(d.data[k], cols[k], equal_nan=True), k


def test_sync_messages_and_model_only_conversion(tmp_path: Path) -> None:
    src = CORPORA / "ulog" / "sample_log_small.ulg"
    out = tmp_path / "sync.ulg"
    with polybag.open(src) as r, UlogWriter(out, sync_interval=100) as w:
        n = 0
        for m in r.messages(topics=["vehicle_attitude", "log_message"], order="file"):
            w.write_message(m)
            n += 1
    with polybag.open(out) as r2, polybag.open(src) as r:
        assert r2.ulog.sync_count > 0
        assert r2.summary.message_count == n
        assert {c.topic for c in r2.summary.channels.values()} == {"vehicle_attitude", "log_message"}
        a = r.topic_columns("vehicle_attitude")
        b = r2.topic_columns("vehicle_attitude")
        for k in a:
            assert np.array_equal(a[k], b[k], equal_nan=True)
        assert r2.ulog.logged_messages == r.ulog.logged_messages
    u = pyulog.ULog(str(out))
    assert not u.file_corruption
    assert len(u.get_dataset("vehicle_attitude").data["timestamp"]) == len(a["timestamp"])


def test_writer_refuses_other_encodings() -> None:
    from polybag.errors import UnsupportedError

    w = UlogWriter(io.BytesIO())
    with pytest.raises(UnsupportedError):
        w.add_schema("std_msgs/String", "ros1msg", b"string data")
    sch = w.add_schema("a", "ulog", b"a:uint64_t timestamp;float x;")
    with pytest.raises(UnsupportedError):
        w.add_channel("/a", "cdr", sch)
    ch = w.add_channel("a", "ulog", sch, {"multi_id": "2"})
    assert ch.metadata["multi_id"] == "2"
    w.close()


def test_codec_flat_and_nested_encode() -> None:
    fdefs = {
        f.name: f
        for f in map(
            parse_format, ["top:uint64_t timestamp;float[2] a;inner n;char[3] s;", "inner:int16_t k;bool on;"]
        )
    }
    t = compile_type("top", fdefs)
    flat = t.encode({"timestamp": 5, "a[1]": 2.5, "n.k": -3, "n.on": 1, "s[0]": ord("h")})
    nested = t.encode({"timestamp": 5, "a": [0, 2.5], "n": {"k": -3, "on": True}, "s": "h"})
    assert flat == nested
    assert t.to_dict(flat) == {"timestamp": 5, "a": [0.0, 2.5], "n": {"k": -3, "on": True}, "s": "h"}
    assert t.to_dict(flat, flat=True)["n.k"] == -3
    obj = t.decode(flat)
    assert obj.n.k == -3 and obj.a[1] == 2.5
    with pytest.raises(polybag.DecodeError):
        t.decode(flat[:5])


def _formats(u) -> dict[str, list[tuple[str, int, str]]]:  # type: ignore[no-untyped-def]
    return {k: list(v.fields) for k, v in u.message_formats.items()}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_copy_keeps_every_format_and_sync(path: Path, tmp_path: Path) -> None:
    """ULog -> ULog keeps formats no subscription uses and every sync message, in place."""
    from polybag import ops

    out = tmp_path / "copy.ulg"
    ops.convert(path, out)
    a, b = pyulog.ULog(str(path)), pyulog.ULog(str(out))
    assert _formats(b) == _formats(a)
    assert len(b.message_formats) == len(a.message_formats)
    assert b._sync_seq_cnt == a._sync_seq_cnt
    with polybag.open(path) as r, polybag.open(out) as r2:
        assert set(r.ulog.formats) == set(a.message_formats)
        assert r.ulog.sync_count == len(r.ulog.sync_offsets) == a._sync_seq_cnt
        assert r2.ulog.sync_count == r.ulog.sync_count
        # each sync follows the same data (the largest timestamp before it is the same)
        assert r2.ulog.syncs == r.ulog.syncs
    # the writer alone, from the model: same result
    out2 = tmp_path / "model.ulg"
    with polybag.open(path) as r, UlogWriter(out2) as w:
        w.copy_extras(r.ulog)
        for m in r.messages(order="file"):
            w.write_message(m)
    c = pyulog.ULog(str(out2))
    assert _formats(c) == _formats(a) and c._sync_seq_cnt == a._sync_seq_cnt
    # and without them when asked
    out3 = tmp_path / "bare.ulg"
    with polybag.open(path) as r, UlogWriter(out3) as w:
        w.copy_extras(r.ulog, formats=False, syncs=False)
        for m in r.messages(order="file"):
            w.write_message(m)
    d = pyulog.ULog(str(out3))
    assert d._sync_seq_cnt == 0
    assert set(d.message_formats) <= set(a.message_formats)
