"""polybag.net.ros1: TCPROS framing (unit, hypothesis) and a live ROS 1 graph (rosmaster, rostopic)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
import xmlrpc.client
import xmlrpc.server
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from polybag.errors import PolybagError
from polybag.net.ros1 import (
    BufferedSocket,
    MasterClient,
    Node,
    Ros1Message,
    RosGraphError,
    TcprosError,
    decode_header,
    encode_header,
    frame,
    read_header,
    read_message,
)

STRING_MD5 = "992ce8a1687cec8c8bd883ec73ca41d1"
STRING_DEF = "string data\n"


def ser_string(s: str) -> bytes:
    raw = s.encode()
    return struct.pack("<I", len(raw)) + raw


def wait_until(pred: Callable[[], Any], timeout: float = 15.0, what: str = "condition") -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


# --------------------------------------------------------------------------- unit: framing

field_names = st.text(
    alphabet=st.characters(blacklist_characters="=", blacklist_categories=("Cs",)), min_size=1, max_size=20
)
field_values = st.one_of(st.binary(max_size=64), st.text(max_size=40))


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(field_names, field_values, max_size=8))
def test_header_round_trip(fields: dict[str, str | bytes]) -> None:
    raw = encode_header(fields)
    assert struct.unpack_from("<I", raw)[0] == len(raw) - 4
    expected = {k: v.encode() if isinstance(v, str) else v for k, v in fields.items()}
    assert decode_header(raw[4:]) == expected
    a, b = socket.socketpair()
    with a, b:
        a.sendall(raw)
        a.shutdown(socket.SHUT_WR)
        assert read_header(b) == expected


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_decode_header_malformed_raises_only_polybag_errors(data: bytes) -> None:
    try:
        fields = decode_header(data)
    except TcprosError as exc:
        assert isinstance(exc, PolybagError)
        assert exc.offset is not None and 0 <= exc.offset <= len(data)
    else:
        assert encode_header(fields)[4:] == data  # a valid header re-encodes to the same bytes


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300), st.integers(min_value=0, max_value=64))
def test_stream_readers_malformed_input(data: bytes, limit: int) -> None:
    """Whatever a peer sends (then closes): messages of at most `limit` bytes, None at EOF, or TcprosError."""
    a, b = socket.socketpair()
    with a, b:
        a.sendall(data)
        a.shutdown(socket.SHUT_WR)
        try:
            read_header(b, max_size=limit)
        except TcprosError:
            pass
        got = 0
        while True:
            try:
                msg = read_message(b, max_size=limit)
            except TcprosError:
                break
            if msg is None:
                break
            assert len(msg) <= limit
            got += 1
            assert got <= len(data)


def test_lying_lengths_are_capped_before_allocation() -> None:
    a, b = socket.socketpair()
    with a, b:
        a.sendall(struct.pack("<I", 0xFFFFFFFF) + b"xx")
        with pytest.raises(TcprosError, match="exceeds the limit"):
            read_message(b, max_size=1024)
    a, b = socket.socketpair()
    with a, b:
        a.sendall(struct.pack("<I", 10_000_000))
        with pytest.raises(TcprosError, match="connection header length 10000000 exceeds"):
            read_header(b, max_size=4096)


def test_frame_and_eof() -> None:
    assert frame(b"abc") == b"\x03\x00\x00\x00abc"
    a, b = socket.socketpair()
    with a, b:
        a.sendall(frame(b"one") + frame(b"") + frame(b"three") + b"\x09\x00\x00\x00par")
        a.shutdown(socket.SHUT_WR)
        assert read_message(b) == b"one"
        assert read_message(b) == b""
        assert read_message(b) == b"three"
        with pytest.raises(TcprosError, match="closed 3 bytes into message of 9 bytes"):
            read_message(b)
    a, b = socket.socketpair()
    with a, b:
        a.shutdown(socket.SHUT_WR)
        assert read_message(b) is None
        with pytest.raises(TcprosError, match="before the connection header"):
            read_header(b)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=70_000), max_size=12), st.integers(min_value=1, max_value=100_000))
def test_buffered_socket_reads_every_message(payloads: list[bytes], chunk: int) -> None:
    wire = encode_header({"topic": "/t"}) + b"".join(frame(p) for p in payloads)
    a, b = socket.socketpair()

    def write() -> None:
        for i in range(0, len(wire), chunk):
            a.sendall(wire[i : i + chunk])
        a.shutdown(socket.SHUT_WR)

    t = threading.Thread(target=write, daemon=True)
    t.start()
    with a, b:
        reader = BufferedSocket(b)
        assert read_header(reader) == {"topic": b"/t"}
        got = []
        while (msg := read_message(reader)) is not None:
            got.append(msg)
        t.join(30)
    assert got == payloads


def test_encode_header_rejects_bad_names() -> None:
    with pytest.raises(TcprosError):
        encode_header({"a=b": "c"})
    with pytest.raises(TcprosError):
        encode_header({"": "c"})


def test_unreachable_master_is_a_polybag_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connection refused
        client = MasterClient(f"http://127.0.0.1:{port}", "/t", timeout=5)
        with pytest.raises(RosGraphError, match="cannot reach"):
            client.get_system_state()
    with pytest.raises(RosGraphError, match="not an http"):
        MasterClient("ftp://x", "/t").get_system_state()


def test_node_without_master_closes_cleanly() -> None:
    before = threading.active_count()
    node = Node("/lonely", "http://127.0.0.1:9", anonymous=True)
    assert node.uri.startswith("http://127.0.0.1:")
    with pytest.raises(RosGraphError):
        node.subscribe("/x", lambda m: None)
    # the slave API answers even without a master
    proxy = xmlrpc.client.ServerProxy(node.uri)
    assert proxy.getPid("/t") == [1, "", os.getpid()]
    assert proxy.getSubscriptions("/t") == [1, "subscriptions", []]
    assert proxy.requestTopic("/t", "/nope", [["TCPROS"]])[0] == -1
    # garbage from a peer gets an error answer, and the server keeps serving
    assert proxy.publisherUpdate("/t", "/x", "not a list")[0] == -1
    assert proxy.publisherUpdate("/t", "/x", [1, 2])[0] == -1
    assert proxy.requestTopic("/t")[0] == -1
    assert proxy.requestTopic("/t", 5, {"a": 1})[0] == -1
    with pytest.raises(xmlrpc.client.Fault):
        proxy.noSuchMethod("/t")
    with socket.create_connection(
        ("127.0.0.1", int(node.uri.rsplit(":", 1)[1].strip("/"))), timeout=10
    ) as raw:
        raw.sendall(b"POST / HTTP/1.0\r\nContent-Length: 5\r\n\r\n<<<<<")
        answer = b""
        while chunk := raw.recv(4096):
            answer += chunk
        assert b"<fault>" in answer
    assert proxy.getMasterUri("/t") == [1, "", "http://127.0.0.1:9"]
    node.close()
    node.close()  # idempotent
    assert threading.active_count() <= before
    with pytest.raises(RosGraphError, match="closed"):
        node.advertise("/y", "std_msgs/String", STRING_MD5, STRING_DEF)


# --------------------------------------------------------------------------- live graph

HAVE_ROS = bool(shutil.which("rosmaster") and shutil.which("rostopic"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Graph:
    def __init__(self, tmp: str) -> None:
        self.port = _free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        self.env = dict(
            os.environ,
            ROS_MASTER_URI=self.uri,
            ROS_HOSTNAME="127.0.0.1",
            ROS_IP="127.0.0.1",
            ROS_HOME=tmp,
            ROS_LOG_DIR=tmp,
        )
        self.tmp = tmp
        self.procs: list[subprocess.Popen] = []
        self.master = MasterClient(self.uri, "/test", timeout=5)

    def start(self, cmd: list[str], **kw: Any) -> subprocess.Popen:
        kw.setdefault("stdout", subprocess.DEVNULL)
        kw.setdefault("stderr", subprocess.DEVNULL)
        p = subprocess.Popen(cmd, env=self.env, cwd=self.tmp, **kw)
        self.procs.append(p)
        return p

    def node(self, name: str) -> Node:
        return Node(name, self.uri, host="127.0.0.1", anonymous=True)

    def stop(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def publishers_of(self, topic: str) -> list[str]:
        pubs, _, _ = self.master.get_system_state()
        return next((nodes for name, nodes in pubs if name == topic), [])

    def subscribers_of(self, topic: str) -> list[str]:
        _, subs, _ = self.master.get_system_state()
        return next((nodes for name, nodes in subs if name == topic), [])


def _master_up(g: Graph) -> bool:
    try:
        g.master.get_system_state()
        return True
    except RosGraphError:
        return False


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Graph]:
    if not HAVE_ROS:
        pytest.skip("Debian ROS 1 tools not installed")
    g = Graph(str(tmp_path_factory.mktemp("ros")))
    try:
        g.start(["rosmaster", "--core", "-p", str(g.port)])
        wait_until(lambda: _master_up(g), 20, "rosmaster")
        yield g
    finally:
        g.stop()


class Collector:
    def __init__(self) -> None:
        self.messages: list[Ros1Message] = []
        self.lock = threading.Lock()

    def __call__(self, msg: Ros1Message) -> None:
        with self.lock:
            self.messages.append(msg)

    def __len__(self) -> int:
        with self.lock:
            return len(self.messages)

    def datas(self) -> list[bytes]:
        with self.lock:
            return [m.data for m in self.messages]


@pytest.mark.live
@pytest.mark.skipif(not HAVE_ROS, reason="Debian ROS 1 tools not installed")
def test_subscribe_to_rostopic_pub(graph: Graph) -> None:
    got = Collector()
    with graph.node("/listener") as node:
        sub = node.subscribe("/chatter", got, tcp_nodelay=True)
        graph.start(["rostopic", "pub", "-r", "20", "/chatter", "std_msgs/String", "data: hi"])
        wait_until(lambda: len(got) >= 3, 20, "3 messages from rostopic pub")
        assert sub.connections == 1
        msg = got.messages[0]
        assert msg.topic == "/chatter"
        assert msg.data == ser_string("hi")
        assert abs(msg.receive_time - time.time_ns()) < 60e9
        h = msg.connection
        assert h["type"] == "std_msgs/String"
        assert h["md5sum"] == STRING_MD5
        assert h["message_definition"].strip() == "string data"
        assert h["topic"] == "/chatter"
        assert h["callerid"].startswith("/rostopic")
        assert ("/chatter", "std_msgs/String") in node.topics()
        # a wrong md5sum gets ROS's error header: the connection is refused, the node lives on
        bad = node.subscribe("/chatter", got, md5sum="0" * 32, type="std_msgs/String")
        wait_until(lambda: bad.errors, 15, "md5 refusal")
        assert "refused" in bad.errors[0] and bad.connections == 0
        bad.close()
        n = len(got)
        wait_until(lambda: len(got) >= n + 2, 15, "more messages after a refused sibling")
        # the slave API reports the subscription
        proxy = xmlrpc.client.ServerProxy(node.uri)
        assert proxy.getSubscriptions("/t")[2] == [["/chatter", "*"]]
        info = proxy.getBusInfo("/t")[2]
        assert any(row[2] == "i" and row[4] == "/chatter" and row[5] for row in info)


@pytest.mark.live
@pytest.mark.skipif(not HAVE_ROS, reason="Debian ROS 1 tools not installed")
def test_rostopic_echo_receives_our_publisher_with_latching(graph: Graph) -> None:
    with graph.node("/talker") as node:
        pub = node.advertise("/x", "std_msgs/String", STRING_MD5, STRING_DEF, latch=True)
        pub.publish(ser_string("latched zero"))  # before anyone subscribed
        echo = graph.start(["rostopic", "echo", "-n", "3", "/x"], stdout=subprocess.PIPE, text=True)
        assert pub.wait_for_subscribers(1, timeout=20)
        pub.publish(ser_string("one"))
        pub.publish(ser_string("two"))
        out, _ = echo.communicate(timeout=20)
        assert echo.returncode == 0
        lines = [ln for ln in out.splitlines() if ln.startswith("data:")]
        assert lines == ['data: "latched zero"', 'data: "one"', 'data: "two"']
        # rostopic echo is gone: the publisher notices (peer closed) without publishing
        wait_until(lambda: pub.num_subscribers == 0, 15, "echo disconnect")


@pytest.mark.live
@pytest.mark.skipif(not HAVE_ROS, reason="Debian ROS 1 tools not installed")
def test_our_publisher_to_our_subscriber(graph: Graph) -> None:
    got = Collector()
    with graph.node("/a") as a, graph.node("/b") as b:
        pub = a.advertise("/ours", "std_msgs/String", STRING_MD5, STRING_DEF, latch=True, callerid="/bagged")
        pub.publish(ser_string("latched"))
        sub = b.subscribe("/ours", got, md5sum=STRING_MD5, type="std_msgs/String", tcp_nodelay=True)
        assert pub.wait_for_subscribers(1, timeout=15)
        wait_until(lambda: len(got) >= 1, 15, "latched message")
        for i in range(50):
            pub.publish(ser_string(f"m{i}"))
        wait_until(lambda: len(got) >= 51, 15, "50 messages")
        assert got.datas() == [ser_string("latched")] + [ser_string(f"m{i}") for i in range(50)]
        h = got.messages[0].connection
        assert h == {
            "callerid": "/bagged",
            "latching": "1",
            "md5sum": STRING_MD5,
            "message_definition": STRING_DEF,
            "topic": "/ours",
            "type": "std_msgs/String",
        }
        # TCP_NODELAY requested by the subscriber is set on the publisher's side of the connection
        link = pub._topic.links[0]
        assert link.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        assert sub.connections == 1
        # a second handle on the same topic shares the connections; a different md5 is refused
        pub2 = a.advertise("/ours", "std_msgs/String", STRING_MD5, STRING_DEF)
        assert pub2.num_subscribers == 1
        with pytest.raises(RosGraphError, match="already advertised"):
            a.advertise("/ours", "other/Type", "1" * 32, "int32 x\n")
        pub2.close()
        pub.publish(ser_string("still"))
        wait_until(lambda: len(got) >= 52, 15, "message after closing a second handle")
        # a subscriber with a wrong md5 gets an error header
        s = socket.create_connection(("127.0.0.1", a.tcpros_port), timeout=10)
        with s:
            s.sendall(
                encode_header({"callerid": "/bad", "topic": "/ours", "md5sum": "f" * 32, "type": "x/Y"})
            )
            reply = read_header(s)
        assert set(reply) == {"error"} and b"md5sum" in reply["error"]
        assert pub.errors


@pytest.mark.live
@pytest.mark.skipif(not HAVE_ROS, reason="Debian ROS 1 tools not installed")
def test_publisher_update_picks_up_late_publisher(graph: Graph) -> None:
    got = Collector()
    with graph.node("/early") as b:
        sub = b.subscribe("/late", got)
        assert sub.connections == 0
        with graph.node("/late_pub") as a:
            pub = a.advertise("/late", "std_msgs/String", STRING_MD5, STRING_DEF)
            assert pub.wait_for_subscribers(1, timeout=15)
            wait_until(lambda: sub.connections == 1, 15, "connection")
            pub.publish(ser_string("late"))
            wait_until(lambda: len(got) == 1, 15, "message from the late publisher")
        # the publisher node closed: unregistered, the master tells us, the connection goes
        wait_until(lambda: sub.connections == 0 and not sub.publishers, 15, "publisher removal")
    assert got.datas() == [ser_string("late")]


class FakePublisher:
    """A hand-made publisher (XML-RPC + TCPROS) that sends whatever bytes a test wants."""

    def __init__(self, payload: bytes, offer: list | None = None, stream: bool = False) -> None:
        self.payload = payload
        self.offer = offer
        self.stream = stream
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.tcp.settimeout(0.2)
        self.conns: list[socket.socket] = []
        self.headers: list[dict[str, bytes]] = []
        self.rpc = xmlrpc.server.SimpleXMLRPCServer(("127.0.0.1", 0), logRequests=False)
        self.rpc.register_function(self.request_topic, "requestTopic")
        self.uri = f"http://127.0.0.1:{self.rpc.server_address[1]}/"
        self.stop = threading.Event()
        self.threads = [
            threading.Thread(target=self.rpc.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True),
            threading.Thread(target=self.accept, daemon=True),
        ]
        for t in self.threads:
            t.start()

    def request_topic(self, caller_id: str, topic: str, protocols: list) -> list:
        if self.offer is not None:
            return [1, "", self.offer]
        return [1, "", ["TCPROS", "127.0.0.1", self.tcp.getsockname()[1]]]

    def accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.tcp.accept()
            except OSError:
                continue
            conn.settimeout(10)
            self.conns.append(conn)
            self.headers.append(read_header(conn))
            conn.sendall(
                encode_header({"callerid": "/fake", "md5sum": STRING_MD5, "type": "std_msgs/String"})
            )
            conn.sendall(self.payload)
            while self.stream and not self.stop.is_set():
                try:
                    conn.sendall(frame(ser_string("more")))
                except OSError:
                    break
                self.stop.wait(0.01)

    def close(self) -> None:
        self.stop.set()
        self.rpc.shutdown()
        self.rpc.server_close()
        for t in self.threads:
            t.join(10)
        for c in self.conns:
            c.close()
        self.tcp.close()


@pytest.mark.live
@pytest.mark.skipif(not HAVE_ROS, reason="Debian ROS 1 tools not installed")
def test_lying_publisher_drops_only_its_connection(graph: Graph) -> None:
    got = Collector()
    liar = FakePublisher(frame(ser_string("ok")) + struct.pack("<I", 0xFFFFFF00) + b"garbage")
    with graph.node("/victim") as b, graph.node("/honest") as a:
        try:
            pub = a.advertise("/lie", "std_msgs/String", STRING_MD5, STRING_DEF)
            sub = b.subscribe("/lie", got, max_message_size=1 << 20)
            assert pub.wait_for_subscribers(1, timeout=15)
            graph.master.register_publisher("/lie", "std_msgs/String", liar.uri)
            wait_until(lambda: sub.errors, 15, "the liar's connection error")
            assert "exceeds the limit" in sub.errors[0]
            assert got.datas() == [ser_string("ok")]
            assert liar.headers[0]["topic"] == b"/lie"
            # the honest publisher still gets through
            pub.publish(ser_string("honest"))
            wait_until(lambda: len(got) == 2, 15, "honest message")
            assert sub.connections == 1
        finally:
            graph.master.unregister_publisher("/lie", liar.uri)
            liar.close()


@pytest.mark.live
@pytest.mark.skipif(not HAVE_ROS, reason="Debian ROS 1 tools not installed")
def test_publisher_update_drops_unlisted_publisher(graph: Graph) -> None:
    """A publisher the master no longer lists is dropped even though its TCP stream stays open."""
    got = Collector()
    quiet = FakePublisher(frame(ser_string("first")))
    try:
        with graph.node("/watcher") as b:
            sub = b.subscribe("/quiet", got)
            graph.master.register_publisher("/quiet", "std_msgs/String", quiet.uri)
            wait_until(lambda: len(got) == 1 and sub.connections == 1, 15, "fake publisher connection")
            graph.master.unregister_publisher("/quiet", quiet.uri)
            wait_until(lambda: sub.connections == 0, 15, "drop after publisherUpdate")
            assert sub.errors == []
    finally:
        quiet.close()


@pytest.mark.live
@pytest.mark.skipif(not HAVE_ROS, reason="Debian ROS 1 tools not installed")
def test_garbage_to_tcpros_port_does_not_hurt_the_node(graph: Graph) -> None:
    with graph.node("/sturdy") as a:
        pub = a.advertise("/sturdy", "std_msgs/String", STRING_MD5, STRING_DEF)
        for junk in (struct.pack("<I", 0xFFFFFFFF), struct.pack("<I", 8) + b"\x07\x00\x00\x00abc", b"\x01"):
            with socket.create_connection(("127.0.0.1", a.tcpros_port), timeout=10) as s:
                s.sendall(junk)
                s.shutdown(socket.SHUT_WR)
                assert s.recv(100) == b""  # dropped without an answer
        wait_until(lambda: len(pub.errors) == 0 and pub.num_subscribers == 0, 5, "no links")
        got = Collector()
        with graph.node("/after") as b:
            b.subscribe("/sturdy", got)
            assert pub.wait_for_subscribers(1, timeout=15)
            pub.publish(ser_string("fine"))
            wait_until(lambda: len(got) == 1, 15, "message after garbage")


@pytest.mark.live
@pytest.mark.skipif(not HAVE_ROS, reason="Debian ROS 1 tools not installed")
def test_close_unregisters_and_joins(graph: Graph) -> None:
    before = {t.ident for t in threading.enumerate()}
    node = graph.node("/ephemeral")
    node.subscribe("/eph_in", lambda m: None)
    pub = node.advertise("/eph_out", "std_msgs/String", STRING_MD5, STRING_DEF)
    other = graph.node("/eph_peer")
    other.subscribe("/eph_out", lambda m: None)
    assert pub.wait_for_subscribers(1, timeout=15)
    assert node.name in graph.publishers_of("/eph_out")
    assert node.name in graph.subscribers_of("/eph_in")
    assert graph.master.lookup_node(node.name) == node.uri
    node.close()
    pubs, subs, _ = graph.master.get_system_state()
    assert not any(node.name in nodes for _, nodes in pubs + subs)
    with pytest.raises(RosGraphError):
        graph.master.lookup_node(node.name)
    other.close()
    leftover = [
        t for t in threading.enumerate() if t.ident not in before and t.name.startswith("polybag-ros1")
    ]
    assert leftover == []


@pytest.mark.live
@pytest.mark.skipif(not HAVE_ROS, reason="Debian ROS 1 tools not installed")
def test_slave_shutdown_request_closes_node(graph: Graph) -> None:
    node = graph.node("/doomed")
    node.advertise("/doomed_topic", "std_msgs/String", STRING_MD5, STRING_DEF)
    assert xmlrpc.client.ServerProxy(node.uri).shutdown("/test", "bye")[0] == 1
    assert node.shutdown_requested.wait(15)
    assert "bye" in node.shutdown_reason
    wait_until(lambda: node.name not in graph.publishers_of("/doomed_topic"), 15, "unregistration")
    node.close()
    assert node.closed


@pytest.mark.live
@pytest.mark.skipif(not HAVE_ROS, reason="Debian ROS 1 tools not installed")
def test_slow_subscriber_never_blocks_publish(graph: Graph) -> None:
    """A subscriber that stops reading fills its bounded queue: messages are dropped and counted."""
    with graph.node("/fast") as a:
        pub = a.advertise("/big", "std_msgs/String", STRING_MD5, STRING_DEF, queue_size=2)
        s = socket.create_connection(("127.0.0.1", a.tcpros_port), timeout=10)
        with s:
            s.sendall(encode_header({"callerid": "/sleepy", "topic": "/big", "md5sum": "*", "type": "*"}))
            assert read_header(s)["type"] == b"std_msgs/String"
            assert pub.wait_for_subscribers(1, timeout=15)
            payload = ser_string("x" * (1 << 20))
            for _ in range(100):  # 100 MiB into a peer that reads nothing
                pub.publish(payload)
            assert pub.dropped >= 50
            assert read_message(s, max_size=2 << 20) == payload  # what was sent is intact
        wait_until(lambda: pub.num_subscribers == 0, 15, "sleepy subscriber gone")


@pytest.mark.live
@pytest.mark.skipif(not HAVE_ROS, reason="Debian ROS 1 tools not installed")
def test_raising_callback_keeps_the_connection(graph: Graph) -> None:
    got = Collector()

    def callback(msg: Ros1Message) -> None:
        got(msg)
        raise ValueError("user bug")

    with graph.node("/p") as a, graph.node("/s") as b:
        pub = a.advertise("/boom", "std_msgs/String", STRING_MD5, STRING_DEF)
        sub = b.subscribe("/boom", callback)
        assert pub.wait_for_subscribers(1, timeout=15)
        pub.publish(ser_string("1"))
        pub.publish(ser_string("2"))
        wait_until(lambda: len(got) == 2, 15, "two messages despite raising callback")
        assert sub.connections == 1 and sub.errors == []


@pytest.mark.live
@pytest.mark.skipif(
    not (HAVE_ROS and os.path.exists("/usr/lib/rosbag/record")), reason="Debian ROS 1 tools not installed"
)
def test_roscpp_recorder_records_our_publisher(graph: Graph, tmp_path) -> None:
    """Interop with roscpp (rosbag's C++ recorder): latched message plus live ones, in order."""
    import polybag

    out = tmp_path / "ours.bag"
    with graph.node("/cpp_talker") as a:
        pub = a.advertise("/cpp", "std_msgs/String", STRING_MD5, STRING_DEF, latch=True)
        pub.publish(ser_string("latched"))
        rec = graph.start(["/usr/lib/rosbag/record", "-l", "6", "-O", str(out), "/cpp"])
        assert pub.wait_for_subscribers(1, timeout=20)
        for i in range(5):
            pub.publish(ser_string(f"m{i}"))
        assert rec.wait(20) == 0
    with polybag.open(str(out)) as bag:
        datas = [bytes(m.data) for m in bag.messages()]
        (channel,) = bag.summary.channels.values()
    assert datas == [ser_string("latched")] + [ser_string(f"m{i}") for i in range(5)]
    assert channel.topic == "/cpp"


@pytest.mark.live
@pytest.mark.skipif(not HAVE_ROS, reason="Debian ROS 1 tools not installed")
@pytest.mark.parametrize(
    "offer",
    [["TCPROS", "127.0.0.1", 70000], ["UDPROS"], ["TCPROS", "", 1], "nonsense", ["TCPROS", "a" * 300, 5]],
)
def test_bogus_publisher_offer_is_a_subscription_error(graph: Graph, offer: Any) -> None:
    liar = FakePublisher(b"", offer=offer)
    topic = f"/bogus{abs(hash(str(offer)))}"
    try:
        with graph.node("/trusting") as b:
            sub = b.subscribe(topic, lambda m: None)
            graph.master.register_publisher(topic, "std_msgs/String", liar.uri)
            wait_until(lambda: sub.errors, 15, "error for a bogus offer")
            assert sub.connections == 0
            assert liar.uri in sub.errors[0]
    finally:
        graph.master.unregister_publisher(topic, liar.uri)
        liar.close()


@pytest.mark.live
@pytest.mark.skipif(not HAVE_ROS, reason="Debian ROS 1 tools not installed")
def test_close_flushes_queued_messages(graph: Graph) -> None:
    """Publisher.close/Node.close send what is queued before unregistering; the subscriber
    keeps reading what is in flight when the master's publisherUpdate removes the publisher."""
    got = Collector()

    def slow(msg: Ros1Message) -> None:  # a slow consumer: megabytes stay in the kernel buffers
        got(msg)
        time.sleep(0.001)

    with graph.node("/sink") as b:
        a = graph.node("/burst")
        pub = a.advertise("/burst", "std_msgs/String", STRING_MD5, STRING_DEF, queue_size=1000)
        b.subscribe("/burst", slow)
        assert pub.wait_for_subscribers(1, timeout=15)
        payloads = [ser_string(f"{i:06d}" + "x" * 100_000) for i in range(300)]
        for p in payloads[:150]:
            pub.publish(p)
        assert pub.flush(timeout=30)
        assert pub._topic.links[0].messages_sent == 150
        for p in payloads[150:]:
            pub.publish(p)
        a.close()  # 30 MB still queued: sent before the connection goes
        wait_until(lambda: len(got) == 300, 15, "every queued message")
        assert got.datas() == payloads


@pytest.mark.live
@pytest.mark.skipif(not HAVE_ROS, reason="Debian ROS 1 tools not installed")
def test_unlisted_publisher_still_streaming_is_dropped_after_grace(graph: Graph) -> None:
    got = Collector()
    chatty = FakePublisher(b"", stream=True)
    try:
        with graph.node("/watcher2") as b:
            sub = b.subscribe("/chatty", got)
            graph.master.register_publisher("/chatty", "std_msgs/String", chatty.uri)
            wait_until(lambda: len(got) >= 3, 15, "streamed messages")
            (link,) = sub._links.values()
            graph.master.unregister_publisher("/chatty", chatty.uri)
            wait_until(lambda: sub.connections == 0, 15, "removal")
            wait_until(lambda: not link.thread.is_alive(), 15, "the removed connection to end")
            assert sub.errors == []
    finally:
        chatty.close()


@pytest.mark.live
@pytest.mark.skipif(not HAVE_ROS, reason="Debian ROS 1 tools not installed")
def test_close_racing_subscribe_and_advertise_leaves_nothing(graph: Graph) -> None:
    node = graph.node("/racy")
    errors: list[BaseException] = []
    done = [0]

    def churn(k: int) -> None:
        try:
            for i in range(1000):
                if i % 2:
                    node.subscribe(f"/race{k}_{i}", lambda m: None)
                else:
                    node.advertise(f"/race{k}_{i}", "std_msgs/String", STRING_MD5, STRING_DEF)
                done[0] += 1
        except BaseException as exc:  # noqa: BLE001 - collected and checked below
            errors.append(exc)

    threads = [threading.Thread(target=churn, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    wait_until(lambda: done[0] >= 20, 15, "some registrations")
    node.close()
    for t in threads:
        t.join(30)
    assert len(errors) == 3 and all(isinstance(e, RosGraphError) for e in errors), errors
    pubs, subs, _ = graph.master.get_system_state()
    assert not any(node.name in nodes for _, nodes in pubs + subs)
    assert not [t for t in threading.enumerate() if t.name.startswith("polybag-ros1") and node.name in t.name]
