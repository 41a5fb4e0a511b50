"""topic_columns / to_arrow / to_pandas agree with per-message decoding on every corpus topic."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import polybag
from _codec_helpers import _TOKEN, _equal, _equal_plain, _lookup  # noqa: F401
from polybag.codecs.columns import columns_to_arrow, columns_to_pandas, payload_columns
from polybag.codecs.ros1 import codec_for_type, definition_for
from polybag.errors import DecodeError

CORPORA = Path(__file__).resolve().parents[2].parent / "shared" / "corpora"
FILES = [
    p
    for p in sorted((CORPORA / "rosbag").rglob("*.bag")) + sorted((CORPORA / "mcap-samples").rglob("*.mcap"))
    if p.stat().st_size > 100 and "wrong_rmw" not in p.name
]








@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_columns_match_messages(path: Path) -> None:
    with polybag.open(str(path)) as r:
        topics = sorted({c.topic for c in r.summary.channels.values() if c.message_encoding in ("ros1", "cdr")})
        for topic in topics:
            cols = r.topic_columns(topic)
            msgs = list(r.messages(topics=[topic]))
            assert cols["log_time"].tolist() == [m.log_time for m in msgs]
            for i, m in enumerate(msgs):
                d = m.to_dict()
                for name, col in cols.items():
                    if name == "log_time":
                        continue
                    assert len(col) == len(msgs)
                    assert _equal(col[i], _lookup(d, name)), (topic, name, i)


def test_uniform_fast_path_and_fields_selection() -> None:
    codec = codec_for_type("sensor_msgs/Imu", definition_for("sensor_msgs/Imu"))
    cls = codec.message_class
    payloads = []
    for i in range(50):
        o = cls()
        o.header.seq = i
        o.header.frame_id = "imu"
        o.header.stamp.sec, o.header.stamp.nsec = 10 + i, 5
        o.orientation.w = 1.0
        o.angular_velocity.z = i * 0.5
        o.linear_acceleration_covariance[4] = float(i)
        payloads.append(codec.encode(o))
    cols = payload_columns(codec, payloads)
    assert cols["header.seq"].tolist() == list(range(50))
    assert cols["header.stamp"][3] == 13 * 1_000_000_000 + 5
    assert cols["angular_velocity.z"][7] == 3.5
    assert cols["linear_acceleration_covariance[4]"][9] == 9.0
    assert set(cols["header.frame_id"]) == {"imu"}
    # mixed lengths take the gather path and give the same values
    payloads[3] = codec.encode(codec.decode(payloads[3]).__class__(header=_hdr(codec, "a-longer-frame")))
    cols2 = payload_columns(codec, payloads, fields=["angular_velocity", "header.frame_id"])
    assert set(cols2) == {"angular_velocity.x", "angular_velocity.y", "angular_velocity.z", "header.frame_id"}
    assert cols2["header.frame_id"][3] == "a-longer-frame"
    assert cols2["angular_velocity.z"][7] == 3.5 and cols2["angular_velocity.z"][3] == 0.0
    # tables
    table = columns_to_arrow(cols)
    assert table.num_rows == 50 and "orientation.w" in table.column_names
    df = columns_to_pandas({"log_time": np.arange(50), **cols})
    assert df.index.name == "log_time" and df["orientation.w"].iloc[0] == 1.0
    # a short payload in the middle of a topic: DecodeError naming the message
    with pytest.raises(DecodeError):
        payload_columns(codec, [*payloads[:5], payloads[5][:-3], *payloads[6:]])


def _hdr(codec: Any, frame: str) -> Any:
    h = codec.compiler.cls("std_msgs/Header")()
    h.frame_id = frame
    return h


def test_reader_to_arrow_and_pandas() -> None:
    path = CORPORA / "rosbag" / "foxglove-rosbag" / "example.bag"
    with polybag.open(str(path)) as r:
        df = r.to_pandas("/turtle1/pose")
        assert len(df) == r.summary.topic_message_counts()["/turtle1/pose"]
        assert list(df.columns) == ["x", "y", "theta", "linear_velocity", "angular_velocity"]
        t = r.to_arrow("/rosout")
        assert "header.stamp" in t.column_names and t.num_rows > 0


def test_reader_bulk_payload_hook() -> None:
    """A reader offering topic_payloads() is read without iterating messages."""
    from polybag.io.source import MappedSource
    from polybag.model import Channel, Schema, Summary
    from polybag.reader import Reader

    text = definition_for("geometry_msgs/Point")
    codec = codec_for_type("geometry_msgs/Point", text)
    payloads = [codec.encode({"x": float(i), "y": 2.0 * i, "z": -1.0}) for i in range(10)]
    blob = b"junk" + b"".join(payloads)
    schema = Schema(1, "geometry_msgs/Point", "ros1msg", text.encode())
    channel = Channel(1, "/p", "ros1", schema, {})

    class Bulk(Reader):
        @property
        def summary(self) -> Summary:
            return Summary("test", channels={1: channel}, message_counts={1: 10})

        def messages(self, *a: Any, **k: Any) -> Any:
            raise AssertionError("messages() must not be used when topic_payloads exists")

        def topic_payloads(self, topic: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
            starts = 4 + 24 * np.arange(10)
            return np.arange(10) * 100, np.frombuffer(blob, np.uint8), starts, np.full(10, 24)

    r = Bulk(MappedSource(None, b""))
    cols = r.topic_columns("/p")
    assert cols["log_time"].tolist() == [i * 100 for i in range(10)]
    assert cols["y"].tolist() == [2.0 * i for i in range(10)]
    assert cols["z"].tolist() == [-1.0] * 10


def test_chunked_walk_equals_single_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    import polybag.codecs.columns as colmod

    codec = codec_for_type("sensor_msgs/Imu", definition_for("sensor_msgs/Imu"))
    payloads = []
    for i in range(40):
        d = {"header": {"seq": i, "frame_id": "f" * (i % 3)}, "angular_velocity": {"x": i / 3}}
        payloads.append(codec.encode(d))
    whole = payload_columns(codec, payloads)
    monkeypatch.setattr(colmod, "_CHUNK_BYTES", 1000)
    parts = payload_columns(codec, payloads)
    assert list(parts) == list(whole)
    for k in whole:
        assert whole[k].tolist() == parts[k].tolist(), k
    with pytest.raises(DecodeError, match="message"):
        payload_columns(codec, [*payloads[:30], payloads[30] + b"\0", *payloads[31:]])


def test_unknown_field_is_an_error() -> None:
    from polybag.errors import PolybagError

    path = CORPORA / "rosbag" / "foxglove-rosbag" / "example.bag"
    with polybag.open(str(path)) as r:
        assert set(r.topic_columns("/turtle1/pose", ["x", "theta"])) == {"log_time", "x", "theta"}
        with pytest.raises(PolybagError, match="no field 'nope'"):
            r.topic_columns("/turtle1/pose", ["nope"])
        with pytest.raises(PolybagError, match="no topic"):
            r.topic_columns("/missing")
