"""Structure-aware mutations for MCAP, ROS bags and ULog, and compression bombs.

Each walker finds a file's records without trusting them (it stops where the bytes stop
making sense); each mutator rewrites one thing a reader has to trust: a record length, a
size, a count, an offset, a compression name, a chunk's contents, a string, a definition.
"""

from __future__ import annotations

import bz2
import os
import random
import struct
from collections.abc import Callable, Sequence
from pathlib import Path

import lz4.frame
import zstandard

from fuzz import defs
from fuzz.mutate import MAX_INPUT, generic, interesting, odd_name, pack_uint

# ============================================================================ compression bombs
_BOMBS: dict[str, bytes] = {}


def _bomb_dir() -> Path:
    d = Path(os.environ.get("POLYBAG_FUZZ_WORK", Path(__file__).with_name(".work"))) / "bombs"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _make_bomb(kind: str) -> bytes:
    block = bytes(1 << 20)
    if kind.startswith("zstd"):
        size = (2 << 30) if kind == "zstd-2g-sized" else (1 << 30)
        out = bytearray()

        class _W:
            def write(self, b: bytes) -> int:
                out.extend(b)
                return len(b)

        c = zstandard.ZstdCompressor(level=1)
        w = c.stream_writer(_W(), size=size if kind.endswith("sized") else -1, closefd=False)  # type: ignore[arg-type]
        for _ in range(size >> 20):
            w.write(block)
        w.flush(zstandard.FLUSH_FRAME)
        return bytes(out)
    if kind == "bz2":
        c2 = bz2.BZ2Compressor(9)
        parts = [c2.compress(block) for _ in range(512)]
        parts.append(c2.flush())
        return b"".join(parts)
    if kind == "lz4":
        c3 = lz4.frame.LZ4FrameCompressor(block_size=lz4.frame.BLOCKSIZE_MAX4MB, content_checksum=True)
        parts = [c3.begin()] + [c3.compress(block) for _ in range(128)] + [c3.flush()]
        return b"".join(parts)
    raise ValueError(kind)


BOMB_SIZES = {"zstd-1g": 1 << 30, "zstd-2g-sized": 2 << 30, "bz2": 512 << 20, "lz4": 128 << 20}
BOMB_CODEC = {"zstd-1g": "zstd", "zstd-2g-sized": "zstd", "bz2": "bz2", "lz4": "lz4"}


def bomb(kind: str) -> bytes:
    """A small compressed frame of zeros that expands to ``BOMB_SIZES[kind]`` bytes (cached on disk)."""
    got = _BOMBS.get(kind)
    if got is None:
        path = _bomb_dir() / f"{kind}.bin"
        try:
            got = path.read_bytes()
        except OSError:
            got = _make_bomb(kind)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(got)
            os.replace(tmp, path)
        _BOMBS[kind] = got
    return got


def compress(codec: str, data: bytes) -> bytes:
    if codec == "zstd":
        return zstandard.ZstdCompressor(level=1).compress(data)
    if codec == "lz4":
        return lz4.frame.compress(data, content_checksum=True, block_linked=False)
    if codec == "bz2":
        return bz2.compress(data, 1)
    return data


def decompress(codec: str, data: bytes, limit: int = 16 << 20) -> bytes | None:
    """The fuzzer's own bounded decompression (None when it fails or would exceed ``limit``)."""
    try:
        if codec in ("", "none"):
            return data
        if codec == "zstd":
            return zstandard.ZstdDecompressor().decompress(data, max_output_size=limit)
        if codec in ("lz4", "roslz4"):
            d = lz4.frame.LZ4FrameDecompressor()
            out = d.decompress(data, max_length=limit)
            return out if d.eof else None
        if codec == "bz2":
            d2 = bz2.BZ2Decompressor()
            out = d2.decompress(data, max_length=limit)
            return out if d2.eof else None
    except Exception:  # noqa: BLE001 - the fuzzer's own walk: anything odd means "cannot"
        return None
    return None


