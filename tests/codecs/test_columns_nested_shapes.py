"""Nested shapes in topic columns and their Arrow / pandas tables: fixed arrays (numbers,
strings, messages, times, bytes), sequences (numbers, strings, messages, times, bytes, empty),
nested messages, bools, times and durations, in ROS 1 (bag) and ROS 2 (CDR MCAP, rosbag2
sqlite3): every cell compared with a brute-force per-message decode (``codec.to_dict`` walked
with the definition), the Arrow types asserted, hypothesis over generated values."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polybag
from polybag.codecs import codec_for
from polybag.codecs.cdr import codec_for_type as cdr_codec
from polybag.codecs.columns import columns_to_arrow, lists_of_arrays
from polybag.codecs.columns_layout import FIXED_SPLIT, TIME_TYPES
from polybag.codecs.definition_model import PRIMITIVE_FORMATS
from polybag.codecs.ros1 import codec_for_type as ros1_codec
from polybag.errors import PolybagWarning

pa = pytest.importorskip("pyarrow")
pd = pytest.importorskip("pandas")

CORPORA = Path(__file__).resolve().parents[2].parent / "shared" / "corpora"
SEP = "\n" + "=" * 80 + "\nMSG: "
POINT = "float64 x\nfloat64 y\nfloat64 z\n"
BODY = """float64[3] fa
int16[2] fi
string[2] fs
geometry_msgs/Point[2] fm
float32[] va
int32[] vi
uint64[] vu
string[] vs
geometry_msgs/Point[] vm
{pkg}Inner[] vinner
geometry_msgs/Pose pose
bool b
bool[] vb
bool[2] fb
{time} t
{duration} d
{time}[] vt
{time}[2] ft
uint8[] u8
uint8[4] u8f
float32[70] big
int8[] empty_always
"""
INNER = """{time} t
float32[] a
uint8[] u
uint8[2] u2
string s
int16[3] f
geometry_msgs/Point[2] p
geometry_msgs/Point[] q
{duration} d
bool b
string[] ss
"""
POSE = "geometry_msgs/Point position\ngeometry_msgs/Quaternion orientation\n"
QUAT = "float64 x\nfloat64 y\nfloat64 z\nfloat64 w\n"
ROS1 = {"time": "time", "duration": "duration", "pkg": "t/"}
ROS2 = {"time": "builtin_interfaces/Time", "duration": "builtin_interfaces/Duration", "pkg": "t/msg/"}


def definition(ros2: bool) -> str:
    k = ROS2 if ros2 else ROS1
    head = ("std_msgs/Header header\n" if ros2 else "Header header\n") + BODY.format(**k)
    header = "builtin_interfaces/Time stamp\nstring frame_id\n" if ros2 else "uint32 seq\ntime stamp\nstring frame_id\n"
    parts = [
        head,
        ("std_msgs/msg/Header\n" if ros2 else "std_msgs/Header\n") + header,
        f"{k['pkg']}Inner\n" + INNER.format(**k),
        ("geometry_msgs/msg/Point\n" if ros2 else "geometry_msgs/Point\n") + POINT,
        ("geometry_msgs/msg/Pose\n" if ros2 else "geometry_msgs/Pose\n") + POSE,
        ("geometry_msgs/msg/Quaternion\n" if ros2 else "geometry_msgs/Quaternion\n") + QUAT,
    ]
    if ros2:
        parts += ["builtin_interfaces/msg/Time\nint32 sec\nuint32 nanosec\n", "builtin_interfaces/msg/Duration\nint32 sec\nuint32 nanosec\n"]
    return SEP.join(parts)


def codec(ros2: bool) -> Any:
    return cdr_codec("t/msg/Shapes", definition(ros2)) if ros2 else ros1_codec("t/Shapes", definition(ros2))


# --- values ---------------------------------------------------------------------------------------
def _time(ros2: bool, sec: int, ns: int, signed: bool = False) -> dict[str, int]:
    return {"sec": sec, "nanosec" if ros2 else "nsec": ns}


def _point(i: float) -> dict[str, float]:
    return {"x": float(i), "y": -float(i), "z": 0.5 * i}


def sample(i: int, ros2: bool, k: int | None = None) -> dict[str, Any]:
    """A message with sequences of ``k`` items (default ``i % 4``)."""
    k = i % 4 if k is None else k
    return {
        "header": {"stamp": _time(ros2, 100 + i, 7 * i), "frame_id": "f" * (i % 3), **({} if ros2 else {"seq": i})},
        "fa": [i, 2.5, -1.0], "fi": [-i, i], "fs": ["a" * k, "ü" * (i % 2)], "fm": [_point(i), _point(-i)],
        "va": [0.25 * j for j in range(k)], "vi": list(range(-k, 0)), "vu": [2**63 + j for j in range(k)],
        "vs": [f"s{j}" for j in range(k)], "vm": [_point(j) for j in range(k)],
        "vinner": [
            {"t": _time(ros2, j, j + 1), "a": [1.5] * j, "u": bytes(range(j)), "u2": bytes([j, 9]), "s": "q" * j,
             "f": [j, -j, 3], "p": [_point(j), _point(2 * j)], "q": [_point(7)] * j,
             "d": {"sec": -j, ("nanosec" if ros2 else "nsec"): 5}, "b": bool(j % 2), "ss": ["x"] * j}
            for j in range(k)
        ],
        "pose": {"position": _point(i), "orientation": {"x": 0.0, "y": 0.0, "z": 0.0, "w": 1.0}},
        "b": bool(i % 2), "vb": [True, False, True][:k], "fb": [True, bool(i % 2)],
        "t": _time(ros2, 1_700_000_000 + i, 999_999_999), "d": {"sec": -i, ("nanosec" if ros2 else "nsec"): 3},
        "vt": [_time(ros2, j, j) for j in range(k)], "ft": [_time(ros2, i, 1), _time(ros2, 2, i)],
        "u8": bytes(range(k * 3)), "u8f": bytes([i % 256, 1, 2, 3]), "big": [float(j) for j in range(70)],
        "empty_always": [],
    }  # fmt: skip


# --- the oracle: the per-message decode walked with the definition ----------------------------------
def _norm(x: Any) -> Any:
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, dict):
        return {k: _norm(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_norm(v) for v in x]
    return x


def _ns(t: dict[str, int]) -> int:
    return int(t["sec"]) * 10**9 + int(t.get("nsec", t.get("nanosec", 0)))


def expected_cells(compiler: Any, type_name: str, d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{column: cell}`` of one decoded message (``codec.to_dict``) as the columns name them."""
    out: dict[str, Any] = {}
    for f in compiler.msgdef(type_name).fields:
        t, name, v = f.type, prefix + f.name, d[f.name]
        base = t.base
        message = base not in PRIMITIVE_FORMATS and base not in TIME_TYPES and base not in ("string", "wstring")
        if t.array is None:
            if message:
                out.update(expected_cells(compiler, base, v, name + "."))
            else:
                out[name] = _ns(v) if base in TIME_TYPES else v
        elif t.array < 0:
            out[name] = _norm(v)
        elif base in PRIMITIVE_FORMATS and t.array > FIXED_SPLIT:
            out[name] = _norm(v)
        else:
            for i in range(t.array):
                if message:
                    out.update(expected_cells(compiler, base, v[i], f"{name}[{i}]."))
                else:
                    out[f"{name}[{i}]"] = _ns(v[i]) if base in TIME_TYPES else _norm(v[i])
    return out


