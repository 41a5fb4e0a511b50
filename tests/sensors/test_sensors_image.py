"""``polybag.sensors.image_to_numpy`` / ``numpy_to_image`` against rosbags-image and OpenCV.

Every encoding of ROS's ``image_encodings``, odd widths, padded rows, big-endian data; the
messages are made and serialized by rosbags, read back through polybag's codecs (ROS 1 and
ROS 2) and compared with ``rosbags.image.message_to_cvimage`` on the same message.
"""

from __future__ import annotations

import sys

import cv2
import numpy as np
import pytest
import sensor_logs as sl
from hypothesis import given, settings
from hypothesis import strategies as st
from rosbags.image import message_to_cvimage

import polybag
from polybag import sensors
from polybag.codecs.ros1 import codec_for_type
from polybag.errors import DecodeError, PolybagError, UnsupportedError, UsageError
from polybag.sensors.image import encoding_info

GENERIC = [f"{d}C{n}" for d in ("8U", "8S", "16U", "16S", "32S", "32F", "64F") for n in (1, 2, 3, 4)]
ENCODINGS = sensors.encodings() + GENERIC


def _random_pixels(enc: str, height: int, width: int, seed: int = 0) -> np.ndarray:
    info = encoding_info(enc)
    rng = np.random.default_rng(seed)
    shape = (height, width) if info.channels == 1 else (height, width, info.channels)
    if info.dtype.kind == "f":
        return rng.normal(0, 1000, shape).astype(info.dtype)
    ii = np.iinfo(info.dtype)
    return rng.integers(ii.min, ii.max, shape, dtype=info.dtype, endpoint=True)


def _raw_bytes(a: np.ndarray, big: bool, pad: int) -> tuple[bytes, int]:
    """Rows of ``a`` in the byte order asked, each followed by ``pad`` bytes of 0xEE."""
    order = ">" if big else "<"
    rows = a.astype(a.dtype.newbyteorder(order)) if a.dtype.itemsize > 1 else a
    flat = np.ascontiguousarray(rows).reshape(a.shape[0], -1).view(np.uint8)
    padded = np.concatenate([flat, np.full((a.shape[0], pad), 0xEE, np.uint8)], axis=1)
    return padded.tobytes(), flat.shape[1] + pad


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("profile", ["ros1", "ros2"])
def test_every_encoding_matches_rosbags_image(encoding: str, profile: str) -> None:
    """Odd sizes, read from the serialized message through polybag's codec (object and dict)
    and compared with message_to_cvimage of rosbags' own message."""
    height, width = 5, 7
    a = _random_pixels(encoding, height, width)
    data, step = _raw_bytes(a, False, 0)
    msg = sl.image(profile, data, height, width, encoding, step)
    ref = message_to_cvimage(msg)
    channel_type = "sensor_msgs/Image"
    payload = sl.serialize(profile, msg)
    decoded = _decode(profile, channel_type, payload)
    for m in (decoded, _decode(profile, channel_type, payload, as_dict=True), msg):
        got = sensors.image_to_numpy(m)
        assert got.dtype == ref.dtype and got.shape == ref.shape
        np.testing.assert_array_equal(got, ref)
        np.testing.assert_array_equal(got, a)


def _decode(profile: str, type_name: str, payload: bytes, as_dict: bool = False) -> object:
    from polybag.model import Channel, Schema

    store = sl.STORES[profile]
    full = type_name.replace("/", "/msg/", 1)
    text = store.generate_msgdef(full)[0].encode()
    if profile == "ros1":
        ch = Channel(1, "/t", "ros1", Schema(1, type_name, "ros1msg", text))
    else:
        ch = Channel(1, "/t", "cdr", Schema(1, full, "ros2msg", text))
    codec = polybag.codecs.codec_for(ch)
    return codec.to_dict(payload) if as_dict else codec.decode(payload)


@pytest.mark.parametrize(
    "encoding", ["mono16", "rgb16", "16UC3", "16SC1", "32SC2", "32FC1", "64FC1", "bayer_rggb16"]
)
def test_big_endian_matches_rosbags_image(encoding: str) -> None:
    a = _random_pixels(encoding, 3, 5, seed=1)
    data, step = _raw_bytes(a, True, 0)
    msg = sl.image("ros1", data, 3, 5, encoding, step, big=True)
    got = sensors.image_to_numpy(msg)
    ref = message_to_cvimage(msg)
    assert got.dtype.isnative
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(got, a)


@pytest.mark.parametrize(
    "encoding", ["mono8", "rgb8", "bgra8", "mono16", "yuv422", "bayer_gbrg8", "32FC3", "64FC1"]
)
@pytest.mark.parametrize("pad", [1, 3, 64])
@pytest.mark.parametrize("big", [False, True])
def test_padded_rows_are_skipped(encoding: str, pad: int, big: bool) -> None:
    """A ``step`` longer than a row: the padding is not pixels; compared with rosbags-image on
    the same pixels without padding (rosbags-image does not read ``step``)."""
    a = _random_pixels(encoding, 4, 9, seed=pad)
    data, step = _raw_bytes(a, big, pad)
    tight, tight_step = _raw_bytes(a, big, 0)
    got = sensors.image_to_numpy(sl.image("ros2", data, 4, 9, encoding, step, big))
    ref = message_to_cvimage(sl.image("ros2", tight, 4, 9, encoding, tight_step, big))
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(got, a)


