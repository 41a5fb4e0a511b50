"""Bundled definitions added later, POLYBAG_MSG_PATH, ``to_dict`` bytes and ``cat --json``."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from rosbags import typesys

from polybag.codecs.ros1 import bundled, codec_for_type, definition_for

NEW_TYPES = [
    "sensor_msgs/MultiDOFJointState",
    "visualization_msgs/InteractiveMarker",
    "visualization_msgs/InteractiveMarkerControl",
    "visualization_msgs/InteractiveMarkerFeedback",
    "visualization_msgs/InteractiveMarkerInit",
    "visualization_msgs/InteractiveMarkerPose",
    "visualization_msgs/InteractiveMarkerUpdate",
    "visualization_msgs/MenuEntry",
]
# md5sums printed by the Debian ROS packages (python3-visualization-msgs, python3-sensor-msgs)
DEBIAN_MD5 = {
    "sensor_msgs/MultiDOFJointState": "690f272f0640d2631c305eeb8301e59d",
    "visualization_msgs/InteractiveMarker": "dd86d22909d5a3364b384492e35c10af",
    "visualization_msgs/InteractiveMarkerControl": "b3c81e785788195d1840b86c28da1aac",
    "visualization_msgs/InteractiveMarkerFeedback": "ab0f1eee058667e28c19ff3ffc3f4b78",
    "visualization_msgs/InteractiveMarkerInit": "d5f2c5045a72456d228676ab91048734",
    "visualization_msgs/InteractiveMarkerPose": "a6e6833209a196a38d798dadb02c81f8",
    "visualization_msgs/InteractiveMarkerUpdate": "710d308d0a9276d65945e92dd30b3946",
    "visualization_msgs/MenuEntry": "b90ec63024573de83b57aa93eb39be2d",
}


@pytest.mark.parametrize("name", NEW_TYPES)
def test_new_bundled_types_match_rosbags_and_debian(name: str) -> None:
    store = typesys.get_typestore(typesys.Stores.ROS1_NOETIC)
    md5 = bundled().md5(name)
    assert md5 == store.generate_msgdef(name.replace("/", "/msg/", 1))[1]
    assert md5 == DEBIAN_MD5[name]


def test_every_bundled_type_matches_rosbags_store() -> None:
    store = typesys.get_typestore(typesys.Stores.ROS1_NOETIC)
    ts = bundled()
    checked = set()
    for name in ts.types:
        full = name.replace("/", "/msg/", 1)
        if full in store.fielddefs:
            assert ts.md5(name) == store.generate_msgdef(full)[1], name
            checked.add(name)
    assert set(NEW_TYPES) <= checked
    assert len(checked) > 100


def test_interactive_marker_update_roundtrip_with_rosbags() -> None:
    codec = codec_for_type("visualization_msgs/InteractiveMarkerUpdate", definition_for("visualization_msgs/InteractiveMarkerUpdate"))
    d = {
        "server_id": "srv",
        "seq_num": 7,
        "type": 1,
        "markers": [{"name": "m", "scale": 0.5, "menu_entries": [{"id": 1, "title": "go", "command_type": 2}],
                     "controls": [{"name": "c", "interaction_mode": 3, "markers": [{"text": "hi", "points": [{"x": 1.0}]}]}]}],
        "poses": [{"name": "p"}],
        "erases": ["a", "b"],
    }
    raw = codec.encode(d)
    store = typesys.get_typestore(typesys.Stores.ROS1_NOETIC)
    ref = store.deserialize_ros1(raw, "visualization_msgs/msg/InteractiveMarkerUpdate")
    assert ref.markers[0].controls[0].markers[0].points[0].x == 1.0
    assert ref.markers[0].menu_entries[0].title == "go"
    assert ref.erases == ["a", "b"]
    assert store.serialize_ros1(ref, "visualization_msgs/msg/InteractiveMarkerUpdate").tobytes() == raw


# --- POLYBAG_MSG_PATH ---------------------------------------------------------------------

_CHILD = r"""
import sys
from polybag.model import Channel, Message, Schema
from polybag.errors import PolybagError
md5 = sys.argv[1]
ch = Channel(3, "/w", "ros1", Schema(1, "my_robot_msgs/Wheels", "ros1msg", b""),
             {"type": "my_robot_msgs/Wheels", "md5sum": md5})
payload = bytes.fromhex(sys.argv[2])
m = Message(ch, 1, 1, 0, payload)
try:
    d = m.to_dict()
