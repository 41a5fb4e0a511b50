"""Fuzz targets: how an input is made and what is done with it.

Every target turns one ``bytes`` input into calls of polybag's public API.  A file target's
input is the file; a decoder or parser target's input is a small container
(:func:`pack`/:func:`unpack`) of its parts, so every input, and so every reproducer, is one
file that ``python -m fuzz --target NAME --replay FILE`` runs again.  Reader options
(``recover``, ``validate_crcs``...) are derived from the input's hash, so they replay too.
"""

from __future__ import annotations

import hashlib
import io
import random
import struct
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import polybag
from fuzz import defs
from fuzz.formats import MUTATORS
from fuzz.mutate import generic, odd_name
from polybag.errors import PolybagError

#: What ``max_chunk_bytes=`` is set to (bombs are refused cheaply when a reader supports it).
MAX_CHUNK_BYTES = 64 << 20
#: Messages read per ``messages()`` call, messages decoded per channel, topics turned into columns.
MESSAGE_LIMIT = 5000
DECODE_LIMIT = 40
COLUMN_TOPICS = 6


# ------------------------------------------------------------------------------ containers
def pack(kind: bytes, parts: Iterable[bytes]) -> bytes:
    return b"FZ" + kind[:2].ljust(2, b"_") + b"".join(struct.pack("<I", len(p)) + p for p in parts)


def unpack(data: bytes) -> tuple[bytes, list[bytes]] | None:
    if len(data) < 4 or data[:2] != b"FZ":
        return None
    kind, pos, parts = data[2:4], 4, []
    while pos + 4 <= len(data):
        (n,) = struct.unpack_from("<I", data, pos)
        if n > len(data) - pos - 4:
            return None
        parts.append(data[pos + 4 : pos + 4 + n])
        pos += 4 + n
    return kind, parts


def flags(data: bytes) -> int:
    return hashlib.blake2b(data, digest_size=4).digest()[0]


def reset_caches() -> None:
    """Forget compiled codecs (a long run would otherwise keep every type it ever saw)."""
    import polybag.codecs as c

    for mod_name, names in (
        ("polybag.codecs", ("_cache", "_by_channel")),
        ("polybag.codecs.ros1", ("_codecs",)),
        ("polybag.codecs.cdr", ("_codecs",)),
        ("polybag.codecs.ulog", ("_type_cache",)),
    ):
        mod = c if mod_name == "polybag.codecs" else __import__(mod_name, fromlist=["x"])
        for n in names:
            d = getattr(mod, n, None)
            if isinstance(d, dict):
                d.clear()


class Masked(Exception):
    """A :class:`PolybagError` raised while handling a MemoryError or RecursionError: the
    error is the right kind, but memory or the stack ran out first (an escape all the same)."""

    def __init__(self, err: PolybagError, inner: BaseException) -> None:
        self.err = err
        self.inner = inner
        super().__init__(f"{type(inner).__name__} behind {type(err).__name__}: {err}")


def _masked(err: BaseException) -> BaseException | None:
    seen: set[int] = set()
    e: BaseException | None = err
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, (MemoryError, RecursionError)):
            return e
        e = e.__cause__ or e.__context__
    return None


#: The stats of the running case (:func:`attempt` records where each error was raised).
CURRENT: Stats | None = None


def attempt(fn: Callable[[], Any]) -> Any:
    """Run one API call; a :class:`PolybagError` is the allowed outcome, anything else escapes."""
    try:
        return fn()
    except PolybagError as e:
        inner = _masked(e)
        if inner is not None:
            raise Masked(e, inner) from e
        if CURRENT is not None:
            tb = e.__traceback__
            while tb is not None and tb.tb_next is not None:
                tb = tb.tb_next
            where = f"{tb.tb_frame.f_code.co_filename.rsplit('/', 1)[-1]}:{tb.tb_lineno}" if tb else "?"
            CURRENT.marks.add(f"{type(e).__name__}@{where}")
        return None


class Stats:
    """What a case reached (the fuzzer's feedback: a new shape keeps the input for mutation)."""

    def __init__(self) -> None:
        self.marks: set[str] = set()

    def mark(self, what: str, n: int = 1) -> None:
        self.marks.add(f"{what}:{n.bit_length()}")


# ------------------------------------------------------------------------------ targets
class Target:
    name = ""
    doc = ""

    def __init__(self) -> None:
        self.seeds: list[bytes] = []
        self.info: dict[str, Any] = {}

    def setup(self) -> None:
        """Load seeds, probe options (once per worker process)."""

    def teardown(self) -> None:
        pass

    def generate(self, rng: random.Random, pool: Sequence[bytes]) -> bytes:
        raise NotImplementedError

    def run(self, data: bytes, stats: Stats) -> None:
        raise NotImplementedError


