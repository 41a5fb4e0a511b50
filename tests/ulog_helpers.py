"""Hand-made ULog bytes for the ULog tests (independent of polybag's writer)."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

MAGIC = b"ULog\x01\x12\x35"
SYNC = b"\x2f\x73\x13\x20\x25\x0c\xbb\x12"


def msg(kind: str, body: bytes) -> bytes:
    return struct.pack("<HB", len(body), ord(kind)) + body


def header(version: int = 1, ts: int = 1_000_000) -> bytes:
    return MAGIC + bytes([version]) + struct.pack("<Q", ts)


def flags(
    compat: int = 0,
    incompat: int = 0,
    offsets: tuple[int, ...] = (),
    extra: bytes = b"",
    incompat_bytes: bytes | None = None,
) -> bytes:
    offs = (list(offsets) + [0, 0, 0])[:3]
    inc = incompat_bytes if incompat_bytes is not None else bytes([incompat]) + bytes(7)
    return msg("B", bytes([compat]) + bytes(7) + inc + struct.pack("<3Q", *offs) + extra)


def fmt(text: str) -> bytes:
    return msg("F", text.encode())


def info(key: str, typ: str, value: bytes) -> bytes:
    k = f"{typ} {key}".encode()
    return msg("I", bytes([len(k)]) + k + value)


def info_str(key: str, value: str) -> bytes:
    v = value.encode()
    return info(key, f"char[{len(v)}]", v)


def multi(key: str, value: str, continued: bool) -> bytes:
    v = value.encode()
    k = f"char[{len(v)}] {key}".encode()
    return msg("M", bytes([int(continued), len(k)]) + k + v)


def param(name: str, value: int | float) -> bytes:
    if isinstance(value, float):
        k = f"float {name}".encode()
        return msg("P", bytes([len(k)]) + k + struct.pack("<f", value))
    k = f"int32_t {name}".encode()
    return msg("P", bytes([len(k)]) + k + struct.pack("<i", value))


def default(name: str, value: int | float, bits: int) -> bytes:
    body = param(name, value)[3:]
    return msg("Q", bytes([bits]) + body)


def sub(multi_id: int, msg_id: int, name: str) -> bytes:
    return msg("A", struct.pack("<BH", multi_id, msg_id) + name.encode())


def data(msg_id: int, payload: bytes) -> bytes:
    return msg("D", struct.pack("<H", msg_id) + payload)


def log(level: int, ts: int, text: str) -> bytes:
    return msg("L", struct.pack("<BQ", level, ts) + text.encode())


def tagged(level: int, tag: int, ts: int, text: str) -> bytes:
    return msg("C", struct.pack("<BHQ", level, tag, ts) + text.encode())


def sync() -> bytes:
    return msg("S", SYNC)


def dropout(ms: int) -> bytes:
    return msg("O", struct.pack("<H", ms))


POS_FMT = "pos:uint64_t timestamp;float[3] xyz;int16_t k;uint8_t[2] _padding0;"
INNER_FMT = "inner:float a;uint8_t b;uint8_t[3] _padding0;"
NEST_FMT = "nest:uint64_t timestamp;inner[2] items;char[4] tag;bool ok;uint8_t[3] _padding0;"


def pos_payload(ts: int, i: int, padded: bool = False) -> bytes:
    return struct.pack("<Q3fh", ts, i * 1.0, i * 0.5, -i, i % 7) + (b"\0\0" if padded else b"")


def nest_payload(ts: int, i: int) -> bytes:
    return (
        struct.pack("<Q", ts)
        + struct.pack("<fB3x", i * 0.25, i % 256)
        + struct.pack("<fB3x", -i * 0.25, (i * 3) % 256)
        + b"ab"
        + bytes([48 + i % 10])
        + b"\0"
        + bytes([i % 2])
    )


# the repeated padding name: the second gap is trailing and left out of the data (as PX4 does)
TRAIL_FMT = "trail:uint64_t timestamp;uint8_t a;uint8_t[3] _padding0;float b;uint16_t c;uint8_t[2] _padding0;"
# timestamps that are not the first field, or narrower (a uint16 one wraps and is unwrapped)
LATE_FMT = "late:float v;uint64_t timestamp;"
SMALL_FMT = "small:uint16_t timestamp;float v;"


def trail_log(n: int = 150, odd: bool = False) -> bytes:
    """Topics trail (``_padding0`` twice) and two instances of pos (one carrying its
    trailing padding in some messages); ``odd``: also late (two instances) and small."""
    out = [header(), flags(), fmt(TRAIL_FMT), fmt(POS_FMT), fmt(LATE_FMT), fmt(SMALL_FMT)]
    out += [sub(0, 0, "trail"), sub(1, 1, "pos"), sub(0, 2, "pos")]
    if odd:
        out += [sub(0, 3, "late"), sub(1, 4, "late"), sub(0, 5, "small")]
    for i in range(n):
        ts = 2_000_000 + i * 500
        out.append(data(0, struct.pack("<QB3sfH", ts, i % 256, b"\xaa" * 3, -i * 1.5, i % 65536)))
        out.append(data(1, pos_payload(ts + 1, i)))
        if i % 3 == 0:
            out.append(data(2, pos_payload(ts + 2, i + 7, padded=i % 2 == 0)))
        if odd:
            out.append(data(3 + i % 2, struct.pack("<fQ", i * 0.5, ts + 3)))
            out.append(data(5, struct.pack("<Hf", (ts + 4) % 65536, -i * 0.25)))
    return b"".join(out)


def synthetic_log(
    n: int = 40, *, with_sync: bool = True, padded: bool = False
) -> tuple[bytes, list[tuple[int, int, int]]]:
    """A small v1 log with two topics (one nested, the nested type defined after its user),
    two instances, info, multi-info, params, defaults, logged strings, dropouts and syncs.

    Returns the bytes and (start, end, kind) of every message in the data section, where
    kind is the msg_id for D and -1 for anything else."""
    parts = [
        header(),
        flags(compat=1),
        fmt(NEST_FMT),
        fmt(POS_FMT),
        fmt(INNER_FMT),
        info_str("sys_name", "PX4"),
        info("ver_sw_release", "uint32_t", struct.pack("<I", 0x010402FF)),
        multi("boot", "part one ", False),
        multi("boot", "part two", True),
        multi("boot", "second", False),
        param("P_INT", 3),
        param("P_FLT", 0.5),
        default("P_INT", 2, 3),
        default("P_FLT", 0.25, 2),
    ]
    head = b"".join(parts)
    out = bytearray(head)
    spans: list[tuple[int, int, int]] = []

    def add(b: bytes, kind: int = -1) -> None:
        spans.append((len(out), len(out) + len(b), kind))
        out.extend(b)

    add(sub(0, 0, "pos"))
    add(sub(1, 1, "pos"))
    add(sub(0, 2, "nest"))
    add(log(ord("6"), 1_000_500, "hello"))
    for i in range(n):
        ts = 1_001_000 + i * 1000
        add(data(0, pos_payload(ts, i, padded=padded and i % 3 == 0)), 0)
        add(data(1, pos_payload(ts + 1, i + 100)), 1)
        if i % 2 == 0:
            add(data(2, nest_payload(ts + 2, i)), 2)
        if i == n // 2:
            add(param("P_INT", 4))
            add(dropout(25))
            add(tagged(ord("4"), 7, ts, "tagged warn"))
        if with_sync and i % 10 == 5:
            add(sync())
    add(log(ord("3"), 1_001_000 + n * 1000, "bye"))
    return bytes(out), spans


def write(tmp_path: Path, name: str, content: bytes) -> str:
    p = tmp_path / name
    p.write_bytes(content)
    return str(p)


def pyulog_columns(path: str) -> dict[tuple[str, int], dict[str, np.ndarray]]:
    from pyulog import ULog

    u = ULog(path)
    return {(d.name, d.multi_id): d.data for d in u.data_list}
