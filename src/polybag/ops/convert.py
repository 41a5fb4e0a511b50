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
* Bridges chain (:func:`polybag.bridges.ros1_ros2.bridge_chain`): ULog -> ROS 1 -> ROS 2 (a ULog
  into rosbag2 or MCAP ``--profile ros2``), ROS 2 -> ROS 1 -> ULog.  A message is dropped only
  when no chain reaches the output's encoding or a bridge cannot map its type; the reason is
  named per topic in a warning and in ``dropped_reasons``.
* ``profile`` must fit the output: any for MCAP, ``ros1`` for a bag, ``ros2`` for rosbag2,
  none for a ULog (a :class:`~polybag.errors.UsageError` otherwise).
* Attachments and metadata are copied where the target can hold them; otherwise they are
  counted in the result and reported as warnings.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from polybag.bridges.ros1_ros2 import RosBridgeMap, check_profile
from polybag.model import Message
from polybag.ops._common import (
    Input,
    Output,
    input_name,
    opened,
    require_topics,
    summary_count,
    tolerant_options,
)
from polybag.ops._copy import CopyJob, CopyResult, prepare_output


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
    check_profile(fmt, profile)
    result = ConvertResult(input=input_name(src), output=input_name(dst), output_format=fmt)
    with opened(src, **{**tolerant_options(src, strict), **reader_options}) as reader:
        result.input_format = reader.format
        summary = reader.summary
        channels = summary.channels.values()
        if topics is not None:  # a selection matching no topic: EmptySelectionError, no output
            require_topics(topics, channels)
        with CopyJob(dst, fmt, result, [reader], channels, compression, chunk_size, overwrite, profile=profile, storage=storage, strict=strict) as job:
            result.profile = job.profile or ""
            messages = job.with_ulog_extras(reader, reader.messages(topics=topics, order="file"))
            job.add_channels(channels)
            result.messages += job.copy(messages, summary_count(reader), f"convert {result.input}", progress)
            (result.attachments, result.attachments_dropped, result.metadata, result.metadata_dropped) = (
                job.copy_extras(reader)
            )
            result.channels = job.channels
        if isinstance(job.cmap, RosBridgeMap):
            result.dropped_reasons = {t: r for t, r in job.cmap.reasons.items() if t in result.dropped_topics}
    return result


def _str(v: Any) -> str:
    return repr(v) if isinstance(v, float) else str(v)


def ulog_metadata_records(
    info: dict[str, Any], params: dict[str, Any], default_params: dict[int, dict[str, Any]]
) -> dict[str, dict[str, str]]:
    """The MCAP metadata records of a ULog's info and parameters: ``ulog_info``,
    ``ulog_params`` and ``ulog_default_params_<bit>`` (empty ones left out)."""
    records = {
        "ulog_info": {k: _str(v) for k, v in info.items()},
        "ulog_params": {k: _str(v) for k, v in params.items()},
    }
    for bit, d in sorted(default_params.items()):
        records[f"ulog_default_params_{bit}"] = {k: _str(v) for k, v in d.items()}
    return {name: md for name, md in records.items() if md}


def ulog_metadata_to(
    writer: Any,
    fmt: str,
    info: dict[str, Any],
    params: dict[str, Any],
    default_params: dict[int, dict[str, Any]],
    has_changes: bool,
    result: Any,
) -> int:
    """A ULog's definitions for a target that is not a ULog: MCAP gets the metadata records
    of :func:`ulog_metadata_records`; what a target cannot hold (a bag's info and
    parameters, anyone's parameter changes and dropouts) is reported as a warning on
    ``result``.  Returns the estimated size on disk of what was written."""
    size = 0
    if fmt == "mcap":
        for name, md in ulog_metadata_records(info, params, default_params).items():
            writer.add_metadata(name, md)
            result.metadata += 1
            size += 64 + len(name) + sum(len(k) + len(v) + 8 for k, v in md.items())
    else:
        lost = [n for n, d in (("info", info), ("parameters", params)) if d]
        if lost:
            result.warn(f"{fmt} files cannot hold the ULog's {' and '.join(lost)}; not copied")
    if has_changes:
        result.warn(f"{fmt} files have no place for ULog parameter changes and dropouts; not copied")
    return size


def ulog_extras(
    reader: Any, writer: Any, fmt: str, result: ConvertResult, messages: Iterator[Message]
) -> Iterator[Message]:
    """Carry a ULog's extras over (the logged strings are messages on the reader's log channel).

    ULog -> ULog: info, multi-info, parameters, defaults, parameter changes and dropouts are
    copied by the ULog writer.  ULog -> MCAP: info and parameters become metadata records
    ``ulog_info``/``ulog_params``/``ulog_default_params_<bit>``.  What the target cannot hold
    is reported as a warning.
    """
    u = reader.ulog
    if fmt == "ulog":
        writer.copy_extras(u)
    else:
        ulog_metadata_to(
            writer, fmt, u.info, u.params, u.default_params,
            bool(u.changed_params or u.dropouts), result,
        )  # fmt: skip
    yield from messages
