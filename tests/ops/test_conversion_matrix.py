"""Every source converts to every target format (issue 27, "conversion paths a user tries").

Sources are real third-party files (rosbag's, rosbag2's, PX4's, Lichtblick's) and a rosbag2
sqlite3 bag written by rosbags; each is converted with ``polybag convert`` into a ROS 1 bag,
an MCAP (default profile, ``--profile ros1``, ``--profile ros2``) and a rosbag2 bag of both
storages.  The output is read back by the reference reader of its format (rosbag-standalone
for bags, mcap with the mcap_ros1/mcap_ros2 decoders for MCAP, rosbags for rosbag2) and
compared, topic by topic, with polybag's decode of the input: message counts and every
decoded value (ROS 1 <-> ROS 2 spellings made equal: ``secs``/``nsec`` -> ``nanosec``, a
header's ``seq``, ``D`` -> ``d``).  A message is dropped only where no chain of bridges
reaches the target (JSON into a bag or rosbag2), with the reason per topic.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import polybag
from polybag.cli import main
from polybag.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]
CORPORA = ROOT.parent / "shared" / "corpora"

SOURCES: dict[str, Path] = {
    "bag": CORPORA / "rosbag" / "ros_numpy" / "test.bag",  # Image, PointCloud2, OccupancyGrid...
    "mcap_ros1": ROOT / "samples" / "demo.mcap",
    "mcap_ros2": CORPORA / "mcap-samples" / "rosbag2" / "cdr_test" / "cdr_test_0.mcap",  # test_msgs
    "mcap_json": CORPORA / "mcap-samples" / "lichtblick" / "example.mcap",
    "rosbag2_sqlite3": Path("written by rosbags, see the fixture"),
    "rosbag2_mcap": CORPORA / "mcap-samples" / "rosbag2" / "talker",
    "ulog": CORPORA / "ulog" / "sample_log_small.ulg",
}
TARGETS: dict[str, list[str]] = {
    "bag": ["--format", "bag"],
    "mcap": ["--format", "mcap"],
    "mcap_ros1": ["--format", "mcap", "--profile", "ros1"],
    "mcap_ros2": ["--format", "mcap", "--profile", "ros2"],
    "rosbag2_sqlite3": ["--format", "rosbag2", "--storage", "sqlite3"],
    "rosbag2_mcap": ["--format", "rosbag2", "--storage", "mcap"],
}
NO_BRIDGE = {("mcap_json", t) for t in ("bag", "rosbag2_sqlite3", "rosbag2_mcap")}

pytestmark = pytest.mark.skipif(not CORPORA.is_dir(), reason="../shared/corpora is not here")


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The sources; the rosbag2 sqlite3 bag is rosbag2's talker written again by rosbags."""
    out = dict(SOURCES)
    out["rosbag2_sqlite3"] = sqlite3_talker(tmp_path_factory.mktemp("sqlite3") / "talker_sqlite3")
    return out


def sqlite3_talker(bag: Path) -> Path:
    """rosbag2's talker bag (zstd MCAP storage) written again by rosbags in sqlite3 storage:
    its CDR payloads as they are, the types of rosbags' Humble store.  (rosbags reads no
    message of a zstd-chunked MCAP, so the payloads are taken with polybag, whose raw
    bytes match the mcap library's.)"""
    from rosbags.rosbag2 import Writer
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_HUMBLE)
    with polybag.open(SOURCES["rosbag2_mcap"]) as r, Writer(bag, version=8) as w:
        conns = {
            c.id: w.add_connection(c.topic, c.type_name, typestore=store) for c in r.summary.channels.values()
        }
        n = 0
        for m in r.messages(order="log_time"):
            w.write(conns[m.channel.id], m.log_time, bytes(m.data))
            n += 1
    assert n == 20
    return bag


# --- values made comparable -----------------------------------------------------------------
_KEYS = {"secs": "sec", "nsecs": "nanosec", "nsec": "nanosec"}


