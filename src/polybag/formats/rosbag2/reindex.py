"""``metadata.yaml`` rebuilt in place from a bag directory's storage files (what
``ros2 bag reindex`` does): :func:`reindex_rosbag2`.

Every storage file of the directory (``NAME_<n>.db3``/``.mcap``, whole-file ``.zstd`` too)
is opened, its topics, message counts and time range read from its own tables or summary,
and a metadata.yaml (version 9 unless asked) is written atomically next to them.  A
directory whose files are damaged or unfinished (an MCAP writer killed before its summary:
``NAME_0.mcap.active``) is refused: ``polybag recover DIR OUT --format rosbag2`` copies what
is intact into a fresh bag instead.  Per-message compression cannot be told from the
files; such a bag is best rebuilt with ``recover``.
"""

from __future__ import annotations

import os
from typing import Any

from polybag.errors import FormatError, OutputExistsError
from polybag.formats.rosbag2.metadata import (
    LATEST_VERSION,
    METADATA_FILE,
    BagInfo,
    FileInfo,
    TopicInfo,
    dump_metadata,
)
from polybag.formats.rosbag2.reader import Rosbag2Reader
from polybag.io.output_files import file_refusal, refuse_replacing, write_atomically


def reindex_rosbag2(
    path: str | os.PathLike[str], *, overwrite: bool = False, version: int = LATEST_VERSION
) -> dict[str, Any]:
    """Write ``metadata.yaml`` for the bag directory ``path`` from its storage files;
    returns ``{"metadata", "messages", "files", "topics"}``.  An existing metadata.yaml is
    an :class:`OutputExistsError` unless ``overwrite``; damaged or unfinished storage a
    :class:`FormatError` (use ``polybag recover``)."""
    directory = os.fspath(path)
    meta = os.path.join(directory, METADATA_FILE)
    if os.path.lexists(meta) and not overwrite:
        raise OutputExistsError(f"{meta} exists; not overwritten (overwrite=True replaces it)")
    if overwrite:  # before any work: only a regular file is replaced (never a link, a directory)
        refuse_replacing(meta, file_refusal(meta))
    # recovering: counts and times come from the storage files, whatever an old metadata.yaml says
    with Rosbag2Reader(directory, recover=True) as r:
        info = _bag_info(r, directory, version)
    _write_metadata(meta, info, overwrite)
    return {
        "metadata": meta,
        "messages": info.message_count,
        "files": [f.path for f in info.files],
        "topics": len(info.topics),
    }


def _bag_info(r: Rosbag2Reader, directory: str, version: int) -> BagInfo:
    """The metadata.yaml contents of the bag ``r`` read (recovering) from its storage files;
    a :class:`FormatError` for unfinished or damaged storage."""
    files = _file_infos(r, directory)
    s = r.summary
    report = r.recovery_report or {}
    damage = [e for e in report.get("errors", []) if "no metadata.yaml" not in e]
    if damage:
        raise FormatError(f"damaged storage ({damage[0]}): `polybag recover` rebuilds the bag", directory)
    kinds = {st.kind for st in r._storages}  # noqa: SLF001
    topics = [
        TopicInfo(
            name=c.topic,
            type=c.type_name,
            serialization_format=c.message_encoding,
            offered_qos_profiles=str(c.metadata.get("offered_qos_profiles", "")),
            type_description_hash=str(c.metadata.get("topic_type_hash", "")),
            message_count=s.message_counts.get(c.id, 0),
        )
        for c in s.channels.values()
    ]
    zipped = all(f.path.endswith(".zstd") for f in files)
    return BagInfo(
        version=version,
        storage_identifier=kinds.pop() if len(kinds) == 1 else "sqlite3",
        files=files,
        topics=topics,
        starting_time=s.start_time or 0,
        duration=(s.end_time - s.start_time)
        if s.start_time is not None and s.end_time is not None
        else 0,
        message_count=s.message_count,
        compression_mode="file" if zipped else "",
        compression_format="zstd" if zipped else "",
        ros_distro="polybag",
    )


def _file_infos(r: Rosbag2Reader, directory: str) -> list[FileInfo]:
    """Each storage file of ``r`` with its message count and time range (a
    :class:`FormatError` for an unfinished ``.active`` file or none at all)."""
    files_info = r._files  # noqa: SLF001 - the same package
    if any(f.path.endswith(".active") for f in files_info):
        raise FormatError(
            "an unfinished storage file (.active): `polybag recover` rebuilds the bag", directory
        )
    if not r._storages:  # noqa: SLF001
        raise FormatError("no storage files to index", directory)
    files: list[FileInfo] = []
    for f, st in zip(files_info, r._storages):  # noqa: SLF001
        n = sum(st.counts().values())
        lo, hi = st.times()
        files.append(FileInfo(f.path, lo or 0, (hi - lo) if lo is not None and hi is not None else 0, n))
    return files


def _write_metadata(meta: str, info: BagInfo, overwrite: bool) -> None:
    """Write ``info`` to the file ``meta`` atomically: a synced temporary file created
    exclusively in the bag directory under a random name (never through a symbolic link
    planted there), renamed over ``meta``.  Only a regular file ``meta`` is replaced (a
    symbolic link or a directory there is refused), and without ``overwrite`` none at all."""
    if overwrite:
        refuse_replacing(meta, file_refusal(meta))
    write_atomically(meta, dump_metadata(info), overwrite=overwrite)
