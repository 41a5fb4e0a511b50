"""Target ``s3_answers``: the S3 open by one ranged GET (issue 30) against hostile answers.

An ``s3://`` object is opened with a ``GetObject`` of its last bytes whose ``Content-Range``
gives the size (:func:`polybag.io.fsspec_transport.s3_ranged_get`), the bytes kept by
:meth:`polybag.io.remote_source.RemoteSource.preload`; later reads are ranged GETs pinned to
the ETag.  Here the S3 client is a stand-in (``S3FileSystem``, the class name s3fs has, so
polybag takes the S3 path) that serves a small real log (an MCAP or a bag from the file
targets' seeds) and answers each request as the input says: honestly, with another range
than asked (said truly in ``Content-Range``), a lying total, a body shorter or longer than
its ``Content-Range``, no or garbage ``Content-Range``, another ETag, 416, no such key, or a
transport error.  ``polybag.open(url)`` then reads everything.

Invariants, beyond "only PolybagError comes out":

- when every answer told the truth about what it carried (honest, or another range said
  truly, or an error), a read that succeeds gives exactly the local read's messages;
- the body bytes the client takes stay under three times the object plus a bound per
  request (a lying answer is never read past what it said plus one byte).
"""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Sequence
from typing import Any

import polybag
from fuzz.targets import MESSAGE_LIMIT, Stats, Target, attempt, pack, unpack

#: answer kinds, by the byte of the input that drives each request
HONEST, OTHER_RANGE, LYING_TOTAL, SHORT_BODY, LONG_BODY, NO_RANGE, GARBAGE_RANGE, NEW_ETAG, E416, NO_KEY, E_OTHER = range(11)
#: kinds whose answer carries what it says (a successful read must then be the local one)
TRUTHFUL = {HONEST, OTHER_RANGE, E416, NO_KEY, E_OTHER}
#: what one answer may bring beyond what was asked (the client reads at most one byte more)
SLACK = 1 << 10


class S3Escape(Exception):
    """A read that succeeded with other messages than the local read, or took too much."""


class _Body:
    def __init__(self, data: bytes) -> None:
        self._data = data
        self.taken = 0

    async def read(self, n: int) -> bytes:
        out, self._data = self._data[:n], self._data[n:]
        self.taken += len(out)
        return out

    def close(self) -> None:
        pass


