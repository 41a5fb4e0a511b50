"""The zero-copy path for ``sensor_msgs/Image``: its fields read from the payload itself.

Decoding an image through its codec copies ``data`` out of the payload (``bytes``).  An
image's layout is fixed, so :func:`image_view` reads the few fields in front of ``data``
(ROS 1 serialization, or plain CDR of either byte order) and gives ``data`` as a
``memoryview`` of the payload: no copy, and the pixels of a mapped file are never read
until used.

A channel is read this way only after its first message gave the same fields as the codec
(:class:`ImageReader`): a type named ``sensor_msgs/Image`` with another definition falls
back to the codec for the whole channel.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from polybag.codecs import codec_for
from polybag.model import Channel

_U32 = {False: struct.Struct("<I"), True: struct.Struct(">I")}


@dataclass(frozen=True)
class ImageView:
    """The fields of a ``sensor_msgs/Image`` that give its pixels; ``data`` is a view of the
    payload."""

    height: int
    width: int
    encoding: str
    is_bigendian: int
    step: int
    data: memoryview


class _Short(Exception):
    """The payload ends inside a field (the codec then reports it properly)."""


def _u32(buf: memoryview, pos: int, big: bool) -> int:
    if pos + 4 > len(buf):
        raise _Short
    return int(_U32[big].unpack_from(buf, pos)[0])


def _ros1(buf: memoryview) -> ImageView:
    pos = 12  # seq, stamp.sec, stamp.nsec
    n = _u32(buf, pos, False)
    pos += 4 + n
    height = _u32(buf, pos, False)
    width = _u32(buf, pos + 4, False)
    n = _u32(buf, pos + 8, False)
    pos += 12
    if pos + n + 9 > len(buf):
        raise _Short
    encoding = bytes(buf[pos : pos + n]).decode("utf-8", "replace")
    pos += n
    big = buf[pos]
    step = _u32(buf, pos + 1, False)
    n = _u32(buf, pos + 5, False)
    pos += 9
    if pos + n != len(buf):
        raise _Short
    return ImageView(height, width, encoding, big, step, buf[pos : pos + n])


def _cdr(buf: memoryview) -> ImageView:
    if len(buf) < 4 or buf[0] != 0 or buf[1] not in (0, 1):
        raise _Short  # not plain CDR (XCDR2, parameter lists): the codec reads those
    be = buf[1] == 0
    body = buf[4:]

    def align(p: int) -> int:
        return (p + 3) & ~3

    pos = 8  # stamp.sec, stamp.nanosec
    n = _u32(body, pos, be)
    pos = align(pos + 4 + n)
    height = _u32(body, pos, be)
    width = _u32(body, pos + 4, be)
    n = _u32(body, pos + 8, be)
    pos += 12
    if pos + n + 1 > len(body):
        raise _Short
    encoding = bytes(body[pos : pos + n]).rstrip(b"\0").decode("utf-8", "replace")
    pos += n
    big = body[pos]
    pos = align(pos + 1)
    step = _u32(body, pos, be)
    n = _u32(body, pos + 4, be)
    pos += 8
    if pos + n > len(body) or len(body) - (pos + n) > 3:
        raise _Short
    return ImageView(height, width, encoding, big, step, body[pos : pos + n])


_PARSERS = {"ros1": _ros1, "cdr": _cdr}


def _same(view: ImageView, ref: Any) -> bool:
    try:
        return (
            view.height == ref["height"]
            and view.width == ref["width"]
            and view.encoding == ref["encoding"]
            and int(view.is_bigendian) == int(ref["is_bigendian"])
            and view.step == ref["step"]
            and bytes(view.data) == bytes(ref["data"])
        )
    except (KeyError, TypeError):
        return False


class ImageReader:
    """Reads ``sensor_msgs/Image`` payloads of any channel: through :func:`image_view` for
    channels whose first message it read the same as the codec, else through the codec."""

    def __init__(self) -> None:
        self._fast: dict[Channel, bool] = {}

    def read(self, channel: Channel, data: bytes | memoryview) -> Any:
        """The message: an :class:`ImageView` or the codec's dict."""
        parse = _PARSERS.get(channel.message_encoding)
        fast = self._fast.get(channel)
        if fast is None:
            ref = codec_for(channel).to_dict(data, topic=channel.topic)
            ok = False
            if parse is not None:
                try:
                    ok = _same(parse(memoryview(data)), ref)
                except (_Short, IndexError, UnicodeError, struct.error):
                    ok = False
            self._fast[channel] = ok
            return ref
        if fast and parse is not None:
            try:
                return parse(memoryview(data))
            except (_Short, IndexError, struct.error):
                pass  # a damaged payload: the codec says what is wrong
        return codec_for(channel).to_dict(data, topic=channel.topic)


def image_view(message_encoding: str, data: bytes | memoryview) -> ImageView | None:
    """The :class:`ImageView` of a ROS 1 (``ros1``) or plain CDR (``cdr``) image payload, or
    None when it cannot be read this way (the payload's type must be known to be
    ``sensor_msgs/Image``: :class:`ImageReader` checks that per channel)."""
    parse = _PARSERS.get(message_encoding)
    if parse is None:
        return None
    try:
        return parse(memoryview(data))
    except (_Short, IndexError, UnicodeError, struct.error):
        return None
