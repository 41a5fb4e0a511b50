"""``export``: each topic as a csv, parquet or jsonl table, streamed with bounded memory.

csv and parquet hold one column per leaf field (``header.stamp`` in ns, ``pose.position.x``,
``covariance[0]``); variable-length fields are JSON text in csv and list columns in
parquet (typed from the message definition: ``list<double>`` for ``float64[]``, ``list<string>``,
``list<struct<...>>`` for a sequence of messages, even when a batch holds only empty ones); ``uint8[]`` / bytes fields are base64 text in csv and binary in parquet.  jsonl
writes one decoded message per line (nested, as ``to_dict``)::

    from polybag import ops
    ops.export("in.mcap", "tables/", format="parquet", topics="/imu.*")

Tables are written block by block: messages are read in batches of about
``batch_bytes`` payload bytes (or ``batch_messages`` messages), each batch is decoded to
columns (:func:`polybag.codecs.columns.payload_columns`) and appended to the csv file /
``pyarrow.parquet.ParquetWriter`` / jsonl file, so memory stays at a few batches whatever
the topic's size.  ULog instances are batched the same way: the instance's data messages
(``reader.messages`` in file order, one channel) are decoded a batch at a time into a
structured array (:meth:`polybag.codecs.ulog.UlogCodec.records`, pyulog's column names).

A topic whose channels cannot share one table gets one table per channel group, named
``topic_<n>``: ULog multi-instance topics one per ``multi_id`` (``sensor_accel_0``,
``sensor_accel_1``), other formats one per channel id when the channels of a topic have
different types (channels of one type, e.g. several publishers in a bag, share a table).

Every table has its own file: topics whose names make the same file name (``/a/b`` and
``/a.b`` both ``a.b``; ``/a b`` and ``/a_b`` both ``a_b``; compared ignoring case) get
``~2``, ``~3``... appended in topic order (``a.b~2.csv``; ``~`` is never part of a topic's
own file name), and the result (``tables``: topic, table, path; printed by the CLI, and
``--json``) says which topic is where; a parquet table also names its topic in the file's
metadata (``polybag.topic``).  All tables are written as ``NAME.EXT.active`` (created
exclusively, never through a symbolic link) and put in place only when every table is
complete, so an export that fails leaves the tables that were there before untouched.

Parquet datasets (``layout="dataset"``, the CLI's default for ``--format parquet``): the
tables are a hive-partitioned dataset that DuckDB, polars and pyarrow read as one table per
topic::

    DIR/topic=<table>/part-0.parquet                  one input
    DIR/topic=<table>/file=<input>/part-0.parquet     several inputs (export_many, --jobs)

``<table>`` is the table's file name above (``/imu`` is ``imu``; ``~2`` for a clash; never
``/``, ``=``, or a name outside ``DIR``: the directory is always ``topic=...``) and
``<input>`` the input's file name without extension, made safe the same way.  Read a topic
with ``duckdb.read_parquet('DIR/topic=imu/**/*.parquet', hive_partitioning=true)`` or
``polars.scan_parquet('DIR/topic=imu/**/*.parquet', hive_partitioning=True)``: the
columns ``topic`` (and ``file``) come from the path (both guess a partition's type from its
text: DuckDB's ``hive_types_autocast=false`` keeps ``topic=1`` a string).  The exact topic name and its type are
in every file's schema metadata (bytes keys, also in flat parquet tables):
``polybag.topic``, ``polybag.table``, ``polybag.type``, ``polybag.definition`` (the message
definition text), ``polybag.schema_encoding``, ``polybag.message_encoding``, ``polybag.md5``
(ROS 1) or ``polybag.type_hash`` (ROS 2, when the channel has one), ``polybag.source`` (the
input's file name), ``polybag.time`` (the time column) and ``polybag.version``.  ``--force``
replaces only the part files it writes, and refuses a table directory that holds anything
polybag does not write there (or is a symbolic link); other topics' partitions stay.

Row groups follow the source's chunks: each batch read is one row group (at most
``batch_messages`` rows and about ``batch_bytes`` payload bytes), and a batch also ends at
the end of a chunk of the input (a reader's ``chunk_message_counts``) once it holds at least
:data:`GROUP_MIN_ROWS` rows, so a file has at most one row group per chunk holding its topic
plus one per ``batch_messages`` rows / ``batch_bytes`` bytes.

``time`` picks the time column, written first and named by the choice: ``log_time``
(default), ``publish_time``, or a field of the message: ``header.stamp`` (ns) or ULog's
``timestamp`` (us); the other message times are then left out.  A table whose type has no
such field keeps ``log_time`` and says so in a warning.
"""

from __future__ import annotations

import base64
import csv
import functools
import json
import os
import re
import stat
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from polybag.errors import OutputExistsError, PolybagError, UnsupportedError, UsageError
from polybag.formats import registry
from polybag.io.output_files import (
    as_output_error,
    file_refusal,
    named_os_error,
    open_new,
    place_file,
    refuse_replacing,
)
from polybag.model import Channel
from polybag.ops.copying import page_releaser
from polybag.ops.inputs import (
    check_apart,
    check_distinct,
    input_name,
    open_input,
    require_topics,
    until_damage,
)
from polybag.ops.options import Input
from polybag.ops.outputs import make_folder
from polybag.ops.results import OpResult, make_progress
from polybag.reader import Reader
from polybag.selection import TimeWindow

FORMATS = ("csv", "parquet", "jsonl")
LAYOUTS = ("flat", "dataset")
TIMES = ("log_time", "publish_time", "header.stamp", "timestamp")
#: a row group ends at a source chunk's end once it holds this many rows (read when used)
GROUP_MIN_ROWS = 1024
PART_NAME = "part-0.parquet"
BATCH_BYTES = 8 << 20
BATCH_MESSAGES = 65536


