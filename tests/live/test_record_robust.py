"""``polybag record`` on a real graph that misbehaves: the master killed and restarted on the
same port mid-recording, publishers that die and come back, a topic whose type changes, and
``-a`` picking up topics that appear after the start."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
import xmlrpc.client
from pathlib import Path

import pytest

import polybag

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from ros1_graph import Graph, wait_for  # noqa: E402

NEEDED = [shutil.which("rosmaster"), shutil.which("rostopic")]
pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(not all(NEEDED), reason="Debian ROS 1 tools not installed"),
]
POLYBAG = [sys.executable, "-m", "polybag"]
S = 1_000_000_000


def _record(graph: Graph, *args: str) -> subprocess.Popen:
    return graph.start([*POLYBAG, "record", "--json", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _finish(p: subprocess.Popen) -> tuple[dict, str]:
    if p.poll() is None:
        p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err.decode()
    return json.loads(out), err.decode()


def _links(graph: Graph, node: str, topic: str) -> list[str]:
    """The publishers (XML-RPC URIs) ``node`` has a live connection from on ``topic``."""
    uri = graph.master.lookupNode("/test", node)[2]
    info = xmlrpc.client.ServerProxy(uri).getBusInfo("/test")[2]
    return [c[1] for c in info if c[2] == "i" and c[4] == topic and c[5]]


def _node_uri(graph: Graph, node: str) -> str:
    code, _msg, uri = graph.master.lookupNode("/test", node)
    return uri if code == 1 else ""


def _texts(path: Path, topic: str) -> list[tuple[str, int]]:
    out = []
    for m in polybag.open(str(path)).messages(topics=[topic]):
        out.append((bytes(m.data)[4:].decode(), m.log_time))
    return out


def _pub(graph: Graph, topic: str, typ: str, value: str, name: str, rate: str = "20") -> subprocess.Popen:
    return graph.start(["rostopic", "pub", "-r", rate, topic, typ, value, f"__name:={name}"])


def test_master_restart_mid_recording(graph: Graph):
    tmp = graph.tmp
    port = graph.uri.rsplit(":", 1)[1]
    master = graph.procs[0]
    old = _pub(graph, "/chatter", "std_msgs/String", "data: old", "talker_old")
    wait_for(lambda: graph.publishers("/chatter"), 60, "the first publisher")
    rec = _record(graph, "-O", str(tmp / "r.bag"), "/chatter")
    try:
        wait_for(lambda: graph.subscribers("/chatter"), 60, "the recorder")
        (me,) = graph.subscribers("/chatter")
        wait_for(lambda: _links(graph, me, "/chatter"), 60, "the connection")
        time.sleep(1.0)
        my_uri = _node_uri(graph, me)
        # the master goes away: the recording goes on from the connection it has
        master.send_signal(signal.SIGTERM)
        master.wait(30)
        t_down = time.time_ns()
        time.sleep(3.0)
        assert rec.poll() is None and (tmp / "r.bag.active").exists()
        # a new master on the same port: the recorder registers again, then a new publisher
        # (registered only with the new master) is connected
        graph.start(["rosmaster", "--core", "-p", port])
        wait_for(lambda: graph.master.getSystemState("/test")[0] == 1, 30, "the new master")
        t_up = time.time_ns()
        wait_for(lambda: me in graph.subscribers("/chatter"), 60, "the recorder registered again")
        new = _pub(graph, "/chatter", "std_msgs/String", "data: new", "talker_new")
        wait_for(lambda: graph.publishers("/chatter"), 60, "the new publisher")
        new_uri = graph.master.lookupNode("/test", "/talker_new")[2]
        bus = xmlrpc.client.ServerProxy(my_uri)
        wait_for(
            lambda: any(c[1] == new_uri and c[5] for c in bus.getBusInfo("/test")[2]), 60, "the new connection"
        )
        time.sleep(3.0)
        assert old.poll() is None and new.poll() is None
    finally:
        rep, err = _finish(rec)
    assert "registering /chatter again" in err or rep["warnings"], err
    got = _texts(tmp / "r.bag", "/chatter")
    olds = [t for v, t in got if v == "old"]
    news = [t for v, t in got if v == "new"]
    assert any(t_down < t < t_up for t in olds)  # recorded while there was no master
    assert any(t > t_up for t in olds)  # the old publisher's connection kept
    assert len(news) >= 20  # the new master's publisher connected (about 3 s at 20 Hz)
    assert rep["topics"]["/chatter"]["dropped"] == 0
    assert rep["files"] == [str(tmp / "r.bag")]


def test_publisher_dies_and_comes_back(graph: Graph):
    tmp = graph.tmp
    rec = _record(graph, "-O", str(tmp / "p.bag"), "/chatter")
    try:
        wait_for(lambda: graph.subscribers("/chatter"), 60, "the recorder")
        (me,) = graph.subscribers("/chatter")

        def connected_to_talker() -> bool:
            uri = _node_uri(graph, "/talker")
            return bool(uri) and uri in _links(graph, me, "/chatter")

        p1 = _pub(graph, "/chatter", "std_msgs/String", "data: one", "talker")
        wait_for(connected_to_talker, 60, "the first publisher connected")
        time.sleep(1.0)
        p1.kill()  # no unregistration: the master still lists it
        p1.wait(30)
        time.sleep(1.0)
        p2 = _pub(graph, "/chatter", "std_msgs/String", "data: two", "talker")  # same node name
        wait_for(connected_to_talker, 60, "the second publisher connected")
        time.sleep(1.0)
        p2.send_signal(signal.SIGINT)  # a clean exit this time (it unregisters)
        p2.wait(30)
        p3 = _pub(graph, "/chatter", "std_msgs/String", "data: three", "talker")
        wait_for(connected_to_talker, 60, "the third publisher connected")
        time.sleep(1.0)
    finally:
        rep, _err = _finish(rec)
    values = [v for v, _t in _texts(tmp / "p.bag", "/chatter")]
    assert {"one", "two", "three"} <= set(values)
    assert p3.poll() is None
    assert rep["topics"]["/chatter"]["dropped"] == 0


def test_topic_whose_type_changes_is_refused_with_a_warning(graph: Graph):
    tmp = graph.tmp
    rec = _record(graph, "-O", str(tmp / "t.bag"), "/x")
    try:
        wait_for(lambda: graph.subscribers("/x"), 60, "the recorder")
        (me,) = graph.subscribers("/x")
        p1 = _pub(graph, "/x", "std_msgs/String", "data: text", "talker_a")
        wait_for(lambda: _links(graph, me, "/x"), 60, "String messages")
        time.sleep(1.5)
        p1.send_signal(signal.SIGINT)
        p1.wait(30)
        p2 = _pub(graph, "/x", "std_msgs/Int32", "data: 7", "talker_b")
        wait_for(lambda: _links(graph, me, "/x"), 60, "Int32 messages")
        time.sleep(1.5)
        assert p2.poll() is None
    finally:
        rep, err = _finish(rec)
    x = rep["topics"]["/x"]
    assert x["written"] > 5 and x["dropped_type"] > 5
    (w,) = rep["warnings"]
    assert "/x" in w and "std_msgs/Int32" in w and "std_msgs/String" in w
    r = polybag.open(str(tmp / "t.bag"))
    assert [c.metadata["type"] for c in r.summary.channels.values()] == ["std_msgs/String"]
    assert {bytes(m.data)[4:].decode() for m in r.messages()} == {"text"}


def test_all_picks_up_new_topics(graph: Graph):
    tmp = graph.tmp
    _pub(graph, "/early", "std_msgs/String", "data: e", "talker_e")
    wait_for(lambda: graph.publishers("/early"), 60, "the first publisher")
    rec = _record(graph, "-a", "-x", "/rosout.*", "-O", str(tmp / "a.bag"))
    try:
        wait_for(lambda: graph.subscribers("/early"), 60, "the recorder")
        _pub(graph, "/late", "std_msgs/String", "data: l", "talker_l")
        wait_for(lambda: graph.subscribers("/late"), 60, "the recorder subscribing to /late")
        time.sleep(2.0)
    finally:
        rep, _err = _finish(rec)
    assert rep["topics"]["/late"]["written"] >= 10
    assert {v for v, _t in _texts(tmp / "a.bag", "/late")} == {"l"}
    assert "/rosout" not in rep["topics"]


def test_recorder_started_before_the_master(graph: Graph):
    tmp = graph.tmp
    port = graph.uri.rsplit(":", 1)[1]
    master = graph.procs[0]
    master.send_signal(signal.SIGTERM)
    master.wait(30)
    rec = _record(graph, "-p", "-O", str(tmp / "early.bag"), "/chatter")
    try:
        time.sleep(2.0)  # no master: the recorder waits (retrying), it does not exit
        assert rec.poll() is None
        graph.start(["rosmaster", "--core", "-p", port])
        wait_for(lambda: graph.master.getSystemState("/test")[0] == 1, 30, "the master")
        wait_for(lambda: graph.subscribers("/chatter"), 60, "the recorder registered")
        wait_for(lambda: graph.publishers("/begin_write"), 60, "-p's begin_write advertised")
        _pub(graph, "/chatter", "std_msgs/String", "data: hi", "talker")
        (me,) = graph.subscribers("/chatter")
        wait_for(lambda: _links(graph, me, "/chatter"), 60, "the connection")
        time.sleep(1.5)
    finally:
        rep, _err = _finish(rec)
    assert rep["topics"]["/chatter"]["written"] >= 10
    assert {v for v, _t in _texts(tmp / "early.bag", "/chatter")} == {"hi"}
