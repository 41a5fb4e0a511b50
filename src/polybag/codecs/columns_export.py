"""Columns as tables: a dict of numpy columns to a ``pyarrow.Table`` or a ``pandas.DataFrame``
(the optional dependencies are imported when used).

Arrow types come from the message definition where there is one (:func:`arrow_types`):
variable-length sequences are ``list<element>`` (``list<float>`` for ``float32[]``,
``list<struct<...>>`` for a sequence of messages, ``binary`` for ``uint8[]``), whatever
the values hold, so an all-empty sequence keeps its type.  Numeric sequences are built from
one concatenated numpy array and their offsets (no Python object per element).  2-D
columns (fixed arrays as one column) are ``fixed_size_list``.  A column Arrow cannot hold is
left out with a :class:`~polybag.errors.PolybagWarning` naming the topic and the field.
"""

from __future__ import annotations

import re
import warnings
from typing import Any

import numpy as np

from polybag.codecs.columns_layout import TIME_TYPES, check_columns
from polybag.codecs.definition_model import NUMPY_TYPES, PRIMITIVE_FORMATS
from polybag.errors import PolybagWarning, UnsupportedError, UsageError

_INT64_MAX = (1 << 63) - 1
#: what ``time=`` takes: the time column that comes first (and indexes ``to_pandas``)
TIME_CHOICES = ("log_time", "publish_time", "header.stamp", "timestamp")
#: what ``arrays=`` takes: fixed arrays as ``f[0]..f[n]`` columns, or as one 2-D column ``f``
ARRAYS = ("columns", "lists")


def check_time(time: str) -> None:
    """Refuse (:class:`~polybag.errors.UsageError`) a ``time=`` that is not one of
    :data:`TIME_CHOICES`."""
    if time not in TIME_CHOICES:
        raise UsageError(f"time={time!r}: choose one of {', '.join(TIME_CHOICES)}")


def check_arrays(arrays: str) -> None:
    """Refuse (:class:`~polybag.errors.UsageError`) an ``arrays=`` that is not one of :data:`ARRAYS`."""
    if arrays not in ARRAYS:
        raise UsageError(f"arrays={arrays!r}: choose one of {', '.join(ARRAYS)}")


