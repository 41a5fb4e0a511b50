"""A rosbag2 bag being written has its metadata.yaml from the start, refreshed as it goes: a
killed writer (SIGKILL) leaves a bag that polybag and rosbags open as it is; and the QoS
profiles of a topic grow when a publisher with another profile appears (issue 28)."""

from __future__ import annotations

import os
import sqlite3
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import yaml

import polybag
from polybag.formats.mcap.records import PROVISIONAL_END
from polybag.formats.rosbag2 import writer as rosbag2_writer
from sqlite_bag_helpers import kill_when_ready
from sqlite_bag_helpers import qos_yaml as _qos
from sqlite_bag_helpers import string_payload as _payload

STRING = "std_msgs/msg/String"


# writes 350 messages (metadata.yaml refreshed every 100), hands the storage the last 50
# (committed / a finished chunk) without refreshing metadata.yaml, says "ready" and waits
_CHILD = textwrap.dedent(
    """
    import sys
    import polybag
    from polybag.formats.rosbag2 import writer as W

    W.REFRESH_MESSAGES = 100
    QOS = sys.argv[3]
    W.REFRESH_SECONDS = 1e9
    out, storage = sys.argv[1], sys.argv[2]
    w = polybag.Writer(out, format="rosbag2", storage=storage)
    s = w.add_schema("std_msgs/msg/String", "ros2msg", b"string data\\n")
    ch = w.add_channel("/chatter", "cdr", s, {"offered_qos_profiles": QOS})
    for i in range(350):
        t = f"m{i}".encode() + b"\\0"
        w.write(ch, b"\\0\\1\\0\\0" + len(t).to_bytes(4, "little") + t, 1_000_000_000 + i * 1000)
    (w._db or w._mcap).flush()
    print("ready", flush=True)
    sys.stdin.read()
    """
)


