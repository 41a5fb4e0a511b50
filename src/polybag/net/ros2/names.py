"""ROS 2 names on DDS: topic names (``rt/`` prefix) and type names (``pkg::msg::dds_::Type_``).

rmw implementations put a ROS 2 topic ``/ns/chatter`` on the DDS topic ``rt/ns/chatter``
(services use ``rq/``/``rr/``, which are not topics) and the type ``std_msgs/msg/String`` on
the DDS type ``std_msgs::msg::dds_::String_``.
"""

from __future__ import annotations

import re

TOPIC_PREFIX = "rt/"
_TYPE_PART = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

#: the longest DDS topic or type name taken from a peer (rmw's limit is 255)
MAX_NAME = 255
# (the characters of a ROS 2 name once expanded: rcl refuses any other)
_ROS_NAME = re.compile(r"/[A-Za-z0-9_/]*\Z")

# rosidl's rules for what a type description may name (rosidl_adapter/parser.py)
_FIELD = re.compile(r"[a-z]([a-z0-9_]*[a-z0-9])?\Z")
_CONSTANT = re.compile(r"[A-Z]([A-Z0-9_]*[A-Z0-9])?\Z")
_PACKAGE = _FIELD
_MESSAGE = re.compile(r"[A-Z][A-Za-z0-9]*\Z")
# (services' and actions' generated types: Foo_Request, Fib_SendGoal_Request, Fib_FeedbackMessage)
_GENERATED = re.compile(r"[A-Z][A-Za-z0-9]*(_[A-Z][A-Za-z0-9]*){1,2}\Z")


def field_name_ok(name: str) -> bool:
    """Whether ``name`` is a field name rosidl accepts (``^[a-z]([a-z0-9_]*[a-z0-9])?$``,
    no ``__``)."""
    return len(name) <= MAX_NAME and bool(_FIELD.match(name)) and "__" not in name


def constant_name_ok(name: str) -> bool:
    """Whether ``name`` is a constant name rosidl accepts (``^[A-Z]([A-Z0-9_]*[A-Z0-9])?$``,
    no ``__``)."""
    return len(name) <= MAX_NAME and bool(_CONSTANT.match(name)) and "__" not in name


def type_name_ok(name: str) -> bool:
    """Whether ``name`` is a full ROS 2 message type name by rosidl's rules: ``pkg/msg/Name``
    (package: a field-like name without ``__``; ``Name``: ``^[A-Z][A-Za-z0-9]*$``), or a
    service's or action's generated message (``pkg/srv/Name_Request``)."""
    if len(name) > MAX_NAME:
        return False
    parts = name.split("/")
    if len(parts) != 3 or not _PACKAGE.match(parts[0]) or "__" in parts[0]:
        return False
    if parts[1] == "msg":
        return bool(_MESSAGE.match(parts[2]))
    return parts[1] in ("srv", "action") and bool(_MESSAGE.match(parts[2]) or _GENERATED.match(parts[2]))


def ros_topic(dds_topic: str) -> str | None:
    """``rt/ns/chatter`` -> ``/ns/chatter``; None for DDS topics that are not ROS 2 topics
    (another prefix, nothing after it, longer than :data:`MAX_NAME`, or characters a ROS 2
    name cannot hold: only letters, digits, ``_`` and ``/``)."""
    if not dds_topic.startswith(TOPIC_PREFIX) or not len(TOPIC_PREFIX) < len(dds_topic) <= MAX_NAME:
        return None
    name = "/" + dds_topic[len(TOPIC_PREFIX) :].lstrip("/")
    return name if len(name) > 1 and _ROS_NAME.match(name) else None


def type_service_node(dds_topic: str, dds_type: str) -> str | None:
    """``rr/ns/talker/get_type_descriptionReply`` (a node's type description reply writer)
    -> ``/ns/talker``; None for any other DDS topic."""
    suffix = "/get_type_descriptionReply"
    if (
        not dds_topic.startswith("rr/")
        or not dds_topic.endswith(suffix)
        or dds_type != "type_description_interfaces::srv::dds_::GetTypeDescription_Response_"
    ):
        return None
    node = dds_topic[len("rr") : -len(suffix)]
    return node if 1 < len(node) <= MAX_NAME and _ROS_NAME.match(node) else None


def hidden(topic: str) -> bool:
    """Whether a ROS 2 name is hidden (a part of it starts with ``_``, as rclpy and
    ``ros2 bag record`` decide: ``/ns/_private``, ``/fib/_action/status``, ``/srv/_service_event``)."""
    return any(part.startswith("_") for part in topic.split("/") if part)


def dds_topic(ros_topic: str) -> str:
    """``/ns/chatter`` (or ``ns/chatter``) -> ``rt/ns/chatter``."""
    return TOPIC_PREFIX + ros_topic.lstrip("/")


def ros_type(dds_type: str) -> str | None:
    """``std_msgs::msg::dds_::String_`` -> ``std_msgs/msg/String``; None when the name does
    not follow the ROS 2 convention (the topic was not made by an rmw)."""
    parts = dds_type.split("::")
    if (
        len(dds_type) > MAX_NAME
        or len(parts) != 4
        or parts[2] != "dds_"
        or not parts[3].endswith("_")
        or len(parts[3]) < 2
    ):
        return None
    pkg, kind, name = parts[0], parts[1], parts[3][:-1]
    if not all(_TYPE_PART.match(p) for p in (pkg, kind, name)):
        return None
    return f"{pkg}/{kind}/{name}"


def dds_type(ros_type: str) -> str:
    """``std_msgs/msg/String`` (or ``std_msgs/String``) -> ``std_msgs::msg::dds_::String_``."""
    parts = ros_type.strip("/").split("/")
    if len(parts) == 2:
        parts = [parts[0], "msg", parts[1]]
    if len(parts) != 3 or not all(_TYPE_PART.match(p) for p in parts):
        from polybag.errors import UsageError

        raise UsageError(f"{ros_type!r} is not a ROS 2 type name (pkg/msg/Type)")
    return f"{parts[0]}::{parts[1]}::dds_::{parts[2]}_"


def type_hash(user_data: bytes | None) -> str:
    """The ``RIHS01_...`` type hash an rmw (Iron and later) puts in USER_DATA
    (``typehash=RIHS01_<hex>;``), or ``""``."""
    if not user_data:
        return ""
    try:
        text = bytes(user_data).decode("ascii", "replace")
    except (TypeError, ValueError):
        return ""
    for item in text.split(";"):
        key, _, value = item.partition("=")
        if key.strip() == "typehash" and re.fullmatch(r"RIHS\d\d_[0-9a-f]{64}", value.strip()):
            return value.strip()
    return ""
