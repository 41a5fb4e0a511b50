"""The in-process recorder (polybag.record): every rosbag record option's effect, read back
with polybag, rosbag (standalone) and rosbags."""

from __future__ import annotations

import os
import re
import struct
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polybag
from polybag.cli import main
from polybag.errors import UsageError, WriteError
from polybag.record import Recorder, RecordOptions, TopicStats
from polybag.record.options import parse_duration, parse_min_space

STRING_MD5 = "992ce8a1687cec8c8bd883ec73ca41d1"
STRING_DEF = "string data\n"
INT_MD5 = "da5909fbe378aeaf85e547e830cc1bb7"
INT_DEF = "int32 data\n"
S = 1_000_000_000
T0 = 1_700_000_000 * S


def ser_string(text: str | bytes) -> bytes:
    b = text.encode() if isinstance(text, str) else text
    return struct.pack("<I", len(b)) + b


def put_string(rec: Recorder, topic: str, text: str | bytes, t: int | None = None, **kw: object) -> bool:
    return rec.write(
        topic,
        ser_string(text),
        type="std_msgs/String",
        md5sum=STRING_MD5,
        definition=STRING_DEF,
        receive_time=t,
        **kw,
    )  # type: ignore[arg-type]


def put_int(rec: Recorder, topic: str, n: int, t: int | None = None) -> bool:
    return rec.write(
        topic, struct.pack("<i", n), type="std_msgs/Int32", md5sum=INT_MD5, definition=INT_DEF, receive_time=t
    )


def texts(path: str | Path, topic: str | None = None) -> list[str]:
    r = polybag.open(str(path))
    return [
        bytes(m.data)[4:].decode()
        for m in r.messages(order="file")
        if topic is None or m.channel.topic == topic
    ]


def quiet(**kw: object) -> RecordOptions:
    return RecordOptions(quiet=True, min_space=0, **kw)  # type: ignore[arg-type]


# --- options --------------------------------------------------------------------------------------
def test_parse_units():
    assert parse_min_space("1G") == 1 << 30
    assert parse_min_space("500M") == 500 << 20
    assert parse_min_space("10k") == 10 << 10
    assert parse_min_space("4096") == 4096
    assert parse_duration("30") == 30
    assert parse_duration("5m") == 300
    assert parse_duration("2h") == 7200
    assert parse_duration("1.5") == 1.5
    for bad in ("x", "-1", "1q"):
        with pytest.raises(UsageError):
            parse_duration(bad)
    with pytest.raises(UsageError):
        parse_min_space("lots")
    o = RecordOptions(buffsize=2, chunksize=4, size=3)
    assert (o.buffer_bytes, o.chunk_bytes, o.max_size_bytes) == (2 << 20, 4 << 10, 3 << 20)


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({"udp": True}, "--udp"),
        ({"bz2": True, "lz4": True}, "one type of compression"),
        ({"output_name": "x.mcap", "bz2": True}, "bz2"),
        ({"regex": True, "topics": ["(("]}, "regular expression"),
        ({"exclude": "[a"}, "regular expression"),
        ({"max_splits": 2}, "--split"),
        ({"duration": "soon"}, "--duration"),
        ({"limit": -1}, "--limit"),
    ],
)
def test_refused_options(kw, needle):
    with pytest.raises(UsageError, match=re.escape(needle)):
        Recorder(RecordOptions(**kw))


def test_cli_refuses_udp_and_no_topics(capsys):
    assert main(["record", "--udp", "/chatter"]) == 2
    assert "--udp is not supported" in capsys.readouterr().err
    assert main(["record"]) == 2
    assert "no topics" in capsys.readouterr().err


# --- naming ---------------------------------------------------------------------------------------
DATE = r"\d{4}-\d{2}-\d{2}-\d{2}-\d{2}-\d{2}"


