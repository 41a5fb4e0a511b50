"""ROS 2 service types and types without a definition (issue 27).

rosbag2 (from Jazzy) records a service's events on ``/srv/_service_event`` topics of type
``pkg/srv/Name_Event``; its sqlite3 storage keeps the definition under the service's name
``pkg/srv/Name`` (an ``SRV:`` section holding the ``.srv`` text, then ``MSG:`` sections), its
MCAP storage under the event type (the ``.srv`` text alone).  polybag builds the ``_Event``,
``_Request`` and ``_Response`` types from either, and from ``.srv`` files given with
``--types``.  A type with no definition anywhere is reported as such, not as bytes left over.
"""

from __future__ import annotations

import contextlib
import io
import sqlite3
from pathlib import Path

import numpy as np
import pytest
import yaml
from mcap.reader import make_reader
from rosbags.rosbag2 import Reader as RosbagsReader
from rosbags.typesys import Stores, get_types_from_idl, get_types_from_msg, get_typestore

import polybag
from _codec_helpers import norm_rosbags, same
from polybag import codecs
from polybag.cli import main
from polybag.codecs.cdr import codec_for_type
from polybag.errors import DecodeError
from polybag.formats.rosbag2.sqlite_writer import SCHEMA_SQL

SEP = "=" * 80
CORPUS_BAG = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpora" / "mcap-samples" / "rosbag2"
SERVICE_BAG = CORPUS_BAG / "bag_with_topics_and_service_events"


def _rosbags_store(base: str, srv_text: str, deps: dict[str, str] | None = None) -> object:
    """rosbags' types for service ``base`` (``pkg/srv/Name``), built here from the .srv text
    and rosidl's event layout (rosbags names them ``pkg/srv/msg/Name_*``)."""
    req, resp = srv_text.split("---\n")
    rb = base.replace("/srv/", "/srv/msg/")
    store = get_typestore(Stores.ROS2_JAZZY)  # has service_msgs/msg/ServiceEventInfo
    types: dict[str, object] = {}
    for name, text in (deps or {}).items():
        types.update(get_types_from_msg(text, name))
    types.update(get_types_from_msg(req, f"{rb}_Request"))
    types.update(get_types_from_msg(resp, f"{rb}_Response"))
    event = (
        f"service_msgs/msg/ServiceEventInfo info\n{rb}_Request[<=1] request\n{rb}_Response[<=1] response\n"
    )
    types.update(get_types_from_msg(event, f"{rb}_Event"))
    store.register(types)
    return store


def _db(path: Path, schema: int = 4) -> sqlite3.Connection:
    con = sqlite3.connect(path)
    if schema == 4:
        con.executescript(SCHEMA_SQL)
        con.execute("INSERT INTO schema VALUES (4, 'jazzy')")
    else:  # schema 3 (Humble): no type hashes, no message_definitions
        con.executescript(
            "CREATE TABLE schema(schema_version INTEGER PRIMARY KEY, ros_distro TEXT NOT NULL);"
            "CREATE TABLE topics(id INTEGER PRIMARY KEY, name TEXT NOT NULL, type TEXT NOT NULL,"
            " serialization_format TEXT NOT NULL, offered_qos_profiles TEXT NOT NULL);"
            "CREATE TABLE messages(id INTEGER PRIMARY KEY, topic_id INTEGER NOT NULL,"
            " timestamp INTEGER NOT NULL, data BLOB NOT NULL);"
        )
        con.execute("INSERT INTO schema VALUES (3, 'humble')")
    return con


