"""Sensor data out of a log as files: image frames, a video, point clouds.

::

    from polybag import ops
    ops.export_images("run.bag", "frames/", topics="/camera/.*", format="png", every=5)
    ops.export_video("run.bag", "front.mp4", topics="/camera/front/image_raw")
    ops.export_pointclouds("run.mcap", "clouds/", format="pcd")

Images and clouds come from :mod:`polybag.sensors` (raw and compressed images, ROS 1 and
ROS 2, any format).  One file per frame, named ``<topic>_<log time in ns>.<ext>`` (the topic
with ``/`` as ``.``, as ``export`` names tables; topics whose names make the same file name
get ``~2``, ``~3``... as tables do, see :func:`polybag.ops.export.unique_names`).  ``png`` keeps depth: ``16UC1``/``mono16``
images are 16-bit PNGs as they are, ``32FC1`` depth (metres) a 16-bit PNG in millimetres;
``jpg`` and video frames are 8-bit RGB (:func:`polybag.sensors.to_rgb8`); ``npy`` is the
array as decoded.  Clouds are binary ``pcd`` (PCL 0.7), binary little-endian ``ply``, or
``npy`` (the structured array).

Every file is written as ``NAME.active`` and renamed when complete.  Existing frames of the
selected topics (or an existing video) are refused before anything is written unless
``overwrite``.  A frame that cannot be decoded is counted in ``failed`` and named in
``warnings``; the others are still written.  Video goes through ``imageio-ffmpeg`` (its
wheel carries an ffmpeg binary; ``pip install 'polybag[sensors]'``), at the log's frame
rate (the median interval of the first frames) unless ``fps`` is given.
"""

from __future__ import annotations

import functools
import io
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from polybag.errors import OutputExistsError, PolybagError, UnsupportedError, UsageError
from polybag.io.output_files import file_refusal, refuse_replacing, write_created
from polybag.model import Message
from polybag.ops.export import table_name, unique_names
from polybag.ops.inputs import check_apart, input_name, open_input, require_topics
from polybag.ops.options import Input
from polybag.ops.outputs import check_output, make_folder, placed
from polybag.ops.results import OpResult, make_progress
from polybag.selection import TimeWindow
from polybag.sensors.display import to_rgb8
from polybag.sensors.image import encoding_info
from polybag.sensors.layout import CloudReader
from polybag.sensors.read import (
    CLOUD_TYPES,
    IMAGE_TYPES,
    Frame,
    FrameReader,
    channel_type,
    every_nth,
    read_cloud,
    sensor_channels,
)

IMAGE_FORMATS = ("png", "jpg", "npy")
CLOUD_FORMATS = ("pcd", "ply", "npy")
VIDEO_CONTAINERS = {".mp4": "mp4", ".mkv": "matroska", ".mov": "mov", ".avi": "avi"}
#: frames buffered to measure a video's frame rate when no fps is given
RATE_FRAMES = 30
#: frame-rate of a video whose rate cannot be measured (one frame, equal times)
DEFAULT_FPS = 30.0
_MAX_NAMED_FAILURES = 5


@dataclass
class MediaResult(OpResult):
    """What an export of images, a video or clouds did (``to_dict()`` for ``--json``)."""

    input: str = ""
    output: str = ""
    kind: str = ""  # images | video | pointclouds
    format: str = ""
    topics: list[str] = field(default_factory=list)
    files: int = 0  # files written (frames for a video)
    failed: int = 0  # frames that could not be decoded or written
    fps: float | None = None  # video only
    width: int | None = None  # video only
    height: int | None = None  # video only


def frame_name(topic: str, log_time: int, ext: str, base: str | None = None) -> str:
    """``camera.image_raw_1519728624724574089.png``: a frame's file name (``base``: the
    topic's file name when not :func:`table_name`'s, see :func:`frame_bases`)."""
    return f"{base if base is not None else table_name(topic)}_{int(log_time)}.{ext}"


def frame_bases(topics: Sequence[str]) -> dict[str, str]:
    """Each topic's own file name start: :func:`table_name`, made unique over ``topics``."""
    return dict(zip(topics, unique_names([table_name(t) for t in topics])))


