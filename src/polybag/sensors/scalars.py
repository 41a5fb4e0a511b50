"""Scans, ranges, fixes, IMU samples, maps and odometry as numpy arrays.

Each takes the message as an object or a dict (ROS 1 or ROS 2).  ``Range``, ``NavSatFix``,
``Imu`` and ``Odometry`` become one row of float64 whose columns the module's ``*_COLUMNS``
tuples name (so many messages stack into a table with ``np.vstack``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from polybag.errors import DecodeError
from polybag.sensors._access import field, integer

LASERSCAN = "sensor_msgs/LaserScan"
#: points a scan may declare (a bound on what a hostile angle_increment makes)
MAX_SCAN_POINTS = 1 << 24


def _floats(msg: Any, name: str, type_name: str) -> np.ndarray:
    v = field(msg, name, type_name)
    try:
        return np.asarray(v, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError) as e:
        raise DecodeError(f"{name} is not numbers ({e})", type_name=type_name, field=name) from None


def _float(msg: Any, name: str, type_name: str) -> float:
    v = field(msg, name, type_name)
    try:
        return float(v)
    except (TypeError, ValueError):
        raise DecodeError(
            f"{name} is {type(v).__name__}, not a number", type_name=type_name, field=name
        ) from None


def laserscan_to_numpy(msg: Any, points: bool = False) -> np.ndarray:
    """A ``sensor_msgs/LaserScan`` as a structured array with one row per beam: ``angle``,
    ``range``, ``intensity`` (NaN when the scan has none), and ``x``, ``y`` (the beam's point
    in the scan's frame) with ``points=True``.  Beams outside ``[range_min, range_max]`` are
    kept (their range as given)."""
    t = LASERSCAN
    ranges = np.asarray(_floats(msg, "ranges", t), np.float32)
    intens = np.asarray(_floats(msg, "intensities", t), np.float32)
    n = len(ranges)
    if n > MAX_SCAN_POINTS:
        raise DecodeError(f"{n} ranges (at most {MAX_SCAN_POINTS})", type_name=t, field="ranges")
    if len(intens) not in (0, n):
        raise DecodeError(f"{len(intens)} intensities for {n} ranges", type_name=t, field="intensities")
    angle_min = _float(msg, "angle_min", t)
    inc = _float(msg, "angle_increment", t)
    names = [("angle", np.float32), ("range", np.float32), ("intensity", np.float32)]
    if points:
        names += [("x", np.float32), ("y", np.float32)]
    out = np.empty(n, np.dtype(names))
    angles = angle_min + inc * np.arange(n, dtype=np.float64)
    out["angle"] = angles
    out["range"] = ranges
    out["intensity"] = intens if len(intens) else np.nan
    if points:
        with np.errstate(invalid="ignore"):  # an infinite range at angle 0: NaN, as numpy says
            out["x"] = ranges * np.cos(angles)
            out["y"] = ranges * np.sin(angles)
    return out


RANGE_COLUMNS = ("range", "min_range", "max_range", "field_of_view", "radiation_type")


def range_to_numpy(msg: Any) -> np.ndarray:
    """A ``sensor_msgs/Range`` as a row of :data:`RANGE_COLUMNS`."""
    t = "sensor_msgs/Range"
    return np.array([_float(msg, c, t) for c in RANGE_COLUMNS], np.float64)


NAVSATFIX_COLUMNS = (
    "latitude",
    "longitude",
    "altitude",
    "status",
    "service",
    *(f"position_covariance[{i}]" for i in range(9)),
    "position_covariance_type",
)


def navsatfix_to_numpy(msg: Any) -> np.ndarray:
    """A ``sensor_msgs/NavSatFix`` as a row of :data:`NAVSATFIX_COLUMNS`."""
    t = "sensor_msgs/NavSatFix"
    status = field(msg, "status", t)
    cov = _floats(msg, "position_covariance", t)
    if len(cov) != 9:
        raise DecodeError(
            f"position_covariance has {len(cov)} values, not 9", type_name=t, field="position_covariance"
        )
    head = [_float(msg, c, t) for c in ("latitude", "longitude", "altitude")]
    st = [
        _float(status, "status", "sensor_msgs/NavSatStatus"),
        _float(status, "service", "sensor_msgs/NavSatStatus"),
    ]
    return np.array([*head, *st, *cov, _float(msg, "position_covariance_type", t)], np.float64)


def _vector(msg: Any, name: str, t: str, keys: str) -> list[float]:
    v = field(msg, name, t)
    return [_float(v, k, t) for k in keys]


#: a message's vector fields and their keys, in column order
_Vectors = tuple[tuple[str, str], ...]

_IMU_VECTORS: _Vectors = (("orientation", "xyzw"), ("angular_velocity", "xyz"), ("linear_acceleration", "xyz"))
_POSE_VECTORS: _Vectors = (("position", "xyz"), ("orientation", "xyzw"))
_TWIST_VECTORS: _Vectors = (("linear", "xyz"), ("angular", "xyz"))


def _vector_columns(vectors: _Vectors) -> tuple[str, ...]:
    """The column names of ``vectors``: ``orientation.x``, ``orientation.y``..."""
    return tuple(f"{name}.{k}" for name, keys in vectors for k in keys)


def _vectors(msg: Any, vectors: _Vectors, t: str) -> list[float]:
    """The values of ``vectors`` of ``msg`` (a message of type ``t``), in column order."""
    return [x for name, keys in vectors for x in _vector(msg, name, t, keys)]


IMU_COLUMNS = _vector_columns(_IMU_VECTORS)


def imu_to_numpy(msg: Any) -> np.ndarray:
    """A ``sensor_msgs/Imu`` as a row of :data:`IMU_COLUMNS` (covariances left out)."""
    return np.array(_vectors(msg, _IMU_VECTORS, "sensor_msgs/Imu"), np.float64)


ODOMETRY_COLUMNS = _vector_columns(_POSE_VECTORS + _TWIST_VECTORS)


def odometry_to_numpy(msg: Any) -> np.ndarray:
    """A ``nav_msgs/Odometry`` as a row of :data:`ODOMETRY_COLUMNS` (pose then twist;
    covariances left out)."""
    t = "nav_msgs/Odometry"
    pose = field(field(msg, "pose", t), "pose", t)
    twist = field(field(msg, "twist", t), "twist", t)
    return np.array(_vectors(pose, _POSE_VECTORS, t) + _vectors(twist, _TWIST_VECTORS, t), np.float64)


def occupancygrid_to_numpy(msg: Any, masked: bool = False) -> np.ndarray:
    """A ``nav_msgs/OccupancyGrid`` as an int8 array of shape ``(height, width)`` (row 0 is
    the map's origin row; -1 is unknown).  ``masked=True`` gives a masked array with the
    unknown cells masked."""
    t = "nav_msgs/OccupancyGrid"
    info = field(msg, "info", t)
    width = integer(info, "width", "nav_msgs/MapMetaData")
    height = integer(info, "height", "nav_msgs/MapMetaData")
    raw = field(msg, "data", t)
    if isinstance(raw, (bytes, bytearray, memoryview)):
        cells = np.frombuffer(raw, np.int8)
    else:
        try:
            cells = np.asarray(raw).astype(np.int8, copy=False).reshape(-1)
        except (TypeError, ValueError) as e:
            raise DecodeError(f"data is not int8 cells ({e})", type_name=t, field="data") from None
    if cells.size != width * height:
        raise DecodeError(
            f"data has {cells.size} cells, not width x height = {width} x {height}", type_name=t, field="data"
        )
    grid = cells.reshape(height, width)
    if masked:
        return np.ma.masked_equal(grid, -1)
    return grid
