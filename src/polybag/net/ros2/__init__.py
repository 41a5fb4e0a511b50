"""The live ROS 2 graph with no ROS 2 install: DDS through Cyclone DDS (``polybag[ros2]``).

* :mod:`~polybag.net.ros2.names`: ROS 2 topic and type names on DDS (``rt/``, ``pkg::msg::dds_::Type_``).
* :mod:`~polybag.net.ros2.qos`: offered QoS as rosbag2's ``offered_qos_profiles``, the QoS
  a recorder requests, a recorded profile as a writer's QoS.
* :mod:`~polybag.net.ros2.graph`: :class:`Graph` (a participant in ``ROS_DOMAIN_ID`` with
  the ROS 2 discovery range, the publications of ``DCPSPublication``), raw CDR readers and
  writers.

>>> from polybag.net.ros2 import Graph                       # doctest: +SKIP
>>> g = Graph(); g.wait_for(lambda: "/chatter" in g.topics(), 5)

Failures are :class:`Ros2GraphError` (a :class:`polybag.errors.PolybagError`).
"""

from __future__ import annotations

from polybag.net.ros2.graph import (
    Graph,
    Publication,
    RawReader,
    RawWriter,
    Ros2GraphError,
    cyclone_config,
    discovery_range,
    domain_id,
)
from polybag.net.ros2.names import dds_topic, dds_type, ros_topic, ros_type, type_hash

__all__ = [
    "Graph",
    "Publication",
    "RawReader",
    "RawWriter",
    "Ros2GraphError",
    "cyclone_config",
    "dds_topic",
    "dds_type",
    "discovery_range",
    "domain_id",
    "ros_topic",
    "ros_type",
    "type_hash",
]
