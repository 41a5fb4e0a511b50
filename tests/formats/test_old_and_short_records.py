"""Issue 27: old files as their writers left them.

* An MCAP file from before the 1.0 spec: an Attachment Index record of 27 bytes (its fields
  take at least 48) and no Data End record.  Readers stay lenient (missing fields read as
  zero values, as the spec asks), but ``check`` reports every record shorter than its spec
  table, and a data section without its Data End record, with the offset, and exits 1;
  the ``mcap`` library refuses such a file.  No such file is in the corpora (every MCAP
  there is 1.0 or later): the files are built here record by record.
* A ``.db3`` of rosbag2's first sqlite schema (2018): ``topics`` has only id, name and type
  (no ``serialization_format``).  It is read, as ``cdr``, instead of being called damaged.
"""

from __future__ import annotations

import io
import json
import sqlite3
import struct
from pathlib import Path

import pytest
from mcap.exceptions import McapError
from mcap.reader import make_reader

import polybag
from polybag.cli import main
from polybag.errors import FormatError
from polybag.formats.mcap import records as R

CORPORA = Path(__file__).resolve().parents[2].parent / "shared" / "corpora"


def _string_msg(i: int) -> bytes:
    text = f"hello {i}".encode()
    return struct.pack("<I", len(text)) + text  # a ROS 1 std_msgs/String


def _old_mcap(*, data_end: bool, short_index: bool) -> tuple[bytes, int]:
    """A file as a pre-1.0 writer left it: messages and an attachment in the data section,
    an Attachment Index in the summary.  Returns the bytes and the index record's offset."""
    out = bytearray(R.MAGIC + R.encode(R.Header("", "pre-1.0 writer")))
    out += R.encode(R.SchemaRecord(1, "std_msgs/String", "ros1msg", b"string data\n"))
    out += R.encode(R.ChannelRecord(1, 1, "/chatter", "ros1", {}))
    for i in range(3):
        out += R.encode(R.MessageRecord(1, i, (i + 1) * 10**9, (i + 1) * 10**9, _string_msg(i)))
    att_at = len(out)
    out += R.encode(R.AttachmentRecord(5, 0, "notes.txt", "text/plain", b"calibrated"))
    att_len = len(out) - att_at
    if data_end:
        out += R.encode(R.DataEnd(0))
    summary_at = len(out)
    if short_index:  # offset, length and the name: 27 bytes
        out += R.frame(R.Opcode.ATTACHMENT_INDEX, struct.pack("<QQ", att_at, att_len) + b"\x07\0\0\0name.tx")
    else:
        out += R.encode(R.AttachmentIndex(att_at, att_len, 5, 0, 10, "notes.txt", "text/plain"))
    out += R.encode(R.Footer(summary_at, 0, 0)) + R.MAGIC
    return bytes(out), summary_at


def _check(capsys: pytest.CaptureFixture[str], path: Path) -> tuple[int, list[dict[str, object]]]:
    rc = main(["check", "--json", str(path)])
    (res,) = json.loads(capsys.readouterr().out)
    return rc, res["problems"]


def test_check_reports_a_short_attachment_index_and_no_data_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data, index_at = _old_mcap(data_end=False, short_index=True)
    assert data[index_at + 1 : index_at + 9] == struct.pack("<Q", 27)
    path = tmp_path / "old.mcap"
    path.write_bytes(data)

    # the reference refuses it (it reads the short record's missing fields from what follows)
    with pytest.raises(McapError), path.open("rb") as f:
        list(make_reader(f).iter_attachments())

    # polybag reads what is there ...
    with polybag.open(str(path)) as r:
        assert [bytes(m.data) for m in r.messages()] == [_string_msg(i) for i in range(3)]
        assert [(a.name, bytes(a.data)) for a in r.attachments()] == [("notes.txt", b"calibrated")]

    # ... and check names both problems with their offsets
    rc, problems = _check(capsys, path)
    assert rc == 1
    short = [p for p in problems if "AttachmentIndex record is 27 bytes" in str(p["message"])]
    assert len(short) == 1 and short[0]["offset"] == index_at and "at least 48" in str(short[0]["message"])
    missing = [p for p in problems if "no Data End record" in str(p["message"])]
    assert len(missing) == 1 and missing[0]["offset"] == index_at  # where it should have been

    rc = main(["check", str(path)])
    out = capsys.readouterr().out
    assert rc == 1 and "2 problem(s)" in out and f"offset {index_at}: AttachmentIndex record is 27 bytes" in out


def test_check_reports_a_missing_data_end_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The mcap library reads this one; the spec still says the data section ends in Data End."""
    data, index_at = _old_mcap(data_end=False, short_index=False)
    path = tmp_path / "no_data_end.mcap"
    path.write_bytes(data)
    with path.open("rb") as f:
        assert sum(1 for _ in make_reader(f).iter_messages()) == 3
    rc, problems = _check(capsys, path)
    assert rc == 1
    assert [(p["offset"], "no Data End record" in str(p["message"])) for p in problems] == [(index_at, True)]


def test_the_same_file_written_to_the_spec_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data, _ = _old_mcap(data_end=True, short_index=False)
    path = tmp_path / "fixed.mcap"
    path.write_bytes(data)
    with path.open("rb") as f:
        assert [a.name for a in make_reader(f).iter_attachments()] == ["notes.txt"]
    assert _check(capsys, path) == (0, [])


def _chunked_with_short_channel() -> tuple[bytes, int]:
    """A chunk whose Channel record stops before its metadata map (the map's length prefix
    is missing: 4 bytes short); returns the file and the Chunk's offset."""
    ch = R.ChannelRecord(1, 1, "/chatter", "ros1", {}).body()[:-4]
    inner = (
        R.encode(R.SchemaRecord(1, "std_msgs/String", "ros1msg", b"string data\n"))
        + R.frame(R.Opcode.CHANNEL, ch)
        + R.encode(R.MessageRecord(1, 0, 10**9, 10**9, _string_msg(0)))
    )
    out = bytearray(R.MAGIC + R.encode(R.Header("", "test")))
    chunk_at = len(out)
    out += R.encode(R.Chunk(10**9, 10**9, len(inner), 0, "", inner))
    out += R.encode(R.DataEnd(0)) + R.encode(R.Footer(0, 0, 0)) + R.MAGIC
    return bytes(out), chunk_at