def _killed(tmp_path: Path, storage: str) -> Path:
    """The ``.active`` directory a writer killed with SIGKILL left (after 350 messages)."""
    out = tmp_path / "run"
    kill_when_ready([sys.executable, "-c", _CHILD, str(out), storage, _qos(7)])
    return tmp_path / "run.active"


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_a_killed_recording_opens_as_it_is(tmp_path: Path, storage: str) -> None:
    from rosbags.rosbag2 import Reader

    from polybag.ops import recover

    active = _killed(tmp_path, storage)
    meta = yaml.safe_load((active / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert meta["message_count"] == 300  # as last refreshed: it lags the storage
    assert meta["topics_with_message_count"][0]["topic_metadata"]["name"] == "/chatter"
    want = [(1_000_000_000 + i * 1000, _payload(i)) for i in range(350)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with polybag.open(active) as r:
            got = [(m.log_time, bytes(m.data)) for m in r.messages()]
            assert r.summary.message_count == 350  # counted from the storage, not metadata.yaml
            assert not r.summary.indexed
            ch = next(iter(r.summary.channels.values()))
            assert ch.topic == "/chatter" and "depth: 7" in ch.metadata["offered_qos_profiles"]
    assert got == want
    assert any("did not close" in str(w.message) for w in caught), [str(w.message) for w in caught]
    with Reader(active) as rr:  # rosbags opens it too, and reads every message the storage holds
        assert [(t, bytes(d)) for _c, t, d in rr.messages()] == want
    res = recover(active, tmp_path / "fixed", format="rosbag2")  # recover still completes it
    assert res.verified and res.messages == 350
    with polybag.open(tmp_path / "fixed") as r:
        assert r.summary.indexed and r.summary.message_count == 350


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_metadata_is_there_while_writing(tmp_path: Path, storage: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from rosbags.rosbag2 import Reader

    monkeypatch.setattr(rosbag2_writer, "REFRESH_MESSAGES", 10)
    monkeypatch.setattr(rosbag2_writer, "REFRESH_SECONDS", 1e9)
    w = polybag.Writer(str(tmp_path / "b"), format="rosbag2", storage=storage, compression="zstd")
    active = tmp_path / "b.active"
    first = yaml.safe_load((active / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert first["message_count"] == 0 and not first["topics_with_message_count"]
    # (the storage file is compressed whole only at close: listed as it is meanwhile)
    assert first["compression_mode"] == "" and (active / first["relative_file_paths"][0]).is_file()
    s = w.add_schema(STRING, "ros2msg", b"string data\n")
    ch = w.add_channel("/a", "cdr", s)
    for i in range(25):
        w.write(ch, _payload(i), i + 1)
    meta = yaml.safe_load((active / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert meta["message_count"] == 20 and meta["topics_with_message_count"][0]["message_count"] == 20
    with Reader(active) as rr:  # a reader opens the bag while it is written
        assert len(list(rr.messages())) >= 20
    w.close()
    final = tmp_path / "b"
    names = sorted(os.listdir(final))
    assert names == sorted(["metadata.yaml", f"b_0.{'db3' if storage == 'sqlite3' else 'mcap'}.zstd"])
    with polybag.open(final) as r:
        assert r.summary.indexed and r.summary.message_count == 25
        assert [bytes(m.data) for m in r.messages()] == [_payload(i) for i in range(25)]


def test_a_finished_mcap_storage_has_no_provisional_end(tmp_path: Path) -> None:
    w = polybag.Writer(str(tmp_path / "b"), format="rosbag2", storage="mcap", chunk_size=64)
    s = w.add_schema(STRING, "ros2msg", b"string data\n")
    ch = w.add_channel("/a", "cdr", s)
    for i in range(100):
        w.write(ch, _payload(i), i + 1)
    w.close()
    data = (tmp_path / "b" / "b_0.mcap").read_bytes()
    assert data.endswith(b"\x89MCAP0\r\n") and PROVISIONAL_END not in data
    with polybag.open(tmp_path / "b" / "b_0.mcap") as r:  # the MCAP file alone: its own summary
        assert r.summary.indexed and r.summary.message_count == 100


_QOS_A = _qos(10, 1, 1)
_QOS_B = _qos(1, 2, 2)


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_qos_of_every_publisher_is_kept(tmp_path: Path, storage: str) -> None:
    """Two QoS profiles for one topic, added at different times (a second publisher
    discovered after the first messages): both listed, each once."""
    from rosbags.rosbag2 import Reader

    w = polybag.Writer(str(tmp_path / "b"), format="rosbag2", storage=storage)
    s = w.add_schema("tf2_msgs/msg/TFMessage", "ros2msg", b"geometry_msgs/TransformStamped[] transforms\n")
    ch = w.add_channel("/tf_static", "cdr", s, {"offered_qos_profiles": _QOS_A})
    w.write(ch, b"\0\1\0\0\0\0\0\0", 1)
    again = w.add_channel("/tf_static", "cdr", s, {"offered_qos_profiles": _QOS_B})
    assert again is ch  # the same topic
    w.add_channel("/tf_static", "cdr", s, {"offered_qos_profiles": _QOS_A + "\n" + _QOS_B})  # no repeats
    w.write(ch, b"\0\1\0\0\0\0\0\0", 2)
    # a third publisher with the first one's profile: listed once per publisher, as rosbag2 does
    w.add_channel("/tf_static", "cdr", s, {"offered_qos_profiles": "\n".join([_QOS_A, _QOS_B, _QOS_A])})
    w.add_channel("/tf_static", "cdr", s, {"offered_qos_profiles": _QOS_A})  # (nothing new)
    w.close()
    bag = tmp_path / "b"
    meta = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    profiles = yaml.safe_load(meta["topics_with_message_count"][0]["topic_metadata"]["offered_qos_profiles"])
    assert [(p["depth"], p["reliability"]) for p in profiles] == [(10, 1), (1, 2), (10, 1)]
    if storage == "sqlite3":  # the topics row too (it was written when the topic was created)
        con = sqlite3.connect(bag / "b_0.db3")
        try:
            (row,) = con.execute("SELECT offered_qos_profiles FROM topics").fetchall()
        finally:
            con.close()
        assert [p["depth"] for p in yaml.safe_load(row[0])] == [10, 1, 10]
    with polybag.open(bag) as r:
        (c,) = r.summary.channels.values()
        assert [p["depth"] for p in yaml.safe_load(c.metadata["offered_qos_profiles"])] == [10, 1, 10]
    with Reader(bag) as rr:
        (conn,) = rr.connections
        assert len(conn.ext.offered_qos_profiles) == 3


def test_qos_profiles_from_peers_are_bounded(tmp_path: Path) -> None:
    w = polybag.Writer(str(tmp_path / "b"), format="rosbag2")
    s = w.add_schema(STRING, "ros2msg", b"string data\n")
    ch = w.add_channel("/a", "cdr", s, {"offered_qos_profiles": "- depth: 0"})
    for i in range(1, 300):  # a peer announcing ever new profiles
        w.add_channel("/a", "cdr", s, {"offered_qos_profiles": f"- depth: {i}"})
    w.add_channel("/a", "cdr", s, {"offered_qos_profiles": "- depth: 0\n" * 300})  # one profile, many times
    w.add_channel("/a", "cdr", s, {"offered_qos_profiles": "not: [a list"})  # does not parse: ignored
    w.write(ch, _payload(0), 1)
    w.close()
    with polybag.open(tmp_path / "b") as r:
        (c,) = r.summary.channels.values()
        got = yaml.safe_load(c.metadata["offered_qos_profiles"])
    assert len(got) == rosbag2_writer.MAX_QOS_PROFILES and got[0] == {"depth": 0}
