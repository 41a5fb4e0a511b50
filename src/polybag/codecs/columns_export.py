"""Columns as tables: a dict of numpy columns to a ``pyarrow.Table`` or a ``pandas.DataFrame``
(the optional dependencies are imported when used)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from polybag.errors import UnsupportedError


def _sanitize(name: str) -> str:
    return re.sub(r"\s+", "_", name)


def columns_to_arrow(cols: dict[str, np.ndarray]) -> Any:
    """A ``pyarrow.Table`` (one column per entry; object columns become list/string columns)."""
    try:
        import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information
    except ImportError:  # pragma: no cover - optional dependency
        raise UnsupportedError("to_arrow needs pyarrow: pip install 'polybag[arrow]'") from None
    arrays = {}
    for name, col in cols.items():
        if col.dtype == object:
            vals = [x.tolist() if isinstance(x, np.ndarray) else x for x in col]
            arrays[_sanitize(name)] = pa.array(vals)
        elif col.ndim > 1:
            arrays[_sanitize(name)] = pa.array(list(col))
        else:
            arrays[_sanitize(name)] = pa.array(col)
    return pa.table(arrays)


def columns_to_pandas(cols: dict[str, np.ndarray]) -> Any:
    """A ``pandas.DataFrame`` indexed by ``log_time`` (int64 ns)."""
    try:
        import pandas as pd  # type: ignore[import-untyped]  # no stubs installed (pandas-stubs)
    except ImportError:  # pragma: no cover - optional dependency
        raise UnsupportedError("to_pandas needs pandas: pip install 'polybag[pandas]'") from None
    data = {k: (list(v) if v.ndim > 1 else v) for k, v in cols.items() if k != "log_time"}
    index = pd.Index(cols["log_time"], name="log_time") if "log_time" in cols else None
    return pd.DataFrame(data, index=index)
