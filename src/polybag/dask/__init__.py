"""Dask scale-out: many logs and huge logs as Dask DataFrames and Bags.

Partitions come from the files' own indexes, read in the driver without reading any
message data: each reader's :meth:`~polybag.reader.Reader.chunk_message_counts` (MCAP
chunk indexes with per-channel counts from the Message Index record headers, bag chunk
info records with per-connection counts) gives the chunks, grouped into partitions of
about ``partition_messages`` messages of the selected topics.

A partition is a file plus a log-time window ``[start, end)``.  Windows of one file tile
the time axis (the first is open below, the last open above), so every message falls into
exactly one partition even when chunks overlap in time (written out of order); a
partition's task reads only the chunks that overlap its window, through the file's own
index.  Cuts go where the expected count reaches each multiple of the target (each
chunk's count spread over its time range), moved to a chunk start that splits no chunk
when one is near.  Files that do not overlap in time are ordered by time and keep their
own windows; indexed files that overlap share windows cut over all their chunks (a
partition then reads each of them and merges by log time), so the Dask divisions are
known either way.  Files without an index (a bag without its index, an MCAP file without
summary) and ULog files (which have none) are one partition per file, divisions unknown.

Partitions carry paths and windows only (never an open reader), so the graphs pickle and
run on the threaded, process and distributed schedulers; every task opens its file,
builds its result in memory it owns, and closes the file before returning.

>>> import polybag.dask as pbd
>>> df = pbd.read_topic("logs/*.mcap", "/imu", fields=["linear_acceleration"])
>>> df["linear_acceleration.x"].mean().compute()
>>> sizes = pbd.map_messages("s3://bucket/logs/*.bag", len_of_data, topics=["/camera"])
>>> both = pbd.read_topics("logs/*.mcap", ["/imu", "/gps"], tolerance="50ms")  # one partition per file

Paths may be URLs (``s3://``, ``gs://``, ``http(s)://``; a glob URL lists the bucket): the
driver plans from the remote files' indexes and builds the frames' columns from the
message types' schemas, fetching nothing but each file's summary, and every task reads its
chunks by range requests (:mod:`polybag.io.remote`): the partitions of a file read disjoint
sets of chunks, so each chunk is fetched once (each task also reads the file's summary).
A groupby aggregation on a column of a frame with more than 15 partitions: pass
``split_out=1`` when the groups are few (Dask's default splits the output by a shuffle).

Dask is optional: ``pip install polybag[dask]``.

The package by job: :mod:`polybag.dask._plan` (partitions from the indexes, in the driver),
:mod:`polybag.dask._read` (one partition's task, in a worker), :mod:`polybag.dask.frames`
(the Dask DataFrames and Bags), :mod:`polybag.dask.sensors` (Bags of images and point
clouds).  Every name is importable from ``polybag.dask`` itself.
"""

from __future__ import annotations

# every name of the module before the split stays importable from here (tests call helpers)
from polybag.dask._plan import (  # noqa: F401
    _PLAN_THREADS,
    DEFAULT_PARTITION_MESSAGES,
    Partition,
    PathsLike,
    _Density,
    _divisions,
    _FilePlan,
    _merged_windows,
    _order,
    _plan,
    _plan_file,
    _selected_channels,
    _selection,
    _sniff_path,
    _windows,
    expand_paths,
    partitions,
)
from polybag.dask._read import (  # noqa: F401
    _SUMMARY_COLUMNS,
    _columns_window,
    _conform,
    _detach,
    _frame,
    _log_time,
    _message_partition,
    _meta_for,
    _open,
    _owned,
    _raw_window,
    _summary_row,
    _time_order,
    _topic_partition,
    _ulog_frame,
)
from polybag.dask.frames import (  # noqa: F401
    file_summaries,
    map_messages,
    read_messages,
    read_topic,
    read_topics,
    require_dask,
)
from polybag.dask.sensors import read_images, read_pointclouds

__all__ = [
    "Partition",
    "file_summaries",
    "map_messages",
    "partitions",
    "read_images",
    "read_messages",
    "read_pointclouds",
    "read_topic",
    "read_topics",
]
