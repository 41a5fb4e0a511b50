"""``pointcloud2_to_numpy`` against a brute-force per-point ``struct.unpack`` decoder.

Clouds with padding between and after fields, big-endian data, fields with ``count > 1``,
organized clouds with padded rows; messages serialized by rosbags (ROS 1 and ROS 2) and
decoded through polybag's codecs; ros_numpy's own test bag; round trips through
``numpy_to_pointcloud2``; bad field tables and short data.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import sensor_logs as sl
from hypothesis import given, settings
from hypothesis import strategies as st

import polybag
from polybag import sensors
from polybag.codecs.ros1 import codec_for_type
from polybag.errors import DecodeError, UsageError

CHARS = {1: "b", 2: "B", 3: "h", 4: "H", 5: "i", 6: "I", 7: "f", 8: "d"}
SIZES = {1: 1, 2: 1, 3: 2, 4: 2, 5: 4, 6: 4, 7: 4, 8: 8}
Field = tuple[str, int, int, int]  # name, offset, datatype, count


def brute(
    fields: list[Field], data: bytes, height: int, width: int, point_step: int, row_step: int, big: bool
) -> dict[str, list[Any]]:
    """Every field of every point, one struct.unpack each (row-major order)."""
    order = ">" if big else "<"
    out: dict[str, list[Any]] = {f[0]: [] for f in fields}
    for r in range(height):
        for c in range(width):
            base = r * row_step + c * point_step
            for name, offset, datatype, count in fields:
                vals = struct.unpack_from(order + CHARS[datatype] * count, data, base + offset)
                out[name].append(vals[0] if count == 1 else list(vals))
    return out


def assert_matches(arr: np.ndarray, ref: dict[str, list[Any]]) -> None:
    flat = arr.reshape(-1)
    assert list(flat.dtype.names or ()) == list(ref)
    for name, values in ref.items():
        np.testing.assert_array_equal(
            flat[name], np.array(values, dtype=flat.dtype[name].base).reshape(flat[name].shape)
        )


@st.composite
def layouts(draw: st.DrawFn) -> tuple[list[Field], int, int, int, int, bool]:
    n = draw(st.integers(1, 5))
    fields: list[Field] = []
    offset = 0
    for i in range(n):
        offset += draw(st.integers(0, 3))  # padding before the field (unaligned too)
        datatype = draw(st.integers(1, 8))
        count = draw(st.sampled_from([1, 1, 2, 3]))
        fields.append((f"f{i}", offset, datatype, count))
        offset += SIZES[datatype] * count
    point_step = offset + draw(st.integers(0, 5))
    height = draw(st.integers(1, 3))
    width = draw(st.integers(0, 5))
    row_step = width * point_step + (draw(st.integers(0, 7)) if height > 1 else 0)
    return fields, height, width, point_step, row_step, draw(st.booleans())


@settings(max_examples=150, deadline=None)
@given(layout=layouts(), seed=st.integers(0, 2**32 - 1))
def test_matches_the_brute_force_decoder(
    layout: tuple[list[Field], int, int, int, int, bool], seed: int
) -> None:
    fields, height, width, point_step, row_step, big = layout
    data = np.random.default_rng(seed).integers(0, 256, row_step * height, dtype=np.uint8).tobytes()
    msg = {
        "height": height,
        "width": width,
        "fields": [{"name": n, "offset": o, "datatype": d, "count": c} for n, o, d, c in fields],
        "is_bigendian": big,
        "point_step": point_step,
        "row_step": row_step,
        "data": data,
        "is_dense": False,
    }
    arr = sensors.pointcloud2_to_numpy(msg)
    assert arr.shape == ((width,) if height == 1 else (height, width))
    assert arr.dtype.isnative
    assert_matches(arr, brute(fields, data, height, width, point_step, row_step, big))
    organized = sensors.pointcloud2_to_numpy(msg, squeeze=False)
    assert organized.shape == (height, width)


@pytest.mark.parametrize("profile", ["ros1", "ros2"])
@pytest.mark.parametrize("big", [False, True])
def test_through_the_codecs(profile: str, big: bool) -> None:
    """An organized cloud with padded rows and a count-3 field, serialized by rosbags and
    decoded by polybag's codec (object and dict)."""
    fields: list[Field] = [
        ("x", 0, 7, 1),
        ("y", 4, 7, 1),
        ("z", 8, 7, 1),
        ("normal", 16, 8, 3),
        ("ring", 41, 4, 1),
    ]
    height, width, point_step = 3, 4, 48
    row_step = width * point_step + 5
    data = np.random.default_rng(1).integers(0, 256, row_step * height, dtype=np.uint8).tobytes()
    msg = sl.cloud(profile, fields, data, height, width, point_step, row_step, big=big)
    payload = sl.serialize(profile, msg)
    ch = _channel(profile)
    ref = brute(fields, data, height, width, point_step, row_step, big)
    for m in (
        polybag.codecs.codec_for(ch).decode(payload),
        polybag.codecs.codec_for(ch).to_dict(payload),
        msg,
    ):
        arr = sensors.pointcloud2_to_numpy(m)
        assert arr.shape == (3, 4) and arr.dtype["normal"].shape == (3,)
        assert_matches(arr, ref)


