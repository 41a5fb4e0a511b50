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
  texts, else rebuilt from the field descriptions.  A description comes from any
  participant of the domain, so it is checked before anything is built from it: every
  name by rosidl's rules (fields, constants, ``pkg/msg/Type``), every type id and nested
  type, the limits for definitions from the network (:data:`MAX_FIELDS`,
  :data:`MAX_TYPES`, :data:`MAX_DEPTH`, :data:`MAX_FLAT`, :data:`MAX_TEXT`), its REP 2011
  hash (over the description as received) against the one the publisher announced; and
  the text built must parse back to the very fields described (the same hash).
* :class:`ReplyMatcher`: which replies answer our request (see below).
* :func:`fetch_definition`: ask the servers of the publisher's participant (found by
  :class:`~polybag.net.ros2.graph.Graph` from their reply writers) and return the verified
  definition, or a :class:`~polybag.net.ros2.graph.Ros2GraphError` saying why not.

Replies are taken only from writers of the publishing participant (the GUID prefix of the
reply's writer, as DDS reports it for the sample, must be the participant's).
``rmw_cyclonedds`` puts a 16-byte request header (client id, sequence number) in front of
the request and echoes it in the reply: for participants whose GUID has Cyclone's vendor
prefix (``01 10``) a reply counts only when it carries the header of one of our requests,
as rclcpp matches them.  For Fast DDS (``rmw_fastrtps``) the request id travels as the RTPS
related sample identity, which the Cyclone DDS binding does not hand out: a successful
reply counts when it describes our type, and a refusal (which names no type) never ends
the wait: it may answer another client; it is named only if no answer came in time.
Peer text in every message (reasons, names) is cut and escaped
(:func:`polybag.util.text.peer_text`).
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import struct
import time
from dataclasses import dataclass, field
from typing import Any

from polybag.net.ros2.graph import Ros2GraphError, guid_prefix
from polybag.net.ros2.names import constant_name_ok, field_name_ok, type_name_ok
from polybag.util.text import peer_text

REQUEST_TYPE = "type_description_interfaces::srv::dds_::GetTypeDescription_Request_"
REPLY_TYPE = "type_description_interfaces::srv::dds_::GetTypeDescription_Response_"
SERVICE = "get_type_description"

#: a reply bigger than this is refused (a type description is a few kB)
MAX_REPLY = 4 * 1024 * 1024

# limits for a definition from the network (the biggest ROS 2 types have a few hundred
# fields; a definition past these would cost every later reader of the file)
#: fields in the main type and every type it uses, together
MAX_FIELDS = 2000
#: types the main type uses
MAX_TYPES = 256
#: nesting depth (the main type is 1)
MAX_DEPTH = 32
#: fields once nested types are expanded (a fixed array of messages counts each element)
MAX_FLAT = 20000
#: characters of the definition text, and of one type source
MAX_TEXT = 256 * 1024
#: characters of one default value taken from a description
MAX_DEFAULT = 256

_LIMITS = (
    f"limits for definitions from the network: {MAX_FIELDS} fields, {MAX_TYPES} types, "
    f"nesting {MAX_DEPTH}, {MAX_FLAT} expanded fields, {MAX_TEXT // 1024} KiB of text"
)

# (the reply reader keeps few: a peer flooding the reply topic costs at most this many replies)
_SERVICE_QOS = {"reliability": "reliable", "durability": "volatile", "history": "keep_last", "depth": 16}

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


class _Out:
    """CDR (XCDR1, little endian) writes, aligned as after a 4-byte encapsulation header."""

    def __init__(self) -> None:
        self.b = bytearray()

    def _align(self, n: int) -> None:
        self.b += b"\x00" * (-len(self.b) % n)

    def u8(self, v: int) -> None:
        self.b.append(v & 0xFF)

    def u32(self, v: int) -> None:
        self._align(4)
        self.b += struct.pack("<I", v & 0xFFFFFFFF)

    def u64(self, v: int) -> None:
        self._align(8)
        self.b += struct.pack("<Q", v & 0xFFFFFFFFFFFFFFFF)

    def string(self, s: str) -> None:
        raw = s.encode("utf-8", "surrogatepass") + b"\x00"
        self.u32(len(raw))
        self.b += raw