class _Pipe(io.RawIOBase):
    """Bytes seen as a pipe: not seekable, short reads."""

    def __init__(self, data: bytes, step: int) -> None:
        self._f = io.BytesIO(data)
        self._step = step

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def readinto(self, b: Any) -> int:
        got = self._f.read(min(len(b), self._step))
        b[: len(got)] = got
        return len(got)


def _exercise(r: polybag.Reader, data: bytes, stats: Stats, *, stream: bool = False) -> None:
    f = flags(data)
    s = attempt(lambda: r.summary)
    if s is not None:
        stats.mark("summary")
        stats.mark("channels", len(s.channels))
        stats.mark("count", s.message_count)
        attempt(lambda: (s.topics(), s.topic_message_counts(), s.duration, s.chunk_count))
        attempt(r.info_extras)
        attempt(lambda: r.has_index)
        attempt(r.chunk_message_counts)
    orders = [("file", False)] if stream else [("file", False), ("log_time", False), ("log_time", True)]
    if f & 0x40:
        orders.append(("file", True))
    decoded: dict[int, int] = {}
    for order, reverse in orders:
        kw: dict[str, Any] = {"order": order, "reverse": reverse}
        if f & 0x20 and s is not None and s.start_time is not None:
            kw["start"] = s.start_time + 1
            kw["end"] = (s.end_time or 0) + 1
        if f & 0x10 and s is not None and s.channels:
            kw["topics"] = [next(iter(s.channels.values())).topic]

        def read(kw: dict[str, Any] = kw) -> None:
            n = 0
            for m in r.messages(**kw):
                n += 1
                _ = (m.topic, m.log_time, m.publish_time, m.sequence, len(m.data))
                cid = id(m.channel)
                if decoded.get(cid, 0) < DECODE_LIMIT:
                    decoded[cid] = decoded.get(cid, 0) + 1
                    if attempt(m.decode) is not None:
                        stats.mark("decoded")
                    attempt(m.to_dict)
                if n >= MESSAGE_LIMIT:
                    break
            stats.mark(f"messages-{kw['order']}", n)

        attempt(read)
    attempt(lambda: [(a.name, len(a.data)) for a in r.attachments()])
    attempt(lambda: [(m.name, dict(m.metadata)) for m in r.metadata()])
    if s is not None and not stream:
        for topic in list(s.topics())[:COLUMN_TOPICS]:
            if attempt(lambda topic=topic: r.topic_columns(topic)) is not None:
                stats.mark("columns")


class FileTarget(Target):
    fmt = ""
    stream = False

    def setup(self) -> None:
        from fuzz.seeds import SEEDS

        self.corpus, self.made = SEEDS[self.fmt]()
        self.seeds = self.corpus + self.made
        self.options: dict[str, Any] = {}
        # max_chunk_bytes: passed where the reader takes it (a reader that does not know it
        # raises TypeError; readers that swallow unknown options are told it anyway)
        probe = next((s for s in self.seeds if len(s) > 100), self.seeds[0])
        try:
            polybag.open(probe, max_chunk_bytes=MAX_CHUNK_BYTES).close()
            self.options["max_chunk_bytes"] = MAX_CHUNK_BYTES
        except TypeError:
            pass
        except PolybagError:
            self.options["max_chunk_bytes"] = MAX_CHUNK_BYTES
        self.info["max_chunk_bytes"] = "max_chunk_bytes" in self.options
        self.info["seeds"] = len(self.seeds)
        if self.fmt in ("mcap", "bag"):  # made (or loaded) now, not inside a timed case
            from fuzz.formats import BOMB_SIZES, bomb

            for kind in BOMB_SIZES:
                bomb(kind)

    def generate(self, rng: random.Random, pool: Sequence[bytes]) -> bytes:
        r = rng.random()
        if pool and r < 0.5:
            src = rng.choice(pool)
        else:
            src = rng.choice(self.made if self.made and (r < 0.75 or not self.corpus) else self.corpus)
        if rng.random() < 0.03:
            return src
        mut = MUTATORS[self.fmt]
        data = src
        for _ in range(rng.choice((1, 1, 1, 2, 3))):
            data = mut(rng, data, self.seeds)
        return data

    def open_options(self, data: bytes) -> dict[str, Any]:
        f = flags(data)
        opts = dict(self.options)
        if f & 0x03 == 0:
            opts["recover"] = True
        if self.fmt == "mcap" and f & 0x04 == 0:
            opts["validate_crcs"] = False
        return opts

    def run(self, data: bytes, stats: Stats) -> None:
        opts = self.open_options(data)
        if not self.stream:
            r = attempt(lambda: polybag.open(data, format=self.fmt if flags(data) & 0x80 else None, **opts))
            if r is None:
                return
            stats.mark("opened")
            with r:
                _exercise(r, data, stats)
            return
        # a non-seekable stream: one pass in file order, then the summary after the pass, then
        # a fresh stream asked for the summary first and log-time order (read into memory)
        for first in ("messages", "summary"):
            stream = io.BufferedReader(_Pipe(data, 1 + flags(data) * 257), buffer_size=4096)
            r = attempt(lambda stream=stream: polybag.open(stream, **opts))
            if r is None:
                return
            stats.mark("opened")
            with r:
                if first == "summary":
                    attempt(lambda r=r: r.summary)
                    attempt(lambda r=r: sum(1 for _ in r.messages(order="log_time", reverse=bool(flags(data) & 1))))
                else:
                    _exercise(r, data, stats, stream=True)


