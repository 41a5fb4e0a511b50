"""Hostile ROS 2 peers, without DDS: type description replies, peer text, sample bytes.

Any participant of the DDS domain is untrusted (issue 26).  What it sends reaches polybag as
type description replies (``net/ros2/typedesc``), names and reasons that are printed, and
samples that are recorded; these tests feed the code that handles each one fake input as a
hostile peer would shape it.  The same with real DDS peers is in
``tests/live_ros2/test_ros2_peer_hostile_live.py``.
"""

from __future__ import annotations

import logging
import struct
import tracemalloc
import unicodedata
import xmlrpc.client
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polybag.codecs.msg_parser import parse_full
from polybag.codecs.ros2.typehash import type_hash
from polybag.errors import PolybagError
from polybag.net.ros2 import Ros2GraphError
from polybag.net.ros2.graph import guid_prefix, pad, unpad
from polybag.net.ros2.names import constant_name_ok, field_name_ok, ros_topic, type_name_ok, type_service_node
from polybag.net.ros2.typedesc import (
    MAX_DEPTH,
    MAX_FIELDS,
    MAX_FLAT,
    FieldDescription,
    ReplyMatcher,
    TypeDescriptionReply,
    decode_reply,
    definition_from_reply,
    description_hash,
    encode_reply,
)
from polybag.util.text import LIMIT, peer_text, safe_line

REPLY = (
    Path(__file__).parent.parent / "live_ros2" / "data" / "arrays_type_description_reply.bin"
).read_bytes()
ARRAYS = "test_msgs/msg/Arrays"
ARRAYS_HASH = "RIHS01_8a321b80dae8c44dfd1ce558eaf1b1cd5ebbe5950863ed675836535511a7f91a"

PUBLISHER = "01107b03-a318-4896-6809-0056000001c1"  # (a Cyclone participant)
PUB_WRITER = "01107b03-a318-4896-6809-005600000303"
OTHER_WRITER = "01107b03-03c8-39a5-2610-f49200000303"
FASTDDS = "010f3c2a-1b2c-3d4e-5f60-7182000001c1"
FASTDDS_WRITER = "010f3c2a-1b2c-3d4e-5f60-718200000403"
HOSTILE_REASON = "\x1b]0;title\x07\x1b[2J"

U8, I32, F64, STRING, NESTED = 3, 6, 11, 17, 1
ARRAY, SEQ = 48, 144


def _field(name: str, tid: int = I32, nested: str = "", cap: int = 0, default: str = "") -> FieldDescription:
    return FieldDescription(name, tid, cap, 0, nested, default)


def _reply(main: str, types: dict[str, list[FieldDescription]], **kw: object) -> TypeDescriptionReply:
    return TypeDescriptionReply(True, "", main, dict(types), **kw)  # type: ignore[arg-type]


def _legit() -> TypeDescriptionReply:
    return _reply(
        "good_pkg/msg/Legit",
        {
            "good_pkg/msg/Legit": [
                _field("x"),
                _field("inner", NESTED, "good_pkg/msg/Inner"),
                _field("name", STRING),
            ],
            "good_pkg/msg/Inner": [_field("v", F64), _field("data", U8 + SEQ)],
        },
    )


def _no_control(text: str) -> bool:
    return not any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Cs") for c in text)


def _described_fields(reply: TypeDescriptionReply) -> dict[str, list[str]]:
    # (an empty type is described with rosidl's placeholder member; its .msg has no field)
    return {
        n: [f.name for f in fs if f.name != "structure_needs_at_least_one_member" or len(fs) > 1]
        for n, fs in reply.types.items()
    }


def _stored_fields(text: str, main: str) -> dict[str, list[str]]:
    from polybag.codecs.ros2 import full_name

    ts = parse_full(main, text, "ros2")
    out = {full_name(main): [f.name for f in ts.get(main).fields]}
    for dep in ts.dependencies(main):
        out[full_name(dep)] = [f.name for f in ts.get(dep).fields]
    return out