def norm(v: Any) -> Any:
    """A decoded value as plain data, ROS 1 and ROS 2 spellings made equal."""
    if isinstance(v, np.ndarray):
        v = v.tolist()
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, (bytes, bytearray, memoryview)):
        return list(bytes(v))
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else v
    if isinstance(v, (int, str)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return [norm(x) for x in v]
    if not isinstance(v, dict):
        v = fields_of(v)
    d = {_KEYS.get(str(k).lower(), str(k).lower()): norm(x) for k, x in v.items()}
    d.pop("structure_needs_at_least_one_member", None)  # ROS 2's stand-in field of an empty type
    if {"seq", "stamp", "frame_id"} <= d.keys():  # a ROS 1 header's seq has no ROS 2 place
        del d["seq"]
    if "tag" in d and d["tag"] is None:  # an untagged ULog logged string: tag -1 in ROS
        d["tag"] = -1
    return d


def fields_of(obj: Any) -> dict[str, Any]:
    """The fields of a reference reader's message object (genpy, mcap_ros1/2, rosbags)."""
    if dataclasses.is_dataclass(obj):
        names = [f.name for f in dataclasses.fields(obj)]
    elif getattr(obj, "__slots__", None) is not None:
        names = list(obj.__slots__)
    else:
        names = list(vars(obj))
    out = {k: getattr(obj, k) for k in names if not k.startswith("_")}
    # constants (rosbags' dataclasses and mcap_ros1's classes list them): UPPER names of scalars
    return {k: x for k, x in out.items() if not (k.isupper() and len(k) > 1 and isinstance(x, (int, float, str)))}


def same(a: Any, b: Any, where: str) -> None:
    """``a == b``, floats compared to float32 precision (a ULog float32 is a double nowhere)."""
    if isinstance(a, float) and isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-30), where
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{where}[{i}]")
    elif isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), f"{where}: {sorted(a)} != {sorted(b)}"
        for k in a:
            same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, int) and isinstance(b, int) and a != b:
        assert (a - b) % 256 == 0 and abs(a) < 256 and abs(b) < 256, f"{where}: {a} != {b}"  # byte/char
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


# --- the input, as polybag decodes it -------------------------------------------------------
def out_topic(ch: Any) -> str:
    """The topic a channel of the input has in the output (a ULog subscription: ``/name``,
    ``/name_<multi_id>`` past the first instance)."""
    if ch.message_encoding != "ulog":
        return str(ch.topic)
    name = ch.topic.lstrip("/")
    multi = str(ch.metadata.get("multi_id", "0"))
    return f"/{name}" if multi in ("", "0") else f"/{name}_{multi}"


def polybag_values(path: Path) -> dict[str, list[Any]]:
    got: dict[str, list[Any]] = {}
    with polybag.open(path) as r:
        for m in r.messages(order="log_time"):
            if m.channel.message_encoding == "json":
                v = norm(json.loads(bytes(m.data)))
            else:
                v = norm(m.to_dict())
            got.setdefault(out_topic(m.channel), []).append(v)
    return got


# --- the output, as the reference reads it --------------------------------------------------
def reference_values(path: Path, target: str) -> dict[str, list[Any]]:
    got: dict[str, list[Any]] = {}
    for topic, value in _reference(path, target):
        got.setdefault(topic, []).append(norm(value))
    return got


def _reference(path: Path, target: str) -> Iterator[tuple[str, Any]]:
    if target == "bag":
        import rosbag

        with rosbag.Bag(str(path)) as b:
            for topic, msg, _t in b.read_messages():
                yield topic, msg
    elif target.startswith("mcap"):
        from mcap.reader import make_reader
        from mcap_ros1.decoder import DecoderFactory as Ros1Decoders
        from mcap_ros2.decoder import DecoderFactory as Ros2Decoders

        factories = [Ros1Decoders(), Ros2Decoders()]
        decoders: dict[int, Any] = {}
        with open(path, "rb") as f:
            for schema, channel, message in make_reader(f).iter_messages(log_time_order=True):
                if channel.message_encoding == "json":
                    yield channel.topic, json.loads(message.data)
                    continue
                dec = decoders.get(channel.id)
                if dec is None:
                    dec = decoders[channel.id] = _mcap_decoder(factories, channel, schema)
                yield channel.topic, dec(message.data)
    else:
        yield from _rosbags(path)


def _mcap_decoder(factories: list[Any], channel: Any, schema: Any) -> Any:
    """The mcap_ros1/mcap_ros2 decoder of a channel.  A ULog's types keep their lower-case
    names in ROS 2 (``ulog_msgs/msg/sensor_combined``, as rosbags-convert keeps such names;
    convert warns), which rosidl's parser in mcap_ros2 refuses: those are decoded by rosbags,
    the other ROS 2 reference, from the schema the MCAP holds."""
    try:
        found = [f.decoder_for(channel.message_encoding, schema) for f in factories]
    except Exception as e:  # noqa: BLE001 - rosidl's InvalidResourceName
        if "invalid message name" not in str(e) or not schema.name.startswith("ulog_msgs/"):
            raise
        from rosbags.typesys import Stores, get_types_from_msg, get_typestore

        store = get_typestore(Stores.EMPTY)
        store.register(get_types_from_msg(schema.data.decode(), schema.name))
        return lambda data: store.deserialize_cdr(data, schema.name)
    return next(d for d in found if d is not None)


