"""``Ros2Source`` against peers announcing ever new topics: at most ``MAX_TOPICS`` readers
(one per topic however many publishers), one warning, and a discovered publication acted on
without waiting for the next poll (no DDS needed: a stand-in graph)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from polybag.net.ros2.graph import Publication
from polybag.record.live_ros2 import MAX_TOPICS, Ros2Source
from polybag.record.options import RecordOptions


class _Graph:
    def __init__(self, pubs: list[Publication]) -> None:
        self.pubs = pubs
        self.taken = False
        self.readers: list[str] = []

    def poll(self) -> tuple[list[Publication], list[Publication]]:
        new, self.taken = ([] if self.taken else self.pubs), True
        return new, []

    def topics(self) -> dict[str, list[Publication]]:
        out: dict[str, list[Publication]] = {}
        for p in self.pubs:
            out.setdefault(p.topic, []).append(p)
        return out

    def reader(self, topic: str, dds_type: str, requested: dict[str, Any], typeid: Any = None) -> Any:
        self.readers.append(topic)
        return SimpleNamespace(condition=object())


def _pub(i: int, topic: str) -> Publication:
    qos = {"reliability": "reliable", "durability": "volatile"}
    return Publication(f"g{i}", f"p{i}", topic, "std_msgs/msg/String", "std_msgs::msg::dds_::String_", qos)


def _source(graph: _Graph) -> Ros2Source:
    said: list[str] = []
    o = RecordOptions(quiet=True, all=True)
    src = Ros2Source(o, graph=graph, log=said.append)
    rec = SimpleNamespace(options=o)
    src._recs = (rec,)
    src._rec_done[id(rec)] = set()
    src._waitset = SimpleNamespace(attach=lambda _c: None)
    return src


def test_ever_new_topics_make_at_most_max_topics_readers() -> None:
    n = MAX_TOPICS + 500
    graph = _Graph([_pub(i, f"/flood/t{i}") for i in range(n)] + [_pub(n + i, "/flood/t0") for i in range(50)])
    src = _source(graph)
    src._discover()
    assert len(graph.readers) == MAX_TOPICS == len(src.topics)
    assert len(set(graph.readers)) == MAX_TOPICS  # (one reader per topic, whatever its publishers)
    flood = [w for w in src.warnings if f"more than {MAX_TOPICS} topics published" in w]
    assert len(flood) == 1 and flood[0].endswith("and later ones not recorded"), src.warnings


def test_a_discovered_publication_is_subscribed_before_the_next_poll() -> None:
    graph = _Graph([_pub(0, "/late")])
    src = _source(graph)
    src.poll = 3600.0  # (no poll would come during the test)
    woken = SimpleNamespace(triggered=True)
    graph.discovered = woken  # type: ignore[attr-defined]
    calls = {"n": 0}

    def wait(_ns: int) -> int:
        calls["n"] += 1
        if calls["n"] > 1:
            src._stop.set()
        return 1

    src._waitset = SimpleNamespace(attach=lambda _c: None, wait=wait)
    src._drain = lambda final=False: None  # type: ignore[method-assign]
    src._run()
    assert graph.readers == ["/late"] and src.topics == ["/late"]


def test_localhost_discovery_announces_often_enough_for_late_fast_dds_nodes() -> None:
    """(A Fast DDS node that ignored Cyclone's first answer learned of us 1.1 s late.)"""
    from polybag.net.ros2 import cyclone_config
    from polybag.net.ros2.graph import LOCALHOST_SPDP_INTERVAL

    local = cyclone_config({"ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"})
    assert f"<SPDPInterval>{LOCALHOST_SPDP_INTERVAL}</SPDPInterval>" in local
    assert LOCALHOST_SPDP_INTERVAL.endswith("ms") and 0 < int(LOCALHOST_SPDP_INTERVAL[:-2]) <= 500
    assert "SPDPInterval" not in cyclone_config({})  # (not on a network: multicast, as Cyclone's default)
    user = '<CycloneDDS><Domain id="any"><Discovery><SPDPInterval>5s</SPDPInterval></Discovery></Domain></CycloneDDS>'
    assert cyclone_config({"ROS_LOCALHOST_ONLY": "1", "CYCLONEDDS_URI": user}).endswith(user)  # (the user's wins)