# ------------------------------------------------------------------------------ reply matching
def test_reply_from_another_participant_is_left_aside() -> None:
    m = ReplyMatcher(PUBLISHER, "good_pkg/msg/Legit", "")
    req = m.request()
    refusal = TypeDescriptionReply(False, "Type not currently in use by this node")
    assert m.offer(encode_reply(refusal, req[4:20]), OTHER_WRITER) is None  # right header, wrong writer
    assert m.offer(encode_reply(_legit(), req[4:20]), "") is None  # a writer DDS no longer knows
    assert m.ignored == 2
    text = m.offer(encode_reply(_legit(), req[4:20]), PUB_WRITER)
    assert text is not None and "MSG: good_pkg/msg/Inner" in text


def test_cyclone_reply_must_echo_one_of_our_request_headers() -> None:
    m = ReplyMatcher(PUBLISHER, "good_pkg/msg/Legit", "")
    first, second = m.request(), m.request()
    assert first[4:12] == second[4:12] and first[12:20] != second[12:20]  # (same client, next sequence)
    refusal = TypeDescriptionReply(False, "not for you")
    other_client = b"\x99" * 8 + first[12:20]
    assert m.offer(encode_reply(refusal, other_client), PUB_WRITER) is None
    assert m.offer(encode_reply(refusal, b"\x00" * 16), PUB_WRITER) is None
    assert m.offer(b"\x00\x01\x00\x00", PUB_WRITER) is None  # (too short to carry a header)
    # an answer to our own request that refuses: that is the answer
    with pytest.raises(Ros2GraphError, match="refused: no"):
        m.offer(encode_reply(TypeDescriptionReply(False, "no"), second[4:20]), PUB_WRITER)


def test_fastdds_refusal_never_ends_the_wait_and_other_types_are_skipped() -> None:
    m = ReplyMatcher(FASTDDS, "good_pkg/msg/Legit", "")
    assert not m.cyclone and len(m.request()) > 4
    assert m.offer(encode_reply(TypeDescriptionReply(False, HOSTILE_REASON * 1000)), FASTDDS_WRITER) is None
    assert m.refusal.startswith("refused: ") and _no_control(m.refusal) and len(m.refusal) < 3 * LIMIT
    other = _reply("good_pkg/msg/Other", {"good_pkg/msg/Other": [_field("y")]})
    assert m.offer(encode_reply(other), FASTDDS_WRITER) is None  # (another client's answer)
    assert m.offer(b"\x00\x01\x00\x00garbage", FASTDDS_WRITER) is None
    text = m.offer(encode_reply(_legit()), FASTDDS_WRITER)
    assert text is not None and text.startswith("int32 x\n")


def test_fetch_definition_over_a_fake_graph_ignores_hostile_replies() -> None:
    """fetch_definition with a stand-in graph: the hostile participant's refusals (first in
    the queue) change nothing; the publisher's answer is taken."""
    from polybag.net.ros2.typedesc import fetch_definition

    class Writer:
        def __init__(self, graph: Graph) -> None:
            self.graph = graph

        def subscriber_count(self) -> int:
            return 1

        def write(self, data: bytes) -> None:
            self.graph.requests.append(data)

        def close(self) -> None:
            pass

    class Reader:
        def __init__(self, graph: Graph) -> None:
            self.graph = graph

        def publisher_count(self) -> int:
            return 2

        def take_sent(self, n: int) -> list[tuple[bytes, int, str]]:
            out = []
            for req in self.graph.requests:
                header = req[4:20]
                out.append(
                    (encode_reply(TypeDescriptionReply(False, HOSTILE_REASON), header), 0, OTHER_WRITER)
                )
                out.append((encode_reply(TypeDescriptionReply(False, "x"), b"\x07" * 16), 0, PUB_WRITER))
                out.append((encode_reply(_legit(), header), 0, PUB_WRITER))
            self.graph.requests.clear()
            return out

        def close(self) -> None:
            pass

    class Graph:
        def __init__(self) -> None:
            self.requests: list[bytes] = []

        def type_servers(self, participant: str) -> list[str]:
            return ["/talker"] if participant == PUBLISHER else []

        def raw_reader(self, *a: object) -> Reader:
            return Reader(self)

        def raw_writer(self, *a: object) -> Writer:
            return Writer(self)

    text = fetch_definition(Graph(), PUBLISHER, "good_pkg/msg/Legit", description_hash(_legit()), 5.0)
    assert "float64 v" in text
    with pytest.raises(Ros2GraphError, match="no type description service"):
        fetch_definition(Graph(), FASTDDS, "good_pkg/msg/Legit", "", 0.1)


