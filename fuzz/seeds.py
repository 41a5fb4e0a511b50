"""Seed inputs: the real files of ../shared/corpora and files made with polybag's writers.

Generated seeds cover what the corpora lack (every bag version and compression, indexed and
unindexed; MCAP with and without chunks, indexes and CRCs) and carry hostile *content*
behind consistent indexes (odd topic names, deep or self-referencing definitions), so the
readers reach the decoders with it.
"""

from __future__ import annotations

import io
import os
import random
import struct
from pathlib import Path

from fuzz import defs
from fuzz.formats import ulog_slice
from fuzz.mutate import odd_name

CORPORA = Path(os.environ.get("POLYBAG_CORPORA", Path(__file__).resolve().parents[2] / "shared" / "corpora"))
MAX_SEED = 1 << 20  # larger corpus files are used as slices (ULog) or left out


def _files(sub: str, suffixes: tuple[str, ...]) -> list[Path]:
    root = CORPORA / sub
    if not root.is_dir():
        return []
    return sorted(p for p in root.rglob("*") if p.is_file() and p.name.endswith(suffixes))


# --------------------------------------------------------------------------------------- MCAP
STRING_DEF = b"string data\n"


def _mcap(rng: random.Random, **opts: object) -> bytes:
    from polybag.formats.mcap.writer import McapWriter

    out = io.BytesIO()
    hostile = bool(opts.pop("hostile", False))
    w = McapWriter(out, **opts)  # type: ignore[arg-type]
    chans = []
    s1 = w.add_schema("std_msgs/String", "ros1msg", STRING_DEF)
    chans.append((w.add_channel("/chatter", "ros1", s1, {"md5sum": "992ce8a1687cec8c8bd883ec73ca41d1"}), "ros1"))
    s2 = w.add_schema("std_msgs/msg/String", "ros2msg", STRING_DEF)
    chans.append((w.add_channel("/ros2", "cdr", s2), "cdr"))
    s3 = w.add_schema("Obj", "jsonschema", b'{"type": "object"}')
    chans.append((w.add_channel("/json", "json", s3), "json"))
    chans.append((w.add_channel("/raw", "json", None), "json"))
    models = []
    if hostile:
        for i in range(2):
            dialect = rng.choice(("ros1", "ros2"))
            m = defs.gen_model(rng, dialect)
            enc = "ros1msg" if dialect == "ros1" else rng.choice(("ros2msg", "ros2idl"))
            text = defs.render_msg(m, dialect) if enc != "ros2idl" else defs.render_idl(m)
            s = w.add_schema(m.main, enc, text.encode())
            topic = rng.choice((f"/h{i}", odd_name(rng) or "/e"))
            ch = w.add_channel(topic, "ros1" if dialect == "ros1" else "cdr", s)
            chans.append((ch, "model"))
            models.append((ch, m, dialect))
    t = 1_000_000_000
    for i in range(rng.choice((3, 10, 40))):
        ch, kind = rng.choice(chans)
        t += rng.choice((1, 1000, -500, 0)) * 1000
        if kind == "ros1":
            data = struct.pack("<I", 5) + b"hello"
        elif kind == "cdr":
            data = b"\x00\x01\x00\x00" + struct.pack("<I", 6) + b"hello\x00"
        elif kind == "json":
            data = b'{"i": %d}' % i
        else:
            _c, m, dialect = next(x for x in models if x[0] is ch)
            data = defs.payload(rng, m, cdr=dialect == "ros2")
        w.write(ch, data, max(t, 1), max(t, 1), i)
    if rng.random() < 0.5:
        w.add_attachment("a.txt", "text/plain", b"attached", t, t)
    if rng.random() < 0.5:
        w.add_metadata("meta", {"k": "v", odd_name(rng): odd_name(rng)})
    w.close()
    return out.getvalue()


