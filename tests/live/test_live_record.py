"""``polybag record`` against a real ROS 1 graph, side by side with Debian's recorder."""

from __future__ import annotations

import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import polybag

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from ros1_graph import Graph, wait_for  # noqa: E402

NEEDED = [
    shutil.which("rosbag"),
    shutil.which("rosmaster"),
    shutil.which("rostopic"),
    "/usr/lib/rosbag/record",
]

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(
        not all(n and os.path.exists(n) for n in NEEDED), reason="Debian ROS 1 tools not installed"
    ),
]

POLYBAG = [sys.executable, "-m", "polybag"]


@pytest.fixture
def graph(tmp_path: Path) -> Iterator[Graph]:
    g = Graph(tmp_path)
    try:
        yield g
    finally:
        g.close()


def _stop(p: subprocess.Popen, timeout: float = 30, sig: int = signal.SIGINT) -> tuple[int, str, str]:
    p.send_signal(sig)
    out, err = p.communicate(timeout=timeout)
    return p.returncode, out.decode() if out else "", err.decode() if err else ""


def _seqs(path: Path, topic: str) -> list[int]:
    return [
        struct.unpack_from("<I", bytes(m.data))[0] for m in polybag.open(str(path)).messages(topics=[topic])
    ]


def _conns(path: Path) -> dict[str, tuple[str, str, bytes, str]]:
    r = polybag.open(str(path))
    out = {}
    for c in r.summary.channels.values():
        md = c.metadata
        out[c.topic] = (md["type"], md["md5sum"], bytes(c.schema.data).strip(), md.get("latching", "0"))
    return out