def test_guid_prefix() -> None:
    assert guid_prefix(PUBLISHER) == guid_prefix(PUB_WRITER) != guid_prefix(OTHER_WRITER)
    assert guid_prefix("not a guid") == "" and guid_prefix("") == ""


# ------------------------------------------------------------------------------ names in descriptions
@pytest.mark.parametrize(
    "name",
    ["x\nint32 injected", "x;import os", "X", "x_", "_x", "a__b", "x y", "", "x" * 300, "é", "x#y", "x=1"],
)
def test_bad_field_names_are_refused_naming_the_rule(name: str) -> None:
    r = _reply("good_pkg/msg/Legit", {"good_pkg/msg/Legit": [_field(name)]})
    with pytest.raises(Ros2GraphError, match="not a rosidl field name") as e:
        definition_from_reply(decode_reply(encode_reply(r)), "good_pkg/msg/Legit")
    assert _no_control(str(e.value)) and len(str(e.value)) < 1000


@pytest.mark.parametrize(
    "name",
    ["good_pkg/msg/in\nner", "Good/msg/Inner", "good__pkg/msg/Inner", "good_pkg/msg/inner", "good_pkg/Inner",
     "good_pkg/msg/In_ner", "good_pkg/xyz/Inner", "a/msg/B/C", "good_pkg/msg/Inner;rm"],
)  # fmt: skip
def test_bad_type_names_are_refused(name: str) -> None:
    r = _reply(
        "good_pkg/msg/Legit",
        {"good_pkg/msg/Legit": [_field("inner", NESTED, name)], name: [_field("v")]},
    )
    with pytest.raises(Ros2GraphError, match="not a ROS 2 type name"):
        definition_from_reply(decode_reply(encode_reply(r)), "good_pkg/msg/Legit")


def test_name_rules() -> None:
    assert field_name_ok("a") and field_name_ok("linear_acceleration2") and not field_name_ok("a__b")
    assert constant_name_ok("INT32_CONST") and not constant_name_ok("Int") and not constant_name_ok("A__B")
    assert type_name_ok("std_msgs/msg/String") and type_name_ok("pkg/srv/AddTwoInts_Request")
    assert type_name_ok("pkg/action/Fib_SendGoal_Request") and not type_name_ok("pkg/msg/Add_Request")
    assert ros_topic("rt/ns/chatter") == "/ns/chatter"
    for bad in ("rt/\x1b[2J", "rt/a b", "rt/" + "a" * 300, "rt/a-b", "rt/\u202eevil"):
        assert ros_topic(bad) is None, bad
    t = "type_description_interfaces::srv::dds_::GetTypeDescription_Response_"
    assert type_service_node("rr/\x1b]0;x\x07/get_type_descriptionReply", t) is None


def test_bad_constant_in_a_source_falls_back_to_the_fields() -> None:
    r = _legit()
    r.sources = [
        ("good_pkg/msg/Legit", "msg", "int32 Bad_Const=1\nint32 x\ngood_pkg/Inner inner\nstring name\n"),
        ("good_pkg/msg/Inner", "msg", "float64 v\nuint8[] data\n"),
    ]
    text = definition_from_reply(decode_reply(encode_reply(r)), r.type_name, description_hash(r))
    assert "Bad_Const" not in text and _stored_fields(text, r.type_name) == _described_fields(r)


def test_sources_that_say_more_than_the_description_are_not_stored() -> None:
    """A source text whose string default unescapes to a line break (or with a field the
    description has not) would store another type: the fields are used instead."""
    r = _legit()
    inner_src = 'float64 v\nuint8[] data\nstring s "a\\nint32 injected"\n'
    r.sources = [
        ("good_pkg/msg/Legit", "msg", "int32 x\ngood_pkg/Inner inner\nstring name\n"),
        ("good_pkg/msg/Inner", "msg", inner_src),
    ]
    text = definition_from_reply(decode_reply(encode_reply(r)), r.type_name, description_hash(r))
    assert "injected" not in text and _stored_fields(text, r.type_name) == _described_fields(r)


