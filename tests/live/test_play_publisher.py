"""The publisher the player sends through: a message goes to the socket at once from the
publishing thread when nothing is queued (MSG_DONTWAIT), and what the kernel did not take
goes out first from the link's thread, never dropped, so a slow subscriber (full socket
buffers, a small queue dropping messages) still gets whole messages, in order."""

from __future__ import annotations

import shutil
import threading
import time

import pytest

from polybag.net.ros1 import Node
from ros1_graph import Graph, wait_for

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(not shutil.which("rosmaster"), reason="Debian ROS 1 (rosmaster) not installed"),
]

STRING_MD5 = "992ce8a1687cec8c8bd883ec73ca41d1"


def _payload(i: int, size: int) -> bytes:
    body = f"{i:08d}".encode() + bytes([i % 251]) * (size - 8)
    return len(body).to_bytes(4, "little") + body


def _check(got: list[bytes], size: int, total: int) -> list[int]:
    seen = []
    for d in got:
        assert len(d) == size + 4
        i = int(d[4:12])
        assert d == _payload(i, size)  # whole, never a torn message
        seen.append(i)
    assert seen == sorted(seen) and len(set(seen)) == len(seen) and all(0 <= i < total for i in seen)
    return seen


def _pair(graph_uri: str, topic: str, queue_size: int, slow: float):
    pub_node = Node("/pub", graph_uri, host="127.0.0.1", anonymous=True)
    sub_node = Node("/sub", graph_uri, host="127.0.0.1", anonymous=True)
    got: list[bytes] = []
    lock = threading.Lock()

    def cb(m) -> None:
        if slow:
            time.sleep(slow)
        with lock:
            got.append(bytes(m.data))

    pub = pub_node.advertise(topic, "std_msgs/String", STRING_MD5, "string data\n", queue_size=queue_size)
    sub_node.subscribe(topic, cb)
    assert pub.wait_for_subscribers(1, timeout=60)
    return pub_node, sub_node, pub, got


def test_big_messages_to_a_slow_subscriber_arrive_whole_and_in_order(tmp_path):
    g = Graph(tmp_path)
    try:
        size, n = 1 << 20, 40
        pub_node, sub_node, pub, got = _pair(g.uri, "/big", 1000, 0.005)
        try:
            for i in range(n):
                pub.publish(_payload(i, size))  # far more than the socket buffers take at once
            assert pub.flush(120)
            wait_for(lambda: len(got) >= n, 120, "every message")
            assert _check(got, size, n) == list(range(n))
            assert pub.dropped == 0
        finally:
            sub_node.close()
            pub_node.close()
    finally:
        g.close()


def test_small_queue_drops_whole_messages_only(tmp_path):
    g = Graph(tmp_path)
    try:
        size, n = 300_000, 60
        pub_node, sub_node, pub, got = _pair(g.uri, "/lossy", 2, 0.02)
        try:
            for i in range(n):
                pub.publish(_payload(i, size))
            assert pub.flush(120)
            time.sleep(0.5)
            wait_for(lambda: len(got) >= n - pub.dropped, 120, "what was not dropped")
            seen = _check(got, size, n)
            assert pub.dropped > 0  # the queue of 2 could not hold them all
            assert len(seen) == n - pub.dropped
            assert seen[-1] == n - 1  # the newest is never the one dropped
        finally:
            sub_node.close()
            pub_node.close()
    finally:
        g.close()