def encode_reply(reply: TypeDescriptionReply, header: bytes = b"") -> bytes:
    """``reply`` as the CDR a server sends (``header``: rmw_cyclonedds' 16-byte request
    header, echoed after the CDR header).  For tests, the fuzzer and stand-in servers."""
    out = _Out()
    out.u8(1 if reply.successful else 0)
    out.string(reply.failure_reason)

    def individual(name: str, fields: list[FieldDescription]) -> None:
        out.string(name)
        out.u32(len(fields))
        for f in fields:
            out.string(f.name)
            out.u8(f.type_id)
            out.u64(f.capacity)
            out.u64(f.string_capacity)
            out.string(f.nested_type_name)
            out.string(f.default_value)

    main = reply.type_name
    individual(main, reply.types.get(main, []))
    refs = [(n, f) for n, f in reply.types.items() if n != main]
    out.u32(len(refs))
    for n, f in refs:
        individual(n, f)
    out.u32(len(reply.sources))
    for n, enc, text in reply.sources:
        out.string(n)
        out.string(enc)
        out.string(text)
    out.u32(0)
    return b"\x00\x01\x00\x00" + bytes(header) + bytes(out.b)


def _individual(c: _Cdr, budget: list[int]) -> tuple[str, list[FieldDescription]]:
    name = c.string()
    fields = []
    n = c.count(4 + 1 + 16 + 4 + 4)
    budget[0] -= n
    if budget[0] < 0:
        raise Ros2GraphError(f"type description reply: more than {MAX_FIELDS} fields ({_LIMITS})")
    for _ in range(n):
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
    budget = [MAX_FIELDS]
    main, fields = _individual(c, budget)
    out = TypeDescriptionReply(ok, reason, main, {main: fields} if main else {})
    n = c.count(8)
    if n > MAX_TYPES:
        raise Ros2GraphError(f"type description reply: {n} referenced types ({_LIMITS})")
    for _ in range(n):
        name, f = _individual(c, budget)
        if name in out.types:
            raise Ros2GraphError(f"type description reply: {peer_text(name)} is described twice")
        out.types[name] = f
    n = c.count(12)
    if n > MAX_TYPES + 1:
        raise Ros2GraphError(f"type description reply: {n} type sources ({_LIMITS})")
    for _ in range(n):
        out.sources.append((c.string(), c.string(), c.string()))
    for _ in range(c.count(8)):  # (extra_information: key/value pairs, not used)
        c.string()
        c.string()
    return out


def _kind(type_id: int) -> tuple[int, int]:
    """(array kind: 0, _ARRAY, _BOUNDED_SEQ or _SEQ; base type id) of a field type id."""
    for k in (_SEQ, _BOUNDED_SEQ, _ARRAY):
        if type_id > k:
            return k, type_id - k
    return 0, type_id