def test_naming_prefix_name_and_default(tmp_path):
    with Recorder(quiet(output_prefix=str(tmp_path / "run"))) as rec:
        put_string(rec, "/a", "x")
    assert re.fullmatch(rf"run_{DATE}\.bag", os.path.basename(rec.files[0]))
    with Recorder(quiet(output_name=str(tmp_path / "named"))) as rec:
        put_string(rec, "/a", "x")
    assert rec.files == [str(tmp_path / "named.bag")]
    with Recorder(quiet(output_name=str(tmp_path / "named2.bag"))) as rec:
        put_string(rec, "/a", "x")
    assert rec.files == [str(tmp_path / "named2.bag")]
    with Recorder(quiet(directory=str(tmp_path))) as rec:
        put_string(rec, "/a", "x")
    assert re.fullmatch(rf"{DATE}\.bag", os.path.basename(rec.files[0]))
    with Recorder(quiet(output_prefix=str(tmp_path / "sp"), split=True, size=0.001)) as rec:
        for i in range(3):
            put_string(rec, "/a", "y" * 2000, T0 + i)
    assert [re.fullmatch(rf"sp_{DATE}_(\d)\.bag", os.path.basename(f)).group(1) for f in rec.files] == [
        "0",
        "1",
        "2",
    ]


def test_active_while_writing_then_renamed(tmp_path):
    out = tmp_path / "live.bag"
    rec = Recorder(quiet(output_name=str(out))).start()
    put_string(rec, "/a", "hello", T0)
    assert rec.flush(60)
    assert (tmp_path / "live.bag.active").exists() and not out.exists()
    assert rec.current_file == str(out)
    rec.close()
    assert out.exists() and not (tmp_path / "live.bag.active").exists()
    assert texts(out) == ["hello"]


def test_missing_directory_is_a_clear_error(tmp_path):
    with pytest.raises(WriteError, match="does not exist"):
        Recorder(quiet(output_name=str(tmp_path / "no" / "x.bag"))).start()


# --- content and interop ------------------------------------------------------------------------------
def _fill(rec: Recorder, n: int = 50) -> None:
    for i in range(n):
        put_string(rec, "/chatter", f"hello {i}", T0 + i * 10_000_000, callerid="/talker")
        put_int(rec, "/numbers", i, T0 + i * 10_000_000 + 1)
    put_string(rec, "/latched", "map", T0 + 5, callerid="/mapper", latching=True)


@pytest.mark.parametrize("compression", ["none", "bz2", "lz4"])
def test_bag_reads_back_everywhere(tmp_path, compression):
    out = tmp_path / "out.bag"
    opts = quiet(output_name=str(out), bz2=compression == "bz2", lz4=compression == "lz4", chunksize=1)
    with Recorder(opts) as rec:
        _fill(rec)
    rep = rec.report()
    assert rep["totals"] == {"received": 101, "written": 101, "dropped": 0}
    assert rep["topics"]["/chatter"]["type"] == "std_msgs/String"
    # polybag
    r = polybag.open(str(out))
    assert r.summary.message_count if hasattr(r.summary, "message_count") else True
    assert texts(out, "/chatter") == [f"hello {i}" for i in range(50)]
    nums = [struct.unpack("<i", bytes(m.data))[0] for m in r.messages(topics=["/numbers"])]
    assert nums == list(range(50))
    chans = {c.topic: c for c in r.summary.channels.values()}
    assert chans["/chatter"].metadata["md5sum"] == STRING_MD5
    assert chans["/latched"].metadata.get("latching") == "1"
    assert chans["/latched"].metadata.get("callerid") == "/mapper"
    assert len(r.summary.chunks) > 1  # --chunksize 1 KB
    # rosbags
    from rosbags.rosbag1 import Reader as RbReader

    with RbReader(out) as rb:
        got = {c.topic: (c.msgtype, c.digest) for c in rb.connections}
        assert got["/numbers"] == ("std_msgs/msg/Int32", INT_MD5)
        assert sum(1 for _ in rb.messages()) == 101
        times = [
            t for _c, t, _d in rb.messages(connections=[c for c in rb.connections if c.topic == "/chatter"])
        ]
        assert times == [T0 + i * 10_000_000 for i in range(50)]
    # rosbag (standalone) reads uncompressed and bz2 here (its lz4 needs roslz4)
    if compression != "lz4":
        import rosbag

        with rosbag.Bag(str(out)) as b:
            info = b.get_type_and_topic_info()
            assert info.topics["/chatter"].message_count == 50
            assert info.topics["/chatter"].msg_type == "std_msgs/String"
            conns = {c.topic: c.header for c in b._connections.values()}
            assert (
                conns["/latched"]["latching"] == b"1"
                if isinstance(conns["/latched"]["latching"], bytes)
                else "1"
            )
            assert [m.data for _t, m, _ts in b.read_messages(topics=["/chatter"])][:2] == [
                "hello 0",
                "hello 1",
            ]


