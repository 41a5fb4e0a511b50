"""Targets for the ROS 1 network parsers: TCPROS framing and XML-RPC (slave server, master client).

Everything stays on this machine: the XML-RPC client target talks to a stand-in HTTP server
on 127.0.0.1 that answers each request with the fuzzed bytes, and the server target hands
fuzzed request bodies to a real :class:`polybag.net.ros1.Node`'s XML-RPC dispatcher.  No
input can make either side connect anywhere else (no subscriptions exist, so
``publisherUpdate`` URIs are never dialed).
"""

from __future__ import annotations

import gzip
import logging
import random
import socket
import struct
import threading
import xmlrpc.client
from collections.abc import Sequence
from typing import Any

from fuzz.mutate import generic, interesting, odd_name
from fuzz.targets import Stats, Target, attempt, pack, unpack

# ------------------------------------------------------------------------------ TCPROS


class FakeSocket:
    """A socket whose ``recv`` returns the fuzzed stream in fuzzed pieces (and may fail)."""

    def __init__(self, data: bytes, steps: bytes, fail: int) -> None:
        self.data = data
        self.pos = 0
        self.steps = steps or b"\xff"
        self.k = 0
        self.fail = fail

    def recv(self, n: int) -> bytes:
        if self.fail and self.pos >= len(self.data):
            raise (TimeoutError("timed out") if self.fail == 1 else ConnectionResetError(104, "reset"))
        step = max(1, self.steps[self.k % len(self.steps)] * 37)
        self.k += 1
        out = self.data[self.pos : self.pos + min(n, step)]
        self.pos += len(out)
        return out

    def getpeername(self) -> tuple[str, int]:
        return ("127.0.0.1", 11311)


def _header_fields(rng: random.Random) -> dict[str, bytes]:
    keys = ["callerid", "topic", "md5sum", "type", "message_definition", "latching", "tcp_nodelay", "error"]
    out = {}
    for _ in range(rng.choice((0, 1, 3, 6))):
        k = rng.choice(keys) if rng.random() < 0.8 else odd_name(rng).replace("=", "") or "k"
        out[k] = rng.choice((b"", b"/chatter", b"*", b"=", odd_name(rng).encode("utf-8", "surrogatepass")))
    return out


class TcprosTarget(Target):
    name = "tcpros"
    doc = "TCPROS: connection header parsing (decode_header, read_header) and message framing (read_message)"

    def setup(self) -> None:
        self.info["seeds"] = 0

    def generate(self, rng: random.Random, pool: Sequence[bytes]) -> bytes:
        from polybag.net.ros1 import TcprosError
        from polybag.net.ros1.tcpros import encode_header, frame

        if pool and rng.random() < 0.3:
            got = unpack(rng.choice(pool))
            if got is not None and len(got[1]) == 3:
                parts = list(got[1])
                parts[1] = generic(rng, parts[1])
                return pack(b"TC", parts)
        try:
            header = encode_header(_header_fields(rng))
        except TcprosError:
            header = struct.pack("<I", 0)
        stream = bytearray(header)
        for _ in range(rng.choice((0, 1, 2, 5))):
            stream += frame(rng.randbytes(rng.choice((0, 1, 4, 100, 5000))))
        data = bytes(stream)
        if rng.random() < 0.7:
            # lying lengths: the header length, a field length or a message length
            positions = [0] + [i for i in range(4, len(data) - 3) if rng.random() < 0.05]
            i = rng.choice(positions)
            cur = int.from_bytes(data[i : i + 4], "little")
            data = data[:i] + interesting(rng, 4, cur, len(data)).to_bytes(4, "little") + data[i + 4 :]
        if rng.random() < 0.3:
            data = generic(rng, data)
        mode = bytes([rng.randrange(4)])
        return pack(b"TC", [mode, data, rng.randbytes(rng.choice((1, 2, 5)))])

    def run(self, data: bytes, stats: Stats) -> None:
        from polybag.net.ros1.tcpros import (
            BufferedSocket,
            decode_header,
            encode_header,
            read_header,
            read_message,
        )

        got = unpack(data)
        if got is None or len(got[1]) != 3:
            return
        mode_b, stream, steps = got[1]
        mode = mode_b[0] if mode_b else 0
        fields = attempt(lambda: decode_header(stream[4:], peer="fuzz"))
        if fields is not None:
            stats.mark("fields", len(fields))
            # what parses must survive the round trip
            names_ok = all(k and "=" not in k for k in fields)
            if names_ok:
                again = decode_header(encode_header(fields)[4:])
                assert again == fields, f"header round trip changed {fields!r} into {again!r}"
        sock: Any = FakeSocket(stream, steps, mode & 1 and (mode >> 1) + 1)
        if mode & 2:
            sock = BufferedSocket(sock)
        max_header = (1 << 24) if mode < 2 else 1 << 12
        if attempt(lambda: read_header(sock, max_header)) is None:
            return
        n = 0
        while n < 10000:
            msg = attempt(lambda: read_message(sock, 1 << 20 if mode & 1 else 1 << 26))
            if msg is None:
                break
            n += 1
        stats.mark("messages", n)