class McapIndexed(FileTarget):
    name = "mcap_indexed"
    fmt = "mcap"
    doc = "MCAP from memory (indexed reads): summary, messages in file/log-time order and reversed, decode, columns"


class McapStream(FileTarget):
    name = "mcap_stream"
    fmt = "mcap"
    stream = True
    doc = "MCAP through a non-seekable pipe: streamed file-order reads, summary after and before the pass"


class Bag(FileTarget):
    name = "bag"
    fmt = "bag"
    doc = "ROS bags: V2.0 (none/bz2/lz4, indexed and unindexed), #ROSRECORD V1.2/V1.1, #ROSLOG V1.1/V1.0, version 0"


class Ulog(FileTarget):
    name = "ulog"
    fmt = "ulog"
    doc = "PX4 ULog: corpus logs and slices of them, hostile formats, lying sizes, ids and appended-data offsets"


# ------------------------------------------------------------------------------ decoders
class DecoderTarget(Target):
    """Input: ``pack(kind, [type name, schema encoding, definition, payload, ...])``."""

    message_encoding = ""

    def new_case(self, rng: random.Random) -> tuple[str, str, bytes, list[bytes]]:
        raise NotImplementedError

    def generate(self, rng: random.Random, pool: Sequence[bytes]) -> bytes:
        if pool and rng.random() < 0.35:
            got = unpack(rng.choice(pool))
            if got is not None and len(got[1]) >= 3:
                parts = list(got[1])
                i = rng.randrange(len(parts))
                if i == 1:
                    parts[1] = rng.choice((b"ros1msg", b"ros2msg", b"ros2idl", b"ulog", b""))
                else:
                    parts[i] = generic(rng, parts[i])
                if rng.random() < 0.2:
                    parts.append(rng.randbytes(rng.choice((0, 4, 40))))
                return pack(b"DC", parts)
        name, enc, text, payloads = self.new_case(rng)
        return pack(b"DC", [name.encode("utf-8", "surrogatepass"), enc.encode(), text, *payloads])

    def run(self, data: bytes, stats: Stats) -> None:
        from polybag.codecs import codec_for
        from polybag.codecs.columns import payload_columns
        from polybag.model import Channel, Schema

        got = unpack(data)
        if got is None or len(got[1]) < 3:
            return
        name_b, enc_b, text, *payloads = got[1]
        name = name_b.decode("utf-8", "replace")
        schema = Schema(1, name, enc_b.decode("latin-1"), text)
        channel = Channel(1, "/fuzz", self.message_encoding, schema, {})
        codec = attempt(lambda: codec_for(channel))
        if codec is None:
            return
        stats.mark("codec")
        for p in payloads:
            obj = attempt(lambda p=p: codec.decode(p, topic="/fuzz"))
            if obj is not None:
                stats.mark("decoded")
                attempt(lambda obj=obj: codec.encode(obj))
            d = attempt(lambda p=p: codec.to_dict(p, topic="/fuzz"))
            if d is not None:
                attempt(lambda d=d: codec.encode(d))
        if attempt(lambda: payload_columns(codec, payloads, None, "/fuzz")) is not None:
            stats.mark("columns")


