"""metadata.yaml as rosbag2's own reader (Jazzy, ``rosbag2_storage``) decodes it.

``ros2 bag info`` cannot run here (``ros2bag``/``rosbag2_py`` are not on the package
registry), so :func:`jazzy_errors` restates what rosbag2_storage's ``yaml.hpp`` and
``qos.cpp`` require of the file for metadata versions up to 9 (yaml-cpp ``as<T>()`` of each
field: a missing field or one of the wrong kind throws): every field its decoder reads for
the file's version, of the kind it reads (an unsigned integer, a string scalar, a map, a
sequence), the QoS profiles as a YAML *string* holding a sequence in versions 4-8 (enums as
numbers) and as a sequence in version 9 (enums as names), ``custom_data`` a map of strings
(or empty), ``files`` entries with ``path``/``starting_time``/``duration``/``message_count``.
The bags polybag writes (every storage, version and compression; rewritten by compress and
reindex) must pass it, and so must the bags rosbags' Writer writes (the check is checked
against a second implementation); each rule is shown to fail on a file that breaks it.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from rosbag2_helpers import STRING, write_rosbags_bag

import polybag
from polybag import ops
from polybag.codecs.ros2 import definition_for

# rmw's names, as rosbag2 writes and reads them in version 9 (rmw_qos_*_policy_from_str)
_HISTORY = {"system_default", "keep_last", "keep_all", "unknown"}
_RELIABILITY = {"system_default", "reliable", "best_effort", "best_available", "unknown"}
_DURABILITY = {"system_default", "transient_local", "volatile", "best_available", "unknown"}
_LIVELINESS = {"system_default", "automatic", "manual_by_topic", "best_available", "unknown"}

_QOS = (
    "- history: 1\n  depth: 5\n  reliability: 1\n  durability: 1\n  deadline:\n    sec: 0\n    nsec: 0\n"
    "  lifespan:\n    sec: 0\n    nsec: 0\n  liveliness: 1\n  liveliness_lease_duration:\n    sec: 0\n"
    "    nsec: 0\n  avoid_ros_namespace_conventions: false\n"
)


def _is_uint(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 64


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and -(1 << 31) <= v < 1 << 31


def _is_scalar(v: Any) -> bool:
    """What yaml-cpp's ``as<std::string>()`` accepts: a scalar, not null, not a map or list."""
    return isinstance(v, (str, int, float, bool)) and v is not None


def _qos_errors(profiles: Any, version: int, where: str) -> list[str]:
    if not isinstance(profiles, list):
        return [f"{where}: QoS profiles are not a sequence"]
    errs: list[str] = []
    for i, p in enumerate(profiles):
        at = f"{where}[{i}]"
        if not isinstance(p, dict):
            errs.append(f"{at}: not a map")
            continue
        h = p.get("history")
        if not (_is_int(h) or (isinstance(h, str) and h in _HISTORY)):
            errs.append(f"{at}.history: {h!r}")
        if h in (1, "keep_last") and not _is_int(p.get("depth")):
            errs.append(f"{at}.depth: {p.get('depth')!r}")
        for key, names in (("reliability", _RELIABILITY), ("durability", _DURABILITY), ("liveliness", _LIVELINESS)):
            v = p.get(key)
            ok = _is_int(v) if version <= 8 else (isinstance(v, str) and v in names)
            if not ok:
                errs.append(f"{at}.{key}: {v!r} (version {version})")
        for key in ("deadline", "lifespan", "liveliness_lease_duration"):
            t = p.get(key)
            if not (isinstance(t, dict) and _is_uint(t.get("sec")) and _is_uint(t.get("nsec"))):
                errs.append(f"{at}.{key}: {t!r}")
        if not isinstance(p.get("avoid_ros_namespace_conventions"), bool):
            errs.append(f"{at}.avoid_ros_namespace_conventions: {p.get('avoid_ros_namespace_conventions')!r}")
    return errs


