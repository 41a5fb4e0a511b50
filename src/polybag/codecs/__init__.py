"""Codecs: what is inside a message.

A codec is made from a :class:`~polybag.model.Schema` and turns payload bytes into objects,
dicts and back.  The codec for a channel is chosen by ``(channel.message_encoding,
schema.encoding)`` and cached per schema, so each type is compiled once.
"""

from __future__ import annotations

import copy
import hashlib
import importlib
import os
from typing import Any

from polybag import model
from polybag.errors import PolybagError, UnsupportedError
from polybag.model import Channel, Codec, Schema


class CostCache(dict):  # type: ignore[type-arg]
    """A bounded cache of compiled things (codecs): at most ``max_items`` entries and
    ``max_cost`` total cost (what each entry was given, e.g. the fields it compiled); the
    least recently used entries are dropped past either bound, so what the cache holds never
    grows with the number or the size of the definitions an input declares.  A ``dict``
    (``clear()`` and lookups work as on one); add entries with :meth:`put`."""

    def __init__(self, max_cost: int, max_items: int) -> None:
        super().__init__()
        self.max_cost = max_cost
        self.max_items = max_items
        self._costs: dict[Any, int] = {}
        self.total = 0
        self.evictions = 0  # entries dropped so far (callers drop what they derived from them)

    def get(self, key: Any, default: Any = None) -> Any:
        if key not in self:
            return default
        value = super().pop(key)
        super().__setitem__(key, value)  # most recently used last
        return value

    def put(self, key: Any, value: Any, cost: int = 1) -> Any:
        self.pop(key, None)
        cost = max(1, cost)
        while len(self) and (self.total + cost > self.max_cost or len(self) >= self.max_items):
            self.pop(next(iter(self)))
            self.evictions += 1
        super().__setitem__(key, value)
        self._costs[key] = cost
        self.total += cost
        return value

    def __setitem__(self, key: Any, value: Any) -> None:
        self.put(key, value)

    def pop(self, key: Any, *default: Any) -> Any:
        self.total -= self._costs.pop(key, 0)
        return super().pop(key, *default)

    def __delitem__(self, key: Any) -> None:
        self.pop(key)

    def clear(self) -> None:
        super().clear()
        self._costs.clear()
        self.total = 0


def definition_key(text: str | bytes | bytearray | memoryview) -> tuple[int, bytes]:
    """A short key for a definition text (its length and a 128-bit digest), so caches do not
    hold copies of the texts themselves."""
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    return len(raw), hashlib.blake2b(raw, digest_size=16).digest()


# (message_encoding, schema_encoding) -> "module:factory"; factory(schema) -> Codec
CODECS: dict[tuple[str, str], str] = {
    ("ros1", "ros1msg"): "polybag.codecs.ros1:codec_for_schema",
    ("ros1", ""): "polybag.codecs.ros1:codec_for_schema",  # no schema: bundled types by type/md5sum
    ("cdr", "ros2msg"): "polybag.codecs.cdr:codec_for_schema",
    ("cdr", "ros2idl"): "polybag.codecs.cdr:codec_for_schema",
    ("cdr", ""): "polybag.codecs.cdr:codec_for_schema",  # no definition: bundled/added types by name
    ("json", "jsonschema"): "polybag.codecs.jsoncodec:codec_for_schema",
    ("json", ""): "polybag.codecs.jsoncodec:codec_for_schema",
    ("protobuf", "protobuf"): "polybag.codecs.protobuf:codec_for_schema",
    ("ulog", "ulog"): "polybag.codecs.ulog:codec_for_schema",
}

#: codecs by schema (encodings, name, a digest of the definition, md5sum), bounded: at most
#: this many, and this many fields compiled by all of them together; the least recently used
#: go first (a file of thousands of large definitions does not keep them all)
CACHE_CODECS = 4096
CACHE_FIELDS = 1 << 16
_cache = CostCache(CACHE_FIELDS, CACHE_CODECS)
# schemas whose codec could not be made: the error, raised again (a copy) for every message
# instead of parsing the definition again each time (bounded too)
_failed: dict[tuple[str, str, str, tuple[int, bytes], str], PolybagError] = {}
_FAILED_MAX = 4096


