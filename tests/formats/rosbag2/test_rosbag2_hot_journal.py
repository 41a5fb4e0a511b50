"""A rosbag2 sqlite3 recording killed during a commit (issue 28): read as SQLite would after
rolling the journal back, without writing anything.

The writers here are real processes killed with SIGKILL in the middle of a transaction
(``journal_mode=DELETE``, a tiny page cache so changed pages reach the file before the
commit, as a large batch does): the ``.db3`` is torn and a hot ``-journal`` lies beside it.
What polybag reads is compared with what SQLite itself gives after rolling back a *copy* of
the same files; the input files stay byte-for-byte as the killed writer left them.
"""

from __future__ import annotations

import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

import polybag
from polybag.cli import main
from polybag.errors import FormatError, PolybagWarning
from polybag.formats.rosbag2.sqlite_journal import read_journal, restore_into
from sqlite_bag_helpers import sqlite3_bag, sqlite_rows

# the transaction the writer is killed in: rows changed, added (large ones, overflow pages) and deleted
_TRANSACTION = """
con.execute("BEGIN")
con.execute("UPDATE messages SET data = zeroblob(3) WHERE id % 3 = 0")
con.executemany("INSERT INTO messages(topic_id, timestamp, data) VALUES (1, ?, ?)", [(10**6 + i, b"y" * 3000) for i in range(300)])
con.execute("DELETE FROM messages WHERE id < 10")
"""


def _bag(parent: Path, n: int = 400) -> tuple[Path, Path]:
    return sqlite3_bag(parent, n)


def _writer(db: Path, *, cache: int, then: str, sync: str = "FULL") -> str:
    """The source of a writer process: the transaction on ``db`` with a page cache of
    ``cache`` pages and ``synchronous=sync`` (OFF, as rosbag2's default storage settings:
    the journal header then says "records to the end of the file"), then ``then`` (kill
    itself, or wait)."""
    return textwrap.dedent(f"""
        import os, signal, sqlite3, sys
        con = sqlite3.connect({str(db)!r}, isolation_level=None)
        con.execute("PRAGMA journal_mode=DELETE")
        con.execute("PRAGMA cache_size={cache}")
        con.execute("PRAGMA synchronous={sync}")
    """) + textwrap.dedent(_TRANSACTION) + then


def _killed_mid_commit(db: Path, sync: str = "FULL") -> None:
    """Run the transaction on ``db`` in a writer process that SIGKILLs itself before it commits."""
    r = subprocess.run([sys.executable, "-c", _writer(db, cache=2, then="os.kill(os.getpid(), signal.SIGKILL)\n", sync=sync)], timeout=120)
    assert r.returncode == -signal.SIGKILL
    journal = Path(str(db) + "-journal")
    assert journal.stat().st_size > 0 and journal.read_bytes()[0] != 0  # hot, as SQLite defines it


def _sqlite_after_rollback(bag: Path, scratch: Path) -> list[tuple[int, bytes]]:
    """What SQLite gives after rolling back a copy of the bag's files (SQLite writes the copy)."""
    copy = scratch / "sqlite-copy"
    shutil.copytree(bag, copy)
    (db,) = copy.glob("*.db3")
    rows = sqlite_rows(db)
    assert not Path(str(db) + "-journal").exists()  # SQLite rolled back (and deleted the journal)
    return rows


def _files(bag: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(bag.iterdir())}


@pytest.mark.parametrize("sync", ["FULL", "OFF"])
def test_a_killed_writers_bag_reads_as_sqlite_rolls_it_back(tmp_path: Path, sync: str) -> None:
    bag, db = _bag(tmp_path)
    with polybag.open(bag) as r:
        committed = [(m.log_time, bytes(m.data)) for m in r.messages()]
    _killed_mid_commit(db, sync)
    files = _files(bag)
    theirs = _sqlite_after_rollback(bag, tmp_path)
    assert theirs == committed  # the oracle: the transaction is gone
    with pytest.warns(PolybagWarning, match=r"rolled back an unfinished transaction from bag_0\.db3-journal, [1-9]\d* pages"):
        with polybag.open(bag) as r:
            assert r.summary.message_count == len(committed)
            ours = [(m.log_time, bytes(m.data)) for m in r.messages()]
            window = [(m.log_time, bytes(m.data)) for m in r.messages(start=1_100, end=1_200)]  # through SQLite's index
    assert window == [(t, d) for t, d in committed if 1_100 <= t < 1_200] and window
    assert ours == theirs
    assert _files(bag) == files  # nothing written: the torn database and its journal are as they were