def _check_frames(out: Path, bases: Sequence[str], ext: str, overwrite: bool) -> None:
    """Before anything is written: no frame of the topics named ``bases`` exists in ``out``
    unless ``overwrite`` (and then only a file of its kind, by its first bytes), and no
    interrupted ``.active`` file is there."""
    if not out.is_dir():
        if out.exists():
            raise UsageError(f"{out}: not a directory")
        return
    pats = [
        re.compile(re.escape(b) + r"_\d+\." + re.escape(ext) + r"(\.active)?") for b in bases
    ]
    existing = []
    for name in sorted(os.listdir(out)):
        for p in pats:
            if p.fullmatch(name):
                if name.endswith(".active"):
                    raise OutputExistsError(
                        f"{out / name} exists (an interrupted export?); not overwritten: move it away"
                    )
                existing.append(str(out / name))
    if existing and not overwrite:
        more = f" and {len(existing) - 1} more" if len(existing) > 1 else ""
        raise OutputExistsError(
            f"{existing[0]}{more}: frames exist; not overwritten (--force replaces them; in Python "
            "overwrite=True; or choose another output directory)"
        )
    for frame in existing:
        refuse_replacing(frame, file_refusal(frame))


def _failed(result: MediaResult, what: str, e: PolybagError) -> None:
    result.failed += 1
    if result.failed <= _MAX_NAMED_FAILURES:
        result.warn(f"{what}: {e}")
    elif result.failed == _MAX_NAMED_FAILURES + 1:
        result.warn("more frames failed (see the failed count)")


def _count(reader: Any, topics: Sequence[str], every: int) -> int:
    counts = reader.summary.message_counts or {}
    n = 0
    for ch in reader.summary.channels.values():
        if ch.topic in topics:
            n += (int(counts.get(ch.id, 0)) + every - 1) // every
    return n


# --- image files ------------------------------------------------------------------------------
def depth_u16(a: np.ndarray, encoding: str) -> np.ndarray | None:
    """A single-channel depth image as the 16-bit array a PNG keeps: ``16UC1``/``mono16`` as
    is, ``32FC1``/``64FC1`` metres as millimetres (NaN, negative: 0); None for others."""
    if a.ndim != 2:
        return None
    if a.dtype == np.uint16:
        return a
    if a.dtype.kind == "f" and encoding.upper() in ("32FC1", "64FC1", "32FC", "64FC"):
        mm = np.nan_to_num(a.astype(np.float64) * 1000.0, nan=0.0, posinf=0.0, neginf=0.0)
        return np.clip(np.rint(mm), 0, 65535).astype(np.uint16)
    return None


def _encode_image(a: np.ndarray, fmt: str) -> bytes:
    """PNG or JPEG bytes of an 8-bit grey/RGB(A) or a 16-bit grey array."""
    try:
        from PIL import Image
    except ImportError:
        Image = None  # type: ignore[assignment]  # Pillow is optional: None when not installed  # noqa: N806
    if Image is not None:
        import io

        buf = io.BytesIO()
        im = Image.fromarray(np.ascontiguousarray(a))
        if fmt == "jpg" and im.mode not in ("L", "RGB"):
            im = im.convert("RGB")
        im.save(buf, format="PNG" if fmt == "png" else "JPEG", **({"quality": 95} if fmt == "jpg" else {}))
        return buf.getvalue()
    try:
        import cv2
    except ImportError:
        raise UnsupportedError(
            f"writing {fmt} files needs Pillow or OpenCV: pip install 'polybag[sensors]'"
        ) from None
    if a.ndim == 3:
        a = a[..., [2, 1, 0, 3][: a.shape[2]]]
        if fmt == "jpg" and a.shape[2] == 4:
            a = a[..., :3]
    ok, enc = cv2.imencode("." + fmt, np.ascontiguousarray(a))
    if not ok:
        raise UnsupportedError(f"OpenCV could not encode a {a.shape} {a.dtype} image as {fmt}")
    return enc.tobytes()


def image_file_bytes(f: Frame, fmt: str) -> bytes:
    """What the file of frame ``f`` holds in ``fmt`` (png, jpg, npy)."""
    if f.array.size == 0 and fmt != "npy":
        raise UnsupportedError(
            f"a {f.array.shape[1]}x{f.array.shape[0]} image has no pixels to write as {fmt}"
        )
    if fmt == "npy":
        return npy_bytes(f.array)
    depth = depth_u16(f.array, f.encoding) if fmt == "png" else None
    if depth is not None:
        return _encode_image(depth, fmt)
    return _encode_image(to_rgb8(f.array, encoding_info(f.encoding), alpha=fmt == "png"), fmt)


def _write_file(path: Path, data: bytes, overwrite: bool) -> None:
    with placed(path, overwrite) as tmp:
        write_created(tmp, data)


