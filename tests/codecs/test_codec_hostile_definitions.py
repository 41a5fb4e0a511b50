"""Issue 12, "tracebacks instead of errors": hostile message definitions give a polybag error or
a correct decode, never a Python traceback.

Covered for ROS 1 bags, MCAP ``ros1msg`` and MCAP ``ros2msg``/``ros2idl`` schemas, through the
library (``m.decode()``, ``m.to_dict()``, ``topic_columns``/``to_pandas``, encode) and the CLI
(``cat --json``, ``export`` csv/parquet, ``info``, ``check``):

- a 5,000-deep chain of nested types (refused past ``MAX_DEPTH`` levels; decoded at the limit);
- a repeated field name (refused, naming the type and the field);
- field names like the generated classes' own members, keywords, builtins, unicode and
  punctuation (decoded; the attribute, dict key and column keep the name as written);
- constants, type and package names that would be code if pasted into generated source;
- self-referencing and cyclic definitions, and definitions that unfold exponentially;
- random names and nesting (hypothesis): a round trip or a polybag error, never anything else.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import polybag
from polybag.cli import main
from polybag.codecs.cdr import codec_for_type as cdr_codec
from polybag.codecs.columns import payload_columns
from polybag.codecs.definition_limits import MAX_DEPTH, MAX_FIELDS, MsgDefError
from polybag.codecs.msg_parser import field_name_problem, parse_full
from polybag.codecs.ros1 import codec_for_type as ros1_codec
from polybag.codecs.ros1 import compute_md5
from polybag.codecs.serde.compiler import plain_name
from polybag.errors import DecodeError, PolybagError

SEP = "=" * 80
CDR_LE = b"\x00\x01\x00\x00"
KINDS = ["bag", "mcap-ros1", "mcap-ros2"]


# --- helpers ---------------------------------------------------------------------------------
def write_log(path: Path, kind: str, type_name: str, definition: str, payloads: list[bytes]) -> Path:
    """A bag (ros1msg), an MCAP with a ros1msg schema or one with a ros2msg schema (CDR)."""
    if kind == "bag":
        path = path.with_suffix(".bag")
    else:
        path = path.with_suffix(".mcap")
    encoding, message_encoding = ("ros2msg", "cdr") if kind == "mcap-ros2" else ("ros1msg", "ros1")
    metadata = {"md5sum": "*"} if message_encoding == "ros1" else {}
    with polybag.Writer(str(path)) as w:
        schema = w.add_schema(type_name, encoding, definition.encode())
        ch = w.add_channel("/t", message_encoding, schema, metadata)
        for i, p in enumerate(payloads):
            w.write(ch, p, 1_000 + i, 1_000 + i, i)
    return path


def codec_for(kind: str, type_name: str, definition: str) -> Any:
    if kind == "mcap-ros2":
        return cdr_codec(type_name, definition)
    return ros1_codec(type_name, definition)


def cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run the CLI in-process: an escaping exception fails the test by itself."""
    rc = main(args)
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return rc, out, err


def chain(levels: int, field: str = "{T} x", leaf: str = "int32 v\nstring s\n") -> str:
    """A definition of ``levels`` nested types: pkg/T0 (main) -> pkg/T1 -> ... -> the leaf type."""
    parts = [field.format(T="pkg/T1") + "\n"]
    for i in range(1, levels - 1):
        parts.append(f"{SEP}\nMSG: pkg/T{i}\n" + field.format(T=f"pkg/T{i + 1}") + "\n")
    parts.append(f"{SEP}\nMSG: pkg/T{levels - 1}\n{leaf}")
    return "".join(parts)


def ros1_string(s: str) -> bytes:
    b = s.encode()
    return len(b).to_bytes(4, "little") + b