def test_the_cli_reads_it_with_a_warning_and_recover_completes_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bag, db = _bag(tmp_path)
    _killed_mid_commit(db)
    files = _files(bag)
    theirs = _sqlite_after_rollback(bag, tmp_path)
    assert main(["info", str(bag)]) == 0
    out = capsys.readouterr()
    assert "rolled back an unfinished transaction" in out.err and "Traceback" not in out.out + out.err
    assert main(["recover", str(bag), str(tmp_path / "fixed"), "--format", "rosbag2"]) in (0, 1)
    capsys.readouterr()
    with polybag.open(tmp_path / "fixed") as r:
        assert [(m.log_time, bytes(m.data)) for m in r.messages()] == theirs
    assert not list((tmp_path / "fixed").glob("*-journal"))
    assert _files(bag) == files


def test_the_rolled_back_file_is_byte_for_byte_sqlites(tmp_path: Path) -> None:
    bag, db = _bag(tmp_path)
    _killed_mid_commit(db)
    theirs = tmp_path / "theirs.db3"
    shutil.copyfile(db, theirs)
    shutil.copyfile(str(db) + "-journal", str(theirs) + "-journal")
    sqlite3.connect(theirs).execute("SELECT count(*) FROM messages").fetchall()  # SQLite rolls its copy back
    ps = int.from_bytes(db.read_bytes()[16:18], "big")
    with open(str(db) + "-journal", "rb") as j, open(tmp_path / "ours.db3", "xb") as out:
        plan = read_journal(j, str(db) + "-journal", ps)
        assert plan.orig_pages and plan.pages and not plan.notes
        restore_into(plan, j, str(db), out)
    assert (tmp_path / "ours.db3").read_bytes() == theirs.read_bytes()


