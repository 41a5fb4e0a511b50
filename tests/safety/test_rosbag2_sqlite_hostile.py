"""Hostile rosbag2 SQLite storage (issue 26): journals, write-ahead logs, schemas, row sizes, sorts.

* A ``.db3`` with a hot ``-journal`` that names a "super-journal": SQLite, rolling the journal
  back, deletes that file wherever it is.  polybag never lets SQLite see a journal or a
  write-ahead log that came with the input (the file is opened ``immutable``); a hot journal is
  played by polybag into a private copy (issue 28; one naming a super-journal is refused by a
  plain read, ``recover`` plays it without reading that record) and a live WAL is replayed by
  SQLite in a copy.  Locally and
  over HTTP (a metadata.yaml listing ``x_0.db3-journal``: journals are never fetched).
* A ``-journal``/``-wal`` that is a symlink, a device or a FIFO is refused, never copied.
* ``messages``/``topics`` that are views, virtual tables or tables with generated columns
  (``data GENERATED ALWAYS AS (zeroblob(200000000))``) are refused; a stored row whose data is
  over ``max_chunk_bytes`` is refused before its blob is fetched.
* Without ``timestamp_idx`` a time window makes SQLite sort: the sort spills to temporary
  files, so peak memory (measured in a child process) does not grow with the table.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import struct
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polybag
from polybag.cli import main
from polybag.errors import FormatError, PolybagError
from polybag.io.compression import ChunkLimitError
from sqlite_bag_helpers import JOURNAL_MAGIC, PAYLOAD, sqlite3_bag


# --- helpers ------------------------------------------------------------------------------------
def _bag(parent: Path, name: str = "bag", n: int = 40) -> tuple[Path, Path]:
    """A sqlite3 rosbag2 bag of ``n`` String messages on /a; (bag dir, its .db3)."""
    return sqlite3_bag(parent, n, name)


def _super_journal(db: Path, target: Path | str) -> bytes:
    """A hot rollback journal for ``db`` (a valid header, no page records) ending in a
    super-journal record that names ``target``: SQLite, rolling it back, deletes ``target``."""
    data = db.read_bytes()
    ps = int.from_bytes(data[16:18], "big")
    header = (JOURNAL_MAGIC + struct.pack(">5I", 0, 0x1234, len(data) // ps, 512, ps)).ljust(512, b"\0")
    name = os.fsencode(str(target))
    record = (
        struct.pack(">I", (1 << 30) // ps + 1) + name + struct.pack(">II", len(name), sum(name)) + JOURNAL_MAGIC
    )
    return header + record


def _sentinel(root: Path) -> tuple[Path, dict[str, bytes]]:
    """A tree outside every bag: its files and their bytes (compared after each attack)."""
    tree = root / "sentinel"
    (tree / "sub").mkdir(parents=True)
    (tree / "precious.txt").write_bytes(b"keep me\n")
    (tree / "sub" / "also.txt").write_bytes(b"and me\n")
    return tree, _snapshot(tree)


def _snapshot(tree: Path) -> dict[str, bytes]:
    return {str(p.relative_to(tree)): p.read_bytes() for p in sorted(tree.rglob("*")) if p.is_file()}


def _cli(*args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out + out.err


def _hot_transaction(db: Path) -> list[tuple[int, int, bytes]]:
    """Leave a real hot journal beside ``db``: a transaction (rows changed, added, deleted, its
    pages spilled into the file) caught mid-way, as a killed writer leaves it; the committed
    rows ``(topic_id, timestamp, data)`` in row-id order."""
    work = db.parent / "work"
    work.mkdir()
    live = work / db.name
    shutil.copyfile(db, live)
    con = sqlite3.connect(live, isolation_level=None)
    committed = con.execute("SELECT topic_id, timestamp, data FROM messages ORDER BY id").fetchall()
    con.execute("PRAGMA journal_mode=DELETE")
    con.execute("PRAGMA cache_size=2")  # a tiny cache: changed pages are written before the commit
    con.execute("BEGIN")
    con.execute("UPDATE messages SET data = zeroblob(3) WHERE id % 3 = 0")
    con.executemany(
        "INSERT INTO messages(topic_id, timestamp, data) VALUES (1, ?, ?)", [(10**6 + i, b"y" * 3000) for i in range(300)]
    )
    con.execute("DELETE FROM messages WHERE id < 10")
    assert (work / (db.name + "-journal")).stat().st_size > 0
    shutil.copyfile(live, db)  # the files as the killed writer left them
    shutil.copyfile(work / (db.name + "-journal"), str(db) + "-journal")
    con.execute("ROLLBACK")
    con.close()
    shutil.rmtree(work)
    return committed


# --- the super-journal attack -------------------------------------------------------------------
@pytest.mark.parametrize("command", ["info", "cat", "check"])
def test_a_super_journal_deletes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str) -> None:
    bag, db = _bag(tmp_path)
    tree, before = _sentinel(tmp_path)
    journal = Path(str(db) + "-journal")
    journal.write_bytes(_super_journal(db, tree / "precious.txt"))
    files = {p.name: p.read_bytes() for p in bag.iterdir()}
    code, out = _cli(command, str(bag), capsys=capsys)
    assert code != 0
    assert "hot rollback journal" in out and journal.name in out and "polybag recover" in out
    assert "unexpected" not in out and "Traceback" not in out
    assert _snapshot(tree) == before  # the file the journal names is still there
    assert {p.name: p.read_bytes() for p in bag.iterdir()} == files  # the input is untouched
    with pytest.raises(FormatError, match="hot rollback journal"):
        polybag.open(bag)


def test_recover_never_follows_the_super_journal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bag, db = _bag(tmp_path)
    tree, before = _sentinel(tmp_path)
    journal = Path(str(db) + "-journal")
    journal.write_bytes(_super_journal(db, tree / "precious.txt"))
    files = {p.name: p.read_bytes() for p in bag.iterdir()}
    code, out = _cli("recover", str(bag), str(tmp_path / "out"), "--format", "rosbag2", capsys=capsys)
    assert "unexpected" not in out
    assert _snapshot(tree) == before
    assert {p.name: p.read_bytes() for p in bag.iterdir()} == files
    with polybag.open(tmp_path / "out") as r:  # the journal had no page records: every message kept
        assert r.summary.message_count == 40
        assert [bytes(m.data) for m in r.messages()] == [PAYLOAD] * 40
    # reindex reads the storage too: the hot journal is damage it refuses (recover rebuilds)
    os.remove(bag / "metadata.yaml")
    code, out = _cli("reindex", str(bag), capsys=capsys)
    assert code != 0 and "journal" in out and "unexpected" not in out
    assert _snapshot(tree) == before
    assert not (bag / "metadata.yaml").exists()


def _serve(root: Path) -> Iterator[tuple[str, list[str]]]:
    """An HTTP server (Range requests honoured) on 127.0.0.1 serving ``root``; its URL and the
    paths requested."""
    from remote.remote_helpers import RangeServer, _Handler

    asked: list[str] = []

    class Recording(_Handler):
        def _serve(self, head: bool) -> None:
            asked.append(self.path)
            super()._serve(head)

    srv = RangeServer(root)
    srv.RequestHandlerClass = Recording
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield srv.url, asked
    finally:
        srv.shutdown()
        srv.server_close()
        t.join()


@pytest.fixture
def http_root(tmp_path: Path) -> Iterator[tuple[Path, str, list[str]]]:
    root = tmp_path / "www"
    root.mkdir()
    for url, asked in _serve(root):
        yield root, url, asked


@pytest.mark.parametrize("listed", [True, False])
def test_a_super_journal_over_http_deletes_nothing(
    tmp_path: Path, http_root: tuple[Path, str, list[str]], capsys: pytest.CaptureFixture[str], listed: bool
) -> None:
    root, url, asked = http_root
    bag, db = _bag(root, "x", n=25)
    db = db.rename(bag / "x_0.db3")
    tree, before = _sentinel(tmp_path)
    (bag / "x_0.db3-journal").write_bytes(_super_journal(db, tree / "precious.txt"))
    doc = yaml.safe_load((bag / "metadata.yaml").read_text())
    info = doc["rosbag2_bagfile_information"]
    info["relative_file_paths"] = ["x_0.db3", "x_0.db3-journal"] if listed else ["x_0.db3"]
    info["files"] = [dict(info["files"][0], path="x_0.db3")]
    (bag / "metadata.yaml").write_text(yaml.safe_dump(doc))
    code, out = _cli("info", f"{url}/x/", capsys=capsys)
    assert _snapshot(tree) == before
    assert not any("journal" in p for p in asked)  # a journal is never fetched
    assert "unexpected" not in out
    if listed:
        assert code != 0 and "x_0.db3-journal" in out and "not a storage file" in out
    else:  # the journal beside it on the server is not the bag's: the bag reads
        assert code == 0 and "25" in out


# --- journals and logs that are not regular files, and those that are not damage -------------------
@pytest.mark.parametrize("suffix", ["-journal", "-wal"])
@pytest.mark.parametrize("kind", ["dev-zero", "symlink-outside", "fifo", "directory"])
def test_a_side_file_that_is_not_a_regular_file_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], suffix: str, kind: str
) -> None:
    bag, db = _bag(tmp_path)
    tree, before = _sentinel(tmp_path)
    side = Path(str(db) + suffix)
    if kind == "dev-zero":
        side.symlink_to("/dev/zero")
    elif kind == "symlink-outside":
        side.symlink_to(tree / "precious.txt")
    elif kind == "fifo":
        os.mkfifo(side)
    else:
        side.mkdir()
    tmp = tmp_path / "private-tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    code, out = _cli("info", str(bag), capsys=capsys)
    assert code != 0 and "not a regular file" in out and side.name in out
    code, out = _cli("recover", str(bag), str(tmp_path / "out"), "--format", "rosbag2", capsys=capsys)
    assert "unexpected" not in out
    with polybag.open(tmp_path / "out") as r:  # recovering: the side file is noted and ignored
        assert r.summary.message_count == 40
    assert _snapshot(tree) == before
    assert sum(p.stat().st_size for p in tmp.rglob("*") if p.is_file()) == 0  # nothing copied
    assert os.path.lexists(side)


@pytest.mark.parametrize(
    ("suffix", "content"),
    [
        ("-journal", b""),  # TRUNCATE mode, or a finished transaction
        ("-journal", bytes(512) + b"stale pages"),  # PERSIST mode: the header zeroed
        ("-wal", b""),  # an empty write-ahead log
        ("-wal", b"\x37\x7f\x06\x82" + bytes(28)),  # a WAL beside a database not in WAL mode
        ("-shm", b"\xff" * 32768),  # never read
    ],
)
def test_side_files_that_are_not_damage_are_ignored(tmp_path: Path, suffix: str, content: bytes) -> None:
    bag, db = _bag(tmp_path)
    side = Path(str(db) + suffix)
    side.write_bytes(content)
    before = db.read_bytes()
    with polybag.open(bag) as r:
        assert [bytes(m.data) for m in r.messages()] == [PAYLOAD] * 40
        assert r.summary.message_count == 40
    assert db.read_bytes() == before and side.read_bytes() == content


# --- a real interrupted transaction: rolled back in a copy, by a read and by recover ----------------
def test_a_real_hot_journal_is_rolled_back_in_a_copy_by_recover(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bag, db = _bag(tmp_path, n=400)
    committed = _hot_transaction(db)
    files = {p.name: p.read_bytes() for p in bag.iterdir() if p.is_file()}
    with pytest.warns(UserWarning, match="rolled back an unfinished transaction"):  # issue 28: read, not refused
        with polybag.open(bag) as r:
            assert [(m.log_time, bytes(m.data)) for m in r.messages()] == [(ts, data) for _, ts, data in committed]
    code, out = _cli("recover", str(bag), str(tmp_path / "out"), "--format", "rosbag2", capsys=capsys)
    assert "rolled back in a copy" in out and "unexpected" not in out
    with polybag.open(tmp_path / "out") as r:
        got = [(m.log_time, bytes(m.data)) for m in r.messages()]
    assert got == [(ts, data) for _, ts, data in committed]  # exactly the committed rows
    assert {p.name: p.read_bytes() for p in bag.iterdir() if p.is_file()} == files


def test_the_rollback_is_what_sqlite_itself_restores(tmp_path: Path) -> None:
    """The journal player against SQLite's own rollback of the same (trusted) files."""
    from polybag.formats.rosbag2.sqlite_files import roll_back

    bag, db = _bag(tmp_path, n=400)
    _hot_transaction(db)
    theirs, ours = tmp_path / "theirs", tmp_path / "ours"
    for d in (theirs, ours):
        d.mkdir()
        shutil.copyfile(db, d / "x.db3")
        shutil.copyfile(str(db) + "-journal", d / "x.db3-journal")
    sqlite3.connect(theirs / "x.db3").execute("SELECT COUNT(*) FROM messages").fetchall()  # rolls back
    pages, _ = roll_back(str(ours / "x.db3-journal"), str(ours / "x.db3"))
    assert pages > 0
    assert (ours / "x.db3").read_bytes() == (theirs / "x.db3").read_bytes()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.one_of(st.none(), st.integers(0, 20000)), flips=st.lists(st.integers(0, 20000), max_size=4))