def add_types(folder: str | os.PathLike[str]) -> list[str]:
    """Add a workspace's ROS 2 ``.msg``/``.idl`` files (``pkg/msg/Name.msg`` layout) under
    ``folder`` to the types used when a file carries no definition; returns the names added.
    ROS 1 ``.msg`` folders go through :func:`polybag.codecs.ros1.add_msg_folder`."""
    from polybag.codecs.ros2 import add_types as _add

    return _add(folder)


def forget_failures() -> None:
    """Try schemas that failed again (after new message definitions were made known)."""
    _failed.clear()
    _by_channel.clear()
    _by_identity.clear()
    _cache.clear()


_by_channel: dict[Channel, Codec] = {}
# the same, by the Channel object's identity: a reader gives every message of a channel the
# same Channel object, and looking that up by id() costs no Python-level hash or compare (a
# Channel hashes in Python, and an equal Channel from an earlier reader held as the key is
# compared field by field); the object is kept with its codec, so its id is not reused
_by_identity: dict[int, tuple[Channel, Codec]] = {}
_IDENTITY_MAX = 4096


def codec_for(channel: Channel) -> Codec:
    """The codec of ``channel`` (made once per schema; an :class:`UnsupportedError` when no
    codec reads its encodings)."""
    got = _by_identity.get(id(channel))
    if got is not None and got[0] is channel:
        return got[1]
    codec = _by_channel.get(channel)
    if codec is None:
        evictions = _cache.evictions
        codec = _codec_for(channel)
        if _cache.evictions != evictions or len(_by_channel) >= _IDENTITY_MAX:
            # codecs left the cache: the channels holding them let go of them too
            _by_channel.clear()
            _by_identity.clear()
        _by_channel[channel] = codec
    if len(_by_identity) >= _IDENTITY_MAX:  # bounded: a long process opens many files
        _by_identity.clear()
    _by_identity[id(channel)] = (channel, codec)
    return codec


def _codec_for(channel: Channel) -> Codec:
    schema = channel.schema
    if schema is None:
        schema = Schema(0, str(channel.metadata.get("type", "")), "", b"")
    key = (
        channel.message_encoding,
        schema.encoding,
        schema.name,
        definition_key(schema.data),
        str(channel.metadata.get("md5sum", "")),
    )
    codec = _cache.get(key)
    if codec is None:
        failed = _failed.get(key)
        if failed is not None:
            raise copy.copy(failed)
        spec = CODECS.get((channel.message_encoding, schema.encoding))
        if spec is None:
            raise UnsupportedError(
                f"topic {channel.topic}: no codec for message encoding {channel.message_encoding!r} "
                f"with schema encoding {schema.encoding!r}"
            )
        mod, _, name = spec.partition(":")
        factory = getattr(importlib.import_module(mod), name)
        try:
            codec = factory(schema, channel)
        except PolybagError as e:
            if len(_failed) >= _FAILED_MAX:
                _failed.clear()
            _failed[key] = copy.copy(e).with_traceback(None)
            raise
        _cache.put(key, codec, _cost(codec))
    return codec


def _cost(codec: Any) -> int:
    """What a codec holds, for the cache's bound: the fields its definition compiles."""
    types = getattr(getattr(codec, "typeset", None), "types", None)
    return 1 + (sum(len(d.fields) for d in types.values()) if isinstance(types, dict) else 0)


def decode_message(channel: Channel, data: bytes | memoryview) -> Any:
    """``data`` of ``channel`` as an object with attribute access."""
    return codec_for(channel).decode(data, topic=channel.topic)


def message_to_dict(channel: Channel, data: bytes | memoryview) -> Any:
    """``data`` of ``channel`` as plain nested dicts and lists."""
    return codec_for(channel).to_dict(data, topic=channel.topic)


# the model's messages decode through this package (the model does not import it)
model.install_codec_lookup(codec_for)
