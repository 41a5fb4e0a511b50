"""The oldest rosbag2 metadata layouts (issue 27), from rosbag2's own test resources:

* ``unversioned_test_2018-09``: no ``version`` (September 2018), a bag-wide ``encoding: cdr``,
  ``topic_and_type`` entries, type names without ``/msg/``;
* ``v1_test_2018-11``: version 1 still with ``topic_and_type`` entries.

polybag reads both (rosbags refuses them): topics, counts, times and bytes as the ``.db3``
holds them, values as rosbags' deserializer decodes the rows given the types of that time;
what it writes from them has the current layout and full definitions.  Hostile variants of
the old layouts are a FormatError naming metadata.yaml.
"""

from __future__ import annotations

import contextlib
import io
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

import polybag
from polybag import codecs
from polybag.cli import main
from polybag.errors import FormatError, PolybagError, UnsupportedError

CORPUS = Path(__file__).resolve().parents[2] / "corpus" / "rosbag2"
BAGS = ["unversioned_test_2018-09", "v1_test_2018-11"]
TOPIC_TYPES = {
    "/array_topic": "test_msgs/StaticArrayPrimitives",
    "/clock": "rosgraph_msgs/Clock",
    "/parameter_events": "rcl_interfaces/ParameterEvent",
    "/test_topic": "test_msgs/Primitives",
}
COUNTS = {"/array_topic": 4, "/clock": 0, "/parameter_events": 0, "/test_topic": 3}

# test_msgs of 2018 (ros2/rcl_interfaces' test_msgs then): the types the bags were written with
_SCALARS = [
    "bool", "byte", "char", "float32", "float64", "int8", "uint8",
    "int16", "uint16", "int32", "uint32", "int64", "uint64", "string",
]  # fmt: skip
PRIMITIVES = "".join(f"{t} {t}_value\n" for t in _SCALARS)
STATIC_ARRAYS = "".join(f"{t}[3] {t}_values\n" for t in _SCALARS)


@pytest.fixture(scope="module")
def types_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("types")
    msg = root / "test_msgs" / "msg"
    msg.mkdir(parents=True)
    (msg / "Primitives.msg").write_text(PRIMITIVES)
    (msg / "StaticArrayPrimitives.msg").write_text(STATIC_ARRAYS)
    codecs.add_types(root)
    return root


def _rows(bag: Path) -> list[tuple[str, int, bytes]]:
    """(topic, timestamp, data) of the .db3, in timestamp order, as SQLite gives them."""
    con = sqlite3.connect(f"file:{bag / 'test.db3'}?mode=ro", uri=True)
    try:
        rows = con.execute(
            "SELECT t.name, m.timestamp, m.data FROM messages m JOIN topics t ON m.topic_id = t.id "
            "ORDER BY m.timestamp, m.id"
        ).fetchall()
    finally:
        con.close()
    return [(str(t), int(ts), bytes(d)) for t, ts, d in rows]


def _rosbags_store() -> Any:
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    store = get_typestore(Stores.EMPTY)
    store.register(get_types_from_msg(PRIMITIVES, "test_msgs/msg/Primitives"))
    store.register(get_types_from_msg(STATIC_ARRAYS, "test_msgs/msg/StaticArrayPrimitives"))
    return store


def _plain(v: Any, name: str = "") -> Any:
    """A decoded value (rosbags' object, polybag's dict, mcap_ros2's object) as plain lists
    and ints: ``byte``/``char``/``uint8`` arrays as lists of 0..255 (rosbags reads ``byte``
    as int8, polybag as bytes)."""
    if isinstance(v, (bytes, bytearray, memoryview)):
        return list(bytes(v))
    if isinstance(v, np.ndarray):
        return _plain(v.tolist(), name)
    if isinstance(v, (list, tuple)):
        out = [_plain(x, name) for x in v]
        return [x & 0xFF for x in out] if name.startswith("byte") else out
    if isinstance(v, dict):
        return {k: _plain(x, k) for k, x in v.items()}
    if hasattr(v, "__dataclass_fields__"):
        return {k: _plain(getattr(v, k), k) for k in v.__dataclass_fields__ if not k.startswith("__")}
    if hasattr(v, "__slots__") and not isinstance(v, (int, float, str, bool)):
        return {k: _plain(getattr(v, k), k) for k in v.__slots__}
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, int) and not isinstance(v, bool) and name.startswith("byte"):
        return v & 0xFF
    return v