def _default_text(value: str) -> str:
    """A description's default value (rosidl writes Python literals: ``True``, ``-50``,
    ``(0, 1, 255)``, ``('', 'max value')``) as ``.msg`` text, or ``""`` when it is not a
    plain literal of printable text (never anything that could end the line)."""
    if not value or len(value) > MAX_DEFAULT or not value.isprintable():
        return ""
    try:
        v = ast.literal_eval(value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return ""

    def one(x: object) -> str:
        if isinstance(x, bool):
            return "true" if x else "false"
        if isinstance(x, (int, float)):
            return repr(x)
        if isinstance(x, str) and x.isprintable():
            return '"' + x.replace("\\", "\\\\").replace('"', '\\"') + '"'
        raise ValueError(x)

    try:
        if isinstance(v, (tuple, list)):
            return "[" + ", ".join(one(x) for x in v) + "]"
        return one(v)
    except ValueError:
        return ""


def _field_text(f: FieldDescription) -> str:
    """A (checked) field description as a ``.msg`` line."""
    kind, tid = _kind(f.type_id)
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
        raise Ros2GraphError(
            f"type description: field {peer_text(f.name)} has type id {f.type_id}, not a .msg type"
        )
    if kind == _ARRAY:
        base += f"[{f.capacity}]"
    elif kind == _BOUNDED_SEQ:
        base += f"[<={f.capacity}]"
    elif kind == _SEQ:
        base += "[]"
    default = _default_text(f.default_value) if tid != _NESTED else ""
    return f"{base} {f.name}" + (f" {default}" if default else "")


_PLACEHOLDER = "structure_needs_at_least_one_member"


def _fields_text(fields: list[FieldDescription]) -> str:
    # (an empty struct is described with rosidl's placeholder member; an empty .msg has none)
    if len(fields) == 1 and fields[0].name == _PLACEHOLDER:
        return ""
    return "\n".join(_field_text(f) for f in fields) + ("\n" if fields else "")


def check_description(reply: TypeDescriptionReply) -> None:
    """Refuse (a :class:`Ros2GraphError` naming the rule or the limit) a description that
    breaks rosidl's naming rules, uses a type it does not describe, describes a type nothing
    uses, has unknown type ids, nests in a cycle, or is past the network limits."""
    types = reply.types
    main = reply.type_name
    if main not in types:
        raise Ros2GraphError(f"type description of {peer_text(main)}: the type itself is not described")
    if len(types) > MAX_TYPES + 1:
        raise Ros2GraphError(f"type description of {main}: {len(types) - 1} referenced types ({_LIMITS})")
    total = sum(len(f) for f in types.values())
    if total > MAX_FIELDS:
        raise Ros2GraphError(f"type description of {main}: {total} fields ({_LIMITS})")
    for name, fields in types.items():
        if not type_name_ok(name):
            raise Ros2GraphError(
                f"type description of {peer_text(main)}: {peer_text(name)} is not a ROS 2 type name "
                "(rosidl: pkg/msg/Name, pkg lower case letters, digits and single underscores, Name CamelCase)"
            )
        seen: set[str] = set()
        for f in fields:
            if not field_name_ok(f.name):
                raise Ros2GraphError(
                    f"type description of {main}: {name} has a field named {peer_text(f.name)}, not a "
                    "rosidl field name (^[a-z]([a-z0-9_]*[a-z0-9])?$ without '__')"
                )
            if f.name in seen:
                raise Ros2GraphError(f"type description of {main}: {name} has two fields named {f.name}")
            seen.add(f.name)
            kind, tid = _kind(f.type_id)
            if tid == _NESTED:
                if f.nested_type_name not in types:
                    raise Ros2GraphError(
                        f"type description of {main}: field {f.name} of {name} uses "
                        f"{peer_text(f.nested_type_name)}, which the description does not describe"
                    )
            elif tid not in _PRIMITIVE:
                raise Ros2GraphError(
                    f"type description of {main}: field {f.name} of {name} has type id {f.type_id}, "
                    "not a .msg type"
                )
            if kind in (_ARRAY, _BOUNDED_SEQ) and not 0 < f.capacity <= (1 << 31) - 1:
                raise Ros2GraphError(
                    f"type description of {main}: field {f.name} of {name} has array size {f.capacity}"
                )
    # nesting: depth, cycles, unused types, expanded size (each type once, memoised)
    depth: dict[str, int] = {}
    flat: dict[str, int] = {}
    busy: set[str] = set()

    def walk(name: str, level: int) -> None:
        if level > MAX_DEPTH:
            raise Ros2GraphError(f"type description of {main}: nested more than {MAX_DEPTH} deep ({_LIMITS})")
        if name in busy:
            raise Ros2GraphError(f"type description of {main}: {name} contains itself")
        if name in depth:
            return
        busy.add(name)
        d, n = 1, 0
        for f in types[name]:
            kind, tid = _kind(f.type_id)
            if tid == _NESTED:
                walk(f.nested_type_name, level + 1)
                d = max(d, 1 + depth[f.nested_type_name])
                n += flat[f.nested_type_name] * (f.capacity if kind == _ARRAY else 1)
            else:
                n += 1
            n = min(n, MAX_FLAT + 1)
        busy.discard(name)
        depth[name], flat[name] = d, n

    walk(main, 1)
    if depth[main] > MAX_DEPTH:
        raise Ros2GraphError(f"type description of {main}: nested {depth[main]} deep ({_LIMITS})")
    if flat[main] > MAX_FLAT:
        raise Ros2GraphError(f"type description of {main}: more than {MAX_FLAT} expanded fields ({_LIMITS})")
    unused = sorted(set(types) - set(depth))
    if unused:
        raise Ros2GraphError(f"type description of {main}: {peer_text(unused[0])} is described but not used")


def _description_json(name: str, fields: list[FieldDescription]) -> dict[str, Any]:
    return {
        "type_name": name,
        "fields": [
            {
                "name": f.name,
                "type": {
                    "type_id": f.type_id,
                    "capacity": f.capacity,
                    "string_capacity": f.string_capacity,
                    "nested_type_name": f.nested_type_name,
                },
            }
            for f in fields
        ],
    }


def description_hash(reply: TypeDescriptionReply) -> str:
    """The REP 2011 ``RIHS01_`` hash of the description as received (the main type and
    every type it describes; names, type ids, capacities, nested names; no defaults)."""
    main = reply.type_name
    refs = sorted(
        (_description_json(n, f) for n, f in reply.types.items() if n != main), key=lambda x: x["type_name"]
    )
    text = json.dumps(
        {
            "type_description": _description_json(main, reply.types.get(main, [])),
            "referenced_type_descriptions": refs,
        }
    )
    return "RIHS01_" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _text_ok(text: str) -> bool:
    """A definition text holds nothing but printable characters, tabs and line ends."""
    return all(line.replace("\t", " ").isprintable() for line in text.split("\n"))


def _definition(main: str, texts: dict[str, str]) -> tuple[str, str]:
    """(the full ros2msg definition, the RIHS01 hash of what it says when parsed again) of
    ``main`` from one ``.msg`` text per type (only these types: nothing is filled in)."""
    from polybag.codecs.definition_limits import MsgDefError
    from polybag.codecs.msg_parser import parse_full, parse_msg
    from polybag.codecs.ros2 import definition_for, full_name
    from polybag.codecs.ros2.typehash import type_hash
    from polybag.codecs.type_set import TypeSet

    ts = TypeSet("ros2")
    try:
        for name, text in texts.items():
            d = parse_msg(name, text, "ros2")
            d.full_name = full_name(name)
            for c in d.constants:
                if not constant_name_ok(c.name):
                    raise Ros2GraphError(
                        f"type description of {main}: {name} has a constant named {peer_text(c.name)}, not a "
                        "rosidl constant name (^[A-Z]([A-Z0-9_]*[A-Z0-9])?$ without '__')"
                    )
            ts.add(d)
        ts.finalize()
        text = definition_for(main, ts)
        if len(text) > MAX_TEXT:
            raise Ros2GraphError(
                f"type description of {main}: a definition of {len(text)} characters ({_LIMITS})"
            )
        if not _text_ok(text):
            raise Ros2GraphError(f"type description of {main}: the definition would hold control characters")
        again = parse_full(main, text, "ros2")
        return text, type_hash(again, main)
    except (MsgDefError, KeyError, ValueError, RecursionError) as e:
        raise Ros2GraphError(f"type description of {main}: {peer_text(str(e), 500)}") from None


def definition_from_reply(reply: TypeDescriptionReply, type_name: str, type_hash: str = "") -> str:
    """The ``ros2msg`` definition of ``type_name`` from ``reply`` (see the module docstring
    for what is checked): from the ``.msg`` sources when the reply carries them for every
    type and they say exactly what is described, else from the field descriptions.  The
    description's hash must be ``type_hash`` (when given), and the text built must parse
    back to the same hash.  A :class:`Ros2GraphError` says why not."""
    if not reply.successful:
        raise Ros2GraphError(
            f"type description of {type_name} refused: {peer_text(reply.failure_reason) or 'no reason'}"
        )
    if reply.type_name != type_name:
        raise Ros2GraphError(f"type description of {peer_text(reply.type_name)}, not {peer_text(type_name)}")
    if not type_name_ok(type_name):
        raise Ros2GraphError(f"{peer_text(type_name)} is not a ROS 2 type name by rosidl's rules")
    check_description(reply)
    described = description_hash(reply)
    if type_hash and described != type_hash:
        raise Ros2GraphError(
            f"type description of {type_name}: its hash {described} is not the announced {peer_text(type_hash)}"
        )
    tries: list[dict[str, str]] = []
    sources = {n: text for n, enc, text in reply.sources if enc == "msg"}
    if all(n in sources and len(sources[n]) <= MAX_TEXT for n in reply.types):
        tries.append({n: sources[n] for n in reply.types})
    tries.append({n: _fields_text(f) for n, f in reply.types.items()})
    problem = ""
    for texts in tries:
        try:
            text, h = _definition(type_name, texts)
        except Ros2GraphError as e:
            problem = str(e)
            continue
        if h == described:
            return text
        problem = (
            f"type description of {type_name}: the definition built from it does not describe the same fields"
        )
    raise Ros2GraphError(problem)


class ReplyMatcher:
    """Makes the requests for ``type_name`` and decides which replies answer them (see the
    module docstring): only writers of ``participant``; for Cyclone peers (``cyclone``)
    only replies echoing one of our request headers.

    :meth:`offer` returns the verified definition, None for a reply that is not ours, and
    raises :class:`Ros2GraphError` for an answer to our request that refuses or cannot be
    used.  ``refusal`` keeps the last refusal that may be ours (Fast DDS), ``ignored``
    counts the replies left aside.
    """

    def __init__(
        self,
        participant: str,
        type_name: str,
        type_hash: str,
        cyclone: bool | None = None,
        client: bytes = b"",
    ) -> None:
        self.prefix = guid_prefix(participant)
        self.type_name = type_name
        self.type_hash = type_hash
        self.cyclone = self.prefix.startswith("0110") if cyclone is None else cyclone
        self.client = client or os.urandom(8)
        self.seq = 0
        self.sent: set[bytes] = set()
        self.refusal = ""
        self.ignored = 0

    def request(self) -> bytes:
        """The next request (for Cyclone peers: with a header of its own sequence number)."""
        body = encode_request(self.type_name, self.type_hash)
        if not self.cyclone:
            return body
        self.seq += 1
        header = self.client + struct.pack("<q", self.seq)
        if len(self.sent) < 4096:
            self.sent.add(header)
        return body[:4] + header + body[4:]

    def offer(self, data: bytes, writer: str) -> str | None:
        """The definition when ``data`` (from the writer with GUID ``writer``) answers our
        request with a usable description; None when it is not an answer to us."""
        if not self.prefix or guid_prefix(writer) != self.prefix:
            self.ignored += 1
            return None
        if self.cyclone:
            if len(data) < 20 or bytes(data[4:20]) not in self.sent:
                self.ignored += 1
                return None
            reply = decode_reply(data, 16)  # (ours: any problem is the answer)
            return definition_from_reply(reply, self.type_name, self.type_hash)
        try:
            reply = decode_reply(data, 0)
        except Ros2GraphError as e:
            self.ignored += 1
            self.refusal = str(e)
            return None
        if not reply.successful:
            self.ignored += 1
            self.refusal = f"refused: {peer_text(reply.failure_reason) or 'no reason'}"
            return None
        if reply.type_name != self.type_name:
            self.ignored += 1  # (another client's answer)
            return None
        return definition_from_reply(reply, self.type_name, self.type_hash)


def fetch_definition(graph: Any, participant: str, type_name: str, type_hash: str, timeout: float) -> str:
    """Ask the type description servers of ``participant`` (every node of it that serves
    one) for ``type_name``; the verified ``ros2msg`` definition, or a :class:`Ros2GraphError`
    (no server, no answer within ``timeout`` seconds, a refusal, a description refused by
    the checks).  The servers are those ``graph`` has discovered: its owner keeps polling
    it meanwhile.  Replies from other participants, or to other requests, are left aside."""
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
    matcher = ReplyMatcher(participant, type_name, type_hash)
    pairs = []
    problems: list[str] = []
    try:
        for node in nodes:
            svc = f"{node.rstrip('/')}/{SERVICE}"
            reader = graph.raw_reader(f"rr{svc}Reply", REPLY_TYPE, _SERVICE_QOS)
            pairs.append((graph.raw_writer(f"rq{svc}Request", REQUEST_TYPE, _SERVICE_QOS), reader))
        next_send = 0.0
        answered: set[int] = set()
        while time.monotonic() < end and len(answered) < len(pairs):
            now = time.monotonic()
            if now >= next_send:
                # (sent again every 0.5 s: the server may not have matched our reader yet)
                for i, (w, r) in enumerate(pairs):
                    if i not in answered and w.subscriber_count() and r.publisher_count():
                        w.write(matcher.request())
                next_send = now + 0.5
            for i, (_w, r) in enumerate(pairs):
                if i in answered:
                    continue
                for data, _stamp, writer in r.take_sent(16):
                    try:
                        text = matcher.offer(data, writer)
                    except Ros2GraphError as e:
                        problems.append(str(e))
                        answered.add(i)  # (this node answered our request: no)
                        break
                    if text is not None:
                        return text
            time.sleep(0.02)
    finally:
        for w, r in pairs:
            w.close()
            r.close()
    if problems:
        raise Ros2GraphError(problems[-1])
    if matcher.refusal:
        raise Ros2GraphError(
            f"no description of {type_name} in {timeout:g} s (its publisher's node answered a request: "
            f"{matcher.refusal})"
        )
    raise Ros2GraphError(f"the type description service did not answer for {type_name} in {timeout:g} s")
