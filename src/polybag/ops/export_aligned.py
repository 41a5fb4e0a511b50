"""``export --align``: several topics on one time axis as one table (issue 31).

The table is :func:`polybag.codecs.aligned.aligned_columns` of the input: the first topic's
rows, each other topic's values joined on with ``pandas.merge_asof``'s semantics
(``align="asof"`` with ``direction`` and ``tolerance``, ``"nearest"``) or every topic
resampled on a common grid (``"resample:10ms"``); columns are ``<topic>.<field>`` after the
time column (named by ``time``)::

    from polybag import ops
    ops.export_aligned("run.bag", "tables/", topics=["/imu", "/gps"], align="asof", tolerance="50ms")

It is written as ``DIR/aligned.csv`` or ``DIR/aligned.parquet`` (``name`` sets another
name), created as ``NAME.EXT.active`` (exclusively, never through a symbolic link) and put
in place when complete; an existing table is replaced only with ``overwrite`` and only when
it is a table of that kind (as :func:`polybag.ops.export` replaces its tables).  A value a
topic does not have at a row (no match within the tolerance, before its first message) is
an empty cell in csv and a null in parquet; lists are JSON text in csv cells, list columns in
parquet.  The parquet file's metadata says what was aligned (``polybag.topics``,
``polybag.align``, ``polybag.source``...).
"""

from __future__ import annotations

import csv
import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from polybag._version import __version__
from polybag.codecs.aligned import aligned_arrow, aligned_columns
from polybag.errors import UnsupportedError, UsageError
from polybag.io.output_files import named_os_error, open_new, place_file, unlink_quietly
from polybag.ops.export import ExportResult, TableResult, cell, check_tables
from polybag.ops.inputs import input_name, open_input
from polybag.ops.options import Input
from polybag.ops.outputs import make_folder

#: the formats an aligned table is written in
ALIGNED_FORMATS = ("csv", "parquet")


def export_aligned(
    src: Input,
    output_dir: str | os.PathLike[str],
    *,
    topics: Sequence[str | tuple[str, int | str]],
    format: str = "csv",  # noqa: A002
    fields: Sequence[str] | Mapping[str, Sequence[str]] | None = None,
    align: str = "asof",
    direction: str = "backward",
    tolerance: int | str | None = None,
    allow_exact_matches: bool = True,
    time: str = "log_time",
    interpolate: str | Mapping[str, str] = "auto",
    name: str = "aligned",
    overwrite: bool = False,
) -> ExportResult:
    """Write ``topics`` of ``src`` aligned on one time axis as ``output_dir/NAME.csv`` or
    ``.parquet`` (see the module's text; the options are
    :func:`polybag.codecs.aligned.aligned_columns`'s)."""
    if format not in ALIGNED_FORMATS:
        raise UsageError(f"an aligned table is written as {' or '.join(ALIGNED_FORMATS)}, not {format!r}")
    if isinstance(topics, str) or len(topics) < 2:
        raise UsageError("aligning needs two or more topics, the first one giving the rows (--topics /a /b)")
    if not name or re.fullmatch(r"[A-Za-z0-9._-]+", name) is None or name.startswith("."):
        raise UsageError(f"table name {name!r}: letters, digits, '.', '_' and '-' only")
    out = Path(os.fspath(output_dir))
    path = out / f"{name}.{format}"
    result = ExportResult(input=input_name(src), output_dir=str(out), format=format)
    options: dict[str, Any] = {
        "align": align, "direction": direction, "tolerance": tolerance,
        "allow_exact_matches": allow_exact_matches, "time": time, "interpolate": interpolate,
    }
    with open_input(src) as r:
        check_tables(src, [path], overwrite)
        if format == "parquet":
            table = aligned_arrow(r, topics, fields, **options)
            rows = table.num_rows
        else:
            cols = aligned_columns(r, topics, fields, **options)
            rows = len(next(iter(cols.values()))) if cols else 0
        make_folder(out)
        tmp = path.with_name(path.name + ".active")
        try:
            if format == "parquet":
                _write_parquet(tmp, table, _metadata(result.input, topics, options))
            else:
                _write_csv(tmp, cols)
            place_file(tmp, path, overwrite)
        except OSError as e:
            unlink_quietly(str(tmp))
            raise named_os_error(e, str(path)) from None
        except BaseException:
            unlink_quietly(str(tmp))
            raise
    label = " + ".join(t if isinstance(t, str) else f"{t[0]}:{t[1]}" for t in topics)
    result.tables.append(TableResult(label, name, str(path), rows, path.stat().st_size))
    return result


def _metadata(source: str, topics: Sequence[Any], options: dict[str, Any]) -> dict[bytes, bytes]:
    said = {k: (v if isinstance(v, (str, int, bool)) or v is None else repr(v)) for k, v in options.items()}
    return {
        b"polybag.topics": json.dumps([t if isinstance(t, str) else list(t) for t in topics]).encode(),
        b"polybag.align": json.dumps(said).encode(),
        b"polybag.source": os.path.basename(source).encode("utf-8", "replace"),
        b"polybag.version": __version__.encode(),
    }


def _write_parquet(tmp: Path, table: Any, metadata: dict[bytes, bytes]) -> None:
    try:
        import pyarrow.parquet as pq  # type: ignore[import-untyped]  # pyarrow ships no type information
    except ImportError:  # pragma: no cover - optional dependency
        raise UnsupportedError("parquet export needs pyarrow: pip install 'polybag[arrow]'") from None
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), **metadata})
    with open_new(tmp, "wb") as fh:
        pq.write_table(table, fh)


def _csv_cells(col: np.ndarray) -> list[Any]:
    """A column's cells for csv: numbers as they are, lists as JSON, missing ones empty."""
    mask = np.ma.getmaskarray(col) if isinstance(col, np.ma.MaskedArray) else None
    data = np.asarray(col.data if isinstance(col, np.ma.MaskedArray) else col)
    if mask is not None and mask.ndim > 1:
        mask = np.asarray(mask.reshape(len(mask), -1).all(axis=1), dtype=bool)
    plain = data.dtype != object and data.ndim == 1
    cells = data.tolist() if plain else [cell(x) for x in data]
    if mask is not None and mask.any():
        for i in np.flatnonzero(mask):
            cells[int(i)] = ""
    return cells


def _write_csv(tmp: Path, cols: dict[str, np.ndarray]) -> None:
    names = list(cols)
    columns = [_csv_cells(cols[k]) for k in names]
    with open_new(tmp, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(names)
        w.writerows(zip(*columns))
