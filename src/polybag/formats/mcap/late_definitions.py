"""A finished MCAP file rewritten so that schemas written without a definition carry one
learned later (issue 28: a ROS 2 topic recorded before its type description arrived), and
channels whose metadata grew after they were written carry it (the QoS profiles of publishers
that appeared later: an MCAP file's, ``McapWriter.grow_qos``; the rosbag2 MCAP storage's, so
that the file's channels agree with metadata.yaml, which rosbags matches them against); both
in one pass.

An MCAP Schema record cannot change once written (every record with its id must be the
same), so the file is copied record by record in file order (messages, attachments and
metadata as they were; chunks, indexes and the summary made again with the writer's own
options) with those schemas' data filled in, into a new file created exclusively next to
it, then moved over it.  The copy is as large as the file (the bound); when it cannot be
made (no space, an I/O error) the file stays as it was (valid, the early messages without
a definition) and the error is raised for the caller to report.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Mapping
from typing import Any, BinaryIO

from polybag.formats.mcap import records as R
from polybag.io.output_files import unlink_quietly

_COUNTER = itertools.count()


def rewrite_with_definitions(
    path: str,
    late: Mapping[int, tuple[str, bytes]],
    make_writer: Callable[[BinaryIO, str, str], Any],
    channel_metadata: Mapping[int, Mapping[str, str]] | None = None,
    metadata_records: Mapping[str, Mapping[str, str]] | None = None,
) -> int:
    """Rewrite the finished MCAP file ``path`` with schema id -> ``(encoding, data)`` of
    ``late`` filled in (module notes); ``make_writer(stream, profile, library)`` is a
    :class:`~polybag.formats.mcap.writer.McapWriter` with the options it was written with;
    ``channel_metadata``: channel id -> the metadata its Channel record takes
    (what grew after it was written: the rosbag2 storage's QoS profiles of later
    publishers); ``metadata_records``: name -> the content Metadata records of that name
    take (the rosbag2 storage's copy of metadata.yaml, with those profiles).  Returns the
    messages copied.  Raises ``OSError`` (the file untouched)."""
    from polybag.formats.mcap.reader import McapReader
    from polybag.io.source import StreamSource

    folder = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(folder, f".{os.path.basename(path)}.definitions-{os.getpid()}-{next(_COUNTER)}")
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    mode = os.stat(path).st_mode & 0o777
    fd = os.open(tmp, flags, 0o600)
    count = 0
    try:
        with open(path, "rb") as src, os.fdopen(fd, "w+b") as out:
            reader = McapReader(StreamSource(src, path), path)
            w: Any = None
            schemas: set[int] = set()
            channels: set[int] = set()
            try:
                for rec in reader.records(expand_chunks=True):
                    if isinstance(rec, R.Header):
                        w = make_writer(out, rec.profile, rec.library)
                    elif isinstance(rec, R.SchemaRecord):
                        if rec.id not in schemas:
                            schemas.add(rec.id)
                            enc, data = late.get(rec.id, (rec.encoding, bytes(rec.data)))
                            w.add_schema(rec.name, enc, data, id=rec.id)
                    elif isinstance(rec, R.ChannelRecord):
                        if rec.id not in channels:
                            channels.add(rec.id)
                            md = (channel_metadata or {}).get(rec.id, rec.metadata)
                            w.add_channel(rec.topic, rec.message_encoding, rec.schema_id or None, md, id=rec.id)
                    elif isinstance(rec, R.MessageRecord):
                        w.write(rec.channel_id, rec.data, rec.log_time, rec.publish_time, rec.sequence)
                        count += 1
                    elif isinstance(rec, R.AttachmentRecord):
                        w.add_attachment(rec.name, rec.media_type, bytes(rec.data), rec.log_time, rec.create_time)
                    elif isinstance(rec, R.MetadataRecord):
                        w.add_metadata(rec.name, (metadata_records or {}).get(rec.name, rec.metadata))
                if w is not None:
                    w.close()
            finally:
                reader.close()
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        unlink_quietly(tmp)
        raise
    try:
        dfd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass
    return count


__all__ = ["rewrite_with_definitions"]
