"""Message types from a publisher's type description service (ROS 2 Jazzy and later).

Every rclpy/rclcpp node serves ``~/get_type_description``
(``type_description_interfaces/srv/GetTypeDescription``): given a type name and its
``RIHS01_`` hash it answers with the type's description (its fields and those of every type
it uses) and, when asked, the type sources (the ``.msg`` texts).  On DDS the service is the
request topic ``rq/<node>/get_type_descriptionRequest`` and the reply topic
``rr/<node>/get_type_descriptionReply``.

* :func:`encode_request` / :func:`decode_reply`: the request and reply as CDR (bounded
  reads: a malformed reply is a :class:`~polybag.net.ros2.graph.Ros2GraphError`, and no
  length it declares is allocated before the bytes are there).
* :func:`definition_from_reply`: the reply as the ``ros2msg`` text rosbag2 stores (the main
  type, then ``MSG: pkg/msg/Type`` sections), from the type sources when they are ``.msg``
  texts, else rebuilt from the field descriptions; the text's REP 2011 hash must equal the
  one the publisher announced.
* :func:`fetch_definition`: ask the servers of the publisher's participant (found by
  :class:`~polybag.net.ros2.graph.Graph` from their reply writers) and return the verified
  definition, or ``""`` when none answers in time.

The request/reply correlation is not in the payload for Fast DDS (``rmw_fastrtps``: it
travels as the RTPS sample identity, and a request without a related identity is answered
to the request writer, i.e. on the reply topic to every matched reader; the reply is
matched here by its type name).  ``rmw_cyclonedds`` puts a 16-byte header (client GUID,
sequence number) in front of the request and reply; it is added and stripped for
participants whose GUID has Cyclone's vendor prefix (``01 10``).  Only the Fast DDS side is
tested (rmw_cyclonedds_cpp is not on PyPI).
"""

from __future__ import annotations

import os
import struct
import time
from dataclasses import dataclass, field
from typing import Any

from polybag.net.ros2.graph import Ros2GraphError

REQUEST_TYPE = "type_description_interfaces::srv::dds_::GetTypeDescription_Request_"
REPLY_TYPE = "type_description_interfaces::srv::dds_::GetTypeDescription_Response_"
SERVICE = "get_type_description"

#: a reply bigger than this is refused (a type description is a few kB)
MAX_REPLY = 16 * 1024 * 1024

_SERVICE_QOS = {"reliability": "reliable", "durability": "volatile", "history": "keep_last", "depth": 100}

# field type ids of type_description_interfaces/msg/FieldType -> .msg type names
_PRIMITIVE = {
    2: "int8",
    3: "uint8",
    4: "int16",
    5: "uint16",
    6: "int32",
    7: "uint32",
    8: "int64",
    9: "uint64",
    10: "float32",
    11: "float64",
    13: "char",
    14: "wchar",
    15: "bool",
    16: "byte",
    17: "string",
    18: "wstring",
    21: "string",
    22: "wstring",
}
_NESTED = 1
_ARRAY, _BOUNDED_SEQ, _SEQ = 48, 96, 144


@dataclass
class FieldDescription:
    """One field of an ``IndividualTypeDescription``."""

    name: str
    type_id: int
    capacity: int
    string_capacity: int
    nested_type_name: str
    default_value: str = ""


@dataclass
class TypeDescriptionReply:
    """A decoded ``GetTypeDescription`` reply."""

    successful: bool
    failure_reason: str
    type_name: str = ""
    types: dict[str, list[FieldDescription]] = field(default_factory=dict)  # main + referenced
    sources: list[tuple[str, str, str]] = field(default_factory=list)  # (type, encoding, text)


def _cdr_string(s: str) -> bytes:
    b = s.encode("utf-8") + b"\x00"
    return struct.pack("<I", len(b)) + b


def encode_request(type_name: str, type_hash: str, include_sources: bool = True) -> bytes:
    """A ``GetTypeDescription`` request as CDR (little endian, with the encapsulation header)."""
    body = _cdr_string(type_name)
    body += b"\x00" * (-len(body) % 4) + _cdr_string(type_hash)
    body += b"\x01" if include_sources else b"\x00"
    return b"\x00\x01\x00\x00" + body


