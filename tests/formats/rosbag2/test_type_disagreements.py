"""The type of a topic when ``metadata.yaml`` and the ``.db3`` topics table disagree (issue 27).

rosbag2's sequential reader takes the topics and their types from metadata.yaml (the storage's
topics table only names each message's topic): polybag does the same, and says so once, in
``info``, ``check`` and every other command, naming the topic and both types.  A type spelled
``pkg/Type`` in one place and ``pkg/msg/Type`` in the other is one type: nothing is said.
"""

from __future__ import annotations

import io
import sqlite3
import warnings
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
import yaml
from mcap.reader import make_reader
from rosbag2_helpers import STRING, polybag_view, rosbags_view, write_rosbags_bag
from rosbags.rosbag2 import Reader as RosbagsReader

import polybag
from polybag.cli import main
from polybag.errors import PolybagWarning

OTHER = "example_interfaces/msg/String"


def _retype_table(bag: Path, topic: str, typ: str) -> None:
    """Give ``topic`` type ``typ`` in the storage file's topics table only."""
    con = sqlite3.connect(next(bag.glob("*.db3")))
    assert con.execute("UPDATE topics SET type = ? WHERE name = ?", (typ, topic)).rowcount == 1
    con.commit()
    con.close()


def _retype_metadata(bag: Path, topic: str, typ: str) -> None:
    meta = yaml.safe_load((bag / "metadata.yaml").read_text())
    for t in meta["rosbag2_bagfile_information"]["topics_with_message_count"]:
        if t["topic_metadata"]["name"] == topic:
            t["topic_metadata"]["type"] = typ
    (bag / "metadata.yaml").write_text(yaml.safe_dump(meta))


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def _warnings_opening(bag: Path) -> tuple[dict[str, str], list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with polybag.open(bag) as r:
            types = {c.topic: c.type_name for c in r.summary.channels.values()}
            for m in r.messages(topics=["/chatter"]):
                assert m.decode().data.startswith("hello")
    return types, [str(w.message) for w in caught if issubclass(w.category, PolybagWarning)]


def test_metadata_type_wins_and_is_reported(tmp_path: Path) -> None:
    bag = tmp_path / "bag"
    written = write_rosbags_bag(bag)
    _retype_table(bag, "/chatter", OTHER)  # the table is wrong, metadata.yaml right
    with RosbagsReader(bag) as r:  # the reference reads metadata.yaml's type
        assert {c.topic: c.msgtype for c in r.connections}["/chatter"] == STRING
    types, said = _warnings_opening(bag)
    assert types["/chatter"] == STRING
    assert len(said) == 1, said
    assert "/chatter" in said[0] and STRING in said[0] and OTHER in said[0] and "metadata.yaml" in said[0]
    # every message is read (rosbags, matching the table's rows to metadata.yaml by
    # topic and type, reads none of /chatter's: polybag follows rosbag2 there)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PolybagWarning)
        assert sorted((t, tm, d) for t, _, tm, d in polybag_view(bag)) == sorted(written)
    assert [t for t, *_ in rosbags_view(bag)].count("/chatter") == 0
    for command in ("info", "check"):
        code, out, err = _cli(command, str(bag))
        assert code == 0, err
        lines = [ln for ln in err.splitlines() if "warning:" in ln]
        assert len(lines) == 1 and "/chatter" in lines[0] and STRING in lines[0] and OTHER in lines[0], err
    assert OTHER not in _cli("info", str(bag))[1]  # the table's type is not shown as the topic's
    # a conversion writes the metadata's type
    out_mcap = tmp_path / "out.mcap"
    code, _, err = _cli("convert", str(bag), str(out_mcap))
    assert code == 0, err
    with out_mcap.open("rb") as fh:
        summary = make_reader(fh).get_summary()
    assert summary is not None
    chatter = next(c for c in summary.channels.values() if c.topic == "/chatter")
    assert summary.schemas[chatter.schema_id].name == STRING


def test_wrong_metadata_type_is_followed_as_rosbag2_does(tmp_path: Path) -> None:
    """metadata.yaml wrong, the table right: rosbag2 (and rosbags) read metadata.yaml's type,
    so polybag does too, and says which type the file had."""
    bag = tmp_path / "bag"
    write_rosbags_bag(bag)
    _retype_metadata(bag, "/chatter", OTHER)
    with RosbagsReader(bag) as r:
        assert {c.topic: c.msgtype for c in r.connections}["/chatter"] == OTHER
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with polybag.open(bag) as r:
            assert {c.topic: c.type_name for c in r.summary.channels.values()}["/chatter"] == OTHER
    said = [str(w.message) for w in caught if issubclass(w.category, PolybagWarning)]
    assert len(said) == 1 and OTHER in said[0] and STRING in said[0]


def test_one_type_spelled_two_ways_is_no_disagreement(tmp_path: Path) -> None:
    bag = tmp_path / "bag"
    write_rosbags_bag(bag)
    _retype_metadata(bag, "/chatter", "std_msgs/String")
    types, said = _warnings_opening(bag)
    assert said == []
    assert types["/chatter"] == STRING  # the storage file's spelling
    code, _, err = _cli("check", str(bag))
    assert code == 0 and "warning" not in err, err


def test_real_v1_bag_takes_its_types_from_metadata(tmp_path: Path) -> None:
    """rosbag2's own cdr_test bag of 2019 (metadata version 1): its .db3 names the types
    test_msgs/Primitives and StaticArrayPrimitives, its metadata.yaml BasicTypes and Arrays;
    rosbags and rosbag2 read the latter."""
    bag = Path(__file__).resolve().parents[2] / "corpus" / "rosbag2" / "v1_cdr_test_2019-05"
    if not bag.is_dir():
        pytest.skip(f"{bag} is not here")
    with RosbagsReader(bag) as r:
        reference = {c.topic: c.msgtype for c in r.connections}
    assert reference == {"/test_topic": "test_msgs/BasicTypes", "/array_topic": "test_msgs/Arrays"}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with polybag.open(bag) as r:
            types = {c.topic: c.type_name for c in r.summary.channels.values()}
            assert {t: types[t] for t in reference} == reference
            assert sum(1 for _ in r.messages()) == 7
    said = [str(w.message) for w in caught if "metadata.yaml wins" in str(w.message)]
    assert len(said) == 2
    assert any("test_msgs/Primitives" in s and "test_msgs/BasicTypes" in s for s in said)
    code, _, err = _cli("info", str(bag))
    assert code == 0 and err.count("metadata.yaml wins") == 2, err
