"""metadata.yaml versions 1-9 and the older ``.db3`` schemas (no QoS column, no
message_definitions), QoS as a YAML string or a list, and hypothesis round trips through
the writer (both storages, every compression)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polybag
from polybag.formats.rosbag2.metadata import parse_metadata, qos_for_version

QOS_V8 = (
    "- history: 3\n  depth: 0\n  reliability: 1\n  durability: 2\n  avoid_ros_namespace_conventions: false"
)


def _db(
    path: Path, schema: int, rows: list[tuple[int, int, bytes]], topics: list[tuple[int, str, str]]
) -> None:
    """A ``.db3`` with the tables of sqlite schema ``schema`` (1: no QoS column; 2-3: QoS;
    4: type hashes and message_definitions)."""
    con = sqlite3.connect(path)
    cols = (
        "id INTEGER PRIMARY KEY, name TEXT NOT NULL, type TEXT NOT NULL, serialization_format TEXT NOT NULL"
    )
    if schema >= 2:
        cols += ", offered_qos_profiles TEXT NOT NULL"
    if schema >= 4:
        cols += ", type_description_hash TEXT NOT NULL"
    con.execute(f"CREATE TABLE topics({cols})")
    con.execute(
        "CREATE TABLE messages(id INTEGER PRIMARY KEY, topic_id INTEGER NOT NULL, timestamp INTEGER NOT NULL, data BLOB NOT NULL)"
    )
    con.execute("CREATE INDEX timestamp_idx ON messages (timestamp ASC)")
    if schema >= 3:
        con.execute("CREATE TABLE schema(schema_version INTEGER PRIMARY KEY, ros_distro TEXT NOT NULL)")
        con.execute("INSERT INTO schema VALUES (?, 'humble')", (schema,))
    if schema >= 4:
        con.execute(
            "CREATE TABLE message_definitions(id INTEGER PRIMARY KEY, topic_type TEXT NOT NULL, encoding TEXT NOT NULL,"
            " encoded_message_definition TEXT NOT NULL, type_description_hash TEXT NOT NULL)"
        )
        con.execute(
            "INSERT INTO message_definitions VALUES (1, 'std_msgs/msg/String', 'ros2msg', 'string data', '')"
        )
    for tid, name, typ in topics:
        vals: list[object] = [tid, name, typ, "cdr"]
        if schema >= 2:
            vals.append(QOS_V8)
        if schema >= 4:
            vals.append("")
        con.execute(f"INSERT INTO topics VALUES ({', '.join('?' * len(vals))})", vals)
    con.executemany("INSERT INTO messages(topic_id, timestamp, data) VALUES (?, ?, ?)", rows)
    con.commit()
    con.close()


def _meta(
    version: int, files: list[str], topics: list[dict[str, object]], count: int, start: int, dur: int
) -> str:
    body: dict[str, object] = {
        "version": version,
        "storage_identifier": "sqlite3",
        "relative_file_paths": files,
        "duration": {"nanoseconds": dur},
        "starting_time": {"nanoseconds_since_epoch": start},
        "message_count": count,
        "topics_with_message_count": topics,
    }
    if version >= 3:
        body["compression_format"] = ""
        body["compression_mode"] = ""
    if version >= 5:
        body["files"] = [
            {
                "path": f,
                "starting_time": {"nanoseconds_since_epoch": start},
                "duration": {"nanoseconds": dur},
                "message_count": count,
            }
            for f in files
        ]
    return yaml.safe_dump({"rosbag2_bagfile_information": body})


def _string(text: str) -> bytes:
    b = text.encode() + b"\0"
    return b"\0\1\0\0" + len(b).to_bytes(4, "little") + b


@pytest.mark.parametrize("version", range(1, 10))
def test_every_metadata_version_and_db_schema(tmp_path: Path, version: int) -> None:
    schema = 1 if version == 1 else 2 if version < 4 else 3 if version < 8 else 4
    bag = tmp_path / "bag"
    bag.mkdir()
    rows = [(1 + i % 2, 100 - i, _string(f"m{i}")) for i in range(10)]
    _db(bag / "bag_0.db3", schema, rows, [(1, "/a", "std_msgs/msg/String"), (2, "/b", "std_msgs/msg/String")])
    qos: object = QOS_V8 if version < 9 else [{"history": "keep_last", "depth": 5, "durability": "volatile"}]
    topics = [
        {
            "topic_metadata": {
                "name": t,
                "type": "std_msgs/msg/String",
                "serialization_format": "cdr",
                "offered_qos_profiles": qos,
            },
            "message_count": 5,
        }
        for t in ("/a", "/b")
    ]
    if version == 1:
        for t in topics:
            t["topic_metadata"].pop("offered_qos_profiles")  # type: ignore[attr-defined]
    (bag / "metadata.yaml").write_text(_meta(version, ["bag_0.db3"], topics, 10, 91, 9))
    with polybag.open(bag) as r:
        s = r.summary
        assert s.version == str(version) and s.topic_message_counts() == {"/a": 5, "/b": 5}
        assert (s.start_time, s.end_time) == (91, 100)
        msgs = list(r.messages())
        assert [m.log_time for m in msgs] == list(range(91, 101))
        assert [m.decode().data for m in msgs] == [f"m{i}" for i in range(9, -1, -1)]
        ch = next(iter(s.channels.values()))
        assert ch.schema is not None and ch.schema.name == "std_msgs/msg/String"
        assert ch.schema.data == (b"string data" if schema >= 4 else b"")  # none before schema 4
        if version >= 2:
            profiles = yaml.safe_load(ch.metadata["offered_qos_profiles"])
            assert isinstance(profiles, list) and profiles[0]["history"] in (3, "keep_last")


def test_qos_spellings_convert_both_ways() -> None:
    as9 = qos_for_version(QOS_V8, 9)
    assert isinstance(as9, list) and as9[0]["history"] == "unknown" and as9[0]["durability"] == "volatile"
    back = qos_for_version(yaml.safe_dump(as9), 8)
    assert isinstance(back, str) and yaml.safe_load(back)[0]["durability"] == 2
    assert qos_for_version("", 9) == [] and qos_for_version("", 8) == ""


def test_metadata_of_older_rosbag2_layouts_parse() -> None:
    text = b"""rosbag2_bagfile_information:
  version: 2
  storage_identifier: sqlite3
  relative_file_paths: [a_0.db3, a_1.db3]
  duration: {nanoseconds: 5}
  starting_time: {nanoseconds_since_epoch: 7}
  message_count: 3
  topics_with_message_count:
    - topic_metadata: {name: /x, type: pkg/msg/T, serialization_format: cdr, offered_qos_profiles: ''}
      message_count: 3