def lists_of_arrays(cols: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``cols`` with every run of columns ``f[0]..f[n-1]`` (a fixed array of numbers, times or
    strings: no suffix after the index) joined into one 2-D column ``f``, in the place of
    ``f[0]``; then every fixed array of messages (``m[0].x .. m[n-1].z``) joined into one 2-D
    object column ``m`` whose cells are dicts (nested by the dotted names, numpy scalars kept
    so that Arrow types them as the columns were), built row by row."""
    return _message_arrays(_leaf_arrays(cols))


def _leaf_arrays(cols: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    groups: dict[str, list[str]] = {}
    for k in cols:
        m = _INDEXED.fullmatch(k)
        if m:
            groups.setdefault(m.group(1), []).append(k)
    joined: dict[str, str] = {}  # first element's column -> the array's name
    for base, names in groups.items():
        if base in cols or names != [f"{base}[{i}]" for i in range(len(names))]:
            continue
        if len({cols[n].dtype for n in names}) != 1 or any(cols[n].ndim != 1 for n in names):
            continue
        joined[names[0]] = base
    if not joined:
        return cols
    skip = {f"{b}[{i}]" for b in joined.values() for i in range(len(groups[b]))}
    out: dict[str, np.ndarray] = {}
    for k, v in cols.items():
        if k in joined:
            base = joined[k]
            out[base] = np.stack([cols[n] for n in groups[base]], axis=1)
        elif k not in skip:
            out[k] = v
    return out


def _message_arrays(cols: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    groups: dict[str, dict[int, list[str]]] = {}
    for k in cols:
        m = _ELEMENT.fullmatch(k)
        if m:
            groups.setdefault(m.group(1), {}).setdefault(int(m.group(2)), []).append(m.group(3))
    joined: dict[str, str] = {}  # first element's first column -> the array's name
    for base, by_index in groups.items():
        n = len(by_index)
        if base in cols or sorted(by_index) != list(range(n)) or any(by_index[i] != by_index[0] for i in range(n)):
            continue
        joined[f"{base}[0].{by_index[0][0]}"] = base
    if not joined:
        return cols
    skip = {f"{b}[{i}].{r}" for b in joined.values() for i, rests in groups[b].items() for r in rests}
    out: dict[str, np.ndarray] = {}
    for k, v in cols.items():
        if k in joined:
            out[joined[k]] = _element_dicts(cols, joined[k], groups[joined[k]])
        elif k not in skip:
            out[k] = v
    return out


def _element_dicts(cols: dict[str, np.ndarray], base: str, by_index: dict[int, list[str]]) -> np.ndarray:
    """The 2-D object column (rows, elements) of dicts of a fixed array of messages."""
    rows = len(cols[f"{base}[0].{by_index[0][0]}"])
    out = np.empty((rows, len(by_index)), dtype=object)
    for i in range(len(by_index)):
        sub = lists_of_arrays({r: cols[f"{base}[{i}].{r}"] for r in by_index[i]})
        for row in range(rows):
            out[row, i] = _nested({name: _cell(col, row) for name, col in sub.items()})
    return out


def _cell(col: np.ndarray, row: int) -> Any:
    v = col[row]
    return list(v) if isinstance(v, np.ndarray) and v.dtype == object else v


def _nested(flat: dict[str, Any]) -> dict[str, Any]:
    """``{"a.b": 1, "c": 2}`` as ``{"a": {"b": 1}, "c": 2}``."""
    out: dict[str, Any] = {}
    for name, v in flat.items():
        *path, last = name.split(".")
        d = out
        for p in path:
            d = d.setdefault(p, {})
        d[last] = v
    return out


_INDEXED = re.compile(r"(.+)\[(\d+)\]")
_ELEMENT = re.compile(r"(.+?)\[(\d+)\]\.(.+)")
#: most distinct message types :func:`arrow_types` types (each once); more: inferred from values
_MAX_TYPES = 4096


def _sanitize(name: str) -> str:
    return re.sub(r"\s+", "_", name)


def _pyarrow() -> Any:
    try:
        import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information
    except ImportError:  # pragma: no cover - optional dependency
        raise UnsupportedError("to_arrow needs pyarrow: pip install 'polybag[arrow]'") from None
    return pa


def arrow_types(codec: Any) -> dict[str, Any]:
    """``{column: pyarrow type}`` of the variable-length sequence and string columns of
    ``codec``'s type (a ROS 1 or CDR codec; ``{}`` for others, whose values are typed by
    inference), named as :func:`polybag.codecs.columns.topic_columns` names them.  Inside a
    sequence of messages times are ``struct<sec, nsec>`` (``nanosec`` in ROS 2) as the values
    hold them, fixed arrays ``fixed_size_list`` (``uint8[N]``: ``fixed_size_binary``).  The
    type is checked against the limits of columns first (each message type is typed once)."""
    if not (hasattr(codec, "typeset") and hasattr(codec, "compiler")) and not hasattr(codec, "_compilers"):
        return {}
    try:
        compiler = codec.compiler("<") if callable(codec.compiler) else codec.compiler
        check_columns(compiler, codec.type_name)
        return _Typer(_pyarrow(), compiler).columns(codec.type_name)
    except _TooMany:
        return {}


class _TooMany(Exception):
    pass


class _Typer:
    def __init__(self, pa: Any, compiler: Any) -> None:
        self.pa = pa
        self.compiler = compiler
        self.memo: dict[str, Any] = {}
        self.has: dict[str, bool] = {}
        self.out: dict[str, Any] = {}

    def columns(self, type_name: str) -> dict[str, Any]:
        if type_name not in TIME_TYPES:
            self.walk(type_name, "", 0)
        return self.out

    def walk(self, type_name: str, prefix: str, depth: int) -> None:
        """The columns the walk makes: messages flattened, fixed arrays of messages by index."""
        if depth > 64 or len(self.out) > 1 << 16:
            raise _TooMany
        for f in self.compiler.msgdef(type_name).fields:
            t, name, base = f.type, prefix + f.name, f.type.base
            simple = base in PRIMITIVE_FORMATS or base in TIME_TYPES or base in ("string", "wstring")
            if t.array is not None and t.array < 0:
                self.out[name] = self.field(t)
            elif base in ("string", "wstring"):  # typed even when no row holds a value
                if t.array is None:
                    self.out[name] = self.pa.string()
                else:
                    self.out.update((f"{name}[{i}]", self.pa.string()) for i in range(min(t.array, 1 << 16)))
                    self.out[name] = self.pa.list_(self.pa.string(), t.array)  # arrays="lists"
            elif simple or not self.typed(base, depth + 1):
                continue  # (an array of messages without sequences or strings: no loop over it)
            elif t.array is None:
                self.walk(base, name + ".", depth + 1)
            else:
                for i in range(t.array):
                    self.walk(base, f"{name}[{i}].", depth + 1)

    def typed(self, type_name: str, depth: int) -> bool:
        """Whether ``type_name``'s columns include one :meth:`walk` types (a sequence or a
        string, directly or in a nested message), each type answered once."""
        got = self.has.get(type_name)
        if got is None:
            if depth > 64:
                raise _TooMany
            got = False
            for f in self.compiler.msgdef(type_name).fields:
                t, base = f.type, f.type.base
                if (t.array is not None and t.array < 0) or base in ("string", "wstring"):
                    got = True
                elif base not in PRIMITIVE_FORMATS and base not in TIME_TYPES and t.array != 0:
                    got = self.typed(base, depth + 1)
                if got:
                    break
            self.has[type_name] = got
        return got

    def field(self, t: Any) -> Any:
        """The type of a field's value inside a sequence of messages (as the decoders give it)."""
        pa, base = self.pa, t.base
        if t.array is None:
            return self.element(base)
        if base == "uint8":
            return pa.binary() if t.array < 0 else pa.binary(t.array)
        elem = self.element(base)
        return pa.list_(elem) if t.array < 0 else pa.list_(elem, t.array)

    def element(self, base: str) -> Any:
        pa = self.pa
        if base == "bool":
            return pa.bool_()
        if base in NUMPY_TYPES:
            return pa.from_numpy_dtype(np.dtype(NUMPY_TYPES[base]))
        if base in ("string", "wstring"):
            return pa.string()
        if base in TIME_TYPES:
            if base == "time":
                return pa.struct([("sec", pa.uint32()), ("nsec", pa.uint32())])
            if base == "duration":
                return pa.struct([("sec", pa.int32()), ("nsec", pa.int32())])
            return pa.struct([("sec", pa.int32()), ("nanosec", pa.uint32())])
        got = self.memo.get(base)
        if got is None:
            if len(self.memo) > _MAX_TYPES:
                raise _TooMany
            self.memo[base] = got = pa.struct(
                [(f.name, self.field(f.type)) for f in self.compiler.msgdef(base).fields]
            )
        return got


