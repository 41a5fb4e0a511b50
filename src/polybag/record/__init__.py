"""``polybag record``: rosbag's recorder (options, the in-process core, the live ROS 1 source,
several recorders on one node)."""

from __future__ import annotations

from polybag.record.group import RecorderGroup, load_config
from polybag.record.items import TopicStats
from polybag.record.options import RecorderOptions, RecordOptions
from polybag.record.recorder import Recorder

__all__ = ["RecordOptions", "Recorder", "RecorderGroup", "RecorderOptions", "TopicStats", "load_config"]