def test_mcap_output(tmp_path):
    out = tmp_path / "out.mcap"
    with Recorder(quiet(output_name=str(out), chunksize=1)) as rec:
        _fill(rec)
    assert rec.files == [str(out)]
    from mcap.reader import make_reader

    with open(out, "rb") as f:
        reader = make_reader(f)
        header = reader.get_header()
        assert header.profile == "ros1"
        summ = reader.get_summary()
        chans = {c.topic: c for c in summ.channels.values()}
        assert chans["/chatter"].message_encoding == "ros1"
        assert chans["/chatter"].metadata["md5sum"] == STRING_MD5
        assert chans["/chatter"].metadata["type"] == "std_msgs/String"
        assert chans["/chatter"].metadata["callerid"] == "/talker"
        assert chans["/latched"].metadata["latching"] == "1"
        schema = summ.schemas[chans["/numbers"].schema_id]
        assert (schema.name, schema.encoding, schema.data) == ("std_msgs/Int32", "ros1msg", INT_DEF.encode())
        assert sum(summ.statistics.channel_message_counts.values()) == 101
    assert texts(out, "/chatter") == [f"hello {i}" for i in range(50)]
    # lz4 chunks too
    out2 = tmp_path / "lz.mcap"
    with Recorder(quiet(output_name=str(out2), lz4=True)) as rec:
        _fill(rec, 5)
    assert texts(out2, "/chatter") == [f"hello {i}" for i in range(5)]
    with open(out2, "rb") as f:
        assert {c.compression for c in make_reader(f).get_summary().chunk_indexes} == {"lz4"}


# --- selection --------------------------------------------------------------------------------------
def test_topics_regex_exclude(tmp_path):
    cases = [
        ({"topics": ["/a", "b"]}, {"/a", "/b"}),
        ({"topics": ["/cam/.*"], "regex": True}, {"/cam/image", "/cam/info"}),
        ({"topics": ["/cam/.*"], "regex": True, "exclude": ".*info"}, {"/cam/image"}),
        ({"all": True, "exclude": "/cam/.*"}, {"/a", "/b", "/c"}),
        ({"topics": ["/c.*"], "regex": True}, {"/c", "/cam/image", "/cam/info"}),  # full match, like boost
        ({"topics": ["/ca"], "regex": True}, set()),
    ]
    for i, (kw, want) in enumerate(cases):
        out = tmp_path / f"sel{i}.bag"
        with Recorder(quiet(output_name=str(out), **kw)) as rec:
            for t in ("/a", "/b", "/c", "/cam/image", "/cam/info"):
                put_string(rec, t, t, T0)
        assert set(rec.stats) == want, kw
        r = polybag.open(str(out))
        assert {c.topic for c in r.summary.channels.values()} == want, kw


def test_limit_per_topic_and_stop_when_all_done(tmp_path):
    out = tmp_path / "lim.bag"
    with Recorder(quiet(output_name=str(out), limit=3, all=True)) as rec:
        for i in range(10):
            put_string(rec, "/a", f"a{i}", T0 + i)
            if i < 2:
                put_string(rec, "/b", f"b{i}", T0 + i)
    assert texts(out, "/a") == ["a0", "a1", "a2"]
    assert texts(out, "/b") == ["b0", "b1"]
    assert rec.stats["/a"].dropped_limit == 7 and rec.stats["/a"].written == 3
    assert rec.stop_reason == "stopped"
    # named topics: once every one has its N messages the recording ends by itself
    rec = Recorder(quiet(output_name=str(tmp_path / "lim2.bag"), limit=2, topics=["/a", "/b"])).start()
    for i in range(4):
        put_string(rec, "/a", f"a{i}", T0 + i)
    assert not rec.done.is_set()
    put_string(rec, "/b", "b0", T0 + 10)
    put_string(rec, "/b", "b1", T0 + 11)
    assert rec.wait(60)
    assert "limit" in (rec.stop_reason or "")
    rep = rec.close()
    assert texts(tmp_path / "lim2.bag") == ["a0", "a1", "b0", "b1"]
    assert rep["topics"]["/a"]["dropped_limit"] == 2


