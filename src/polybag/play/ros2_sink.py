"""Publish played messages to a live ROS 2 graph through DDS (:mod:`polybag.net.ros2`).

Each ROS 2 channel (``cdr`` messages: a rosbag2 bag, an MCAP file with the ``ros2``
profile) gets a DDS writer on ``rt/<topic>`` with the type's DDS name and the recorded QoS
(the first of its ``offered_qos_profiles``: reliability, durability; keep_last with the
player's queue, or for transient_local topics a depth of the number of messages the inputs
hold on the topic (at least the recorded depth and 1, at most :data:`MAX_LATCHED`), so a late
subscriber gets every latched message -- one per original publisher, as on the live graph).

Before the clock starts, :meth:`Ros2Sink.wait_for_known_subscribers` waits (bounded: the
player's ``--wait-for-known-subscribers``, 2 s by default) until every participant that
discovery already knows has announced its readers and each one on a played topic
(``DCPSSubscription``) is matched with its writer, so subscribers that were running before
playback get the first messages.  The stored payload
bytes (CDR with their header) are sent as they are, and past a message's end only zeros
up to the next 4-byte word, declared as padding in the header (never memory beyond it:
:func:`polybag.net.ros2.graph.pad`).  ROS 1 channels are converted on the fly
with :mod:`polybag.bridges.ros1_ros2` (latched topics become transient_local).  Other channels
are skipped and listed in ``skipped``.

With ``clock`` on, ``/clock`` (``rosgraph_msgs/msg/Clock``, best effort as ROS 2's clock
QoS) carries the bag time.

:class:`RateControl` (``--rate-control-topic`` with ``--ros2``) subscribes, through DDS, to
a topic whose messages start with a ``std_msgs/Header`` and hands each header stamp to the
player, which holds while the next message is more than ``--rate-control-max-delay``
ahead of the latest stamp (as the ROS 1 player: a silent topic stops playback).  The topic's
DDS type comes from its publishers, so the reader is made once one is discovered.
"""

from __future__ import annotations

import contextlib
import struct
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from polybag.model import Channel, Message
from polybag.play.player import PlayOptions
from polybag.play.routing import Route, RoutingSink
from polybag.util.text import peer_text

if TYPE_CHECKING:
    from polybag.bridges.protocol import Transform

CLOCK_TOPIC = "/clock"
CLOCK_DDS_TYPE = "rosgraph_msgs::msg::dds_::Clock_"
CLOCK_QOS: dict[str, Any] = {
    "history": "keep_last",
    "depth": 1,
    "reliability": "best_effort",
    "durability": "volatile",
}
_CLOCK = struct.Struct("<4siI")
_CDR_LE = b"\x00\x01\x00\x00"
MAX_LATCHED = 1000  # the most messages a transient_local writer keeps for late subscribers
MAX_DISCOVERED = 100_000  # the most participants / readers read from discovery at once
SETTLE = 0.1  # s: how long what discovery knows stays the same before playback starts


def clock_payload(time_ns: int) -> bytes:
    """``rosgraph_msgs/msg/Clock`` as CDR (little endian, with its header): int32 sec, uint32 nanosec."""
    secs, nsecs = divmod(max(0, time_ns), 1_000_000_000)
    return _CLOCK.pack(_CDR_LE, min(secs, 0x7FFFFFFF), nsecs)


def ros2_route(ch: Channel) -> tuple[str, str, dict[str, Any], Transform | None]:
    """``(topic, ROS 2 type, QoS profile, transform)`` to publish ``ch`` on ROS 2.

    Raises :class:`polybag.errors.UnsupportedError` for channels ROS 2 cannot carry.
    """
    from polybag.errors import UnsupportedError
    from polybag.net.ros2.qos import parse_profiles

    transform = None
    md: Any = ch.metadata
    if ch.message_encoding == "cdr":
        tname = ch.schema.name if ch.schema is not None and ch.schema.name else str(md.get("type", ""))
    elif ch.message_encoding == "ros1":
        from polybag.bridges import ros1_channel_to_ros2

        mapped = ros1_channel_to_ros2(ch)
        tname, md, transform = mapped.schema_name, mapped.metadata, mapped.transform
    else:
        raise UnsupportedError(
            f"topic {ch.topic}: message encoding {ch.message_encoding!r} cannot be sent to ROS 2"
        )
    if not tname:
        raise UnsupportedError(f"topic {ch.topic}: no message type")
    profiles = parse_profiles(str(md.get("offered_qos_profiles", "") or ""))
    profile = dict(profiles[0]) if profiles else {"reliability": "reliable", "durability": "volatile"}
    return ch.topic, tname, profile, transform


