"""A ROS 1 node: slave XML-RPC server, TCPROS publisher server, subscriptions.

Threads (all daemon, all joined by :meth:`Node.close`):

- one XML-RPC server thread (the slave API the master and peers call; each request in a short thread);
- one TCPROS accept thread; one thread per subscriber connected to one of our publishers
  (it sends that subscriber's queue, so a slow subscriber never blocks ``publish``);
- one thread per publisher connection of each subscription (it connects, then reads
  messages and calls the callback).

A bad peer (lying length, malformed header, wrong md5sum) only loses its own connection; the
error is logged and kept in ``Subscription.errors`` / ``Publisher.errors``.
"""

from __future__ import annotations

import collections
import itertools
import logging
import os
import select
import socket
import threading
import time
import uuid
import xmlrpc.client
import xmlrpc.server
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from polybag.errors import PolybagError
from polybag.net.ros1 import RosGraphError, TcprosError
from polybag.net.ros1.master import DEFAULT_TIMEOUT, MasterClient, _brief, xmlrpc_call
from polybag.net.ros1.tcpros import (
    DEFAULT_MAX_HEADER,
    DEFAULT_MAX_MESSAGE,
    BufferedSocket,
    encode_header,
    frame,
    read_header,
    read_message,
    text,
)

log = logging.getLogger("polybag.net.ros1")

#: Seconds a peer has to complete the TCPROS handshake.
HANDSHAKE_TIMEOUT = 10.0
#: Seconds Publisher.close() / Node.close() give queued messages to reach their subscribers.
FLUSH_TIMEOUT = 2.0
#: Seconds a publisher the master no longer lists has to finish sending what it already sent.
RETIRE_GRACE = 1.0
_POLL = 0.5

#: Seconds close() waits for each thread.
JOIN_TIMEOUT = 5.0

#: Small queued messages are joined into one send of up to this many bytes.
_SEND_BATCH = 1 << 18

_conn_ids = itertools.count(1)


@dataclass(slots=True)
class Ros1Message:
    """One message received by a subscription."""

    topic: str
    data: bytes
    receive_time: int
    connection: dict[str, str] = field(default_factory=dict)


def _default_host() -> str:
    return os.environ.get("ROS_HOSTNAME") or os.environ.get("ROS_IP") or "127.0.0.1"


def _bind_host(host: str) -> str:
    return host if host in ("127.0.0.1", "localhost") else ""


def _shutdown_socket(sock: socket.socket | None) -> None:
    if sock is None:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass


def _join(thread: threading.Thread | None) -> None:
    if thread is not None and thread is not threading.current_thread() and thread.is_alive():
        thread.join(JOIN_TIMEOUT)


def _resolve_name(name: str) -> str:
    if not name:
        raise RosGraphError("empty ROS name")
    return name if name.startswith("/") else "/" + name


# --------------------------------------------------------------------------- publishing


class _SubscriberLink:
    """One subscriber connected to one of our topics: a bounded send queue and its thread."""

    def __init__(self, topic: _PubTopic, sock: socket.socket, callerid: str, queue_size: int) -> None:
        self.id = next(_conn_ids)
        self.topic = topic
        self.sock = sock
        self.callerid = callerid
        self.queue: collections.deque[bytes] = collections.deque()
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
            if len(self.queue) >= self.queue_size:
                self.queue.popleft()
                self.dropped += 1
                self.topic.dropped += 1
            self.queue.append(framed)
            self.cond.notify()

    def _send(self, batch: list[bytes], size: int) -> None:
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
                    while not self.queue and not self.closed and not self.draining:
                        if not self.cond.wait(0.5):
                            break
                    if self.closed:
                        return
                    items = list(self.queue)
                    self.queue.clear()
                    self.in_flight = len(items)
                    if not items and self.draining:
                        return
                if not items:
                    if self._peer_gone():
                        return
                    continue
                batch: list[bytes] = []
                size = 0
                for item in items:
                    batch.append(item)
                    size += len(item)
                    if size >= _SEND_BATCH:
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
            while (self.queue or self.in_flight) and not self.closed:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(min(left, 0.5))
            return True

    def drain(self) -> None:
        """Send what is queued, then end (see _PubTopic.close)."""
        with self.cond:
            self.draining = True
            self.cond.notify_all()

    def close(self) -> None:
        with self.cond:
            already = self.closed
            self.closed = True
            self.cond.notify_all()
        if not already:
            _shutdown_socket(self.sock)
            self.topic.remove_link(self)