# --- splitting ---------------------------------------------------------------------------------------
def _all_texts(files: list[str]) -> list[str]:
    out: list[str] = []
    for f in files:
        out += texts(f)
    return out


def test_split_by_size_boundaries(tmp_path):
    payload = 1000
    max_mb = 0.02  # 20971 bytes
    n = 100
    with Recorder(quiet(output_name=str(tmp_path / "s"), split=True, size=max_mb, chunksize=4)) as rec:
        for i in range(n):
            put_string(rec, "/a", f"{i:04d}".ljust(payload, "."), T0 + i)
    files = rec.files
    assert len(files) > 3
    assert [os.path.basename(f) for f in files] == [f"s_{i}.bag" for i in range(len(files))]
    got = _all_texts(files)
    assert [g[:4] for g in got] == [f"{i:04d}" for i in range(n)]  # nothing lost or doubled, in order
    limit = int(max_mb * (1 << 20))
    one = payload + 4 + 58
    for f in files[:-1]:
        size = os.path.getsize(f)
        assert size > limit  # a part ends only once it is over --size ...
        assert size - one - 1024 <= limit  # ... by at most the one message (plus its index)
    counts = [len(texts(f)) for f in files]
    assert len(set(counts[:-1])) == 1 and counts[-1] <= counts[0]
    assert rec.report()["totals"]["dropped"] == 0


def test_split_by_duration_exact_windows(tmp_path):
    # windows of 1 s from the first message: (.., T0+1s], (T0+1s, T0+2s], ...; a gap skips windows
    times = [0, 0.5, 1.0, 1.000000001, 1.5, 2.0, 2.5, 5.5, 5.9, 6.0, 6.1]
    with Recorder(quiet(output_name=str(tmp_path / "d.bag"), split=True, duration="1")) as rec:
        for k, s in enumerate(times):
            put_string(rec, "/a", f"{k}", T0 + round(s * S))
    got = [texts(f) for f in rec.files]
    assert got == [["0", "1", "2"], ["3", "4", "5"], ["6"], ["7", "8", "9"], ["10"]]
    assert [os.path.basename(f) for f in rec.files] == [f"d_{i}.bag" for i in range(5)]


def test_size_or_duration_without_split_stops(tmp_path):
    with Recorder(quiet(output_name=str(tmp_path / "d.bag"), duration="2")) as rec:
        for k in range(6):
            put_string(rec, "/a", f"{k}", T0 + k * S)
        assert rec.wait(60)
    assert texts(rec.files[0]) == ["0", "1", "2"]
    assert "--duration" in rec.stop_reason
    assert rec.stats["/a"].dropped_stopped == 3
    with Recorder(quiet(output_name=str(tmp_path / "s.bag"), size=0.004)) as rec:  # 4194 bytes
        for k in range(10):
            put_string(rec, "/a", "x" * 100, T0 + k)
        rec.wait(60)
    kept = len(texts(rec.files[0]))
    assert 0 < kept < 10 and rec.stats["/a"].dropped_stopped == 10 - kept
    assert rec.stats["/a"].written == kept


def test_max_splits_deletes_oldest(tmp_path):
    with Recorder(quiet(output_name=str(tmp_path / "m"), split=True, duration=1, max_splits=2)) as rec:
        for k in range(6):
            put_string(rec, "/a", f"{k}", T0 + k * (S + 1))
    rep = rec.report()
    names = lambda fs: [os.path.basename(f) for f in fs]  # noqa: E731
    # rosbag keeps N finished parts plus the one it was writing
    assert names(rep["deleted"]) == ["m_0.bag", "m_1.bag", "m_2.bag"]
    assert names(rep["files"]) == ["m_3.bag", "m_4.bag", "m_5.bag"]
    assert sorted(os.listdir(tmp_path)) == ["m_3.bag", "m_4.bag", "m_5.bag"]
    assert _all_texts(rep["files"]) == ["3", "4", "5"]


