"""The README's aligned-table example runs as written (issue 31): its python block, after the
``aligned-example`` marker, against a bag, an MCAP and a rosbag2 directory with ``/imu`` and
``/gps`` (tests/align_helpers.py) and a real PX4 ULog from the corpora, each opened by the
names the README uses; every frame it makes is checked."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from align_helpers import write_log

ROOT = Path(__file__).resolve().parents[2]
ULOG = ROOT.parent / "shared" / "corpora" / "ulog" / "sample.ulg"


def _block() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(r"<!-- aligned-example[^>]*-->\s*```python\n(.*?)```", text, re.S)
    assert m is not None, "the README's aligned example is gone"
    return m.group(1)


def test_the_readme_aligned_example_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if not ULOG.is_file():
        pytest.skip(f"{ULOG} not in the corpora")
    write_log(tmp_path / "run.bag", "bag")
    write_log(tmp_path / "run.mcap", "mcap-ros2")
    write_log(tmp_path / "run_ros2", "rosbag2")
    shutil.copy(ULOG, tmp_path / "flight.ulg")
    ns: dict[str, object] = {}
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        exec(compile(_block(), "README.md (aligned example)", "exec"), ns)  # noqa: S102 - our own README
    finally:
        os.chdir(old)
    imu_gps, grid, att_pos = ns["imu_gps"], ns["grid"], ns["att_pos"]
    assert imu_gps.index.name == "log_time" and len(imu_gps) > 0  # type: ignore[attr-defined]
    assert imu_gps["/gps.latitude"].notna().any()  # type: ignore[index]
    assert list(grid.index[:2]) == [grid.index[0], grid.index[0] + 10_000_000]  # type: ignore[attr-defined]
    assert att_pos.index.name == "timestamp"  # type: ignore[attr-defined]
    assert att_pos["vehicle_local_position.x"].notna().any()  # type: ignore[index]
    assert "vehicle_attitude.q[0]" in capsys.readouterr().out
