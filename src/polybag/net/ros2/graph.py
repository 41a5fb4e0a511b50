"""A DDS participant on a ROS 2 graph through Cyclone DDS (the ``cyclonedds`` package).

* :class:`Graph` joins ``ROS_DOMAIN_ID`` with the discovery range ROS 2 uses
  (``ROS_LOCALHOST_ONLY=1`` or ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``: the loopback
  interface, unicast to the local participants' ports; ``OFF``: no discovery;
  ``ROS_STATIC_PEERS``: those hosts too), and lists the publications of the built-in
  topic ``DCPSPublication`` as :class:`Publication` (ROS 2 topic and type names, the offered
  QoS as a rosbag2 profile, the type hash from USER_DATA). Its domain is configured by
  :func:`cyclone_config`: also 8000 B fragments in 65000 B datagrams, which Fast DDS readers
  need for large messages at camera rates, with localhost discovery an announcement every
  :data:`LOCALHOST_SPDP_INTERVAL` (a Fast DDS node started later learns of us at once), then
  the user's ``CYCLONEDDS_URI`` (which wins).
* :meth:`Graph.reader` / :meth:`Graph.writer` make a :class:`RawReader` /
  :class:`RawWriter` on a topic: they move the serialized CDR bytes exactly as they travel
  (with their 4-byte encapsulation header), never decoding them.

How raw bytes are had: the Python binding deserializes in Python (``DataReader.take`` calls
``data_type.deserialize`` on the bytes its C layer returns), so we call the C layer's
``ddspy_take`` / ``ddspy_write`` directly with the serialized bytes; the topic's type is a
stand-in keyless ``IdlStruct`` carrying only the DDS type name (ROS 2 types are keyless,
and rmw writers announce no XTypes type information, so DDS matches them on the name).

DDS sends samples in whole 4-byte words: :func:`pad` fills a sample written here with zeros
declared in its CDR header (the binding would send whatever memory follows it), and
:func:`unpad` takes declared padding off what is received.  :meth:`RawReader.take_sent`
also names each sample's writer (its GUID), so a reply can be checked against the
participant it must come from (:func:`guid_prefix`).
"""

from __future__ import annotations

import os
import threading
import time
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from polybag.errors import PolybagError, UsageError
from polybag.net.ros2 import names
from polybag.net.ros2.qos import dds_qos, offered_profile
from polybag.util.text import peer_text


def guid_prefix(guid: str) -> str:
    """The GUID prefix (24 hex digits) of a GUID as the binding writes it, ``""`` if unreadable."""
    h = str(guid).replace("-", "").lower()
    return h[:24] if len(h) == 32 and all(c in "0123456789abcdef" for c in h) else ""


class Ros2GraphError(PolybagError):
    """The ROS 2 graph could not be joined (no DDS binding, a bad domain, a DDS failure)."""


def _dds() -> Any:
    try:
        import cyclonedds.domain  # noqa: F401
    except ImportError as e:
        raise Ros2GraphError(
            f"ROS 2 needs the Cyclone DDS Python binding: pip install 'polybag[ros2]' ({e})"
        ) from None
    import cyclonedds

    return cyclonedds


def domain_id(env: dict[str, str] | None = None) -> int:
    """``ROS_DOMAIN_ID`` (default 0); a :class:`UsageError` for what is not 0..232."""
    e = os.environ if env is None else env
    text = str(e.get("ROS_DOMAIN_ID", "") or "0").strip()
    try:
        n = int(text)
    except ValueError:
        raise UsageError(f"ROS_DOMAIN_ID={text!r} is not a number") from None
    if not 0 <= n <= 232:
        raise UsageError(f"ROS_DOMAIN_ID={n} is outside 0..232")
    return n


def discovery_range(env: Mapping[str, str] | None = None) -> str:
    """``LOCALHOST``, ``SUBNET`` (the default), ``OFF`` or ``SYSTEM_DEFAULT`` as ROS 2 Jazzy
    reads them (``ROS_LOCALHOST_ONLY=1`` wins, as rmw does while it is honoured)."""
    e = os.environ if env is None else env
    if str(e.get("ROS_LOCALHOST_ONLY", "")).strip() == "1":
        return "LOCALHOST"
    r = str(e.get("ROS_AUTOMATIC_DISCOVERY_RANGE", "") or "SUBNET").strip().upper()
    if r not in ("LOCALHOST", "SUBNET", "OFF", "SYSTEM_DEFAULT"):
        raise UsageError(
            f"ROS_AUTOMATIC_DISCOVERY_RANGE={r!r}: expected LOCALHOST, SUBNET, OFF or SYSTEM_DEFAULT"
        )
    return r