def test_a_damaged_journal_never_escapes(tmp_path_factory: pytest.TempPathFactory, cut: int | None, flips: list[int]) -> None:
    tmp = tmp_path_factory.mktemp("dj")
    bag, db = _bag(tmp, n=200)
    committed = _hot_transaction(db)
    j = Path(str(db) + "-journal")
    whole = j.read_bytes()
    data = bytearray(whole if cut is None else whole[: max(1, cut)])
    for f in flips:
        if f < len(data):
            data[f] ^= 0x5A
    j.write_bytes(bytes(data))
    try:
        with polybag.open(bag, recover=True) as r:
            rows = [bytes(m.data) for m in r.messages()]
    except PolybagError:
        return
    if bytes(data) == whole:  # the journal intact: exactly the committed rows
        assert rows == [d for _, _, d in committed]


# --- write-ahead logs --------------------------------------------------------------------------------
def _live_wal(db: Path, extra: int) -> None:
    """Put ``db`` in WAL mode and leave ``extra`` committed rows in its ``-wal`` (not
    checkpointed), as a killed writer using WAL leaves it."""
    work = db.parent / "walwork"
    work.mkdir()
    live = work / db.name
    shutil.copyfile(db, live)
    con = sqlite3.connect(live, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA wal_autocheckpoint=0")
    con.executemany("INSERT INTO messages(topic_id, timestamp, data) VALUES (1, ?, ?)", [(5000 + i, PAYLOAD) for i in range(extra)])
    shutil.copyfile(live, db)
    shutil.copyfile(str(live) + "-wal", str(db) + "-wal")
    con.close()
    shutil.rmtree(work)


def test_a_live_wal_is_replayed_in_a_copy_and_by_recover(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bag, db = _bag(tmp_path)
    _live_wal(db, 15)
    files = {p.name: p.read_bytes() for p in bag.iterdir()}
    code, out = _cli("info", str(bag), capsys=capsys)  # issue 28: read as SQLite would, never refused
    assert code == 0 and "replayed the committed transactions" in out and "-wal" in out
    code, out = _cli("recover", str(bag), str(tmp_path / "out"), "--format", "rosbag2", capsys=capsys)
    assert "replayed in a copy" in out
    with polybag.open(tmp_path / "out") as r:
        assert r.summary.message_count == 55  # the 15 rows only in the log are kept
    assert {p.name: p.read_bytes() for p in bag.iterdir()} == files  # no checkpoint into the input
    assert not Path(str(db) + "-shm").exists()


# --- schemas that are not rosbag2's ---------------------------------------------------------------------
def _rebuild(db: Path, *sql: str) -> None:
    con = sqlite3.connect(db, isolation_level=None)
    for q in sql:
        con.execute(q)
    con.close()


GENERATED = (
    "DROP INDEX IF EXISTS timestamp_idx",
    "ALTER TABLE messages RENAME TO m0",
    "CREATE TABLE messages(id INTEGER PRIMARY KEY, topic_id INTEGER NOT NULL, timestamp INTEGER NOT NULL,"
    " data BLOB GENERATED ALWAYS AS (zeroblob(200000000)))",
    "INSERT INTO messages(id, topic_id, timestamp) SELECT id, topic_id, timestamp FROM m0",
    "DROP TABLE m0",
    "VACUUM",
)


@pytest.mark.parametrize(
    ("sql", "match"),
    [
        (GENERATED, "generated"),
        (
            (
                "ALTER TABLE messages RENAME TO m0",
                "CREATE VIEW messages AS SELECT id, topic_id, timestamp, zeroblob(200000000) AS data FROM m0",
            ),
            "a view",
        ),
        (
            (
                "ALTER TABLE topics RENAME TO t0",
                "CREATE TABLE topics(id INTEGER PRIMARY KEY, name TEXT, type TEXT, serialization_format TEXT,"
                " offered_qos_profiles TEXT GENERATED ALWAYS AS (printf('%.*c', 200000000, 'x')),"
                " type_description_hash TEXT)",
                "INSERT INTO topics(id, name, type, serialization_format, type_description_hash)"
                " SELECT id, name, type, serialization_format, '' FROM t0",
                "DROP TABLE t0",
            ),
            "generated",
        ),
        (
            (
                "ALTER TABLE messages RENAME TO m0",
                "CREATE VIRTUAL TABLE messages USING fts5(topic_id, timestamp, data)",
            ),
            "virtual table",
        ),
    ],
)
@pytest.mark.parametrize("command", ["cat", "check", "convert", "export", "info"])
def test_a_table_that_is_not_rosbag2s_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], sql: tuple[str, ...], match: str, command: str
) -> None:
    bag, db = _bag(tmp_path)
    _rebuild(db, *sql)
    args = {
        "cat": ["cat", str(bag)],
        "check": ["check", str(bag)],
        "convert": ["convert", str(bag), str(tmp_path / "o.mcap")],
        "export": ["export", str(bag), "-o", str(tmp_path / "exp")],
        "info": ["info", str(bag)],
    }[command]
    code, out = _cli(*args, capsys=capsys)
    assert code != 0 and match in out and db.name in out
    assert "unexpected" not in out and "MemoryError" not in out
    with pytest.raises(FormatError, match=match):
        with polybag.open(bag) as r:
            list(r.messages())


