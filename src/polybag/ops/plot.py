"""``plot``: fields of one or more topics against time, to a PNG (matplotlib) or HTML (plotly).

A field is named ``TOPIC.FIELD`` with the flattened column names the codecs use
(``/odom.pose.pose.position.x``, ``/imu.linear_acceleration.z``, ``vehicle_attitude.q[0]``);
a bare ``TOPIC`` plots every numeric field of that topic.  Values come from
``reader.topic_columns`` (whole-topic decoding), falling back to decoding message by message.
Time on x is seconds from the log's start; one line per field; all fields on one figure.
A bare image topic (``sensor_msgs/Image`` or ``CompressedImage``) adds a strip of
``THUMBNAILS`` frames spread evenly over the topic, under the lines (PNG only).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from polybag.errors import EmptySelectionError, PolybagError, UnsupportedError, UsageError, name_listing
from polybag.formats import registry
from polybag.ops.inputs import input_name, open_input
from polybag.ops.options import Input
from polybag.ops.outputs import check_output, placed
from polybag.ops.results import OpResult, make_progress
from polybag.reader import Reader

_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


@dataclass
class Series:
    topic: str
    field: str
    points: int = 0


@dataclass
class PlotResult(OpResult):
    input: str = ""
    output: str = ""
    series: list[Series] = field(default_factory=list)


class NoFieldError(EmptySelectionError):
    """A ``TOPIC.FIELD`` whose topic has no such field: the user's selection, as a topic that
    is not there (the CLI exits 1); the message lists the fields there are."""

    def __init__(self, topic: str, name: str, fields: Sequence[str], close: Sequence[str] = ()) -> None:
        PolybagError.__init__(
            self,
            f"{topic}: no field {name!r}"
            + (f" (did you mean {', '.join(close[:5])}?)" if close else "")
            + f" ({name_listing(fields, 'fields', 'the topic', most=20, width=400)})",
        )
        self.selection = f"{topic}.{name}"
        self.topics = [topic]
        self.fields = list(fields)


def _fields_of(obj: Any) -> list[str]:
    """The field names of a decoded message (a dict's keys, a ROS message's fields)."""
    from polybag.codecs.serde.messages import RosMessage

    if isinstance(obj, dict):
        return [str(k) for k in obj]
    if isinstance(obj, RosMessage):
        return list(type(obj).__fieldnames__)
    return [k for k in vars(obj) if not k.startswith("_")] if hasattr(obj, "__dict__") else []


def _missing_field(obj: Any, topic: str, path: str) -> NoFieldError | None:
    """A :class:`NoFieldError` when ``path`` names no field of the decoded ``obj`` (the
    fields listed are those of the level where the walk stopped), else None."""
    done = ""
    for m in _PART.finditer(path):
        key = m.group(1)
        if key is not None:
            has = key in obj if isinstance(obj, dict) else key in _fields_of(obj)
            if not has:
                names = [f"{done}{f}" for f in _fields_of(obj)]
                return NoFieldError(topic, path, names)
            obj = obj[key] if isinstance(obj, dict) else getattr(obj, key)
            done += key + "."
        else:
            try:
                obj = obj[int(m.group(2))]
            except (IndexError, KeyError, TypeError):
                return None
            done = done[:-1] + m.group(0) + "." if done else m.group(0) + "."
    return None


def split_spec(spec: str, topics: Sequence[str]) -> tuple[str, str]:
    """``TOPIC.FIELD`` -> (topic, field) using the longest topic that prefixes the spec."""
    best: tuple[str, str] | None = None
    for t in topics:
        for cand in {t, t.lstrip("/")}:
            if spec == cand:
                rest = ""
            elif spec.startswith(cand + "."):
                rest = spec[len(cand) + 1 :]
            else:
                continue
            if best is None or len(t) > len(best[0]):
                best = (t, rest)
    if best is None:
        raise EmptySelectionError(spec, topics, verb="prefixes")
    return best


def _walk(obj: Any, path: str) -> Any:
    for m in _PART.finditer(path):
        if m.group(1) is not None:
            key = m.group(1)
            obj = obj[key] if isinstance(obj, dict) else getattr(obj, key)
        else:
            obj = obj[int(m.group(2))]
    return obj


def _columns(reader: Reader, topic: str) -> dict[str, Any] | None:
    try:
        cols = reader.topic_columns(topic)
    except (ImportError, NotImplementedError, UnsupportedError, AttributeError, TypeError):
        return None
    return dict(cols)


def _numeric(arr: Any) -> bool:
    import numpy as np

    a = np.asarray(arr)
    return a.ndim == 1 and (np.issubdtype(a.dtype, np.number) or a.dtype == np.bool_)


def collect(reader: Reader, specs: Sequence[str], bar: Any = None) -> list[tuple[str, str, Any, Any]]:
    """``[(topic, field, t_seconds, values)]`` for every spec (``bar.update(n)`` per topic read)."""
    import numpy as np

    summary = reader.summary
    topics = sorted({c.topic for c in summary.channels.values()})
    t0 = summary.start_time or 0
    wanted: dict[str, list[str]] = {}
    for spec in specs:
        topic, fld = split_spec(spec, topics)
        wanted.setdefault(topic, []).append(fld)
    out = []
    counts = summary.message_counts or {}
    fmt = registry.lookup(reader.format)
    instance_tables = fmt is not None and fmt.instance_tables
    for topic, fields in wanted.items():
        if bar is not None:
            bar.update(sum(int(counts.get(c.id, 0)) for c in summary.channels.values() if c.topic == topic))
        cols = _columns(reader, topic)
        times = None
        ulog = instance_tables  # a ULog's columns: its own "timestamp" in us
        if cols is not None:
            if "log_time" in cols:
                times = np.asarray(cols["log_time"], dtype=np.int64)
            elif ulog and "timestamp" in cols:
                times = np.asarray(cols["timestamp"], dtype=np.int64) * 1000
        if cols is not None and times is not None:
            t = (times - t0) / 1e9
            skip = {"log_time", "timestamp"} if ulog else {"log_time"}
            for fld in fields:
                names = [fld] if fld else [k for k in cols if k not in skip and _numeric(cols[k])]
                for name in names:
                    if name not in cols:
                        close = [k for k in cols if k.startswith(name)]
                        raise NoFieldError(topic, name, [k for k in cols if k not in skip], close)
                    if not _numeric(cols[name]):
                        raise PolybagError(f"{topic}.{name}: not a numeric field")
                    out.append((topic, name, t, np.asarray(cols[name], dtype=float)))
            continue
        # message by message
        stamps: list[int] = []
        values: dict[str, list[float]] = {f: [] for f in fields}
        for m, obj in reader.decoded_messages(topics=[topic]):
            stamps.append(m.log_time)
            for fld in fields:
                if not fld:
                    raise PolybagError(f"{topic}: name a field (TOPIC.FIELD)")
                try:
                    values[fld].append(float(_walk(obj, fld)))
                except (KeyError, AttributeError, IndexError, TypeError, ValueError) as e:
                    missing = _missing_field(obj, topic, fld)
                    if missing is not None:
                        raise missing from None
                    raise PolybagError(f"{topic}.{fld}: cannot read the field: {e}") from None
        t = (np.asarray(stamps, dtype=np.int64) - t0) / 1e9
        for fld in fields:
            out.append((topic, fld, t, np.asarray(values[fld], dtype=float)))
    return out


# --- thumbnails of image topics ------------------------------------------------------------
#: frames in an image topic's thumbnail strip
THUMBNAILS = 8
#: widest thumbnail, in pixels (frames are shrunk by whole steps to fit)
THUMB_WIDTH = 160


def image_specs(reader: Reader, specs: Sequence[str]) -> list[str]:
    """The specs that are a bare image topic (their thumbnails are drawn, not lines)."""
    from polybag.sensors.read import IMAGE_TYPES, channel_type

    summary = reader.summary
    topics = sorted({c.topic for c in summary.channels.values()})
    kinds = {c.topic: channel_type(c) for c in summary.channels.values()}
    out = []
    for spec in specs:
        topic, fld = split_spec(spec, topics)
        if not fld and kinds.get(topic) in IMAGE_TYPES:
            out.append(spec)
    return out


def thumbnails(reader: Reader, spec: str, count: int = THUMBNAILS) -> list[tuple[float, Any]]:
    """``[(seconds from the log start, small 8-bit frame)]``: ``count`` frames of image topic
    ``spec`` spread evenly over its messages (a frame that cannot be read is left out)."""
    import numpy as np

    from polybag.sensors.display import to_rgb8
    from polybag.sensors.image import encoding_info
    from polybag.sensors.read import FrameReader

    summary = reader.summary
    topic, _ = split_spec(spec, sorted({c.topic for c in summary.channels.values()}))
    counts = summary.message_counts or {}
    total = sum(int(counts.get(c.id, 0)) for c in summary.channels.values() if c.topic == topic)
    if total <= 0:
        total = sum(1 for _ in reader.messages(topics=[topic]))
    picks = set(np.unique(np.linspace(0, max(total - 1, 0), min(count, total)).round().astype(int)).tolist())
    t0 = summary.start_time or 0
    fr = FrameReader()
    out: list[tuple[float, Any]] = []
    for i, m in enumerate(reader.messages(topics=[topic])):
        if i not in picks:
            continue
        try:
            f = fr.read(m)
            small = to_rgb8(f.array, encoding_info(f.encoding))
        except PolybagError:
            continue
        step = max(1, -(-small.shape[1] // THUMB_WIDTH))
        out.append(((m.log_time - t0) / 1e9, np.ascontiguousarray(small[::step, ::step])))
    return out


def _draw_strips(fig: Any, grid: Any, first: int, strips: list[tuple[str, list[tuple[float, Any]]]]) -> None:
    """One row of ``grid`` per image topic from row ``first``: its thumbnails, timed."""
    for row, (spec, thumbs) in enumerate(strips, start=first):
        cells = grid[row].subgridspec(1, max(len(thumbs), 1), wspace=0.05)
        for j, (t, img) in enumerate(thumbs):
            ax = fig.add_subplot(cells[0, j])
            ax.imshow(img, cmap="gray" if img.ndim == 2 else None, vmin=0, vmax=255)
            ax.set_title((f"{spec}\n" if j == 0 else "") + f"{t:.1f} s", fontsize=7, loc="left" if j == 0 else "center")
            ax.axis("off")


def plot(
    src: Input,
    fields: Sequence[str],
    output: str | os.PathLike[str],
    *,
    html: bool = False,
    title: str | None = None,
    progress: bool | None = False,
    overwrite: bool = False,
) -> PlotResult:
    """Plot ``fields`` (``TOPIC.FIELD``) of ``src`` to ``output`` (PNG, or HTML with ``html``).

    An existing ``output`` is replaced only with ``overwrite`` (never the input); the image
    is written as ``output.active`` and renamed when complete.
    """
    if not fields:
        raise PolybagError("plot needs at least one TOPIC.FIELD")
    check_output(output, [src], overwrite)
    result = PlotResult(input=input_name(src), output=os.fspath(output))
    with open_input(src) as reader:
        summary = reader.summary
        topics = sorted({c.topic for c in summary.channels.values()})
        counts = summary.message_counts or {}
        chosen = {split_spec(f, topics)[0] for f in fields}
        total = sum(int(counts.get(c.id, 0)) for c in summary.channels.values() if c.topic in chosen)
        images = image_specs(reader, fields)
        with make_progress(total, f"plot {os.path.basename(result.input)}", progress) as bar:
            series = collect(reader, [f for f in fields if f not in images], bar)
        strips = [(spec, thumbnails(reader, spec)) for spec in images]
    title = title or os.path.basename(result.input)
    drawing = _Drawing(output, overwrite, title, series, strips)
    if html:
        _write_html(drawing, result)
    else:
        _write_image(drawing)
    for topic, fld, _t, v in series:
        result.series.append(Series(topic, fld, len(v)))
        result.messages = max(result.messages, len(v))
    for spec, thumbs in strips:
        result.series.append(Series(spec, "[thumbnails]", len(thumbs)))
    return result


@dataclass
class _Drawing:
    """What a plot draws (a title, lines, image strips) and where to."""

    output: str | os.PathLike[str]
    overwrite: bool
    title: str
    series: list[tuple[str, str, Any, Any]]  # (topic, field, t_seconds, values)
    strips: list[tuple[str, list[tuple[float, Any]]]]  # (image topic spec, thumbnails)


def _write_html(d: _Drawing, result: PlotResult) -> None:
    """The lines as a plotly HTML page (image strips are not drawn: a warning)."""
    output, overwrite, title, series, strips = d.output, d.overwrite, d.title, d.series, d.strips
    try:
        import plotly.graph_objects as go  # type: ignore[import-not-found]
    except ImportError:
        raise UnsupportedError("--html needs plotly: pip install plotly") from None
    fig = go.Figure()
    for topic, fld, t, v in series:
        fig.add_trace(go.Scatter(x=t, y=v, mode="lines", name=f"{topic}.{fld}"))
    fig.update_layout(title=title, xaxis_title="time [s]")
    if strips:
        result.warn("image thumbnails are drawn in PNG plots only, not --html")
    with placed(output, overwrite) as tmp:
        fig.write_html(tmp)


def _write_image(d: _Drawing) -> None:
    """The lines and the image strips under them as a matplotlib image (PNG, or the format
    of the output's extension)."""
    output, overwrite, title, series, strips = d.output, d.overwrite, d.title, d.series, d.strips
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UnsupportedError("plot needs matplotlib: pip install 'polybag[plot]'") from None
    lines = bool(series) or not strips
    rows = [3.5] * lines + [1.6] * len(strips)
    fig = plt.figure(figsize=(10, sum(rows) + 1), dpi=100)
    grid = fig.add_gridspec(len(rows), 1, height_ratios=rows)
    if lines:
        ax = fig.add_subplot(grid[0])
        for topic, fld, t, v in series:
            ax.plot(t, v, label=f"{topic}.{fld}", linewidth=1)
        ax.set_xlabel("time since log start [s]")
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        if series:
            ax.legend(loc="best", fontsize="small")
    else:
        fig.suptitle(title)
    if strips:
        _draw_strips(fig, grid, int(lines), strips)
    fig.tight_layout()
    ext = os.path.splitext(os.fspath(output))[1].lstrip(".").lower() or "png"
    try:
        with placed(output, overwrite) as tmp:
            fig.savefig(tmp, format=ext)
    except ValueError as e:  # matplotlib: an extension it cannot write
        raise UsageError(f"{os.fspath(output)}: {e}") from None
    finally:
        plt.close(fig)