def _xml_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


#: the UDP receive buffer asked for (Cyclone takes what the system allows up to this)
RECEIVE_BUFFER = "8MB"
#: Cyclone's fragmentation for large messages (images, point clouds): with its defaults
#: (1344 B fragments in 14720 B datagrams) Fast DDS readers (rclpy's default rmw) got
#: zero-length samples and lost most 0.9 MB frames at 30 Hz; with these they get every one
FRAGMENT_SIZE = "8000B"
MAX_MESSAGE_SIZE = "65000B"
#: localhost discovery (unicast to the local participants' ports): how often our participant
#: announces itself.  A Fast DDS participant that starts later often ignores Cyclone's
#: immediate answer to its first announcement and learned of us only from Cyclone's next
#: one, 1.1 s later: its endpoints (a publisher that sends at once) reached us that late in
#: about half the runs, its first second of messages lost; with announcements every 250 ms,
#: in none of 13 (0.5% of a core for the first 30 s, then peers that never answered are dropped).
LOCALHOST_SPDP_INTERVAL = "250ms"


def cyclone_config(env: Mapping[str, str] | None = None) -> str:
    """The Cyclone DDS configuration: polybag's XML (discovery range, receive buffer,
    fragmentation) followed by the user's ``CYCLONEDDS_URI`` when set, so that the user's
    settings override polybag's (Cyclone merges the comma-separated list, later wins; an
    explicit configuration would otherwise make Cyclone ignore ``CYCLONEDDS_URI``)."""
    e = os.environ if env is None else env
    user = str(e.get("CYCLONEDDS_URI", "") or "").strip()
    ours = _polybag_config(e)
    return f"{ours},{user}" if user else ours


def _polybag_config(e: Mapping[str, str]) -> str:
    rng = discovery_range(e)
    peers = [p.strip() for p in str(e.get("ROS_STATIC_PEERS", "")).split(";") if p.strip()]
    # (a recorder takes bursts: a larger socket buffer than the system default, when allowed)
    internal = f'<Internal><SocketReceiveBufferSize min="default" max="{RECEIVE_BUFFER}"/></Internal>'
    frag = f"<FragmentSize>{FRAGMENT_SIZE}</FragmentSize><MaxMessageSize>{MAX_MESSAGE_SIZE}</MaxMessageSize>"
    if rng in ("SUBNET", "SYSTEM_DEFAULT") and not peers:
        return f'<CycloneDDS><Domain id="any"><General>{frag}</General>{internal}</Domain></CycloneDDS>'
    general = f"<General>{frag}</General>"
    disc = "<ParticipantIndex>auto</ParticipantIndex><MaxAutoParticipantIndex>100</MaxAutoParticipantIndex>"
    if rng == "LOCALHOST":
        disc += f"<SPDPInterval>{LOCALHOST_SPDP_INTERVAL}</SPDPInterval>"
        general = (
            '<General><Interfaces><NetworkInterface address="127.0.0.1"/></Interfaces>'
            f"<AllowMulticast>false</AllowMulticast>{frag}</General>"
        )
        peers = ["127.0.0.1", *peers]
    elif rng == "OFF":
        general = f"<General><AllowMulticast>false</AllowMulticast>{frag}</General>"
    peer_xml = "".join(f'<Peer address="{_xml_escape(p)}"/>' for p in peers)
    return (
        f'<CycloneDDS><Domain id="any">{general}{internal}<Discovery>{disc}'
        f"<Peers>{peer_xml}</Peers></Discovery></Domain></CycloneDDS>"
    )


@dataclass
class Publication:
    """One DDS writer on a ROS 2 topic, from ``DCPSPublication``."""

    key: str  # the writer's GUID
    participant: str  # its participant's GUID
    topic: str  # ROS 2 name: /ns/chatter
    type: str  # ROS 2 name: std_msgs/msg/String ("" when the DDS type name is not a ROS 2 one)
    dds_type: str
    qos: dict[str, Any] = field(default_factory=dict)  # the offered profile (rosbag2 keys)
    type_hash: str = ""  # RIHS01_... from USER_DATA (Iron and later), else ""
    handle: int = 0  # the DDS instance handle (to notice it going away)
    typeid: Any = None  # the XTypes TypeIdentifier a writer announced (not rmw writers), or None


