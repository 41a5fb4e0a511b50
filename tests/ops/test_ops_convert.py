"""convert: round trips between bag and MCAP, checked by polybag and by independent readers."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

import polybag
from ops_helpers import BAGS, CORPORA, connections, rows
from polybag import ops
from polybag.cli import main

BAG_IDS = [str(p.relative_to(CORPORA / "rosbag")) for p in BAGS]
EXAMPLE = CORPORA / "rosbag" / "foxglove-rosbag" / "example.bag"


def _rosbag_standalone_rows(path: Path) -> list[tuple[str, int, bytes]]:
    rosbag = pytest.importorskip("rosbag")
    out = []
    with rosbag.Bag(str(path)) as b:
        for topic, raw, t in b.read_messages(raw=True):
            out.append((topic, t.to_nsec(), bytes(raw[1])))
    return out


@pytest.mark.parametrize("bag", BAGS, ids=BAG_IDS)
def test_bag_mcap_bag_round_trip(bag: Path, tmp_path: Path) -> None:
    mcap = tmp_path / "a.mcap"
    back = tmp_path / "b.bag"
    r1 = ops.convert(bag, mcap)
    assert r1.profile == "ros1"
    r2 = ops.convert(mcap, back)
    original = rows(bag)
    assert r1.messages == r2.messages == len(original)
    assert rows(mcap) == original
    assert rows(back) == original
    assert connections(back) == connections(bag)
    # the input is untouched and no .active file is left behind
    assert not list(tmp_path.glob("*.active"))


@pytest.mark.parametrize("bag", BAGS, ids=BAG_IDS)
def test_converted_mcap_read_by_the_mcap_library(bag: Path, tmp_path: Path) -> None:
    mcap_reader = pytest.importorskip("mcap.reader")
    ros1_decoder = pytest.importorskip("mcap_ros1.decoder")
    out = tmp_path / "a.mcap"
    ops.convert(bag, out)
    got = []
    with open(out, "rb") as f:
        reader = mcap_reader.make_reader(f, decoder_factories=[ros1_decoder.DecoderFactory()])
        header = reader.get_header()
        assert header.profile == "ros1"
        for schema, channel, message, decoded in reader.iter_decoded_messages(log_time_order=False):
            assert schema.encoding == "ros1msg" and channel.message_encoding == "ros1"
            assert "md5sum" in channel.metadata
            assert decoded is not None
            got.append((channel.topic, message.log_time, bytes(message.data)))
    assert got == rows(bag)


def test_example_values_through_mcap_ros1(tmp_path: Path) -> None:
    mcap_reader = pytest.importorskip("mcap.reader")
    ros1_decoder = pytest.importorskip("mcap_ros1.decoder")
    out = tmp_path / "a.mcap"
    ops.convert(EXAMPLE, out, compression="lz4", chunk_size=4096)
    with open(out, "rb") as f:
        reader = mcap_reader.make_reader(f, decoder_factories=[ros1_decoder.DecoderFactory()])
        for _s, _c, _m, tf in reader.iter_decoded_messages(topics=["/tf"]):
            t = tf.transforms[0]
            assert t.child_frame_id == "turtle2" and t.header.frame_id == "world"
            assert (t.transform.translation.x, t.transform.translation.y) == (
                4.0,
                pytest.approx(9.088889122009277),
            )
            break
        else:
            raise AssertionError("no /tf message")
        stats = reader.get_summary().statistics
        assert stats.message_count == 8647


def _mcap_from_bag_with_mcap_library(bag: Path, out: Path) -> None:
    """An MCAP (ros1 profile) written by the official mcap library from rosbag-standalone's view."""
    rosbag = pytest.importorskip("rosbag")
    mcap_writer = pytest.importorskip("mcap.writer")
    with open(out, "wb") as f, rosbag.Bag(str(bag)) as b:
        w = mcap_writer.Writer(f)
        w.start(profile="ros1", library="test")
        schemas: dict[tuple[str, str], int] = {}
        chans: dict[tuple, int] = {}
        for topic, raw, t, h in b.read_messages(raw=True, return_connection_header=True):
            h = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in h.items()}
            key = (topic, *sorted(h.items()))
            if key not in chans:
                skey = (h["type"], h["message_definition"])
                if skey not in schemas:
                    schemas[skey] = w.register_schema(h["type"], "ros1msg", h["message_definition"].encode())
                md = {k: h[k] for k in ("md5sum", "type", "callerid", "latching") if k in h}
                chans[key] = w.register_channel(topic, "ros1", schemas[skey], md)
            w.add_message(chans[key], t.to_nsec(), bytes(raw[1]), t.to_nsec(), 0)
        w.finish()


