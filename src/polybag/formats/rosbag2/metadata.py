"""``metadata.yaml`` of a rosbag2 directory: parsed (versions 0-9: 0 is the unversioned layout of 2018), checked, and written.

rosbag2 keeps what a bag holds in ``metadata.yaml`` next to its storage files::

    rosbag2_bagfile_information:
      version: 9
      storage_identifier: sqlite3 | mcap
      relative_file_paths: [run_0.db3]          # (files: per-file times and counts, version >= 5)
      starting_time: {nanoseconds_since_epoch: N}
      duration: {nanoseconds: N}
      message_count: N
      topics_with_message_count:
        - topic_metadata: {name, type, serialization_format, offered_qos_profiles,
                           type_description_hash (version >= 8)}
          message_count: N
      compression_format: "" | zstd
      compression_mode: "" | FILE | MESSAGE

The oldest layouts are read too: before September 2018 there was no ``version`` (polybag
calls it version 0): the serialization format was bag-wide (``encoding: cdr``) and each
entry was ``topic_and_type: {name, type}``; version 1 kept ``topic_and_type`` (with a
per-topic ``serialization_format``) until it was renamed ``topic_metadata`` in November
2018.  Type names of that time have no ``/msg/`` (``test_msgs/Primitives``).  The very
first files (September 2018) spelled the times ``time_start_in_nanoseconds`` and
``duration_in_nanoseconds``.  What polybag writes always has the current layout.

``offered_qos_profiles`` is a YAML document in a string up to version 8 and a YAML list from
version 9 (with names instead of numbers for the enums).  polybag keeps the profiles of a
topic as the YAML string in the channel's ``offered_qos_profiles`` metadata (as MCAP files
written by rosbag2 do) and converts between the two spellings when it writes.

Every value is checked: a metadata.yaml that is not YAML, not a mapping, or has values of
the wrong kind is a :class:`~polybag.errors.FormatError` naming the file and the field;
nothing is allocated from a count it declares.  The YAML (the file, and the QoS strings in
it) is loaded by :func:`polybag.util.safe_yaml.load`: size, nodes with every alias expanded, and
nesting are bounded before anything is built.  Storage file paths are normalised
(``./a.db3`` is ``a.db3``) and must stay inside the bag directory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import yaml  # type: ignore[import-untyped]  # no stubs installed (types-PyYAML is not a dependency)

from polybag.codecs.ros2_qos import parse_qos as parse_qos  # (shared with the MCAP writer)
from polybag.codecs.ros2_qos import qos_to_text as qos_to_text
from polybag.errors import FormatError, UnsupportedError
from polybag.util import safe_yaml as _yaml

METADATA_FILE = "metadata.yaml"
#: the newest metadata version polybag reads (and the one it writes by default)
LATEST_VERSION = 9
#: what a metadata file may weigh (a real one is a few KiB per topic)
MAX_METADATA_BYTES = _yaml.MAX_YAML_BYTES
_U64 = 1 << 64
#: topics and files one metadata.yaml may list (YAML aliases repeat one entry cheaply)
MAX_ENTRIES = 1 << 16
#: storage files one bag may have (a week of one-minute splits is 10,080)
MAX_STORAGE_FILES = 1 << 14

_Dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

# the QoS enums: numbers (metadata up to version 8) <-> names (version 9)
QOS_ENUMS: dict[str, tuple[str, ...]] = {
    "history": ("system_default", "keep_last", "keep_all", "unknown"),
    "reliability": ("system_default", "reliable", "best_effort", "unknown", "best_available"),
    "durability": ("system_default", "transient_local", "volatile", "unknown", "best_available"),
    "liveliness": (
        "system_default",
        "automatic",
        "manual_by_node",
        "manual_by_topic",
        "unknown",
        "best_available",
    ),
}


@dataclass
class TopicInfo:
    """One ``topics_with_message_count`` entry."""

    name: str
    type: str
    serialization_format: str = "cdr"
    #: the offered QoS profiles as a YAML string ("" when none)
    offered_qos_profiles: str = ""
    type_description_hash: str = ""
    message_count: int = 0


@dataclass
class FileInfo:
    """One storage file: its path relative to the bag directory, and (version >= 5) its
    own start, duration and message count."""

    path: str
    starting_time: int | None = None
    duration: int | None = None
    message_count: int | None = None


@dataclass
class BagInfo:
    """A parsed ``metadata.yaml``."""

    version: int = LATEST_VERSION
    storage_identifier: str = "sqlite3"
    files: list[FileInfo] = field(default_factory=list)
    topics: list[TopicInfo] = field(default_factory=list)
    starting_time: int | None = None
    duration: int | None = None
    message_count: int | None = None
    #: "" (none), "file" or "message" (lower case)
    compression_mode: str = ""
    #: "" or "zstd"
    compression_format: str = ""
    custom_data: dict[str, str] = field(default_factory=dict)
    ros_distro: str = ""


# --- reading -------------------------------------------------------------------------------------
class _Fields:
    """Typed access to one mapping of the file, each failure a FormatError naming the field."""

    def __init__(self, data: Any, where: str, path: str) -> None:
        if not isinstance(data, dict):
            raise FormatError(f"{where}: expected a mapping, found {type(data).__name__}", path)
        self.data = data
        self.where = where
        self.path = path

    def _bad(self, key: str, what: str) -> FormatError:
        return FormatError(f"{self.where}.{key}: {what}", self.path)

    def text(self, key: str, default: str | None = None) -> str:
        """A text field (``default`` when absent; a number or boolean as its text)."""
        v = self.data.get(key, default)
        if v is None:
            if default is None:
                raise self._bad(key, "missing")
            return default
        if isinstance(v, (bool, int, float)):
            return str(v)
        if not isinstance(v, str):
            raise self._bad(key, f"expected text, found {type(v).__name__}")
        return v

    def count(self, key: str, *, required: bool = False) -> int | None:
        """A non-negative 64-bit integer field, or None when absent."""
        v = self.data.get(key)
        if v is None:
            if required:
                raise self._bad(key, "missing")
            return None
        if isinstance(v, bool) or not isinstance(v, int):
            raise self._bad(key, f"expected an integer, found {v!r:.60}")
        if not 0 <= v < _U64:
            raise self._bad(key, f"{v} is out of range")
        return v

    def nested_time(self, key: str, inner: str) -> int | None:
        """``key.inner`` (``starting_time.nanoseconds_since_epoch``) as a count."""
        v = self.data.get(key)
        if v is None:
            return None
        return _Fields(v, f"{self.where}.{key}", self.path).count(inner)

    def items(self, key: str) -> list[Any]:
        """A list field (empty when absent), at most :data:`MAX_ENTRIES` long."""
        v = self.data.get(key)
        if v is None:
            return []
        if not isinstance(v, list):
            raise self._bad(key, f"expected a list, found {type(v).__name__}")
        if len(v) > MAX_ENTRIES:
            raise self._bad(key, f"{len(v)} entries, more than the {MAX_ENTRIES} polybag reads")
        return v


def qos_for_version(text: str, version: int) -> str | list[dict[str, Any]]:
    """A channel's QoS YAML string as ``metadata.yaml`` of ``version`` spells it: a string
    with numeric enums up to version 8, a list with enum names from version 9."""
    profiles = parse_qos(text)
    if profiles is None:
        return text if version < 9 else []
    out = []
    for p in profiles:
        q = dict(p)
        for key, names in QOS_ENUMS.items():
            v = q.get(key)
            if version >= 9 and isinstance(v, int) and not isinstance(v, bool):
                q[key] = names[v] if 0 <= v < len(names) else "unknown"
            elif version < 9 and isinstance(v, str):
                q[key] = names.index(v.lower()) if v.lower() in names else names.index("unknown")
        out.append(q)
    if version >= 9:
        return out
    return qos_to_text(out)


def qos_summary(text: str) -> str:
    """A QoS YAML string in one line for people (``reliable transient_local keep_last(10)``,
    profiles joined with ``; ``); the text itself when it does not parse."""
    profiles = qos_for_version(text, 9)
    if not isinstance(profiles, list) or not profiles:
        return text.strip()
    out = []
    for p in profiles:
        words = [str(p.get(k, "?")) for k in ("reliability", "durability")]
        history = str(p.get("history", "?"))
        words.append(f"{history}({p.get('depth', '?')})" if history == "keep_last" else history)
        # as ros2 bag info shows them: deadline, lifespan and liveliness only when set
        for key in ("deadline", "lifespan"):
            d = _qos_duration(p.get(key))
            if d:
                words.append(f"{key}({d})")
        live = str(p.get("liveliness", ""))
        if live not in ("", "system_default", "automatic"):
            words.append(live)
        lease = _qos_duration(p.get("liveliness_lease_duration"))
        if lease:
            words.append(f"liveliness_lease({lease})")
        out.append(" ".join(words))
    return "; ".join(out)


def _qos_duration(value: Any) -> str:
    """A QoS duration (``{sec: 10, nsec: 0}``) as ``10s``; ``""`` for the default (0) and
    infinite ones (rmw's 2147483647 s and its int64 nanoseconds), and for anything else."""
    if not isinstance(value, dict):
        return ""
    sec, nsec = value.get("sec", 0), value.get("nsec", 0)
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (sec, nsec)):
        return ""
    if (sec, nsec) == (0, 0) or sec >= 2147483647 or nsec >= 1_000_000_000:
        return ""
    return f"{sec}.{nsec:09d}".rstrip("0").rstrip(".") + "s"