def _reference_values(bag: Path) -> list[tuple[str, int, Any]]:
    store = _rosbags_store()
    return [
        (topic, ts, _plain(store.deserialize_cdr(data, _ros2_name(TOPIC_TYPES[topic]))))
        for topic, ts, data in _rows(bag)
    ]


def _ros2_name(name: str) -> str:
    """``pkg/Type`` as rosbags' type store names it, ``pkg/msg/Type``."""
    pkg, _, rest = name.partition("/")
    return name if "/" in rest else f"{pkg}/msg/{rest}"


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("name", BAGS)
def test_rosbags_refuses_the_old_layout(name: str) -> None:
    from rosbags.rosbag2 import Reader

    with pytest.raises(Exception) as err:  # noqa: PT011 - whatever the reference raises
        with Reader(CORPUS / name) as r:
            list(r.messages())
    assert "version" in str(err.value) or "topic_metadata" in str(err.value)


@pytest.mark.parametrize("name", BAGS)
def test_topics_counts_times_and_bytes(name: str) -> None:
    bag = CORPUS / name
    rows = _rows(bag)
    with polybag.open(bag) as r:
        s = r.summary
        assert s.version == ("0" if name.startswith("unversioned") else "1")
        assert {c.topic: c.schema.name if c.schema else "" for c in s.channels.values()} == TOPIC_TYPES
        assert all(c.message_encoding == "cdr" for c in s.channels.values())
        assert {s.channels[cid].topic: n for cid, n in s.message_counts.items()} == COUNTS
        assert (s.start_time, s.end_time) == (rows[0][1], rows[-1][1])
        got = [(m.channel.topic, m.log_time, bytes(m.data)) for m in r.messages()]
    assert got == rows


@pytest.mark.parametrize("name", BAGS)
def test_decoded_values_equal_rosbags_on_the_rows(name: str, types_dir: Path) -> None:
    bag = CORPUS / name
    expected = _reference_values(bag)
    assert len(expected) == 7
    with polybag.open(bag) as r:
        got = [(m.channel.topic, m.log_time, _plain(m.to_dict())) for m in r.messages()]
    assert got == expected
    assert expected[0][2]["string_values"] == ["Complex Hello1", "Complex Hello2", "Complex Hello3"]
    assert expected[1][2]["string_value"] == "test"


@pytest.mark.parametrize("name", BAGS)
def test_info_and_cat(name: str, types_dir: Path) -> None:
    bag = CORPUS / name
    code, out, err = _run(["info", str(bag)])
    assert code == 0, err
    assert f"metadata version {'0' if name.startswith('unversioned') else '1'}" in out
    assert "test_msgs/StaticArrayPrimitives" in out and "Count: 4" in out
    code, out, err = _run(["cat", str(bag), "--json", "--types", str(types_dir)])
    assert code == 0, err
    assert out.count('"string_value":"test"') == 3
    assert out.count("Complex Hello2") == 4


