"""Target ``ros2_peer``: what a hostile DDS participant sends a ``record --ros2``.

In-process, no DDS: type description replies (mutated from a real rclpy reply and from
made-up descriptions: field and type names with line breaks and semicolons, injected default
values and sources, huge counts, deep, cyclic and missing nested references, refusals whose
reasons are terminal escapes, replies from another participant's writer or to another
client's request) go through :class:`polybag.net.ros2.typedesc.ReplyMatcher` exactly as
:func:`~polybag.net.ros2.typedesc.fetch_definition` hands them over; raw samples go through
the recorder's byte handling (:func:`~polybag.net.ros2.graph.unpad`) and, when a definition
came out, the CDR codec built from it.

Beyond "only PolybagError", each case checks (an ``AssertionError`` escapes otherwise):

* a definition is only ever taken from the publishing participant's writer and, for Cyclone
  peers, from a reply carrying one of our request headers;
* a stored definition parses back to exactly the fields described (per type, in order), its
  REP 2011 hash is the description's, and the announced one when there was one; it holds no
  control characters and is within the network limits;
* every error (what the recorder prints as "recorded as raw CDR without a definition"),
  every refusal kept, and every line the recorder says about it is one line without control
  characters and of bounded length;
* a sample's recorded bytes are the sample minus only the padding its header declares, and
  what the player sends for them is zeros past the end, declared.
"""

from __future__ import annotations

import random
import unicodedata
from collections.abc import Sequence
from pathlib import Path

from fuzz.mutate import generic, interesting, odd_name
from fuzz.targets import Stats, Target, attempt, pack, unpack

PUBLISHER = "01107b03-a318-4896-6809-0056000001c1"  # a Cyclone participant (rmw_cyclonedds header)
PUB_WRITER = "01107b03-a318-4896-6809-005600000303"
FASTDDS = "010f3c2a-1b2c-3d4e-5f60-7182000001c1"
FASTDDS_WRITER = "010f3c2a-1b2c-3d4e-5f60-718200000403"
OTHER_WRITER = "01107b03-03c8-39a5-2610-f49200000303"
CLIENT = b"polybag!"

_REAL = (
    Path(__file__).resolve().parent.parent
    / "tests"
    / "live_ros2"
    / "data"
    / "arrays_type_description_reply.bin"
)
_BAD_NAMES = (
    "x\nint32 injected", "x;import os", "X", "a__b", "x_", "_x", "", "x y", "x#c", "x=1", "\x1b[2J", "é",
    "a" * 300, "structure_needs_at_least_one_member",
)  # fmt: skip
_BAD_TYPES = (
    "good_pkg/msg/In\nner", "Good/msg/Inner", "good__pkg/msg/Inner", "good_pkg/Inner", "a/msg/B/C",
    "good_pkg/msg/x", "pkg/srv/A_Request", "pkg/action/F_SendGoal_Request", "\x1b]0;t\x07/msg/T",
)  # fmt: skip
_BAD_DEFAULTS = (
    "0\nint32 injected", "'a\\nint32 injected'", "(1, 2, 3)", "True", "__import__('os')", "[" * 200,
    "'\x1b[2J'", "1 # c", "('', 'a')", "1e999", "'" + "x" * 300 + "'",
)  # fmt: skip
_BAD_SOURCES = (
    'string s "a\\nint32 injected"\n', "int32 Bad_Const=1\n", "int32 X=1\n=====\nMSG: evil/msg/E\nint32 y\n",
    "int32 x\x1b[2J\n", "string S=\x1b]0;t\x07\n", "int32 x\r\nint32 y\r\n", "bogus line here\n",
)  # fmt: skip