def test_the_16kb_generated_bomb_costs_no_memory(tmp_path: Path) -> None:
    """Peak memory of reading the bomb, in a child process (SQLite's allocations are not
    Python's): well under the 200 MB one row would take."""
    bag, db = _bag(tmp_path)
    _rebuild(db, *GENERATED)
    assert db.stat().st_size < 64 << 10
    got = _child_peak(
        f"""
import polybag
from polybag.errors import PolybagError
try:
    with polybag.open({str(bag)!r}) as r:
        for m in r.messages():
            pass
    print("read")
except PolybagError as e:
    print("refused", e)
"""
    )
    assert got["out"].startswith("refused") and "generated" in got["out"]
    assert got["peak_delta_mb"] < 40


def test_old_rosbag2_schemas_still_open(tmp_path: Path) -> None:
    """The tables of every rosbag2 sqlite schema (no QoS column; no type hash; no NOT NULL)."""
    for i, topics in enumerate(
        [
            "id INTEGER PRIMARY KEY, name TEXT NOT NULL, type TEXT NOT NULL, serialization_format TEXT NOT NULL",
            "id INTEGER PRIMARY KEY,name TEXT NOT NULL,type TEXT NOT NULL,serialization_format TEXT NOT NULL,"
            "offered_qos_profiles TEXT NOT NULL",
            "id INTEGER PRIMARY KEY, name TEXT, type TEXT, serialization_format TEXT, offered_qos_profiles TEXT,"
            " type_description_hash TEXT",
        ]
    ):
        db = tmp_path / f"old{i}.db3"
        con = sqlite3.connect(db)
        con.execute(f"CREATE TABLE topics({topics})")
        con.execute("CREATE TABLE messages(id INTEGER PRIMARY KEY, topic_id INTEGER, timestamp INTEGER, data BLOB)")
        con.execute("CREATE INDEX timestamp_idx ON messages (timestamp ASC)")
        ncol = topics.count(",") + 1
        con.execute(f"INSERT INTO topics VALUES (1, '/a', 'std_msgs/msg/String', 'cdr'{', ?' * (ncol - 4)})", [""] * (ncol - 4))
        con.executemany("INSERT INTO messages(topic_id, timestamp, data) VALUES (1, ?, ?)", [(t, PAYLOAD) for t in (3, 1, 2)])
        con.commit()
        con.close()
        with polybag.open(db) as r:
            assert [m.log_time for m in r.messages()] == [1, 2, 3]


