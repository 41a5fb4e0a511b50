"""A client of the ROS 1 master's XML-RPC API (registration, graph state, parameters)."""

from __future__ import annotations

import http.client
import os
import xmlrpc.client
from typing import Any

from polybag.net.ros1 import RosGraphError

DEFAULT_MASTER_URI = "http://localhost:11311"
#: Seconds an XML-RPC call (to the master or a peer) may take.
DEFAULT_TIMEOUT = 10.0


class _TimeoutTransport(xmlrpc.client.Transport):
    def __init__(self, timeout: float) -> None:
        super().__init__()
        self._timeout = timeout

    def make_connection(self, host: Any) -> http.client.HTTPConnection:
        conn = super().make_connection(host)
        conn.timeout = self._timeout
        return conn


def xmlrpc_call(uri: str, method: str, *args: Any, timeout: float = DEFAULT_TIMEOUT, what: str = "") -> Any:
    """Call ``method`` at ``uri`` and return the value of a ``[code, status, value]`` answer.

    Raises :class:`RosGraphError` when the peer is unreachable, answers garbage or a code != 1.
    """
    label = what or uri
    if not uri.startswith(("http://", "https://")):
        raise RosGraphError(f"{label}: {uri!r} is not an http:// XML-RPC URI")
    try:
        with xmlrpc.client.ServerProxy(uri, transport=_TimeoutTransport(timeout)) as proxy:
            answer = getattr(proxy, method)(*args)
    except (TimeoutError, OSError) as exc:
        raise RosGraphError(f"{label}: cannot reach {uri} ({method}): {exc}") from None
    except xmlrpc.client.Fault as exc:
        raise RosGraphError(f"{label}: {method} failed at {uri}: {exc.faultString}") from None
    except (xmlrpc.client.Error, http.client.HTTPException, ValueError) as exc:
        raise RosGraphError(f"{label}: bad XML-RPC answer from {uri} ({method}): {exc}") from None
    if not isinstance(answer, (list, tuple)) or len(answer) != 3 or not isinstance(answer[0], int):
        raise RosGraphError(f"{label}: {method} at {uri} answered {answer!r:.200}, not [code, status, value]")
    code, status, value = answer
    if code != 1:
        raise RosGraphError(f"{label}: {method} failed at {uri} (code {code}): {status}")
    return value


def _str_list(value: Any, what: str) -> list[str]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise RosGraphError(f"master answered {value!r:.200} for {what}, expected a list of strings")
    return list(value)


def _pairs(value: Any, what: str) -> list[tuple[str, str]]:
    out = []
    if not isinstance(value, (list, tuple)):
        raise RosGraphError(f"master answered {value!r:.200} for {what}, expected a list of pairs")
    for item in value:
        if not isinstance(item, (list, tuple)) or len(item) != 2 or not all(isinstance(v, str) for v in item):
            raise RosGraphError(f"master answered {item!r:.200} in {what}, expected [name, type]")
        out.append((item[0], item[1]))
    return out


class MasterClient:
    """The ROS master at ``master_uri`` (default: ``ROS_MASTER_URI``, else http://localhost:11311).

    ``caller_api`` is this node's slave XML-RPC URI (set by :class:`~polybag.net.ros1.Node`);
    registrations use it unless given explicitly.
    """

    def __init__(
        self,
        master_uri: str | None = None,
        caller_id: str = "/polybag",
        *,
        caller_api: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self.uri = master_uri or os.environ.get("ROS_MASTER_URI") or DEFAULT_MASTER_URI
        self.caller_id = caller_id
        self.caller_api = caller_api
        self.timeout = timeout

    def call(self, method: str, *args: Any) -> Any:
        """Call a master method with this caller id first; the value, or RosGraphError."""
        return xmlrpc_call(self.uri, method, self.caller_id, *args, timeout=self.timeout, what="ROS master")

    def _api(self, caller_api: str | None) -> str:
        api = caller_api or self.caller_api
        if not api:
            raise RosGraphError("no caller_api: registration needs this node's XML-RPC URI")
        return api

    # registration
    def register_subscriber(self, topic: str, type: str, caller_api: str | None = None) -> list[str]:
        """Register a subscription; the XML-RPC URIs of the topic's current publishers."""
        return _str_list(self.call("registerSubscriber", topic, type, self._api(caller_api)), "publishers")

    def unregister_subscriber(self, topic: str, caller_api: str | None = None) -> int:
        return int(self.call("unregisterSubscriber", topic, self._api(caller_api)))

    def register_publisher(self, topic: str, type: str, caller_api: str | None = None) -> list[str]:
        """Register a publication; the XML-RPC URIs of the topic's current subscribers."""
        return _str_list(self.call("registerPublisher", topic, type, self._api(caller_api)), "subscribers")

    def unregister_publisher(self, topic: str, caller_api: str | None = None) -> int:
        return int(self.call("unregisterPublisher", topic, self._api(caller_api)))

    # graph state
    def get_published_topics(self, subgraph: str = "") -> list[tuple[str, str]]:
        return _pairs(self.call("getPublishedTopics", subgraph), "published topics")

    def get_topic_types(self) -> list[tuple[str, str]]:
        return _pairs(self.call("getTopicTypes"), "topic types")

    def get_system_state(self) -> tuple[list, list, list]:
        """``(publishers, subscribers, services)``, each a list of ``[name, [node, ...]]``."""
        value = self.call("getSystemState")
        if (
            not isinstance(value, (list, tuple))
            or len(value) != 3
            or not all(isinstance(v, list) for v in value)
        ):
            raise RosGraphError(f"master answered {value!r:.200} for the system state")
        return value[0], value[1], value[2]

    def lookup_node(self, name: str) -> str:
        value = self.call("lookupNode", name)
        if not isinstance(value, str):
            raise RosGraphError(f"master answered {value!r:.200} for node {name}")
        return value

    def get_uri(self) -> str:
        return str(self.call("getUri"))

    # parameters
    def get_param(self, key: str) -> Any:
        return self.call("getParam", key)

    def set_param(self, key: str, value: Any) -> None:
        self.call("setParam", key, value)

    def has_param(self, key: str) -> bool:
        return bool(self.call("hasParam", key))

    def delete_param(self, key: str) -> None:
        self.call("deleteParam", key)

    def get_param_names(self) -> list[str]:
        return _str_list(self.call("getParamNames"), "parameter names")

    def __repr__(self) -> str:
        return f"MasterClient({self.uri!r}, caller_id={self.caller_id!r})"
