"""A client of the ROS 1 master's XML-RPC API (registration, graph state, parameters)."""

from __future__ import annotations

import http.client
import os
import reprlib
import xmlrpc.client
import zlib
from typing import TYPE_CHECKING, Any

from polybag.net.ros1.errors import RosGraphError

if TYPE_CHECKING:
    from _typeshed import SizedBuffer

DEFAULT_MASTER_URI = "http://localhost:11311"
#: Seconds an XML-RPC call (to the master or a peer) may take.
DEFAULT_TIMEOUT = 10.0
#: Largest XML-RPC answer read (after gzip decoding); a peer's Content-Length or chunk size is
#: never used to size a buffer (Python's http.client allocates what the peer declares).
MAX_ANSWER = 64 * 1024 * 1024

_show = reprlib.Repr()
_show.maxlevel = 4
_show.maxstring = 120
_show.maxother = 120


def brief(value: Any) -> str:
    """A short repr of a peer's value (bounded depth: answers may nest thousands deep)."""
    try:
        return _show.repr(value)[:200]
    except Exception:  # noqa: BLE001 - only for an error message
        return f"<{type(value).__name__}>"


class UnreachableError(RosGraphError):
    """The XML-RPC peer (the master, a publisher) could not be reached at all: refused, reset,
    timed out.  Worth retrying later, unlike an answer that says no."""


class _AnswerTooBig(xmlrpc.client.Error):
    pass


def _read_bounded(response: http.client.HTTPResponse, limit: int) -> bytes:
    out = bytearray()
    while True:
        piece = response.read(1 << 16)
        if not piece:
            return bytes(out)
        out += piece
        if len(out) > limit:
            raise _AnswerTooBig(f"answer larger than {limit} bytes")


class _TimeoutTransport(xmlrpc.client.Transport):
    def __init__(self, timeout: float) -> None:
        super().__init__()
        self._timeout = timeout

    def make_connection(self, host: Any) -> http.client.HTTPConnection:
        conn = super().make_connection(host)
        conn.timeout = self._timeout
        return conn

    def single_request(self, host: Any, handler: str, request_body: SizedBuffer, verbose: bool = False) -> Any:
        # as xmlrpc.client.Transport.single_request, without reading an error answer's body
        # (its declared length would be allocated at once)
        try:
            conn = self.send_request(host, handler, request_body, verbose)
            resp = conn.getresponse()
            if resp.status == 200:
                self.verbose = verbose
                return self.parse_response(resp)
        except xmlrpc.client.Fault:
            raise
        except Exception:
            self.close()
            raise
        self.close()
        raise xmlrpc.client.ProtocolError(host + handler, resp.status, resp.reason, {})

    def parse_response(self, response: Any) -> Any:
        data = _read_bounded(response, MAX_ANSWER)
        if response.getheader("Content-Encoding", "") == "gzip":
            d = zlib.decompressobj(wbits=31)
            data = d.decompress(data, MAX_ANSWER)
            if d.unconsumed_tail:
                raise _AnswerTooBig(f"gzip answer expands past {MAX_ANSWER} bytes")
        p, u = self.getparser()
        p.feed(data)
        p.close()
        return u.close()


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
        raise UnreachableError(f"{label}: cannot reach {uri} ({method}): {exc}") from None
    except xmlrpc.client.Fault as exc:
        raise RosGraphError(f"{label}: {method} failed at {uri}: {brief(exc.faultString)}") from None
    except RecursionError:
        raise RosGraphError(f"{label}: {method} at {uri}: the answer nests too deep") from None
    except MemoryError:
        raise RosGraphError(f"{label}: {method} at {uri}: the answer does not fit in memory") from None
    except Exception as exc:  # noqa: BLE001 - whatever a peer's bytes make the XML/HTTP parsers raise
        # (ExpatError, http.client errors, zlib.error, EOFError, TypeError from a fault
        # without its members, ValueError from a bad number...)
        raise RosGraphError(
            f"{label}: bad XML-RPC answer from {uri} ({method}): {type(exc).__name__}: {brief(str(exc))}"
        ) from None
    if not isinstance(answer, (list, tuple)) or len(answer) != 3 or not isinstance(answer[0], int):
        raise RosGraphError(
            f"{label}: {method} at {uri} answered {brief(answer)}, not [code, status, value]"
        )
    code, status, value = answer
    if code != 1:
        raise RosGraphError(f"{label}: {method} failed at {uri} (code {code}): {brief(status)}")
    return value


def _str_list(value: Any, what: str) -> list[str]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise RosGraphError(f"master answered {brief(value)} for {what}, expected a list of strings")
    return list(value)


def _pairs(value: Any, what: str) -> list[tuple[str, str]]:
    out = []
    if not isinstance(value, (list, tuple)):
        raise RosGraphError(f"master answered {brief(value)} for {what}, expected a list of pairs")
    for item in value:
        if not isinstance(item, (list, tuple)) or len(item) != 2 or not all(isinstance(v, str) for v in item):
            raise RosGraphError(f"master answered {brief(item)} in {what}, expected [name, type]")
        out.append((item[0], item[1]))
    return out


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise RosGraphError(f"master answered {brief(value)} for {what}, expected an integer")
    return value


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
        return _int(self.call("unregisterSubscriber", topic, self._api(caller_api)), "unregisterSubscriber")

    def register_publisher(self, topic: str, type: str, caller_api: str | None = None) -> list[str]:
        """Register a publication; the XML-RPC URIs of the topic's current subscribers."""
        return _str_list(self.call("registerPublisher", topic, type, self._api(caller_api)), "subscribers")

    def unregister_publisher(self, topic: str, caller_api: str | None = None) -> int:
        return _int(self.call("unregisterPublisher", topic, self._api(caller_api)), "unregisterPublisher")

    # graph state
    def get_published_topics(self, subgraph: str = "") -> list[tuple[str, str]]:
        return _pairs(self.call("getPublishedTopics", subgraph), "published topics")

    def get_topic_types(self) -> list[tuple[str, str]]:
        return _pairs(self.call("getTopicTypes"), "topic types")

    def get_system_state(self) -> tuple[list[Any], list[Any], list[Any]]:
        """``(publishers, subscribers, services)``, each a list of ``[name, [node, ...]]``."""
        value = self.call("getSystemState")
        if (
            not isinstance(value, (list, tuple))
            or len(value) != 3
            or not all(isinstance(v, list) for v in value)
        ):
            raise RosGraphError(f"master answered {brief(value)} for the system state")
        return value[0], value[1], value[2]

    def lookup_node(self, name: str) -> str:
        value = self.call("lookupNode", name)
        if not isinstance(value, str):
            raise RosGraphError(f"master answered {brief(value)} for node {name}")
        return value

    def get_uri(self) -> str:
        value = self.call("getUri")
        if not isinstance(value, str):
            raise RosGraphError(f"master answered {brief(value)} for its URI")
        return value

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
