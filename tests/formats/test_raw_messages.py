"""``Reader.raw_messages()``: every message as a ``(channel, log_time, data)`` tuple.

It is :meth:`Reader.messages` without a Message object per message (rosbag2 storage read off
the ``.db3`` pages zips the tuples in C), so the tuples must be exactly what ``messages()``
gives, with the same arguments, in the same order, for every format and every way a
format reads (several storage files merged, compressed messages, SQLite instead of the
pages), and a damaged file must give the same intact messages before the same error.
"""

from __future__ import annotations

import shutil
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

import polybag
from polybag.cli import main
from polybag.errors import PolybagError

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent / "rosbag2"))
from rosbag2_helpers import ROSBAG2_CORPUS, write_rosbags_bag  # noqa: E402
from test_reader_protocol import SAMPLES, _Minimal  # noqa: E402

ARGS: list[dict[str, Any]] = [
    {},
    {"reverse": True},
    {"order": "file"},
    {"order": "file", "reverse": True},
    {"topics": "/imu"},
    {"topics": ["/chatter"], "reverse": True},
    {"start": 1_000_005_000, "end": 1_000_020_000},
    {"start": 1_000_005_000, "reverse": True, "order": "file"},
]


def _same(r: Any, **kw: Any) -> int:
    want = [(m.channel, m.log_time, bytes(m.data)) for m in r.messages(**kw)]
    got = list(r.raw_messages(**kw))
    assert all(type(t) is tuple and len(t) == 3 for t in got)
    assert [(c, t, bytes(d)) for c, t, d in got] == want, kw
    assert [c for c, _, _ in got] == [w[0] for w in want]  # the very channel objects
    return len(want)


@pytest.mark.parametrize("sample", list(SAMPLES))
def test_every_format_gives_the_messages_as_tuples(sample: str, tmp_path: Path) -> None:
    _, make = SAMPLES[sample]
    with polybag.open(make(tmp_path)) as r:
        assert _same(r) == r.summary.message_count > 0
        _same(r, reverse=True)
        _same(r, order="file")
        first = next(iter(r.summary.channels.values()))
        _same(r, topics=[first.topic])
        lo, hi = r.summary.start_time, r.summary.end_time
        if lo is not None and hi is not None:
            _same(r, start=(lo + hi) // 2, end=hi)


def test_a_reader_that_overrides_messages_whole_is_served() -> None:
    r = _Minimal()
    assert [(c.topic, t, d) for c, t, d in r.raw_messages()] == [("/x", 1, b"ab")]


@pytest.mark.parametrize(
    ("storage", "compression"),
    [("sqlite3", None), ("sqlite3", "message"), ("sqlite3", "file"), ("mcap", None), ("mcap", "message")],
)
def test_rosbag2_storages_and_compression(storage: str, compression: str | None, tmp_path: Path) -> None:
    p = tmp_path / "bag"
    write_rosbags_bag(p, storage=storage, compression=compression, n=60)
    with polybag.open(p) as r:
        for kw in ARGS:
            _same(r, **kw)


def _two_files(tmp_path: Path) -> Path:
    """One bag of two sqlite3 files (the second one's rows interleaved in time)."""
    a, b = tmp_path / "a", tmp_path / "b"
    write_rosbags_bag(a, n=40)
    write_rosbags_bag(b, n=25)
    out = tmp_path / "two"
    shutil.copytree(a, out)
    shutil.copy(next(b.glob("*.db3")), out / "b_1.db3")
    (out / "metadata.yaml").unlink()
    assert main(["reindex", "-q", str(out)]) == 0
    return out


def test_rosbag2_files_merged_by_time(tmp_path: Path) -> None:
    p = _two_files(tmp_path)
    with polybag.open(p) as r:
        assert len(r._storages) == 2
        assert _same(r) == 65
        for kw in ARGS:
            _same(r, **kw)


def test_corpus_split_bag() -> None:
    bag = ROSBAG2_CORPUS / "wbag"
    if not bag.exists():
        pytest.skip(f"{bag} is not here")
    with polybag.open(bag) as r:
        assert _same(r) == r.summary.message_count > 0
        _same(r, reverse=True)
        _same(r, order="file")


def test_rosbag2_sqlite_path_without_the_pages(tmp_path: Path) -> None:
    """A time window is read through SQLite's timestamp index, the whole table off the
    pages: both give the same tuples as messages()."""
    p = tmp_path / "bag"
    write_rosbags_bag(p, n=50)
    with polybag.open(p) as r:
        st = r._storages[0]
        assert st.db.page_rows(None, None, None, False, "log_time", known=r._local[0]) is not None
        assert st.db.page_rows(None, 1, 2, False, "log_time", known=r._local[0]) is None
        for kw in ARGS:
            _same(r, **kw)


def test_rosbag2_damage_gives_the_same_messages_then_the_same_error(tmp_path: Path) -> None:
    """A row on a topic id the file does not declare: the pages give up before anything is
    given, SQLite reads the file and raises after the rows before it, for both calls."""
    p = tmp_path / "bag"
    write_rosbags_bag(p, n=30)
    db = next(p.glob("*.db3"))
    con = sqlite3.connect(db)
    con.execute("UPDATE messages SET topic_id = 99 WHERE id = 12")
    con.commit()
    con.close()

    def until_error(it: Any) -> tuple[list[tuple[str, int, bytes]], str]:
        got: list[tuple[str, int, bytes]] = []
        try:
            for x in it:
                got.append(x if isinstance(x, tuple) else (x.channel, x.log_time, x.data))
        except PolybagError as e:
            return [(c.topic, t, bytes(d)) for c, t, d in got], type(e).__name__
        return [(c.topic, t, bytes(d)) for c, t, d in got], ""

    for kw in ({}, {"order": "file"}):
        with polybag.open(p) as r:
            a = until_error(r.messages(**kw))
        with polybag.open(p) as r:
            b = until_error(r.raw_messages(**kw))
        assert a == b
        assert a[1] and len(a[0]) >= 1


def test_decoded_messages_pick_each_channels_decoder(tmp_path: Path) -> None:
    """``decoded_messages`` finds each channel's decoder by the channel object: with two
    topics interleaved (String and Imu) and a second reader of the same bag (equal
    channels, other objects), every message decodes as its own codec decodes it."""
    from polybag.codecs import codec_for

    p = tmp_path / "bag"
    write_rosbags_bag(p, n=40)
    for _ in range(2):
        with polybag.open(p) as r:
            pairs = list(r.decoded_messages())
            assert {m.topic for m, _ in pairs} == {"/chatter", "/imu"}
            for m, o in pairs:
                want = codec_for(m.channel).decode(m.data, topic=m.topic)
                assert type(o) is type(want)
                assert (o.data == want.data) if m.topic == "/chatter" else (o.orientation.x == want.orientation.x)
