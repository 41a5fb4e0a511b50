"""ROS 1 messages: definitions, md5sums, the bundled common types and the ``ros1`` codec.

``compute_md5(msg_type, full_definition_text)`` is the md5sum ROS computes for a type from
its full definition (as stored in bag connections and MCAP ``ros1msg`` schemas).
``codec_for_schema(schema, channel)`` is the codec registry entry for ``("ros1", "ros1msg")``.

Files that carry no definition text (bag format V1.1 connections hold only the type name and
md5sum) are decoded from the known types: the bundled common definitions (std_msgs,
geometry_msgs, sensor_msgs, nav_msgs, tf2_msgs, rosgraph_msgs, visualization_msgs,
diagnostic_msgs) plus user folders.  Add folders in code with ``add_msg_folder(folder)``, or
from the command line with the environment variable ``POLYBAG_MSG_PATH``: folders separated
by ``os.pathsep`` (``:`` on Linux), each holding ``pkg/msg/Type.msg`` or ``pkg/Type.msg``
files, e.g. ``POLYBAG_MSG_PATH=~/catkin_ws/src polybag cat old.bag``.  The variable is read
once, the first time the known types are needed; its folders come before the bundled types.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from polybag.codecs.cache import CostCache, definition_key, definitions_added
from polybag.codecs.definition_limits import DEFAULT_LIMITS, MsgDefError
from polybag.codecs.definition_model import canonical
from polybag.codecs.msg_parser import add_folder, parse_full
from polybag.codecs.serde.compiler import (
    Compiler,
    Duration,
    EncodeError,
    RosMessage,
    Time,
    left_over,
    run_encoder,
)
from polybag.codecs.type_set import TypeSet, defined_fields
from polybag.errors import DecodeError, UnsupportedError
from polybag.model import Channel, Schema

__all__ = [
    "Duration",
    "EncodeError",
    "MsgDefError",
    "Ros1Codec",
    "RosMessage",
    "Time",
    "add_msg_folder",
    "bundled",
    "codec_for_schema",
    "codec_for_type",
    "compute_md5",
    "definition_for",
    "lookup_md5",
]

MSGS_DIR = Path(__file__).with_name("msgs")

_bundled: TypeSet | None = None
_user = TypeSet("ros1")
_env_read = False
ENV_MSG_PATH = "POLYBAG_MSG_PATH"


def bundled() -> TypeSet:
    """The bundled common ROS 1 definitions (std_msgs, geometry_msgs, sensor_msgs...)."""
    global _bundled
    if _bundled is None:
        ts = TypeSet("ros1")
        add_folder(ts, str(MSGS_DIR))
        _bundled = ts
    return _bundled


def known_types() -> TypeSet:
    """User-added definitions first (``POLYBAG_MSG_PATH`` folders too), then the bundled ones."""
    global _env_read
    _user.fallback = bundled()
    if not _env_read:
        _env_read = True
        for folder in os.environ.get(ENV_MSG_PATH, "").split(os.pathsep):
            folder = os.path.expanduser(folder.strip())
            if folder and os.path.isdir(folder):
                try:
                    add_folder(_user, folder)
                except (MsgDefError, OSError, UnicodeDecodeError) as e:
                    raise UnsupportedError(f"{ENV_MSG_PATH} folder {folder}: {e}") from None
        _md5_index.clear()
    return _user


def add_msg_folder(folder: str | Path, package: str | None = None) -> list[str]:
    """Add the ``.msg`` files under ``folder`` (``pkg/msg/Type.msg`` layout) to the known types."""
    ts = known_types()
    added = add_folder(ts, str(folder), package)
    _md5_index.clear()
    definitions_added()  # schemas that failed are tried again
    return added


_md5_index: dict[str, str] = {}


def lookup_md5(md5sum: str) -> str | None:
    """The name of a known (bundled or user) type with this md5sum, if any."""
    if not _md5_index:
        ts = known_types()
        for source in (bundled(), _user):
            for name in source.types:
                try:
                    _md5_index.setdefault(ts.md5(name), name)
                except DecodeError:
                    continue
    return _md5_index.get(md5sum)


def definition_for(msg_type: str) -> str:
    """The full definition text of a known type, as a bag writer stores it."""
    return known_types().full_text(canonical(msg_type))


def compute_md5(msg_type: str, full_definition_text: str | bytes) -> str:
    """The ROS md5sum of ``msg_type`` from its full definition text (``MSG:`` sections)."""
    ts = parse_full(msg_type, full_definition_text, "ros1", fallback=known_types())
    return ts.md5(msg_type)


class Ros1Codec:
    """Decode/encode the ROS 1 serialization of one message type."""

    def __init__(self, typeset: TypeSet, msg_type: str, label: str | None = None) -> None:
        self.typeset = typeset
        self.type_name = canonical(msg_type)
        self.full_name = label or msg_type
        typeset.check(self.type_name)
        self.compiler = Compiler(typeset, "ros1", "<")
        self._dec = self.compiler.decoder(self.type_name, "obj")
        # the whole-payload decoder, bound as an instance attribute: one Python call per message
        self.decode = self.compiler.top_decoder(self.type_name, self.full_name)  # type: ignore[method-assign]
        self._dicts: dict[str, Any] = {}
        self._enc: dict[str, Any] = {}

    @property
    def md5sum(self) -> str:
        return self.typeset.md5(self.type_name)

    @property
    def message_class(self) -> type:
        return self.compiler.cls(self.type_name)

    def _error(self, e: DecodeError, topic: str | None) -> DecodeError:
        msg = getattr(e, "reason", str(e))
        return DecodeError(msg, topic=topic, type_name=self.full_name, field=e.field, offset=e.offset)

    def _run(self, fn: Any, data: bytes | memoryview, topic: str | None) -> Any:
        end = len(data)
        try:
            value, pos = fn(data, 0, end)
        except DecodeError as e:
            raise self._error(e, topic) from None
        if pos != end:
            raise left_over(end, pos, topic, self.full_name)
        return value

    def decode(self, data: bytes | memoryview, topic: str | None = None) -> Any:
        """The message as an object with attribute access.

        Variable-length numeric arrays are numpy arrays, ``uint8[]``/``char[]`` bytes, fixed
        numeric arrays lists.
        """
        end = len(data)
        try:
            value, pos = self._dec(data, 0, end)
        except DecodeError as e:
            raise self._error(e, topic) from None
        if pos != end:
            return self._run(self._dec, data, topic)  # raises the left-over error
        return value

    def to_dict(self, data: bytes | memoryview, topic: str | None = None, numpy: bool = False) -> Any:
        """The message as plain nested dicts and lists.

        ``uint8[]``/``char[]`` arrays (fixed or variable) come out as ``bytes`` (as the API
        promises), ROS times as ``{"sec": s, "nsec": n}``, other arrays as lists, or as numpy
        arrays when ``numpy`` is true.  So the result is *not* directly ``json.dumps``-able
        when it holds bytes (or numpy arrays): encode bytes as base64 and arrays with
        ``.tolist()``, as ``polybag cat --json`` does.
        """
        mode = "dictnp" if numpy else "dict"
        fn = self._dicts.get(mode)
        if fn is None:
            fn = self._dicts[mode] = self.compiler.decoder(self.type_name, mode)
        return self._run(fn, data, topic)

    def encode(self, obj: Any) -> bytes:
        """Serialize an object (as :meth:`decode` returns) or a dict (as :meth:`to_dict`)."""
        mode = "dict" if isinstance(obj, dict) else "obj"
        fn = self._enc.get(mode)
        if fn is None:
            fn = self._enc[mode] = self.compiler.encoder(self.type_name, mode)
        return bytes(run_encoder(fn, obj, self.full_name))


class UndefinedRos1Codec(Ros1Codec):
    """A connection whose ``message_definition`` is empty while its md5sum is not the empty
    message's, and no known type has that md5sum: read as the file says, a message without
    fields (a 0-byte payload is ``{}``, as rosbag decodes it); a payload with bytes in it is a
    :class:`DecodeError` saying the definition is missing."""

    def __init__(self, typeset: TypeSet, type_name: str, full_name: str, md5sum: str) -> None:
        super().__init__(typeset, type_name, full_name)
        self.declared_md5sum = md5sum
        self.decode = self._decode_checked  # type: ignore[method-assign]  # (not the fast path)

    def missing_error(self, topic: str | None = None) -> DecodeError:
        """What a payload with bytes in it raises (a :class:`DecodeError` of that message,
        as a ROS 2 type without a definition gives: the channel's 0-byte messages still
        decode)."""
        msg = (
            f"no definition for {self.full_name} (md5sum {self.declared_md5sum}): the file's definition "
            f"is empty and no known type has that md5sum; add its .msg files with the {ENV_MSG_PATH} "
            "environment variable (folders of pkg/msg/*.msg) or polybag.codecs.ros1.add_msg_folder()"
        )
        err = DecodeError(msg, topic=topic, type_name=self.full_name, offset=0)
        err.reason = msg  # type: ignore[attr-defined]
        return err

    def _check(self, data: bytes | memoryview, topic: str | None) -> None:
        if len(data):
            raise self.missing_error(topic)

    def _decode_checked(self, data: bytes | memoryview, topic: str | None = None) -> Any:
        self._check(data, topic)
        return self._run(self._dec, data, topic)

    def to_dict(self, data: bytes | memoryview, topic: str | None = None, numpy: bool = False) -> Any:
        self._check(data, topic)
        return super().to_dict(data, topic, numpy)


# codecs by (type, definition digest or md5sum); bounded like polybag.codecs' cache
_codecs = CostCache(1 << 16, 4096)


def codec_for_type(msg_type: str, definition: str | bytes = "", md5sum: str = "") -> Ros1Codec:
    """A codec for ``msg_type`` from its full definition, or from the known types (a
    definition over :data:`~polybag.codecs.definition_limits.DEFAULT_LIMITS` is a
    :class:`MsgDefError` naming the limit)."""
    DEFAULT_LIMITS.check_text(definition, msg_type)
    text = bytes(definition).decode("utf-8", "replace") if not isinstance(definition, str) else definition
    key = (msg_type, definition_key(text) if text.strip() else f"#md5 {md5sum}")
    codec: Ros1Codec | None = _codecs.get(key)
    if codec is not None:
        return codec
    empty_md5 = "d41d8cd98f00b204e9800998ecf8427e"
    if text.strip() or md5sum == empty_md5 or (not md5sum and known_types().lookup(msg_type) is None):
        ts = parse_full(msg_type, text, "ros1", fallback=known_types())
        name = msg_type
    else:
        ts = known_types()
        name = msg_type
        if md5sum and md5sum != "*":
            found = lookup_md5(md5sum)
            if found is None:
                # the file's definition is empty and no known type has this md5sum: read as
                # the file says (a message without fields, as rosbag does), and a payload
                # with anything in it says the definition is missing
                ts = parse_full(msg_type, "", "ros1", fallback=known_types())
                codec = UndefinedRos1Codec(ts, msg_type, msg_type, md5sum)
                return _codecs.put(key, codec, 1 + defined_fields(ts))
            name = found
    codec = _codecs.put(key, Ros1Codec(ts, name, msg_type or name), 1 + defined_fields(ts))
    return codec


def codec_for_schema(schema: Schema, channel: Channel) -> Ros1Codec:
    """Codec registry entry for ``("ros1", "ros1msg")`` channels (bag connections too)."""
    name = schema.name or str(channel.metadata.get("type", ""))
    return codec_for_type(name, schema.data, str(channel.metadata.get("md5sum", "")))