def test_repeat_latched_at_each_part(tmp_path):
    with Recorder(quiet(output_name=str(tmp_path / "r"), split=True, duration=1, repeat_latched=True)) as rec:
        put_string(rec, "/map", "the map", T0, latching=True)
        for k in range(1, 4):
            put_string(rec, "/a", f"{k}", T0 + k * S - S // 2)
    parts = [
        list(zip(texts(f), [m.channel.topic for m in polybag.open(f).messages(order="file")]))
        for f in rec.files
    ]
    assert parts[0] == [("the map", "/map"), ("1", "/a")]
    for p in parts[1:]:
        assert p[0] == ("the map", "/map")
    assert rec.stats["/map"].written == 1  # the repeats are copies, not received messages
    # the copy carries the new part's time
    first = next(polybag.open(rec.files[1]).messages(order="file"))
    assert first.log_time == T0 + 2 * S - S // 2


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sizes=st.lists(st.integers(0, 3000), min_size=1, max_size=60),
    gaps=st.lists(st.integers(0, 3 * S), min_size=60, max_size=60),
    size_kb=st.integers(5, 40),
    dur=st.sampled_from([None, "1", "2.5"]),
)
def test_split_never_loses_or_duplicates(tmp_path_factory, sizes, gaps, size_kb, dur):
    d = tmp_path_factory.mktemp("prop")
    t = T0
    sent = []
    with Recorder(quiet(output_name=str(d / "p"), split=True, size=size_kb / 1024, duration=dur)) as rec:
        for i, n in enumerate(sizes):
            t += gaps[i]
            text = f"{i:03d}" + "z" * n
            put_string(rec, "/a", text, t)
            sent.append(text)
    assert _all_texts(rec.files) == sent
    if dur is not None:
        dn = int(float(dur) * S)
        for f in rec.files:
            ts = [m.log_time for m in polybag.open(f).messages()]
            assert ts[-1] - ts[0] <= dn


# --- the queue ---------------------------------------------------------------------------------------
def test_buffer_full_drops_oldest_and_counts(tmp_path):
    out = tmp_path / "b.bag"
    rec = Recorder(quiet(output_name=str(out), buffsize=1)).start()  # 1 MB
    rec.pause()
    big = 300_000
    for i in range(10):
        put_string(rec, "/big", f"{i}".ljust(big, "-"), T0 + i)
        put_string(rec, "/small", f"s{i}", T0 + i)
    # at most 1 MB queued: 3 big ones plus small ones; the older messages were dropped
    assert rec.queued_bytes <= 1 << 20
    rec.resume()
    rep = rec.close()
    b, s = rep["topics"]["/big"], rep["topics"]["/small"]
    assert b["dropped_buffer"] == 7 and b["written"] == 3
    assert s["written"] + s["dropped_buffer"] == 10 and s["dropped_buffer"] > 0
    assert [x[:1] for x in texts(out, "/big")] == ["7", "8", "9"]
    assert rep["totals"]["received"] == rep["totals"]["written"] + rep["totals"]["dropped"]


def test_buffer_zero_is_infinite(tmp_path):
    rec = Recorder(quiet(output_name=str(tmp_path / "i.bag"), buffsize=0)).start()
    rec.pause()
    for i in range(40):
        put_string(rec, "/big", "x" * 100_000, T0 + i)
    assert rec.queued_bytes > 3_000_000
    rep = rec.close()
    assert rep["topics"]["/big"]["written"] == 40 and rep["totals"]["dropped"] == 0


def test_concurrent_writers_count_everything(tmp_path):
    out = tmp_path / "c.bag"
    n = 400
    with Recorder(quiet(output_name=str(out))) as rec:
        threads = [
            threading.Thread(target=lambda k=k: [put_string(rec, f"/t{k}", f"{i}") for i in range(n)])
            for k in range(4)
        ]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    for k in range(4):
        assert texts(out, f"/t{k}") == [str(i) for i in range(n)]
        assert rec.stats[f"/t{k}"].written == n