class Ros1Decoder(DecoderTarget):
    name = "ros1"
    doc = "ROS 1 codec: random, deep, self-referencing and odd-named definitions; payloads with lying lengths"
    message_encoding = "ros1"

    def new_case(self, rng: random.Random) -> tuple[str, str, bytes, list[bytes]]:
        m = defs.gen_model(rng, "ros1")
        text = defs.render_msg(m, "ros1").encode("utf-8", "surrogatepass")
        pays = [defs.payload(rng, m, cdr=False, lie=rng.choice((0, 0, 0.05, 0.3))) for _ in range(rng.randint(1, 4))]
        return m.main, "ros1msg", text, pays


class CdrDecoder(DecoderTarget):
    name = "cdr"
    doc = "CDR codec (ros2msg and ros2idl schemas): random/hostile definitions, little/big endian payloads"
    message_encoding = "cdr"

    def new_case(self, rng: random.Random) -> tuple[str, str, bytes, list[bytes]]:
        m = defs.gen_model(rng, "ros2")
        if rng.random() < 0.3:
            enc, text = "ros2idl", defs.render_idl(m)
        else:
            enc, text = "ros2msg", defs.render_msg(m, "ros2")
        pays = [defs.payload(rng, m, cdr=True, lie=rng.choice((0, 0, 0.05, 0.3))) for _ in range(rng.randint(1, 4))]
        return m.main, enc, text.encode("utf-8", "surrogatepass"), pays


class UlogDecoder(DecoderTarget):
    name = "ulog_decoder"
    doc = "ULog codec: random/deep/self-referencing formats, huge arrays, repeated and padding fields"
    message_encoding = "ulog"

    def new_case(self, rng: random.Random) -> tuple[str, str, bytes, list[bytes]]:
        name, lines = defs.gen_ulog_formats(rng)
        size = defs.ulog_size(name, lines)
        pays = []
        for _ in range(rng.randint(1, 4)):
            n = size if rng.random() < 0.7 else max(0, size + rng.choice((-1, 1, -8, 100)))
            pays.append(rng.randbytes(min(n, 1 << 16)))
        if rng.random() < 0.05:
            name = rng.choice((odd_name(rng), "logged_string", "nothere"))
        return name, "ulog", "\n".join(lines).encode("utf-8", "surrogatepass"), pays


class SelfTest(Target):
    """Checks the harness itself: every kind of failure it must catch (used by the tests)."""

    name = "_selftest"
    doc = "the harness's own check: an escape, a masked MemoryError, an allocation past the cap, a hang"

    def generate(self, rng: random.Random, pool: Sequence[bytes]) -> bytes:
        return bytes([rng.randrange(8)])

    def run(self, data: bytes, stats: Stats) -> None:
        import signal
        import time

        from polybag.errors import FormatError

        k = data[0] if data else 0
        if k == 1:
            {}["missing"]  # noqa: B018 - an escape
        elif k == 2:

            def masked() -> None:
                try:
                    raise MemoryError
                except MemoryError:
                    raise FormatError("out of memory, said politely") from None

            attempt(masked)
        elif k == 3:
            bytearray(8 << 30)  # past the address-space cap
        elif k == 4:
            time.sleep(60)  # past the case time bound
        elif k == 5:
            signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM])
            time.sleep(60)  # deaf to the alarm: the supervisor must kill it
        elif k == 6:
            attempt(lambda: (_ for _ in ()).throw(FormatError("fine")))
        elif k == 7:
            big = b"x" * (300 << 20)  # resident memory past a 256 MiB bound
            del big


#: Modules beside this one that hold more targets, each as a module-level ``TARGETS`` list
#: (one module per surface: rosbag2 directories, the HTTP client, record configs, DDS peers...).
SURFACE_MODULES = (
    "fuzz.rosbag2",
    "fuzz.rosbag2_journal",
    "fuzz.outputs",
    "fuzz.http",
    "fuzz.record_config",
    "fuzz.ros2_peer",
    "fuzz.remote_plans",
    "fuzz.s3_answers",
    "fuzz.printing",
)


def all_targets() -> dict[str, type[Target]]:
    import importlib
    import importlib.util

    from fuzz.net import TcprosTarget, XmlrpcTarget

    classes: list[type[Target]] = [
        McapIndexed, McapStream, Bag, Ulog, Ros1Decoder, CdrDecoder, UlogDecoder, TcprosTarget, XmlrpcTarget,
        SelfTest,
    ]
    for mod_name in SURFACE_MODULES:
        if importlib.util.find_spec(mod_name) is not None:
            classes.extend(importlib.import_module(mod_name).TARGETS)
    return {c.name: c for c in classes}
