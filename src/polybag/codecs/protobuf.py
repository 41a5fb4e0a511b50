"""Protobuf messages from a ``FileDescriptorSet`` schema, through the optional ``protobuf`` package.

``pip install 'polybag[protobuf]'``; without it, creating the codec raises
:class:`~polybag.errors.UnsupportedError`.  ``decode`` gives the generated protobuf message,
``to_dict`` a JSON-ready dict (field names as in the .proto, bytes as base64, 64-bit
integers as strings, as protobuf's JSON mapping does), ``encode`` accepts a message or a dict.
"""

from __future__ import annotations

from typing import Any

from polybag.errors import DecodeError, UnsupportedError
from polybag.model import Channel, Schema

__all__ = ["ProtobufCodec", "codec_for_schema"]

#: bytes of a FileDescriptorSet schema (real ones: KB to a few hundred KB)
MAX_SCHEMA_BYTES = 16 << 20


def _require() -> Any:
    try:
        from google.protobuf import (  # type: ignore[import-untyped]  # no stubs installed (types-protobuf)
            descriptor_pb2,
            descriptor_pool,
            json_format,
            message_factory,
        )
    except ImportError:
        raise UnsupportedError(
            "protobuf messages need the protobuf package: pip install 'polybag[protobuf]'"
        ) from None
    return descriptor_pb2, descriptor_pool, json_format, message_factory


class ProtobufCodec:
    def __init__(self, type_name: str, descriptor_set: bytes) -> None:
        descriptor_pb2, descriptor_pool, json_format, message_factory = _require()
        self.type_name = self.full_name = type_name
        self._json = json_format
        if len(descriptor_set) > MAX_SCHEMA_BYTES:
            raise DecodeError(
                f"schema of {len(descriptor_set)} bytes is over the limit of {MAX_SCHEMA_BYTES} "
                "(polybag.codecs.protobuf.MAX_SCHEMA_BYTES)",
                type_name=type_name[:120],
            )
        try:
            fds = descriptor_pb2.FileDescriptorSet.FromString(bytes(descriptor_set))
        except Exception as e:  # protobuf raises its own DecodeError
            raise DecodeError(f"schema is not a FileDescriptorSet: {e}", type_name=type_name) from None
        pool = descriptor_pool.DescriptorPool()
        files = {f.name: f for f in fds.file}
        added: set[str] = set()

        def add(root: str) -> None:
            """Add ``root`` after its dependencies: a walk without recursion (a chain of
            thousands of files is fine), each file once, a cycle skipped."""
            on_path: set[str] = set()
            todo: list[tuple[str, Any]] = []
            if root in added or root not in files:
                return
            todo.append((root, iter(files[root].dependency)))
            on_path.add(root)
            while todo:
                name, deps = todo[-1]
                for dep in deps:
                    if dep not in added and dep not in on_path and dep in files:
                        on_path.add(dep)
                        todo.append((dep, iter(files[dep].dependency)))
                        break
                else:
                    todo.pop()
                    on_path.discard(name)
                    pool.Add(files[name])
                    added.add(name)

        try:
            for name in files:
                add(name)
            desc = pool.FindMessageTypeByName(type_name)
        except (KeyError, TypeError) as e:
            raise UnsupportedError(f"protobuf schema does not define {type_name}: {e}") from None
        self.message_class = message_factory.GetMessageClass(desc)

    def decode(self, data: bytes | memoryview, topic: str | None = None) -> Any:
        msg = self.message_class()
        try:
            msg.ParseFromString(bytes(data))
        except Exception as e:  # google.protobuf.message.DecodeError and friends
            raise DecodeError(f"invalid protobuf payload: {e}", topic=topic, type_name=self.type_name) from None
        return msg

    def to_dict(self, data: bytes | memoryview, topic: str | None = None, numpy: bool = False) -> Any:
        msg = self.decode(data, topic)
        try:
            return self._json.MessageToDict(
                msg, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
            )
        except TypeError:  # protobuf < 5
            return self._json.MessageToDict(
                msg, preserving_proto_field_name=True, including_default_value_fields=True
            )

    def encode(self, obj: Any) -> bytes:
        if isinstance(obj, dict):
            msg = self.message_class()
            self._json.ParseDict(obj, msg)
            obj = msg
        return bytes(obj.SerializeToString())


def codec_for_schema(schema: Schema, channel: Channel) -> ProtobufCodec:
    if not schema.name:
        raise UnsupportedError(f"topic {channel.topic}: protobuf channel without a schema name")
    return ProtobufCodec(schema.name, schema.data)