@pytest.mark.parametrize(
    "default",
    ["0\nint32 injected", "'a\\nint32 injected'", "1 # c", "__import__('os')", "(1, [2, (3,)])", "\x1b[2J"],
)
def test_default_values_never_inject_text(default: str) -> None:
    r = _reply(
        "good_pkg/msg/Legit", {"good_pkg/msg/Legit": [_field("x", default=default), _field("s", STRING)]}
    )
    text = definition_from_reply(decode_reply(encode_reply(r)), r.type_name, description_hash(r))
    assert "injected" not in text and "import" not in text and _no_control(text.replace("\n", ""))
    assert _stored_fields(text, r.type_name) == _described_fields(r)


def test_real_defaults_become_msg_defaults() -> None:
    r = decode_reply(REPLY)
    r.sources = []
    text = definition_from_reply(r, ARRAYS, ARRAYS_HASH)
    assert "bool[3] bool_values_default [false, true, false]" in text
    assert 'string[3] string_values_default ["", "max value", "min value"]' in text


def test_hash_is_checked_against_the_description_as_received() -> None:
    r = decode_reply(REPLY)
    assert description_hash(r) == ARRAYS_HASH
    r.types["test_msgs/msg/BasicTypes"][0].name = "renamed"  # (a valid name: only the hash can tell)
    with pytest.raises(Ros2GraphError, match="is not the announced"):
        definition_from_reply(r, ARRAYS, ARRAYS_HASH)


def test_description_must_describe_what_it_uses_and_only_that() -> None:
    r = _reply("good_pkg/msg/Legit", {"good_pkg/msg/Legit": [_field("inner", NESTED, "good_pkg/msg/Inner")]})
    with pytest.raises(Ros2GraphError, match="does not describe"):
        definition_from_reply(r, r.type_name)
    r.types["good_pkg/msg/Inner"] = [_field("v")]
    r.types["good_pkg/msg/Unused"] = [_field("v")]
    with pytest.raises(Ros2GraphError, match="described but not used"):
        definition_from_reply(r, r.type_name)
    r = _reply("good_pkg/msg/Legit", {"good_pkg/msg/Legit": [_field("me", NESTED, "good_pkg/msg/Legit")]})
    with pytest.raises(Ros2GraphError, match="contains itself"):
        definition_from_reply(r, r.type_name)
    r = _reply("good_pkg/msg/Legit", {"good_pkg/msg/Legit": [_field("x", 12)]})
    with pytest.raises(Ros2GraphError, match="type id 12"):
        definition_from_reply(r, r.type_name)


# ------------------------------------------------------------------------------ limits
def _wide(n: int) -> TypeDescriptionReply:
    return _reply("good_pkg/msg/Wide", {"good_pkg/msg/Wide": [_field(f"f{i}") for i in range(n)]})


def test_a_wide_description_is_refused_early_with_bounded_memory() -> None:
    with pytest.raises(Ros2GraphError, match="more than"):
        decode_reply(encode_reply(_wide(100_000)))  # (4.8 MB: refused by its size)
    data = encode_reply(_wide(60_000))
    tracemalloc.start()
    try:
        with pytest.raises(Ros2GraphError, match=f"more than {MAX_FIELDS} fields") as e:
            decode_reply(data)
        _cur, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "limits for definitions from the network" in str(e.value)
    assert peak < 1024 * 1024, peak  # (the reply is 2.9 MB; nothing is built from it)


def test_limits_on_nesting_and_expansion() -> None:
    ok = definition_from_reply(_wide(MAX_FIELDS), "good_pkg/msg/Wide")
    assert ok.count("\n") == MAX_FIELDS
    # a chain deeper than MAX_DEPTH
    chain = {
        f"good_pkg/msg/T{i}": [_field("n", NESTED, f"good_pkg/msg/T{i + 1}")] for i in range(MAX_DEPTH + 2)
    }
    chain[f"good_pkg/msg/T{MAX_DEPTH + 2}"] = [_field("v")]
    with pytest.raises(Ros2GraphError, match=f"more than {MAX_DEPTH} deep"):
        definition_from_reply(_reply("good_pkg/msg/T0", chain), "good_pkg/msg/T0")
    # few fields, but fixed arrays of messages that expand to millions
    boom = {
        f"good_pkg/msg/B{i}": [_field("n", NESTED + ARRAY, f"good_pkg/msg/B{i + 1}", cap=100)]
        for i in range(4)
    }
    boom["good_pkg/msg/B4"] = [_field("v")]
    with pytest.raises(Ros2GraphError, match=f"more than {MAX_FLAT} expanded fields"):
        definition_from_reply(_reply("good_pkg/msg/B0", boom), "good_pkg/msg/B0")


