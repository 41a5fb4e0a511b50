"""Format-blind mutations: byte flips, truncation, splices, lying integers.

Every mutator takes a :class:`random.Random` and returns new bytes; none of them grows an
input past :data:`MAX_INPUT` (the fuzzer's inputs stay small so a case is cheap and any
large allocation can only come from what the bytes *declare*).
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable, Sequence

#: Largest input a mutator produces.
MAX_INPUT = 4 << 20

#: Values a length, size, count or offset field is rewritten to ("lying lengths").
def interesting(rng: random.Random, width: int, current: int = 0, limit: int = 0) -> int:
    """A hostile value for an unsigned integer field of ``width`` bytes."""
    top = (1 << (8 * width)) - 1
    choices = [
        0,
        1,
        2,
        3,
        4,
        7,
        8,
        255,
        256,
        0x7FFF,
        0xFFFF,
        0x10000,
        0x7FFFFFFF,
        0x80000000,
        0xFFFFFFFF,
        0xFFFFFFFE,
        1 << 32,
        1 << 40,
        (1 << 63) - 1,
        1 << 63,
        (1 << 64) - 1,
        current + 1,
        current - 1,
        current * 2,
        current + rng.randint(-16, 16),
        current ^ (1 << rng.randrange(8 * width)),
        rng.getrandbits(8 * width),
    ]
    if limit:
        choices += [limit, limit - 1, limit + 1, rng.randrange(limit + 1)]
    return rng.choice(choices) & top


def pack_uint(value: int, width: int, big: bool = False) -> bytes:
    return value.to_bytes(width, "big" if big else "little")


def flip_bits(rng: random.Random, data: bytes) -> bytes:
    if not data:
        return data
    b = bytearray(data)
    for _ in range(rng.choice((1, 1, 2, 4, 8))):
        i = rng.randrange(len(b))
        b[i] ^= 1 << rng.randrange(8)
    return bytes(b)


def set_bytes(rng: random.Random, data: bytes) -> bytes:
    if not data:
        return data
    b = bytearray(data)
    for _ in range(rng.choice((1, 2, 3))):
        i = rng.randrange(len(b))
        b[i] = rng.choice((0, 0xFF, 0x7F, 0x80, rng.randrange(256)))
    return bytes(b)


def int_at_random(rng: random.Random, data: bytes) -> bytes:
    """Overwrite an aligned-or-not 2/4/8-byte integer somewhere with a lying value."""
    if len(data) < 8:
        return flip_bits(rng, data)
    width = rng.choice((2, 4, 4, 8, 8))
    i = rng.randrange(len(data) - width + 1)
    if rng.random() < 0.5:
        i -= i % width
    cur = int.from_bytes(data[i : i + width], "little")
    return data[:i] + pack_uint(interesting(rng, width, cur, len(data)), width) + data[i + width :]


def truncate(rng: random.Random, data: bytes) -> bytes:
    if not data:
        return data
    cut = rng.choice((rng.randrange(len(data)), len(data) - rng.randint(1, min(64, len(data)))))
    return data[: max(0, cut)]


def delete_range(rng: random.Random, data: bytes) -> bytes:
    if len(data) < 2:
        return data
    i = rng.randrange(len(data))
    n = rng.randint(1, min(len(data) - i, rng.choice((1, 4, 16, 256, 4096))))
    return data[:i] + data[i + n :]


def insert_bytes(rng: random.Random, data: bytes) -> bytes:
    i = rng.randrange(len(data) + 1)
    n = rng.choice((1, 4, 8, 16, 255, 1024))
    blob = rng.choice((b"\x00" * n, b"\xff" * n, rng.randbytes(n)))
    return (data[:i] + blob + data[i:])[:MAX_INPUT]


def duplicate_range(rng: random.Random, data: bytes) -> bytes:
    if len(data) < 2:
        return data
    i = rng.randrange(len(data))
    n = rng.randint(1, min(len(data) - i, 8192))
    j = rng.randrange(len(data) + 1)
    return (data[:j] + data[i : i + n] + data[j:])[:MAX_INPUT]


def splice(rng: random.Random, data: bytes, other: bytes) -> bytes:
    """The head of ``data`` and the tail of another input."""
    if not data or not other:
        return data or other
    i = rng.randrange(len(data))
    j = rng.randrange(len(other))
    return (data[:i] + other[j:])[:MAX_INPUT]


GENERIC: Sequence[Callable[[random.Random, bytes], bytes]] = (
    flip_bits,
    set_bytes,
    int_at_random,
    int_at_random,
    truncate,
    delete_range,
    insert_bytes,
    duplicate_range,
)


def generic(rng: random.Random, data: bytes, pool: Sequence[bytes] = ()) -> bytes:
    """One to four format-blind mutations (sometimes a splice with another input)."""
    for _ in range(rng.choice((1, 1, 1, 2, 3, 4))):
        if pool and rng.random() < 0.08:
            data = splice(rng, data, rng.choice(pool))
        else:
            data = rng.choice(GENERIC)(rng, data)
    return data


# --- odd names --------------------------------------------------------------------------------
ODD_NAMES = (
    "",
    " ",
    "a b",
    "\n",
    "\x00",
    "/",
    "//",
    "/a/../b",
    "=",
    "a=b",
    "__init__",
    "__slots__",
    "__class__",
    "__dict__",
    "__msgtype__",
    "_pb_fill",
    "_type",
    "_md5sum",
    "_slot_types",
    "self",
    "cls",
    "class",
    "def",
    "lambda",
    "None",
    "True",
    "import",
    "return",
    "yield",
    "await",
    "async",
    "data",
    "header",
    "ö",
    "名前",
    "\u202e",
    "a" * 300,
    "x" * 70000,
    "0",
    "1abc",
    "a-b",
    "a.b",
    "a:b",
    "a;b",
    "a[0]",
    "a(b)",
    "'",
    '"',
    "\\",
    "{}",
    "%s",
    "${x}",
    "a\tb",
)


def odd_name(rng: random.Random) -> str:
    return rng.choice(ODD_NAMES)


def u32str(text: str | bytes) -> bytes:
    b = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    return struct.pack("<I", len(b)) + b