class Ros2Sink(RoutingSink):
    """Makes a DDS writer for every played channel on ``graph`` (a
    :class:`polybag.net.ros2.Graph`) and publishes the payloads.  Writers are closed by
    :meth:`close`; the graph stays the caller's."""

    def __init__(
        self,
        graph: Any,
        *,
        prefix: str = "",
        remap: dict[str, str] | None = None,
        namespace: str = "/",
        warn: Callable[[str], Any] | None = None,
    ) -> None:
        super().__init__(prefix=prefix, remap=remap, namespace=namespace, warn=warn)
        self.graph = graph
        self.writers: dict[str, Any] = {}  # output topic -> writer
        self.clock_writer: Any = None
        self.bad = 0  # payloads too short to be CDR (skipped, the first one named in a warning)
        # id(channel) -> how many messages the inputs hold on it (the player fills it in)
        self.message_counts: dict[int, int] = {}
        self._all: list[Channel] = []
        self._builtin: tuple[Any, ...] | None = None  # DCPSParticipant, DCPSSubscription readers

    def open(self, channels: Sequence[Channel], options: PlayOptions) -> None:
        self._all = list(channels)
        self._open_routes(channels, options)
        if options.clock:
            from polybag.net.ros2.graph import Ros2GraphError

            try:
                self.clock_writer = self.graph.writer(
                    self.remap.get(CLOCK_TOPIC, CLOCK_TOPIC), CLOCK_DDS_TYPE, CLOCK_QOS, depth=1
                )
            except Ros2GraphError as e:
                self.warn(f"/clock: {e}")

    def _make_route(self, ch: Channel) -> Route | None:
        from polybag.errors import PolybagError
        from polybag.net.ros2.names import dds_type

        route: Route | None = None
        try:
            topic, tname, profile, transform = ros2_route(ch)
            dtype = dds_type(tname)
            out = self._out_topic(topic)
            w = self.writers.get(out)
            if w is None:
                latched = profile.get("durability") == "transient_local"
                depth = self._latched_depth(out, profile) if latched else self.queue_size
                w = self.graph.writer(out, dtype, profile, depth=depth)
                self.writers[out] = w
                self._types[out] = tname
                route = Route(w, transform)
            elif self._types[out] != tname:
                self.skipped.append(ch.topic)
                self.warn(
                    f"topic {peer_text(out)}: already published as {peer_text(self._types[out])}, "
                    f"skipping {peer_text(tname)}"
                )
            else:
                route = Route(w, transform)
        except PolybagError as e:
            self.skipped.append(ch.topic)
            self.warn(peer_text(str(e), 1000))  # (names from the file)
        return route

    def _latched_depth(self, out: str, profile: dict[str, Any]) -> int:
        """A transient_local writer's depth on ``out``: the messages the inputs hold on every
        channel played there (one per latched publisher at least), at least the recorded
        depth and 1, at most :data:`MAX_LATCHED`."""
        try:
            recorded = int(profile.get("depth") or 0)
        except (TypeError, ValueError):
            recorded = 0
        held = sum(
            max(0, self.message_counts.get(id(c), 0)) for c in self._all if self._out_topic(c.topic) == out
        )
        return max(1, min(MAX_LATCHED, max(recorded, held)))

    def _send(self, target: Any, payload: bytes, message: Message) -> bool:
        # (the writer sends the payload's bytes and zeros up to the next 4-byte word, declared
        # as padding in the CDR header: never memory past the message, see graph.pad)
        if len(payload) < 4:  # (not CDR: no encapsulation header)
            self.bad += 1
            if self.bad == 1:
                self.warn(
                    f"topic {peer_text(message.channel.topic)}: a {len(payload)}-byte payload is not CDR; skipped"
                )
            return False
        target.write(payload)
        return True

    def clock(self, time_ns: int) -> None:
        if self.clock_writer is not None:
            self.clock_writer.write(clock_payload(time_ns))

    def wait_for_subscribers(self, stopped: Callable[[], bool]) -> bool:
        """Until every topic's writer is matched with a subscriber (--wait-for-subscribers)."""
        for w in self.writers.values():
            while w.subscriber_count() < 1:
                if stopped():
                    return False
                time.sleep(0.05)
        return not stopped()

    def _discovered(self) -> tuple[set[str], dict[str, set[str]], set[str]]:
        """What discovery knows now, our own participant left out: ``(the live remote
        participants, DDS topic -> their live readers' GUIDs, the participants those readers
        belong to)``."""
        if self._builtin is None:
            from cyclonedds.builtin import (
                BuiltinDataReader,
                BuiltinTopicDcpsParticipant,
                BuiltinTopicDcpsSubscription,
            )

            try:
                self._builtin = (
                    BuiltinDataReader(self.graph.participant, BuiltinTopicDcpsParticipant),
                    BuiltinDataReader(self.graph.participant, BuiltinTopicDcpsSubscription),
                )
            except Exception:  # noqa: BLE001 - the binding raises DDSException: wait no more
                self._builtin = ()
        if not self._builtin:
            return set(), {}, set()
        from cyclonedds.core import InstanceState

        own = str(self.graph.participant.guid)
        parts: set[str] = set()
        subs: dict[str, set[str]] = {}
        owners: set[str] = set()
        try:
            part_samples = self._builtin[0].read(N=MAX_DISCOVERED)
            sub_samples = self._builtin[1].read(N=MAX_DISCOVERED)
        except Exception:  # noqa: BLE001 - the binding raises DDSException
            return set(), {}, set()

        def alive(x: Any) -> bool:
            info = getattr(x, "sample_info", None)
            return info is not None and bool(info.valid_data) and info.instance_state == InstanceState.Alive

        for x in part_samples:
            if alive(x) and str(x.key) != own:
                parts.add(str(x.key))
        for x in sub_samples:
            if alive(x) and str(x.participant_key) != own:
                subs.setdefault(str(x.topic_name), set()).add(str(x.key))
                owners.add(str(x.participant_key))
        return parts, subs, owners

    @staticmethod
    def _matched(w: Any) -> set[str]:
        """The GUIDs of the readers writer ``w`` is matched with."""
        dw = w._writer
        keys: set[str] = set()
        for h in dw.get_matched_subscriptions():
            try:
                d = dw.get_matched_subscription_data(h)
            except Exception:  # noqa: BLE001, S112 - gone meanwhile
                continue
            if d is not None:
                keys.add(str(d.key))
        return keys

    def wait_for_known_subscribers(self, timeout: float, stopped: Callable[[], bool]) -> bool:
        """Until discovery has settled on what it already knows and every reader on each played
        topic is matched with the topic's writer, or ``timeout`` seconds pass (a reader whose
        QoS does not match never is); False when ``stopped()``.

        Remote participants are found within milliseconds, their readers (SEDP) up to a
        second later: every participant known must have announced its readers (each ROS 2
        node has some), and what is known must stay the same for :data:`SETTLE` s."""
        end = time.monotonic() + max(0.0, timeout)
        last: tuple[frozenset[str], int] | None = None
        since = 0.0
        while not stopped():
            now = time.monotonic()
            parts, subs, owners = self._discovered()
            ready = parts <= owners and all(
                subs.get(w.topic, set()) <= self._matched(w) for w in self.writers.values()
            )
            seen = (frozenset(parts), sum(len(v) for v in subs.values()))
            if not ready or seen != last:
                last, since = seen, now
            elif now - since >= SETTLE:
                return True
            if now >= end:
                return True
            time.sleep(0.02)
        return False

    def flush(self, timeout: float = 5.0) -> bool:
        """Until every reliable subscriber has acknowledged what was written (bounded by ``timeout``)."""
        end = time.monotonic() + timeout
        ok = True
        for w in self.writers.values():
            ok = w.wait_for_acks(max(0.0, end - time.monotonic())) and ok
        return ok

    def close(self) -> None:
        self.flush()
        for w in [*self.writers.values(), *([self.clock_writer] if self.clock_writer is not None else [])]:
            w.close()
        self.writers.clear()
        self.clock_writer = None
        for r in self._builtin or ():
            with contextlib.suppress(Exception):
                r.__del__()
        self._builtin = None


