"""The slave XML-RPC API a node serves to the master and its peers.

:class:`ThreadingSlaveServer` answers each request in a short thread of its own (joined by
``Node.close``), read by :class:`SlaveHandler` (HTTP/1.0 ``POST /`` with bounded lines,
headers and body; XML-RPC through ``xmlrpc.client``'s ``loads``/``dumps``, not
``xmlrpc.server``); :class:`SlaveApi` implements the calls (requestTopic, publisherUpdate,
getBusStats, getBusInfo, shutdown...; http://wiki.ros.org/ROS/Slave_API).  A malformed
request gets an HTTP error, a malformed call an error answer or a fault, never an exception
in the server thread.
"""

from __future__ import annotations

import email.utils
import os
import socketserver
import threading
import xmlrpc.client
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from polybag.net.ros1.master import brief
from polybag.net.ros1.sockets import HANDSHAKE_TIMEOUT, join_thread, log

if TYPE_CHECKING:
    from polybag.net.ros1.node_interface import NodeInterface
    from polybag.net.ros1.publisher import PubTopic
    from polybag.net.ros1.subscriber import Subscription

#: an answer of the slave API over XML-RPC: ``[code, status message, value]``
SlaveReply = list[Any]

#: Largest XML-RPC request read (after gzip decoding): a peer's Content-Length never sizes a
#: buffer beyond it (the slave API's calls are a few KiB; a publisherUpdate listing thousands
#: of publishers well under a MiB).
MAX_REQUEST = 16 * 1024 * 1024
#: Longest request or header line, and the most header lines, read from a peer.
MAX_LINE = 64 * 1024
MAX_HEADERS = 100
#: The paths the slave API answers on (as ``SimpleXMLRPCRequestHandler.rpc_paths``).
RPC_PATHS = ("/", "/RPC2")
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 411: "Length Required", 413: "Payload Too Large", 501: "Not Implemented"}