# ------------------------------------------------------------------------------ XML-RPC
SLAVE_METHODS = (
    "getBusStats", "getBusInfo", "getMasterUri", "shutdown", "getPid", "getSubscriptions", "getPublications",
    "paramUpdate", "publisherUpdate", "requestTopic", "nope", "_dispatch", "__init__", "system.listMethods",
)
MASTER_CALLS = (
    "register_subscriber", "unregister_subscriber", "register_publisher", "unregister_publisher",
    "get_published_topics", "get_topic_types", "get_system_state", "lookup_node", "get_uri", "get_param",
    "has_param", "get_param_names",
)


def _value(rng: random.Random, depth: int = 0) -> Any:
    r = rng.random()
    if depth > 3 or r < 0.3:
        return rng.choice(("", "/chatter", "http://127.0.0.1:1/", odd_name(rng).replace("\x00", ""), "TCPROS"))
    if r < 0.5:
        return rng.choice((0, 1, -1, 2**31 - 1, -(2**31), 65535))
    if r < 0.55:
        return rng.choice((True, False, 1.5, float("inf")))
    if r < 0.6:
        return xmlrpc.client.Binary(rng.randbytes(rng.choice((0, 3, 40))))
    if r < 0.85:
        return [_value(rng, depth + 1) for _ in range(rng.choice((0, 1, 2, 3)))]
    return {rng.choice(("a", "b", "")): _value(rng, depth + 1) for _ in range(rng.choice((0, 1, 2)))}


_HOSTILE_XML = (
    b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">'
    b'<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;"><!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">'
    b'<!ENTITY e "&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;"><!ENTITY f "&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;">]>'
    b"<methodCall><methodName>getPid</methodName><params><param><value><string>&f;&f;&f;</string>"
    b"</value></param></params></methodCall>",
    b"<methodCall><methodName>getPid</methodName><params><param>"
    + b"<value><array><data>" * 3000
    + b"</data></array></value>" * 3000
    + b"</param></params></methodCall>",
    b"<methodCall><methodName>getPid</methodName><params><param><value><int>99999999999999999999</int>"
    b"</value></param></params></methodCall>",
    b"<methodCall><methodName>\xff\xfe</methodName></methodCall>",
    b"<methodResponse><params><param><value><array><data><value><i4>1</i4></value><value>x</value>"
    b"<value><array><data/></array></value></data></array></value></param></params></methodResponse>",
    b"<methodResponse><fault><value><struct><member><name>faultCode</name><value><int>1</int></value></member>"
    b"</struct></value></fault></methodResponse>",
    b"<methodResponse><params><param><value><dateTime.iso8601>nonsense</dateTime.iso8601></value></param>"
    b"</params></methodResponse>",
    b"<methodResponse><params><param><value><base64>!!!</base64></value></param></params></methodResponse>",
    b"<methodResponse><params><param><value><double>nan</double></value></param></params></methodResponse>",
    b"<methodResponse><params></params></methodResponse>",
    b"",
)


class _FakeHttpServer:
    """A stand-in XML-RPC peer on 127.0.0.1: answers every request with ``self.response``."""

    def __init__(self) -> None:
        self.response = b""
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.closed = False
        self.thread = threading.Thread(target=self._serve, daemon=True, name="fuzz-xmlrpc-peer")
        self.thread.start()

    def _serve(self) -> None:
        while not self.closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                try:
                    buf = b""
                    while b"\r\n\r\n" not in buf and len(buf) < 1 << 16:
                        more = conn.recv(65536)
                        if not more:
                            break
                        buf += more
                    head, _, body = buf.partition(b"\r\n\r\n")
                    want = 0
                    for line in head.split(b"\r\n"):
                        if line.lower().startswith(b"content-length:"):
                            want = int(line.split(b":", 1)[1].strip() or 0)
                    while len(body) < want:
                        more = conn.recv(65536)
                        if not more:
                            break
                        body += more
                    conn.sendall(self.response)
                    conn.shutdown(socket.SHUT_WR)
                except OSError:
                    pass

    def close(self) -> None:
        self.closed = True
        try:
            self.sock.close()
        except OSError:
            pass


