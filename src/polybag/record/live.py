"""The live source: subscribe on a ROS 1 master through ``polybag.net.ros1.Node``.

Subscriptions ask for ``md5sum=*``/``type=*`` like rosbag, so the type, md5sum, definition,
callerid and latching of each message come from the publisher's connection header.  Named
topics are subscribed at once; with ``-a``, ``-e`` or ``--node`` the master is polled every
second (as rosbag does) and new matching topics are subscribed as they appear.
"""

from __future__ import annotations

import threading
from typing import Any

from polybag.record.options import RecordOptions

EMPTY_MD5 = "d41d8cd98f00b204e9800998ecf8427e"  # std_msgs/Empty


def _global(name: str) -> str:
    return name if name.startswith("/") else "/" + name


class LiveSource:
    """Feeds a :class:`~polybag.record.recorder.Recorder` from a ROS master.

    ``node``: an existing ``polybag.net.ros1.Node`` (else one named ``options.node_name``,
    anonymous, is made and closed here).  ``poll`` is the discovery period in seconds.
    """

    def __init__(
        self, options: RecordOptions, *, master_uri: str | None = None, node: Any = None, poll: float = 1.0
    ) -> None:
        self.options = options
        self.master_uri = master_uri
        self._node = node
        self._own_node = node is None
        self.poll = poll
        self._subs: dict[str, Any] = {}
        self._done_topics: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._rec: Any = None
        self._begin_pub: Any = None
        self.errors: list[str] = []

    @property
    def node(self) -> Any:
        return self._node

    def start(self, recorder: Any) -> None:
        from polybag.net.ros1 import Node

        self._rec = recorder
        o = self.options
        if self._node is None:
            self._node = Node(o.node_name, self.master_uri, anonymous=True)
        if o.publish:
            self._begin_pub = self._node.advertise(
                "/begin_write", "std_msgs/Empty", EMPTY_MD5, "", latch=True
            )
            recorder.on_open(lambda _path: self._begin_write())
            if recorder.current_file is not None:
                self._begin_write()
        if o.snapshot:
            self._node.subscribe("/snapshot_trigger", lambda _m: recorder.trigger(), md5sum="*", type="*")
        if not (o.all or o.regex or o.node):
            for t in o.topics:
                self._subscribe(_global(t))
        else:
            self._discover()
            self._thread = threading.Thread(target=self._poll, name="polybag-record-discovery", daemon=True)
            self._thread.start()

    def _begin_write(self) -> None:
        pub = self._begin_pub
        if pub is not None:
            pub.publish(b"")

    def _callback(self, msg: Any) -> None:
        c = msg.connection
        self._rec.write(
            msg.topic,
            msg.data,
            type=str(c.get("type", "")) or "unknown/Unknown",
            md5sum=str(c.get("md5sum", "*")),
            definition=str(c.get("message_definition", "")),
            receive_time=msg.receive_time,
            callerid=str(c.get("callerid", "")),
            latching=str(c.get("latching", "0")) in ("1", "true"),
        )

    def _subscribe(self, topic: str) -> None:
        with self._lock:
            if topic in self._subs or topic in self._done_topics or self._stop.is_set():
                return
            self._subs[topic] = None
        try:
            sub = self._node.subscribe(
                topic, self._callback, md5sum="*", type="*", tcp_nodelay=self.options.tcpnodelay
            )
        except Exception:
            with self._lock:
                self._subs.pop(topic, None)
            raise
        with self._lock:
            self._subs[topic] = sub
        self._rec._say(f"Subscribing to {topic}")

    def unsubscribe(self, topic: str) -> None:
        """Called by the recorder when -l is reached on ``topic``."""
        with self._lock:
            sub = self._subs.pop(topic, None)
            self._done_topics.add(topic)
        if sub is not None:
            threading.Thread(target=sub.close, daemon=True).start()  # (not from the reader thread)

    def _wanted(self) -> set[str]:
        o = self.options
        if o.node:
            pubs, subs, _srvs = self._node_master().get_system_state()
            node = _global(o.node)
            return {t for t, nodes in subs if node in nodes and o.selects(t)}
        topics = {t for t, _type in self._node.topics()}
        return {t for t in topics if o.selects(t, explicit_required=True)}

    def _node_master(self) -> Any:
        master = getattr(self._node, "master", None)
        if master is None:
            from polybag.net.ros1.master import MasterClient

            master = MasterClient(self.master_uri, caller_id=getattr(self._node, "name", "/polybag"))
        return master

    def _discover(self) -> None:
        for t in sorted(self._wanted()):
            if t in ("/snapshot_trigger", "/begin_write") and (self.options.snapshot or self.options.publish):
                continue
            self._subscribe(t)

    def _poll(self) -> None:
        while not self._stop.wait(self.poll):
            try:
                self._discover()
            except Exception as e:  # noqa: BLE001 - a missed poll is retried in a second
                if len(self.errors) < 100:
                    self.errors.append(str(e))

    def stop(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        with self._lock:
            subs = [s for s in self._subs.values() if s is not None]
            self._subs.clear()
        for s in subs:
            try:
                s.close()
            except Exception as e:  # noqa: BLE001
                self.errors.append(f"unsubscribing: {e}")
        if self._begin_pub is not None:
            try:
                self._begin_pub.close()
            except Exception:  # noqa: BLE001,S110
                pass
        if self._own_node and self._node is not None:
            self._node.close()
