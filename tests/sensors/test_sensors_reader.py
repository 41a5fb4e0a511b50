"""``reader.images(topic)`` / ``reader.pointclouds(topic)`` and ``polybag.dask.read_images`` /
``read_pointclouds`` on bags (ROS 1) and MCAP files (ROS 2 CDR), compressed or not."""

from __future__ import annotations

import mmap
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
import sensor_logs as sl
from rosbags.image import message_to_cvimage

import polybag
from polybag import sensors
from polybag.errors import DecodeError, UsageError

PROFILES = ["ros1", "ros2"]


def _pixels(encoding: str, h: int, w: int, seed: int) -> np.ndarray:
    info = sensors.encoding_info(encoding)
    shape = (h, w) if info.channels == 1 else (h, w, info.channels)
    rng = np.random.default_rng(seed)
    if info.dtype.kind == "f":
        return rng.normal(0, 5, shape).astype(info.dtype)
    return rng.integers(0, 200, shape).astype(info.dtype)


def _image(profile: str, a: np.ndarray, encoding: str, pad: int = 0, big: bool = False) -> Any:
    rows = a.astype(a.dtype.newbyteorder(">")) if big and a.dtype.itemsize > 1 else a
    flat = np.ascontiguousarray(rows).reshape(a.shape[0], -1).view(np.uint8)
    data = np.concatenate([flat, np.zeros((a.shape[0], pad), np.uint8)], axis=1)
    return sl.image(profile, data.tobytes(), a.shape[0], a.shape[1], encoding, flat.shape[1] + pad, big)


def _maps_the_file(a: np.ndarray) -> bool:
    """Whether ``a`` is a view of a mapped file held through a memoryview (so the map stays
    while the array lives)."""
    base: Any = a
    while isinstance(base, np.ndarray):
        base = base.base
    return isinstance(base, memoryview) and isinstance(base.obj, mmap.mmap)


def _camera_log(tmp: Path, profile: str, **options: Any) -> tuple[Path, list[tuple[int, np.ndarray]]]:
    """A log whose /cam topic holds images of several encodings, sizes and paddings."""
    cases = [
        ("rgb8", 5, 7, 0, False),
        ("mono16", 4, 9, 2, True),
        ("32FC1", 3, 3, 4, False),
        ("bgra8", 6, 5, 1, False),
    ]
    items, expected = [], []
    for i, (enc, h, w, pad, big) in enumerate(cases * 3):
        a = _pixels(enc, h, w, i)
        msg = _image(profile, a, enc, pad, big)
        t = 1_000_000_000 + i * 100_000_000
        items.append(("/cam", msg, t))
        expected.append((t, a))
    items.append(("/other", sl.T(sl.STORES[profile], "std_msgs/String")(data="x"), 5))
    return sl.write_log(sl.log_path(tmp, profile), profile, items, **options), expected


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("compression", ["none", "lz4"])
def test_images_of_a_topic(tmp_path: Path, profile: str, compression: str) -> None:
    path, expected = _camera_log(tmp_path, profile, compression=compression)
    with polybag.open(path) as r:
        got = list(r.images("/cam"))
        assert [t for t, _ in got] == [t for t, _ in expected]
        for (_, a), (_, b) in zip(got, expected):
            assert a.dtype.isnative
            np.testing.assert_array_equal(a, b)
        # and the same as rosbags-image of every message
        for (_, a), m in zip(got, r.messages("/cam")):
            peer = sl.deserialize(profile, bytes(m.data), "sensor_msgs/Image")
            if peer.step == peer.width * sensors.encoding_info(peer.encoding).pixel_bytes:
                np.testing.assert_array_equal(a, message_to_cvimage(peer))
        window = list(r.images("/cam", start=expected[2][0], end=expected[4][0]))
        assert [t for t, _ in window] == [expected[2][0], expected[3][0]]


@pytest.mark.parametrize("profile", PROFILES)
def test_raw_images_are_views_of_the_file(tmp_path: Path, profile: str) -> None:
    """After the first message of a channel (read by the codec and compared), images are
    read-only views of the mapped file, not copies; ``copy=True`` gives arrays of their own."""
    path, _ = _camera_log(tmp_path, profile, compression="none")
    with polybag.open(path) as r:
        arrays = [a for _, a in r.images("/cam")]
        big = [i % 4 == 1 for i in range(len(arrays))]  # mono16 big-endian: converted
        assert [a.flags.owndata for a in arrays] == big
        assert not any(a.flags.writeable for a, b in zip(arrays, big) if not b)
        if profile == "ros2":  # MCAP without compression: views of the mapped file itself
            assert all(_maps_the_file(a) for a, b in zip(arrays[4:], big[4:]) if not b)
        copies = [a for _, a in r.images("/cam", copy=True)]
    # the views outlive the reader: the file stays mapped while they live
    assert [int(np.nansum(a)) for a in arrays] == [int(np.nansum(a)) for a in copies]
    assert all(a.flags.owndata and a.flags.writeable for a in copies)
    for a, b in zip(arrays, copies):
        np.testing.assert_array_equal(a, b)


