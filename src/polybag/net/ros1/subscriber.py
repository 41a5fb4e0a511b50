"""Subscriptions: connecting to the publishers of a topic and reading their TCPROS streams.

A :class:`Subscription` follows the publisher list the master gives it (registerSubscriber's
answer, then each publisherUpdate): it starts a :class:`_PublisherLink` per new publisher (its
own thread: requestTopic over XML-RPC, the TCPROS handshake, then reading messages and calling
the callback) and retires those no longer listed.  A bad publisher only loses its own
connection; the error is kept in ``Subscription.errors``.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from polybag.errors import PolybagError
from polybag.net.ros1.errors import RosGraphError, TcprosError
from polybag.net.ros1.master import DEFAULT_TIMEOUT, brief, xmlrpc_call
from polybag.net.ros1.sockets import (
    HANDSHAKE_TIMEOUT,
    POLL,
    RETIRE_GRACE,
    conn_ids,
    join_thread,
    log,
    shutdown_socket,
)
from polybag.net.ros1.tcpros import BufferedSocket, encode_header, read_header, read_message, text
from polybag.util.closing import Closing
from polybag.util.text import peer_text

if TYPE_CHECKING:
    from polybag.net.ros1.node_interface import NodeInterface


@dataclass(slots=True)
class Ros1Message:
    """One message received by a subscription."""

    topic: str
    data: bytes
    receive_time: int
    connection: dict[str, str] = field(default_factory=dict)


class _PublisherLink:
    """Our connection to one publisher of a subscribed topic (its own reader thread)."""

    def __init__(self, sub: Subscription, uri: str) -> None:
        self.id = next(conn_ids)
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
        self.epoch = sub._epoch  # the master registration this link came from
        self.thread = threading.Thread(
            target=self.run, name=f"polybag-ros1-sub{sub.topic}<-{uri}", daemon=True
        )

    def _connect(self) -> BufferedSocket:
        """Ask the publisher for its TCPROS address, connect and exchange connection headers."""
        sub = self.sub
        node = sub.node
        host, port = self._request_address()
        sock = self._open(host, port)
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
        sock.settimeout(POLL)  # wakes the reader to check retire/close (partial reads are kept)
        return self.reader

    def _request_address(self) -> tuple[str, int]:
        """requestTopic over XML-RPC: the host and port of the publisher's TCPROS server."""
        sub = self.sub
        proto = xmlrpc_call(
            self.uri,
            "requestTopic",
            sub.node.name,
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
            raise RosGraphError(f"publisher {self.uri} of {sub.topic} offered {brief(proto)}, not TCPROS")
        host, port = proto[1], proto[2]
        if not 0 < port < 65536 or not host:
            raise RosGraphError(f"publisher {self.uri} of {sub.topic} offered the address {host!r}:{port}")
        return host, port

    def _open(self, host: str, port: int) -> socket.socket:
        """The TCP connection to the publisher (kept in ``self.sock`` so close() can break it)."""
        sub = self.sub
        try:
            sock = socket.create_connection((host, port), timeout=HANDSHAKE_TIMEOUT)
        except (OSError, ValueError, OverflowError) as exc:
            raise RosGraphError(
                f"cannot connect to publisher {self.uri} of {sub.topic} at {host}:{port}: {exc}"
            ) from None
        with self.lock:
            if self.closed:
                shutdown_socket(sock)
                raise _Closed
            self.sock = sock
        if sub.tcp_nodelay:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

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
        shutdown_socket(sock)

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
            shutdown_socket(sock2)
            sub._drop_link(self)

    def close(self) -> None:
        with self.lock:
            self.closed = True
            sock = self.sock
        shutdown_socket(sock)


class _Closed(Exception):
    pass


@dataclass(eq=False, repr=False)
class Subscription(Closing):
    """A subscription of this node (see :meth:`Node.subscribe`)."""

    node: NodeInterface[Any, Subscription]
    topic: str
    callback: Callable[[Ros1Message], None]
    md5sum: str
    type: str
    tcp_nodelay: bool
    queue_size: int | None
    max_message_size: int
    max_header_size: int
    _lock: threading.Condition = field(default_factory=threading.Condition, init=False)
    _links: dict[str, _PublisherLink] = field(default_factory=dict, init=False)
    _finished: list[threading.Thread] = field(default_factory=list, init=False)
    _retiring: list[_PublisherLink] = field(default_factory=list, init=False)
    _errors: list[str] = field(default_factory=list, init=False)
    _closed: bool = field(default=False, init=False)
    _epoch: int = field(default=0, init=False)  # bumped by reregister (a restarted master)

    def _callbacks(self) -> tuple[Callable[[Ros1Message], None], ...]:
        return (self.callback,)

    def _error(self, message: str) -> None:
        message = peer_text(message, 1000)  # (quotes peers: a publisher's "error", a URI)
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

    def publisher_links(self) -> list[_PublisherLink]:
        """The publisher connections now, connected or connecting (the slave API's bus
        stats and info)."""
        with self._lock:
            return list(self._links.values())

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
                # a link made under an earlier master stays while it streams: the restarted
                # master does not list a publisher that has not registered with it again
                if remove and uri not in wanted and not (link.epoch < self._epoch and link.connected):
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

    def reregister(self) -> list[str]:
        """Register this subscription with the master again (a restarted master forgot it)
        and connect to the publishers it lists; connections made before stay open (until
        their publisher closes them).  Returns the publishers' URIs; RosGraphError if the
        master cannot be reached."""
        with self._lock:
            if self._closed:
                return []
            self._epoch += 1
        publishers = self.node.master.register_subscriber(self.topic, self.type)
        self._update(publishers, remove=False)
        return publishers

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
        self.node.release_subscription(self)
        for link in links:
            link.close()
        for t in threads:
            if t.ident is not None:
                join_thread(t)

    def __repr__(self) -> str:
        return f"<Subscription {self.topic} connections={self.connections}>"