def test_views_not_copies() -> None:
    """Native byte order: the array is a view of ``data`` (padded rows too); ``copy=True`` and
    big-endian data give arrays of their own."""
    a = _random_pixels("rgb8", 4, 5)
    data, step = _raw_bytes(a, False, 3)
    msg = {"height": 4, "width": 5, "encoding": "rgb8", "is_bigendian": 0, "step": step, "data": data}
    got = sensors.image_to_numpy(msg)
    assert np.shares_memory(got, np.frombuffer(data, np.uint8))
    assert not got.flags.writeable  # a view of immutable bytes
    own = sensors.image_to_numpy(msg, copy=True)
    assert own.flags.owndata and not np.shares_memory(own, np.frombuffer(data, np.uint8))
    b16 = _random_pixels("mono16", 2, 3)
    data16, step16 = _raw_bytes(b16, True, 0)
    swapped = sensors.image_to_numpy(
        {
            **msg,
            "encoding": "mono16",
            "height": 2,
            "width": 3,
            "step": step16,
            "is_bigendian": 1,
            "data": data16,
        }
    )
    assert not np.shares_memory(swapped, np.frombuffer(data16, np.uint8))
    np.testing.assert_array_equal(swapped, b16)


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("big", [False, True])
def test_round_trip_through_a_codec(encoding: str, big: bool) -> None:
    """numpy_to_image -> ROS 1 encode (polybag's codec) -> rosbags deserializes it -> both
    readers give the array back."""
    a = _random_pixels(encoding, 3, 5, seed=7)
    d = sensors.numpy_to_image(a, encoding, is_bigendian=big)
    codec = codec_for_type("sensor_msgs/Image")
    payload = codec.encode(d)
    back = sensors.image_to_numpy(codec.decode(payload))
    np.testing.assert_array_equal(back, a)
    peer = sl.deserialize("ros1", payload, "sensor_msgs/Image")
    np.testing.assert_array_equal(message_to_cvimage(peer), a)


@settings(max_examples=60, deadline=None)
@given(
    encoding=st.sampled_from(ENCODINGS),
    height=st.integers(0, 6),
    width=st.integers(0, 9),
    big=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_round_trip_any_size(encoding: str, height: int, width: int, big: bool, seed: int) -> None:
    a = _random_pixels(encoding, height, width, seed)
    back = sensors.image_to_numpy(sensors.numpy_to_image(a, encoding, is_bigendian=big))
    assert back.shape == a.shape
    np.testing.assert_array_equal(back, a)


def test_numpy_to_image_checks_the_array() -> None:
    with pytest.raises(UsageError, match="3 channel"):
        sensors.numpy_to_image(np.zeros((2, 2), np.uint8), "rgb8")
    with pytest.raises(UsageError, match="uint16"):
        sensors.numpy_to_image(np.zeros((2, 2), np.uint8), "mono16")
    with pytest.raises(UsageError, match="dimensions"):
        sensors.numpy_to_image(np.zeros(4, np.uint8), "mono8")
    ros2 = sensors.numpy_to_image(np.zeros((1, 1), np.uint8), "mono8", profile="ros2")
    assert ros2["header"] == {"stamp": {"sec": 0, "nanosec": 0}, "frame_id": ""}


# --- against OpenCV --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("encoding", "code"),
    [
        ("bgr8", cv2.COLOR_BGR2RGB),
        ("bgra8", cv2.COLOR_BGRA2RGB),
        ("rgba8", cv2.COLOR_RGBA2RGB),
        ("mono8", cv2.COLOR_GRAY2RGB),
    ],
)
def test_colour_orders_match_opencv(encoding: str, code: int) -> None:
    a = _random_pixels(encoding, 5, 7)
    got = sensors.to_rgb8(a, encoding_info(encoding))
    ref = cv2.cvtColor(a, code)
    if got.ndim == 2:
        got = np.repeat(got[:, :, None], 3, axis=2)
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize(
    ("encoding", "code"),
    [("uyvy", cv2.COLOR_YUV2RGB_UYVY), ("yuv422", cv2.COLOR_YUV2RGB_UYVY), ("yuyv", cv2.COLOR_YUV2RGB_YUYV)],
)
@pytest.mark.parametrize("width", [8, 10])
def test_yuv422_matches_opencv(encoding: str, code: int, width: int) -> None:
    """Packed 4:2:2 read raw (as rosbags-image gives it), converted to RGB within 2 of
    OpenCV's conversion of the same bytes."""
    rng = np.random.default_rng(3)
    a = rng.integers(16, 235, (6, width, 2), dtype=np.uint8)
    data, step = _raw_bytes(a, False, 4)
    raw = sensors.image_to_numpy(sl.image("ros1", data, 6, width, encoding, step))
    np.testing.assert_array_equal(raw, a)
    got = sensors.to_rgb8(raw, encoding_info(encoding)).astype(int)
    ref = cv2.cvtColor(np.ascontiguousarray(a), code).astype(int)
    assert np.abs(got - ref).max() <= 2


