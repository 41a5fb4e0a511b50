"""Logs for the player tests (unit and live)."""

from __future__ import annotations

import struct
from pathlib import Path

import polybag
from polybag.formats.bag.writer import BagWriter

NS = 1_000_000_000
T0 = 1_700_000_000 * NS
STRING_MD5 = "992ce8a1687cec8c8bd883ec73ca41d1"

def _string(text: str) -> bytes:
    b = text.encode()
    return struct.pack("<I", len(b)) + b


def make_bag(path: Path, items: list[tuple[str, int]], *, latch_topic: str | None = None) -> Path:
    """A bag with std_msgs/String messages ``(topic, log_time)``; payload names both."""
    with BagWriter(path, compression="none", chunk_size=200) as w:
        s = w.add_schema("std_msgs/String", "ros1msg", b"string data\n")
        chans = {}
        for topic, t in items:
            if topic not in chans:
                md = {"md5sum": STRING_MD5, "callerid": "/talker"}
                if topic == latch_topic:
                    md["latching"] = "1"
                chans[topic] = w.add_channel(topic, "ros1", s, md)
            w.write(chans[topic], _string(f"{path.stem} {topic} {t}"), t)
    return path


def make_mcap(path: Path, items: list[tuple[str, int]]) -> Path:
    with polybag.Writer(path) as w:
        s = w.add_schema("std_msgs/String", "ros1msg", b"string data\n")
        chans = {}
        for topic, t in items:
            if topic not in chans:
                chans[topic] = w.add_channel(topic, "ros1", s, {})
            w.write(chans[topic], _string(f"{path.stem} {topic} {t}"), t)
    return path
