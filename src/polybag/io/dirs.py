"""Remote rosbag2 bags: ``polybag.open("s3://bucket/run/")`` or ``.../run/metadata.yaml``.

A rosbag2 bag is a directory, which an object store or an HTTP server does not have, so a
remote bag is laid out locally in a temporary directory and opened there by the rosbag2
reader:

- ``metadata.yaml`` is fetched (one small request) and parsed; the storage files it lists
  are looked for next to it;
- an **MCAP** storage file gets a local stand-in (its first 16 bytes, so it sniffs as MCAP)
  registered with :func:`polybag.io.remote.add_stand_in`: the rosbag2 reader opens it through
  :func:`polybag.io.remote.source_for_path`, which reads the remote object **by range
  requests** like any remote MCAP (summary, then the chunks a read needs);
- a **sqlite3** storage file (and a zstd-compressed one) is **fetched whole** into the
  temporary directory: SQLite reads local files only.  Only the storage files are fetched:
  a listed path that names an SQLite journal, write-ahead log or shared-memory file
  (``-journal``, ``-wal``, ``-shm``, which SQLite would act on) is refused, and a file
  listed twice (``a.db3``, ``./a.db3``) is fetched once.

The temporary directory (and the stand-ins) go when the reader is closed (or collected).
This module sits above the formats (it parses rosbag2 metadata) and is called by
:func:`polybag.open` only.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import tempfile
import weakref
from typing import Any
from urllib.parse import quote

from polybag.errors import FormatError, PolybagError
from polybag.formats.rosbag2.metadata import MAX_METADATA_BYTES, METADATA_FILE, parse_metadata
from polybag.io.remote import add_stand_in, download, drop_stand_ins, read_head

_MAGIC_BYTES = 16


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


_SQLITE_SIDE = ("-journal", "-wal", "-shm")


def _safe_relative(rel: str, meta_url: str) -> str:
    """A storage path of metadata.yaml that stays inside the bag directory and names a
    storage file (never an SQLite journal, write-ahead log or shared-memory file)."""
    norm = posixpath.normpath(rel)
    if not rel or rel.startswith("/") or norm.startswith("..") or "\\" in rel or "\0" in rel:
        raise FormatError(f"storage file path {rel!r} leaves the bag directory", meta_url)
    if norm in (".", METADATA_FILE) or norm.lower().endswith(_SQLITE_SIDE):
        raise FormatError(f"storage file path {rel!r} is not a storage file: never fetched", meta_url)
    return norm


def open_remote_rosbag2(url: str, storage_options: dict[str, Any] | None, options: dict[str, Any]) -> Any:
    """The rosbag2 reader of the remote bag directory ``url`` (see the module notes)."""
    from polybag.formats import registry

    base = _base(url)
    meta_url = _join(base, METADATA_FILE)
    text = read_head(meta_url, MAX_METADATA_BYTES + 1, storage_options)
    if len(text) > MAX_METADATA_BYTES:
        raise FormatError(
            f"metadata.yaml is over {MAX_METADATA_BYTES} bytes: not a rosbag2 metadata file", meta_url
        )
    info = parse_metadata(text, meta_url)
    name = posixpath.basename(base.split("?", 1)[0].rstrip("/")) or "bag"
    tmp = tempfile.mkdtemp(prefix="polybag-rosbag2-")
    directory = os.path.join(tmp, name)
    stand_ins: list[str] = []
    try:
        os.makedirs(directory)
        with open(os.path.join(directory, METADATA_FILE), "wb") as f:
            f.write(text)
        fetched: set[str] = set()
        for fi in info.files:
            rel = _safe_relative(fi.path, meta_url)
            if rel in fetched:
                continue  # listed twice: one local file (the reader decides what a repeat means)
            fetched.add(rel)
            local = os.path.join(directory, *rel.split("/"))
            os.makedirs(os.path.dirname(local), exist_ok=True)
            furl = _join(base, rel)
            if rel.lower().endswith(".mcap"):
                head = read_head(furl, _MAGIC_BYTES, storage_options)
                with open(local, "wb") as f:
                    f.write(head)
                add_stand_in(local, furl, storage_options)
                stand_ins.append(local)
            else:  # sqlite3 (SQLite needs a local file), or a zstd-compressed file
                download(furl, local, storage_options)
        spec = registry.get("rosbag2")
        reader = spec.open_by_path(directory, **options, shown_as=base.split("?", 1)[0])  # errors name the URL
    except OSError as e:
        _cleanup(tmp, stand_ins)
        raise PolybagError(f"{url}: cannot lay out the bag in {tmp}: {e.strerror or e}") from e
    except BaseException:
        _cleanup(tmp, stand_ins)
        raise
    done = weakref.finalize(reader, _cleanup, tmp, stand_ins)
    close = reader.close

    def close_and_clean() -> None:
        try:
            close()
        finally:
            done()

    reader.close = close_and_clean
    reader.path = url  # what it is to the user (info, errors); the layout is local_layout
    reader.local_layout = directory
    return reader


def _cleanup(tmp: str, stand_ins: list[str]) -> None:
    drop_stand_ins(stand_ins)
    shutil.rmtree(tmp, ignore_errors=True)