# ============================================================================ MCAP
MCAP_MAGIC = b"\x89MCAP0\r\n"
# field layouts per opcode: u8/u16/u32/u64 integers, s = u32-length string, b32/b64 =
# u32/u64-length bytes, m = u32-byte-length map, rest = everything to the end
MCAP_LAYOUT: dict[int, tuple[str, ...]] = {
    0x01: ("s", "s"),
    0x02: ("u64", "u64", "u32"),
    0x03: ("u16", "s", "s", "b32"),
    0x04: ("u16", "u16", "s", "s", "m"),
    0x05: ("u16", "u32", "u64", "u64", "rest"),
    0x06: ("u64", "u64", "u64", "u32", "s", "b64"),
    0x07: ("u16", "m"),
    0x08: ("u64", "u64", "u64", "u64", "m", "u64", "s", "u64", "u64"),
    0x09: ("u64", "u64", "s", "s", "b64", "u32"),
    0x0A: ("u64", "u64", "u64", "u64", "u64", "s", "s"),
    0x0B: ("u64", "u16", "u32", "u32", "u32", "u32", "u64", "u64", "m"),
    0x0C: ("s", "m"),
    0x0D: ("u64", "u64", "s"),
    0x0E: ("u8", "u64", "u64"),
    0x0F: ("u32",),
}
_W = {"u8": 1, "u16": 2, "u32": 4, "u64": 8}


class Rec:
    """One record: where it starts, its opcode, where its body lies."""

    __slots__ = ("start", "op", "body", "end")

    def __init__(self, start: int, op: int, body: int, end: int) -> None:
        self.start, self.op, self.body, self.end = start, op, body, end


def mcap_records(data: bytes, pos: int, end: int) -> list[Rec]:
    out = []
    while pos + 9 <= end:
        op = data[pos]
        (n,) = struct.unpack_from("<Q", data, pos + 1)
        if n > end - pos - 9:
            break
        out.append(Rec(pos, op, pos + 9, pos + 9 + n))
        pos += 9 + n
    return out


def mcap_fields(data: bytes, r: Rec) -> list[tuple[str, int, int]]:
    """``(kind, offset, width)`` of the integers (``int``), length prefixes (``len``) and
    string/bytes contents (``str``/``bytes``) of a record's body."""
    out: list[tuple[str, int, int]] = []
    pos, end = r.body, r.end
    for kind in MCAP_LAYOUT.get(r.op, ()):
        if kind in _W:
            w = _W[kind]
            if pos + w > end:
                break
            out.append(("int", pos, w))
            pos += w
        elif kind in ("s", "b32", "m", "b64"):
            w = 8 if kind == "b64" else 4
            if pos + w > end:
                break
            n = int.from_bytes(data[pos : pos + w], "little")
            out.append(("len", pos, w))
            if n > end - pos - w:
                break
            out.append(("str" if kind == "s" else "bytes", pos + w, n))
            pos += w + n
        else:
            out.append(("bytes", pos, end - pos))
    return out


def _mcap_record(op: int, body: bytes) -> bytes:
    return bytes([op]) + struct.pack("<Q", len(body)) + body


def _replace_field(data: bytes, r: Rec, f: tuple[str, int, int], new: bytes, width: int) -> bytes:
    """Replace a length-prefixed field's contents and fix its prefix and the record length."""
    _kind, off, n = f
    body = data[r.body : off - width] + pack_uint(len(new), width) + new + data[off + n : r.end]
    return data[: r.start] + _mcap_record(r.op, body) + data[r.end :]


