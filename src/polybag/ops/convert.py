"""``convert``: any readable log into any writable format, streamed.

Messages are copied in file order, one chunk at a time (the reader holds a chunk, the
writer buffers one, and queues up to 8 closed ones, 64 MiB, while its worker threads
pack them), so memory stays bounded by a few chunks whatever the file size.

* bag -> MCAP: the ``ros1`` profile; schemas ``ros1msg`` with the full definition text,
  channels ``ros1`` with the bag connection's ``md5sum``/``type``/``callerid``/``latching``
  kept in the channel metadata.
* MCAP (ros1) -> bag: the same connections (topic, type, md5sum, definition, callerid,
  latching) and the same payload bytes.
* ULog -> MCAP or bag: ROS 1 channels, see :mod:`polybag.bridges.ulog_ros1` for the mapping.
* ULog -> ULog: the ULog writer copies everything the reader exposes.
* MCAP/bag (ros1) -> ULog: ``ulog_msgs/*`` channels go back to their ULog formats (and the
  ``ulog_info``/``ulog_params`` metadata to info and parameters); other fixed-layout ROS 1
  types become formats with a leading timestamp; strings and variable-length arrays cannot
  be held (dropped with a warning), see :mod:`polybag.bridges.ros1_ulog`.
* ROS 1 <-> ROS 2: with the MCAP profile ``ros2`` (``profile="ros2"``, or an output format
  that holds only CDR: rosbag2) ROS 1 messages become CDR messages of ROS 2 types; into a bag
  (or the MCAP profile ``ros1``) CDR messages become ROS 1 messages, see
  :mod:`polybag.bridges.ros1_ros2`.
* Bridges chain (:func:`polybag.bridges.registry.bridge_chain`): ULog -> ROS 1 -> ROS 2 (a ULog
  into rosbag2 or MCAP ``--profile ros2``), ROS 2 -> ROS 1 -> ULog.  A message is dropped only
  when no chain reaches the output's encoding or a bridge cannot map its type; the reason is
  named per topic in a warning and in ``dropped_reasons``.
* ``profile`` must fit the output: any for MCAP, ``ros1`` for a bag, ``ros2`` for rosbag2,
  none for a ULog (a :class:`~polybag.errors.UsageError` otherwise).
* Attachments and metadata are copied where the target can hold them; otherwise they are
  counted in the result and reported as warnings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from polybag.bridges import ChannelMap, check_profile
from polybag.formats import registry
from polybag.ops.copying import CopyJob, CopyResult, prepare_output
from polybag.ops.inputs import input_name, open_input, require_topics, summary_count
from polybag.ops.options import Input, Output
from polybag.selection import selected_channels


@dataclass
class ConvertResult(CopyResult):
    input: str = ""
    input_format: str = ""
    output_format: str = ""
    profile: str = ""
    channels: int = 0
    attachments_dropped: int = 0
    metadata_dropped: int = 0
    #: why each dropped topic's messages were not written (topic -> reason)
    dropped_reasons: dict[str, str] = field(default_factory=dict)


def convert(
    src: Input,
    dst: Output,
    *,
    format: str | None = None,  # noqa: A002
    compression: str | None = None,
    chunk_size: int | None = None,
    profile: str | None = None,
    topics: Any = None,
    progress: bool | None = False,
    overwrite: bool = False,
    storage: str | None = None,
    strict: bool = False,
    **reader_options: Any,
) -> ConvertResult:
    """Copy every message (and attachment/metadata the target can hold) of ``src`` to ``dst``.

    ``format`` defaults to ``dst``'s extension; ``compression``/``chunk_size`` go to the
    writer (its defaults otherwise); ``profile`` overrides the MCAP profile, which is
    ``ros1`` when every channel is ROS 1 (bags, ULog).  ``profile="ros2"`` turns ROS 1
    messages into ROS 2 (CDR) ones; CDR messages into a bag (or ``profile="ros1"``) become
    ROS 1 messages (:mod:`polybag.bridges.ros1_ros2`).  ``storage`` is a rosbag2 output's storage (``sqlite3``, the
    default, or ``mcap``); an output path without an extension is a rosbag2 directory.

    An existing ``dst`` is an :class:`~polybag.errors.OutputExistsError` unless
    ``overwrite``; ``dst`` is never the input.  On any failure (a full disk, an interrupt) no
    output and no ``dst.active`` is left behind.

    A damaged input keeps what reads before the damage (a ULog: every intact message), named
    in ``result.damage`` and a warning; ``strict=True`` refuses it (the reader's error).
    """
    fmt = prepare_output(dst, format, [src], overwrite)
    check_profile(fmt, registry.get(fmt).holds, profile)
    result = ConvertResult(input=input_name(src), output=input_name(dst), output_format=fmt)
    with open_input(src, tolerant=not strict, **reader_options) as reader:
        result.input_format = reader.format
        summary = reader.summary
        channels = list(summary.channels.values())
        if topics is not None:  # a selection matching no topic: EmptySelectionError, no output
            require_topics(topics, channels)
            # only the selected topics' channels: the others would be written empty
            channels = selected_channels(topics, channels)
        with CopyJob(dst, fmt, result, [reader], channels, compression, chunk_size, overwrite, profile=profile, storage=storage, strict=strict) as job:
            result.profile = job.profile or ""
            messages = job.with_ulog_extras(reader, reader.messages(topics=topics, order="file"))
            job.add_channels(channels)
            result.messages += job.copy(messages, summary_count(reader), f"convert {result.input}", progress)
            (result.attachments, result.attachments_dropped, result.metadata, result.metadata_dropped) = (
                job.copy_extras(reader)
            )
            result.channels = job.channels
        if isinstance(job.cmap, ChannelMap):
            result.dropped_reasons = {t: r for t, r in job.cmap.reasons.items() if t in result.dropped_topics}
    return result
