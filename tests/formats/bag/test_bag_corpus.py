"""Every bag of ../shared/corpora/rosbag is read and matches its README and the peers."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

import polybag
from paths import CORPORA
from polybag.cli import render
from polybag.errors import PolybagError, UnknownFormatError

ROOT = CORPORA / "rosbag"

# README table: messages per file
COUNTS = {
    "foxglove-rosbag/example.bag": 8647,
    "foxglove-rosbag/example-bz2.bag": 8647,
    "foxglove-rosbag/example-lz4.bag": 8647,
    "foxglove-rosbag/no-messages.bag": 0,
    "cruise-rosbag.js/example-unsorted-chunks.bag": 3,
    "frost/decompressed.bag": 300,
    "frost/compressed_lz4.bag": 300,
    "frost/examples_read_bag_test.bag": 200,
    "swri-bag-reader-java/Bool.bag": 2,
    "swri-bag-reader-java/PointCloud2.bag": 1,
    "embag/test.bag": 15,
    "embag/test_2.bag": 2,
    "embag/array_test.bag": 20,
    "matlab_rosbag/constants.bag": 1,
    "matlab_rosbag/empty_msgs.bag": 13,
    "rosbag2_bag_v2/test_bag.bag": 5,
    "rosbag2_bag_v2/test_bag_end_to_end.bag": 11,
    "rosbag2_bag_v2/test_bag_multiple_connections.bag": 6,
    "ros_numpy/test.bag": 9,
    "ros_comm/rosbag_storage_test.bag": 11,
    "rosbag-rs/dummy.bag": 0,
}
for _n in ("Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64", "Float32", "Float64"):
    COUNTS[f"swri-bag-reader-java/{_n}.bag"] = 1
    COUNTS[f"swri-bag-reader-java/{_n}MultiArray.bag"] = 1

ALL_BAGS = sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("*/*.bag") if p.stat().st_size > 0)


def _msgs(path: Path, **kw: object) -> list[tuple[str, int, bytes]]:
    with polybag.open(path) as r:
        return [(m.topic, m.log_time, bytes(m.data)) for m in r.messages(**kw)]  # type: ignore[arg-type]


def test_every_corpus_bag_is_listed():
    assert set(ALL_BAGS) == set(COUNTS), set(ALL_BAGS) ^ set(COUNTS)


@pytest.mark.parametrize("name", ALL_BAGS)
def test_counts_and_summary(name):
    with polybag.open(ROOT / name) as r:
        s = r.summary
        msgs = list(r.messages())
        assert len(msgs) == COUNTS[name]
        assert s.message_count == COUNTS[name]
        times = [m.log_time for m in msgs]
        assert times == sorted(times)
        if msgs:
            assert s.start_time == times[0] and s.end_time == times[-1]
        for m in msgs:
            ch = m.channel
            assert ch.message_encoding == "ros1"
            assert ch.schema is not None and ch.schema.encoding == "ros1msg"
            assert ch.schema.name == ch.metadata["type"]
            assert len(ch.metadata["md5sum"]) == 32
            assert m.publish_time == m.log_time and m.sequence == 0
        info = r.info_extras()
        assert info["messages"] == COUNTS[name]
        assert info["version"] == "2.0"


def _peer_rosbags(path: Path) -> list[tuple[str, int, bytes]]:
    from rosbags.rosbag1 import Reader

    with Reader(path) as r:
        return [(c.topic, t, bytes(raw)) for c, t, raw in r.messages()]


def _peer_rosbag(path: Path) -> list[tuple[str, int, bytes]]:
    import rosbag

    with rosbag.Bag(str(path)) as b:
        return [(topic, t.to_nsec(), bytes(msg[1])) for topic, msg, t in b.read_messages(raw=True)]


@pytest.mark.parametrize("name", [n for n in ALL_BAGS if n != "rosbag-rs/dummy.bag"])
@pytest.mark.parametrize("peer", [_peer_rosbags, _peer_rosbag], ids=["rosbags", "rosbag-standalone"])
def test_byte_for_byte_with_peers(name, peer):
    ours = _msgs(ROOT / name)
    theirs = peer(ROOT / name)
    assert sorted(ours) == sorted(theirs)
    assert [t for _, t, _ in ours] == sorted(t for _, t, _ in theirs)


def test_example_bag_expectations():
    p = ROOT / "foxglove-rosbag/example.bag"
    with polybag.open(p) as r:
        assert len(list(r.messages(topics=["/turtle1/color_sensor"]))) == 1351
        assert len(list(r.messages(topics=r"/turtle\d/color_sensor"))) == 2695
        s0 = 1396293886_846735850
        assert len(list(r.messages(start=s0, end=s0 + 2_000_000_000))) == 319
        t = 1396293887_846735850
        assert len(list(r.messages(start=t, end=t + 1))) == 1
        assert len(r.summary.channels) == 12 and len(r.summary.topics()) == 9
        tf = next(iter(r.messages(topics=["/tf"])))
    d = bytes(tf.data)
    (n,) = struct.unpack_from("<I", d, 0)
    assert n >= 1
    _seq, sec, nsec, flen = struct.unpack_from("<IIII", d, 4)
    pos = 20
    frame = d[pos : pos + flen].decode()
    pos += flen
    (clen,) = struct.unpack_from("<I", d, pos)
    child = d[pos + 4 : pos + 4 + clen].decode()
    pos += 4 + clen
    x, y, z = struct.unpack_from("<3d", d, pos)
    assert (frame, child) == ("world", "turtle2")
    assert sec * 10**9 + nsec == 1396293888_056065082
    assert (x, y, z) == (4.0, pytest.approx(9.088889122009277), 0.0)


@pytest.mark.parametrize("other", ["example-bz2.bag", "example-lz4.bag"])
def test_compressed_examples_hold_the_same_messages(other):
    a = _msgs(ROOT / "foxglove-rosbag/example.bag")
    b = _msgs(ROOT / "foxglove-rosbag" / other)
    assert sorted(a) == sorted(b)
    with polybag.open(ROOT / "foxglove-rosbag" / other) as r:
        comp = {c.compression for c in r.summary.chunks}
        assert comp == {other.split("-")[1].split(".")[0]}
        assert len(r.summary.channels) == 9


def test_unsorted_chunks():
    with polybag.open(ROOT / "cruise-rosbag.js/example-unsorted-chunks.bag") as r:
        s = r.summary
        assert (s.start_time, s.end_time) == (1_000_000_000, 3_000_000_000)
        assert [c.start_time for c in s.chunks] == [2_000_000_000, 3_000_000_000, 1_000_000_000]
        assert [m.log_time for m in r.messages()] == [1_000_000_000, 2_000_000_000, 3_000_000_000]
        assert [m.log_time for m in r.messages(reverse=True)] == [3_000_000_000, 2_000_000_000, 1_000_000_000]
        assert [m.log_time for m in r.messages(order="file")] == [2_000_000_000, 3_000_000_000, 1_000_000_000]


def _string(d: bytes) -> str:
    (n,) = struct.unpack_from("<I", d)
    assert n == len(d) - 4
    return d[4:].decode()


@pytest.mark.parametrize("name", ["frost/decompressed.bag", "frost/compressed_lz4.bag"])
def test_frost_generated_values(name):
    with polybag.open(ROOT / name) as r:
        by = {}
        for m in r.messages():
            by.setdefault(m.topic, []).append(m)
    assert {k: len(v) for k, v in by.items()} == {"/chatter": 100, "/time": 100, "/array": 100}
    for i, m in enumerate(by["/chatter"]):
        assert m.log_time == i * 10**9 + 1000 + 1000 * i
        assert _string(bytes(m.data)) == f"foo_{i}"
    for i, m in enumerate(by["/time"]):
        assert struct.unpack("<II", bytes(m.data)) == (i, 1000 + 1000 * i)
    d = bytes(by["/array"][0].data)
    (ndim,) = struct.unpack_from("<I", d)
    assert ndim == 1
    (llen,) = struct.unpack_from("<I", d, 4)
    assert d[8 : 8 + llen] == b"data"
    size, stride, offset, count = struct.unpack_from("<IIII", d, 8 + llen)
    assert (size, stride, offset, count) == (3, 3, 0, 3)
    assert struct.unpack_from("<3d", d, 8 + llen + 16) == (3.14, 3.14, 3.14)


SCALARS = {
    "Int8": ("<b", -127),
    "Int16": ("<h", -32767),
    "Int32": ("<i", -2147483647),
    "Int64": ("<q", -9223372036854775806),
    "UInt8": ("<B", 180),
    "UInt16": ("<H", 65535),
    "UInt32": ("<I", 4294967294),
    "UInt64": ("<Q", 18446744073709551615),
    "Float32": ("<f", 3.14159),
    "Float64": ("<d", 1.003062456558312),
}


@pytest.mark.parametrize("name", sorted(SCALARS))
def test_swri_scalars(name):
    fmt, want = SCALARS[name]
    (m,) = _msgs(ROOT / f"swri-bag-reader-java/{name}.bag")
    (got,) = struct.unpack(fmt, m[2])
    assert got == pytest.approx(want, rel=1e-6)
    with polybag.open(ROOT / f"swri-bag-reader-java/{name}.bag") as r:
        assert next(iter(r.summary.channels.values())).schema.name == f"std_msgs/{name}"


ARRAYS = {
    "Int8": ("b", [-127, 0, 126]),
    "UInt8": ("B", [180, 248, 151, 192]),
    "Int16": ("h", [-32767, 0, 32766]),
    "UInt16": ("H", [0, 30000, 65535]),
    "Int32": ("i", [-2147483647, 0, 2147483646]),
    "UInt32": ("I", [0, 2000000000, 4294967294]),
    "Int64": ("q", [-9223372036854775806, 0, 9223372036854775806]),
    "UInt64": ("Q", [0, 18446744073709551615]),
    "Float32": ("f", [0.0, 3.14159]),
    "Float64": ("d", [1.003062456558312]),
}


@pytest.mark.parametrize("name", sorted(ARRAYS))
def test_swri_multiarrays(name):
    code, lead = ARRAYS[name]
    (m,) = _msgs(ROOT / f"swri-bag-reader-java/{name}MultiArray.bag")
    d = m[2]
    (ndim,) = struct.unpack_from("<I", d)
    pos = 4
    for _ in range(ndim):
        (ln,) = struct.unpack_from("<I", d, pos)
        pos += 4 + ln + 8
    pos += 4  # data_offset
    (count,) = struct.unpack_from("<I", d, pos)
    pos += 4
    vals = struct.unpack_from(f"<{count}{code}", d, pos)
    assert pos + struct.calcsize(f"<{count}{code}") == len(d)
    assert list(vals[: len(lead)]) == pytest.approx(lead, rel=1e-6)


def test_swri_bool_and_pointcloud():
    got = {t: d for t, _, d in _msgs(ROOT / "swri-bag-reader-java/Bool.bag")}
    assert got == {"/false_value": b"\x00", "/true_value": b"\x01"}
    (m,) = _msgs(ROOT / "swri-bag-reader-java/PointCloud2.bag")
    assert m[0] == "/pointcloud2"
    d = m[2]
    (flen,) = struct.unpack_from("<I", d, 12)
    pos = 16 + flen
    height, width, nfields = struct.unpack_from("<III", d, pos)
    assert width == 124914 and nfields == 5
    pos += 12
    names = []
    for i in range(nfields):
        (ln,) = struct.unpack_from("<I", d, pos)
        names.append(d[pos + 4 : pos + 4 + ln].decode())
        pos += 4 + ln
        off, dt, cnt = struct.unpack_from("<IBI", d, pos)
        pos += 9
        if i == 0:
            assert (off, dt, cnt) == (0, 7, 1)
    assert names == ["x", "y", "z", "intensity", "ring"]


def test_embag_laserscan_and_connections():
    with polybag.open(ROOT / "embag/test.bag") as r:
        types = {ch.topic: ch.schema.name for ch in r.summary.channels.values()}
        assert types == {
            "/base_pose_ground_truth": "nav_msgs/Odometry",
            "/base_scan": "sensor_msgs/LaserScan",
            "/luminar_pointcloud": "sensor_msgs/PointCloud2",
        }
        scan = next(iter(r.messages(topics=["/base_scan"])))
        md = scan.channel.metadata
        assert md["md5sum"] == "90c7ef2dc6895d81024acba2ac42f369"
        assert md["callerid"] == "/play_1604515197096283663"
        d = bytes(scan.data)
        (flen,) = struct.unpack_from("<I", d, 12)
        assert d[16 : 16 + flen] == b"base_laser_link"
        (n,) = struct.unpack_from("<I", d, 16 + flen + 28)
        assert n == 90
        assert b"sensor_msgs/LaserScan" not in scan.channel.schema.data[:5]  # definition text, not the name
        assert b"float32[] ranges" in scan.channel.schema.data
    with polybag.open(ROOT / "embag/test_2.bag") as r:
        assert len(r.summary.channels) == 2 and len(r.summary.topics()) == 1
    with polybag.open(ROOT / "rosbag2_bag_v2/test_bag_multiple_connections.bag") as r:
        assert len(r.summary.channels) == 5 and len(r.summary.topics()) == 3
        assert sum(len(v) for v in r.summary.topics().values()) == 5


def test_empty_msgs_and_constants():
    msgs = _msgs(ROOT / "matlab_rosbag/empty_msgs.bag")
    with polybag.open(ROOT / "matlab_rosbag/empty_msgs.bag") as r:
        empties = [m for m in r.messages() if m.channel.schema.name == "std_msgs/Empty"]
    assert empties and all(len(m.data) == 0 for m in empties)
    assert len(msgs) == 13
    with polybag.open(ROOT / "matlab_rosbag/constants.bag") as r:
        (ch,) = r.summary.channels.values()
        assert ch.schema.name == "test_roscpp_serialization/Constants"
        assert b"=" in ch.schema.data


def test_empty_and_non_bag_files_give_clear_errors(tmp_path):
    with pytest.raises(UnknownFormatError, match="empty"):
        polybag.open(ROOT / "foxglove-rosbag/empty-file.bag")
    with pytest.raises(UnknownFormatError, match="offset 0"):
        polybag.open(ROOT / "foxglove-rosbag/asci-file.txt")
    # a .bag name does not make text a bag (version 0 has no magic; the record must be plausible)
    fake = tmp_path / "fake.bag"
    fake.write_bytes((ROOT / "foxglove-rosbag/asci-file.txt").read_bytes())
    with pytest.raises(PolybagError):
        polybag.open(fake)


def test_dummy_bag_header_claims_absent_chunks():
    with polybag.open(ROOT / "rosbag-rs/dummy.bag") as r:
        s = r.summary
        assert s.message_count == 0 and not s.indexed
        assert s.extras["header_chunk_count"] == 600
        assert "600 chunks" in s.extras["index_problem"]
        assert list(r.messages()) == []


def test_info_without_chunk_data(monkeypatch):
    """info comes from the index: decompression is never called."""
    def boom(*a, **k):
        raise AssertionError("chunk data read for info")

    from polybag.formats.bag import chunks as bag_chunks  # where the reader calls it

    monkeypatch.setattr(bag_chunks, "decompress", boom)
    with polybag.open(ROOT / "foxglove-rosbag/example-lz4.bag") as r:
        info = r.info_extras()
        text = render.info_text(r)
        yml = render.info_yaml(r)
    assert info["messages"] == 8647
    assert info["compression"]["lz4"]["chunks"] == 1
    assert 0 < info["compression_ratio"] < 1
    topics = {t["topic"]: t for t in info["topics"]}
    assert topics["/turtle1/color_sensor"]["messages"] == 1351
    assert topics["/turtle1/color_sensor"]["frequency"] == pytest.approx(62.5, rel=0.2)
    assert {"type": "turtlesim/Color", "md5": "353891e354491c51aabe32df673fb446"} in info["types"]
    assert "lz4 [1/1 chunks" in text and "/turtle1/color_sensor" in text
    assert "messages: 8647" in yml


def test_stream_input_reads_like_a_file():
    p = ROOT / "frost/compressed_lz4.bag"
    with open(p, "rb") as f:
        data = f.read()
    import io

    class Pipe(io.RawIOBase):
        def __init__(self, b: bytes) -> None:
            self.b = io.BytesIO(b)

        def readable(self) -> bool:
            return True

        def readinto(self, buf):  # type: ignore[no-untyped-def]
            n = self.b.readinto(buf)
            return n

    with polybag.open(io.BufferedReader(Pipe(data))) as r:
        assert [(m.topic, m.log_time, bytes(m.data)) for m in r.messages()] == _msgs(p)