def _channel(profile: str) -> Any:
    from polybag.model import Channel, Schema

    store = sl.STORES[profile]
    text = store.generate_msgdef("sensor_msgs/msg/PointCloud2")[0].encode()
    if profile == "ros1":
        return Channel(1, "/c", "ros1", Schema(1, "sensor_msgs/PointCloud2", "ros1msg", text))
    return Channel(1, "/c", "cdr", Schema(1, "sensor_msgs/msg/PointCloud2", "ros2msg", text))


def test_a_view_of_the_data() -> None:
    fields: list[Field] = [("x", 0, 7, 1), ("y", 4, 7, 1), ("z", 8, 7, 1)]
    data = np.arange(30, dtype=np.float32).tobytes()
    msg = sl.cloud("ros1", fields, data, 1, 10, 12, 120)
    arr = sensors.pointcloud2_to_numpy(msg)
    assert np.shares_memory(arr, msg.data)
    own = sensors.pointcloud2_to_numpy(msg, copy=True)
    assert not np.shares_memory(own, msg.data)
    np.testing.assert_array_equal(sensors.xyz(arr), np.arange(30, dtype=np.float32).reshape(10, 3))


def test_ros_numpy_test_bag(corpora: Path) -> None:
    """ros_numpy's own test bag: a packed (15-byte, unaligned) x, y, z, r, g, b cloud."""
    path = corpora / "rosbag" / "ros_numpy" / "test.bag"
    with polybag.open(path) as r:
        (m,) = list(r.messages("/pointcloud"))
        msg = m.decode()
        arr = sensors.pointcloud2_to_numpy(msg)
        fields = [(f.name, f.offset, f.datatype, f.count) for f in msg.fields]
        assert [f[0] for f in fields] == ["x", "y", "z", "r", "g", "b"] and msg.point_step == 15
        assert_matches(
            arr,
            brute(fields, msg.data, msg.height, msg.width, msg.point_step, msg.row_step, msg.is_bigendian),
        )
        ((t, via_reader),) = list(r.pointclouds("/pointcloud"))
        assert t == m.log_time
        np.testing.assert_array_equal(via_reader, arr)
        (g,) = list(r.messages("/occupancygrid"))
        grid = sensors.occupancygrid_to_numpy(g.decode())
        info = g.decode().info
        assert grid.shape == (info.height, info.width) and grid.dtype == np.int8
        np.testing.assert_array_equal(grid.reshape(-1), np.asarray(g.decode().data, np.int8))


# --- options -----------------------------------------------------------------------------------
def _xyz_rgb_cloud() -> tuple[dict[str, Any], np.ndarray]:
    dt = np.dtype([("x", "<f4"), ("y", "<f4"), ("z", "<f4"), ("rgb", "<f4")])
    a = np.zeros(4, dt)
    a["x"] = [1, np.nan, 3, 4]
    a["y"] = [5, 6, 7, 8]
    a["z"] = [9, 10, np.nan, 12]
    packed = np.array([0x00FF8040, 0x00010203, 0x00A0B0C0, 0x00FFFFFF], np.uint32)
    a["rgb"] = packed.view(np.float32)
    return sensors.numpy_to_pointcloud2(a), a