_raw_types: dict[str, type] = {}
_raw_lock = threading.Lock()


def raw_type(dds_type_name: str) -> type:
    """The stand-in keyless IDL struct for a DDS type name (one per name, cached)."""
    with _raw_lock:
        t = _raw_types.get(dds_type_name)
        if t is None:
            from cyclonedds.idl import IdlStruct
            from cyclonedds.idl.types import uint8

            def body(ns: dict[str, Any]) -> None:
                # (the binding checks each sample against the type: one byte, which every
                # ROS 2 message has (an empty one carries a dummy uint8), passes any payload)
                ns["__annotations__"] = {"raw": uint8}

            t = types.new_class("RawSample", (IdlStruct,), {"typename": dds_type_name}, body)
            _raw_types[dds_type_name] = t
        return t


class RawReader:
    """A DDS reader on one topic handing out the serialized samples (bytes with the CDR
    header) and their source timestamps."""

    def __init__(
        self, graph: Graph, dds_topic: str, dds_type_name: str, profile: dict[str, Any], typeid: Any = None
    ) -> None:
        dds = _dds()
        from cyclonedds.sub import DataReader
        from cyclonedds.topic import Topic

        self.profile = dict(profile)
        self.topic = dds_topic
        try:
            self._topic: Topic[Any] = Topic(graph.participant, dds_topic, graph.data_type(dds_type_name, typeid))
            self._reader = DataReader(graph.participant, self._topic, qos=dds_qos(profile))
        except dds.core.DDSException as e:
            raise Ros2GraphError(
                f"cannot subscribe to {peer_text(dds_topic)} ({peer_text(dds_type_name)}): {e}"
            ) from None
        from cyclonedds._clayer import ddspy_take  # type: ignore[import-not-found]  # a C extension cyclonedds ships without stubs

        self._take = ddspy_take
        self._ref = self._reader._ref
        self._writers: dict[int, str] = {}  # publication handle -> writer GUID
        # take_received: every sample taken later arrived after the last take that drained
        # the reader (or its creation), and the last receive time handed out (monotonic)
        self._drained_at = time.time_ns()
        self._last_received = 0
        self.condition = dds.core.ReadCondition(
            self._reader, dds.core.SampleState.Any | dds.core.ViewState.Any | dds.core.InstanceState.Any
        )

    def take(self, n: int = 256) -> list[tuple[bytes, int]]:
        """Up to ``n`` samples as ``(serialized bytes, source timestamp ns)``, oldest first
        (the bytes the writer serialized: the padding its CDR header declares is dropped,
        see :func:`unpad`)."""
        ret = self._taken(n)
        return [(unpad(data), info.source_timestamp) for data, info in ret if info.valid_data]

    def take_sent(self, n: int = 256) -> list[tuple[bytes, int, str]]:
        """As :meth:`take`, with the GUID of the writer of each sample (``""`` when DDS no
        longer knows it)."""
        ret = self._taken(n)
        return [
            (unpad(data), info.source_timestamp, self.writer_guid(info.publication_handle))
            for data, info in ret
            if info.valid_data
        ]

    def take_received(self, n: int = 256) -> list[tuple[bytes, int, int]]:
        """As :meth:`take`, as ``(bytes, source timestamp ns, receive time ns)``, the receive
        times non-decreasing.  Cyclone's sample info has no reception time, so each sample's
        is derived from what is known for sure: it arrived after the previous take that
        emptied the reader and before this one returned; within that span it is placed at its
        source timestamp (a sample is not received before it is sent), or, when the sender's
        clock disagrees with ours (its newest sample outside the span), at ``now`` less its
        source time's distance to the batch's newest."""
        ret = self._taken(n)
        now = time.time_ns()
        got = [(unpad(data), int(info.source_timestamp)) for data, info in ret if info.valid_data]
        lo = min(self._drained_at, now)
        if len(ret) < n:
            self._drained_at = now
        if not got:
            return []
        newest = max(s for _, s in got)
        shift = 0 if lo <= newest <= now else now - newest
        last = self._last_received
        out: list[tuple[bytes, int, int]] = []
        for data, src in got:
            last = max(last, min(now, max(lo, src + shift)))
            out.append((data, src, last))
        self._last_received = last
        return out

    def _taken(self, n: int) -> list[tuple[bytes, Any]]:
        """Up to ``n`` samples as DDS hands them out: ``(serialized bytes, sample info)``."""
        ret: list[tuple[bytes, Any]] | int = self._take(self._ref, 0xFFFFFFFF, n)
        if isinstance(ret, int):
            raise Ros2GraphError(
                f"taking samples from {peer_text(self.topic)} failed (DDS return code {ret})"
            )
        return ret

    def writer_guid(self, handle: int) -> str:
        """The GUID of the matched writer with instance handle ``handle`` (``""`` if unknown)."""
        got = self._writers.get(handle)
        if got is None:
            try:
                ep = self._reader.get_matched_publication_data(handle)
                got = str(ep.key) if ep is not None else ""
            except Exception:  # noqa: BLE001 - the writer went away: unknown
                got = ""
            if len(self._writers) >= 1024:
                self._writers.clear()
            if got:
                self._writers[handle] = got
        return got

    def publisher_count(self) -> int:
        """How many writers this reader is matched with."""
        return len(self._reader.get_matched_publications())

    def close(self) -> None:
        for ent in (self.condition, self._reader):
            try:
                ent.__del__()
            except Exception:  # noqa: BLE001, S110 - closing is best effort
                pass


