"""What a node's parts ask of the node that owns them.

A published topic (:mod:`.publisher`), a subscription (:mod:`.subscriber`) and the slave
XML-RPC API (:mod:`.slave`) hold their node as a :class:`NodeInterface`, which
:class:`~polybag.net.ros1.node.Node` implements; so they never import ``node.py`` (not even
for typing) and ``node.py`` imports them, one way.
"""

from __future__ import annotations

import socket
from typing import Protocol, TypeVar

from polybag.net.ros1.master import MasterClient

#: a topic the node publishes (``publisher.PubTopic``)
TopicT = TypeVar("TopicT")
#: a subscription of the node (``subscriber.Subscription``)
SubscriptionT = TypeVar("SubscriptionT")


class NodeInterface(Protocol[TopicT, SubscriptionT]):
    """The node as its publications, subscriptions and slave API see it.  Every method takes
    the node's lock itself; none is called with it held."""

    @property
    def name(self) -> str:
        """The node's resolved name (its caller id)."""
        ...

    @property
    def host(self) -> str:
        """The host name or address peers reach the node at."""
        ...

    @property
    def tcpros_port(self) -> int:
        """The port of the node's TCPROS server."""
        ...

    @property
    def max_header_size(self) -> int:
        """The largest TCPROS connection header the node reads."""
        ...

    @property
    def master(self) -> MasterClient:
        """The node's client of the ROS master."""
        ...

    def published_topic(self, topic: str) -> TopicT | None:
        """The topic the node publishes under the name ``topic`` (None: it publishes none)."""
        ...

    def publications(self) -> list[TopicT]:
        """Every topic the node publishes, now."""
        ...

    def subscriptions(self) -> list[SubscriptionT]:
        """Every subscription of the node, now (grouped by topic)."""
        ...

    def release_publisher(self, topic: TopicT, flush_timeout: float = 0.0) -> None:
        """A :class:`~polybag.net.ros1.publisher.Publisher` handle on ``topic`` closed: the
        last one unadvertises it (after up to ``flush_timeout`` s of sending its queues)."""
        ...

    def release_subscription(self, subscription: SubscriptionT) -> None:
        """``subscription`` closed: the last one of its topic unregisters it."""
        ...

    def handshake_done(self, conn: socket.socket) -> None:
        """The TCPROS handshake on the accepted ``conn`` is over (it is no longer shut down
        by the node's close as an unfinished handshake)."""
        ...

    def publisher_update(self, topic: str, publishers: list[str]) -> None:
        """The master's ``publisherUpdate``: ``topic`` is published by ``publishers`` now."""
        ...

    def request_shutdown(self, reason: str) -> None:
        """A peer asked the node to shut down (the slave API's ``shutdown``)."""
        ...