def assert_definition_error(kind: str, type_name: str, definition: str, tmp_path: Path,
                            capsys: pytest.CaptureFixture[str], payload: bytes, *words: str) -> None:
    """Library and CLI: a polybag error holding ``words``; never a traceback."""
    with pytest.raises(MsgDefError) as info:
        codec_for(kind, type_name, definition)
    for w in words:
        assert w in str(info.value)
    path = write_log(tmp_path / "log", kind, type_name, definition, [payload, payload])
    with polybag.open(str(path)) as r:
        for m in r.messages():
            with pytest.raises(DecodeError) as info2:
                m.decode()
            assert str(info2.value) == str(info.value)
            with pytest.raises(DecodeError):
                m.to_dict()
        with pytest.raises(PolybagError):
            r.topic_columns("/t")
        with pytest.raises(PolybagError):
            r.to_pandas("/t")
    rc, out, err = cli(["cat", "--json", str(path)], capsys)
    # cat shows undecodable messages as their bytes (base64), one line each, warns once for
    # the topic and exits 1
    lines = [json.loads(x) for x in out.splitlines()]
    assert rc == 1 and len(lines) == 2 and all("data" in x and "message" not in x for x in lines)
    assert err.count("polybag cat: warning: /t: cannot decode") == 1, err
    for fmt in ("csv", "parquet"):
        rc, out, err = cli(["export", str(path), "--format", fmt, "-o", str(tmp_path / fmt)], capsys)
        assert rc != 0
        for w in words:
            assert w in err
    for cmd in ("info", "check"):
        rc, out, err = cli([cmd, str(path)], capsys)
        assert rc in (0, 1)


# --- deep chains -------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_5000_deep_chain_is_an_error(kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = chain(5000)
    payload = (CDR_LE if kind == "mcap-ros2" else b"") + (7).to_bytes(4, "little") + ros1_string("hi")
    assert_definition_error(kind, "pkg/T0", text, tmp_path, capsys, payload,
                            f"nested more than {MAX_DEPTH} levels", "pkg/T0")


def test_5000_deep_chain_cli_subprocess(tmp_path: Path) -> None:
    """The real command line: no traceback on stderr, export exits non-zero with the reason."""
    path = write_log(tmp_path / "deep", "bag", "pkg/T0", chain(5000), [(7).to_bytes(4, "little") + ros1_string("")])
    for args in (["cat", "--json", str(path)], ["export", str(path), "-o", str(tmp_path / "x")],
                 ["info", str(path)], ["check", str(path)]):
        p = subprocess.run([sys.executable, "-m", "polybag", *args], capture_output=True, text=True)
        assert "Traceback" not in p.stderr, p.stderr
        if args[0] == "export":
            assert p.returncode != 0 and "nested more than" in p.stderr


def test_deep_chain_definition_tools_do_not_recurse() -> None:
    """parse, full text, dependencies: iterative; md5 and check: a clear error."""
    text = chain(5000)
    ts = parse_full("pkg/T0", text)
    assert len(ts.dependencies("pkg/T0")) == 4999
    assert ts.full_text("pkg/T0").count("MSG: ") == 4999
    with pytest.raises(MsgDefError, match="nested more than"):
        ts.md5("pkg/T0")
    with pytest.raises(MsgDefError, match="nested more than"):
        compute_md5("pkg/T0", text)
    # a type deep inside the chain is fine on its own
    assert ts.depth(f"pkg/T{5000 - MAX_DEPTH}") == MAX_DEPTH


def _nested(levels: int, leaf: Any, wrap: Callable[[Any], Any]) -> Any:
    v = leaf
    for _ in range(levels - 1):
        v = wrap(v)
    return v


