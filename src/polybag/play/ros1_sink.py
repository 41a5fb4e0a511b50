"""Publish played messages to a live ROS 1 graph through :class:`polybag.net.ros1.Node`.

Each topic is advertised with the type, md5sum, full message definition and latching of
its channel (a bag connection header, or an MCAP ``ros1`` channel's metadata and
``ros1msg`` schema; a missing md5sum is computed from the definition as ROS does) and
the stored payload bytes are sent unchanged.  ULog channels are translated to
``ulog_msgs/*`` ROS 1 messages with the mapping of :mod:`polybag.bridges.ulog_ros1`.  Channels
in other encodings (CDR, JSON, ...) cannot be sent to ROS 1: they are skipped and listed in
``skipped``.

With ``clock`` on, ``/clock`` (``rosgraph_msgs/Clock``) carries the bag time.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from polybag.model import Channel, Message
from polybag.play.player import PlayOptions
from polybag.play.routing import Route, RoutingSink

if TYPE_CHECKING:
    from polybag.bridges.protocol import Transform

CLOCK_TOPIC = "/clock"
CLOCK_TYPE = "rosgraph_msgs/Clock"
CLOCK_MD5 = "a9c97c1d230cfc112e270351a944ee47"
CLOCK_DEFINITION = (
    "# roslib/Clock is used for publishing simulated time in ROS. \n"
    "# This message simply communicates the current time.\n"
    "# For more information, see http://www.ros.org/wiki/Clock\n"
    "time clock\n"
)
_CLOCK = struct.Struct("<II")


def clock_payload(time_ns: int) -> bytes:
    """``rosgraph_msgs/Clock`` serialized: uint32 secs, uint32 nsecs (clamped to the range)."""
    secs, nsecs = divmod(max(0, time_ns), 1_000_000_000)
    return _CLOCK.pack(min(secs, 0xFFFFFFFF), nsecs)


def _truthy(v: object) -> bool:
    return str(v).strip().lower() in ("1", "true", "yes")


def ros1_connection(ch: Channel) -> tuple[str, str, str, str, bool, Transform | None]:
    """``(topic, type, md5sum, definition, latching, repack)`` to advertise ``ch`` on ROS 1.

    Raises :class:`polybag.errors.UnsupportedError` for channels ROS 1 cannot carry.
    """
    from polybag.errors import UnsupportedError

    md = ch.metadata
    schema = ch.schema
    latch = _truthy(md.get("latching", "0"))
    if ch.message_encoding == "ros1":
        tname = ch.type_name
        definition = bytes(schema.data).decode("utf-8", "replace") if schema is not None else ""
        md5 = str(md.get("md5sum", "") or "")
        if not md5:
            from polybag.codecs.ros1 import compute_md5

            try:
                md5 = str(compute_md5(tname, definition))
            except Exception as e:  # noqa: BLE001 - report, do not crash the player
                raise UnsupportedError(f"topic {ch.topic}: no md5sum and the definition cannot be parsed: {e}") from e
        if not tname:
            raise UnsupportedError(f"topic {ch.topic}: no message type")
        return ch.topic, tname, md5, definition, latch, None
    if schema is not None and schema.encoding == "ulog":
        from polybag.bridges import ulog_channel_to_ros1

        topic, rschema, rmd, repack = ulog_channel_to_ros1(ch)
        return topic, rschema.name, rmd["md5sum"], bytes(rschema.data).decode(), False, repack
    raise UnsupportedError(f"topic {ch.topic}: message encoding {ch.message_encoding!r} cannot be sent to ROS 1")


def _drain(pub: Any, end: float) -> bool:
    """For a publisher without ``flush`` that shows its ``send_queues`` (as a Node
    publisher does): until its subscriber queues are empty and their sent counts have
    stopped moving (the last batch left the queue and the socket)."""
    if not hasattr(pub, "send_queues"):
        return True
    last: list[int] | None = None
    while time.monotonic() < end:
        queues: list[tuple[int, int]] = pub.send_queues
        if all(not queued for queued, _ in queues):
            sent = [n for _, n in queues]
            if sent == last:
                return True
            last = sent
        else:
            last = None
        time.sleep(0.02)
    return False


class Ros1Sink(RoutingSink):
    """Advertises every played channel on ``node`` and publishes the payloads.

    ``node`` is a :class:`polybag.net.ros1.Node` (or anything with its ``advertise``).
    Publishers are closed by :meth:`close`; the node stays the caller's.
    """

    def __init__(
        self, node: Any, *, prefix: str = "", remap: dict[str, str] | None = None, namespace: str = "/", warn: Callable[[str], Any] | None = None
    ) -> None:
        super().__init__(prefix=prefix, remap=remap, namespace=namespace, warn=warn)
        self.node = node
        self.publishers: dict[str, Any] = {}  # output topic -> publisher
        self.clock_publisher: Any = None

    def open(self, channels: Sequence[Channel], options: PlayOptions) -> None:
        self._open_routes(channels, options)
        if options.clock:
            # /clock is never prefixed (as rosbag), but it is remapped
            clock_topic = self.remap.get(CLOCK_TOPIC, CLOCK_TOPIC)
            self.clock_publisher = self.node.advertise(clock_topic, CLOCK_TYPE, CLOCK_MD5, CLOCK_DEFINITION)

    def _make_route(self, ch: Channel) -> Route | None:
        from polybag.errors import PolybagError

        route: Route | None = None
        try:
            topic, tname, md5, definition, latch, repack = ros1_connection(ch)
        except PolybagError as e:
            self.skipped.append(ch.topic)
            self.warn(str(e))
        else:
            out = self._out_topic(topic)
            pub = self.publishers.get(out)
            if pub is None:
                pub = self.node.advertise(out, tname, md5, definition, latch=latch, queue_size=self.queue_size)
                self.publishers[out] = pub
                self._types[out] = md5
                route = Route(pub, repack)
            elif self._types[out] != md5:
                self.skipped.append(ch.topic)
                self.warn(f"topic {out}: already advertised with md5sum {self._types[out]}, skipping {tname} ({md5})")
            else:
                route = Route(pub, repack)
        return route

    def _send(self, target: Any, payload: bytes, message: Message) -> bool:
        target.publish(payload)
        return True

    def clock(self, time_ns: int) -> None:
        if self.clock_publisher is not None:
            self.clock_publisher.publish(clock_payload(time_ns))

    def wait_for_subscribers(self, stopped: Callable[[], bool]) -> bool:
        """Until every advertised topic has a subscriber (rosbag's --wait-for-subscribers)."""
        for pub in self.publishers.values():
            while pub.num_subscribers < 1:
                if stopped():
                    return False
                pub.wait_for_subscribers(1, timeout=0.1)
        return not stopped()

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until every subscriber has been sent what was published (bounded by ``timeout``)."""
        pubs = [*self.publishers.values(), *([self.clock_publisher] if self.clock_publisher is not None else [])]
        end = time.monotonic() + timeout
        for pub in pubs:
            flush = getattr(pub, "flush", None)
            if callable(flush):
                if not flush(max(0.0, end - time.monotonic())):
                    return False
            elif not _drain(pub, end):
                return False
        return True

    def close(self) -> None:
        self.flush()
        for pub in self.publishers.values():
            try:
                pub.close()
            except Exception:  # noqa: BLE001, S110 - closing is best effort
                pass
        self.publishers.clear()
        if self.clock_publisher is not None:
            try:
                self.clock_publisher.close()
            except Exception:  # noqa: BLE001, S110
                pass
            self.clock_publisher = None