def test_after_close_is_counted(tmp_path):
    rec = Recorder(quiet(output_name=str(tmp_path / "x.bag"))).start()
    put_string(rec, "/a", "in", T0)
    rec.close()
    assert put_string(rec, "/a", "late", T0 + 1) is False
    assert rec.stats["/a"].dropped_stopped == 1 and rec.stats["/a"].written == 1


# --- snapshot -----------------------------------------------------------------------------------------
def test_snapshot_ring_and_trigger(tmp_path):
    opts = quiet(output_prefix=str(tmp_path / "snap"), snapshot=True, buffsize=0.01)  # 10485 bytes
    rec = Recorder(opts).start()
    assert rec.current_file is None  # nothing is written until a trigger
    for i in range(30):
        put_string(rec, "/a", f"{i:02d}".ljust(996, "."), T0 + i)  # 1000 bytes each
    rec.trigger()
    assert rec.flush(60)
    for i in range(30, 33):
        put_string(rec, "/a", f"{i:02d}".ljust(996, "."), T0 + i)
    rec.trigger()
    assert rec.flush(60)
    put_string(rec, "/a", "left", T0 + 99)
    rep = rec.close()
    files = rep["files"]
    assert len(files) == 2
    for f in files:
        assert re.fullmatch(rf"snap_{DATE}(-\d)?\.bag", os.path.basename(f))
    assert [x[:2] for x in texts(files[0])] == [f"{i:02d}" for i in range(20, 30)]  # the last 10 KB
    assert [x[:2] for x in texts(files[1])] == ["30", "31", "32"]
    a = rep["topics"]["/a"]
    assert (
        a["received"] == 34 and a["written"] == 13 and a["dropped_buffer"] == 20 and a["dropped_stopped"] == 1
    )


def test_trigger_needs_snapshot():
    with pytest.raises(UsageError):
        Recorder(quiet()).trigger()


# --- free space ---------------------------------------------------------------------------------------
def test_min_space_stops_with_clear_message(tmp_path):
    free = [10 << 30]
    logs: list[str] = []
    opts = RecordOptions(output_name=str(tmp_path / "f.bag"), min_space="1G")
    rec = Recorder(opts, disk_free=lambda _d: free[0], log=logs.append).start()
    put_string(rec, "/a", "ok", T0)
    assert rec.flush(60)
    free[0] = 100 << 20
    rec._output.next_disk_check = 0  # (the next message checks at once instead of within a second)
    put_string(rec, "/a", "no room", T0 + 1)
    assert rec.wait(60)
    rep = rec.close()
    assert "less than 1G of space free" in rep["stop_reason"]
    assert any("less than 1G" in x for x in logs)
    assert texts(tmp_path / "f.bag") == ["ok"]  # the bag is finished, not left .active
    assert rep["topics"]["/a"]["dropped_stopped"] == 1


def test_min_space_at_start(tmp_path):
    rec = Recorder(
        RecordOptions(output_name=str(tmp_path / "g.bag"), min_space="1000000G", quiet=True)
    ).start()
    assert rec.wait(60)
    put_string(rec, "/a", "x", T0)
    rep = rec.close()
    assert rep["files"] == [] and "space free" in rep["stop_reason"]
    assert rep["topics"]["/a"]["dropped_stopped"] == 1
    assert not list(tmp_path.iterdir())


# --- the live source's logic, on a stand-in node ----------------------------------------------------
class _Msg:
    def __init__(self, topic: str, text: str, t: int, latching: str = "0") -> None:
        self.topic = topic
        self.data = ser_string(text)
        self.receive_time = t
        self.connection = {
            "callerid": "/talker",
            "type": "std_msgs/String",
            "md5sum": STRING_MD5,
            "message_definition": STRING_DEF,
            "latching": latching,
            "topic": topic,
        }


class _Sub:
    def __init__(self, node: _FakeNode, topic: str, cb) -> None:
        self.node, self.topic, self.cb = node, topic, cb
        self.closed = False

    def close(self) -> None:
        self.closed = True
        self.node.subs.pop(self.topic, None)
        self.node.closed_topics.append(self.topic)