@pytest.mark.parametrize("kind", KINDS)
def test_chain_at_the_depth_limit_decodes_everywhere(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = chain(MAX_DEPTH)
    codec = codec_for(kind, "pkg/T0", text)
    if kind == "mcap-ros2":  # CDR strings: the length counts the NUL
        payload = CDR_LE + (7).to_bytes(4, "little") + (3).to_bytes(4, "little") + b"hi\0"
    else:
        payload = (7).to_bytes(4, "little") + ros1_string("hi")
    expected = _nested(MAX_DEPTH, {"v": 7, "s": "hi"}, lambda v: {"x": v})
    assert codec.to_dict(payload) == expected
    obj = codec.decode(payload)
    assert obj.to_dict() == expected
    assert codec.encode(obj) == payload and codec.encode(expected) == payload
    assert obj == codec.decode(payload) and "pkg/T0(" in repr(obj)
    assert codec.message_class()  # defaults construct 100 levels deep
    leaf = "x." * (MAX_DEPTH - 1)
    path = write_log(tmp_path / "log", kind, "pkg/T0", text, [payload] * 3)
    with polybag.open(str(path)) as r:
        cols = r.topic_columns("/t")
        assert cols[leaf + "v"].tolist() == [7, 7, 7] and cols[leaf + "s"].tolist() == ["hi"] * 3
        assert list(r.to_pandas("/t")[leaf + "v"]) == [7, 7, 7]
        assert [m.to_dict() for m in r.messages()] == [expected] * 3
    rc, out, _ = cli(["cat", "--json", str(path)], capsys)
    assert rc == 0 and [json.loads(x)["message"] for x in out.splitlines()] == [expected] * 3
    rc, _, _ = cli(["export", str(path), "-o", str(tmp_path / "csv")], capsys)
    assert rc == 0
    with (tmp_path / "csv" / "t.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert [r[leaf + "v"] for r in rows] == ["7"] * 3
    rc, _, _ = cli(["export", str(path), "--format", "parquet", "-o", str(tmp_path / "pq")], capsys)
    assert rc == 0


@pytest.mark.parametrize("field", ["{T}[] x", "{T}[1] x", "{T}[1] x\nint8 k", "{T} x\nstring[9] k", "{T} x\nuint8[2] k", "{T}[] x\n{T}[] y"])
@pytest.mark.parametrize("ros2", [False, True])
def test_deep_shapes_round_trip(field: str, ros2: bool) -> None:
    """Sequences, small and unrolled fixed arrays at depth 50 and at the limit."""
    for levels in (50, MAX_DEPTH):
        text = chain(levels, field, "int32 v\n")
        codec = cdr_codec("pkg/T0", text) if ros2 else ros1_codec("pkg/T0", text)
        obj = codec.message_class()
        data = codec.encode(obj)
        assert codec.decode(data) == obj
        d = codec.to_dict(data)
        assert codec.encode(d) == data and codec.decode(data).to_dict() == obj.to_dict()
        payload_columns(codec, [data, data])
    with pytest.raises(MsgDefError, match="nested more than"):
        ros1_codec("pkg/T0", chain(MAX_DEPTH + 1, field, "int32 v\n"))


def test_exponential_definitions_are_refused_or_bounded() -> None:
    """``T a; T b`` level after level doubles the fields at every level."""
    with pytest.raises(MsgDefError, match="expands to more than"):
        ros1_codec("pkg/T0", chain(60, "{T} a\n{T} b", "int32 v\n"))
    with pytest.raises(MsgDefError, match="expands to more than"):
        cdr_codec("pkg/T0", chain(60, "{T}[1000] a", "int32 v\n"))
    # under the bound: 2**12 leaves, decoded and columned (functions call out past the inline budget)
    codec = ros1_codec("pkg/T0", chain(13, "{T} a\n{T} b", "int32 v\n"))
    data = b"".join(i.to_bytes(4, "little") for i in range(1 << 12))
    obj = codec.decode(data)
    assert obj.b.b.b.b.b.b.b.b.b.b.b.b.v == (1 << 12) - 1 and obj.a.a.a.a.a.a.a.a.a.a.a.b.v == 1
    assert codec.encode(obj) == data and codec.encode(codec.to_dict(data)) == data
    cols = payload_columns(codec, [data])
    assert len(cols) == 1 << 12 and cols["b." * 12 + "v"].tolist() == [(1 << 12) - 1]


def test_empty_types_unfolding_cost_nothing_per_byte() -> None:
    """Zero-byte (empty) messages: bounded objects per sequence, no columns, no per-element walk."""
    # pkg/E0 unfolds into 2**10 - 1 empty messages: a sequence of them is bounded by that size
    tree = chain(10, "{T} a\n{T} b", "").replace("pkg/T", "pkg/E")
    codec = ros1_codec("pkg/Z", f"pkg/E0[] xs\nint32 tail\n{SEP}\nMSG: pkg/E0\n{tree}")
    d = codec.to_dict((50).to_bytes(4, "little") + (5).to_bytes(4, "little"))
    assert len(d["xs"]) == 50 and d["tail"] == 5

    def nodes(v: dict[str, Any]) -> int:
        return 1 + sum(nodes(x) for x in v.values())

    assert nodes(d["xs"][0]) == 2**10 - 1 and d["xs"][0]["a"]["b"]["a"]["b"]["a"]["b"]["a"]["b"]["a"] == {}
    with pytest.raises(DecodeError, match="xs"):
        codec.to_dict((1000).to_bytes(4, "little") + (5).to_bytes(4, "little"))
    cols = payload_columns(codec, [(0).to_bytes(4, "little") + (5).to_bytes(4, "little")] * 2)
    assert list(cols) == ["xs", "tail"] and cols["tail"].tolist() == [5, 5]
    # a fixed array of empty messages: no columns and no walk over its 100000 elements
    big = ros1_codec("pkg/Y", f"pkg/E0[100000] many\nint32 tail\n{SEP}\nMSG: pkg/E0\n")
    cols = payload_columns(big, [(3).to_bytes(4, "little")] * 2)
    assert list(cols) == ["tail"] and cols["tail"].tolist() == [3, 3]
    cols = payload_columns(big, [(3).to_bytes(4, "little"), (4).to_bytes(4, "little") + b""])
    assert cols["tail"].tolist() == [3, 4]


# --- repeated names -----------------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_repeated_field_name_is_an_error(kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    payload = (CDR_LE if kind == "mcap-ros2" else b"") + b"\x01\0\0\0\x02\0\0\0"
    assert_definition_error(kind, "pkg/Dup", "int32 a\nint32 a\n", tmp_path, capsys, payload,
                            "pkg/Dup", "field a", "defined twice")


def test_repeated_name_in_a_nested_type_and_in_idl() -> None:
    text = f"pkg/In x\n{SEP}\nMSG: pkg/In\nfloat64 v\nstring w\nint8 v\n"
    with pytest.raises(MsgDefError, match=r"type pkg/In, field v: field 'v' is defined twice"):
        ros1_codec("pkg/Out", text)
    idl = "module pkg { module msg { struct D { int32 a; int32 b, a; }; }; };"
    with pytest.raises(MsgDefError, match="defined twice"):
        cdr_codec("pkg/msg/D", idl, "ros2idl")


# --- names that are code elsewhere -----------------------------------------------------------
ODD_NAMES = [
    "__msgtype__", "_pb_fill", "__slots__", "__init__", "__class__", "__dict__", "__weakref__",
    "__fieldnames__", "_pb_plain", "__eq__", "__getattribute__", "to_dict", "to_sec", "self", "cls",
    "class", "def", "None", "True", "lambda", "import", "len", "print", "mro", "_a0", "_a1", "_D",
    "_N", "_d", "_o", "pos", "buf", "end", "_at", "ﬁ", "fi", "héllo", "名前", "a-b", "1x", "x'y",
    '"', "\\", "{}", "%s", "');__import__('os')", "plain",
]


def _odd_definition() -> tuple[str, bytes, dict[str, Any]]:
    lines = [f"int32 {n}" for n in ODD_NAMES]
    payload = b"".join(i.to_bytes(4, "little", signed=True) for i in range(len(ODD_NAMES)))
    return "\n".join(lines) + "\n", payload, {n: i for i, n in enumerate(ODD_NAMES)}


def _field(obj: Any, name: str) -> Any:
    if name in ("__class__", "__dict__"):  # names object owns: the value is in the instance dict
        return vars(obj)[name]
    return getattr(obj, name)


@pytest.mark.parametrize("kind", KINDS)
def test_odd_field_names_decode_with_their_names(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, raw, expected = _odd_definition()
    text = text + f"pkg/Sub {ODD_NAMES[0]}_sub\n{SEP}\nMSG: pkg/Sub\nstring class\nfloat64 __slots__\n"
    cdr = kind == "mcap-ros2"
    sub_raw = ros1_string("x") if not cdr else (2).to_bytes(4, "little") + b"x\0" + bytes(-(len(raw) + 6) % 8)
    sub_raw += np.float64(2.5).tobytes()
    payload = (CDR_LE if cdr else b"") + raw + sub_raw
    expected = {**expected, "__msgtype___sub": {"class": "x", "__slots__": 2.5}}
    codec = codec_for(kind, "pkg/Odd", text)
    assert codec.to_dict(payload) == expected
    assert list(codec.to_dict(payload)) == [*ODD_NAMES, "__msgtype___sub"]
    obj = codec.decode(payload)
    for n in ODD_NAMES:
        assert _field(obj, n) == expected[n], n
    assert type(obj).__msgtype__ == "pkg/Odd" and type(obj).__fieldnames__[0] == "__msgtype__"
    assert obj.__msgtype___sub.__slots__ == 2.5 and getattr(obj.__msgtype___sub, "class") == "x"
    # a field named to_dict is the attribute; the method stays reachable on the class
    assert obj.to_dict == expected["to_dict"] and type(obj).to_dict(obj) == expected
    assert obj == codec.decode(payload)
    assert "'__class__'=4" in repr(obj)
    assert codec.encode(obj) == payload and codec.encode(expected) == payload
    cls = codec.message_class
    built = cls(**{n: expected[n] for n in ODD_NAMES}, __msgtype___sub=obj.__msgtype___sub)
    assert codec.encode(built) == payload
    assert codec.encode(cls(*[expected[n] for n in ODD_NAMES], obj.__msgtype___sub)) == payload
    assert codec.encode(cls()) == codec.encode({})
    with pytest.raises(TypeError):
        cls(no_such_field=1)
    path = write_log(tmp_path / "odd", kind, "pkg/Odd", text, [payload, payload])
    with polybag.open(str(path)) as r:
        cols = r.topic_columns("/t")
        for n in ODD_NAMES:
            assert cols[n].tolist() == [expected[n]] * 2
        assert cols["__msgtype___sub.class"].tolist() == ["x", "x"]
        assert list(r.to_pandas("/t").columns)[: len(ODD_NAMES)] == ODD_NAMES
    rc, out, _ = cli(["cat", "--json", str(path)], capsys)
    assert rc == 0 and json.loads(out.splitlines()[0])["message"] == expected
    rc, _, _ = cli(["export", str(path), "-o", str(tmp_path / "csv")], capsys)
    assert rc == 0
    with (tmp_path / "csv" / "t.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [rows[0][n] for n in ODD_NAMES] == [str(expected[n]) for n in ODD_NAMES]
    pq = pytest.importorskip("pyarrow.parquet")
    rc, _, _ = cli(["export", str(path), "--format", "parquet", "--layout", "flat", "-o", str(tmp_path / "pq")], capsys)
    assert rc == 0
    table = pq.read_table(str(tmp_path / "pq" / "t.parquet"))
    assert [table.column(n).to_pylist() for n in ODD_NAMES] == [[expected[n]] * 2 for n in ODD_NAMES]


@pytest.mark.parametrize("name", ["a.b", "c[0]", "x]", "\x00", "a\x1bb", "zw\u200bsp"])
def test_unusable_field_names_are_errors(name: str) -> None:
    with pytest.raises(MsgDefError, match="field name"):
        ros1_codec("pkg/Bad", f"int32 {name}\n")
    with pytest.raises(MsgDefError, match="field name"):
        cdr_codec("pkg/Bad", f"int32 {name}\n")


def test_constants_and_type_names_never_become_code() -> None:
    text = (
        'string FOO=");import os;os._exit(9)#\n'
        "string BAR='''\\n\n"
        "int32 __init__=1\nint32 _pb_fill=2\nint32 __slots__=3\nint32 to_dict=4\nint32 __getattribute__=5\n"
        "int32 OK=6\nint32 v=7\n"
        "int32 v\n"
        "a/b_c x\na_b/c y\n"
        f"{SEP}\nMSG: a/b_c\nint32 first\n{SEP}\nMSG: a_b/c\nfloat64 second\n"
    )
    for name in ['pkg/");import os;os._exit(9)#', "pkg/T\x00x", "pkg/Tÿpe", ""]:
        codec = ros1_codec(name, text)
        payload = (3).to_bytes(4, "little") + (4).to_bytes(4, "little") + np.float64(0.5).tobytes()
        obj = codec.decode(payload)
        # the two nested types whose names once mapped to one generated identifier stay apart
        assert obj.to_dict() == {"v": 3, "x": {"first": 4}, "y": {"second": 0.5}}
        assert type(obj.x).__msgtype__ == "a/b_c" and type(obj.y).__msgtype__ == "a_b/c"
        cls = type(obj)
        assert cls.FOO == '");import os;os._exit(9)#' and cls.OK == 6
        assert obj.v == 3  # the field, not the constant of the same name
        assert cls.__init__ is object.__init__ and callable(cls._pb_fill) and isinstance(cls.__slots__, tuple)
        assert obj.to_dict()["v"] == 3 and codec.encode(obj) == payload
        assert codec.md5sum == compute_md5(name, text)


def test_type_name_characters_in_ros2_and_idl() -> None:
    codec = cdr_codec("pkg/msg/Tÿpe", "pkg/Sübtype inner\nint32 class\n" + SEP + "\nMSG: pkg/Sübtype\nint8 __init__\n")
    data = CDR_LE + b"\x05\0\0\0" + (9).to_bytes(4, "little")
    assert codec.to_dict(data) == {"inner": {"__init__": 5}, "class": 9}
    assert codec.decode(data).inner.__init__ == 5


@pytest.mark.parametrize("idl", [
    "module a {" * 5000 + "struct S { int32 x; };" + "};" * 5000,
    "module p { module msg { struct S { sequence<sequence<int32>> x; }; }; };",
    "module p { module msg { struct S { int32 x[zz]; }; }; };",
    "module p { module msg { struct S { unsigned char x; }; }; };",
    "module p { module msg { struct S { int32 ; }; }; };",
    "module p { module msg { struct S { int32 \"x\"; }; }; };",
    "module p { module msg { struct S { int32 x[99999999999]; }; }; };",
    "module p { module msg { typedef int32 A[2][3]; struct S { A x; }; }; };",
])
def test_bad_idl_is_a_definition_error(idl: str) -> None:
    with pytest.raises(MsgDefError):
        cdr_codec("p/msg/S", idl, "ros2idl")


# --- self reference and cycles ---------------------------------------------------------------
@pytest.mark.parametrize("text", [
    "pkg/R kid\n",
    "pkg/R[] kids\n",
    "R[] kids\n",
    "int32 v\npkg/R[2] kids\n",
    f"pkg/A a\n{SEP}\nMSG: pkg/A\npkg/B b\n{SEP}\nMSG: pkg/B\npkg/A[] a\n",
    f"pkg/A a\n{SEP}\nMSG: pkg/A\npkg/B b\n{SEP}\nMSG: pkg/B\npkg/C c\n{SEP}\nMSG: pkg/C\npkg/B[] b\n",
])
@pytest.mark.parametrize("kind", KINDS)
def test_recursive_definitions_are_errors(
    text: str, kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    payload = (CDR_LE if kind == "mcap-ros2" else b"") + b"\0\0\0\0"
    assert_definition_error(kind, "pkg/R", text, tmp_path, capsys, payload, "recursive message definition")


def test_cycle_message_names_the_loop() -> None:
    text = f"pkg/A a\n{SEP}\nMSG: pkg/A\npkg/B b\n{SEP}\nMSG: pkg/B\npkg/C c\n{SEP}\nMSG: pkg/C\npkg/B[] b\n"
    with pytest.raises(MsgDefError, match=r"pkg/B -> pkg/C -> pkg/B"):
        parse_full("pkg/R", text).check("pkg/R")


def test_definition_number_limits() -> None:
    for text in ("int32[99999999999] x\n", "int32[-1] x\n", "int32[x] x\n"):
        with pytest.raises(MsgDefError):
            ros1_codec("pkg/N", text)
    # an array within MAX_FIELDS of fixed-size message elements is fine
    n = MAX_FIELDS // 4
    codec = ros1_codec("pkg/N", f"pkg/P[{n}] ps\n{SEP}\nMSG: pkg/P\nuint8 a\nuint8 b\n")
    data = bytes(range(256)) * (2 * n // 256)
    d = codec.to_dict(data)
    assert len(d["ps"]) == n and d["ps"][1] == {"a": 2, "b": 3}


# --- hypothesis: random names and nesting ----------------------------------------------------
INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1), "uint8": (0, 2**8 - 1), "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1), "int32": (-(2**31), 2**31 - 1), "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1), "uint64": (0, 2**64 - 1),
}
LEAVES = [*INT_RANGES, "float32", "float64", "bool", "string"]
ROS1_LEAVES = [*LEAVES, "time", "duration"]
# a definition line "type name": the name cannot hold a space, '#' (a comment) or '=' (a constant)
NAME_CHARS = st.characters(blacklist_categories=("Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp"), blacklist_characters="#=")
NAME_KINDS = [
    st.sampled_from(["a.b", "x[0]", "]", "a\x00", "a\u200bb", "\x7f"]),  # names refused
    st.sampled_from(ODD_NAMES),
    st.text(NAME_CHARS, min_size=1, max_size=6),
    st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,6}", fullmatch=True),
]


@st.composite
def field_names(draw: Any) -> str:
    """Mostly usable names (plain, odd, arbitrary text), now and then one that is refused."""
    k = draw(st.integers(0, 19))
    return draw(NAME_KINDS[3 if k < 8 else 1 if k < 12 else 2 if k < 19 else 0])


TYPE_WORDS = st.from_regex(r"[A-Za-z_]\w{0,5}", fullmatch=True)

Spec = dict[str, list[tuple[str, str, int | None]]]  # type -> [(name, base, array)]


@st.composite
def type_specs(draw: Any, ros1: bool) -> tuple[str, Spec]:
    """(main type, {type: fields}): up to 4 types, nested forward (a DAG), now and then a field
    pointing back (a cycle when the main type reaches it)."""
    n = draw(st.integers(1, 4))
    pkg = draw(st.from_regex(r"[a-z][a-z0-9_]{0,5}", fullmatch=True))
    words = draw(st.lists(TYPE_WORDS, min_size=n, max_size=n, unique_by=str.lower))
    types = [f"{pkg}/{w}" for w in words]
    spec: Spec = {}
    for i, t in enumerate(types):
        fields = []
        for _ in range(draw(st.integers(0 if i else 1, 4))):
            name = draw(field_names())
            later = types[i + 1 :]
            back = types[: i + 1]
            choice = draw(st.integers(0, 9))
            if later and choice < 4:
                base = draw(st.sampled_from(later))
            elif choice == 9 and not draw(st.integers(0, 3)):
                base = draw(st.sampled_from(back))
            else:
                base = draw(st.sampled_from(ROS1_LEAVES if ros1 else LEAVES))
            array = draw(st.sampled_from([None, None, -1, 0, 1, 3]))
            fields.append((name, base, array))
        spec[t] = fields
    return types[0], spec


def spec_text(main_type: str, spec: Spec) -> str:
    def lines(t: str) -> str:
        out = []
        for name, base, array in spec[t]:
            suffix = "" if array is None else ("[]" if array < 0 else f"[{array}]")
            out.append(f"{base}{suffix} {name}")
        return "\n".join(out) + "\n"

    parts = [lines(main_type)]
    for t in spec:
        if t != main_type:
            parts.append(f"{SEP}\nMSG: {t}\n{lines(t)}")
    return "".join(parts)


def reaches_cycle(spec: Spec, start: str) -> bool:
    """Whether a cycle of types is reachable from ``start``."""
    state: dict[str, int] = {}  # 1: on the path, 2: done

    def visit(t: str) -> bool:
        state[t] = 1
        for _, b, _ in spec[t]:
            if b in spec and (state.get(b) == 1 or (b not in state and visit(b))):
                return True
        state[t] = 2
        return False

    return visit(start)


def spec_problem(spec: Spec) -> bool:
    for fields in spec.values():
        names = [f[0] for f in fields]
        if len(set(names)) != len(names) or any(field_name_problem(n) for n in names):
            return True
    return False


def draw_value(draw: Any, spec: Spec, base: str, array: int | None, ros1: bool) -> Any:
    if array is not None:
        n = draw(st.integers(0, 2)) if array < 0 else array
        if base == "uint8":
            return draw(st.binary(min_size=n, max_size=n))
        return [draw_value(draw, spec, base, None, ros1) for _ in range(n)]
    if base in INT_RANGES:
        return draw(st.integers(*INT_RANGES[base]))
    if base == "bool":
        return draw(st.booleans())
    if base == "float32":
        return draw(st.floats(width=32, allow_nan=False))
    if base == "float64":
        return draw(st.floats(allow_nan=False))
    if base == "string":
        return draw(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), max_size=5))
    if base in ("time", "duration"):
        lo, hi = INT_RANGES["uint32" if base == "time" else "int32"]
        return {"sec": draw(st.integers(lo, hi)), "nsec": draw(st.integers(lo, hi))}
    if not spec[base] and not ros1:  # CDR: an empty structure holds one placeholder byte
        return {"structure_needs_at_least_one_member": 0}
    return {name: draw_value(draw, spec, b, a, ros1) for name, b, a in spec[base]}


