"""The bridges between message encodings, by (source encoding, target encoding), and the
chains they make: every conversion path exists once, as a chain of these.

=========  =========  ==========================================================
source     target     bridge
=========  =========  ==========================================================
``ulog``   ``ros1``   :func:`polybag.bridges.ulog_ros1.ulog_to_ros1`
``ros1``   ``cdr``    :func:`polybag.bridges.ros1_ros2.ros1_to_ros2`
``cdr``    ``ros1``   :func:`polybag.bridges.ros1_ros2.ros2_to_ros1`
``ros1``   ``ulog``   :func:`polybag.bridges.ros1_ulog.ros1_to_ulog`
=========  =========  ==========================================================

so ULog -> ROS 1 -> ROS 2 and ROS 2 -> ROS 1 -> ULog are chains.  Each bridge is named as
``"module:function"`` (imported on first use, like the format registry's openers).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from polybag.bridges.protocol import Bridge


@dataclass(frozen=True)
class BridgeSpec:
    """One bridge: its encodings, its function and how it names what it refuses."""

    source: str
    target: str
    #: ``"module:function"``: the :class:`~polybag.bridges.protocol.Bridge`
    function: str
    #: why a channel this bridge cannot carry is dropped: ``{type}`` is its type name,
    #: ``{error}`` the bridge's error
    refusal: str
    #: taken even into an output that holds any encoding (an MCAP without a profile):
    #: ULog messages are written as ROS 1 ones
    always: bool = False

    def load(self) -> Bridge:
        """The bridge function (imported on first use)."""
        module, _, name = self.function.partition(":")
        fn: Bridge = getattr(importlib.import_module(module), name)
        return fn


BRIDGES: dict[tuple[str, str], BridgeSpec] = {}


def register(spec: BridgeSpec) -> None:
    """Add a bridge (one per pair of encodings)."""
    BRIDGES[(spec.source, spec.target)] = spec


def bridge(source: str, target: str) -> BridgeSpec:
    """The bridge from ``source`` to ``target`` (KeyError: none)."""
    return BRIDGES[(source, target)]


def always_bridged(source: str) -> str | None:
    """The encoding a channel of ``source`` is carried into even where any encoding is held
    (None: it is written as it is)."""
    return next((s.target for s in BRIDGES.values() if s.source == source and s.always), None)


def bridge_chain(source: str, goal: str) -> list[str] | None:
    """The encodings a message of ``source`` goes through to reach ``goal`` (both ends
    included: ``["ulog", "ros1", "cdr"]``), the shortest chain of :data:`BRIDGES`; None when
    no chain of bridges reaches it."""
    paths = {source: [source]}
    todo = [source]
    while todo:
        enc = todo.pop(0)
        if enc == goal:
            return paths[enc]
        for nxt in [t for s, t in BRIDGES if s == enc]:
            if nxt not in paths:
                paths[nxt] = [*paths[enc], nxt]
                todo.append(nxt)
    return None


register(
    BridgeSpec(
        "ulog", "ros1", "polybag.bridges.ulog_ros1:ulog_to_ros1", "cannot map {type} to ROS 1: {error}", always=True
    )
)
register(BridgeSpec("ros1", "cdr", "polybag.bridges.ros1_ros2:ros1_to_ros2", "cannot map {type} to ROS 2: {error}"))
register(BridgeSpec("cdr", "ros1", "polybag.bridges.ros1_ros2:ros2_to_ros1", "cannot map {type} to ROS 1: {error}"))
register(BridgeSpec("ros1", "ulog", "polybag.bridges.ros1_ulog:ros1_to_ulog", "ULog files cannot hold it: {error}"))