def test_a_huge_reply_is_refused_by_its_size() -> None:
    with pytest.raises(Ros2GraphError, match="more than"):
        decode_reply(b"\x00\x01\x00\x00" + b"\x00" * (5 * 1024 * 1024))


# ------------------------------------------------------------------------------ peer text
def test_peer_text_escapes_and_cuts() -> None:
    out = peer_text(HOSTILE_REASON)
    assert out == "\\x1b]0;title\\x07\\x1b[2J"
    big = peer_text("\x1b" * (16 * 1024 * 1024))
    assert len(big) < 5 * LIMIT and big.endswith(f"... ({16 * 1024 * 1024} characters)") and _no_control(big)
    assert peer_text("a\u202eb\u2028c\ud800") == "a\\u202eb\\u2028c\\ud800"
    assert peer_text(b"\xff\x1bx") == "\\xff\\x1bx"
    assert safe_line("plain /topic ü") == "plain /topic ü"


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=2000))
def test_peer_text_is_always_one_short_safe_line(s: str) -> None:
    out = peer_text(s)
    assert _no_control(out) and "\n" not in out and len(out) <= 10 * LIMIT + 40


def test_a_refusal_reason_is_escaped_and_cut_in_the_error() -> None:
    r = TypeDescriptionReply(False, (HOSTILE_REASON * 3) + "x" * (1 << 20))
    with pytest.raises(Ros2GraphError) as e:
        definition_from_reply(decode_reply(encode_reply(r)), "good_pkg/msg/Legit")
    assert "\\x1b]0;title\\x07" in str(e.value) and _no_control(str(e.value)) and len(str(e.value)) < 1000


def test_recorder_warnings_about_a_hostile_reason_are_safe() -> None:
    from polybag.record.live_ros2 import Ros2Source

    said: list[str] = []
    src = Ros2Source(log=said.append)
    src._warn_unknown("/legit", "good_pkg/msg/Legit", "refused: " + HOSTILE_REASON * 100_000)
    src._error("DDS said " + HOSTILE_REASON)
    assert len(said) == 2 and all(_no_control(s) and len(s) < 3000 for s in said), said
    assert src.warnings and _no_control(src.warnings[0]) and "raw CDR" in src.warnings[0]


def test_ros1_shutdown_reason_from_any_caller_is_escaped(caplog: pytest.LogCaptureFixture) -> None:
    from polybag.net.ros1 import Node

    node = Node("/hostile_test", master_uri="http://127.0.0.1:9/", host="127.0.0.1", anonymous=True)
    try:
        with caplog.at_level(logging.WARNING, logger="polybag.net.ros1"):
            # (XML cannot carry ESC: a line break, C1 controls and a bidi override can)
            reason = "\u202eevil\nforged log line\x85\x9b2J" + "x" * 100_000
            xmlrpc.client.ServerProxy(node.uri).shutdown("/evil", reason)
            assert node.shutdown_requested.wait(10)
        assert _no_control(node.shutdown_reason) and len(node.shutdown_reason) < 2 * LIMIT
        assert all(_no_control(r.getMessage()) for r in caplog.records)
    finally:
        node.close()


# ------------------------------------------------------------------------------ sample bytes
@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=4, max_size=64).map(lambda b: b"\x00\x01\x00\x00" + b[4:]))
def test_padding_is_zeros_declared_and_taken_off_again(sample: bytes) -> None:
    sent = pad(sample)
    assert len(sent) % 4 == 0 and sent[4 : len(sample)] == sample[4:]
    assert set(sent[len(sample) :]) <= {0}  # (never bytes from past the message)
    assert unpad(sent) == sample


