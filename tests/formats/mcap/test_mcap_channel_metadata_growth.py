"""An MCAP file whose channel's QoS profiles grew after its first messages (a second ROS 2
publisher of the topic, issue 28; ``record --ros2 -O x.mcap``): ``McapWriter.grow_qos`` merges
them as rosbag2's topics do (``polybag.codecs.ros2_qos.merged_qos``, at most 64) and at
close the file is copied once (the pass that also gives late type descriptions) with the
Channel records carrying the grown list; the copy is atomic, and one that cannot be made
leaves the file as written, with a warning."""

from __future__ import annotations

import os
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

import polybag
from polybag.codecs.ros2_qos import MAX_QOS_PROFILES
from polybag.errors import PolybagWarning
from polybag.formats.mcap import late_definitions
from polybag.formats.mcap.writer import McapWriter
from sqlite_bag_helpers import count_rewrites, kill_when_ready
from sqlite_bag_helpers import qos_depths as _depths
from sqlite_bag_helpers import qos_yaml as _qos
from sqlite_bag_helpers import string_payload as _payload

STRING = "std_msgs/msg/String"
DEF = b"string data\n"



QOS_A = _qos(10, 1, 1)
QOS_B = _qos(1, 2, 2)


def _mcap_lib(path: Path) -> tuple[list[tuple[str, int]], dict[str, list[int]], dict[str, str]]:
    """(topic, log_time) of every message, each channel's QoS depths (summary) and those the
    data section's Channel records give, as the mcap library reads them."""
    from mcap.reader import make_reader

    with path.open("rb") as f:
        rd = make_reader(f)
        rows = [(ch.topic, m.log_time) for _s, ch, m in rd.iter_messages(log_time_order=False)]
        summary = rd.get_summary()
        assert summary is not None
        qos = {c.topic: _depths(c.metadata.get("offered_qos_profiles", "")) for c in summary.channels.values()}
    from mcap.records import Channel as LibChannel
    from mcap.stream_reader import StreamReader

    with path.open("rb") as f:
        inline = {
            r.topic: r.metadata.get("offered_qos_profiles", "")
            for r in StreamReader(f, skip_magic=False).records
            if isinstance(r, LibChannel)
        }
    return rows, qos, inline


def _write(path: Path, *, grow: bool = True, **options: object) -> None:
    """/tf_static (profile A, then B and A again from later publishers) between its
    messages, /chatter unchanged."""
    w = McapWriter(str(path), profile="ros2", **options)  # type: ignore[arg-type]
    s = w.add_schema(STRING, "ros2msg", DEF)
    tf = w.add_channel("/tf_static", "cdr", s, {"offered_qos_profiles": QOS_A, "topic_type_hash": "RIHS01_x"})
    chat = w.add_channel("/chatter", "cdr", s, {"offered_qos_profiles": QOS_B})
    for i in range(20):
        w.write(tf, _payload(i), 1_000 + i)
        w.write(chat, _payload(i), 1_000 + i)
    if grow:
        assert w.grow_qos(tf, QOS_A + "\n" + QOS_B)
    for i in range(20, 30):
        w.write(tf, _payload(i), 1_000 + i)
    if grow:
        assert w.grow_qos(tf, "\n".join([QOS_A, QOS_B, QOS_A]))  # two publishers with profile A now
        assert not w.grow_qos(tf.id, QOS_B)  # listed already: nothing grows
    assert not w.grow_qos(chat, QOS_B)
    for i in range(30, 40):
        w.write(tf, _payload(i), 1_000 + i)
    w.close()


