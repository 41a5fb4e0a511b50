"""Fuzz target ``db3_journal`` (issue 28): a rosbag2 ``.db3`` with a hostile ``-journal`` beside it.

The database is fixed (a real bag caught in a killed transaction: its pages spilled into
the file); the input is the journal.  Mutations aim at what the journal player reads: the
header's record count, nonce, original size, sector and page sizes, record page numbers,
checksums, cuts, repeated records, a super-journal tail.  Each case opens the bag (plain
read) and reads every message.  Invariants, besides the harness's (only ``PolybagError``,
time, memory):

* the input (database and journal) is byte-for-byte unchanged and the private TMPDIR is
  empty once the reader is closed;
* when polybag reads the bag, its messages are exactly those SQLite gives after rolling the
  same journal back in a scratch copy (only for journals without a super-journal tail, which
  SQLite would act on outside the copy).
"""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import struct
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polybag
from fuzz.mutate import generic
from fuzz.sandbox import InvariantBroken, empty
from fuzz.targets import MAX_CHUNK_BYTES, Stats, Target, attempt

JOURNAL_MAGIC = bytes.fromhex("d9d505f920a163d7")
PAYLOAD = b"\x00\x01\x00\x00\x04\x00\x00\x00abc\x00"


def _killed(root: Path) -> tuple[bytes, bytes, bytes]:
    """(metadata.yaml, database, journal) of a bag whose transaction was caught mid-way."""
    root.mkdir(parents=True, exist_ok=True)
    bag = root / "bag"
    with polybag.Writer(str(bag), format="rosbag2", storage="sqlite3") as w:
        s = w.add_schema("std_msgs/msg/String", "ros2msg", b"string data\n")
        ch = w.add_channel("/a", "cdr", s)
        for i in range(150):
            w.write(ch, PAYLOAD, log_time=1_000 + i)
    (db,) = bag.glob("*.db3")
    live = root / "live.db3"
    shutil.copyfile(db, live)
    con = sqlite3.connect(live, isolation_level=None)
    con.execute("PRAGMA journal_mode=DELETE")
    con.execute("PRAGMA cache_size=2")  # changed pages spill into the file before the commit
    con.execute("BEGIN")
    con.execute("UPDATE messages SET data = zeroblob(5) WHERE id % 4 = 0")
    con.executemany("INSERT INTO messages(topic_id, timestamp, data) VALUES (1, ?, ?)", [(9000 + i, b"q" * 900) for i in range(40)])
    con.execute("DELETE FROM messages WHERE id < 6")
    got = ((bag / "metadata.yaml").read_bytes(), live.read_bytes(), Path(str(live) + "-journal").read_bytes())
    con.execute("ROLLBACK")
    con.close()
    return got


