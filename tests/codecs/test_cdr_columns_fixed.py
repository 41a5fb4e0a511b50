"""The CDR fixed-layout columns path (:mod:`polybag.codecs.cdr_columns`): the same columns as
the general walk, taken for types fixed-size but for their strings, declined otherwise.

The types put 1-, 2-, 4- and 8-byte fields after strings of every length, so the padding
before each segment changes from message to message.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polybag
from polybag.codecs.cdr import codec_for_type
from polybag.codecs.cdr_columns import cdr_columns, cdr_layout
from polybag.codecs.columns import _limits, payload_columns
from polybag.codecs.columns_walk import walk_in_blocks
from polybag.codecs.ros2 import definition_for
from polybag.errors import DecodeError

MIXED = (
    "uint8 a\nstring s\nuint16 c\nfloat64 d\nstring s2\nint8 e\nbuiltin_interfaces/Time t\n"
    "float32[3] v\nbool b\nstring[2] names\nint64 last\nbuiltin_interfaces/Duration span\n"
)
_TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00", exclude_categories=("Cs",)), max_size=9)
_MIXED_VALUES = st.fixed_dictionaries(
    {
        "a": st.integers(0, 255),
        "s": _TEXT,
        "c": st.integers(0, 2**16 - 1),
        "d": st.floats(allow_nan=False),
        "s2": _TEXT,
        "e": st.integers(-128, 127),
        "t": st.fixed_dictionaries({"sec": st.integers(-(2**31), 2**31 - 1), "nanosec": st.integers(0, 999_999_999)}),
        "v": st.lists(st.floats(width=32, allow_nan=False), min_size=3, max_size=3),
        "b": st.booleans(),
        "names": st.lists(_TEXT, min_size=2, max_size=2),
        "last": st.integers(-(2**63), 2**63 - 1),
        "span": st.fixed_dictionaries(
            {"sec": st.integers(-(2**31), 2**31 - 1), "nanosec": st.integers(0, 999_999_999)}
        ),
    }
)
IMU = "sensor_msgs/msg/Imu"


def _everything(name: str) -> bool:
    return True


def _buffers(payloads: list[bytes], owned: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    sizes = np.array([len(p) for p in payloads], dtype=np.int64)
    starts = np.zeros(len(sizes), dtype=np.int64)
    if len(sizes) > 1:
        np.cumsum(sizes[:-1], out=starts[1:])
    blob = np.frombuffer(b"".join(payloads), np.uint8)
    return (blob.copy() if owned else blob), starts, sizes


def _same(fast: dict[str, np.ndarray], walked: dict[str, np.ndarray]) -> None:
    assert list(fast) == list(walked)
    for name, col in walked.items():
        got = fast[name]
        assert got.dtype == col.dtype, name
        assert got.shape == col.shape, name
        if col.dtype == object:
            assert got.tolist() == col.tolist(), name
        else:
            assert np.array_equal(got, col), name


def _compare(codec: Any, payloads: list[bytes], owned: bool) -> dict[str, np.ndarray]:
    blob, starts, sizes = _buffers(payloads, owned)
    fast = cdr_columns(codec, blob, starts, sizes, _everything, _limits())
    assert fast is not None  # the fixed path took it
    walked = walk_in_blocks(codec, blob, starts, sizes, _everything, None, 8 << 20)
    _same(fast, walked)
    return fast


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(_MIXED_VALUES, min_size=1, max_size=12), owned=st.booleans())
def test_strings_before_fixed_blocks_match_the_walk(values: list[dict[str, Any]], owned: bool) -> None:
    codec = codec_for_type("test_msgs/msg/Mixed", MIXED)
    fast = _compare(codec, [codec.encode(v) for v in values], owned)
    assert fast["s"].tolist() == [v["s"] for v in values]
    assert fast["t"].tolist() == [v["t"]["sec"] * 10**9 + v["t"]["nanosec"] for v in values]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    frames=st.lists(st.text(st.sampled_from("ab_/"), max_size=11), min_size=1, max_size=30),
    uniform=st.booleans(),
    owned=st.booleans(),
    chunk=st.sampled_from([1 << 6, 1 << 23]),
)
def test_imu_columns_match_the_walk(frames: list[str], uniform: bool, owned: bool, chunk: int) -> None:
    codec = codec_for_type(IMU, definition_for(IMU))
    rng = np.random.default_rng(len(frames))
    payloads = []
    for i, frame in enumerate(frames):
        v = rng.normal(size=13).tolist()
        payloads.append(
            codec.encode(
                {
                    "header": {"stamp": {"sec": i, "nanosec": 7 * i}, "frame_id": frames[0] if uniform else frame},
                    "orientation": {"x": v[0], "y": v[1], "z": v[2], "w": v[3]},
                    "angular_velocity": {"x": v[4], "y": v[5], "z": v[6]},
                    "linear_acceleration": {"x": v[7], "y": v[8], "z": v[9]},
                    "orientation_covariance": v[:9],
                }
            )
        )
    with pytest.MonkeyPatch.context() as m:  # small blocks: the rows come in several pieces
        m.setattr("polybag.codecs.columns._CHUNK_BYTES", chunk)
        m.setattr("polybag.codecs.columns._GATHER_BYTES", chunk)
        fast = _compare(codec, payloads, owned)
    assert fast["header.frame_id"].tolist() == [frames[0] if uniform else f for f in frames]


def test_types_without_strings_take_the_path() -> None:
    codec = codec_for_type("geometry_msgs/msg/PoseWithCovariance", definition_for("geometry_msgs/msg/PoseWithCovariance"))
    lay = cdr_layout(codec)
    assert lay is not None and len(lay.widths) == 1 and not any(lay.strings)
    payloads = [
        codec.encode({"pose": {"position": {"x": float(i), "y": -1.0, "z": 2.0}}, "covariance": [float(i)] * 36})
        for i in range(50)
    ]
    fast = _compare(codec, payloads, owned=True)
    assert fast["pose.position.x"].tolist() == [float(i) for i in range(50)]
    assert fast["covariance[35]"].tolist() == [float(i) for i in range(50)]


def test_layout_splits_where_the_padding_varies() -> None:
    codec = codec_for_type("test_msgs/msg/Mixed", MIXED)
    lay = cdr_layout(codec)
    assert lay is not None
    # [a] [s's length: aligned to 4, more than a's 1] [c] [d: 8, more than c's 2; s2's length] ...
    assert lay.strings[:4] == [False, True, False, True]
    assert lay.aligns[:4] == [1, 4, 2, 8]
    assert lay.widths[:4] == [1, 4, 2, 12]


@pytest.mark.parametrize(
    ("type_name", "text"),
    [
        ("test_msgs/msg/Seq", "float64[] values\nint32 a\n"),
        ("test_msgs/msg/Wide", "wstring w\nint32 a\n"),
        ("test_msgs/msg/Strs", "string[] names\n"),
    ],
)
def test_variable_parts_other_than_strings_are_left_to_the_walk(type_name: str, text: str) -> None:
    codec = codec_for_type(type_name, text)
    assert cdr_layout(codec) is None
    blob, starts, sizes = _buffers([codec.encode({})], owned=False)
    assert cdr_columns(codec, blob, starts, sizes, _everything, _limits()) is None


def test_big_endian_and_damaged_payloads_are_left_to_the_walk() -> None:
    codec = codec_for_type("test_msgs/msg/Mixed", MIXED)
    good = codec.encode({"s": "abc", "names": ["x", "yz"]})
    big = codec.encode({"s": "abc", "names": ["x", "yz"]}, endian=">")
    for payloads in ([big, big], [good, good[:-9]], [good, good + b"\x00" * 4], [good[:2]]):
        blob, starts, sizes = _buffers(payloads, owned=False)
        assert cdr_columns(codec, blob, starts, sizes, _everything, _limits()) is None
    # the walk decodes the big-endian ones and reports the damaged ones
    assert payload_columns(codec, [big, big])["s"].tolist() == ["abc", "abc"]
    for payloads in ([good, good[:-9]], [good, good + b"\x00" * 4], [good[:2]]):
        with pytest.raises(DecodeError):
            payload_columns(codec, payloads)
    lying = bytearray(good)
    lying[8:12] = (1 << 31).to_bytes(4, "little")  # the first string's length runs past the end
    blob, starts, sizes = _buffers([bytes(lying)], owned=False)
    assert cdr_columns(codec, blob, starts, sizes, _everything, _limits()) is None


def test_topic_columns_of_a_rosbag2(tmp_path: Path) -> None:
    codec = codec_for_type(IMU, definition_for(IMU))
    out = tmp_path / "bag"
    with polybag.Writer(out, format="rosbag2", storage="sqlite3") as w:
        ch = w.add_channel("/imu", "cdr", w.add_schema(IMU, "ros2msg", definition_for(IMU).encode()))
        for i in range(200):
            frame = "imu" if i % 3 else "imu_link_long"
            w.write(ch, codec.encode({"header": {"stamp": {"sec": i}, "frame_id": frame}, "orientation": {"w": i}}), i + 1)
    with polybag.open(out) as r:
        cols = r.topic_columns("/imu")
        some = r.topic_columns("/imu", fields=["orientation.w", "header.frame_id"])
    assert cols["orientation.w"].tolist() == [float(i) for i in range(200)]
    assert cols["header.stamp"].tolist() == [i * 10**9 for i in range(200)]
    assert cols["log_time"].tolist() == list(range(1, 201))
    assert set(some) == {"log_time", "orientation.w", "header.frame_id"}
    assert some["header.frame_id"].tolist() == ["imu" if i % 3 else "imu_link_long" for i in range(200)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    values=st.lists(_MIXED_VALUES, min_size=1, max_size=6),
    edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=6),
    cut=st.integers(0, 12),
)
def test_damaged_payloads_give_the_walks_answer_or_none(
    values: list[dict[str, Any]], edits: list[tuple[int, int]], cut: int
) -> None:
    """Bytes changed anywhere and payloads cut short: the fixed path declines (None), or
    gives exactly the walk's columns; it never raises."""
    codec = codec_for_type("test_msgs/msg/Mixed", MIXED)
    payloads = [bytearray(codec.encode(v)) for v in values]
    for at, byte in edits:
        p = payloads[at % len(payloads)]
        p[at % len(p)] = byte
    payloads[-1] = payloads[-1][: max(0, len(payloads[-1]) - cut)]
    blob, starts, sizes = _buffers([bytes(p) for p in payloads], owned=True)
    fast = cdr_columns(codec, blob, starts, sizes, _everything, _limits())
    if fast is None:
        return
    walked = walk_in_blocks(codec, blob, starts, sizes, _everything, None, 8 << 20)
    assert list(fast) == list(walked)
    for name, col in walked.items():
        if col.dtype == object:
            assert fast[name].tolist() == col.tolist(), name
        else:
            assert fast[name].tobytes() == col.tobytes(), name  # NaN bytes compare equal too
