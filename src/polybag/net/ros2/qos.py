"""QoS: a DDS writer's offered QoS as rosbag2's ``offered_qos_profiles``, the QoS a recorder
requests for a set of offers (rosbag2's rule), and a recorded profile as a writer's QoS.

A profile is a mapping with rosbag2's keys (``history``, ``depth``, ``reliability``,
``durability``, ``deadline``, ``lifespan``, ``liveliness``, ``liveliness_lease_duration``,
``avoid_ros_namespace_conventions``) and enum names as ``metadata.yaml`` version 9 spells
them.  Durations are ``{sec, nsec}``; DDS's infinite is ``{sec: 9223372036, nsec: 854775807}``
as rosbag2 Jazzy writes it.  History is not part of DDS discovery data, so an offer's
history is ``unknown`` with depth 0, as ``ros2 bag record`` stores it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import yaml  # type: ignore[import-untyped]  # no stubs installed (types-PyYAML is not a dependency)

INFINITE_NS = 0x7FFFFFFFFFFFFFFF
#: the depth of a recorder's reader queue (keep_last): it is emptied continuously
READER_DEPTH = 4000


def _duration(ns: int | None) -> dict[str, int]:
    n = INFINITE_NS if ns is None or ns < 0 or ns >= INFINITE_NS else int(ns)
    return {"sec": n // 1_000_000_000, "nsec": n % 1_000_000_000}


def _ns(value: Any) -> int:
    """A profile duration (``{sec, nsec}``) as ns; anything unreadable or huge is infinite."""
    if not isinstance(value, Mapping):
        return INFINITE_NS
    try:
        sec, nsec = int(value.get("sec", 0)), int(value.get("nsec", 0))
    except (TypeError, ValueError):
        return INFINITE_NS
    # (rosbag2 before Jazzy wrote infinite as sec 2147483647, nsec 4294967295)
    if sec < 0 or nsec < 0 or sec >= 2147483647:
        return INFINITE_NS
    return min(INFINITE_NS, sec * 1_000_000_000 + nsec)


def offered_profile(qos: Any) -> dict[str, Any]:
    """The rosbag2 profile of a DDS writer's QoS (a ``cyclonedds.qos.Qos`` from discovery)."""
    from cyclonedds.qos import Policy

    def get(policy: Any) -> Any:
        try:
            return qos[policy] if qos is not None else None
        except (KeyError, TypeError, AttributeError):
            return None

    rel = get(Policy.Reliability)
    dur = get(Policy.Durability)
    live = get(Policy.Liveliness)
    deadline = get(Policy.Deadline)
    lifespan = get(Policy.Lifespan)
    if isinstance(live, Policy.Liveliness.ManualByTopic):
        liveliness = "manual_by_topic"
    elif isinstance(live, Policy.Liveliness.ManualByParticipant):
        liveliness = "manual_by_node"
    else:
        liveliness = "automatic"
    return {
        "history": "unknown",
        "depth": 0,
        "reliability": "best_effort" if rel == Policy.Reliability.BestEffort else "reliable",
        # (transient and persistent are at least transient_local for ROS 2)
        "durability": "volatile" if dur is None or dur == Policy.Durability.Volatile else "transient_local",
        "deadline": _duration(getattr(deadline, "deadline", None)),
        "lifespan": _duration(getattr(lifespan, "lifespan", None)),
        "liveliness": liveliness,
        "liveliness_lease_duration": _duration(getattr(live, "lease_duration", None)),
        "avoid_ros_namespace_conventions": False,
    }


def profiles_text(profiles: Iterable[Mapping[str, Any]]) -> str:
    """Profiles as the YAML text polybag keeps in ``offered_qos_profiles`` channel metadata."""
    items = [dict(p) for p in profiles]
    if not items:
        return ""
    return str(yaml.safe_dump(items, default_flow_style=False, sort_keys=False)).strip()


def parse_profiles(text: str) -> list[dict[str, Any]]:
    """``offered_qos_profiles`` text (enum names or rosbag2's older numbers) as profiles;
    ``[]`` when it is empty or does not parse."""
    if not text or not text.strip():
        return []
    from polybag.errors import PolybagError
    from polybag.util import safe_yaml as _yaml

    try:  # (recorded text is untrusted: bounded, and a value its tag cannot take is no profile)
        got = _yaml.load(text, "offered_qos_profiles")
    except PolybagError:
        return []
    if not isinstance(got, list):
        return []
    from polybag.formats.rosbag2.metadata import QOS_ENUMS as numbers  # the enums by number (metadata <= v8)

    out = []
    for p in got:
        if not isinstance(p, dict):
            continue
        q = dict(p)
        for key, names in numbers.items():
            v = q.get(key)
            if isinstance(v, int) and not isinstance(v, bool):
                q[key] = names[v] if 0 <= v < len(names) else "unknown"
            elif isinstance(v, str):
                q[key] = v.lower()
        out.append(q)
    return out


