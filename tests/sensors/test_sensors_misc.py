"""LaserScan, Range, NavSatFix, Imu, OccupancyGrid and Odometry as arrays, from messages
serialized by rosbags and decoded by polybag (ROS 1 and ROS 2, objects and dicts)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import sensor_logs as sl

import polybag
from polybag import sensors
from polybag.errors import DecodeError
from polybag.model import Channel, Schema

PROFILES = ["ros1", "ros2"]


def _decoded(profile: str, msg: Any) -> list[Any]:
    """rosbags' message, and polybag's object and dict of its serialized bytes."""
    store = sl.STORES[profile]
    full = msg.__msgtype__
    text = store.generate_msgdef(full)[0].encode()
    if profile == "ros1":
        ch = Channel(1, "/t", "ros1", Schema(1, sl.type_name(msg), "ros1msg", text))
    else:
        ch = Channel(1, "/t", "cdr", Schema(1, full, "ros2msg", text))
    payload = sl.serialize(profile, msg)
    codec = polybag.codecs.codec_for(ch)
    return [msg, codec.decode(payload), codec.to_dict(payload)]


def _vec(store: Any, name: str, **kw: float) -> Any:
    return sl.T(store, f"geometry_msgs/{name}")(**kw)


@pytest.mark.parametrize("profile", PROFILES)
def test_laserscan(profile: str) -> None:
    store = sl.STORES[profile]
    ranges = np.array([1.0, 2.0, np.inf, 4.0, 0.5], np.float32)
    msg = sl.T(store, "sensor_msgs/LaserScan")(
        header=sl.header(profile),
        angle_min=-0.5,
        angle_max=0.5,
        angle_increment=0.25,
        time_increment=0.0,
        scan_time=0.1,
        range_min=0.1,
        range_max=10.0,
        ranges=ranges,
        intensities=np.arange(5, dtype=np.float32),
    )
    for m in _decoded(profile, msg):
        a = sensors.laserscan_to_numpy(m, points=True)
        np.testing.assert_allclose(a["angle"], [-0.5, -0.25, 0.0, 0.25, 0.5])
        np.testing.assert_array_equal(a["range"], ranges)
        np.testing.assert_array_equal(a["intensity"], [0, 1, 2, 3, 4])
        np.testing.assert_allclose(
            a["x"][[0, 1, 3, 4]], (ranges * np.cos(a["angle"]))[[0, 1, 3, 4]], rtol=1e-6
        )
        np.testing.assert_allclose(a["y"][1], 2.0 * np.sin(-0.25), rtol=1e-6)
    no_int = sensors.laserscan_to_numpy({**_decoded(profile, msg)[2], "intensities": []})
    assert np.isnan(no_int["intensity"]).all() and "x" not in (no_int.dtype.names or ())
    with pytest.raises(DecodeError, match="3 intensities for 5 ranges"):
        sensors.laserscan_to_numpy({**_decoded(profile, msg)[2], "intensities": [1, 2, 3]})


@pytest.mark.parametrize("profile", PROFILES)
def test_range_navsatfix_imu_odometry(profile: str) -> None:
    store = sl.STORES[profile]
    rng = sl.T(store, "sensor_msgs/Range")(
        header=sl.header(profile),
        radiation_type=1,
        field_of_view=0.3,
        min_range=0.2,
        max_range=4.0,
        range=1.5,
    )
    status = sl.T(store, "sensor_msgs/NavSatStatus")(status=0, service=1)
    fix = sl.T(store, "sensor_msgs/NavSatFix")(
        header=sl.header(profile),
        status=status,
        latitude=48.1,
        longitude=11.5,
        altitude=520.0,
        position_covariance=np.arange(9, dtype=np.float64),
        position_covariance_type=2,
    )
    q = _vec(store, "Quaternion", x=0.0, y=0.0, z=0.6, w=0.8)
    v = _vec(store, "Vector3", x=1.0, y=2.0, z=3.0)
    imu = sl.T(store, "sensor_msgs/Imu")(
        header=sl.header(profile),
        orientation=q,
        orientation_covariance=np.zeros(9),
        angular_velocity=v,
        angular_velocity_covariance=np.zeros(9),
        linear_acceleration=_vec(store, "Vector3", x=0.0, y=0.0, z=9.81),
        linear_acceleration_covariance=np.zeros(9),
    )
    pose = sl.T(store, "geometry_msgs/Pose")(
        position=_vec(store, "Point", x=4.0, y=5.0, z=6.0), orientation=q
    )
    twist = sl.T(store, "geometry_msgs/Twist")(
        linear=v, angular=_vec(store, "Vector3", x=-1.0, y=-2.0, z=-3.0)
    )
    odom = sl.T(store, "nav_msgs/Odometry")(
        header=sl.header(profile),
        child_frame_id="base",
        pose=sl.T(store, "geometry_msgs/PoseWithCovariance")(pose=pose, covariance=np.zeros(36)),
        twist=sl.T(store, "geometry_msgs/TwistWithCovariance")(twist=twist, covariance=np.zeros(36)),
    )
    for m in _decoded(profile, rng):
        np.testing.assert_allclose(sensors.range_to_numpy(m), [1.5, 0.2, 4.0, 0.3, 1], rtol=1e-6)
    for m in _decoded(profile, fix):
        row = sensors.navsatfix_to_numpy(m)
        assert len(row) == len(sensors.NAVSATFIX_COLUMNS)
        np.testing.assert_allclose(row, [48.1, 11.5, 520.0, 0, 1, *range(9), 2])
    for m in _decoded(profile, imu):
        row = sensors.imu_to_numpy(m)
        assert len(row) == len(sensors.IMU_COLUMNS)
        np.testing.assert_allclose(row, [0, 0, 0.6, 0.8, 1, 2, 3, 0, 0, 9.81])
    for m in _decoded(profile, odom):
        row = sensors.odometry_to_numpy(m)
        assert len(row) == len(sensors.ODOMETRY_COLUMNS)
        np.testing.assert_allclose(row, [4, 5, 6, 0, 0, 0.6, 0.8, 1, 2, 3, -1, -2, -3])


@pytest.mark.parametrize("profile", PROFILES)
def test_occupancy_grid(profile: str) -> None:
    store = sl.STORES[profile]
    cells = np.array([-1, 0, 100, 50, 0, -1], np.int8)
    meta = sl.T(store, "nav_msgs/MapMetaData")(
        map_load_time=sl.T(store, "builtin_interfaces/Time")(sec=0, nanosec=0),
        resolution=0.05,
        width=3,
        height=2,
        origin=sl.T(store, "geometry_msgs/Pose")(
            position=_vec(store, "Point", x=0.0, y=0.0, z=0.0),
            orientation=_vec(store, "Quaternion", x=0.0, y=0.0, z=0.0, w=1.0),
        ),
    )
    msg = sl.T(store, "nav_msgs/OccupancyGrid")(header=sl.header(profile), info=meta, data=cells)
    for m in _decoded(profile, msg):
        grid = sensors.occupancygrid_to_numpy(m)
        assert grid.dtype == np.int8 and grid.shape == (2, 3)
        np.testing.assert_array_equal(grid, cells.reshape(2, 3))
        masked = sensors.occupancygrid_to_numpy(m, masked=True)
        assert masked.mask.tolist() == [[True, False, False], [False, False, True]]
    bad = {**_decoded(profile, msg)[2], "data": [0, 1]}
    with pytest.raises(DecodeError, match="2 cells, not width x height = 3 x 2"):
        sensors.occupancygrid_to_numpy(bad)


def test_missing_fields_are_decode_errors() -> None:
    with pytest.raises(DecodeError, match="not a sensor_msgs/Imu"):
        sensors.imu_to_numpy({"orientation": {"x": 0, "y": 0, "z": 0, "w": 1}})
    with pytest.raises(DecodeError, match="not a number"):
        sensors.range_to_numpy(
            {"range": "far", "min_range": 0, "max_range": 1, "field_of_view": 0, "radiation_type": 0}
        )
