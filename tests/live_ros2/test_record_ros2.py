"""``polybag record --ros2`` against a real rclpy talker (Fast DDS) and plain Cyclone DDS writers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from ros2_graph import (
    POLYBAG,
    cyclone_problem,
    finish,
    last_json,
    node,
    process,
    rclpy_problem,
    ros2_env,
    stop_recorder,
    wait_ready,
)

pytestmark = pytest.mark.skipif(bool(cyclone_problem()), reason=cyclone_problem() or "cyclonedds")
needs_rclpy = pytest.mark.skipif(bool(rclpy_problem()), reason=rclpy_problem() or "rclpy")

N = 25


def _read_rosbags(path: Path) -> dict[str, list]:
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_JAZZY)
    got: dict[str, list] = {}
    with Reader(path) as r:
        for conn, _t, raw in r.messages():
            got.setdefault(conn.topic, []).append(store.deserialize_cdr(raw, conn.msgtype))
    return got


def _qos(path: Path) -> dict[str, str]:
    meta = yaml.safe_load((path / "metadata.yaml").read_text())
    out = {}
    for t in meta["rosbag2_bagfile_information"]["topics_with_message_count"]:
        out[t["topic_metadata"]["name"]] = str(t["topic_metadata"]["offered_qos_profiles"])
    return out


def _record_talker(args: list[str], count: object, env: dict[str, str]) -> tuple[int, Any, int, Any, str]:
    """``polybag ARGS`` recording while an rclpy talker sends ``count`` messages per topic:
    (the talker's exit code, what it sent, the recorder's exit code, its JSON report, stderr)."""
    with node("talker", count, env=env) as talker:
        wait_ready(talker)
        with process([*POLYBAG, *args], env) as rec:
            talker_code, talker_out, _ = finish(talker, 90)
            sent = last_json(talker_out)
            code, report, err = stop_recorder(rec)
    return talker_code, sent, code, report, err


@needs_rclpy
@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_record_rclpy_talker_every_message_and_qos(tmp_path: Path, storage: str) -> None:
    env = ros2_env()
    out = tmp_path / "rec"
    args = [
        "record",
        "--ros2",
        "/chatter",
        "/imu",
        "/latched",
        "/scan",
        "-O",
        str(out),
        "--storage",
        storage,
        "--json",
    ]
    talker_code, sent, code, report, err = _record_talker(args, N, env)
    assert talker_code == 0
    assert code == 0, err
    assert report["errors"] == []
    for topic in ("/chatter", "/imu", "/latched"):
        assert report["topics"][topic]["written"] == len(sent[topic]), (topic, report)
    got = _read_rosbags(out)
    assert [m.data for m in got["/chatter"]] == sent["/chatter"]
    assert [m.data for m in got["/latched"]] == ["latched hello"]
    imu = [
        [
            m.header.frame_id,
            m.header.stamp.sec,
            m.orientation.w,
            m.angular_velocity.z,
            list(m.linear_acceleration_covariance),
        ]
        for m in got["/imu"]
    ]
    assert imu == sent["/imu"]
    # best effort on the loopback: what arrived is what was sent, in order
    scans = [[m.angle_max, list(m.ranges)] for m in got["/scan"]]
    assert scans and all(s in sent["/scan"] for s in scans)
    assert [sent["/scan"].index(s) for s in scans] == sorted(sent["/scan"].index(s) for s in scans)
    qos = _qos(out)
    assert "transient_local" in qos["/latched"] or "durability: 1" in qos["/latched"]
    assert "best_effort" in qos["/scan"] or "reliability: 2" in qos["/scan"]
    assert "volatile" in qos["/chatter"] or "durability: 2" in qos["/chatter"]


@needs_rclpy
def test_record_rclpy_to_mcap_ros2_profile(tmp_path: Path) -> None:
    from mcap.reader import make_reader

    env = ros2_env()
    out = tmp_path / "rec.mcap"
    _talker, sent, code, report, err = _record_talker(
        ["record", "--ros2", "-a", "-x", "/(rosout|parameter_events)", "-O", str(out), "--json"], 10, env
    )
    assert code == 0, err
    with open(out, "rb") as f:
        r = make_reader(f)
        header = r.get_header()
        summary = r.get_summary()
        assert summary is not None
        assert header.profile == "ros2"
        chans = {c.topic: c for c in summary.channels.values()}
        assert set(chans) == {"/chatter", "/imu", "/latched", "/scan"}
        assert all(c.message_encoding == "cdr" for c in chans.values())
        assert "offered_qos_profiles" in chans["/latched"].metadata
        assert summary.schemas[chans["/imu"].schema_id].name == "sensor_msgs/msg/Imu"
        counts = summary.statistics.channel_message_counts if summary.statistics else {}
        assert counts[chans["/chatter"].id] == len(sent["/chatter"])


def test_unknown_type_recorded_raw_with_warning_and_types_dir(tmp_path: Path) -> None:
    env = ros2_env()
    out = tmp_path / "raw"
    with node("ddspub", "rt/thing", "my_pkg::msg::dds_::Thing_", "reliable", 12, env=env) as pub:
        wait_ready(pub)
        with process([*POLYBAG, "record", "--ros2", "/thing", "-O", str(out), "--json"], env) as rec:
            code, _o, _e = finish(pub, 60)
            code, report, err = stop_recorder(rec)
    assert code == 0, err
    assert report["topics"]["/thing"]["written"] == 12
    assert any("my_pkg/msg/Thing" in w and "not known" in w for w in report["warnings"]), report["warnings"]
    import polybag

    with polybag.open(out) as r:
        msgs = list(r.messages())
        assert len(msgs) == 12
        assert msgs[0].channel.schema is not None and msgs[0].channel.schema.name == "my_pkg/msg/Thing"
        # the bytes as sent: CDR header, int32 a, string b
        assert bytes(msgs[3].data)[:8] == b"\x00\x01\x00\x00\x03\x00\x00\x00"
        assert b"thing 3\x00" in bytes(msgs[3].data)

    # with --types the definition is known and the messages decode
    types = tmp_path / "types" / "my_pkg" / "msg"
    types.mkdir(parents=True)
    (types / "Thing.msg").write_text("int32 a\nstring b\n")
    env = ros2_env()
    out2 = tmp_path / "typed"
    with node("ddspub", "rt/thing", "my_pkg::msg::dds_::Thing_", "reliable", 5, env=env) as pub:
        wait_ready(pub)
        with process(
            [
                *POLYBAG,
                "record",
                "--ros2",
                "/thing",
                "--types",
                str(tmp_path / "types"),
                "-O",
                str(out2),
                "--json",
            ],
            env,
        ) as rec:
            finish(pub, 60)
            code, report, err = stop_recorder(rec)
    assert code == 0, err
    assert not any("not known" in w for w in report["warnings"])
    with polybag.open(out2) as r:
        vals = [m.decode() for m in r.messages()]
    assert [(v.a, v.b) for v in vals] == [(i, f"thing {i}") for i in range(5)]


def test_incompatible_qos_publisher_named_in_warning(tmp_path: Path) -> None:
    env = ros2_env()
    out = tmp_path / "mixed"
    with node("ddspub", "rt/mixed", "std_msgs::msg::dds_::String_", "reliable", 200, env=env) as good:
        wait_ready(good)
        with process([*POLYBAG, "record", "--ros2", "/mixed", "-O", str(out), "--json"], env) as rec:
            # the recorder subscribes reliable; then a best-effort writer appears
            wait_ready(good, word="matched")
            with node("ddspub", "rt/mixed", "std_msgs::msg::dds_::String_", "best_effort", 1, env=env) as bad:
                wait_ready(bad)
                finish(good, 60)
                bad.kill()
            code, report, err = stop_recorder(rec)
    assert code == 0, err
    warnings = [w for w in report["warnings"] if "incompatible QoS" in w]
    assert warnings and "/mixed" in warnings[0] and "best_effort" in warnings[0], report["warnings"]


def test_empty_domain_records_nothing_and_exits_cleanly(tmp_path: Path) -> None:
    import time

    env = ros2_env()
    out = tmp_path / "empty"
    with process([*POLYBAG, "record", "--ros2", "-a", "-O", str(out), "--json"], env) as rec:
        # the output is begun after the signal handlers are in place: SIGINT then stops it cleanly
        end = time.monotonic() + 120
        while not any(p.name.startswith("empty") for p in tmp_path.iterdir()):
            assert rec.poll() is None and time.monotonic() < end, "the recorder never began its output"
            time.sleep(0.05)
        code, report, err = stop_recorder(rec)
    assert code == 0, err
    assert report["topics"] == {} and report["errors"] == []
    assert (out / "metadata.yaml").exists()


def test_limit_stops_by_itself_and_split_by_duration(tmp_path: Path) -> None:
    import polybag

    env = ros2_env()
    out = tmp_path / "lim"
    with node("ddspub", "rt/thing", "my_pkg::msg::dds_::Thing_", "reliable", 50, env=env) as pub:
        wait_ready(pub)
        with process(
            [*POLYBAG, "record", "--ros2", "/thing", "-l", "5", "-O", str(out), "--json", "-q"], env
        ) as rec:
            code, out_text, err = finish(rec, 60)  # (ends by itself: -l reached on every named topic)
            finish(pub, 60)
    assert code == 0, err
    report = json.loads(out_text)  # (--json: the report alone on stdout)
    assert report["topics"]["/thing"]["written"] == 5
    with polybag.open(out) as r:
        assert sum(1 for _ in r.messages()) == 5

    env = ros2_env()
    prefix = tmp_path / "part"
    with node("ddspub", "rt/thing", "my_pkg::msg::dds_::Thing_", "reliable", 150, env=env) as pub:
        wait_ready(pub)
        args = [
            *POLYBAG,
            "record",
            "--ros2",
            "/thing",
            "--split",
            "--duration",
            "0.5",
            "-O",
            str(prefix),
            "--json",
        ]
        with process(args, env) as rec:
            finish(pub, 60)
            code, report, err = stop_recorder(rec)
    assert code == 0, err
    files = report["files"]
    assert len(files) >= 2, files
    total = 0
    for f in files:
        assert not f.endswith(".bag") and (Path(f) / "metadata.yaml").exists()
        with polybag.open(f) as r:
            total += sum(1 for _ in r.messages())
    assert total == report["topics"]["/thing"]["written"] == 150


@needs_rclpy
def test_record_to_ros1_bag_converted(tmp_path: Path) -> None:
    from rosbags.rosbag1 import Reader
    from rosbags.typesys import Stores, get_typestore

    env = ros2_env()
    out = tmp_path / "r1.bag"
    _talker, sent, code, report, err = _record_talker(
        ["record", "--ros2", "/chatter", "/imu", "/latched", "/scan", "-O", str(out), "--json"], 10, env
    )
    assert code == 0, err
    store = get_typestore(Stores.ROS1_NOETIC)
    got: dict[str, list] = {}
    latching = {}
    with Reader(out) as r:
        for c in r.connections:
            latching[c.topic] = c.ext.latching
        for conn, _t, raw in r.messages():
            got.setdefault(conn.topic, []).append(store.deserialize_ros1(raw, conn.msgtype))
    assert [m.data for m in got["/chatter"]] == sent["/chatter"]
    assert [m.header.frame_id for m in got["/imu"]] == [x[0] for x in sent["/imu"]]
    assert [list(m.linear_acceleration_covariance) for m in got["/imu"]] == [x[4] for x in sent["/imu"]]
    assert [m.data for m in got["/latched"]] == ["latched hello"]
    assert latching["/latched"] == 1 and not latching["/chatter"]


@needs_rclpy
def test_snapshot_triggered_by_ros2_topic_in_namespace(tmp_path: Path) -> None:
    import polybag

    env = ros2_env()
    prefix = tmp_path / "snap"
    with node("ddspub", "rt/thing", "my_pkg::msg::dds_::Thing_", "reliable", 40, env=env) as pub:
        wait_ready(pub)
        args = [
            *POLYBAG,
            "record",
            "--ros2",
            "/thing",
            "-s",
            "--namespace",
            "robot1",
            "-o",
            str(prefix),
            "--json",
        ]
        with process(args, env) as rec:
            finish(pub, 60)  # (all 40 sent and in the ring)
            with node("trigger", "/robot1/snapshot_trigger", env=env) as trig:
                code, _o, err = finish(trig, 60)
                assert code == 0, err
            code, report, err = stop_recorder(rec)
    assert code == 0, err
    assert len(report["files"]) == 1, report
    with polybag.open(report["files"][0]) as r:
        assert sum(1 for _ in r.messages()) == 40


def test_discovery_off_sees_no_publisher(tmp_path: Path) -> None:
    import time

    env = ros2_env()
    off = {**env, "ROS_LOCALHOST_ONLY": "0", "ROS_AUTOMATIC_DISCOVERY_RANGE": "OFF"}
    out = tmp_path / "off"
    with node("ddspub", "rt/thing", "my_pkg::msg::dds_::Thing_", "reliable", 5, env=env) as pub:
        wait_ready(pub)
        with process([*POLYBAG, "record", "--ros2", "-a", "-O", str(out), "--json"], off) as rec:
            time.sleep(3.0)
            code, report, err = stop_recorder(rec)
        assert pub.poll() is None  # (still waiting for a subscriber: nobody found it)
    assert code == 0, err
    assert report["topics"] == {}


def test_config_several_recorders_share_one_subscription(tmp_path: Path) -> None:
    import polybag

    cfg = tmp_path / "rec.yaml"
    a, b = tmp_path / "a", tmp_path / "b.mcap"
    cfg.write_text(
        "recorders:\n"
        f"  - {{topics: [/thing], output_name: {a}, limit: 3}}\n"
        f"  - {{all: true, exclude: '/(rosout|parameter_events)', output_name: {b}}}\n"
    )
    env = ros2_env()
    with node("ddspub", "rt/thing", "my_pkg::msg::dds_::Thing_", "reliable", 20, env=env) as pub:
        wait_ready(pub)
        with process([*POLYBAG, "record", "--ros2", "--config", str(cfg), "--json"], env) as rec:
            finish(pub, 60)
            code, report, err = stop_recorder(rec)
    assert code == 0, err
    first, second = report["recorders"]
    assert first["topics"]["/thing"]["written"] == 3
    assert second["topics"]["/thing"]["written"] == 20
    with polybag.open(a) as r:
        assert sum(1 for _ in r.messages()) == 3
    with polybag.open(b) as r:
        assert sum(1 for _ in r.messages()) == 20
    assert err.count("Subscribing to /thing") <= 1


@needs_rclpy
def test_publish_begin_write_on_every_new_file(tmp_path: Path) -> None:
    env = ros2_env()
    prefix = tmp_path / "p"
    with node("empties", "/begin_write", 12, env=env) as lis:
        wait_ready(lis)
        with node("ddspub", "rt/thing", "my_pkg::msg::dds_::Thing_", "reliable", 120, env=env) as pub:
            wait_ready(pub)
            args = [
                *POLYBAG,
                "record",
                "--ros2",
                "/thing",
                "-p",
                "--split",
                "--duration",
                "0.3",
                "-O",
                str(prefix),
                "--json",
            ]
            with process(args, env) as rec:
                finish(pub, 60)
                code, report, err = stop_recorder(rec)
        _c, out, _e = finish(lis, 60)
    assert code == 0, err
    n_files = len(report["files"])
    assert n_files >= 2
    assert n_files - 1 <= last_json(out)["empties"] <= n_files
