"""A topic recorded before its type description arrived, in MCAP outputs (issue 28): the
description a later publisher of the same type gives is used for the whole topic, as in
sqlite3 storage (``test_record_ros2_late_typedesc.py``): ``record --ros2 -O x.mcap`` and
``--storage mcap``.  An MCAP Schema record cannot change once written, so the file is
rewritten at close (a temporary file created exclusively beside it, then moved over it);
the mcap library and rosbags read the result, every message with the definition.

The writer-level tests (no ROS needed) check the same on :class:`McapWriter` and the
rosbag2 MCAP storage writer, and that a rewrite that cannot be made leaves the file valid."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import polybag
from polybag.errors import PolybagWarning
from polybag.formats.mcap.writer import McapWriter

DEF = b"int16 int16_value\n"
TYPE = "foo_msgs/msg/Bar"  # a type polybag does not know: without the late text it has no definition


def _payload(v: int) -> bytes:
    return b"\x00\x01\x00\x00" + int(v).to_bytes(2, "little", signed=True)


def _mcap_lib(path: Path) -> tuple[int, set[bytes]]:
    from mcap.reader import make_reader

    with path.open("rb") as f:
        rd = make_reader(f)
        n = sum(1 for _ in rd.iter_messages())
        summary = rd.get_summary()
        assert summary is not None
        return n, {s.data for s in summary.schemas.values()}


# --- the writers (no ROS) -----------------------------------------------------------------------------
def test_mcap_writer_gives_a_late_definition_to_the_earlier_messages(tmp_path: Path) -> None:
    out = tmp_path / "late.mcap"
    w = McapWriter(str(out), profile="ros2", chunk_size=200)
    c0 = w.add_channel("/bar", "cdr", w.add_schema(TYPE, "ros2msg", b""), {"k": "v"})
    for i in range(10):
        w.write(c0, _payload(i), 100 + i, 100 + i, i)
    w.add_metadata("m", {"a": "b"})
    w.add_attachment("a.txt", "text/plain", b"hello", 150, 150)
    c1 = w.add_channel("/bar", "cdr", w.add_schema(TYPE, "ros2msg", DEF))
    w.define_late(TYPE, "ros2msg", DEF)
    c2 = w.add_channel("/baz", "cdr", w.add_schema(TYPE, "ros2msg", b""))  # added after: takes it at once
    for i in range(10):
        w.write(c1, _payload(100 + i), 200 + i, 200 + i, i)
        w.write(c2, _payload(-i), 300 + i, 300 + i, i)
    w.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["late.mcap"]  # no temporary file left
    with polybag.open(out) as r:
        msgs = list(r.messages())
        assert len(msgs) == 30
        assert {bytes(m.channel.schema.data) for m in msgs if m.channel.schema is not None} == {DEF}
        assert [m.decode().int16_value for m in msgs[:10]] == list(range(10))
        assert [m.sequence for m in msgs[:3]] == [0, 1, 2] and msgs[0].publish_time == 100
        assert msgs[0].channel.metadata == {"k": "v"}
        assert list(r.metadata())[0].metadata == {"a": "b"} and bytes(next(iter(r.attachments())).data) == b"hello"
    assert _mcap_lib(out) == (30, {DEF})


def test_the_rosbag2_mcap_storage_gives_a_late_definition_to_the_whole_topic(tmp_path: Path) -> None:
    bag = tmp_path / "bag"
    with polybag.Writer(str(bag), format="rosbag2", storage="mcap") as w:
        c0 = w.add_channel("/bar", "cdr", w.add_schema(TYPE, "ros2msg", b""))
        for i in range(10):
            w.write(c0, _payload(i), 100 + i)
        c1 = w.add_channel("/bar", "cdr", w.add_schema(TYPE, "ros2msg", DEF))
        for i in range(10):
            w.write(c1, _payload(100 + i), 200 + i)
    assert sorted(p.name for p in bag.iterdir()) == ["bag_0.mcap", "metadata.yaml"]
    with polybag.open(bag) as r:
        msgs = list(r.messages())
        assert [m.decode().int16_value for m in msgs] == list(range(10)) + list(range(100, 110))
    assert _mcap_lib(bag / "bag_0.mcap") == (20, {DEF})
    from rosbags.rosbag2 import Reader

    with Reader(bag) as rr:
        assert sum(1 for _ in rr.messages()) == 20
        assert [c.msgdef.data for c in rr.connections] == [DEF.decode()]


def test_a_rewrite_that_cannot_be_made_leaves_the_file_valid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from polybag.formats.mcap import late_definitions

    def full(*a: object, **k: object) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(late_definitions, "rewrite_with_definitions", full)
    out = tmp_path / "late.mcap"
    w = McapWriter(str(out), profile="ros2")
    c0 = w.add_channel("/bar", "cdr", w.add_schema(TYPE, "ros2msg", b""))
    w.write(c0, _payload(1), 100, 100, 0)
    w.define_late(TYPE, "ros2msg", DEF)
    with pytest.warns(PolybagWarning, match="could not be given to the messages written before it"):
        w.close()
    assert _mcap_lib(out) == (1, {b""})  # as it was written: valid


# --- live: rclpy publishers, record --ros2 ------------------------------------------------------------
N = 8


@pytest.mark.parametrize("how", ["mcap-file", "rosbag2-mcap"])
def test_later_publisher_description_is_used_for_the_whole_topic_in_mcap(tmp_path: Path, how: str) -> None:
    from record_helpers import check_late_described, record_late_description, typedesc_problem
    from ros2_graph import ros2_env

    why = typedesc_problem()
    if why:
        pytest.skip(why)

    env = ros2_env()
    out = tmp_path / ("late.mcap" if how == "mcap-file" else "late")
    log = tmp_path / "stderr.txt"
    args = ["record", "--ros2", "/arr", "/basic", "--type-timeout", "1.5", "-O", str(out)]
    if how == "rosbag2-mcap":
        args += ["--storage", "mcap"]
    code = record_late_description(args, env, log, N, 60)
    err = log.read_text(errors="replace")
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temporary file left
    with warnings.catch_warnings():
        warnings.simplefilter("error", PolybagWarning)  # no "recorded as raw CDR without a definition"
        check_late_described(out, err, N)
    mcap_file = out if how == "mcap-file" else next(out.glob("*.mcap"))
    n, datas = _mcap_lib(mcap_file)
    assert n == 4 * N and b"" not in datas and all(d.strip() for d in datas), datas
    if how == "rosbag2-mcap":
        from rosbags.rosbag2 import Reader

        with Reader(out) as rr:
            assert sum(1 for _ in rr.messages()) == 4 * N
            assert all(c.msgdef.data.strip() for c in rr.connections)