def _same_type(a: str, b: str) -> bool:
    """``pkg/msg/Type`` and ``pkg/Type`` name one type."""
    def norm(t: str) -> str:
        parts = t.strip().split("/")
        return f"{parts[0]}/{parts[2]}" if len(parts) == 3 and parts[1] == "msg" else t.strip()

    return norm(a) == norm(b)


def topic_type(meta_type: str | None, file_type: str | None) -> str:
    """The type of a topic as rosbag2 reads it: ``metadata.yaml``'s (rosbag2's sequential
    reader takes the topics and their types from it, the storage's topics table only names
    the topic of each message), spelled as the storage file spells it when both name one
    type (``pkg/Type`` and ``pkg/msg/Type``); the storage file's when metadata.yaml does not
    list the topic."""
    if meta_type and file_type and not _same_type(meta_type, file_type):
        return meta_type
    return file_type or meta_type or ""


def type_disagreement(topic: str, meta_type: str | None, file_type: str | None, where: str) -> str | None:
    """The warning when ``metadata.yaml`` and storage file ``where`` give topic ``topic``
    different types (None when they agree, or one of them does not list it)."""
    if not meta_type or not file_type or _same_type(meta_type, file_type):
        return None
    return (
        f"{where}: topic {topic} has type {file_type} here and {meta_type} in metadata.yaml; "
        f"read as {meta_type} (metadata.yaml wins, as in rosbag2)"
    )