@dataclass
class TableResult:
    topic: str
    table: str
    path: str
    rows: int = 0
    bytes: int = 0
    error: str | None = None
    damage: str | None = None  # the input's damage that ended this table early


@dataclass
class ExportResult(OpResult):
    input: str = ""
    output_dir: str = ""
    format: str = "csv"
    tables: list[TableResult] = field(default_factory=list)
    failed: int = 0
    damaged: int = 0  # tables cut short by damage in the input (their intact rows are written)
    layout: str = "flat"


def table_name(topic: str) -> str:
    """The file name (without extension) of ``topic``'s table: ``/a/b`` -> ``a.b``, every
    other character than letters, digits, ``.``, ``_`` and ``-`` as ``_``; never a hidden
    name (leading dots dropped: ``/../..x`` -> ``x``), ``root`` when nothing is left."""
    name = topic.strip("/").replace("/", ".")
    name = re.sub(r"[^A-Za-z0-9._-]", "_", name).lstrip(".")
    if len(name) > _NAME_MAX:  # (a file name has at most 255 bytes: the start and a digest)
        import hashlib

        name = f"{name[: _NAME_MAX - 17]}_{hashlib.sha1(topic.encode('utf-8', 'surrogatepass')).hexdigest()[:16]}"
    return name or "root"


#: the longest :func:`table_name` (room left for a suffix, ``~N``, ``.parquet.active``)
_NAME_MAX = 180


@dataclass(eq=False, repr=False)  # (compared by identity, with the default repr)
class Table:
    """One output table: a topic, or one group of its channels (``suffix`` names it)."""

    topic: str
    channels: list[Channel]
    suffix: str | None = None
    multi_id: int | None = None
    #: the file name (without extension) given when it differs from :attr:`plain_name`
    #: (another table has that name, see :func:`unique_names`)
    unique: str | None = None

    @property
    def plain_name(self) -> str:
        base = table_name(self.topic)
        return base if self.suffix is None else f"{base}_{self.suffix}"

    @property
    def name(self) -> str:
        return self.unique if self.unique is not None else self.plain_name


def unique_names(names: Sequence[str]) -> list[str]:
    """``names`` made unique (ignoring case, for case-insensitive file systems): a name
    already taken gets ``~2``, ``~3``... appended, in order (``~`` never comes out of
    :func:`table_name`, so a renamed table cannot take another topic's plain name)."""
    seen: set[str] = set()
    out = []
    for base in names:
        name, k = base, 2
        while name.casefold() in seen:
            name = f"{base}~{k}"
            k += 1
        seen.add(name.casefold())
        out.append(name)
    return out


def name_tables(tables: Sequence[Table]) -> None:
    """Give every table of one export its own file name (:func:`unique_names`)."""
    for t, name in zip(tables, unique_names([t.plain_name for t in tables])):
        t.unique = None if name == t.plain_name else name


def _codec_key(ch: Channel) -> Any:
    s = ch.schema
    return (ch.message_encoding, s.encoding if s else "", s.name if s else "", bytes(s.data) if s else b"")


def _int_or_none(mid: Any) -> int | None:
    try:
        return int(str(mid)) if mid is not None else None
    except ValueError:
        return None


def plan_tables(topic: str, channels: list[Channel]) -> list[Table]:
    """The tables of one topic: one, or one per ULog instance / per channel of another type."""
    mids = {c.metadata.get("multi_id") for c in channels}
    if len(channels) > 1 and None not in mids and len(mids) > 1:
        out = []
        for mid in sorted(mids, key=lambda m: (len(str(m)), str(m))):
            group = [c for c in channels if c.metadata.get("multi_id") == mid]
            out.append(Table(topic, group, str(mid), _int_or_none(mid)))
        return out
    if len({_codec_key(c) for c in channels}) > 1:
        return [Table(topic, [c], str(c.id)) for c in sorted(channels, key=lambda c: c.id)]
    mid = next(iter(mids)) if len(mids) == 1 else None
    return [Table(topic, channels, None, _int_or_none(mid))]


# --- cells -----------------------------------------------------------------------------------
def _json_default(o: Any) -> Any:
    if isinstance(o, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(o)).decode("ascii")
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.generic):
        return o.item()
    to_dict = getattr(o, "to_dict", None)
    if to_dict is not None:
        return to_dict()
    return str(o)


def cell(v: Any) -> Any:
    """A csv cell: bytes as base64, arrays/lists/dicts as JSON text, numpy scalars as Python."""
    if isinstance(v, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(v)).decode("ascii")
    if isinstance(v, np.ndarray):
        return json.dumps(v.tolist())
    if isinstance(v, (list, tuple, dict)):
        return json.dumps(v, default=_json_default)
    if isinstance(v, np.generic):
        return v.item()
    return v


# --- sinks -----------------------------------------------------------------------------------
class _CsvSink:
    def __init__(self, path: Path, topic: str = "") -> None:
        self.fh = open_new(path, "w", newline="", encoding="utf-8")
        self.w = csv.writer(self.fh)
        self.names: list[str] | None = None
        self.rows = 0
        self.late: set[str] = set()

    def write(self, cols: dict[str, np.ndarray], n: int) -> None:
        if self.names is None:
            self.names = list(cols)
            self.w.writerow(self.names)
        self.late.update(k for k in cols if k not in self.names)
        empty = np.full(n, "", dtype=object)
        block = [cols.get(k, empty) for k in self.names]
        plain = [c.dtype != object and c.ndim == 1 for c in block]
        lists = [c.tolist() if p else c for c, p in zip(block, plain)]
        w = self.w
        for i in range(n):
            w.writerow([col[i] if p else cell(col[i]) for col, p in zip(lists, plain)])
        self.rows += n

    def close(self) -> None:
        if self.names is None:  # no rows: a header-only file is still a table
            self.fh.write("log_time\r\n")
        self.fh.close()


