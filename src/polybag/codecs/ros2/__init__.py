"""ROS 2 message definitions: the bundled common interfaces and a workspace's own.

Files that carry no definition text (rosbag2 bags written before Iron store a type name and
no ``message_definitions``; some MCAP writers leave a ``ros2msg`` schema empty) are decoded
from the known types: the bundled ROS 2 Jazzy interface packages (``msgs/pkg/msg/Type.msg``:
builtin_interfaces, std_msgs, geometry_msgs, sensor_msgs, nav_msgs, tf2_msgs,
diagnostic_msgs, visualization_msgs, rcl_interfaces, action_msgs, shape_msgs,
trajectory_msgs, stereo_msgs, unique_identifier_msgs, rosgraph_msgs, service_msgs,
lifecycle_msgs, statistics_msgs, actionlib_msgs) plus the folders added with
:func:`add_types` (``pkg/msg/Name.msg`` or ``pkg/msg/Name.idl`` files, ``pkg/srv/Name.srv`` for a
service's ``Name_Request``, ``Name_Response`` and ``Name_Event``; the command line's
``--types DIR``).  Added types come before the bundled ones.

The ROS 2 type system, bottom up: :mod:`~polybag.codecs.ros2.sections` (the sections of a
definition text, service types), :mod:`~polybag.codecs.ros2.idl` (``.idl`` text),
:mod:`~polybag.codecs.ros2.store` (the known types), :mod:`~polybag.codecs.ros2.definitions`
(a schema parsed, a known type's full text), :mod:`~polybag.codecs.ros2.typehash` (REP 2011
hashes).  The CDR codec (:mod:`polybag.codecs.cdr`) sits above it; this package re-exports
its public names, and none of its modules imports the package itself.

:func:`definition_for` gives a known type's full ``ros2msg`` text (the main type, then one
``MSG: pkg/msg/Type`` section per dependency), as MCAP and rosbag2 writers store it.
"""

from __future__ import annotations

from polybag.codecs.ros2.definitions import (
    check_definition,
    definition_for,
    full_definition,
    render_ros2,
    ros2_typeset,
    undefined_type,
)
from polybag.codecs.ros2.idl import parse_idl
from polybag.codecs.ros2.sections import service_of, service_sections, service_types
from polybag.codecs.ros2.store import MSGS_DIR, add_types, bundled, full_name, known_types
from polybag.codecs.ros2.typehash import type_hash, type_hash_of

__all__ = [
    "MSGS_DIR",
    "add_types",
    "bundled",
    "check_definition",
    "definition_for",
    "full_definition",
    "full_name",
    "known_types",
    "parse_idl",
    "render_ros2",
    "ros2_typeset",
    "service_of",
    "service_sections",
    "service_types",
    "type_hash",
    "type_hash_of",
    "undefined_type",
]