def test_skip_nans_and_split_rgb() -> None:
    msg, a = _xyz_rgb_cloud()
    assert msg["is_dense"] is False
    kept = sensors.pointcloud2_to_numpy(msg, skip_nans=True)
    assert kept["x"].tolist() == [1, 4]
    split = sensors.pointcloud2_to_numpy(msg, split_rgb=True)
    assert list(split.dtype.names or ()) == ["x", "y", "z", "r", "g", "b"]
    assert split["r"].tolist() == [0xFF, 0x01, 0xA0, 0xFF]
    assert split["g"].tolist() == [0x80, 0x02, 0xB0, 0xFF]
    assert split["b"].tolist() == [0x40, 0x03, 0xC0, 0xFF]
    merged = sensors.merge_rgb(split)
    np.testing.assert_array_equal(merged["rgb"].view(np.uint32), a["rgb"].view(np.uint32))


@pytest.mark.parametrize("shape", [(0,), (7,), (3, 5)])
def test_round_trip(shape: tuple[int, ...]) -> None:
    dt = np.dtype([("x", "<f4"), ("y", "<f4"), ("z", "<f4"), ("i", "<u2"), ("n", "<f8", (3,)), ("t", "<i1")])
    rng = np.random.default_rng(2)
    a = np.zeros(shape, dt)
    for n in dt.names or ():
        a[n] = rng.integers(-100, 100, a[n].shape)
    d = sensors.numpy_to_pointcloud2(a)
    assert d["is_dense"] is True and d["point_step"] == dt.itemsize
    payload = codec_for_type("sensor_msgs/PointCloud2").encode(d)
    back = sensors.pointcloud2_to_numpy(codec_for_type("sensor_msgs/PointCloud2").decode(payload))
    assert back.shape == (shape if len(shape) == 2 else (int(np.prod(shape)),))
    for n in dt.names or ():
        np.testing.assert_array_equal(back[n], a[n])
    peer = sl.deserialize("ros1", payload, "sensor_msgs/PointCloud2")
    assert [f.name for f in peer.fields] == list(dt.names or ())


def test_numpy_to_pointcloud2_checks_the_array() -> None:
    with pytest.raises(UsageError, match="structured"):
        sensors.numpy_to_pointcloud2(np.zeros(3, np.float32))
    with pytest.raises(UsageError, match="holds only"):
        sensors.numpy_to_pointcloud2(np.zeros(3, [("x", "<i8")]))


# --- bad input ---------------------------------------------------------------------------------
def _bad(**kw: Any) -> dict[str, Any]:
    msg: dict[str, Any] = {
        "height": 1,
        "width": 2,
        "fields": [{"name": "x", "offset": 0, "datatype": 7, "count": 1}],
        "is_bigendian": False,
        "point_step": 4,
        "row_step": 8,
        "data": bytes(8),
        "is_dense": True,
    }
    msg.update(kw)
    return msg


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"fields": [{"name": "x", "offset": 2, "datatype": 7, "count": 1}]}, "ends past point_step 4"),
        ({"fields": [{"name": "x", "offset": 0, "datatype": 7, "count": 2}]}, "ends past point_step"),
        ({"fields": [{"name": "x", "offset": 0, "datatype": 9, "count": 1}]}, "unknown datatype 9"),
        ({"fields": [{"name": "x", "offset": 0, "datatype": 7, "count": 1}] * 2}, "declared twice"),
        ({"data": bytes(7)}, "fewer than"),
        ({"height": 2, "row_step": 8, "data": bytes(15)}, "fewer than"),
        ({"height": 2, "row_step": 7, "data": bytes(16)}, "row_step 7 is shorter"),
        ({"point_step": 0, "fields": []}, "point_step is 0"),
        ({"fields": [{"name": "x", "offset": 0, "count": 1}]}, "no field 'datatype'"),
        ({"fields": 5}, "not a list"),
    ],
)
def test_bad_clouds_are_clear_errors(kw: dict[str, Any], match: str) -> None:
    with pytest.raises(DecodeError, match=match):
        sensors.pointcloud2_to_numpy(_bad(**kw))


def test_hostile_sizes_allocate_nothing() -> None:
    with pytest.raises(DecodeError, match="fewer than"):
        sensors.pointcloud2_to_numpy(_bad(height=2**20, width=2**20, row_step=2**22, data=bytes(16)))
