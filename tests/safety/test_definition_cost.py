"""Issue 26, "the cost of compiling message definitions": a definition from a file decides
neither the memory nor the time polybag spends on it.

A 260k-field ``ros2msg`` definition cost 2.5 GB and 76 s to decode one message.  Now every
definition is held to :class:`~polybag.codecs.definition_limits.DefinitionLimits` (text size,
types, fields written, name length, nesting, expansion) and refused past them with a
:class:`~polybag.errors.DecodeError` naming the limit and the type; under them, compiling is
linear in the definition (a diamond of types that doubles at every level is inlined into a
few functions and called from the rest).  The same holds for ROS 1 definitions (bags and
MCAP ``ros1msg``), the columns of a type, ULog formats, and the caches of compiled codecs.

Bounds are measured, never timed: peak traced allocations (tracemalloc), the bytes of Python
source generated, the entries and cost the caches hold.
"""

from __future__ import annotations

import re
import struct
import subprocess
import sys
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polybag
import polybag.codecs as codecs
from polybag.cli import main
from polybag.codecs import cdr, definition_limits, msg_parser
from polybag.codecs import ros1 as ros1_codecs
from polybag.codecs import ros2 as ros2_types
from polybag.codecs.columns import payload_columns
from polybag.codecs.columns_layout import MAX_COLUMNS
from polybag.codecs.ros2 import bundled as ros2_bundled
from polybag.codecs.ros2 import definition_for as ros2_definition_for
from polybag.errors import DecodeError, PolybagError

SEP = "=" * 80
CDR_LE = b"\x00\x01\x00\x00"
MiB = 1 << 20
CORPORA = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpora"


# --- helpers ---------------------------------------------------------------------------------
@contextmanager
def peak_memory() -> Iterator[list[int]]:
    """The peak of traced allocations inside the block (bytes), in ``box[0]`` afterwards."""
    box = [0]
    tracemalloc.start()
    tracemalloc.reset_peak()
    try:
        yield box
    finally:
        box[0] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()


def write_log(path: Path, kind: str, type_name: str, definition: str, payloads: list[bytes]) -> Path:
    """An MCAP with a ros2msg schema (``mcap-ros2``), a ros1msg one (``mcap-ros1``), or a bag."""
    path = path.with_suffix(".bag" if kind == "bag" else ".mcap")
    encoding, message_encoding = ("ros2msg", "cdr") if kind == "mcap-ros2" else ("ros1msg", "ros1")
    metadata = {"md5sum": "*"} if message_encoding == "ros1" else {}
    with polybag.Writer(str(path)) as w:
        schema = w.add_schema(type_name, encoding, definition.encode())
        ch = w.add_channel("/t", message_encoding, schema, metadata)
        for i, p in enumerate(payloads):
            w.write(ch, p, 1_000 + i, 1_000 + i, i)
    return path


def decode_all(path: Path) -> list[Any]:
    with polybag.open(str(path)) as r:
        return [m.decode() for m in r.messages()]


def refused(path: Path, *words: str) -> int:
    """Decoding every message of ``path`` is a DecodeError naming ``words``; the peak memory."""
    with peak_memory() as peak, pytest.raises(DecodeError) as info:
        decode_all(path)
    msg = str(info.value)
    for w in words:
        assert w in msg, msg
    return peak[0]


