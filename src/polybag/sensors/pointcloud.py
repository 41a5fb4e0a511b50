"""``sensor_msgs/PointCloud2`` as a numpy structured array and back.

The dtype is built from the message's own field table: each ``PointField``'s ``name``,
``offset``, ``datatype`` (INT8..FLOAT64) and ``count`` (a count above 1 is a sub-array),
with ``point_step`` as the item size (bytes between and after fields are skipped) and
``is_bigendian`` for the byte order.  Rows of an organized cloud (``height > 1``) are
``row_step`` bytes apart.  The array is a view of ``data`` when the byte order is native;
big-endian clouds are converted to native order.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from polybag.errors import DecodeError, UsageError
from polybag.sensors._access import as_bytes, field, integer, require_size, text
from polybag.sensors._access import holder as _holder
from polybag.sensors.image import default_header

POINTCLOUD2 = "sensor_msgs/PointCloud2"

#: PointField datatypes (sensor_msgs/PointField constants) and their numpy types
DATATYPES: dict[int, str] = {1: "i1", 2: "u1", 3: "i2", 4: "u2", 5: "i4", 6: "u4", 7: "f4", 8: "f8"}
_CODES = {np.dtype(v): k for k, v in DATATYPES.items()}
#: fields a cloud may declare (a bound on the work a hostile field table makes)
MAX_FIELDS = 4096


def cloud_dtype(fields: Any, point_step: int, big: bool) -> np.dtype:
    """The structured dtype of one point: a :class:`DecodeError` for an unknown datatype, a
    field that ends past ``point_step``, or a name given twice."""
    names: list[str] = []
    formats: list[Any] = []
    offsets: list[int] = []
    order: Literal["<", ">"] = ">" if big else "<"
    try:
        count_fields = len(fields)
    except TypeError:
        raise DecodeError("fields is not a list", type_name=POINTCLOUD2, field="fields") from None
    if count_fields > MAX_FIELDS:
        raise DecodeError(
            f"{count_fields} fields (at most {MAX_FIELDS})", type_name=POINTCLOUD2, field="fields"
        )
    for i, f in enumerate(fields):
        name = text(f, "name", "sensor_msgs/PointField") or f"field_{i}"
        offset = integer(f, "offset", "sensor_msgs/PointField")
        datatype = integer(f, "datatype", "sensor_msgs/PointField", 0, 255)
        count = integer(f, "count", "sensor_msgs/PointField")
        code = DATATYPES.get(datatype)
        if code is None:
            raise DecodeError(
                f"field {name!r} has unknown datatype {datatype}", type_name=POINTCLOUD2, field="fields"
            )
        base = np.dtype(code).newbyteorder(order) if np.dtype(code).itemsize > 1 else np.dtype(code)
        count = max(count, 1)  # some drivers write count 0 for a scalar
        size = base.itemsize * count
        if offset + size > point_step:
            raise DecodeError(
                f"field {name!r} (offset {offset}, {size} bytes) ends past point_step {point_step}",
                type_name=POINTCLOUD2,
                field="fields",
            )
        if name in names:
            raise DecodeError(f"field {name!r} is declared twice", type_name=POINTCLOUD2, field="fields")
        names.append(name)
        formats.append(base if count == 1 else (base, (count,)))
        offsets.append(offset)
    try:
        return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": point_step})
    except (TypeError, ValueError) as e:
        raise DecodeError(
            f"fields make no point layout: {e}", type_name=POINTCLOUD2, field="fields"
        ) from None


def pointcloud2_to_numpy(
    msg: Any, *, skip_nans: bool = False, split_rgb: bool = False, squeeze: bool = True, copy: bool = False
) -> np.ndarray:
    """The points of a ``sensor_msgs/PointCloud2`` (ROS 1 or ROS 2; an object or a dict) as a
    structured array with one field per ``PointField``.

    Shape ``(height, width)`` for an organized cloud, ``(width,)`` when ``height`` is 1 (or
    always ``(height, width)`` with ``squeeze=False``).  ``skip_nans`` drops points whose
    ``x``, ``y`` or ``z`` is NaN (the result is then 1-D).  ``split_rgb`` replaces a packed
    ``rgb``/``rgba`` float32 field by ``r``, ``g``, ``b`` (and ``a``) uint8 fields.  A view of
    ``data`` unless the cloud is big-endian or a conversion asks for new memory
    (``copy=True`` always copies).
    """
    height = integer(msg, "height", POINTCLOUD2)
    width = integer(msg, "width", POINTCLOUD2)
    point_step = integer(msg, "point_step", POINTCLOUD2)
    row_step = integer(msg, "row_step", POINTCLOUD2)
    big = bool(integer(msg, "is_bigendian", POINTCLOUD2, 0, 255))
    dtype = cloud_dtype(field(msg, "fields", POINTCLOUD2), point_step, big)
    data = as_bytes(field(msg, "data", POINTCLOUD2), POINTCLOUD2)
    arr = points(data, dtype, height, width, point_step, row_step)
    if not dtype.isnative:
        arr = arr.astype(dtype.newbyteorder("="))
    elif copy:
        arr = arr.copy()
    if skip_nans:
        arr = drop_nans(arr)
    elif squeeze and height == 1:
        arr = arr.reshape(-1)
    if split_rgb:
        arr = split_packed_rgb(arr)
    return arr


def points(
    data: memoryview | np.ndarray, dtype: np.dtype, height: int, width: int, point_step: int, row_step: int
) -> np.ndarray:
    """``height x width`` points of ``dtype`` in ``data`` (rows ``row_step`` apart)."""
    if point_step == 0 and width and height:
        raise DecodeError("point_step is 0", type_name=POINTCLOUD2, field="point_step")
    row = width * point_step
    if height > 1 and row_step < row:
        raise DecodeError(
            f"row_step {row_step} is shorter than a row of {width} points of {point_step} bytes",
            type_name=POINTCLOUD2,
            field="row_step",
        )
    stride = row_step if height > 1 else max(row_step, row)
    need = (height - 1) * stride + row if height and width else 0
    require_size(data, need, f"the {height} x {width} points need ({need})", POINTCLOUD2)
    if height == 0 or width == 0:
        return np.zeros((height, width), dtype)
    return np.ndarray(
        (height, width), dtype=dtype, buffer=_holder(data), offset=0, strides=(stride, point_step)
    )


def drop_nans(arr: np.ndarray) -> np.ndarray:
    """The points of ``arr`` (any shape, flattened) whose ``x``, ``y`` and ``z`` (those it has)
    are not NaN."""
    flat = arr.reshape(-1)
    names = arr.dtype.names or ()
    keep = np.ones(flat.shape, bool)
    for n in ("x", "y", "z"):
        if n in names and flat.dtype[n].kind == "f":
            nan = np.isnan(flat[n])
            if nan.ndim > 1:
                nan = nan.any(axis=tuple(range(1, nan.ndim)))
            keep &= ~nan
    return flat[keep]


def split_packed_rgb(arr: np.ndarray, name: str | None = None) -> np.ndarray:
    """``arr`` with its packed colour field (``rgb`` or ``rgba``: a float32 or uint32 holding
    0xAARRGGBB) replaced by ``r``, ``g``, ``b`` (and ``a`` for ``rgba``) uint8 fields; ``arr``
    itself when it has no such field."""
    names = list(arr.dtype.names or ())
    if name is None:
        name = next((n for n in ("rgb", "rgba") if n in names), None)
        if name is None:
            return arr
    if name not in names:
        raise UsageError(f"the cloud has no field {name!r}")
    col = np.ascontiguousarray(arr[name])
    if col.dtype.itemsize != 4 or col.ndim != arr.ndim:
        raise UsageError(f"field {name!r} is {col.dtype}, not a packed 32-bit colour")
    packed = col.view(np.uint32)
    parts = ["r", "g", "b"] + (["a"] if name == "rgba" else [])
    shifts = {"r": 16, "g": 8, "b": 0, "a": 24}
    keep = [n for n in names if n != name]
    out_dtype = np.dtype([(n, arr.dtype[n]) for n in keep] + [(p, np.uint8) for p in parts if p not in keep])
    out = np.empty(arr.shape, out_dtype)
    for n in keep:
        out[n] = arr[n]
    for p in parts:
        if p not in keep:
            out[p] = ((packed >> shifts[p]) & 0xFF).astype(np.uint8)
    return out


def merge_rgb(arr: np.ndarray) -> np.ndarray:
    """The reverse of :func:`split_packed_rgb`: ``r``, ``g``, ``b`` uint8 fields packed into one
    float32 ``rgb`` field (as PCL writes it)."""
    names = list(arr.dtype.names or ())
    if not {"r", "g", "b"} <= set(names):
        return arr
    keep = [n for n in names if n not in ("r", "g", "b")]
    packed = (
        (np.asarray(arr["r"], np.uint32) << 16)
        | (np.asarray(arr["g"], np.uint32) << 8)
        | np.asarray(arr["b"], np.uint32)
    )
    out = np.empty(arr.shape, np.dtype([(n, arr.dtype[n]) for n in keep] + [("rgb", np.float32)]))
    for n in keep:
        out[n] = arr[n]
    out["rgb"] = packed.view(np.float32)
    return out


def xyz(arr: np.ndarray, dtype: Any = np.float32) -> np.ndarray:
    """The ``x``, ``y``, ``z`` fields of a cloud as an ``(N, 3)`` array (flattened)."""
    names = arr.dtype.names or ()
    missing = [n for n in ("x", "y", "z") if n not in names]
    if missing:
        raise UsageError(f"the cloud has no field {', '.join(missing)}")
    flat = arr.reshape(-1)
    out = np.empty((flat.shape[0], 3), dtype)
    for i, n in enumerate("xyz"):
        out[:, i] = flat[n]
    return out


def numpy_to_pointcloud2(
    arr: np.ndarray, *, header: Any = None, profile: str = "ros1", merge: bool = False
) -> dict[str, Any]:
    """A ``sensor_msgs/PointCloud2`` dict (the shape ``to_dict`` gives) from a structured
    array (``(N,)`` or organized ``(height, width)``), little-endian, fields in the array's
    own layout.  ``merge`` packs ``r``, ``g``, ``b`` into a float32 ``rgb`` field first.
    ``is_dense`` is true when no ``x``/``y``/``z`` is NaN."""
    a = np.asarray(arr)
    if a.dtype.names is None:
        raise UsageError("numpy_to_pointcloud2 takes a structured array (one field per point field)")
    if merge:
        a = merge_rgb(a)
    if a.ndim == 1:
        height, width = 1, int(a.shape[0])
    elif a.ndim == 2:
        height, width = int(a.shape[0]), int(a.shape[1])
    else:
        raise UsageError(f"a cloud array has 1 or 2 dimensions, not {a.ndim}")
    le = a.dtype.newbyteorder("<")
    names, le_fields = a.dtype.names, le.fields
    assert names is not None and le_fields is not None  # a structured array (checked above)
    fields = []
    for name in names:
        ft, offset = le_fields[name][:2]
        base, shape = (ft.base, ft.shape) if ft.subdtype is not None else (ft, ())
        code = _CODES.get(base.newbyteorder("="))
        if code is None:
            raise UsageError(f"field {name!r} is {base}; PointCloud2 holds only (u)int8/16/32, float32/64")
        fields.append(
            {
                "name": name,
                "offset": int(offset),
                "datatype": code,
                "count": int(np.prod(shape)) if shape else 1,
            }
        )
    data = np.ascontiguousarray(a.astype(le, copy=False))
    dense = len(drop_nans(a)) == a.size
    return {
        "header": default_header(profile) if header is None else header,
        "height": height,
        "width": width,
        "fields": fields,
        "is_bigendian": False,
        "point_step": int(le.itemsize),
        "row_step": int(le.itemsize) * width,
        "data": data.tobytes(),
        "is_dense": dense,
    }