class _BadRequest(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


class SlaveHandler(socketserver.StreamRequestHandler):
    """One HTTP/1.0 XML-RPC request (``POST /``), answered and the connection closed.

    What ``xmlrpc.server.SimpleXMLRPCRequestHandler`` does for it, without importing
    ``xmlrpc.server`` (its ``pydoc``, ``http.server`` and ``html`` are most of a node's start
    imports: issue 28), and bounded: request line and headers (:data:`MAX_LINE`,
    :data:`MAX_HEADERS`), the body (:data:`MAX_REQUEST`, also gzip-decoded), a peer that
    stays silent (:data:`~polybag.net.ros1.sockets.HANDSHAKE_TIMEOUT`)."""

    timeout = HANDSHAKE_TIMEOUT  # a peer that connects and stays silent does not hold a thread
    server: ThreadingSlaveServer

    def handle(self) -> None:
        try:
            body = self._read_request()
        except _BadRequest as e:
            self._answer(e.status, b"")
            return
        except (OSError, ValueError):  # (reset, timed out, undecodable: nothing to answer)
            return
        if body is not None:
            self._answer(200, self.server.dispatch_xml(body))

    def _line(self) -> bytes:
        line = self.rfile.readline(MAX_LINE + 1)
        if len(line) > MAX_LINE:
            raise _BadRequest(400)
        return line

    def _read_request(self) -> bytes | None:
        first = self._line()
        if not first:
            return None  # (connected and closed)
        words = first.split()
        if len(words) != 3 or not words[2].startswith(b"HTTP/"):
            raise _BadRequest(400)
        headers: dict[bytes, bytes] = {}
        for _ in range(MAX_HEADERS + 1):
            line = self._line()
            if line in (b"\r\n", b"\n", b""):
                break
            name, sep, value = line.partition(b":")
            if not sep:
                raise _BadRequest(400)
            headers[name.strip().lower()] = value.strip()
        else:
            raise _BadRequest(400)
        if words[0] != b"POST":
            raise _BadRequest(501)
        if words[1].decode("latin-1") not in RPC_PATHS:
            raise _BadRequest(404)
        if b"transfer-encoding" in headers or b"content-length" not in headers:
            raise _BadRequest(411)
        length = headers[b"content-length"]
        if not length.isdigit():
            raise _BadRequest(400)
        if int(length) > MAX_REQUEST:
            raise _BadRequest(413)
        body = self.rfile.read(int(length))
        if len(body) != int(length):
            return None  # (the peer went away)
        encoding = headers.get(b"content-encoding", b"identity").lower()
        if encoding == b"gzip":
            d = zlib.decompressobj(wbits=31)
            try:
                body = d.decompress(body, MAX_REQUEST)
            except zlib.error:
                raise _BadRequest(400) from None
            if d.unconsumed_tail:
                raise _BadRequest(413)
        elif encoding != b"identity":
            raise _BadRequest(501)
        return body

    def _answer(self, status: int, body: bytes) -> None:
        head = (
            f"HTTP/1.0 {status} {_REASONS.get(status, '')}\r\n"
            "Server: polybag\r\n"
            f"Date: {email.utils.formatdate(usegmt=True)}\r\n"
            "Content-type: text/xml\r\n"
            f"Content-length: {len(body)}\r\n\r\n"
        )
        try:
            self.wfile.write(head.encode("latin-1") + body)
        except OSError:
            pass


class ThreadingSlaveServer(socketserver.TCPServer):
    """The slave API's XML-RPC server: each request in a short thread of its own (joined by
    :meth:`join_requests`); :meth:`register_instance` names the object whose ``_dispatch``
    answers the calls."""

    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], handler: type[SlaveHandler] = SlaveHandler) -> None:
        super().__init__(address, handler)
        self.requests: list[threading.Thread] = []
        self.requests_lock = threading.Lock()
        self.instance: Any = None

    def register_instance(self, instance: Any) -> None:
        self.instance = instance

    def dispatch_xml(self, body: bytes) -> bytes:
        """The XML-RPC answer to the request ``body`` (a fault for what cannot be answered)."""
        try:
            params, method = xmlrpc.client.loads(body)
            if not isinstance(method, str):
                raise xmlrpc.client.Fault(1, "no method name")
            answer = xmlrpc.client.dumps((self.instance._dispatch(method, params),), methodresponse=True)
        except xmlrpc.client.Fault as fault:
            answer = xmlrpc.client.dumps(fault, methodresponse=True)
        except BaseException as exc:  # noqa: BLE001 - whatever a peer's bytes make expat or dumps raise
            answer = xmlrpc.client.dumps(xmlrpc.client.Fault(1, f"{type(exc).__name__}: {brief(str(exc))}"), methodresponse=True)
        return answer.encode("utf-8", "xmlcharrefreplace")

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
            join_thread(t)

    def _process_thread(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("XML-RPC request from %s failed", client_address, exc_info=True)


class SlaveApi:
    """The ROS slave API (http://wiki.ros.org/ROS/Slave_API)."""

    def __init__(self, node: NodeInterface[PubTopic, Subscription]) -> None:
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

    def getBusStats(self, caller_id: str) -> SlaveReply:
        node = self.node
        pubs = node.publications()
        subs = node.subscriptions()
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
            links2 = sub.publisher_links()
            sub_stats.append([sub.topic, [[lk.id, lk.bytes & 0x7FFFFFFF, -1, lk.connected] for lk in links2]])
        return [1, "bus stats", [pub_stats, sub_stats, []]]

    def getBusInfo(self, caller_id: str) -> SlaveReply:
        node = self.node
        info = []
        pubs = node.publications()
        subs = node.subscriptions()
        for pt in pubs:
            with pt.cond:
                links = list(pt.links)
            for lk in links:
                info.append([lk.id, lk.callerid, "o", "TCPROS", pt.name, True])
        for sub in subs:
            links2 = sub.publisher_links()
            for lk2 in links2:
                info.append([lk2.id, lk2.uri, "i", "TCPROS", sub.topic, lk2.connected])
        return [1, "bus info", info]

    def getMasterUri(self, caller_id: str) -> SlaveReply:
        return [1, "", self.node.master.uri]

    def shutdown(self, caller_id: str, msg: str = "") -> SlaveReply:
        self.node.request_shutdown(f"{caller_id}: {msg}")
        return [1, "shutdown", 0]

    def getPid(self, caller_id: str) -> SlaveReply:
        return [1, "", os.getpid()]

    def getSubscriptions(self, caller_id: str) -> SlaveReply:
        types: dict[str, str] = {}  # each topic with the type of its first subscription
        for sub in self.node.subscriptions():
            types.setdefault(sub.topic, sub.type)
        subs = [[topic, type_] for topic, type_ in types.items()]
        return [1, "subscriptions", subs]

    def getPublications(self, caller_id: str) -> SlaveReply:
        pubs = [[pt.name, pt.type] for pt in self.node.publications()]
        return [1, "publications", pubs]

    def paramUpdate(self, caller_id: str, key: str, value: Any) -> SlaveReply:
        return [1, "", 0]

    def publisherUpdate(self, caller_id: str, topic: str, publishers: list[Any]) -> SlaveReply:
        if not isinstance(publishers, list) or not all(isinstance(p, str) for p in publishers):
            return [-1, "publishers must be a list of URIs", 0]
        self.node.publisher_update(topic, publishers)
        return [1, "", 0]

    def requestTopic(self, caller_id: str, topic: str, protocols: list[Any]) -> SlaveReply:
        node = self.node
        if node.published_topic(topic) is None:
            return [-1, f"{node.name} does not publish {topic}", []]
        for proto in protocols if isinstance(protocols, list) else []:
            if isinstance(proto, list) and proto and proto[0] == "TCPROS":
                return [1, "ready on TCPROS", ["TCPROS", node.host, node.tcpros_port]]
        return [0, "no supported protocol (only TCPROS)", []]


_SLAVE_METHODS: dict[str, Callable[..., Any]] = {
    name: getattr(SlaveApi, name)
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