def _schema_text(rng: random.Random) -> tuple[str, str, bytes]:
    enc = rng.choice(("ros1msg", "ros2msg", "ros2idl", "jsonschema", "protobuf", "", "ulog"))
    if enc in ("ros1msg", "ros2msg"):
        m = defs.gen_model(rng, "ros1" if enc == "ros1msg" else "ros2")
        return m.main, enc, defs.render_msg(m, "ros1" if enc == "ros1msg" else "ros2").encode()
    if enc == "ros2idl":
        m = defs.gen_model(rng, "ros2")
        return m.main, enc, defs.render_idl(m).encode()
    if enc == "ulog":
        name, lines = defs.gen_ulog_formats(rng)
        return name, enc, "\n".join(lines).encode()
    return odd_name(rng), enc, rng.randbytes(rng.choice((0, 8, 64)))


def mcap_mutate(rng: random.Random, data: bytes, pool: Sequence[bytes] = ()) -> bytes:
    if not data.startswith(MCAP_MAGIC):
        return generic(rng, data, pool)
    recs = mcap_records(data, 8, len(data))
    if not recs or rng.random() < 0.15:
        return generic(rng, data, pool)
    r = rng.choice(recs)
    how = rng.random()
    if how < 0.12:  # a lying record length
        cur = r.end - r.body
        return data[: r.start + 1] + pack_uint(interesting(rng, 8, cur, len(data)), 8) + data[r.start + 9 :]
    fields = mcap_fields(data, r)
    if how < 0.45 and fields:
        ints = [f for f in fields if f[0] in ("int", "len")]
        if ints:
            _k, off, w = rng.choice(ints)
            cur = int.from_bytes(data[off : off + w], "little")
            return data[:off] + pack_uint(interesting(rng, w, cur, len(data)), w) + data[off + w :]
    if how < 0.55 and fields:
        strs = [(i, f) for i, f in enumerate(fields) if f[0] in ("str", "bytes") and i > 0]
        if strs:
            i, f = rng.choice(strs)
            width = fields[i - 1][2]
            if r.op == 0x06 and f[0] == "str":
                new = rng.choice(("zstd", "lz4", "bz2", "", "none", "ZSTD", "gzip", odd_name(rng))).encode()
            elif r.op == 0x03 and f[0] == "bytes":
                name, _enc, new = _schema_text(rng)
            else:
                new = odd_name(rng).encode("utf-8", "surrogatepass") if f[0] == "str" else rng.randbytes(
                    rng.choice((0, 1, 8, 100))
                )
            return _replace_field(data, r, f, new, width)
    if how < 0.6 and r.op == 0x03 and fields:  # a hostile schema (name, encoding and text)
        name, enc, text = _schema_text(rng)
        sid = data[r.body : r.body + 2] if r.end - r.body >= 2 else b"\x01\x00"
        body = sid + _s(name) + _s(enc) + struct.pack("<I", len(text)) + text
        return data[: r.start] + _mcap_record(0x03, body) + data[r.end :]
    chunks = [c for c in recs if c.op == 0x06]
    if how < 0.8 and chunks:
        return _mcap_chunk_mutation(rng, data, rng.choice(chunks), pool)
    if how < 0.9:  # drop, duplicate or move a record
        k = rng.random()
        raw = data[r.start : r.end]
        if k < 0.4:
            return data[: r.start] + data[r.end :]
        if k < 0.8:
            return (data[: r.end] + raw + data[r.end :])[:MAX_INPUT]
        other = rng.choice(recs)
        return (data[: other.start] + raw + data[other.start :])[:MAX_INPUT]
    return generic(rng, data, pool)


def _s(text: str) -> bytes:
    b = text.encode("utf-8", "surrogatepass")
    return struct.pack("<I", len(b)) + b


