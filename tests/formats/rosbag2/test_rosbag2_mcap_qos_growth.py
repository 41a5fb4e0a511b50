"""A rosbag2 bag with MCAP storage whose topic gained a QoS profile after its first messages
(a second publisher, issue 28): rosbags matches each MCAP channel with metadata.yaml's topic
(its QoS profiles included) and reads no message of a channel that differs, so the channels
and metadata.yaml must agree -- at close the file is copied once with the channels given the
grown profiles (the pass that also gives late type descriptions); while it is written (and
in a killed recording) metadata.yaml lists the profiles the channel holds."""

from __future__ import annotations

import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import yaml

import polybag
from polybag.errors import PolybagWarning
from polybag.formats.rosbag2 import writer as rosbag2_writer
from sqlite_bag_helpers import count_rewrites, kill_when_ready
from sqlite_bag_helpers import qos_depths as _depths
from sqlite_bag_helpers import qos_yaml as _qos
from sqlite_bag_helpers import string_payload as _payload

STRING = "std_msgs/msg/String"
DEF = b"string data\n"



QOS_A = _qos(10, 1, 1)
QOS_B = _qos(1, 2, 2)


def _meta_depths(bag: Path) -> dict[str, list[int]]:
    meta = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    return {
        t["topic_metadata"]["name"]: _depths(t["topic_metadata"]["offered_qos_profiles"])
        for t in meta["topics_with_message_count"]
    }


def _rosbags(bag: Path) -> tuple[dict[str, int], dict[str, list[int]]]:
    """Messages per topic and each topic's QoS depths, as rosbags reads the bag."""
    from rosbags.rosbag2 import Reader

    counts: dict[str, int] = {}
    with Reader(bag) as rr:
        qos = {c.topic: [q.depth for q in c.ext.offered_qos_profiles] for c in rr.connections}
        for conn, _t, _raw in rr.messages():
            counts[conn.topic] = counts.get(conn.topic, 0) + 1
    return counts, qos


def _mcap_lib(path: Path) -> tuple[int, dict[str, list[int]], dict[str, str]]:
    """Messages, channel QoS depths and the ``rosbag2`` metadata record, as the mcap library reads them."""
    from mcap.reader import make_reader

    with path.open("rb") as f:
        rd = make_reader(f)
        n = sum(1 for _ in rd.iter_messages())
        summary = rd.get_summary()
        assert summary is not None
        qos = {c.topic: _depths(c.metadata.get("offered_qos_profiles", "")) for c in summary.channels.values()}
        md = {m.name: m.metadata["serialized_metadata"] for m in rd.iter_metadata()}
    return n, qos, md


def _write_grown(bag: Path, **options: object) -> None:
    """/tf_static (profile A, then B and A again from later publishers) between its
    messages, /chatter unchanged."""
    w = polybag.Writer(str(bag), format="rosbag2", storage="mcap", **options)
    s = w.add_schema(STRING, "ros2msg", DEF)
    tf = w.add_channel("/tf_static", "cdr", s, {"offered_qos_profiles": QOS_A})
    chat = w.add_channel("/chatter", "cdr", s, {"offered_qos_profiles": QOS_B})
    for i in range(20):
        w.write(tf, _payload(i), 1_000 + i)
        w.write(chat, _payload(i), 1_000 + i)
    w.add_channel("/tf_static", "cdr", s, {"offered_qos_profiles": QOS_A + "\n" + QOS_B})
    for i in range(20, 30):
        w.write(tf, _payload(i), 1_000 + i)
    w.add_channel("/tf_static", "cdr", s, {"offered_qos_profiles": "\n".join([QOS_A, QOS_B, QOS_A])})
    for i in range(30, 40):
        w.write(tf, _payload(i), 1_000 + i)
    w.close()


