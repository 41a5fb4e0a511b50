"""The live source: subscribe on a ROS 1 master through ``polybag.net.ros1.Node``.

Subscriptions ask for ``md5sum=*``/``type=*`` like rosbag, so the type, md5sum, definition,
callerid and latching of each message come from the publisher's connection header.  Named
topics are subscribed at once (publishers that appear later are connected when the master
tells us: publisherUpdate); with ``-a``, ``-e`` or ``--node`` the master is polled every
second (as rosbag does) and new matching topics are subscribed as they appear.  With ``-l N``
(:meth:`LiveSource.limit_done`) a recorder ends when every topic it is subscribed to so far has
its N messages, as rosbag's.

One source can feed several recorders (:class:`~polybag.record.group.RecorderGroup`): each
topic is subscribed once and every message goes to each recorder that selects it.  A
snapshot recorder's trigger is ``snapshot_trigger`` in its namespace (``--namespace``), so
recorders in different namespaces are triggered apart.

The master is watched (every ``poll`` seconds): when it goes away the recording goes on
with the connections it has (files stay open); registration is retried with back-off; when
a master answers again and no longer lists our registrations (it was restarted), every
subscription and publication is registered again, so publishers that register with the new
master are connected.  Connections to the old master's publishers are kept.
"""

from __future__ import annotations

import threading
from typing import Any

from polybag.errors import PolybagError
from polybag.record.options import RecordOptions

EMPTY_MD5 = "d41d8cd98f00b204e9800998ecf8427e"  # std_msgs/Empty
#: Longest wait between two tries to reach a master that went away (seconds).
MAX_BACKOFF = 5.0


def _global(name: str) -> str:
    return name if name.startswith("/") else "/" + name


class _Sink:
    """One recorder fed by the source, with the topics it is done with (-l reached)."""

    __slots__ = ("rec", "options", "done", "attached")

    def __init__(self, rec: Any, options: RecordOptions) -> None:
        self.rec = rec
        self.options = options
        self.done: set[str] = set()
        self.attached = True


