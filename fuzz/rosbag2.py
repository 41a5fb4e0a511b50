"""Targets for rosbag2 directories and their SQLite storage (issue 26).

``rosbag2_dir``: a whole bag directory packed in one input: ``metadata.yaml``, storage files
(sqlite3, MCAP, whole-file zstd), rollback journals (real ones, and ones naming a
"super-journal" outside the bag), write-ahead logs, symlinks (to a sentinel tree outside the
bag, to ``/dev/zero``), FIFOs, directories where files should be, files listed twice or not
at all.  Each case lays the directory out afresh, opens it with ``polybag.open(dir)`` (plain or
``recover=True``) and reads everything (summary, messages in every order, decoding, columns),
runs ``check`` and ``recover`` into a fresh folder.  Invariants beyond "only PolybagError":

- the sentinel tree outside the bag (files, a ``.db3`` with a journal, a directory) is the
  same after the case, byte for byte, symlink for symlink;
- the input directory itself is unchanged (no rollback, no checkpoint, no file created);
- nothing is left in the worker's private ``TMPDIR`` once the readers are closed.

``db3_pages``: a ``.db3`` (mutated page by page and byte by byte) read by the page reader
(:mod:`polybag.formats.rosbag2.pages`) and by SQLite opened read-only and immutable: when the
page reader gives rows, SQLite must give the same rows (row id, topic id, timestamp, data);
the file read through ``polybag.open`` gives only PolybagError.
"""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import struct
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polybag
from fuzz.mutate import generic, odd_name
from fuzz.sandbox import InvariantBroken, describe, empty, snapshot
from fuzz.targets import MAX_CHUNK_BYTES, Stats, Target, _exercise, attempt, flags, pack, unpack

JOURNAL_MAGIC = bytes.fromhex("d9d505f920a163d7")
PAYLOAD = b"\x00\x01\x00\x00\x04\x00\x00\x00abc\x00"
SENTINEL_TOKEN = b"@SENTINEL@"  # replaced by the sentinel tree's path when a case is laid out
# entry kinds (the first byte of an entry's header part)
FILE, LINK_SENTINEL, LINK_DEVZERO, FIFO, DIRECTORY, LINK_SENTINEL_DB, SUPER = range(7)
# SUPER: a hot journal naming a super-journal, built when the case is laid out (content: the
# super-journal's path, SENTINEL_TOKEN standing for the sentinel tree) for the database beside it
_LEFT_IN_TMP = 0  # entries a case may leave in the private TMPDIR once its readers are closed


def _names(data: bytes) -> str:
    """A file name from input bytes: no path separators, no NUL, not empty."""
    text = data.decode("utf-8", "replace").replace("/", "_").replace("\0", "_").replace("\\", "_")
    text = text.strip()[:80]
    return text if text not in ("", ".", "..") else "x"


def _write_bag(root: Path, name: str, **opts: Any) -> Path:
    bag = root / name
    with polybag.Writer(str(bag), format="rosbag2", **opts) as w:
        s = w.add_schema("std_msgs/msg/String", "ros2msg", b"string data\n")
        a = w.add_channel("/a", "cdr", s, {"offered_qos_profiles": "- history: 1\n  depth: 5"})
        b = w.add_channel("/b/c", "cdr", s)
        for i in range(60):
            w.write(a if i % 3 else b, PAYLOAD, log_time=1_000 + (i * 37) % 60)
    return bag


def _hot_copy(db: Path, out_dir: Path) -> tuple[bytes, bytes]:
    """The bytes of ``db`` and of its hot journal, caught in the middle of a transaction whose
    pages were spilled to the file (as a killed writer leaves them)."""
    work = out_dir / "hot"
    work.mkdir()
    live = work / "x.db3"
    shutil.copyfile(db, live)
    con = sqlite3.connect(live, isolation_level=None)
    con.execute("PRAGMA journal_mode=DELETE")
    con.execute("PRAGMA cache_size=2")
    con.execute("BEGIN")
    con.execute("UPDATE messages SET data = zeroblob(5) WHERE id % 4 = 0")
    con.executemany("INSERT INTO messages(topic_id, timestamp, data) VALUES (1, ?, ?)", [(9000 + i, b"q" * 900) for i in range(60)])
    got = (live.read_bytes(), (work / "x.db3-journal").read_bytes())
    con.execute("ROLLBACK")
    con.close()
    shutil.rmtree(work)
    return got