class RawWriter:
    """A DDS writer on one topic sending serialized samples (bytes with the CDR header) as they are."""

    def __init__(
        self,
        graph: Graph,
        dds_topic: str,
        dds_type_name: str,
        profile: dict[str, Any],
        depth: int | None = None,
    ) -> None:
        dds = _dds()
        from cyclonedds.pub import DataWriter
        from cyclonedds.topic import Topic

        self.topic = dds_topic
        try:
            self._topic: Topic[Any] = Topic(graph.participant, dds_topic, raw_type(dds_type_name))
            self._writer = DataWriter(
                graph.participant, self._topic, qos=dds_qos(profile, depth=depth, writer=True)
            )
        except dds.core.DDSException as e:
            raise Ros2GraphError(
                f"cannot publish on {peer_text(dds_topic)} ({peer_text(dds_type_name)}): {e}"
            ) from None
        from cyclonedds._clayer import ddspy_write

        self._write = ddspy_write
        self._ref = self._writer._ref

    def write(self, data: bytes) -> None:
        """Send one serialized sample (it must start with its 4-byte CDR encapsulation header),
        padded to a multiple of 4 bytes with zeros that its header declares (see :func:`pad`):
        DDS sends whole 4-byte words, and would fill them from memory past the sample."""
        if len(data) < 4:
            raise UsageError(
                f"{peer_text(self.topic)}: a CDR sample is at least 4 bytes (its header), got {len(data)}"
            )
        ret = self._write(self._ref, pad(data))
        if isinstance(ret, int) and ret < 0:
            raise Ros2GraphError(f"writing on {peer_text(self.topic)} failed (DDS return code {ret})")

    def subscriber_count(self) -> int:
        """How many readers this writer is matched with."""
        return len(self._writer.get_matched_subscriptions())

    def wait_for_acks(self, timeout: float) -> bool:
        """Until every reliable reader has acknowledged what was written (or ``timeout`` s)."""
        try:
            return bool(self._writer.wait_for_acks(int(max(0.0, timeout) * 1e9)))
        except Exception:  # noqa: BLE001 - a timeout is reported as an exception by the binding
            return False

    def close(self) -> None:
        try:
            self._writer.__del__()
        except Exception:  # noqa: BLE001, S110 - closing is best effort
            pass


def unpad(data: bytes) -> bytes:
    """A received sample without the padding its encapsulation header declares (the low two
    bits of the options, DDS-XTypes 7.6.3.1.2): DDS moves whole 4-byte words, so a 9-byte
    sample arrives as 12 bytes; a writer that declares its 3 bytes of padding gets its 9
    bytes recorded (the header as it would be without padding: the count cleared).
    Undeclared padding stays (it was sent: rmw_fastrtps does not declare
    its zeros, and rosbag2 records them too)."""
    if len(data) >= 4 and data[0] == 0:
        n = data[3] & 3
        if n and len(data) - n >= 4:
            return bytes(data[:3]) + bytes([data[3] & ~3]) + bytes(data[4:-n])
    return data