def _datetime_ns(col: np.ndarray, unit: str) -> np.ndarray:
    """``col`` (integer times in ``unit``, ``"ns"`` or ``"us"``) as int64 ns, or a UsageError
    when a time is past what a ``datetime64[ns]`` holds (the year 2262)."""
    scale = 1000 if unit == "us" else 1
    if len(col) and (int(col.max()) > _INT64_MAX // scale or int(col.min()) < -(_INT64_MAX // scale)):
        raise UsageError("a time of 2**63 ns or more cannot be a datetime (past the year 2262): use datetimes=False")
    return col.astype(np.int64) * scale


def _time_column(pa: Any, col: np.ndarray, unit: str) -> Any:
    """``col`` (integer times in ``unit``) as ``timestamp[ns, UTC]``."""
    return pa.array(_datetime_ns(col, unit), type=pa.timestamp("ns", tz="UTC"))


def _numeric_lists(pa: Any, col: np.ndarray) -> Any | None:
    """An object column of 1-D numeric arrays as a list array built from one concatenation
    (None: the cells are something else)."""
    dtype = None
    for x in col:
        if not isinstance(x, np.ndarray) or x.ndim != 1 or x.dtype.kind not in "biuf":
            return None
        if dtype is None:
            dtype = x.dtype
        elif x.dtype != dtype:
            return None
    if dtype is None:
        return None
    lengths = np.fromiter((len(x) for x in col), dtype=np.int64, count=len(col))
    offsets = np.zeros(len(col) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    values = pa.array(np.concatenate(list(col)) if len(col) else np.zeros(0, dtype))
    if offsets[-1] <= np.iinfo(np.int32).max:
        return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), values)
    return pa.LargeListArray.from_arrays(pa.array(offsets), values)