def mcap_seeds() -> tuple[list[bytes], list[bytes]]:
    """(corpus files, generated files)."""
    corpus = [p.read_bytes() for p in _files("mcap-conformance", (".mcap",)) + _files("mcap-samples", (".mcap",))]
    corpus = [s for s in corpus if len(s) <= MAX_SEED]
    seeds: list[bytes] = []
    rng = random.Random("polybag-fuzz-mcap-seeds")
    variants: list[dict[str, object]] = [
        {"compression": "zstd", "chunk_size": 200},
        {"compression": "lz4", "chunk_size": 200},
        {"compression": "none", "chunk_size": 300},
        {"compression": "zstd", "use_chunking": False},
        {"compression": "zstd", "chunk_size": 200, "use_message_index": False, "use_chunk_index": False},
        {"compression": "none", "chunk_size": 200, "use_statistics": False, "use_summary_offsets": False},
        {"compression": "lz4", "chunk_size": 200, "use_crcs": False},
        {"compression": "zstd", "chunk_size": 1 << 20, "repeat_schemas": False, "repeat_channels": False},
    ]
    for v in variants:
        seeds.append(_mcap(rng, **v))
        seeds.append(_mcap(rng, hostile=True, **v))
    for _ in range(8):
        seeds.append(_mcap(rng, hostile=True, **rng.choice(variants)))
    return corpus, seeds


# ---------------------------------------------------------------------------------------- bag
def _bag_v2(rng: random.Random, compression: str, *, hostile: bool = False, abort: bool = False) -> bytes:
    from polybag.formats.bag.writer import BagWriter

    out = io.BytesIO()
    w = BagWriter(out, compression=compression, chunk_size=rng.choice((120, 400, 1 << 16)))
    chans = []
    s = w.add_schema("std_msgs/String", "ros1msg", STRING_DEF)
    chans.append((w.add_channel("/chatter", "ros1", s, {"callerid": "/talker"}), None))
    s2 = w.add_schema("std_msgs/Int32", "ros1msg", b"int32 data\n")
    chans.append((w.add_channel("/count", "ros1", s2, {"latching": "1"}), None))
    if hostile:
        for i in range(2):
            m = defs.gen_model(rng, "ros1")
            sm = w.add_schema(m.main, "ros1msg", defs.render_msg(m, "ros1").encode())
            topic = rng.choice((f"/h{i}", odd_name(rng) or "/e"))
            chans.append((w.add_channel(topic, "ros1", sm, {"md5sum": rng.choice(("*", "0" * 32))}), m))
    t = 1_000_000_000
    for _ in range(rng.choice((3, 12, 40))):
        ch, m = rng.choice(chans)
        t += rng.choice((1, 1000, -500, 0)) * 1000
        if m is not None:
            data = defs.payload(rng, m, cdr=False)
        elif ch.topic == "/chatter":
            data = struct.pack("<I", 5) + b"hello"
        else:
            data = struct.pack("<i", rng.randint(-9, 9))
        w.write(ch, data, max(t, 1))
    if abort:
        w.abort()
    else:
        w.close()
    return out.getvalue()


def _field(name: str, value: bytes) -> bytes:
    item = name.encode() + b"=" + value
    return struct.pack("<I", len(item)) + item


def _record(fields: list[bytes], data: bytes = b"") -> bytes:
    h = b"".join(fields)
    return struct.pack("<I", len(h)) + h + struct.pack("<I", len(data)) + data


_OLD_MSGS = [
    ("/chatter", "992ce8a1687cec8c8bd883ec73ca41d1", "std_msgs/String", 100, 5, struct.pack("<I", 5) + b"hello"),
    ("/count", "da5909fbe378aeaf85e547e830cc1bb7", "std_msgs/Int32", 100, 7, struct.pack("<i", 10)),
    ("/chatter", "992ce8a1687cec8c8bd883ec73ca41d1", "std_msgs/String", 101, 0, struct.pack("<I", 1) + b"\n"),
    ("/count", "da5909fbe378aeaf85e547e830cc1bb7", "std_msgs/Int32", 99, 9, struct.pack("<i", -1)),
]
_OLD_DEFS = {"std_msgs/String": b"string data\n", "std_msgs/Int32": b"int32 data\n"}