def _jazzy_sqlite_twin(out: Path) -> Path:
    """The corpus bag (rosbag2's own, MCAP storage) as rosbag2 Jazzy's sqlite3 storage writes
    it: same topics, hashes and payloads; the service definition under ``pkg/srv/Name``."""
    out.mkdir()
    con = _db(out / "twin_0.db3")
    mcap_file = SERVICE_BAG / "bag_with_topics_and_service_events.mcap"
    with mcap_file.open("rb") as fh:
        reader = make_reader(fh)
        summary = reader.get_summary()
        assert summary is not None
        stored: set[str] = set()
        for ch in summary.channels.values():
            sc = summary.schemas[ch.schema_id]
            type_hash = ch.metadata["topic_type_hash"]
            con.execute(
                "INSERT INTO topics VALUES (?, ?, ?, 'cdr', ?, ?)",
                (ch.id, ch.topic, sc.name, ch.metadata["offered_qos_profiles"], type_hash),
            )
            name, text = sc.name, sc.data.decode()
            if name.endswith("_Event"):
                name = name[: -len("_Event")]
                text = f"{SEP}\nSRV: {name}\n{text}\n"
            if name not in stored:
                stored.add(name)
                con.execute(
                    "INSERT INTO message_definitions(topic_type, encoding, encoded_message_definition,"
                    " type_description_hash) VALUES (?, ?, ?, ?)",
                    (name, sc.encoding, text, type_hash),
                )
        for _, ch, msg in reader.iter_messages():
            con.execute(
                "INSERT INTO messages(topic_id, timestamp, data) VALUES (?, ?, ?)",
                (ch.id, msg.log_time, msg.data),
            )
    con.commit()
    con.close()
    meta = yaml.safe_load((SERVICE_BAG / "metadata.yaml").read_text())
    info = meta["rosbag2_bagfile_information"]
    info["storage_identifier"] = "sqlite3"
    info["relative_file_paths"] = ["twin_0.db3"]
    info["files"][0]["path"] = "twin_0.db3"
    (out / "metadata.yaml").write_text(yaml.safe_dump(meta))
    return out


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(args))
    return rc, out.getvalue(), err.getvalue()


def test_service_events_of_a_jazzy_sqlite3_bag_decode_as_its_mcap_twin(tmp_path: Path) -> None:
    bag = _jazzy_sqlite_twin(tmp_path / "twin")
    with (SERVICE_BAG / "bag_with_topics_and_service_events.mcap").open("rb") as fh:
        summary = make_reader(fh).get_summary()
        assert summary is not None
        srv_text = next(s.data.decode() for s in summary.schemas.values() if s.name.endswith("_Event"))
    store = _rosbags_store("test_msgs/srv/BasicTypes", srv_text)
    with polybag.open(bag) as ours, polybag.open(SERVICE_BAG) as twin:
        theirs = list(twin.messages())
        mine = list(ours.messages())
        assert len(mine) == len(theirs) == 10
        events = 0
        for a, b in zip(mine, theirs):
            assert (a.channel.topic, a.log_time, bytes(a.data)) == (
                b.channel.topic,
                b.log_time,
                bytes(b.data),
            )
            d = a.decode().to_dict()
            same(d, b.decode().to_dict())
            if a.channel.topic.endswith("/_service_event"):
                events += 1
                assert a.channel.schema.name == "test_msgs/srv/BasicTypes_Event"
                # a request event carries the request, a response event the response
                sent = d["info"]["event_type"] in (0, 1)
                assert (len(d["request"]), len(d["response"])) == ((1, 0) if sent else (0, 1))
                ref = store.deserialize_cdr(bytes(a.data), "test_msgs/srv/msg/BasicTypes_Event")
                same(d, norm_rosbags(ref, ros1=False, store=store), signed_bytes=True)
        assert events == 8
    # rosbags reads the same raw messages from the sqlite3 twin (it finds no definition for
    # the events: the sqlite3 storage stores it under pkg/srv/Name)
    with RosbagsReader(bag) as rb:
        raw = [(c.topic, t, bytes(d)) for c, t, d in rb.messages()]
    with polybag.open(bag) as ours:
        assert raw == [(m.channel.topic, m.log_time, bytes(m.data)) for m in ours.messages()]
    rc, out, err = _cli("cat", str(bag), "--topics", "/test_service1/_service_event")
    assert rc == 0, err
    assert out.count('"event_type"') == 4 and "left over" not in out + err


SRV_WITH_DEP = "Basic req\nint32 id\n---\nmy_srvs/Basic resp\nbool ok\n"
BASIC = "float32 c\nstring label\n"