@pytest.mark.parametrize(
    "options",
    [{}, {"compression": "none"}, {"chunk_size": 300}, {"use_chunking": False}],
    ids=["zstd", "uncompressed", "small-chunks", "unchunked"],
)
def test_a_channel_lists_every_publishers_qos(tmp_path: Path, options: dict[str, object]) -> None:
    path = tmp_path / "x.mcap"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (the rewrite is made: no warning)
        _write(path, **options)
    assert sorted(os.listdir(tmp_path)) == ["x.mcap"]  # no temporary or .active file left
    rows, qos, inline = _mcap_lib(path)
    assert sorted(rows) == sorted([("/tf_static", 1_000 + i) for i in range(40)] + [("/chatter", 1_000 + i) for i in range(20)])
    assert qos == {"/tf_static": [10, 1, 10], "/chatter": [1]}
    assert {t: _depths(v) for t, v in inline.items()} == qos  # the data section's records too
    with polybag.open(path) as r:
        msgs = list(r.messages())
        tf = [m for m in msgs if m.channel.topic == "/tf_static"]
        assert [m.decode().data for m in tf] == [f"m{i}" for i in range(40)]
        assert len(msgs) == 60
        assert _depths(tf[0].channel.metadata["offered_qos_profiles"]) == [10, 1, 10]
        assert tf[0].channel.metadata["topic_type_hash"] == "RIHS01_x"  # the other metadata kept


