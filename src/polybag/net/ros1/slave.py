"""The slave XML-RPC API a node serves to the master and its peers.

:class:`ThreadingSlaveServer` answers each request in a short thread of its own (joined by
``Node.close``); :class:`SlaveApi` implements the calls (requestTopic, publisherUpdate,
getBusStats, getBusInfo, shutdown...; http://wiki.ros.org/ROS/Slave_API).  A malformed
call gets an error answer, never an exception in the server thread.
"""

from __future__ import annotations

import os
import threading
import xmlrpc.client
import xmlrpc.server
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from polybag.net.ros1.sockets import HANDSHAKE_TIMEOUT, join_thread, log

if TYPE_CHECKING:
    from polybag.net.ros1.node_interface import NodeInterface
    from polybag.net.ros1.publisher import PubTopic
    from polybag.net.ros1.subscriber import Subscription

#: an answer of the slave API over XML-RPC: ``[code, status message, value]``
SlaveReply = list[Any]


class _SlaveServer(xmlrpc.server.SimpleXMLRPCServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.requests: list[threading.Thread] = []
        self.requests_lock = threading.Lock()


class ThreadingSlaveServer(_SlaveServer):
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


class Quiet(xmlrpc.server.SimpleXMLRPCRequestHandler):
    timeout = HANDSHAKE_TIMEOUT  # a peer that connects and stays silent does not hold a thread

    def log_message(self, format: str, *args: Any) -> None:
        pass


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