def zero_size(spec: Spec, t: str) -> bool:
    """A ROS 1 type of no bytes: only empty messages and zero-length arrays."""
    return all(a == 0 or (a is None or a > 0) and b in spec and zero_size(spec, b) for _, b, a in spec[t])


def expected_columns(spec: Spec, base: str, value: Any, prefix: str, cdr: bool, out: dict[str, Any]) -> None:
    """Leaf columns of one message (the flattening ``topic_columns`` documents)."""
    fields = spec[base]
    if cdr and not fields:
        out[prefix + "structure_needs_at_least_one_member"] = 0
    for name, b, array in fields:
        v = value[name]
        col = prefix + name
        if not cdr and b in spec and (array is None or array >= 0) and zero_size(spec, b):
            continue  # no bytes, no columns
        if array is not None and array < 0:
            out[col] = None  # an object column: one sequence per message
        elif array is not None:
            if b in spec:
                for i in range(array):
                    expected_columns(spec, b, v[i], f"{col}[{i}].", cdr, out)
            elif b in INT_RANGES or b in ("float32", "float64", "bool"):
                for i in range(array):
                    out[f"{col}[{i}]"] = v[i]
            else:
                for i in range(array):
                    out[f"{col}[{i}]"] = v[i] if b == "string" else v[i]["sec"] * 10**9 + v[i]["nsec"]
        elif b in spec:
            expected_columns(spec, b, v, col + ".", cdr, out)
        elif b in ("time", "duration"):
            out[col] = v["sec"] * 10**9 + v["nsec"]
        else:
            out[col] = v