@pytest.mark.parametrize("name", BAGS)
def test_convert_to_rosbag2_writes_the_current_layout(name: str, tmp_path: Path, types_dir: Path) -> None:
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    bag = CORPUS / name
    out = tmp_path / "out"
    code, _, err = _run(["convert", str(bag), str(out), "--format", "rosbag2", "-q", "--types", str(types_dir)])
    assert code == 0, err
    meta = yaml.safe_load((out / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert meta["version"] >= 8
    assert all("topic_metadata" in t and "topic_and_type" not in t for t in meta["topics_with_message_count"])
    assert "encoding" not in meta
    store = get_typestore(Stores.EMPTY)
    with Reader(out) as r:  # rosbags reads what polybag wrote, with the definitions in it
        for c in r.connections:
            assert c.msgdef is not None and c.msgdef.data.strip(), c.topic
            store.register(get_types_from_msg(c.msgdef.data, c.msgtype))
        got = [(c.topic, t, _plain(store.deserialize_cdr(raw, _ros2_name(c.msgtype)))) for c, t, raw in r.messages()]
    assert sorted(got, key=lambda x: (x[1], x[0])) == _reference_values(bag)


@pytest.mark.parametrize("name", BAGS)
def test_convert_to_mcap_decoded_by_mcap_ros2(name: str, tmp_path: Path, types_dir: Path) -> None:
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    bag = CORPUS / name
    out = tmp_path / "out.mcap"
    code, _, err = _run(["convert", str(bag), str(out), "-q", "--types", str(types_dir)])
    assert code == 0, err
    with out.open("rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        summary = reader.get_summary()
        assert summary is not None
        assert all(s.encoding == "ros2msg" and s.data.strip() for s in summary.schemas.values())
        got = [
            (ch.topic, m.log_time, _plain(d))
            for _, ch, m, d in reader.iter_decoded_messages(log_time_order=True)
        ]
    assert got == _reference_values(bag)


# --- hostile variants of the old layouts ------------------------------------------------------
UNVERSIONED = (CORPUS / "unversioned_test_2018-09" / "metadata.yaml").read_text()
V1 = (CORPUS / "v1_test_2018-11" / "metadata.yaml").read_text()


def _huge_topics() -> str:
    entry = "    - topic_and_type: {name: /t, type: a/B}\n      message_count: 0\n"
    head = UNVERSIONED.split("  topics_with_message_count:")[0]
    return head + "  topics_with_message_count:\n" + entry * 70_000


HOSTILE = {
    "no encoding": UNVERSIONED.replace("  encoding: cdr\n", ""),
    "encoding a list": UNVERSIONED.replace("encoding: cdr", "encoding: [cdr]"),
    "entry without name": UNVERSIONED.replace("        name: /test_topic\n", ""),
    "type a mapping": UNVERSIONED.replace("type: test_msgs/Primitives", "type: {a: 1}"),
    "topic_and_type a list": UNVERSIONED.replace(
        "    - topic_and_type:\n        name: /test_topic\n        type: test_msgs/Primitives\n",
        "    - topic_and_type: [1, 2]\n",
    ),
    "unversioned with topic_metadata": UNVERSIONED.replace("topic_and_type", "topic_metadata"),
    "version 2 with topic_and_type": V1.replace("version: 1", "version: 2"),
    "version text": V1.replace("version: 1", "version: one"),
    "version negative": V1.replace("version: 1", "version: -1"),
    "message_count text": UNVERSIONED.replace("message_count: 3", "message_count: three"),
    "flat start negative": UNVERSIONED.replace(
        "  starting_time:\n    nanoseconds_since_epoch: 1537282604241440135\n", "  time_start_in_nanoseconds: -5\n"
    ),
    "topics a mapping": UNVERSIONED.split("  topics_with_message_count:")[0] + "  topics_with_message_count: {a: 1}\n",
    "huge topic list": _huge_topics(),
    "relative path outside": UNVERSIONED.replace("    - test.db3", "    - ../test.db3"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_old_layouts_are_format_errors_naming_metadata_yaml(case: str, tmp_path: Path) -> None:
    text = HOSTILE[case]
    assert text not in (UNVERSIONED, V1)
    bag = tmp_path / "bag"
    shutil.copytree(CORPUS / "unversioned_test_2018-09", bag)
    (bag / "metadata.yaml").write_text(text)
    with pytest.raises(FormatError) as err:
        with polybag.open(bag) as r:
            _ = r.summary
    assert "metadata.yaml" in str(err.value)
    code, _, stderr = _run(["info", str(bag)])
    assert code != 0 and "metadata.yaml" in stderr and "Traceback" not in stderr


def test_a_newer_version_is_still_unsupported(tmp_path: Path) -> None:
    bag = tmp_path / "bag"
    shutil.copytree(CORPUS / "v1_test_2018-11", bag)
    (bag / "metadata.yaml").write_text(V1.replace("version: 1", "version: 99"))
    with pytest.raises(UnsupportedError, match="metadata.yaml.*version 99"):
        polybag.open(bag)
    assert issubclass(UnsupportedError, PolybagError)


def test_the_flat_times_of_the_first_files(tmp_path: Path) -> None:
    """The very first layout (September 2018) spelled the times flat."""
    bag = tmp_path / "bag"
    shutil.copytree(CORPUS / "unversioned_test_2018-09", bag)
    text = UNVERSIONED.replace(
        "  duration:\n    nanoseconds: 155979811\n", "  duration_in_nanoseconds: 155979811\n"
    ).replace(
        "  starting_time:\n    nanoseconds_since_epoch: 1537282604241440135\n",
        "  time_start_in_nanoseconds: 1537282604241440135\n",
    )
    assert "starting_time" not in text and "duration:" not in text
    (bag / "metadata.yaml").write_text(text)
    with polybag.open(bag) as r:
        assert (r.summary.start_time, r.summary.end_time) == (1537282604241440135, 1537282604241440135 + 155979811)
