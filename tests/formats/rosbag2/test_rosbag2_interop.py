"""rosbag2 interop with the peers: bags rosbags writes, read by polybag, equal rosbags' own
reading (topic, type, time, bytes, decoded values, QoS); bags polybag writes, read by rosbags
(and, MCAP storage, by the mcap library with mcap-ros2-support) equal what was written."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from rosbag2_helpers import IMU, STRING, polybag_view, rosbags_view, typestore, write_rosbags_bag

import polybag
from polybag.formats.rosbag2.metadata import qos_for_version

CASES = [
    (storage, comp, version)
    for storage in ("sqlite3", "mcap")
    for comp in (None, "file", "message")
    for version in (8, 9)
]


@pytest.mark.parametrize(("storage", "comp", "version"), CASES)
def test_rosbags_bags_read_as_rosbags_reads_them(
    tmp_path: Path, storage: str, comp: str | None, version: int
) -> None:
    bag = tmp_path / "bag"
    written = write_rosbags_bag(bag, storage=storage, compression=comp, version=version)
    theirs = rosbags_view(bag)
    ours = polybag_view(bag)
    assert ours == theirs
    assert sorted((t, time, d) for t, _, time, d in ours) == sorted(written)
    with polybag.open(bag) as r:
        s = r.summary
        assert r.format == "rosbag2" and s.indexed
        assert s.topic_message_counts() == {"/chatter": 20, "/imu": 10}
        assert s.start_time == min(t for _, t, _ in written) and s.end_time == max(t for _, t, _ in written)
        by_topic = {c.topic: c for c in s.channels.values()}
        assert {c.message_encoding for c in by_topic.values()} == {"cdr"}
        assert by_topic["/imu"].schema is not None and by_topic["/imu"].schema.name == IMU
        assert (
            by_topic["/imu"].schema.encoding == "ros2msg"
            and b"geometry_msgs/Quaternion" in by_topic["/imu"].schema.data
        )
        qos = yaml.safe_load(by_topic["/chatter"].metadata["offered_qos_profiles"])
        assert qos[0]["depth"] == 10 and qos[0]["durability"] in (1, "transient_local")
        assert r.info_extras()["storage"] == storage
        assert r.info_extras()["compression_mode"] == (comp or "")
        assert r.info_extras()["qos"] == {"/chatter": "reliable transient_local keep_last(10)"}
        # decoded values equal rosbags' deserialisation
        ts = typestore()
        for m, obj in r.decoded_messages(topics=["/imu"]):
            ref = ts.deserialize_cdr(bytes(m.data), IMU)
            assert obj.header.frame_id == ref.header.frame_id and obj.header.stamp.sec == ref.header.stamp.sec
            assert list(obj.orientation_covariance) == list(ref.orientation_covariance)
            assert obj.angular_velocity.x == ref.angular_velocity.x


@pytest.mark.parametrize(("storage", "comp", "version"), CASES)
def test_filters_and_windows_equal_a_python_filter(
    tmp_path: Path, storage: str, comp: str | None, version: int
) -> None:
    bag = tmp_path / "bag"
    write_rosbags_bag(bag, storage=storage, compression=comp, version=version)
    every = polybag_view(bag)
    times = sorted(t for _, _, t, _ in every)
    lo, hi = times[5], times[20]
    assert polybag_view(bag, topics=["/imu"]) == [m for m in every if m[0] == "/imu"]
    assert polybag_view(bag, topics="/ch.*") == [m for m in every if m[0] == "/chatter"]
    assert polybag_view(bag, start=lo, end=hi) == [m for m in every if lo <= m[2] < hi]
    assert polybag_view(bag, reverse=True) == every[::-1]
    assert sorted(polybag_view(bag, order="file"), key=lambda m: m[2]) == every


WRITE_CASES = [
    (storage, comp, mode, version)
    for storage in ("sqlite3", "mcap")
    for comp, mode in (("none", "file"), ("zstd", "file"), ("zstd", "message"))
    for version in (8, 9)
]


@pytest.mark.parametrize(("storage", "comp", "mode", "version"), WRITE_CASES)
def test_polybag_bags_read_by_rosbags(
    tmp_path: Path, storage: str, comp: str, mode: str, version: int
) -> None:
    src = tmp_path / "src"
    write_rosbags_bag(src, n=24)
    out = tmp_path / "out"
    with (
        polybag.open(src) as r,
        polybag.Writer(
            str(out),
            format="rosbag2",
            storage=storage,
            compression=comp,
            compression_mode=mode,
            version=version,
        ) as w,
    ):
        for m in r.messages():
            w.write_message(m)
    assert not (tmp_path / "out.active").exists()
    assert rosbags_view(out) == rosbags_view(src) == polybag_view(out)
    meta = yaml.safe_load((out / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert meta["version"] == version and meta["storage_identifier"] == storage
    assert meta["message_count"] == 24
    assert meta["compression_mode"] == ("" if comp == "none" else mode.upper())
    qos = {
        t["topic_metadata"]["name"]: t["topic_metadata"]["offered_qos_profiles"]
        for t in meta["topics_with_message_count"]
    }
    if version >= 9:
        assert qos["/chatter"][0]["durability"] == "transient_local" and qos["/imu"] == []
    else:
        assert yaml.safe_load(qos["/chatter"])[0]["durability"] == 1
    from rosbags.interfaces import MessageDefinitionFormat, QosDurability
    from rosbags.rosbag2 import Reader

    with Reader(out) as rr:
        conns = {c.topic: c for c in rr.connections}
        assert conns["/imu"].msgtype == IMU and conns["/chatter"].msgtype == STRING
        assert conns["/chatter"].ext.offered_qos_profiles[0].durability == QosDurability.TRANSIENT_LOCAL
        if comp != "zstd" or mode != "file":  # rosbags reads definitions from the storage file
            assert conns["/imu"].msgdef.format == MessageDefinitionFormat.MSG
        assert conns["/imu"].digest.startswith("RIHS01_")


def test_mcap_storage_read_by_the_mcap_library(tmp_path: Path) -> None:
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    src = tmp_path / "src"
    written = write_rosbags_bag(src, n=12)
    out = tmp_path / "out"
    with polybag.open(src) as r, polybag.Writer(str(out), format="rosbag2", storage="mcap") as w:
        for m in r.messages():
            w.write_message(m)
    files = list(out.glob("*.mcap"))
    assert [f.name for f in files] == ["out_0.mcap"]
    got = []
    with open(files[0], "rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        assert reader.get_header().profile == "ros2"
        for schema, channel, message, decoded in reader.iter_decoded_messages():
            assert channel.message_encoding == "cdr" and schema.encoding == "ros2msg"
            got.append((channel.topic, message.log_time, bytes(message.data)))
            if channel.topic == "/chatter":
                assert decoded.data.startswith("hello ")
        meta = {m.name: dict(m.metadata) for m in reader.iter_metadata()}
    assert sorted(got, key=lambda g: g[1]) == sorted(written, key=lambda g: g[1])
    assert "serialized_metadata" in meta["rosbag2"]


def test_raw_cdr_copies_rosbag2_and_mcap_are_exact(tmp_path: Path) -> None:
    """rosbag2 -> MCAP (ros2) -> rosbag2 through convert keeps every byte, time and QoS."""
    from polybag.ops import convert

    src = tmp_path / "src"
    write_rosbags_bag(src, storage="mcap", n=40)
    convert(src, tmp_path / "a.mcap")
    convert(tmp_path / "a.mcap", tmp_path / "back", format="rosbag2")
    convert(tmp_path / "back", tmp_path / "back2", format="rosbag2")
    assert polybag_view(src) == polybag_view(tmp_path / "a.mcap") == polybag_view(tmp_path / "back")
    assert rosbags_view(tmp_path / "back2") == rosbags_view(src)
    with polybag.open(tmp_path / "a.mcap") as m, polybag.open(tmp_path / "back") as b:
        assert m.native_profile is None or m.summary.profile == "ros2"
        qa = {c.topic: c.metadata.get("offered_qos_profiles") for c in m.summary.channels.values()}
        qb = {c.topic: c.metadata.get("offered_qos_profiles") for c in b.summary.channels.values()}
        # the same profiles (metadata version 8 spells the enums as numbers, 9 as names)
        assert qos_for_version(qa["/chatter"], 9) == qos_for_version(qb["/chatter"], 9) != []


@pytest.mark.parametrize(
    ("storage", "comp"), [("sqlite3", None), ("mcap", None), ("sqlite3", "message"), ("mcap", "file")]
)
def test_topic_payloads_and_columns_equal_the_messages(
    tmp_path: Path, storage: str, comp: str | None
) -> None:
    import numpy as np

    bag = tmp_path / "bag"
    write_rosbags_bag(bag, storage=storage, compression=comp, n=60)
    with polybag.open(bag) as r:
        for topic in ("/imu", "/chatter"):
            got = r.topic_payloads(topic)
            assert got is not None
            times, blob, starts, sizes = got
            msgs = list(r.messages(topics=[topic]))
            assert times.tolist() == [m.log_time for m in msgs]
            assert [bytes(blob[s : s + n]) for s, n in zip(starts.tolist(), sizes.tolist())] == [
                bytes(m.data) for m in msgs
            ]
        cols = r.topic_columns("/imu")
        decoded = [o for _, o in r.decoded_messages(topics=["/imu"])]
        assert cols["log_time"].tolist() == times_of(r, "/imu")
        assert np.allclose(cols["angular_velocity.x"], [o.angular_velocity.x for o in decoded])


def times_of(r: polybag.Reader, topic: str) -> list[int]:
    return [m.log_time for m in r.messages(topics=[topic])]


def test_mcap_storage_keeps_metadata_records(tmp_path: Path) -> None:
    w = polybag.Writer(str(tmp_path / "m"), format="rosbag2", storage="mcap")
    w.add_metadata("calibration", {"fx": "500"})
    w.close()
    with polybag.open(tmp_path / "m") as r:
        assert [(m.name, dict(m.metadata)) for m in r.metadata()] == [("calibration", {"fx": "500"})]
        assert list(r.attachments()) == []
    w = polybag.Writer(str(tmp_path / "s"), format="rosbag2")
    with pytest.raises(polybag.UnsupportedError, match="cannot hold metadata"):
        w.add_metadata("calibration", {"fx": "500"})
    w.abort(discard=True)


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_chunk_counts_and_dask_partitions(tmp_path: Path, storage: str) -> None:
    import polybag.dask as pbd

    bag = tmp_path / "bag"
    write_rosbags_bag(bag, storage=storage, n=300)
    with polybag.open(bag) as r:
        pieces = r.chunk_message_counts()
        assert pieces is not None and sum(n for _, _, n in pieces) == 300
        assert all(lo <= hi for lo, hi, _ in pieces) and pieces == sorted(pieces)
        imu = {c.id for c in r.summary.channels.values() if c.topic == "/imu"}
        got = r.chunk_message_counts(imu)
        assert got is not None and sum(n for _, _, n in got) == 100
        direct = [(m.log_time, bytes(m.data)) for m in r.messages(topics=["/chatter"])]
    lazy = pbd.read_topic([str(bag)], "/chatter", partition_messages=50)
    if len(pieces) > 1:
        assert lazy.npartitions > 1  # the bag's pieces split the read
    else:  # one chunk (rosbags' MCAP writer): never split over tasks, which would each read it
        assert lazy.npartitions == 1
    frame = lazy.compute()
    assert frame.index.tolist() == [t for t, _ in direct]
    assert sorted(frame["data"].tolist()) == sorted(f"hello {i} ü" for i in range(300) if i % 3)
