"""``polybag record --ros2`` / ``play --ros2`` beside hostile DDS peers (issue 26).

The peers are Cyclone DDS participants in the test process: a legitimate one publishing
``good_pkg/msg/Legit`` (and two bad types) with its hash in USER_DATA and serving
``~/get_type_description`` as rmw_cyclonedds does (the request header echoed), and a hostile
one that answers every request it sees on the same reply topic with a refusal carrying
terminal escapes (replaying the request's header), and publishes topics whose names are
escapes.  The recorder is the real CLI in a subprocess.  Every wait is for a condition.
"""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from ros2_graph import POLYBAG, cyclone_problem, finish, process, ros2_env, stop_recorder

pytestmark = pytest.mark.skipif(bool(cyclone_problem()), reason=cyclone_problem() or "cyclonedds")

HOSTILE = "\x1b]0;owned\x07\x1b[2J"
PROFILE = {"reliability": "reliable", "durability": "volatile", "history": "keep_last", "depth": 100}
N = 10


def _descriptions() -> dict[str, Any]:
    from polybag.net.ros2.typedesc import FieldDescription as F
    from polybag.net.ros2.typedesc import TypeDescriptionReply as R

    legit = R(
        True,
        "",
        "good_pkg/msg/Legit",
        {
            "good_pkg/msg/Legit": [
                F("x", 6, 0, 0, ""),
                F("inner", 1, 0, 0, "good_pkg/msg/Inner"),
                F("name", 17, 0, 0, ""),
            ],
            "good_pkg/msg/Inner": [F("v", 11, 0, 0, ""), F("data", 3 + 144, 0, 0, "")],
        },
    )
    evil = R(True, "", "good_pkg/msg/Evil", {"good_pkg/msg/Evil": [F("x\nint32 injected", 6, 0, 0, "")]})
    wide = R(
        True, "", "good_pkg/msg/Wide", {"good_pkg/msg/Wide": [F(f"f{i}", 6, 0, 0, "") for i in range(60_000)]}
    )
    return {r.type_name: r for r in (legit, evil, wide)}


def legit_sample(i: int) -> bytes:
    body = struct.pack("<i", i) + b"\x00" * 4 + struct.pack("<d", i / 2)
    data = bytes([i % 256]) * (i % 5)
    body += struct.pack("<I", len(data)) + data
    body += b"\x00" * (-len(body) % 4)
    name = f"n{i}".encode() + b"\x00"
    return b"\x00\x01\x00\x00" + body + struct.pack("<I", len(name)) + name


class Peer:
    """A participant of the test process (its own GUID prefix) with raw writers and readers."""

    def __init__(self, env: dict[str, str]) -> None:
        from polybag.net.ros2 import Graph

        self.graph = Graph(env=env)
        self.closing: list[Any] = []

    def publisher(self, topic: str, dds_type: str, user_data: bytes = b"") -> Any:
        from cyclonedds._clayer import ddspy_write
        from cyclonedds.pub import DataWriter
        from cyclonedds.qos import Policy, Qos
        from cyclonedds.topic import Topic

        from polybag.net.ros2.graph import pad, raw_type
        from polybag.net.ros2.qos import dds_qos

        qos = dds_qos(PROFILE, writer=True)
        if user_data:
            qos = qos + Qos(Policy.Userdata(data=user_data))
        t = Topic(self.graph.participant, topic, raw_type(dds_type))
        w = DataWriter(self.graph.participant, t, qos=qos)
        w.send = lambda data: ddspy_write(w._ref, pad(data))  # type: ignore[attr-defined]
        return w

    def close(self) -> None:
        self.graph.close()


@contextmanager
def server(peer: Peer, node: str, answer: Any) -> Iterator[None]:
    """A thread answering each request on ``rq<node>/get_type_descriptionRequest`` with
    ``answer(request) -> reply bytes`` (on the reply topic of ``node``)."""
    from polybag.net.ros2.typedesc import _SERVICE_QOS, REPLY_TYPE, REQUEST_TYPE

    svc = f"{node}/get_type_description"
    reader = peer.graph.raw_reader(f"rq{svc}Request", REQUEST_TYPE, _SERVICE_QOS)
    writer = peer.graph.raw_writer(f"rr{svc}Reply", REPLY_TYPE, _SERVICE_QOS)
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            for data, _t in reader.take(16):
                for out in answer(data):
                    writer.write(out)
            stop.wait(0.01)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join(5)


def _read_until(p: Any, words: list[str], lines: list[str], timeout: float = 60) -> None:
    """Read the recorder's stderr (kept in ``lines``) until each of ``words`` was in a line."""
    end = time.monotonic() + timeout
    left = list(words)
    while time.monotonic() < end:
        line = p.stderr.readline()
        lines.append(line)
        left = [w for w in left if w not in line]
        if not left:
            return
        if not line and p.poll() is not None:
            raise AssertionError(f"the recorder exited ({p.returncode}): {''.join(lines)}")
    raise AssertionError(f"the recorder did not say {left!r}: {''.join(lines)}")


