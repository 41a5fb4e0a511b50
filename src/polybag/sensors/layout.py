"""The zero-copy path for ``sensor_msgs/Image`` and ``PointCloud2``: fields read in place.

Decoding an image or a cloud through its codec copies ``data`` out of the payload
(``bytes``).  Their layouts are fixed, so :func:`image_view` and :func:`cloud_view` read
the fields in front of ``data`` (ROS 1 serialization, or plain CDR of either byte order)
and give ``data`` as a ``memoryview`` of the payload: no copy, and the pixels or points of
a mapped file are not read until used.

A channel is read this way only after its first message gave the same fields as the codec
(:class:`LayoutReader`): a type named ``sensor_msgs/Image`` with another definition falls
back to the codec for the whole channel, and so does a payload the reader cannot walk (the
codec then says what is wrong with it).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from polybag.codecs import codec_for
from polybag.model import Channel

_U32 = {False: struct.Struct("<I"), True: struct.Struct(">I")}
_PROBLEMS = (IndexError, UnicodeError, struct.error, ValueError)


class _Short(Exception):
    """The payload does not hold the layout (the codec then reports it properly)."""


class _Cursor:
    """Reads ROS 1 (little-endian, packed) or CDR (aligned, either byte order) fields."""

    def __init__(self, payload: bytes | memoryview, encoding: str) -> None:
        buf = memoryview(payload)
        if buf.format != "B" or buf.ndim != 1:
            buf = buf.cast("B")
        self.cdr = encoding == "cdr"
        self.big = False
        if self.cdr:
            if len(buf) < 4 or buf[0] != 0 or buf[1] not in (0, 1):
                raise _Short  # not plain CDR (XCDR2, parameter lists): the codec reads those
            self.big = buf[1] == 0
            buf = buf[4:]
        self.buf = buf
        self.pos = 0

    def u32(self) -> int:
        if self.cdr:
            self.pos = (self.pos + 3) & ~3
        if self.pos + 4 > len(self.buf):
            raise _Short
        v = int(_U32[self.big].unpack_from(self.buf, self.pos)[0])
        self.pos += 4
        return v

    def u8(self) -> int:
        if self.pos >= len(self.buf):
            raise _Short
        v = int(self.buf[self.pos])
        self.pos += 1
        return v

    def blob(self) -> memoryview:
        n = self.u32()
        if self.pos + n > len(self.buf):
            raise _Short
        v = self.buf[self.pos : self.pos + n]
        self.pos += n
        return v

    def string(self) -> str:
        raw = bytes(self.blob())
        if self.cdr:
            raw = raw.rstrip(b"\0")
        return raw.decode("utf-8")

    def header(self) -> None:
        if not self.cdr:
            self.u32()  # seq
        self.u32()  # stamp seconds
        self.u32()  # stamp nanoseconds
        self.string()  # frame_id

    def end(self) -> None:
        left = len(self.buf) - self.pos
        if left < 0 or left > (3 if self.cdr else 0):
            raise _Short


def _image(c: _Cursor) -> dict[str, Any]:
    c.header()
    out: dict[str, Any] = {"height": c.u32(), "width": c.u32(), "encoding": c.string()}
    out["is_bigendian"] = c.u8()
    out["step"] = c.u32()
    out["data"] = c.blob()
    c.end()
    return out


def _cloud(c: _Cursor) -> dict[str, Any]:
    c.header()
    out: dict[str, Any] = {"height": c.u32(), "width": c.u32()}
    n = c.u32()
    if n * 13 > len(c.buf) - c.pos:  # each field takes 13 bytes at least
        raise _Short
    fields = []
    for _ in range(n):
        name = c.string()
        offset = c.u32()
        datatype = c.u8()
        fields.append({"name": name, "offset": offset, "datatype": datatype, "count": c.u32()})
    out["fields"] = fields
    out["is_bigendian"] = bool(c.u8())
    out["point_step"] = c.u32()
    out["row_step"] = c.u32()
    out["data"] = c.blob()
    out["is_dense"] = bool(c.u8())
    c.end()
    return out


def _view(
    parse: Callable[[_Cursor], dict[str, Any]], encoding: str, data: bytes | memoryview
) -> dict[str, Any] | None:
    if encoding not in ("ros1", "cdr"):
        return None
    try:
        return parse(_Cursor(data, encoding))
    except (_Short, *_PROBLEMS):
        return None


def image_view(message_encoding: str, data: bytes | memoryview) -> dict[str, Any] | None:
    """The fields of a ROS 1 (``ros1``) or plain CDR (``cdr``) ``sensor_msgs/Image`` payload
    that give its pixels (``data`` a view of the payload), or None when it cannot be read
    this way.  The payload's type must be known to be the standard Image: :class:`LayoutReader`
    checks that per channel."""
    return _view(_image, message_encoding, data)


def cloud_view(message_encoding: str, data: bytes | memoryview) -> dict[str, Any] | None:
    """The same for a ``sensor_msgs/PointCloud2`` payload (header left out)."""
    return _view(_cloud, message_encoding, data)


def _same(view: dict[str, Any], ref: Any) -> bool:
    try:
        for k, v in view.items():
            r = ref[k]
            if k == "data":
                if bytes(v) != bytes(r):
                    return False
            elif k == "fields":
                keys = ("name", "offset", "datatype", "count")
                if [[f[x] for x in keys] for f in v] != [[f[x] for x in keys] for f in r]:
                    return False
            elif v != r and not (isinstance(v, (bool, int)) and int(v) == int(r)):
                return False
    except (KeyError, TypeError, ValueError):
        return False
    return True


class LayoutReader:
    """Reads payloads of one message type (``image`` or ``cloud``) on any channel: in place
    for channels whose first message it read the same as the codec, else through the codec
    (``to_dict``)."""

    def __init__(self, kind: str) -> None:
        self._parse = {"image": _image, "cloud": _cloud}[kind]
        self._fast: dict[Channel, bool] = {}

    def read(self, channel: Channel, data: bytes | memoryview) -> Any:
        """The message as a dict: the fields read in place, or the codec's ``to_dict``."""
        fast = self._fast.get(channel)
        if fast is None:
            ref = codec_for(channel).to_dict(data, topic=channel.topic)
            view = _view(self._parse, channel.message_encoding, data)
            self._fast[channel] = view is not None and _same(view, ref)
            return ref
        if fast:
            view = _view(self._parse, channel.message_encoding, data)
            if view is not None:
                return view
        return codec_for(channel).to_dict(data, topic=channel.topic)


class ImageReader(LayoutReader):
    """:class:`LayoutReader` of ``sensor_msgs/Image``."""

    def __init__(self) -> None:
        super().__init__("image")


class CloudReader(LayoutReader):
    """:class:`LayoutReader` of ``sensor_msgs/PointCloud2``."""

    def __init__(self) -> None:
        super().__init__("cloud")