def _live_wal(db: Path, out_dir: Path) -> tuple[bytes, bytes]:
    """The bytes of ``db`` in WAL mode and of its ``-wal`` holding committed rows."""
    work = out_dir / "wal"
    work.mkdir()
    live = work / "x.db3"
    shutil.copyfile(db, live)
    con = sqlite3.connect(live, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA wal_autocheckpoint=0")
    con.executemany("INSERT INTO messages(topic_id, timestamp, data) VALUES (2, ?, ?)", [(5000 + i, PAYLOAD) for i in range(20)])
    got = (live.read_bytes(), Path(str(live) + "-wal").read_bytes())
    con.close()
    shutil.rmtree(work)
    return got


def super_journal(db: bytes, target: bytes) -> bytes:
    """A hot journal for the database ``db`` naming the super-journal ``target``."""
    ps = int.from_bytes(db[16:18], "big") if len(db) >= 18 else 4096
    ps = 65536 if ps == 1 else ps if ps >= 512 and ps & (ps - 1) == 0 else 4096
    header = (JOURNAL_MAGIC + struct.pack(">5I", 0, 7, max(1, len(db) // ps), 512, ps)).ljust(512, b"\0")
    return header + struct.pack(">I", (1 << 30) // ps + 1) + target + struct.pack(">II", len(target), sum(target) & 0xFFFFFFFF) + JOURNAL_MAGIC


class Rosbag2Dir(Target):
    name = "rosbag2_dir"
    doc = "a rosbag2 directory (metadata.yaml, storage, journals, WAL, symlinks) opened, read, checked, recovered"

    def setup(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="polybag-fuzz-rosbag2-"))
        self.tmp = self.root / "tmp"
        self.tmp.mkdir()
        self.sentinel = self.root / "sentinel"
        (self.sentinel / "dir").mkdir(parents=True)
        (self.sentinel / "precious.txt").write_bytes(b"keep me\n")
        (self.sentinel / "dir" / "inner.txt").write_bytes(b"and me\n")
        os.environ["TMPDIR"] = str(self.tmp)  # SQLite's temporary files, polybag's copies
        tempfile.tempdir = str(self.tmp)
        made = self.root / "made"
        made.mkdir()
        bags = [
            _write_bag(made, "s", storage="sqlite3"),
            _write_bag(made, "m", storage="mcap"),
            _write_bag(made, "z", storage="sqlite3", compression_mode="file", compression="zstd"),
            _write_bag(made, "p", storage="sqlite3", compression_mode="message", compression="zstd"),
        ]
        db = next((made / "s").glob("*.db3"))
        shutil.copyfile(db, self.sentinel / "outside.db3")
        self.hot = _hot_copy(db, made)
        self.wal = _live_wal(db, made)
        self.sentinel_db = db.read_bytes()
        (self.sentinel / "outside.db3-journal").write_bytes(self.hot[1])
        self.before = snapshot(self.sentinel)
        self.seeds = []
        for bag in bags:
            entries = [(bytes([FILE]) + p.name.encode(), p.read_bytes()) for p in sorted(bag.iterdir())]
            self.seeds.append(pack(b"RD", [x for e in entries for x in e]))
        shutil.rmtree(made)
        self.info["seeds"] = len(self.seeds)

    def teardown(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    # --- inputs -----------------------------------------------------------------------------
    def generate(self, rng: random.Random, pool: Sequence[bytes]) -> bytes:
        src = rng.choice(pool) if pool and rng.random() < 0.5 else rng.choice(self.seeds)
        got = unpack(src)
        parts = got[1] if got is not None else []
        entries = [(parts[i], parts[i + 1]) for i in range(0, len(parts) - 1, 2)]
        if not entries:
            return rng.choice(self.seeds)
        for _ in range(rng.choice((1, 1, 2, 3))):
            entries = self._mutate(rng, entries)
        entries = entries[:24]
        out = pack(b"RD", [x for e in entries for x in e])
        return out if len(out) <= 4 << 20 else src

    def _mutate(self, rng: random.Random, entries: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
        entries = list(entries)
        names = [h[1:].decode("utf-8", "replace") for h, _ in entries]
        dbs = [i for i, n in enumerate(names) if n.endswith(".db3")]
        meta = next((i for i, n in enumerate(names) if n == "metadata.yaml"), None)
        k = rng.randrange(14)
        if k == 0 and dbs:  # a hot journal naming a super-journal outside the bag
            i = rng.choice(dbs)
            target = rng.choice((SENTINEL_TOKEN + b"/precious.txt", SENTINEL_TOKEN + b"/dir", SENTINEL_TOKEN + b"/outside.db3-journal", b"precious.txt", b"../x"))
            entries.append((bytes([SUPER]) + names[i].encode() + b"-journal", target))
        elif k == 1 and dbs:  # a real interrupted transaction: the torn database and its journal
            i = rng.choice(dbs)
            entries[i] = (entries[i][0], self.hot[0])
            entries.append((bytes([FILE]) + names[i].encode() + b"-journal", self.hot[1]))
        elif k == 2 and dbs:  # a live write-ahead log (and sometimes a -shm)
            i = rng.choice(dbs)
            entries[i] = (entries[i][0], self.wal[0])
            entries.append((bytes([FILE]) + names[i].encode() + b"-wal", self.wal[1]))
            if rng.random() < 0.5:
                entries.append((bytes([FILE]) + names[i].encode() + b"-shm", rng.randbytes(64)))
        elif k == 3 and entries:  # a side file or storage file that is a symlink, FIFO, directory
            i = rng.randrange(len(entries))
            base = names[i]
            name = rng.choice((base, base + "-journal", base + "-wal", base + "-shm"))
            kind = rng.choice((LINK_SENTINEL, LINK_DEVZERO, FIFO, DIRECTORY, LINK_SENTINEL_DB))
            entries = [e for e in entries if e[0][1:].decode("utf-8", "replace") != name]
            entries.append((bytes([kind]) + name.encode(), b""))
        elif k == 4 and meta is not None:  # metadata.yaml listing: repeats, journals, unlisted files
            text = entries[meta][1].decode("utf-8", "replace")
            choice = rng.randrange(5)
            for n in names:
                if n.endswith((".db3", ".mcap", ".zstd")):
                    if choice == 0:
                        text = text.replace(f"- {n}\n", f"- {n}\n  - ./{n}\n", 1)
                    elif choice == 1:
                        text = text.replace(f"- {n}\n", f"- {n}\n  - {n}-journal\n", 1)
                    elif choice == 2:
                        text = text.replace(f"- {n}\n", f"- {n}-wal\n", 1)
            if choice == 3 and dbs:
                i = rng.choice(dbs)
                entries.append((bytes([FILE]) + b"unlisted_9.db3", entries[i][1]))
            if choice == 4:
                text = text.replace("relative_file_paths:", "relative_file_paths:\n  - metadata.yaml", 1)
            entries[meta] = (entries[meta][0], text.encode())
        elif k == 5 and meta is not None:  # YAML that lies or explodes (aliases), kept small
            body = rng.choice(
                (
                    b"rosbag2_bagfile_information:\n  custom_data: &a [x, x, x, x, x, x, x, x]\n  b: &b [*a, *a, *a, *a, *a, *a, *a, *a]\n"
                    b"  c: &c [*b, *b, *b, *b, *b, *b, *b, *b]\n  d: &d [*c, *c, *c, *c, *c, *c, *c, *c]\n  e: [*d, *d, *d, *d, *d, *d, *d, *d]\n",
                    entries[meta][1] + b"\n  custom_data: {k: " + b"[" * 200 + b"]" * 200 + b"}\n",
                    entries[meta][1].replace(b"message_count: ", b"message_count: 1" + b"0" * 30 + b"#", 1),
                )
            )
            entries[meta] = (entries[meta][0], body)
        elif k in (6, 7) and entries:  # bytes of one file, format-blind
            i = rng.randrange(len(entries))
            if entries[i][0][:1] == bytes([FILE]) and entries[i][1]:
                entries[i] = (entries[i][0], generic(rng, entries[i][1], [e[1] for e in entries]))
        elif k == 8 and dbs:  # SQL-level edits of a storage file: schemas that are not rosbag2's
            i = rng.choice(dbs)
            entries[i] = (entries[i][0], _sql_edit(rng, entries[i][1]))
        elif k == 9 and entries:  # a file compressed as a whole (sometimes a small bomb)
            import zstandard

            i = rng.randrange(len(entries))
            if entries[i][0][:1] == bytes([FILE]) and names[i] != "metadata.yaml":
                raw = entries[i][1] if rng.random() < 0.7 else bytes(rng.choice((1 << 20, 64 << 20)))
                z = zstandard.ZstdCompressor(level=3).compress(raw)
                entries[i] = (bytes([FILE]) + (names[i] + ".zstd").encode(), z)
        elif k == 10 and entries:  # a renamed or odd-named entry
            i = rng.randrange(len(entries))
            entries[i] = (entries[i][0][:1] + odd_name(rng).encode("utf-8", "surrogatepass")[:60], entries[i][1])
        elif k == 11 and entries:  # a duplicated entry under another name
            i = rng.randrange(len(entries))
            entries.append((entries[i][0][:1] + (names[i] + rng.choice(("", "_1", ".db3", ".mcap"))).encode(), entries[i][1]))
        elif k == 12 and len(entries) > 1:  # an entry dropped
            entries.pop(rng.randrange(len(entries)))
        elif k == 13 and dbs:  # a journal or WAL of random bytes, a PERSIST (zeroed) or empty one
            i = rng.choice(dbs)
            content = rng.choice((b"", bytes(512), rng.randbytes(rng.choice((8, 100, 4096))), JOURNAL_MAGIC + rng.randbytes(600)))
            entries.append((bytes([FILE]) + (names[i] + rng.choice(("-journal", "-wal"))).encode(), content))
        return entries

    # --- a case -----------------------------------------------------------------------------
    def _lay_out(self, data: bytes, bag: Path) -> None:
        got = unpack(data)
        parts = got[1] if got is not None else []
        bag.mkdir(parents=True)
        files = {_names(parts[i][1:]): parts[i + 1] for i in range(0, len(parts) - 1, 2) if parts[i][:1] == bytes([FILE])}
        for i in range(0, len(parts) - 1, 2):
            head, content = parts[i], parts[i + 1]
            if not head:
                continue
            kind, name = head[0], _names(head[1:])
            p = bag / name
            if os.path.lexists(p):
                continue
            content = content.replace(SENTINEL_TOKEN, os.fsencode(str(self.sentinel)))
            try:
                if kind == LINK_SENTINEL:
                    p.symlink_to(self.sentinel / "precious.txt")
                elif kind == LINK_SENTINEL_DB:
                    p.symlink_to(self.sentinel / "outside.db3")
                elif kind == LINK_DEVZERO:
                    p.symlink_to("/dev/zero")
                elif kind == FIFO:
                    os.mkfifo(p)
                elif kind == DIRECTORY:
                    p.mkdir()
                elif kind == SUPER:
                    db = files.get(name[: -len("-journal")], b"") if name.endswith("-journal") else b""
                    p.write_bytes(super_journal(db if len(db) >= 100 else bytes(4096), content[:4000]))
                else:
                    p.write_bytes(content)
            except OSError:
                continue

    def run(self, data: bytes, stats: Stats) -> None:
        case = self.root / "case"
        shutil.rmtree(case, ignore_errors=True)
        empty(self.tmp)
        bag = case / "bag"
        self._lay_out(data, bag)
        inside = snapshot(bag)
        f = flags(data)
        opts: dict[str, Any] = {"max_chunk_bytes": MAX_CHUNK_BYTES}
        if f & 0x03 == 0:
            opts["recover"] = True
        r = attempt(lambda: polybag.open(str(bag), **opts))
        if r is not None:
            stats.mark("opened")
            with r:
                _exercise(r, data, stats)
        if f & 0x04:
            from polybag.ops.check import check_any

            res = attempt(lambda: check_any(str(bag)))
            if res is not None:
                stats.mark("check-problems", len(res.get("problems", [])))
        if f & 0x08:
            from polybag.ops import recover

            res = attempt(lambda: recover(str(bag), str(case / "out"), format="rosbag2"))
            if res is not None:
                stats.mark("recovered", int(getattr(res, "messages", 0) or 0))
        self._check(bag, inside)

    def _check(self, bag: Path, inside: dict[str, Any]) -> None:
        now = snapshot(self.sentinel)
        if now != self.before:
            diff = describe(self.before, now)
            _restore(self)
            raise InvariantBroken(f"the sentinel tree outside the bag changed: {diff}")
        after = snapshot(bag)
        if after != inside:
            raise InvariantBroken(f"the input bag directory changed: {describe(inside, after)}")
        left = os.listdir(self.tmp)
        if len(left) > _LEFT_IN_TMP:
            empty(self.tmp)
            raise InvariantBroken(f"left in the private TMPDIR after the readers closed: {left[:5]}")


def _restore(t: Rosbag2Dir) -> None:
    """Put the sentinel tree back as it was (after a broken invariant was reported)."""
    shutil.rmtree(t.sentinel, ignore_errors=True)
    (t.sentinel / "dir").mkdir(parents=True)
    (t.sentinel / "precious.txt").write_bytes(b"keep me\n")
    (t.sentinel / "dir" / "inner.txt").write_bytes(b"and me\n")
    (t.sentinel / "outside.db3").write_bytes(t.sentinel_db)
    (t.sentinel / "outside.db3-journal").write_bytes(t.hot[1])


def _sql_edit(rng: random.Random, db: bytes) -> bytes:
    """The database with one SQL-level change: a generated data column, a view or virtual
    table named messages/topics, no timestamp index, text or huge rows, odd topic ids."""
    fd, path = tempfile.mkstemp(suffix=".db3")
    os.close(fd)
    try:
        Path(path).write_bytes(db)
        con = sqlite3.connect(path, isolation_level=None)
        edits = [
            ("DROP INDEX IF EXISTS timestamp_idx",),
            (
                "ALTER TABLE messages RENAME TO m0",
                "CREATE TABLE messages(id INTEGER PRIMARY KEY, topic_id INTEGER, timestamp INTEGER,"
                " data BLOB GENERATED ALWAYS AS (zeroblob(200000000)))",
                "INSERT INTO messages(id, topic_id, timestamp) SELECT id, topic_id, timestamp FROM m0",
                "DROP TABLE m0",
            ),
            ("ALTER TABLE messages RENAME TO m0", "CREATE VIEW messages AS SELECT id, topic_id, timestamp, zeroblob(100000000) AS data FROM m0"),
            ("ALTER TABLE topics RENAME TO t0", "CREATE VIEW topics AS SELECT id, printf('%.*c', 100000000, 'x') AS name, type, serialization_format FROM t0"),
            ("ALTER TABLE messages RENAME TO m0", "CREATE VIRTUAL TABLE messages USING fts5(topic_id, timestamp, data)"),
            ("UPDATE messages SET data = 'text data' WHERE id % 5 = 0",),
            ("UPDATE messages SET data = zeroblob(300000) WHERE id = 3",),
            ("UPDATE messages SET topic_id = 77 WHERE id = 4",),
            ("UPDATE messages SET timestamp = -1 WHERE id = 5",),
            ("CREATE TRIGGER t AFTER INSERT ON messages BEGIN DELETE FROM topics; END",),
            ("PRAGMA journal_mode=WAL",),
            ("VACUUM",),
        ]
        for q in rng.choice(edits):
            try:
                con.execute(q)
            except sqlite3.Error:
                break
        con.close()
        return Path(path).read_bytes()
    except sqlite3.Error:
        return db
    finally:
        for suffix in ("", "-journal", "-wal", "-shm"):
            try:
                os.remove(path + suffix)
            except OSError:
                pass


# ------------------------------------------------------------------------------ db3_pages
def _db3_seeds(root: Path) -> list[bytes]:
    out = []
    for name, opts in (("a", {}), ("b", {})):
        bag = _write_bag(root, name, storage="sqlite3", **opts)
        out.append(next(bag.glob("*.db3")).read_bytes())
    # payloads that spill into overflow pages, many small rows, an unindexed table, page sizes
    for ps, sizes in ((4096, (10, 5000, 70000, 3)), (512, (1, 600, 2000)), (65536, (100, 200_000)), (1024, (7,) * 400)):
        path = root / f"p{ps}.db3"
        con = sqlite3.connect(path)
        con.execute(f"PRAGMA page_size={ps}")
        con.execute("CREATE TABLE topics(id INTEGER PRIMARY KEY, name TEXT NOT NULL, type TEXT NOT NULL, serialization_format TEXT NOT NULL, offered_qos_profiles TEXT NOT NULL)")
        con.execute("INSERT INTO topics VALUES (1, '/a', 'std_msgs/msg/String', 'cdr', ''), (3, '/b', 'std_msgs/msg/String', 'cdr', '')")
        con.execute("CREATE TABLE messages(id INTEGER PRIMARY KEY, topic_id INTEGER NOT NULL, timestamp INTEGER NOT NULL, data BLOB NOT NULL)")
        if ps != 1024:
            con.execute("CREATE INDEX timestamp_idx ON messages (timestamp ASC)")
        con.executemany(
            "INSERT INTO messages(topic_id, timestamp, data) VALUES (?, ?, ?)",
            [(1 if i % 2 else 3, (i * 7919) % 1000, bytes([i % 251]) * n) for i, n in enumerate(sizes)],
        )
        con.commit()
        con.close()
        out.append(path.read_bytes())
    return out


def _page_mutate(rng: random.Random, data: bytes) -> bytes:
    """Page-aware damage: a page's header, cell pointers or a cell's varints rewritten, pages
    swapped, zeroed or duplicated, the file cut at a page boundary."""
    if len(data) < 100:
        return data
    ps = int.from_bytes(data[16:18], "big")
    ps = 65536 if ps == 1 else ps
    if ps < 512 or ps & (ps - 1) or len(data) < 2 * ps:
        return generic(rng, data)
    n = len(data) // ps
    b = bytearray(data)
    pg = rng.randrange(1, n)  # not page 1 (the schema): SQLite and the page reader read the same table
    base = pg * ps
    k = rng.randrange(7)
    if k == 0:  # the page header: kind, free block, cell count, content start
        off = base + rng.choice((0, 1, 3, 4, 5, 7, 8))
        b[off] = rng.choice((0, 2, 5, 10, 13, 0xFF, b[off] ^ 1))
    elif k == 1:  # a cell pointer
        cells = int.from_bytes(b[base + 3 : base + 5], "big")
        if cells:
            hdr = 12 if b[base] in (2, 5) else 8
            at = base + hdr + 2 * rng.randrange(cells)
            if at + 2 <= len(b):
                b[at : at + 2] = (rng.choice((0, 1, ps - 1, ps, 0xFFFF, rng.randrange(1 << 16))) & 0xFFFF).to_bytes(2, "big")
    elif k == 2:  # bytes inside the cell content area (varints, record headers, integers)
        for _ in range(rng.choice((1, 2, 4))):
            off = base + rng.randrange(ps)
            b[off] = rng.choice((0, 0x7F, 0x80, 0x81, 0xFF, rng.randrange(256)))
    elif k == 3 and n > 2:  # two pages swapped
        other = rng.randrange(1, n) * ps
        b[base : base + ps], b[other : other + ps] = b[other : other + ps], b[base : base + ps]
    elif k == 4:  # a page zeroed
        b[base : base + ps] = bytes(ps)
    elif k == 5 and n > 2:  # a page copied over another (a page reached twice)
        other = rng.randrange(1, n) * ps
        b[other : other + ps] = b[base : base + ps]
    else:  # cut at a page boundary
        return bytes(b[: pg * ps])
    return bytes(b)


class Db3Pages(Target):
    name = "db3_pages"
    doc = "a .db3 read by the page reader and by SQLite (immutable): both agree, or the page reader gives up"

    def setup(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="polybag-fuzz-db3-"))
        made = self.root / "made"
        made.mkdir()
        self.seeds = _db3_seeds(made)
        shutil.rmtree(made)
        here = Path(__file__).resolve().parents[1] / "tests" / "formats" / "rosbag2" / "data"
        for p in sorted(here.rglob("*.db3")):
            if p.stat().st_size < 1 << 20:
                self.seeds.append(p.read_bytes())
        self.info["seeds"] = len(self.seeds)

    def teardown(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def generate(self, rng: random.Random, pool: Sequence[bytes]) -> bytes:
        src = rng.choice(pool) if pool and rng.random() < 0.5 else rng.choice(self.seeds)
        data = src
        for _ in range(rng.choice((1, 1, 2, 3))):
            data = _page_mutate(rng, data) if rng.random() < 0.7 else generic(rng, data, self.seeds)
        return data

    def run(self, data: bytes, stats: Stats) -> None:
        from polybag.formats.rosbag2.pages import PageTable
        from polybag.formats.rosbag2.sqlite_records import GiveUp

        path = self.root / "x.db3"
        path.write_bytes(data)
        try:
            sql_rows: list[tuple[Any, ...]] | None = None
            known: set[int] | None = None
            try:
                con = sqlite3.connect(path.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
            except sqlite3.Error:
                con = None
            if con is not None:
                try:
                    try:
                        known = {int(r[0]) for r in con.execute("SELECT id FROM topics") if isinstance(r[0], int)}
                        sql_rows = con.execute("SELECT id, topic_id, timestamp, data FROM messages ORDER BY id").fetchall()
                    except (sqlite3.Error, ValueError, OverflowError, MemoryError):  # (NOMEM: a damaged schema)
                        sql_rows = None
                    table = PageTable.open(str(path), con, MAX_CHUNK_BYTES) if known is not None else None
                    if table is not None:
                        stats.mark("page-table")
                        try:
                            page_rows = []
                            for rows in table.select(None, known or set(), "file", False):
                                datas = table.payloads(rows, 0, len(rows))
                                page_rows.extend(zip(rows.rowid.tolist(), rows.tid.tolist(), rows.ts.tolist(), datas))
                        except GiveUp:
                            stats.mark("gave-up")
                            page_rows = None
                        finally:
                            table.close()
                        if page_rows is not None:
                            stats.mark("page-rows", len(page_rows))
                            if sql_rows is None:
                                raise InvariantBroken("the page reader read a messages table SQLite cannot read")
                            want = [(a, b, c, bytes(d)) for a, b, c, d in sql_rows]
                            if [(a, b, c, bytes(d)) for a, b, c, d in page_rows] != want:
                                raise InvariantBroken(
                                    f"the page reader and SQLite disagree ({len(page_rows)} vs {len(want)} rows)"
                                )
                finally:
                    con.close()
            f = flags(data)
            opts: dict[str, Any] = {"max_chunk_bytes": MAX_CHUNK_BYTES}
            if f & 0x03 == 0:
                opts["recover"] = True
            r = attempt(lambda: polybag.open(str(path), **opts))
            if r is not None:
                stats.mark("opened")
                with r:
                    _exercise(r, data, stats)
        finally:
            path.unlink(missing_ok=True)


TARGETS = [Rosbag2Dir, Db3Pages]

__all__ = ["TARGETS", "Db3Pages", "InvariantBroken", "Rosbag2Dir", "super_journal"]