class _PubTopic:
    """A topic this node publishes: shared by every Publisher handle on it."""

    def __init__(
        self,
        node: Node,
        name: str,
        type: str,
        md5sum: str,
        definition: str,
        latch: bool,
        callerid: str,
        queue_size: int,
    ) -> None:
        self.node = node
        self.name = name
        self.type = type
        self.md5sum = md5sum
        self.definition = definition
        self.latch = latch
        self.callerid = callerid
        self.queue_size = queue_size
        self.links: list[_SubscriberLink] = []
        self.latched: bytes | None = None
        self.cond = threading.Condition()
        self.handles = 0
        self.dropped = 0
        self.published = 0
        self.errors: list[str] = []
        self.closed = False

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
        _close_pub_topics([self], flush_timeout)


def _close_pub_topics(topics: list[_PubTopic], flush_timeout: float) -> None:
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
        _join(link.thread)


class Publisher:
    """A handle on a topic this node advertises (see :meth:`Node.advertise`)."""

    def __init__(self, topic: _PubTopic) -> None:
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
        self._topic.node._release_publisher(self._topic, flush_timeout)

    def __enter__(self) -> Publisher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Publisher {self.topic} [{self.type}] subscribers={self.num_subscribers}>"


# --------------------------------------------------------------------------- subscribing


class _PublisherLink:
    """Our connection to one publisher of a subscribed topic (its own reader thread)."""

    def __init__(self, sub: Subscription, uri: str) -> None:
        self.id = next(_conn_ids)
        self.sub = sub
        self.uri = uri
        self.sock: socket.socket | None = None
        self.reader: BufferedSocket | None = None
        self.header: dict[str, str] = {}
        self.connected = False
        self.closed = False
        self.retire_at: float | None = None
        self.lock = threading.Lock()
        self.messages = 0
        self.bytes = 0
        self.thread = threading.Thread(
            target=self.run, name=f"polybag-ros1-sub{sub.topic}<-{uri}", daemon=True
        )

    def _connect(self) -> BufferedSocket:
        sub = self.sub
        node = sub.node
        proto = xmlrpc_call(
            self.uri,
            "requestTopic",
            node.name,
            sub.topic,
            [["TCPROS"]],
            timeout=DEFAULT_TIMEOUT,
            what=f"publisher of {sub.topic}",
        )
        if (
            not isinstance(proto, (list, tuple))
            or len(proto) < 3
            or proto[0] != "TCPROS"
            or not isinstance(proto[1], str)
            or not isinstance(proto[2], int)
        ):
            raise RosGraphError(f"publisher {self.uri} of {sub.topic} offered {_brief(proto)}, not TCPROS")
        host, port = proto[1], proto[2]
        if not 0 < port < 65536 or not host:
            raise RosGraphError(f"publisher {self.uri} of {sub.topic} offered the address {host!r}:{port}")
        try:
            sock = socket.create_connection((host, port), timeout=HANDSHAKE_TIMEOUT)
        except (OSError, ValueError, OverflowError) as exc:
            raise RosGraphError(
                f"cannot connect to publisher {self.uri} of {sub.topic} at {host}:{port}: {exc}"
            ) from None
        with self.lock:
            if self.closed:
                _shutdown_socket(sock)
                raise _Closed
            self.sock = sock
        if sub.tcp_nodelay:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            sock.sendall(
                encode_header(
                    {
                        "callerid": node.name,
                        "topic": sub.topic,
                        "md5sum": sub.md5sum,
                        "type": sub.type,
                        "tcp_nodelay": "1" if sub.tcp_nodelay else "0",
                    }
                )
            )
        except OSError as exc:
            raise TcprosError(f"sending the connection header failed: {exc}", f"{host}:{port}") from None
        self.reader = BufferedSocket(sock, self._keep_waiting)
        fields = text(read_header(self.reader, sub.max_header_size))
        if "error" in fields:
            raise RosGraphError(f"publisher {self.uri} of {sub.topic} refused us: {fields['error']}")
        if sub.md5sum != "*" and fields.get("md5sum", "*") not in ("*", sub.md5sum):
            raise RosGraphError(
                f"publisher {self.uri} of {sub.topic} sends md5sum {fields.get('md5sum')}, we want {sub.md5sum}"
            )
        self.header = fields
        sock.settimeout(_POLL)  # wakes the reader to check retire/close (partial reads are kept)
        return self.reader

    def _keep_waiting(self) -> bool:
        if self.closed:
            return False
        return self.retire_at is None or time.monotonic() < self.retire_at

    def retire(self, grace: float) -> None:
        """The master no longer lists this publisher: read what it already sent until EOF,
        for at most ``grace`` s, then drop the connection."""
        with self.lock:
            self.retire_at = time.monotonic() + grace
            if not self.connected:
                self.closed = True
                sock = self.sock
            else:
                sock = None
        _shutdown_socket(sock)

    def run(self) -> None:
        sub = self.sub
        try:
            if self.closed:
                return
            reader = self._connect()
            with self.lock:
                if self.closed:
                    return
                self.connected = True
            sub._link_changed()
            while not self.closed:
                data = read_message(reader, sub.max_message_size)
                if data is None:
                    break
                if self.retire_at is not None and time.monotonic() > self.retire_at:
                    break  # removed by the master and still streaming: drop it now
                self.messages += 1
                self.bytes += len(data)
                msg = Ros1Message(sub.topic, data, time.time_ns(), self.header)
                for cb in sub._callbacks():
                    try:
                        cb(msg)
                    except Exception:  # a user callback must not kill the connection
                        log.exception("callback of %s raised", sub.topic)
        except _Closed:
            pass
        except PolybagError as exc:
            if not self.closed and self.retire_at is None:
                sub._error(f"{self.uri}: {exc}")
        except OSError as exc:
            if not self.closed and self.retire_at is None:
                sub._error(f"{self.uri}: connection error: {exc}")
        except Exception as exc:  # never let a peer kill the thread silently
            log.exception("subscription %s: connection to %s failed", sub.topic, self.uri)
            sub._error(f"{self.uri}: {type(exc).__name__}: {exc}")
        finally:
            with self.lock:
                self.closed = True
                sock2 = self.sock
                self.connected = False
            _shutdown_socket(sock2)
            sub._drop_link(self)

    def close(self) -> None:
        with self.lock:
            self.closed = True
            sock = self.sock
        _shutdown_socket(sock)