def pad(data: bytes) -> bytes:
    """``data`` (a CDR sample with its header) padded with zeros to a multiple of 4 bytes,
    the padding declared in the header's options (what :func:`unpad` takes off again)."""
    n = -len(data) % 4
    if not n or data[0] != 0:
        return data
    head = bytes(data[:4])
    return head[:3] + bytes([(head[3] & ~3) | n]) + bytes(data[4:]) + b"\x00" * n


_domains: dict[tuple[int, str | None], Any] = {}


class Graph:
    """A participant on the ROS 2 graph of ``domain`` (default ``ROS_DOMAIN_ID``) with the
    discovery range of the environment (see the module docstring)."""

    def __init__(self, domain: int | None = None, env: dict[str, str] | None = None) -> None:
        dds = _dds()
        from cyclonedds.builtin import BuiltinDataReader, BuiltinTopicDcpsPublication
        from cyclonedds.domain import Domain, DomainParticipant

        self.domain_id = domain_id(env) if domain is None else int(domain)
        config: str | None = cyclone_config(env)
        try:
            key = (self.domain_id, config)
            if key not in _domains:
                # (a Domain configures every participant made after it in this domain; kept
                # for the life of the process)
                _domains[key] = Domain(self.domain_id, config)
            self.participant = DomainParticipant(self.domain_id)
            self._pubs = BuiltinDataReader(self.participant, BuiltinTopicDcpsPublication)
            # (true while DCPSPublication holds samples :meth:`poll` has not taken: a wait set
            # holding it wakes as soon as a publication is discovered, or goes away)
            self.discovered = dds.core.ReadCondition(
                self._pubs, dds.core.SampleState.Any | dds.core.ViewState.Any | dds.core.InstanceState.Any
            )
        except dds.core.DDSException as e:
            raise Ros2GraphError(f"cannot join ROS 2 domain {self.domain_id}: {e}") from None
        self._own = str(self.participant.guid)
        self.publications: dict[str, Publication] = {}
        self._servers: dict[str, tuple[str, str, int]] = {}  # reply writer -> (participant, node, handle)
        self._xtypes: dict[str, type] = {}
        self._lock = threading.Lock()

    def poll(self) -> tuple[list[Publication], list[Publication]]:
        """Read ``DCPSPublication``: the ROS 2 publications that appeared and those that went
        away since the last call (our own writers are left out)."""
        new: list[Publication] = []
        gone: list[Publication] = []
        with self._lock:
            try:
                samples = self._pubs.take(N=1000)
            except Exception as e:  # noqa: BLE001 - the binding raises DDSException
                raise Ros2GraphError(f"reading DCPSPublication failed: {e}") from None
            for s in samples:
                info = getattr(s, "sample_info", None)
                key = str(getattr(s, "key", "") or getattr(info, "instance_handle", ""))
                if info is not None and not info.valid_data:
                    # (an invalid sample: the writer was disposed or lost)
                    for k, p in list(self.publications.items()):
                        if p.handle and info.instance_handle == p.handle:
                            gone.append(self.publications.pop(k))
                    for k, (_p, _n, h) in list(self._servers.items()):
                        if h and info.instance_handle == h:
                            del self._servers[k]
                    continue
                if str(getattr(s, "participant_key", "")) == self._own:
                    continue
                topic = names.ros_topic(str(s.topic_name))
                if topic is None:
                    node = names.type_service_node(str(s.topic_name), str(s.type_name))
                    if node:  # (a node's type description service: its reply writer)
                        h = int(info.instance_handle) if info is not None else 0
                        self._servers[key] = (str(s.participant_key), node, h)
                    continue
                dtype = str(s.type_name)
                ud = None
                try:
                    from cyclonedds.qos import Policy

                    u = s.qos[Policy.Userdata]
                    ud = u.data if u is not None else None
                except Exception:  # noqa: BLE001, S110 - no USER_DATA: no type hash
                    pass
                pub = Publication(
                    key=key,
                    participant=str(s.participant_key),
                    topic=topic,
                    type=names.ros_type(dtype) or "",
                    dds_type=dtype,
                    qos=offered_profile(s.qos),
                    type_hash=names.type_hash(ud),
                    typeid=getattr(s, "type_id", None),
                )
                if info is not None:
                    pub.handle = int(info.instance_handle)
                if key not in self.publications:
                    self.publications[key] = pub
                    new.append(pub)
        return new, gone

    def warm_up(self) -> None:
        """Pay now what the binding does once, on its first topic (about 80 ms): the first
        reader made for a publication discovered later is then ready in about a millisecond
        (what a publisher sends before a reader matches is lost to a volatile reader)."""
        from cyclonedds.topic import Topic

        try:
            t: Topic[Any] = Topic(self.participant, "polybag_warm_up", raw_type("polybag::msg::dds_::WarmUp_"))
            t.__del__()
        except Exception:  # noqa: BLE001, S110 - an optimisation only
            pass

    def type_servers(self, participant: str) -> list[str]:
        """The nodes (``/ns/name``) of ``participant`` that serve ``~/get_type_description``
        (their reply writers' GUIDs have the participant's GUID prefix)."""
        prefix = guid_prefix(participant)
        with self._lock:
            return sorted(
                {n for k, (_p, n, _h) in self._servers.items() if prefix and guid_prefix(k) == prefix}
            )

    def raw_reader(self, dds_topic: str, dds_type_name: str, profile: dict[str, Any]) -> RawReader:
        """A :class:`RawReader` on a DDS topic named as it is on the wire (``rr/...``)."""
        return RawReader(self, dds_topic, dds_type_name, profile)

    def raw_writer(self, dds_topic: str, dds_type_name: str, profile: dict[str, Any]) -> RawWriter:
        """A :class:`RawWriter` on a DDS topic named as it is on the wire (``rq/...``)."""
        return RawWriter(self, dds_topic, dds_type_name, profile)

    def topics(self) -> dict[str, list[Publication]]:
        """The known publications by ROS 2 topic."""
        out: dict[str, list[Publication]] = {}
        with self._lock:
            for p in self.publications.values():
                out.setdefault(p.topic, []).append(p)
        return out

    def wait_for(self, done: Callable[[], bool], timeout: float, step: float = 0.05) -> bool:
        """Poll discovery until ``done()`` or ``timeout`` seconds pass."""
        end = time.monotonic() + timeout
        while True:
            self.poll()
            if done():
                return True
            if time.monotonic() >= end:
                return False
            time.sleep(step)

    def reader(
        self, topic: str, dds_type_name: str, profile: dict[str, Any], typeid: Any = None
    ) -> RawReader:
        """A :class:`RawReader` on the ROS 2 ``topic`` (``typeid``: the writers' XTypes type, if they announced one)."""
        return RawReader(self, names.dds_topic(topic), dds_type_name, profile, typeid)

    def data_type(self, dds_type_name: str, typeid: Any = None) -> type:
        """The IDL type a reader uses: when the writers announced XTypes type information
        (plain DDS writers do; rmw writers do not), the type they describe, fetched with
        the type lookup service (DDS matches on it); else the stand-in carrying only the name."""
        if typeid is None:
            return raw_type(dds_type_name)
        key = repr(typeid)
        got = self._xtypes.get(key)
        if got is None:
            try:
                from cyclonedds.dynamic import get_types_for_typeid

                # the first of (type, type map): a class, which cyclonedds types as an instance
                made: type = get_types_for_typeid(self.participant, typeid, 2_000_000_000)[0]  # type: ignore[assignment]
            except Exception:  # noqa: BLE001 - no type lookup: match on the name only
                made = raw_type(dds_type_name)
            self._xtypes[key] = got = made
        return got

    def writer(
        self, topic: str, dds_type_name: str, profile: dict[str, Any], depth: int | None = None
    ) -> RawWriter:
        """A :class:`RawWriter` on the ROS 2 ``topic``."""
        return RawWriter(self, names.dds_topic(topic), dds_type_name, profile, depth)

    def waitset(self) -> Any:
        """A new Cyclone DDS ``WaitSet`` on this participant."""
        from cyclonedds.core import WaitSet

        return WaitSet(self.participant)

    def close(self) -> None:
        """Leave the graph (every reader and writer of this participant goes too)."""
        try:
            self.participant.__del__()
        except Exception:  # noqa: BLE001, S110 - closing is best effort
            pass
