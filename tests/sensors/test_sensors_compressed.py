"""``compressed_image_to_numpy``: jpeg/png through Pillow and through OpenCV (compared with
rosbags-image's ``message_to_cvimage``), ``compressedDepth`` with its 12-byte header, a
clear error when neither library is installed or the bytes are not an image."""

from __future__ import annotations

import struct

import cv2
import numpy as np
import pytest
import sensor_logs as sl
from rosbags.image import message_to_cvimage

from polybag import sensors
from polybag.errors import DecodeError, UnsupportedError
from polybag.sensors import compressed


@pytest.fixture(params=["pillow", "opencv"])
def library(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "opencv":
        monkeypatch.setattr(compressed, "_pillow", lambda: None)
    return str(request.param)


def _picture(h: int = 13, w: int = 17, channels: int = 3) -> np.ndarray:
    y, x = np.mgrid[0:h, 0:w]
    planes = [(x * 13) % 256, (y * 19) % 256, ((x + y) * 7) % 256, np.full_like(x, 180)]
    return np.stack(planes[:channels], axis=-1).astype(np.uint8)


@pytest.mark.parametrize("profile", ["ros1", "ros2"])
def test_png_matches_rosbags_image(library: str, profile: str) -> None:
    bgr = _picture()
    ok, png = cv2.imencode(".png", bgr)
    assert ok
    msg = sl.compressed(profile, png.tobytes(), "png")
    ref = message_to_cvimage(msg)  # BGR
    got = sensors.compressed_image_to_numpy(msg)
    np.testing.assert_array_equal(got, ref[..., ::-1])
    np.testing.assert_array_equal(sensors.compressed_image_to_numpy(msg, bgr=True), ref)


def test_jpeg_matches_rosbags_image(library: str) -> None:
    ok, jpg = cv2.imencode(".jpg", _picture(32, 48), [cv2.IMWRITE_JPEG_QUALITY, 95])
    assert ok
    msg = sl.compressed("ros1", jpg.tobytes(), "bgr8; jpeg compressed bgr8")
    ref = message_to_cvimage(msg)[..., ::-1].astype(int)
    got = sensors.compressed_image_to_numpy(msg).astype(int)
    assert got.shape == ref.shape == (32, 48, 3)
    # libjpeg builds may differ in the last bit of the IDCT
    assert np.abs(got - ref).max() <= 2


def test_grey_and_rgba_png(library: str) -> None:
    grey = _picture(channels=1)[..., 0]
    ok, png = cv2.imencode(".png", grey)
    np.testing.assert_array_equal(
        sensors.compressed_image_to_numpy({"format": "png", "data": png.tobytes()}), grey
    )
    bgra = _picture(channels=4)
    ok, png = cv2.imencode(".png", bgra)
    assert ok
    got = sensors.compressed_image_to_numpy({"format": "png", "data": png.tobytes()})
    np.testing.assert_array_equal(got, bgra[..., [2, 1, 0, 3]])


def test_sixteen_bit_png(library: str) -> None:
    depth = (np.arange(35, dtype=np.uint16).reshape(5, 7) * 1871).astype(np.uint16)
    ok, png = cv2.imencode(".png", depth)
    assert ok
    got = sensors.compressed_image_to_numpy({"format": "png", "data": png.tobytes()})
    assert got.dtype == np.uint16
    np.testing.assert_array_equal(got, depth)


def _depth_header(a: float = 0.0, b: float = 0.0) -> bytes:
    return struct.pack("<iff", 0, a, b)


def test_compressed_depth_16uc1(library: str) -> None:
    depth = (np.arange(48, dtype=np.uint16).reshape(6, 8) * 1300).astype(np.uint16)
    ok, png = cv2.imencode(".png", depth)
    assert ok
    msg = sl.compressed("ros2", _depth_header() + png.tobytes(), "16UC1; compressedDepth png")
    got = sensors.compressed_image_to_numpy(msg)
    assert got.dtype == np.uint16
    np.testing.assert_array_equal(got, depth)


def test_compressed_depth_32fc1(library: str) -> None:
    """32FC1: inverse depth quantised as compressed_depth_image_transport does
    (``inv = a / d + b``), 0 for no depth; read back as ``a / (inv - b)``, NaN for 0."""
    a, b = 100.0 * 1000.0, -100.0  # depth_max 100, quantisation 1000 (the encoder's defaults)
    depth = np.linspace(2.0, 9.0, 30, dtype=np.float32).reshape(5, 6)  # inv fits 16 bits
    depth[0, 0] = np.nan
    inv = np.where(np.isnan(depth), 0, np.rint(a / np.nan_to_num(depth, nan=1.0) + b)).astype(np.uint16)
    ok, png = cv2.imencode(".png", inv)
    assert ok
    got = sensors.compressed_image_to_numpy(
        {"format": "32FC1; compressedDepth", "data": _depth_header(a, b) + png.tobytes()}
    )
    assert got.dtype == np.float32 and np.isnan(got[0, 0])
    expected = a / (inv.astype(np.float32) - b)
    np.testing.assert_allclose(got.reshape(-1)[1:], expected.reshape(-1)[1:], rtol=1e-6)
    np.testing.assert_allclose(got.reshape(-1)[1:], depth.reshape(-1)[1:], rtol=2e-2)


def test_no_image_library_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compressed, "_pillow", lambda: None)
    monkeypatch.setattr(compressed, "_cv2", lambda: None)
    with pytest.raises(UnsupportedError, match=r"Pillow or OpenCV: pip install 'polybag\[sensors\]'"):
        sensors.compressed_image_to_numpy({"format": "png", "data": b"\x89PNG"})


