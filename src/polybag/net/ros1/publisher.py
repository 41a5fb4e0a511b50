"""Publications: serving the subscribers that connect to our TCPROS port.

A :class:`PubTopic` is one topic this node advertises (shared by every :class:`Publisher`
handle on it; it keeps the latched message); each connected subscriber gets a
:class:`_SubscriberLink`, a bounded send queue drained by its own thread, so a slow
subscriber drops its oldest messages (counted) and never blocks ``publish``.  When a link has
nothing queued, ``publish`` writes the message to its socket at once without blocking
(``MSG_DONTWAIT``; what the kernel does not take goes out first from the link's thread), so a
due message is not held up by waking that thread (the player's timing depends on it).
:class:`IncomingSubscriber` is the handshake on an accepted connection.
"""

from __future__ import annotations

import collections
import select
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from polybag.errors import PolybagError
from polybag.net.ros1.errors import RosGraphError
from polybag.net.ros1.sockets import (
    FLUSH_TIMEOUT,
    HANDSHAKE_TIMEOUT,
    SEND_BATCH,
    conn_ids,
    join_thread,
    log,
    shutdown_socket,
)
from polybag.net.ros1.tcpros import encode_header, frame, read_header, text
from polybag.util.text import peer_text

if TYPE_CHECKING:
    from polybag.net.ros1.node_interface import NodeInterface

# send without blocking (0 where the platform has no such flag: then every message is queued)
_DONTWAIT: int = getattr(socket, "MSG_DONTWAIT", 0)


