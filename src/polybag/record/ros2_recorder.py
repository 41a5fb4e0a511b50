"""The ROS 2 recorder: :class:`Ros2Recorder` is the :class:`~polybag.record.recorder.Recorder`
writing ROS 2 files (fed by :class:`polybag.record.live_ros2.Ros2Source`): a rosbag2
directory (``storage`` ``sqlite3`` or ``mcap``) or, for ``-O NAME.mcap``, an MCAP file with
the ``ros2`` profile and ``cdr`` channels; for ``-O NAME.bag`` a ROS 1 bag, each message
converted with :mod:`polybag.bridges.ros1_ros2` (a type that cannot be converted is named in
a warning and not recorded).  Its files part is :class:`Ros2Files`.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

from polybag.errors import UsageError
from polybag.formats import registry
from polybag.record.files import OutputFiles
from polybag.record.items import QueuedMessage
from polybag.record.options import ROS2_DEFAULT_FORMAT, RecordOptions, holds, named_format
from polybag.record.recorder import Recorder


class Ros2Files(OutputFiles):
    """The output files of a :class:`Ros2Recorder`: ROS 2 messages as they came (``cdr``
    channels with the offered QoS and type hash in their metadata) to an MCAP file (the
    ``ros2`` profile) or a rosbag2 bag (``storage``), or converted to ROS 1 for a bag."""

    profile = "ros2"

    def __init__(self, options: RecordOptions, *, storage: str, **parts: Any) -> None:
        super().__init__(options, **parts)
        self.storage = storage
        self.format = options.ros2_format
        self._topic_info: dict[str, tuple[str, str]] = {}  # topic -> (offered_qos_profiles, type hash)
        self._lock = threading.Lock()
        self._ros1_file = False  # the file being written takes ROS 1 messages only (converted)
        self._grown: set[str] = set()  # topics whose QoS profiles changed (see put)
        self._spawned: weakref.WeakSet[Ros2Files] = weakref.WeakSet()  # (snapshot files open at once)
        self._warn: Callable[[str], None] | None = None
        # (every message counted as a rosbag2 one, whatever the file)
        self.overhead = registry.get(ROS2_DEFAULT_FORMAT).message_overhead

    def on_refused(self, warn: Callable[[str], None]) -> None:
        """``warn(text)`` is told of a type that cannot be converted to ROS 1."""
        self._warn = warn

    def set_topic_info(self, topic: str, qos_text: str, type_hash: str) -> None:
        with self._lock:
            self._topic_info[topic] = (qos_text, type_hash)
            self._grown.add(topic)  # (a rosbag2 topic already in the file lists the new profiles)
            for child in self._spawned:
                child._grown.add(topic)

    def spawn(self) -> OutputFiles:
        """As :meth:`OutputFiles.spawn`, sharing the topics' QoS and type hashes."""
        child = super().spawn()
        assert isinstance(child, Ros2Files)
        with self._lock:
            child._grown = set()
            self._spawned.add(child)
        return child

    def _info(self, topic: str) -> tuple[str, str]:
        with self._lock:
            return self._topic_info.get(topic, ("", ""))

    def target(self, t: float | None, path: str | None) -> tuple[str, str]:
        """The format and the name of the file :meth:`open` starts (a rosbag2 bag is a
        directory: the options' file name without its extension)."""
        if path is not None:
            return named_format(path) or ROS2_DEFAULT_FORMAT, self.snapshot_path(path)
        o = self.options
        name = o.file_name(self.split_index if o.split else None, t)
        ext = o.extension
        if not registry.get(self.format).extensions and name.endswith(ext):
            name = name[: -len(ext)]  # (a rosbag2 bag is a directory)
        return self.format, self._unique(name)

    def new_writer(self, name: str, fmt: str, overwrite: bool) -> tuple[Any, int]:
        """A writer of ``fmt``: with ``storage`` if it takes one (rosbag2, uncompressed), else
        as :class:`OutputFiles` makes it (the ``ros2`` profile); its header counted as at
        least 4096 bytes."""
        spec = registry.writer_spec(fmt)
        self._ros1_file = not holds(spec, "cdr")
        if not spec.storages:
            w, header = super().new_writer(name, fmt, overwrite)
            return w, max(header, 4096)
        from polybag.writer import Writer

        return Writer(
            name, format=fmt, storage=self.storage, compression="none", overwrite=overwrite
        ), max(spec.header_overhead, 4096)

    def put(self, item: QueuedMessage) -> bool:
        if self._ros1_file:
            return self._put_ros1(item)
        if self._grown:  # (here: the thread that writes)
            for topic in list(self._grown):
                self._grow_qos(topic)
        return super().put(item)

    def close(self) -> None:
        if self._grown and self.writer is not None:
            for topic in list(self._grown):
                self._grow_qos(topic)
        super().close()

    def _grow_qos(self, topic: str) -> None:
        """The writer's channels of ``topic`` given its QoS profiles as they are now: for a
        rosbag2 writer ``add_channel`` again adds the profiles of publishers that appeared
        later; an MCAP file's channels get them from ``grow_qos`` (in the file at close)."""
        with self._lock:
            self._grown.discard(topic)
        qos, type_hash = self._info(topic)
        w = self.writer
        if not qos or w is None:
            return
        if not w.merges_topic_metadata:
            grow = getattr(w, "grow_qos", None)
            if grow is not None:
                for (t, _key), ch in list(self.channels.items()):
                    if t == topic and getattr(ch, "schema", None) is not None:
                        grow(ch, qos)
            return
        md = {"offered_qos_profiles": qos}
        if type_hash:
            md["topic_type_hash"] = type_hash
        for (t, _key), ch in list(self.channels.items()):
            if t == topic and getattr(ch, "schema", None) is not None:
                w.add_channel(topic, "cdr", ch.schema, md)

    def _put_ros1(self, item: QueuedMessage) -> bool:
        """Write ``item`` converted to ROS 1; False for a type that cannot be converted
        (unknown: named in a warning once)."""
        from polybag.bridges import ros2_channel_to_ros1
        from polybag.errors import PolybagError
        from polybag.model import Channel, Schema

        w = self.writer
        ck = (item.topic, item.key)
        got = self.channels.get(ck)
        if got is None:
            typ, _md5, definition, _callerid, _latching = item.key
            qos, _hash = self._info(item.topic)
            ch = Channel(
                0,
                item.topic,
                "cdr",
                Schema(0, typ, "ros2msg", definition.encode()),
                {"offered_qos_profiles": qos},
            )
            try:
                if not definition:
                    raise UsageError("its definition is not known")
                mapped = ros2_channel_to_ros1(ch)
            except PolybagError as e:
                got = self.channels[ck] = (None, None)
                if self._warn is not None:
                    self._warn(f"topic {item.topic}: {typ} cannot be converted to ROS 1 ({e}); not recorded")
            else:
                schema = w.add_schema(mapped.schema_name, mapped.schema_encoding, mapped.schema_data)
                out = w.add_channel(item.topic, mapped.message_encoding, schema, mapped.metadata)
                got = self.channels[ck] = (out, mapped.transform)
                self.size += 100 + len(item.topic) + len(mapped.schema_data)
        out, transform = got
        data = transform(item.data) if out is not None and transform is not None else None
        if out is None or data is None:
            return False
        w.write(out, data, item.time, item.time)
        self.size += len(data) + self.overhead
        self.messages += 1
        return True

    def add_channel(self, w: Any, item: QueuedMessage) -> Any:
        """The ``cdr`` channel of ``item``'s topic in writer ``w``, with the offered QoS and
        type hash of :meth:`set_topic_info` in its metadata."""
        typ, _md5, definition, _callerid, _latching = item.key
        qos, type_hash = self._info(item.topic)
        md = {"offered_qos_profiles": qos} if qos else {}
        if type_hash:
            md["topic_type_hash"] = type_hash
        schema = w.add_schema(typ, "ros2msg", definition.encode("utf-8"))
        late = getattr(w, "define_late", None)
        if definition.strip() and late is not None:
            # a file that holds this type without its definition (its first publisher never
            # described it) gives it to those messages too (an MCAP file: at close)
            late(typ, "ros2msg", definition.encode("utf-8"))
        ch = w.add_channel(item.topic, "cdr", schema, md)
        self.size += 100 + len(item.topic) + len(typ) + len(definition) + len(qos)
        return ch


