"""polybag.net.ros2 without a graph: names, QoS mapping, discovery configuration."""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ros2_graph import cyclone_problem

from polybag.errors import UsageError
from polybag.net.ros2 import (
    cyclone_config,
    dds_topic,
    dds_type,
    discovery_range,
    domain_id,
    ros_topic,
    ros_type,
    type_hash,
)
from polybag.net.ros2.qos import (
    INFINITE_NS,
    dds_qos,
    incompatibility,
    parse_profiles,
    profiles_text,
    requested_profile,
)

ident = st.from_regex(r"[a-z][a-z0-9_]{0,12}", fullmatch=True)
Ident = st.from_regex(r"[A-Z][A-Za-z0-9]{0,12}", fullmatch=True)


def test_topic_names() -> None:
    assert ros_topic("rt/chatter") == "/chatter"
    assert ros_topic("rt/ns/sub/chatter") == "/ns/sub/chatter"
    assert ros_topic("rq/add_two_intsRequest") is None
    assert ros_topic("ros_discovery_info") is None
    assert ros_topic("rt/") is None
    assert dds_topic("/ns/chatter") == "rt/ns/chatter"
    assert dds_topic("chatter") == "rt/chatter"


@given(ident, Ident)
def test_type_names_round_trip(pkg: str, name: str) -> None:
    ros = f"{pkg}/msg/{name}"
    assert ros_type(dds_type(ros)) == ros
    assert dds_type(f"{pkg}/{name}") == f"{pkg}::msg::dds_::{name}_"


@pytest.mark.parametrize(
    "bad", ["Foo", "a::b::c", "a::msg::dds_::", "a::msg::x::T_", "a::msg::dds_::T", "a b::msg::dds_::T_"]
)
def test_non_ros_type_names(bad: str) -> None:
    assert ros_type(bad) is None


@given(st.text(max_size=40))
def test_dds_type_refuses_what_is_not_a_type_name(text: str) -> None:
    try:
        out = dds_type(text)
    except UsageError:
        return
    assert out.endswith("_") and "::dds_::" in out


def test_type_hash_from_user_data() -> None:
    h = "RIHS01_" + "ab" * 32
    assert type_hash(f"typehash={h};".encode()) == h
    assert type_hash(b"enclave=/;typehash=" + h.encode() + b";") == h
    assert type_hash(b"typehash=RIHS01_zz;") == ""
    assert type_hash(None) == ""
    assert type_hash(b"\xff\xfe") == ""


def test_domain_and_discovery_range_from_environment() -> None:
    assert domain_id({}) == 0
    assert domain_id({"ROS_DOMAIN_ID": "42"}) == 42
    for bad in ("x", "-1", "233"):
        with pytest.raises(UsageError):
            domain_id({"ROS_DOMAIN_ID": bad})
    assert discovery_range({}) == "SUBNET"
    assert (
        discovery_range({"ROS_LOCALHOST_ONLY": "1", "ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET"}) == "LOCALHOST"
    )
    assert discovery_range({"ROS_AUTOMATIC_DISCOVERY_RANGE": "off"}) == "OFF"
    with pytest.raises(UsageError):
        discovery_range({"ROS_AUTOMATIC_DISCOVERY_RANGE": "everywhere"})
    default = cyclone_config({})
    assert (
        "SocketReceiveBufferSize" in default and "Peer" not in default and "NetworkInterface" not in default
    )
    local = cyclone_config({"ROS_LOCALHOST_ONLY": "1"})
    assert local is not None and 'address="127.0.0.1"' in local and "<AllowMulticast>false" in local
    off = cyclone_config({"ROS_AUTOMATIC_DISCOVERY_RANGE": "OFF"})
    assert off is not None and "<Peers></Peers>" in off
    peers = cyclone_config({"ROS_STATIC_PEERS": 'host1;10.0.0.2;"<x>'})
    assert (
        peers is not None and 'Peer address="host1"' in peers and "&lt;x&gt;" in peers and "<x>" not in peers
    )


def test_requested_qos_follows_rosbag2_rule() -> None:
    rel = {"reliability": "reliable", "durability": "transient_local"}
    be = {"reliability": "best_effort", "durability": "volatile"}
    assert requested_profile([rel])["reliability"] == "reliable"
    assert requested_profile([rel])["durability"] == "transient_local"
    mixed = requested_profile([rel, be])
    assert mixed["reliability"] == "best_effort" and mixed["durability"] == "volatile"
    assert incompatibility(be, requested_profile([rel])).count("best_effort") == 1
    assert "volatile" in incompatibility(be, requested_profile([rel]))
    assert incompatibility(rel, mixed) == ""


def test_profiles_text_round_trip_and_old_numbers() -> None:
    p = requested_profile([{"reliability": "reliable"}])
    assert parse_profiles(profiles_text([p])) == [p]
    old = "- history: 3\n  depth: 0\n  reliability: 2\n  durability: 1\n"
    got = parse_profiles(old)
    assert got[0]["reliability"] == "best_effort" and got[0]["durability"] == "transient_local"
    assert got[0]["history"] == "unknown"
    assert parse_profiles("") == [] and parse_profiles(": [") == [] and parse_profiles("3") == []


@pytest.mark.skipif(bool(cyclone_problem()), reason=cyclone_problem() or "cyclonedds")
def test_dds_qos_from_profile() -> None:
    from cyclonedds.qos import Policy

    q = dds_qos(
        {"reliability": "best_effort", "durability": "transient_local", "history": "keep_last", "depth": 5}
    )
    assert q[Policy.Reliability] == Policy.Reliability.BestEffort
    assert q[Policy.Durability] == Policy.Durability.TransientLocal
    assert q[Policy.History] == Policy.History.KeepLast(5)
    w = dds_qos(
        {"reliability": "reliable", "deadline": {"sec": 1, "nsec": 0}, "liveliness": "manual_by_topic"},
        writer=True,
    )
    assert isinstance(w[Policy.Reliability], Policy.Reliability.Reliable)
    assert w[Policy.Deadline] is None  # (a player promises no deadline)
    r = dds_qos({"deadline": {"sec": 1, "nsec": 0}})
    assert r[Policy.Deadline].deadline == 1_000_000_000
    inf = dds_qos({"deadline": {"sec": 2147483647, "nsec": 4294967295}})
    assert inf[Policy.Deadline] is None
    assert INFINITE_NS == 2**63 - 1