def _sensor_topics(reader: Any, topics: str | Sequence[str] | None, types: dict[str, str], what: str) -> list[str]:
    """The topics of ``types`` that ``topics`` selects (``what`` names them in errors; see
    :func:`polybag.sensors.read.sensor_channels`), sorted.  A selection that matches no
    topic at all is an :class:`~polybag.errors.EmptySelectionError`."""
    require_topics(topics, reader.summary.channels.values())
    return sorted({c.topic for c in sensor_channels(reader, topics, types, what, strict=topics is not None)})


def _image_topics(reader: Any, topics: str | Sequence[str] | None) -> list[str]:
    return _sensor_topics(reader, topics, IMAGE_TYPES, "image")


def _every_nth_of(
    reader: Any, names: list[str], types: dict[str, str], window: TimeWindow, every: int
) -> Iterator[Message]:
    """Every ``every``-th message in ``window`` of the channels of ``types`` on ``names``
    (counted per topic)."""
    wanted = set(names)
    ids = {c.id for c in reader.summary.channels.values() if c.topic in wanted and channel_type(c) in types}
    return every_nth(reader.messages(topics=names, start=window.start, end=window.end), ids, every)


#: what :func:`_export_files` writes for one message: the message (its topic and log time
#: name the file), a function making the file's bytes (a PolybagError when it cannot) and
#: what a failure is named (None: the file's path)
_FileItem = tuple[Message, Callable[[], bytes], str | None]


@dataclass(frozen=True)
class _FileExport:
    """What :func:`export_images` and :func:`export_pointclouds` differ in."""

    kind: str  # MediaResult.kind
    noun: str  # what a message of it is called in errors and warnings
    formats: tuple[str, ...]
    types: dict[str, str]  # the channel types it reads
    what: str  # their name for sensor_channels
    #: the files of (reader, topic names, window, every, format, result)
    items: Callable[[Any, list[str], TimeWindow, int, str, MediaResult], Iterator[_FileItem]]


def _export_files(
    spec: _FileExport,
    src: Input,
    output_dir: str | os.PathLike[str],
    topics: str | Sequence[str] | None,
    format: str,  # noqa: A002
    every: int,
    start: int | str | None,
    end: int | str | None,
    progress: bool | None,
    overwrite: bool,
) -> MediaResult:
    """One file per ``every``-th message of the topics of ``spec`` in ``topics``, written into
    ``output_dir`` (:func:`export_images`, :func:`export_pointclouds`)."""
    if format not in spec.formats:
        raise UsageError(f"{spec.noun} format must be one of {', '.join(spec.formats)}, not {format!r}")
    if every < 1:
        raise UsageError(f"--every must be at least 1, not {every}")
    from polybag.io.upload import local_output, output_url

    url = output_url(output_dir)  # a URL prefix: the files are written locally, then uploaded
    out = Path(local_output(os.fspath(output_dir)))
    result = MediaResult(input=input_name(src), output=url or str(out), kind=spec.kind, format=format)
    with open_input(src) as r:
        window = TimeWindow.parse(start, end, r.summary.start_time)
        names = _sensor_topics(r, topics, spec.types, spec.what)
        result.topics = names
        bases = frame_bases(names)

        def run(out: Path) -> None:
            make_folder(out)
            files = spec.items(r, names, window, every, format, result)
            with make_progress(
                _count(r, names, every), f"export {os.path.basename(result.input)}", progress
            ) as bar:
                for m, file_bytes, failure in files:
                    topic = m.channel.topic
                    path = out / frame_name(topic, m.log_time, format, bases.get(topic))
                    try:
                        data = file_bytes()
                    except PolybagError as e:
                        _failed(result, str(path) if failure is None else failure, e)
                        continue
                    _write_file(path, data, overwrite)
                    result.files += 1
                    result.messages += 1
                    bar.update(1)

        if url is None:
            check_apart(src, out / frame_name(names[0] if names else "x", 0, format))  # never inside an input
            _check_frames(out, list(bases.values()), format, overwrite)
            run(out)
        else:
            from polybag.io.upload import list_names, staged

            pats = [re.compile(re.escape(b) + r"_\d+\." + re.escape(format)) for b in bases.values()]
            taken = [n for n in list_names(url) if any(p.fullmatch(n) for p in pats)]
            if taken and not overwrite:
                raise OutputExistsError(
                    f"{url.rstrip('/')}/{taken[0]}: frames exist; not overwritten (--force replaces them; "
                    "in Python overwrite=True)"
                )
            with staged(url, merge=True, overwrite=overwrite, progress=progress) as local:
                run(Path(local))
    if result.files == 0 and result.failed == 0:
        result.warn(f"no {spec.noun} in the time window")
    return result


