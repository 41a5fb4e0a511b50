"""What the live sinks share: each played channel's route to a publisher (ROS 1) or a DDS
writer (ROS 2), made once per channel, and the topic it goes out on (``--prefix``, the
namespace for relative names, ``/a:=/b`` remapping).  :class:`Ros1Sink
<polybag.play.ros1_sink.Ros1Sink>` and :class:`Ros2Sink <polybag.play.ros2_sink.Ros2Sink>`
say how a route is made (:meth:`RoutingSink._make_route`) and how a payload is sent
(:meth:`RoutingSink._send`)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from polybag.model import Channel, Message
from polybag.play.player import PlayOptions

if TYPE_CHECKING:
    from polybag.bridges.protocol import Transform


class Route:
    """Where one channel's payloads go: ``target`` (a publisher or writer) after
    ``transform`` (None: as they are; a transform returning None skips the message)."""

    __slots__ = ("target", "transform")

    def __init__(self, target: Any, transform: Transform | None) -> None:
        self.target = target
        self.transform = transform


class RoutingSink:
    """The routing half of a live sink (see the module notes)."""

    def __init__(self, *, prefix: str = "", remap: dict[str, str] | None = None, namespace: str = "/", warn: Callable[[str], Any] | None = None) -> None:
        self.prefix = prefix.rstrip("/")
        self.namespace = "/" + namespace.strip("/")  # where relative topic names land
        self.remap: dict[str, str] = dict(remap or {})
        self.warn = warn or (lambda text: print(f"polybag play: warning: {text}", file=sys.stderr))
        self._types: dict[str, str] = {}  # output topic -> the type (md5sum) it went out as
        self._routes: dict[int, Route | None] = {}  # id(channel) -> route (None: skipped)
        self._channels: list[Channel] = []  # keeps id(ch) unique while the route lives
        self.skipped: list[str] = []
        self.published = 0
        self.queue_size = 100

    def _open_routes(self, channels: Sequence[Channel], options: PlayOptions) -> None:
        """Take the play options (queue size, prefix, remapping) and route every channel."""
        self.queue_size = max(1, options.queue)
        if options.prefix and not self.prefix:
            self.prefix = options.prefix.rstrip("/")
        self.remap = {**options.remap, **self.remap}
        for ch in channels:
            self._route(ch)

    def _out_topic(self, topic: str) -> str:
        """The topic to publish ``topic`` on: prefixed, resolved in the namespace when relative,
        then remapped (as rosbag's node does)."""
        if self.prefix:
            topic = self.prefix + (topic if topic.startswith("/") else "/" + topic)
        if not topic.startswith("/"):
            topic = self.namespace.rstrip("/") + "/" + topic
        return self.remap.get(topic, topic)

    def _route(self, ch: Channel) -> Route | None:
        """``ch``'s route, made on first use (None: the channel is skipped)."""
        key = id(ch)
        if key in self._routes:
            return self._routes[key]
        self._channels.append(ch)
        route = self._routes[key] = self._make_route(ch)
        return route

    def _make_route(self, ch: Channel) -> Route | None:
        """A new route for ``ch`` (None, with a warning and ``ch.topic`` in :attr:`skipped`, when
        it cannot be published)."""
        raise NotImplementedError

    def _send(self, target: Any, payload: bytes, message: Message) -> bool:
        """Send ``payload`` to ``target``; False when it was not sent."""
        raise NotImplementedError

    def publish(self, message: Message) -> None:
        """Send one played message on its channel's route."""
        route = self._routes.get(id(message.channel), False)
        if route is False:
            route = self._route(message.channel)
        if route is None:
            return
        assert isinstance(route, Route)
        data: Any = message.data
        if route.transform is not None:
            data = route.transform(data)
            if data is None:
                return
        if self._send(route.target, bytes(data), message):
            self.published += 1