def _bag_v12(indexed: bool) -> bytes:
    """``#ROSRECORD V1.2``: a padded bag header, message definition and data records, index data."""
    magic = b"#ROSRECORD V1.2\n"
    pos0 = len(magic) + 4096
    body = b""
    seen: set[str] = set()
    index: dict[str, list[tuple[int, int, int]]] = {}
    for topic, md5, typ, sec, ns, data in _OLD_MSGS:
        if topic not in seen:
            seen.add(topic)
            body += _record(
                [_field("op", b"\x01"), _field("topic", topic.encode()), _field("md5", md5.encode()),
                 _field("type", typ.encode()), _field("def", _OLD_DEFS[typ])]
            )
        p = pos0 + len(body)
        body += _record(
            [_field("op", b"\x02"), _field("topic", topic.encode()), _field("md5", md5.encode()),
             _field("type", typ.encode()), _field("sec", struct.pack("<I", sec)), _field("nsec", struct.pack("<I", ns))],
            data,
        )
        index.setdefault(topic, []).append((sec, ns, p))
    idx = b""
    if indexed:
        for topic, entries in index.items():
            typ = next(m[2] for m in _OLD_MSGS if m[0] == topic)
            idx += _record(
                [_field("op", b"\x04"), _field("ver", struct.pack("<I", 0)), _field("topic", topic.encode()),
                 _field("type", typ.encode()), _field("count", struct.pack("<I", len(entries)))],
                b"".join(struct.pack("<IIQ", a, b, c) for a, b, c in entries),
            )
    fields = [_field("op", b"\x03"), _field("index_pos", struct.pack("<Q", pos0 + len(body) if indexed else 0))]
    header = _record(fields, b" " * (4096 - 8 - sum(map(len, fields))))
    return magic + header + body + idx


def _line_bag(magic: bytes) -> bytes:
    """``#ROSRECORD V1.1`` / ``#ROSLOG V1.1`` / version 0: newline-terminated topic, md5sum and
    type, then sec, nsec, length and the data."""
    return magic + b"".join(
        f"{t}\n{m}\n{ty}\n".encode() + struct.pack("<III", s, n, len(d)) + d for t, m, ty, s, n, d in _OLD_MSGS
    )


def _roslog_v10() -> bytes:
    topics = {t: (m, ty) for t, m, ty, *_ in _OLD_MSGS}
    out = b"#ROSLOG V1.0\n" + f"{len(topics)}\n".encode()
    for t, (m, ty) in topics.items():
        out += f"{t}\n{m}\n{ty}\n".encode()
    for t, _m, _ty, s, n, d in _OLD_MSGS:
        out += f"{t}\n".encode() + struct.pack("<III", s, n, len(d)) + d
    return out


def bag_seeds() -> tuple[list[bytes], list[bytes]]:
    """(corpus files, generated files)."""
    corpus = [p.read_bytes() for p in _files("rosbag", (".bag", ".txt"))]
    corpus = [s for s in corpus if len(s) <= MAX_SEED]
    seeds: list[bytes] = []
    rng = random.Random("polybag-fuzz-bag-seeds")
    for comp in ("none", "bz2", "lz4"):
        for hostile in (False, True, True):
            seeds.append(_bag_v2(rng, comp, hostile=hostile))
            seeds.append(_bag_v2(rng, comp, hostile=hostile, abort=True))
    seeds += [
        _bag_v12(True),
        _bag_v12(False),
        _line_bag(b"#ROSRECORD V1.1\n"),
        _line_bag(b"#ROSLOG V1.1\n"),
        _line_bag(b""),
        _roslog_v10(),
    ]
    return corpus, seeds


# --------------------------------------------------------------------------------------- ULog
def ulog_seeds() -> tuple[list[bytes], list[bytes]]:
    rng = random.Random("polybag-fuzz-ulog-seeds")
    seeds = []
    for p in _files("ulog", (".ulg",)):
        data = p.read_bytes()
        for _ in range(3):
            seeds.append(ulog_slice(rng, data)[: 2 * MAX_SEED])
        if len(data) <= MAX_SEED:
            seeds.append(data)
    return seeds, []


SEEDS = {"mcap": mcap_seeds, "bag": bag_seeds, "ulog": ulog_seeds}
