"""``export``: each topic as a csv, parquet or jsonl table, streamed with bounded memory.

csv and parquet hold one column per leaf field (``header.stamp`` in ns, ``pose.position.x``,
``covariance[0]``); variable-length fields are JSON text in csv and list columns in
parquet; ``uint8[]`` / bytes fields are base64 text in csv and binary in parquet.  jsonl
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
"""

from __future__ import annotations

import base64
import csv
import json
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from polybag.errors import OutputExistsError, PolybagError, UnsupportedError
from polybag.formats import registry
from polybag.io.output_files import file_refusal, named_os_error, open_new, place_file, refuse_replacing
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


def table_name(topic: str) -> str:
    name = topic.strip("/").replace("/", ".")
    name = re.sub(r"[^A-Za-z0-9._-]", "_", name)
    return name or "root"


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


def _arrow_column(col: np.ndarray) -> Any:
    import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information

    if col.dtype == object:
        vals = [x.tolist() if isinstance(x, np.ndarray) and x.dtype != np.uint8 else x for x in col]
        vals = [bytes(x) if isinstance(x, (bytearray, memoryview)) else x for x in vals]
        vals = [x.tobytes() if isinstance(x, np.ndarray) else x for x in vals]
        return pa.array(vals)
    if col.ndim > 1:
        return pa.array(list(col))
    return pa.array(col)


class _ParquetSink:
    def __init__(self, path: Path, topic: str = "") -> None:
        try:
            import pyarrow  # noqa: F401
            import pyarrow.parquet  # type: ignore[import-untyped]  # noqa: F401  # no type information
        except ImportError:
            raise UnsupportedError("parquet export needs pyarrow: pip install 'polybag[arrow]'") from None
        self.path = path
        self.topic = topic
        self.writer: Any = None
        self.schema: Any = None
        self.rows = 0
        self.fh = open_new(path, "wb")  # created exclusively: pyarrow never opens the name itself

    def write(self, cols: dict[str, np.ndarray], n: int) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        arrays = {re.sub(r"\s+", "_", k): _arrow_column(v) for k, v in cols.items()}
        table = pa.table(arrays)
        if self.writer is None:
            # a column all null in the first block gets its type from a later block: keep it
            # null-typed only if it never learns one (parquet needs one schema up front)
            self.schema = table.schema.with_metadata({"polybag.topic": self.topic})
            table = table.replace_schema_metadata(self.schema.metadata)
            self.writer = pq.ParquetWriter(self.fh, self.schema)
        elif table.schema != self.schema:
            try:
                table = _conform(table, self.schema)
            except (pa.ArrowInvalid, pa.ArrowTypeError, KeyError, ValueError) as e:
                raise PolybagError(f"{self.path.name}: a later block has other column types: {e}") from None
        self.writer.write_table(table)
        self.rows += n

    def close(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            if self.writer is None:
                empty = pa.table({"log_time": pa.array([], pa.int64())})
                pq.write_table(empty.replace_schema_metadata({"polybag.topic": self.topic}), self.fh)
            else:
                self.writer.close()
        finally:
            self.fh.close()


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


def _ulog_flush(r: Any, t: Table, fields: Sequence[str] | None, timed: bool) -> tuple[set[int], Flush]:
    """One ULog instance: its data channel, and each batch decoded at once to a structured
    array of pyulog's fields."""
    from polybag.codecs import codec_for
    from polybag.codecs.ulog import UlogCodec

    ch = _ulog_channel(r, t)
    codec = codec_for(ch)
    assert isinstance(codec, UlogCodec), f"{t.topic}: a ULog instance's data channel has a ULog codec"
    utype = codec.type
    names = _ulog_names(utype, t.topic, fields, timed)
    fixed = [n for n in names if n != "log_time"]

    def flush(times: list[int], datas: list[Any]) -> dict[str, np.ndarray]:
        arr = codec.records(datas)
        cols = {n: arr[n] for n in fixed}
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
) -> Iterator[tuple[dict[str, np.ndarray], int]]:
    """``(columns, rows)`` per batch of the messages on ``channel_ids``; at least one batch
    (empty tables still get their header)."""
    times: list[int] = []
    datas: list[Any] = []
    size = 0
    yielded = False
    for m in messages:
        if m.channel.id not in channel_ids:
            continue
        times.append(m.log_time)
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


