"""ROS 2 QoS profiles as recorded (``offered_qos_profiles``: a YAML list, one profile per
publisher), shared by the formats that keep them in a topic's or channel's metadata
(rosbag2's metadata.yaml and storage, an MCAP file's channels): parsed, dumped, and merged
as a recording sees more publishers of a topic (:func:`merged_qos`, bounded: profiles come
from peers)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import yaml  # type: ignore[import-untyped]  # no stubs installed (types-PyYAML is not a dependency)

from polybag.errors import FormatError
from polybag.util import safe_yaml as _yaml

#: QoS profiles one topic (or channel) keeps (they come from peers: bounded)
MAX_QOS_PROFILES = 64

_Dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def qos_to_text(value: Any) -> str:
    """``offered_qos_profiles`` as the YAML string polybag keeps in channel metadata (a
    version-9 list is dumped; a string is kept as it is)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and not value:
        return ""
    try:
        return str(yaml.dump(value, Dumper=_Dumper, default_flow_style=False, sort_keys=False)).strip()
    except yaml.YAMLError:
        return ""


def parse_qos(text: str) -> list[dict[str, Any]] | None:
    """The QoS profiles of a YAML string as a list of mappings; None when they do not parse."""
    if not text.strip():
        return []
    try:
        got = _yaml.load(text, "offered_qos_profiles")
    except FormatError:
        return None
    if not isinstance(got, list) or not all(isinstance(p, dict) for p in got):
        return None
    return got


def merged_qos(old: str, new: str) -> str:
    """``old`` QoS profiles (YAML text, one per publisher) with those of ``new`` it lacks added:
    each profile as many times as the more of the two lists it (``new`` is the topic's
    publishers as they are now: two publishers with one profile list it twice, as rosbag2
    does; giving a list again adds nothing), at most :data:`MAX_QOS_PROFILES`; ``old`` when
    either does not parse."""
    if not new or new == old:
        return old
    if not old:
        return new
    a, b = parse_qos(old), parse_qos(new)
    if a is None or b is None:
        return old

    def key(p: dict[str, Any]) -> str:
        return json.dumps(p, sort_keys=True, default=str)

    out = list(a)
    have = Counter(key(p) for p in a)
    seen: Counter[str] = Counter()
    for p in b:
        if len(out) >= MAX_QOS_PROFILES:
            break
        k = key(p)
        seen[k] += 1
        if seen[k] > have[k]:
            have[k] += 1
            out.append(p)
    return old if len(out) == len(a) else qos_to_text(out)


__all__ = ["MAX_QOS_PROFILES", "merged_qos", "parse_qos", "qos_to_text"]
