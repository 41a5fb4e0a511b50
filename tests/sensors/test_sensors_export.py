"""``polybag export --images / --video / --pointclouds`` (``polybag.ops.export_media``).

PNGs equal the arrays (depth as 16-bit PNGs), the video opens with imageio with the right
frame count and size, PCD and PLY files hold the points; existing outputs are refused
without ``--force``; a frame that cannot be read is counted and the others written.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import imageio.v2 as iio
import numpy as np
import pytest
import sensor_logs as sl
from PIL import Image

from polybag import sensors
from polybag.cli import main
from polybag.errors import OutputExistsError, UsageError
from polybag.ops import export_media as em

NS = 1_000_000_000


def _img(profile: str, a: np.ndarray, encoding: str, pad: int = 0) -> Any:
    flat = np.ascontiguousarray(a).reshape(a.shape[0], -1).view(np.uint8)
    data = np.concatenate([flat, np.zeros((a.shape[0], pad), np.uint8)], axis=1)
    return sl.image(profile, data.tobytes(), a.shape[0], a.shape[1], encoding, flat.shape[1] + pad)


def _rgb(i: int, h: int = 24, w: int = 32) -> np.ndarray:
    y, x = np.mgrid[0:h, 0:w]
    return np.stack([(x * 8 + i * 10) % 256, (y * 10) % 256, np.full_like(x, 40 * i % 256)], axis=-1).astype(
        np.uint8
    )


@pytest.fixture
def camera_log(tmp_path: Path) -> tuple[Path, dict[str, list[tuple[int, np.ndarray]]]]:
    """A ROS 2 MCAP: /cam rgb8 at 10 Hz (padded rows), /depth 16UC1, /depth_f 32FC1 metres."""
    items: list[tuple[str, Any, int]] = []
    frames: dict[str, list[tuple[int, np.ndarray]]] = {"/cam": [], "/depth": [], "/depth_f": []}
    for i in range(12):
        t = 5 * NS + i * NS // 10
        a = _rgb(i)
        items.append(("/cam", _img("ros2", a, "rgb8", pad=3), t))
        frames["/cam"].append((t, a))
        if i < 3:
            d = (np.arange(20, dtype=np.uint16).reshape(4, 5) * 1000 + i).astype(np.uint16)
            items.append(("/depth", _img("ros2", d, "16UC1"), t + 1))
            frames["/depth"].append((t + 1, d))
            f = np.full((2, 3), 1.25 + i, np.float32)
            f[0, 0] = np.nan
            items.append(("/depth_f", _img("ros2", f, "32FC1"), t + 2))
            frames["/depth_f"].append((t + 2, f))
    return sl.write_log(tmp_path / "cams.mcap", "ros2", items), frames


def test_pngs_equal_the_arrays(
    tmp_path: Path, camera_log: tuple[Path, dict[str, list[tuple[int, np.ndarray]]]]
) -> None:
    path, frames = camera_log
    out = tmp_path / "frames"
    res = em.export_images(path, out)
    assert res.files == 18 and res.failed == 0 and res.topics == ["/cam", "/depth", "/depth_f"]
    for topic, items in frames.items():
        for t, a in items:
            f = out / em.frame_name(topic, t, "png")
            with Image.open(f) as im:
                got = np.asarray(im)
            if topic == "/cam":
                np.testing.assert_array_equal(got, a)
            elif topic == "/depth":
                assert got.dtype == np.uint16 or im.mode.startswith("I")
                np.testing.assert_array_equal(got.astype(np.uint16), a)
            else:  # metres -> millimetres, NaN -> 0
                expected = np.where(np.isnan(a), 0, np.rint(a * 1000)).astype(np.uint16)
                np.testing.assert_array_equal(got.astype(np.uint16), expected)
    assert not [p for p in os.listdir(out) if p.endswith(".active")]


def test_npy_jpg_every_and_window(
    tmp_path: Path, camera_log: tuple[Path, dict[str, list[tuple[int, np.ndarray]]]]
) -> None:
    path, frames = camera_log
    res = em.export_images(path, tmp_path / "npy", topics="/cam", format="npy", every=5)
    cam = frames["/cam"]
    assert res.files == 3
    for t, a in cam[::5]:
        np.testing.assert_array_equal(np.load(tmp_path / "npy" / em.frame_name("/cam", t, "npy")), a)
    res = em.export_images(
        path, tmp_path / "jpg", topics=["/cam"], format="jpg", start=cam[2][0], end=cam[4][0]
    )
    assert res.files == 2
    names = sorted(os.listdir(tmp_path / "jpg"))
    assert names == [em.frame_name("/cam", t, "jpg") for t, _ in cam[2:4]]
    with Image.open(tmp_path / "jpg" / names[0]) as im:
        assert im.format == "JPEG" and im.size == (32, 24)


def test_existing_frames_are_refused(
    tmp_path: Path, camera_log: tuple[Path, dict[str, list[tuple[int, np.ndarray]]]]
) -> None:
    path, _ = camera_log
    out = tmp_path / "f"
    em.export_images(path, out, topics="/depth")
    before = {p: (out / p).stat().st_mtime_ns for p in os.listdir(out)}
    with pytest.raises(OutputExistsError, match="frames exist"):
        em.export_images(path, out, topics="/depth")
    assert {p: (out / p).stat().st_mtime_ns for p in os.listdir(out)} == before
    em.export_images(path, out, topics="/cam")  # other topics' frames are no obstacle
    res = em.export_images(path, out, topics="/depth", overwrite=True)
    assert res.files == 3


def test_a_bad_frame_is_counted_and_the_rest_written(tmp_path: Path) -> None:
    good = _img("ros1", _rgb(0, 4, 4), "rgb8")
    items = [("/cam", good, 1), ("/cam", sl.image("ros1", bytes(7), 4, 4, "rgb8", 12), 2), ("/cam", good, 3)]
    path = sl.write_log(tmp_path / "bad.bag", "ros1", items)
    res = em.export_images(path, tmp_path / "out")
    assert res.files == 2 and res.failed == 1
    assert any("fewer than step x height" in w for w in res.warnings)
    code = main(["export", str(path), "--images", str(tmp_path / "cli"), "--json"])
    assert code == 1


def _video_frames(path: Path) -> tuple[list[np.ndarray], dict[str, Any]]:
    reader = iio.get_reader(str(path), format="FFMPEG")
    try:
        meta = reader.get_meta_data()
        return [np.asarray(f) for f in reader], meta
    finally:
        reader.close()


def test_video_has_every_frame(
    tmp_path: Path, camera_log: tuple[Path, dict[str, list[tuple[int, np.ndarray]]]]
) -> None:
    path, frames = camera_log
    out = tmp_path / "cam.mp4"
    res = em.export_video(path, out, topics="/cam")
    assert res.files == 12 and res.fps == pytest.approx(10.0) and (res.width, res.height) == (32, 24)
    got, meta = _video_frames(out)
    assert len(got) == 12
    assert got[0].shape == (24, 32, 3)
    assert meta["fps"] == pytest.approx(10.0)
    # lossy, but close to the source frames
    assert np.abs(got[5].astype(int) - frames["/cam"][5][1].astype(int)).mean() < 12
    with pytest.raises(OutputExistsError):
        em.export_video(path, out, topics="/cam")
    res = em.export_video(path, out, topics="/cam", fps=25, every=2, overwrite=True)
    got, meta = _video_frames(out)
    assert len(got) == 6 and res.fps == 25 and meta["fps"] == pytest.approx(25.0)


def test_video_of_odd_sized_grey_frames(tmp_path: Path) -> None:
    items = [
        ("/mono", _img("ros1", np.full((7, 9), 10 * i, np.uint8), "mono8"), i * NS // 5) for i in range(1, 5)
    ]
    path = sl.write_log(tmp_path / "mono.bag", "ros1", items)
    res = em.export_video(path, tmp_path / "mono.mkv")
    got, _ = _video_frames(tmp_path / "mono.mkv")
    assert len(got) == 4 and got[0].shape == (8, 10, 3)  # padded to even sides
    assert res.fps == pytest.approx(5.0)


def test_video_needs_one_topic(
    tmp_path: Path, camera_log: tuple[Path, dict[str, list[tuple[int, np.ndarray]]]]
) -> None:
    path, _ = camera_log
    with pytest.raises(UsageError, match="one image topic"):
        em.export_video(path, tmp_path / "v.mp4")
    with pytest.raises(UsageError, match=r"\.mp4, \.mkv"):
        em.export_video(path, tmp_path / "v.gif", topics="/cam")
    assert not list(tmp_path.glob("v.*"))


# --- point clouds --------------------------------------------------------------------------------
def _parse_pcd(data: bytes) -> tuple[dict[str, list[str]], bytes]:
    head, _, body = data.partition(b"DATA binary\n")
    fields = {
        ln.split()[0]: ln.split()[1:] for ln in head.decode().splitlines() if ln and not ln.startswith("#")
    }
    return fields, body


def _parse_ply(data: bytes) -> tuple[list[tuple[str, str]], int, bytes]:
    head, _, body = data.partition(b"end_header\n")
    lines = head.decode().splitlines()
    assert lines[0] == "ply" and lines[1] == "format binary_little_endian 1.0"
    n = next(int(ln.split()[2]) for ln in lines if ln.startswith("element vertex"))
    props = [(ln.split()[1], ln.split()[2]) for ln in lines if ln.startswith("property")]
    return props, n, body


@pytest.fixture
def cloud_log(tmp_path: Path) -> tuple[Path, list[tuple[int, np.ndarray]]]:
    """ROS 1 bag: /points, organized 2 x 3 clouds with padding and a count-2 field."""
    fields = [("x", 0, 7, 1), ("y", 4, 7, 1), ("z", 8, 7, 1), ("rgb", 16, 7, 1), ("t", 20, 3, 2)]
    dt = np.dtype(
        {
            "names": ["x", "y", "z", "rgb", "t"],
            "formats": ["<f4", "<f4", "<f4", "<f4", ("<i2", (2,))],
            "offsets": [0, 4, 8, 16, 20],
            "itemsize": 32,
        }
    )
    items, clouds = [], []
    for i in range(3):
        a = np.zeros((2, 3), dt)
        a["x"], a["y"], a["z"] = np.arange(6).reshape(2, 3) + i, 1.5, -2.0
        a["t"] = [[[1, -1]] * 3] * 2
        a["rgb"] = np.full((2, 3), 0x00102030, np.uint32).view(np.float32)
        items.append(("/points", sl.cloud("ros1", fields, a.tobytes(), 2, 3, 32, 96), (i + 1) * NS))
        clouds.append(((i + 1) * NS, a))
    return sl.write_log(tmp_path / "clouds.bag", "ros1", items), clouds


def test_pcd_files(tmp_path: Path, cloud_log: tuple[Path, list[tuple[int, np.ndarray]]]) -> None:
    path, clouds = cloud_log
    res = em.export_pointclouds(path, tmp_path / "pcd")
    assert res.files == 3
    for t, a in clouds:
        head, body = _parse_pcd((tmp_path / "pcd" / em.frame_name("/points", t, "pcd")).read_bytes())
        assert head["FIELDS"] == ["x", "y", "z", "rgb", "t"]
        assert head["SIZE"] == ["4", "4", "4", "4", "2"] and head["TYPE"] == ["F", "F", "F", "F", "I"]
        assert head["COUNT"] == ["1", "1", "1", "1", "2"]
        assert head["WIDTH"] == ["3"] and head["HEIGHT"] == ["2"] and head["POINTS"] == ["6"]
        packed = np.frombuffer(
            body, np.dtype([("x", "<f4"), ("y", "<f4"), ("z", "<f4"), ("rgb", "<f4"), ("t", "<i2", (2,))])
        )
        for n in ("x", "y", "z", "t"):
            np.testing.assert_array_equal(packed[n], a[n].reshape(len(packed), *a.dtype[n].shape))


def test_ply_and_npy_files(tmp_path: Path, cloud_log: tuple[Path, list[tuple[int, np.ndarray]]]) -> None:
    path, clouds = cloud_log
    em.export_pointclouds(path, tmp_path / "ply", format="ply", every=2)
    assert len(os.listdir(tmp_path / "ply")) == 2
    t, a = clouds[0]
    props, n, body = _parse_ply((tmp_path / "ply" / em.frame_name("/points", t, "ply")).read_bytes())
    assert n == 6
    assert props == [
        ("float", "x"),
        ("float", "y"),
        ("float", "z"),
        ("float", "rgb"),
        ("short", "t_0"),
        ("short", "t_1"),
    ]
    rows = np.frombuffer(
        body,
        np.dtype([("x", "<f4"), ("y", "<f4"), ("z", "<f4"), ("rgb", "<f4"), ("t_0", "<i2"), ("t_1", "<i2")]),
    )
    np.testing.assert_array_equal(rows["x"], a["x"].reshape(-1))
    np.testing.assert_array_equal(rows["t_1"], -1)
    em.export_pointclouds(path, tmp_path / "npy", format="npy")
    back = np.load(tmp_path / "npy" / em.frame_name("/points", t, "npy"))
    assert back.shape == (2, 3)
    for name in ("x", "y", "z", "t"):
        np.testing.assert_array_equal(back[name], a[name])
    split = sensors.split_packed_rgb(back)
    assert split["r"].tolist() == [[0x10] * 3] * 2


# --- the command line ------------------------------------------------------------------------------
def test_cli(
    tmp_path: Path,
    camera_log: tuple[Path, dict[str, list[tuple[int, np.ndarray]]]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    path, _ = camera_log
    code = main(["export", str(path), "--images", str(tmp_path / "i"), "--topics", "/depth.*", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["files"] == 6 and out["kind"] == "images" and out["format"] == "png"
    assert main(["export", str(path), "--images", str(tmp_path / "i"), "--topics", "/depth.*"]) == 2  # exists
    assert "frames exist" in capsys.readouterr().err
    code = main(["export", str(path), "--video", str(tmp_path / "v.mp4"), "--topics", "/cam", "--fps", "5"])
    assert code == 0 and "12 frames, 5 fps" in capsys.readouterr().out
    assert main(["export", str(path), "--images", str(tmp_path / "x"), "--format", "pcd"]) == 2
    assert "does not go with --images" in capsys.readouterr().err
    assert main(["export", str(path), "--images", str(tmp_path / "x"), "-o", str(tmp_path / "t")]) == 2
    assert main(["export", str(path), "--pointclouds", str(tmp_path / "p")]) == 2
    assert "no PointCloud2 topic" in capsys.readouterr().err
    # tables still work as before
    assert main(["export", str(path), "-o", str(tmp_path / "tables"), "--topics", "/depth"]) == 0
    assert (tmp_path / "tables" / "depth.csv").exists()


def test_images_without_pixels_are_counted(tmp_path: Path) -> None:
    good = _img("ros1", _rgb(0, 4, 4), "rgb8")
    empty = sl.image("ros1", b"", 0, 4, "rgb8", 12)
    path = sl.write_log(
        tmp_path / "e.bag", "ros1", [("/cam", empty, 1), ("/cam", good, 2), ("/cam", empty, 3)]
    )
    res = em.export_images(path, tmp_path / "out")
    assert res.files == 1 and res.failed == 2
    res = em.export_video(path, tmp_path / "e.mp4")
    assert res.files == 1 and res.failed == 2
    res = em.export_images(path, tmp_path / "npy", format="npy")
    assert res.files == 3 and np.load(tmp_path / "npy" / em.frame_name("/cam", 1, "npy")).shape == (0, 4, 3)
