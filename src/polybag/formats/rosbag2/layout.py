"""A remote rosbag2 bag laid out in a local temporary directory (see
:mod:`polybag.formats.rosbag2.remote`): what the reader is given to open it.

The layout says what the bag is to the user (its URL), where it lies locally, and which of
its local files are stand-ins of remote MCAP storage files: a mapping from the local path to
a factory of the :class:`~polybag.io.source.MappedSource` that reads the remote object by
range requests.  The storage files get that mapping as the open option ``sources``
(:class:`~polybag.formats.rosbag2.storage.McapFile`); the reader removes the directory when
it is closed (or collected).
"""

from __future__ import annotations

import os
import shutil
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from polybag.io.source import MappedSource

#: opens one storage file's bytes (a remote object read by range requests)
SourceFactory = Callable[[], MappedSource]


def source_for(path: str, sources: Mapping[str, SourceFactory] | None) -> MappedSource:
    """The source of the local storage file ``path``: the one ``sources`` makes for a
    stand-in of a remote file, else the file mapped."""
    factory = sources.get(os.path.abspath(path)) if sources else None
    return factory() if factory is not None else MappedSource.from_path(path)


class LocalLayout:
    """The local temporary directory ``tmp`` holding the bag ``directory`` of the remote bag
    at ``url`` (``shown``: the bag's directory URL, without a query, that errors name)."""

    def __init__(self, url: str, shown: str, tmp: str, directory: str) -> None:
        self.url = url
        self.shown = shown
        self.directory = directory
        #: absolute local path -> the source of the remote file it stands in for
        self.sources: dict[str, SourceFactory] = {}
        #: what fetching the whole files (metadata.yaml, sqlite3 files) cost: size, requests, bytes
        self.fetched_whole = [0, 0, 0]
        self._opened: list[MappedSource] = []  # the range-read sources made so far
        self._remove = weakref.finalize(self, shutil.rmtree, tmp, ignore_errors=True)

    def add_source(self, path: str, factory: SourceFactory) -> None:
        """Read the local stand-in ``path`` through ``factory``'s source."""
        def opened() -> MappedSource:
            source = factory()
            self._opened.append(source)
            return source

        self.sources[os.path.abspath(path)] = opened

    def count_whole(self, size: int, requests: int) -> None:
        """A file of ``size`` bytes fetched whole in ``requests`` requests."""
        for i, n in enumerate((size, requests, size)):
            self.fetched_whole[i] += n

    def fetch_stats(self) -> dict[str, Any]:
        """What reading the remote bag has cost: the sum over its files (the range-read
        MCAP files' sources and the files fetched whole), as a remote file's stats."""
        size, requests, got = self.fetched_whole
        for source in self._opened:
            st = source.stats or {}
            size += int(st.get("size", 0))
            requests += int(st.get("requests", 0))
            got += int(st.get("bytes_fetched", 0))
        return {"url": self.shown, "size": size, "requests": requests, "bytes_fetched": got}

    def remove(self) -> None:
        """Remove the temporary directory (once; also when the layout is collected)."""
        self._remove()
