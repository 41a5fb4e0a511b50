"""The live ROS 2 source: record a ROS 2 graph through DDS (:mod:`polybag.net.ros2`).

:class:`Ros2Source` watches ``DCPSPublication`` (woken by it, and every ``poll`` seconds) and subscribes to
each selected topic (named topics, ``-e`` regexes, ``-a``; ``-x`` excluded; services and
non-ROS DDS topics left out) with the QoS rosbag2 requests for the publishers' offers
(reliable only when all offer it, transient_local only when all offer it).  One thread
waits on every reader (a DDS wait set) and hands the serialized CDR samples, bytes as they
came, to the recorder with each one's receive time (non-decreasing per topic, see
:meth:`polybag.net.ros2.graph.RawReader.take_received`) and its source timestamp as publish time.  The offered QoS profiles of each topic and
the type hash from USER_DATA go to the file's metadata as ``ros2 bag record`` stores them.

Types come from the known ROS 2 definitions (the bundled Jazzy ones and ``--types DIR``),
else from the publishing node's type description service (Jazzy and later; asked in a
thread of its own, the samples that arrive meanwhile held in memory, at most
:data:`MAX_PENDING` bytes, then written in order; the definition's REP 2011 hash must be the
one the publisher announced; only replies of the publishing participant to our own request
count, and a description must pass :mod:`polybag.net.ros2.typedesc`'s checks: rosidl's names,
the limits for definitions from the network); a topic whose type stays unknown is recorded
anyway (raw CDR, no definition) with a warning saying why, and a publisher of that type
appearing later is asked (at most :data:`MAX_LATE_ASKS` per topic): the description it gives
is the topic's from then on (rosbag2 sqlite3 stores it for the type: every message of the file).  Every name and reason a peer
sent is cut and escaped before it is printed or kept (:mod:`polybag.util.text`).  Samples are
recorded as their writer serialized them: the padding their CDR header declares is dropped.

A publication is acted on as soon as it is discovered: ``DCPSPublication``'s read condition
is in the wait set, so the reader of a publisher that starts during the recording is made
(and announced) within milliseconds of its announcement, before its type is looked for (the
binding's one-time cost of a first topic is paid at :meth:`Ros2Source.start`).  A
transient_local publisher's history (its depth) then reaches the recording whole (requested
transient_local); of a volatile one, what it sent before our reader matched cannot be had
(nor by any subscriber that matches later).  At most :data:`MAX_TOPICS` topics are
subscribed.

Hidden topics (a name part starting with ``_``: ``/_private``, actions' ``/_action/``
topics, services' ``/_service_event``) are not taken by ``-a`` or ``-e`` unless
``include_hidden`` (``--include-hidden-topics``), as ``ros2 bag record``; a hidden topic
named on the command line is recorded.
A publisher that appears later with a QoS the subscription cannot match (best effort on a
reliable subscription) is named in a warning: its messages are not received (as rosbag2).

It feeds :class:`~polybag.record.ros2_recorder.Ros2Recorder` recorders.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from polybag.record.options import RecordOptions
from polybag.record.ros2_recorder import Ros2Recorder
from polybag.util.text import peer_text, safe_line

#: std_msgs/msg/Empty serialized (CDR little endian: its one dummy uint8)
EMPTY_CDR = b"\x00\x01\x00\x00\x00"

#: the samples held (bytes) per topic while its type is asked for; beyond, recorded raw
MAX_PENDING = 64 * 1024 * 1024

#: the later publishers asked per topic for a type the first one did not describe
MAX_LATE_ASKS = 8

#: the topics one source subscribes at most (one reader each): peers announcing ever new
#: topics to ``-a`` or ``-e`` make no more readers than this
MAX_TOPICS = 4096


def _definition(type_name: str) -> str:
    """The full ``ros2msg`` text of a known type, ``""`` when it is not known."""
    from polybag.codecs.ros2 import definition_for

    try:
        return definition_for(type_name)
    except Exception:  # noqa: BLE001 - any failure means: not known
        return ""


@dataclass(slots=True, eq=False, repr=False)
class _Sub:
    """One subscription of a :class:`Ros2Source`: its topic, type and DDS reader, the QoS it
    requested and the publishers' offered QoS profiles."""

    topic: str
    type: str
    definition: str
    type_hash: str
    reader: Any
    requested: dict[str, Any]
    offers: list[dict[str, Any]]
    latched: bool = field(init=False)  # (transient_local requested)
    # while the type is asked for: the samples taken meanwhile (data, source time, receive
    # time), their bytes, and the event set when the answer (or the failure) is in ``definition``
    pending: list[tuple[bytes, int, int]] | None = None
    pending_bytes: int = 0
    resolved: threading.Event | None = None
    # what the lookup came to, said by the receive thread once the held samples are written
    # (so the line on stderr means they are in the recorder's hands): a warning or a note
    outcome: str = ""
    # a topic still without a definition: the later publishers asked, and one is being asked
    asked: set[str] = field(default_factory=set)
    asking: bool = False

    def __post_init__(self) -> None:
        self.latched = self.requested.get("durability") == "transient_local"


