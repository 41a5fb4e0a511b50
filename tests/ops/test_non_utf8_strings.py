"""Strings that are not UTF-8: decoded as rosbag (genpy) and mcap_ros1 decode them (each invalid
byte sequence becomes U+FFFD), the same in every output (objects, dicts, columns, Arrow, pandas,
``cat --json``, ``export`` to csv/jsonl/parquet, conversions), and never a crash.  CDR strings
follow the same rule."""

from __future__ import annotations

import csv
import json
import struct
from pathlib import Path
from typing import Any

import pytest

import polybag
from _codec_helpers import norm_genpy, same
from polybag import ops
from polybag.cli import main
from polybag.formats.bag.writer import BagWriter
from polybag.formats.mcap.writer import McapWriter

RAW = [b"\xff\xfeabc", b"ok", b"caf\xc3\xa9", b"\xc3", b"", b"\x80in", b"a\xed\xa0\x80b"]
NESTED_DEF = (
    "string label\nstring[] tags\nstd_msgs/String inner\nstd_msgs/String[] items\n"
    "================================================================================\n"
    "MSG: std_msgs/String\nstring data\n"
)
HEADER_DEF = "uint32 seq\ntime stamp\nstring frame_id\n"
# the string columns of each topic (compared everywhere; times are other tests' business)
STRING_COLUMNS = {
    "/s": ["data"],
    "/same": ["data"],
    "/many": ["data"],
    "/hdr": ["frame_id"],
    "/n": ["label", "tags", "inner.data", "items"],
}


def _s(raw: bytes) -> bytes:
    return struct.pack("<I", len(raw)) + raw


def _payloads() -> dict[str, list[bytes]]:
    """Each topic's payloads: string columns of one value, of a few lengths, of many lengths, a
    string after fixed-size fields, and strings in arrays and nested messages."""
    n = 3 * len(RAW)
    return {
        "/s": [_s(RAW[i % len(RAW)]) for i in range(n)],
        "/same": [_s(RAW[0]) for _ in range(n)],
        "/many": [_s(b"\xff" * k + b"z") for k in range(40)],
        "/hdr": [struct.pack("<III", i, 5, 6) + _s(RAW[i % len(RAW)]) for i in range(n)],
        "/n": [
            _s(RAW[i % len(RAW)])
            + struct.pack("<I", 2)
            + _s(b"t\xff")
            + _s(RAW[(i + 1) % len(RAW)])
            + _s(b"\x80in")
            + struct.pack("<I", 1)
            + _s(RAW[(i + 2) % len(RAW)])
            for i in range(n)
        ],
    }