def check_table(r: Any, topic: str) -> None:
    """Columns, Arrow and pandas of ``topic`` against the per-message decode."""
    msgs = list(r.messages(topics=[topic]))
    c = codec_for(msgs[0].channel) if msgs else None
    cols = r.topic_columns(topic)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing left out
        table = r.to_arrow(topic)
        lists = r.to_arrow(topic, arrays="lists")
    assert lists.num_rows == table.num_rows
    df = r.to_pandas(topic)
    assert table.num_rows == len(msgs) == len(df)
    if c is None:
        return
    compiler = c.compiler("<") if callable(c.compiler) else c.compiler
    for i, m in enumerate(msgs):
        want = expected_cells(compiler, c.type_name, c.to_dict(m.data))
        assert set(want) == set(cols) - {"log_time"}
        for name, cell in want.items():
            assert _norm(cols[name][i]) == cell, (topic, name, i)
            assert table.column(name)[i].as_py() == cell, (topic, name, i)
            got = df[name].iloc[i]
            assert _norm(got) == cell, (topic, name, i)


def check_types(table: Any, ros2: bool) -> None:
    s = table.schema
    time_struct = pa.struct([("sec", pa.int32()), ("nanosec", pa.uint32())]) if ros2 else pa.struct([("sec", pa.uint32()), ("nsec", pa.uint32())])
    dur_struct = pa.struct([("sec", pa.int32()), ("nanosec", pa.uint32())]) if ros2 else pa.struct([("sec", pa.int32()), ("nsec", pa.int32())])
    point = pa.struct([("x", pa.float64()), ("y", pa.float64()), ("z", pa.float64())])
    assert s.field("va").type == pa.list_(pa.float32())
    assert s.field("vi").type == pa.list_(pa.int32())
    assert s.field("vu").type == pa.list_(pa.uint64())
    assert s.field("vb").type == pa.list_(pa.bool_())
    assert s.field("vs").type == pa.list_(pa.string())
    assert s.field("vm").type == pa.list_(point)
    assert s.field("vt").type == pa.list_(time_struct)
    assert s.field("u8").type == pa.binary()
    assert s.field("empty_always").type == pa.list_(pa.int8())
    inner = s.field("vinner").type.value_type
    assert inner == pa.struct([
        ("t", time_struct), ("a", pa.list_(pa.float32())), ("u", pa.binary()), ("u2", pa.binary(2)), ("s", pa.string()),
        ("f", pa.list_(pa.int16(), 3)), ("p", pa.list_(point, 2)), ("q", pa.list_(point)), ("d", dur_struct),
        ("b", pa.bool_()), ("ss", pa.list_(pa.string())),
    ])  # fmt: skip
    assert s.field("header.frame_id").type == pa.string() and s.field("fs[1]").type == pa.string()
    assert s.field("t").type == pa.int64() and s.field("d").type == pa.int64() and s.field("ft[1]").type == pa.int64()
    assert s.field("fa[2]").type == pa.float64() and s.field("fi[0]").type == pa.int16()
    assert s.field("fm[1].z").type == pa.float64() and s.field("pose.orientation.w").type == pa.float64()
    assert s.field("b").type == pa.bool_() and s.field("fb[0]").type == pa.bool_()
    assert s.field("u8f[3]").type == pa.uint8()
    assert s.field("big").type == pa.list_(pa.float32(), 70)


