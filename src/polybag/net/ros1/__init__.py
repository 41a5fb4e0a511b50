"""A pure-Python ROS 1 node: master XML-RPC client, slave API server and TCPROS, no rospy.

>>> from polybag.net.ros1 import Node
>>> with Node("/listener", anonymous=True) as node:          # doctest: +SKIP
...     node.subscribe("/chatter", lambda m: print(m.data))

Everything raised for a bad peer, a lying length or an unreachable master is a
:class:`polybag.errors.PolybagError`: :class:`RosGraphError` (the graph: master, peers) and
:class:`TcprosError` (the bytes of one TCPROS connection; only that connection is dropped).
"""

from __future__ import annotations

import time

from polybag.net.ros1.errors import RosGraphError, TcprosError


def now_ns() -> int:
    """Wall-clock time in ns (what ROS stamps received messages with)."""
    return time.time_ns()


from polybag.net.ros1.master import MasterClient  # noqa: E402
from polybag.net.ros1.node import Node, Publisher, Ros1Message, Subscription  # noqa: E402
from polybag.net.ros1.tcpros import (  # noqa: E402
    DEFAULT_MAX_HEADER,
    DEFAULT_MAX_MESSAGE,
    BufferedSocket,
    decode_header,
    encode_header,
    frame,
    read_header,
    read_message,
)

__all__ = [
    "BufferedSocket",
    "DEFAULT_MAX_HEADER",
    "DEFAULT_MAX_MESSAGE",
    "MasterClient",
    "Node",
    "Publisher",
    "Ros1Message",
    "RosGraphError",
    "Subscription",
    "TcprosError",
    "decode_header",
    "encode_header",
    "frame",
    "now_ns",
    "read_header",
    "read_message",
]