# --- rows over max_chunk_bytes -------------------------------------------------------------------------------
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(0, 300_000), min_size=1, max_size=6), cap=st.integers(1_000, 250_000), window=st.booleans())
def test_a_row_over_max_chunk_bytes_is_refused_before_it_is_fetched(
    tmp_path_factory: pytest.TempPathFactory, sizes: list[int], cap: int, window: bool
) -> None:
    tmp = tmp_path_factory.mktemp("cap")
    bag = tmp / "b"
    with polybag.Writer(str(bag), format="rosbag2", storage="sqlite3") as w:
        s = w.add_schema("std_msgs/msg/String", "ros2msg", b"string data\n")
        ch = w.add_channel("/a", "cdr", s)
        for i, n in enumerate(sizes):
            w.write(ch, bytes([i % 256]) * n, log_time=10 + i)
    kw: dict[str, Any] = {"start": 0, "end": 1 << 40} if window else {}
    over = [n for n in sizes if n > cap]
    for read in ("messages", "columns"):
        try:
            with polybag.open(bag, max_chunk_bytes=cap) as r:
                if read == "messages":
                    got = [len(m.data) for m in r.messages(**kw)]
                else:
                    got = [int(n) for n in r.topic_payloads("/a")[3]]
        except ChunkLimitError as e:
            assert over, e
            assert str(max(over)) in str(e) or any(str(n) in str(e) for n in over)
            assert "max_chunk" in str(e) or "--max-chunk" in str(e)
            continue
        assert not over and got == sizes