class _FakeMaster:
    def __init__(self, node: _FakeNode) -> None:
        self.node = node

    def get_system_state(self):
        subs = {t: list(ns) for t, ns in self.node.sub_state.items()}
        for t in list(self.node.subs):  # our own subscriptions, as a master lists them
            subs.setdefault(t, []).append(self.node.name)
        pubs = [[t, [self.node.name]] for t, _ty, _l in self.node.advertised]
        return pubs, [[t, ns] for t, ns in subs.items()], []


class _FakeNode:
    name = "/record_fake"

    def __init__(self) -> None:
        self.published: list[tuple[str, str]] = []
        self.sub_state: dict[str, list[str]] = {}
        self.subs: dict[str, _Sub] = {}
        self.closed_topics: list[str] = []
        self.advertised: list[tuple[str, str, bool]] = []
        self.sent: list[bytes] = []
        self.master = _FakeMaster(self)
        self.lock = threading.Lock()

    def topics(self):
        with self.lock:
            return list(self.published)

    def subscribe(self, topic, callback, *, md5sum, type, tcp_nodelay=False, queue_size=None):  # noqa: A002
        assert (md5sum, type) == ("*", "*")
        s = self.subs[topic] = _Sub(self, topic, callback)
        return s

    def advertise(self, topic, type, md5sum, definition, *, latch=False, callerid=None):  # noqa: A002
        self.advertised.append((topic, type, latch))
        node = self

        class _Pub:
            def publish(self, data: bytes) -> None:
                node.sent.append(data)

            def close(self) -> None:
                pass

        return _Pub()

    def close(self) -> None:
        pass


def test_live_source_discovery_limit_and_trigger(tmp_path):
    from polybag.record.live import LiveSource

    node = _FakeNode()
    node.published = [("/cam/image", "x/Y"), ("/cam/info", "x/Y"), ("/odom", "x/Y")]
    opts = quiet(
        topics=["/cam/.*"],
        regex=True,
        exclude=".*info",
        limit=2,
        output_name=str(tmp_path / "l.bag"),
        publish=True,
    )
    src = LiveSource(opts, node=node, poll=0.05)
    rec = Recorder(opts, src).start()
    assert set(node.subs) == {"/cam/image"}
    assert node.advertised == [("/begin_write", "std_msgs/Empty", True)] and node.sent == [b""]
    with node.lock:
        node.published.append(("/cam/depth", "x/Y"))
    wait = time.monotonic() + 60
    while "/cam/depth" not in node.subs and time.monotonic() < wait:
        time.sleep(0.02)
    assert "/cam/depth" in node.subs  # found by polling the master
    cb = node.subs["/cam/image"].cb
    for i in range(4):
        cb(_Msg("/cam/image", f"i{i}", T0 + i))
    # -l reached: unsubscribed (from another thread than the connection's)
    wait = time.monotonic() + 60
    while "/cam/image" not in node.closed_topics and time.monotonic() < wait:
        time.sleep(0.02)
    assert "/cam/image" in node.closed_topics
    time.sleep(0.3)  # several discovery polls
    assert "/cam/image" not in node.subs  # not subscribed again
    assert rep_written(rec.close(), "/cam/image") == 2
    assert texts(tmp_path / "l.bag") == ["i0", "i1"]
    r = polybag.open(str(tmp_path / "l.bag"))
    (ch,) = r.summary.channels.values()
    assert ch.metadata["callerid"] == "/talker" and ch.metadata["md5sum"] == STRING_MD5


def rep_written(rep: dict, topic: str) -> int:
    return int(rep["topics"][topic]["written"])


def test_live_source_node_option_and_snapshot_trigger(tmp_path):
    from polybag.record.live import LiveSource

    node = _FakeNode()
    node.sub_state = {"/seen": ["/listener", "/other"], "/unseen": ["/other"]}
    opts = quiet(node="/listener", snapshot=True, output_prefix=str(tmp_path / "s"))
    src = LiveSource(opts, node=node, poll=0.05)
    rec = Recorder(opts, src).start()
    assert set(node.subs) == {"/seen", "/snapshot_trigger"}
    node.subs["/seen"].cb(_Msg("/seen", "a", T0, latching="1"))
    node.subs["/snapshot_trigger"].cb(_Msg("/snapshot_trigger", "", T0 + 1))
    assert rec.flush(60)
    rep = rec.close()
    (f,) = rep["files"]
    assert texts(f) == ["a"]
    assert next(iter(polybag.open(f).summary.channels.values())).metadata["latching"] == "1"