@pytest.mark.parametrize("pattern", ["rggb", "bggr", "gbrg", "grbg"])
def test_bayer_demosaic_of_a_flat_colour_matches_opencv(pattern: str) -> None:
    """A mosaic of one colour: every interior pixel is that colour, in polybag's demosaic
    and OpenCV's (rosbags-image's names: bayer_rggb8 is OpenCV's BayerBG)."""
    colour = {"r": 200, "g": 120, "b": 40}
    h, w = 8, 10
    mosaic = np.zeros((h, w), np.uint8)
    for i, ch in enumerate(pattern):
        mosaic[i // 2 :: 2, i % 2 :: 2] = colour[ch]
    enc = f"bayer_{pattern}8"
    data, step = _raw_bytes(mosaic, False, 0)
    raw = sensors.image_to_numpy(sl.image("ros1", data, h, w, enc, step))
    np.testing.assert_array_equal(raw, message_to_cvimage(sl.image("ros1", data, h, w, enc, step)))
    got = sensors.to_rgb8(raw, encoding_info(enc))
    ref = message_to_cvimage(sl.image("ros1", data, h, w, enc, step), "rgb8")
    assert got.shape == ref.shape == (h, w, 3)
    np.testing.assert_array_equal(got[2:-2, 2:-2], ref[2:-2, 2:-2])
    assert got[2:-2, 2:-2].reshape(-1, 3).tolist()[0] == [200, 120, 40]


def test_arrays_read_by_opencv_round_trip() -> None:
    """An image OpenCV decodes (BGR) put in a message as bgr8 comes back unchanged."""
    rng = np.random.default_rng(5)
    src = rng.integers(0, 255, (9, 11, 3), dtype=np.uint8)
    ok, png = cv2.imencode(".png", src)
    assert ok
    img = cv2.imdecode(png, cv2.IMREAD_UNCHANGED)
    back = sensors.image_to_numpy(sensors.numpy_to_image(img, "bgr8"))
    np.testing.assert_array_equal(back, img)


# --- bad input -------------------------------------------------------------------------------
def _msg(**kw: object) -> dict[str, object]:
    base: dict[str, object] = {
        "height": 2,
        "width": 3,
        "encoding": "rgb8",
        "is_bigendian": 0,
        "step": 9,
        "data": bytes(18),
    }
    base.update(kw)
    return base


@pytest.mark.parametrize(
    ("kw", "error", "match"),
    [
        ({"data": bytes(17)}, DecodeError, "fewer than step x height"),
        ({"step": 10, "data": bytes(18)}, DecodeError, "fewer than step x height"),
        ({"step": 8}, DecodeError, "shorter than a row"),
        ({"encoding": "rgb9"}, UnsupportedError, "unknown image encoding 'rgb9'"),
        ({"encoding": "8UC0"}, UnsupportedError, "unknown image encoding"),
        ({"encoding": ""}, UnsupportedError, "unknown image encoding"),
        ({"height": -1}, DecodeError, "out of range"),
        ({"width": "3"}, DecodeError, "not an integer"),
        ({"data": 3.5}, DecodeError, "not bytes"),
    ],
)
def test_bad_images_are_clear_errors(kw: dict[str, object], error: type[PolybagError], match: str) -> None:
    with pytest.raises(error, match=match):
        sensors.image_to_numpy(_msg(**kw))


def test_a_message_without_image_fields() -> None:
    with pytest.raises(DecodeError, match="not a sensor_msgs/Image: the message has no field 'encoding'"):
        sensors.image_to_numpy({"data": b""})


def test_hostile_sizes_allocate_nothing() -> None:
    """A header claiming a huge image over a few bytes of data is refused before any array."""
    with pytest.raises(DecodeError, match="fewer than"):
        sensors.image_to_numpy(_msg(height=2**31, width=2**31 // 4, step=2**31, data=bytes(10)))


def test_host_byte_order_is_little() -> None:
    # the big-endian tests above assume a little-endian host, as every CI runner is
    assert sys.byteorder == "little"


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize(("height", "width"), [(1, 1), (5, 7), (4, 6)])
def test_every_encoding_has_a_display_form(encoding: str, height: int, width: int) -> None:
    """to_rgb8 (files, video, thumbnails) gives uint8 grey or RGB of the image's size."""
    a = _random_pixels(encoding, height, width, seed=11)
    if encoding_info(encoding).dtype.kind == "f":
        a[0, 0] = np.nan
    out = sensors.to_rgb8(a, encoding_info(encoding))
    assert out.dtype == np.uint8 and out.shape[:2] == (height, width)
    assert out.ndim == 2 or out.shape[2] == 3
