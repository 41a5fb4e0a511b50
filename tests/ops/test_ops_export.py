"""``polybag export``: one csv / parquet / jsonl table per topic."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

import polybag
from polybag.cli import main

CORPORA = Path(__file__).resolve().parents[2].parent / "shared" / "corpora"
BAG = CORPORA / "rosbag" / "foxglove-rosbag" / "example.bag"


def test_export_csv_matches_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(BAG), "--topics", "/turtle1/.*", "-o", str(tmp_path)]) == 0
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["turtle1.cmd_vel.csv", "turtle1.color_sensor.csv", "turtle1.pose.csv"]
    with (tmp_path / "turtle1.pose.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    with polybag.open(str(BAG)) as r:
        cols = r.topic_columns("/turtle1/pose")
    assert len(rows) == len(cols["log_time"]) == 1344
    assert [int(x["log_time"]) for x in rows] == cols["log_time"].tolist()
    assert [float(x["x"]) for x in rows] == cols["x"].tolist()
    assert "turtle1.pose.csv" in capsys.readouterr().out


def test_export_parquet_and_jsonl(tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    mcap = CORPORA / "mcap-samples" / "rosbag2" / "cdr_test" / "cdr_test_0.mcap"
    assert main(["export", str(mcap), "--format", "parquet", "--layout", "flat", "-o", str(tmp_path / "pq")]) == 0
    table = pq.read_table(str(tmp_path / "pq" / "test_topic.parquet"))
    with polybag.open(str(mcap)) as r:
        cols = r.topic_columns("/test_topic")
    assert table.column("int32_value").to_pylist() == cols["int32_value"].tolist()
    assert main(["export", str(BAG), "--topics", "/tf", "--format", "jsonl", "-o", str(tmp_path / "j")]) == 0
    lines = (tmp_path / "j" / "tf.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    assert first["message"]["transforms"][0]["child_frame_id"] == "turtle2"
    with polybag.open(str(BAG)) as r:
        assert len(lines) == r.summary.topic_message_counts()["/tf"]


def test_export_time_window_and_no_match(tmp_path: Path) -> None:
    start, end = "1396293886.846735850", "1396293888.846735850"
    assert main(["export", str(BAG), "--topics", "/turtle1/color_sensor", "--start", start, "--end", end,
                 "-o", str(tmp_path)]) == 0
    with (tmp_path / "turtle1.color_sensor.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert rows and all(1396293886846735850 <= int(x["log_time"]) < 1396293888846735850 for x in rows)
    assert main(["export", str(BAG), "--topics", "/nothing", "-o", str(tmp_path / "x")]) == 1