except PolybagError as e:
    print("ERROR", type(e).__name__, e)
else:
    print("OK", [w["name"] for w in d["wheels"]], d["wheels"][1]["speed"])
"""


def test_msg_path_env_for_files_without_definitions(tmp_path: Path) -> None:
    text_wheel = "# a wheel\nfloat32 speed\nstring name\n"
    text_wheels = "Header header\nWheel[2] wheels\n"
    a = tmp_path / "ws1" / "my_robot_msgs" / "msg"  # pkg/msg/*.msg
    a.mkdir(parents=True)
    (a / "Wheels.msg").write_text(text_wheels)
    b = tmp_path / "ws2" / "my_robot_msgs"  # pkg/*.msg in a second folder
    b.mkdir(parents=True)
    (b / "Wheel.msg").write_text(text_wheel)
    full = text_wheels + "=" * 80 + "\nMSG: my_robot_msgs/Wheel\n" + text_wheel
    codec = codec_for_type("my_robot_msgs/Wheels", full)
    md5 = codec.md5sum
    raw = codec.encode({"wheels": [{"speed": 1.5, "name": "left"}, {"speed": 2.5, "name": "right"}]})
    env = {k: v for k, v in os.environ.items() if k != "POLYBAG_MSG_PATH"}

    def child(extra: dict[str, str]) -> str:
        res = subprocess.run(
            [sys.executable, "-c", _CHILD, md5, raw.hex()], env={**env, **extra},
            capture_output=True, text=True, check=True,
        )
        return res.stdout.strip()

    folders = os.pathsep.join([str(tmp_path / "ws1"), str(tmp_path / "ws2"), str(tmp_path / "missing")])
    assert child({"POLYBAG_MSG_PATH": folders}) == "OK ['left', 'right'] 2.5"
    out = child({})
    assert out.startswith("ERROR UnsupportedError") or out.startswith("ERROR DecodeError"), out
    assert "my_robot_msgs/Wheels" in out and md5 in out and "POLYBAG_MSG_PATH" in out


# --- to_dict bytes and cat --json ----------------------------------------------------------


def test_to_dict_keeps_bytes_for_uint8_arrays() -> None:
    codec = codec_for_type("std_msgs/UInt8MultiArray", definition_for("std_msgs/UInt8MultiArray"))
    d = codec.to_dict(codec.encode({"data": b"\x00\xff\x10"}))
    assert d["data"] == b"\x00\xff\x10"
    assert "bytes" in (codec.to_dict.__doc__ or "") and "base64" in (codec.to_dict.__doc__ or "")


def _cat_json(path: Path) -> list[dict]:
    import contextlib
    import io

    from polybag.cli import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["cat", "--json", str(path)]) == 0
    lines = buf.getvalue().splitlines()
    assert lines
    return [json.loads(line) for line in lines]


def test_cat_json_pointcloud2_base64(corpora: Path) -> None:
    import polybag

    path = corpora / "rosbag" / "swri-bag-reader-java" / "PointCloud2.bag"
    rows = _cat_json(path)
    with polybag.open(str(path)) as r:
        raws = [m.to_dict()["data"] for m in r.messages()]
    assert len(rows) == len(raws)
    for row, raw in zip(rows, raws):
        assert isinstance(raw, bytes) and len(raw) > 1000
        assert base64.b64decode(row["message"]["data"]) == raw
        assert row["message"]["fields"][0]["name"] == "x"


def test_cat_json_uint8_multiarray(corpora: Path) -> None:
    import polybag

    path = corpora / "rosbag" / "swri-bag-reader-java" / "UInt8MultiArray.bag"
    rows = _cat_json(path)
    with polybag.open(str(path)) as r:
        raws = [m.to_dict()["data"] for m in r.messages()]
    assert [base64.b64decode(row["message"]["data"]) for row in rows] == raws
    assert all(isinstance(row["message"]["layout"]["dim"], list) for row in rows)


def test_cat_json_numpy_values() -> None:
    from polybag.cli.cat import _jsonable

    obj = {"a": np.arange(3, dtype=np.float32), "b": np.int64(5), "c": b"\x01\x02", "d": np.zeros((2, 2))}
    back = json.loads(json.dumps(obj, default=_jsonable))
    assert back == {"a": [0.0, 1.0, 2.0], "b": 5, "c": "AQI=", "d": [[0.0, 0.0], [0.0, 0.0]]}