def parse_metadata(text: bytes, path: str) -> BagInfo:
    """The :class:`BagInfo` of a ``metadata.yaml``'s bytes; a :class:`FormatError` naming
    ``path`` and the field for anything malformed; :class:`UnsupportedError` for a version
    newer than polybag knows."""
    doc = _yaml.load(text, path, max_bytes=MAX_METADATA_BYTES)
    if not isinstance(doc, dict) or "rosbag2_bagfile_information" not in doc:
        raise FormatError("no rosbag2_bagfile_information mapping: not a rosbag2 metadata.yaml", path)
    top = _Fields(doc["rosbag2_bagfile_information"], "rosbag2_bagfile_information", path)
    info = BagInfo()
    info.version = _version(top, path)
    info.storage_identifier = top.text("storage_identifier", "sqlite3").strip().lower()
    info.starting_time = top.nested_time("starting_time", "nanoseconds_since_epoch")
    info.duration = top.nested_time("duration", "nanoseconds")
    if info.version == 0:  # the first files (September 2018) had flat times
        if info.starting_time is None:
            info.starting_time = top.count("time_start_in_nanoseconds")
        if info.duration is None:
            info.duration = top.count("duration_in_nanoseconds")
    info.message_count = top.count("message_count")
    info.compression_mode = top.text("compression_mode", "").strip().lower()
    info.compression_format = top.text("compression_format", "").strip().lower()
    info.ros_distro = top.text("ros_distro", "")
    custom = top.data.get("custom_data")
    if isinstance(custom, dict) and len(custom) <= MAX_ENTRIES:  # rosbag2's map<string, string>
        info.custom_data = {str(k): str(v) for k, v in custom.items() if _is_scalar(k) and _is_scalar(v)}
    # before versioning the serialization format was bag-wide (``encoding``), and required
    bag_format = top.text("encoding").strip() if info.version == 0 else None
    info.topics.extend(_topics(top, path, info.version, bag_format))
    info.files = _files(top, path)
    return info


def _is_scalar(v: Any) -> bool:
    return not isinstance(v, (list, dict, set, tuple))


def _version(top: _Fields, path: str) -> int:
    """The metadata version (1..LATEST_VERSION; 0 for the unversioned layout of September
    2018, a file without ``version``; newer is an :class:`UnsupportedError`)."""
    if "version" not in top.data:
        return 0
    version = top.count("version", required=True)
    assert version is not None
    if version < 1:
        raise FormatError(f"rosbag2_bagfile_information.version: {version} is not a rosbag2 version", path)
    if version > LATEST_VERSION:
        raise UnsupportedError(
            f"{path}: rosbag2 metadata version {version} is newer than polybag reads (1-9)"
        )
    return version


#: the key of a topic entry's mapping, by metadata version: ``topic_and_type`` until
#: November 2018 (version 0 and early version 1), ``topic_metadata`` since (version 1 on)
def _entry_keys(version: int) -> tuple[str, ...]:
    if version == 0:
        return ("topic_and_type",)
    if version == 1:
        return ("topic_metadata", "topic_and_type")
    return ("topic_metadata",)


