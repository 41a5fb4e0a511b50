"""Builders of bags shared by several test files: old versions (1.1, 1.2, ROSLOG), built from
the format descriptions in ../shared/specs, and a 2.0 sample written with polybag."""

from __future__ import annotations

import io
import struct
from pathlib import Path

import polybag

STRING_MD5 = "992ce8a1687cec8c8bd883ec73ca41d1"
INT32_MD5 = "da5909fbe378aeaf85e547e830cc1bb7"
STRING_DEF = b"string data\n"
INT32_DEF = b"int32 data\n"


def _string(s: str) -> bytes:
    b = s.encode()
    return struct.pack("<I", len(b)) + b

def s(text: str) -> bytes:
    b = text.encode()
    return struct.pack("<I", len(b)) + b


MSGS = [
    ("/chatter", STRING_MD5, "std_msgs/String", 100, 5, s("hello\nworld")),
    ("/count", INT32_MD5, "std_msgs/Int32", 100, 7, struct.pack("<i", 10)),
    ("/chatter", STRING_MD5, "std_msgs/String", 101, 0, s("\x00\n\n")),
    ("/count", INT32_MD5, "std_msgs/Int32", 99, 999_999_999, struct.pack("<i", -1)),  # out of order
]


def expected(msgs=MSGS):
    return [(t, sec * 10**9 + ns, d) for t, _m, _ty, sec, ns, d in msgs]


def line_record(topic, md5, typ, sec, nsec, data) -> bytes:
    """rosbag-format-v1.x "Version 1.1": topic, md5sum, type newline-terminated; then
    time_sec, time_nsec, length (little-endian 4 bytes each) and the data."""
    return f"{topic}\n{md5}\n{typ}\n".encode() + struct.pack("<III", sec, nsec, len(data)) + data


def build_v11(magic: bytes) -> bytes:
    return magic + b"".join(line_record(*m) for m in MSGS)


def build_roslog_v10() -> bytes:
    """rosbag-versions-overview "Version 1.0": '#ROSLOG V1.0', quantity, then quantity x
    (topic_name, md5sum, datatype), then per message topic_name, time.sec, time.nsec,
    length, MSGDATA."""
    topics = {}
    for t, m, ty, *_ in MSGS:
        topics[t] = (m, ty)
    out = b"#ROSLOG V1.0\n" + f"{len(topics)}\n".encode()
    for t, (m, ty) in topics.items():
        out += f"{t}\n{m}\n{ty}\n".encode()
    for t, _m, _ty, sec, ns, d in MSGS:
        out += f"{t}\n".encode() + struct.pack("<III", sec, ns, len(d)) + d
    return out


def field(name: str, value: bytes) -> bytes:
    """rosbag-format-v1.x "Header format": <field_len><name>=<value>."""
    body = name.encode() + b"=" + value
    return struct.pack("<I", len(body)) + body


def record(fields: list[bytes], data: bytes = b"") -> bytes:
    """rosbag-format-v1.x "Format" (1.2): <header_len><header><data_len><data>."""
    h = b"".join(fields)
    return struct.pack("<I", len(h)) + h + struct.pack("<I", len(data)) + data


DEFS = {"std_msgs/String": b"string data\n", "std_msgs/Int32": b"int32 data\n"}


def build_v12(*, with_index: bool, time_field: bool = False) -> bytes:
    """rosbag-format-v1.x "Version 1.2": op 0x03 bag header (index_pos, padded with spaces
    to 4096 bytes), op 0x01 message definition once per topic before its data, op 0x02
    message data (topic, md5, type, sec, nsec), op 0x04 index data ver 0 per topic."""
    magic = b"#ROSRECORD V1.2\n"

    def header(index_pos: int) -> bytes:
        fields = [field("op", b"\x03"), field("index_pos", struct.pack("<Q", index_pos))]
        hl = sum(len(f) for f in fields)
        pad = 4096 - 8 - hl
        return record(fields, b" " * pad)

    body = b""
    pos0 = len(magic) + 4096
    seen = set()
    positions: dict[str, list[tuple[int, int, int]]] = {}
    for topic, md5, typ, sec, ns, data in MSGS:
        if topic not in seen:
            seen.add(topic)
            first = pos0 + len(body)
            body += record(
                [field("op", b"\x01"), field("topic", topic.encode()), field("md5", md5.encode()),
                 field("type", typ.encode()), field("def", DEFS[typ])]
            )
        else:
            first = None
        p = pos0 + len(body)
        tf = [field("time", struct.pack("<II", sec, ns))] if time_field else [
            field("sec", struct.pack("<I", sec)), field("nsec", struct.pack("<I", ns))]
        body += record(
            [field("op", b"\x02"), field("topic", topic.encode()), field("md5", md5.encode()),
             field("type", typ.encode()), *tf],
            data,
        )
        positions.setdefault(topic, []).append((sec, ns, first if first is not None else p))
    index = b""
    if with_index:
        for topic, entries in positions.items():
            typ = next(m[2] for m in MSGS if m[0] == topic)
            index += record(
                [field("op", b"\x04"), field("ver", struct.pack("<I", 0)), field("topic", topic.encode()),
                 field("type", typ.encode()), field("count", struct.pack("<I", len(entries)))],
                b"".join(struct.pack("<IIQ", a, b, c) for a, b, c in entries),
            )
    index_pos = pos0 + len(body) if with_index else 0
    return magic + header(index_pos) + body + index


def write_sample(path: Path | io.BytesIO, compression: str = "none", chunk_size: int = 4096, n: int = 300) -> list:
    """/chatter (String, two connections), /count (Int32); returns what was written."""
    out = []
    with polybag.Writer(path, format="bag", compression=compression, chunk_size=chunk_size) as w:
        ss = w.add_schema("std_msgs/String", "ros1msg", STRING_DEF)
        si = w.add_schema("std_msgs/Int32", "ros1msg", INT32_DEF)
        a = w.add_channel("/chatter", "ros1", ss, {"md5sum": STRING_MD5, "callerid": "/talker", "latching": "1"})
        b = w.add_channel("/chatter", "ros1", ss, {"md5sum": STRING_MD5, "callerid": "/talker2"})
        c = w.add_channel("/count", "ros1", si, {"md5sum": INT32_MD5})
        for i in range(n):
            t = 1_600_000_000_000_000_000 + i * 10_000_000
            ch = (a, b, c)[i % 3]
            data = (i).to_bytes(4, "little", signed=True) if ch is c else _string(f"hello {i}" * (i % 7))
            w.write(ch, data, t)
            out.append((ch.topic, t, data))
    return out