"""
    info = parse_metadata(text, "m.yaml")
    assert [f.path for f in info.files] == ["a_0.db3", "a_1.db3"] and info.topics[0].message_count == 3
    assert info.compression_mode == "" and info.starting_time == 7


PAYLOAD = st.binary(min_size=0, max_size=64)
MESSAGES = st.lists(
    st.tuples(st.sampled_from(["/a", "/b", "/c/d"]), st.integers(0, (1 << 63) - 1), PAYLOAD),
    min_size=0,
    max_size=40,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    msgs=MESSAGES,
    storage=st.sampled_from(["sqlite3", "mcap"]),
    comp=st.sampled_from([("none", "file"), ("zstd", "file"), ("zstd", "message")]),
    version=st.sampled_from([8, 9]),
)
def test_round_trip(
    tmp_path_factory: pytest.TempPathFactory,
    msgs: list[tuple[str, int, bytes]],
    storage: str,
    comp: tuple[str, str],
    version: int,
) -> None:
    out = tmp_path_factory.mktemp("rt") / "bag"
    types = {"/a": "pkg/msg/A", "/b": "pkg/msg/B", "/c/d": "pkg/msg/A"}
    with polybag.Writer(
        str(out),
        format="rosbag2",
        storage=storage,
        compression=comp[0],
        compression_mode=comp[1],
        version=version,
    ) as w:
        schemas = {t: w.add_schema(t, "ros2msg", b"uint8[] data\n") for t in sorted(set(types.values()))}
        chans = {topic: w.add_channel(topic, "cdr", schemas[typ], {}) for topic, typ in types.items()}
        for topic, t, data in msgs:
            w.write(chans[topic], data, t)
    expect = sorted(msgs, key=lambda m: m[1])  # stable: ties in written order
    with polybag.open(out) as r:
        got = [(m.topic, m.log_time, bytes(m.data)) for m in r.messages()]
        assert got == expect
        assert r.summary.message_count == len(msgs)
        assert {c.topic: c.type_name for c in r.summary.channels.values()} == types
        if msgs:
            assert r.summary.start_time == expect[0][1] and r.summary.end_time == expect[-1][1]
        assert [(m.topic, m.log_time) for m in r.messages(order="file")] == [(m[0], m[1]) for m in msgs]


def test_a_lone_db3_opens_without_metadata(tmp_path: Path) -> None:
    rows = [(1, 50 - i, _string(f"m{i}")) for i in range(6)]
    _db(tmp_path / "loose.db3", 4, rows, [(1, "/a", "std_msgs/msg/String")])
    with polybag.open(tmp_path / "loose.db3") as r:
        assert r.format == "rosbag2" and not r.summary.indexed and not r.has_index
        assert r.summary.message_count == 6 and (r.summary.start_time, r.summary.end_time) == (45, 50)
        assert [m.decode().data for m in r.messages()] == [f"m{i}" for i in range(5, -1, -1)]