def _message_flush(t: Table, fields: Sequence[str] | None) -> tuple[set[int], Flush]:
    """A topic's channels, and each batch decoded to columns (see ``payload_columns``)."""
    from polybag.codecs import codec_for
    from polybag.codecs.columns import payload_columns

    codec = codec_for(t.channels[0])
    ids = {c.id for c in t.channels}
    seen_fields = fields is None

    def flush(times: list[int], datas: list[Any]) -> dict[str, np.ndarray]:
        nonlocal seen_fields
        cols = payload_columns(codec, datas, fields, topic=t.topic)
        if not seen_fields and fields and datas:
            names = list(cols)
            for f in fields:
                if not any(c == f or c.startswith(f + ".") or c.startswith(f + "[") for c in names):
                    raise PolybagError(f"no field {f!r}; fields: {', '.join(names) or '(none)'}")
            seen_fields = True
        return {"log_time": np.array(times, dtype=np.int64), **cols}

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
) -> Iterator[tuple[dict[str, np.ndarray], int]]:
    """One table in batches of columns.  A ULog instance (``ulog``): its data messages in
    file order (the reader's public ``messages``), decoded a batch at a time by its own
    records; any other table: its messages in log-time order, decoded to columns."""
    if ulog:
        ids, flush = _ulog_flush(r, t, fields, window.start is not None or window.end is not None)
        order = "file"
    else:
        ids, flush = _message_flush(t, fields)
        order = "log_time"
    start, end = window
    messages = _intact(r.messages(topics=[t.topic], start=start, end=end, order=order), damage)
    yield from _batched(messages, ids, flush, batch_bytes, batch_messages)


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


def _check_tables(src: Input, paths: Sequence[Path], overwrite: bool) -> None:
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
    """
    if format not in FORMATS:
        raise PolybagError(f"export format must be one of {', '.join(FORMATS)}, not {format!r}")
    from polybag.io.upload import local_output, output_url

    url = output_url(output_dir)  # a URL prefix: the tables are written locally, then uploaded
    out = Path(local_output(os.fspath(output_dir)))
    result = ExportResult(input=input_name(src), output_dir=url or str(out), format=format)
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
            )
            _write_tables(job, plan, total, progress, made_dir)
            _report_recovered(r, result)

        if url is None:
            _check_tables(src, [out / f"{table.name}.{format}" for _, table in plan], overwrite)
            run(out, not out.exists())
            return result
        from polybag.io.upload import check_url_files, join, staged

        check_url_files(url, [f"{table.name}.{format}" for _, table in plan], overwrite)
        with staged(url, merge=True, overwrite=overwrite, progress=progress) as local:
            run(Path(local), True)
        for tr in result.tables:
            tr.path = join(url, os.path.basename(tr.path))
    return result


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
    except BaseException as e:
        failed_table = job.tmp
        if job.tmp is not None:
            job.tmp.unlink(missing_ok=True)
        for tmp, _, _ in job.pending:
            tmp.unlink(missing_ok=True)
        for p in job.written:
            p.unlink(missing_ok=True)
        if made_dir:
            try:
                job.out.rmdir()  # only if empty
            except OSError:
                pass
        if isinstance(e, OSError) and e.filename is None and failed_table is not None:
            # a full disk: name the table being written
            raise named_os_error(e, str(failed_table)[: -len(".active")]) from e
        raise


def _write_table(job: _Export, topic: str, table: Table, bar: Any) -> None:
    """One table, as ``.active`` renamed when complete; a table that fails (undecodable
    data) is removed and counted, one cut short by damage in the input is kept and reported."""
    result = job.result
    path = job.out / f"{table.name}.{job.format}"
    tmp = job.tmp = path.with_name(path.name + ".active")
    tr = TableResult(topic=topic, table=table.name, path=str(path))
    result.tables.append(tr)
    damage: list[str] = []
    try:
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
    sink: Any = _CsvSink(tmp, table.topic) if job.format == "csv" else _ParquetSink(tmp, table.topic)
    try:
        ulog = job.is_ulog and table.multi_id is not None
        blocks = _blocks(job.r, table, job.fields, job.window, job.batch_bytes, job.batch_messages, damage, ulog)
        for cols, n in blocks:
            sink.write(cols, n)
            bar.update(n)
            del cols
            if job.release is not None:
                job.release()
    finally:
        sink.close()
    tr.rows = sink.rows
    late = getattr(sink, "late", None)
    if late:
        job.result.warn(f"{table.name}: columns first seen after the first block left out: {', '.join(sorted(late))}")
