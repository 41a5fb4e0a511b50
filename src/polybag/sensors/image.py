"""``sensor_msgs/Image`` as a numpy array and back.

Every encoding of ROS's ``image_encodings`` is read: ``mono8``/``mono16``, ``rgb8``/``bgr8``,
``rgba8``/``bgra8`` and their 16-bit forms, ``8UC1``..``64FC4`` (``(8U|8S|16U|16S|32S|32F|64F)C<n>``,
the channel count optional), ``bayer_*8``/``bayer_*16`` (returned raw, one channel), and
the packed 4:2:2 encodings ``yuv422``/``uyvy``/``yuyv``/``yuv422_yuy2`` (returned raw,
``(height, width, 2)`` uint8).

The array is a view of the message's ``data`` (no copy) when the layout allows: native
byte order, whatever the ``step`` (a row padding gives a strided view).  Big-endian data of
multi-byte types is converted to native order (a copy).  A view of a mapped file is
read-only; ``copy=True`` gives an array of its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from polybag.errors import DecodeError, UnsupportedError, UsageError
from polybag.sensors._access import as_bytes, field, integer, require_size, text
from polybag.sensors._access import holder as _holder

IMAGE = "sensor_msgs/Image"


@dataclass(frozen=True)
class Encoding:
    """What an encoding's pixels are: ``dtype`` (native), ``channels`` per pixel, and the
    ``kind`` of colour (``mono``, ``rgb``, ``bgr``, ``rgba``, ``bgra``, ``bayer_rggb``...,
    ``uyvy``, ``yuyv``, ``generic``)."""

    name: str
    dtype: np.dtype
    channels: int
    kind: str

    @property
    def pixel_bytes(self) -> int:
        return int(self.dtype.itemsize) * self.channels


def _named() -> dict[str, tuple[str, int, str]]:
    table: dict[str, tuple[str, int, str]] = {
        "mono8": ("u1", 1, "mono"),
        "mono16": ("u2", 1, "mono"),
        "yuv422": ("u1", 2, "uyvy"),
        "uyvy": ("u1", 2, "uyvy"),
        "yuyv": ("u1", 2, "yuyv"),
        "yuv422_yuy2": ("u1", 2, "yuyv"),
    }
    for kind, ch in (("rgb", 3), ("bgr", 3), ("rgba", 4), ("bgra", 4)):
        table[f"{kind}8"] = ("u1", ch, kind)
        table[f"{kind}16"] = ("u2", ch, kind)
    for pattern in ("rggb", "bggr", "gbrg", "grbg"):
        table[f"bayer_{pattern}8"] = ("u1", 1, f"bayer_{pattern}")
        table[f"bayer_{pattern}16"] = ("u2", 1, f"bayer_{pattern}")
    return table


_NAMED = _named()
_GENERIC = re.compile(r"(8U|8S|16U|16S|32S|32F|64F)(?:C([0-9]+))?")
_DEPTHS = {"8U": "u1", "8S": "i1", "16U": "u2", "16S": "i2", "32S": "i4", "32F": "f4", "64F": "f8"}
#: channels a generic ``<depth>C<n>`` encoding may have (OpenCV's limit)
MAX_CHANNELS = 512


def encoding_info(encoding: str) -> Encoding:
    """The :class:`Encoding` of ``encoding`` (case as ROS writes it; an
    :class:`UnsupportedError` for an encoding ROS does not define)."""
    named = _NAMED.get(encoding)
    if named is not None:
        code, ch, kind = named
        return Encoding(encoding, np.dtype(code), ch, kind)
    m = _GENERIC.fullmatch(encoding.upper()) if encoding else None
    if m is not None:
        ch = int(m.group(2) or 1)
        if 1 <= ch <= MAX_CHANNELS:
            return Encoding(encoding, np.dtype(_DEPTHS[m.group(1)]), ch, "mono" if ch == 1 else "generic")
    raise UnsupportedError(f"{IMAGE}: unknown image encoding {encoding!r}")


def encodings() -> list[str]:
    """The named encodings (the generic ``<depth>C<n>`` ones are not listed)."""
    return sorted(_NAMED)


def image_to_numpy(msg: Any, copy: bool = False) -> np.ndarray:
    """The pixels of a ``sensor_msgs/Image`` (ROS 1 or ROS 2; an object, a dict or a
    :func:`polybag.sensors.layout.image_view`) as an array of shape ``(height, width)`` for
    one channel, ``(height, width, channels)`` otherwise, in native byte order.

    A view of ``msg.data`` when possible (see the module notes); ``copy=True`` always
    returns an array that owns its memory.  Bad input (an unknown encoding, a ``step``
    shorter than a row, ``data`` shorter than ``step * height``) is a
    :class:`~polybag.errors.PolybagError`.
    """
    enc = encoding_info(text(msg, "encoding", IMAGE))
    height = integer(msg, "height", IMAGE)
    width = integer(msg, "width", IMAGE)
    step = integer(msg, "step", IMAGE)
    big = bool(integer(msg, "is_bigendian", IMAGE, 0, 255))
    data = as_bytes(field(msg, "data", IMAGE), IMAGE)
    return pixels(data, enc, height, width, step, big, copy)


def pixels(
    data: memoryview | np.ndarray,
    enc: Encoding,
    height: int,
    width: int,
    step: int,
    big: bool,
    copy: bool = False,
) -> np.ndarray:
    """The array of ``height`` rows of ``step`` bytes in ``data`` (see :func:`image_to_numpy`)."""
    row = width * enc.pixel_bytes
    if step < row:
        raise DecodeError(
            f"step {step} is shorter than a row of {width} {enc.name} pixels ({row} bytes)",
            type_name=IMAGE,
            field="step",
        )
    need = step * height
    require_size(data, need, f"step x height = {step} x {height} = {need}", IMAGE)
    dtype = enc.dtype.newbyteorder(">" if big else "<") if enc.dtype.itemsize > 1 else enc.dtype
    swap = not dtype.isnative
    shape: tuple[int, ...] = (height, width) if enc.channels == 1 else (height, width, enc.channels)
    item = dtype.itemsize
    strides: tuple[int, ...] = (step, item) if enc.channels == 1 else (step, enc.channels * item, item)
    if height == 0 or width == 0:
        return np.zeros(shape, enc.dtype)
    arr = np.ndarray(shape, dtype=dtype, buffer=_holder(data), offset=0, strides=strides)
    if swap:
        return arr.astype(enc.dtype)
    if copy:
        return arr.copy()
    return arr


def numpy_to_image(
    array: np.ndarray,
    encoding: str,
    *,
    header: Any = None,
    profile: str = "ros1",
    is_bigendian: bool = False,
) -> dict[str, Any]:
    """A ``sensor_msgs/Image`` as a dict (the shape ``to_dict`` gives, so a codec's
    ``encode`` takes it) holding ``array`` (``(height, width)`` or ``(height, width,
    channels)``) in ``encoding``.

    The array's dtype and channel count must be those of the encoding (a
    :class:`UsageError` otherwise); rows are packed (``step = width * pixel bytes``).
    ``header``: the message's header (default: zero stamp, empty frame id in the ``profile``'s
    shape, ``ros1`` or ``ros2``).  ``is_bigendian`` writes multi-byte pixels big-endian.
    """
    enc = encoding_info(encoding)
    a = np.asarray(array)
    if a.ndim == 2:
        channels = 1
    elif a.ndim == 3:
        channels = a.shape[2]
    else:
        raise UsageError(f"an image array has 2 or 3 dimensions, not {a.ndim}")
    if channels != enc.channels:
        raise UsageError(f"{encoding} has {enc.channels} channel(s); the array has {channels}")
    if a.dtype.newbyteorder("=") != enc.dtype and a.dtype != enc.dtype:
        raise UsageError(f"{encoding} holds {enc.dtype} pixels; the array is {a.dtype}")
    height, width = int(a.shape[0]), int(a.shape[1])
    big = bool(is_bigendian) and enc.dtype.itemsize > 1
    out = a.astype(enc.dtype.newbyteorder(">" if big else "<"), copy=False)
    return {
        "header": default_header(profile) if header is None else header,
        "height": height,
        "width": width,
        "encoding": encoding,
        "is_bigendian": int(big),
        "step": width * enc.pixel_bytes,
        "data": np.ascontiguousarray(out).tobytes(),
    }


def default_header(profile: str = "ros1") -> dict[str, Any]:
    """A zero-stamp ``std_msgs/Header`` dict in the shape of ``profile`` (``ros1``: ``seq``,
    ``stamp.sec/nsec``; ``ros2``: ``stamp.sec/nanosec``)."""
    if profile == "ros1":
        return {"seq": 0, "stamp": {"sec": 0, "nsec": 0}, "frame_id": ""}
    if profile == "ros2":
        return {"stamp": {"sec": 0, "nanosec": 0}, "frame_id": ""}
    raise UsageError(f"profile must be 'ros1' or 'ros2', not {profile!r}")