def _image_files(
    reader: Any, names: list[str], window: TimeWindow, every: int, fmt: str, result: MediaResult
) -> Iterator[_FileItem]:
    """The image files of :func:`export_images` (a frame that cannot be encoded is named by its path)."""
    for f in _each_frame(reader, names, window, every, result):
        yield f.message, functools.partial(image_file_bytes, f, fmt), None


def export_images(
    src: Input,
    output_dir: str | os.PathLike[str],
    *,
    topics: str | Sequence[str] | None = None,
    format: str = "png",  # noqa: A002
    every: int = 1,
    start: int | str | None = None,
    end: int | str | None = None,
    progress: bool | None = False,
    overwrite: bool = False,
) -> MediaResult:
    """Write every ``every``-th image of the image topics in ``topics`` (default: all image
    topics) into ``output_dir``, one ``png``/``jpg``/``npy`` file per frame (see the module
    notes)."""
    return _export_files(_IMAGE_FILES, src, output_dir, topics, format, every, start, end, progress, overwrite)


def _each_frame(
    reader: Any, names: list[str], window: TimeWindow, every: int, result: MediaResult
) -> Iterator[Frame]:
    """The frames of ``names``; a frame whose pixels cannot be read is counted in
    ``result.failed`` and skipped (reading goes on with the next message)."""
    fr = FrameReader()
    for m in _every_nth_of(reader, names, IMAGE_TYPES, window, every):
        try:
            yield fr.read(m)
        except PolybagError as e:
            _failed(result, f"{m.channel.topic} at {m.log_time}", e)


# --- video -------------------------------------------------------------------------------------
def _ffmpeg() -> Any:
    try:
        import imageio_ffmpeg  # type: ignore[import-untyped]  # imageio-ffmpeg ships no type information
    except ImportError:
        raise UnsupportedError("video export needs imageio-ffmpeg: pip install 'polybag[sensors]'") from None
    return imageio_ffmpeg


def measured_fps(times: Sequence[int]) -> float:
    """Frames per second from frame log times: one over the median interval (DEFAULT_FPS
    when there is none)."""
    if len(times) < 2:
        return DEFAULT_FPS
    gaps = np.diff(np.asarray(times, np.int64))
    gaps = gaps[gaps > 0]
    if not len(gaps):
        return DEFAULT_FPS
    return float(round(1e9 / float(np.median(gaps)), 3))


def _even(a: np.ndarray) -> np.ndarray:
    """``a`` (h, w, 3) padded by its last row/column to even sides (yuv420p needs them)."""
    h, w = a.shape[:2]
    if h % 2 or w % 2:
        a = np.pad(a, ((0, h % 2), (0, w % 2), (0, 0)), mode="edge")
    return a


def _rgb_frame(f: Frame) -> np.ndarray:
    a = to_rgb8(f.array, encoding_info(f.encoding))
    if a.ndim == 2:
        a = np.repeat(a[:, :, None], 3, axis=2)
    return np.ascontiguousarray(_even(a))


class _Video:
    """An ffmpeg process encoding RGB frames of one size to ``path`` (H.264, yuv420p)."""

    def __init__(self, path: str, container: str, size: tuple[int, int], fps: float) -> None:
        self.size = size
        self._gen = _ffmpeg().write_frames(
            path,
            size,
            fps=fps,
            codec="libx264",
            pix_fmt_in="rgb24",
            pix_fmt_out="yuv420p",
            macro_block_size=1,
            quality=7,
            ffmpeg_log_level="error",
            output_params=["-f", container],
        )
        self._gen.send(None)

    def write(self, a: np.ndarray) -> None:
        self._gen.send(a.tobytes())

    def close(self) -> None:
        self._gen.close()


