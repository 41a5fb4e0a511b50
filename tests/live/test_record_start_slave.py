"""The ROS 1 node's slave XML-RPC server without ``xmlrpc.server`` (issue 28: its ``pydoc``,
``http.server`` and ``html`` were a tenth of ``polybag record``'s start; the node now answers
HTTP/1.0 ``POST /`` itself, on ``socketserver``).  Peers are untrusted: every limit of
:class:`polybag.net.ros1.slave.SlaveHandler` is exercised with a hostile request, and the node
answers normal calls afterwards.  No master is needed (the calls go to the node directly);
the interoperation with rosmaster, rospy and roscpp is ``tests/live/test_net_ros1.py``'s."""

from __future__ import annotations

import gzip
import os
import socket
import subprocess
import sys
import xmlrpc.client
from collections.abc import Iterator

import pytest

from polybag.net.ros1 import Node
from polybag.net.ros1.slave import MAX_HEADERS, MAX_LINE, MAX_REQUEST


@pytest.fixture
def node() -> Iterator[Node]:
    # (a master that is not there: the node serves its slave API all the same)
    with Node("/slave_test", "http://127.0.0.1:9/", anonymous=True) as n:
        yield n


def _raw(node: Node, data: bytes) -> bytes:
    """Send ``data`` to the node's XML-RPC port; everything it answers until it closes."""
    port = int(node.uri.rsplit(":", 1)[1].strip("/"))
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
        except OSError:  # (it may answer and close before reading everything)
            pass
        out = b""
        while True:
            try:
                piece = s.recv(65536)
            except ConnectionResetError:
                break
            if not piece:
                break
            out += piece
    return out


def _status(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


def _post(body: bytes, path: str = "/", extra: str = "") -> bytes:
    return f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: text/xml\r\n{extra}Content-Length: {len(body)}\r\n\r\n".encode() + body


def _call_body(method: str, *args: object) -> bytes:
    return xmlrpc.client.dumps(args, method).encode()


def _works(node: Node) -> None:
    proxy = xmlrpc.client.ServerProxy(node.uri)
    assert proxy.getPid("/t") == [1, "", os.getpid()]
    assert proxy.getBusInfo("/t") == [1, "bus info", []]


def test_calls_answers_and_faults(node):
    _works(node)
    proxy = xmlrpc.client.ServerProxy(node.uri)
    with pytest.raises(xmlrpc.client.Fault, match="unknown method"):
        proxy.noSuchMethod("/t")
    assert proxy.getPid()[0] == -1  # (wrong arguments: an error answer, not a crash)
    answer = _raw(node, _post(_call_body("getPid", "/t"), path="/RPC2"))
    assert _status(answer) == 200 and b"Content-length: " in answer and answer.endswith(b"</methodResponse>\n")
    # a gzip body is read (bounded, below)
    body = gzip.compress(_call_body("getPid", "/t"))
    answer = _raw(node, _post(body, extra="Content-Encoding: gzip\r\n"))
    assert _status(answer) == 200 and str(os.getpid()).encode() in answer


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", 501),
        (_post(b"<x/>", path="/other"), 404),
        (b"POST / HTTP/1.1\r\nHost: x\r\n\r\n", 411),
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 411),
        (f"POST / HTTP/1.1\r\nContent-Length: {MAX_REQUEST + 1}\r\n\r\n".encode(), 413),
        (b"POST / HTTP/1.1\r\nContent-Length: -5\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n", 413),
        (b"NONSENSE\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nno colon here\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nX: " + b"a" * (MAX_LINE + 10) + b"\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\n" + b"X: y\r\n" * (MAX_HEADERS + 5) + b"\r\n", 400),
        (b"POST " + b"/" * (MAX_LINE + 10) + b" HTTP/1.1\r\n\r\n", 400),
        (_post(b"not gzip", extra="Content-Encoding: gzip\r\n"), 400),
        (_post(gzip.compress(b"\0" * (MAX_REQUEST + 1)), extra="Content-Encoding: gzip\r\n"), 413),
        (_post(b"<x/>", extra="Content-Encoding: br\r\n"), 501),
    ],
)
def test_hostile_requests_get_an_http_error(node, request_bytes, status):
    assert _status(_raw(node, request_bytes)) == status
    _works(node)


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"<not xml",
        b"<?xml version='1.0'?><methodCall><params></params></methodCall>",  # no method name
        b"<?xml version='1.0'?><methodCall><methodName>getPid</methodName><params><param><value><int>x</int></value></param></params></methodCall>",
        b"<methodCall>" + b"<value><array><data>" * 5000,  # (deep nesting, cut)
        _call_body("publisherUpdate", "/t", "/topic", "not a list"),
        _call_body("requestTopic", "/t", "/nothing", [["TCPROS"]]),
    ],
)
def test_bad_xml_rpc_gets_a_fault_or_an_error_answer(node, body):
    answer = _raw(node, _post(body))
    assert _status(answer) == 200
    payload = answer.split(b"\r\n\r\n", 1)[1]
    params, _method = xmlrpc.client.loads(payload) if b"<fault>" not in payload else ((None,), None)
    assert b"<fault>" in payload or params[0][0] != 1  # (never taken for a success)
    _works(node)


def test_a_silent_or_cut_peer_does_not_stop_the_node(node):
    port = int(node.uri.rsplit(":", 1)[1].strip("/"))
    with socket.create_connection(("127.0.0.1", port), timeout=30):  # connects, says nothing
        _works(node)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:  # a body cut short
        s.sendall(_post(b"x" * 1000)[:-500])
        s.shutdown(socket.SHUT_WR)
        assert s.recv(100) == b""
    _works(node)


def test_the_node_imports_no_xmlrpc_server():
    code = (
        "import sys\n"
        "from polybag.net.ros1 import Node\n"
        "with Node('/x', 'http://127.0.0.1:9/', anonymous=True) as n:\n"
        "    pass\n"
        "print(sorted(m for m in ('xmlrpc.server', 'pydoc', 'http.server', 'html') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