class S3FileSystem:
    """A stand-in s3fs filesystem (polybag picks the S3 path by this class name) serving
    ``obj`` with the answers ``plan`` draws, one byte per request (honest past its end)."""

    def __init__(self, obj: bytes, plan: bytes) -> None:
        from fsspec.asyn import get_loop

        self.loop = get_loop()
        self.obj = obj
        self.plan = plan
        self.calls = 0
        self.truthful = True
        self.bodies: list[_Body] = []
        self.kwargs: dict[str, Any] = {}

    def split_path(self, path: str) -> tuple[str, str, None]:
        bucket, _, key = path.partition("/")
        return bucket, key, None

    def unstrip_protocol(self, path: str) -> str:
        return f"s3://{path}"

    def info(self, path: str) -> dict[str, Any]:
        bucket, _, key = path.partition("/")
        if key != "k.log":
            raise FileNotFoundError(path)
        return {"size": len(self.obj), "ETag": '"v1"', "type": "file", "name": path}

    def _kind(self) -> int:
        i = self.calls
        self.calls += 1
        kind = self.plan[i] % 11 if i < len(self.plan) else HONEST
        if kind not in TRUTHFUL:
            self.truthful = False
        return kind

    async def _call_s3(self, method: str, **kw: Any) -> dict[str, Any]:
        if method != "get_object":
            raise OSError(f"unexpected {method}")
        kind = self._kind()
        n = len(self.obj)
        if kind == NO_KEY:
            raise FileNotFoundError(kw.get("Key"))
        if kind == E416 or (n == 0):
            raise OSError(22, "The requested range is not satisfiable")
        if kind == E_OTHER:
            raise ConnectionResetError("connection reset by peer")
        m = re.fullmatch(r"bytes=(\d*)-(\d*)", str(kw.get("Range", "")))
        if m is None:
            a, b = 0, n - 1
        elif m.group(1) == "":
            a, b = max(0, n - int(m.group(2))), n - 1
        else:
            a, b = int(m.group(1)), min(n - 1, int(m.group(2)))
        if kind == OTHER_RANGE and b > a:
            b = a + (b - a) // 2  # fewer bytes than asked, said truly
        body = self.obj[a : b + 1]
        rng = f"bytes {a}-{b}/{n}"
        if kind == LYING_TOTAL:
            rng = f"bytes {a}-{b}/{n + 1 + self.calls * 977}"
        elif kind == SHORT_BODY:
            body = body[: len(body) // 2]
        elif kind == LONG_BODY:
            body = body + b"\0" * (1 + self.calls * 31)
        elif kind == NO_RANGE:
            rng = ""
        elif kind == GARBAGE_RANGE:
            rng = random.Random(self.calls).choice(["bytes 5-1/3", "bytes x-y/z", "bytes 0-9/*", "items 0-1/2", "bytes -3-2/9"])
        await asyncio.sleep(0)
        b_ = _Body(body)
        self.bodies.append(b_)
        return {"ContentRange": rng or None, "Body": b_, "ETag": '"v2"' if kind == NEW_ETAG else '"v1"'}


def _messages(r: polybag.Reader) -> list[tuple[str, int, bytes]]:
    out = []
    for m in r.messages(order="file"):
        out.append((m.topic, m.log_time, bytes(m.data)))
        if len(out) >= MESSAGE_LIMIT:
            break
    return out


class S3Answers(Target):
    name = "s3_answers"
    doc = "S3 open by one ranged GET (Content-Range gives the size) and pinned reads, against hostile answers"

    def setup(self) -> None:
        from fuzz.seeds import SEEDS

        logs: list[bytes] = []
        for fmt in ("mcap", "bag"):
            corpus, made = SEEDS[fmt]()
            logs += [s for s in made if 1000 < len(s) < (1 << 20)][:4]
        # one larger than the open's tail, so that the head and the data are separate reads
        logs.append(_big_mcap())
        self.logs = logs
        self.local = {}
        for obj in logs:
            r = polybag.open(obj)
            with r:
                self.local[obj] = _messages(r)
        self.seeds = [pack(b"S3", [bytes([i]), bytes(8)]) for i in range(len(logs))]
        self.info["logs"] = len(logs)

    def generate(self, rng: random.Random, pool: Sequence[bytes]) -> bytes:
        i = rng.randrange(len(self.logs))
        plan = bytearray(rng.choice((0, 0, 0, 1, 2, 5, 3)) for _ in range(rng.randrange(1, 12)))
        for j in range(len(plan)):
            if rng.random() < 0.35:
                plan[j] = rng.randrange(256)
        return pack(b"S3", [bytes([i]), bytes(plan)])

    def run(self, data: bytes, stats: Stats) -> None:
        got = unpack(data)
        if got is None or len(got[1]) < 2 or not got[1][0]:
            return
        obj = self.logs[got[1][0][0] % len(self.logs)]
        fs = S3FileSystem(obj, got[1][1])
        import polybag.io.remote as remote

        real = remote.fs_for
        remote.fs_for = lambda url, opts=None: (fs, "b/k.log")
        try:
            r = attempt(lambda: polybag.open("s3://b/k.log"))
            if r is None:
                stats.mark("refused")
                return
            stats.mark("opened")
            with r:
                msgs = attempt(lambda: _messages(r))
        finally:
            remote.fs_for = real
        taken = sum(b.taken for b in fs.bodies)
        if taken > 3 * len(obj) + SLACK * max(1, len(fs.bodies)):
            raise S3Escape(f"took {taken} body bytes in {len(fs.bodies)} answers of a {len(obj)}-byte object")
        if msgs is None:
            return
        stats.mark("read")
        if fs.truthful and msgs != self.local[obj]:
            raise S3Escape(f"truthful answers, {len(msgs)} messages read, the local read has {len(self.local[obj])}")


def _big_mcap() -> bytes:
    """An MCAP of about 200 KiB."""
    import io

    buf = io.BytesIO()
    with polybag.Writer(buf, format="mcap", chunk_size=16 << 10) as w:
        s = w.add_schema("std_msgs/msg/Float64", "ros2msg", b"float64 data\n")
        c = w.add_channel("/a", "cdr", s)
        for i in range(4000):
            w.write(c, b"\x00\x01\x00\x00" + i.to_bytes(8, "little") + bytes(40), log_time=10**18 + i * 1000)
    return buf.getvalue()


TARGETS = [S3Answers]