def test_check_looks_inside_chunks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data, chunk_at = _chunked_with_short_channel()
    path = tmp_path / "short_channel.mcap"
    path.write_bytes(data)
    with pytest.raises(McapError):  # the reference stops at the short record
        list(make_reader(io.BytesIO(data)).iter_messages())
    with polybag.open(str(path)) as r:  # read leniently: the map is empty
        (m,) = list(r.messages())
        assert m.channel.topic == "/chatter" and dict(m.channel.metadata) == {} and bytes(m.data) == _string_msg(0)
    rc, problems = _check(capsys, path)
    assert rc == 1 and len(problems) == 1
    assert problems[0]["offset"] == chunk_at
    text = str(problems[0]["message"])
    assert "inside the Chunk" in text and "Channel record is 24 bytes, shorter than its fields (they need 28 bytes here)" in text


def test_a_stream_is_checked_too(capsys: pytest.CaptureFixture[str]) -> None:
    """``record_problems`` of a reader over a forward-only stream (spooled first)."""
    data, index_at = _old_mcap(data_end=False, short_index=True)
    with polybag.open(io.BytesIO(data)) as r:
        problems = r.record_problems()
    assert [f"offset {index_at}: AttachmentIndex record is 27" in p for p in problems] == [True, False]
    assert "no Data End record" in problems[1]


def _real_mcaps() -> list[Path]:
    files = sorted((CORPORA / "mcap-samples").rglob("*.mcap"))
    # the padded variants hold records longer than their fields: longer is fine
    files += sorted((CORPORA / "mcap-conformance").rglob("*-pad*.mcap"))[:40]
    return files


def test_real_files_have_no_short_records(capsys: pytest.CaptureFixture[str]) -> None:
    """No false alarm on the MCAP files of other writers (rosbag2, Lichtblick, the
    conformance suite's padded records)."""
    files = _real_mcaps()
    if not files:
        pytest.skip("no MCAP corpus here")
    for path in files:
        with polybag.open(str(path)) as r:
            assert r.record_problems() == [], path
    assert main(["check", *map(str, files[:8])]) == 0
    capsys.readouterr()


# --- the 2018 .db3 -----------------------------------------------------------------------------
def _cdr_string(i: int) -> bytes:
    text = f"hello {i}".encode() + b"\0"
    return b"\0\1\0\0" + struct.pack("<I", len(text)) + text


def _db3_2018(path: Path, *, topics_view: bool = False) -> None:
    """rosbag2's first sqlite schema: no ``serialization_format``, no timestamp index, no
    metadata or schema tables (and no metadata.yaml beside it)."""
    con = sqlite3.connect(path)
    if topics_view:
        con.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT NOT NULL, type TEXT NOT NULL)")
        con.execute("CREATE VIEW topics AS SELECT id, name, type FROM t")
        table = "t"
    else:
        con.execute("CREATE TABLE topics(id INTEGER PRIMARY KEY,name TEXT NOT NULL,type TEXT NOT NULL);")
        table = "topics"
    con.execute(
        "CREATE TABLE messages(id INTEGER PRIMARY KEY,topic_id INTEGER NOT NULL,timestamp INTEGER NOT NULL, data BLOB NOT NULL);"
    )
    con.execute(f"INSERT INTO {table} (name, type) VALUES (?, ?)", ("/chatter", "std_msgs/String"))
    for i in range(3):
        con.execute("INSERT INTO messages (timestamp, topic_id, data) VALUES (?, ?, ?)", ((i + 1) * 10**9, 1, _cdr_string(i)))
    con.commit()
    con.close()


def test_a_2018_db3_reads_as_cdr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rosbags.typesys import Stores, get_typestore

    path = tmp_path / "talker.db3"
    _db3_2018(path)
    with polybag.open(str(path)) as r:
        (ch,) = r.summary.channels.values()
        assert (ch.topic, ch.message_encoding) == ("/chatter", "cdr")
        got = list(r.decoded_messages())
    assert [m.log_time for m, _ in got] == [10**9, 2 * 10**9, 3 * 10**9]
    assert [bytes(m.data) for m, _ in got] == [_cdr_string(i) for i in range(3)]
    # the reference's CDR decoder reads the same payloads as polybag decodes them
    store = get_typestore(Stores.ROS2_HUMBLE)
    ref = [store.deserialize_cdr(bytes(m.data), "std_msgs/msg/String").data for m, _ in got]
    assert [obj.data for _, obj in got] == ref == ["hello 0", "hello 1", "hello 2"]

    assert main(["info", str(path)]) == 0
    assert "/chatter" in capsys.readouterr().out
    assert main(["check", str(path)]) == 0
    assert "OK, 3 messages read" in capsys.readouterr().out


def test_the_plain_table_check_still_holds_for_the_old_schema(tmp_path: Path) -> None:
    path = tmp_path / "view.db3"
    _db3_2018(path, topics_view=True)
    with pytest.raises(FormatError, match="'topics' is a view, not a plain rosbag2 table"):
        polybag.open(str(path)).close()