def requested_profile(offers: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """What a recorder asks for given the publishers' offers (rosbag2's rule): reliable only
    when every offer is reliable, transient_local only when every offer is; no deadline,
    automatic liveliness (compatible with every offer)."""
    offers = list(offers)
    reliable = bool(offers) and all(o.get("reliability") != "best_effort" for o in offers)
    latched = bool(offers) and all(o.get("durability") == "transient_local" for o in offers)
    return {
        "history": "keep_last",
        "depth": READER_DEPTH,
        "reliability": "reliable" if reliable else "best_effort",
        "durability": "transient_local" if latched else "volatile",
        "deadline": _duration(None),
        "lifespan": _duration(None),
        "liveliness": "automatic",
        "liveliness_lease_duration": _duration(None),
        "avoid_ros_namespace_conventions": False,
    }


def incompatibility(offer: Mapping[str, Any], requested: Mapping[str, Any]) -> str:
    """Why a writer offering ``offer`` does not match a reader requesting ``requested``
    (DDS's request/offer rules), or ``""`` when they match."""
    why = []
    if requested.get("reliability") == "reliable" and offer.get("reliability") == "best_effort":
        why.append("it offers best_effort reliability, the subscription is reliable")
    if requested.get("durability") == "transient_local" and offer.get("durability") != "transient_local":
        why.append(f"it offers {offer.get('durability')} durability, the subscription is transient_local")
    if _ns(offer.get("deadline")) > _ns(requested.get("deadline")):
        why.append("its deadline is longer than the subscription's")
    order = ("automatic", "manual_by_node", "manual_by_topic")
    lo, lr = str(offer.get("liveliness", "automatic")), str(requested.get("liveliness", "automatic"))
    if lo in order and lr in order and order.index(lo) < order.index(lr):
        why.append(f"it offers {lo} liveliness, the subscription wants {lr}")
    return "; ".join(why)


def dds_qos(profile: Mapping[str, Any], *, depth: int | None = None, writer: bool = False) -> Any:
    """A ``cyclonedds.qos.Qos`` for ``profile`` (``depth`` overrides keep_last's depth;
    unknown or system-default history becomes keep_last).  Writers keep history,
    reliability and durability and announce XCDR1 only, as rmw implementations read it."""
    from cyclonedds.qos import Policy, Qos

    d = int(depth if depth is not None else (profile.get("depth") or 0)) or 10
    history = (
        Policy.History.KeepAll if profile.get("history") == "keep_all" else Policy.History.KeepLast(max(1, d))
    )
    rel = (
        Policy.Reliability.BestEffort
        if profile.get("reliability") == "best_effort"
        else Policy.Reliability.Reliable(max_blocking_time=100_000_000)
    )
    dur = (
        Policy.Durability.TransientLocal
        if profile.get("durability") == "transient_local"
        else Policy.Durability.Volatile
    )
    policies = [history, rel, dur]
    if writer:
        # (a player promises neither a deadline nor manual liveliness: those are kept in
        # the file; the writer offers the defaults, which every reader accepts)
        policies.append(Policy.DataRepresentation(use_cdrv0_representation=True))
        if profile.get("durability") == "transient_local":
            # (Cyclone keeps for late readers what DURABILITY_SERVICE's history says, 1 by
            # default: the same history as the writer's, as rmw_cyclonedds does)
            policies.append(Policy.DurabilityService(0, history, -1, -1, -1))
        return Qos(*policies)
    deadline = _ns(profile.get("deadline"))
    if deadline < INFINITE_NS:
        policies.append(Policy.Deadline(deadline))
    lease = _ns(profile.get("liveliness_lease_duration"))
    live = profile.get("liveliness")
    if live == "manual_by_topic":
        policies.append(Policy.Liveliness.ManualByTopic(lease))
    elif live == "manual_by_node":
        policies.append(Policy.Liveliness.ManualByParticipant(lease))
    elif lease < INFINITE_NS:
        policies.append(Policy.Liveliness.Automatic(lease))
    return Qos(*policies)


def summary(profile: Mapping[str, Any]) -> str:
    """A profile in a few words for people (``reliable transient_local``)."""
    return f"{profile.get('reliability', '?')} {profile.get('durability', '?')}"