# --- CLI options and Debian's reader ----------------------------------------------------------------
def test_cli_options_map_to_record_options():
    from polybag.cli import build_parser
    from polybag.cli.record import options_from_args, report_lines

    args = build_parser().parse_args(
        [
            "record",
            "-o",
            "pre",
            "--split",
            "--size",
            "10",
            "--duration",
            "5m",
            "--max-splits",
            "3",
            "-b",
            "0",
            "--chunksize",
            "64",
            "-l",
            "7",
            "-L",
            "2G",
            "-j",
            "--tcpnodelay",
            "--repeat-latched",
            "-e",
            "-x",
            "/no.*",
            "-q",
            "-p",
            "/a.*",
            "--topic",
            "/b",
        ]
    )
    o = options_from_args(args)
    assert (o.output_prefix, o.split, o.size, o.max_duration_ns, o.max_splits) == (
        "pre",
        True,
        10,
        300 * S,
        3,
    )
    assert (o.buffer_bytes, o.chunk_bytes, o.limit, o.min_space_bytes) == (0, 64 << 10, 7, 2 << 30)
    assert (o.compression, o.tcpnodelay, o.repeat_latched, o.regex, o.exclude) == (
        "bz2",
        True,
        True,
        True,
        "/no.*",
    )
    assert (o.quiet, o.publish, o.topics) == (True, True, ["/a.*", "/b"])
    o2 = options_from_args(
        build_parser().parse_args(["record", "--split=100", "-O", "x.mcap", "-a", "--lz4"])
    )
    assert (o2.split, o2.size, o2.output_format, o2.compression) == (True, 100, "mcap", "lz4")
    lines = report_lines(
        {
            "topics": {"/a": TopicStats(type="t", received=5, written=3, dropped_buffer=2).to_dict()},
            "totals": {"received": 5, "written": 3, "dropped": 2},
            "files": ["x.bag"],
            "deleted": [],
            "stop_reason": "stopped",
            "errors": [],
        }
    )
    assert "2 buffer full" in lines[1] and lines[-1] == "wrote x.bag"


DEBIAN_PY = "/usr/bin/python3"


def _debian_rosbag() -> bool:
    import subprocess

    try:
        return (
            subprocess.run(
                [DEBIAN_PY, "-c", "import rosbag, roslz4"], capture_output=True, timeout=60
            ).returncode
            == 0
        )
    except (OSError, subprocess.SubprocessError):
        return False


@pytest.mark.skipif(not _debian_rosbag(), reason="Debian's python3-rosbag is not installed")
@pytest.mark.parametrize("compression", ["lz4", "bz2"])
def test_debian_rosbag_reads_compressed(tmp_path, compression):
    import subprocess

    out = tmp_path / "c.bag"
    with Recorder(
        quiet(output_name=str(out), lz4=compression == "lz4", bz2=compression == "bz2", chunksize=1)
    ) as rec:
        _fill(rec)
    code = (
        "import rosbag, sys\n"
        "b = rosbag.Bag(sys.argv[1])\n"
        "print(b.get_compression_info().compression, b.get_message_count(),"
        " [m.data for _t, m, _ in b.read_messages(topics=['/chatter'])][-1])\n"
    )
    got = subprocess.run([DEBIAN_PY, "-c", code, str(out)], capture_output=True, text=True, timeout=120)
    assert got.returncode == 0, got.stderr
    assert got.stdout.split() == [compression, "101", "hello", "49"]


def test_failed_source_start_leaves_no_empty_bag(tmp_path):
    from polybag.errors import PolybagError

    class Broken:
        def start(self, recorder: Recorder) -> None:
            raise PolybagError("ROS master: cannot reach it")

        def stop(self) -> None:
            pass

    with pytest.raises(PolybagError, match="cannot reach"):
        Recorder(quiet(output_name=str(tmp_path / "x.bag"), topics=["/a"]), Broken()).start()
    assert list(tmp_path.iterdir()) == []