def _typed_lists(col: np.ndarray) -> Any:
    """An object column whose cells are all 1-d numeric arrays of one dtype (a sequence
    field) as an Arrow list array of that element type, typed even when every cell is empty;
    None for any other column."""
    import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information

    dt: np.dtype[Any] | None = None
    for x in col:
        if not isinstance(x, np.ndarray) or x.ndim != 1 or x.dtype.kind not in "biuf" or x.dtype == np.uint8:
            return None
        if dt is None:
            dt = x.dtype
        elif x.dtype != dt:
            return None
    if dt is None:
        return None
    native = dt.newbyteorder("=")
    offsets = np.zeros(len(col) + 1, dtype=np.int64)
    np.cumsum([len(x) for x in col], out=offsets[1:])
    if offsets[-1] >= 1 << 31:
        return None
    values = np.concatenate([x.astype(native, copy=False) for x in col])
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(values, type=pa.from_numpy_dtype(native)))


def _arrow_column(col: np.ndarray, typ: Any = None) -> Any:
    """A column as an Arrow array; ``typ``: its type from the message definition (a sequence
    stays ``list<element>`` even when every cell of a block is empty)."""
    import pyarrow as pa

    if col.dtype == object:
        typed = _typed_lists(col)
        if typed is not None and (typ is None or typed.type == typ):
            return typed
        vals = [x.tolist() if isinstance(x, np.ndarray) and x.dtype != np.uint8 else x for x in col]
        vals = [bytes(x) if isinstance(x, (bytearray, memoryview)) else x for x in vals]
        vals = [x.tobytes() if isinstance(x, np.ndarray) else x for x in vals]
        if typ is not None:
            try:
                return pa.array(vals, type=typ)
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError, OverflowError):
                pass  # values the definition does not describe: typed by inference
        return typed if typed is not None else pa.array(vals)
    if col.ndim > 1:
        return pa.array(list(col))
    return pa.array(col)