def test_polybag_record_matches_rosbag_record(graph: Graph):
    tmp = graph.tmp
    topics = ["/points", "/chatter", "/latched"]
    ours = graph.start(
        [*POLYBAG, "record", "-O", str(tmp / "ours.bag"), "--json", *topics],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    theirs = graph.start(["/usr/lib/rosbag/record", "-O", str(tmp / "theirs.bag"), *topics])
    for t in topics:
        wait_for(lambda t=t: len(graph.subscribers(t)) >= 2, 60, f"both recorders subscribed to {t}")
    wait_for(
        lambda: (tmp / "ours.bag.active").exists() and (tmp / "theirs.bag.active").exists(), 30, "active bags"
    )
    graph.start(["rostopic", "pub", "-l", "/latched", "std_msgs/String", "data: the map"])
    graph.start(["rostopic", "pub", "-r", "20", "/chatter", "std_msgs/String", "data: hello"])
    graph.start(
        [
            "rostopic",
            "pub",
            "-s",
            "-r",
            "40",
            "/points",
            "geometry_msgs/PointStamped",
            "{header: {stamp: now}, point: {x: 1.5}}",
        ]
    )
    for t in topics:
        wait_for(lambda t=t: graph.publishers(t), 60, f"publisher of {t}")
    time.sleep(3.0)  # (connections are up well within a second; 120 points at 40 Hz)
    rc, out, err = _stop(ours)
    rc2, _, _ = _stop(theirs)
    assert rc == 0, err
    assert rc2 == 0
    assert not (tmp / "ours.bag.active").exists()
    report = json.loads(out)
    assert report["files"] == [str(tmp / "ours.bag")]
    a, b = tmp / "ours.bag", tmp / "theirs.bag"
    # same topics, types, md5sums, definitions, latching
    assert _conns(a) == _conns(b)
    assert _conns(a)["/latched"][3] == "1"
    # every published point in the time both recorded is in both bags
    sa, sb = _seqs(a, "/points"), _seqs(b, "/points")
    assert len(sa) > 40 and len(sb) > 40
    assert sa == sorted(sa) and len(set(sa)) == len(sa)
    lo, hi = max(sa[0], sb[0]), min(sa[-1], sb[-1])
    assert hi - lo > 30
    assert [s for s in sa if lo <= s <= hi] == [s for s in sb if lo <= s <= hi] == list(range(lo, hi + 1))
    latched = [bytes(m.data)[4:] for m in polybag.open(str(a)).messages(topics=["/latched"])]
    assert latched == [b"the map"]
    # the report counts what the bag holds
    r = polybag.open(str(a))
    counts = {c.topic: r.summary.message_counts[c.id] for c in r.summary.channels.values()}
    for t in topics:
        assert report["topics"][t]["written"] == counts[t]
        assert report["topics"][t]["dropped_buffer"] == 0
    # Debian's rosbag tools accept our bag
    info = subprocess.run(
        ["rosbag", "info", str(a)], env=graph.env, capture_output=True, text=True, timeout=120
    )
    assert info.returncode == 0 and "geometry_msgs/PointStamped" in info.stdout, info.stderr
    assert f"{counts['/points']} msgs" in info.stdout
    check = subprocess.run(
        ["rosbag", "check", str(a)], env=graph.env, capture_output=True, text=True, timeout=120
    )
    assert check.returncode == 0 and "does not need any migrations" in check.stdout, (
        check.stdout + check.stderr
    )


def test_all_exclude_limit_and_mcap(graph: Graph):
    tmp = graph.tmp
    graph.start(["rostopic", "pub", "-r", "20", "/keep/a", "std_msgs/String", "data: a"])
    wait_for(lambda: graph.publishers("/keep/a"), 60, "publisher")
    rec = graph.start(
        [*POLYBAG, "record", "-a", "-x", "/skip.*|/rosout.*", "-O", str(tmp / "all.mcap"), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    wait_for(lambda: graph.subscribers("/keep/a"), 60, "recorder subscribed to /keep/a")
    # topics appearing later are found by polling the master
    graph.start(["rostopic", "pub", "-r", "20", "/keep/b", "std_msgs/String", "data: b"])
    graph.start(["rostopic", "pub", "-r", "20", "/skip/c", "std_msgs/String", "data: c"])
    wait_for(lambda: graph.subscribers("/keep/b"), 60, "recorder subscribed to /keep/b")
    wait_for(lambda: graph.publishers("/skip/c"), 60, "publisher of /skip/c")
    time.sleep(2.5)  # (more than two discovery polls)
    assert graph.subscribers("/skip/c") == []
    rc, out, err = _stop(rec, sig=signal.SIGTERM)  # SIGTERM finishes the file too
    assert rc == 0, err
    report = json.loads(out)
    assert set(report["topics"]) == {"/keep/a", "/keep/b"}
    assert not (tmp / "all.mcap.active").exists()
    r = polybag.open(str(tmp / "all.mcap"))
    assert r.summary.profile == "ros1"
    assert {c.topic for c in r.summary.channels.values()} == {"/keep/a", "/keep/b"}
    # -l: the recorder stops by itself once every named topic has its messages
    lim = graph.start(
        [*POLYBAG, "record", "-l", "5", "-O", str(tmp / "lim.bag"), "--json", "/keep/a", "/keep/b"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = lim.communicate(timeout=120)
    assert lim.returncode == 0, err
    rep = json.loads(out)
    assert "limit" in rep["stop_reason"]
    r = polybag.open(str(tmp / "lim.bag"))
    assert sorted(r.summary.message_counts.values()) == [5, 5]


def test_snapshot_trigger_topic(graph: Graph):
    tmp = graph.tmp
    graph.start(["rostopic", "pub", "-r", "50", "/chatter", "std_msgs/String", "data: " + "x" * 1000])
    rec = graph.start(
        [*POLYBAG, "record", "-s", "-b", "0.02", "-o", str(tmp / "snap"), "--json", "/chatter"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    wait_for(lambda: graph.subscribers("/chatter") and graph.subscribers("/snapshot_trigger"), 60, "recorder")
    time.sleep(2.0)  # the ring fills (20 KB = about 20 messages of 1 KB, 50 per second)
    assert not list(tmp.glob("snap*.bag"))
    trig = subprocess.run(
        ["rostopic", "pub", "-1", "/snapshot_trigger", "std_msgs/Empty", "{}"],
        env=graph.env,
        timeout=120,
        capture_output=True,
    )
    assert trig.returncode == 0
    wait_for(lambda: list(tmp.glob("snap_*.bag")), 60, "snapshot bag")
    rc, out, err = _stop(rec)
    assert rc == 0, err
    rep = json.loads(out)
    files = rep["files"]
    assert len(files) == 1
    n = sum(polybag.open(files[0]).summary.message_counts.values())
    assert 10 <= n <= 21  # at most the ring's 20 KB
    s = rep["topics"]["/chatter"]
    assert s["written"] == n and s["dropped_buffer"] > 0
    assert s["received"] == s["written"] + s["dropped"]


def test_node_option_and_publish(graph: Graph):
    tmp = graph.tmp
    graph.start(["rostopic", "pub", "-r", "20", "/watched", "std_msgs/String", "data: w"])
    graph.start(["rostopic", "pub", "-r", "20", "/other", "std_msgs/String", "data: o"])
    wait_for(lambda: graph.publishers("/other") and graph.publishers("/watched"), 60, "publishers")
    listener = graph.start(["rostopic", "echo", "/watched"])  # (it subscribes once the type is known)
    wait_for(lambda: graph.subscribers("/watched"), 60, "listener")
    node = graph.subscribers("/watched")[0]
    rec = graph.start(
        [*POLYBAG, "record", "--node", node, "-p", "-O", str(tmp / "node.bag"), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for(
            lambda: len(graph.subscribers("/watched")) == 2, 60, "recorder subscribed to the node's topic"
        )
    except AssertionError:
        rec.send_signal(signal.SIGINT)
        raise AssertionError(f"node {node}: {rec.communicate(timeout=30)}") from None
    # -p: std_msgs/Empty on begin_write (latched, so a late listener gets it too)
    echo = subprocess.run(
        ["rostopic", "echo", "-n", "1", "/begin_write"],
        env=graph.env,
        timeout=120,
        capture_output=True,
        text=True,
    )
    assert echo.returncode == 0 and "---" in echo.stdout
    time.sleep(1.5)
    assert graph.subscribers("/other") == []
    rc, out, err = _stop(rec)
    assert rc == 0, err
    rep = json.loads(out)
    assert set(rep["topics"]) == {"/watched"} and rep["topics"]["/watched"]["written"] > 5
    assert listener.poll() is None


def test_min_space_stops_with_exit_1(graph: Graph):
    tmp = graph.tmp
    p = graph.start(
        [*POLYBAG, "record", "-L", "100000000G", "-O", str(tmp / "full.bag"), "/chatter"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = p.communicate(timeout=120)
    assert p.returncode == 1
    assert "less than 100000000G of space free" in err.decode()
    assert not list(tmp.glob("full.bag*"))