def _live_writer(db: Path, cache: int) -> subprocess.Popen[str]:
    """A writer process left inside its transaction (it waits for a line on stdin); with
    ``synchronous=OFF`` its journal header is written whole at once (hot-looking)."""
    p = subprocess.Popen(
        [sys.executable, "-c", _writer(db, cache=cache, then="print('in', flush=True)\nsys.stdin.readline()\n", sync="OFF")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert p.stdout is not None
    assert p.stdout.readline().strip() == "in"
    return p


def test_a_journal_whose_writer_is_still_at_work_is_not_rolled_back(tmp_path: Path) -> None:
    """SQLite: a journal is hot only when no process holds the database's RESERVED lock.  A
    writer inside its transaction (nothing spilled yet) leaves the file as last committed:
    read as it is; a writer writing the file itself (EXCLUSIVE) is refused: read it later."""
    bag, db = _bag(tmp_path)
    with polybag.open(bag) as r:
        committed = [(m.log_time, bytes(m.data)) for m in r.messages()]
    p = _live_writer(db, cache=100_000)  # everything stays in its cache: only RESERVED held
    try:
        assert Path(str(db) + "-journal").read_bytes()[:1] == b"\xd9"  # a journal header: hot but for the lock
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            with polybag.open(bag) as r:
                assert [(m.log_time, bytes(m.data)) for m in r.messages()] == committed
        assert any("another process is writing it" in str(w.message) for w in got)
    finally:
        p.communicate("\n", timeout=60)
    (tmp_path / "second").mkdir()
    bag2, db2 = _bag(tmp_path / "second")
    p = _live_writer(db2, cache=2)  # pages spilled into the file: EXCLUSIVE held
    try:
        with pytest.raises(FormatError, match="being written by another process right now"):
            with polybag.open(bag2) as r:
                list(r.messages())
    finally:
        p.communicate("\n", timeout=60)


def test_a_killed_wal_writer_is_replayed_in_a_copy(tmp_path: Path) -> None:
    """rosbag2's "resilient" storage preset records in WAL mode: a killed writer leaves a
    ``-wal`` with committed transactions not yet in the database; they are read (SQLite
    replays the log in a private copy), the input untouched."""
    bag, db = _bag(tmp_path, n=50)
    code = textwrap.dedent(f"""
        import os, signal, sqlite3
        con = sqlite3.connect({str(db)!r}, isolation_level=None)
        assert con.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
        con.execute("PRAGMA wal_autocheckpoint=0")
        for k in range(5):
            con.execute("BEGIN")
            con.executemany("INSERT INTO messages(topic_id, timestamp, data) VALUES (1, ?, ?)", [(5000 + 10 * k + i, b"w" * 100) for i in range(10)])
            con.execute("COMMIT")
        con.execute("BEGIN")
        con.execute("INSERT INTO messages(topic_id, timestamp, data) VALUES (1, 9999, x'00')")  # never committed
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    assert subprocess.run([sys.executable, "-c", code], timeout=120).returncode == -signal.SIGKILL
    assert Path(str(db) + "-wal").stat().st_size > 0
    files = _files(bag)
    theirs = _sqlite_after_wal(bag, tmp_path)
    assert len(theirs) == 100
    with pytest.warns(PolybagWarning, match=r"replayed the committed transactions in bag_0\.db3-wal"):
        with polybag.open(bag) as r:
            assert [(m.log_time, bytes(m.data)) for m in r.messages()] == theirs
    assert _files(bag) == files


def _sqlite_after_wal(bag: Path, scratch: Path) -> list[tuple[int, bytes]]:
    copy = scratch / "wal-copy"
    shutil.copytree(bag, copy)
    (db,) = copy.glob("*.db3")
    rows = sqlite_rows(db)
    return rows


def test_polybags_own_sqlite3_writer_killed_mid_batch(tmp_path: Path) -> None:
    """The writer ``record --ros2 --storage sqlite3`` uses, killed inside a batch: a batch
    (8 MB) is larger than SQLite's page cache (2 MB), so its pages spill into the file before
    the commit and a hot journal is left.  The kill is placed (a progress handler SIGKILLs the
    process as soon as the journal is hot) so the test does not depend on timing.  The bag
    (``bag.active/``, as the killed recorder leaves it) reads as SQLite's rollback gives it:
    the first batch, every message whole; ``recover`` completes it."""
    code = textwrap.dedent(f"""
        import os, signal, polybag
        w = polybag.Writer({str(tmp_path / "bag")!r}, format="rosbag2", storage="sqlite3")
        ch = w.add_channel("/big", "cdr", w.add_schema("std_msgs/msg/String", "ros2msg", b"string data\\n"))
        def payload(i):
            return b"\\x00\\x01\\x00\\x00" + (20_000).to_bytes(4, "little") + bytes([65 + i % 26]) * 19_999 + b"\\x00"
        for i in range(420):  # the first batch (8 MB): committed
            w.write(ch, payload(i), 1_000 + i)
        journal = w._db.path + "-journal"
        def hot():
            try:
                with open(journal, "rb") as f:
                    if f.read(1) not in (b"", b"\\x00"):
                        os.kill(os.getpid(), signal.SIGKILL)
            except FileNotFoundError:
                pass
            return 0
        w._db.conn.set_progress_handler(hot, 200)
        for i in range(420, 900):  # the second batch: killed while it is written
            w.write(ch, payload(i), 1_000 + i)
        print("never killed", flush=True)
    """)
    r = subprocess.run([sys.executable, "-c", code], timeout=300, capture_output=True, text=True)
    assert r.returncode == -signal.SIGKILL, r.stdout + r.stderr
    bag = tmp_path / "bag.active"
    (db,) = bag.glob("*.db3")
    assert Path(str(db) + "-journal").read_bytes()[:1] not in (b"", b"\x00")
    files = _files(bag)
    theirs = _sqlite_after_rollback(bag, tmp_path)
    assert 0 < len(theirs) < 900 and [t for t, _ in theirs] == list(range(1_000, 1_000 + len(theirs)))
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        with polybag.open(bag) as rd:
            ours = [(m.log_time, bytes(m.data)) for m in rd.messages()]
    assert ours == theirs
    assert any("rolled back an unfinished transaction" in str(w.message) for w in got), [str(w.message) for w in got]
    assert _files(bag) == files
    assert main(["recover", str(bag), str(tmp_path / "fixed"), "--format", "rosbag2"]) in (0, 1)
    with polybag.open(tmp_path / "fixed") as rd:
        assert [(m.log_time, bytes(m.data)) for m in rd.messages()] == theirs
