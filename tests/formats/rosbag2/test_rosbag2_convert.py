"""rosbag2 through the operations, with no rosbag2 code in ops or cli: ``convert`` ROS 1 bags
(the rosbag2_bag_v2 corpus) to rosbag2 directories and back (values equal but ``seq``,
md5sums the originals'), read by rosbags; ``info``/``cat``/``filter``/``merge`` on a bag
directory; an existing output refused without ``--force``."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from rosbag2_helpers import CORPORA, polybag_view, rosbags_view, write_rosbags_bag

import polybag
from polybag.cli import main
from polybag.ops import convert

V2 = CORPORA / "rosbag" / "rosbag2_bag_v2"
BAGS = sorted(p.name for p in V2.glob("*.bag"))


def _without_seq(d: Any) -> Any:
    if isinstance(d, dict):
        return {k: _without_seq(v) for k, v in d.items() if k != "seq"}
    if isinstance(d, list):
        return [_without_seq(v) for v in d]
    return d


def _ros2_time(d: Any) -> Any:
    """ROS 1 ``{secs, nsecs}``/``{sec, nsec}`` and ROS 2 ``{sec, nanosec}`` spelled alike."""
    if isinstance(d, dict):
        if set(d) in ({"secs", "nsecs"}, {"sec", "nsec"}, {"sec", "nanosec"}):
            v = list(d.values())
            return ("t", v[0], v[1])
        return {k: _ros2_time(v) for k, v in d.items()}
    if isinstance(d, list):
        return [_ros2_time(v) for v in d]
    return d


@pytest.mark.skipif(not BAGS, reason="the rosbag2_bag_v2 corpus is not here")
@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
@pytest.mark.parametrize("name", BAGS)
def test_ros1_bag_to_rosbag2_and_back(tmp_path: Path, name: str, storage: str) -> None:
    src = V2 / name
    mid = tmp_path / "mid"
    r1 = convert(src, mid, format="rosbag2", **({"chunk_size": 4096} if storage == "mcap" else {}))
    assert r1.messages > 0 and not r1.warnings
    if storage == "mcap":  # the same through MCAP storage, from the rosbag2 just written
        convert(mid, tmp_path / "mid_mcap", format="rosbag2")
        mid = tmp_path / "mid_mcap"
    with polybag.open(src) as a, polybag.open(mid) as b:
        assert b.format == "rosbag2"
        assert {c.message_encoding for c in b.summary.channels.values()} == {"cdr"}
        ma = [(m.topic, m.log_time, _ros2_time(_without_seq(m.to_dict()))) for m in a.messages()]
        mb = [(m.topic, m.log_time, _ros2_time(_without_seq(m.to_dict()))) for m in b.messages()]
        assert ma == mb
    assert len(rosbags_view(mid)) == r1.messages
    back = tmp_path / "back.bag"
    convert(mid, back)
    with polybag.open(src) as a, polybag.open(back) as b:
        md5a = {c.topic: c.metadata.get("md5sum") for c in a.summary.channels.values()}
        md5b = {c.topic: c.metadata.get("md5sum") for c in b.summary.channels.values()}
        assert md5a == md5b
        ma = [(m.topic, m.log_time, _without_seq(m.to_dict())) for m in a.messages()]
        mb = [(m.topic, m.log_time, _without_seq(m.to_dict())) for m in b.messages()]
        assert ma == mb


def test_the_commands_take_a_bag_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bag = tmp_path / "run"
    write_rosbags_bag(bag, n=30)
    assert main(["info", "--json", str(bag)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["format"] == "rosbag2" and info["message_count"] == 30
    assert main(["cat", str(bag), "--topics", "/chatter", "--limit", "2"]) == 0
    out = capsys.readouterr().out
    assert out.count("/chatter") == 2 and "hello" in out
    assert main(["filter", str(bag), str(tmp_path / "f.mcap"), "--include-topic", "/imu"]) == 0
    assert [m[0] for m in polybag_view(tmp_path / "f.mcap")] == ["/imu"] * 10
    assert main(["merge", str(bag), str(tmp_path / "f.mcap"), "-o", str(tmp_path / "m.mcap")]) in (0, 1)
    assert len(polybag_view(tmp_path / "m.mcap")) == 40
    out2 = tmp_path / "out"
    assert main(["convert", str(bag), str(out2), "--format", "rosbag2"]) == 0
    assert rosbags_view(out2) == rosbags_view(bag)
    assert main(["convert", str(bag), str(out2), "--format", "rosbag2"]) != 0  # exists: refused
    capsys.readouterr()
    assert main(["convert", str(bag), str(out2), "--format", "rosbag2", "--force"]) == 0
    assert rosbags_view(out2) == rosbags_view(bag)


def test_check_reads_a_bag_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bag = tmp_path / "run"
    write_rosbags_bag(bag, n=30)
    assert main(["check", str(bag)]) == 0
    assert "OK, 30 messages read" in capsys.readouterr().out
    con = sqlite3.connect(bag / "run.db3")
    con.execute("UPDATE messages SET data = 5 WHERE id = 3")
    con.commit()
    con.close()
    assert main(["check", str(bag)]) == 1
    assert "has no data" in capsys.readouterr().out


def test_reindex_command_rebuilds_metadata(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bag = tmp_path / "run"
    write_rosbags_bag(bag, n=30)
    before = rosbags_view(bag)
    assert main(["reindex", str(bag)]) == 2  # metadata.yaml exists: --force replaces it
    assert "exists" in capsys.readouterr().err
    (bag / "metadata.yaml").unlink()
    assert main(["reindex", str(bag)]) == 0
    assert "30 messages on 2 topics in 1 file(s)" in capsys.readouterr().out
    assert rosbags_view(bag) == before
    assert main(["reindex", "--force", "-q", str(bag)]) == 0
    assert main(["reindex", "--output-dir", str(tmp_path / "o"), str(bag)]) == 2
