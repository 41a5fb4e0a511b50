"""Helpers shared by the rosbag2 tests (tests/formats, tests/safety): a small sqlite3 bag, the
rows SQLite gives, QoS profiles as metadata.yaml writes them, and a writer process killed
(SIGKILL) once it says it is ready."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import yaml

import polybag

JOURNAL_MAGIC = bytes.fromhex("d9d505f920a163d7")  # a rollback journal's header (and super-journal tail)
PAYLOAD = b"\x00\x01\x00\x00\x04\x00\x00\x00abc\x00"  # a CDR std_msgs/String "abc"


def sqlite3_bag(parent: Path, n: int, name: str = "bag") -> tuple[Path, Path]:
    """A sqlite3 rosbag2 bag of ``n`` String messages on /a; (bag dir, its .db3)."""
    parent.mkdir(parents=True, exist_ok=True)
    bag = parent / name
    with polybag.Writer(str(bag), format="rosbag2", storage="sqlite3") as w:
        s = w.add_schema("std_msgs/msg/String", "ros2msg", b"string data\n")
        ch = w.add_channel("/a", "cdr", s)
        for i in range(n):
            w.write(ch, PAYLOAD, log_time=1_000 + i)
    (db,) = bag.glob("*.db3")
    return bag, db


def sqlite_rows(db: Path) -> list[tuple[int, bytes]]:
    """(timestamp, data) of every message SQLite itself reads in ``db`` (in time order)."""
    con = sqlite3.connect(db)
    rows = [(int(t), bytes(d)) for t, d in con.execute("SELECT timestamp, data FROM messages ORDER BY timestamp, id")]
    con.close()
    return rows


def qos_yaml(depth: int, reliability: int = 1, durability: int = 2) -> str:
    """One full QoS profile as rosbag2 (up to metadata version 8) writes it."""
    inf = "\n    sec: 9223372036\n    nsec: 854775807"
    return (
        f"- history: 1\n  depth: {depth}\n  reliability: {reliability}\n  durability: {durability}\n"
        f"  deadline:{inf}\n  lifespan:{inf}\n  liveliness: 1\n  liveliness_lease_duration:{inf}\n"
        "  avoid_ros_namespace_conventions: false"
    )


def qos_depths(text: str) -> list[int]:
    """The depth of each profile in a QoS profile list ``text``."""
    return [p["depth"] for p in yaml.safe_load(text) or []]


def string_payload(i: int) -> bytes:
    """A CDR std_msgs/String ``m{i}``."""
    t = f"m{i}".encode() + b"\0"
    return b"\0\1\0\0" + len(t).to_bytes(4, "little") + t


def kill_when_ready(argv: list[str]) -> None:
    """Run ``argv`` (a writer that prints "ready" when its messages are written, then waits on
    stdin) and SIGKILL it once it has said so."""
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        line = p.stdout.readline()  # (waits for the condition: the child has written them)
        assert line.strip() == "ready", f"the writer did not get ready: {line!r}"
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    assert p.returncode == -signal.SIGKILL


def count_rewrites(monkeypatch: Any) -> list[int]:
    """A list that gets an item each time an MCAP file is copied with late definitions
    (``late_definitions.rewrite_with_definitions``, which still runs)."""
    from polybag.formats.mcap import late_definitions

    calls: list[int] = []
    real = late_definitions.rewrite_with_definitions

    def counted(*a: object, **k: object) -> int:
        calls.append(1)
        return real(*a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(late_definitions, "rewrite_with_definitions", counted)
    return calls