def test_nine_byte_sample_is_recorded_as_nine_bytes() -> None:
    nine = b"\x00\x01\x00\x00\x01\x02\x03\x04\x05"
    wire = b"\x00\x01\x00\x03\x01\x02\x03\x04\x05\x00\x00\x00"  # (as a declaring writer sends it)
    assert unpad(wire) == nine and pad(nine) == wire
    assert unpad(b"\x00\x01\x00\x03\x01") == b"\x00\x01\x00\x03\x01"  # (never into the header)
    assert unpad(b"\x00\x01\x00\x00\x01\x7f\x00\x00") == b"\x00\x01\x00\x00\x01\x7f\x00\x00"  # (undeclared)


# ------------------------------------------------------------------------------ round trips
_ident = st.from_regex(r"[a-z]([a-z0-9]{0,6}_?[a-z0-9]{1,6})?", fullmatch=True).filter(
    lambda s: "__" not in s
)
_type_ids = st.sampled_from([2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 15, 16, 17, 21])


@st.composite
def _descriptions(draw: st.DrawFn) -> TypeDescriptionReply:
    n_types = draw(st.integers(1, 4))
    names = [f"pkg{i}/msg/T{i}" for i in range(n_types)]
    types: dict[str, list[FieldDescription]] = {}
    for i, name in enumerate(names):
        fnames = draw(st.lists(_ident, min_size=1, max_size=6, unique=True))
        fields = []
        for fname in fnames:
            kind = draw(st.sampled_from([0, ARRAY, 96, SEQ]))
            cap = draw(st.integers(1, 5)) if kind in (ARRAY, 96) else 0
            if i + 1 < n_types and fname == fnames[0]:
                fields.append(FieldDescription(fname, NESTED + kind, cap, 0, names[i + 1]))
                continue
            tid = draw(_type_ids)
            scap = draw(st.integers(1, 9)) if tid == 21 else 0
            fields.append(
                FieldDescription(fname, tid + kind, cap, scap, "", draw(st.sampled_from(["", "1", "x\ny"])))
            )
        types[name] = fields
    return _reply(names[0], types)


@settings(max_examples=150, deadline=None)
@given(_descriptions())
def test_stored_definition_reparses_to_the_described_fields(r: TypeDescriptionReply) -> None:
    h = description_hash(r)
    text = definition_from_reply(decode_reply(encode_reply(r)), r.type_name, h)
    assert _stored_fields(text, r.type_name) == _described_fields(r)
    assert type_hash(parse_full(r.type_name, text, "ros2"), r.type_name) == h


@settings(max_examples=300, deadline=None)
@given(st.integers(0, len(REPLY) - 1), st.binary(min_size=1, max_size=8))
def test_corrupted_real_reply_is_a_graph_error_or_the_described_fields(pos: int, junk: bytes) -> None:
    bad = REPLY[:pos] + junk + REPLY[pos + len(junk) :]
    try:
        r = decode_reply(bad)
        text = definition_from_reply(r, ARRAYS, "")
    except PolybagError as e:
        assert isinstance(e, Ros2GraphError) and _no_control(str(e))
        return
    assert _stored_fields(text, ARRAYS) == _described_fields(r)


def test_request_id_layout_is_rmw_cyclonedds() -> None:
    m = ReplyMatcher(PUBLISHER, "a/msg/B", "RIHS01_x", client=b"C" * 8)
    req = m.request()
    assert (
        req[:4] == b"\x00\x01\x00\x00" and req[4:12] == b"C" * 8 and struct.unpack("<q", req[12:20])[0] == 1
    )


def test_recorded_qos_text_is_parsed_bounded_and_never_raises() -> None:
    """``play --ros2`` reads ``offered_qos_profiles`` from a file: a value its YAML tag cannot
    take (a date out of range) or an alias bomb is no profile, never an exception."""
    from polybag.net.ros2.qos import parse_profiles

    assert parse_profiles("- reliability: 2001-13-45") == []
    levels = ["a: &a [1,1,1,1,1,1,1,1,1]"]
    for prev, name in zip("abcdefg", "bcdefgh"):
        levels.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    assert parse_profiles("\n".join(levels)) == []  # 9**8 nodes if expanded
    assert parse_profiles("- history: 1\n  depth: 5") == [{"history": "keep_last", "depth": 5}]