@pytest.mark.parametrize(
    "bag", [EXAMPLE, CORPORA / "rosbag" / "embag" / "test.bag"], ids=["example", "embag"]
)
def test_mcap_bag_mcap_round_trip(bag: Path, tmp_path: Path) -> None:
    pytest.importorskip("mcap.writer")
    src = tmp_path / "lib.mcap"
    _mcap_from_bag_with_mcap_library(bag, src)
    mid = tmp_path / "mid.bag"
    back = tmp_path / "back.mcap"
    ops.convert(src, mid)
    ops.convert(mid, back)
    original = rows(src)
    assert len(original) > 0
    assert sorted(rows(mid)) == sorted(original)
    assert sorted(rows(back)) == sorted(original)
    assert connections(back) == connections(src)
    # what rosbag-standalone sees in the bag equals the bag we started from
    assert sorted(_rosbag_standalone_rows(mid)) == sorted(_rosbag_standalone_rows(bag))


@pytest.mark.parametrize("bag", BAGS[:8], ids=BAG_IDS[:8])
def test_converted_bag_read_by_rosbag_standalone(bag: Path, tmp_path: Path) -> None:
    mcap = tmp_path / "a.mcap"
    out = tmp_path / "b.bag"
    ops.convert(bag, mcap)
    ops.convert(mcap, out, compression="lz4")
    assert _rosbag_standalone_rows(out) == _rosbag_standalone_rows(bag)