def _mcap_chunk_mutation(rng: random.Random, data: bytes, c: Rec, pool: Sequence[bytes]) -> bytes:
    f = mcap_fields(data, c)
    if len(f) < 8:
        return generic(rng, data, pool)
    start, end, usize, crc = (int.from_bytes(data[o : o + w], "little") for _k, o, w in f[:4])
    comp = data[f[5][1] : f[5][1] + f[5][2]].decode("latin-1")
    recs_raw = data[f[7][1] : f[7][1] + f[7][2]]
    how = rng.random()
    if how < 0.25:  # a compression bomb
        kind = rng.choice(list(BOMB_SIZES))
        new_records = bomb(kind)
        new_comp = BOMB_CODEC[kind] if rng.random() < 0.85 else rng.choice(("zstd", "lz4", ""))
        new_usize = rng.choice((BOMB_SIZES[kind], 1000, 0, usize, (1 << 64) - 1))
        new_crc = rng.choice((0, crc))
    else:
        inner = decompress(comp, recs_raw)
        if inner is None:
            return generic(rng, data, pool)
        irecs = mcap_records(inner, 0, len(inner))
        if irecs and rng.random() < 0.8:
            inner = mcap_mutate(rng, MCAP_MAGIC + inner)[8:] if rng.random() < 0.7 else generic(rng, inner)
        else:
            inner = generic(rng, inner)
        new_comp = comp if rng.random() < 0.85 else rng.choice(("zstd", "lz4", "", "bz2"))
        new_records = compress(new_comp if new_comp in ("zstd", "lz4", "bz2") else "", inner)
        new_usize = len(inner) if rng.random() < 0.8 else interesting(rng, 8, len(inner), len(data))
        new_crc = rng.choice((0, 0, crc, rng.getrandbits(32)))
    if rng.random() < 0.2:
        start, end = interesting(rng, 8, start), interesting(rng, 8, end)
    body = (
        struct.pack("<QQQI", start, end, new_usize, new_crc)
        + _s(new_comp)
        + struct.pack("<Q", len(new_records))
        + new_records
    )
    return (data[: c.start] + _mcap_record(0x06, body) + data[c.end :])[: MAX_INPUT + len(new_records)]


# ============================================================================ ROS bag
BAG_MAGICS = (b"#ROSBAG V2.0\n", b"#ROSRECORD V1.2\n")


class BagRec:
    __slots__ = ("start", "hstart", "hlen", "dstart", "dlen", "fields")

    def __init__(self, start: int, hstart: int, hlen: int, dstart: int, dlen: int, fields: list) -> None:
        self.start, self.hstart, self.hlen, self.dstart, self.dlen, self.fields = start, hstart, hlen, dstart, dlen, fields

    @property
    def end(self) -> int:
        return self.dstart + self.dlen


def bag_header_fields(data: bytes, pos: int, end: int) -> list[tuple[str, int, int, int]]:
    """``(name, field_start, value_start, value_len)`` of each ``name=value`` field."""
    out = []
    while pos + 4 <= end:
        (n,) = struct.unpack_from("<I", data, pos)
        if n > end - pos - 4:
            break
        item = data[pos + 4 : pos + 4 + n]
        eq = item.find(b"=")
        if eq < 0:
            break
        out.append((item[:eq].decode("latin-1"), pos, pos + 4 + eq + 1, n - eq - 1))
        pos += 4 + n
    return out


def bag_records(data: bytes, pos: int, end: int) -> list[BagRec]:
    out = []
    while pos + 8 <= end:
        (hl,) = struct.unpack_from("<I", data, pos)
        if hl > end - pos - 8:
            break
        dpos = pos + 4 + hl
        (dl,) = struct.unpack_from("<I", data, dpos)
        if dl > end - dpos - 4:
            break
        out.append(BagRec(pos, pos + 4, hl, dpos + 4, dl, bag_header_fields(data, pos + 4, dpos)))
        pos = dpos + 4 + dl
    return out


def _bag_field(name: str, value: bytes) -> bytes:
    item = name.encode("latin-1") + b"=" + value
    return struct.pack("<I", len(item)) + item


def _bag_record(fields: list[tuple[str, bytes]], payload: bytes) -> bytes:
    h = b"".join(_bag_field(n, v) for n, v in fields)
    return struct.pack("<I", len(h)) + h + struct.pack("<I", len(payload)) + payload


def _fields_of(data: bytes, r: BagRec) -> list[tuple[str, bytes]]:
    return [(n, data[v : v + ln]) for n, _s0, v, ln in r.fields]