def jazzy_errors(doc: Any, directory: Path | None = None) -> list[str]:
    """What rosbag2 Jazzy's metadata reader would refuse in the parsed metadata.yaml ``doc``
    (and, with ``directory``, the files it names that are not there); [] when it reads it."""
    if not isinstance(doc, dict) or not isinstance(doc.get("rosbag2_bagfile_information"), dict):
        return ["no rosbag2_bagfile_information map"]
    m = doc["rosbag2_bagfile_information"]
    errs: list[str] = []
    version = m.get("version")
    if not _is_int(version) or not 1 <= version <= 9:
        return [f"version: {version!r}"]
    if not _is_scalar(m.get("storage_identifier")):
        errs.append(f"storage_identifier: {m.get('storage_identifier')!r}")
    d = m.get("duration")
    if not (isinstance(d, dict) and _is_uint(d.get("nanoseconds"))):
        errs.append(f"duration: {d!r}")
    s = m.get("starting_time")
    if not (isinstance(s, dict) and _is_uint(s.get("nanoseconds_since_epoch"))):
        errs.append(f"starting_time: {s!r}")
    if not _is_uint(m.get("message_count")):
        errs.append(f"message_count: {m.get('message_count')!r}")
    topics = m.get("topics_with_message_count")
    if not isinstance(topics, list):
        errs.append("topics_with_message_count: not a sequence")
        topics = []
    for i, t in enumerate(topics):
        at = f"topics_with_message_count[{i}]"
        if not isinstance(t, dict) or not isinstance(t.get("topic_metadata"), dict):
            errs.append(f"{at}: no topic_metadata map")
            continue
        if not _is_uint(t.get("message_count")):
            errs.append(f"{at}.message_count: {t.get('message_count')!r}")
        tm = t["topic_metadata"]
        for key in ("name", "type", "serialization_format"):
            if not _is_scalar(tm.get(key)):
                errs.append(f"{at}.{key}: {tm.get(key)!r}")
        qos = tm.get("offered_qos_profiles")
        if version >= 9:
            errs.extend(_qos_errors(qos, version, f"{at}.offered_qos_profiles"))
        elif version >= 4:
            if not isinstance(qos, str):
                errs.append(f"{at}.offered_qos_profiles: not a string in version {version}")
            elif qos:
                errs.extend(_qos_errors(yaml.safe_load(qos), version, f"{at}.offered_qos_profiles (text)"))
        if version >= 7 and not isinstance(tm.get("type_description_hash"), str):
            errs.append(f"{at}.type_description_hash: {tm.get('type_description_hash')!r}")
    paths = m.get("relative_file_paths")
    if not (isinstance(paths, list) and all(_is_scalar(p) for p in paths)):
        errs.append(f"relative_file_paths: {paths!r}")
        paths = []
    if version >= 3:
        for key in ("compression_format", "compression_mode"):
            if not isinstance(m.get(key), str):
                errs.append(f"{key}: {m.get(key)!r}")
    if version >= 5:
        files = m.get("files")
        if not isinstance(files, list):
            errs.append("files: not a sequence")
            files = []
        for i, f in enumerate(files):
            at = f"files[{i}]"
            if not isinstance(f, dict):
                errs.append(f"{at}: not a map")
                continue
            if not _is_scalar(f.get("path")):
                errs.append(f"{at}.path: {f.get('path')!r}")
            st = f.get("starting_time")
            if not (isinstance(st, dict) and _is_uint(st.get("nanoseconds_since_epoch"))):
                errs.append(f"{at}.starting_time: {st!r}")
            du = f.get("duration")
            if not (isinstance(du, dict) and _is_uint(du.get("nanoseconds"))):
                errs.append(f"{at}.duration: {du!r}")
            if not _is_uint(f.get("message_count")):
                errs.append(f"{at}.message_count: {f.get('message_count')!r}")
        if not errs and [f["path"] for f in files] != paths:
            errs.append("files and relative_file_paths name different files")
        if not errs and sum(f["message_count"] for f in files) != m["message_count"]:
            errs.append("the files' message counts do not add up to message_count")
    if version >= 6:
        cd = m.get("custom_data")
        if not (cd is None or (isinstance(cd, dict) and all(_is_scalar(v) for v in cd.values()))):
            errs.append(f"custom_data: {cd!r}")
    if version >= 8 and not _is_scalar(m.get("ros_distro")):
        errs.append(f"ros_distro: {m.get('ros_distro')!r}")
    if not errs and sum(t["message_count"] for t in topics) != m["message_count"]:
        errs.append("the topics' message counts do not add up to message_count")
    if directory is not None:
        errs.extend(f"{p}: no such file" for p in paths if not (directory / str(p)).is_file())
    return errs


def _doc(bag: Path) -> Any:
    return yaml.safe_load((bag / "metadata.yaml").read_text())


