"""plot: the plotted series equal the decoded values; PNG written; --html needs plotly."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

import polybag
from ops_helpers import CORPORA
from polybag import ops
from polybag.cli import main
from polybag.ops.plot import collect

pytest.importorskip("matplotlib")
EXAMPLE = CORPORA / "rosbag" / "foxglove-rosbag" / "example.bag"
ULOG = CORPORA / "ulog" / "sample_log_small.ulg"


def test_series_equal_decoded_values() -> None:
    with polybag.open(EXAMPLE) as r:
        series = collect(r, ["/turtle1/pose.x", "/turtle2/pose.theta"])
        t0 = r.summary.start_time
        want = {}
        for topic, fld in (("/turtle1/pose", "x"), ("/turtle2/pose", "theta")):
            ms = list(r.messages(topics=[topic]))
            want[(topic, fld)] = (
                np.array([(m.log_time - t0) / 1e9 for m in ms]),
                np.array([getattr(m.decode(), fld) for m in ms]),
            )
    assert [(s[0], s[1]) for s in series] == list(want)
    for topic, fld, t, v in series:
        wt, wv = want[(topic, fld)]
        assert np.allclose(t, wt) and np.allclose(v, wv) and len(v) > 100


def test_ulog_series_against_pyulog() -> None:
    pyulog = pytest.importorskip("pyulog")
    with polybag.open(ULOG) as r:
        ((topic, fld, t, v),) = collect(r, ["vehicle_attitude.q[0]"])
    u = pyulog.ULog(str(ULOG), ["vehicle_attitude"])
    d = [x for x in u.data_list if x.multi_id == 0][0].data
    assert (topic, fld) == ("vehicle_attitude", "q[0]")
    assert np.array_equal(v, d["q[0]"].astype(float))
    assert np.allclose(t, d["timestamp"] / 1e6 - _start_s(), atol=1e-9)


def _start_s() -> float:
    with polybag.open(ULOG) as r:
        return (r.summary.start_time or 0) / 1e9


def test_plot_png_and_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "p.png"
    res = ops.plot(EXAMPLE, ["/turtle1/pose.x", "/turtle1/pose.y", "/turtle1/cmd_vel.linear.x"], out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [s.points for s in res.series][:2] == [1344, 1344] and res.series[2].points > 0
    assert main(["plot", str(ULOG), "sensor_combined", "-o", str(tmp_path / "u.png"), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    names = [s["field"] for s in d["series"]]
    assert "gyro_rad[0]" in names and "timestamp" not in names
    # unknown topic (a selection of nothing: exit 1, issue 27) / field (the same, issue 32): clean errors, no file
    assert main(["plot", str(EXAMPLE), "/nope.x", "-o", str(tmp_path / "n.png")]) == 1
    assert main(["plot", str(EXAMPLE), "/turtle1/pose.nope", "-o", str(tmp_path / "n.png")]) == 1
    assert not (tmp_path / "n.png").exists()


def test_html_needs_plotly(tmp_path: Path) -> None:
    out = tmp_path / "p.html"
    if importlib.util.find_spec("plotly") is None:
        with pytest.raises(polybag.UnsupportedError, match="plotly"):
            ops.plot(EXAMPLE, ["/turtle1/pose.x"], out, html=True)
        assert not out.exists()
    else:
        ops.plot(EXAMPLE, ["/turtle1/pose.x"], out, html=True)
        assert b"plotly" in out.read_bytes()