def cli_cat(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """``polybag cat`` (and ``--json``): no traceback, the reason on stderr; returns stderr."""
    rc = main(["cat", str(path)])
    out, err = capsys.readouterr()
    assert rc == 1 and "Traceback" not in err and "unexpected" not in err
    rc = main(["cat", "--json", str(path)])
    out2, err2 = capsys.readouterr()
    assert "Traceback" not in err2 and "unexpected" not in err2
    return err + err2


def flat(n: int, dialect: str = "ros2") -> tuple[str, bytes]:
    """A type of ``n`` int32 fields, and one message of it."""
    text = "".join(f"int32 f{i}\n" for i in range(n))
    return text, (CDR_LE if dialect == "ros2" else b"") + struct.pack(f"<{n}i", *range(n))


def diamond(levels: int, fan: int = 2, leaf: str = "int32 x\n") -> str:
    """pkg/T0 holds ``fan`` pkg/T1, each ``fan`` pkg/T2 ... : ``fan ** (levels - 1)`` leaves."""
    body = [("".join(f"pkg/T{i + 1} a{k}\n" for k in range(fan)) if i < levels - 1 else leaf) for i in range(levels)]
    return body[0] + "".join(f"{SEP}\nMSG: pkg/T{i}\n{body[i]}" for i in range(1, levels))


def chain(levels: int) -> str:
    body = [f"pkg/T{i + 1} a\nint32 z\n" if i < levels - 1 else "int32 z\n" for i in range(levels)]
    return body[0] + "".join(f"{SEP}\nMSG: pkg/T{i}\n{body[i]}" for i in range(1, levels))


# --- flat: 260k fields -------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["mcap-ros2", "mcap-ros1", "bag"])
def test_260k_flat_fields_refused_naming_the_limit(kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text, payload = flat(260_000, "ros2" if kind == "mcap-ros2" else "ros1")
    path = write_log(tmp_path / "flat", kind, "pkg/msg/Flat" if kind == "mcap-ros2" else "pkg/Flat", text, [payload])
    peak = refused(path, "DefinitionLimits.fields", f"{definition_limits.MAX_DEFINED_FIELDS}", "pkg/")
    # before: 2.5 GB; parsing stops at the limit and nothing is compiled
    assert peak < 48 * MiB, peak
    assert "DefinitionLimits.fields" in cli_cat(path, capsys)


def test_flat_definition_at_the_field_limit_decodes_in_bounded_memory(tmp_path: Path) -> None:
    n = definition_limits.MAX_DEFINED_FIELDS
    text, payload = flat(n)
    path = write_log(tmp_path / "flat", "mcap-ros2", "pkg/msg/Flat", text, [payload, payload])
    with peak_memory() as peak:
        objs = decode_all(path)
    assert [getattr(o, f"f{n - 1}") for o in objs] == [n - 1, n - 1] and objs[0].f7 == 7
    assert peak[0] < 96 * MiB, peak[0]  # linear in the 16k fields (before: about 10 KB per field)
    codec = cdr.codec_for_type("pkg/msg/Flat", text)
    assert codec.encode(codec.decode(payload)) == payload
    assert codec.encode(codec.to_dict(payload)) == payload


# --- diamonds: exponential when inlined ------------------------------------------------------
@pytest.mark.parametrize("kind", ["mcap-ros2", "mcap-ros1"])
def test_30_level_diamond_refused_naming_the_limit(kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_log(tmp_path / "dag", kind, "pkg/T0", diamond(30), [CDR_LE + bytes(8)])
    peak = refused(path, "DefinitionLimits.expanded_fields", "pkg/T0")
    assert peak < 16 * MiB, peak
    assert "DefinitionLimits.expanded_fields" in cli_cat(path, capsys)


@pytest.mark.parametrize("ros2", [True, False])
def test_diamond_under_the_limit_compiles_linearly(ros2: bool) -> None:
    """2**16 leaves from 34 fields: the code generated for every mode is a few hundred KB
    (inlining everything would be 2**16 fields per function at each of the 17 levels)."""
    levels = 17
    text = diamond(levels)
    leaves = 1 << (levels - 1)
    payload = (CDR_LE if ros2 else b"") + struct.pack(f"<{leaves}i", *range(leaves))
    with peak_memory() as peak:
        codec = cdr.codec_for_type("pkg/T0", text) if ros2 else ros1_codecs.codec_for_type("pkg/T0", text)
        obj = codec.decode(payload)
        d = codec.to_dict(payload)
        assert codec.encode(obj) == payload and codec.encode(d) == payload
    node = obj
    for _ in range(levels - 1):
        node = node.a1
    assert node.x == leaves - 1
    compilers = [codec.payload_compiler("<"), codec.compiler("<")] if ros2 else [codec.compiler]
    generated = sum(c.source_bytes for c in compilers)
    assert generated < 4 * MiB, generated
    # memory: the decoded objects (2**16 of them, about 10 MB) and the bounded code, not 2**16 x 17
    assert peak[0] < 160 * MiB, peak[0]


def test_fixed_arrays_of_a_shared_type_compile_linearly() -> None:
    """ROS 1 arrays of a fixed-size type are unpacked with the element inlined whole; 20
    fields of ``pkg/U0[2]`` (a 2**11-leaf diamond) are charged to the same budget."""
    text = "".join(f"pkg/U0[2] e{i}\n" for i in range(20)) + f"{SEP}\nMSG: pkg/U0\n" + diamond(12).replace("pkg/T", "pkg/U")
    leaves = 20 * 2 * (1 << 11)
    payload = struct.pack(f"<{leaves}i", *range(leaves))
    with peak_memory() as peak:
        codec = ros1_codecs.codec_for_type("pkg/Big", text)
        obj = codec.decode(payload)
    node = obj.e19[1]
    for _ in range(11):
        node = node.a1
    assert node.x == leaves - 1
    assert codec.compiler.source_bytes < 2 * MiB, codec.compiler.source_bytes
    assert peak[0] < 128 * MiB, peak[0]


# --- depth, types, text, names ---------------------------------------------------------------
def test_nesting_deeper_than_the_limit_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_log(tmp_path / "deep", "mcap-ros2", "pkg/T0", chain(definition_limits.MAX_DEPTH + 1), [CDR_LE + bytes(4 * 200)])
    refused(path, "nested more than", "DefinitionLimits.depth", "pkg/T0")
    assert "DefinitionLimits.depth" in cli_cat(path, capsys)


def test_too_many_types_refused(tmp_path: Path) -> None:
    n = definition_limits.MAX_TYPES + 1
    text = "int32 x\n" + "".join(f"{SEP}\nMSG: p/T{i}\nint8 v\n" for i in range(n))
    path = write_log(tmp_path / "types", "mcap-ros2", "pkg/T", text, [CDR_LE + bytes(4)])
    peak = refused(path, "DefinitionLimits.types", "pkg/T")
    assert peak < 64 * MiB, peak


def test_text_over_the_limit_refused_before_parsing(tmp_path: Path) -> None:
    text = "int32 x\n" + "# a comment line\n" * (definition_limits.MAX_TEXT_BYTES // 17 + 1)
    assert len(text) > definition_limits.MAX_TEXT_BYTES
    path = write_log(tmp_path / "text", "mcap-ros1", "pkg/T", text, [bytes(4)])
    refused(path, "DefinitionLimits.text_bytes", "pkg/T")
    # the same definition with its comments under the limit is a real (commented) type
    ok = write_log(tmp_path / "ok", "mcap-ros1", "pkg/T", "int32 x\n" + "# c\n" * 100_000, [bytes([7, 0, 0, 0])])
    assert [o.x for o in decode_all(ok)] == [7]


@pytest.mark.parametrize("line", ["int32 {long}", "{long} x", "int32 x\n{sep}\nMSG: pkg/{long}\nint32 y"])
def test_long_names_refused(line: str) -> None:
    text = line.format(long="n" * (definition_limits.MAX_NAME + 1), sep=SEP) + "\n"
    with pytest.raises(DecodeError, match="DefinitionLimits.name_chars"):
        msg_parser.parse_full("pkg/T", text)
    with pytest.raises(DecodeError, match="DefinitionLimits.name_chars"):
        ros2_types.ros2_typeset("pkg/T", text)
    # a field name at the limit is accepted
    assert msg_parser.parse_full("pkg/T", "int32 " + "n" * definition_limits.MAX_NAME).size("pkg/T") == 2


def test_idl_bombs_refused() -> None:
    fields = "".join(f"int32 f{i};\n" for i in range(definition_limits.MAX_DEFINED_FIELDS + 1))
    idl = f"module pkg {{ module msg {{ struct Big {{ {fields} }}; }}; }};\n"
    with peak_memory() as peak, pytest.raises(DecodeError, match="DefinitionLimits.fields"):
        cdr.codec_for_type("pkg/msg/Big", idl, "ros2idl")
    assert peak[0] < 32 * MiB, peak[0]
    structs = "".join(f"struct S{i} {{ int8 v; }};\n" for i in range(definition_limits.MAX_TYPES + 1))
    with pytest.raises(DecodeError, match="DefinitionLimits.types"):
        ros2_types.ros2_typeset("pkg/msg/S0", f"module pkg {{ module msg {{ {structs} }}; }};\n", "ros2idl")
    with pytest.raises(DecodeError, match="DefinitionLimits.name_chars"):
        ros2_types.ros2_typeset("pkg/msg/S", "module " + "m" * 5000 + " { struct S { int8 v; }; };\n", "ros2idl")
    # sequences nested 5000 deep: a RecursionError before, now refused at the second level
    nested = "sequence<" * 5000 + "int32" + ">" * 5000
    with pytest.raises(DecodeError, match="sequences of sequences"):
        cdr.codec_for_type("pkg/msg/S", f"module pkg {{ module msg {{ struct S {{ {nested} x; }}; }}; }};", "ros2idl")


# --- texts that made the parser's regular expressions quadratic --------------------------------
@pytest.mark.parametrize(
    "text",
    [
        "\n" * (2 * MiB) + "int32 x\n",  # the section separator's \s* spanned blank lines
        "int32 x\n" + " \n" * MiB + f"{SEP}\nMSG: pkg/U\nint8 y\n",
        'string[] s ["' + "\\\"" * (MiB // 2) + "\nint32 x\n",  # a default of escaped quotes
        "string[] s [" + " " * MiB + "x'\nint32 x\n",
        "int32" + "\t" * MiB + "[ x\n",
    ],
)
def test_pathological_texts_parse_in_linear_time(text: str) -> None:
    """Each of these took hours (quadratic backtracking) at a few MB; now a single pass."""
    for dialect in ("ros1", "ros2"):
        try:
            ts = msg_parser.parse_full("pkg/T", text, dialect)
        except DecodeError as e:
            assert "line" in str(e) or "Limits" in str(e)
            continue
        assert "pkg/T" in ts.types


_OLD_QUOTED = re.compile(r"""\s*("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')\s*""")
_OLD_ARRAY = re.compile(r"^(?P<base>[^\[\]]+?)\s*\[(?P<inner>[^\]]*)\]$")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab \"'\\,[]<=9", max_size=30))
def test_linear_scanners_match_the_old_expressions(text: str) -> None:
    """The scans that replaced two backtracking expressions read what they read."""
    old = _OLD_ARRAY.match(text)
    new = msg_parser._split_array(text)
    assert (old is None) == (new is None)
    if old is not None and new is not None:
        assert (old["base"].strip(), old["inner"]) == (new[0].strip(), new[1])
    closed = [m.group(1) for m in _OLD_QUOTED.finditer(text)]
    if not re.search(r"""["'][^"']*$""", text) or closed == msg_parser._quoted_items(text):
        assert msg_parser._quoted_items(text) == closed


# --- lower limits: the API for less trusted definitions -----------------------------------------
def test_lower_limits_for_less_trusted_definitions() -> None:
    text, payload = flat(3000)
    strict = definition_limits.DEFAULT_LIMITS.lower(fields=2000, depth=8, expanded_fields=5000)
    with pytest.raises(DecodeError, match=r"DefinitionLimits.fields = 2000"):
        ros2_types.check_definition("pkg/msg/Flat", text, limits=strict)
    with pytest.raises(DecodeError, match=r"DefinitionLimits.fields = 2000"):
        cdr.codec_for_type("pkg/msg/Flat", text, limits=strict)
    with pytest.raises(DecodeError, match="DefinitionLimits.depth"):
        ros2_types.check_definition("pkg/T0", chain(9), limits=strict)
    with pytest.raises(DecodeError, match="DefinitionLimits.expanded_fields"):
        ros2_types.check_definition("pkg/T0", diamond(7, fan=5), limits=strict)
    with pytest.raises(DecodeError, match="DefinitionLimits.text_bytes"):
        ros2_types.check_definition("pkg/T", "int8 x\n" * 100, limits=strict.lower(text_bytes=100))
    # the file limits take them all
    assert ros2_types.check_definition("pkg/msg/Flat", text).size("pkg/msg/Flat") == 3001
    assert cdr.codec_for_type("pkg/msg/Flat", text).decode(payload).f2999 == 2999
    ts = ros2_types.check_definition("pkg/T0", chain(8), limits=strict)
    assert ts.depth("pkg/T0") == 8


# --- columns -----------------------------------------------------------------------------------
def test_columns_over_the_limit_refused(tmp_path: Path) -> None:
    """1100 fields of ``uint8[64]``: 70,400 columns (under every definition limit)."""
    n = MAX_COLUMNS // 64 + 76
    text = "".join(f"uint8[64] f{i}\n" for i in range(n))
    path = write_log(tmp_path / "cols", "mcap-ros1", "pkg/C", text, [bytes(64 * n)] * 2)
    with polybag.open(str(path)) as r:
        assert len(next(r.messages()).decode().f0) == 64
        with peak_memory() as peak, pytest.raises(DecodeError, match="MAX_COLUMNS"):
            r.topic_columns("/t")
    assert peak[0] < 32 * MiB, peak[0]
    # a diamond whose columns' names repeat its outer names: bounded the same way
    codec = ros1_codecs.codec_for_type("pkg/T0", diamond(17, leaf="bool x\nbool y\n"))
    with peak_memory() as peak, pytest.raises(DecodeError, match="MAX_COLUMNS"):
        payload_columns(codec, [bytes(1 << 17)] * 2)
    assert peak[0] < 32 * MiB, peak[0]


# --- ULog formats -----------------------------------------------------------------------------
def _ulog(lines: list[str], name: str, payload: bytes) -> bytes:
    out = bytearray(b"ULog\x01\x12\x35\x01" + struct.pack("<Q", 0))

    def msg(kind: str, body: bytes) -> None:
        out.extend(struct.pack("<HB", len(body), ord(kind)) + body)

    msg("B", bytes(40))
    for line in lines:
        msg("F", line.encode())
    msg("A", struct.pack("<BH", 0, 1) + name.encode())
    msg("D", struct.pack("<H", 1) + payload)
    return bytes(out)


def test_ulog_many_large_formats_cost_nothing_until_read(tmp_path: Path) -> None:
    """A 70 KB log: 2000 formats that each unfold into 2**11 fields.  Laying them all out
    (which the reader does to scan the log) used to flatten every one: 4 M fields."""
    levels, k = 12, 2000
    lines = ["big:uint64_t timestamp;n0 a;"] + [f"n{i}:n{i + 1} a;n{i + 1} b;" for i in range(levels - 1)]
    lines += [f"n{levels - 1}:uint8_t v;"] + [f"g{j}:n0 a;uint8_t w;" for j in range(k)]
    leaves = 1 << (levels - 1)
    path = tmp_path / "many.ulg"
    path.write_bytes(_ulog(lines, "big", struct.pack("<Q", 5) + bytes(range(256)) * (leaves // 256)))
    with peak_memory() as peak, polybag.open(str(path)) as r:
        (m,) = list(r.messages())
        d = m.to_dict()
    assert d["timestamp"] == 5
    node = d["a"]
    for _ in range(levels - 1):
        node = node["b"]
    assert node["v"] == 255
    assert peak[0] < 48 * MiB, peak[0]


def test_ulog_huge_formats_refused_naming_the_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = ["big:uint64_t timestamp;n0 a;"] + [f"n{i}:n{i + 1} a;n{i + 1} b;" for i in range(19)] + ["n19:uint8_t v;"]
    path = tmp_path / "huge.ulg"
    path.write_bytes(_ulog(lines, "big", bytes(16)))
    with peak_memory() as peak:
        with pytest.raises(PolybagError, match="more than"):
            with polybag.open(str(path)) as r:
                for m in r.messages():
                    m.decode()
    assert peak[0] < 32 * MiB, peak[0]
    rc = main(["cat", str(path)])
    _, err = capsys.readouterr()
    assert rc != 0 and "more than" in err and "Traceback" not in err


def test_ulog_lazy_layout_matches_the_flattened_one() -> None:
    from polybag.codecs import ulog

    formats = ulog.parse_schema_text(
        "t:uint64_t timestamp;n a;n[2] b;uint8_t[3] _padding0;\nn:float x;_p _padding1;bool[2] y;\n_p:uint8_t q;"
    )
    t = ulog.compile_type("t", formats)
    size, min_size = t.size, t.min_size
    flat = t.flat
    assert min_size == flat[-1].offset + ulog.BASE_TYPES[flat[-1].type][1] and size == 8 + 3 * 7 + 3
    assert [f.name for f in flat][:4] == ["timestamp", "a.x", "a._padding1.q", "a.y[0]"]


# --- other schema encodings ------------------------------------------------------------------------
def test_protobuf_dependency_chain_and_deep_json_schema(tmp_path: Path) -> None:
    """A FileDescriptorSet of 3000 files, each depending on the next, and a JSON schema nested
    100,000 deep: both were "unexpected RecursionError"; now decoded (or a polybag error)."""
    descriptor_pb2 = pytest.importorskip("google.protobuf.descriptor_pb2")
    fds = descriptor_pb2.FileDescriptorSet()
    for i in range(3000):
        f = fds.file.add()
        f.name, f.package = f"f{i}.proto", "p"
        if i + 1 < 3000:
            f.dependency.append(f"f{i + 1}.proto")
        msg = f.message_type.add()
        msg.name = f"M{i}"
        fld = msg.field.add()
        fld.name, fld.number, fld.type, fld.label = "v", 1, fld.TYPE_INT32, fld.LABEL_OPTIONAL
    path = tmp_path / "other.mcap"
    with polybag.Writer(str(path)) as w:
        pb = w.add_channel("/pb", "protobuf", w.add_schema("p.M0", "protobuf", fds.SerializeToString()))
        js = w.add_channel("/js", "json", w.add_schema("J", "jsonschema", b"[" * 100_000))
        w.write(pb, b"\x08\x07", 1, 1, 0)
        w.write(js, b'{"a": 1}', 2, 2, 0)
    with polybag.open(str(path)) as r:
        got = {m.channel.topic: m.to_dict() for m in r.messages()}
    assert got == {"/pb": {"v": 7}, "/js": {"a": 1}}


def test_generated_source_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A last bound on the Python source one compiler generates, named in the error."""
    from polybag.codecs.serde import compiler as serde

    monkeypatch.setattr(serde, "MAX_SOURCE_BYTES", 20_000)
    text, payload = flat(2000, "ros1")
    with pytest.raises(DecodeError, match="MAX_SOURCE_BYTES"):
        ros1_codecs.Ros1Codec(msg_parser.parse_full("pkg/Src", text), "pkg/Src")
    monkeypatch.undo()
    assert ros1_codecs.Ros1Codec(msg_parser.parse_full("pkg/Src", text), "pkg/Src").decode(payload).f1999 == 1999


# --- caches ------------------------------------------------------------------------------------
def test_codec_caches_are_bounded(tmp_path: Path) -> None:
    """300 channels, each with its own 400-field definition: 120k fields compiled, more than
    the caches keep; they keep at most their bounds."""
    path = tmp_path / "many.mcap"
    with polybag.Writer(str(path)) as w:
        for i in range(300):
            text = "".join(f"int16 c{i}_{k}\n" for k in range(400))
            ch = w.add_channel(f"/t{i}", "cdr", w.add_schema(f"pkg/msg/T{i}", "ros2msg", text.encode()))
            w.write(ch, CDR_LE + struct.pack("<400h", *range(400)), 1 + i, 1 + i, 0)
    with polybag.open(str(path)) as r:
        got = [m.decode() for m in r.messages()]
    assert [getattr(o, f"c{i}_399") for i, o in enumerate(got)] == [399] * 300
    for cache in (codecs._cache, cdr._codecs):
        assert cache.total <= cache.max_cost and len(cache) <= cache.max_items
        assert cache.evictions > 0
    assert len(codecs._by_channel) < 300
    assert all(not isinstance(k[3], bytes) for k in codecs._cache)  # digests, not the texts


# --- real definitions still decode --------------------------------------------------------------
def test_every_bundled_ros2_type_round_trips() -> None:
    ts = ros2_bundled()
    names = sorted(ts.types)
    assert len(names) > 100
    for name in names:
        full = "/msg/".join(name.split("/", 1))
        codec = cdr.codec_for_type(full, ros2_definition_for(name))
        obj = codec.message_class()
        data = codec.encode(obj)
        assert codec.decode(data) == obj and codec.encode(codec.to_dict(data)) == data


def _corpus_files() -> list[Path]:
    if not CORPORA.is_dir():
        return []
    return sorted(p for p in CORPORA.rglob("*") if p.suffix in (".mcap", ".bag", ".ulg"))


@pytest.mark.skipif(not _corpus_files(), reason="the shared corpora are not here")
def test_no_real_definition_is_over_a_limit() -> None:
    """Every definition in the shared corpora (MCAP conformance and samples, bags, ULog) is
    inside every limit: none is refused for its size."""
    checked = 0
    for p in _corpus_files():
        try:
            r = polybag.open(str(p))
        except PolybagError:
            continue  # a deliberately damaged file
        with r:
            for ch in r.summary.channels.values():
                try:
                    codecs.codec_for(ch)
                    checked += 1
                except PolybagError as e:
                    assert "Limits" not in str(e) and "MAX_" not in str(e), (p, e)
    assert checked > 20


# --- the command line, in a fresh process ---------------------------------------------------------
def test_cli_subprocess_names_the_limit(tmp_path: Path) -> None:
    text, payload = flat(100_000)
    path = write_log(tmp_path / "flat", "mcap-ros2", "pkg/msg/Flat", text, [payload])
    p = subprocess.run([sys.executable, "-m", "polybag", "cat", str(path)], capture_output=True, text=True)
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert "DefinitionLimits.fields" in p.stderr and "pkg/msg/Flat" in p.stderr

