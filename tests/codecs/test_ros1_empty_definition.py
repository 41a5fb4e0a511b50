"""A ROS 1 connection whose ``message_definition`` is empty (issue 27).

webviz's fixture ``bag-with-empty-message-definition.bag`` has one connection of
``led_array_msgs/Status`` with an empty definition (its md5sum is the real type's) and 14
messages of 0 bytes.  rosbag builds an empty class from the empty text and decodes each as
a message without fields; polybag reads them the same, in ``cat``, ``export`` and the
columns.  A payload with bytes in it under an empty definition says the definition is
missing; a known type with the connection's md5sum wins over the empty text.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
from pathlib import Path

import pytest

import polybag
from polybag.cli import main
from polybag.codecs.columns import topic_columns
from polybag.errors import PolybagError

BAG = Path(__file__).resolve().parents[1] / "corpus" / "bag" / "webviz_bag-with-empty-message-definition.bag"
TOPIC = "/led_array_status"
STATUS_MD5 = "53a14e6cadee4d14930b099922d25397"
STRING_MD5 = "992ce8a1687cec8c8bd883ec73ca41d1"  # std_msgs/String


def _rosbag_messages(path: Path) -> list[tuple[str, int, object]]:
    """(topic, log time, message) as rosbag-standalone reads them."""
    import rosbag

    with rosbag.Bag(str(path)) as b:
        return [(t, ts.to_nsec(), m) for t, m, ts in b.read_messages()]


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def test_the_reference_decodes_each_message_as_empty() -> None:
    ref = _rosbag_messages(BAG)
    assert len(ref) == 14
    assert all(t == TOPIC and list(m.__slots__) == [] for t, _, m in ref)


def test_open_decodes_zero_byte_messages_as_empty() -> None:
    ref = _rosbag_messages(BAG)
    with polybag.open(BAG) as r:
        msgs = list(r.messages())
        assert [m.log_time for m in msgs] == [t for _, t, _ in ref]
        for m in msgs:
            assert bytes(m.data) == b""
            assert m.channel.schema is not None and m.channel.schema.data == b""
            assert m.channel.metadata.get("md5sum") == STATUS_MD5
            assert m.to_dict() == {}


def test_cat_prints_empty_messages() -> None:
    code, out, err = _run(["cat", str(BAG), "--json"])
    assert code == 0, err
    lines = [json.loads(ln) for ln in out.splitlines() if ln.strip()]
    assert len(lines) == 14
    assert all(d["topic"] == TOPIC and d["message"] == {} for d in lines)
    assert "cannot decode" not in err
    code, out, err = _run(["cat", str(BAG)])
    assert code == 0, err
    assert out.count("{}") == 14


def test_export_and_columns_give_the_times(tmp_path: Path) -> None:
    code, _, err = _run(["export", str(BAG), "-o", str(tmp_path / "ex"), "-q"])
    assert code == 0, err
    with (tmp_path / "ex" / "led_array_status.csv").open() as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["log_time"]
    assert [int(r[0]) for r in rows[1:]] == [t for _, t, _ in _rosbag_messages(BAG)]
    with polybag.open(BAG) as r:
        cols = topic_columns(r, TOPIC)
    assert list(cols) == ["log_time"]
    assert len(cols["log_time"]) == 14


def _bag_with(tmp_path: Path, type_name: str, md5sum: str, payload: bytes) -> Path:
    path = tmp_path / "empty_def.bag"
    with polybag.Writer(path) as w:
        sch = w.add_schema(type_name, "ros1msg", b"")
        ch = w.add_channel("/x", "ros1", sch, {"md5sum": md5sum, "type": type_name})
        w.write(ch, payload, 1_000_000_000)
        w.write(ch, b"", 2_000_000_000)
    return path


def test_a_payload_with_bytes_says_the_definition_is_missing(tmp_path: Path) -> None:
    path = _bag_with(tmp_path, "led_array_msgs/Status", STATUS_MD5, b"\x01\x02\x03\x04")
    with polybag.open(path) as r:
        first, second = list(r.messages())
        with pytest.raises(PolybagError, match=r"no definition for led_array_msgs/Status \(md5sum 53a14e6c"):
            first.to_dict()
        with pytest.raises(PolybagError, match="no definition for led_array_msgs/Status"):
            first.decode()
        assert second.to_dict() == {}
        with pytest.raises(PolybagError, match="no definition for led_array_msgs/Status"):
            topic_columns(r, "/x")
    code, out, err = _run(["cat", str(path), "--json"])
    assert code == 1
    assert "no definition for led_array_msgs/Status" in err
    assert "POLYBAG_MSG_PATH" in err
    assert "Traceback" not in err
    first_line, second_line = (json.loads(ln) for ln in out.splitlines())
    assert "message" not in first_line and first_line["data"] == "AQIDBA=="  # the bytes, as base64
    assert second_line["message"] == {}  # the channel's 0-byte message still decodes
    code, _, err = _run(["export", str(path), "-o", str(tmp_path / "ex"), "-q"])
    assert code == 1
    assert "no definition for led_array_msgs/Status" in err and "Traceback" not in err
    # into rosbag2 the 0-byte message is written, the other named as dropped
    code, _, err = _run(["convert", str(path), str(tmp_path / "r2"), "--format", "rosbag2", "-q"])
    assert code == 1
    assert "no definition for led_array_msgs/Status" in err and "dropped" in err
    with polybag.open(tmp_path / "r2") as r:
        assert [m.log_time for m in r.messages()] == [2_000_000_000]


def test_a_known_type_with_that_md5sum_wins(tmp_path: Path) -> None:
    payload = b"\x02\x00\x00\x00hi"
    path = _bag_with(tmp_path, "std_msgs/String", STRING_MD5, payload)
    with polybag.open(path) as r:
        first, second = list(r.messages())
        assert first.to_dict() == {"data": "hi"}
    import rosbag

    with rosbag.Bag(str(path)) as b:
        raw = [m for _, m, _ in b.read_messages(raw=True)]
    assert bytes(raw[0][1]) == payload


def test_convert_to_mcap_and_bag_keeps_the_empty_definition(tmp_path: Path) -> None:
    from mcap.reader import make_reader

    out = tmp_path / "out.mcap"
    code, _, err = _run(["convert", str(BAG), str(out), "-q"])
    assert code == 0, err
    with out.open("rb") as f:
        reader = make_reader(f)
        summary = reader.get_summary()
        assert summary is not None
        (schema,) = summary.schemas.values()
        assert (schema.name, schema.encoding, schema.data) == ("led_array_msgs/Status", "ros1msg", b"")
        msgs = list(reader.iter_messages())
    assert len(msgs) == 14 and all(m.data == b"" for _, _, m in msgs)
    assert msgs[0][1].metadata.get("md5sum") == STATUS_MD5

    bag = tmp_path / "out.bag"
    code, _, err = _run(["convert", str(BAG), str(bag), "-q"])
    assert code == 0, err
    ref = _rosbag_messages(bag)
    assert [t for _, t, _ in ref] == [t for _, t, _ in _rosbag_messages(BAG)]
    assert all(list(m.__slots__) == [] for _, _, m in ref)
    import rosbag

    with rosbag.Bag(str(bag)) as b:
        (conn,) = b._connections.values()
        assert conn.header["message_definition"] == b""
        assert conn.md5sum == STATUS_MD5


def test_convert_to_rosbag2_writes_an_empty_ros2_type(tmp_path: Path) -> None:
    """As the bridge writes std_msgs/Empty: a ROS 2 type without fields, whose CDR payload
    is rosidl's one ``structure_needs_at_least_one_member`` byte."""
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    out = tmp_path / "r2"
    code, _, err = _run(["convert", str(BAG), str(out), "--format", "rosbag2", "-q"])
    assert code == 0, err
    store = get_typestore(Stores.EMPTY)
    with Reader(out) as r:
        (conn,) = r.connections
        assert conn.msgtype == "led_array_msgs/msg/Status"
        assert conn.msgdef is not None and conn.msgdef.data.strip() == ""
        store.register(get_types_from_msg(conn.msgdef.data, conn.msgtype))
        got = [(t, store.deserialize_cdr(raw, conn.msgtype)) for _, t, raw in r.messages()]
    assert [t for t, _ in got] == [t for _, t, _ in _rosbag_messages(BAG)]
    assert all(m.structure_needs_at_least_one_member == 0 for _, m in got)
    with polybag.open(out) as r:
        assert all(m.to_dict() == {"structure_needs_at_least_one_member": 0} for m in r.messages())