class _ParquetSink:
    def __init__(
        self, path: Path, topic: str = "", metadata: dict[bytes, bytes] | None = None, types: dict[str, Any] | None = None
    ) -> None:
        try:
            import pyarrow  # noqa: F401
            import pyarrow.parquet  # type: ignore[import-untyped]  # noqa: F401  # no type information
        except ImportError:
            raise UnsupportedError("parquet export needs pyarrow: pip install 'polybag[arrow]'") from None
        self.path = path
        self.topic = topic
        self.metadata = metadata if metadata is not None else {b"polybag.topic": topic.encode("utf-8", "replace")}
        self.types = types or {}  # {column: Arrow type} from the message definition
        self.writer: Any = None
        self.schema: Any = None
        self.rows = 0
        self.fh = open_new(path, "wb")  # created exclusively: pyarrow never opens the name itself

    def write(self, cols: dict[str, np.ndarray], n: int) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        arrays = {re.sub(r"\s+", "_", k): _arrow_column(v, self.types.get(k)) for k, v in cols.items()}
        table = pa.table(arrays)
        if self.writer is None:
            # a column all null in the first block gets its type from a later block: keep it
            # null-typed only if it never learns one (parquet needs one schema up front)
            self.schema = table.schema.with_metadata(self.metadata)
            table = table.replace_schema_metadata(self.schema.metadata)
            self.writer = pq.ParquetWriter(self.fh, self.schema)
        elif table.schema != self.schema:
            try:
                table = _conform(table, self.schema)
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, KeyError, ValueError) as e:
                changed = [f.name for f in table.schema if f.name in self.schema.names and f.type != self.schema.field(f.name).type]
                raise PolybagError(
                    f"{self.path.name}: a later block has other column types ({', '.join(changed[:5]) or e}: "
                    "empty or null in every row of the first block, typed later)"
                ) from None
        self.writer.write_table(table, row_group_size=max(n, 1))  # (one row group per batch)
        self.rows += n

    def close(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            if self.writer is None:
                empty = pa.table({"log_time": pa.array([], pa.int64())})
                pq.write_table(empty.replace_schema_metadata(self.metadata), self.fh)
            else:
                self.writer.close()
        finally:
            self.fh.close()


def _declared_types(channel: Channel) -> dict[str, Any]:
    """``{column: Arrow type}`` of the sequence and string columns of ``channel``'s type, from
    its definition (:func:`polybag.codecs.columns_export.arrow_types`; ``{}`` when there is
    none: the values are then typed by inference)."""
    from polybag.codecs import codec_for

    try:
        from polybag.codecs.columns_export import arrow_types
    except ImportError:  # pragma: no cover - (an older codec layer: typed by inference)
        return {}
    try:
        return dict(arrow_types(codec_for(channel)))
    except PolybagError:
        return {}  # (an undecodable type fails its table when the columns are made)


def _conform(table: Any, schema: Any) -> Any:
    import pyarrow as pa

    cols = []
    for f in schema:
        if f.name in table.column_names:
            c = table.column(f.name)
            cols.append(c if c.type == f.type else c.cast(f.type))
        else:
            cols.append(pa.nulls(table.num_rows, f.type))
    return pa.Table.from_arrays(cols, schema=schema)


# --- column blocks -----------------------------------------------------------------------------
def _instance_tables(r: Reader) -> bool:
    """Whether ``r``'s topics are logged in instances, each a table of its own records
    (:attr:`~polybag.formats.registry.FormatSpec.instance_tables`: a ULog)."""
    spec = registry.lookup(r.format)
    return spec is not None and spec.instance_tables


def _ulog_channel(r: Any, t: Table) -> Channel:
    """The channel whose data is the instance's table: the first subscription of the
    ``(topic, multi_id)`` that logged data (the reader's ``topic_columns`` pick)."""
    counts = r.summary.message_counts or {}
    chans = sorted(t.channels, key=lambda c: c.id)
    return next((c for c in chans if int(counts.get(c.id, 0))), chans[0])


def _ulog_names(utype: Any, topic: str, fields: Sequence[str] | None, timed: bool) -> list[str]:
    """Column names as the reader's ``topic_columns`` gives them: pyulog's flattened fields
    without padding (or those ``fields`` select, as names or prefixes), then ``log_time``."""
    if fields is None:
        names: list[str] = utype.column_names()
    else:
        known = list(utype.dtype.names or ()) + (["log_time"] if timed else [])
        names = []
        for f in fields:
            hit = [n for n in known if n == f or n.startswith(f + "[") or n.startswith(f + ".")]
            if not hit:
                raise PolybagError(f"topic {topic}: no field {f!r}")
            names.extend(h for h in hit if h not in names and h != "log_time")
    return names + (["log_time"] if timed else [])


Flush = Callable[[list[int], list[Any]], dict[str, np.ndarray]]  # (times, payloads) -> columns


def _ulog_flush(
    r: Any, t: Table, fields: Sequence[str] | None, timed: bool, time: str = "log_time", notes: list[str] | None = None
) -> tuple[set[int], Flush]:
    """One ULog instance: its data channel, and each batch decoded at once to a structured
    array of pyulog's fields.  ``time``: ``log_time`` (a last column when ``timed``, as
    pyulog's own ``timestamp`` comes first), ``publish_time`` (a first column) or
    ``timestamp`` (pyulog's, first); ``header.stamp``, which no ULog type has, keeps
    ``log_time`` (noted in ``notes``)."""
    from polybag.codecs import codec_for
    from polybag.codecs.ulog import UlogCodec

    ch = _ulog_channel(r, t)
    codec = codec_for(ch)
    assert isinstance(codec, UlogCodec), f"{t.topic}: a ULog instance's data channel has a ULog codec"
    utype = codec.type
    own = list(utype.dtype.names or ())
    first: str | None = None  # a message time written as the first column
    if time == "timestamp" and "timestamp" in own:
        wanted = fields if fields is None or "timestamp" in fields else [*fields, "timestamp"]
        fixed = ["timestamp"] + [n for n in _ulog_names(utype, t.topic, wanted, False) if n != "timestamp"]
        timed = False
    elif time == "publish_time":
        fixed, first, timed = _ulog_names(utype, t.topic, fields, False), "publish_time", False
    else:
        if time != "log_time" and notes is not None:
            notes.append(f"{t.name}: its type has no {time}; the table keeps log_time")
            timed = True
        fixed = [n for n in _ulog_names(utype, t.topic, fields, timed) if n != "log_time"]

    def flush(times: list[int], datas: list[Any]) -> dict[str, np.ndarray]:
        arr = codec.records(datas)
        cols = {first: np.array(times, dtype=np.int64)} if first is not None else {}
        cols.update((n, arr[n]) for n in fixed)
        if timed:
            cols["log_time"] = np.array(times, dtype=np.int64)
        return cols

    return {ch.id}, flush


def _batched(
    messages: Iterator[Any],
    channel_ids: set[int],
    flush: Flush,
    batch_bytes: int,
    batch_messages: int,
    bounds: Sequence[int] | None = None,
    publish: bool = False,
) -> Iterator[tuple[dict[str, np.ndarray], int]]:
    """``(columns, rows)`` per batch of the messages on ``channel_ids``; at least one batch
    (empty tables still get their header).  ``bounds``: the sorted last log times of the
    input's chunks; a batch also ends where the messages pass one, once it holds
    :data:`GROUP_MIN_ROWS` rows.  ``publish``: the times given to ``flush`` are the
    messages' publish times (else their log times)."""
    times: list[int] = []
    datas: list[Any] = []
    size = 0
    yielded = False
    k = 0
    nb = len(bounds) if bounds is not None else 0
    min_rows = max(1, int(GROUP_MIN_ROWS))
    for m in messages:
        if m.channel.id not in channel_ids:
            continue
        if k < nb and m.log_time > bounds[k]:  # type: ignore[index]  # (nb > 0: bounds is a sequence)
            while k < nb and m.log_time > bounds[k]:  # type: ignore[index]
                k += 1
            if len(datas) >= min_rows:
                yield flush(times, datas), len(datas)
                times, datas, size = [], [], 0
                yielded = True
        times.append(m.publish_time if publish else m.log_time)
        datas.append(m.data)
        size += len(m.data)
        if size >= batch_bytes or len(datas) >= batch_messages:
            yield flush(times, datas), len(datas)
            times, datas, size = [], [], 0
            yielded = True
    if datas or not yielded:
        yield flush(times, datas), len(datas)


def _intact(messages: Iterator[Any], damage: list[str]) -> Iterator[Any]:
    """The messages before damage: a damaged file's reader yields every intact message and
    then raises a :class:`FormatError`; the table keeps those rows and the error is appended
    to ``damage`` (the export reports it and exits non-zero)."""
    return until_damage(messages, lambda e, _n: damage.append(str(e)))


def _message_flush(
    t: Table, fields: Sequence[str] | None, time: str = "log_time", notes: list[str] | None = None
) -> tuple[set[int], Flush]:
    """A topic's channels, and each batch decoded to columns (see ``payload_columns``).
    ``time``: the first column, ``log_time`` or ``publish_time`` (the times given to the
    flush) or a field (``header.stamp``, ``timestamp``) moved first; a type without that
    field keeps ``log_time`` (noted once in ``notes``)."""
    from polybag.codecs import codec_for
    from polybag.codecs.columns import payload_columns

    codec = codec_for(t.channels[0])
    ids = {c.id for c in t.channels}
    seen_fields = fields is None
    in_payload = time not in ("log_time", "publish_time")
    wanted = fields if not in_payload or fields is None or time in fields else [*fields, time]
    said = False

    def flush(times: list[int], datas: list[Any]) -> dict[str, np.ndarray]:
        nonlocal seen_fields, said
        cols = payload_columns(codec, datas, wanted, topic=t.topic)
        if not seen_fields and fields and datas:
            names = list(cols)
            for f in fields:
                if not any(c == f or c.startswith(f + ".") or c.startswith(f + "[") for c in names):
                    raise PolybagError(f"no field {f!r}; fields: {', '.join(names) or '(none)'}")
            seen_fields = True
        if in_payload and time in cols and cols[time].dtype.kind in "iu" and cols[time].ndim == 1:
            first = cols.pop(time)
            return {time: first.astype(np.int64, copy=False), **cols}
        if in_payload and datas and not said and notes is not None:
            notes.append(f"{t.name}: its type has no {time}; the table keeps log_time")
            said = True
        name = "publish_time" if time == "publish_time" else "log_time"
        return {name: np.array(times, dtype=np.int64), **cols}

    return ids, flush


def _blocks(
    r: Any,
    t: Table,
    fields: Sequence[str] | None,
    window: TimeWindow,
    batch_bytes: int,
    batch_messages: int,
    damage: list[str],
    ulog: bool,
    time: str = "log_time",
    notes: list[str] | None = None,
) -> Iterator[tuple[dict[str, np.ndarray], int]]:
    """One table in batches of columns.  A ULog instance (``ulog``): its data messages in
    file order (the reader's public ``messages``), decoded a batch at a time by its own
    records; any other table: its messages in log-time order, decoded to columns, the
    batches ending at the input's chunks (:func:`_chunk_ends`)."""
    bounds: list[int] | None = None
    if ulog:
        timed = window.start is not None or window.end is not None
        ids, flush = _ulog_flush(r, t, fields, timed, time, notes)
        order = "file"
    else:
        ids, flush = _message_flush(t, fields, time, notes)
        order = "log_time"
        bounds = _chunk_ends(r, ids)
    start, end = window
    messages = _intact(r.messages(topics=[t.topic], start=start, end=end, order=order), damage)
    yield from _batched(messages, ids, flush, batch_bytes, batch_messages, bounds, time == "publish_time")


#: most chunks whose ends are kept for one table (more: the batches alone bound the row groups)
_MAX_CHUNK_ENDS = 1 << 20


def _chunk_ends(r: Any, ids: set[int]) -> list[int] | None:
    """The sorted last log times of the input's chunks that hold ``ids`` (from its index,
    without reading data), or None when the reader knows no chunks."""
    try:
        chunks = r.chunk_message_counts(ids)
    except PolybagError:
        return None
    if not chunks or len(chunks) > _MAX_CHUNK_ENDS:
        return None
    return sorted(int(c[1]) for c in chunks)


def _jsonl(
    r: Any, t: Table, path: Path, start: int | None, end: int | None, bar: Any, release: Any, damage: list[str]
) -> int:
    ids = {c.id for c in t.channels}
    rows = 0
    budget = BATCH_BYTES
    with open_new(path, "w", encoding="utf-8") as fh:
        for m in _intact(r.messages(topics=[t.topic], start=start, end=end), damage):
            if m.channel.id not in ids:
                continue
            rec = {"log_time": m.log_time, "publish_time": m.publish_time, "message": m.to_dict()}
            fh.write(json.dumps(rec, default=_json_default, ensure_ascii=False) + "\n")
            rows += 1
            budget -= len(m.data)
            if budget < 0 and release is not None:
                release()
                budget = BATCH_BYTES
            if rows % 1024 == 0:
                bar.update(1024)
    bar.update(rows % 1024)
    return rows


def check_tables(src: Input, paths: Sequence[Path], overwrite: bool) -> None:
    """Before anything is written: no table is the input or lies inside an input directory
    (never allowed), and none exists unless ``overwrite`` -- and then only a file of the
    table's kind is replaced (a csv text file, a parquet file by its magic, a jsonl file;
    never a symbolic link or a directory)."""
    existing = []
    for path in paths:
        check_distinct(src, path)
        check_apart(src, path)
        active = path.with_name(path.name + ".active")
        if os.path.lexists(active):
            raise OutputExistsError(f"{active} exists (an interrupted export?); not overwritten: move it away")
        if os.path.lexists(path):
            existing.append(str(path))
    if existing and not overwrite:
        more = f" and {len(existing) - 3} more" if len(existing) > 3 else ""
        raise OutputExistsError(
            f"{existing[0]}: output exists ({', '.join(existing[:3])}{more}); not overwritten "
            "(--force replaces them; in Python overwrite=True; or choose another output directory)"
        )
    for p in existing:
        refuse_replacing(p, file_refusal(p))


def export(
    src: Input,
    output_dir: str | os.PathLike[str],
    *,
    format: str = "csv",  # noqa: A002
    topics: str | Sequence[str] | None = None,
    fields: Sequence[str] | None = None,
    start: int | str | None = None,
    end: int | str | None = None,
    batch_bytes: int = BATCH_BYTES,
    batch_messages: int = BATCH_MESSAGES,
    progress: bool | None = False,
    overwrite: bool = False,
    layout: str = "flat",
    time: str = "log_time",
    file_partition: str | None = None,
) -> ExportResult:
    """Write one table per topic (or channel group) of ``src`` into ``output_dir``.

    ``topics``: a regular expression matched against whole topic names, or a list of
    names (default: all).  ``start``/``end`` bound the log time: ns ints or time texts as
    the CLI reads them (``"5"`` is 5 s, ``"+2.5"`` after the log's start; see
    :mod:`polybag.selection`).  A table that fails (undecodable data) is removed, counted in
    ``failed`` and named in ``warnings``; the others are still written.

    Each table is written as ``NAME.EXT.active`` and renamed when complete.  Existing tables
    are an :class:`~polybag.errors.OutputExistsError` before anything is written, unless
    ``overwrite`` (a table is never the input).  On a failure that stops the export (a full
    disk, an interrupt) every table written by this call is removed.

    ``layout="dataset"`` (parquet only) writes a hive-partitioned dataset
    ``output_dir/topic=<table>/part-0.parquet``, with ``file_partition`` (a name made by
    :func:`partition_name`) ``output_dir/topic=<table>/file=<file_partition>/part-0.parquet``
    (see the module's text).  ``time``: one of :data:`TIMES`, the first column.
    """
    if format not in FORMATS:
        raise UsageError(f"export format must be one of {', '.join(FORMATS)}, not {format!r}")
    _check_options(format, layout, time, file_partition)
    from polybag.io.upload import local_output, output_url

    url = output_url(output_dir)  # a URL prefix: the tables are written locally, then uploaded
    out = Path(local_output(os.fspath(output_dir)))
    result = ExportResult(input=input_name(src), output_dir=url or str(out), format=format, layout=layout)
    with open_input(src, tolerant=True) as r:  # (a ULog: every intact message, damage reported)
        summary = r.summary
        window = TimeWindow.parse(start, end, summary.start_time)
        names, by_topic = _select_topics(summary, topics)
        plan = [(topic, table) for topic in names for table in plan_tables(topic, by_topic.get(topic, []))]
        name_tables([table for _, table in plan])
        counts = summary.message_counts or {}
        total = sum(int(counts.get(c.id, 0)) for t in names for c in by_topic.get(t, []))

        def run(out: Path, made_dir: bool) -> None:
            make_folder(out)
            job = _Export(
                r=r, out=out, format=format, fields=fields, window=window, batch_bytes=batch_bytes,
                batch_messages=batch_messages, overwrite=overwrite, result=result,
                is_ulog=_instance_tables(r),  # ULog instances: tables from its own records
                release=page_releaser(r),  # drop the input's mapped pages already exported
                layout=layout, time=time, file_partition=file_partition,
            )
            _write_tables(job, plan, total, progress, made_dir)
            _report_recovered(r, result)

        if url is None:
            rels = [table_path(table, format, layout, file_partition) for _, table in plan]
            if layout == "dataset":
                check_dataset(out, rels, overwrite)
            check_tables(src, [out / rel for rel in rels], overwrite)
            run(out, not out.exists())
            return result
        from polybag.io.upload import check_destination, check_url_files, join, staged

        rels = [table_path(table, format, layout, file_partition) for _, table in plan]
        if layout == "dataset":
            # its part files must be new (or --force): checked object by object when they are
            # uploaded (other inputs' file=... partitions of the same dataset are no clash)
            check_destination(url)
        else:
            check_url_files(url, rels, overwrite)
        with staged(url, merge=True, overwrite=overwrite, progress=progress) as local:
            run(Path(local), True)
            made = {str(Path(local) / rel): rel for rel in rels}
        for tr in result.tables:
            rel = made.get(tr.path) if layout == "dataset" else None
            tr.path = join(url, rel if rel is not None else os.path.basename(tr.path))
    return result


def _check_options(format: str, layout: str, time: str, file_partition: str | None) -> None:  # noqa: A002
    """A :class:`UsageError` for an option value ``export`` does not take."""
    if layout not in LAYOUTS:
        raise UsageError(f"export layout must be one of {', '.join(LAYOUTS)}, not {layout!r}")
    if layout == "dataset" and format != "parquet":
        raise UsageError(f"the dataset layout is for parquet, not {format} (use the flat layout)")
    if time not in TIMES:
        raise UsageError(f"export time must be one of {', '.join(TIMES)}, not {time!r}")
    if time != "log_time" and format == "jsonl":
        raise UsageError("a time choice is for csv and parquet tables (jsonl records hold log_time and publish_time)")
    if file_partition is not None:
        if layout != "dataset":
            raise UsageError("a file partition is for the dataset layout")
        if file_partition != partition_name(file_partition):
            raise UsageError(f"file partition {file_partition!r}: not a name partition_name makes (letters, digits, . _ - ~)")


def partition_name(name: str) -> str:
    """A safe ``file=`` partition value for an input's file name without extension: every
    character but letters, digits, ``.``, ``_`` and ``-`` as ``_`` (``file`` when empty)."""
    return re.sub(r"[^A-Za-z0-9._~-]", "_", name) or "file"


def table_path(table: Table, format: str, layout: str = "flat", file_partition: str | None = None) -> str:  # noqa: A002
    """Where ``table`` is written, relative to the output directory (``/``-separated)."""
    if layout != "dataset":
        return f"{table.name}.{format}"
    part = f"file={file_partition}/" if file_partition is not None else ""
    return f"topic={table.name}/{part}{PART_NAME}"


def _dir_refusal(d: Path) -> str | None:
    """Why polybag may not write a dataset's files inside ``d`` (None: it is a real directory
    or nothing is there)."""
    try:
        st = os.lstat(d)
    except FileNotFoundError:
        return None
    except OSError as e:
        return f"cannot be examined ({e.strerror or e})"
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link (never followed)"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a directory"
    return None


def _foreign_entry(d: Path, allowed: Callable[[str, Path], bool]) -> str | None:
    """The first entry of the directory ``d`` that polybag does not write there."""
    try:
        names = sorted(os.listdir(d))[:100_000]
    except FileNotFoundError:
        return None
    except OSError as e:
        return f"{d}: cannot be listed ({e.strerror or e})"
    for name in names:
        if not allowed(name, d / name):
            return str(d / name)
    return None


def _not_prefixed(prefix: str, name: str, _path: Path) -> bool:
    return not name.startswith(prefix)


def _is_dir(p: Path) -> bool:
    return _dir_refusal(p) is None and os.path.isdir(p)


def check_dataset(out: Path, rels: Sequence[str], overwrite: bool) -> None:
    """Before anything is written to a dataset: every directory on a table's path is a real
    directory (never a symbolic link); one topic's directory never mixes the one-input and
    several-input layouts; and with ``overwrite`` the directories hold nothing but what
    polybag writes there (``topic=*`` directories in ``out``, ``file=*`` directories or
    ``part-0.parquet`` in a topic's, ``part-0.parquet`` in a file's): else an
    :class:`OutputExistsError` and nothing is written."""
    why = _dir_refusal(out)
    if why is not None:
        raise OutputExistsError(f"{out}: {why}; a dataset's directory must be a real directory: choose another output")
    seen: set[Path] = set()
    for rel in rels:
        parts = rel.split("/")
        d = out
        for i, name in enumerate(parts[:-1]):
            d = d / name
            why = _dir_refusal(d)
            if why is not None:
                raise OutputExistsError(
                    f"{d}: exists and {why}; polybag makes a dataset's directories itself: move it away"
                )
            if i == 0 and d not in seen:
                seen.add(d)
                mine = PART_NAME if len(parts) == 3 else "file="  # (the other layout's entries)
                other = _foreign_entry(d, functools.partial(_not_prefixed, mine))
                if other is not None and os.path.lexists(other):
                    raise OutputExistsError(
                        f"{other}: the table's directory holds a dataset of another layout (one input / "
                        "several inputs); export into another directory"
                    )
    if not overwrite:
        return

    def top(name: str, p: Path) -> bool:
        return name.startswith("topic=") and _is_dir(p)

    def topic_dir(name: str, p: Path) -> bool:
        return name == PART_NAME or (name.startswith("file=") and _is_dir(p))

    def file_dir(name: str, _p: Path) -> bool:
        return name == PART_NAME

    checks: list[tuple[Path, Callable[[str, Path], bool]]] = [(out, top)]
    for rel in rels:
        parts = rel.split("/")
        checks.append((out / parts[0], topic_dir))
        if len(parts) == 3:
            checks.append((out / parts[0] / parts[1], file_dir))
    for d, allowed in checks:
        other = _foreign_entry(d, allowed)
        if other is not None:
            refuse_replacing(str(d), f"holds {other}, which polybag does not write in a dataset")


def _make_parents(job: _Export, path: Path) -> None:
    """The directories between the output directory and ``path``, made one by one (an
    existing one must be a real directory: never a symbolic link)."""
    d = job.out
    for name in path.relative_to(job.out).parts[:-1]:
        d = d / name
        try:
            os.mkdir(d)
            job.made_dirs.append(d)
        except FileExistsError:
            why = _dir_refusal(d)
            if why is not None:
                raise OutputExistsError(f"{d}: exists and {why}; polybag makes a dataset's directories itself") from None


def _remove_made_dirs(job: _Export) -> None:
    """The directories this call made that stayed empty (a failed table's)."""
    for d in reversed(job.made_dirs):
        try:
            d.rmdir()  # only if empty
        except OSError:
            pass
    job.made_dirs.clear()


def table_metadata(r: Any, table: Table, channel: Channel, source: str, time: str) -> dict[bytes, bytes]:
    """A parquet table's schema metadata (bytes keys and values, see the module's text)."""
    from polybag._version import __version__

    s = channel.schema
    md: dict[str, str] = {
        "polybag.topic": table.topic,
        "polybag.table": table.name,
        "polybag.type": channel.type_name,
        "polybag.definition": bytes(s.data).decode("utf-8", "replace") if s is not None else "",
        "polybag.schema_encoding": s.encoding if s is not None else "",
        "polybag.message_encoding": channel.message_encoding,
        "polybag.source": os.path.basename(source.rstrip("/")) or source,
        "polybag.time": time,
        "polybag.version": __version__,
    }
    md5 = str(channel.metadata.get("md5sum", "") or "")
    if md5 and md5 != "*":
        md["polybag.md5"] = md5
    type_hash = str(channel.metadata.get("topic_type_hash", "") or channel.metadata.get("type_description_hash", "") or "")
    if type_hash:
        md["polybag.type_hash"] = type_hash
    if table.multi_id is not None:
        md["polybag.multi_id"] = str(table.multi_id)
    return {k.encode(): v.encode("utf-8", "replace") for k, v in md.items()}


def _report_recovered(r: Any, result: ExportResult) -> None:
    """The damage a recovering read of a ULog met (every intact message was exported):
    counted in ``damaged`` (the command exits 1) and named in a warning."""
    report = r.recovery_report
    errors = list(report.get("errors") or ()) if report else []
    if errors:
        result.damaged = max(result.damaged, 1)
        more = f" (and {len(errors) - 1} more place(s))" if len(errors) > 1 else ""
        result.warn(f"the input is damaged: {r.path or result.input}: {errors[0]}{more}; every intact message is exported")


def _select_topics(
    summary: Any, topics: str | Sequence[str] | None
) -> tuple[list[str], dict[str, list[Channel]]]:
    """The topic names ``topics`` selects (sorted; none is an error) and every topic's channels."""
    names = sorted(summary.topics())
    ids = require_topics(topics, summary.channels.values())  # (none: EmptySelectionError)
    if ids is not None:
        chosen = {summary.channels[i].topic for i in ids}
        names = [t for t in names if t in chosen]
    by_topic: dict[str, list[Channel]] = {}
    for ch in summary.channels.values():
        by_topic.setdefault(ch.topic, []).append(ch)
    return names, by_topic


@dataclass
class _Export:
    """One ``export`` call: what its tables are written from and with, and what it wrote."""

    r: Any
    out: Path
    format: str
    fields: Sequence[str] | None
    window: TimeWindow
    batch_bytes: int
    batch_messages: int
    overwrite: bool
    result: ExportResult
    is_ulog: bool = False
    release: Callable[[], None] | None = None
    layout: str = "flat"
    time: str = "log_time"
    file_partition: str | None = None
    made_dirs: list[Path] = field(default_factory=list)  # the dataset directories this call made
    written: list[Path] = field(default_factory=list)  # the tables of this call, removed if it stops half-way
    tmp: Path | None = None  # the table being written (``.active``)
    #: the tables complete so far (``.active``, their path, their result), put in place at the end
    pending: list[tuple[Path, Path, TableResult]] = field(default_factory=list)


def _write_tables(
    job: _Export, plan: list[tuple[str, Table]], total: int, progress: bool | None, made_dir: bool
) -> None:
    """Every table of ``plan``; on a failure that stops the export, every table written by
    this call is removed (and the output directory, if made by it and empty)."""
    try:
        with make_progress(total, f"export {os.path.basename(job.result.input)}", progress) as bar:
            for topic, table in plan:
                _write_table(job, topic, table, bar)
        _place_tables(job)
        _remove_made_dirs(job)  # (only those left empty: a failed table's)
    except BaseException as e:
        failed_table = job.tmp
        if job.tmp is not None:
            job.tmp.unlink(missing_ok=True)
        for tmp, _, _ in job.pending:
            tmp.unlink(missing_ok=True)
        for p in job.written:
            p.unlink(missing_ok=True)
        _remove_made_dirs(job)
        if made_dir:
            try:
                job.out.rmdir()  # only if empty
            except OSError:
                pass
        if isinstance(e, OSError) and e.filename is None and failed_table is not None:
            # a full disk: name the table being written
            raise named_os_error(e, str(failed_table)[: -len(".active")]) from e
        if isinstance(e, OSError) and failed_table is not None and e.filename is not None and os.fspath(e.filename) == str(failed_table):
            # (its NAME.active could not be created: named by the table, not the temporary name)
            raise as_output_error(e, str(failed_table)[: -len(".active")]) from e
        raise


def _write_table(job: _Export, topic: str, table: Table, bar: Any) -> None:
    """One table, as ``.active`` renamed when complete; a table that fails (undecodable
    data) is removed and counted, one cut short by damage in the input is kept and reported."""
    result = job.result
    path = job.out / table_path(table, job.format, job.layout, job.file_partition)
    tmp = path.with_name(path.name + ".active")
    tr = TableResult(topic=topic, table=table.name, path=str(path))
    result.tables.append(tr)
    damage: list[str] = []
    try:
        _make_parents(job, path)
        job.tmp = tmp
        if job.format == "jsonl":
            tr.rows = _jsonl(job.r, table, tmp, job.window.start, job.window.end, bar, job.release, damage)
        else:
            _write_columns(job, table, tmp, bar, tr, damage)
    except OutputExistsError:
        job.tmp = None  # (not ours: created by someone else meanwhile) never removed
        raise
    except PolybagError as e:
        result.failed += 1
        label = topic if table.suffix is None else f"{topic} [{table.suffix}]"
        tr.error = str(e)
        result.warn(f"{label}: {e}")
        tmp.unlink(missing_ok=True)
        job.tmp = None
        return
    if damage:
        # the rows before the damage are kept; the table is reported as short
        result.damaged += 1
        tr.damage = damage[0]
        label = topic if table.suffix is None else f"{topic} [{table.suffix}]"
        result.warn(f"the input is damaged; tables end at the damage: {damage[0]}")
        result.warn(f"{label}: cut short by the damage ({tr.rows} rows before it written)")
    job.tmp = None
    job.pending.append((tmp, path, tr))
    result.messages += tr.rows


def _place_tables(job: _Export) -> None:
    """Rename every complete table into place (the tables they replace stay until then)."""
    while job.pending:
        tmp, path, tr = job.pending[0]
        job.tmp = tmp
        place_file(tmp, path, job.overwrite)
        job.pending.pop(0)
        job.tmp = None
        job.written.append(path)
        tr.bytes = path.stat().st_size


def _write_columns(job: _Export, table: Table, tmp: Path, bar: Any, tr: TableResult, damage: list[str]) -> None:
    """A csv or parquet table into ``tmp``, a batch of columns at a time."""
    ulog = job.is_ulog and table.multi_id is not None
    sink: Any
    if job.format == "csv":
        sink = _CsvSink(tmp, table.topic)
    else:
        channel = _ulog_channel(job.r, table) if ulog else table.channels[0]
        meta = table_metadata(job.r, table, channel, job.result.input, job.time)
        sink = _ParquetSink(tmp, table.topic, meta, {} if ulog else _declared_types(channel))
    notes: list[str] = []
    try:
        blocks = _blocks(
            job.r, table, job.fields, job.window, job.batch_bytes, job.batch_messages, damage, ulog, job.time, notes
        )
        for cols, n in blocks:
            if isinstance(sink, _ParquetSink) and sink.writer is None:  # the time column there is
                have = next((k for k in (job.time, "log_time", "timestamp") if k in cols), "")
                sink.metadata[b"polybag.time"] = have.encode()
            sink.write(cols, n)
            bar.update(n)
            del cols
            if job.release is not None:
                job.release()
    finally:
        sink.close()
    tr.rows = sink.rows
    for note in notes:
        job.result.warn(note)
    late = getattr(sink, "late", None)
    if late:
        job.result.warn(f"{table.name}: columns first seen after the first block left out: {', '.join(sorted(late))}")
