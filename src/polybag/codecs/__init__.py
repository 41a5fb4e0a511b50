"""Codecs: what is inside a message.

A codec is made from a :class:`~polybag.model.Schema` and turns payload bytes into objects,
dicts and back.  The codec for a channel is chosen by ``(channel.message_encoding,
schema.encoding)`` and cached per schema, so each type is compiled once.

This module is the registry, the top of the package: it names each codec's factory as a
string (:data:`CODECS`, imported when first used) and nothing below imports it.  Below it
(see ARCHITECTURE.md): the codecs (:mod:`~polybag.codecs.ros1`, :mod:`~polybag.codecs.cdr`,
JSON, protobuf, ULog), the serializers they generate (:mod:`polybag.codecs.serde`), the
type system (:mod:`polybag.codecs.type_set`, :mod:`polybag.codecs.ros2`) and, at the bottom,
:mod:`polybag.codecs.cache`.
"""

from __future__ import annotations

import copy
import importlib
import os
from typing import Any

from polybag import model
from polybag.codecs.cache import CostCache, definition_key, on_definitions_added
from polybag.errors import PolybagError, UnsupportedError
from polybag.model import Channel, Codec, Schema

__all__ = [
    "CACHE_CODECS",
    "CACHE_FIELDS",
    "CODECS",
    "Codec",
    "add_types",
    "codec_for",
    "decode_message",
    "forget_failures",
    "message_to_dict",
]


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
    from polybag.codecs.ros2.store import add_types as add_ros2_types  # imported when used: it parses

    return add_ros2_types(folder)


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
    codec: Codec | None = _cache.get(key)
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
# types added (--types, a ROS 1 .msg folder): schemas that failed are tried again
on_definitions_added(forget_failures)