# --- sorting without timestamp_idx ------------------------------------------------------------------------
def _child_peak(body: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``body`` in a fresh interpreter; its output, its peak resident memory (VmHWM)
    minus its resident memory before ``body`` ran, and the bytes it wrote (``wchar``: temporary
    files included), in MB."""
    script = f"""
import json, sys, io, contextlib
import polybag, polybag.formats.rosbag2.sqlite_files as S, polybag.formats.rosbag2.pages, numpy
def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
def written():
    for line in open("/proc/self/io"):
        if line.startswith("wchar:"):
            return int(line.split()[1])
base = rss()
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # reset the high-water mark to what is resident now
out = io.StringIO()
w0 = written()
with contextlib.redirect_stdout(out):
{chr(10).join('    ' + line for line in body.strip().splitlines())}
print(json.dumps({{"out": out.getvalue(), "peak_delta_mb": hwm() - base, "written_mb": (written() - w0) / 1e6}}))
"""
    res = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env={**os.environ, **(env or {})}, check=False
    )
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _unindexed(path: Path, rows: int, size: int) -> None:
    con = sqlite3.connect(path)
    con.execute(
        "CREATE TABLE topics(id INTEGER PRIMARY KEY, name TEXT NOT NULL, type TEXT NOT NULL,"
        " serialization_format TEXT NOT NULL, offered_qos_profiles TEXT NOT NULL)"
    )
    con.execute("INSERT INTO topics VALUES (1, '/a', 'std_msgs/msg/String', 'cdr', '')")
    con.execute("CREATE TABLE messages(id INTEGER PRIMARY KEY, topic_id INTEGER NOT NULL, timestamp INTEGER NOT NULL, data BLOB NOT NULL)")
    blob = PAYLOAD + b"x" * (size - len(PAYLOAD))
    con.executemany("INSERT INTO messages(topic_id, timestamp, data) VALUES (1, ?, ?)", ((rows - i, blob) for i in range(rows)))
    con.commit()
    con.close()


@pytest.mark.parametrize(("rows", "size"), [(60_000, 1_500), (400_000, 100)])
def test_a_time_window_without_timestamp_idx_sorts_in_bounded_memory(tmp_path: Path, rows: int, size: int) -> None:
    """The same read of a small and a 50-90 MB table without ``timestamp_idx`` (rows in
    reverse time order): only the keys are sorted (spilled past a 2 MiB cache here), so the
    peak grows by far less than the table, and so does the temporary disk."""
    small, big = tmp_path / "small.db3", tmp_path / "big.db3"
    _unindexed(small, 2_000, size)
    _unindexed(big, rows, size)
    assert big.stat().st_size > 40 << 20
    peaks = {}
    for db in (small, big):
        got = _child_peak(
            f"""
S.SORT_CACHE_KIB = 2048
S._MMAP = 0  # the file read through SQLite's cache, not mapped (mapped pages count as resident)
n = last = 0
with polybag.open({str(db)!r}) as r:
    for m in r.messages(start=1, end=1 << 40):
        assert m.log_time >= last
        last = m.log_time
        n += 1
    k = 0
    for m in r.messages(start=1, reverse=True):
        k += 1
        if k == 1000:
            break
print(n + k)
""",
            env={"TMPDIR": str(tmp_path)},
        )
        peaks[db.name] = got["peak_delta_mb"]
        assert int(got["out"]) == (2_000 if db is small else rows) + 1_000  # every row, then the last 1,000
        assert got["written_mb"] < 0.25 * db.stat().st_size / 1e6 + 1  # keys, not rows, on disk
    assert peaks["big.db3"] - peaks["small.db3"] < 30, peaks
