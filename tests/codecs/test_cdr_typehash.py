"""REP 2011 type hashes (RIHS01) of ROS 2 types: against the hashes rosbag2 recorded in the
corpus bags, and rosbags' ``hash_rihs01`` for every bundled type."""

from __future__ import annotations

from pathlib import Path

import pytest

import polybag
from polybag import ops
from polybag.codecs import codec_for
from polybag.codecs.ros2 import bundled, full_name
from polybag.codecs.ros2.typehash import type_hash

typesys = pytest.importorskip("rosbags.typesys")

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpora" / "mcap-samples" / "rosbag2"
RECORDED = [p for p in sorted(CORPUS.rglob("*.mcap")) if b"RIHS01_" in p.read_bytes()]
# rosbags hashes a .msg ``char`` as FIELD_TYPE_CHAR (13); rosidl, and so every recorded bag,
# as a uint8 (3): the types that hold a char differ from rosbags' on purpose
HOLDS_CHAR = {"std_msgs/Char", "service_msgs/ServiceEventInfo"}


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.name)
def test_hashes_equal_the_recorded_ones(path: Path) -> None:
    checked = 0
    with polybag.open(path) as r:
        for ch in r.summary.channels.values():
            want = ch.metadata.get("topic_type_hash", "")
            if not want.startswith("RIHS01_"):
                continue
            codec = codec_for(ch)
            assert type_hash(codec.typeset, codec.type_name) == want, (
                ch.schema.name if ch.schema else ch.topic
            )
            checked += 1
    assert checked


@pytest.mark.parametrize("name", sorted(bundled().types))
def test_bundled_hashes_equal_rosbags(name: str) -> None:
    ts = bundled()
    ours = type_hash(ts, name)
    assert ours.startswith("RIHS01_") and len(ours) == 7 + 64
    store = typesys.get_typestore(typesys.Stores.ROS2_JAZZY)
    uses_char = name in HOLDS_CHAR or any(d in HOLDS_CHAR for d in ts.dependencies(name))
    assert (ours == store.hash_rihs01(full_name(name))) != uses_char


def test_converted_channels_carry_the_hash(tmp_path: Path) -> None:
    bag = CORPUS.parents[1] / "rosbag" / "foxglove-rosbag" / "example.bag"
    out = tmp_path / "e.mcap"
    ops.convert(bag, out, profile="ros2")
    store = typesys.get_typestore(typesys.Stores.ROS2_JAZZY)
    with polybag.open(out) as r:
        for ch in r.summary.channels.values():
            assert ch.schema is not None
            if ch.schema.name in store.fielddefs:  # bundled counterparts: the Jazzy hash
                assert ch.metadata["topic_type_hash"] == store.hash_rihs01(ch.schema.name)
            else:
                assert ch.metadata["topic_type_hash"].startswith("RIHS01_")