def test_an_image_type_with_another_definition_goes_through_the_codec(tmp_path: Path) -> None:
    """A ``sensor_msgs/Image`` whose definition has a field after ``data`` is not the layout
    the zero-copy path reads: its first message shows that and the codec reads them all."""
    text = sl.TS1.generate_msgdef("sensor_msgs/msg/Image")[0]
    custom = text.replace("uint8[] data\n", "uint8[] data\nuint32 exposure_us\n", 1)
    assert custom != text
    from polybag.codecs.ros1 import codec_for_type

    codec = codec_for_type("sensor_msgs/Image", custom)
    path = tmp_path / "custom.bag"
    frames = [_pixels("rgb8", 3, 4, i) for i in range(3)]
    with polybag.Writer(str(path)) as w:
        ch = w.add_channel("/cam", "ros1", w.add_schema("sensor_msgs/Image", "ros1msg", custom.encode()))
        for i, a in enumerate(frames):
            d = sensors.numpy_to_image(a, "rgb8")
            d["exposure_us"] = 1000 + i
            w.write(ch, codec.encode(d), 10 + i)
    with polybag.open(path) as r:
        got = [a for _, a in r.images("/cam")]
    assert len(got) == 3
    for a, b in zip(got, frames):
        np.testing.assert_array_equal(a, b)


def test_compressed_topics_too(tmp_path: Path) -> None:
    pics = [_pixels("bgr8", 8, 6, i) for i in range(3)]
    items = [
        ("/cam/compressed", sl.compressed("ros2", cv2.imencode(".png", p)[1].tobytes(), "png"), i + 1)
        for i, p in enumerate(pics)
    ]
    path = sl.write_log(tmp_path / "c.mcap", "ros2", items)
    with polybag.open(path) as r:
        got = list(r.images("/cam/compressed"))
    assert [t for t, _ in got] == [1, 2, 3]
    for (_, a), p in zip(got, pics):
        np.testing.assert_array_equal(a, p[..., ::-1])


@pytest.mark.parametrize("profile", PROFILES)
def test_pointclouds_of_a_topic(tmp_path: Path, profile: str) -> None:
    dt = np.dtype([("x", "<f4"), ("y", "<f4"), ("z", "<f4"), ("intensity", "<f4")])
    clouds = []
    items = []
    for i in range(4):
        a = np.zeros(10 + i, dt)
        for n in dt.names or ():
            a[n] = np.arange(len(a)) * (i + 1)
        a["z"][0] = np.nan
        clouds.append(a)
        fields = [(n, dt.fields[n][1], 7, 1) for n in dt.names or ()]  # type: ignore[index]
        items.append(
            (
                "/points",
                sl.cloud(profile, fields, a.tobytes(), 1, len(a), dt.itemsize, dt.itemsize * len(a)),
                100 + i,
            )
        )
    path = sl.write_log(sl.log_path(tmp_path, profile), profile, items)
    with polybag.open(path) as r:
        got = list(r.pointclouds("/points"))
        kept = list(r.pointclouds("/points", skip_nans=True))
    assert [t for t, _ in got] == [100, 101, 102, 103]
    for (_, a), b, (_, k) in zip(got, clouds, kept):
        for n in dt.names or ():
            np.testing.assert_array_equal(a[n], b[n])
        assert len(k) == len(b) - 1


def test_wrong_topics_are_usage_errors(tmp_path: Path) -> None:
    path, _ = _camera_log(tmp_path, "ros1")
    with polybag.open(path) as r:
        with pytest.raises(
            UsageError, match=r"no image topic matches '/other' \(it matches /other \(std_msgs/String\)\)"
        ):
            list(r.images("/other"))
        with pytest.raises(UsageError, match=r"not image topics: /other \(std_msgs/String\)"):
            list(r.images(["/cam", "/other"]))
        assert len(list(r.images("/.*"))) == 12  # a pattern takes the image topics it matches
        with pytest.raises(UsageError, match="no image topic matches"):
            list(r.images("/nothing"))
        with pytest.raises(
            UsageError, match=r"no PointCloud2 topic matches '/cam' \(it matches /cam \(sensor_msgs/Image\)\)"
        ):
            list(r.pointclouds("/cam"))
        with pytest.raises(UsageError, match="not a valid topic regular expression"):
            list(r.images("("))


