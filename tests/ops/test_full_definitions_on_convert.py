"""Every output path writes full message definitions (issue 27).

rosbag2 bags written before Iron store no message definitions: polybag decodes them with
its bundled types, and whatever it writes from them (convert to MCAP and to rosbag2 of
either storage, filter, sort, merge, split, recover, compress of an MCAP file, the ROS 2 ->
ROS 1 bridge) carries the full definition (the main type, then ``MSG: pkg/msg/Name``
sections), so the reference readers decode the output: ``mcap_ros2`` for MCAP, ``rosbags``
with types built from the written definitions for rosbag2 directories (and the REP 2011
type hash in metadata.yaml), ``rosbag`` (standalone) for ROS 1 bags.  A definition stored in
a bag that does not decode its messages (a placeholder ``uint8 level`` for
``rcl_interfaces/msg/Log``) gives way to the bundled one, once said, and conversions write
the one that decoded.
"""

from __future__ import annotations

import dataclasses
import io
import shutil
import sqlite3
import warnings
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import yaml
from mcap.reader import make_reader
from mcap.writer import Writer as McapWriter
from mcap_ros2.decoder import DecoderFactory
from rosbags.rosbag2 import Reader as RosbagsReader
from rosbags.rosbag2 import Writer as RosbagsWriter
from rosbags.typesys import Stores, get_types_from_msg, get_typestore

import polybag
from polybag import ops
from polybag.cli import main
from polybag.errors import PolybagWarning

STRING = "std_msgs/msg/String"
IMU = "sensor_msgs/msg/Imu"
LOG = "rcl_interfaces/msg/Log"
# rosbag2's own hashes of these types (Iron and later record them so)
HASHES = {
    STRING: "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18",
    IMU: "RIHS01_7d9a00ff131080897a5ec7e26e315954b8eae3353c3f995c55faf71574000b5b",
}
# a QoS profile as rosbag2 Humble writes it (metadata.yaml version 4-8: a YAML string)
QOS = (
    "- history: 3\n  depth: 0\n  reliability: 1\n  durability: 2\n"
    "  deadline:\n    sec: 2147483647\n    nsec: 4294967295\n"
    "  lifespan:\n    sec: 2147483647\n    nsec: 4294967295\n"
    "  liveliness: 1\n  liveliness_lease_duration:\n    sec: 2147483647\n    nsec: 4294967295\n"
    "  avoid_ros_namespace_conventions: false"
)


def _store() -> Any:
    return get_typestore(Stores.ROS2_HUMBLE)


