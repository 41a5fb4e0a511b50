"""``compress``/``decompress`` of a rosbag2 directory: a new bag with another compression.

Every message is copied (file order, each storage file's own order) into a new bag written
by :class:`~polybag.formats.rosbag2.writer.Rosbag2Writer`, which writes ``NAME.active/`` and
renames it when complete (an interruption leaves the input untouched and no half-written
output).  The storage (``sqlite3`` or ``mcap``), the metadata version (9 stays 9; older ones
become 8, the oldest polybag writes that rosbag2 readers of every distro read), the topics'
QoS profiles, type hashes and message definitions are kept; ``compression`` is ``zstd`` or
``none`` and ``compression_mode`` ``file`` (each storage file compressed whole, the default)
or ``message`` (each payload).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from polybag.errors import UnsupportedError
from polybag.formats.rosbag2.reader import Rosbag2Reader
from polybag.formats.rosbag2.writer import Rosbag2Writer

MODES = ("file", "message")


def _size(path: str) -> int:
    total = 0
    for entry in os.scandir(path):
        try:
            total += entry.stat(follow_symlinks=False).st_size if entry.is_file(follow_symlinks=False) else 0
        except OSError:
            pass
    return total


def recompress_rosbag2(
    src: str,
    dst: str,
    compression: str,
    progress: Callable[[int], None],
    *,
    compression_mode: str | None = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Copy the rosbag2 bag ``src`` into the new bag ``dst`` with ``compression`` (see the
    module notes); returns ``{"messages", "compression", "compression_mode"}``."""
    mode = (compression_mode or "file").lower()
    if mode not in MODES:
        raise UnsupportedError(f"rosbag2 compression mode can be file or message, not {compression_mode!r}")
    n = 0
    with Rosbag2Reader(src) as r:
        kinds = {st.kind for st in r._storages}
        storage = kinds.pop() if len(kinds) == 1 else "sqlite3"
        version = 9 if r.info is not None and r.info.version >= 9 else 8
        info = r.info
        w = Rosbag2Writer(
            dst,
            storage=storage,
            compression=compression,
            compression_mode=mode,
            version=version,
            overwrite=overwrite,
            ros_distro=(info.ros_distro if info is not None and info.ros_distro else "polybag"),
            custom_data=info.custom_data if info is not None else None,
        )
        try:
            for m in r.messages(order="file"):
                w.write_message(m)
                n += 1
            w.close()
        except BaseException:
            w.abort(discard=True)  # the input is untouched; no half-written output stays
            raise
    progress(_size(src))
    return {"messages": n, "compression": compression, "compression_mode": mode if compression != "none" else ""}