def _mutate(rng: random.Random, j: bytes, ps: int) -> bytes:
    """One journal-aware change."""
    b = bytearray(j)
    k = rng.randrange(10)
    if k == 0 and len(b) >= 28:  # a header field
        field = rng.choice((8, 12, 16, 20, 24))
        val = rng.choice((0, 1, 7, 31, 32, 511, 512, 513, 1024, 4096, 65536, 65537, 0x7FFFFFFF, 0xFFFFFFFF, rng.getrandbits(32)))
        b[field : field + 4] = struct.pack(">I", val)
    elif k == 1 and len(b) > 512 + 4:  # a record's page number
        n = (len(b) - 512) // (ps + 8)
        at = 512 + rng.randrange(max(1, n)) * (ps + 8)
        if at + 4 <= len(b):
            b[at : at + 4] = struct.pack(">I", rng.choice((0, 1, 2, 3, (1 << 30) // ps + 1, 10**6, 0xFFFFFFFF, rng.randrange(1, 64))))
    elif k == 2 and len(b) > 512:  # a record's checksum or a byte it covers
        at = rng.randrange(512, len(b))
        b[at] ^= 1 << rng.randrange(8)
    elif k == 3:  # cut anywhere
        b = b[: rng.randrange(0, len(b) + 1)]
    elif k == 4 and len(b) > 512 + ps + 8:  # a record repeated, or moved first
        rec = bytes(b[512 : 512 + ps + 8])
        b[512:512] = rec if rng.random() < 0.5 else rec[:4] + bytes(ps) + rec[-4:]
    elif k == 5:  # a second segment header
        b += bytes(-len(b) % 512) + JOURNAL_MAGIC + struct.pack(">5I", rng.choice((0, 1, 0xFFFFFFFF)), 0, 3, 512, ps)
    elif k == 6:  # a super-journal tail
        name = rng.choice((b"x-mj01", b"/etc/hostname", b"\0", b"a" * 5000))
        b += struct.pack(">I", (1 << 30) // ps + 1) + name + struct.pack(">II", len(name), sum(name) & 0xFFFFFFFF) + JOURNAL_MAGIC
    elif k == 7:  # the first byte: zero (PERSIST) or not
        if b:
            b[0] = rng.choice((0, 1, 0xD9))
    elif k == 8:  # padding that is not there, or too much
        b = b[:28] + b[rng.choice((28, 100, 512, 1024)) :]
    else:
        return generic(rng, bytes(b), [j])
    return bytes(b)


class Db3Journal(Target):
    name = "db3_journal"
    doc = "a .db3 beside a hostile -journal: read as SQLite would after rolling back, input untouched"

    def setup(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="polybag-fuzz-journal-"))
        self.meta, self.db, journal = _killed(self.root / "made")
        self.ps = int.from_bytes(self.db[16:18], "big")
        self.seeds = [journal]
        self.tmp = self.root / "tmp"
        self.tmp.mkdir()
        self.info["seeds"] = 1

    def teardown(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def generate(self, rng: random.Random, pool: Sequence[bytes]) -> bytes:
        data = rng.choice(pool) if pool and rng.random() < 0.4 else self.seeds[0]
        for _ in range(rng.choice((1, 1, 2, 3))):
            data = _mutate(rng, data, self.ps)
        return data[: 1 << 21]

    def _sqlite_rows(self, journal: bytes) -> list[list[tuple[int, bytes]]] | None:
        """The messages SQLite gives after rolling ``journal`` back in a scratch copy, in
        log-time order from the table (as the page reader reads it) and through the
        timestamp index (a mutated page can make the two disagree)."""
        if journal[-8:] == JOURNAL_MAGIC:
            return None  # a super-journal tail: SQLite would look outside the copy
        d = self.root / "oracle"
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir()
        (d / "x.db3").write_bytes(self.db)
        (d / "x.db3-journal").write_bytes(journal)
        out = []
        try:
            con = sqlite3.connect(d / "x.db3")
        except sqlite3.Error:
            return None
        try:
            for sql in ("SELECT timestamp, id, data FROM messages NOT INDEXED ORDER BY id", "SELECT timestamp, id, data FROM messages ORDER BY timestamp, id"):
                try:
                    rows = sorted(con.execute(sql).fetchall(), key=lambda r: (r[0], r[1]))
                    out.append([(int(t), bytes(x)) for t, _, x in rows])
                except (sqlite3.Error, ValueError, TypeError):
                    pass
        finally:
            con.close()
        return out or None

    def run(self, data: bytes, stats: Stats) -> None:
        bag = self.root / "case" / "bag"
        shutil.rmtree(bag.parent, ignore_errors=True)
        bag.mkdir(parents=True)
        (bag / "metadata.yaml").write_bytes(self.meta)
        (bag / "bag_0.db3").write_bytes(self.db)
        (bag / "bag_0.db3-journal").write_bytes(data)
        empty(self.tmp)
        old = tempfile.tempdir
        tempfile.tempdir = str(self.tmp)
        ours: list[tuple[int, bytes]] | None = None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                r: Any = attempt(lambda: polybag.open(str(bag), max_chunk_bytes=MAX_CHUNK_BYTES))
                if r is not None:
                    stats.mark("opened")
                    with r:
                        ours = attempt(lambda: [(m.log_time, bytes(m.data)) for m in r.messages()])
        finally:
            tempfile.tempdir = old
        if (bag / "bag_0.db3").read_bytes() != self.db or (bag / "bag_0.db3-journal").read_bytes() != data:
            raise InvariantBroken("the input database or its journal changed")
        left = os.listdir(self.tmp)
        if left:
            raise InvariantBroken(f"left in the private TMPDIR after the reader closed: {left[:5]}")
        if ours is None:
            return
        stats.mark("read", len(ours))
        theirs = self._sqlite_rows(data)
        if theirs is not None and ours not in theirs:
            raise InvariantBroken(f"polybag read {len(ours)} messages, SQLite's rollback gives {len(theirs[0])} (or other bytes)")


TARGETS = [Db3Journal]

__all__ = ["TARGETS", "Db3Journal"]