@pytest.mark.parametrize(
    "options",
    [{}, {"compression": "zstd"}, {"compression": "zstd", "compression_mode": "message"}, {"chunk_size": 300}],
    ids=["plain", "zstd-file", "zstd-message", "small-chunks"],
)
def test_rosbags_reads_every_message_of_a_topic_whose_qos_grew(tmp_path: Path, options: dict[str, object]) -> None:
    bag = tmp_path / "b"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (the rewrite is made: no warning)
        _write_grown(bag, **options)
    whole = options.get("compression") == "zstd" and options.get("compression_mode", "file") == "file"
    names = sorted(p.name for p in bag.iterdir())
    assert names == ["b_0.mcap" + (".zstd" if whole else ""), "metadata.yaml"]  # no temporary file left
    assert _meta_depths(bag) == {"/tf_static": [10, 1, 10], "/chatter": [1]}
    counts, qos = _rosbags(bag)
    assert counts == {"/tf_static": 40, "/chatter": 20}
    assert qos == {"/tf_static": [10, 1, 10], "/chatter": [1]}
    with polybag.open(bag) as r:
        msgs = list(r.messages())
        assert len(msgs) == 60
        tf = [m for m in msgs if m.channel.topic == "/tf_static"]
        assert [m.decode().data for m in tf] == [f"m{i}" for i in range(40)]
        assert _depths(tf[0].channel.metadata["offered_qos_profiles"]) == [10, 1, 10]
    if "compression" not in options:  # the MCAP file alone: the mcap library reads it, channels as metadata.yaml
        n, chq, md = _mcap_lib(bag / "b_0.mcap")
        assert n == 60 and chq == {"/tf_static": [10, 1, 10], "/chatter": [1]}
        stored = yaml.safe_load(md["rosbag2"])["topics_with_message_count"]
        assert {t["topic_metadata"]["name"]: _depths(t["topic_metadata"]["offered_qos_profiles"]) for t in stored} == {
            "/tf_static": [10, 1, 10], "/chatter": [1]}