class Ros2Source:
    """Feeds one or several :class:`Ros2Recorder` from a live ROS 2 graph (see the module
    docstring): each topic is subscribed once and every sample goes to each recorder that
    selects it (several recorders: give each a :class:`Ros2Member` of this source).

    ``options``: the options of the recorder :meth:`start` is called with (None: each
    recorder's own); ``graph``: an existing :class:`polybag.net.ros2.Graph` (else one is
    made from the environment and closed by :meth:`stop`); ``poll``: the discovery period
    in seconds; ``log(text)``: where warnings are said (default: stderr unless quiet);
    ``include_hidden``: ``-a``/``-e`` take hidden topics too; ``type_timeout``: seconds to
    wait for a publisher's type description service (0: never ask).
    """

    def __init__(
        self,
        options: RecordOptions | None = None,
        *,
        graph: Any = None,
        poll: float = 0.25,
        log: Any = None,
        include_hidden: bool = False,
        type_timeout: float = 5.0,
    ) -> None:
        self.options = options
        self.include_hidden = include_hidden
        self.type_timeout = type_timeout
        self._fetched: dict[tuple[str, str], str] = {}  # (type, hash) -> definition from a node
        self._graph = graph
        self._own_graph = graph is None
        self.poll = poll
        self._log = log
        self._recs: tuple[Any, ...] = ()  # the attached recorders (read without the lock per sample)
        self._rec_done: dict[int, set[str]] = {}  # id(recorder) -> topics it is done with (-l)
        self._subs: dict[str, _Sub] = {}
        self._closed_topics: set[str] = set()
        self._warned: set[tuple[str, str]] = set()
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._waitset: Any = None
        self._triggers: dict[str, Any] = {}  # snapshot trigger topic -> reader
        self._begin_writers: dict[str, Any] = {}  # -p: begin_write topic -> writer
        self._started = False
        self.errors: list[str] = []
        self.warnings: list[str] = []

    @property
    def graph(self) -> Any:
        return self._graph

    @property
    def topics(self) -> list[str]:
        """The topics subscribed so far."""
        with self._lock:
            return sorted(self._subs)

    def start(self, recorder: Any) -> None:
        """Feed ``recorder`` too; the first call joins the graph and starts discovering and receiving."""
        from polybag.net.ros2 import Graph

        with self._lock:
            if any(r is recorder for r in self._recs):
                return
            self._recs = (*self._recs, recorder)
            self._rec_done[id(recorder)] = set()
            first = not self._started
            self._started = True
        if first:
            if self._graph is None:
                self._graph = Graph()
            self._waitset = self._graph.waitset()
            # (the receive thread wakes as soon as a publication is discovered, and what the
            # first reader costs is paid now: a late publisher's reader is made and matched
            # within milliseconds of its announcement, see _run)
            self._waitset.attach(self._graph.discovered)
            self._graph.warm_up()
            _definition("std_msgs/msg/String")
        if recorder.options.snapshot:
            self._subscribe_trigger(recorder.options.trigger_topic)
        if recorder.options.publish:
            topic = recorder.options.begin_write_topic
            self._advertise_begin_write(topic)
            recorder.on_open(lambda _path: self._begin_write(topic))
            if recorder.current_file is not None:
                self._begin_write(topic)
        self._discover(rescan=not first)
        if first:
            self._thread = threading.Thread(target=self._run, name="polybag-record-ros2", daemon=True)
            self._thread.start()

    def detach(self, recorder: Any) -> None:
        """Stop feeding ``recorder``; when no recorder is left the source stops."""
        with self._lock:
            self._recs = tuple(r for r in self._recs if r is not recorder)
            left = bool(self._recs)
        if not left:
            self.stop()

    def _wanted(self, topic: str) -> bool:
        from polybag.net.ros2.names import hidden

        if topic in self._triggers or topic in self._closed_topics:
            return False
        skip_hidden = not self.include_hidden and hidden(topic)
        wanted = False
        for r in self._recs:
            o = r.options
            if topic in self._rec_done.get(id(r), ()) or not o.selects(topic, explicit_required=True):
                continue
            if skip_hidden and (o.all or o.regex):
                if (topic, "hidden") not in self._warned:
                    self._warned.add((topic, "hidden"))
                    self._say(f"Hidden topic {topic} not recorded (--include-hidden-topics records it)")
                continue
            wanted = True
        return wanted

    # --- discovery ---------------------------------------------------------------------------
    def _discover(self, *, rescan: bool = False) -> None:
        """Poll discovery; subscribe the new wanted topics (``rescan``: every known topic,
        for a recorder attached late)."""
        from polybag.net.ros2 import Ros2GraphError

        try:
            new, _gone = self._graph.poll()
        except Ros2GraphError as e:
            self._error(str(e))
            return
        if not new and not rescan:
            return
        by_topic = self._graph.topics()
        topics = set(by_topic) if rescan else {p.topic for p in new}
        for topic in sorted(topics):
            with self._lock:
                sub = self._subs.get(topic)
            if sub is None:
                if not self._wanted(topic):
                    continue
                if len(self._subs) >= MAX_TOPICS:
                    self._warn_once(
                        "", "max_topics", f"more than {MAX_TOPICS} topics published: {topic} and later ones not recorded"
                    )
                    continue
                self._subscribe(topic, by_topic.get(topic, []))
            else:
                self._check_new(sub, [p for p in new if p.topic == topic])

    def _subscribe_trigger(self, topic: str) -> None:
        """Snapshot mode: a reader of ``snapshot_trigger`` in a recorder's namespace
        (std_msgs/msg/Empty, reliable, volatile); every sample triggers the snapshot
        recorders of that namespace (as rosbag's)."""
        from polybag.net.ros2 import Ros2GraphError
        from polybag.net.ros2.qos import requested_profile

        with self._lock:
            if topic in self._triggers:
                return
            self._triggers[topic] = None
        try:
            reader = self._graph.reader(topic, "std_msgs::msg::dds_::Empty_", requested_profile([{}]))
        except Ros2GraphError as e:
            self._error(f"snapshot trigger {topic}: {e}")
            return
        with self._lock:
            self._triggers[topic] = reader
            self._waitset.attach(reader.condition)

    def _advertise_begin_write(self, topic: str) -> None:
        """``-p``: a std_msgs/msg/Empty writer on ``begin_write`` (transient_local, depth 1:
        latched, as rosbag's)."""
        from polybag.net.ros2 import Ros2GraphError

        with self._lock:
            if topic in self._begin_writers:
                return
        profile = {
            "reliability": "reliable",
            "durability": "transient_local",
            "history": "keep_last",
            "depth": 1,
        }
        try:
            w = self._graph.writer(topic, "std_msgs::msg::dds_::Empty_", profile, depth=1)
        except Ros2GraphError as e:
            self._error(f"-p: {e}")
            return
        with self._lock:
            self._begin_writers[topic] = w

    def _begin_write(self, topic: str) -> None:
        from polybag.net.ros2 import Ros2GraphError

        with self._lock:
            w = self._begin_writers.get(topic)
        if w is not None:
            try:
                w.write(EMPTY_CDR)
            except Ros2GraphError as e:
                self._error(f"-p: {e}")

    def _subscribe(self, topic: str, pubs: list[Any]) -> None:
        from polybag.net.ros2 import Ros2GraphError
        from polybag.net.ros2.qos import requested_profile

        typed = [p for p in pubs if p.type]
        if not typed:
            if pubs:
                self._warn_once(
                    topic,
                    "dds",
                    f"topic {topic}: DDS type {peer_text(repr(pubs[0].dds_type))} is not a ROS 2 type name; "
                    "not recorded",
                )
            return
        typ = typed[0].type
        dds_type = typed[0].dds_type
        others = sorted({p.type for p in typed if p.type != typ})
        if others:
            self._warn_once(
                topic,
                "types",
                f"topic {topic}: published as {typ} and {', '.join(others)}; recording {typ} only",
            )
        same = [p for p in typed if p.type == typ]
        offers = [p.qos for p in same]
        requested = requested_profile(offers)
        try:  # (the reader first: the publisher may be sending already)
            typeid = next((p.typeid for p in same if p.typeid is not None), None)
            reader = self._graph.reader(topic, dds_type, requested, typeid)
        except Ros2GraphError as e:
            self._error(str(e))
            return
        definition = _definition(typ)
        type_hash = next((p.type_hash for p in same if p.type_hash), "")
        ask = None
        if not definition:
            with self._lock:
                definition = self._fetched.get((typ, type_hash), "")
            if not definition and type_hash and self.type_timeout > 0:
                ask = next(p for p in same if p.type_hash == type_hash).participant
            elif not definition:
                self._warn_unknown(topic, typ, "")
        sub = _Sub(topic, typ, definition, type_hash, reader, requested, offers)
        if ask is not None:
            sub.pending = []
            sub.resolved = threading.Event()
            threading.Thread(
                target=self._ask_type, args=(sub, ask), name="polybag-ros2-type", daemon=True
            ).start()
        self._topic_info(sub)
        with self._lock:
            self._subs[topic] = sub
            self._waitset.attach(reader.condition)
        self._say(f"Subscribing to {topic} ({typ}, {requested['reliability']} {requested['durability']})")

    def _warn_unknown(self, topic: str, typ: str, why: str) -> None:
        # (``why`` may quote the peer: cut and escaped again, whatever made it)
        asked = f"; its publisher's type description service: {peer_text(why, 800)}" if why else ""
        self._warn_once(
            topic,
            "unknown",
            f"topic {topic}: type {typ} is not known (add its .msg files with --types DIR){asked}; "
            "recorded as raw CDR without a definition",
        )

    def _ask_type(self, sub: _Sub, participant: str) -> None:
        """(its own thread) The definition of ``sub``'s type from the publishing node's type
        description service; the receive thread writes the held samples once it is known."""
        from polybag.net.ros2 import Ros2GraphError
        from polybag.net.ros2.typedesc import fetch_definition

        assert sub.resolved is not None
        why = ""
        text = ""
        try:
            text = fetch_definition(self._graph, participant, sub.type, sub.type_hash, self.type_timeout)
        except Ros2GraphError as e:
            why = str(e) or "failed"
        except Exception as e:  # noqa: BLE001 - never lose the topic over the lookup
            why = f"{type(e).__name__}: {e}"
        with self._lock:
            late = sub.resolved.is_set()  # (the held samples were written raw already)
            if not text:  # (another topic's publisher may have described it meanwhile)
                text = self._fetched.get((sub.type, sub.type_hash), "")
                why = "" if text else why
            if text:
                self._fetched[(sub.type, sub.type_hash)] = text
                if not late:
                    sub.definition = text
            if not late:
                sub.outcome = "why:" + why if why else "ok"
                sub.resolved.set()
        if late and why:
            self._warn_unknown(sub.topic, sub.type, why)
        if text:
            self._adopt(sub.type, sub.type_hash, text)

    def _ask_later(self, sub: _Sub, pub: Any) -> None:
        """A topic recorded without a definition: ask a publisher that appeared later (at
        most :data:`MAX_LATE_ASKS` per topic, one at a time) for it."""
        with self._lock:
            if sub.definition or sub.asking or sub.pending is not None or self.type_timeout <= 0:
                return
            if not pub.type_hash or (sub.type_hash and pub.type_hash != sub.type_hash):
                return
            known = self._fetched.get((sub.type, pub.type_hash), "")
            if not known:
                if pub.participant in sub.asked or len(sub.asked) >= MAX_LATE_ASKS:
                    return
                sub.asked.add(pub.participant)
                sub.asking = True
        if known:
            self._adopt(sub.type, pub.type_hash, known)
            return
        threading.Thread(
            target=self._ask_late, args=(sub, pub.participant, pub.type_hash), name="polybag-ros2-type", daemon=True
        ).start()

    def _ask_late(self, sub: _Sub, participant: str, type_hash: str) -> None:
        """(its own thread) :meth:`_ask_later`'s question."""
        from polybag.net.ros2.typedesc import fetch_definition

        text = ""
        try:
            text = fetch_definition(self._graph, participant, sub.type, type_hash, self.type_timeout)
        except Exception:  # noqa: BLE001, S110 - (said when the topic was first left raw)
            pass
        with self._lock:
            sub.asking = False
            if text:
                self._fetched[(sub.type, type_hash)] = text
        if text:
            self._adopt(sub.type, type_hash, text)

    def _adopt(self, typ: str, type_hash: str, text: str) -> None:
        """A definition of ``typ`` (hash ``type_hash``) came: every topic of that type recorded
        without one takes it (rosbag2 sqlite3: the type's definition for all the topic's
        messages in the file; otherwise those received from now on)."""
        with self._lock:
            subs = [
                s
                for s in self._subs.values()
                if s.type == typ
                and not s.definition
                and s.pending is None
                and (not s.type_hash or s.type_hash == type_hash)
            ]
            for s in subs:
                s.definition = text
        for s in subs:
            self._say(f"Type {typ} of {s.topic} from a later publisher's type description service; recorded with it")

    def _topic_info(self, sub: _Sub) -> None:
        from polybag.net.ros2.qos import profiles_text

        text = profiles_text(sub.offers)
        for r in self._recs:
            if isinstance(r, Ros2Recorder):
                r.set_topic_info(sub.topic, text, sub.type_hash)

    def _check_new(self, sub: _Sub, pubs: list[Any]) -> None:
        from polybag.net.ros2.qos import incompatibility

        for p in pubs:
            if p.type and p.type != sub.type:
                self._warn_once(
                    sub.topic,
                    "type:" + p.type,
                    f"topic {sub.topic}: a publisher of {p.type} is ignored (recording {sub.type})",
                )
                continue
            why = incompatibility(p.qos, sub.requested)
            if why:
                self._warn_once(
                    sub.topic,
                    "qos:" + p.key,
                    f"topic {sub.topic}: publisher {p.key} has an incompatible QoS ({why}); its messages are not recorded",
                )
                continue
            sub.offers.append(p.qos)
            self._topic_info(sub)
            if not sub.definition:
                self._ask_later(sub, p)

    # --- receiving -----------------------------------------------------------------------------
    def _run(self) -> None:
        next_poll = time.monotonic() + self.poll
        discovered = self._graph.discovered
        while not self._stop.is_set():
            found = False
            try:
                self._waitset.wait(50_000_000)  # 50 ms
                found = discovered.triggered
            except Exception as e:  # noqa: BLE001 - the binding raises DDSException
                self._error(f"waiting for samples: {e}")
                self._stop.wait(0.05)
            # a publication discovered: its reader at once (a publisher sends as soon as it
            # exists; what it sends before our reader matches is lost unless it keeps it)
            if found or time.monotonic() >= next_poll:
                self._discover()
                next_poll = time.monotonic() + self.poll
            self._drain()
        self._drain(final=True)

    def _drain(self, final: bool = False) -> None:
        from polybag.net.ros2 import Ros2GraphError

        with self._lock:
            triggers = [(t, r) for t, r in self._triggers.items() if r is not None]
            subs = list(self._subs.values())
        for topic, reader in triggers:
            try:
                fired = reader.take(64)
            except Ros2GraphError as e:
                self._error(str(e))
                fired = []
            for _ in fired:
                for rec in self._recs:
                    if rec.options.snapshot and rec.options.trigger_topic == topic:
                        rec.trigger()  # returns at once; the file is written by its writer thread
        for sub in subs:
            while True:
                try:
                    got = sub.reader.take_received(1024)
                except Ros2GraphError as e:
                    self._error(str(e))
                    break
                if sub.pending is not None:
                    if not self._hold(sub, got, final):
                        break
                    continue
                if not got:
                    break
                self._write(sub, got, sub.definition)
                if len(got) < 1024:
                    break

    def _write(self, sub: _Sub, messages: list[tuple[bytes, int, int]], definition: str) -> None:
        """Write ``(data, source time, receive time)`` of ``sub`` to every recording still
        taking its topic (the receive time as log time, the source time as publish time)."""
        recs = [r for r in self._recs if sub.topic not in self._rec_done.get(id(r), ())]
        for data, src, t in messages:
            for rec in recs:
                rec.write(
                    sub.topic,
                    data,
                    type=sub.type,
                    md5sum=sub.type_hash or "*",
                    definition=definition,
                    receive_time=t,
                    latching=sub.latched,
                    publish_time=src if src >= 0 else t,  # (a peer's clock: never negative)
                )

    def _hold(self, sub: _Sub, got: list[tuple[bytes, int, int]], final: bool) -> bool:
        """While ``sub``'s type is asked for, keep what arrives (``got``); once it is known
        (or given up: the end, or more than :data:`MAX_PENDING` bytes held) write what was
        held in order and stop holding.  True when the caller should take more."""
        assert sub.pending is not None and sub.resolved is not None
        sub.pending.extend(got)
        for data, _src, _t in got:
            sub.pending_bytes += len(data)
        if sub.pending_bytes > MAX_PENDING or final:
            with self._lock:
                gave_up = not sub.resolved.is_set()
                sub.resolved.set()
            if gave_up:
                why = (
                    "no answer before the recording stopped"
                    if final
                    else f"no answer before {MAX_PENDING >> 20} MB arrived"
                )
                self._warn_unknown(sub.topic, sub.type, why)
        if not sub.resolved.is_set():
            return len(got) == 1024
        held, sub.pending, sub.pending_bytes = sub.pending, None, 0
        with self._lock:
            definition = sub.definition
        self._write(sub, held, definition)
        outcome, sub.outcome = sub.outcome, ""
        if outcome == "ok":
            self._say(f"Type {sub.type} of {sub.topic} from its publisher's type description service")
        elif outcome:
            self._warn_unknown(sub.topic, sub.type, outcome[len("why:") :])
        return True

    def unsubscribe(self, topic: str, recorder: Any = None) -> None:
        """``recorder`` (None: every recorder) is done with ``topic`` (its -l limit was
        reached); the reader goes when no recorder wants the topic any more."""
        with self._lock:
            for r in self._recs:
                if recorder is None or r is recorder:
                    self._rec_done.setdefault(id(r), set()).add(topic)
            if self._wanted(topic):
                return
            self._closed_topics.add(topic)
            sub = self._subs.pop(topic, None)
        if sub is not None:
            try:
                self._waitset.detach(sub.reader.condition)
            except Exception:  # noqa: BLE001, S110 - best effort
                pass
            sub.reader.close()

    def stop(self) -> None:
        """Stop receiving (what was taken is handed over first) and leave the graph if ours."""
        self._stop.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout=5)
        with self._lock:
            readers = [s.reader for s in self._subs.values()] + [
                r for r in self._triggers.values() if r is not None
            ]
            self._subs.clear()
            self._triggers.clear()
        for reader in readers:
            reader.close()
        with self._lock:
            writers = list(self._begin_writers.values())
            self._begin_writers.clear()
        for w in writers:
            w.close()
        if self._own_graph and self._graph is not None:
            self._graph.close()
            self._graph = None

    # --- messages for people ---------------------------------------------------------------------
    def _warn_once(self, topic: str, what: str, text: str) -> None:
        key = (topic, what)
        if key in self._warned:
            return
        self._warned.add(key)
        text = safe_line(text)  # (names and reasons from peers: see polybag.util.text)
        self.warnings.append(text)
        self._say(f"warning: {text}")

    def _error(self, text: str) -> None:
        text = peer_text(text, 1000)
        if len(self.errors) < 100:
            self.errors.append(text)
        self._say(f"error: {text}")

    def _say(self, text: str) -> None:
        text = safe_line(text)
        if self._log is not None:
            self._log(text)
            return
        quiet = self.options.quiet if self.options is not None else all(r.options.quiet for r in self._recs)
        if not quiet:
            print(text, file=sys.stderr, flush=True)


class Ros2Member:
    """One recorder's handle on a shared :class:`Ros2Source` (what the recorder calls
    ``source``): stopping detaches only this recorder, -l unsubscribes only for it."""

    def __init__(self, shared: Ros2Source) -> None:
        self.shared = shared
        self._rec: Any = None

    def start(self, recorder: Any) -> None:
        self._rec = recorder
        self.shared.start(recorder)

    def stop(self) -> None:
        if self._rec is not None:
            self.shared.detach(self._rec)

    def unsubscribe(self, topic: str) -> None:
        self.shared.unsubscribe(topic, self._rec)
