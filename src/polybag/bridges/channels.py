"""Channels carried into an output: what each writable format holds, and the map from a
source channel to the channel written (through a bridge when the encoding differs)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from polybag.errors import PolybagError
from polybag.model import Channel, Schema
from polybag.writer import Writer


class Warnings(Protocol):
    """Where a channel map says what it dropped (an operation's result)."""

    def warn(self, text: str) -> None: ...


# message encodings each writable format can hold (None: anything)
HOLDS: dict[str, set[str] | None] = {"mcap": None, "bag": {"ros1"}, "ulog": {"ulog"}, "rosbag2": {"cdr"}}

Transform = Callable[[bytes | memoryview], bytes | memoryview | None]


class _Timed:
    """A transform that also needs the message's log time: ``tf(data, log_time)``."""

    timed = True

    def __init__(self, fn: Callable[[bytes | memoryview, int], bytes | memoryview | None]) -> None:
        self.fn = fn

    def __call__(self, data: bytes | memoryview, log_time: int = 0) -> bytes | memoryview | None:
        return self.fn(data, log_time)



# --- channels ------------------------------------------------------------------------------
def _md5_for(schema: Schema) -> str | None:
    try:
        from polybag.codecs.ros1 import compute_md5  # type: ignore[attr-defined]
    except ImportError:
        return None
    try:
        return str(compute_md5(schema.name, bytes(schema.data).decode("utf-8", "replace")))
    except Exception:  # noqa: BLE001 - a definition the codec cannot parse: leave md5 unset
        return None


def _channel_key(topic: str, encoding: str, schema: Schema | None, metadata: Mapping[str, str]) -> tuple:
    skey = None if schema is None else (schema.name, schema.encoding, bytes(schema.data))
    return (topic, encoding, skey, tuple(sorted(metadata.items())))


class ChannelMap:
    """Source channel -> (target channel, payload transform), created once per channel.

    Channels the target format cannot hold are dropped with a warning; ULog channels become
    ROS 1 channels (see :mod:`polybag.bridges.ulog_ros1`) for MCAP and bag targets.  Identical
    channels from several inputs share one target channel (merge).
    """

    def __init__(self, writer: Writer, fmt: str, result: Warnings) -> None:
        self.writer = writer
        self.fmt = fmt
        self.result = result
        self._by_obj: dict[int, tuple[Channel, Channel | None, Transform | None]] = {}
        self._by_key: dict[tuple, Channel] = {}
        self._schemas: dict[tuple[str, str, bytes], Schema] = {}
        self.dropped: dict[str, int] = {}
        self.types_by_topic: dict[str, set[tuple[str, str]]] = {}

    def get(self, ch: Channel) -> tuple[Channel | None, Transform | None]:
        got = self._by_obj.get(id(ch))
        if got is None or got[0] is not ch:
            out, tf = self._make(ch)
            got = self._by_obj[id(ch)] = (ch, out, tf)
        return got[1], got[2]

    def schema(self, name: str, encoding: str, data: bytes) -> Schema:
        key = (name, encoding, bytes(data))
        s = self._schemas.get(key)
        if s is None:
            s = self._schemas[key] = self.writer.add_schema(name, encoding, bytes(data))
        return s

    def _make(self, ch: Channel) -> tuple[Channel | None, Transform | None]:
        enc = ch.message_encoding
        schema = ch.schema
        metadata = dict(ch.metadata)
        tf: Transform | None = None
        holds = HOLDS.get(self.fmt)
        if enc == "ros1" and self.fmt == "ulog":
            return self._ros1_to_ulog(ch)
        if enc == "ulog" and self.fmt != "ulog":
            from polybag.bridges.ulog_ros1 import ulog_channel_to_ros1

            try:
                topic, schema, metadata, tf = ulog_channel_to_ros1(ch)
            except PolybagError as e:
                self.result.warn(f"topic {ch.topic}: cannot map ULog type to ROS 1: {e}; dropped")
                return None, None
            enc = "ros1"
        else:
            topic = ch.topic
        if holds is not None and enc not in holds:
            self.result.warn(
                f"topic {ch.topic}: {self.fmt} files cannot hold {enc or 'schemaless'!r} messages; dropped"
            )
            return None, None
        if enc == "ros1" and schema is not None:
            if "type" not in metadata and schema.name:
                metadata["type"] = schema.name
            if "md5sum" not in metadata and self.fmt == "bag":
                md5 = _md5_for(schema)
                if md5:
                    metadata["md5sum"] = md5
        key = _channel_key(topic, enc, schema, metadata)
        out = self._by_key.get(key)
        if out is None:
            wschema = None
            if schema is not None:
                wschema = self.schema(schema.name, schema.encoding, schema.data)
            out = self.writer.add_channel(topic, enc, wschema, metadata)
            self._by_key[key] = out
            tname = schema.name if schema is not None else str(metadata.get("type", ""))
            self.types_by_topic.setdefault(topic, set()).add((tname, str(metadata.get("md5sum", ""))))
        return out, tf

    def _ros1_to_ulog(self, ch: Channel) -> tuple[Channel | None, Transform | None]:
        """A ROS 1 channel as a ULog subscription (see :mod:`polybag.bridges.ros1_ulog`)."""
        from polybag.bridges.ros1_ulog import ros1_channel_to_ulog

        try:
            mp = ros1_channel_to_ulog(ch)
            if mp.logged_strings:
                key: tuple = ("logged_strings",)
                out = self._by_key.get(key)
                if out is None:
                    from polybag.codecs.ulog import LOGGED_STRING_SCHEMA, LOGGED_STRING_TEXT

                    sch = self.schema(LOGGED_STRING_SCHEMA, "ulog", LOGGED_STRING_TEXT)
                    out = self._by_key[key] = self.writer.add_channel("log_message", "ulog", sch, {})
                return out, mp.transform
            key = ("ulog", mp.name, mp.multi_id)
            out = self._by_key.get(key)
            if out is None:
                add_format = self.writer.add_format  # type: ignore[attr-defined]
                for text in mp.formats:
                    add_format(text)
                out = self._by_key[key] = self.writer.add_subscription(mp.name, mp.multi_id)  # type: ignore[attr-defined]
        except PolybagError as e:
            self.result.warn(f"topic {ch.topic}: ULog files cannot hold it: {e}; dropped")
            return None, None
        tf = mp.transform
        if mp.timed and tf is not None:
            tf = _Timed(tf)
        return out, tf

    def conflicts(self) -> list[str]:
        """Topics written with more than one type or md5sum."""
        out = []
        for topic, types in sorted(self.types_by_topic.items()):
            names = {t for t, _ in types}
            md5s = {m for _, m in types if m}
            if len(names) > 1 or len(md5s) > 1:
                desc = ", ".join(f"{t or '?'} ({m or 'no md5'})" for t, m in sorted(types))
                out.append(f"topic {topic}: conflicting types: {desc}")
        return out