def check_lists(r: Any, topic: str) -> None:
    """``arrays="lists"``: each fixed array of numbers, strings, times one 2-D column."""
    cols = r.topic_columns(topic)
    lists = r.topic_columns(topic, arrays="lists")
    n = len(cols["log_time"])
    for name, width in (("fa", 3), ("fi", 2), ("fs", 2), ("fb", 2), ("ft", 2), ("u8f", 4)):
        assert lists[name].shape == (n, width), name
        assert not any(f"{name}[{i}]" in lists for i in range(width))
        for i in range(width):
            assert lists[name][:, i].tolist() == cols[f"{name}[{i}]"].tolist()
    # a fixed array of messages: one 2-D column of dicts
    assert lists["fm"].shape == (n, 2) and not any(k.startswith("fm[") for k in lists)
    for row in range(n):
        for i in range(2):
            assert _norm(lists["fm"][row, i]) == {a: cols[f"fm[{i}].{a}"][row].item() for a in "xyz"}
    assert list(lists)[:3] == ["log_time", *[k for k in lists if k.startswith("header.")][:2]]
    t = r.to_arrow(topic, arrays="lists")
    assert t.schema.field("fa").type == pa.list_(pa.float64(), 3)
    assert t.schema.field("fs").type == pa.list_(pa.string(), 2)
    assert t.schema.field("u8f").type == pa.list_(pa.uint8(), 4)
    assert t.schema.field("ft").type == pa.list_(pa.int64(), 2)
    if n:
        assert t.schema.field("fm").type == pa.list_(pa.struct([("x", pa.float64()), ("y", pa.float64()), ("z", pa.float64())]), 2)
        assert t.column("fm").to_pylist() == [[_norm(x) for x in row] for row in lists["fm"]]
    assert t.column("fs").to_pylist() == [[a, b] for a, b in zip(cols["fs[0]"].tolist(), cols["fs[1]"].tolist())]
    df = r.to_pandas(topic, arrays="lists")
    assert [list(x) for x in df["fa"]] == lists["fa"].tolist()
    # the default is unchanged
    assert list(r.topic_columns(topic)) == list(cols)