def _conn_data(rng: random.Random) -> bytes:
    m = defs.gen_model(rng, "ros1")
    fields = [
        ("topic", rng.choice(("/t", odd_name(rng))).encode("utf-8", "surrogatepass")),
        ("type", rng.choice((m.main, odd_name(rng), ""))[:200].encode("utf-8", "surrogatepass")),
        ("md5sum", rng.choice((b"*", b"0" * 32, b"", b"zz"))),
        ("message_definition", defs.render_msg(m, "ros1").encode()),
    ]
    if rng.random() < 0.3:
        fields.append(("callerid", odd_name(rng).encode("utf-8", "surrogatepass")))
    if rng.random() < 0.3:
        fields.append(("latching", rng.choice((b"1", b"0", b"yes", b""))))
    rng.shuffle(fields)
    if rng.random() < 0.2:
        fields.pop()
    return b"".join(_bag_field(n, v) for n, v in fields)


def bag_mutate(rng: random.Random, data: bytes, pool: Sequence[bytes] = ()) -> bytes:
    magic = next((m for m in BAG_MAGICS if data.startswith(m)), None)
    if magic is None or rng.random() < 0.15:
        return generic(rng, data, pool)
    recs = bag_records(data, len(magic), len(data))
    if not recs:
        return generic(rng, data, pool)
    r = rng.choice(recs)
    how = rng.random()
    if how < 0.1:  # lying header or data length
        at = r.start if rng.random() < 0.5 else r.dstart - 4
        cur = int.from_bytes(data[at : at + 4], "little")
        return data[:at] + pack_uint(interesting(rng, 4, cur, len(data)), 4) + data[at + 4 :]
    if how < 0.4 and r.fields:  # a lying numeric header field (conn, count, size, index_pos, ver...)
        nums = [f for f in r.fields if f[3] in (1, 4, 8)]
        if nums:
            _n, fs, v, ln = rng.choice(nums)
            cur = int.from_bytes(data[v : v + ln], "little")
            new = pack_uint(interesting(rng, ln, cur, len(data)), ln)
            if rng.random() < 0.1:  # a field of the wrong width
                new = new[: rng.randrange(ln)] if rng.random() < 0.5 else new + b"\x00"
                fields = _fields_of(data, r)
                fields = [(n, new if n == _n else val) for n, val in fields]
                return data[: r.start] + _bag_record(fields, data[r.dstart : r.end]) + data[r.end :]
            return data[:v] + new + data[v + ln :]
    op = next((data[v] for n, _s0, v, ln in r.fields if n == "op" and ln == 1), None)
    if how < 0.5 and r.dlen >= 8 and op in (0x04, 0x06):  # lying entries of index data / chunk info
        i = r.dstart + 4 * rng.randrange(r.dlen // 4)
        cur = int.from_bytes(data[i : i + 4], "little")
        return data[:i] + pack_uint(interesting(rng, 4, cur, len(data)), 4) + data[i + 4 :]
    if how < 0.6 and op == 0x07:  # a hostile connection (odd names, hostile definition)
        return data[: r.start] + _bag_record(_fields_of(data, r), _conn_data(rng)) + data[r.end :]
    if how < 0.62 and op in (0x01, 0x02):  # a 1.2 message definition or message data: odd fields
        fields = _fields_of(data, r)
        if fields:
            i = rng.randrange(len(fields))
            n, _v = fields[i]
            if n == "def":
                val = defs.render_msg(defs.gen_model(rng, "ros1")).encode()
            else:
                val = odd_name(rng).encode("utf-8", "surrogatepass")
            fields[i] = (n, val)
            return data[: r.start] + _bag_record(fields, data[r.dstart : r.end]) + data[r.end :]
    chunks = [c for c in recs if any(n == "op" and ln == 1 and data[v] == 0x05 for n, _s0, v, ln in c.fields)]
    if how < 0.82 and chunks:
        return _bag_chunk_mutation(rng, data, rng.choice(chunks), pool)
    if how < 0.92:
        raw = data[r.start : r.end]
        k = rng.random()
        if k < 0.4:
            return data[: r.start] + data[r.end :]
        if k < 0.8:
            return (data[: r.end] + raw + data[r.end :])[:MAX_INPUT]
        other = rng.choice(recs)
        return (data[: other.start] + raw + data[other.start :])[:MAX_INPUT]
    return generic(rng, data, pool)


def _bag_chunk_mutation(rng: random.Random, data: bytes, c: BagRec, pool: Sequence[bytes]) -> bytes:
    fields = _fields_of(data, c)
    fd = dict(fields)
    comp = fd.get("compression", b"none").decode("latin-1")
    payload = data[c.dstart : c.end]
    if rng.random() < 0.25:  # a bomb
        kind = rng.choice(("bz2", "lz4", "zstd-1g"))
        new_payload = bomb(kind)
        new_comp = {"zstd": "zstd", "bz2": "bz2", "lz4": "lz4"}[BOMB_CODEC[kind]]
        if rng.random() < 0.15:
            new_comp = rng.choice(("none", "bz2", "lz4"))
        size = rng.choice((BOMB_SIZES[kind] & 0xFFFFFFFF, 1000, 0, 0xFFFFFFFF, len(payload)))
    else:
        inner = decompress("lz4" if comp == "lz4" else comp, payload)
        if inner is None:
            return generic(rng, data, pool)
        inner = bag_mutate(rng, b"#ROSBAG V2.0\n" + inner)[13:] if rng.random() < 0.7 else generic(rng, inner)
        new_comp = comp if rng.random() < 0.85 else rng.choice(("none", "bz2", "lz4", "zstd", "gzip", ""))
        new_payload = compress(new_comp, inner) if new_comp in ("bz2", "lz4") else inner
        size = len(inner) if rng.random() < 0.8 else interesting(rng, 4, len(inner), len(data))
    out = []
    for n, v in fields:
        if n == "compression":
            v = new_comp.encode()
        elif n == "size":
            v = struct.pack("<I", size & 0xFFFFFFFF)
        out.append((n, v))
    return (data[: c.start] + _bag_record(out, new_payload) + data[c.end :])[: MAX_INPUT + len(new_payload)]


# ============================================================================ ULog
ULOG_MAGIC = b"ULog\x01\x12\x35"


def ulog_messages(data: bytes, pos: int = 16) -> list[tuple[int, int, int]]:
    """``(start, type, end)`` of each message."""
    out = []
    while pos + 3 <= len(data):
        (n,) = struct.unpack_from("<H", data, pos)
        end = pos + 3 + n
        if end > len(data):
            break
        out.append((pos, data[pos + 2], end))
        pos = end
    return out


def ulog_msg(kind: str, body: bytes) -> bytes:
    body = body[:0xFFFF]
    return struct.pack("<HB", len(body), ord(kind)) + body


def ulog_slice(rng: random.Random, data: bytes) -> bytes:
    """The definitions of a real log and a few of its data messages (a cheap, deep seed)."""
    msgs = ulog_messages(data)
    first_data = next((i for i, (_s, t, _e) in enumerate(msgs) if t == ord("D")), len(msgs))
    keep = first_data + rng.choice((0, 1, 10, 50, 200, 1000))
    if keep >= len(msgs):
        return data
    return data[: msgs[keep][0]] if keep < len(msgs) else data


def ulog_mutate(rng: random.Random, data: bytes, pool: Sequence[bytes] = ()) -> bytes:
    if not data.startswith(ULOG_MAGIC) or rng.random() < 0.15:
        return generic(rng, data, pool)
    msgs = ulog_messages(data)
    if not msgs:
        return generic(rng, data, pool)
    s, t, e = rng.choice(msgs)
    how = rng.random()
    if how < 0.15:  # a lying message size
        cur = e - s - 3
        return data[:s] + pack_uint(interesting(rng, 2, cur), 2) + data[s + 2 :]
    if how < 0.3 and e - s > 4:  # a lying id, count, key length or appended-data offset
        body_start = s + 3
        if t == ord("B") and e - s >= 3 + 40:  # flag bits: 3 x u64 appended offsets at 16..40
            i = body_start + 16 + 8 * rng.randrange(3)
            cur = int.from_bytes(data[i : i + 8], "little")
            return data[:i] + pack_uint(interesting(rng, 8, cur, len(data)), 8) + data[i + 8 :]
        if t in (ord("A"), ord("R"), ord("D")):
            i = body_start + (1 if t == ord("A") else 0)
            return data[:i] + pack_uint(interesting(rng, 2, int.from_bytes(data[i : i + 2], "little")), 2) + data[i + 2 :]
        if t in (ord("I"), ord("M"), ord("P"), ord("Q")):
            i = body_start + (1 if t in (ord("M"), ord("Q")) else 0)
            return data[:i] + bytes([interesting(rng, 1, data[i])]) + data[i + 1 :]
        i = body_start + rng.randrange(e - body_start)
        return data[:i] + bytes([rng.randrange(256)]) + data[i + 1 :]
    if how < 0.45:  # hostile formats (replacing one, or added before the first subscription)
        _name, lines = defs.gen_ulog_formats(rng)
        new = b"".join(ulog_msg("F", line.encode("utf-8", "surrogatepass")) for line in lines)
        if t == ord("F") and rng.random() < 0.5:
            return (data[:s] + new + data[e:])[: MAX_INPUT * 2]
        first_a = next((m[0] for m in msgs if m[1] == ord("A")), msgs[-1][0])
        return (data[:first_a] + new + data[first_a:])[: MAX_INPUT * 2]
    if how < 0.55:  # a subscription to something odd
        fmts = [data[ms + 3 : me].split(b":", 1)[0] for ms, mt, me in msgs if mt == ord("F")]
        name = rng.choice(fmts + [odd_name(rng).encode("utf-8", "surrogatepass"), b"nothere"]) if fmts else b"x"
        sub = ulog_msg("A", bytes([rng.randrange(256)]) + struct.pack("<H", rng.choice((0, 1, 7, 0xFFFF))) + name)
        return (data[:s] + sub + data[s:])[:MAX_INPUT]
    if how < 0.62:  # a data message with a random id and size
        body = struct.pack("<H", rng.choice((0, 1, 2, 0xFFFF))) + rng.randbytes(rng.choice((0, 1, 8, 64, 300)))
        return (data[:e] + ulog_msg("D", body) + data[e:])[:MAX_INPUT]
    if how < 0.68:  # an odd info, param or logging message
        kind = rng.choice("IMPQLCSO")
        body = rng.randbytes(rng.choice((0, 1, 2, 5, 20)))
        if kind in "IM" and rng.random() < 0.7:
            key = rng.choice((b"char[5] sys_name", b"int32_t ver", b"uint8_t[9999999] x", b"bad", b"char[0] e"))
            body = (b"\x00" if kind == "M" else b"") + bytes([len(key)]) + key + rng.randbytes(rng.choice((0, 4, 5)))
        return (data[:e] + ulog_msg(kind, body) + data[e:])[:MAX_INPUT]
    if how < 0.85:
        k = rng.random()
        raw = data[s:e]
        if k < 0.4:
            return data[:s] + data[e:]
        if k < 0.8:
            return (data[:e] + raw + data[e:])[:MAX_INPUT]
        o = rng.choice(msgs)[0]
        return (data[:o] + raw + data[o:])[:MAX_INPUT]
    return generic(rng, data, pool)


MUTATORS: dict[str, Callable[[random.Random, bytes, Sequence[bytes]], bytes]] = {
    "mcap": mcap_mutate,
    "bag": bag_mutate,
    "ulog": ulog_mutate,
}