def _controls(text: str) -> bool:
    return any(unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp") for c in text)


def _check_said(text: str, what: str, limit: int = 6000) -> None:
    if _controls(text) or len(text) > limit:
        raise AssertionError(f"{what} is not one short safe line: {text[:200]!r}... ({len(text)} characters)")


class Ros2PeerTarget(Target):
    name = "ros2_peer"
    doc = (
        "hostile DDS peers: type description replies (names, defaults, sources, sizes, nesting, refusals, "
        "wrong writers and request ids) and raw samples, through the reply matcher, the definition checks, "
        "the recorder's warnings and sample bytes"
    )

    def setup(self) -> None:
        from polybag.net.ros2.typedesc import FieldDescription as F
        from polybag.net.ros2.typedesc import TypeDescriptionReply as R
        from polybag.net.ros2.typedesc import decode_reply

        seeds = []
        if _REAL.is_file():
            seeds.append(decode_reply(_REAL.read_bytes()))
        seeds.append(
            R(
                True,
                "",
                "good_pkg/msg/Legit",
                {
                    "good_pkg/msg/Legit": [F("x", 6, 0, 0, ""), F("inner", 1, 0, 0, "good_pkg/msg/Inner")],
                    "good_pkg/msg/Inner": [F("v", 11, 0, 0, "", "1.5"), F("data", 3 + 144, 0, 0, "")],
                },
            )
        )
        self.seed_replies = seeds
        self.info["seeds"] = len(seeds)

    # --- generating -------------------------------------------------------------------------
    def _made_up(self, rng: random.Random) -> object:
        from polybag.net.ros2.typedesc import FieldDescription as F
        from polybag.net.ros2.typedesc import TypeDescriptionReply as R

        n_types = rng.choice((1, 2, 3, 6))
        names = [f"pkg{i}/msg/T{i}" for i in range(n_types)]
        types = {}
        for i, name in enumerate(names):
            fields = []
            for j in range(rng.choice((1, 2, 5, 12))):
                kind = rng.choice((0, 0, 48, 96, 144))
                cap = rng.choice((1, 3, 100)) if kind in (48, 96) else 0
                if j == 0 and i + 1 < n_types:
                    fields.append(F(f"n{j}", 1 + kind, cap, 0, names[i + 1]))
                    continue
                tid = rng.choice((2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 15, 16, 17, 21))
                fields.append(F(f"f{j}", tid + kind, cap, rng.choice((1, 8)) if tid == 21 else 0, ""))
            types[name] = fields
        return R(True, "", names[0], types)

    def _mutate(self, rng: random.Random, r: object) -> None:
        import copy

        from polybag.net.ros2.typedesc import FieldDescription as F

        types = r.types  # type: ignore[attr-defined]
        names = list(types)
        if not names:
            return
        some = rng.choice(names)
        fields = types[some]
        k = rng.randrange(12)
        if k == 0 and fields:
            rng.choice(fields).name = rng.choice((*_BAD_NAMES, odd_name(rng)))
        elif k == 1:
            bad = rng.choice((*_BAD_TYPES, odd_name(rng)))
            if rng.random() < 0.5 and fields:
                f = rng.choice(fields)
                f.type_id, f.nested_type_name = 1, bad
            types[bad] = [F("v", 6, 0, 0, "")]
        elif k == 2 and fields:
            rng.choice(fields).default_value = rng.choice((*_BAD_DEFAULTS, odd_name(rng)))
        elif k == 3 and fields:
            rng.choice(fields).type_id = rng.randrange(256)
        elif k == 4 and fields:
            f = rng.choice(fields)
            f.capacity = interesting(rng, 8, f.capacity)
            f.string_capacity = rng.choice((0, 1, 2**64 - 1, f.string_capacity))
        elif k == 5:  # a nested reference: missing, to itself, to another type
            if fields:
                f = rng.choice(fields)
                f.type_id = rng.choice((1, 49, 97, 145))
                f.capacity = rng.choice((1, 100, 10_000))
                f.nested_type_name = rng.choice((some, rng.choice(names), "pkg/msg/Missing"))
        elif k == 6:  # deep chains, wide fixed arrays of messages
            depth = rng.choice((5, 33, 40))
            chain = [f"deep_pkg/msg/D{i}" for i in range(depth)]
            for i, n in enumerate(chain):
                nxt = chain[i + 1] if i + 1 < depth else ""
                types[n] = [F("n", 1 + 48, rng.choice((1, 10)), 0, nxt)] if nxt else [F("v", 6, 0, 0, "")]
            fields.append(F("deep", 1, 0, 0, chain[0]))
        elif k == 7:  # many fields
            fields.extend(F(f"w{i}", 6, 0, 0, "") for i in range(rng.choice((100, 1990, 2001, 4000))))
        elif k == 8:  # a refusal
            r.successful = False  # type: ignore[attr-defined]
            r.failure_reason = rng.choice(  # type: ignore[attr-defined]
                ("\x1b]0;title\x07\x1b[2J" * rng.choice((1, 100, 5000)), odd_name(rng), "", "\n" * 1000)
            )
            if rng.random() < 0.5:
                r.type_name = ""  # type: ignore[attr-defined]
                r.types = {}  # type: ignore[attr-defined]
        elif k == 9:
            r.type_name = rng.choice((*names, "other_pkg/msg/Other", odd_name(rng)))  # type: ignore[attr-defined]
        elif k == 10:  # sources: the description's own (rendered), with injections
            from polybag.net.ros2.typedesc import _fields_text

            srcs = []
            for n, fs in types.items():
                try:
                    text = _fields_text(copy.deepcopy(fs))
                except Exception:  # noqa: BLE001 - a field the renderer refuses: no source
                    text = ""
                if rng.random() < 0.4:
                    text += rng.choice(_BAD_SOURCES)
                srcs.append((n, "msg", text))
            r.sources = srcs  # type: ignore[attr-defined]
        else:  # a referenced type nothing uses, or one gone
            if rng.random() < 0.5:
                types["unused_pkg/msg/U"] = [F("v", 6, 0, 0, "")]
            elif len(names) > 1:
                types.pop(rng.choice(names[1:]))

    def generate(self, rng: random.Random, pool: Sequence[bytes]) -> bytes:
        import copy

        from polybag.net.ros2.typedesc import description_hash, encode_reply

        if pool and rng.random() < 0.3:
            got = unpack(rng.choice(pool))
            if got is not None and len(got[1]) == 5:
                parts = list(got[1])
                i = rng.choice((0, 3, 3, 4))
                parts[i] = bytes(rng.randrange(4) for _ in range(4)) if i == 0 else generic(rng, parts[i])
                return pack(b"RP", parts)
        r = copy.deepcopy(rng.choice(self.seed_replies)) if rng.random() < 0.6 else self._made_up(rng)
        main = r.type_name  # type: ignore[attr-defined]
        for _ in range(rng.choice((0, 1, 1, 2, 3))):
            self._mutate(rng, r)
        try:
            data = encode_reply(r)  # type: ignore[arg-type]
            announced = description_hash(r) if rng.random() < 0.7 else ""  # type: ignore[arg-type]
        except (UnicodeEncodeError, OverflowError, ValueError, KeyError, TypeError, AttributeError):
            data, announced = b"\x00\x01\x00\x00", ""
        if rng.random() < 0.15:
            announced = "RIHS01_" + "0" * 64
        if rng.random() < 0.2:
            data = generic(rng, data)
        # flags: participant kind (0: Cyclone, 1: Fast DDS), header (0: ours, 1: another
        # client's, 2: random), writer (0: the publisher's, 1: another participant's, 2: gone,
        # 3: garbage), sample kind
        flags = bytes(
            (rng.randrange(2), rng.choice((0, 0, 1, 2)), rng.choice((0, 0, 0, 1, 2, 3)), rng.randrange(4))
        )
        sample = self._sample(rng)
        return pack(b"RP", [flags, main.encode("utf-8", "surrogatepass"), announced.encode(), data, sample])

    def _sample(self, rng: random.Random) -> bytes:
        n = rng.choice((0, 1, 4, 5, 8, 9, 12, 13, 40, 1000))
        head = bytes((0, rng.choice((0, 1, 1, 1, 6, 7)), 0, rng.randrange(256)))
        return (head + rng.randbytes(n))[: max(n, rng.choice((0, 3, 4, n)))]

    # --- running ------------------------------------------------------------------------------
    def run(self, data: bytes, stats: Stats) -> None:
        from polybag.net.ros2 import Ros2GraphError
        from polybag.net.ros2.graph import pad, unpad
        from polybag.net.ros2.typedesc import ReplyMatcher
        from polybag.record.live_ros2 import Ros2Source

        got = unpack(data)
        if got is None or len(got[1]) != 5:
            return
        flags, main_b, announced_b, reply, sample = got[1]
        flags = (flags + b"\x00" * 4)[:4]
        fast, header_mode, writer_mode = flags[0] & 1, flags[1] % 3, flags[2] % 4
        main = main_b.decode("utf-8", "replace")
        announced = announced_b.decode("ascii", "replace")
        participant = FASTDDS if fast else PUBLISHER
        matcher = ReplyMatcher(participant, main, announced, client=CLIENT)
        request = matcher.request()
        if fast:
            wire = reply
        else:
            header = (request[4:20], b"\x01" * 8 + request[12:20], bytes(range(16)))[header_mode]
            wire = reply[:4] + header + reply[4:]
        writer = ((FASTDDS_WRITER if fast else PUB_WRITER), OTHER_WRITER, "", "zz-not-a-guid")[writer_mode]

        said: list[str] = []
        source = Ros2Source(log=said.append)
        text = None
        try:
            text = matcher.offer(wire, writer)
        except Ros2GraphError as e:
            stats.mark("refused")
            _check_said(str(e), "an error")
            source._warn_unknown("/fuzz", main, str(e))  # (as the recorder says it)
        if matcher.refusal:
            _check_said(matcher.refusal, "a kept refusal")
            source._warn_unknown("/fuzz", main, matcher.refusal)
        for line in said + source.warnings:
            _check_said(line, "a recorder line", 4000)
        stats.mark("ignored", matcher.ignored)

        if text is not None:
            stats.mark("definition", text.count("\n"))
            self._check_definition(text, main, announced, wire, fast, header_mode, writer, participant)

        # samples: the bytes recorded and the bytes played
        rec = unpad(sample)
        if (
            len(rec) > len(sample)
            or bytes(rec[:3]) != sample[: min(3, len(rec))]
            or bytes(rec[4:]) != sample[4 : len(rec)]
        ):
            raise AssertionError(f"recorded bytes {bytes(rec)[:40]!r} are not the sample's {sample[:40]!r}")
        if len(rec) != len(sample) and (len(sample) - len(rec) != (sample[3] & 3) or len(rec) < 4):
            raise AssertionError("more than the declared padding was taken off a sample")
        if len(sample) >= 4 and sample[0] == 0 and not sample[3] & 3:
            sent = pad(sample)
            if len(sent) % 4 or bytes(sent[len(sample) :]).strip(b"\x00") or unpad(sent) != sample:
                raise AssertionError(f"a played sample {sent[:40]!r} carries bytes past its end")
        if text is not None:
            self._decode(text, main, bytes(rec), stats)

    def _check_definition(
        self,
        text: str,
        main: str,
        announced: str,
        wire: bytes,
        fast: int,
        header_mode: int,
        writer: str,
        participant: str,
    ) -> None:
        from polybag.codecs.msg_parser import parse_full
        from polybag.codecs.ros2 import full_name
        from polybag.codecs.ros2.typehash import type_hash
        from polybag.net.ros2.graph import guid_prefix
        from polybag.net.ros2.names import constant_name_ok, field_name_ok, type_name_ok
        from polybag.net.ros2.typedesc import MAX_FIELDS, MAX_TEXT, decode_reply, description_hash

        if guid_prefix(writer) != guid_prefix(participant):
            raise AssertionError(f"a definition was taken from writer {writer!r}, not the publisher's")
        if not fast and header_mode != 0:
            raise AssertionError("a definition was taken from a reply to another request")
        r = decode_reply(wire, 0 if fast else 16)
        if not r.successful or r.type_name != main:
            raise AssertionError("a definition was taken from a refusal or another type's reply")
        described = description_hash(r)
        if announced and described != announced:
            raise AssertionError("a definition was taken whose description is not the announced hash")
        if len(text) > MAX_TEXT or sum(len(f) for f in r.types.values()) > MAX_FIELDS:
            raise AssertionError("a definition past the network limits was taken")
        if any(_controls(line) for line in text.split("\n")):
            raise AssertionError(f"a stored definition holds control characters: {text[:300]!r}")
        ts = parse_full(main, text, "ros2")
        stored = {full_name(main): [f.name for f in ts.get(main).fields]}
        for dep in ts.dependencies(main):
            stored[full_name(dep)] = [f.name for f in ts.get(dep).fields]
        want = {
            n: [f.name for f in fs if not (len(fs) == 1 and f.name == "structure_needs_at_least_one_member")]
            for n, fs in r.types.items()
        }
        if stored != want:
            raise AssertionError(f"the stored definition says {stored!r}, the description {want!r}")
        if type_hash(ts, main) != described:
            raise AssertionError("the stored definition's hash is not the description's")
        for key in [main, *ts.dependencies(main)]:
            d = ts.get(key)
            if not type_name_ok(full_name(key)):
                raise AssertionError(f"a stored type is named {full_name(key)!r}, against rosidl's rules")
            bad = [f.name for f in d.fields if not field_name_ok(f.name)]
            bad += [c.name for c in d.constants if not constant_name_ok(c.name)]
            if bad:
                raise AssertionError(f"stored names against rosidl's rules: {bad[:3]!r}")

    def _decode(self, text: str, main: str, payload: bytes, stats: Stats) -> None:
        from polybag.codecs import codec_for
        from polybag.model import Channel, Schema

        channel = Channel(1, "/fuzz", "cdr", Schema(1, main, "ros2msg", text.encode()), {})
        codec = attempt(lambda: codec_for(channel))
        if codec is None:
            return
        if attempt(lambda: codec.decode(payload, topic="/fuzz")) is not None:
            stats.mark("decoded")


TARGETS = [Ros2PeerTarget]
