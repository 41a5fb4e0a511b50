"""Real logs of the shared corpora: every sensor message polybag turns into arrays equals
what the peers read from the same bag (rosbags' reader and deserializer, rosbags-image,
a brute-force per-point decoder)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rosbags.image import message_to_cvimage
from rosbags.rosbag1 import Reader as RosbagsReader
from rosbags.typesys import Stores, get_typestore
from test_sensors_pointcloud import assert_matches, brute

import polybag
from polybag import sensors

BAGS = [
    ("rosbag", "ros_numpy", "test.bag"),
    ("rosbag", "embag", "test.bag"),
    ("rosbag", "swri-bag-reader-java", "PointCloud2.bag"),
]


def _peer(path: Path) -> dict[str, list[tuple[int, Any]]]:
    """Every message of the bag, deserialized by rosbags with the bag's own definitions."""
    store = get_typestore(Stores.EMPTY)
    out: dict[str, list[tuple[int, Any]]] = {}
    with RosbagsReader(path) as r:
        from rosbags.typesys import get_types_from_msg

        for c in r.connections:
            store.register(get_types_from_msg(c.msgdef.data, c.msgtype))
        for c, t, raw in r.messages():
            out.setdefault(c.topic, []).append((t, store.deserialize_ros1(raw, c.msgtype)))
    return out


@pytest.mark.parametrize("parts", BAGS, ids=["/".join(p[1:]) for p in BAGS])
def test_corpus_bag(corpora: Path, parts: tuple[str, ...]) -> None:
    path = corpora.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is not here")
    peer = _peer(path)
    checked = 0
    with polybag.open(path) as r:
        types = {c.topic: (c.schema.name if c.schema else "") for c in r.summary.channels.values()}
        for topic, tname in sorted(types.items()):
            ref = peer[topic]
            if tname in ("sensor_msgs/Image", "sensor_msgs/CompressedImage"):
                got = list(r.images(topic))
                assert [t for t, _ in got] == [t for t, _ in ref]
                for (_, a), (_, m) in zip(got, ref):
                    expected = message_to_cvimage(m)
                    if tname.endswith("CompressedImage") and expected.ndim == 3:
                        expected = expected[..., [2, 1, 0, 3][: expected.shape[2]]]  # ours is RGB
                        if a.ndim == 3 and a.shape[2] == 4 and expected.shape[2] == 3:
                            a = a[
                                ..., :3
                            ]  # rosbags-image (IMREAD_ANYCOLOR) drops a PNG's alpha; polybag keeps it
                    np.testing.assert_array_equal(a, expected)
                    checked += 1
            elif tname == "sensor_msgs/PointCloud2":
                got = list(r.pointclouds(topic))
                assert [t for t, _ in got] == [t for t, _ in ref]
                for (_, a), (_, m) in zip(got, ref):
                    fields = [(f.name, f.offset, f.datatype, f.count) for f in m.fields]
                    assert_matches(
                        a,
                        brute(
                            fields,
                            m.data.tobytes(),
                            m.height,
                            m.width,
                            m.point_step,
                            m.row_step,
                            m.is_bigendian,
                        ),
                    )
                    checked += 1
            elif tname == "sensor_msgs/LaserScan":
                for m, (_, pm) in zip(r.messages(topic), ref):
                    scan = sensors.laserscan_to_numpy(m.decode(), points=True)
                    np.testing.assert_array_equal(scan["range"], pm.ranges)
                    n = len(pm.ranges)
                    np.testing.assert_allclose(
                        scan["angle"], pm.angle_min + pm.angle_increment * np.arange(n), rtol=1e-6, atol=1e-6
                    )
                    checked += 1
            elif tname == "nav_msgs/Odometry":
                for m, (_, pm) in zip(r.messages(topic), ref):
                    row = sensors.odometry_to_numpy(m.to_dict())
                    p = pm.pose.pose
                    assert row[:7].tolist() == [
                        p.position.x,
                        p.position.y,
                        p.position.z,
                        p.orientation.x,
                        p.orientation.y,
                        p.orientation.z,
                        p.orientation.w,
                    ]
                    checked += 1
            elif tname == "nav_msgs/OccupancyGrid":
                for m, (_, pm) in zip(r.messages(topic), ref):
                    grid = sensors.occupancygrid_to_numpy(m.decode())
                    np.testing.assert_array_equal(grid.reshape(-1), pm.data)
                    assert grid.shape == (pm.info.height, pm.info.width)
                    checked += 1
    assert checked > 0