def write(tmp_path: Path, fmt: str, values: list[dict[str, Any]]) -> Path:
    ros2 = fmt != "bag"
    c = codec(ros2)
    path = tmp_path / {"bag": "s.bag", "mcap": "s.mcap", "rosbag2": "rb2"}[fmt]
    opts: dict[str, Any] = {"mcap": {"profile": "ros2"}, "rosbag2": {"format": "rosbag2", "storage": "sqlite3"}}.get(fmt, {})
    with polybag.Writer(path, **opts) as w:
        name = "t/msg/Shapes" if ros2 else "t/Shapes"
        ch = w.add_channel("/s", "cdr" if ros2 else "ros1", w.add_schema(name, "ros2msg" if ros2 else "ros1msg", definition(ros2).encode()))
        for i, v in enumerate(values):
            w.write(ch, c.encode(v), 1000 + i)
    return path


@pytest.mark.parametrize("fmt", ["bag", "mcap", "rosbag2"])
def test_shapes(tmp_path: Path, fmt: str) -> None:
    values = [sample(i, fmt != "bag") for i in range(9)]
    path = write(tmp_path, fmt, values)
    with polybag.open(path) as r:
        check_table(r, "/s")
        check_types(r.to_arrow("/s"), fmt != "bag")
        check_lists(r, "/s")
        df = r.to_pandas("/s")
        assert isinstance(df["vm"].iloc[2], list) and isinstance(df["vm"].iloc[2][0], dict)
        assert df["vinner"].iloc[3][2]["q"] == [_point(7)] * 2 or _norm(df["vinner"].iloc[3][2]["q"]) == [_point(7)] * 2


@pytest.mark.parametrize("fmt", ["bag", "mcap", "rosbag2"])
def test_all_sequences_empty_keep_their_types(tmp_path: Path, fmt: str) -> None:
    ros2 = fmt != "bag"
    path = write(tmp_path, fmt, [sample(i, ros2, k=0) for i in range(4)])
    with polybag.open(path) as r:
        check_table(r, "/s")
        check_types(r.to_arrow("/s"), ros2)


@pytest.mark.parametrize("fmt", ["bag", "mcap"])
def test_no_messages_typed_too(tmp_path: Path, fmt: str) -> None:
    path = write(tmp_path, fmt, [])
    with polybag.open(path) as r:
        t = r.to_arrow("/s")
        assert t.num_rows == 0 and t.column_names[0] == "log_time"