def _arrow_column(pa: Any, col: np.ndarray, typ: Any) -> Any:
    if col.dtype == object:
        if col.ndim > 1:
            inner = typ.value_type if typ is not None and pa.types.is_fixed_size_list(typ) else None
            flat = pa.array(list(col.reshape(-1)), type=inner)
            return pa.FixedSizeListArray.from_arrays(flat, col.shape[1])
        fast = _numeric_lists(pa, col)
        if fast is not None:
            return fast if typ is None or fast.type == typ else fast.cast(typ)
        vals = [x.tolist() if isinstance(x, np.ndarray) else x for x in col]
        if typ is not None:
            try:
                return pa.array(vals, type=typ)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
                pass  # values the definition does not describe (checked again by inference)
        return pa.array(vals)
    if col.ndim > 1:
        width = int(np.prod(col.shape[1:]))
        return pa.FixedSizeListArray.from_arrays(pa.array(np.ascontiguousarray(col).reshape(-1)), width)
    return pa.array(col)


def columns_to_arrow(
    cols: dict[str, np.ndarray],
    *,
    types: dict[str, Any] | None = None,
    time: str | None = None,
    time_unit: str = "ns",
    topic: str | None = None,
) -> Any:
    """A ``pyarrow.Table`` (one column per entry; object columns become list, struct, string
    or binary columns, typed by ``types`` (:func:`arrow_types`) where given; 2-D columns
    ``fixed_size_list``).  ``time``: the column ``<time>_utc`` (``timestamp[ns, UTC]``) of the
    times in ``cols[time]`` (in ``time_unit``, ``"ns"`` or ``"us"``) follows that column.
    A column Arrow cannot hold is left out with a :class:`~polybag.errors.PolybagWarning`."""
    pa = _pyarrow()
    types = types or {}
    arrays = {}
    for name, col in cols.items():
        try:
            arrays[_sanitize(name)] = _arrow_column(pa, col, types.get(name))
        except (
            pa.ArrowInvalid,
            pa.ArrowTypeError,
            pa.ArrowNotImplementedError,
            TypeError,
            ValueError,
            OverflowError,
        ) as e:
            where = f"topic {topic}: " if topic else ""
            warnings.warn(
                f"{where}field {name} left out of the Arrow table: {e}", PolybagWarning, stacklevel=3
            )
            continue
        if name == time:
            arrays[_sanitize(f"{name}_utc")] = _time_column(pa, col, time_unit)
    return pa.table(arrays)


def columns_to_pandas(
    cols: dict[str, np.ndarray], *, time: str | None = None, datetimes: bool = False, time_unit: str = "ns"
) -> Any:
    """A ``pandas.DataFrame`` indexed by the column ``time`` (default ``log_time`` when there is
    one; int64 ns).  ``datetimes=True``: the index is ``datetime64[ns, UTC]`` (named ``time``)
    and the integers stay as the column ``<time>_ns`` (``<time>_us`` when ``time_unit`` is
    ``"us"``, a ULog's ``timestamp``)."""
    try:
        import pandas as pd  # type: ignore[import-untyped]  # no stubs installed (pandas-stubs)
    except ImportError:  # pragma: no cover - optional dependency
        raise UnsupportedError("to_pandas needs pandas: pip install 'polybag[pandas]'") from None
    if time is None:
        time = "log_time" if "log_time" in cols else None
    data = {k: (list(v) if v.ndim > 1 else v) for k, v in cols.items() if k != time}
    if time is None or time not in cols:
        return pd.DataFrame(data)
    ints = cols[time]
    if not datetimes:
        return pd.DataFrame(data, index=pd.Index(ints, name=time))
    ns = _datetime_ns(ints, time_unit)
    index = pd.DatetimeIndex(pd.to_datetime(ns, unit="ns", utc=True), name=time).as_unit("ns")
    return pd.DataFrame({f"{time}_{time_unit}": ints, **data}, index=index)


__all__ = [
    "ARRAYS",
    "TIME_CHOICES",
    "arrow_types",
    "check_arrays",
    "check_time",
    "columns_to_arrow",
    "columns_to_pandas",
    "lists_of_arrays",
]