def _rosbags(path: Path) -> Iterator[tuple[str, Any]]:
    """A rosbag2 bag as rosbags reads it, with the definitions the bag holds.  (rosbags'
    AnyReader also compares each type's RIHS01 hash with its own, which differs from
    rosbag2's for types with ``char`` fields: rosbag2's own test bag
    ``bag_with_topics_and_service_events`` stores the hash polybag computes.)"""
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    with Reader(path) as r:
        types: dict[str, Any] = {}
        for conn in r.connections:
            assert conn.msgdef.data, f"{conn.topic}: no definition in the bag"
            types.update(get_types_from_msg(conn.msgdef.data, conn.msgtype))
        store = get_typestore(Stores.EMPTY)
        store.register(types)
        for conn, _t, raw in r.messages():
            yield conn.topic, store.deserialize_cdr(raw, conn.msgtype)


def _profile(path: Path) -> str:
    from mcap.reader import make_reader

    with open(path, "rb") as f:
        return make_reader(f).get_header().profile


def convert_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any], str]:
    capsys.readouterr()
    rc = main(["convert", *argv, "--json"])
    cap = capsys.readouterr()
    return rc, json.loads(cap.out) if cap.out.strip() else {}, cap.err


# --- the matrix -----------------------------------------------------------------------------
@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("source", list(SOURCES))
def test_every_source_converts_to_every_target(
    sources: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], source: str, target: str
) -> None:
    src = sources[source]
    dst = tmp_path / "out"
    rc, res, err = convert_cli(capsys, str(src), str(dst), *TARGETS[target])
    expected = polybag_values(src)
    assert sum(len(v) for v in expected.values()) > 0
    got = reference_values(dst, target)
    if (source, target) in NO_BRIDGE:  # JSON: no bridge into a ROS-only format, said per topic
        assert rc == 1
        assert got == {}
        assert res["dropped_topics"] == {t: len(v) for t, v in expected.items()}
        assert set(res["dropped_reasons"]) == set(expected)
        assert all("no bridge carries 'json' messages" in why for why in res["dropped_reasons"].values())
        assert "no bridge carries 'json' messages" in err
        return
    assert rc == 0, err
    assert res["dropped_messages"] == 0 and res["dropped_reasons"] == {}
    assert {t: len(v) for t, v in got.items()} == {t: len(v) for t, v in expected.items()}
    for topic, values in expected.items():
        for i, (want, have) in enumerate(zip(values, got[topic])):
            same(have, want, f"{topic}[{i}]")
    if target.startswith("mcap_ros"):
        assert _profile(dst) == target[len("mcap_") :]
    if target.startswith("rosbag2"):
        with polybag.open(dst) as r:
            assert r.info_extras()["storage"] == target[len("rosbag2_") :]
            assert {c.message_encoding for c in r.summary.channels.values()} <= {"cdr"}


# --- --profile with every output format -----------------------------------------------------
@pytest.mark.parametrize("source", ["bag", "rosbag2_mcap", "ulog"])
def test_profile_ros2_into_rosbag2(
    sources: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], source: str
) -> None:
    """``convert --profile ros2 IN OUT --format rosbag2`` works for bag, rosbag2 and ULog
    inputs (it failed with "Rosbag2Writer got unknown option(s): profile")."""
    src = sources[source]
    dst = tmp_path / "out"
    rc, res, err = convert_cli(capsys, "--profile", "ros2", str(src), str(dst), "--format", "rosbag2")
    assert rc == 0, err
    assert "unknown option" not in err
    expected = polybag_values(src)
    assert res["messages"] == sum(len(v) for v in expected.values())
    got = reference_values(dst, "rosbag2")
    assert {t: len(v) for t, v in got.items()} == {t: len(v) for t, v in expected.items()}


def test_profile_ros1_into_a_bag(sources: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dst = tmp_path / "out.bag"
    rc, res, err = convert_cli(capsys, "--profile", "ros1", str(sources["rosbag2_mcap"]), str(dst))
    assert rc == 0, err
    got = reference_values(dst, "bag")
    assert {t: len(v) for t, v in got.items()} == {"/topic": 10, "/rosout": 10}


@pytest.mark.parametrize(
    ("profile", "args", "takes"),
    [
        ("ros1", ["--format", "rosbag2"], "only --profile ros2"),
        ("ros2", ["--format", "bag"], "only --profile ros1"),
        ("ros2", ["--format", "ulog"], "no --profile"),
    ],
)
def test_a_profile_the_output_cannot_take_is_refused(
    sources: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], profile: str, args: list[str], takes: str
) -> None:
    dst = tmp_path / "out"
    capsys.readouterr()
    rc = main(["convert", "--profile", profile, str(sources["bag"]), str(dst), *args])
    err = capsys.readouterr().err
    assert rc == 2
    assert f"--profile {profile}" in err and takes in err
    assert "Traceback" not in err and "format=" not in err
    assert not dst.exists()