class _Cdr:
    """Bounded CDR (XCDR1) reads; every failure is a :class:`Ros2GraphError`."""

    def __init__(self, data: bytes, start: int = 4) -> None:
        if len(data) < 4:
            raise Ros2GraphError("type description reply: shorter than its CDR header")
        if data[1] not in (0, 1):
            raise Ros2GraphError(f"type description reply: CDR encapsulation {data[1]} is not plain CDR")
        self.e = "<" if data[1] == 1 else ">"
        self.data = data
        self.base = 4
        self.pos = start

    def _align(self, n: int) -> None:
        self.pos += -(self.pos - self.base) % n

    def _take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise Ros2GraphError("type description reply: truncated")
        out = self.data[self.pos : end]
        self.pos = end
        return out

    def u8(self) -> int:
        return self._take(1)[0]

    def u32(self) -> int:
        self._align(4)
        return int(struct.unpack(self.e + "I", self._take(4))[0])

    def u64(self) -> int:
        self._align(8)
        return int(struct.unpack(self.e + "Q", self._take(8))[0])

    def string(self) -> str:
        n = self.u32()
        if n == 0:
            return ""
        raw = self._take(n)
        try:
            return raw[:-1].decode("utf-8") if raw.endswith(b"\x00") else raw.decode("utf-8")
        except UnicodeDecodeError:
            raise Ros2GraphError("type description reply: a string is not UTF-8") from None

    def count(self, least: int) -> int:
        """A sequence length, refused when the bytes left cannot hold that many elements of
        at least ``least`` bytes each."""
        n = self.u32()
        if n * least > len(self.data) - self.pos:
            raise Ros2GraphError(f"type description reply: a sequence of {n} does not fit in the reply")
        return n


def _individual(c: _Cdr) -> tuple[str, list[FieldDescription]]:
    name = c.string()
    fields = []
    for _ in range(c.count(4 + 1 + 16 + 4 + 4)):
        fname = c.string()
        tid = c.u8()
        cap = c.u64()
        scap = c.u64()
        nested = c.string()
        default = c.string()
        fields.append(FieldDescription(fname, tid, cap, scap, nested, default))
    return name, fields


def decode_reply(data: bytes, header: int = 0) -> TypeDescriptionReply:
    """Decode a ``GetTypeDescription`` reply (``header``: bytes of rmw request header after
    the CDR header, 16 for rmw_cyclonedds)."""
    data = bytes(data)
    if len(data) > MAX_REPLY:
        raise Ros2GraphError(f"type description reply of {len(data)} bytes (more than {MAX_REPLY})")
    c = _Cdr(data, 4 + header)
    c.base = 4
    ok = bool(c.u8())
    reason = c.string()
    main, fields = _individual(c)
    out = TypeDescriptionReply(ok, reason, main, {main: fields} if main else {})
    for _ in range(c.count(8)):
        name, f = _individual(c)
        out.types.setdefault(name, f)
    for _ in range(c.count(12)):
        out.sources.append((c.string(), c.string(), c.string()))
    for _ in range(c.count(8)):  # (extra_information: key/value pairs, not used)
        c.string()
        c.string()
    return out


def _field_text(f: FieldDescription) -> str:
    """A field description as a ``.msg`` line."""
    tid = f.type_id
    kind = 0
    for k in (_SEQ, _BOUNDED_SEQ, _ARRAY):
        if tid > k:
            kind, tid = k, tid - k
            break
    if tid == _NESTED:
        base = f.nested_type_name
        parts = base.split("/")
        if len(parts) == 3 and parts[1] == "msg":
            base = f"{parts[0]}/{parts[2]}"
    elif tid in _PRIMITIVE:
        base = _PRIMITIVE[tid]
        if tid in (21, 22):
            base += f"<={f.string_capacity}"
    else:
        raise Ros2GraphError(f"type description: field {f.name!r} has type id {f.type_id}, not a .msg type")
    if kind == _ARRAY:
        base += f"[{f.capacity}]"
    elif kind == _BOUNDED_SEQ:
        base += f"[<={f.capacity}]"
    elif kind == _SEQ:
        base += "[]"
    default = f" {f.default_value}" if f.default_value else ""
    return f"{base} {f.name}{default}"


def _fields_text(fields: list[FieldDescription]) -> str:
    # (an empty struct is described with rosidl's placeholder member; an empty .msg has none)
    if len(fields) == 1 and fields[0].name == "structure_needs_at_least_one_member":
        return ""
    return "\n".join(_field_text(f) for f in fields) + ("\n" if fields else "")


