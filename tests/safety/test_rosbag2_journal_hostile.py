"""Hostile rollback journals beside a rosbag2 ``.db3`` (issue 28: a plain read plays the journal).

polybag plays a hot journal itself into a private copy (never SQLite on the input).  Every
journal here is an attacker's: a wrong magic, a record count of four billion, an original size
of four billion pages or of none, page numbers past the file, broken checksums, cuts at every
boundary, insane sector and page sizes, a super-journal tail.  Each case ends either in the
messages SQLite itself gives after rolling the same files back in a scratch copy, or in a
``PolybagError`` naming the journal (and the offset, for a header it refuses); never a
traceback, never a byte of the input changed, never a copy larger than the database file.
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
import tempfile
import textwrap
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polybag
from polybag.cli import main
from polybag.errors import PolybagError
from sqlite_bag_helpers import JOURNAL_MAGIC as MAGIC
from sqlite_bag_helpers import sqlite3_bag


def _bag(parent: Path, n: int = 200) -> tuple[Path, Path]:
    return sqlite3_bag(parent, n)


_KILLED: dict[str, bytes] = {}


def _killed(parent: Path) -> tuple[Path, Path, bytes]:
    """A bag whose writer was SIGKILLed mid-transaction (its pages spilled into the file): the
    bag, its .db3 and the real journal (made once, then copied)."""
    bag, db = _bag(parent)
    if not _KILLED:
        code = textwrap.dedent(f"""
            import os, signal, sqlite3
            con = sqlite3.connect({str(db)!r}, isolation_level=None)
            con.execute("PRAGMA journal_mode=DELETE")
            con.execute("PRAGMA cache_size=2")
            con.execute("BEGIN")
            con.execute("UPDATE messages SET data = zeroblob(5) WHERE id % 4 = 0")
            con.executemany("INSERT INTO messages(topic_id, timestamp, data) VALUES (1, ?, ?)", [(9000 + i, b"q" * 900) for i in range(60)])
            con.execute("DELETE FROM messages WHERE id < 6")
            os.kill(os.getpid(), signal.SIGKILL)
        """)
        assert subprocess.run([sys.executable, "-c", code], timeout=120).returncode == -signal.SIGKILL
        _KILLED["db"] = db.read_bytes()
        _KILLED["journal"] = Path(str(db) + "-journal").read_bytes()
    db.write_bytes(_KILLED["db"])
    return bag, db, _KILLED["journal"]


def _oracle(bag: Path, scratch: Path) -> list[list[tuple[int, bytes]]] | None:
    """SQLite's messages after rolling a copy back (None: SQLite cannot read it), in log-time
    order two ways: from the table (as polybag's page reader reads it) and through the
    timestamp index (as SQLite orders it): a mutated page can make them disagree."""
    copy = scratch / "oracle"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(bag, copy)
    (db,) = copy.glob("*.db3")
    con = sqlite3.connect(db)
    out = []
    try:
        for sql in ("SELECT timestamp, id, data FROM messages NOT INDEXED ORDER BY id", "SELECT timestamp, id, data FROM messages ORDER BY timestamp, id"):
            try:
                rows = sorted(con.execute(sql).fetchall(), key=lambda r: (r[0], r[1]))
                out.append([(int(t), bytes(d)) for t, _, d in rows])
            except (sqlite3.Error, TypeError):
                pass
    finally:
        con.close()
    return out or None


def _ours(bag: Path, tmp: Path) -> tuple[list[tuple[int, bytes]] | None, str]:
    """polybag's messages (plain read) and its warnings, or None and the error; the private
    temporary directory is empty afterwards."""
    tmp.mkdir(exist_ok=True)
    old = tempfile.tempdir
    tempfile.tempdir = str(tmp)
    try:
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            try:
                with polybag.open(bag) as r:
                    rows = [(m.log_time, bytes(m.data)) for m in r.messages()]
            except PolybagError as e:
                return None, str(e)
        return rows, " | ".join(str(w.message) for w in got)
    finally:
        tempfile.tempdir = old
        assert os.listdir(tmp) == []


def _header(nrec: int, nonce: int, orig: int, sector: int = 512, ps: int = 4096) -> bytes:
    return (MAGIC + struct.pack(">5I", nrec, nonce, orig, sector, ps)).ljust(sector if sector <= 65536 else 512, b"\0")


def _record(pgno: int, page: bytes, nonce: int, ps: int = 4096) -> bytes:
    return struct.pack(">I", pgno) + page + struct.pack(">I", (nonce + sum(page[ps - 200 :: -200])) & 0xFFFFFFFF)


def _check(bag: Path, tmp_path: Path, journal: bytes) -> tuple[list[tuple[int, bytes]] | None, str]:
    """Lay ``journal`` beside the bag's database, read it; the input is unchanged; a read
    equals SQLite's rollback of a copy (when SQLite reads it)."""
    (db,) = bag.glob("*.db3")
    j = Path(str(db) + "-journal")
    j.write_bytes(journal)
    before = {p.name: p.read_bytes() for p in bag.iterdir()}
    ours, said = _ours(bag, tmp_path / "private-tmp")
    assert {p.name: p.read_bytes() for p in bag.iterdir()} == before
    assert "Traceback" not in said
    if ours is not None and journal[-8:] != MAGIC:
        theirs = _oracle(bag, tmp_path)
        assert theirs is None or ours in theirs  # (None: SQLite reads neither the table nor the index)
    return ours, said


# --- cases SQLite plays (or ignores): polybag reads what SQLite gives ---------------------------------
@pytest.mark.parametrize(
    "make",
    [
        "real",
        "bad-magic",
        "nrec-huge",
        "nrec-all",
        "orig-huge",
        "page-beyond",
        "bad-checksum-first",
        "bad-checksum-later",
        "lock-page",
        "repeated-page",
        "second-segment",
        "first-byte-zero",
    ],
)
def test_a_hostile_journal_reads_as_sqlite_plays_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make: str) -> None:
    from polybag.formats.rosbag2 import sqlite_files

    sizes: list[int] = []
    inner = sqlite_files.restore_into

    def measured(plan: Any, j: Any, src: str, out: Any) -> int:
        n = inner(plan, j, src, out)
        out.flush()
        sizes.append(os.fstat(out.fileno()).st_size)
        return n

    monkeypatch.setattr(sqlite_files, "restore_into", measured)
    bag, db, real = _killed(tmp_path)
    ps = int.from_bytes(real[24:28], "big")
    nonce = int.from_bytes(real[12:16], "big")
    rec = ps + 8
    j = bytearray(real)
    if make == "bad-magic":
        j[1] ^= 0xFF
    elif make == "nrec-huge":
        j[8:12] = struct.pack(">I", 0xFFFFFFF0)
    elif make == "nrec-all":
        j[8:12] = struct.pack(">I", 0xFFFFFFFF)
    elif make == "orig-huge":
        j[16:20] = struct.pack(">I", 0xFFFFFFFF)
    elif make == "page-beyond":
        j[512:516] = struct.pack(">I", 10**6)
    elif make == "bad-checksum-first":
        j[512 + rec - 1] ^= 1
    elif make == "bad-checksum-later":
        j[512 + 2 * rec - 1] ^= 1
    elif make == "lock-page":
        j[512 + rec : 512 + rec + 4] = struct.pack(">I", (1 << 30) // ps + 1)
    elif make == "repeated-page":  # the same page again, with other (valid) content: SQLite writes the later copy
        pgno = int.from_bytes(j[512:516], "big")
        j[512 + rec : 512 + 2 * rec] = _record(pgno, bytes(j[516 : 516 + ps - 1]) + b"\x7f", nonce, ps)
    elif make == "second-segment":
        j += bytes(-len(j) % 512) + _header(1, nonce, 2) + _record(2, bytes(ps), nonce, ps)
    elif make == "first-byte-zero":
        j[0] = 0
    ours, said = _check(bag, tmp_path, bytes(j))
    if make in ("real", "nrec-huge", "nrec-all", "page-beyond", "orig-huge", "repeated-page", "second-segment"):
        assert ours is not None and "rolled back an unfinished transaction" in said
    if make == "bad-magic":
        assert "nothing to roll back" in said or ours is None
    assert all(s <= db.stat().st_size for s in sizes)  # the private copy: never larger than the database


@pytest.mark.parametrize("cut", [0, 1, 8, 27, 28, 100, 511, 512, 516, 4000, 4616, 4619, 4620, 9000, -1])
def test_a_cut_journal_reads_as_sqlite_plays_it(tmp_path: Path, cut: int) -> None:
    bag, db, real = _killed(tmp_path)
    _check(bag, tmp_path, real[:cut])


# --- cases polybag refuses: an error naming the journal (and where) -------------------------------------
@pytest.mark.parametrize(
    ("field", "value", "why"),
    [
        (20, 0, "sector size"),
        (20, 3, "sector size"),
        (20, 1 << 20, "sector size"),
        (24, 100, "page size"),
        (24, 3000, "page size"),
        (24, 1 << 17, "page size"),
        (24, 8192, "page size 8192"),
        (16, 0, "empty"),
    ],
)
def test_a_journal_polybag_does_not_play_is_an_error_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: int, value: int, why: str
) -> None:
    bag, db, real = _killed(tmp_path)
    j = bytearray(real)
    j[field : field + 4] = struct.pack(">I", value)
    ours, said = _check(bag, tmp_path, bytes(j))
    assert ours is None and why in said and "bag_0.db3-journal" in said
    if field != 16:
        assert f"offset {field}" in said
    assert main(["info", str(bag)]) != 0
    out = capsys.readouterr()
    assert "bag_0.db3-journal" in out.err and "Traceback" not in out.out + out.err