class LiveSource:
    """Feeds one or several :class:`~polybag.record.recorder.Recorder` from a ROS master.

    ``options``: the options of the recorder :meth:`start` is called with (a group passes
    None and :meth:`attach` es its recorders).  ``node``: an existing
    ``polybag.net.ros1.Node`` (else one named ``options.node_name`` in the namespace,
    anonymous, is made and closed here).  ``poll`` is the discovery and master-watch period
    in seconds.
    """

    def __init__(
        self, options: RecordOptions | None = None, *, master_uri: str | None = None, node: Any = None, poll: float = 1.0, node_name: str | None = None, namespace: str | None = None
    ) -> None:
        self.options = options
        self.master_uri = master_uri
        self._node = node
        self._own_node = node is None
        self.poll = poll
        self._node_name = node_name or (options.node_name if options is not None else "/record")
        self._namespace = namespace if namespace is not None else (options.ns if options is not None else "")
        self._sinks: list[_Sink] = []
        self._active: tuple[_Sink, ...] = ()  # the attached sinks (read without the lock per message)
        self._subs: dict[str, Any] = {}
        self._pending: set[str] = set()  # wanted, but the master could not be reached yet
        self._triggers: dict[str, Any] = {}  # trigger topic -> subscription
        self._pubs: dict[str, Any] = {}  # begin_write topics
        self._pending_pubs: set[str] = set()
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = False
        self.errors: list[str] = []
        self.warnings: list[str] = []  # what was retried (master unreachable meanwhile)
        self.master_down = False  # the master did not answer the last check
        self.reregistrations = 0  # how many times a (restarted) master was given our registrations again

    @property
    def node(self) -> Any:
        return self._node

    # --- recorders -------------------------------------------------------------------------------
    def attach(self, recorder: Any, options: RecordOptions | None = None) -> None:
        """Feed ``recorder`` too (its options select the topics); subscribes what it needs
        if the source is running."""
        sink = _Sink(recorder, options if options is not None else recorder.options)
        with self._lock:
            self._sinks.append(sink)
            self._active = tuple(s for s in self._sinks if s.attached)
        if self._started:
            self._setup_sink(sink)
            self._discover_safely()

    def detach(self, recorder: Any) -> None:
        """Stop feeding ``recorder``; when no recorder is left the source stops."""
        with self._lock:
            for s in self._sinks:
                if s.rec is recorder:
                    s.attached = False
            self._active = tuple(s for s in self._sinks if s.attached)
            left = bool(self._active)
        if not left:
            self.stop()

    def _live_sinks(self) -> list[_Sink]:
        with self._lock:
            return [s for s in self._sinks if s.attached]

    # --- lifecycle ---------------------------------------------------------------------------------
    def start(self, recorder: Any = None) -> None:
        """Start (``recorder``: the one recorder of a plain ``polybag record``)."""
        if recorder is not None:
            with self._lock:
                known = any(s.rec is recorder for s in self._sinks)
            if not known:
                self.attach(recorder, self.options)
        if self._started:
            return
        from polybag.net.ros1 import Node

        if self._node is None:
            ns = self._namespace.strip("/")
            name = ("/" + ns if ns else "") + _global(self._node_name)
            self._node = Node(name, self.master_uri, anonymous=True)
        self._started = True
        for sink in self._live_sinks():
            self._setup_sink(sink)
        self._discover_safely(raise_errors=True)
        self._thread = threading.Thread(target=self._watch, name="polybag-record-watch", daemon=True)
        self._thread.start()

    def _setup_sink(self, sink: _Sink) -> None:
        o = sink.options
        rec = sink.rec
        if o.publish:
            topic = o.begin_write_topic
            self._advertise(topic)
            rec.on_open(lambda _path: self._begin_write(topic))
            if rec.current_file is not None:
                self._begin_write(topic)
        if o.snapshot:
            self._subscribe_trigger(o.trigger_topic)
        if not (o.all or o.regex or o.node):
            for t in o.topics:
                self._subscribe(_global(t), raise_errors=True)

    def _advertise(self, topic: str) -> None:
        with self._lock:
            if topic in self._pubs:
                return
        try:
            pub = self._node.advertise(topic, "std_msgs/Empty", EMPTY_MD5, "", latch=True)
        except PolybagError as e:
            if not self._reachable_error(e):
                raise
            with self._lock:
                self._pending_pubs.add(topic)
            self._warn(f"advertising {topic}: {e} (retried)")
            return
        with self._lock:
            self._pubs[topic] = pub

    def _begin_write(self, topic: str) -> None:
        with self._lock:
            pub = self._pubs.get(topic)
        if pub is not None:
            pub.publish(b"")

    def _special(self) -> set[str]:
        """Our own trigger and begin_write topics (never recorded by discovery)."""
        out: set[str] = set()
        for s in self._live_sinks():
            if s.options.snapshot:
                out.add(s.options.trigger_topic)
            if s.options.publish:
                out.add(s.options.begin_write_topic)
        return out

    # --- messages -----------------------------------------------------------------------------------
    def _callback(self, msg: Any) -> None:
        c = msg.connection
        typ = str(c.get("type", "")) or "unknown/Unknown"
        md5 = str(c.get("md5sum", "*"))
        definition = str(c.get("message_definition", ""))
        callerid = str(c.get("callerid", ""))
        latching = str(c.get("latching", "0")) in ("1", "true")
        for sink in self._active:
            if msg.topic in sink.done:
                continue
            sink.rec.write(
                msg.topic,
                msg.data,
                type=typ,
                md5sum=md5,
                definition=definition,
                receive_time=msg.receive_time,
                callerid=callerid,
                latching=latching,
            )

    def _trigger(self, topic: str) -> None:
        for sink in self._live_sinks():
            if sink.options.snapshot and sink.options.trigger_topic == topic:
                sink.rec.trigger()  # returns at once; the file is written by its writer thread

    # --- subscriptions -------------------------------------------------------------------------------
    def _subscribe_trigger(self, topic: str) -> None:
        with self._lock:
            if topic in self._triggers:
                return
            self._triggers[topic] = None
        try:
            sub = self._node.subscribe(topic, lambda _m: self._trigger(topic), md5sum="*", type="*")
        except PolybagError as e:
            with self._lock:
                self._triggers.pop(topic, None)
                self._pending.add(topic)
            self._warn(f"subscribing to {topic}: {e} (retried)")
            return
        with self._lock:
            self._triggers[topic] = sub

    def _subscribe(self, topic: str, *, raise_errors: bool = False) -> None:
        with self._lock:
            if topic in self._subs or self._stop.is_set():
                return
            sinks = [s for s in self._sinks if s.attached and s.options.selects(topic)]
            if sinks and all(topic in s.done for s in sinks):
                return
            self._subs[topic] = None
        tcp_nodelay = any(s.options.tcpnodelay for s in self._live_sinks())
        try:
            sub = self._node.subscribe(topic, self._callback, md5sum="*", type="*", tcp_nodelay=tcp_nodelay)
        except PolybagError as e:
            with self._lock:
                self._subs.pop(topic, None)
                self._pending.add(topic)
            if raise_errors and not self._reachable_error(e):
                raise
            self._warn(f"subscribing to {topic}: {e} (retried)")
            return
        with self._lock:
            self._subs[topic] = sub
            self._pending.discard(topic)
        for s in self._live_sinks():
            if s.options.selects(topic):
                s.rec.say(f"Subscribing to {topic}")
                break

    @staticmethod
    def _reachable_error(e: Exception) -> bool:
        """A master that cannot be reached (retried) rather than one that refused us."""
        from polybag.net.ros1.master import UnreachableError

        return isinstance(e, UnreachableError)

    def unsubscribe(self, topic: str, recorder: Any = None) -> None:
        """Called by a recorder when -l is reached on ``topic``: the subscription goes when
        every recorder that selects the topic is done with it."""
        with self._lock:
            sinks = [s for s in self._sinks if s.attached and s.options.selects(topic)]
            for s in sinks:
                if recorder is None or s.rec is recorder:
                    s.done.add(topic)
            if not all(topic in s.done for s in sinks):
                return
            sub = self._subs.pop(topic, None)
            self._subs[topic] = _DONE
        if sub is not None and sub is not _DONE:
            threading.Thread(target=sub.close, daemon=True).start()  # (not from the reader thread)

    def limit_done(self, recorder: Any = None) -> bool:
        """Whether ``recorder`` (None: every recorder) has its -l messages on every topic it
        is subscribed to (rosbag's rule for -a/-e/--node: the recording ends when every
        topic subscribed so far has its N).  The master is asked once more first, so a topic
        advertised meanwhile (not yet seen by the poll) is subscribed and counts."""
        if not self._limits_reached(recorder):
            return False
        if not self._stop.is_set():
            self._discover_safely()
        return self._limits_reached(recorder)

    def _limits_reached(self, recorder: Any) -> bool:
        special = self._special()
        with self._lock:
            sinks = [s for s in self._sinks if s.attached and (recorder is None or s.rec is recorder)]
            topics = [t for t in set(self._subs) | self._pending if t not in special]
            if not sinks:
                return False
            for s in sinks:
                mine = [t for t in topics if s.options.selects(t)]
                if not mine or not all(t in s.done for t in mine):
                    return False
        return True

    def _wanted(self, state: Any = None) -> set[str]:
        out: set[str] = set()
        sinks = [s for s in self._live_sinks() if s.options.all or s.options.regex or s.options.node]
        if not sinks:
            return out
        topics: list[str] | None = None
        for s in sinks:
            o = s.options
            if o.node:
                if state is None:
                    state = self._node.master.get_system_state()
                node = _global(o.node)
                out |= {t for t, nodes in state[1] if node in nodes and o.selects(t)}
            else:
                if topics is None:
                    topics = [t for t, _type in self._node.topics()]
                out |= {t for t in topics if o.selects(t, explicit_required=True)}
        return out

    def _discover(self, state: Any = None) -> None:
        special = self._special()
        for t in sorted(self._wanted(state)):
            if t not in special:
                self._subscribe(t)

    def _discover_safely(self, *, raise_errors: bool = False) -> None:
        try:
            self._discover()
        except PolybagError as e:
            if raise_errors and not self._reachable_error(e):
                raise
            self._warn(f"asking the master for topics: {e} (retried)")

    # --- the master watch ----------------------------------------------------------------------------
    def _watch(self) -> None:
        delay = self.poll
        while not self._stop.wait(delay):
            try:
                self._check_master()
                delay = self.poll
            except PolybagError as e:
                if not self.master_down:
                    self.master_down = True
                    self._say(f"the ROS master does not answer ({e}); recording goes on, retrying")
                    self._warn(f"the ROS master did not answer for a while ({e})")
                delay = min(MAX_BACKOFF, max(delay * 2, 0.25))
            except Exception as e:  # noqa: BLE001 - a failed check is retried
                self._note(f"watching the master: {type(e).__name__}: {e}")
                delay = min(MAX_BACKOFF, max(delay * 2, 0.25))

    def _check_master(self) -> None:
        state = self._node.master.get_system_state()
        if self.master_down:
            self.master_down = False
            self._say("the ROS master answers again")
        self._reregister(state)
        with self._lock:
            pending = sorted(self._pending)
            self._pending.clear()
            pending_pubs = sorted(self._pending_pubs)
            self._pending_pubs.clear()
        for t in pending_pubs:
            self._advertise(t)
            self._begin_write(t)
        for t in pending:
            if t in self._special():
                self._subscribe_trigger(t)
            else:
                self._subscribe(t)
        self._discover(state)

    def _reregister(self, state: Any) -> None:
        """Register again what the master does not list (it was restarted meanwhile)."""
        me = self._node.name
        pubs = {t for t, nodes in state[0] if me in nodes}
        subs = {t for t, nodes in state[1] if me in nodes}
        with self._lock:
            mine = [
                (t, s)
                for t, s in list(self._subs.items()) + list(self._triggers.items())
                if s not in (None, _DONE)
            ]
            my_pubs = list(self._pubs)
        missing = [(t, s) for t, s in mine if t not in subs]
        missing_pubs = [t for t in my_pubs if t not in pubs]
        if not missing and not missing_pubs:
            return
        self.reregistrations += 1
        self._say(
            "the ROS master does not know our registrations (restarted?): registering "
            + ", ".join([t for t, _s in missing] + missing_pubs)
            + " again"
        )
        for t in missing_pubs:
            self._node.master.register_publisher(t, "std_msgs/Empty")
        for _t, s in missing:
            s.reregister()

    # --- reporting ---------------------------------------------------------------------------------
    def _warn(self, text: str) -> None:
        if len(self.warnings) < 100:
            self.warnings.append(text)

    def _note(self, text: str) -> None:
        if len(self.errors) < 100:
            self.errors.append(text)

    def _say(self, text: str) -> None:
        sinks = self._live_sinks()
        if sinks:
            sinks[0].rec.say(text)

    def stop(self) -> None:
        """Unsubscribe everything and close the node (if it is ours)."""
        if self._stop.is_set():
            return
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)
        with self._lock:
            subs = [
                s for s in list(self._subs.values()) + list(self._triggers.values()) if s not in (None, _DONE)
            ]
            self._subs.clear()
            self._triggers.clear()
            pubs = list(self._pubs.values())
            self._pubs.clear()
        for s in subs:
            try:
                s.close()
            except Exception as e:  # noqa: BLE001
                self._note(f"unsubscribing: {e}")
        for p in pubs:
            try:
                p.close()
            except Exception:  # noqa: BLE001,S110
                pass
        if self._own_node and self._node is not None:
            self._node.close()


_DONE: Any = object()  # a topic whose subscription ended with -l (never subscribed again)


class Member:
    """What a recorder of a group sees as its source: it shares the group's
    :class:`LiveSource` (``stop`` detaches the recorder; ``unsubscribe`` marks -l reached)."""

    def __init__(self, shared: LiveSource) -> None:
        self.shared = shared
        self.recorder: Any = None

    def start(self, recorder: Any) -> None:
        self.recorder = recorder
        self.shared.attach(recorder)

    def stop(self) -> None:
        if self.recorder is not None:
            self.shared.detach(self.recorder)

    def unsubscribe(self, topic: str) -> None:
        self.shared.unsubscribe(topic, self.recorder)

    def limit_done(self) -> bool:
        return self.recorder is not None and self.shared.limit_done(self.recorder)
