"""Images and point clouds of many or huge logs as Dask Bags of arrays.

:func:`read_images` and :func:`read_pointclouds` plan partitions as
:func:`polybag.dask.read_messages` does (from the files' own indexes) and each partition's
task yields ``(log_time, ndarray)`` items (log-time order within a partition), read
through :mod:`polybag.sensors` (raw and compressed images, ROS 1 and ROS 2 channels) and
copied out of the file so they outlive it and pickle to other workers.

>>> import polybag.dask as pbd
>>> imgs = pbd.read_images("runs/*.bag", "/camera/image_raw")
>>> imgs.map(lambda item: item[1].mean()).compute()
"""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np

from polybag.dask._plan import DEFAULT_PARTITION_MESSAGES, Partition, PathsLike
from polybag.dask._read import _detach, _open
from polybag.dask.frames import partition_bag
from polybag.reader import TopicSelector


def _first(item: tuple[int, np.ndarray]) -> int:
    return int(item[0])


def _sensor_partition(
    part: Partition, topics: TopicSelector, kind: str, skip_nans: bool
) -> list[tuple[int, np.ndarray]]:
    """One partition of :func:`read_images` / :func:`read_pointclouds` (runs in a worker)."""
    lists: list[list[tuple[int, np.ndarray]]] = []
    for path, fmt in part.files:
        with _open(path, fmt, topics) as r:
            if kind == "images":
                items = r.images(topics, part.start, part.end, copy=True)
            else:
                items = r.pointclouds(topics, part.start, part.end, skip_nans=skip_nans)
            lists.append([(t, _detach(a)) for t, a in items])
    if len(lists) == 1:
        return lists[0]
    return list(heapq.merge(*lists, key=_first))


def read_images(
    paths: PathsLike,
    topics: TopicSelector,
    *,
    start: int | str | None = None,
    end: int | str | None = None,
    partition_messages: int = DEFAULT_PARTITION_MESSAGES,
) -> Any:
    """``(log_time, pixels)`` of every image (``sensor_msgs/Image`` or ``CompressedImage``)
    on ``topics`` across ``paths`` (a path, a glob or a list) as a ``dask.bag.Bag``."""
    return partition_bag(paths, topics, start, end, partition_messages, _sensor_partition, kind="images", skip_nans=False)


def read_pointclouds(
    paths: PathsLike,
    topics: TopicSelector,
    *,
    start: int | str | None = None,
    end: int | str | None = None,
    partition_messages: int = DEFAULT_PARTITION_MESSAGES,
    skip_nans: bool = False,
) -> Any:
    """``(log_time, points)`` of every ``sensor_msgs/PointCloud2`` on ``topics`` across
    ``paths`` as a ``dask.bag.Bag`` of structured arrays."""
    return partition_bag(
        paths, topics, start, end, partition_messages, _sensor_partition, kind="pointclouds", skip_nans=skip_nans
    )
