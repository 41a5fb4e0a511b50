"""A ROS 1 node: slave XML-RPC server, TCPROS publisher server, subscriptions.

Threads (all daemon, all joined by :meth:`Node.close`):

- one XML-RPC server thread (the slave API the master and peers call; each request in a short thread);
- one TCPROS accept thread; one thread per subscriber connected to one of our publishers
  (it sends that subscriber's queue, so a slow subscriber never blocks ``publish``);
- one thread per publisher connection of each subscription (it connects, then reads
  messages and calls the callback).

A bad peer (lying length, malformed header, wrong md5sum) only loses its own connection; the
error is logged and kept in ``Subscription.errors`` / ``Publisher.errors``.

The parts live in modules of their own: :mod:`.publisher` (our topics and the subscribers
connected to them), :mod:`.subscriber` (our subscriptions and their publisher connections),
:mod:`.slave` (the slave XML-RPC API) and :mod:`.sockets` (timeouts and helpers).  They
see the node through :class:`~.node_interface.NodeInterface`, which :class:`Node` implements;
this module keeps :class:`Node`, which owns them, and re-exports the public names.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from polybag.net.ros1.errors import RosGraphError
from polybag.net.ros1.master import DEFAULT_TIMEOUT, MasterClient
from polybag.net.ros1.publisher import IncomingSubscriber, Publisher, PubTopic, close_pub_topics
from polybag.net.ros1.slave import SlaveApi, ThreadingSlaveServer
from polybag.net.ros1.sockets import (
    FLUSH_TIMEOUT,
    HANDSHAKE_TIMEOUT,
    JOIN_TIMEOUT,
    RETIRE_GRACE,
    bind_host,
    default_host,
    join_thread,
    log,
    resolve_name,
    shutdown_socket,
)
from polybag.net.ros1.subscriber import Ros1Message, Subscription
from polybag.net.ros1.tcpros import DEFAULT_MAX_HEADER, DEFAULT_MAX_MESSAGE
from polybag.util.closing import Closing
from polybag.util.text import peer_text


class Node(Closing):
    """A ROS 1 node without rospy.  Use as a context manager, or call :meth:`close`."""

    def __init__(
        self,
        name: str = "/polybag",
        master_uri: str | None = None,
        *,
        host: str | None = None,
        anonymous: bool = False,
        max_message_size: int = DEFAULT_MAX_MESSAGE,
        max_header_size: int = DEFAULT_MAX_HEADER,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        name = resolve_name(name)
        if anonymous:
            name = f"{name}_{os.getpid()}_{os.urandom(4).hex()}"  # (8 hex digits; no uuid module to import)
        self.name = name
        self.host = host or default_host()
        self.max_message_size = max_message_size
        self.max_header_size = max_header_size
        self.master = MasterClient(master_uri, name, timeout=timeout)
        self._lock = threading.RLock()
        self._pub_topics: dict[str, PubTopic] = {}
        self._subs: dict[str, list[Subscription]] = {}
        self._closed = False
        self._close_done = threading.Event()
        self.shutdown_requested = threading.Event()
        self.shutdown_reason = ""
        self._threads: list[threading.Thread] = []
        self._handshakes: set[socket.socket] = set()

        # TCPROS server
        self._tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            self._tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._tcp.bind((bind_host(self.host), 0))
            self._tcp.listen(64)
            self._tcp.settimeout(0.5)
            self.tcpros_port = int(self._tcp.getsockname()[1])
            # slave XML-RPC server
            self._xmlrpc = ThreadingSlaveServer((bind_host(self.host), 0))
        except OSError as exc:
            self._tcp.close()
            raise RosGraphError(f"cannot open node {name} on {self.host}: {exc}") from None
        self._xmlrpc.register_instance(SlaveApi(self))
        self.uri = f"http://{self.host}:{self._xmlrpc.server_address[1]}/"
        self.master.caller_api = self.uri
        self._xmlrpc_thread = threading.Thread(
            target=self._xmlrpc.serve_forever,
            kwargs={"poll_interval": 0.2},
            name=f"polybag-ros1-xmlrpc{name}",
            daemon=True,
        )
        self._accept_thread = threading.Thread(
            target=self._accept_loop, name=f"polybag-ros1-tcpros{name}", daemon=True
        )
        self._xmlrpc_thread.start()
        self._accept_thread.start()

    @property
    def master_uri(self) -> str:
        return self.master.uri

    @property
    def closed(self) -> bool:
        return self._closed

    # ----------------------------------------------------------------- public API
    def subscribe(
        self,
        topic: str,
        callback: Callable[[Ros1Message], None],
        *,
        md5sum: str = "*",
        type: str = "*",
        tcp_nodelay: bool = False,
        queue_size: int | None = None,
        max_message_size: int | None = None,
    ) -> Subscription:
        """Subscribe to ``topic``; ``callback`` runs in each publisher connection's reader thread.

        ``queue_size`` is accepted for compatibility; messages are handed to the callback as they
        arrive (a slow callback slows that publisher's TCP stream, never another).
        """
        topic = resolve_name(topic)
        self._check_open()
        sub = Subscription(
            self,
            topic,
            callback,
            md5sum or "*",
            type or "*",
            tcp_nodelay,
            queue_size,
            max_message_size or self.max_message_size,
            self.max_header_size,
        )
        with self._lock:
            self._check_open()
            self._subs.setdefault(topic, []).append(sub)
        try:
            publishers = self.master.register_subscriber(topic, type or "*")
        except RosGraphError:
            with self._lock:
                lst = self._subs.get(topic, [])
                if sub in lst:
                    lst.remove(sub)
                if not lst:
                    self._subs.pop(topic, None)
            raise
        if self._closed:  # close() ran meanwhile (another thread): leave no registration behind
            self._unregister_quietly("unregisterSubscriber", topic)
            sub.close()
            raise RosGraphError(f"node {self.name} was closed while subscribing to {topic}")
        sub._update(publishers, remove=False)
        return sub

    def advertise(
        self,
        topic: str,
        type: str,
        md5sum: str,
        message_definition: str,
        *,
        latch: bool = False,
        callerid: str | None = None,
        queue_size: int = 100,
    ) -> Publisher:
        """Advertise ``topic``.  Advertising a topic again (same md5sum) shares the connections."""
        topic = resolve_name(topic)
        with self._lock:
            self._check_open()
            existing = self._pub_topics.get(topic)
            if existing is not None:
                if existing.md5sum != md5sum and "*" not in (md5sum, existing.md5sum):
                    raise RosGraphError(
                        f"{topic} is already advertised by {self.name} as {existing.type} ({existing.md5sum})"
                    )
                existing.handles += 1
                existing.latch = existing.latch or latch
                return Publisher(existing)
            pt = PubTopic(
                self, topic, type, md5sum, message_definition, latch, callerid or self.name, queue_size
            )
            pt.handles = 1
            self._pub_topics[topic] = pt
        try:
            self.master.register_publisher(topic, type)
        except RosGraphError:
            with self._lock:
                if self._pub_topics.get(topic) is pt:
                    del self._pub_topics[topic]
            raise
        if self._closed:  # close() ran meanwhile (another thread): leave no registration behind
            self._unregister_quietly("unregisterPublisher", topic)
            raise RosGraphError(f"node {self.name} was closed while advertising {topic}")
        return Publisher(pt)

    def _unregister_quietly(self, method: str, topic: str) -> None:
        try:
            self.master.call(method, topic, self.uri)
        except RosGraphError as exc:
            log.info("%s %s: %s", method, topic, exc)

    def topics(self) -> list[tuple[str, str]]:
        """Published topics and their types, from the master."""
        return self.master.get_published_topics()

    def close(self, flush_timeout: float = FLUSH_TIMEOUT) -> None:
        """Unregister everything, stop the servers and join every thread.

        Messages already published but still queued for a subscriber are sent first, for at
        most ``flush_timeout`` s in all.

        Idempotent; if another thread is closing the node (e.g. after a slave-API ``shutdown``),
        waits for it to finish (except from the node's own threads, such as a callback).
        """
        with self._lock:
            already = self._closed
            self._closed = True
            if not already:
                subs = [s for lst in self._subs.values() for s in lst]
                pubs = list(self._pub_topics.values())
        if already:
            if not threading.current_thread().name.startswith("polybag-ros1"):
                self._close_done.wait(JOIN_TIMEOUT * 4)
            return
        try:
            self._close(subs, pubs, flush_timeout)
        finally:
            self._close_done.set()

    def _close(self, subs: list[Subscription], pubs: list[PubTopic], flush_timeout: float) -> None:
        for sub in subs:
            sub.close()
        close_pub_topics(pubs, flush_timeout)  # before unregistering (see release_publisher)
        for pt in pubs:
            self._unregister_publisher(pt)
        shutdown_socket(self._tcp)
        with self._lock:
            handshakes = list(self._handshakes)
        for s in handshakes:
            shutdown_socket(s)
        if self._xmlrpc_thread.is_alive() and self._xmlrpc_thread is not threading.current_thread():
            self._xmlrpc.shutdown()
        self._xmlrpc.server_close()
        join_thread(self._xmlrpc_thread)
        join_thread(self._accept_thread)
        self._xmlrpc.join_requests()
        with self._lock:
            threads = list(self._threads)
            self._threads.clear()
        for t in threads:
            join_thread(t)

    def __repr__(self) -> str:
        return f"<Node {self.name} {self.uri} master={self.master.uri}>"

    # ----------------------------------------------------------------- internals
    def _check_open(self) -> None:
        if self._closed:
            raise RosGraphError(f"node {self.name} is closed")

    # ----------------------------------------------------------------- for the node's parts
    # (the NodeInterface of .node_interface: publications, subscriptions, the slave API)
    def published_topic(self, topic: str) -> PubTopic | None:
        with self._lock:
            return self._pub_topics.get(topic)

    def publications(self) -> list[PubTopic]:
        with self._lock:
            return list(self._pub_topics.values())

    def subscriptions(self) -> list[Subscription]:
        with self._lock:
            return [s for lst in self._subs.values() for s in lst]

    def handshake_done(self, conn: socket.socket) -> None:
        with self._lock:
            self._handshakes.discard(conn)

    def release_subscription(self, sub: Subscription) -> None:
        with self._lock:
            lst = self._subs.get(sub.topic, [])
            if sub in lst:
                lst.remove(sub)
            last = not lst
            if last:
                self._subs.pop(sub.topic, None)
        if last:
            try:
                self.master.unregister_subscriber(sub.topic)
            except RosGraphError as exc:
                log.info("unregistering subscriber of %s: %s", sub.topic, exc)

    def release_publisher(self, pt: PubTopic, flush_timeout: float = 0.0) -> None:
        with self._lock:
            pt.handles -= 1
            if pt.handles > 0:
                return
            if self._pub_topics.get(pt.name) is pt:
                del self._pub_topics[pt.name]
        # flush before unregistering: the master's publisherUpdate makes subscribers drop us
        pt.close(flush_timeout)
        self._unregister_publisher(pt)

    def _unregister_publisher(self, pt: PubTopic) -> None:
        try:
            self.master.unregister_publisher(pt.name)
        except RosGraphError as exc:
            log.info("unregistering publisher of %s: %s", pt.name, exc)

    def _spawn(self, target: Callable[..., None], *args: Any, name: str) -> None:
        t = threading.Thread(target=target, args=args, name=name, daemon=True)
        with self._lock:
            self._threads = [x for x in self._threads if x.is_alive()]
            self._threads.append(t)
        t.start()

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                conn, addr = self._tcp.accept()
            except TimeoutError:
                continue
            except OSError:
                if self._closed:
                    return
                time.sleep(0.05)
                continue
            with self._lock:
                if self._closed:
                    shutdown_socket(conn)
                    return
                self._handshakes.add(conn)
            self._spawn(self._serve_subscriber, conn, addr, name=f"polybag-ros1-pub-{addr[0]}:{addr[1]}")

    def _serve_subscriber(self, conn: socket.socket, addr: Any) -> None:
        """Handshake with a subscriber that connected to our TCPROS port; then send its queue."""
        IncomingSubscriber(self, conn, addr).serve()

    def publisher_update(self, topic: str, publishers: list[str]) -> None:
        with self._lock:
            subs = list(self._subs.get(topic, []))
        for sub in subs:
            sub._update(publishers)

    def request_shutdown(self, reason: str) -> None:
        reason = peer_text(reason)  # (any XML-RPC client may send it)
        self.shutdown_reason = reason
        self.shutdown_requested.set()
        log.warning("node %s asked to shut down: %s", self.name, reason)
        threading.Thread(target=self.close, name="polybag-ros1-shutdown", daemon=True).start()


__all__ = [
    "FLUSH_TIMEOUT",
    "HANDSHAKE_TIMEOUT",
    "JOIN_TIMEOUT",
    "RETIRE_GRACE",
    "Node",
    "Publisher",
    "Ros1Message",
    "Subscription",
]