def _polybag_bag(path: Path, **options: Any) -> None:
    text = definition_for(STRING).encode()
    with polybag.Writer(path, format="rosbag2", **options) as w:
        s = w.add_schema(STRING, "ros2msg", text)
        latched = w.add_channel("/latched", "cdr", s, {"offered_qos_profiles": _QOS, "topic_type_hash": "RIHS01_" + "0" * 64})
        plain = w.add_channel("/plain", "cdr", s)
        for i in range(20):
            w.write(latched if i % 4 == 0 else plain, b"\x00\x01\x00\x00\x03\x00\x00\x00hi\x00", 1_000 + i)


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
@pytest.mark.parametrize("version", [8, 9])
@pytest.mark.parametrize("compression", [("none", "file"), ("zstd", "file"), ("zstd", "message")])
def test_polybag_metadata_reads_in_rosbag2_jazzy(tmp_path: Path, storage: str, version: int, compression: tuple[str, str]) -> None:
    bag = tmp_path / "bag"
    _polybag_bag(bag, storage=storage, version=version, compression=compression[0], compression_mode=compression[1])
    doc = _doc(bag)
    assert jazzy_errors(doc, bag) == []
    m = doc["rosbag2_bagfile_information"]
    assert m["version"] == version and m["message_count"] == 20 and m["storage_identifier"] == storage
    qos = {t["topic_metadata"]["name"]: t["topic_metadata"]["offered_qos_profiles"] for t in m["topics_with_message_count"]}
    if version == 8:  # strings holding the profile list, enums as numbers (rosbag2 before Jazzy)
        assert yaml.safe_load(qos["/latched"])[0]["durability"] == 1 and qos["/plain"] == ""
    else:
        assert qos["/latched"][0]["durability"] == "transient_local" and qos["/plain"] == []


def test_rewritten_and_reindexed_metadata_reads_in_rosbag2_jazzy(tmp_path: Path) -> None:
    bag = tmp_path / "bag"
    _polybag_bag(bag, version=9)
    ops.compress(bag, "zstd", output_dir=tmp_path / "z", compression_mode="message")
    assert jazzy_errors(_doc(tmp_path / "z" / "bag"), tmp_path / "z" / "bag") == []
    from polybag.formats.rosbag2.reindex import reindex_rosbag2

    (bag / "metadata.yaml").unlink()
    reindex_rosbag2(bag)
    assert jazzy_errors(_doc(bag), bag) == []


@pytest.mark.parametrize("version", [8, 9])
def test_rosbags_metadata_passes_the_same_check(tmp_path: Path, version: int) -> None:
    bag = tmp_path / "rb"
    write_rosbags_bag(bag, version=version, compression="message")
    assert jazzy_errors(_doc(bag), bag) == []


def _broken(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    out = copy.deepcopy(doc)
    node = out["rosbag2_bagfile_information"]
    for k in path[:-1]:
        node = node[k]
    if value is KeyError:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return out


@pytest.mark.parametrize(
    ("version", "path", "value", "what"),
    [
        (9, ("ros_distro",), KeyError, "ros_distro"),
        (9, ("custom_data",), ["a"], "custom_data"),
        (9, ("compression_mode",), None, "compression_mode"),
        (9, ("message_count",), -1, "message_count"),
        (9, ("duration",), {"ns": 1}, "duration"),
        (9, ("files", 0, "starting_time"), KeyError, "files[0].starting_time"),
        (9, ("files", 0, "message_count"), 3, "add up"),
        (9, ("relative_file_paths",), ["other.db3"], "different files"),
        (9, ("topics_with_message_count", 0, "topic_metadata", "offered_qos_profiles"), "", "not a sequence"),
        (9, ("topics_with_message_count", 0, "topic_metadata", "type_description_hash"), KeyError, "type_description_hash"),
        (9, ("topics_with_message_count", 0, "message_count"), 0, "add up"),
        (8, ("topics_with_message_count", 0, "topic_metadata", "offered_qos_profiles"), [], "not a string"),
        (8, ("ros_distro",), None, "ros_distro"),
    ],
)
def test_the_check_refuses_what_rosbag2_refuses(tmp_path: Path, version: int, path: tuple[Any, ...], value: Any, what: str) -> None:
    bag = tmp_path / "bag"
    _polybag_bag(bag, version=version)
    doc = _doc(bag)
    assert jazzy_errors(doc, bag) == []
    errs = jazzy_errors(_broken(doc, path, value), bag)
    assert errs and any(what in e for e in errs), errs


def test_the_check_refuses_bad_qos_and_missing_files(tmp_path: Path) -> None:
    bag = tmp_path / "bag"
    _polybag_bag(bag, version=9)
    doc = _doc(bag)
    q = ("topics_with_message_count", 0, "topic_metadata", "offered_qos_profiles")
    profile = doc["rosbag2_bagfile_information"]["topics_with_message_count"][0]["topic_metadata"]["offered_qos_profiles"][0]
    for key, value in (("reliability", 1), ("durability", "latched"), ("deadline", {"sec": 0}), ("avoid_ros_namespace_conventions", "no")):
        bad = dict(profile, **{key: value})
        assert any(key in e for e in jazzy_errors(_broken(doc, q, [bad]))), key
    v8 = _broken(_broken(doc, ("version",), 8), q, yaml.safe_dump([profile]))  # names where v8 reads numbers
    assert any("reliability" in e for e in jazzy_errors(v8))
    next(bag.glob("*.db3")).unlink()
    assert any("no such file" in e for e in jazzy_errors(doc, bag))
