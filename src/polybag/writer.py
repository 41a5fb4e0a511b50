"""The writer interface every format implements, and the atomic-file helper.

``polybag.Writer(path, format=None, **options)`` is this class: constructing it picks the
format's subclass from ``format=`` or the file extension.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, BinaryIO

from polybag.errors import UnsupportedError, WriteError
from polybag.model import Attachment, Channel, Message, Metadata, Schema

EXTENSIONS = {".mcap": "mcap", ".bag": "bag", ".ulg": "ulog", ".ulog": "ulog"}
WRITERS = {
    "mcap": "polybag.formats.mcap.writer:McapWriter",
    "bag": "polybag.formats.bag.writer:BagWriter",
    "ulog": "polybag.formats.ulog.writer:UlogWriter",
}


def format_for_path(path: str | os.PathLike[str]) -> str:
    p = os.fspath(path)
    if p.endswith(".active"):
        p = p[: -len(".active")]
    ext = os.path.splitext(p)[1].lower()
    if ext not in EXTENSIONS:
        raise UnsupportedError(f"{p}: cannot tell the format from the extension {ext!r}; pass format=")
    return EXTENSIONS[ext]


def _load(spec: str) -> Any:
    import importlib

    mod, _, name = spec.partition(":")
    return getattr(importlib.import_module(mod), name)


class Writer:
    """Base of all format writers.

    ``Writer("out.mcap", compression="zstd")`` returns the MCAP writer; subclasses implement
    ``add_schema``, ``add_channel``, ``write``, ``add_attachment``, ``add_metadata`` and
    ``close``.
    """

    format: str = ""

    def __new__(cls, path: Any = None, *args: Any, format: str | None = None, **kwargs: Any) -> Writer:
        if cls is Writer:
            fmt = format or format_for_path(path)
            if fmt not in WRITERS:
                raise UnsupportedError(f"no writer for format {fmt!r} (known: {', '.join(WRITERS)})")
            sub = _load(WRITERS[fmt])
            return super().__new__(sub)
        return super().__new__(cls)

    # Subclasses define __init__(self, path_or_stream, *, format=None, compression=..., chunk_size=..., ...)

    def add_schema(self, name: str, encoding: str, data: bytes) -> Schema:
        raise NotImplementedError

    def add_channel(
        self,
        topic: str,
        message_encoding: str,
        schema: Schema | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> Channel:
        raise NotImplementedError

    def write(
        self,
        channel: Channel,
        data: bytes | memoryview,
        log_time: int,
        publish_time: int | None = None,
        sequence: int = 0,
    ) -> None:
        raise NotImplementedError

    def add_attachment(
        self, name: str, media_type: str, data: bytes, log_time: int = 0, create_time: int = 0
    ) -> None:
        raise UnsupportedError(f"{self.format} files cannot hold attachments")

    def add_metadata(self, name: str, metadata: Mapping[str, str]) -> None:
        raise UnsupportedError(f"{self.format} files cannot hold metadata")

    def close(self) -> None:
        raise NotImplementedError

    def _check_channel(self, channel: Channel, known: Channel | None) -> None:
        """A channel passed to ``write`` must be one this writer handed out (or equal to it)."""
        if known is not channel and known != channel:
            raise WriteError(f"topic {channel.topic}: channel was not added to this writer")

    # --- conveniences built on the primitives ------------------------------------------
    def copy_channel(self, channel: Channel) -> Channel:
        """Add ``channel`` (and its schema) from another file, once; returns this file's channel."""
        cache: dict[int, Channel] = self.__dict__.setdefault("_copied_channels", {})
        key = id(channel)
        got = cache.get(key)
        if got is None:
            schema = None
            if channel.schema is not None:
                scache: dict[tuple[str, str, bytes], Schema] = self.__dict__.setdefault("_copied_schemas", {})
                skey = (channel.schema.name, channel.schema.encoding, bytes(channel.schema.data))
                schema = scache.get(skey)
                if schema is None:
                    schema = scache[skey] = self.add_schema(*skey)
            got = cache[key] = self.add_channel(channel.topic, channel.message_encoding, schema, dict(channel.metadata))
        return got

    def write_message(self, message: Message) -> None:
        """Write a message read from another file (its channel is added on first use)."""
        self.write(
            self.copy_channel(message.channel),
            message.data,
            message.log_time,
            message.publish_time,
            message.sequence,
        )

    def write_attachment(self, a: Attachment) -> None:
        self.add_attachment(a.name, a.media_type, a.data, a.log_time, a.create_time)

    def write_metadata(self, m: Metadata) -> None:
        self.add_metadata(m.name, m.metadata)

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.close()


class AtomicFile:
    """A file written as ``<name>.active`` and renamed to ``<name>`` on :meth:`commit`.

    If the process dies, ``<name>.active`` stays behind for ``recover``/``reindex``.  A
    stream passed in instead of a path is written directly.
    """

    def __init__(self, target: str | os.PathLike[str] | BinaryIO, buffering: int = 1 << 20) -> None:
        self.final_path: str | None
        if isinstance(target, (str, os.PathLike)):
            self.final_path = os.fspath(target)
            self.active_path: str | None = self.final_path + ".active"
            self.file: BinaryIO = open(self.active_path, "w+b", buffering=buffering)  # noqa: SIM115
            self._own = True
        else:
            self.final_path = self.active_path = None
            self.file = target
            self._own = False
        self.closed = False

    def commit(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self._own:
            self.file.flush()
            os.fsync(self.file.fileno())
            self.file.close()
            assert self.active_path is not None and self.final_path is not None
            os.replace(self.active_path, self.final_path)
        else:
            self.file.flush()


def check_open(closed: bool) -> None:
    if closed:
        raise WriteError("the writer is closed")