def header_stamp(data: bytes) -> int | None:
    """The stamp (ns) of the ``std_msgs/msg/Header`` a CDR message starts with (int32 sec,
    uint32 nanosec after the 4-byte encapsulation header), or None when too short."""
    if len(data) < 12 or data[1] not in (0, 1):
        return None
    e = "<" if data[1] == 1 else ">"
    sec: int
    nsec: int
    sec, nsec = struct.unpack_from(e + "iI", data, 4)
    return sec * 1_000_000_000 + nsec


def _starts_with_header(type_name: str) -> bool | None:
    """Whether the known type ``type_name`` starts with a ``std_msgs/Header`` (or is one:
    its stamp comes first too); None when the type is not known."""
    from polybag.codecs.ros2 import known_types

    if type_name in ("std_msgs/msg/Header", "std_msgs/Header"):
        return True
    d = known_types().lookup(type_name)
    if d is None:
        return None
    return bool(d.fields) and d.fields[0].type.base in ("std_msgs/Header", "std_msgs/msg/Header")


class RateControl:
    """Watches the ROS 2 ``topic`` on ``graph`` (a thread) and calls ``on_stamp(ns)`` with
    the header stamp of every message; a known type that does not start with a header is
    named in a warning (``warn``) and not used.  A context manager; :meth:`close` stops it."""

    def __init__(
        self, graph: Any, topic: str, on_stamp: Callable[[int], Any], warn: Callable[[str], Any] | None = None
    ) -> None:
        self.graph = graph
        self.topic = topic
        self.on_stamp = on_stamp
        self.warn = warn or (lambda _text: None)
        self.stamps = 0  # messages whose stamp was used
        self._reader: Any = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="polybag-play-rate-control", daemon=True)
        self._thread.start()

    def _connect(self) -> bool:
        """Make the reader once a publisher of the topic is known; False while none is."""
        from polybag.net.ros2.graph import Ros2GraphError
        from polybag.net.ros2.qos import requested_profile

        self.graph.poll()
        pubs = [p for p in self.graph.topics().get(self.topic, []) if p.type]
        if not pubs:
            return False
        typ = pubs[0].type
        if _starts_with_header(typ) is False:
            self.warn(
                f"--rate-control-topic {self.topic}: {typ} does not start with a std_msgs/Header; ignored"
            )
            self._stop.set()
            return False
        same = [p for p in pubs if p.type == typ]
        try:
            self._reader = self.graph.reader(
                self.topic, same[0].dds_type, requested_profile([p.qos for p in same])
            )
        except Ros2GraphError as e:
            self.warn(f"--rate-control-topic {self.topic}: {e}")
            self._stop.set()
            return False
        return True

    def _run(self) -> None:
        from polybag.net.ros2.graph import Ros2GraphError

        while not self._stop.is_set():
            if self._reader is None:
                try:
                    if not self._connect():
                        self._stop.wait(0.1)
                        continue
                except Ros2GraphError as e:
                    self.warn(f"--rate-control-topic {self.topic}: {e}")
                    return
            try:
                got = self._reader.take(256)
            except Ros2GraphError as e:
                self.warn(f"--rate-control-topic {self.topic}: {e}")
                return
            for data, _t in got:
                stamp = header_stamp(data)
                if stamp is not None:
                    self.stamps += 1
                    self.on_stamp(stamp)
            if not got:
                self._stop.wait(0.01)

    def close(self) -> None:
        """Stop watching and close the reader."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def __enter__(self) -> RateControl:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
