"""Build ``samples/demo.mcap``: a small deterministic MCAP for the README and the tests.

    python samples/make_samples.py [OUT]

Profile ``ros1``; two channels with ``ros1msg`` schemas so codecs can decode them:
``/chatter`` (std_msgs/String, 10 Hz) and ``/imu/accel`` (geometry_msgs/Vector3, 20 Hz)
over 10 seconds, in zstd chunks, plus one attachment and one metadata record.
"""

from __future__ import annotations

import math
import struct
import sys
from pathlib import Path

import polybag

START = 1_700_000_000_000_000_000  # 2023-11-14T22:13:20Z

STRING_DEF = b"string data\n"
VECTOR3_DEF = (
    b"# This represents a vector in free space.\n"
    b"float64 x\n"
    b"float64 y\n"
    b"float64 z\n"
)
STRING_MD5 = "992ce8a1687cec8c8bd883ec73ca41d1"
VECTOR3_MD5 = "4a842b65f413084dc2b10fb484ea7f17"


def ros1_string(text: str) -> bytes:
    raw = text.encode("utf-8")
    return struct.pack("<I", len(raw)) + raw


def build(out: str | Path) -> None:
    with polybag.Writer(out, format="mcap", compression="zstd", chunk_size=8192, profile="ros1", library="polybag samples") as w:
        s_str = w.add_schema("std_msgs/String", "ros1msg", STRING_DEF)
        s_vec = w.add_schema("geometry_msgs/Vector3", "ros1msg", VECTOR3_DEF)
        chatter = w.add_channel("/chatter", "ros1", s_str, {"md5sum": STRING_MD5, "callerid": "/talker"})
        accel = w.add_channel("/imu/accel", "ros1", s_vec, {"md5sum": VECTOR3_MD5, "callerid": "/imu"})
        events = []
        for i in range(100):
            t = START + i * 100_000_000
            events.append((t, 0, i))
        for i in range(200):
            t = START + i * 50_000_000 + 1_000_000
            events.append((t, 1, i))
        events.sort()
        for t, kind, i in events:
            if kind == 0:
                w.write(chatter, ros1_string(f"hello world {i}"), log_time=t, publish_time=t, sequence=i)
            else:
                a = i * 0.05
                w.write(
                    accel,
                    struct.pack("<ddd", math.sin(a), math.cos(a), 9.81),
                    log_time=t,
                    publish_time=t - 500_000,
                    sequence=i,
                )
        w.add_attachment("calibration.yaml", "application/yaml", b"camera: {fx: 500.0, fy: 500.0}\n", START, START)
        w.add_metadata("robot", {"name": "demo", "serial": "0001"})


if __name__ == "__main__":
    build(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent / "demo.mcap")
