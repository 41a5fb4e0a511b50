"""Several recorders in one process: ``RecorderGroup`` (in-process fan-out), the ``--config``
YAML file, and ``polybag record --config`` on a live graph (one node, one subscription per
topic, SIGUSR1 triggers every snapshot recorder, SIGINT finishes every file)."""

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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polybag
from polybag.cli import main
from polybag.errors import UsageError
from polybag.record import RecorderGroup, RecordOptions, load_config
from polybag.record.group import options_from_mapping

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_record import STRING_DEF, STRING_MD5, put_string, ser_string, texts  # noqa: E402

from ros1_graph import Graph, wait_for  # noqa: E402

S = 1_000_000_000
T0 = 1_700_000_000 * S


def quiet(**kw: object) -> RecordOptions:
    return RecordOptions(quiet=True, min_space=0, **kw)  # type: ignore[arg-type]


# --- in-process ------------------------------------------------------------------------------------
def test_group_fans_out_to_every_recorder_that_selects(tmp_path):
    group = RecorderGroup(
        [
            quiet(topics=["/a", "/b"], output_name=str(tmp_path / "ab.bag")),
            quiet(topics=["/b.*"], regex=True, output_name=str(tmp_path / "b.mcap")),
            quiet(topics=["/a"], snapshot=True, output_prefix=str(tmp_path / "snap")),
        ],
        live=False,
    )
    with group:
        for i in range(5):
            assert group.write("/a", ser_string(f"a{i}"), "std_msgs/String", md5sum=STRING_MD5,
                               definition=STRING_DEF, receive_time=T0 + i) == 2  # fmt: skip
            assert group.write("/b", ser_string(f"b{i}"), "std_msgs/String", md5sum=STRING_MD5,
                               definition=STRING_DEF, receive_time=T0 + i) == 2  # fmt: skip
        assert group.write("/c", ser_string("c"), "std_msgs/String", receive_time=T0) == 0
        (fut,) = group.trigger()  # only the snapshot recorder
        snap = fut.result(60)
    assert texts(snap) == [f"a{i}" for i in range(5)]
    assert texts(tmp_path / "ab.bag", "/a") == [f"a{i}" for i in range(5)]
    assert texts(tmp_path / "ab.bag", "/b") == [f"b{i}" for i in range(5)]
    assert texts(tmp_path / "b.mcap") == [f"b{i}" for i in range(5)]
    rep = group.report()
    assert [r["totals"]["written"] for r in rep["recorders"]] == [10, 5, 5]


def test_group_refuses_two_recorders_on_one_file(tmp_path):
    with pytest.raises(UsageError, match="same file"):
        RecorderGroup([quiet(topics=["/a"], output_name="x.bag"), quiet(topics=["/b"], output_name="x.bag")])
    with pytest.raises(UsageError):
        RecorderGroup([], live=False)


CONFIG = """
recorders:
  - topics: [/a, /b]
    output-name: {tmp}/all.bag
    compression: lz4
  - topics: "/b.*"
    regex: true
    output_name: {tmp}/b.mcap
    split: 5
    duration: 1m
  - topics: [/a]
    snapshot: true
    snapshot_window: 2
    namespace: /s1
    output_prefix: {tmp}/s1
  - all: true
    exclude: "/rosout.*"
    snapshot: true
    snapshot-window: 2.5
    namespace: s2
    output_prefix: {tmp}/s2
"""


def test_load_config(tmp_path):
    cfg_path = tmp_path / "rec.yaml"
    cfg_path.write_text(CONFIG.format(tmp=tmp_path))
    cfg = load_config(cfg_path)
    a, b, s1, s2 = cfg["recorders"]
    assert a.topics == ["/a", "/b"] and a.lz4 and a.output_name == f"{tmp_path}/all.bag"
    assert b.regex and b.split and b.size == 5 and b.duration == "1m" and b.output_format == "mcap"
    assert s1.snapshot and s1.snapshot_window == 2 and s1.trigger_topic == "/s1/snapshot_trigger"
    assert s2.all and s2.exclude == "/rosout.*" and s2.trigger_topic == "/s2/snapshot_trigger"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("recorders:\n  - topics: [/a]\n    colour: red\n", "unknown option 'colour'"),
        ("recorders:\n  - topics: [/a]\n    limit: many\n", "limit: expected an integer"),
        ("recorders:\n  - topics: [/a]\n    snapshot: 'yes'\n", "snapshot: expected true or false"),
        ("recorders:\n  - topics: [/a]\n    compression: zip\n", "compression"),
        ("recorders: []\n", "non-empty list"),
        ("recorders: {a: 1}\n", "non-empty list"),
        ("- just a list\n", "'recorders:'"),
        ("recorders:\n  - 5\n", r"recorders\[0\]: expected a mapping"),
        ("recorders:\n  - output_name: x.bag\n", "no topics"),
        ("recorders:\n  - topics: [/a]\n    snapshot_window: 2\n", "snapshot"),
        ("recorders: [\n", "not valid YAML"),
        ("extra: 1\nrecorders:\n  - topics: [/a]\n", "unknown top-level"),
    ],
)
def test_bad_configs_are_usage_errors(tmp_path, text, needle):
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    with pytest.raises(UsageError, match=needle):
        load_config(p)


