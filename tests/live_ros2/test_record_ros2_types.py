"""``polybag record --ros2``: types from the publishers' type description service, hidden topics.

A real rclpy node publishes test_msgs types (which polybag does not bundle); the recorder
asks the node's ``~/get_type_description`` service and stores the definition, so the file
decodes (rosbags, with the definition registered from the file) to what was published.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ros2_graph import (
    NEEDS_RCLPY,
    POLYBAG,
    finish,
    last_json,
    node,
    process,
    ros2_env,
    stop_recorder,
    wait_ready,
)

pytestmark = NEEDS_RCLPY

N = 12


def _test_msgs_problem() -> str:
    try:
        import test_msgs.msg  # noqa: F401
    except Exception as e:  # noqa: BLE001 - any failure: not here
        return f"ros-jazzy-test-msgs cannot be imported: {e}"
    return ""


needs_test_msgs = pytest.mark.skipif(bool(_test_msgs_problem()), reason=_test_msgs_problem() or "test_msgs")


def _record_typed(args: list[str], env: dict[str, str]) -> tuple[Any, int, Any, str]:
    with node("typed", N, env=env) as talker:
        wait_ready(talker)
        with process([*POLYBAG, *args], env) as rec:
            tcode, tout, terr = finish(talker, 90)
            assert tcode == 0, terr
            code, report, err = stop_recorder(rec)
    return last_json(tout), code, report, err


def _read_with_file_definitions(path: Path) -> tuple[dict[str, list], dict[str, str]]:
    """Every message by topic, decoded by rosbags with the definitions stored in the bag
    registered first (the types are not in rosbags' own store)."""
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    store = get_typestore(Stores.ROS2_JAZZY)
    got: dict[str, list] = {}
    defs: dict[str, str] = {}
    with Reader(path) as r:
        for c in r.connections:
            defs[c.topic] = c.msgdef.data
            if c.msgtype.startswith("test_msgs/"):
                store.register(get_types_from_msg(c.msgdef.data, c.msgtype))
        for conn, _t, raw in r.messages():
            got.setdefault(conn.topic, []).append(store.deserialize_cdr(raw, conn.msgtype))
    return got, defs


def test_test_msgs_are_not_bundled() -> None:
    from polybag.codecs.ros2 import known_types

    assert "test_msgs/Arrays" not in known_types() and "test_msgs/BasicTypes" not in known_types()


@needs_test_msgs
@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_types_from_type_description_service_and_hidden_topics_skipped(tmp_path: Path, storage: str) -> None:
    env = ros2_env()
    out = tmp_path / "typed"
    args = [
        "record",
        "--ros2",
        "-a",
        "-x",
        "/(rosout|parameter_events)",
        "-O",
        str(out),
        "--storage",
        storage,
        "--json",
    ]
    sent, code, report, err = _record_typed(args, env)
    assert code == 0, err
    assert not any("not known" in w for w in report["warnings"]), report["warnings"]
    # -a skips the hidden topics, as ros2 bag record
    assert set(report["topics"]) == {"/arr", "/basic", "/shown"}, report["topics"]
    got, defs = _read_with_file_definitions(out)
    assert "MSG: test_msgs/msg/BasicTypes" in defs["/arr"]
    arr = [
        [
            list(m.int32_values),
            list(m.float64_values),
            list(m.string_values),
            list(m.bool_values),
            m.basic_types_values[1].int8_value,
            m.basic_types_values[2].uint64_value,
        ]
        for m in got["/arr"]
    ]
    assert arr == sent["/arr"]
    basic = [[m.int16_value, m.float32_value, m.uint8_value, m.bool_value] for m in got["/basic"]]
    assert basic == sent["/basic"]
    assert [m.data for m in got["/shown"]] == sent["/shown"]

    import polybag

    with polybag.open(out) as r:  # (polybag decodes them too, from the stored definition)
        vals = [m.decode() for m in r.messages(topics=["/basic"])]
    assert [v.int16_value for v in vals] == [x[0] for x in sent["/basic"]]


@needs_test_msgs
def test_include_hidden_topics_and_type_timeout_zero(tmp_path: Path) -> None:
    env = ros2_env()
    out = tmp_path / "hidden.mcap"
    args = [
        "record", "--ros2", "-a", "-x", "/(rosout|parameter_events)", "--include-hidden-topics",
        "--type-timeout", "0", "-O", str(out), "--json",
    ]  # fmt: skip
    sent, code, report, err = _record_typed(args, env)
    assert code == 0, err
    assert {"/_hidden", "/vis/_priv/x", "/shown", "/arr"} <= set(report["topics"]), report["topics"]
    assert report["topics"]["/_hidden"]["written"] == len(sent["/_hidden"])
    # never asked: the unknown type is recorded raw, with the warning
    assert any("test_msgs/msg/Arrays" in w and "not known" in w for w in report["warnings"]), report[
        "warnings"
    ]
    assert report["topics"]["/arr"]["written"] == N


def test_hidden_topic_named_is_recorded(tmp_path: Path) -> None:
    env = ros2_env()
    out = tmp_path / "named"
    with node("ddspub", "rt/ns/_private", "my_pkg::msg::dds_::Thing_", "reliable", 6, env=env) as pub:
        wait_ready(pub)
        with process([*POLYBAG, "record", "--ros2", "/ns/_private", "-O", str(out), "--json"], env) as rec:
            finish(pub, 60)
            code, report, err = stop_recorder(rec)
    assert code == 0, err
    assert report["topics"]["/ns/_private"]["written"] == 6


@needs_test_msgs
def test_service_that_does_not_answer_falls_back_to_raw_keeping_every_message(tmp_path: Path) -> None:
    import polybag

    env = ros2_env()
    out = tmp_path / "raw"
    args = ["record", "--ros2", "/arr", "/basic", "--type-timeout", "1.5", "-O", str(out), "--json"]
    with node("typed", N, "nospin", env=env) as talker:
        wait_ready(talker)
        with process([*POLYBAG, *args], env) as rec:
            tcode, tout, terr = finish(talker, 90)
            assert tcode == 0, terr
            code, report, err = stop_recorder(rec)
    assert code == 0, err
    warned = [w for w in report["warnings"] if "not known" in w]
    assert len(warned) == 2 and all("did not answer" in w for w in warned), report["warnings"]
    assert report["topics"]["/arr"]["written"] == N and report["topics"]["/basic"]["written"] == N
    with polybag.open(out) as r:
        msgs = list(r.messages(topics=["/basic"]))
    assert len(msgs) == N
    assert all(m.channel.schema is not None and m.channel.schema.data == b"" for m in msgs)
    # the bytes as sent: CDR header, then BasicTypes' bool true first
    assert bytes(msgs[0].data)[:5] == b"\x00\x01\x00\x00\x01"