def _definition(main: str, texts: dict[str, str]) -> tuple[str, str]:
    """(the full ros2msg definition, its RIHS01 hash) of ``main`` from one ``.msg`` text per
    type (the known types fill in what is missing)."""
    from polybag.codecs.ros1.msgdef import MsgDefError, TypeSet, parse_msg
    from polybag.codecs.ros2 import definition_for, full_name, known_types
    from polybag.codecs.ros2.typehash import type_hash

    ts = TypeSet("ros2", known_types())
    try:
        for name, text in texts.items():
            d = parse_msg(name, text, "ros2")
            d.full_name = full_name(name)
            ts.add(d)
        ts.finalize()
        return definition_for(main, ts), type_hash(ts, main)
    except (MsgDefError, KeyError) as e:
        raise Ros2GraphError(f"type description of {main}: {e}") from None


def definition_from_reply(reply: TypeDescriptionReply, type_name: str, type_hash: str = "") -> str:
    """The ``ros2msg`` definition of ``type_name`` from ``reply``, its hash checked against
    ``type_hash`` (when given): from the ``.msg`` sources when the reply carries them for
    every type, else from the field descriptions.  A :class:`Ros2GraphError` says why not."""
    if not reply.successful:
        raise Ros2GraphError(
            f"type description of {type_name} refused: {reply.failure_reason or 'no reason'}"
        )
    if reply.type_name != type_name:
        raise Ros2GraphError(f"type description of {reply.type_name!r}, not {type_name}")
    tries: list[dict[str, str]] = []
    sources = {n: text for n, enc, text in reply.sources if enc == "msg"}
    if all(n in sources for n in reply.types):
        tries.append({n: sources[n] for n in reply.types})
    tries.append({n: _fields_text(f) for n, f in reply.types.items()})
    got = ""
    for texts in tries:
        text, h = _definition(type_name, texts)
        if not type_hash or h == type_hash:
            return text
        got = h
    raise Ros2GraphError(f"type description of {type_name}: its hash {got} is not the announced {type_hash}")


def fetch_definition(graph: Any, participant: str, type_name: str, type_hash: str, timeout: float) -> str:
    """Ask the type description servers of ``participant`` (every node of it that serves
    one) for ``type_name``; the verified ``ros2msg`` definition, or a :class:`Ros2GraphError`
    (no server, no answer within ``timeout`` seconds, a refusal, a wrong hash).  The servers
    are those ``graph`` has discovered: its owner keeps polling it meanwhile."""
    end = time.monotonic() + timeout
    # (the servers come from the graph's discovery, which its owner polls: polling here would
    # take the new publications the owner waits for)
    wait_servers = time.monotonic() + min(2.0, timeout)
    nodes = graph.type_servers(participant)
    while not nodes and time.monotonic() < wait_servers:
        time.sleep(0.05)
        nodes = graph.type_servers(participant)
    if not nodes:
        raise Ros2GraphError(f"no type description service on the participant publishing {type_name}")
    cyclone = participant.replace("-", "").lower().startswith("0110")
    header = 16 if cyclone else 0
    request = encode_request(type_name, type_hash)
    if cyclone:  # (rmw_cyclonedds: client id and sequence number before the request)
        request = request[:4] + os.urandom(8) + struct.pack("<q", 1) + request[4:]
    pairs = []
    errors: list[str] = []
    refused = 0
    try:
        for node in nodes:
            svc = f"{node.rstrip('/')}/{SERVICE}"
            reader = graph.raw_reader(f"rr{svc}Reply", REPLY_TYPE, _SERVICE_QOS)
            pairs.append((graph.raw_writer(f"rq{svc}Request", REQUEST_TYPE, _SERVICE_QOS), reader))
        next_send = 0.0
        while time.monotonic() < end:
            now = time.monotonic()
            if now >= next_send:
                # (sent again every 0.5 s: the server may not have matched our reader yet)
                for w, r in pairs:
                    if w.subscriber_count() and r.publisher_count():
                        w.write(request)
                next_send = now + 0.5
            for _w, r in pairs:
                for data, _stamp in r.take(16):
                    try:
                        reply = decode_reply(data, header)
                        if reply.type_name != type_name and reply.successful:
                            continue  # (another client's answer)
                        return definition_from_reply(reply, type_name, type_hash)
                    except Ros2GraphError as e:
                        errors.append(str(e))
                        refused += 1
            if refused >= len(pairs):
                break  # (every node answered, none with the type)
            time.sleep(0.02)
    finally:
        for w, r in pairs:
            w.close()
            r.close()
    if errors:
        raise Ros2GraphError(errors[-1])
    raise Ros2GraphError(f"the type description service did not answer for {type_name} in {timeout:g} s")
