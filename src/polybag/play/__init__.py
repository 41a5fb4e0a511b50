"""Playback of logs, like ``rosbag play``: :class:`Player` with in-process and ROS 1 sinks."""

from polybag.play.player import CallbackSink, Clock, MonotonicClock, Player, PlayOptions, PlayStats, Sink
from polybag.play.ros1_sink import Ros1Sink

__all__ = ["CallbackSink", "Clock", "MonotonicClock", "PlayOptions", "PlayStats", "Player", "Ros1Sink", "Sink"]
