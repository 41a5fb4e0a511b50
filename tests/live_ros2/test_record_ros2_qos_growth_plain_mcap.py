"""``polybag record --ros2 -O x.mcap`` (a plain MCAP file, no rosbag2 directory) with two
real rclpy publishers of one topic, different QoS, the second starting during the recording
(issue 28 "QoS of every publisher"): the finished file's channel lists both profiles (the
file rewritten once at close, ``McapWriter.grow_qos``), and the mcap library and polybag
read every message of both publishers."""

from __future__ import annotations

import json
import signal
import warnings
from pathlib import Path
from typing import Any

import yaml
from record_helpers import DURABILITY, collect, string_publisher, wait_for
from ros2_graph import NEEDS_RCLPY, POLYBAG, process, ros2_env, wait_ready

pytestmark = NEEDS_RCLPY

TOPIC = "/qos_growth_plain_mcap"

FIRST, SECOND = "polybag_qospm_first", "polybag_qospm_second"


def _publisher(name: str, durability: str, depth: int, period: float, env: dict[str, str]) -> Any:
    return string_publisher(TOPIC, name, env, durability=durability, depth=depth, period=period)


def _payloads(path: Path) -> list[bytes]:
    import polybag

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (a file being written: "did not close")
        with polybag.open(path, format="mcap") as r:
            return [bytes(m.data) for m in r.messages(topics=[TOPIC])]


def _received(out: list[str]) -> int:
    """The messages of TOPIC the recorder received, as its last --json-stats line says."""
    for line in reversed(list(out)):
        if line.startswith('{"time"'):
            t = json.loads(line)["topics"].get(TOPIC)
            return 0 if t is None else int(t["received"])
    return 0


def test_a_plain_mcap_recording_lists_every_publishers_qos(tmp_path: Path) -> None:
    env = ros2_env()
    out = tmp_path / "x.mcap"
    args = [*POLYBAG, "record", "--ros2", TOPIC, "-O", str(out), "--json", "--json-stats", "0.2"]
    with process(args, env) as rec:
        lines: list[str] = []
        err: list[str] = []
        readers = [collect(rec.stdout, lines), collect(rec.stderr, err)]
        with _publisher(FIRST, "volatile", 7, 0.05, env) as first:
            wait_ready(first, 90)  # the recorder subscribed to it
            wait_for("the first publisher's messages", lambda: _received(lines) >= 5)
        # the first publisher is gone (killed); the second starts, with another QoS
        before = _received(lines)
        with _publisher(SECOND, "transient_local", 3, 0.05, env) as later:
            wait_ready(later, 90)
            # (far more than the first could still have had in flight) messages of the second
            # received: the recorder has discovered it, its offered QoS with it
            wait_for("messages of the second publisher", lambda: _received(lines) >= before + 20)
            assert rec.poll() is None, "".join(err)
            rec.send_signal(signal.SIGINT)
            rec.wait(60)
        for r in readers:
            r.join(30)
    assert rec.returncode == 0, "".join(err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.mcap"]  # no .active or temporary file left
    mine = _payloads(out)
    assert sum(FIRST.encode() in d for d in mine) >= 5 and sum(SECOND.encode() in d for d in mine) >= 10
    from mcap.reader import make_reader

    with out.open("rb") as f:  # the mcap library reads it: every message, the channel lists both
        rd = make_reader(f)
        lib = [bytes(m.data) for _s, ch, m in rd.iter_messages() if ch.topic == TOPIC]
        summary = rd.get_summary()
        assert summary is not None
        chans = [c for c in summary.channels.values() if c.topic == TOPIC]
    assert sorted(lib) == sorted(mine)
    assert chans, "no channel for the topic"
    for ch in chans:
        profiles = yaml.safe_load(ch.metadata["offered_qos_profiles"])
        # (the depth is not discovered: rosbag2 too lists "depth: 0"; the durability is)
        got = sorted(DURABILITY.get(p["durability"], str(p["durability"])) for p in profiles)
        assert got == ["transient_local", "volatile"], ch.metadata["offered_qos_profiles"]