def test_no_copy_when_nothing_grew(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(*a: object, **k: object) -> int:
        raise AssertionError("the file was copied although no channel changed")

    monkeypatch.setattr(late_definitions, "rewrite_with_definitions", refused)
    path = tmp_path / "x.mcap"
    _write(path, grow=False)
    rows, qos, _inline = _mcap_lib(path)
    assert len(rows) == 60 and qos == {"/tf_static": [10], "/chatter": [1]}


def test_a_late_definition_and_grown_qos_in_one_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = count_rewrites(monkeypatch)
    path = tmp_path / "x.mcap"
    typ = "foo_msgs/msg/Bar"  # not known to polybag: without the late text it has no definition
    w = McapWriter(str(path), profile="ros2")
    c0 = w.add_channel("/bar", "cdr", w.add_schema(typ, "ros2msg", b""), {"offered_qos_profiles": QOS_A})
    for i in range(5):
        w.write(c0, b"\0\1\0\0" + i.to_bytes(2, "little"), 100 + i)
    w.define_late(typ, "ros2msg", b"int16 int16_value\n")
    assert w.grow_qos(c0, QOS_B)
    w.close()
    assert calls == [1]
    _rows, qos, _inline = _mcap_lib(path)
    assert qos == {"/bar": [10, 1]}
    with polybag.open(path) as r:
        assert [m.decode().int16_value for m in r.messages()] == list(range(5))


def test_bounded_to_64_profiles(tmp_path: Path) -> None:
    """A peer offering thousands of distinct profiles: the channel keeps 64."""
    path = tmp_path / "x.mcap"
    w = McapWriter(str(path), profile="ros2", compression="none")
    ch = w.add_channel("/a", "cdr", w.add_schema(STRING, "ros2msg", DEF), {"offered_qos_profiles": "- depth: 0"})
    w.write(ch, _payload(0), 1)
    assert w.grow_qos(ch, "\n".join(f"- depth: {i}" for i in range(5_000)))
    assert not w.grow_qos(ch, "- depth: 9999")  # full: nothing more
    w.write(ch, _payload(1), 2)
    w.close()
    rows, qos, _inline = _mcap_lib(path)
    assert len(rows) == 2 and qos["/a"] == list(range(MAX_QOS_PROFILES)) and MAX_QOS_PROFILES == 64


@pytest.mark.parametrize("hostile", ["- [unclosed", "depth: 3", "!!python/object:os.system {}", "- *x"])
def test_profiles_that_do_not_parse_change_nothing(tmp_path: Path, hostile: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(*a: object, **k: object) -> int:
        raise AssertionError("the file was copied although no channel changed")

    monkeypatch.setattr(late_definitions, "rewrite_with_definitions", refused)
    path = tmp_path / "x.mcap"
    w = McapWriter(str(path), profile="ros2")
    ch = w.add_channel("/a", "cdr", w.add_schema(STRING, "ros2msg", DEF), {"offered_qos_profiles": QOS_A})
    w.write(ch, _payload(0), 1)
    assert not w.grow_qos(ch, hostile)
    w.close()
    assert _mcap_lib(path)[1] == {"/a": [10]}


def test_a_copy_that_cannot_be_made_leaves_the_file_valid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No space for the copy: a warning; the file as written (the first profile), every message."""
    real_open = os.open

    def full(p: str, *a: object, **k: object) -> int:
        if ".definitions-" in os.fspath(p):
            raise OSError(28, "No space left on device")
        return real_open(p, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(late_definitions.os, "open", full)
    path = tmp_path / "x.mcap"
    with pytest.warns(PolybagWarning, match="QoS profiles of publishers that appeared during the recording"):
        _write(path)
    assert sorted(os.listdir(tmp_path)) == ["x.mcap"]
    rows, qos, _inline = _mcap_lib(path)
    assert len(rows) == 60 and qos == {"/tf_static": [10], "/chatter": [1]}


def test_a_copy_that_fails_midway_leaves_the_file_valid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The copy fails after it began (an I/O error writing it): the temporary file is removed
    and the finished file is untouched."""
    path = tmp_path / "x.mcap"
    real = late_definitions.rewrite_with_definitions

    def failing(p: str, late: object, make: object, *rest: object) -> int:
        def broken(out: object, profile: str, library: str) -> McapWriter:
            w = make(out, profile, library)  # type: ignore[operator]
            orig = w.write

            def write(*a: object, **k: object) -> None:
                if a[2] == 1_025:  # (the 26th /tf_static message: the copy is half made)
                    raise OSError(5, "Input/output error")
                orig(*a, **k)

            w.write = write
            return w  # type: ignore[no-any-return]

        return real(p, late, broken, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(late_definitions, "rewrite_with_definitions", failing)
    before: list[bytes] = []
    real_commit = McapWriter.rewrite_late

    def keep(self: McapWriter, p: str, *a: object, **k: object) -> bool:
        before.append(Path(p).read_bytes())
        return real_commit(self, p, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(McapWriter, "rewrite_late", keep)
    with pytest.warns(PolybagWarning, match="Input/output error"):
        _write(path)
    assert sorted(os.listdir(tmp_path)) == ["x.mcap"]
    assert path.read_bytes() == before[0]
    rows, qos, _inline = _mcap_lib(path)
    assert len(rows) == 60 and qos == {"/tf_static": [10], "/chatter": [1]}


_CHILD = textwrap.dedent(
    """
    import sys
    from polybag.formats.mcap.writer import McapWriter

    A, B = sys.argv[2], sys.argv[3]
    w = McapWriter(sys.argv[1], profile="ros2", chunk_size=200)
    ch = w.add_channel("/tf_static", "cdr", w.add_schema("std_msgs/msg/String", "ros2msg", b"string data\\n"),
                       {"offered_qos_profiles": A})
    def msg(i):
        t = f"m{i}".encode() + b"\\0"
        return b"\\0\\1\\0\\0" + len(t).to_bytes(4, "little") + t
    for i in range(25):
        w.write(ch, msg(i), 1_000 + i)
    assert w.grow_qos(ch, A + "\\n" + B)
    for i in range(25, 50):
        w.write(ch, msg(i), 1_000 + i)
    w.flush()
    print("ready", flush=True)
    sys.stdin.read()
    """
)


def test_a_killed_recording_keeps_the_first_profile_and_recovers(tmp_path: Path) -> None:
    out = tmp_path / "x.mcap"
    kill_when_ready([sys.executable, "-c", _CHILD, str(out), QOS_A, QOS_B])
    active = tmp_path / "x.mcap.active"
    assert sorted(os.listdir(tmp_path)) == ["x.mcap.active"]
    from polybag.ops import recover

    res = recover(active, tmp_path / "fixed.mcap")  # recover completes it, as before
    assert res.verified and res.messages == 50
    rows, qos, _inline = _mcap_lib(tmp_path / "fixed.mcap")
    assert len(rows) == 50 and qos == {"/tf_static": [10]}  # the profile it was written with
    with polybag.open(tmp_path / "fixed.mcap") as r:
        assert [m.decode().data for m in r.messages()] == [f"m{i}" for i in range(50)]