def _messages(ts: Any) -> list[tuple[str, str, int, bytes]]:
    """(topic, type, time, CDR bytes) serialized by rosbags: String, Imu and Log."""
    t = ts.types
    out = []
    for i in range(12):
        time = 1_700_000_000_000_000_000 + i * 10_000_000
        stamp = t["builtin_interfaces/msg/Time"](sec=i, nanosec=7 * i)
        if i % 3 == 0:
            msg, typ, topic = t[STRING](data=f"hello {i} ü"), STRING, "/chatter"
        elif i % 3 == 1:
            v = t["geometry_msgs/msg/Vector3"](x=1.5 * i, y=-2.0, z=0.25)
            cov = np.arange(9, dtype=np.float64) * i
            msg = t[IMU](
                header=t["std_msgs/msg/Header"](stamp=stamp, frame_id=f"imu{i}"),
                orientation=t["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=float(i), w=1.0),
                orientation_covariance=cov,
                angular_velocity=v,
                angular_velocity_covariance=cov,
                linear_acceleration=v,
                linear_acceleration_covariance=cov,
            )
            typ, topic = IMU, "/imu"
        else:
            msg = t[LOG](
                stamp=stamp, level=20, name="talker", msg=f"log {i}", file="a.py", function="f", line=i
            )
            typ, topic = LOG, "/rosout"
        out.append((topic, typ, time, bytes(ts.serialize_cdr(msg, typ))))
    return out


def _old_bag(path: Path) -> list[tuple[str, str, int, bytes]]:
    """A rosbag2 bag as Humble writes it: metadata.yaml version 4, a ``.db3`` of schema 3
    (no message_definitions table, no type hashes): no definition anywhere."""
    path.mkdir()
    rows = _messages(_store())
    con = sqlite3.connect(path / "old_0.db3")
    con.executescript(
        "CREATE TABLE schema(schema_version INTEGER PRIMARY KEY, ros_distro TEXT NOT NULL);"
        "CREATE TABLE topics(id INTEGER PRIMARY KEY, name TEXT NOT NULL, type TEXT NOT NULL,"
        " serialization_format TEXT NOT NULL, offered_qos_profiles TEXT NOT NULL);"
        "CREATE TABLE messages(id INTEGER PRIMARY KEY, topic_id INTEGER NOT NULL,"
        " timestamp INTEGER NOT NULL, data BLOB NOT NULL);"
        "INSERT INTO schema VALUES (3, 'humble');"
    )
    topics = {"/chatter": (1, STRING), "/imu": (2, IMU), "/rosout": (3, LOG)}
    for name, (tid, typ) in topics.items():
        con.execute("INSERT INTO topics VALUES (?, ?, ?, 'cdr', ?)", (tid, name, typ, QOS))
    for topic, _typ, time, data in rows:
        con.execute(
            "INSERT INTO messages(topic_id, timestamp, data) VALUES (?, ?, ?)", (topics[topic][0], time, data)
        )
    con.commit()
    con.close()
    counts = {name: sum(1 for r in rows if r[0] == name) for name in topics}
    info = {
        "version": 4,
        "storage_identifier": "sqlite3",
        "relative_file_paths": ["old_0.db3"],
        "duration": {"nanoseconds": rows[-1][2] - rows[0][2]},
        "starting_time": {"nanoseconds_since_epoch": rows[0][2]},
        "message_count": len(rows),
        "compression_format": "",
        "compression_mode": "",
        "topics_with_message_count": [
            {
                "topic_metadata": {
                    "name": n,
                    "type": typ,
                    "serialization_format": "cdr",
                    "offered_qos_profiles": QOS,
                },
                "message_count": counts[n],
            }
            for n, (_, typ) in topics.items()
        ],
    }
    (path / "metadata.yaml").write_text(yaml.safe_dump({"rosbag2_bagfile_information": info}))
    return rows


def _plain(v: Any, store: Any = None) -> Any:
    """Decoded values of any reader (polybag dicts, mcap_ros2 namespaces, rosbags dataclasses
    of type store ``store``) as plain dicts, lists and Python scalars."""
    if isinstance(v, dict):
        return {k: _plain(x, store) for k, x in v.items()}
    if dataclasses.is_dataclass(v):  # rosbags: the fields its store defines (no constants)
        return {n: _plain(getattr(v, n), store) for n, _ in store.fielddefs[v.__msgtype__][1]}
    if isinstance(v, SimpleNamespace):  # mcap_ros2: its slots are the fields
        return {n: _plain(getattr(v, n), store) for n in v.__slots__}
    if isinstance(v, np.ndarray):
        return [_plain(x, store) for x in v.tolist()]
    if isinstance(v, (bytes, bytearray, memoryview)):
        return list(bytes(v))
    if isinstance(v, (list, tuple)):
        return [_plain(x, store) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    return v


def _expected(rows: list[tuple[str, str, int, bytes]]) -> list[tuple[str, int, Any]]:
    """What rosbags' own Humble types decode the input payloads to."""
    ts = _store()
    return [(topic, time, _plain(ts.deserialize_cdr(data, typ), ts)) for topic, typ, time, data in rows]


def _by_time(got: list[tuple[str, int, Any]]) -> list[tuple[str, int, Any]]:
    return sorted(got, key=lambda x: (x[1], x[0]))


def _mcap_ros2_view(path: Path) -> list[tuple[str, int, Any]]:
    """What the ``mcap`` library's ROS 2 decoder reads (from the written schemas only)."""
    with path.open("rb") as fh:
        reader = make_reader(fh, decoder_factories=[DecoderFactory()])
        summary = reader.get_summary()
        assert summary is not None
        for schema in summary.schemas.values():  # every schema is a full definition
            assert schema.encoding == "ros2msg" and schema.data, schema.name
        return [(ch.topic, msg.log_time, _plain(obj)) for _, ch, msg, obj in reader.iter_decoded_messages()]


def _rosbags_view(path: Path) -> list[tuple[str, int, Any]]:
    """What rosbags reads from a rosbag2 directory, with types built only from the
    definitions written in it (not from its own type store)."""
    ts = get_typestore(Stores.EMPTY)
    with RosbagsReader(path) as r:
        types: dict[str, Any] = {}
        for c in r.connections:
            assert c.msgdef.data.strip(), f"{c.topic}: no definition written"
            types.update(get_types_from_msg(c.msgdef.data, c.msgtype))
        ts.register(types)
        return [(c.topic, t, _plain(ts.deserialize_cdr(d, c.msgtype), ts)) for c, t, d in r.messages()]


def _polybag_view(path: Path) -> list[tuple[str, int, Any]]:
    with polybag.open(path) as r:
        return [(m.topic, m.log_time, _plain(m.to_dict())) for m in r.messages()]


def _hashes(bag: Path) -> dict[str, str]:
    info = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    return {
        t["topic_metadata"]["type"]: t["topic_metadata"].get("type_description_hash", "")
        for t in info["topics_with_message_count"]
    }


def _cli(*args: str) -> tuple[int, str]:
    err = io.StringIO()
    with redirect_stdout(io.StringIO()), redirect_stderr(err):
        code = main(list(args))
    return code, err.getvalue()


@pytest.fixture
def old(tmp_path: Path) -> tuple[Path, list[tuple[str, int, Any]]]:
    bag = tmp_path / "old"
    rows = _old_bag(bag)
    expected = _expected(rows)
    with polybag.open(bag) as r:  # the input holds no definition at all
        assert all(not bytes(c.schema.data) for c in r.summary.channels.values() if c.schema is not None)
    assert _by_time(_polybag_view(bag)) == _by_time(expected)
    return bag, expected


def test_old_bag_to_mcap_has_full_definitions(old: tuple[Path, list[Any]], tmp_path: Path) -> None:
    bag, expected = old
    out = tmp_path / "out.mcap"
    code, err = _cli("convert", str(bag), str(out))
    assert code == 0, err
    assert _by_time(_mcap_ros2_view(out)) == _by_time(expected)
    with out.open("rb") as fh:
        summary = make_reader(fh).get_summary()
    assert summary is not None
    imu = next(s for s in summary.schemas.values() if s.name == IMU).data.decode()
    assert "MSG: std_msgs/msg/Header" in imu and "MSG: builtin_interfaces/msg/Time" in imu
    assert "=" * 80 in imu


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_old_bag_to_rosbag2_has_definitions_and_type_hashes(
    old: tuple[Path, list[Any]], tmp_path: Path, storage: str
) -> None:
    bag, expected = old
    out = tmp_path / "out"
    code, err = _cli("convert", str(bag), str(out), "--format", "rosbag2", "--storage", storage)
    assert code == 0, err
    assert _by_time(_rosbags_view(out)) == _by_time(expected)
    assert _by_time(_polybag_view(out)) == _by_time(expected)
    hashes = _hashes(out)
    assert hashes[STRING] == HASHES[STRING] and hashes[IMU] == HASHES[IMU]
    assert hashes[LOG].startswith("RIHS01_") and len(hashes[LOG]) == 7 + 64
    if storage == "mcap":
        assert _by_time(_mcap_ros2_view(next(out.glob("*.mcap")))) == _by_time(expected)


def test_filter_sort_merge_recover_write_full_definitions(
    old: tuple[Path, list[Any]], tmp_path: Path
) -> None:
    bag, expected = old
    ops.filter(bag, tmp_path / "filtered.mcap", expression=lambda topic, m, t: True)
    assert _by_time(_mcap_ros2_view(tmp_path / "filtered.mcap")) == _by_time(expected)
    ops.sort(bag, tmp_path / "sorted.mcap")
    assert _mcap_ros2_view(tmp_path / "sorted.mcap") == _by_time(expected)
    ops.merge(tmp_path / "merged.mcap", [bag])
    assert _by_time(_mcap_ros2_view(tmp_path / "merged.mcap")) == _by_time(expected)
    ops.recover(bag, tmp_path / "recovered.mcap")
    assert _by_time(_mcap_ros2_view(tmp_path / "recovered.mcap")) == _by_time(expected)
    ops.filter(bag, tmp_path / "filtered_bag", format="rosbag2", expression=lambda topic, m, t: True)
    assert _by_time(_rosbags_view(tmp_path / "filtered_bag")) == _by_time(expected)
    ops.merge(tmp_path / "merged_bag", [bag], format="rosbag2")
    assert _by_time(_rosbags_view(tmp_path / "merged_bag")) == _by_time(expected)


@pytest.mark.parametrize("fmt", ["mcap", "rosbag2"])
def test_split_parts_have_full_definitions(old: tuple[Path, list[Any]], tmp_path: Path, fmt: str) -> None:
    bag, expected = old
    parts_dir = tmp_path / "parts"
    parts_dir.mkdir()
    ops.split(bag, size=1 << 30, output_dir=parts_dir, format=fmt)
    parts = sorted(parts_dir.iterdir())
    assert len(parts) == 1
    view = _mcap_ros2_view(parts[0]) if fmt == "mcap" else _rosbags_view(parts[0])
    assert _by_time(view) == _by_time(expected)


def _mcap_without_definitions(path: Path, rows: list[tuple[str, str, int, bytes]]) -> None:
    """An MCAP file (written by the mcap library) whose ros2msg schemas are empty."""
    with path.open("wb") as fh:
        w = McapWriter(fh)
        w.start(profile="ros2", library="test")
        schemas: dict[str, int] = {}
        channels: dict[str, int] = {}
        for topic, typ, time, data in rows:
            if typ not in schemas:
                schemas[typ] = w.register_schema(typ, "ros2msg", b"")
            if topic not in channels:
                channels[topic] = w.register_channel(topic, "cdr", schemas[typ])
            w.add_message(channels[topic], time, data, time)
        w.finish()


def test_compress_and_decompress_of_mcap_fill_empty_schemas(tmp_path: Path) -> None:
    rows = _messages(_store())
    expected = _expected(rows)
    src = tmp_path / "empty_schemas.mcap"
    _mcap_without_definitions(src, rows)
    with src.open("rb") as fh:  # the input has no definition for the reference to read
        summary = make_reader(fh).get_summary()
    assert summary is not None and all(not s.data for s in summary.schemas.values())
    out = tmp_path / "z"
    out.mkdir()
    ops.compress(src, "zstd", output_dir=out)
    assert _by_time(_mcap_ros2_view(out / src.name)) == _by_time(expected)
    back = tmp_path / "plain"
    back.mkdir()
    ops.decompress(src, output_dir=back)
    assert _by_time(_mcap_ros2_view(back / src.name)) == _by_time(expected)
    code, err = _cli("convert", str(src), str(tmp_path / "conv.mcap"))
    assert code == 0, err
    assert _by_time(_mcap_ros2_view(tmp_path / "conv.mcap")) == _by_time(expected)


def test_ros2_to_ros1_bridge_from_an_old_bag(old: tuple[Path, list[Any]], tmp_path: Path) -> None:
    """ROS 2 -> ROS 1 (a .bag output): rosbag (standalone) decodes the bridged String and
    Imu messages with the definitions written."""
    import rosbag

    bag, expected = old
    out = tmp_path / "out.bag"
    code, err = _cli("convert", str(bag), str(out))
    assert code == 0, err
    want = {(t, time): v for t, time, v in expected}
    seen = 0
    with rosbag.Bag(str(out)) as b:
        for topic, msg, t in b.read_messages():
            v = want[(topic, t.to_nsec())]
            if topic == "/chatter":
                assert msg.data == v["data"]
            elif topic == "/imu":
                assert msg.header.frame_id == v["header"]["frame_id"]
                assert (msg.header.stamp.secs, msg.header.stamp.nsecs) == (
                    v["header"]["stamp"]["sec"],
                    v["header"]["stamp"]["nanosec"],
                )
                assert list(msg.orientation_covariance) == v["orientation_covariance"]
                assert msg.angular_velocity.x == v["angular_velocity"]["x"]
            seen += 1
    assert seen >= 8  # /chatter and /imu (rcl_interfaces/Log has no ROS 1 twin: may be dropped)


def test_ros1_corpus_bag_to_rosbag2_and_mcap(tmp_path: Path) -> None:
    """ROS 1 -> ROS 2 (a real third-party bag): both outputs carry full definitions the
    references decode, and the values are rosbag's."""
    import rosbag

    src = (
        Path(__file__).resolve().parents[2].parent
        / "shared"
        / "corpora"
        / "rosbag"
        / "frost"
        / "decompressed.bag"
    )
    if not src.exists():
        pytest.skip("corpus not present")
    with rosbag.Bag(str(src)) as b:
        chatter = [(t.to_nsec(), m.data) for _, m, t in b.read_messages(topics=["/chatter"])]
        arrays = [(t.to_nsec(), list(m.data)) for _, m, t in b.read_messages(topics=["/array"])]
    assert chatter and arrays
    code, err = _cli("convert", str(src), str(tmp_path / "r2"), "--format", "rosbag2")
    assert code == 0, err
    view = _rosbags_view(tmp_path / "r2")
    assert [(t, v["data"]) for topic, t, v in view if topic == "/chatter"] == chatter
    assert [(t, v["data"]) for topic, t, v in view if topic == "/array"] == arrays
    code, err = _cli("convert", str(src), str(tmp_path / "r2.mcap"), "--profile", "ros2")
    assert code == 0, err
    view = _mcap_ros2_view(tmp_path / "r2.mcap")
    assert [(t, v["data"]) for topic, t, v in view if topic == "/chatter"] == chatter


# --- a placeholder definition in the file -----------------------------------------------------------
def _placeholder_bag(path: Path) -> list[tuple[str, str, int, bytes]]:
    """A Jazzy-style bag (rosbags' writer, metadata version 9) whose stored definition of
    rcl_interfaces/msg/Log is the placeholder ``uint8 level``; String's is right."""
    ts = get_typestore(Stores.ROS2_JAZZY)
    rows = _messages(ts)
    with RosbagsWriter(path, version=9) as w:
        conns = {}
        for topic, typ, time, data in rows:
            if topic not in conns:
                conns[topic] = w.add_connection(topic, typ, typestore=ts)
            w.write(conns[topic], time, data)
    db = next(path.glob("*.db3"))
    con = sqlite3.connect(db)
    n = con.execute(
        "UPDATE message_definitions SET encoded_message_definition = 'uint8 level' WHERE topic_type = ?",
        (LOG,),
    ).rowcount
    con.commit()
    con.close()
    assert n == 1
    return rows


def test_placeholder_definition_gives_way_to_the_bundled_one(tmp_path: Path) -> None:
    bag = tmp_path / "jazzy"
    rows = _placeholder_bag(bag)
    expected = _expected(rows)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with polybag.open(bag) as r:
            got = [(m.topic, m.log_time, _plain(m.to_dict())) for m in r.messages()]
            log = next(c for c in r.summary.channels.values() if c.topic == "/rosout")
            assert log.schema is not None and b"string msg" in bytes(log.schema.data)
    said = [str(w.message) for w in caught if issubclass(w.category, PolybagWarning)]
    assert len(said) == 1 and "/rosout" in said[0] and LOG in said[0], said
    assert _by_time(got) == _by_time(expected)
    # conversions write the definition that decoded
    code, err = _cli("convert", str(bag), str(tmp_path / "out.mcap"))
    assert code == 0, err
    assert err.count("warning:") == 1 and "/rosout" in err
    assert _by_time(_mcap_ros2_view(tmp_path / "out.mcap")) == _by_time(expected)
    code, err = _cli("convert", str(bag), str(tmp_path / "out"), "--format", "rosbag2")
    assert code == 0, err
    assert _by_time(_rosbags_view(tmp_path / "out")) == _by_time(expected)


def test_a_right_stored_definition_is_kept(tmp_path: Path) -> None:
    """A stored definition that decodes (and differs from the bundled one only in comments)
    is the one used and written; nothing is said."""
    bag = tmp_path / "jazzy"
    ts = get_typestore(Stores.ROS2_JAZZY)
    rows = _messages(ts)
    with RosbagsWriter(bag, version=9) as w:
        conns = {}
        for topic, typ, time, data in rows:
            if topic not in conns:
                conns[topic] = w.add_connection(topic, typ, typestore=ts)
            w.write(conns[topic], time, data)
    con = sqlite3.connect(next(bag.glob("*.db3")))
    stored = dict(con.execute("SELECT topic_type, encoded_message_definition FROM message_definitions"))
    con.close()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with polybag.open(bag) as r:
            for c in r.summary.channels.values():
                assert c.schema is not None and bytes(c.schema.data).decode() == stored[c.schema.name]
            got = [(m.topic, m.log_time, _plain(m.to_dict())) for m in r.messages()]
    assert not [w for w in caught if issubclass(w.category, PolybagWarning)]
    assert _by_time(got) == _by_time(_expected(rows))


def test_a_type_known_nowhere_is_written_as_it_is(tmp_path: Path) -> None:
    """No definition anywhere (a custom type, no --types): the schema stays empty, the
    messages are copied, and decoding, columns, tables and exports say what is missing
    (not "bytes left over")."""
    bag = tmp_path / "old"
    _old_bag(bag)
    con = sqlite3.connect(bag / "old_0.db3")
    con.execute("UPDATE topics SET type = 'my_msgs/msg/Thing' WHERE name = '/chatter'")
    con.commit()
    con.close()
    meta = (bag / "metadata.yaml").read_text().replace(f"type: {STRING}", "type: my_msgs/msg/Thing")
    (bag / "metadata.yaml").write_text(meta)
    code, err = _cli("convert", str(bag), str(tmp_path / "out.mcap"))
    assert code == 0, err
    with polybag.open(tmp_path / "out.mcap") as r:
        ch = next(c for c in r.summary.channels.values() if c.topic == "/chatter")
        assert ch.schema is not None and ch.schema.name == "my_msgs/msg/Thing" and not bytes(ch.schema.data)
        m = next(r.messages(topics=["/chatter"]))
        with pytest.raises(
            polybag.errors.DecodeError,
            match=r"no definition for my_msgs/msg/Thing \(add it with --types DIR\)",
        ):
            m.decode()
    missing = r"no definition for my_msgs/msg/Thing \(add it with --types DIR\)"
    with polybag.open(bag) as r:
        for columns in (r.topic_columns, r.to_pandas, r.to_arrow):
            with pytest.raises(polybag.errors.DecodeError, match=missing):
                columns("/chatter")
        assert len(r.to_pandas("/imu")) == 4  # the other topics are unaffected
    for fmt in ("csv", "jsonl", "parquet"):
        code, err = _cli("export", str(bag), "-o", str(tmp_path / f"ex_{fmt}"), "--format", fmt)
        assert code != 0 and "no definition for my_msgs/msg/Thing (add it with --types DIR)" in err, err
        assert "left over" not in err
    shutil.rmtree(bag)


# --- real bags (rosbag2's own test resources, kept in tests/corpus/) -----------------------------
CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "rosbag2"


def _rows_from_db3(db3: Path) -> list[tuple[str, str, int, bytes]]:
    """(topic, type, time, bytes) straight from a .db3 (no bag reader involved)."""
    con = sqlite3.connect(f"file:{db3}?mode=ro&immutable=1", uri=True)
    try:
        return [
            (topic, typ, time, bytes(data))
            for topic, typ, time, data in con.execute(
                "SELECT t.name, t.type, m.timestamp, m.data FROM messages m JOIN topics t ON m.topic_id = t.id"
            )
        ]
    finally:
        con.close()


@pytest.mark.parametrize(
    ("name", "placeholder"),
    [("v4_talker_py_2020-06", False), ("v4_talker_sqlite_2023-04", True)],
)
def test_real_talker_bags_convert_with_full_definitions(tmp_path: Path, name: str, placeholder: bool) -> None:
    """rosbag2's talker bags: one with no definitions (2020), one whose message_definitions
    table holds placeholders (``uint8 level`` for rcl_interfaces/msg/Log, 2023).  Their
    MCAP and rosbag2 conversions decode in the references to what rosbags' own Humble
    types read from the raw rows."""
    bag = CORPUS / name
    if not bag.is_dir():
        pytest.skip(f"{bag} is not here")
    src = tmp_path / name
    shutil.copytree(bag, src)
    rows = _rows_from_db3(next(src.glob("*.db3")))
    expected = _expected(rows)
    assert {t for t, *_ in rows} == {"/topic", "/rosout"} and len(rows) == 20
    code, err = _cli("convert", str(src), str(tmp_path / "out.mcap"))
    assert code == 0, err
    said = [ln for ln in err.splitlines() if "warning:" in ln]
    if placeholder:
        assert len(said) == 1 and "/rosout" in said[0] and LOG in said[0], err
    else:
        assert said == [], err
    assert _by_time(_mcap_ros2_view(tmp_path / "out.mcap")) == _by_time(expected)
    code, err = _cli("convert", str(src), str(tmp_path / "out"), "--format", "rosbag2")
    assert code == 0, err
    assert _by_time(_rosbags_view(tmp_path / "out")) == _by_time(expected)
    assert _hashes(tmp_path / "out")["std_msgs/msg/String"] == HASHES[STRING]


def test_types_given_with_types_dir_are_written(tmp_path: Path) -> None:
    """A custom type with no definition in the bag, given with ``--types DIR`` (in a
    process of its own: added types stay for the process): the output carries it."""
    import subprocess
    import sys

    bag = tmp_path / "old"
    rows = _old_bag(bag)
    con = sqlite3.connect(bag / "old_0.db3")
    con.execute("UPDATE topics SET type = 'my_msgs/msg/Thing' WHERE name = '/chatter'")
    con.commit()
    con.close()
    meta = (bag / "metadata.yaml").read_text().replace(f"type: {STRING}", "type: my_msgs/msg/Thing")
    (bag / "metadata.yaml").write_text(meta)
    types = tmp_path / "types" / "my_msgs" / "msg"
    types.mkdir(parents=True)
    (types / "Thing.msg").write_text("# a custom type\nstring data\n")
    out = tmp_path / "out.mcap"
    done = subprocess.run(
        [sys.executable, "-m", "polybag", "--types", str(tmp_path / "types"), "convert", str(bag), str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert _by_time(_mcap_ros2_view(out)) == _by_time(_expected(rows))
    with out.open("rb") as fh:
        summary = make_reader(fh).get_summary()
    assert summary is not None
    thing = next(s for s in summary.schemas.values() if s.name == "my_msgs/msg/Thing")
    assert thing.data.decode().strip() == "string data"
