"""Columns of CDR topics: equal to per-message decoding whatever the alignment, both byte orders.

The types put 1-, 2-, 4- and 8-byte fields after strings and sequences of every length, so
the padding before each field changes from message to message; the columns must still be the
values each message decodes to (``topic_columns`` from an MCAP file, ``payload_columns`` from
payloads in memory, ``to_pandas``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polybag
from _codec_helpers import _equal, _lookup
from polybag.codecs.cdr import codec_for_type
from polybag.codecs.columns import payload_columns
from polybag.codecs.ros2 import definition_for

ALIGN = (
    "uint8 a\nfloat64 b\nstring s\nuint16 c\nint64 d\nbool[3] flags\nfloat32[] f\nuint8 e\n"
    "builtin_interfaces/Time t\nfloat64[2] pair\nstring<=5 tail\nint8 last\n"
)
_CHARS = st.characters(codec="utf-8", exclude_characters="\x00", exclude_categories=("Cs",))
_VALUES = st.fixed_dictionaries(
    {
        "a": st.integers(0, 255),
        "b": st.floats(allow_nan=False),
        "s": st.text(_CHARS, max_size=9),
        "c": st.integers(0, 2**16 - 1),
        "d": st.integers(-(2**63), 2**63 - 1),
        "flags": st.lists(st.booleans(), min_size=3, max_size=3),
        "f": st.lists(st.floats(width=32, allow_nan=False), max_size=3),
        "e": st.integers(0, 255),
        "t": st.fixed_dictionaries(
            {"sec": st.integers(0, 2**31 - 1), "nanosec": st.integers(0, 999_999_999)}
        ),
        "pair": st.lists(st.floats(allow_nan=False), min_size=2, max_size=2),
        "tail": st.text(st.sampled_from("abcxyz"), max_size=5),
        "last": st.integers(-128, 127),
    }
)


def _check(cols: dict[str, Any], dicts: list[dict[str, Any]]) -> None:
    for name, col in cols.items():
        if name == "log_time":
            continue
        assert len(col) == len(dicts)
        for i, d in enumerate(dicts):
            assert _equal(col[i], _lookup(d, name)), (name, i, col[i], _lookup(d, name))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(_VALUES, min_size=1, max_size=12), big=st.booleans())
def test_payload_columns_follow_alignment(values: list[dict[str, Any]], big: bool) -> None:
    codec = codec_for_type("col/msg/Align", ALIGN)
    payloads = [codec.encode(v, ">" if big else "<") for v in values]
    dicts = [codec.to_dict(p) for p in payloads]
    _check(payload_columns(codec, payloads), dicts)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frame=st.text(st.sampled_from("abc_/"), max_size=11), n=st.integers(1, 40), big=st.booleans())
def test_uniform_imu_columns(frame: str, n: int, big: bool) -> None:
    """Equal-sized payloads (one frame id: the layout a fixed path would take) of every
    frame-id length, so the doubles after the string land on every padding."""
    codec = codec_for_type("sensor_msgs/msg/Imu", definition_for("sensor_msgs/msg/Imu"))
    payloads = [
        codec.encode(
            {
                "header": {"stamp": {"sec": i, "nanosec": 7}, "frame_id": frame},
                "orientation": {"x": i / 3, "w": 1.0},
                "angular_velocity_covariance": [float(i)] * 9,
            },
            ">" if big else "<",
        )  # fmt: skip
        for i in range(n)
    ]
    _check(payload_columns(codec, payloads), [codec.to_dict(p) for p in payloads])


def test_topic_columns_and_pandas_from_a_file(tmp_path: Path) -> None:
    codec = codec_for_type("col/msg/Align", ALIGN)
    rng = np.random.default_rng(3)
    values = [
        {"a": i % 256, "b": float(rng.normal()), "s": "x" * (i % 7), "d": -i, "f": [1.5] * (i % 3),
         "t": {"sec": i, "nanosec": 9}, "tail": "ab"[: i % 3], "last": -(i % 100)}
        for i in range(500)
    ]  # fmt: skip
    path = tmp_path / "align.mcap"
    with polybag.Writer(path, profile="ros2") as w:
        ch = w.add_channel("/align", "cdr", w.add_schema("col/msg/Align", "ros2msg", ALIGN.encode()))
        for i, v in enumerate(values):
            w.write(ch, codec.encode(v), 1000 + i)
    with polybag.open(path) as r:
        cols = r.topic_columns("/align")
        assert cols["log_time"].tolist() == list(range(1000, 1500))
        _check(cols, [m.to_dict() for m in r.messages()])
        pytest.importorskip("pandas")
        df = r.to_pandas("/align")
        assert len(df) == 500 and df["b"].tolist() == [v["b"] for v in values]


def test_wstring_columns_join_surrogate_pairs() -> None:
    codec = codec_for_type("col/msg/W", "wstring w\nwstring[] ws\nuint8 k\n")
    values = [{"w": "a\U0001f600" * i, "ws": ["\U0001f600", "b" * i], "k": i} for i in range(5)]
    for big in (False, True):
        payloads = [codec.encode(v, ">" if big else "<") for v in values]
        cols = payload_columns(codec, payloads)
        assert list(cols["w"]) == [v["w"] for v in values]
        assert [list(x) for x in cols["ws"]] == [v["ws"] for v in values]