@pytest.mark.parametrize(
    "stored",
    [
        f"{SEP}\nSRV: my_srvs/srv/Lookup\n{SRV_WITH_DEP}\n{SEP}\nMSG: my_srvs/Basic\n{BASIC}",  # sqlite3, Jazzy
        f"{SRV_WITH_DEP}{SEP}\nMSG: my_srvs/msg/Basic\n{BASIC}",  # MCAP storage
    ],
    ids=["srv-section", "srv-text"],
)
def test_event_request_and_response_types_from_a_service_definition(stored: str) -> None:
    qualified = SRV_WITH_DEP.replace("Basic req", "my_srvs/msg/Basic req").replace(
        "my_srvs/Basic resp", "my_srvs/msg/Basic resp"
    )
    store = _rosbags_store("my_srvs/srv/Lookup", qualified, {"my_srvs/msg/Basic": BASIC})
    values = {
        "_Request": {"req": {"c": 1.5, "label": "a"}, "id": 7},
        "_Response": {"resp": {"c": -2.0, "label": "bc"}, "ok": True},
    }
    values["_Event"] = {
        "info": {
            "event_type": 2,
            "stamp": {"sec": 3, "nanosec": 4},
            "client_gid": bytes(range(16)),
            "sequence_number": 5,
        },
        "request": [],
        "response": [values["_Response"]],
    }
    for suffix, value in values.items():
        codec = codec_for_type(f"my_srvs/srv/Lookup{suffix}", stored)
        raw = codec.encode(value)
        assert codec.to_dict(raw) == value
        ref = store.deserialize_cdr(raw, f"my_srvs/srv/msg/Lookup{suffix}")
        same(value, norm_rosbags(ref, ros1=False, store=store), signed_bytes=True)
        assert bytes(store.serialize_cdr(ref, f"my_srvs/srv/msg/Lookup{suffix}")) == raw


def test_srv_files_given_with_types_decode_a_bag_without_definitions(tmp_path: Path) -> None:
    folder = tmp_path / "ws" / "calc_srvs"
    (folder / "srv").mkdir(parents=True)
    (folder / "msg").mkdir()
    (folder / "msg" / "Operand.msg").write_text("int64 value\n")
    (folder / "srv" / "AddTwo.srv").write_text("# add two numbers\nOperand a\nOperand b\n---\nint64 sum\n")
    store = _rosbags_store(
        "calc_srvs/srv/AddTwo",
        "calc_srvs/msg/Operand a\ncalc_srvs/msg/Operand b\n---\nint64 sum\n",
        {"calc_srvs/msg/Operand": "int64 value\n"},
    )
    event = {
        "info": {
            "event_type": 0,
            "stamp": {"sec": 1, "nanosec": 2},
            "client_gid": bytes(16),
            "sequence_number": 1,
        },
        "request": [{"a": {"value": 2}, "b": {"value": 40}}],
        "response": [],
    }
    t = store.types  # the payload, serialized by rosbags
    info = t["service_msgs/msg/ServiceEventInfo"](
        0, t["builtin_interfaces/msg/Time"](1, 2), np.zeros(16, np.uint8), 1
    )
    op = t["calc_srvs/msg/Operand"]
    msg = t["calc_srvs/srv/msg/AddTwo_Event"](
        info, [t["calc_srvs/srv/msg/AddTwo_Request"](op(2), op(40))], []
    )
    raw = bytes(store.serialize_cdr(msg, "calc_srvs/srv/msg/AddTwo_Event"))
    db = tmp_path / "humble.db3"  # a bag from before Iron: type names, no definitions
    con = _db(db, schema=3)
    con.execute(
        "INSERT INTO topics VALUES (1, '/add/_service_event', 'calc_srvs/srv/AddTwo_Event', 'cdr', '')"
    )
    con.execute("INSERT INTO messages(topic_id, timestamp, data) VALUES (1, 10, ?)", (raw,))
    con.commit()
    con.close()
    rc, out, err = _cli("cat", str(db))
    assert rc != 0 and "calc_srvs/srv/AddTwo_Event" in err and "--types" in err
    assert codecs.add_types(tmp_path / "ws") == [
        "calc_srvs/msg/Operand",
        "calc_srvs/srv/AddTwo_Event",
        "calc_srvs/srv/AddTwo_Request",
        "calc_srvs/srv/AddTwo_Response",
    ]
    with polybag.open(db) as r:
        (m,) = list(r.messages())
        assert m.decode().to_dict() == event
    rc, out, err = _cli("cat", "--types", str(tmp_path / "ws"), str(db))
    assert rc == 0, err
    assert '"a": {"value": 2}' in out and '"b": {"value": 40}' in out