@pytest.mark.parametrize(
    ("fmt", "data", "match"),
    [
        ("jpeg", b"not an image", "cannot decode the image"),
        ("png", b"", "cannot decode the image"),
        ("16UC1; compressedDepth", b"\x01\x02", "fewer than its 12-byte header"),
        ("32FC1; compressedDepth rvl", bytes(20), "rvl is not supported"),
    ],
)
def test_bad_compressed_images(library: str, fmt: str, data: bytes, match: str) -> None:
    with pytest.raises((DecodeError, UnsupportedError), match=match):
        sensors.compressed_image_to_numpy({"format": fmt, "data": data})


def test_truncated_png(library: str) -> None:
    ok, png = cv2.imencode(".png", _picture(64, 64))
    with pytest.raises(DecodeError):
        sensors.compressed_image_to_numpy({"format": "png", "data": png.tobytes()[: len(png) // 2]})


def test_declared_size_is_read_before_decoding(library: str) -> None:
    ok, png = cv2.imencode(".png", _picture(13, 17))
    ok2, jpg = cv2.imencode(".jpg", _picture(13, 17))
    assert ok and ok2
    assert compressed.declared_size(png.tobytes()) == (17, 13)
    assert compressed.declared_size(jpg.tobytes()) == (17, 13)
    huge = bytearray(png.tobytes())
    huge[16:24] = struct.pack(">II", 200_000, 200_000)  # 40 G pixels declared (the CRC is not checked first)
    with pytest.raises(DecodeError, match="200000x200000 image is too large"):
        sensors.compressed_image_to_numpy({"format": "png", "data": bytes(huge)})
    big_jpg = bytearray(jpg.tobytes())
    sof = next(i for i in range(2, len(big_jpg) - 1) if big_jpg[i] == 0xFF and big_jpg[i + 1] in (0xC0, 0xC2))
    big_jpg[sof + 5 : sof + 9] = struct.pack(">HH", 65000, 65000)
    with pytest.raises(DecodeError, match="too large"):
        sensors.compressed_image_to_numpy({"format": "jpeg", "data": bytes(big_jpg)})
