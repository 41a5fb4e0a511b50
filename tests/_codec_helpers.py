"""Shared helpers for the codec tests: normalise peers' decoded values to plain data."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np


def same(a: Any, b: Any, path: str = "", signed_bytes: bool = False) -> None:
    """Assert a == b recursively (NaN equals NaN; tuples equal lists).

    ``signed_bytes``: the peer reads ROS 2 ``byte`` (an unsigned octet) as int8.
    """
    if isinstance(a, dict):
        assert isinstance(b, dict), f"{path}: {type(b)}"
        assert list(a) == list(b), f"{path}: keys {list(a)} != {list(b)}"
        for k in a:
            same(a[k], b[k], f"{path}.{k}", signed_bytes)
        return
    if isinstance(a, bytes) and isinstance(b, (list, tuple)):
        a = list(a)  # peers that give uint8/char arrays as lists of ints
    if isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)), f"{path}: {type(b)} {b!r}"
        assert len(a) == len(b), f"{path}: len {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{path}[{i}]", signed_bytes)
        return
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        assert math.isnan(b), f"{path}: {a} != {b}"
        return
    if signed_bytes and isinstance(a, int) and isinstance(b, int) and a >= 128 and a - 256 == b:
        return
    assert a == b, f"{path}: {a!r} != {b!r}"
    assert type(a) is type(b) or {type(a), type(b)} <= {int, bool} and False or _num_ok(a, b), (
        f"{path}: {type(a)} vs {type(b)}"
    )


def _num_ok(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool)
    return isinstance(a, type(b)) or isinstance(b, type(a))


def norm_rosbags(v: Any, ros1: bool, store: Any = None) -> Any:
    """A rosbags message (dataclass, numpy arrays) as plain data in polybag's dict form."""
    if hasattr(v, "__dataclass_fields__"):
        mt = getattr(v, "__msgtype__", "")
        names = [n for n, _ in store.fielddefs[mt][1]] if store is not None else list(v.__slots__)
        if ros1 and mt in ("builtin_interfaces/msg/Time", "builtin_interfaces/msg/Duration"):
            return {"sec": v.sec, "nsec": v.nanosec}
        if ros1:  # rosbags gives empty ROS 1 messages the ROS 2 placeholder field
            names = [n for n in names if n != "structure_needs_at_least_one_member"]
        return {n: norm_rosbags(getattr(v, n), ros1, store) for n in names}
    if isinstance(v, np.ndarray):
        if v.dtype == np.uint8:
            return v.tobytes()
        return v.tolist()
    if isinstance(v, (list, tuple)):
        return [norm_rosbags(x, ros1, store) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    return v


def norm_genpy(v: Any, slot_type: str = "") -> Any:
    """A genpy message (rosbag-standalone) as plain data in polybag's dict form."""
    if hasattr(v, "secs") and hasattr(v, "nsecs"):
        return {"sec": v.secs, "nsec": v.nsecs}
    if hasattr(v, "_slot_types"):
        return {n: norm_genpy(getattr(v, n), t) for n, t in zip(v.__slots__, v._slot_types)}
    base = slot_type.split("[")[0]
    if isinstance(v, (bytes, str)) and base in ("uint8", "char") and "[" in slot_type:
        return v.encode("latin-1") if isinstance(v, str) else v
    if isinstance(v, (list, tuple)):
        return [norm_genpy(x, base) for x in v]
    if base == "bool" and isinstance(v, int):
        return bool(v)
    return v


def norm_dynamic(v: Any) -> Any:
    """An mcap-ros2-support decoded message as plain data."""
    if hasattr(v, "__slots__") and hasattr(v, "__dict__"):
        return {n: norm_dynamic(getattr(v, n)) for n in v.__slots__}
    if isinstance(v, (list, tuple)):
        return [norm_dynamic(x) for x in v]
    return v


def strip_placeholder(v: Any) -> Any:
    """Drop the ``structure_needs_at_least_one_member`` field of empty ROS 2 structs."""
    if isinstance(v, dict):
        return {k: strip_placeholder(x) for k, x in v.items() if k != "structure_needs_at_least_one_member"}
    if isinstance(v, list):
        return [strip_placeholder(x) for x in v]
    return v


_TOKEN = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _lookup(d: Any, name: str) -> Any:
    for m in _TOKEN.finditer(name):
        d = d[m.group(1)] if m.group(1) is not None else d[int(m.group(2))]
    if isinstance(d, dict) and set(d) in ({"sec", "nsec"}, {"sec", "nanosec"}):
        return d["sec"] * 1_000_000_000 + d.get("nsec", d.get("nanosec"))
    return d


def _equal(col_value: Any, ref: Any) -> bool:
    if isinstance(col_value, np.ndarray):
        return np.array_equal(col_value, np.asarray(ref), equal_nan=col_value.dtype.kind == "f")
    if isinstance(col_value, float) and isinstance(ref, float) and np.isnan(col_value):
        return bool(np.isnan(ref))
    if isinstance(col_value, list):
        return len(col_value) == len(ref) and all(_equal_plain(a, b) for a, b in zip(col_value, ref))
    return bool(col_value == ref)


def _equal_plain(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and set(a) == set(b) and all(_equal_plain(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return np.array_equal(a, b)
    # a sequence inside a list cell may be a list on one side and an array on the other
    # (an empty one too): the same values either way
    if isinstance(a, (list, tuple, np.ndarray)) or isinstance(b, (list, tuple, np.ndarray)):
        if not isinstance(a, (list, tuple, np.ndarray)) or not isinstance(b, (list, tuple, np.ndarray)):
            return False
        return len(a) == len(b) and all(_equal_plain(x, y) for x, y in zip(a, b))
    return bool(a == b)
