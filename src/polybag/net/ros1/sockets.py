"""What the parts of a ROS 1 node share: timeouts, the connection-id counter, socket and
thread helpers, ROS name resolution and the logger.
"""

from __future__ import annotations

import itertools
import logging
import os
import socket
import threading

from polybag.net.ros1.errors import RosGraphError

log = logging.getLogger("polybag.net.ros1")

#: Seconds a peer has to complete the TCPROS handshake.
HANDSHAKE_TIMEOUT = 10.0
#: Seconds Publisher.close() / Node.close() give queued messages to reach their subscribers.
FLUSH_TIMEOUT = 2.0
#: Seconds a publisher the master no longer lists has to finish sending what it already sent.
RETIRE_GRACE = 1.0
#: Seconds a subscription's reader waits in one recv before it checks for retire/close.
POLL = 0.5

#: Seconds close() waits for each thread.
JOIN_TIMEOUT = 5.0

#: Small queued messages are joined into one send of up to this many bytes.
SEND_BATCH = 1 << 18

conn_ids = itertools.count(1)


def default_host() -> str:
    return os.environ.get("ROS_HOSTNAME") or os.environ.get("ROS_IP") or "127.0.0.1"


def bind_host(host: str) -> str:
    return host if host in ("127.0.0.1", "localhost") else ""


def shutdown_socket(sock: socket.socket | None) -> None:
    if sock is None:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass


def join_thread(thread: threading.Thread | None) -> None:
    if thread is not None and thread is not threading.current_thread() and thread.is_alive():
        thread.join(JOIN_TIMEOUT)


def resolve_name(name: str) -> str:
    if not name:
        raise RosGraphError("empty ROS name")
    return name if name.startswith("/") else "/" + name