def _wait(cond: Any, what: str, timeout: float = 30) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def test_hostile_replies_and_names_change_nothing_and_reach_no_terminal(tmp_path: Path) -> None:
    import polybag
    from polybag.net.ros2.typedesc import TypeDescriptionReply, decode_reply, description_hash, encode_reply

    env = ros2_env()
    descs = _descriptions()
    good = Peer(env)
    bad = Peer(env)
    out = tmp_path / "rec.mcap"

    def legit_answer(req: bytes) -> list[bytes]:
        n = struct.unpack_from("<I", req, 20)[0]
        name = req[24 : 24 + n - 1].decode()
        r = descs.get(name) or TypeDescriptionReply(False, "unknown type")
        return [encode_reply(r, req[4:20])]

    def hostile_answer(req: bytes) -> list[bytes]:
        refusal = TypeDescriptionReply(False, HOSTILE * 50)
        # the request's own header replayed (the strongest guess), and someone else's
        return [encode_reply(refusal, req[4:20]), encode_reply(refusal, b"\x01" * 16)]

    try:
        pubs = {}
        for topic, name in (("/legit", "Legit"), ("/evil", "Evil"), ("/wide", "Wide")):
            h = description_hash(descs[f"good_pkg/msg/{name}"])
            pubs[topic] = good.publisher(
                f"rt{topic}", f"good_pkg::msg::dds_::{name}_", f"typehash={h};".encode()
            )
        # a type name that is a terminal escape and a topic name ROS 2 cannot have, from the
        # hostile participant (Cyclone itself refuses escapes in topic names)
        bad.publisher("rt/a-b", "good_pkg::msg::dds_::Legit_")
        bad.publisher("rt/ok_topic", "good_pkg::msg::dds_::\x1b[2J_")
        args = [
            *POLYBAG,
            "record",
            "--ros2",
            "-a",
            "-x",
            "/(rosout|parameter_events)",
            "-O",
            str(out),
        ]  # (not --json, which is quiet: the recorder's lines on stderr are waited for)
        with server(good, "/legit_node", legit_answer), server(bad, "/legit_node", hostile_answer):
            with process(args, env) as rec:
                _wait(
                    lambda: all(w.get_matched_subscriptions() for w in pubs.values()),
                    "the recorder's readers",
                )
                for i in range(N):
                    pubs["/legit"].send(legit_sample(i))
                    pubs["/evil"].send(b"\x00\x01\x00\x00" + struct.pack("<i", i))
                    pubs["/wide"].send(b"\x00\x01\x00\x00" + struct.pack("<i", i))
                for w in pubs.values():
                    w.wait_for_acks(10_000_000_000)
                seen: list[str] = []
                # (the three lookups are over: the answer, and the two refusals)
                done = [
                    "Type good_pkg/msg/Legit of /legit from its",
                    "topic /evil: type",
                    "topic /wide: type",
                ]
                _read_until(rec, done, seen)
                code, report, rest = stop_recorder(rec)
                err = "".join(seen) + rest
    finally:
        good.close()
        bad.close()
    assert code == 0, err
    # nothing the peers said reaches the terminal raw, and nothing is long
    assert "\x1b" not in err and "\x07" not in err, err
    assert all(len(line) < 2000 for line in err.splitlines())
    assert report is None  # (the report is on stderr)
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert not any("/legit" in w for w in warnings), warnings
    (evil, *_) = [w for w in warnings if "topic /evil" in w]
    assert "not a rosidl field name" in evil and "x\\x0aint32 injected" in evil and "raw CDR" in evil
    (wide, *_) = [w for w in warnings if "topic /wide" in w]
    assert "limits for definitions from the network" in wide and "more than 2000 fields" in wide
    subscribed = {line.split()[2] for line in err.splitlines() if line.startswith("Subscribing to ")}
    assert subscribed == {"/legit", "/evil", "/wide"}, err
    with polybag.open(out) as r:
        schemas = {c.topic: c.schema for c in r.summary.channels.values()}
        assert b"injected" not in schemas["/evil"].data and schemas["/evil"].data == b""
        assert schemas["/wide"].data == b""
        msgs = list(r.messages(topics=["/legit"]))
        got = [m.decode() for m in msgs]
    assert [bytes(m.data) for m in msgs] == [legit_sample(i) for i in range(N)]  # (the bytes as sent)
    assert [(g.x, g.inner.v, bytes(g.inner.data), g.name) for g in got] == [
        (i, i / 2, bytes([i % 256]) * (i % 5), f"n{i}") for i in range(N)
    ]
    assert decode_reply(encode_reply(descs["good_pkg/msg/Legit"])).type_name == "good_pkg/msg/Legit"