def _topics(top: _Fields, path: str, version: int, bag_format: str | None) -> list[TopicInfo]:
    """The ``topics_with_message_count`` entries (``bag_format``: the bag-wide
    serialization format of the unversioned layout, else None)."""
    topics: list[TopicInfo] = []
    keys = _entry_keys(version)
    for i, item in enumerate(top.items("topics_with_message_count")):
        entry = _Fields(item, f"topics_with_message_count[{i}]", path)
        key = next((k for k in keys if k in entry.data), keys[0])
        tm = _Fields(entry.data.get(key), f"topics_with_message_count[{i}].{key}", path)
        fmt = bag_format if bag_format is not None else tm.text("serialization_format", "cdr")
        topics.append(
            TopicInfo(
                name=tm.text("name"),
                type=tm.text("type"),
                serialization_format=fmt,
                offered_qos_profiles=qos_to_text(tm.data.get("offered_qos_profiles")),
                type_description_hash=tm.text("type_description_hash", ""),
                message_count=entry.count("message_count") or 0,
            )
        )
    return topics


def _files(top: _Fields, path: str) -> list[FileInfo]:
    """The storage files: ``relative_file_paths`` (else those of ``files``), each with its
    ``files`` entry when there is one; each path checked (:func:`check_relative`) and
    normalised (``./a.db3`` is ``a.db3``), a path listed twice once; at most
    :data:`MAX_STORAGE_FILES`."""
    per_file: dict[str, FileInfo] = {}
    for i, item in enumerate(top.items("files")):
        f = _Fields(item, f"files[{i}]", path)
        fi = FileInfo(
            path=normalized(f.text("path"), path),
            starting_time=f.nested_time("starting_time", "nanoseconds_since_epoch"),
            duration=f.nested_time("duration", "nanoseconds"),
            message_count=f.count("message_count"),
        )
        per_file.setdefault(fi.path, fi)
    names: list[str] = []
    for i, p in enumerate(top.items("relative_file_paths")):
        if not isinstance(p, str):
            raise FormatError(f"rosbag2_bagfile_information.relative_file_paths[{i}]: expected text", path)
        names.append(normalized(p, path))
    if not names:
        names = list(per_file)
    unique = list(dict.fromkeys(names))
    if len(unique) > MAX_STORAGE_FILES:
        raise FormatError(
            f"lists {len(unique)} storage files, more than the {MAX_STORAGE_FILES} polybag opens (the limit)", path
        )
    return [per_file.get(n) or FileInfo(n) for n in unique]


def check_relative(name: str, path: str) -> None:
    """A storage file name must stay inside the bag directory (no absolute path, no ``..``)."""
    norm = os.path.normpath(name) if name else ""
    if not name or "\x00" in name or norm == ".":
        raise FormatError(f"storage file name {name!r:.200} is not a file name", path)
    if os.path.isabs(name) or norm == ".." or norm.startswith(".." + os.sep):
        raise FormatError(f"storage file {name!r:.200} lies outside the bag directory", path)


def normalized(name: str, path: str) -> str:
    """A storage file name of metadata.yaml checked (:func:`check_relative`) and normalised:
    ``./bag_0.db3`` and ``sub//../bag_0.db3`` are ``bag_0.db3``, separators ``/``."""
    check_relative(name, path)
    return os.path.normpath(name).replace(os.sep, "/")


# --- writing -------------------------------------------------------------------------------------
def dump_metadata(info: BagInfo) -> str:
    """``metadata.yaml`` text for ``info`` (the layout rosbag2 writes for its version)."""
    v = info.version
    topics = []
    for t in info.topics:
        tm: dict[str, Any] = {
            "name": t.name,
            "type": t.type,
            "serialization_format": t.serialization_format,
            "offered_qos_profiles": qos_for_version(t.offered_qos_profiles, v),
        }
        if v >= 8:
            tm["type_description_hash"] = t.type_description_hash
        topics.append({"topic_metadata": tm, "message_count": t.message_count})
    body: dict[str, Any] = {
        "version": v,
        "storage_identifier": info.storage_identifier,
        "duration": {"nanoseconds": info.duration or 0},
        "starting_time": {"nanoseconds_since_epoch": info.starting_time or 0},
        "message_count": info.message_count or 0,
        "topics_with_message_count": topics,
        "compression_format": info.compression_format,
        "compression_mode": info.compression_mode.upper(),
        "relative_file_paths": [f.path for f in info.files],
    }
    if v >= 5:
        body["files"] = [
            {
                "path": f.path,
                "starting_time": {"nanoseconds_since_epoch": f.starting_time or 0},
                "duration": {"nanoseconds": f.duration or 0},
                "message_count": f.message_count or 0,
            }
            for f in info.files
        ]
    if v >= 6:
        body["custom_data"] = dict(info.custom_data) or None
    if v >= 7:
        body["ros_distro"] = info.ros_distro
    return str(
        yaml.dump(
            {"rosbag2_bagfile_information": body},
            Dumper=_Dumper,
            default_flow_style=False,
            sort_keys=False,
            allow_unicode=True,
        )
    )