def test_cli_config_errors(tmp_path, capsys):
    assert main(["record", "--config", str(tmp_path / "missing.yaml")]) == 2
    assert "cannot read the config" in capsys.readouterr().err
    p = tmp_path / "ok.yaml"
    p.write_text("recorders:\n  - topics: [/a]\n")
    assert main(["record", "--config", str(p), "/b"]) == 2  # recording options come from the file
    assert "--config takes the recording options from the file" in capsys.readouterr().err


def test_group_in_process_limit_leaves_others_recording(tmp_path):
    group = RecorderGroup(
        [quiet(topics=["/a"], limit=2, output_name=str(tmp_path / "l.bag")),
         quiet(topics=["/a"], output_name=str(tmp_path / "n.bag"))],  # fmt: skip
        live=False,
    )
    with group:
        for i in range(5):
            put_string(group.recorders[0], "/a", f"{i}", T0 + i)
            put_string(group.recorders[1], "/a", f"{i}", T0 + i)
    assert texts(tmp_path / "l.bag") == ["0", "1"]
    assert texts(tmp_path / "n.bag") == [str(i) for i in range(5)]


# --- live ------------------------------------------------------------------------------------------
NEEDED = [shutil.which("rosmaster"), shutil.which("rostopic")]
POLYBAG = [sys.executable, "-m", "polybag"]


def _bus_topics(graph: Graph, node: str) -> list[str]:
    uri = graph.master.lookupNode("/test", node)[2]
    info = xmlrpc.client.ServerProxy(uri).getBusInfo("/test")[2]
    return [c[4] for c in info if c[2] == "i"]


@pytest.mark.live
@pytest.mark.skipif(not all(NEEDED), reason="Debian ROS 1 tools not installed")
def test_live_config_one_node_sigusr1_and_sigint(graph: Graph):
    tmp = graph.tmp
    cfg = tmp / "rec.yaml"
    cfg.write_text(CONFIG.format(tmp=tmp))
    graph.start(["rostopic", "pub", "-r", "20", "/a", "std_msgs/String", "data: a"])
    graph.start(["rostopic", "pub", "-r", "20", "/b", "std_msgs/String", "data: b"])
    wait_for(lambda: graph.publishers("/a") and graph.publishers("/b"), 60, "publishers")
    rec = graph.start(
        [*POLYBAG, "record", "--config", str(cfg), "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        wait_for(
            lambda: graph.subscribers("/a")
            and graph.subscribers("/b")
            and graph.subscribers("/s1/snapshot_trigger")
            and graph.subscribers("/s2/snapshot_trigger"),
            60,
            "the recorders' subscriptions",
        )
        (me,) = graph.subscribers("/a")
        assert graph.subscribers("/b") == [me]  # one node for every recorder
        wait_for(lambda: sorted(_bus_topics(graph, me)).count("/a") == 1, 30, "one connection on /a")
        time.sleep(2.0)
        rec.send_signal(signal.SIGUSR1)  # both snapshot recorders
        wait_for(lambda: list(tmp.glob("s1_*.bag")) and list(tmp.glob("s2_*.bag")), 60, "two snapshots")
        subprocess.run(
            ["rostopic", "pub", "-1", "/s2/snapshot_trigger", "std_msgs/Empty", "{}"],
            env=graph.env,
            timeout=120,
            capture_output=True,
            check=True,
        )
        wait_for(lambda: len(list(tmp.glob("s2_*.bag"))) == 2, 60, "the second s2 snapshot")
        assert len(list(tmp.glob("s1_*.bag"))) == 1  # its own namespace only
        # /a has one connection even though three recorders record it
        assert sorted(_bus_topics(graph, me)).count("/a") == 1
    finally:
        rec.send_signal(signal.SIGINT)
        out, err = rec.communicate(timeout=60)
    assert rec.returncode == 0, err.decode()
    reps = json.loads(out)["recorders"]
    assert len(reps) == 4
    assert reps[0]["files"] == [str(tmp / "all.bag")] and reps[1]["files"] == [str(tmp / "b_0.mcap")]  # (--split: _0)
    assert not list(tmp.glob("*.active"))
    r = polybag.open(str(tmp / "all.bag"))
    counts = {c.topic: n for c, n in ((r.summary.channels[k], v) for k, v in r.summary.message_counts.items())}
    assert counts["/a"] > 20 and counts["/b"] > 20
    assert set(texts(tmp / "b_0.mcap")) == {"b"}
    assert len(reps[2]["files"]) == 1 and len(reps[3]["files"]) == 2
    s2_topics = {c.topic for f in reps[3]["files"] for c in polybag.open(f).summary.channels.values()}
    assert {"/a", "/b"} <= s2_topics and not any(t.startswith("/rosout") for t in s2_topics)
    # a message reached every recorder that selects its topic: same count on /a in all.bag as received
    assert reps[0]["topics"]["/a"]["received"] == counts["/a"]
    assert reps[2]["topics"]["/a"]["received"] >= counts["/a"] - 2


_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 1 << 40) | st.floats(allow_nan=True) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
_keys = st.sampled_from(sorted(["topics", "all", "regex", "exclude", "output_name", "output-prefix", "split",
                                "size", "duration", "snapshot", "snapshot_window", "compression", "limit",
                                "min_space", "namespace", "buffsize", "chunksize", "bogus"]))  # fmt: skip


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entry=st.dictionaries(_keys | st.text(max_size=6), _values, max_size=6))
def test_any_config_entry_is_options_or_a_usage_error(entry):
    try:
        opts = options_from_mapping(entry)
    except UsageError as e:
        assert str(e)
        return
    assert isinstance(opts, RecordOptions)
    assert opts.topics or opts.all or opts.node
