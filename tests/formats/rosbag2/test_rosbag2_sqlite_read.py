"""The sqlite3 storage's fast reads: rows checked in one aggregate pass (``messages``) or on
the columns (``topic_payloads``), read in row-id order and sorted by time afterwards; the
same messages and order as rosbags, and every row that is not a message still an error
naming it (after every intact message before it)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rosbag2_helpers import polybag_view, write_rosbags_bag

import polybag
from polybag.errors import FormatError


def _bag(tmp_path: Path, n: int = 40) -> tuple[Path, Path]:
    bag = tmp_path / "bag"
    write_rosbags_bag(bag, n=n)  # written out of time order
    return bag, next(bag.glob("*.db3"))


def _sql(db: Path, *statements: str) -> None:
    with sqlite3.connect(db) as con:
        for s in statements:
            con.execute(s)


def _payloads(bag: Path, topic: str) -> tuple[list[int], list[bytes]]:
    with polybag.open(bag) as r:
        got = r.topic_payloads(topic)
    assert got is not None
    t, blob, starts, sizes = got
    raw = blob.tobytes()
    return t.tolist(), [raw[a : a + n] for a, n in zip(starts.tolist(), sizes.tolist(), strict=True)]


def test_payloads_are_the_messages_in_log_time_order(tmp_path: Path) -> None:
    bag, db = _bag(tmp_path)
    # equal times on one topic: ties stay in row-id order, as messages() gives them
    _sql(db, "UPDATE messages SET timestamp = 1000000500 WHERE id IN (3, 9, 12)")
    view = polybag_view(bag)
    assert [m[2] for m in view] == sorted(m[2] for m in view)
    for topic in ("/chatter", "/imu"):
        times, datas = _payloads(bag, topic)
        assert times == [m[2] for m in view if m[0] == topic]
        assert datas == [m[3] for m in view if m[0] == topic]
        with polybag.open(bag) as r:
            assert [bytes(m.data) for m in r.messages(topics=[topic])] == datas


@pytest.mark.parametrize(
    ("change", "what"),
    [
        ("timestamp = 'soon'", "not a message"),
        ("timestamp = -5", "not a message"),
        ("timestamp = 1.5", "not a message"),
        ("data = NULL", "has no data"),
        ("data = 7", "has no data"),
    ],
)
def test_a_row_that_is_not_a_message_is_named_by_payloads(tmp_path: Path, change: str, what: str) -> None:
    bag, db = _bag(tmp_path)
    _sql(db, "CREATE TABLE m2 AS SELECT * FROM messages", "DROP TABLE messages")
    # the same table without NOT NULL (rosbags declares it; a damaged file need not)
    _sql(
        db,
        "CREATE TABLE messages(id INTEGER PRIMARY KEY, topic_id INTEGER, timestamp INTEGER, data BLOB)",
        "INSERT INTO messages SELECT * FROM m2",
        "DROP TABLE m2",
        "CREATE INDEX timestamp_idx ON messages (timestamp ASC)",
        f"UPDATE messages SET {change} WHERE id = 4",
    )
    with pytest.raises(FormatError, match=what):
        _payloads(bag, "/imu" if 4 % 3 == 1 else "/chatter")
    with pytest.raises(FormatError, match=what), polybag.open(bag) as r:
        for _m in r.messages():
            pass


def test_text_data_reads_as_its_bytes_everywhere(tmp_path: Path) -> None:
    bag, db = _bag(tmp_path)
    _sql(db, "UPDATE messages SET data = 'plain text' WHERE id = 2")  # a /chatter row
    with polybag.open(bag) as r:
        from_messages = [bytes(m.data) for m in r.messages(topics=["/chatter"])]
    assert b"plain text" in from_messages
    assert _payloads(bag, "/chatter")[1] == from_messages


def test_unknown_and_gap_topic_ids_are_errors_after_the_intact_messages(tmp_path: Path) -> None:
    bag, db = _bag(tmp_path)
    real = polybag_view(bag)
    _sql(db, "UPDATE topics SET id = 3 WHERE id = 2", "UPDATE messages SET topic_id = 3 WHERE topic_id = 2")
    assert polybag_view(bag) == real  # ids 1 and 3: a gap is fine
    (t,) = sqlite3.connect(db).execute("SELECT timestamp FROM messages WHERE id = 11").fetchone()
    _sql(db, "UPDATE messages SET topic_id = 2 WHERE id = 11")  # the id in the gap: unknown
    got = []
    with pytest.raises(FormatError, match="topic id 2"), polybag.open(bag) as r:
        for m in r.messages():
            got.append(m.log_time)
    assert got == [m[2] for m in real if m[2] < t]


def test_repeated_reads_of_one_reader_agree(tmp_path: Path) -> None:
    bag, _db = _bag(tmp_path)
    with polybag.open(bag) as r:
        first = [(m.topic, m.log_time, bytes(m.data)) for m in r.messages()]
        second = [(m.topic, m.log_time, bytes(m.data)) for m in r.messages()]
        window = [(m.topic, m.log_time, bytes(m.data)) for m in r.messages(start=first[5][1], end=first[20][1])]
        back = [(m.topic, m.log_time, bytes(m.data)) for m in r.messages(reverse=True)]
    assert first == second and window == first[5:20] and back == first[::-1]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(times=st.lists(st.integers(0, 50), min_size=1, max_size=40))
def test_payloads_sort_any_row_order(tmp_path_factory: pytest.TempPathFactory, times: list[int]) -> None:
    bag = tmp_path_factory.mktemp("b") / "bag"
    with polybag.Writer(bag, format="rosbag2") as w:
        ch = w.add_channel("/t", "cdr", w.add_schema("std_msgs/msg/Empty", "ros2msg", b""))
        for i, t in enumerate(times):
            w.write(ch, i.to_bytes(4, "little"), t)
    got_t, got_d = _payloads(bag, "/t")
    order = np.argsort(np.array(times), kind="stable").tolist()
    assert got_t == [times[i] for i in order]
    assert got_d == [i.to_bytes(4, "little") for i in order]
