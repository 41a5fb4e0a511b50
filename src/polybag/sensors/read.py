"""Arrays from a log: every image or point cloud of a topic, with its log time.

:func:`images` and :func:`pointclouds` take an open reader (``reader.images(topic)`` and
``reader.pointclouds(topic)`` call them) and yield ``(log_time, ndarray)``.  Raw images go
through the zero-copy path (:mod:`polybag.sensors.layout`), compressed ones through
Pillow/OpenCV, clouds through the channel's codec; ROS 1 and ROS 2 channels alike.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from polybag.codecs import codec_for
from polybag.errors import UsageError
from polybag.model import Channel, Message
from polybag.selection import TopicSelector, selected_channels
from polybag.sensors._access import as_bytes, field, integer, short_type, text
from polybag.sensors.compressed import compressed_image_to_numpy
from polybag.sensors.image import encoding_info, pixels
from polybag.sensors.layout import CloudReader, ImageReader
from polybag.sensors.pointcloud import pointcloud2_to_numpy

IMAGE_TYPES = {"sensor_msgs/Image": "raw", "sensor_msgs/CompressedImage": "compressed"}
CLOUD_TYPES = {"sensor_msgs/PointCloud2": "cloud"}


def channel_type(ch: Channel) -> str:
    """The message type of a channel (``sensor_msgs/Image`` for ROS 1 and ROS 2 names)."""
    name = ch.schema.name if ch.schema is not None and ch.schema.name else str(ch.metadata.get("type", ""))
    return short_type(name)


def sensor_channels(reader: Any, topics: TopicSelector, kinds: dict[str, str], what: str, strict: bool = True) -> list[Channel]:
    """The channels of ``topics`` whose type is one of ``kinds``.

    A regular expression takes the matching topics of those types and leaves the others
    (``/camera/.*`` takes the images, not ``/camera/camera_info``); topics named in a list
    must all be of those types (``strict``).  None of those types selected is a
    :class:`UsageError` naming what was matched."""
    chosen = selected_channels(topics, reader.summary.channels.values())
    good = [c for c in chosen if channel_type(c) in kinds]
    bad = sorted(
        {f"{c.topic} ({channel_type(c) or 'no type'})" for c in chosen if channel_type(c) not in kinds}
    )
    if strict and bad and topics is not None and not isinstance(topics, str):
        raise UsageError(f"not {what} topics: {', '.join(bad)}")
    if not good:
        if topics is None:
            raise UsageError(f"the log has no {what} topic")
        raise UsageError(
            f"no {what} topic matches {topics!r}" + (f" (it matches {', '.join(bad)})" if bad else "")
        )
    return good


@dataclass
class Frame:
    """One image of a log: its message, its pixels and their encoding (``rgb8``, ``mono8``,
    ``16UC1``, ``32FC1``... for a compressed image, the encoding its pixels have)."""

    message: Message
    array: np.ndarray
    encoding: str


def _compressed_encoding(a: np.ndarray) -> str:
    if a.dtype == np.uint16:
        return "16UC1" if a.ndim == 2 else ("rgb16" if a.shape[2] == 3 else "rgba16")
    if a.dtype == np.float32:
        return "32FC1"
    if a.ndim == 2:
        return "mono8"
    return {3: "rgb8", 4: "rgba8"}.get(a.shape[2], f"8UC{a.shape[2]}")


class FrameReader:
    """Reads the pixels of image messages (raw and compressed) of any channel into
    :class:`Frame` s; raw images through the zero-copy path (:class:`ImageReader`)."""

    def __init__(self, copy: bool = False) -> None:
        self.copy = copy
        self._raw = ImageReader()

    def read(self, m: Message) -> Frame:
        """The :class:`Frame` of image message ``m`` (a :class:`PolybagError` when its
        pixels cannot be read)."""
        if IMAGE_TYPES.get(channel_type(m.channel)) == "compressed":
            arr = compressed_image_to_numpy(codec_for(m.channel).decode(m.data, topic=m.channel.topic))
            return Frame(m, arr, _compressed_encoding(arr))
        msg = self._raw.read(m.channel, m.data)
        t = "sensor_msgs/Image"
        enc_name = text(msg, "encoding", t)
        arr = pixels(
            as_bytes(field(msg, "data", t), t),
            encoding_info(enc_name),
            integer(msg, "height", t),
            integer(msg, "width", t),
            integer(msg, "step", t),
            bool(integer(msg, "is_bigendian", t, 0, 255)),
            self.copy,
        )
        return Frame(m, arr, enc_name)


def every_nth(messages: Iterator[Message], ids: set[int], every: int) -> Iterator[Message]:
    """The messages of channels ``ids``, every ``every``-th of each topic."""
    if every < 1:
        raise UsageError(f"every must be at least 1, not {every}")
    seen: dict[str, int] = {}
    for m in messages:
        if m.channel.id not in ids:
            continue
        n = seen.get(m.channel.topic, 0)
        seen[m.channel.topic] = n + 1
        if n % every == 0:
            yield m


def sensor_messages(
    reader: Any, topics: TopicSelector, kinds: dict[str, str], what: str, start: int | None, end: int | None, every: int, strict: bool
) -> Iterator[Message]:
    """Every ``every``-th message (counted per topic) of the channels of ``topics`` whose type
    is one of ``kinds`` (see :func:`sensor_channels`), in log-time order."""
    chans = sensor_channels(reader, topics, kinds, what, strict)
    msgs = reader.messages(topics=sorted({c.topic for c in chans}), start=start, end=end)
    return every_nth(msgs, {c.id for c in chans}, every)


def frames(
    reader: Any, topics: TopicSelector, start: int | None = None, end: int | None = None, copy: bool = False, every: int = 1, strict: bool = True
) -> Iterator[Frame]:
    """Every ``every``-th image of the image topics in ``topics`` (raw and compressed), in
    log-time order, as :class:`Frame` s (counted per topic)."""
    msgs = sensor_messages(reader, topics, IMAGE_TYPES, "image", start, end, every, strict)
    fr = FrameReader(copy)
    for m in msgs:
        yield fr.read(m)


def images(
    reader: Any, topic: TopicSelector, start: int | None = None, end: int | None = None, copy: bool = False
) -> Iterator[tuple[int, np.ndarray]]:
    """``(log_time, pixels)`` of every image on ``topic`` (``sensor_msgs/Image`` or
    ``CompressedImage``), in log-time order.  Raw images are views of the log's bytes
    (read-only for a mapped file) unless ``copy``."""
    for f in frames(reader, topic, start, end, copy):
        yield f.message.log_time, f.array


def pointclouds(
    reader: Any, topic: TopicSelector, start: int | None = None, end: int | None = None, skip_nans: bool = False, split_rgb: bool = False
) -> Iterator[tuple[int, np.ndarray]]:
    """``(log_time, points)`` of every ``sensor_msgs/PointCloud2`` on ``topic``, in log-time
    order (see :func:`polybag.sensors.pointcloud2_to_numpy` for the options)."""
    for m, arr in clouds(reader, topic, start, end, skip_nans=skip_nans, split_rgb=split_rgb):
        yield m.log_time, arr


def clouds(
    reader: Any, topics: TopicSelector, start: int | None = None, end: int | None = None, every: int = 1, skip_nans: bool = False, split_rgb: bool = False, strict: bool = True
) -> Iterator[tuple[Message, np.ndarray]]:
    """``(message, points)`` of every ``every``-th cloud of the cloud topics in ``topics``."""
    msgs = sensor_messages(reader, topics, CLOUD_TYPES, "PointCloud2", start, end, every, strict)
    cr = CloudReader()
    for m in msgs:
        yield m, read_cloud(m, skip_nans=skip_nans, split_rgb=split_rgb, layout=cr)


def read_cloud(m: Message, skip_nans: bool = False, split_rgb: bool = False, layout: CloudReader | None = None) -> np.ndarray:
    """The points of PointCloud2 message ``m``: in place through ``layout`` (a
    :class:`CloudReader` kept across the messages of a read), else through the codec."""
    msg = (
        layout.read(m.channel, m.data)
        if layout is not None
        else codec_for(m.channel).to_dict(m.data, topic=m.channel.topic)
    )
    return pointcloud2_to_numpy(msg, skip_nans=skip_nans, split_rgb=split_rgb)
