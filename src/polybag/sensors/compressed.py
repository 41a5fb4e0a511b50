"""``sensor_msgs/CompressedImage`` as a numpy array, through Pillow or OpenCV.

``jpeg`` and ``png`` (and anything else the library reads) decode to ``(h, w)`` grey,
``(h, w, 3)`` RGB or ``(h, w, 4)`` RGBA (RGB order whichever library decodes; ``bgr=True``
gives OpenCV's order).  ``compressedDepth`` (from ``compressed_depth_image_transport``: the
format reads ``16UC1; compressedDepth png`` or ``32FC1; compressedDepth``) is a 12-byte
header (``int32`` compression format, two ``float32`` depth quantisation parameters) then a
16-bit PNG: ``16UC1`` gives the uint16 depth, ``32FC1`` the float32 depth
``a / (inverse - b)`` (NaN where the stored inverse depth is 0).

Neither library is a dependency: ``pip install 'polybag[sensors]'`` (Pillow).  Without one,
decoding is an :class:`~polybag.errors.UnsupportedError` that says so.
"""

from __future__ import annotations

import io
import struct
from typing import Any

import numpy as np

from polybag.errors import DecodeError, UnsupportedError
from polybag.sensors._access import as_bytes, field, text

COMPRESSED = "sensor_msgs/CompressedImage"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_DEPTH_HEADER = struct.Struct("<iff")
#: pixels a compressed image may declare (Pillow's decompression-bomb bound, doubled)
MAX_PIXELS = 2 * 89_478_485

NEED = "decoding a CompressedImage needs Pillow or OpenCV: pip install 'polybag[sensors]'"


def _pillow() -> Any:
    try:
        from PIL import Image
    except ImportError:
        return None
    return Image


def _cv2() -> Any:
    try:
        import cv2
    except ImportError:
        return None
    return cv2


_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}


def declared_size(buf: bytes) -> tuple[int, int] | None:
    """``(width, height)`` a PNG's IHDR or a JPEG's start-of-frame declares, read before
    decoding so that a huge declared image is refused without allocating it (None: another
    kind of file, or no size found)."""
    if buf.startswith(PNG_MAGIC) and len(buf) >= 24 and buf[12:16] == b"IHDR":
        w, h = struct.unpack_from(">II", buf, 16)
        return int(w), int(h)
    if buf.startswith(b"\xff\xd8"):
        pos = 2
        while pos + 4 <= len(buf):
            if buf[pos] != 0xFF:
                return None
            marker = buf[pos + 1]
            if marker == 0xFF:  # fill byte
                pos += 1
                continue
            if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
                pos += 2
                continue
            (length,) = struct.unpack_from(">H", buf, pos + 2)
            if marker in _SOF:
                if pos + 9 > len(buf):
                    return None
                h, w = struct.unpack_from(">HH", buf, pos + 5)
                return int(w), int(h)
            pos += 2 + length
    return None


def decode_bytes(buf: bytes, bgr: bool = False, unchanged: bool = True) -> np.ndarray:
    """An encoded image (jpeg, png, ...) as an array, through Pillow or else OpenCV.  An
    image that declares more than :data:`MAX_PIXELS` pixels is a :class:`DecodeError`
    before anything is decoded."""
    size = declared_size(buf)
    if size is not None and size[0] * size[1] > MAX_PIXELS:
        raise DecodeError(f"a {size[0]}x{size[1]} image is too large", type_name=COMPRESSED, field="data")
    pil = _pillow()
    if pil is not None:
        try:
            with pil.open(io.BytesIO(buf)) as im:
                w, h = im.size
                if w * h > MAX_PIXELS:
                    raise DecodeError(f"a {w}x{h} image is too large", type_name=COMPRESSED, field="data")
                if im.mode in ("P", "PA", "CMYK", "YCbCr", "LAB", "HSV", "1"):
                    im = im.convert("RGBA" if "A" in im.mode or "transparency" in im.info else "RGB")
                arr = np.asarray(im)
                if im.mode in ("I;16", "I;16B", "I;16L") or (im.mode == "I" and arr.max(initial=0) < 65536):
                    arr = arr.astype(np.uint16)
        except DecodeError:
            raise
        except Exception as e:  # Pillow raises many kinds for bad bytes
            raise DecodeError(f"cannot decode the image: {e}", type_name=COMPRESSED, field="data") from None
        if bgr and arr.ndim == 3 and arr.shape[2] >= 3:
            arr = arr[..., [2, 1, 0, 3][: arr.shape[2]]]
        return np.ascontiguousarray(arr)
    cv2 = _cv2()
    if cv2 is None:
        raise UnsupportedError(NEED)
    flag = cv2.IMREAD_UNCHANGED if unchanged else cv2.IMREAD_ANYCOLOR
    try:
        img = cv2.imdecode(np.frombuffer(buf, np.uint8), flag) if buf else None
    except cv2.error as e:
        raise DecodeError(
            f"cannot decode the image (OpenCV: {e})", type_name=COMPRESSED, field="data"
        ) from None
    if img is None:
        raise DecodeError("cannot decode the image (OpenCV)", type_name=COMPRESSED, field="data")
    if not bgr and img.ndim == 3 and img.shape[2] >= 3:
        img = img[..., [2, 1, 0, 3][: img.shape[2]]]
    return np.ascontiguousarray(img)


def compressed_image_to_numpy(msg: Any, bgr: bool = False) -> np.ndarray:
    """The pixels of a ``sensor_msgs/CompressedImage`` (ROS 1 or ROS 2; an object or a
    dict); see the module notes.  Undecodable data is a :class:`DecodeError`, a missing
    image library an :class:`UnsupportedError` naming the extra to install."""
    fmt = text(msg, "format", COMPRESSED)
    data = as_bytes(field(msg, "data", COMPRESSED), COMPRESSED)
    buf = bytes(data) if isinstance(data, memoryview) else data.tobytes()
    if "compresseddepth" in fmt.lower().replace(" ", ""):
        return _depth(fmt, buf)
    return decode_bytes(buf, bgr=bgr)


def _depth(fmt: str, buf: bytes) -> np.ndarray:
    encoding = fmt.split(";")[0].strip()
    lowered = fmt.lower()
    if "rvl" in lowered:
        raise UnsupportedError(f"{COMPRESSED}: compressedDepth rvl is not supported (format {fmt!r})")
    if buf.startswith(PNG_MAGIC):  # no header (old encoders)
        params = None
        png = buf
    else:
        if len(buf) < _DEPTH_HEADER.size:
            raise DecodeError(
                f"compressedDepth data has {len(buf)} bytes, fewer than its 12-byte header",
                type_name=COMPRESSED,
                field="data",
            )
        _kind, a, b = _DEPTH_HEADER.unpack_from(buf, 0)
        params = (a, b)
        png = buf[_DEPTH_HEADER.size :]
    raw = decode_bytes(png, unchanged=True)
    if raw.ndim != 2:
        raise DecodeError(
            f"compressedDepth image has {raw.shape[2]} channels, not 1", type_name=COMPRESSED, field="data"
        )
    if encoding.upper() == "32FC1":
        if params is None:
            raise DecodeError(
                "32FC1 compressedDepth data has no quantisation header", type_name=COMPRESSED, field="data"
            )
        a, b = params
        inv = raw.astype(np.float32)
        with np.errstate(divide="ignore", invalid="ignore"):
            depth = np.float32(a) / (inv - np.float32(b))
        return np.where(raw == 0, np.float32(np.nan), depth).astype(np.float32)
    return raw.astype(np.uint16, copy=False)