class _Closed(Exception):
    pass


class Subscription:
    """A subscription of this node (see :meth:`Node.subscribe`)."""

    def __init__(
        self,
        node: Node,
        topic: str,
        callback: Callable[[Ros1Message], None],
        md5sum: str,
        type: str,
        tcp_nodelay: bool,
        queue_size: int | None,
        max_message_size: int,
        max_header_size: int,
    ) -> None:
        self.node = node
        self.topic = topic
        self.callback = callback
        self.md5sum = md5sum
        self.type = type
        self.tcp_nodelay = tcp_nodelay
        self.queue_size = queue_size
        self.max_message_size = max_message_size
        self.max_header_size = max_header_size
        self._lock = threading.Condition()
        self._links: dict[str, _PublisherLink] = {}
        self._finished: list[threading.Thread] = []
        self._retiring: list[_PublisherLink] = []
        self._errors: list[str] = []
        self._closed = False

    def _callbacks(self) -> tuple[Callable[[Ros1Message], None], ...]:
        return (self.callback,)

    def _error(self, message: str) -> None:
        log.warning("%s: %s", self.topic, message)
        with self._lock:
            self._errors.append(message)
            del self._errors[:-100]

    @property
    def errors(self) -> list[str]:
        """Connection errors so far (the last 100): refused, malformed or oversized data."""
        with self._lock:
            return list(self._errors)

    @property
    def connections(self) -> int:
        """Live publisher connections (handshake done)."""
        with self._lock:
            return sum(1 for link in self._links.values() if link.connected)

    @property
    def connection_headers(self) -> list[dict[str, str]]:
        """The TCPROS response headers of the live publisher connections."""
        with self._lock:
            return [dict(link.header) for link in self._links.values() if link.connected]

    @property
    def publishers(self) -> list[str]:
        """XML-RPC URIs of the publishers we are connected or connecting to."""
        with self._lock:
            return list(self._links)

    def wait_for_connections(self, n: int = 1, timeout: float = 5.0) -> bool:
        """Block until at least ``n`` publishers are connected; False on timeout."""
        end = time.monotonic() + timeout
        with self._lock:
            while sum(1 for link in self._links.values() if link.connected) < n:
                left = end - time.monotonic()
                if left <= 0 or self._closed:
                    return False
                self._lock.wait(min(left, 0.5))
            return True

    def _link_changed(self) -> None:
        with self._lock:
            self._lock.notify_all()

    def _drop_link(self, link: _PublisherLink) -> None:
        with self._lock:
            if self._links.get(link.uri) is link:
                del self._links[link.uri]
            self._finished.append(link.thread)
            self._finished = [t for t in self._finished if t.is_alive()]
            self._lock.notify_all()

    def _update(self, uris: list[str], *, remove: bool = True) -> None:
        """Connect to publishers new in ``uris``; drop those no longer listed (if ``remove``).

        The answer to registerSubscriber only adds: a publisherUpdate the master sent meanwhile
        may already list a newer publisher that answer lacks."""
        started: list[_PublisherLink] = []
        dropped: list[_PublisherLink] = []
        with self._lock:
            if self._closed:
                return
            wanted = set(uris)
            for uri, link in list(self._links.items()):
                if remove and uri not in wanted:
                    dropped.append(link)
                    del self._links[uri]
            for uri in uris:
                if uri not in self._links:
                    link = _PublisherLink(self, uri)
                    self._links[uri] = link
                    started.append(link)
            self._retiring = [lk for lk in self._retiring if lk.thread.is_alive()] + dropped
        for link in dropped:
            link.retire(RETIRE_GRACE)
        for link in started:
            link.thread.start()

    def close(self) -> None:
        """Unregister and drop every publisher connection."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            links = list(self._links.values()) + self._retiring
            self._links.clear()
            self._retiring = []
            threads = [link.thread for link in links] + self._finished
            self._finished = []
            self._lock.notify_all()
        self.node._release_subscription(self)
        for link in links:
            link.close()
        for t in threads:
            if t.ident is not None:
                _join(t)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Subscription {self.topic} connections={self.connections}>"


# --------------------------------------------------------------------------- slave API


class _SlaveServer(xmlrpc.server.SimpleXMLRPCServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.requests: list[threading.Thread] = []
        self.requests_lock = threading.Lock()


class _ThreadingSlaveServer(_SlaveServer):
    def process_request(self, request: Any, client_address: Any) -> None:
        t = threading.Thread(
            target=self._process_thread,
            args=(request, client_address),
            name="polybag-ros1-xmlrpc-req",
            daemon=True,
        )
        with self.requests_lock:
            self.requests = [x for x in self.requests if x.is_alive()]
            self.requests.append(t)
        t.start()

    def join_requests(self) -> None:
        with self.requests_lock:
            threads, self.requests = self.requests, []
        for t in threads:
            _join(t)

    def _process_thread(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("XML-RPC request from %s failed", client_address, exc_info=True)


class _Quiet(xmlrpc.server.SimpleXMLRPCRequestHandler):
    timeout = HANDSHAKE_TIMEOUT  # a peer that connects and stays silent does not hold a thread

    def log_message(self, format: str, *args: Any) -> None:
        pass


# --------------------------------------------------------------------------- node


class Node:
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
        name = _resolve_name(name)
        if anonymous:
            name = f"{name}_{os.getpid()}_{uuid.uuid4().hex[:8]}"
        self.name = name
        self.host = host or _default_host()
        self.max_message_size = max_message_size
        self.max_header_size = max_header_size
        self.master = MasterClient(master_uri, name, timeout=timeout)
        self._lock = threading.RLock()
        self._pub_topics: dict[str, _PubTopic] = {}
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
            self._tcp.bind((_bind_host(self.host), 0))
            self._tcp.listen(64)
            self._tcp.settimeout(0.5)
            self.tcpros_port = int(self._tcp.getsockname()[1])
            # slave XML-RPC server
            self._xmlrpc = _ThreadingSlaveServer(
                (_bind_host(self.host), 0), requestHandler=_Quiet, logRequests=False, allow_none=False
            )
        except OSError as exc:
            self._tcp.close()
            raise RosGraphError(f"cannot open node {name} on {self.host}: {exc}") from None
        self._xmlrpc.register_instance(_SlaveApi(self))
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
        topic = _resolve_name(topic)
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
        topic = _resolve_name(topic)
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
            pt = _PubTopic(
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

    def _close(self, subs: list[Subscription], pubs: list[_PubTopic], flush_timeout: float) -> None:
        for sub in subs:
            sub.close()
        _close_pub_topics(pubs, flush_timeout)  # before unregistering (see _release_publisher)
        for pt in pubs:
            self._unregister_publisher(pt)
        _shutdown_socket(self._tcp)
        with self._lock:
            handshakes = list(self._handshakes)
        for s in handshakes:
            _shutdown_socket(s)
        if self._xmlrpc_thread.is_alive() and self._xmlrpc_thread is not threading.current_thread():
            self._xmlrpc.shutdown()
        self._xmlrpc.server_close()
        _join(self._xmlrpc_thread)
        _join(self._accept_thread)
        self._xmlrpc.join_requests()
        with self._lock:
            threads = list(self._threads)
            self._threads.clear()
        for t in threads:
            _join(t)

    def __enter__(self) -> Node:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Node {self.name} {self.uri} master={self.master.uri}>"

    # ----------------------------------------------------------------- internals
    def _check_open(self) -> None:
        if self._closed:
            raise RosGraphError(f"node {self.name} is closed")

    def _release_subscription(self, sub: Subscription) -> None:
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

    def _release_publisher(self, pt: _PubTopic, flush_timeout: float = 0.0) -> None:
        with self._lock:
            pt.handles -= 1
            if pt.handles > 0:
                return
            if self._pub_topics.get(pt.name) is pt:
                del self._pub_topics[pt.name]
        # flush before unregistering: the master's publisherUpdate makes subscribers drop us
        pt.close(flush_timeout)
        self._unregister_publisher(pt)

    def _unregister_publisher(self, pt: _PubTopic) -> None:
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
                    _shutdown_socket(conn)
                    return
                self._handshakes.add(conn)
            self._spawn(self._serve_subscriber, conn, addr, name=f"polybag-ros1-pub-{addr[0]}:{addr[1]}")

    def _serve_subscriber(self, conn: socket.socket, addr: Any) -> None:
        """Handshake with a subscriber that connected to our TCPROS port; then send its queue."""
        peer = f"{addr[0]}:{addr[1]}"
        link: _SubscriberLink | None = None
        pt: _PubTopic | None = None
        try:
            conn.settimeout(HANDSHAKE_TIMEOUT)
            fields = text(read_header(conn, self.max_header_size))
            if "service" in fields:
                conn.sendall(encode_header({"error": "polybag nodes provide no services"}))
                return
            topic = fields.get("topic", "")
            with self._lock:
                pt = self._pub_topics.get(topic)
            if pt is None:
                conn.sendall(encode_header({"error": f"{self.name} does not publish {topic!r}"}))
                return
            want = fields.get("md5sum", "")
            if want != "*" and pt.md5sum != "*" and want != pt.md5sum:
                message = (
                    f"Client [{fields.get('callerid', '?')}] wants topic {topic} to have datatype/md5sum "
                    f"[{fields.get('type', '?')}/{want}], but our version has [{pt.type}/{pt.md5sum}]. Dropping connection."
                )
                pt.errors.append(message)
                conn.sendall(encode_header({"error": message}))
                return
            conn.sendall(pt.response_header())
            if fields.get("probe") == "1":
                return
            if fields.get("tcp_nodelay") == "1":
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn.settimeout(None)
            link = _SubscriberLink(pt, conn, fields.get("callerid", peer), pt.queue_size)
            link.thread = threading.current_thread()
            with self._lock:
                self._handshakes.discard(conn)
            if not pt.add_link(link):
                return
            link.run()
        except PolybagError as exc:
            log.info("TCPROS handshake from %s failed: %s", peer, exc)
            if pt is not None:
                pt.errors.append(f"{peer}: {exc}")
        except OSError as exc:
            log.info("TCPROS connection from %s failed: %s", peer, exc)
        finally:
            with self._lock:
                self._handshakes.discard(conn)
            if link is not None:
                link.close()
            else:
                _shutdown_socket(conn)

    def _publisher_update(self, topic: str, publishers: list[str]) -> None:
        with self._lock:
            subs = list(self._subs.get(topic, []))
        for sub in subs:
            sub._update(publishers)

    def _request_shutdown(self, reason: str) -> None:
        self.shutdown_reason = reason
        self.shutdown_requested.set()
        log.warning("node %s asked to shut down: %s", self.name, reason)
        threading.Thread(target=self.close, name="polybag-ros1-shutdown", daemon=True).start()


class _SlaveApi:
    """The ROS slave API (http://wiki.ros.org/ROS/Slave_API)."""

    def __init__(self, node: Node) -> None:
        self.node = node

    def _dispatch(self, method: str, params: tuple[Any, ...]) -> Any:
        fn = _SLAVE_METHODS.get(method)
        if fn is None:
            raise xmlrpc.client.Fault(1, f"unknown method {method}")
        try:
            return fn(self, *params)
        except TypeError as exc:
            return [-1, f"bad arguments to {method}: {exc}", 0]
        except Exception as exc:  # never let a peer crash the server thread
            log.debug("slave API %s failed", method, exc_info=True)
            return [-1, f"{method} failed: {exc}", 0]

    def getBusStats(self, caller_id: str) -> list:
        node = self.node
        with node._lock:
            pubs = list(node._pub_topics.values())
            subs = [s for lst in node._subs.values() for s in lst]
        pub_stats = []
        for pt in pubs:
            with pt.cond:
                links = list(pt.links)
            pub_stats.append(
                [
                    pt.name,
                    pt.published,
                    [
                        [lk.id, lk.bytes_sent & 0x7FFFFFFF, lk.messages_sent & 0x7FFFFFFF, True]
                        for lk in links
                    ],
                ]
            )
        sub_stats = []
        for sub in subs:
            with sub._lock:
                links2 = list(sub._links.values())
            sub_stats.append([sub.topic, [[lk.id, lk.bytes & 0x7FFFFFFF, -1, lk.connected] for lk in links2]])
        return [1, "bus stats", [pub_stats, sub_stats, []]]

    def getBusInfo(self, caller_id: str) -> list:
        node = self.node
        info = []
        with node._lock:
            pubs = list(node._pub_topics.values())
            subs = [s for lst in node._subs.values() for s in lst]
        for pt in pubs:
            with pt.cond:
                links = list(pt.links)
            for lk in links:
                info.append([lk.id, lk.callerid, "o", "TCPROS", pt.name, True])
        for sub in subs:
            with sub._lock:
                links2 = list(sub._links.values())
            for lk2 in links2:
                info.append([lk2.id, lk2.uri, "i", "TCPROS", sub.topic, lk2.connected])
        return [1, "bus info", info]

    def getMasterUri(self, caller_id: str) -> list:
        return [1, "", self.node.master.uri]

    def shutdown(self, caller_id: str, msg: str = "") -> list:
        self.node._request_shutdown(f"{caller_id}: {msg}")
        return [1, "shutdown", 0]

    def getPid(self, caller_id: str) -> list:
        return [1, "", os.getpid()]

    def getSubscriptions(self, caller_id: str) -> list:
        with self.node._lock:
            subs = [[topic, lst[0].type] for topic, lst in self.node._subs.items() if lst]
        return [1, "subscriptions", subs]

    def getPublications(self, caller_id: str) -> list:
        with self.node._lock:
            pubs = [[pt.name, pt.type] for pt in self.node._pub_topics.values()]
        return [1, "publications", pubs]

    def paramUpdate(self, caller_id: str, key: str, value: Any) -> list:
        return [1, "", 0]

    def publisherUpdate(self, caller_id: str, topic: str, publishers: list) -> list:
        if not isinstance(publishers, list) or not all(isinstance(p, str) for p in publishers):
            return [-1, "publishers must be a list of URIs", 0]
        self.node._publisher_update(topic, publishers)
        return [1, "", 0]

    def requestTopic(self, caller_id: str, topic: str, protocols: list) -> list:
        node = self.node
        with node._lock:
            known = topic in node._pub_topics
        if not known:
            return [-1, f"{node.name} does not publish {topic}", []]
        for proto in protocols if isinstance(protocols, list) else []:
            if isinstance(proto, list) and proto and proto[0] == "TCPROS":
                return [1, "ready on TCPROS", ["TCPROS", node.host, node.tcpros_port]]
        return [0, "no supported protocol (only TCPROS)", []]


_SLAVE_METHODS: dict[str, Callable[..., Any]] = {
    name: getattr(_SlaveApi, name)
    for name in (
        "getBusStats",
        "getBusInfo",
        "getMasterUri",
        "shutdown",
        "getPid",
        "getSubscriptions",
        "getPublications",
        "paramUpdate",
        "publisherUpdate",
        "requestTopic",
    )
}

__all__ = ["Node", "Publisher", "Ros1Message", "Subscription"]
