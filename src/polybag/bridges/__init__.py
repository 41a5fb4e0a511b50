"""Message bridges: carry a channel and its payloads from one message encoding to another.

The layer between the codecs and the operations::

    codecs, model, writer, errors     what bridges import (never formats, ops, record, play, cli)
    bridges                           this package
    ops, record, play                 use it through the names below

A bridge maps a source channel to a channel of its target encoding (topic, encoding,
schema, metadata) plus a payload transform (:mod:`.protocol`).  Bridges are registered by
(source encoding, target encoding) and chained (:mod:`.registry`), so every conversion path
exists once: ULog -> ROS 1 (:mod:`.ulog_ros1`), ROS 1 <-> ROS 2 (:mod:`.ros1_ros2`), ROS 1
-> ULog (:mod:`.ros1_ulog`); ULog -> ROS 1 -> ROS 2 and ROS 2 -> ROS 1 -> ULog are chains.
:class:`ChannelMap` carries every channel of an output through them into the encodings its
writer holds (:attr:`polybag.writer.Writer.holds`).
"""

from __future__ import annotations

from polybag.bridges.channels import ChannelMap, check_profile, target_ros
from polybag.bridges.protocol import (
    Bridge,
    BridgedChannel,
    Conversion,
    Payload,
    TimedTransform,
    Transform,
    needs_log_time,
    then,
)
from polybag.bridges.registry import BRIDGES, BridgeSpec, bridge_chain
from polybag.bridges.ros1_ros2 import LATCHED_QOS, Mapped, ros1_channel_to_ros2, ros2_channel_to_ros1
from polybag.bridges.ros1_ulog import ros1_channel_to_ulog
from polybag.bridges.ulog_ros1 import ulog_channel_to_ros1

__all__ = [
    "BRIDGES",
    "LATCHED_QOS",
    "Bridge",
    "BridgeSpec",
    "BridgedChannel",
    "ChannelMap",
    "Conversion",
    "Mapped",
    "Payload",
    "TimedTransform",
    "Transform",
    "bridge_chain",
    "check_profile",
    "needs_log_time",
    "ros1_channel_to_ros2",
    "ros1_channel_to_ulog",
    "ros2_channel_to_ros1",
    "target_ros",
    "then",
    "ulog_channel_to_ros1",
]
