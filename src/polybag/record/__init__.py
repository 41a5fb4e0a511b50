"""``polybag record``: rosbag's recorder (options, the in-process core, the live ROS 1 source)."""

from __future__ import annotations

from polybag.record.options import RecordOptions
from polybag.record.recorder import Recorder, TopicStats

__all__ = ["RecordOptions", "Recorder", "TopicStats"]