def _unknown_db(path: Path, payload: bytes, definition: str | None) -> Path:
    con = _db(path)
    con.execute("INSERT INTO topics VALUES (1, '/thing', 'polybag_nodef_pkg/msg/Thing', 'cdr', '', '')")
    if definition is not None:
        con.execute(
            "INSERT INTO message_definitions(topic_type, encoding, encoded_message_definition,"
            " type_description_hash) VALUES ('polybag_nodef_pkg/msg/Thing', 'ros2msg', ?, '')",
            (definition,),
        )
    con.execute("INSERT INTO messages(topic_id, timestamp, data) VALUES (1, 5, ?)", (payload,))
    con.commit()
    con.close()
    return path


@pytest.mark.parametrize("definition", [None, ""], ids=["no-row", "empty-row"])
def test_a_type_without_definition_says_so(tmp_path: Path, definition: str | None) -> None:
    # a 47-byte message of a type nobody defined: the file has no definition, no known type
    payload = b"\x00\x01\x00\x00" + bytes(range(47))
    db = _unknown_db(tmp_path / "unknown.db3", payload, definition)
    want = "no definition for polybag_nodef_pkg/msg/Thing (add it with --types DIR)"
    with polybag.open(db) as r:
        (m,) = list(r.messages())
        for call in (m.decode, lambda: codecs.message_to_dict(m.channel, m.data)):
            with pytest.raises(DecodeError) as e:
                call()
            assert want in str(e.value) and "left over" not in str(e.value)
            assert "/thing" in str(e.value)
    rc, out, err = _cli("cat", str(db))
    assert rc == 1
    assert want in err and "left over" not in err
    assert "/thing" in out  # the message is still listed (as a hex preview)


def test_an_empty_message_of_an_unknown_type_still_decodes(tmp_path: Path) -> None:
    # rosidl gives a message without fields one placeholder byte: 5 bytes, no fields
    db = _unknown_db(tmp_path / "empty.db3", b"\x00\x01\x00\x00\x00", "")
    with polybag.open(db) as r:
        (m,) = list(r.messages())
        assert m.decode().to_dict() == {"structure_needs_at_least_one_member": 0}


FACTOR_IDL = "module idl_srvs {\n  module msg {\n    struct Factor {\n      float x;\n      int32 n;\n    };\n  };\n};\n"


def test_a_service_whose_dependencies_are_idl() -> None:
    # rosbag2 stores it as ros2idl: the SRV: section, an empty MSG: section, the IDL section
    stored = (
        f"{SEP}\nSRV: idl_srvs/srv/Scale\nidl_srvs/Factor req\n---\nidl_srvs/Factor resp\nbool ok\n\n"
        f"{SEP}\nMSG: idl_srvs/Factor\n\n{SEP}\nIDL: idl_srvs/Factor\n{FACTOR_IDL}"
    )
    store = get_typestore(Stores.ROS2_JAZZY)
    store.register(get_types_from_idl(FACTOR_IDL))
    store.register(get_types_from_msg("idl_srvs/msg/Factor req\n", "idl_srvs/srv/msg/Scale_Request"))
    store.register(
        get_types_from_msg("idl_srvs/msg/Factor resp\nbool ok\n", "idl_srvs/srv/msg/Scale_Response")
    )
    value = {"resp": {"x": 0.5, "n": -3}, "ok": True}
    codec = codec_for_type("idl_srvs/srv/Scale_Response", stored, "ros2idl")
    raw = codec.encode(value)
    same(
        value,
        norm_rosbags(store.deserialize_cdr(raw, "idl_srvs/srv/msg/Scale_Response"), ros1=False, store=store),
    )
    event = codec_for_type("idl_srvs/srv/Scale_Event", stored, "ros2idl")
    info = {"event_type": 1, "stamp": {"sec": 0, "nanosec": 9}, "client_gid": bytes(16), "sequence_number": 2}
    ev = {"info": info, "request": [{"req": {"x": 1.0, "n": 4}}], "response": []}
    assert event.to_dict(event.encode(ev)) == ev
