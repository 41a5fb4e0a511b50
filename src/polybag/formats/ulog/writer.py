"""PX4 ULog writer: a valid ULog (version 1) from the model or from columns.

The definitions section (header, flag bits, formats, info, multi-info, parameters, default
parameters) must come before any data, but formats and info can be added at any time, so
the data section is spooled to a temporary file and the log is assembled on :meth:`close`
(into ``NAME.active``, renamed to ``NAME``).

>>> with UlogWriter("out.ulg") as w:
...     w.add_format("pos:uint64_t timestamp;float[3] xyz;")
...     ch = w.add_subscription("pos")
...     w.write_columns(ch, {"timestamp": t, "xyz[0]": x, "xyz[1]": y, "xyz[2]": z})

From another reader: ``w.write_message(m)`` for every message (``order="file"`` keeps each
topic's order), after ``w.copy_extras(reader.ulog)`` for info, parameters and dropouts.
"""

from __future__ import annotations

import heapq
import shutil
import struct
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from polybag.codecs.ulog import (
    LOGGED_STRING_SCHEMA,
    LOGGED_STRING_TEXT,
    FormatDef,
    UlogType,
    compile_type,
    parse_schema_text,
    schema_text,
    unpack_logged_string,
)
from polybag.errors import UnsupportedError, WriteError
from polybag.formats.ulog import records as rec
from polybag.formats.ulog.writer_definitions import DefinitionsSection
from polybag.io.output_files import AtomicFile
from polybag.model import Channel, Schema
from polybag.writer import Writer, check_open

_D_HEAD = struct.Struct("<HBH")