def test_a_python_caller_gets_a_usage_error(sources: dict[str, Path], tmp_path: Path) -> None:
    from polybag.ops import convert

    with pytest.raises(UsageError, match="--profile ros1"):
        convert(sources["ulog"], tmp_path / "out", format="rosbag2", profile="ros1")
    assert not (tmp_path / "out").exists()


# --- chains of bridges ----------------------------------------------------------------------
def test_ulog_into_rosbag2_goes_through_ros1(sources: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """ULog -> ROS 1 -> ROS 2: the rosbag2 output is not empty (it was: "64546 message(s) on
    16 topic(s) not written"), its types are the ROS 2 forms of ``ulog_msgs``, and rosbags
    reads the same values as pyulog does from the input."""
    from pyulog import ULog
    from rosbags.highlevel import AnyReader

    src = sources["ulog"]
    dst = tmp_path / "flight"
    rc, res, err = convert_cli(capsys, str(src), str(dst))  # no extension: a rosbag2 directory
    assert rc == 0, err
    assert res["output_format"] == "rosbag2" and res["dropped_messages"] == 0
    ulog = ULog(str(src))
    sc = next(d for d in ulog.data_list if d.name == "sensor_combined" and d.multi_id == 0)
    with AnyReader([dst]) as r:
        conns = [c for c in r.connections if c.topic == "/sensor_combined"]
        assert [c.msgtype for c in conns] == ["ulog_msgs/msg/sensor_combined"]
        msgs = [r.deserialize(raw, c.msgtype) for c, _t, raw in r.messages(connections=conns)]
    assert len(msgs) == len(sc.data["timestamp"])
    assert [m.timestamp for m in msgs] == sc.data["timestamp"].tolist()
    assert np.allclose([m.accelerometer_m_s2[2] for m in msgs], sc.data["accelerometer_m_s2[2]"])


def test_ros2_into_ulog_goes_through_ros1(sources: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """CDR -> ROS 1 -> ULog: fixed-layout ROS 2 messages become ULog subscriptions; strings
    (which a ULog cannot hold) are dropped with the reason named per topic."""
    from pyulog import ULog

    dst = tmp_path / "out.ulg"
    rc, res, err = convert_cli(capsys, str(sources["mcap_ros2"]), str(dst))
    kept = {d.name: len(d.data["timestamp"]) for d in ULog(str(dst)).data_list}
    assert sum(kept.values()) == res["messages"] > 0
    assert res["messages"] + res["dropped_messages"] == 7
    assert res["dropped_topics"] == {"/array_topic": 4}  # test_msgs/Arrays holds strings
    assert "string field" in res["dropped_reasons"]["/array_topic"]
    for topic in res["dropped_topics"]:
        assert topic in res["dropped_reasons"], topic
        assert f"topic {topic}:" in err
    assert rc == (1 if res["dropped_messages"] else 0)


def test_ulog_through_rosbag2_and_back_is_the_same_log(
    sources: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ULog -> ROS 1 -> ROS 2 into rosbag2, then ROS 2 -> ROS 1 -> ULog: pyulog reads every
    subscription, field and value of the input back; the ROS 2 names rosidl refuses (the
    ULog's lower-case type names) are said once, not once per topic."""
    from pyulog import ULog

    src = sources["ulog"]
    rc, res, err = convert_cli(capsys, str(src), str(tmp_path / "b"), "--format", "rosbag2")
    assert rc == 0, err
    refused = [w for w in res["warnings"] if "ROS 2 tools refuse" in w]
    assert len(refused) == 1 and "ulog_msgs/msg/actuator_armed: type name 'actuator_armed'" in refused[0]
    rc, res, err = convert_cli(capsys, str(tmp_path / "b"), str(tmp_path / "back.ulg"))
    assert rc == 0, err
    assert res["dropped_messages"] == 0
    a, b = ULog(str(src)), ULog(str(tmp_path / "back.ulg"))
    # (pyulog lists some padding, "next._padding0[1]": no data, not carried)
    want = {(d.name, d.multi_id): {f: v for f, v in d.data.items() if "_padding" not in f} for d in a.data_list}
    got = {(d.name, d.multi_id): {f: v for f, v in d.data.items() if "_padding" not in f} for d in b.data_list}
    assert got.keys() == want.keys()
    for key, data in want.items():
        assert got[key].keys() == data.keys(), key
        for f, values in data.items():
            assert np.array_equal(got[key][f], values, equal_nan=values.dtype.kind == "f"), (key, f)
    assert [m.message for m in b.logged_messages] == [m.message for m in a.logged_messages]
