"""ROS 2 bags (rosbag2 directories): ``metadata.yaml`` and ``sqlite3`` or ``mcap`` storage.

* :mod:`~polybag.formats.rosbag2.metadata`: ``metadata.yaml`` (versions 0-9) parsed and written
* :mod:`~polybag.formats.rosbag2.sqlite`: the ``.db3`` storage, read with ``sqlite3`` (written:
  :mod:`~polybag.formats.rosbag2.sqlite_writer`)
* :mod:`~polybag.formats.rosbag2.storage`: one interface over the storage files (MCAP through
  the registry's MCAP reader), whole-file zstd
* :mod:`~polybag.formats.rosbag2.reader`: :class:`Rosbag2Reader`, ``open_rosbag2``, the probe
* :mod:`~polybag.formats.rosbag2.writer`: :class:`Rosbag2Writer`
"""

from __future__ import annotations

import os


def looks_like_rosbag2(path: str) -> bool:
    """The registry's probe (imports nothing else until a path is probed)."""
    if not (os.path.isdir(path) or path.endswith(("metadata.yaml", ".db3", ".DB3"))):
        return False
    from polybag.formats.rosbag2.reader import looks_like_rosbag2 as probe

    return probe(path)