def test_no_copy_when_nothing_grew(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from polybag.formats.mcap import late_definitions

    def refused(*a: object, **k: object) -> int:
        raise AssertionError("the file was copied although no channel changed")

    monkeypatch.setattr(late_definitions, "rewrite_with_definitions", refused)
    bag = tmp_path / "b"
    w = polybag.Writer(str(bag), format="rosbag2", storage="mcap")
    s = w.add_schema(STRING, "ros2msg", DEF)
    ch = w.add_channel("/a", "cdr", s, {"offered_qos_profiles": QOS_A})
    w.write(ch, _payload(0), 1)
    w.add_channel("/a", "cdr", s, {"offered_qos_profiles": QOS_A})  # the same publisher again: nothing new
    w.write(ch, _payload(1), 2)
    w.close()
    assert _rosbags(bag) == ({"/a": 2}, {"/a": [10]})


def test_a_late_definition_and_grown_qos_in_one_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = count_rewrites(monkeypatch)
    bag = tmp_path / "b"
    typ = "foo_msgs/msg/Bar"  # not known to polybag: without the late text it has no definition
    late_def = b"int16 int16_value\n"
    w = polybag.Writer(str(bag), format="rosbag2", storage="mcap")
    c0 = w.add_channel("/bar", "cdr", w.add_schema(typ, "ros2msg", b""), {"offered_qos_profiles": QOS_A})
    for i in range(5):
        w.write(c0, b"\0\1\0\0" + i.to_bytes(2, "little"), 100 + i)
    c1 = w.add_channel("/bar", "cdr", w.add_schema(typ, "ros2msg", late_def), {"offered_qos_profiles": QOS_B})
    for i in range(5, 10):
        w.write(c1, b"\0\1\0\0" + i.to_bytes(2, "little"), 100 + i)
    w.close()
    assert calls == [1]
    counts, qos = _rosbags(bag)
    assert counts == {"/bar": 10} and qos == {"/bar": [10, 1]}
    with polybag.open(bag) as r:
        assert [m.decode().int16_value for m in r.messages()] == list(range(10))


def test_a_copy_that_cannot_be_made_leaves_the_bag_consistent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No space for the copy: a warning; the file as written and metadata.yaml listing the
    profiles its channels hold, so rosbags still reads every message."""
    from polybag.formats.mcap import late_definitions

    def full(*a: object, **k: object) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(late_definitions, "rewrite_with_definitions", full)
    bag = tmp_path / "b"
    with pytest.warns(PolybagWarning, match="QoS profiles of publishers that appeared during the recording"):
        _write_grown(bag)
    assert _meta_depths(bag) == {"/tf_static": [10], "/chatter": [1]}
    assert _rosbags(bag) == ({"/tf_static": 40, "/chatter": 20}, {"/tf_static": [10], "/chatter": [1]})
    n, chq, md = _mcap_lib(bag / "b_0.mcap")
    assert n == 60 and chq == {"/tf_static": [10], "/chatter": [1]}
    assert "depth: 1\n" not in md["rosbag2"].split("/chatter")[0]  # (its copy of metadata.yaml agrees)


def test_profiles_from_peers_stay_bounded_in_the_channel(tmp_path: Path) -> None:
    """A peer announcing ever new profiles: the channel the copy writes holds at most
    MAX_QOS_PROFILES of them, and rosbags still matches it with metadata.yaml."""
    bag = tmp_path / "b"
    w = polybag.Writer(str(bag), format="rosbag2", storage="mcap")
    s = w.add_schema(STRING, "ros2msg", DEF)
    ch = w.add_channel("/a", "cdr", s, {"offered_qos_profiles": _qos(0)})
    w.write(ch, _payload(0), 1)
    for i in range(1, 300):
        w.add_channel("/a", "cdr", s, {"offered_qos_profiles": _qos(i)})
    w.add_channel("/a", "cdr", s, {"offered_qos_profiles": "not: [a list"})  # does not parse: ignored
    w.write(ch, _payload(1), 2)
    w.close()
    counts, qos = _rosbags(bag)
    assert counts == {"/a": 2} and qos["/a"] == list(range(rosbag2_writer.MAX_QOS_PROFILES))
    _n, chq, _md = _mcap_lib(bag / "b_0.mcap")
    assert chq["/a"] == list(range(rosbag2_writer.MAX_QOS_PROFILES))


# writes /tf_static with one profile, then a second publisher's, metadata.yaml refreshed after
# it (every 10 messages), the last chunk finished; says "ready" and waits to be killed
_CHILD = textwrap.dedent(
    """
    import sys
    import polybag
    from polybag.formats.rosbag2 import writer as W

    W.REFRESH_MESSAGES = 10
    W.REFRESH_SECONDS = 1e9
    A, B = sys.argv[2], sys.argv[3]
    w = polybag.Writer(sys.argv[1], format="rosbag2", storage="mcap")
    s = w.add_schema("std_msgs/msg/String", "ros2msg", b"string data\\n")
    ch = w.add_channel("/tf_static", "cdr", s, {"offered_qos_profiles": A})
    def msg(i):
        t = f"m{i}".encode() + b"\\0"
        return b"\\0\\1\\0\\0" + len(t).to_bytes(4, "little") + t
    for i in range(25):
        w.write(ch, msg(i), 1_000 + i)
    w.add_channel("/tf_static", "cdr", s, {"offered_qos_profiles": A + "\\n" + B})
    for i in range(25, 50):
        w.write(ch, msg(i), 1_000 + i)
    w._mcap.flush()
    print("ready", flush=True)
    sys.stdin.read()
    """
)


def test_a_killed_recording_whose_qos_grew_reads_in_rosbags(tmp_path: Path) -> None:
    out = tmp_path / "run"
    kill_when_ready([sys.executable, "-c", _CHILD, str(out), QOS_A, QOS_B])
    active = tmp_path / "run.active"
    meta = yaml.safe_load((active / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert meta["message_count"] >= 30  # refreshed after the second publisher's profile came
    assert _meta_depths(active) == {"/tf_static": [10]}  # the channel's profiles, not the grown ones
    assert _rosbags(active) == ({"/tf_static": 50}, {"/tf_static": [10]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PolybagWarning)  # (it did not close)
        with polybag.open(active) as r:
            assert [m.decode().data for m in r.messages()] == [f"m{i}" for i in range(50)]
    from polybag.ops import recover

    res = recover(active, tmp_path / "fixed", format="rosbag2")  # recover still completes it
    assert res.verified and res.messages == 50
    assert _rosbags(tmp_path / "fixed") == ({"/tf_static": 50}, {"/tf_static": [10]})
