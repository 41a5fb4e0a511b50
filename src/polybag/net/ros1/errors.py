"""The errors of the ROS 1 node (re-exported by :mod:`polybag.net.ros1`), in a module of
their own so the node's modules import them without importing the package."""

from __future__ import annotations

from polybag.errors import FormatError, PolybagError


class RosGraphError(PolybagError):
    """The ROS graph failed us: the master is unreachable or answered an error, a peer refused."""


class TcprosError(RosGraphError, FormatError):
    """The bytes of one TCPROS connection are malformed (bad header, lying length, early EOF).

    ``path`` names the peer (``host:port`` or the topic), ``offset`` the byte position in the stream.
    """
