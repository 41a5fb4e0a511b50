"""Sensor data as numpy arrays: images, compressed images, point clouds, scans and more.

Functions take a message as ``Message.decode()`` or ``Message.to_dict()`` gives it, from a
ROS 1 or a ROS 2 channel of any format::

    from polybag import sensors
    with polybag.open("run.bag") as r:
        for t, img in r.images("/camera/image_raw"):       # (log_time, ndarray)
            ...
        for m in r.messages("/velodyne_points"):
            pts = sensors.pointcloud2_to_numpy(m.decode())  # structured array x, y, z, ...

Numpy only; ``compressed_image_to_numpy`` needs Pillow or OpenCV
(``pip install 'polybag[sensors]'``).

The package by job: :mod:`~polybag.sensors.image` (``sensor_msgs/Image`` encodings),
:mod:`~polybag.sensors.compressed` (``CompressedImage``, ``compressedDepth``),
:mod:`~polybag.sensors.pointcloud` (``PointCloud2``), :mod:`~polybag.sensors.scalars`
(``LaserScan``, ``Range``, ``NavSatFix``, ``Imu``, ``OccupancyGrid``, ``Odometry``),
:mod:`~polybag.sensors.display` (any image as 8-bit RGB for files and video),
:mod:`~polybag.sensors.layout` (the zero-copy image path), :mod:`~polybag.sensors.read`
(every image or cloud of a topic from a reader).
"""

from __future__ import annotations

from polybag.sensors.compressed import compressed_image_to_numpy
from polybag.sensors.display import to_rgb8
from polybag.sensors.image import Encoding, encoding_info, encodings, image_to_numpy, numpy_to_image
from polybag.sensors.pointcloud import (
    merge_rgb,
    numpy_to_pointcloud2,
    pointcloud2_to_numpy,
    split_packed_rgb,
    xyz,
)
from polybag.sensors.read import images, pointclouds
from polybag.sensors.scalars import (
    IMU_COLUMNS,
    NAVSATFIX_COLUMNS,
    ODOMETRY_COLUMNS,
    RANGE_COLUMNS,
    imu_to_numpy,
    laserscan_to_numpy,
    navsatfix_to_numpy,
    occupancygrid_to_numpy,
    odometry_to_numpy,
    range_to_numpy,
)

__all__ = [
    "IMU_COLUMNS",
    "NAVSATFIX_COLUMNS",
    "ODOMETRY_COLUMNS",
    "RANGE_COLUMNS",
    "Encoding",
    "compressed_image_to_numpy",
    "encoding_info",
    "encodings",
    "image_to_numpy",
    "images",
    "imu_to_numpy",
    "laserscan_to_numpy",
    "merge_rgb",
    "navsatfix_to_numpy",
    "numpy_to_image",
    "numpy_to_pointcloud2",
    "occupancygrid_to_numpy",
    "odometry_to_numpy",
    "pointcloud2_to_numpy",
    "pointclouds",
    "range_to_numpy",
    "split_packed_rgb",
    "to_rgb8",
    "xyz",
]