@pytest.fixture(scope="module")
def bag(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("nonutf8") / "strings.bag"
    with BagWriter(path, compression="none") as w:
        schemas = {
            "std_msgs/String": w.add_schema("std_msgs/String", "ros1msg", "string data\n"),
            "std_msgs/Header": w.add_schema("std_msgs/Header", "ros1msg", HEADER_DEF),
            "pkg/Nested": w.add_schema("pkg/Nested", "ros1msg", NESTED_DEF),
        }
        types = {"/s": "std_msgs/String", "/same": "std_msgs/String", "/many": "std_msgs/String"}
        types |= {"/hdr": "std_msgs/Header", "/n": "pkg/Nested"}
        for k, (topic, datas) in enumerate(_payloads().items()):
            ch = w.add_channel(topic, "ros1", schemas[types[topic]], {"callerid": "/talker"})
            for i, data in enumerate(datas):
                w.write(ch, data, 10**9 + k * 10**6 + i)
    return path


@pytest.fixture(scope="module")
def expected(bag: Path) -> dict[str, list[dict[str, Any]]]:
    """What rosbag-standalone (genpy) decodes, per topic in log-time order."""
    rosbag = pytest.importorskip("rosbag")
    out: dict[str, list[dict[str, Any]]] = {t: [] for t in STRING_COLUMNS}
    with rosbag.Bag(str(bag)) as b:
        for topic, msg, _t in b.read_messages():
            out[topic].append(norm_genpy(msg))
    assert all(len(v) == len(_payloads()[t]) for t, v in out.items())
    return out


def _flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested messages (not in arrays) as dotted columns, as the column outputs name them."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict) and set(v) not in ({"sec", "nsec"},):
            out |= _flat(v, f"{prefix}{k}.")
        else:
            out[f"{prefix}{k}"] = v
    return out


def _strings_of(topic: str, rows: list[dict[str, Any]]) -> list[list[Any]]:
    return [[_flat(r)[c] for c in STRING_COLUMNS[topic]] for r in rows]


def _no_surrogates(v: Any) -> None:
    if isinstance(v, str):
        assert not any("\ud800" <= ch <= "\udfff" for ch in v), repr(v)
    elif isinstance(v, dict):
        for x in v.values():
            _no_surrogates(x)
    elif isinstance(v, (list, tuple)):
        for x in v:
            _no_surrogates(x)


def test_reference_replaces_invalid_bytes(expected: dict[str, list[dict[str, Any]]]) -> None:
    # what the rest of the file holds polybag to: U+FFFD per invalid sequence, as Python's "replace"
    assert expected["/s"][0] == {"data": "\ufffd\ufffdabc"}
    assert [r["data"] for r in expected["/s"][: len(RAW)]] == [r.decode("utf-8", "replace") for r in RAW]
    assert expected["/n"][0]["tags"] == ["t\ufffd", "ok"]


def test_decode_and_to_dict_equal_rosbag(bag: Path, expected: dict[str, list[dict[str, Any]]]) -> None:
    got: dict[str, list[dict[str, Any]]] = {t: [] for t in STRING_COLUMNS}
    with polybag.open(bag) as r:
        for m, obj in r.decoded_messages():
            d = m.to_dict()
            same(obj.to_dict(), d)
            got[m.channel.topic].append(d)
        assert r.messages().__next__().decode().data == "\ufffd\ufffdabc"
    for topic, rows in expected.items():
        same(got[topic], rows, topic)
        _no_surrogates(got[topic])


def test_columns_arrow_and_pandas_equal_rosbag(bag: Path, expected: dict[str, list[dict[str, Any]]]) -> None:
    with polybag.open(bag) as r:
        for topic, names in STRING_COLUMNS.items():
            want = _strings_of(topic, expected[topic])
            cols = r.topic_columns(topic)
            same([[cols[c][i] for c in names] for i in range(len(want))], want, f"columns {topic}")
            table = r.to_arrow(topic).to_pylist()
            same([[row[c] for c in names] for row in table], want, f"arrow {topic}")
            frame = r.to_pandas(topic)
            same([[frame[c].iloc[i] for c in names] for i in range(len(want))], want, f"pandas {topic}")
            # a selection of one string field takes the same path as a user's --fields
            only = r.topic_columns(topic, [names[0]])
            same(list(only[names[0]]), [w[0] for w in want], f"selected {topic}")


def test_cat_json_equals_rosbag(
    bag: Path, expected: dict[str, list[dict[str, Any]]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["cat", "--json", str(bag)]) == 0
    got: dict[str, list[dict[str, Any]]] = {t: [] for t in STRING_COLUMNS}
    for line in capsys.readouterr().out.splitlines():
        row = json.loads(line)
        got[row["topic"]].append(row["message"])
    for topic, rows in expected.items():
        same(_strings_of(topic, got[topic]), _strings_of(topic, rows), topic)


def test_cat_text_does_not_crash(bag: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cat", str(bag)]) == 0
    out = capsys.readouterr().out
    assert len(out.splitlines()) == sum(len(v) for v in _payloads().values())
    assert "\\ufffd" in out or "\ufffd" in out


def _read_export(path: Path, fmt: str, topic: str) -> list[list[Any]]:
    names = STRING_COLUMNS[topic]
    if fmt == "csv":
        with open(path, newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
        # arrays are JSON text in a CSV cell
        return [[json.loads(r[c]) if c in ("tags", "items") else r[c] for c in names] for r in rows]
    if fmt == "jsonl":
        with open(path, encoding="utf-8") as fh:
            return _strings_of(topic, [json.loads(line)["message"] for line in fh])
    pq = pytest.importorskip("pyarrow.parquet")
    return [[row[c] for c in names] for row in pq.read_table(path).to_pylist()]


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_export_equals_rosbag(
    bag: Path, expected: dict[str, list[dict[str, Any]]], tmp_path: Path, fmt: str
) -> None:
    if fmt == "parquet":
        pytest.importorskip("pyarrow.parquet")
    out = tmp_path / fmt
    assert main(["export", str(bag), "--format", fmt, "--layout", "flat", "-o", str(out)]) == 0
    for topic in STRING_COLUMNS:
        path = out / f"{topic.strip('/')}.{fmt}"
        same(_read_export(path, fmt, topic), _strings_of(topic, expected[topic]), f"{fmt} {topic}")


def test_mcap_ros1_decodes_the_converted_file_as_polybag_does(
    bag: Path, expected: dict[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    mcap_reader = pytest.importorskip("mcap.reader")
    ros1_decoder = pytest.importorskip("mcap_ros1.decoder")
    out = tmp_path / "strings.mcap"
    ops.convert(bag, out)
    theirs: dict[str, list[dict[str, Any]]] = {t: [] for t in STRING_COLUMNS}
    with open(out, "rb") as f:
        reader = mcap_reader.make_reader(f, decoder_factories=[ros1_decoder.DecoderFactory()])
        for _s, channel, _m, decoded in reader.iter_decoded_messages():
            theirs[channel.topic].append(norm_genpy(decoded))
    ours: dict[str, list[dict[str, Any]]] = {t: [] for t in STRING_COLUMNS}
    with polybag.open(out) as r:
        for m in r.messages():
            ours[m.channel.topic].append(m.to_dict())
    for topic, rows in expected.items():
        same(theirs[topic], rows, f"mcap_ros1 {topic}")
        same(ours[topic], rows, f"polybag {topic}")


def test_ros2_conversion_writes_valid_utf8_read_by_rosbags(
    bag: Path, expected: dict[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    highlevel = pytest.importorskip("rosbags.highlevel")
    out = tmp_path / "ros2.mcap"
    assert main(["convert", "--profile", "ros2", str(bag), str(out)]) == 0
    got: dict[str, list[str]] = {"/s": [], "/n": []}
    with highlevel.AnyReader([out]) as r:
        for conn, _t, raw in r.messages([c for c in r.connections if c.topic in got]):
            msg = r.deserialize(raw, conn.msgtype)
            got[conn.topic].append(msg.data if conn.topic == "/s" else msg.label)
    assert got["/s"] == [d["data"] for d in expected["/s"]]
    assert got["/n"] == [d["label"] for d in expected["/n"]]


def _cdr_string(raw: bytes) -> bytes:
    return b"\x00\x01\x00\x00" + struct.pack("<I", len(raw) + 1) + raw + b"\x00"


def test_cdr_strings_are_replaced_the_same_way(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "cdr.mcap"
    with McapWriter(path, profile="ros2") as w:
        ch = w.add_channel("/c", "cdr", w.add_schema("std_msgs/msg/String", "ros2msg", "string data\n"))
        for i in range(3 * len(RAW)):
            w.write(ch, _cdr_string(RAW[i % len(RAW)]), 10**9 + i)
        many = w.add_channel("/many", "cdr", w.add_schema("std_msgs/msg/String", "ros2msg", "string data\n"))
        for k in range(40):
            w.write(many, _cdr_string(b"\xff" * k + b"z"), 2 * 10**9 + k)
    want = {
        "/c": [RAW[i % len(RAW)].decode("utf-8", "replace") for i in range(3 * len(RAW))],
        "/many": [("\ufffd" * k) + "z" for k in range(40)],
    }
    with polybag.open(path) as r:
        for topic, values in want.items():
            assert [m.decode().data for m in r.messages([topic])] == values
            assert list(r.topic_columns(topic)["data"]) == values
            assert r.to_arrow(topic).column("data").to_pylist() == values
            assert list(r.to_pandas(topic)["data"]) == values
    assert main(["cat", "--json", str(path)]) == 0
    assert [json.loads(x)["message"]["data"] for x in capsys.readouterr().out.splitlines()] == want[
        "/c"
    ] + want["/many"]
    assert main(["export", str(path), "--format", "jsonl", "-o", str(tmp_path / "j")]) == 0
    with open(tmp_path / "j" / "c.jsonl", encoding="utf-8") as fh:
        assert [json.loads(x)["message"]["data"] for x in fh] == want["/c"]
    assert main(["export", str(path), "--format", "csv", "-o", str(tmp_path / "c")]) == 0
    with open(tmp_path / "c" / "many.csv", newline="", encoding="utf-8") as fh:
        assert [row["data"] for row in csv.DictReader(fh)] == want["/many"]


def test_cdr_wstring_lone_surrogates_are_replaced(tmp_path: Path) -> None:
    """A wstring's UTF-16 units with a lone surrogate: pairs joined, the lone one U+FFFD."""
    units = [[0xD800, 0x41], [0xD83D, 0xDE00, 0xDC00], [0x42]]
    path = tmp_path / "w.mcap"
    with McapWriter(path, profile="ros2") as w:
        ch = w.add_channel("/w", "cdr", w.add_schema("col/msg/W", "ros2msg", "wstring w\nwstring[] ws\n"))
        for i, u in enumerate(units):
            wide = struct.pack("<I", len(u)) + b"".join(struct.pack("<I", x) for x in u)
            w.write(ch, b"\x00\x01\x00\x00" + wide + struct.pack("<I", 1) + wide, 10**9 + i)
    want = ["\ufffdA", "\U0001f600\ufffd", "B"]
    with polybag.open(path) as r:
        assert [m.to_dict() for m in r.messages()] == [{"w": x, "ws": [x]} for x in want]
        assert r.to_arrow("/w").to_pylist() == [
            {"log_time": 10**9 + i, "w": x, "ws": [x]} for i, x in enumerate(want)
        ]
    assert main(["export", str(path), "--format", "jsonl", "-o", str(tmp_path / "j")]) == 0
    with open(tmp_path / "j" / "w.jsonl", encoding="utf-8") as fh:
        assert [json.loads(x)["message"]["w"] for x in fh] == want