def export_video(
    src: Input,
    output: str | os.PathLike[str],
    *,
    topics: str | Sequence[str] | None = None,
    fps: float | None = None,
    every: int = 1,
    start: int | str | None = None,
    end: int | str | None = None,
    progress: bool | None = False,
    overwrite: bool = False,
) -> MediaResult:
    """Encode the images of one image topic (``topics`` must select exactly one) as a
    video file (``.mp4``, ``.mkv``, ``.mov``, ``.avi``; H.264).  Frames are 8-bit RGB
    (:func:`polybag.sensors.to_rgb8`), odd sides padded to even; a frame whose size differs
    from the first is counted in ``failed`` and left out."""
    out = os.fspath(output)
    container = VIDEO_CONTAINERS.get(os.path.splitext(out)[1].lower())
    if container is None:
        raise UsageError(f"{out}: a video is .mp4, .mkv, .mov or .avi")
    if fps is not None and not fps > 0:
        raise UsageError(f"--fps must be positive, not {fps}")
    if every < 1:
        raise UsageError(f"--every must be at least 1, not {every}")
    _ffmpeg()
    result = MediaResult(input=input_name(src), output=out, kind="video", format=container)
    with open_input(src) as r:
        window = TimeWindow.parse(start, end, r.summary.start_time)
        names = _image_topics(r, topics)
        if len(names) != 1:
            raise UsageError(
                f"a video takes one image topic; --topics selects {len(names)}: {', '.join(names)}"
            )
        result.topics = names
        check_output(out, [r], overwrite)
        with (
            make_progress(_count(r, names, every), f"video {os.path.basename(out)}", progress) as bar,
            placed(out, overwrite) as tmp,
        ):
            _encode(_each_frame(r, names, window, every, result), tmp, container, fps, result, bar)
            if result.files == 0:
                raise PolybagError(f"{names[0]}: no image to encode (in the time window); {out} not written")
    return result


def _encode(
    frames_: Iterator[Frame], tmp: str, container: str, fps: float | None, result: MediaResult, bar: Any
) -> None:
    head: list[np.ndarray] = []
    times: list[int] = []
    video: _Video | None = None
    try:
        for f in frames_:
            if f.array.size == 0:
                _failed(result, f"frame at {f.message.log_time}", UnsupportedError("an image without pixels"))
                continue
            a = _rgb_frame(f)
            if video is None:
                head.append(a)
                times.append(f.message.log_time)
                if len(head) < RATE_FRAMES:
                    continue
                video = _open_video(tmp, container, head, times, fps, result, bar)
                head = []
                continue
            _put(video, a, result, f, bar)
        if video is None and head:
            video = _open_video(tmp, container, head, times, fps, result, bar)
    finally:
        if video is not None:
            video.close()


def _open_video(
    tmp: str,
    container: str,
    head: list[np.ndarray],
    times: list[int],
    fps: float | None,
    result: MediaResult,
    bar: Any,
) -> _Video:
    h, w = head[0].shape[:2]
    result.fps = float(fps) if fps is not None else measured_fps(times)
    result.width, result.height = w, h
    video = _Video(tmp, container, (w, h), result.fps)
    for a, t in zip(head, times):
        _put(video, a, result, t, bar)
    return video


def _put(video: _Video, a: np.ndarray, result: MediaResult, f: Frame | int, bar: Any) -> None:
    if (a.shape[1], a.shape[0]) != video.size:
        t = f if isinstance(f, int) else f.message.log_time
        _failed(
            result,
            f"frame at {t}",
            UsageError(f"{a.shape[1]}x{a.shape[0]}, not the video's {video.size[0]}x{video.size[1]}"),
        )
        return
    video.write(a)
    result.files += 1
    result.messages += 1
    bar.update(1)


# --- point clouds ----------------------------------------------------------------------------------
_PCD_TYPES = {"i": "I", "u": "U", "f": "F"}
_PLY_TYPES = {
    "i1": "char",
    "u1": "uchar",
    "i2": "short",
    "u2": "ushort",
    "i4": "int",
    "u4": "uint",
    "f4": "float",
    "f8": "double",
}


def packed(arr: np.ndarray) -> np.ndarray:
    """``arr``'s fields packed in order, little-endian, no padding (as PCD and PLY store them)."""
    names = arr.dtype.names or ()
    dt = []
    for n in names:
        ft = arr.dtype[n]
        base, shape = (ft.base, ft.shape) if ft.subdtype is not None else (ft, ())
        dt.append((n, base.newbyteorder("<"), shape) if shape else (n, base.newbyteorder("<")))
    out = np.empty(arr.shape, np.dtype(dt))
    for n in names:
        out[n] = arr[n]
    return out


def _field_name(n: str) -> str:
    return re.sub(r"\s+", "_", n) or "field"


