"""Remote rosbag2 bags: ``polybag.open("s3://bucket/run/")`` or ``.../run/metadata.yaml``
(the registry's ``open_url`` hook of rosbag2).

A rosbag2 bag is a directory, which an object store or an HTTP server does not have, so a
remote bag is laid out locally in a temporary directory (a
:class:`~polybag.formats.rosbag2.layout.LocalLayout`) and opened there by the rosbag2
reader:

- ``metadata.yaml`` is fetched (one small request) and parsed; the storage files it lists
  are looked for next to it;
- an **MCAP** storage file gets a local stand-in (the MCAP magic, so it sniffs as MCAP; no
  request: the object's own magic is checked when its source opens) whose source the
  layout makes with :func:`polybag.io.remote.open_url`: the rosbag2 reader
  reads the remote object **by range requests** like any remote MCAP (summary, then the
  chunks a read needs);
- a **sqlite3** storage file (and a zstd-compressed one) is **fetched whole** into the
  temporary directory: SQLite reads local files only.  Only the storage files are fetched:
  a listed path that names an SQLite journal, write-ahead log or shared-memory file
  (``-journal``, ``-wal``, ``-shm``, which SQLite would act on) is refused, and a file
  listed twice (``a.db3``, ``./a.db3``) is fetched once.

The temporary directory goes when the reader is closed (or collected).
"""

from __future__ import annotations

import os
import posixpath
import tempfile
from functools import partial
from typing import Any
from urllib.parse import quote

from polybag.errors import FormatError, PolybagError
from polybag.formats import registry
from polybag.formats.rosbag2.layout import LocalLayout
from polybag.formats.rosbag2.metadata import MAX_METADATA_BYTES, METADATA_FILE, parse_metadata
from polybag.io.block_map import PART
from polybag.io.remote import download, open_url, read_head_counted

#: a local stand-in of a remote MCAP storage file: the MCAP magic (what sniffing reads)
_MCAP_STAND_IN = registry.MCAP_MAGIC
_SQLITE_SIDE = ("-journal", "-wal", "-shm")


def is_bag_directory_url(url: str) -> bool:
    """A URL naming a directory (ending with ``/``) or a ``metadata.yaml``."""
    path = url.split("?", 1)[0]
    return path.endswith("/") or posixpath.basename(path) == METADATA_FILE


def _base(url: str) -> str:
    """The directory URL (ending with ``/``) of a directory or metadata.yaml URL."""
    path, sep, query = url.partition("?")
    if not path.endswith("/"):
        path = path.rsplit("/", 1)[0] + "/"
    return path + (sep + query if sep else "")


def _join(base: str, rel: str) -> str:
    path, sep, query = base.partition("?")
    return path + quote(rel) + (sep + query if sep else "")


def _safe_relative(rel: str, meta_url: str) -> str:
    """A storage path of metadata.yaml that stays inside the bag directory and names a
    storage file (never an SQLite journal, write-ahead log or shared-memory file)."""
    norm = posixpath.normpath(rel)
    if not rel or rel.startswith("/") or norm.startswith("..") or "\\" in rel or "\0" in rel:
        raise FormatError(f"storage file path {rel!r} leaves the bag directory", meta_url)
    if norm in (".", METADATA_FILE) or norm.lower().endswith(_SQLITE_SIDE):
        raise FormatError(f"storage file path {rel!r} is not a storage file: never fetched", meta_url)
    return norm


def open_remote_bag(url: str, storage_options: dict[str, Any] | None, options: dict[str, Any]) -> Any:
    """The registry's ``open_url`` of rosbag2: the reader of the remote bag directory ``url``
    (see the module notes); None for a URL that names no directory nor metadata.yaml."""
    if not is_bag_directory_url(url):
        return None
    from polybag.formats.rosbag2.reader import open_rosbag2  # here: an MCAP URL never needs it

    base = _base(url)
    meta_url = _join(base, METADATA_FILE)
    text, head_requests = read_head_counted(meta_url, MAX_METADATA_BYTES + 1, storage_options)
    if len(text) > MAX_METADATA_BYTES:
        raise FormatError(
            f"metadata.yaml is over {MAX_METADATA_BYTES} bytes: not a rosbag2 metadata file", meta_url
        )
    info = parse_metadata(text, meta_url)
    name = posixpath.basename(base.split("?", 1)[0].rstrip("/")) or "bag"
    tmp = tempfile.mkdtemp(prefix="polybag-rosbag2-")
    layout = LocalLayout(url, base.split("?", 1)[0], tmp, os.path.join(tmp, name))
    try:
        os.makedirs(layout.directory)
        with open(os.path.join(layout.directory, METADATA_FILE), "wb") as f:
            f.write(text)
        layout.count_whole(len(text), head_requests)
        fetched: set[str] = set()
        for fi in info.files:
            rel = _safe_relative(fi.path, meta_url)
            if rel in fetched:
                continue  # listed twice: one local file (the reader decides what a repeat means)
            fetched.add(rel)
            local = os.path.join(layout.directory, *rel.split("/"))
            os.makedirs(os.path.dirname(local), exist_ok=True)
            furl = _join(base, rel)
            if rel.lower().endswith(".mcap"):
                # the stand-in only has to sniff as MCAP: no request for it (the MCAP
                # reader checks the object's own magic when its source opens)
                with open(local, "wb") as f:
                    f.write(_MCAP_STAND_IN)
                layout.add_source(local, partial(open_url, furl, storage_options))
            else:  # sqlite3 (SQLite needs a local file), or a zstd-compressed file
                got = download(furl, local, storage_options)
                layout.count_whole(got, 1 + -(-got // PART))  # its size (HEAD), then its parts
        return open_rosbag2(layout.directory, **options, layout=layout)  # errors name the URL
    except OSError as e:
        layout.remove()
        raise PolybagError(f"{url}: cannot lay out the bag in {tmp}: {e.strerror or e}") from e
    except BaseException:
        layout.remove()
        raise