def test_odd_length_samples_are_recorded_and_played_without_bytes_past_their_end(tmp_path: Path) -> None:
    """A 9-byte and a 5-byte sample are recorded as 9 and 5 bytes; played back, what goes on
    the wire past their end is zeros declared as padding, never memory."""
    import polybag

    env = ros2_env()
    peer = Peer(env)
    out = tmp_path / "odd.mcap"
    sizes = [
        b"\x00\x01\x00\x00\x01\x02\x03\x04\x05",
        b"\x00\x01\x00\x00\x01",
        b"\x00\x01\x00\x00\x01\x02\x03\x04",
    ]
    try:
        w = peer.publisher("rt/odd", "std_msgs::msg::dds_::UInt8_")
        # (-l: the recorder stops by itself once it has the three: no race with a stop signal)
        args = [*POLYBAG, "record", "--ros2", "/odd", "-l", str(len(sizes)), "-O", str(out), "--json"]
        with process(args, env) as rec:
            _wait(lambda: w.get_matched_subscriptions(), "the recorder's reader")
            for s in sizes:
                w.send(s)
            code, _out, err = finish(rec, 60)
        assert code == 0, err
        with polybag.open(out) as r:
            assert [bytes(m.data) for m in r.messages()] == sizes
        # played back: a raw reader here sees each one padded with declared zeros
        from polybag.net.ros2.graph import unpad

        reader = peer.graph.reader("/odd", "std_msgs::msg::dds_::UInt8_", PROFILE)
        got: list[bytes] = []
        with process([*POLYBAG, "play", "--ros2", str(out), "--wait-for-subscribers"], env):
            end = time.monotonic() + 60
            while len(got) < len(sizes) and time.monotonic() < end:
                ret = reader._take(reader._ref, 0xFFFFFFFF, 16)
                got += [data for data, info in ret if info.valid_data]
                time.sleep(0.02)
        assert len(got) == len(sizes), got
        for sent, wire in zip(sizes, got, strict=True):
            assert len(wire) % 4 == 0 and wire[4 : len(sent)] == sent[4:]
            assert wire[len(sent) :] == b"\x00" * (len(wire) - len(sent))
            assert unpad(wire) == sent
    finally:
        peer.close()


def _rclpy_test_msgs_problem() -> str:
    from ros2_graph import rclpy_problem

    why = rclpy_problem()
    if why:
        return why
    try:
        import test_msgs.msg  # noqa: F401
    except Exception as e:  # noqa: BLE001 - any failure: not here
        return f"ros-jazzy-test-msgs cannot be imported: {e}"
    return ""


@pytest.mark.skipif(bool(_rclpy_test_msgs_problem()), reason=_rclpy_test_msgs_problem() or "rclpy")
def test_refusals_from_another_participant_do_not_cancel_a_fastdds_lookup(tmp_path: Path) -> None:
    """A real rclpy node (Fast DDS) publishes test_msgs types; a hostile participant floods
    its reply topic with refusals carrying escapes.  The types are still asked and stored."""
    from ros2_graph import finish, last_json, node, wait_ready

    import polybag
    from polybag.net.ros2.typedesc import _SERVICE_QOS, REPLY_TYPE, TypeDescriptionReply, encode_reply

    env = ros2_env()
    bad = Peer(env)
    out = tmp_path / "typed"
    stop = threading.Event()
    sent = [0]

    def flood() -> None:
        w = bad.graph.raw_writer("rr/ns1/typed_talker/get_type_descriptionReply", REPLY_TYPE, _SERVICE_QOS)
        refusal = encode_reply(TypeDescriptionReply(False, HOSTILE * 100))
        while not stop.is_set():
            if w.subscriber_count():
                w.write(refusal)
                sent[0] += 1
            stop.wait(0.01)

    t = threading.Thread(target=flood, daemon=True)
    t.start()
    args = [*POLYBAG, "record", "--ros2", "/arr", "/basic", "-O", str(out), "--json"]
    try:
        with node("typed", 12, env=env) as talker:
            wait_ready(talker)
            with process(args, env) as rec:
                tcode, tout, terr = finish(talker, 90)
                assert tcode == 0, terr
                code, report, err = stop_recorder(rec)
    finally:
        stop.set()
        t.join(5)
        bad.close()
    assert code == 0, err
    assert sent[0] > 0  # (the recorder's reply reader did get the hostile refusals)
    assert not any("not known" in w for w in report["warnings"]), report["warnings"]
    assert "\x1b" not in err
    published = last_json(tout)
    with polybag.open(out) as r:
        defs = {c.topic: c.schema.data for c in r.summary.channels.values()}
        basic = [m.decode() for m in r.messages(topics=["/basic"])]
    assert b"MSG: test_msgs/msg/BasicTypes" in defs["/arr"]
    assert [v.int16_value for v in basic] == [x[0] for x in published["/basic"]]