def _debian_rosbag(*args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp"), "ROS_HOME": "/tmp"}
    return subprocess.run(["/usr/bin/rosbag", *args], capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.live
@pytest.mark.parametrize("compression", ["none", "bz2", "lz4"])
def test_rosbag_check_accepts_converted_bag(compression: str, tmp_path: Path) -> None:
    if not shutil.which("rosbag", path="/usr/bin"):
        pytest.skip("Debian rosbag command not installed")
    for bag in (EXAMPLE, CORPORA / "rosbag" / "embag" / "test.bag"):
        mcap = tmp_path / "a.mcap"
        out = tmp_path / "b.bag"
        ops.convert(bag, mcap, overwrite=True)
        ops.convert(mcap, out, compression=compression, chunk_size=64 * 1024, overwrite=True)
        ref = _debian_rosbag("check", str(bag))
        got = _debian_rosbag("check", str(out))
        assert got.returncode == 0, got.stderr
        assert "Traceback" not in got.stderr
        assert got.stdout == ref.stdout
        info = _debian_rosbag("info", "--yaml", str(out))
        assert info.returncode == 0, info.stderr
        assert "messages: 8647" in info.stdout or bag != EXAMPLE


def test_attachments_and_metadata_kept_or_reported(tmp_path: Path) -> None:
    src = tmp_path / "a.mcap"
    with polybag.Writer(str(src)) as w:
        s = w.add_schema("std_msgs/String", "ros1msg", b"string data\n")
        c = w.add_channel("/s", "ros1", schema=s, metadata={"md5sum": "992ce8a1687cec8c8bd883ec73ca41d1"})
        w.write(c, b"\x02\x00\x00\x00hi", log_time=10, publish_time=10, sequence=1)
        w.add_attachment("calib.yaml", "text/yaml", b"k: v\n", log_time=5, create_time=6)
        w.add_metadata("robot", {"name": "r2"})
    same = ops.convert(src, tmp_path / "b.mcap")
    assert (same.attachments, same.metadata, same.warnings) == (1, 1, [])
    with polybag.open(tmp_path / "b.mcap") as r:
        assert [(a.name, a.media_type, bytes(a.data)) for a in r.attachments()] == [
            ("calib.yaml", "text/yaml", b"k: v\n")
        ]
        assert [(m.name, dict(m.metadata)) for m in r.metadata()] == [("robot", {"name": "r2"})]
    bag = ops.convert(src, tmp_path / "c.bag")
    assert bag.messages == 1
    assert (bag.attachments_dropped, bag.metadata_dropped) == (1, 1)
    assert any("attachment" in w for w in bag.warnings) and any("metadata" in w for w in bag.warnings)
    assert rows(tmp_path / "c.bag") == rows(src)


def test_cdr_channels_become_ros1_in_a_bag(tmp_path: Path) -> None:
    """ROS 2 (CDR) messages written to a bag are converted to ROS 1 (issue 16; they used to
    be dropped): see tests/ops/test_convert_ros1_ros2.py for the conversion itself."""
    src = tmp_path / "a.mcap"
    with polybag.Writer(str(src)) as w:
        s = w.add_schema("std_msgs/msg/String", "ros2msg", b"string data\n")
        c = w.add_channel("/ros2", "cdr", schema=s)
        w.write(c, b"\x00\x01\x00\x00\x03\x00\x00\x00hi\x00\x00", log_time=1)
        s1 = w.add_schema("std_msgs/String", "ros1msg", b"string data\n")
        c1 = w.add_channel("/ros1", "ros1", schema=s1)
        w.write(c1, b"\x02\x00\x00\x00hi", log_time=2)
    res = ops.convert(src, tmp_path / "b.bag")
    assert res.messages == 2 and res.dropped_messages == 0
    assert rows(tmp_path / "b.bag") == [
        ("/ros2", 1, b"\x02\x00\x00\x00hi"),
        ("/ros1", 2, b"\x02\x00\x00\x00hi"),
    ]
    assert main(["convert", str(src), str(tmp_path / "c.bag"), "--json"]) == 0


def test_convert_refuses_to_overwrite_its_input(tmp_path: Path) -> None:
    src = tmp_path / "x.bag"
    shutil.copy(EXAMPLE, src)
    before = src.read_bytes()
    assert main(["convert", str(src), str(src)]) == 2
    assert src.read_bytes() == before


def test_cli_convert_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    assert main(["convert", str(EXAMPLE), str(tmp_path / "o.mcap"), "--compression", "zstd", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["messages"] == 8647 and out["profile"] == "ros1" and out["output_format"] == "mcap"


MCAPS = sorted((CORPORA / "mcap-samples").rglob("*.mcap")) + [
    sorted((CORPORA / "mcap-conformance" / name).glob("*-st-sum.mcap"))[-1]
    for name in ("OneAttachment", "OneMetadata", "TenMessages", "OneSchemalessMessage")
]


@pytest.mark.parametrize("src", MCAPS, ids=[p.name for p in MCAPS])
def test_mcap_to_mcap_keeps_messages_attachments_metadata(src: Path, tmp_path: Path) -> None:
    out = tmp_path / "o.mcap"
    res = ops.convert(src, out, compression="lz4")
    assert rows(out) == rows(src) and res.messages == len(rows(src))
    with polybag.open(src) as a, polybag.open(out) as b:
        assert [(x.name, x.media_type, bytes(x.data)) for x in a.attachments()] == [
            (x.name, x.media_type, bytes(x.data)) for x in b.attachments()
        ]
        assert [(m.name, dict(m.metadata)) for m in a.metadata()] == [
            (m.name, dict(m.metadata)) for m in b.metadata()
        ]
        ca = {
            (c.topic, c.message_encoding, c.type_name, tuple(sorted(c.metadata.items())))
            for c in a.summary.channels.values()
        }
        cb = {
            (c.topic, c.message_encoding, c.type_name, tuple(sorted(c.metadata.items())))
            for c in b.summary.channels.values()
        }
        assert ca == cb
    assert res.warnings == []


def test_convert_through_pipes(tmp_path: Path) -> None:
    import sys

    mcap = tmp_path / "a.mcap"
    with open(EXAMPLE, "rb") as f:
        p = subprocess.run(
            [sys.executable, "-m", "polybag", "convert", "-", str(mcap)], stdin=f, capture_output=True
        )
    assert p.returncode == 0, p.stderr
    # MCAP streamed from stdin to a bag on stdout
    with open(mcap, "rb") as f:
        p = subprocess.run(
            [sys.executable, "-m", "polybag", "convert", "-", "-", "--format", "bag"],
            stdin=f,
            capture_output=True,
        )
    assert p.returncode == 0, p.stderr
    assert b"8647 messages" in p.stderr
    assert rows(p.stdout) == rows(EXAMPLE)
    assert connections(p.stdout) == connections(EXAMPLE)