class _SubscriberLink:
    """One subscriber connected to one of our topics: a bounded send queue and its thread."""

    def __init__(self, topic: PubTopic, sock: socket.socket, callerid: str, queue_size: int) -> None:
        self.id = next(conn_ids)
        self.topic = topic
        self.sock = sock
        self.callerid = callerid
        self.queue: collections.deque[bytes] = collections.deque()
        self.head: memoryview | None = None  # the unsent rest of a message partly sent by put()
        self.queue_size = max(1, queue_size)
        self.cond = threading.Condition()
        self.closed = False
        self.draining = False
        self.in_flight = 0
        self.dropped = 0
        self.bytes_sent = 0
        self.messages_sent = 0
        self.thread: threading.Thread | None = None

    def put(self, framed: bytes) -> None:
        with self.cond:
            if self.closed:
                return
            if not self.queue and self.head is None and not self.in_flight and _DONTWAIT:
                # nothing waiting: hand it to the kernel now, from the publishing thread, without
                # blocking (no wakeup of the link's thread in the way of a timely message)
                try:
                    sent = self.sock.send(framed, _DONTWAIT)
                except OSError:  # would block, or the peer is gone: the link's thread sees to it
                    sent = 0
                if sent:
                    self.bytes_sent += sent
                    if sent == len(framed):
                        self.messages_sent += 1
                        return
                    # the rest goes out first, and is never dropped (the stream would break)
                    self.head = memoryview(framed)[sent:]
                    self.cond.notify()
                    return
            if len(self.queue) >= self.queue_size:
                self.queue.popleft()
                self.dropped += 1
                self.topic.dropped += 1
            self.queue.append(framed)
            self.cond.notify()

    def _send(self, batch: list[bytes | memoryview], size: int) -> None:
        self.sock.sendall(batch[0] if len(batch) == 1 else b"".join(batch))
        self.bytes_sent += size
        self.messages_sent += len(batch)

    def _peer_gone(self) -> bool:
        try:
            readable, _, _ = select.select([self.sock], [], [], 0)
            if not readable:
                return False
            return self.sock.recv(4096, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True

    def run(self) -> None:
        try:
            while True:
                with self.cond:
                    while not self.queue and self.head is None and not self.closed and not self.draining:
                        if not self.cond.wait(0.5):
                            break
                    if self.closed:
                        return
                    items: list[bytes | memoryview] = list(self.queue)
                    self.queue.clear()
                    if self.head is not None:
                        items.insert(0, self.head)
                        self.head = None
                    self.in_flight = len(items)
                    if not items and self.draining:
                        return
                if not items:
                    if self._peer_gone():
                        return
                    continue
                batch: list[bytes | memoryview] = []
                size = 0
                for item in items:
                    batch.append(item)
                    size += len(item)
                    if size >= SEND_BATCH:
                        self._send(batch, size)
                        batch, size = [], 0
                if batch:
                    self._send(batch, size)
                with self.cond:
                    self.in_flight = 0
                    self.cond.notify_all()
        except OSError as exc:
            if not self.closed:
                log.info("subscriber %s of %s went away: %s", self.callerid, self.topic.name, exc)
        finally:
            self.close()

    def wait_idle(self, end: float) -> bool:
        """Until everything queued was handed to the kernel (or the link closed); False at ``end``."""
        with self.cond:
            while (self.queue or self.head is not None or self.in_flight) and not self.closed:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(min(left, 0.5))
            return True

    def drain(self) -> None:
        """Send what is queued, then end (see PubTopic.close)."""
        with self.cond:
            self.draining = True
            self.cond.notify_all()

    def close(self) -> None:
        with self.cond:
            already = self.closed
            self.closed = True
            self.cond.notify_all()
        if not already:
            shutdown_socket(self.sock)
            self.topic.remove_link(self)


@dataclass(eq=False, repr=False)
class PubTopic:
    """A topic this node publishes: shared by every Publisher handle on it."""

    node: NodeInterface[PubTopic, Any]
    name: str
    type: str
    md5sum: str
    definition: str
    latch: bool
    callerid: str
    queue_size: int
    links: list[_SubscriberLink] = field(default_factory=list, init=False)
    latched: bytes | None = field(default=None, init=False)
    cond: threading.Condition = field(default_factory=threading.Condition, init=False)
    handles: int = field(default=0, init=False)
    dropped: int = field(default=0, init=False)
    published: int = field(default=0, init=False)
    errors: list[str] = field(default_factory=list, init=False)
    closed: bool = field(default=False, init=False)

    def response_header(self) -> bytes:
        return encode_header(
            {
                "callerid": self.callerid,
                "latching": "1" if self.latch else "0",
                "md5sum": self.md5sum,
                "message_definition": self.definition,
                "topic": self.name,
                "type": self.type,
            }
        )

    def publish(self, data: bytes | bytearray | memoryview) -> None:
        framed = frame(data)
        with self.cond:
            if self.closed:
                raise RosGraphError(f"publisher of {self.name} is closed")
            if self.latch:
                self.latched = framed
            self.published += 1
            links = list(self.links)
        for link in links:
            link.put(framed)

    def add_link(self, link: _SubscriberLink) -> bool:
        with self.cond:
            if self.closed:
                return False
            self.links.append(link)
            if self.latch and self.latched is not None:
                link.put(self.latched)
            self.cond.notify_all()
            return True

    def remove_link(self, link: _SubscriberLink) -> None:
        with self.cond:
            if link in self.links:
                self.links.remove(link)
            self.cond.notify_all()

    def close(self, flush_timeout: float = 0.0) -> None:
        """Drop every subscriber, after up to ``flush_timeout`` s for their queues to be sent."""
        close_pub_topics([self], flush_timeout)


def close_pub_topics(topics: list[PubTopic], flush_timeout: float) -> None:
    links: list[_SubscriberLink] = []
    for pt in topics:
        with pt.cond:
            pt.closed = True
            links.extend(pt.links)
            pt.cond.notify_all()
    if flush_timeout > 0:
        end = time.monotonic() + flush_timeout
        for link in links:
            link.drain()
        for link in links:
            t = link.thread
            if t is not None and t is not threading.current_thread():
                t.join(max(0.0, end - time.monotonic()))
    for link in links:
        link.close()
    for link in links:
        join_thread(link.thread)


class Publisher:
    """A handle on a topic this node advertises (see :meth:`Node.advertise`)."""

    def __init__(self, topic: PubTopic) -> None:
        self._topic = topic
        self._closed = False

    @property
    def topic(self) -> str:
        return self._topic.name

    @property
    def type(self) -> str:
        return self._topic.type

    @property
    def md5sum(self) -> str:
        return self._topic.md5sum

    @property
    def latch(self) -> bool:
        return self._topic.latch

    def publish(self, data: bytes | bytearray | memoryview) -> None:
        """Send one serialized message to every connected subscriber (never blocks on them)."""
        if self._closed:
            raise RosGraphError(f"publisher of {self.topic} is closed")
        self._topic.publish(data)

    @property
    def num_subscribers(self) -> int:
        with self._topic.cond:
            return len(self._topic.links)

    @property
    def subscribers(self) -> list[str]:
        """Caller ids of the connected subscribers."""
        with self._topic.cond:
            return [link.callerid for link in self._topic.links]

    @property
    def send_queues(self) -> list[tuple[int, int]]:
        """``(messages queued, messages sent)`` of each connected subscriber's send queue."""
        with self._topic.cond:
            links = list(self._topic.links)
        return [(len(link.queue), link.messages_sent) for link in links]

    @property
    def dropped(self) -> int:
        """Messages dropped because a subscriber's send queue was full."""
        return self._topic.dropped

    @property
    def errors(self) -> list[str]:
        """Refused or failed subscriber handshakes (wrong md5sum, malformed header...)."""
        return list(self._topic.errors)

    def flush(self, timeout: float = 5.0) -> bool:
        """Block until every message published so far was written to each connected
        subscriber's socket (handed to the kernel); False if ``timeout`` s passed first."""
        end = time.monotonic() + timeout
        with self._topic.cond:
            links = list(self._topic.links)
        return all([link.wait_idle(end) for link in links])

    def wait_for_subscribers(self, n: int = 1, timeout: float = 5.0) -> bool:
        """Block until at least ``n`` subscribers are connected; False on timeout."""
        end = time.monotonic() + timeout
        with self._topic.cond:
            while len(self._topic.links) < n:
                left = end - time.monotonic()
                if left <= 0 or self._topic.closed:
                    return False
                self._topic.cond.wait(min(left, 0.5))
            return True

    def close(self, flush_timeout: float = FLUSH_TIMEOUT) -> None:
        """Stop publishing (the topic is unadvertised when its last handle closes; what is
        queued for its subscribers is sent first, for at most ``flush_timeout`` s)."""
        if self._closed:
            return
        self._closed = True
        self._topic.node.release_publisher(self._topic, flush_timeout)

    def __enter__(self) -> Publisher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Publisher {self.topic} [{self.type}] subscribers={self.num_subscribers}>"


class IncomingSubscriber:
    """A subscriber that connected to our TCPROS port: the handshake, then its link's send loop.

    ``serve`` runs in the connection's own thread (started by the node's accept loop).
    """

    def __init__(self, node: NodeInterface[PubTopic, Any], conn: socket.socket, addr: Any) -> None:
        self.node = node
        self.conn = conn
        self.peer = f"{addr[0]}:{addr[1]}"
        self.pt: PubTopic | None = None
        self.link: _SubscriberLink | None = None

    def serve(self) -> None:
        """Handshake with the subscriber; then send its queue until it or we close."""
        node, conn, peer = self.node, self.conn, self.peer
        try:
            self._handshake_and_send()
        except PolybagError as exc:
            log.info("TCPROS handshake from %s failed: %s", peer, peer_text(exc, 1000))
            if self.pt is not None:
                self.pt.errors.append(peer_text(f"{peer}: {exc}", 1000))
        except OSError as exc:
            log.info("TCPROS connection from %s failed: %s", peer, exc)
        finally:
            node.handshake_done(conn)
            if self.link is not None:
                self.link.close()
            else:
                shutdown_socket(conn)

    def _handshake_and_send(self) -> None:
        node, conn = self.node, self.conn
        conn.settimeout(HANDSHAKE_TIMEOUT)
        fields = text(read_header(conn, node.max_header_size))
        pt = self._choose_topic(fields)
        if pt is None:
            return
        conn.sendall(pt.response_header())
        if fields.get("probe") == "1":
            return
        if fields.get("tcp_nodelay") == "1":
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.settimeout(None)
        link = self.link = _SubscriberLink(pt, conn, fields.get("callerid", self.peer), pt.queue_size)
        link.thread = threading.current_thread()
        node.handshake_done(conn)
        if not pt.add_link(link):
            return
        link.run()

    def _choose_topic(self, fields: dict[str, str]) -> PubTopic | None:
        """The topic the subscriber asks for; None once it was sent the reason we refuse it."""
        node, conn = self.node, self.conn
        if "service" in fields:
            conn.sendall(encode_header({"error": "polybag nodes provide no services"}))
            return None
        topic = fields.get("topic", "")
        pt = self.pt = node.published_topic(topic)
        if pt is None:
            conn.sendall(encode_header({"error": f"{node.name} does not publish {topic!r}"}))
            return None
        want = fields.get("md5sum", "")
        if want != "*" and pt.md5sum != "*" and want != pt.md5sum:
            message = (
                f"Client [{fields.get('callerid', '?')}] wants topic {topic} to have datatype/md5sum "
                f"[{fields.get('type', '?')}/{want}], but our version has [{pt.type}/{pt.md5sum}]. Dropping connection."
            )
            pt.errors.append(peer_text(message, 1000))
            conn.sendall(encode_header({"error": message}))
            return None
        return pt
