"""Open any ROS 1 bag: the version line picks the reader.

``#ROSBAG V2.0`` -> :class:`~.reader_v2.BagV2Reader`; ``#ROSRECORD V1.2``, ``#ROSRECORD
V1.1``, ``#ROSLOG V1.1``, ``#ROSLOG V1.0`` and version 0 (no version line) ->
:class:`~.reader_v1.BagV1Reader`.
"""

from __future__ import annotations

from typing import Any

from polybag.errors import UnknownFormatError, UnsupportedError
from polybag.io.source import MappedSource, Source, StreamSource

from .reader_v1 import BagV1Reader, looks_like_version0
from .reader_v2 import BagV2Reader
from .records import MAGIC_V20


def open_bag(source: Source, path: str | None = None, *, recover: bool = False, **options: Any) -> BagV2Reader | BagV1Reader:
    """The reader for a bag of any version (the ``READERS["bag"]`` opener)."""
    if isinstance(source, StreamSource):
        source = source.spool()  # bounded memory: a long stream goes to a temporary file
        source.path = path if path and path != "<stream>" else None
    assert isinstance(source, MappedSource)  # a random-access source from here on
    view = source.view
    if source.size == 0:
        raise UnknownFormatError("empty file: not a bag (no version line)", path, 0)
    head = bytes(view[:32])
    if head.startswith(MAGIC_V20):
        return BagV2Reader(source, path, recover=recover, **options)
    source.need_all()  # the older versions have no index to read by ranges
    if head.startswith(b"#ROSRECORD V1.2\n"):
        return BagV1Reader(source, path, version="1.2", start=len(b"#ROSRECORD V1.2\n"), recover=recover, **options)
    for magic, version in (
        (b"#ROSRECORD V1.1\n", "1.1"),
        (b"#ROSLOG V1.1\n", "ROSLOG 1.1"),
        (b"#ROSLOG V1.0\n", "ROSLOG 1.0"),
    ):
        if head.startswith(magic):
                return BagV1Reader(source, path, version=version, start=len(magic), recover=recover, **options)
    if head.startswith((b"#ROSBAG V", b"#ROSRECORD V", b"#ROSLOG V")):
        line = head.split(b"\n", 1)[0].decode("latin-1")
        raise UnsupportedError(
            f"{path or '<buffer>'}: bag version line {line!r} is not one polybag knows "
            "(#ROSBAG V2.0, #ROSRECORD V1.2/V1.1, #ROSLOG V1.1/V1.0, version 0)"
        )
    if looks_like_version0(view):
        return BagV1Reader(source, path, version="0", start=0, recover=recover, **options)
    raise UnknownFormatError(
        f"not a bag: no '#ROSBAG'/'#ROSRECORD'/'#ROSLOG' version line and not a version 0 record "
        f"(first bytes {head[:16]!r})",
        path,
        0,
    )