class Ros2Recorder(Recorder):
    """A :class:`Recorder` writing ROS 2 logs (see the module docstring) through
    :class:`Ros2Files`.

    ``storage``: the rosbag2 storage (``sqlite3`` or ``mcap``); ignored when the output is
    an MCAP file (``-O NAME.mcap`` or ``options.format="mcap"``).
    """

    def __init__(
        self, options: RecordOptions | None = None, source: Any = None, *, storage: str = "sqlite3", **kw: Any
    ) -> None:
        storages = registry.get(ROS2_DEFAULT_FORMAT).storages
        self.storage = (storage or storages[0]).lower()
        super().__init__(options, source, **kw)
        o = self.options
        if self.storage not in storages:
            raise UsageError(f"--storage {storage!r}: {' or '.join(storages)}")
        # -O NAME.bag / -o PREFIX.bag: a ROS 1 bag, each message converted (polybag.bridges.ros1_ros2)
        self.ros1 = not holds(registry.get(o.ros2_format), "cdr")
        if o.bz2 and not self.ros1:
            raise UsageError(
                "ROS 2 recordings cannot be bz2 compressed (rosbag2: zstd; -O NAME.bag: a ROS 1 bag)"
            )

    def _new_files(self, options: RecordOptions, **parts: Any) -> OutputFiles:
        files = Ros2Files(options, storage=self.storage, **parts)
        files.on_refused(self._refused_type)
        self._ros2_files = files
        return files

    def _refused_type(self, text: str) -> None:
        with self._cond:
            self.warnings.append(text)
        self.say(f"warning: {text}")

    def set_topic_info(self, topic: str, qos_text: str, type_hash: str = "") -> None:
        """The offered QoS profiles (YAML text) and type hash stored for ``topic``."""
        self._ros2_files.set_topic_info(topic, qos_text, type_hash)
