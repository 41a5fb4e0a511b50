"""``polybag record`` started beside ``/usr/lib/rosbag/record`` (issue 28): a real Debian ROS 1
graph, a rospy publisher sending ``std_msgs/Header`` at 50 Hz, both recorders launched at the
same moment (``bench/bench_record_start.py``'s round, without its fixed window).

What the start must do, checked without timing it: the record path imports no module it does
not use (numpy, the operations, other formats... none loaded when the first message was
recorded); the start goes registerSubscriber -> connection to the publisher it answered with ->
first message, in that order; from its first message on the recording loses nothing
(consecutive sequence numbers); and both bags hold every message a third subscriber received
once both recorders were connected.
The time itself (launch to first message, idle and loaded, vs rosbag) is the bench's."""

from __future__ import annotations

import os
import shutil
import struct
import sys
import xmlrpc.client
from pathlib import Path

import pytest

from ros1_graph import wait_for

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import bench_record_start as brs  # noqa: E402
from test_import_cost import HEAVY  # noqa: E402

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(
        not (shutil.which("rosmaster") and os.path.exists(brs.ROSBAG_RECORD) and os.path.exists(brs.ROS_PYTHON)),
        reason="Debian ROS 1 packages not installed",
    ),
]

PHASES = ["python", "cli_imported", "parser_built", "file_open", "node_up", "registered", "connected", "first_message"]


@pytest.mark.parametrize("polybag_first", [True, False])
def test_record_start_beside_rosbag_record(tmp_path, polybag_first):
    from polybag.net.ros1 import Node

    bench = brs.Bench(tmp_path)
    seen: list[object] = []
    try:
        modules = tmp_path / "modules.txt"
        bench.env["BENCH_MODULES_OUT"] = str(modules)
        pub_uri = bench.master.lookupNode("/test", "/bench_start_pub")[2]
        publisher = xmlrpc.client.ServerProxy(pub_uri)
        launched = bench.launch(0, polybag_first, phases=True)
        # both recorders connected to the publisher, and polybag's first message recorded
        wait_for(lambda: len(publisher.getBusInfo("/test")[2]) >= 2, 120, "both recorders connected")
        wait_for(modules.exists, 120, "polybag record's first message")
        with Node("/watch", bench.uri, anonymous=True) as node:  # then 50 more messages sent
            node.subscribe(brs.TOPIC, seen.append)
            wait_for(lambda: len(seen) >= 50, 120, "50 more messages")
        err = bench.finish(launched)
    finally:
        bench.close()
    assert {side: p.returncode for side, p in launched.procs.items()} == {"polybag": 0, "rosbag": 0}, err

    phases = brs.phase_times(err)
    assert list(phases) == PHASES, err
    assert [phases[k] for k in PHASES] == sorted(phases.values()), phases

    loaded = set(modules.read_text().split())
    assert "polybag.net.ros1.subscriber" in loaded and "polybag.formats.bag.writer" in loaded
    assert sorted(m for m in loaded if any(m == h or m.startswith(h + ".") for h in HEAVY)) == []

    poly = [seq for seq, _stamp, _recv in brs.records(Path(launched.paths["polybag"]))]
    ros = [seq for seq, _stamp, _recv in brs.records(Path(launched.paths["rosbag"]))]
    assert len(poly) >= 50 and ros, (len(poly), len(ros))
    # from its first message on, nothing lost: consecutive sequence numbers...
    assert poly == list(range(poly[0], poly[0] + len(poly))), poly
    # ...and both hold every message sent while both were connected (what a third
    # subscriber received after the two had connected and polybag had its first message)
    watched = [struct.unpack_from("<I", m.data)[0] for m in seen]  # type: ignore[attr-defined]
    assert set(watched) <= set(poly) and set(watched) <= set(ros), (watched, poly[0], poly[-1], ros[0], ros[-1])