def pcd_bytes(arr: np.ndarray) -> bytes:
    """A binary PCD (v0.7) file of cloud ``arr`` (organized clouds keep width and height)."""
    p = packed(arr)
    height, width = (p.shape[0], p.shape[1]) if p.ndim == 2 else (1, p.size)
    names, sizes, types, counts = [], [], [], []
    for n in p.dtype.names or ():
        ft = p.dtype[n]
        base = ft.base if ft.subdtype is not None else ft
        names.append(_field_name(n))
        sizes.append(str(base.itemsize))
        types.append(_PCD_TYPES[base.kind])
        counts.append(str(int(np.prod(ft.shape)) if ft.shape else 1))
    header = (
        "# .PCD v0.7 - Point Cloud Data file format\nVERSION 0.7\n"
        f"FIELDS {' '.join(names)}\nSIZE {' '.join(sizes)}\nTYPE {' '.join(types)}\nCOUNT {' '.join(counts)}\n"
        f"WIDTH {width}\nHEIGHT {height}\nVIEWPOINT 0 0 0 1 0 0 0\nPOINTS {width * height}\nDATA binary\n"
    )
    return header.encode("ascii") + np.ascontiguousarray(p).tobytes()


def ply_bytes(arr: np.ndarray) -> bytes:
    """A binary little-endian PLY file of cloud ``arr`` (one ``vertex`` element; a field with
    a count above 1 becomes ``name_0``, ``name_1``...)."""
    p = packed(arr).reshape(-1)
    props = []
    for n in p.dtype.names or ():
        ft = p.dtype[n]
        base = ft.base if ft.subdtype is not None else ft
        code = f"{base.kind}{base.itemsize}"
        count = int(np.prod(ft.shape)) if ft.shape else 1
        for i in range(count):
            props.append(f"property {_PLY_TYPES[code]} {_field_name(n)}{'' if count == 1 else f'_{i}'}")
    header = "ply\nformat binary_little_endian 1.0\ncomment written by polybag\n"
    header += f"element vertex {p.size}\n" + "\n".join(props) + "\nend_header\n"
    return header.encode("ascii") + np.ascontiguousarray(p).tobytes()


def cloud_file_bytes(arr: np.ndarray, fmt: str) -> bytes:
    """What a cloud's file holds in ``fmt`` (pcd, ply, npy)."""
    if fmt == "pcd":
        return pcd_bytes(arr)
    if fmt == "ply":
        return ply_bytes(arr)
    return npy_bytes(arr)


def npy_bytes(arr: np.ndarray) -> bytes:
    """``arr`` as a ``.npy`` file (C order, no pickles)."""
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(arr), allow_pickle=False)
    return buf.getvalue()


def export_pointclouds(
    src: Input,
    output_dir: str | os.PathLike[str],
    *,
    topics: str | Sequence[str] | None = None,
    format: str = "pcd",  # noqa: A002
    every: int = 1,
    start: int | str | None = None,
    end: int | str | None = None,
    progress: bool | None = False,
    overwrite: bool = False,
) -> MediaResult:
    """Write every ``every``-th ``sensor_msgs/PointCloud2`` of the cloud topics in
    ``topics`` (default: all) into ``output_dir``, one ``pcd``/``ply``/``npy`` file each."""
    return _export_files(_CLOUD_FILES, src, output_dir, topics, format, every, start, end, progress, overwrite)


def _cloud_files(
    reader: Any, names: list[str], window: TimeWindow, every: int, fmt: str, result: MediaResult
) -> Iterator[_FileItem]:
    """The cloud files of :func:`export_pointclouds` (a cloud that cannot be read or encoded
    is named by its topic and log time)."""
    msgs = _every_nth_of(reader, names, CLOUD_TYPES, window, every)  # (the log is asked here, not when the first is read)
    layout = CloudReader()
    return ((m, functools.partial(_cloud_file_bytes, m, layout, fmt), f"{m.channel.topic} at {m.log_time}") for m in msgs)


def _cloud_file_bytes(m: Message, layout: CloudReader, fmt: str) -> bytes:
    """The file of cloud message ``m`` in ``fmt`` (read through ``layout``)."""
    return cloud_file_bytes(read_cloud(m, layout=layout), fmt)


_IMAGE_FILES = _FileExport("images", "image", IMAGE_FORMATS, IMAGE_TYPES, "image", _image_files)
_CLOUD_FILES = _FileExport("pointclouds", "point cloud", CLOUD_FORMATS, CLOUD_TYPES, "PointCloud2", _cloud_files)
