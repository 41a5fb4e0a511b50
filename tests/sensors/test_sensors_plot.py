"""``polybag plot`` with an image topic: a strip of thumbnails spread over the topic,
under the lines of the numeric fields (or alone)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import sensor_logs as sl
from PIL import Image

from polybag import ops
from polybag.cli import main
from polybag.ops.plot import THUMBNAILS, image_specs, thumbnails

pytest.importorskip("matplotlib")
NS = 1_000_000_000


@pytest.fixture
def log(tmp_path: Path) -> Path:
    items = []
    for i in range(20):
        a = np.full((48, 64, 3), i * 12, np.uint8)
        items.append(("/cam", sl.image("ros1", a.tobytes(), 48, 64, "rgb8", 192), NS + i * NS // 10))
        items.append(
            (
                "/range",
                sl.T(sl.TS1, "sensor_msgs/Range")(
                    header=sl.header("ros1"),
                    radiation_type=0,
                    field_of_view=0.1,
                    min_range=0.0,
                    max_range=5.0,
                    range=i / 10,
                ),
                NS + i * NS // 10,
            )
        )
    return sl.write_log(tmp_path / "plot.bag", "ros1", items)


def test_thumbnails_are_spread_over_the_topic(log: Path) -> None:
    import polybag

    with polybag.open(log) as r:
        assert image_specs(r, ["/cam", "/range.range", "/range"]) == ["/cam"]
        thumbs = thumbnails(r, "/cam")
    assert len(thumbs) == THUMBNAILS
    times = [t for t, _ in thumbs]
    assert times[0] == 0.0 and times[-1] == pytest.approx(1.9)
    assert times == sorted(times)
    first, last = thumbs[0][1], thumbs[-1][1]
    assert first.shape == (48, 64, 3) and int(first[0, 0, 0]) == 0 and int(last[0, 0, 0]) == 19 * 12


def test_plot_with_a_strip(tmp_path: Path, log: Path) -> None:
    out = tmp_path / "p.png"
    res = ops.plot(log, ["/range.range", "/cam"], out)
    assert [(s.topic, s.field, s.points) for s in res.series] == [
        ("/range", "range", 20),
        ("/cam", "[thumbnails]", THUMBNAILS),
    ]
    with Image.open(out) as im:
        assert im.size[1] > 500  # the lines and a strip under them
    assert main(["plot", str(log), "/cam", "-o", str(tmp_path / "only.png")]) == 0
    assert (tmp_path / "only.png").exists()