_f32 = st.floats(width=32, allow_nan=False)
_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=5)


@st.composite
def _values(draw: Any, ros2: bool) -> dict[str, Any]:
    i = draw(st.integers(0, 50))
    v = sample(i, ros2, k=draw(st.integers(0, 3)))
    v["va"] = draw(st.lists(_f32, max_size=5))
    v["vi"] = draw(st.lists(st.integers(-(2**31), 2**31 - 1), max_size=5))
    v["vu"] = draw(st.lists(st.integers(0, 2**64 - 1), max_size=4))
    v["vs"] = draw(st.lists(_text, max_size=4))
    v["fs"] = draw(st.lists(_text, min_size=2, max_size=2))
    v["vm"] = [{"x": x, "y": 0.0, "z": -x} for x in draw(st.lists(st.floats(allow_nan=False), max_size=3))]
    v["u8"] = draw(st.binary(max_size=9))
    v["vb"] = draw(st.lists(st.booleans(), max_size=4))
    v["fa"] = draw(st.lists(st.floats(allow_nan=False), min_size=3, max_size=3))
    return v


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data(), fmt=st.sampled_from(["bag", "mcap", "rosbag2"]), n=st.integers(1, 5))
def test_hypothesis_shapes(tmp_path_factory: pytest.TempPathFactory, data: Any, fmt: str, n: int) -> None:
    ros2 = fmt != "bag"
    values = [data.draw(_values(ros2)) for _ in range(n)]
    path = write(tmp_path_factory.mktemp("h"), fmt, values)
    with polybag.open(path) as r:
        check_table(r, "/s")
        check_types(r.to_arrow("/s"), ros2)


def test_a_column_arrow_cannot_hold_is_named_in_a_warning() -> None:
    odd = np.empty(3, dtype=object)
    odd[:] = [1, "a", {"x": 1}]
    cols = {"log_time": np.arange(3), "fine": np.arange(3.0), "odd": odd}
    with pytest.warns(PolybagWarning, match="topic /j: field odd left out"):
        t = columns_to_arrow(cols, topic="/j")
    assert t.column_names == ["log_time", "fine"]


def test_json_topic_with_mixed_values_warns(tmp_path: Path) -> None:
    path = tmp_path / "j.mcap"
    with polybag.Writer(path) as w:
        ch = w.add_channel("/j", "json", w.add_schema("J", "jsonschema", b"{}"))
        for i, v in enumerate(({"a": 1, "m": 1}, {"a": 2, "m": {"deep": [1, "x"]}}, {"a": 3, "m": "text"})):
            w.write(ch, __import__("json").dumps(v).encode(), 10 + i)
    with polybag.open(path) as r:
        with pytest.warns(PolybagWarning, match="topic /j: field m"):
            t = r.to_arrow("/j")
        assert t.column("a").to_pylist() == [1, 2, 3]


