"""Reading fields of a message whatever shape it comes in.

A sensor message reaches :mod:`polybag.sensors` as an object from ``Message.decode()``
(attribute access), as nested dicts from ``Message.to_dict()``, or as the light record the
zero-copy path makes (:mod:`polybag.sensors.layout`).  :func:`field` reads a field of any of
them, :func:`as_bytes` turns a ``uint8[]`` value (bytes, memoryview, numpy array, list) into
a flat byte buffer without copying when it already is one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from polybag.errors import DecodeError

_MISSING = object()


def field(msg: Any, name: str, type_name: str, default: Any = _MISSING) -> Any:
    """Field ``name`` of ``msg`` (a dict or an object); a :class:`DecodeError` naming
    ``type_name`` when it has none (and no ``default`` is given)."""
    if isinstance(msg, Mapping):
        value = msg.get(name, _MISSING)
    else:
        value = getattr(msg, name, _MISSING)
    if value is _MISSING:
        if default is not _MISSING:
            return default
        raise DecodeError(f"not a {type_name}: the message has no field {name!r}", type_name=type_name)
    return value


def integer(msg: Any, name: str, type_name: str, low: int = 0, high: int = (1 << 32) - 1) -> int:
    """An integer field within ``[low, high]`` (a :class:`DecodeError` otherwise)."""
    value = field(msg, name, type_name)
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if not isinstance(value, (int, np.integer)):
        raise DecodeError(
            f"{name} is {type(value).__name__}, not an integer", type_name=type_name, field=name
        )
    v = int(value)
    if not low <= v <= high:
        raise DecodeError(f"{name} {v} is out of range [{low}, {high}]", type_name=type_name, field=name)
    return v


def text(msg: Any, name: str, type_name: str) -> str:
    """A string field (bytes are decoded as UTF-8, undecodable bytes replaced)."""
    value = field(msg, name, type_name)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "replace")
    if not isinstance(value, str):
        raise DecodeError(f"{name} is {type(value).__name__}, not a string", type_name=type_name, field=name)
    return value


def as_bytes(value: Any, type_name: str, name: str = "data") -> memoryview | np.ndarray:
    """A ``uint8[]`` field as a flat byte buffer: a memoryview of bytes/bytearray/memoryview
    (no copy), a uint8 view of a numpy array (no copy when contiguous), a new array for a
    list of ints."""
    if isinstance(value, (bytes, bytearray)):
        return memoryview(value)
    if isinstance(value, memoryview):
        if value.ndim == 1 and value.itemsize == 1 and value.format in ("B", "b", "c"):
            return value if value.format == "B" else value.cast("B")
        if value.c_contiguous:
            return value.cast("B")
        return memoryview(value.tobytes())
    if isinstance(value, np.ndarray):
        if value.dtype.itemsize != 1 and value.dtype.kind not in "uifb":
            raise DecodeError(
                f"{name} is an array of {value.dtype}, not bytes", type_name=type_name, field=name
            )
        return np.ascontiguousarray(value).reshape(-1).view(np.uint8)
    if isinstance(value, (list, tuple)):
        try:
            return np.asarray(value, dtype=np.int64).astype(np.uint8)
        except (TypeError, ValueError, OverflowError) as e:
            raise DecodeError(
                f"{name} is not a list of bytes ({e})", type_name=type_name, field=name
            ) from None
    raise DecodeError(f"{name} is {type(value).__name__}, not bytes", type_name=type_name, field=name)


def require_size(data: memoryview | np.ndarray, need: int, fewer_than: str, type_name: str) -> None:
    """A :class:`DecodeError` on field ``data`` when the buffer ``data`` holds fewer than
    ``need`` bytes; its message is ``data has N bytes, fewer than`` and ``fewer_than``."""
    size = len(data) if isinstance(data, memoryview) else int(data.size)
    if size < need:
        raise DecodeError(f"data has {size} bytes, fewer than {fewer_than}", type_name=type_name, field="data")


def short_type(name: str) -> str:
    """``sensor_msgs/Image`` for ``sensor_msgs/msg/Image`` (ROS 2) and ``sensor_msgs/Image``."""
    parts = name.split("/")
    if len(parts) == 3 and parts[1] == "msg":
        return f"{parts[0]}/{parts[2]}"
    return name


def holder(data: memoryview | np.ndarray) -> np.ndarray:
    """A uint8 array over ``data`` that keeps its buffer exported for as long as an array
    made over it lives.

    ``np.ndarray(buffer=memoryview)`` keeps only the memoryview's underlying object, not the
    export: a mapped file could then be unmapped (its reader closed) under the array.
    ``np.frombuffer`` keeps the memoryview itself, so the map stays while any view lives.
    """
    if isinstance(data, np.ndarray):
        return data
    return np.frombuffer(data, np.uint8)