def test_a_super_journal_tail_is_refused_and_nothing_is_looked_up(tmp_path: Path) -> None:
    bag, db, real = _killed(tmp_path)
    target = tmp_path / "precious.txt"
    target.write_bytes(b"keep me")
    name = os.fsencode(str(target))
    tail = struct.pack(">I", (1 << 30) // 4096 + 1) + name + struct.pack(">II", len(name), sum(name)) + MAGIC
    ours, said = _check(bag, tmp_path, real + tail)
    assert ours is None and "super-journal" in said and "offset" in said
    assert target.read_bytes() == b"keep me"
    with polybag.open(bag, recover=True) as r:  # recovering: played without the super-journal record
        assert r.summary.message_count == 200
    assert target.read_bytes() == b"keep me"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    cut=st.one_of(st.none(), st.integers(0, 20000)),
    edits=st.lists(st.tuples(st.integers(0, 20000), st.integers(0, 255)), max_size=6),
)
def test_a_mutated_journal_never_escapes(tmp_path_factory: pytest.TempPathFactory, cut: int | None, edits: list[tuple[int, int]]) -> None:
    tmp = tmp_path_factory.mktemp("mj")
    bag, db, real = _killed(tmp)
    data = bytearray(real if cut is None else real[:cut])
    for at, v in edits:
        if at < len(data):
            data[at] = v
    ours, said = _check(bag, tmp, bytes(data))  # SQLite's rollback or a PolybagError, nothing else
    if ours is None:
        assert "bag_0.db3" in said