def test_lists_of_arrays_joins_only_whole_arrays() -> None:
    cols = {"a[0]": np.arange(2), "a[1]": np.arange(2) + 5, "b[1]": np.arange(2), "c[1].x": np.arange(2), "a": np.zeros(2)}
    assert list(lists_of_arrays(cols)) == list(cols)  # "a" exists: no join; "b", "c" do not start at 0
    got = lists_of_arrays({"t": np.arange(2), "a[0]": np.arange(2), "a[1]": np.arange(2) + 5, "z": np.ones(2)})
    assert list(got) == ["t", "a", "z"] and got["a"].tolist() == [[0, 5], [1, 6]]
    # messages in messages: m[i].p.q, m[i].v[j], m[i].n[j].w
    flat = {"t": np.arange(2)}
    for i in range(2):
        flat[f"m[{i}].p.q"] = np.array([i, 10 + i], np.int16)
        for j in range(3):
            flat[f"m[{i}].v[{j}]"] = np.array([i * j, -1.0])
        flat[f"m[{i}].n[0].w"] = np.array(["a", "b"], dtype=object)
    got = lists_of_arrays(flat)
    assert list(got) == ["t", "m"] and got["m"].shape == (2, 2)
    assert _norm(got["m"][0, 1]) == {"p": {"q": 1}, "v": [0.0, 1.0, 2.0], "n": [{"w": "a"}]}
    assert _norm(got["m"][1, 1]) == {"p": {"q": 11}, "v": [-1.0, -1.0, -1.0], "n": [{"w": "b"}]}
    assert _norm(got["m"][1, 0]) == {"p": {"q": 10}, "v": [-1.0, -1.0, -1.0], "n": [{"w": "b"}]}
    assert type(got["m"][1, 1]["p"]["q"]) is np.int16  # typed as the column was
    t = columns_to_arrow(got)
    assert t.schema.field("m").type == pa.list_(
        pa.struct([("p", pa.struct([("q", pa.int16())])), ("v", pa.list_(pa.float64())), ("n", pa.list_(pa.struct([("w", pa.string())])))]), 2
    )


@pytest.mark.skipif(not (CORPORA / "rosbag" / "foxglove-rosbag" / "example.bag").exists(), reason="no corpus bag")
def test_corpus_bag_nested() -> None:
    """A real bag: tf/tfMessage ``transforms`` (a sequence of messages with headers and times)."""
    with polybag.open(CORPORA / "rosbag" / "foxglove-rosbag" / "example.bag") as r:
        t = r.to_arrow("/tf")
        typ = t.schema.field("transforms").type
        assert pa.types.is_list(typ) and pa.types.is_struct(typ.value_type)
        assert typ.value_type.field("header").type.field("stamp").type == pa.struct([("sec", pa.uint32()), ("nsec", pa.uint32())])
        assert typ.value_type.field("child_frame_id").type == pa.string()
        msgs = list(r.messages(topics=["/tf"]))[:50]
        got = t.column("transforms").to_pylist()[:50]
        for m, row in zip(msgs, got):
            assert row == _norm(m.to_dict()["transforms"])


def _marker(j: int, ros2: bool) -> dict[str, Any]:
    ns = "nanosec" if ros2 else "nsec"
    m: dict[str, Any] = {
        "header": {"stamp": {"sec": j, ns: 1}, "frame_id": f"map{j}"}, "ns": "n" * j, "id": j, "type": 4, "action": 0,
        "pose": {"position": _point(j), "orientation": {"x": 0.0, "y": 0.0, "z": 0.0, "w": 1.0}},
        "scale": {"x": 1.0, "y": 2.0, "z": 3.0}, "color": {"r": 0.5, "g": 0.25, "b": 0.0, "a": 1.0},
        "lifetime": {"sec": j, ns: 0}, "frame_locked": bool(j % 2), "points": [_point(k) for k in range(j)],
        "colors": [{"r": 1.0, "g": 0.0, "b": 0.0, "a": 1.0}] * j, "text": "t" * j, "mesh_resource": "",
        "mesh_use_embedded_materials": False,
    }  # fmt: skip
    if ros2:
        m["texture"] = {"header": {"stamp": {"sec": 0, "nanosec": 0}, "frame_id": ""}, "format": "png", "data": bytes(range(j))}
        m["uv_coordinates"] = [{"u": 0.5, "v": 0.25}] * j
        m["mesh_file"] = {"filename": "f", "data": b"\x01" * j}
    return m


