"""Malformed sensor messages (hypothesis): only polybag errors, never a crash or a huge
allocation, from messages given as dicts and from payload bytes read through the
zero-copy image path and the codecs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import sensor_logs as sl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from polybag import sensors
from polybag.errors import PolybagError
from polybag.model import Channel, Schema
from polybag.sensors.layout import ImageReader

U32 = st.one_of(st.integers(0, 64), st.integers(0, 2**32 - 1))
ANY_INT = st.one_of(U32, st.integers(-(2**40), 2**40))
ENCODING = st.one_of(
    st.sampled_from(sensors.encodings() + ["8UC3", "32FC1", "64FC7", "16SC513"]), st.text(max_size=8)
)


@settings(max_examples=300, deadline=None)
@given(
    height=ANY_INT,
    width=ANY_INT,
    step=ANY_INT,
    encoding=ENCODING,
    big=st.integers(0, 300),
    data=st.binary(max_size=256),
)
def test_images(height: int, width: int, step: int, encoding: str, big: int, data: bytes) -> None:
    msg = {
        "height": height,
        "width": width,
        "step": step,
        "encoding": encoding,
        "is_bigendian": big,
        "data": data,
    }
    try:
        a = sensors.image_to_numpy(msg)
    except PolybagError:
        return
    assert a.nbytes <= max(len(data), 1) * 8  # never more than the data (a big-endian copy at most)


FIELD = st.fixed_dictionaries(
    {"name": st.text(max_size=3), "offset": ANY_INT, "datatype": st.integers(-1, 10), "count": ANY_INT}
)


@settings(max_examples=300, deadline=None)
@given(
    height=ANY_INT,
    width=ANY_INT,
    point_step=ANY_INT,
    row_step=ANY_INT,
    fields=st.lists(FIELD, max_size=4),
    big=st.booleans(),
    data=st.binary(max_size=256),
    skip_nans=st.booleans(),
    split_rgb=st.booleans(),
)
def test_clouds(
    height: int,
    width: int,
    point_step: int,
    row_step: int,
    fields: list[dict[str, Any]],
    big: bool,
    data: bytes,
    skip_nans: bool,
    split_rgb: bool,
) -> None:
    msg = {
        "height": height,
        "width": width,
        "point_step": point_step,
        "row_step": row_step,
        "fields": fields,
        "is_bigendian": big,
        "data": data,
        "is_dense": False,
    }
    try:
        a = sensors.pointcloud2_to_numpy(msg, skip_nans=skip_nans, split_rgb=split_rgb)
    except PolybagError:
        return
    assert a.size * max(point_step, 1) <= max(len(data), 1) * 4 or a.size == 0


def _good_payload(profile: str) -> bytes:
    return sl.serialize(profile, sl.image(profile, bytes(range(24)), 2, 4, "rgb8", 12))


@pytest.mark.parametrize("profile", ["ros1", "ros2"])
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_damaged_image_payloads(profile: str, data: st.DataObject) -> None:
    """A channel whose first message is good (so the zero-copy path is on), then a damaged
    payload: the bytes changed, cut or extended."""
    good = _good_payload(profile)
    store = sl.STORES[profile]
    text = store.generate_msgdef("sensor_msgs/msg/Image")[0].encode()
    ch = (
        Channel(1, "/c", "ros1", Schema(1, "sensor_msgs/Image", "ros1msg", text))
        if profile == "ros1"
        else Channel(1, "/c", "cdr", Schema(1, "sensor_msgs/msg/Image", "ros2msg", text))
    )
    reader = ImageReader()
    reader.read(ch, good)
    bad = bytearray(good)
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(bad) - 1))
        bad[pos] = data.draw(st.integers(0, 255))
    bad = bad[: data.draw(st.integers(0, len(bad)))] + data.draw(st.binary(max_size=8))
    try:
        msg = reader.read(ch, bytes(bad))
        a = sensors.image_to_numpy(msg)
    except PolybagError:
        return
    assert a.nbytes <= len(bad)
    np.asarray(a).sum()  # the pixels are readable