class UlogWriter(Writer):
    """A ULog file written from the model or from columns (see the module notes); the
    definitions section (formats, info, parameters) is kept by a
    :class:`~polybag.formats.ulog.writer_definitions.DefinitionsSection`
    (``self.definitions``)."""

    format = "ulog"

    def __init__(
        self,
        path_or_stream: Any,
        *,
        format: str | None = None,  # noqa: A002 - Writer's dispatch keyword
        start_timestamp: int | None = None,
        version: int = 1,
        compat_flags: Sequence[int] | None = None,
        sync_interval: int = 0,
        spool_size: int = 64 << 20,
        overwrite: bool = True,
    ) -> None:
        if format not in (None, "ulog"):
            raise UnsupportedError(f"UlogWriter writes ULog, not {format!r}")
        self._out = AtomicFile(path_or_stream, overwrite=overwrite)
        self._data: tempfile.SpooledTemporaryFile[bytes] = tempfile.SpooledTemporaryFile(max_size=spool_size)  # noqa: SIM115
        self.start_timestamp = start_timestamp
        self.version = version
        self.definitions = DefinitionsSection(
            list(compat_flags or [0] * 8)[:8] + [0] * max(0, 8 - len(compat_flags or [0] * 8))
        )
        self.sync_interval = sync_interval
        self._schemas: dict[int, Schema] = {}
        self._channels: dict[int, Channel] = {}
        self._msg_ids: dict[int, int] = {}  # channel id -> msg_id
        self._types: dict[int, UlogType] = {}  # channel id -> type
        self._next_msg_id = 0
        self._first_time: int | None = None  # us
        self._running_max = 0  # us
        self._pending: list[tuple[int, int, bytes]] = []  # heap of (time us, seq, message bytes)
        self._seq = 0
        self._since_sync = 0
        self.closed = False

    # --- definitions (kept by self.definitions) ----------------------------------------------
    @property
    def closed(self) -> bool:
        """Whether the writer is closed (the definitions section refuses additions then)."""
        return self.definitions.closed

    @closed.setter
    def closed(self, value: bool) -> None:
        self.definitions.closed = value

    @property
    def formats(self) -> dict[str, FormatDef]:
        """The formats defined so far, by name."""
        return self.definitions.formats

    @property
    def compat_flags(self) -> list[int]:
        """The compat flags of the flag bits message."""
        return self.definitions.compat_flags

    @property
    def info(self) -> dict[str, tuple[str, Any]]:
        """The info messages: key -> (type, value)."""
        return self.definitions.info

    @property
    def info_multiple(self) -> list[tuple[str, str, list[Any]]]:
        """The multi-info entries: (key, type, values)."""
        return self.definitions.info_multiple

    @property
    def params(self) -> dict[str, Any]:
        """The parameters of the definitions section."""
        return self.definitions.params

    @property
    def default_params(self) -> dict[str, tuple[int, Any]]:
        """The default parameters: name -> (default types, value)."""
        return self.definitions.default_params

    def add_format(self, text: str | FormatDef) -> FormatDef:
        """Register a message format (``name:type field;...``)."""
        return self.definitions.add_format(text)

    def add_info(self, key: str, value: Any, type: str | None = None) -> None:  # noqa: A002
        """An ``I`` message; the type is inferred (strings char[n], ints int32, floats float)."""
        self.definitions.add_info(key, value, type)

    def add_info_multiple(self, key: str, values: Sequence[Any], type: str | None = None) -> None:  # noqa: A002
        """One multi-info entry: ``values`` are written as one message and its continuations."""
        self.definitions.add_info_multiple(key, values, type)

    def add_param(self, name: str, value: int | float) -> None:
        """A ``P`` message of the definitions section."""
        self.definitions.add_param(name, value)

    def add_default_param(self, name: str, value: int | float, default_types: int = 1) -> None:
        """A ``Q`` message; ``default_types`` bit 0: system default, bit 1: current setup."""
        self.definitions.add_default_param(name, value, default_types)

    def add_format_extras(self, name: str, metadata: Mapping[str, str]) -> bool:
        """The ``ulog_info`` / ``ulog_params`` / ``ulog_default_params_<bit>`` metadata
        records of a ULog converted to MCAP, back into info, parameter and default
        parameter messages; True when ``name`` is one of them (see
        :meth:`~polybag.formats.ulog.writer_definitions.DefinitionsSection.add_format_extras`)."""
        return self.definitions.add_format_extras(name, metadata)

    def copy_definitions(self, ulog: Any) -> None:
        """Info, multi-info, parameters and defaults of ``ulog`` (a read log or anything with
        those dicts), and its compat flags or-ed into this writer's."""
        self.definitions.copy_definitions(ulog)

    def copy_extras(self, ulog: Any, *, changed_params: bool = True, dropouts: bool = True, formats: bool = True, syncs: bool = True) -> None:
        """Info, multi-info, parameters, defaults (and timed changes, dropouts) of a read log;
        with ``formats`` every format it defines (also those no subscription uses), with
        ``syncs`` its sync messages, each placed after the data up to its time (see
        ``UlogData.syncs``), so a ULog -> ULog copy keeps them all."""
        self.start_timestamp = ulog.start_timestamp if self.start_timestamp is None else self.start_timestamp
        if formats:
            for fmt in getattr(ulog, "formats", {}).values():
                if fmt.name not in self.formats:
                    self.add_format(fmt)
        self.copy_definitions(ulog)
        for i, v in enumerate(ulog.incompat_flags):
            if v & ~rec.KNOWN_INCOMPAT[i]:
                raise UnsupportedError(f"cannot copy unknown incompat flag bits 0x{v:02x} (byte {i})")
        if changed_params:
            for ts, name, value in ulog.changed_params:
                self.change_param(name, value, ts)
        if dropouts:
            for d in ulog.dropouts:
                self.add_dropout(d.duration, d.timestamp)
        if syncs:
            for ts in getattr(ulog, "syncs", []):
                self._timed(rec.pack_sync(), ts)

    # --- model interface ------------------------------------------------------------------
    def add_schema(self, name: str, encoding: str, data: bytes) -> Schema:
        check_open(self.closed)
        if encoding != "ulog":
            raise UnsupportedError(f"ULog files hold ULog formats, not {encoding!r} schemas ({name})")
        if name != LOGGED_STRING_SCHEMA:
            try:
                fmts = parse_schema_text(data)
            except ValueError as e:
                raise WriteError(f"schema {name}: {e}") from None
            for fmt in fmts.values():
                self.add_format(fmt)
            if name not in self.formats:
                raise WriteError(f"schema {name} does not define format {name}")
        schema = Schema(len(self._schemas) + 1, name, encoding, bytes(data))
        self._schemas[schema.id] = schema
        return schema

    def add_channel(self, topic: str, message_encoding: str, schema: Schema | None = None, metadata: Mapping[str, str] | None = None) -> Channel:
        check_open(self.closed)
        if message_encoding != "ulog" or schema is None or schema.encoding != "ulog":
            raise UnsupportedError(
                f"topic {topic}: ULog files hold ULog-encoded messages, not {message_encoding!r}"
            )
        metadata = dict(metadata or {})
        cid = len(self._channels)
        if schema.name == LOGGED_STRING_SCHEMA:
            ch = Channel(cid, topic, "ulog", schema, metadata)
            self._channels[cid] = ch
            return ch
        if topic != schema.name:
            raise WriteError(f"a ULog subscription's topic is its format name: {topic!r} != {schema.name!r}")
        try:
            multi_id = int(metadata.get("multi_id", 0))
        except (TypeError, ValueError):
            raise WriteError(f"topic {topic}: multi_id {metadata.get('multi_id')!r} is not a number") from None
        return self.add_subscription(topic, multi_id, schema=schema)

    def add_ulog_subscription(self, name: str, multi_id: int, formats: Sequence[str]) -> Channel:
        for text in formats:
            self.add_format(text)
        return self.add_subscription(name, multi_id)

    def add_subscription(self, name: str, multi_id: int = 0, *, schema: Schema | None = None) -> Channel:
        """Subscribe message ``name`` (its format must be known) as instance ``multi_id``."""
        check_open(self.closed)
        if name not in self.formats:
            raise WriteError(f"no format for {name!r}: add_format() it first")
        try:
            utype = compile_type(name, self.formats)
        except ValueError as e:
            raise WriteError(f"format {name}: {e}") from None
        if utype.timestamp_offset < 0:
            raise WriteError(f"format {name} has no timestamp field")
        if not 0 <= multi_id <= 255:
            raise WriteError(f"multi_id must be 0..255, not {multi_id}")
        if self._next_msg_id > 0xFFFF:
            raise WriteError("a ULog file holds at most 65536 subscriptions")
        msg_id = self._next_msg_id
        self._next_msg_id += 1
        if schema is None:
            schema = Schema(len(self._schemas) + 1, name, "ulog", schema_text(name, self.formats))
            self._schemas[schema.id] = schema
        cid = len(self._channels)
        ch = Channel(cid, name, "ulog", schema, {"multi_id": str(multi_id), "msg_id": str(msg_id)})
        self._channels[cid] = ch
        self._msg_ids[cid] = msg_id
        self._types[cid] = utype
        self._data.write(rec.Subscription(multi_id, msg_id, name).pack())
        return ch

    def _note_time(self, us: int) -> None:
        if self._first_time is None or us < self._first_time:
            self._first_time = us
        new_max = max(self._running_max, us)
        while self._pending and self._pending[0][0] < new_max:
            self._data.write(heapq.heappop(self._pending)[2])
        self._running_max = new_max

    def _maybe_sync(self) -> None:
        if self.sync_interval:
            self._since_sync += 1
            if self._since_sync >= self.sync_interval:
                self._since_sync = 0
                self._data.write(rec.pack_sync())

    def write(self, channel: Channel, data: bytes | memoryview, log_time: int, publish_time: int | None = None, sequence: int = 0) -> None:
        check_open(self.closed)
        cid = channel.id
        self._check_channel(channel, self._channels.get(cid))
        if channel.schema is not None and channel.schema.name == LOGGED_STRING_SCHEMA:
            level, tag, ts, text = unpack_logged_string(data)
            self.add_logged_string(level, text, ts, tag)
            return
        msg_id = self._msg_ids[cid]
        utype = self._types[cid]
        n = len(data)
        if n < utype.min_size or n > utype.size:
            raise WriteError(
                f"topic {channel.topic}: payload has {n} bytes, the format needs {utype.min_size}..{utype.size}"
            )
        self._note_time(log_time // 1000)
        self._data.write(_D_HEAD.pack(n + 2, rec.DATA, msg_id))
        self._data.write(data)
        self._maybe_sync()

    def add_logged_string(self, level: int | str, text: str | bytes, timestamp: int, tag: int | None = None) -> None:
        """An ``L`` message (or ``C`` with a ``tag``); ``timestamp`` in us; level '0'..'7'."""
        check_open(self.closed)
        if isinstance(level, str):
            names = {v: k for k, v in rec.LEVEL_NAMES.items()}
            level = names[level.upper()] if level.upper() in names else ord(level[:1] or "6")
        raw = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        if self._first_time is None:
            self._first_time = timestamp
        self._data.write(rec.pack_logging(level, timestamp, raw, tag))

    def change_param(self, name: str, value: int | float, timestamp: int | None = None) -> None:
        """A parameter change in the data section (at ``timestamp`` us, default: now)."""
        check_open(self.closed)
        msg = rec.pack_info(rec.PARAMETER, rec.param_type_for(value), name, value)
        self._timed(msg, timestamp)

    def add_dropout(self, duration_ms: int, timestamp: int | None = None) -> None:
        check_open(self.closed)
        self._timed(rec.pack_dropout(min(max(int(duration_ms), 0), 0xFFFF)), timestamp)

    def add_sync(self) -> None:
        check_open(self.closed)
        self._data.write(rec.pack_sync())

    def _timed(self, msg: bytes, timestamp: int | None) -> None:
        if timestamp is None or timestamp <= self._running_max:
            self._data.write(msg)
        else:
            heapq.heappush(self._pending, (timestamp, self._seq, msg))
            self._seq += 1

    def write_columns(self, channel: Channel | str, columns: Mapping[str, Any], multi_id: int = 0) -> int:
        """All rows of one subscription from pyulog-style columns (``timestamp``, ``a[0]``,
        ``nested.x``; missing fields are zero).  Returns the number of rows written."""
        check_open(self.closed)
        if isinstance(channel, str):
            channel = self.add_subscription(channel, multi_id)
        return self.write_columns_many([(channel, columns)])

    def write_columns_many(self, items: Sequence[tuple[Channel, Mapping[str, Any]]]) -> int:
        """Rows of several subscriptions interleaved by timestamp (stable), as a logger
        writes them; each item is ``(channel, columns)``.  Returns the rows written."""
        check_open(self.closed)
        blocks: list[np.ndarray] = []
        keys: list[np.ndarray] = []
        for channel, columns in items:
            rows, ts = self._column_rows(channel, columns)
            blocks.append(rows)
            keys.append(ts)
        if not blocks:
            return 0
        out, allts, order, starts_sorted = _interleave(blocks, keys)
        self._write_interleaved(out, allts[order], starts_sorted)
        if len(allts):
            self._note_time(int(allts.min()))
            self._note_time(int(allts.max()))
        return len(allts)

    def _column_rows(self, channel: Channel, columns: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        """One subscription's columns as whole ``D`` messages (an ``(n, 5 + size)`` uint8
        array) and their timestamps in us."""
        utype = self._types[channel.id]
        dt = utype.dtype
        n = len(np.asarray(columns["timestamp"]))
        arr = np.zeros(n, dtype=dt)
        for name, values in columns.items():
            if name == "log_time":
                continue
            if name not in (dt.names or ()):
                raise WriteError(f"{channel.topic}: no field {name!r} in its format")
            arr[name] = np.asarray(values)
        rows = np.empty((n, 5 + dt.itemsize), dtype=np.uint8)
        rows[:, :5] = np.frombuffer(
            _D_HEAD.pack(dt.itemsize + 2, rec.DATA, self._msg_ids[channel.id]), dtype=np.uint8
        )
        if dt.itemsize:
            rows[:, 5:] = arr.view(np.uint8).reshape(n, dt.itemsize)
        ts = arr["timestamp"].astype(np.int64) * (1000 if utype.timestamp_type == "uint8_t" else 1)
        return rows, ts

    def _write_interleaved(self, out: np.ndarray, ts_sorted: np.ndarray, starts_sorted: np.ndarray) -> None:
        """Write the interleaved rows ``out``; parameter changes and dropouts waiting for
        their time go between the rows."""
        done = 0
        running = self._running_max
        while self._pending and len(ts_sorted):
            t_item = self._pending[0][0]
            split = int(np.searchsorted(ts_sorted, t_item, side="right"))
            if split >= len(ts_sorted) and max(running, int(ts_sorted[-1])) <= t_item:
                break
            off = int(starts_sorted[split]) if split < len(ts_sorted) else len(out)
            if off > done:
                self._data.write(out[done:off].tobytes())
                done = off
            self._data.write(heapq.heappop(self._pending)[2])
        if done < len(out):
            self._data.write(out[done:].tobytes())

    # --- closing --------------------------------------------------------------------------
    def finish_output(self) -> None:
        if self.closed:
            return
        try:
            while self._pending:
                self._data.write(heapq.heappop(self._pending)[2])
            f = self._out.file
            start = self.start_timestamp if self.start_timestamp is not None else (self._first_time or 0)
            f.write(self.definitions.pack(self.version, start))
            self._data.seek(0)
            shutil.copyfileobj(self._data, f, 1 << 20)
            self._data.close()
            self._out.commit()
        finally:
            self.closed = True

    def abort_output(self, *, discard: bool = False) -> None:
        """Stop without finishing.  The data waits in a spool until :meth:`close` writes the
        definitions before it, so an unfinished ULog holds nothing readable: ``NAME.active``
        is removed either way."""
        if self._out.committed:
            return
        self.closed = True
        try:
            self._data.close()
        except (OSError, ValueError):
            pass
        self._out.discard()


def _interleave(blocks: list[np.ndarray], keys: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The rows of every block in one buffer, by timestamp (stable); returns the buffer,
    all timestamps (in block order), the sorting order and each sorted row's offset."""
    lengths = np.array([b.shape[1] for b in blocks], dtype=np.int64)
    topic = np.concatenate([np.full(len(k), i, dtype=np.int64) for i, k in enumerate(keys)])
    allts = np.concatenate(keys)
    order = np.argsort(allts, kind="stable")
    sizes = lengths[topic[order]]
    starts_sorted = np.concatenate([[0], np.cumsum(sizes)[:-1]]) if len(sizes) else sizes
    starts = np.empty_like(starts_sorted)
    starts[order] = starts_sorted
    out = np.empty(int(sizes.sum()), dtype=np.uint8)
    first = 0
    step = 1 << 14
    for rows in blocks:
        n, width = rows.shape
        st = starts[first : first + n]
        cols = np.arange(width, dtype=np.int64)
        for a in range(0, n, step):
            idx = st[a : a + step, None] + cols
            out[idx] = rows[a : a + step]
        first += n
    return out, allts, order, starts_sorted


def write_ulog(target: Any, channels_columns: Iterable[tuple[str, int, Mapping[str, Any]]], formats: Iterable[str], **options: Any) -> None:
    """Write a whole log from ``(name, multi_id, columns)`` triples and format strings."""
    w = UlogWriter(target, **options)
    with w:
        for f in formats:
            w.add_format(f)
        for name, multi_id, cols in channels_columns:
            w.write_columns(w.add_subscription(name, multi_id), cols)


__all__ = ["LOGGED_STRING_TEXT", "UlogWriter", "write_ulog"]