@pytest.mark.parametrize("fmt", ["bag", "mcap", "rosbag2"])
def test_marker_and_diagnostic_arrays(tmp_path: Path, fmt: str) -> None:
    """The usual sequences of messages: MarkerArray ``markers``, DiagnosticArray ``status``."""
    from polybag.codecs.ros1 import definition_for as ros1_definition
    from polybag.codecs.ros2.definitions import definition_for as ros2_definition

    ros2 = fmt != "bag"
    names = ("visualization_msgs/msg/MarkerArray", "diagnostic_msgs/msg/DiagnosticArray") if ros2 else ("visualization_msgs/MarkerArray", "diagnostic_msgs/DiagnosticArray")
    define = ros2_definition if ros2 else ros1_definition
    make = cdr_codec if ros2 else ros1_codec
    codecs = [make(n, define(n)) for n in names]
    path = tmp_path / {"bag": "m.bag", "mcap": "m.mcap", "rosbag2": "mrb2"}[fmt]
    opts: dict[str, Any] = {"mcap": {"profile": "ros2"}, "rosbag2": {"format": "rosbag2", "storage": "sqlite3"}}.get(fmt, {})
    ns = "nanosec" if ros2 else "nsec"
    with polybag.Writer(path, **opts) as w:
        chans = [
            w.add_channel(t, "cdr" if ros2 else "ros1", w.add_schema(n, "ros2msg" if ros2 else "ros1msg", define(n).encode()))
            for t, n in zip(("/markers", "/diag"), names)
        ]
        for i in range(6):
            w.write(chans[0], codecs[0].encode({"markers": [_marker(j, ros2) for j in range(i % 4)]}), 10 + i)
            status = [
                {"level": j % 3, "name": f"n{j}", "message": "ok", "hardware_id": "hw",
                 "values": [{"key": f"k{k}", "value": str(k)} for k in range(j)]}
                for j in range(i % 3)
            ]  # fmt: skip
            w.write(chans[1], codecs[1].encode({"header": {"stamp": {"sec": i, ns: 0}, "frame_id": "d"}, "status": status}), 10 + i)
    with polybag.open(path) as r:
        for topic in ("/markers", "/diag"):
            check_table(r, topic)
        t = r.to_arrow("/markers")
        marker = t.schema.field("markers").type
        assert pa.types.is_list(marker) and pa.types.is_struct(marker.value_type)
        assert marker.value_type.field("points").type == pa.list_(pa.struct([("x", pa.float64()), ("y", pa.float64()), ("z", pa.float64())]))
        assert marker.value_type.field("text").type == pa.string()
        if ros2:
            assert marker.value_type.field("uv_coordinates").type == pa.list_(pa.struct([("u", pa.float32()), ("v", pa.float32())]))
            assert marker.value_type.field("mesh_file").type.field("data").type == pa.binary()
        d = r.to_arrow("/diag").schema.field("status").type.value_type
        assert d.field("values").type == pa.list_(pa.struct([("key", pa.string()), ("value", pa.string())]))
        df = r.to_pandas("/diag")
        assert df["status"].iloc[2][1]["values"] == [{"key": "k0", "value": "0"}]


def test_arrow_types_of_hostile_definitions_stay_small() -> None:
    """Huge fixed arrays of messages without strings or sequences are not looped over; a
    type of too many columns is refused before anything is typed."""
    from polybag.codecs.columns_export import arrow_types
    from polybag.codecs.definition_limits import MsgDefError

    empty = ros1_codec("t/E", "t/Empty[100000] e\nt/Pt[3] p\nfloat32[] v\n" + SEP + "t/Empty\n" + SEP + "t/Pt\nfloat64 x\n")
    assert arrow_types(empty) == {"v": pa.list_(pa.float32())}
    deep = ros1_codec("t/D", "t/S[3] s\n" + SEP + "t/S\nstring name\nint8[] k\n")
    assert arrow_types(deep) == {
        **{f"s[{i}].name": pa.string() for i in range(3)},
        **{f"s[{i}].k": pa.list_(pa.int8()) for i in range(3)},
    }
    wide = ros1_codec("t/W", "t/S[40000] s\n" + SEP + "t/S\nstring name\nint8[] k\n")
    with pytest.raises(MsgDefError, match="columns"):
        arrow_types(wide)
