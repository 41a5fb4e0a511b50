"""JSON messages (``json`` encoding, ``jsonschema`` or no schema), with the standard library.

``decode`` gives :class:`JsonObject` (a dict whose keys are also attributes), ``to_dict``
plain dicts, ``encode`` compact UTF-8 JSON.
"""

from __future__ import annotations

import json
from typing import Any

from polybag.errors import DecodeError
from polybag.model import Channel, Schema

__all__ = ["JsonCodec", "JsonObject", "codec_for_schema"]


class JsonObject(dict):  # type: ignore[type-arg]
    """A JSON object with attribute access (``msg.pose.x``) that is still a dict."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class JsonCodec:
    def __init__(self, type_name: str = "", schema: Any = None) -> None:
        self.type_name = type_name
        self.full_name = type_name
        self.schema = schema  # the parsed JSON schema (informational; not validated)

    def _load(self, data: bytes | memoryview, topic: str | None, hook: Any) -> Any:
        raw = bytes(data)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise DecodeError(f"not UTF-8: {e.reason}", topic=topic, type_name=self.type_name, offset=e.start) from None
        try:
            return json.loads(text, object_hook=hook) if hook else json.loads(text)
        except json.JSONDecodeError as e:
            raise DecodeError(f"invalid JSON: {e.msg}", topic=topic, type_name=self.type_name, offset=e.pos) from None
        except RecursionError:
            raise DecodeError("JSON nested too deeply", topic=topic, type_name=self.type_name) from None

    def decode(self, data: bytes | memoryview, topic: str | None = None) -> Any:
        return self._load(data, topic, JsonObject)

    def to_dict(self, data: bytes | memoryview, topic: str | None = None, numpy: bool = False) -> Any:
        return self._load(data, topic, None)

    def encode(self, obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


_MAX_SCHEMA_BYTES = 4 << 20  # a JSON schema larger than a message definition may be is not parsed


def codec_for_schema(schema: Schema, channel: Channel) -> JsonCodec:
    parsed = None
    if schema.data and len(schema.data) <= _MAX_SCHEMA_BYTES:  # informational: a huge one is skipped
        try:
            parsed = json.loads(bytes(schema.data).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):  # (nested past the stack)
            parsed = None
    return JsonCodec(schema.name or str(channel.metadata.get("type", "")), parsed)