def _http(rng: random.Random, body: bytes) -> bytes:
    r = rng.random()
    status = b"HTTP/1.1 200 OK\r\n" if r < 0.85 else rng.choice(
        (b"HTTP/1.1 500 Oops\r\n", b"HTTP/1.0 302 Found\r\nLocation: http://127.0.0.1:1/\r\n", b"HTTP/9 abc\r\n", b"")
    )
    headers = [b"Content-Type: text/xml"]
    k = rng.random()
    if k < 0.1:
        body = gzip.compress(body if rng.random() < 0.5 else bytes(rng.choice((1 << 20, 64 << 20))), 1)
        headers.append(b"Content-Encoding: gzip")
    elif k < 0.15:
        headers.append(b"Content-Encoding: " + rng.choice((b"gzip", b"br", b"identity")))
    if rng.random() < 0.15:
        headers.append(b"Transfer-Encoding: chunked")
        size = rng.choice((len(body), len(body) + 10, 0, 0xFFFFFFFF))
        body = b"%x\r\n" % size + body + b"\r\n0\r\n\r\n"
    else:
        n = len(body) if rng.random() < 0.8 else rng.choice((0, len(body) + 100, len(body) // 2, 2**40))
        headers.append(b"Content-Length: %d" % n)
    headers.append(b"Connection: close")
    return status + b"\r\n".join(headers) + b"\r\n\r\n" + body


class XmlrpcTarget(Target):
    name = "xmlrpc"
    doc = (
        "XML-RPC: requests to a Node's slave API (dispatcher and every method) and answers read by "
        "the master client (xmlrpc_call, MasterClient), served from a stand-in peer on 127.0.0.1"
    )

    def setup(self) -> None:
        logging.getLogger("polybag.net.ros1").setLevel(logging.CRITICAL + 1)
        self.node: Any = None
        self.server = _FakeHttpServer()
        self.info["seeds"] = len(_HOSTILE_XML)

    def teardown(self) -> None:
        if self.node is not None:
            self.node.close(flush_timeout=0)
        self.server.close()

    def _node(self) -> Any:
        from polybag.net.ros1 import Node

        if self.node is None or self.node.closed or self.node.shutdown_requested.is_set():
            if self.node is not None:
                self.node.close(flush_timeout=0)
            self.node = Node("/fuzz", master_uri="http://127.0.0.1:9/", host="127.0.0.1", anonymous=True)
        return self.node

    def generate(self, rng: random.Random, pool: Sequence[bytes]) -> bytes:
        if pool and rng.random() < 0.3:
            got = unpack(rng.choice(pool))
            if got is not None and len(got[1]) == 2:
                return pack(b"XR", [got[1][0], generic(rng, got[1][1])])
        server_side = rng.random() < 0.5
        if rng.random() < 0.1:
            body = rng.choice(_HOSTILE_XML)
        elif server_side:
            method = rng.choice(SLAVE_METHODS)
            params = tuple(_value(rng) for _ in range(rng.choice((0, 1, 2, 3, 4))))
            try:
                body = xmlrpc.client.dumps(params, methodname=method).encode()
            except (OverflowError, TypeError, ValueError):
                body = b""
        else:
            value = rng.choice(
                (
                    [1, "ok", _value(rng)],
                    [1, "ok", [_value(rng), _value(rng)]],
                    [rng.choice((0, -1, 2)), "no", 0],
                    _value(rng),
                    [1, "ok", [["/a", "t"], ["/b"]]],
                    [1, "ok", [[], [], []]],
                )
            )
            try:
                body = xmlrpc.client.dumps((value,), methodresponse=True).encode()
            except (OverflowError, TypeError, ValueError):
                body = b""
        if rng.random() < 0.3:
            body = generic(rng, body)
        if server_side:
            return pack(b"XR", [b"S", body])
        return pack(b"XR", [b"C" + bytes([rng.randrange(len(MASTER_CALLS))]), _http(rng, body)])

    def run(self, data: bytes, stats: Stats) -> None:
        from polybag.net.ros1 import MasterClient

        got = unpack(data)
        if got is None or len(got[1]) != 2 or not got[1][0]:
            return
        mode, body = got[1]
        if mode[:1] == b"S":
            node = self._node()
            resp = node._xmlrpc.dispatch_xml(body)
            # whatever came in, what goes out is a well-formed XML-RPC answer (or a fault)
            try:
                xmlrpc.client.loads(resp)
                stats.mark("answer")
            except xmlrpc.client.Fault:
                stats.mark("fault")
            return
        self.server.response = body
        which = MASTER_CALLS[mode[1] % len(MASTER_CALLS)] if len(mode) > 1 else MASTER_CALLS[0]
        client = MasterClient(f"http://127.0.0.1:{self.server.port}/", "/fuzz", timeout=10.0)
        client.caller_api = "http://127.0.0.1:1/"
        args = {
            "register_subscriber": ("/t", "std_msgs/String"),
            "register_publisher": ("/t", "std_msgs/String"),
            "unregister_subscriber": ("/t",),
            "unregister_publisher": ("/t",),
            "lookup_node": ("/n",),
            "get_param": ("/p",),
            "has_param": ("/p",),
        }.get(which, ())
        if attempt(lambda: getattr(client, which)(*args)) is not None:
            stats.mark(f"ok-{which}")