def test_a_damaged_image_is_a_decode_error(tmp_path: Path) -> None:
    """An image whose data is shorter than step x height, after good ones (the zero-copy
    path is on by then): a DecodeError naming the problem."""
    good = _image("ros1", _pixels("rgb8", 2, 2, 0), "rgb8")
    bad = sl.image("ros1", bytes(5), 2, 2, "rgb8", 6)
    path = sl.write_log(
        tmp_path / "bad.bag", "ros1", [("/cam", good, 1), ("/cam", good, 2), ("/cam", bad, 3)]
    )
    with polybag.open(path) as r:
        it = r.images("/cam")
        next(it)
        next(it)
        with pytest.raises(DecodeError, match="data has 5 bytes, fewer than step x height"):
            next(it)


def test_dask_bags_of_arrays(tmp_path: Path) -> None:
    pytest.importorskip("dask.bag")
    import polybag.dask as pbd

    path, expected = _camera_log(tmp_path, "ros1")
    b = pbd.read_images(str(path), "/cam", partition_messages=4)
    got = b.compute(scheduler="sync")
    assert [t for t, _ in got] == [t for t, _ in expected]
    for (_, a), (_, e) in zip(got, expected):
        assert a.flags.owndata or a.base is not None and not isinstance(a.base, memoryview)
        np.testing.assert_array_equal(a, e)
    dt = np.dtype([("x", "<f4"), ("y", "<f4"), ("z", "<f4")])
    items = []
    for i in range(3):
        a = (np.arange(6 * 3, dtype=np.float32) + i).view(dt)
        items.append(
            (
                "/points",
                sl.cloud("ros2", [("x", 0, 7, 1), ("y", 4, 7, 1), ("z", 8, 7, 1)], a.tobytes(), 1, 6, 12, 72),
                10 + i,
            )
        )
    cpath = sl.write_log(tmp_path / "clouds.mcap", "ros2", items)
    clouds = pbd.read_pointclouds([str(cpath)], "/points").compute(scheduler="sync")
    assert [t for t, _ in clouds] == [10, 11, 12]
    assert all(c.shape == (6,) and c.dtype.names == ("x", "y", "z") for _, c in clouds)


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("frame", ["", "a", "ab", "abc", "abcd", "camera_optical"])
def test_in_place_layouts_read_what_the_codec_reads(profile: str, frame: str) -> None:
    """image_view / cloud_view of rosbags-serialized payloads (every string length, so every
    CDR alignment) give the codec's fields, data as a view of the payload."""
    from polybag.codecs import codec_for
    from polybag.model import Channel, Schema
    from polybag.sensors.layout import cloud_view, image_view

    store = sl.STORES[profile]
    hdr = sl.header(profile, frame=frame)
    img = sl.image(profile, bytes(range(30)), 2, 5, "bgr8", 15)
    img.header = hdr
    fields = [(name, 4 * i, 7, 1) for i, name in enumerate(["x", "yy", "zzz", "intensity"])]
    cl = sl.cloud(profile, fields, bytes(range(48)), 1, 3, 16, 48, dense=False)
    cl.header = hdr
    for msg, view, tname in (
        (img, image_view, "sensor_msgs/Image"),
        (cl, cloud_view, "sensor_msgs/PointCloud2"),
    ):
        payload = sl.serialize(profile, msg)
        full = tname.replace("/", "/msg/", 1)
        text = store.generate_msgdef(full)[0].encode()
        ch = (
            Channel(1, "/t", "ros1", Schema(1, tname, "ros1msg", text))
            if profile == "ros1"
            else Channel(1, "/t", "cdr", Schema(1, full, "ros2msg", text))
        )
        ref = codec_for(ch).to_dict(payload)
        got = view(ch.message_encoding, payload)
        assert got is not None
        assert isinstance(got["data"], memoryview) and got["data"].obj is payload
        for k, v in got.items():
            if k == "data":
                assert bytes(v) == bytes(ref[k])
            elif k == "fields":
                assert v == [{x: f[x] for x in ("name", "offset", "datatype", "count")} for f in ref[k]]
            else:
                assert v == ref[k], k


@pytest.mark.parametrize("profile", PROFILES)
def test_pointclouds_are_views_of_the_file(tmp_path: Path, profile: str) -> None:
    dt = np.dtype([("x", "<f4"), ("y", "<f4"), ("z", "<f4")])
    fields = [("x", 0, 7, 1), ("y", 4, 7, 1), ("z", 8, 7, 1)]
    items = [
        (
            "/points",
            sl.cloud(profile, fields, (np.arange(30, dtype=np.float32) + i).tobytes(), 1, 10, 12, 120),
            i + 1,
        )
        for i in range(4)
    ]
    path = sl.write_log(sl.log_path(tmp_path, profile), profile, items, compression="none")
    with polybag.open(path) as r:
        got = [a for _, a in r.pointclouds("/points")]
    for i, a in enumerate(got):  # read after the reader closed: the views keep the map
        assert a.dtype == dt and not a.flags.writeable
        np.testing.assert_array_equal(a["x"], np.arange(30, dtype=np.float32)[0::3] + i)
    if profile == "ros2":
        assert all(_maps_the_file(a) for a in got[1:])