def check_random(data: Any, ros1: bool) -> None:
    main_type, spec = data.draw(type_specs(ros1))
    text = spec_text(main_type, spec)
    make = (lambda: ros1_codec(main_type, text)) if ros1 else (lambda: cdr_codec(main_type, text))
    if spec_problem(spec) or reaches_cycle(spec, main_type):
        event("refused")
        with pytest.raises(PolybagError):
            make()
        return
    try:
        codec = make()
    except PolybagError as e:  # only a definition that is too big for the limits may be refused
        assert "expands to more than" in str(e), str(e)
        return
    event("decoded" + (" (names not plain)" if not all(map(plain_name, (f[0] for f in spec[main_type]))) else ""))
    value = draw_value(data.draw, spec, main_type, None, ros1)
    payload = codec.encode(value)
    assert codec.to_dict(payload) == value
    obj = codec.decode(payload)
    assert codec.encode(obj) == payload
    assert list(type(obj).to_dict(obj)) == [f[0] for f in spec[main_type]]
    for name, base, array in spec[main_type]:
        if array is None and base in INT_RANGES:
            assert _field(obj, name) == value[name]
    kwargs = {name: _field(obj, name) for name, _, _ in spec[main_type]}
    assert codec.encode(codec.message_class(**kwargs)) == payload
    # columns of equal payloads (the fixed-layout path when they have one) and of two different ones
    value2 = draw_value(data.draw, spec, main_type, None, ros1)
    for values in ([value, value], [value, value2]):
        cols = payload_columns(codec, [codec.encode(v) for v in values])
        for row, v in enumerate(values):
            want: dict[str, Any] = {}
            expected_columns(spec, main_type, v, "", not ros1, want)
            assert set(cols) == set(want)
            for k, x in want.items():
                if x is not None:
                    got = cols[k][row]
                    assert (got.item() if isinstance(got, np.generic) else got) == x, k


HYP = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@HYP
@given(st.data())
def test_random_names_and_nesting_ros1(data: Any) -> None:
    check_random(data, ros1=True)


@HYP
@given(st.data())
def test_random_names_and_nesting_cdr(data: Any) -> None:
    check_random(data, ros1=False)
