"""Hostile message definitions and the payloads that go with them.

One small model (:class:`TypeModel`: type name -> fields) is rendered as a ROS 1 ``.msg``
full definition, a ROS 2 ``.msg`` full definition, ROS 2 IDL or ULog ``F`` formats, and
serialized (ROS 1 or CDR) with values that sometimes lie about their lengths.  The model
generator makes ordinary types, deep chains (up to 5,000 nested types), self-referencing
and mutually recursive types, missing dependencies, repeated and odd field names and
absurd fixed array sizes.
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass, field

from fuzz.mutate import interesting, odd_name

PRIMS_ROS1 = (
    "bool", "byte", "char", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
    "float32", "float64", "string", "time", "duration",
)
PRIMS_ROS2 = (
    "bool", "byte", "char", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
    "float32", "float64", "string", "wstring",
)
SIZES = {
    "bool": 1, "byte": 1, "char": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4,
    "uint32": 4, "int64": 8, "uint64": 8, "float32": 4, "float64": 8, "time": 8, "duration": 8,
}
ULOG_PRIMS = {
    "int8_t": 1, "uint8_t": 1, "int16_t": 2, "uint16_t": 2, "int32_t": 4, "uint32_t": 4,
    "int64_t": 8, "uint64_t": 8, "float": 4, "double": 8, "bool": 1, "char": 1,
}
BAD_TYPES = ("int33", "float16", "", "[]", "pkg/", "/x", "a/b/c/d", "std_msgs/Header[", "string<=", "uint8[-1]")


@dataclass
class F:
    type: str  # a primitive or a type name of the model
    name: str
    array: int | None = None  # None scalar, -1 variable, N fixed
    bound: int | None = None  # ROS 2 upper bound of a bounded sequence / string


@dataclass
class TypeModel:
    main: str
    types: dict[str, list[F]] = field(default_factory=dict)
    constants: dict[str, list[str]] = field(default_factory=dict)  # raw constant lines
    raw_lines: dict[str, list[str]] = field(default_factory=dict)  # hostile lines added as text
    missing: bool = False


def _ident(rng: random.Random, i: int) -> str:
    if rng.random() < 0.12:
        n = odd_name(rng)
        return n if rng.random() < 0.5 else "".join(c for c in n if c.isalnum() or c == "_") or f"f{i}"
    return rng.choice(("x", "y", "data", "value", "stamp", "header", "name", "id", "a", "b")) + (
        str(i) if rng.random() < 0.7 else ""
    )


def gen_model(rng: random.Random, dialect: str = "ros1") -> TypeModel:
    """A random type model: usually sane, often hostile."""
    sep = "/msg/" if dialect == "ros2" and rng.random() < 0.7 else "/"
    names = [f"fz{sep}T{i}" for i in range(rng.choice((1, 1, 2, 3, 5)))]
    m = TypeModel(names[0])
    prims = PRIMS_ROS1 if dialect == "ros1" else PRIMS_ROS2
    kind = rng.random()
    if kind < 0.08:  # a deep chain: T0 -> T1 -> ... -> Tn
        depth = rng.choice((50, 200, 999, 1001, 2000, 5000))
        chain = [f"fz/D{i}" for i in range(depth)]
        m.main = chain[0]
        for i, name in enumerate(chain):
            nxt = chain[i + 1] if i + 1 < depth else None
            m.types[name] = [F(nxt, "c")] if nxt else [F("int32", "leaf")]
            if rng.random() < 0.3 and nxt:
                m.types[name].append(F("uint8", "pad"))
        return m
    if kind < 0.11:  # a definition bomb: wide, a diamond, many types, long names (issue 26)
        return gen_bomb(rng, prims)
    if kind < 0.14:  # self reference or a cycle
        a, b = "fz/Self", "fz/Other"
        m.main = a
        arr = rng.choice((None, -1, 1, 2))
        if rng.random() < 0.5:
            m.types[a] = [F("int32", "v"), F(a, "next", arr)]
        else:
            m.types[a] = [F(b, "o", arr)]
            m.types[b] = [F(a, "back", rng.choice((None, -1)))]
        return m
    for name in names:
        fields: list[F] = []
        for i in range(rng.choice((0, 1, 2, 3, 5, 8))):
            r = rng.random()
            later = [n for n in names if n > name]
            if later and r < 0.3:
                t = rng.choice(later)
            elif r < 0.33:
                t = rng.choice(("std_msgs/Header", "Header", "geometry_msgs/Point", "nope/Missing"))
                if t == "nope/Missing":
                    m.missing = True
            else:
                t = rng.choice(prims)
            arr: int | None = None
            ar = rng.random()
            if ar < 0.2:
                arr = -1
            elif ar < 0.3:
                arr = rng.choice((0, 1, 3, 16))
            elif ar < 0.33:
                arr = rng.choice((1 << 20, 0xFFFFFFFF, 1 << 40, 99999999999))
            bound = rng.choice((None, None, 0, 1, 5)) if dialect == "ros2" else None
            fields.append(F(t, _ident(rng, i), arr, bound))
        if fields and rng.random() < 0.08:  # a repeated field name
            fields.append(F(fields[0].type, fields[0].name, fields[0].array))
        m.types[name] = fields
        if rng.random() < 0.15:
            m.constants[name] = [
                rng.choice(
                    (
                        "int32 X=5", "int8 BIG=1000", "uint8 NEG=-1", "float32 F=nan", "float64 G=1e999",
                        "string S=  spaced # not a comment", "bool B=maybe", "bool T=True", "int64 H=0x10",
                        "char C=300", "string E=", "int32 X=6", "duration D=1", f"int32 {odd_name(rng)}=1",
                    )
                )
                for _ in range(rng.randint(1, 3))
            ]
        if rng.random() < 0.06:
            m.raw_lines[name] = [
                rng.choice(
                    (
                        f"{rng.choice(BAD_TYPES)} x", "int32", "int32 a b c", "int32[3 y", "  \t  ",
                        "string<=3 s", "int32[<=2] q", "int32 x 5", "# comment only", "MSG: fz/T0",
                        "=" * 80, "int32 " + "x" * 5000, "\x00int32 z", "uint8[" + "9" * 40 + "] big",
                    )
                )
            ]
    return m


def gen_bomb(rng: random.Random, prims: tuple[str, ...]) -> TypeModel:
    """A definition that costs a lot to compile if polybag let it: very many fields, a
    diamond of types (each holding the next several times, so inlining it doubles at every
    level), arrays of such a type, very many types, very long names, pathological spacing."""
    kind = rng.randrange(6)
    m = TypeModel("fz/B0")
    if kind == 0:  # flat and wide: around the fields-per-definition limit
        n = rng.choice((1000, 16000, 16384, 16385, 40000))
        t = rng.choice(("int32", "uint8", "float64", "string"))
        m.types["fz/B0"] = [F(t, f"f{i}") for i in range(n)]
    elif kind in (1, 2):  # a diamond: B0 holds ``fan`` B1 (or an array of them), B1 ``fan`` B2...
        levels = rng.choice((8, 12, 17, 19, 30, 60))
        fan = rng.choice((2, 2, 3))
        arr = None if kind == 1 else rng.choice((1, 2, 8, 64))
        for i in range(levels - 1):
            m.types[f"fz/B{i}"] = [F(f"fz/B{i + 1}", f"a{k}", arr) for k in range(fan)]
        m.types[f"fz/B{levels - 1}"] = [F(rng.choice(prims), "x")]
    elif kind == 3:  # very many small types, each used once
        n = rng.choice((100, 3000, 10001))
        m.types["fz/B0"] = [F(f"fz/C{i}", f"c{i}") for i in range(min(n, 3000))]
        for i in range(n):
            m.types[f"fz/C{i}"] = [F("int8", "v")]
    elif kind == 4:  # long names
        n = rng.choice((200, 256, 257, 5000, 100000))
        m.types["fz/B0"] = [F("int32", "n" * n)] if rng.random() < 0.5 else [F("fz/" + "N" * n, "x")]
        if m.types["fz/B0"][0].type != "int32":
            m.types["fz/" + "N" * n] = [F("int8", "v")]
    else:  # spacing and quoting that make backtracking parsers quadratic
        m.types["fz/B0"] = [F("int32", "x")]
        n = rng.choice((1000, 100000, 1 << 20))
        m.raw_lines["fz/B0"] = [
            rng.choice(
                (
                    "\n" * n,
                    " \n" * n,
                    "string[] s [" + " " * n + "x'",
                    'string[] s ["' + '\\"' * (n // 2),
                    "int32" + "\t" * n + "[ y",
                    "string s '" + "\\'" * (n // 2),
                )
            )
        ]
    return m


# --- rendering --------------------------------------------------------------------------------
def _ftext(f: F, dialect: str) -> str:
    t = f.type
    if dialect == "ros2" and f.bound is not None and t in ("string", "wstring") and f.array is None:
        t = f"{t}<={f.bound}"
    if f.array is not None:
        if f.array < 0:
            t += f"[<={f.bound}]" if (dialect == "ros2" and f.bound is not None) else "[]"
        else:
            t += f"[{f.array}]"
    return f"{t} {f.name}"


def render_msg(m: TypeModel, dialect: str = "ros1") -> str:
    """The full definition: the main type, then ``MSG:`` sections for the others."""
    out = []
    order = [m.main] + [n for n in m.types if n != m.main]
    for i, name in enumerate(order):
        lines = list(m.constants.get(name, ())) + [_ftext(f, dialect) for f in m.types[name]]
        lines += m.raw_lines.get(name, [])
        body = "\n".join(lines) + "\n"
        if i:
            out.append("=" * 80 + f"\nMSG: {name}\n")
        out.append(body)
    return "".join(out)


_IDL_TYPES = {
    "bool": "boolean", "byte": "octet", "char": "char", "int8": "int8", "uint8": "uint8", "int16": "int16",
    "uint16": "uint16", "int32": "int32", "uint32": "uint32", "int64": "int64", "uint64": "uint64",
    "float32": "float", "float64": "double", "string": "string", "wstring": "wstring",
}


def render_idl(m: TypeModel) -> str:
    parts = []
    for name, fields in m.types.items():
        pkg, _, short = name.rpartition("/")
        mods = [p for p in pkg.split("/") if p]
        body = []
        for f in fields:
            t = _IDL_TYPES.get(f.type, f.type.replace("/", "::"))
            if f.array is not None and f.array < 0:
                t = f"sequence<{t}, {f.bound}>" if f.bound is not None else f"sequence<{t}>"
                body.append(f"    {t} {f.name};")
            elif f.array is not None:
                body.append(f"    {t} {f.name}[{f.array}];")
            else:
                body.append(f"    {t} {f.name};")
        for c in m.constants.get(name, ()):
            body.append(f"    const {c.replace('=', ' = ', 1)};")
        text = f"struct {short} {{\n" + "\n".join(body) + "\n};\n"
        for mod in reversed(mods):
            text = f"module {mod} {{\n{text}}};\n"
        parts.append(text)
    return "\n".join(parts)


# --- payloads ---------------------------------------------------------------------------------
class _Out:
    def __init__(self, rng: random.Random, lie: float, cdr: bool, big: bool) -> None:
        self.rng = rng
        self.lie = lie
        self.cdr = cdr
        self.big = big
        self.buf = bytearray()
        self.budget = 1 << 16

    def align(self, n: int) -> None:
        if self.cdr and n > 1:
            self.buf += b"\x00" * (-(len(self.buf) - 4) % n)

    def u32(self, v: int) -> None:
        self.align(4)
        if self.rng.random() < self.lie:
            v = interesting(self.rng, 4, v)
        self.buf += struct.pack(">I" if self.big else "<I", v)

    def prim(self, t: str) -> None:
        rng = self.rng
        if t in ("string", "wstring"):
            text = rng.choice((b"", b"hi", "ö".encode(), b"\xff\xfe", b"x" * rng.randint(0, 64)))
            if t == "wstring" and self.cdr:
                self.u32(len(text) // 2)
                self.align(1)
                self.buf += text[: len(text) // 2 * 2]
                return
            if self.cdr:
                self.u32(len(text) + 1)
                self.buf += text + b"\x00"
            else:
                self.u32(len(text))
                self.buf += text
            return
        n = SIZES[t]
        self.align(min(n, 4) if t in ("time", "duration") else n)
        self.buf += rng.randbytes(n) if rng.random() < 0.8 else bytes(n)


def _emit(m: TypeModel, t: str, out: _Out, depth: int) -> None:
    rng = out.rng
    out.budget -= 1
    if out.budget <= 0 or depth > 120:
        return  # a recursive type: stop (the payload is then short)
    if t in SIZES or t in ("string", "wstring"):
        out.prim(t)
        return
    fields = m.types.get(t)
    if fields is None:
        out.buf += rng.randbytes(rng.choice((0, 4, 12)))
        return
    for f in fields:
        count = 1
        if f.array is not None:
            if f.array < 0:
                count = rng.choice((0, 0, 1, 2, 3))
                out.u32(count)
            else:
                count = f.array
            if count > 64:
                out.buf += rng.randbytes(rng.choice((0, 8, 64)))
                continue
        for _ in range(count):
            _emit(m, f.type, out, depth + 1)


def payload(rng: random.Random, m: TypeModel, *, cdr: bool, lie: float = 0.0) -> bytes:
    """A serialization of a random value of ``m.main`` (ROS 1, or CDR with its 4-byte header)."""
    big = cdr and rng.random() < 0.25
    out = _Out(rng, lie, cdr, big)
    if cdr:
        out.buf += b"\x00\x00\x00\x00" if big else b"\x00\x01\x00\x00"
    _emit(m, m.main, out, 0)
    data = bytes(out.buf)
    r = rng.random()
    if r < 0.1:
        data = data[: rng.randrange(len(data) + 1)]
    elif r < 0.15:
        data += rng.randbytes(rng.randint(1, 8))
    elif r < 0.2:
        data = rng.randbytes(rng.choice((0, 1, 4, 16, 100)))
    return data


# --- ULog formats -----------------------------------------------------------------------------
def gen_ulog_formats(rng: random.Random) -> tuple[str, list[str]]:
    """(main format name, the ``F`` message texts), sometimes hostile."""
    kind = rng.random()
    if kind < 0.04:  # a diamond of formats, and many formats holding its top (issue 26)
        levels = rng.choice((8, 12, 13, 20))  # 20: over the limits; 13: 4096 leaves, decoded
        lines = ["big:uint64_t timestamp;n0 a;"]
        lines += [f"n{i}:n{i + 1} a;n{i + 1} b;" for i in range(levels - 1)] + [f"n{levels - 1}:uint8_t v;"]
        lines += [f"g{j}:n0 a;uint8_t w;" for j in range(rng.choice((0, 10, 500)))]
        return rng.choice(("big", "g0", "n1")), lines
    if kind < 0.07:
        depth = rng.choice((50, 999, 2000, 5000))
        lines = [f"d{i}:uint64_t timestamp;d{i + 1} c;" for i in range(depth)]
        lines.append(f"d{depth}:uint64_t timestamp;int32_t leaf;")
        return "d0", lines
    if kind < 0.12:
        if rng.random() < 0.5:
            return "selfy", ["selfy:uint64_t timestamp;selfy[2] again;"]
        return "ping", ["ping:uint64_t timestamp;pong p;", "pong:ping q;"]
    names = [f"topic_{i}" for i in range(rng.choice((1, 1, 2, 3)))]
    lines = []
    for j, name in enumerate(names):
        parts = ["uint64_t timestamp"] if rng.random() < 0.9 else []
        for i in range(rng.choice((0, 1, 2, 4, 8))):
            r = rng.random()
            if r < 0.2 and j + 1 < len(names):
                t = names[j + 1]
            elif r < 0.23:
                t = rng.choice(("nothere", "int33_t", "", "uint8_t[", "topic_0"))
            else:
                t = rng.choice(tuple(ULOG_PRIMS))
            ar = rng.random()
            if ar < 0.2:
                t += f"[{rng.choice((0, 1, 3, 16))}]"
            elif ar < 0.24:
                t += f"[{rng.choice((255, 65535, 1 << 20, 4294967295, 99999999999999))}]"
            fname = _ident(rng, i)
            if rng.random() < 0.08:
                fname = "_padding0"
            parts.append(f"{t} {fname}")
        if len(parts) > 1 and rng.random() < 0.08:
            parts.append(parts[-1])  # a repeated field
        lines.append(f"{name}:" + "".join(p + ";" for p in parts))
    if rng.random() < 0.05:
        lines.append(rng.choice(("nocolon", ":x", "a:int32_t;", "b:int32_t x y;", "c:;;;", "é:int8_t ü;")))
    return names[0], lines


def ulog_size(name: str, lines: list[str]) -> int:
    """The byte size of format ``name`` (best effort: 0 when unknown, capped)."""
    fmts: dict[str, list[tuple[str, int]]] = {}
    for line in lines:
        n, _, rest = line.partition(":")
        fields = []
        for part in rest.split(";"):
            t, _, _f = part.strip().partition(" ")
            arr = 1
            if "[" in t and t.endswith("]"):
                t, _, a = t[:-1].partition("[")
                arr = int(a) if a.isdigit() else 1
            if t:
                fields.append((t, arr))
        fmts[n] = fields

    memo: dict[str, int] = {}

    def size(t: str, depth: int) -> int:
        if t in ULOG_PRIMS:
            return ULOG_PRIMS[t]
        if t in memo:
            return memo[t]
        memo[t] = 0  # a cycle counts as nothing
        if depth > 50 or t not in fmts:
            return 0
        memo[t] = min(sum(size(ft, depth + 1) * min(a, 1 << 16) for ft, a in fmts[t]), 1 << 20)
        return memo[t]

    return min(size(name, 0), 1 << 16)