def test_a_cloud_type_with_another_definition_goes_through_the_codec(tmp_path: Path) -> None:
    text = sl.TS1.generate_msgdef("sensor_msgs/msg/PointCloud2")[0]
    custom = text.replace("bool is_dense\n", "bool is_dense\nstring lidar_model\n", 1)
    assert custom != text
    from polybag.codecs.ros1 import codec_for_type

    codec = codec_for_type("sensor_msgs/PointCloud2", custom)
    a = np.arange(12, dtype=np.float32).view([("x", "<f4"), ("y", "<f4"), ("z", "<f4")])
    path = tmp_path / "custom.bag"
    with polybag.Writer(str(path)) as w:
        ch = w.add_channel("/p", "ros1", w.add_schema("sensor_msgs/PointCloud2", "ros1msg", custom.encode()))
        for i in range(3):
            d = sensors.numpy_to_pointcloud2(a)
            d["lidar_model"] = "x" * i
            w.write(ch, codec.encode(d), 10 + i)
    with polybag.open(path) as r:
        got = [c for _, c in r.pointclouds("/p")]
    assert len(got) == 3
    for c in got:
        np.testing.assert_array_equal(c["z"], [2, 5, 8, 11])


def test_big_endian_cdr_images_are_read_in_place() -> None:
    """A CDR payload in big-endian encapsulation (0x00 0x00): the in-place reader follows the
    byte order and the alignment, and agrees with the codec."""
    import struct

    from polybag.codecs import codec_for
    from polybag.model import Channel, Schema
    from polybag.sensors.layout import ImageReader, image_view

    def cdr_be(h: int, w: int, enc: bytes, pix: bytes, frame: bytes) -> bytes:
        body = bytearray(struct.pack(">iI", 7, 8) + struct.pack(">I", len(frame) + 1) + frame + b"\0")
        body += b"\0" * (-len(body) % 4)
        body += (
            struct.pack(">II", h, w) + struct.pack(">I", len(enc) + 1) + enc + b"\0" + b"\0"
        )  # is_bigendian
        body += b"\0" * (-len(body) % 4)
        body += struct.pack(">II", w * 3, len(pix)) + pix
        return b"\x00\x00\x00\x00" + bytes(body)

    text = sl.TS2.generate_msgdef("sensor_msgs/msg/Image")[0].encode()
    ch = Channel(1, "/c", "cdr", Schema(1, "sensor_msgs/msg/Image", "ros2msg", text))
    pix = bytes(range(2 * 3 * 3))
    for frame in (b"", b"ab", b"abc", b"abcde"):
        payload = cdr_be(2, 3, b"rgb8", pix, frame)
        ref = codec_for(ch).to_dict(payload)
        view = image_view("cdr", payload)
        assert view is not None and bytes(view["data"]) == bytes(ref["data"]) == pix
        assert (view["height"], view["width"], view["encoding"], view["step"]) == (2, 3, "rgb8", 9)
        reader = ImageReader()
        for _ in range(2):  # the codec first, then in place
            np.testing.assert_array_equal(
                sensors.image_to_numpy(reader.read(ch, payload)),
                np.frombuffer(pix, np.uint8).reshape(2, 3, 3),
            )


def test_cli_window_and_every(tmp_path: Path) -> None:
    from polybag.cli import main

    path, expected = _camera_log(tmp_path, "ros2")
    out = tmp_path / "npy"
    # seconds since the epoch (the /cam frames are 1.0 s .. 2.1 s)
    assert (
        main(
            [
                "export",
                str(path),
                "--images",
                str(out),
                "--topics",
                "/cam",
                "--format",
                "npy",
                "--start",
                "1.2",
                "--end",
                "1.6",
            ]
        )
        == 0
    )
    names = sorted(p.name for p in out.iterdir())
    wanted = [t for t, _ in expected if 1_200_000_000 <= t < 1_600_000_000]
    assert names == sorted(f"cam_{t}.npy" for t in wanted) and len(names) == 4
    out2 = tmp_path / "every"
    assert (
        main(
            [
                "export",
                str(path),
                "--images",
                str(out2),
                "--format",
                "npy",
                "--every",
                "3",
                "--topics",
                "/cam",
            ]
        )
        == 0
    )
    assert len(list(out2.iterdir())) == 4
    assert (
        main(["export", str(path), "--images", str(tmp_path / "x"), "--every", "0", "--topics", "/cam"]) == 2
    )
